/* GlobalRegistry (roles.md §4.2): federation membership and discovery, the intended flow.
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
 *           clients heartbeat every ttl/3), registry=discovery (see below)
 *   Announce registers or refreshes the announcing peer (expiry now + ttl), adds its
 *   addresses to the address book and replies Handshake. Expired peers are evicted
 *   lazily, at the start of every read. Sample(n): n distinct live peers drawn with the
 *   node's seeded generator from the entries in peer-id order (never hash order), so a
 *   seed gives the same draws; CurrentView: every live peer.
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
#include "components/shipped.h"
#include "util/error.h"

#define WIRE_VERSION 1
#define MAX_MEMBERS 1024
#define MAX_ANNOUNCED_ADDRS 8
#define MAX_MESSAGE (2 + 16 + BB_PEER_ID_MAX + 1 + MAX_ANNOUNCED_ADDRS * (2 + 512))
#define SLOT_TEXT_MAX 64

/* ---- payload codec ------------------------------------------------------------------------ */

typedef struct writer {
  uint8_t *buf;
  size_t len, cap;
} writer;

static void put(writer *w, const void *p, size_t n) {
  if (w->len + n <= w->cap) memcpy(w->buf + w->len, p, n);
  w->len += n;
}
static void put_u8(writer *w, uint8_t v) { put(w, &v, 1); }
static void put_u64(writer *w, uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
  put(w, b, 8);
}
static void put_peer(writer *w, const bb_peer_id *p) {
  put_u8(w, p->len);
  put(w, p->bytes, p->len);
}
static void put_addresses(writer *w, const bb_address *a, size_t n) {
  put_u8(w, (uint8_t)n);
  for (size_t i = 0; i < n; i++) {
    uint8_t b[512];
    size_t len = bb_address_to_bytes(&a[i], b, sizeof b);
    put_u8(w, (uint8_t)len);
    put_u8(w, (uint8_t)(len >> 8));
    put(w, b, len);
  }
}

typedef struct reader {
  const uint8_t *p;
  size_t len, at;
  const char *what; /* the message, for errors */
  bb_error *err;
} reader;

static int truncated(reader *r, const char *field) {
  return bb_error_set(r->err, BB_ERR_MALFORMED, "%s: truncated at byte %zu (reading %s, %zu bytes in all)", r->what,
                      r->at, field, r->len);
}
static int get_u8(reader *r, const char *field, uint8_t *out) {
  if (r->at + 1 > r->len) return truncated(r, field);
  *out = r->p[r->at++];
  return 0;
}
static int get_u64(reader *r, const char *field, uint64_t *out) {
  if (r->len - r->at < 8) return truncated(r, field);
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | r->p[r->at + (size_t)i];
  r->at += 8;
  *out = v;
  return 0;
}
static int get_peer(reader *r, bb_peer_id *out) {
  uint8_t n = 0;
  int rc = get_u8(r, "the peer id length", &n);
  if (rc) return rc;
  if (r->len - r->at < n) return truncated(r, "the peer id");
  if ((rc = bb_peer_id_from_bytes(r->p + r->at, n, out, r->err)))
    return bb_error_prefix(r->err, "%s: peer id at byte %zu: ", r->what, r->at);
  r->at += n;
  return 0;
}
static int get_addresses(reader *r, bb_address *out, size_t *n, bool need_one) {
  uint8_t count = 0;
  int rc = get_u8(r, "the address count", &count);
  if (rc) return rc;
  if (count > MAX_ANNOUNCED_ADDRS || (need_one && !count))
    return bb_error_set(r->err, BB_ERR_MALFORMED, "%s: byte %zu: %u addresses (need %d to %d)", r->what, r->at - 1,
                        count, need_one ? 1 : 0, MAX_ANNOUNCED_ADDRS);
  for (size_t i = 0; i < count; i++) {
    uint8_t lo = 0, hi = 0;
    if ((rc = get_u8(r, "an address length", &lo)) || (rc = get_u8(r, "an address length", &hi))) return rc;
    size_t len = (size_t)lo | (size_t)hi << 8;
    if (r->len - r->at < len) return truncated(r, "an address");
    if ((rc = bb_address_from_bytes(r->p + r->at, len, &out[i], r->err)))
      return bb_error_prefix(r->err, "%s: address %zu at byte %zu: ", r->what, i, r->at);
    r->at += len;
  }
  *n = count;
  return 0;
}
static int get_header(reader *r) {
  uint8_t v = 0;
  int rc = get_u8(r, "the version", &v);
  if (rc) return rc;
  if (v != WIRE_VERSION)
    return bb_error_set(r->err, BB_ERR_MALFORMED, "%s: version %u at byte 0 (expected %d)", r->what, v, WIRE_VERSION);
  return 0;
}
static int get_end(reader *r) {
  if (r->at != r->len)
    return bb_error_set(r->err, BB_ERR_MALFORMED, "%s: %zu trailing bytes after byte %zu", r->what, r->len - r->at,
                        r->at);
  return 0;
}

