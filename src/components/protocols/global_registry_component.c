/* GlobalRegistry: federation membership and discovery, the adapters of the client state
 * machine (registry_client.h) and the lease table (registry_table.h) to a node.
 *
 * GlobalRegistryClient — Protocol, domain ai.bytesandbrains.protocol.global_registry, so
 *   the graph's slotless Announce op (bb_rec_announce) resolves to it.
 *   Config: retry_ms=5000 (how soon an unanswered first Announce is repeated),
 *           registry=<slot> (see "one artifact" below; none by default)
 *   Announce(server_peer): sends this peer's id and addresses to the server, at most once
 *   per heartbeat interval; the server's Handshake reply gives the TTL and interval and
 *   the server's addresses (added to the address book), and from then on a timer
 *   re-announces every interval (the heartbeat). server_peer is a peer id value, or an
 *   int64 tensor holding a test identity (bb_peer_id_from_u64), which is what a
 *   bootstrap `constant` records. A peer never announces to itself (the server's node
 *   runs the same bootstrap when clients and server share one artifact).
 *
 * GlobalRegistryServer — PeerSelector and Protocol (same domain).
 *   Config: ttl_ms=90000 (a peer's registration lives this long after its last Announce;
 *           clients heartbeat every ttl/3), registry=discovery (see below),
 *           min_view=0 (CurrentView gives nothing, so nothing downstream runs, while
 *           fewer peers are live: a server's rounds wait for a quorum to be present)
 *   Announce registers or refreshes the announcing peer (expiry now + ttl), adds its
 *   addresses to the address book and replies Handshake. Expired peers are evicted
 *   lazily, at the start of every read. Sample(n): n distinct live peers drawn with the
 *   node's seeded generator from the entries in peer-id order (never hash order), so a
 *   seed gives the same draws; CurrentView: every live peer. On a node that checks join
 *   tokens only peers whose token admits them are registered (an Announce from anyone
 *   else is refused and counted in global_registry.refused_unadmitted), and a member
 *   whose token has expired is left out of Sample and CurrentView until it presents a
 *   new one.
 *
 * Messages travel as control-plane fills, which address the receiving component by the
 * FNV-1a-32 of its SLOT NAME: clients and server must bind the registry under the same
 * slot name (the examples use "discovery"). A server bound twice — as PeerSelector
 * "view" and as Protocol "discovery" — is two instances; the one that is not bound at
 * `registry` reads the entries of the GlobalRegistryServer bound there, so both see one
 * membership.
 *
 * One artifact for clients and server: the compiler binds a slot to one type in every
 * partition, so there "discovery" is a GlobalRegistryClient everywhere and the server half
 * is a GlobalRegistryServer at another slot (e.g. the PeerSelector "view"); the client's
 * `registry=view` hands the Announces that reach it to that server instance, whose
 * Handshake then leaves from "discovery" and reaches the clients' "discovery".
 * Payload layouts: docs/WIRE.md, "GlobalRegistry messages". */
#include <string.h>

#include "bb/roles.h"
#include "components/admitted.h"
#include "components/protocols/registry_client.h"
#include "components/protocols/registry_table.h"
#include "components/shipped.h"
#include "bb/common.h"
#include "util/mem.h"

#define SLOT_TEXT_MAX 64

/* The addresses this node announces: what its address book holds for itself, else the
 * bare /p2p/<self> every transport of this runtime routes by. */
static size_t local_addresses(bb_ctx *ctx, bb_address *out) {
  size_t n = 0;
  const bb_address *known = bb_ctx_addresses_of(ctx, bb_ctx_self(ctx), &n);
  if (n > BBI_REGISTRY_MAX_ADDRS) n = BBI_REGISTRY_MAX_ADDRS;
  if (n) {
    memcpy(out, known, n * sizeof *out);
    return n;
  }
  *out = bb_address_p2p(bb_ctx_self(ctx));
  return 1;
}

static int add_addresses(bb_ctx *ctx, const bb_peer_id *peer, const bb_address *a, size_t n, bb_error *err) {
  for (size_t i = 0; i < n; i++) {
    int rc = bb_ctx_add_address(ctx, peer, &a[i], err);
    if (rc) return rc;
  }
  return 0;
}