/* The addresses this node announces: what its address book holds for itself, else the
 * bare /p2p/<self> every transport of this runtime routes by. */
static size_t local_addresses(bb_ctx *ctx, bb_address *out) {
  size_t n = 0;
  const bb_address *known = bb_ctx_addresses_of(ctx, bb_ctx_self(ctx), &n);
  if (n > MAX_ANNOUNCED_ADDRS) n = MAX_ANNOUNCED_ADDRS;
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

static int peer_order(const bb_peer_id *a, const bb_peer_id *b) {
  if (a->len != b->len) return a->len < b->len ? -1 : 1;
  return memcmp(a->bytes, b->bytes, a->len);
}

static void *zalloc(const bb_allocator *alloc, size_t size) {
  void *p = alloc->malloc(size, alloc->user_data);
  if (p) memset(p, 0, size);
  return p;
}

/* ---- client ---------------------------------------------------------------------------- */

typedef struct client {
  const bb_allocator *alloc;
  uint64_t retry_ns;
  char registry[SLOT_TEXT_MAX]; /* a GlobalRegistryServer slot serving Announces, or "" */
  bool has_server;
  bb_peer_id server;
  uint64_t ttl_ns, interval_ns; /* from the last Handshake; 0 before the first */
  uint64_t last_announce_ns;    /* not saved: a restored client announces at once */
  bool announced;
  uint64_t timer_gen; /* only the newest timer counts (timers cannot be cancelled) */
  bool awaiting_address; /* an Announce waits one poll for the server's address */
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
  client *c = zalloc(init->alloc, sizeof *c);
  if (!c) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  c->alloc = init->alloc;
  c->retry_ns = retry_ms * 1000000ull;
  memcpy(c->registry, registry, sizeof registry);
  *self = c;
  return 0;
}

static void client_destroy(void *self) {
  client *c = self;
  c->alloc->free(c, c->alloc->user_data);
}

static int arm(client *c, bb_ctx *ctx, uint64_t at, bb_error *err) {
  return bb_ctx_set_timer(ctx, at, ++c->timer_gen, err);
}

/* Payload: version, announcing peer, its addresses. A bootstrap records the address-book
 * insert of the server and the Announce side by side, so either may run first: without
 * an address yet, the Announce waits one poll (a timer at now) before it gives up. */
static int send_announce(client *c, bb_ctx *ctx, bb_error *err) {
  size_t known = 0;
  bb_ctx_addresses_of(ctx, &c->server, &known);
  if (!known && !c->awaiting_address) {
    c->awaiting_address = true;
    return arm(c, ctx, bb_ctx_now(ctx), err);
  }
  c->awaiting_address = false;
  bb_address addrs[MAX_ANNOUNCED_ADDRS];
  size_t n = local_addresses(ctx, addrs);
  uint8_t buf[MAX_MESSAGE];
  writer w = {buf, 0, sizeof buf};
  put_u8(&w, WIRE_VERSION);
  put_peer(&w, bb_ctx_self(ctx));
  put_addresses(&w, addrs, n);
  if (w.len > w.cap) return bb_error_set(err, BB_ERR_LIMIT, "GlobalRegistryClient: Announce over %zu bytes", w.cap);
  int rc = bb_ctx_send_message(ctx, &c->server, "Announce", buf, w.len, err);
  if (rc) return bb_error_prefix(err, "GlobalRegistryClient Announce: ");
  c->last_announce_ns = bb_ctx_now(ctx);
  c->announced = true;
  bb_ctx_count(ctx, "global_registry.announces", 1);
  /* until a Handshake says the interval, an unanswered Announce is repeated */
  return arm(c, ctx, bb_ctx_now(ctx) + (c->interval_ns ? c->interval_ns : c->retry_ns), err);
}

static int server_peer_input(const bb_op_call *call, bb_peer_id *out, bb_error *err) {
  const bb_val *v = call->n_inputs ? call->inputs[0] : NULL;
  if (v && (v->kind == BB_VAL_PEER || v->kind == BB_VAL_PEERS) && v->n) {
    *out = v->as.peers[0];
    return 0;
  }
  if (v && v->kind == BB_VAL_TENSOR && v->as.tensor->dtype == BB_DTYPE_INT64 && v->as.tensor->numel == 1) {
    int64_t id = *(const int64_t *)bb_tensor_data(v->as.tensor);
    if (id >= 0) {
      *out = bb_peer_id_from_u64((uint64_t)id);
      return 0;
    }
  }
  return bb_error_set(err, BB_ERR_TYPE, "GlobalRegistryClient Announce: input 0 (server_peer) must be a peer id "
                                        "or a one-element non-negative int64 tensor, got %s",
                      v ? bb_val_kind_name((int)v->kind) : "nothing");
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
  bool same = c->has_server && bb_peer_id_equal(&server, &c->server);
  uint64_t now = bb_ctx_now(ctx);
  bool throttled = same && c->announced && c->interval_ns && now - c->last_announce_ns < c->interval_ns;
  if (!throttled) {
    c->server = server;
    c->has_server = true;
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

/* Handshake payload: version, u64 ttl_ns, u64 heartbeat_ns, the server's addresses. */
static int client_message(void *self, bb_ctx *ctx, const char *op, const bb_peer_id *from, const uint8_t *payload,
                          size_t len, bb_error *err) {
  client *c = self;
  if (strcmp(op, "Announce") == 0 && c->registry[0]) {
    const bb_component_type *type = NULL;
    void *registry = bb_ctx_dependency(ctx, c->registry, &type);
    if (!registry || type != &BB_GLOBAL_REGISTRY_SERVER)
      return bb_error_set(err, BB_ERR_NOT_FOUND, "GlobalRegistryClient: registry=%s is not a GlobalRegistryServer slot",
                          c->registry);
    return server_message(registry, ctx, op, from, payload, len, err);
  }
  if (strcmp(op, "Handshake") != 0)
    return bb_error_set(err, BB_ERR_UNSUPPORTED, "GlobalRegistryClient: unknown message `%s`", op);
  if (!c->has_server || !bb_peer_id_equal(from, &c->server))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "GlobalRegistryClient: Handshake from a peer it did not announce to");
  reader r = {payload, len, 0, "Handshake", err};
  uint64_t ttl = 0, interval = 0;
  bb_address addrs[MAX_ANNOUNCED_ADDRS];
  size_t n = 0;
  int rc = get_header(&r);
  if (!rc) rc = get_u64(&r, "ttl_ns", &ttl);
  if (!rc) rc = get_u64(&r, "heartbeat_ns", &interval);
  if (!rc) rc = get_addresses(&r, addrs, &n, false);
  if (!rc) rc = get_end(&r);
  if (rc) return rc;
  if (!interval || interval > ttl)
    return bb_error_set(err, BB_ERR_MALFORMED, "Handshake: heartbeat %llu ns must be in (0, ttl %llu ns]",
                        (unsigned long long)interval, (unsigned long long)ttl);
  if ((rc = add_addresses(ctx, from, addrs, n, err))) return rc;
  bool first = !c->interval_ns;
  c->ttl_ns = ttl;
  c->interval_ns = interval;
  bb_ctx_count(ctx, "global_registry.handshakes", 1);
  /* the first Handshake replaces the retry timer with the heartbeat */
  return first ? arm(c, ctx, c->last_announce_ns + interval, err) : 0;
}

static int client_timer(void *self, bb_ctx *ctx, uint64_t token, bb_error *err) {
  client *c = self;
  if (token != c->timer_gen || !c->has_server) return 0; /* superseded */
  return send_announce(c, ctx, err);
}

/* Snapshot: version, has_server, server peer (if any), u64 ttl_ns, u64 interval_ns,
 * u64 timer_gen — the node's snapshot keeps the pending heartbeat timer with its token, so
 * the restored client must know that token is its newest (snapshots written before
 * timer_gen was saved end after interval_ns and restore with 0). */
static int client_save(const void *self, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  const client *c = self;
  uint8_t buf[3 + BB_PEER_ID_MAX + 24];
  writer w = {buf, 0, sizeof buf};
  put_u8(&w, WIRE_VERSION);
  put_u8(&w, c->has_server);
  if (c->has_server) put_peer(&w, &c->server);
  put_u64(&w, c->ttl_ns);
  put_u64(&w, c->interval_ns);
  put_u64(&w, c->timer_gen);
  if (!(*out = alloc->malloc(w.len, alloc->user_data))) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  memcpy(*out, buf, w.len);
  *len = w.len;
  return 0;
}

static int client_load(void *self, const uint8_t *data, size_t len, bb_error *err) {
  client *c = self;
  reader r = {data, len, 0, "GlobalRegistryClient snapshot", err};
  uint8_t has = 0;
  bb_peer_id server = {0};
  uint64_t ttl = 0, interval = 0, timer_gen = 0;
  int rc = get_header(&r);
  if (!rc) rc = get_u8(&r, "has_server", &has);
  if (!rc && has > 1) rc = bb_error_set(err, BB_ERR_MALFORMED, "GlobalRegistryClient snapshot: has_server %u", has);
  if (!rc && has) rc = get_peer(&r, &server);
  if (!rc) rc = get_u64(&r, "ttl_ns", &ttl);
  if (!rc) rc = get_u64(&r, "interval_ns", &interval);
  if (!rc && r.at < r.len) rc = get_u64(&r, "timer_gen", &timer_gen);
  if (!rc) rc = get_end(&r);
  if (rc) return rc;
  c->timer_gen = timer_gen;
  c->has_server = has;
  c->server = server;
  c->ttl_ns = ttl;
  c->interval_ns = interval;
  c->announced = false;
  return 0;
}

/* ---- server ---------------------------------------------------------------------------- */

typedef struct member {
  bb_peer_id peer;
  uint64_t expires_ns;
} member;

typedef struct server {
  const bb_allocator *alloc;
  uint64_t ttl_ns;
  char registry[SLOT_TEXT_MAX]; /* the slot whose instance holds the membership */
  member members[MAX_MEMBERS];  /* sorted by peer id */
  size_t n;
} server;

static int server_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const KEYS[] = {"ttl_ms", "registry", NULL};
  uint64_t ttl_ms;
  char registry[SLOT_TEXT_MAX];
  int rc = bb_config_check(init->config, KEYS, err);
  if (!rc) rc = bb_config_u64(init->config, "ttl_ms", 90000, &ttl_ms, err);
  if (!rc) rc = bb_config_str(init->config, "registry", "discovery", registry, sizeof registry, err);
  if (rc) return bb_error_prefix(err, "GlobalRegistryServer: ");
  if (ttl_ms < 3 || ttl_ms > UINT64_MAX / 2000000ull)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "GlobalRegistryServer: ttl_ms=%llu out of range",
                        (unsigned long long)ttl_ms);
  server *s = zalloc(init->alloc, sizeof *s);
  if (!s) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  s->alloc = init->alloc;
  s->ttl_ns = ttl_ms * 1000000ull;
  memcpy(s->registry, registry, sizeof registry);
  *self = s;
  return 0;
}

static void server_destroy(void *self) {
  server *s = self;
  s->alloc->free(s, s->alloc->user_data);
}

/* The instance that holds the membership: the one bound at `registry`, if that is a
 * GlobalRegistryServer, else this one. */
static server *membership(server *s, bb_ctx *ctx) {
  if (strcmp(bb_ctx_slot(ctx), s->registry) == 0) return s;
  const bb_component_type *type = NULL;
  void *other = bb_ctx_dependency(ctx, s->registry, &type);
  return other && type == &BB_GLOBAL_REGISTRY_SERVER ? other : s;
}

static void evict(server *s, uint64_t now) {
  size_t kept = 0;
  for (size_t i = 0; i < s->n; i++)
    if (now < s->members[i].expires_ns) s->members[kept++] = s->members[i];
  s->n = kept;
}

static int server_register(server *s, const bb_peer_id *peer, uint64_t expires, bool *is_new, bb_error *err) {
  size_t lo = 0, hi = s->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (peer_order(&s->members[mid].peer, peer) < 0) lo = mid + 1;
    else hi = mid;
  }
  *is_new = !(lo < s->n && bb_peer_id_equal(&s->members[lo].peer, peer));
  if (*is_new) {
    if (s->n == MAX_MEMBERS)
      return bb_error_set(err, BB_ERR_LIMIT, "GlobalRegistryServer: registry full (%d peers)", MAX_MEMBERS);
    memmove(&s->members[lo + 1], &s->members[lo], (s->n - lo) * sizeof *s->members);
    s->members[lo].peer = *peer;
    s->n++;
  }
  s->members[lo].expires_ns = expires;
  return 0;
}