/* ---- client ---------------------------------------------------------------------------- */

typedef struct client {
  const bb_allocator *alloc;
  char registry[SLOT_TEXT_MAX]; /* a GlobalRegistryServer slot serving Announces, or "" */
  bbi_registry_client state;
} client;

static int client_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const KEYS[] = {"retry_ms", "registry", NULL};
  uint64_t retry_ms;
  char registry[SLOT_TEXT_MAX];
  int rc = bb_config_check(init->config, KEYS, err);
  if (!rc) rc = bb_config_u64(init->config, "retry_ms", 5000, &retry_ms, err);
  if (!rc) rc = bb_config_str(init->config, "registry", "", registry, sizeof registry, err);
  if (rc) return bb_error_prefix(err, "GlobalRegistryClient: ");
  if (!retry_ms || retry_ms > UINT64_MAX / 1000000ull)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "GlobalRegistryClient: retry_ms=%llu is not in 1..%llu",
                        (unsigned long long)retry_ms, (unsigned long long)(UINT64_MAX / 1000000ull));
  client *c = bbi_mem_alloc(init->alloc, sizeof *c);
  if (!c) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  c->alloc = init->alloc;
  memcpy(c->registry, registry, sizeof registry);
  bbi_registry_client_init(&c->state, retry_ms * 1000000ull);
  *self = c;
  return 0;
}

static void client_destroy(void *self) {
  client *c = self;
  bbi_mem_free(c->alloc, c);
}

static int arm(client *c, bb_ctx *ctx, uint64_t at, bb_error *err) {
  return bb_ctx_set_timer(ctx, at, bbi_registry_client_new_timer(&c->state), err);
}

/* A bootstrap records the address-book insert of the server and the Announce side by
 * side, so either may run first: without an address yet, the Announce waits one poll (a
 * timer at now) before it goes out anyway. */
static int send_announce(client *c, bb_ctx *ctx, bb_error *err) {
  size_t known = 0;
  bb_ctx_addresses_of(ctx, &c->state.server, &known);
  if (bbi_registry_client_wait_for_address(&c->state, known != 0)) return arm(c, ctx, bb_ctx_now(ctx), err);
  bbi_registry_announce m;
  m.peer = *bb_ctx_self(ctx);
  m.n_addrs = local_addresses(ctx, m.addrs);
  uint8_t buf[BBI_REGISTRY_MESSAGE_MAX];
  size_t len = bbi_registry_announce_encode(&m, buf, sizeof buf);
  if (len > sizeof buf)
    return bb_error_set(err, BB_ERR_LIMIT, "GlobalRegistryClient: Announce over %zu bytes", sizeof buf);
  int rc = bb_ctx_send_message(ctx, &c->state.server, "Announce", buf, len, err);
  if (rc) return bb_error_prefix(err, "GlobalRegistryClient Announce: ");
  uint64_t again = bbi_registry_client_announced(&c->state, bb_ctx_now(ctx));
  bb_ctx_count(ctx, "global_registry.announces", 1);
  return arm(c, ctx, again, err);
}

static int server_peer_input(const bb_op_call *call, bb_peer_id *out, bb_error *err) {
  const bb_val *v = call->n_inputs ? call->inputs[0] : NULL;
  const bb_peer_id *peers = bb_val_as_peers(v);
  if (peers && bb_val_count(v)) {
    *out = peers[0];
    return 0;
  }
  const bb_tensor *t = bb_val_as_tensor(v);
  if (t && t->dtype == BB_DTYPE_INT64 && t->numel == 1) {
    int64_t id = *(const int64_t *)bb_tensor_data(t);
    if (id >= 0) {
      *out = bb_peer_id_from_u64((uint64_t)id);
      return 0;
    }
  }
  return bb_error_set(err, BB_ERR_TYPE, "GlobalRegistryClient Announce: input 0 (server_peer) must be a peer id "
                                        "or a one-element non-negative int64 tensor, got %s",
                      v ? bb_val_kind_name((int)bb_val_kind_of(v)) : "nothing");
}