/* Also reached through a GlobalRegistryClient's registry= (ctx is then the client's). */
static int server_message(void *self, bb_ctx *ctx, const char *op, const bb_peer_id *from, const uint8_t *payload,
                          size_t len, bb_error *err) {
  server *s = self;
  if (strcmp(op, "Announce") != 0)
    return bb_error_set(err, BB_ERR_UNSUPPORTED, "GlobalRegistryServer: unknown message `%s`", op);
  reader r = {payload, len, 0, "Announce", err};
  bb_peer_id peer;
  bb_address addrs[MAX_ANNOUNCED_ADDRS];
  size_t n = 0;
  int rc = get_header(&r);
  if (!rc) rc = get_peer(&r, &peer);
  if (!rc) rc = get_addresses(&r, addrs, &n, true);
  if (!rc) rc = get_end(&r);
  if (rc) return rc;
  if (!bb_peer_id_equal(&peer, from))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "Announce: a peer may only announce itself");
  uint64_t now = bb_ctx_now(ctx);
  evict(s, now);
  bool is_new;
  if ((rc = server_register(s, &peer, now + s->ttl_ns, &is_new, err)) || (rc = add_addresses(ctx, &peer, addrs, n, err)))
    return rc;
  bb_ctx_count(ctx, is_new ? "global_registry.joined" : "global_registry.refreshed", 1);

  bb_address mine[MAX_ANNOUNCED_ADDRS];
  size_t n_mine = local_addresses(ctx, mine);
  uint8_t buf[MAX_MESSAGE];
  writer w = {buf, 0, sizeof buf};
  put_u8(&w, WIRE_VERSION);
  put_u64(&w, s->ttl_ns);
  put_u64(&w, s->ttl_ns / 3);
  put_addresses(&w, mine, n_mine);
  if (w.len > w.cap) return bb_error_set(err, BB_ERR_LIMIT, "GlobalRegistryServer: Handshake over %zu bytes", w.cap);
  rc = bb_ctx_send_message(ctx, from, "Handshake", buf, w.len, err);
  return rc ? bb_error_prefix(err, "GlobalRegistryServer Handshake: ") : 0;
}

static int server_sample(void *self, bb_ctx *ctx, size_t n, bb_val **peers, bb_error *err) {
  server *s = membership(self, ctx);
  evict(s, bb_ctx_now(ctx));
  size_t k = n < s->n ? n : s->n;
  const bb_allocator *alloc = bb_ctx_allocator(ctx);
  member *pool = alloc->malloc(s->n * sizeof *pool + 1, alloc->user_data);
  bb_peer_id *picked = alloc->malloc(k * sizeof *picked + 1, alloc->user_data);
  if (pool && picked) {
    memcpy(pool, s->members, s->n * sizeof *pool);
    for (size_t i = 0; i < k; i++) { /* partial Fisher–Yates over the sorted members */
      size_t j = i + (size_t)(bb_ctx_random(ctx) % (s->n - i));
      member t = pool[i];
      pool[i] = pool[j];
      pool[j] = t;
      picked[i] = pool[i].peer;
    }
    *peers = bb_val_peers(alloc, picked, k);
  }
  if (pool) alloc->free(pool, alloc->user_data);
  if (picked) alloc->free(picked, alloc->user_data);
  return pool && picked && *peers ? 0 : bb_error_set(err, BB_ERR_NOMEM, "out of memory");
}

static int server_view(void *self, bb_ctx *ctx, bb_val **peers, bb_error *err) {
  server *s = membership(self, ctx);
  evict(s, bb_ctx_now(ctx));
  const bb_allocator *alloc = bb_ctx_allocator(ctx);
  bb_peer_id *all = alloc->malloc(s->n * sizeof *all + 1, alloc->user_data);
  if (!all) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < s->n; i++) all[i] = s->members[i].peer;
  *peers = bb_val_peers(alloc, all, s->n);
  alloc->free(all, alloc->user_data);
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