static int client_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  client *c = self;
  if (strcmp(call->op_type, "Announce") != 0)
    return bb_error_set(err, BB_ERR_UNSUPPORTED, "GlobalRegistryClient has no op `%s` (only Announce)", call->op_type);
  bb_peer_id server;
  int rc = server_peer_input(call, &server, err);
  if (rc) return rc;
  if (bb_peer_id_equal(&server, bb_ctx_self(ctx))) { /* the server itself: nothing to join */
    bb_ctx_count(ctx, "global_registry.self_announce_skipped", 1);
    return 0;
  }
  if (bbi_registry_client_target(&c->state, &server, bb_ctx_now(ctx))) {
    if ((rc = send_announce(c, ctx, err))) return rc;
  } else {
    bb_ctx_count(ctx, "global_registry.announces_throttled", 1);
  }
  if (call->n_outputs && !(call->outputs[0] = bb_val_trigger(bb_ctx_allocator(ctx))))
    return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  return 0;
}

static int server_message(void *self, bb_ctx *ctx, const char *op, const bb_peer_id *from, const uint8_t *payload,
                          size_t len, bb_error *err);

static int client_message(void *self, bb_ctx *ctx, const char *op, const bb_peer_id *from, const uint8_t *payload,
                          size_t len, bb_error *err) {
  client *c = self;
  if (strcmp(op, "Announce") == 0 && c->registry[0]) {
    const bb_component_type *type = NULL;
    void *registry = bb_ctx_dependency(ctx, c->registry, &type);
    if (!registry || type != &BBI_GLOBAL_REGISTRY_SERVER)
      return bb_error_set(err, BB_ERR_NOT_FOUND, "GlobalRegistryClient: registry=%s is not a GlobalRegistryServer slot",
                          c->registry);
    return server_message(registry, ctx, op, from, payload, len, err);
  }
  if (strcmp(op, "Handshake") != 0)
    return bb_error_set(err, BB_ERR_UNSUPPORTED, "GlobalRegistryClient: unknown message `%s`", op);
  bbi_registry_handshake h;
  int rc = bbi_registry_client_check_handshake(&c->state, from, payload, len, &h, err);
  if (!rc) rc = add_addresses(ctx, from, h.addrs, h.n_addrs, err);
  if (rc) return rc;
  uint64_t heartbeat_at;
  bool first = bbi_registry_client_apply_handshake(&c->state, &h, &heartbeat_at);
  bb_ctx_count(ctx, "global_registry.handshakes", 1);
  /* the first Handshake replaces the retry timer with the heartbeat */
  return first ? arm(c, ctx, heartbeat_at, err) : 0;
}

static int client_timer(void *self, bb_ctx *ctx, uint64_t token, bb_error *err) {
  client *c = self;
  if (!bbi_registry_client_timer_due(&c->state, token)) return 0; /* superseded */
  return send_announce(c, ctx, err);
}

static int client_save(const void *self, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  const client *c = self;
  uint8_t buf[BBI_REGISTRY_CLIENT_STATE_MAX];
  size_t n = bbi_registry_client_save(&c->state, buf, sizeof buf);
  if (!(*out = bbi_mem_alloc(alloc, n))) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  memcpy(*out, buf, n);
  *len = n;
  return 0;
}

static int client_load(void *self, const uint8_t *data, size_t len, bb_error *err) {
  client *c = self;
  return bbi_registry_client_load(&c->state, data, len, err);
}

/* ---- server ---------------------------------------------------------------------------- */

typedef struct server {
  const bb_allocator *alloc;
  char registry[SLOT_TEXT_MAX]; /* the slot whose instance holds the membership */
  uint64_t min_view;            /* CurrentView gives nothing below this many live peers */
  bbi_registry_table table;
} server;