/* Snapshot: version, u64 ttl_ns, u32 member count, then each member: peer, u64 expiry. */
static int server_save(const void *self, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  const server *s = self;
  size_t cap = 1 + 8 + 4 + s->n * (1 + BB_PEER_ID_MAX + 8);
  uint8_t *buf = alloc->malloc(cap, alloc->user_data);
  if (!buf) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  writer w = {buf, 0, cap};
  put_u8(&w, WIRE_VERSION);
  put_u64(&w, s->ttl_ns);
  uint8_t count[4] = {(uint8_t)s->n, (uint8_t)(s->n >> 8), (uint8_t)(s->n >> 16), (uint8_t)(s->n >> 24)};
  put(&w, count, 4);
  for (size_t i = 0; i < s->n; i++) {
    put_peer(&w, &s->members[i].peer);
    put_u64(&w, s->members[i].expires_ns);
  }
  *out = buf;
  *len = w.len;
  return 0;
}

static int server_load(void *self, const uint8_t *data, size_t len, bb_error *err) {
  server *s = self;
  reader r = {data, len, 0, "GlobalRegistryServer snapshot", err};
  uint64_t ttl = 0;
  uint8_t c[4] = {0};
  int rc = get_header(&r);
  if (!rc) rc = get_u64(&r, "ttl_ns", &ttl);
  for (int i = 0; !rc && i < 4; i++) rc = get_u8(&r, "the member count", &c[i]);
  if (rc) return rc;
  size_t count = (size_t)c[0] | (size_t)c[1] << 8 | (size_t)c[2] << 16 | (size_t)c[3] << 24;
  if (count > MAX_MEMBERS)
    return bb_error_set(err, BB_ERR_MALFORMED, "GlobalRegistryServer snapshot: %zu members (at most %d)", count,
                        MAX_MEMBERS);
  member *loaded = s->alloc->malloc(count * sizeof *loaded + 1, s->alloc->user_data);
  if (!loaded) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  for (size_t i = 0; !rc && i < count; i++) {
    rc = get_peer(&r, &loaded[i].peer);
    if (!rc) rc = get_u64(&r, "an expiry", &loaded[i].expires_ns);
    if (!rc && i && peer_order(&loaded[i - 1].peer, &loaded[i].peer) >= 0)
      rc = bb_error_set(err, BB_ERR_MALFORMED, "GlobalRegistryServer snapshot: member %zu out of order", i);
  }
  if (!rc) rc = get_end(&r);
  if (!rc) {
    s->ttl_ns = ttl;
    memcpy(s->members, loaded, count * sizeof *loaded);
    s->n = count;
  }
  s->alloc->free(loaded, s->alloc->user_data);
  return rc;
}

const bb_component_type BB_GLOBAL_REGISTRY_CLIENT = {
    sizeof(bb_component_type), "GlobalRegistryClient", 1u << BB_ROLE_PROTOCOL, BB_DOMAIN_GLOBAL_REGISTRY, NULL, 0,
    NULL, 0, client_create, client_destroy, client_invoke, client_message, client_timer, client_save, client_load,
    NULL};
const bb_component_type BB_GLOBAL_REGISTRY_SERVER = {
    sizeof(bb_component_type), "GlobalRegistryServer", (1u << BB_ROLE_PEER_SELECTOR) | (1u << BB_ROLE_PROTOCOL),
    BB_DOMAIN_GLOBAL_REGISTRY, NULL, 0, NULL, 0, server_create, server_destroy, server_invoke, server_message, NULL,
    server_save, server_load, NULL};