static int server_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const KEYS[] = {"ttl_ms", "registry", "min_view", NULL};
  uint64_t ttl_ms, min_view;
  char registry[SLOT_TEXT_MAX];
  int rc = bb_config_check(init->config, KEYS, err);
  if (!rc) rc = bb_config_u64(init->config, "ttl_ms", 90000, &ttl_ms, err);
  if (!rc) rc = bb_config_str(init->config, "registry", "discovery", registry, sizeof registry, err);
  if (!rc) rc = bb_config_u64(init->config, "min_view", 0, &min_view, err);
  if (rc) return bb_error_prefix(err, "GlobalRegistryServer: ");
  if (min_view > BBI_REGISTRY_MAX_MEMBERS)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "GlobalRegistryServer: min_view=%llu is above the %d members it holds",
                        (unsigned long long)min_view, BBI_REGISTRY_MAX_MEMBERS);
  if (ttl_ms < 3 || ttl_ms > UINT64_MAX / 2000000ull)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "GlobalRegistryServer: ttl_ms=%llu out of range",
                        (unsigned long long)ttl_ms);
  server *s = bbi_mem_alloc(init->alloc, sizeof *s);
  if (!s) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  s->alloc = init->alloc;
  s->min_view = min_view;
  memcpy(s->registry, registry, sizeof registry);
  bbi_registry_table_init(&s->table, ttl_ms * 1000000ull);
  *self = s;
  return 0;
}

static void server_destroy(void *self) {
  server *s = self;
  bbi_mem_free(s->alloc, s);
}

/* The table that holds the membership: the one bound at `registry`, if that is a
 * GlobalRegistryServer, else this one's. */
static bbi_registry_table *membership(server *s, bb_ctx *ctx) {
  if (strcmp(bb_ctx_slot(ctx), s->registry) == 0) return &s->table;
  const bb_component_type *type = NULL;
  server *other = bb_ctx_dependency(ctx, s->registry, &type);
  return other && type == &BBI_GLOBAL_REGISTRY_SERVER ? &other->table : &s->table;
}

/* Also reached through a GlobalRegistryClient's registry= (ctx is then the client's). */
static int server_message(void *self, bb_ctx *ctx, const char *op, const bb_peer_id *from, const uint8_t *payload,
                          size_t len, bb_error *err) {
  server *s = self;
  if (strcmp(op, "Announce") != 0)
    return bb_error_set(err, BB_ERR_UNSUPPORTED, "GlobalRegistryServer: unknown message `%s`", op);
  bbi_registry_announce a;
  int rc = bbi_registry_announce_decode(payload, len, &a, err);
  if (rc) return rc;
  if (!bb_peer_id_equal(&a.peer, from))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "Announce: a peer may only announce itself");
  if (!bbi_peer_takes_part(ctx, from)) { /* checked before anything is registered */
    bb_ctx_count(ctx, "global_registry.refused_unadmitted", 1);
    char who[128];
    bb_peer_id_to_text(from, who, sizeof who);
    return bb_error_set(err, BB_ERR_DENIED, "GlobalRegistryServer: an Announce from peer %s, which holds no valid join token",
                        who);
  }
  uint64_t now = bb_ctx_now(ctx);
  bbi_registry_table_evict(&s->table, now);
  bool is_new;
  if ((rc = bbi_registry_table_register(&s->table, &a.peer, now, &is_new, err)) ||
      (rc = add_addresses(ctx, &a.peer, a.addrs, a.n_addrs, err)))
    return rc;
  bb_ctx_count(ctx, is_new ? "global_registry.joined" : "global_registry.refreshed", 1);

  bbi_registry_handshake h;
  h.ttl_ns = s->table.ttl_ns;
  h.heartbeat_ns = bbi_registry_table_heartbeat_ns(&s->table);
  h.n_addrs = local_addresses(ctx, h.addrs);
  uint8_t buf[BBI_REGISTRY_MESSAGE_MAX];
  size_t hlen = bbi_registry_handshake_encode(&h, buf, sizeof buf);
  if (hlen > sizeof buf)
    return bb_error_set(err, BB_ERR_LIMIT, "GlobalRegistryServer: Handshake over %zu bytes", sizeof buf);
  rc = bb_ctx_send_message(ctx, from, "Handshake", buf, hlen, err);
  return rc ? bb_error_prefix(err, "GlobalRegistryServer Handshake: ") : 0;
}

static uint64_t ctx_random(void *ctx) { return bb_ctx_random(ctx); }

static bool takes_part(void *ctx, const bb_peer_id *peer) { return bbi_peer_takes_part(ctx, peer); }

static int server_sample(void *self, bb_ctx *ctx, size_t n, bb_val **peers, bb_error *err) {
  bbi_registry_table *t = membership(self, ctx);
  bbi_registry_table_evict(t, bb_ctx_now(ctx));
  const bb_allocator *alloc = bb_ctx_allocator(ctx);
  size_t *idx = bbi_mem_calloc(alloc, 2 * t->n + 1, sizeof *idx);
  bb_peer_id *picked = bbi_mem_calloc(alloc, (n < t->n ? n : t->n) + 1, sizeof *picked);
  if (idx && picked) {
    bbi_draw_source rng = {ctx_random, ctx};
    size_t k = bbi_registry_table_sample(t, &rng, takes_part, ctx, n, idx, picked);
    *peers = bb_val_peers(alloc, picked, k);
  }
  const bool made = idx && picked && *peers;
  bbi_mem_free(alloc, idx);
  bbi_mem_free(alloc, picked);
  return made ? 0 : bb_error_set(err, BB_ERR_NOMEM, "out of memory");
}

static int server_view(void *self, bb_ctx *ctx, bb_val **peers, bb_error *err) {
  bbi_registry_table *t = membership(self, ctx);
  bbi_registry_table_evict(t, bb_ctx_now(ctx));
  const bb_allocator *alloc = bb_ctx_allocator(ctx);
  bb_peer_id *all = bbi_mem_calloc(alloc, t->n + 1, sizeof *all);
  if (!all) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  size_t live = 0;
  for (size_t i = 0; i < t->n; i++)
    if (bbi_peer_takes_part(ctx, &t->members[i].peer)) all[live++] = t->members[i].peer;
  const server *s = self;
  if (live < s->min_view) { /* too few present: no view, and nothing downstream runs */
    bbi_mem_free(alloc, all);
    *peers = NULL;
    return 0;
  }
  *peers = bb_val_peers(alloc, all, live);
  bbi_mem_free(alloc, all);
  return *peers ? 0 : bb_error_set(err, BB_ERR_NOMEM, "out of memory");
}

static const bb_peer_selector_ops SERVER_OPS = {server_sample, server_view};

static int server_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  if (call->role != BB_ROLE_PEER_SELECTOR)
    return bb_error_set(err, BB_ERR_UNSUPPORTED,
                        "GlobalRegistryServer has no graph op `%s` outside PeerSelector (Announce is a client op)",
                        call->op_type);
  return bb_peer_selector_dispatch(&SERVER_OPS, self, ctx, call, err);
}

static int server_save(const void *self, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  const server *s = self;
  size_t cap = bbi_registry_table_save_size(&s->table);
  uint8_t *buf = bbi_mem_alloc(alloc, cap);
  if (!buf) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  *len = bbi_registry_table_save(&s->table, buf, cap);
  *out = buf;
  return 0;
}

static int server_load(void *self, const uint8_t *data, size_t len, bb_error *err) {
  server *s = self;
  return bbi_registry_table_load(&s->table, data, len, s->alloc, err);
}

const bb_component_type BBI_GLOBAL_REGISTRY_CLIENT = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "GlobalRegistryClient",
    .roles = 1u << BB_ROLE_PROTOCOL,
    .protocol_domain = BB_DOMAIN_GLOBAL_REGISTRY,
    .create = client_create,
    .destroy = client_destroy,
    .invoke = client_invoke,
    .on_message = client_message,
    .on_timer = client_timer,
    .save = client_save,
    .load = client_load,
};
const bb_component_type BBI_GLOBAL_REGISTRY_SERVER = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "GlobalRegistryServer",
    .roles = (1u << BB_ROLE_PEER_SELECTOR) | (1u << BB_ROLE_PROTOCOL),
    .protocol_domain = BB_DOMAIN_GLOBAL_REGISTRY,
    .create = server_create,
    .destroy = server_destroy,
    .invoke = server_invoke,
    .on_message = server_message,
    .save = server_save,
    .load = server_load,
};
