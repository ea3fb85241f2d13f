/* GlobalRegistry over the seeded simulator: one server and three clients announce and get
 * Handshakes; the server's view holds the three; a client that stops heartbeating is
 * evicted after the TTL while the others stay; Sample draws are the same for the same
 * seed; malformed messages are refused and reported as OP_FAILED (message_failed);
 * save/load round-trips the membership and refuses bad bytes; the payloads and states keep
 * their documented bytes. One artifact for clients and server: a bootstrap of constants
 * pins the server's address and announces (address-book ops read the constants' tensors,
 * and a slotless protocol op goes to the component bound as Protocol). */
#include <stdlib.h>

#include "control_plane.h"
#include "bb/roles.h"
#include "bb/sim.h"
#include "components/protocols/registry_codec.h"
#include "wire/join_tokens.h"

#define SERVER 100
#define TTL_MS 3000
#define MS 1000000ull

static const bb_slot VIEW = {BB_ROLE_PEER_SELECTOR, "view", NULL};

/* Member: announce(server). */
static void member_body(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "announced", bb_rec_announce(g, bb_rec_input(g, "server", BB_TYPE_PEER_ID)));
}

/* Directory: the live view and a sample of two. */
static void directory_body(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "view", bb_rec_peer_selector_current_view(g, &VIEW));
  bb_rec_output(g, "sample", bb_rec_peer_selector_sample(g, &VIEW, 2));
}

static const bb_module MEMBER = {sizeof(bb_module), "Member", member_body, NULL, NULL, NULL, 0};
static const bb_module DIRECTORY = {sizeof(bb_module), "Directory", directory_body, NULL, NULL, NULL, 0};

/* What the server's registry config adds to its ttl (a test may set it before world_start). */
static const char *g_server_extra = "";

static int bind_server(bb_compiler *c, const void *user, bb_error *err) {
  (void)user;
  char cfg[96];
  snprintf(cfg, sizeof cfg, "ttl_ms=%d%s", TTL_MS, g_server_extra);
  return bb_compiler_bind_peer_selector(c, "view", "GlobalRegistryServer", cfg, err) ||
                 bb_compiler_bind_protocol(c, "discovery", "GlobalRegistryServer", cfg, err)
             ? err->code
             : 0;
}

static int bind_client(bb_compiler *c, const void *user, bb_error *err) {
  (void)user;
  return bb_compiler_bind_protocol(c, "discovery", "GlobalRegistryClient", NULL, err);
}

static uint8_t *compile(const bb_module *m, bool server, size_t *len) {
  return compile_test_module(m, server ? bind_server : bind_client, NULL, len);
}

typedef struct world {
  bb_sim *sim;
  bb_node *server, *clients[3];
  uint8_t *server_art, *client_art;
  size_t server_len, client_len;
  /* what the observer saw */
  size_t view_n, sample_n, failures;
  uint64_t view[8], sample[8];
  char last_failure[512];
} world;

static void observe(void *user, const bb_peer_id *peer, const bb_step *s) {
  world *w = user;
  (void)peer;
  if (s->kind == BB_STEP_OP_FAILED) {
    w->failures++;
    snprintf(w->last_failure, sizeof w->last_failure, "%s: %s", s->reason ? s->reason : "", s->detail ? s->detail : "");
  }
  if (s->kind != BB_STEP_APP_EVENT || !s->value || bb_val_kind_of(s->value) != BB_VAL_PEERS) return;
  bool is_view = strcmp(s->topic, "view") == 0;
  uint64_t *out = is_view ? w->view : w->sample;
  size_t n = bb_val_count(s->value) < 8 ? bb_val_count(s->value) : 8;
  for (size_t i = 0; i < n; i++) bb_peer_id_as_u64(&bb_val_as_peers(s->value)[i], &out[i]);
  *(is_view ? &w->view_n : &w->sample_n) = n;
}

static bool world_start(world *w, uint64_t seed) {
  memset(w, 0, sizeof *w);
  bb_error err;
  w->server_art = compile(&DIRECTORY, true, &w->server_len);
  w->client_art = compile(&MEMBER, false, &w->client_len);
  if (!w->server_art || !w->client_art) return false;
  bb_sim_config sc = {sizeof sc, seed, 1 * MS, 0, 0, 0, 0, 0, 0, 0};
  CHECK(bb_sim_new(&sc, &w->sim, &err) == 0);
  bb_sim_set_observer(w->sim, observe, w);
  bb_node_config nc = {0};
  nc.struct_size = sizeof nc;
  nc.seed = seed;
  const char *st[] = {"Directory"}, *ct[] = {"Member"};
  w->server = install_peer(w->server_art, w->server_len, SERVER, st, 1, shipped_registry(), &nc);
  if (!w->server) return false;
  bb_peer_id sp = bb_peer_id_from_u64(SERVER);
  CHECK(bb_sim_attach(w->sim, w->server, &sp, &err) == 0);
  bb_address sa = p2p_address(&sp);
  bb_val *server = bb_val_peer(NULL, &sp);
  for (int i = 0; i < 3; i++) {
    w->clients[i] = install_peer(w->client_art, w->client_len, (uint64_t)i + 1, ct, 1, shipped_registry(), &nc);
    if (!w->clients[i]) return bb_val_release(server), false;
    bb_peer_id p = bb_peer_id_from_u64((uint64_t)i + 1);
    CHECK(bb_sim_attach(w->sim, w->clients[i], &p, &err) == 0);
    CHECK(bb_node_add_peer(w->clients[i], &sp, &sa, &err) == 0); /* what a bootstrap's InsertMany does */
    bb_named_value in = {"server", server};
    CHECK_MSG(bb_node_invoke(w->clients[i], "Member", &in, 1, 0, &err) == 0, "%s", err.message);
  }
  bb_val_release(server);
  return true;
}

static void world_end(world *w) {
  if (w->sim) bb_sim_free(w->sim);
  bb_node_free(w->server);
  for (int i = 0; i < 3; i++) bb_node_free(w->clients[i]);
  free(w->server_art);
  free(w->client_art);
}

static void run_to(world *w, uint64_t t) {
  bb_error err;
  CHECK_MSG(bb_sim_run_until(w->sim, t, &err) >= 0, "%s", err.message);
}

static void read_directory(world *w) {
  bb_error err;
  w->view_n = w->sample_n = 0;
  CHECK_MSG(bb_node_invoke(w->server, "Directory", NULL, 0, bb_sim_now(w->sim), &err) == 0, "%s", err.message);
  run_to(w, bb_sim_now(w->sim) + 1);
}

static void test_announce_handshake_and_eviction(void) {
  world w;
  if (!world_start(&w, 7)) return world_end(&w);
  run_to(&w, 100 * MS);
  CHECK_EQ_INT(bb_node_counter(w.server, "global_registry.joined"), 3);
  for (int i = 0; i < 3; i++) CHECK_EQ_INT(bb_node_counter(w.clients[i], "global_registry.handshakes"), 1);
  read_directory(&w);
  CHECK_EQ_INT(w.view_n, 3);
  for (size_t i = 0; i < w.view_n && i < 3; i++) CHECK_EQ_INT(w.view[i], i + 1); /* peer-id order */
  CHECK_EQ_INT(w.sample_n, 2);
  CHECK(w.sample[0] != w.sample[1]);

  /* client 3 stops; the others heartbeat every TTL/3 and stay */
  bb_peer_id gone = bb_peer_id_from_u64(3);
  bb_sim_crash(w.sim, &gone);
  run_to(&w, 100 * MS + TTL_MS * MS + 50 * MS);
  read_directory(&w);
  CHECK_EQ_INT(w.view_n, 2);
  CHECK(w.view_n == 2 && w.view[0] == 1 && w.view[1] == 2);
  CHECK(bb_node_counter(w.server, "global_registry.refreshed") >= 4);
  CHECK(bb_node_counter(w.clients[0], "global_registry.announces") >= 4);
  CHECK_EQ_INT(bb_node_counter(w.clients[0], "global_registry.handshakes"),
               bb_node_counter(w.clients[0], "global_registry.announces"));
  /* a second invoke of Announce within the heartbeat interval is throttled */
  bb_peer_id sp = bb_peer_id_from_u64(SERVER);
  bb_val *server = bb_val_peer(NULL, &sp);
  bb_named_value in = {"server", server};
  bb_error err;
  uint64_t before = bb_node_counter(w.clients[0], "global_registry.announces");
  CHECK(bb_node_invoke(w.clients[0], "Member", &in, 1, bb_sim_now(w.sim), &err) == 0);
  run_to(&w, bb_sim_now(w.sim) + 1);
  CHECK_EQ_INT(bb_node_counter(w.clients[0], "global_registry.announces"), before);
  CHECK_EQ_INT(bb_node_counter(w.clients[0], "global_registry.announces_throttled"), 1);
  bb_val_release(server);
  CHECK_EQ_INT(w.failures, 0);
  world_end(&w);
}

/* min_view=N: while fewer than N peers are live the view is nothing at all (so what a
 * server's round hangs on it does not run); from N on it is every live peer. */
static void test_min_view_waits_for_enough_peers(void) {
  for (int min_view = 3; min_view <= 4; min_view++) {
    char extra[32];
    snprintf(extra, sizeof extra, ",min_view=%d", min_view);
    g_server_extra = extra;
    world w;
    bool started = world_start(&w, 5);
    g_server_extra = "";
    if (!started) return world_end(&w);
    run_to(&w, 100 * MS);
    CHECK_EQ_INT(bb_node_counter(w.server, "global_registry.joined"), 3);
    read_directory(&w);
    CHECK_EQ_INT(w.view_n, min_view <= 3 ? 3 : 0);
    CHECK_EQ_INT(w.sample_n, 2); /* Sample is not held back */
    CHECK_EQ_INT(w.failures, 0);
    world_end(&w);
  }
  /* more than a registry holds is refused at install */
  g_server_extra = ",min_view=1025";
  size_t len;
  uint8_t *art = compile(&DIRECTORY, true, &len);
  g_server_extra = "";
  const char *targets[] = {"Directory"};
  bb_install_args a = install_args(art, len, SERVER, targets, 1, shipped_registry());
  bb_node *node = NULL;
  bb_error err;
  CHECK(bb_install(&a, &node, NULL, &err) != 0);
  CHECK(strstr(err.message, "min_view=1025 is above the 1024 members") != NULL);
  bb_node_free(node);
  free(art);
}

/* A client snapshotted and restored into a fresh node keeps heartbeating: its pending
 * heartbeat timer (kept by the node's snapshot) must still count as its newest, so it is
 * not evicted after the TTL. */
static void test_restored_client_keeps_heartbeating(void) {
  world w;
  if (!world_start(&w, 11)) return world_end(&w);
  run_to(&w, 100 * MS);
  CHECK_EQ_INT(bb_node_counter(w.server, "global_registry.joined"), 3);
  bb_error err;
  uint8_t *snap = NULL;
  size_t len = 0;
  CHECK_MSG(bb_node_snapshot(w.clients[0], &snap, &len, &err) == 0, "%s", err.message);
  bb_node_config nc = {0};
  nc.struct_size = sizeof nc;
  nc.seed = 11;
  const char *ct[] = {"Member"};
  bb_node *fresh = install_peer(w.client_art, w.client_len, 1, ct, 1, shipped_registry(), &nc);
  if (fresh) {
    CHECK_MSG(bb_node_restore(fresh, snap, len, &err) == 0, "%s", err.message);
    bb_peer_id me = bb_peer_id_from_u64(1);
    bb_sim_restart(w.sim, &me, fresh);
    bb_node_free(w.clients[0]);
    w.clients[0] = fresh;
  }
  bb_buffer_free(NULL, snap);
  uint64_t before = bb_node_counter(w.clients[0], "global_registry.announces");
  run_to(&w, 100 * MS + 2 * TTL_MS * MS);
  CHECK(bb_node_counter(w.clients[0], "global_registry.announces") >= before + 4);
  read_directory(&w);
  CHECK_EQ_INT(w.view_n, 3); /* nobody was evicted */
  CHECK_EQ_INT(w.failures, 0);
  world_end(&w);
}

/* Ten samples after the cohort formed, as peer ids. */
static void sample_sequence(uint64_t seed, uint64_t out[10][2]) {
  world w;
  memset(out, 0, 10 * sizeof *out);
  if (!world_start(&w, seed)) return world_end(&w);
  run_to(&w, 100 * MS);
  for (int i = 0; i < 10; i++) {
    read_directory(&w);
    CHECK_EQ_INT(w.sample_n, 2);
    out[i][0] = w.sample[0];
    out[i][1] = w.sample[1];
  }
  world_end(&w);
}

static void test_sample_deterministic(void) {
  uint64_t a[10][2], b[10][2], c[10][2];
  sample_sequence(11, a);
  sample_sequence(11, b);
  sample_sequence(12, c);
  CHECK(memcmp(a, b, sizeof a) == 0);
  CHECK(memcmp(a, c, sizeof a) != 0); /* another seed, another sequence */
  bool varied = false;
  for (int i = 1; i < 10; i++) varied |= a[i][0] != a[0][0] || a[i][1] != a[0][1];
  CHECK(varied); /* successive calls draw afresh */
}

/* Delivers one message and expects exactly one OP_FAILED message_failed whose detail
 * contains `why`. */
static void expect_refused(bb_node *to, uint64_t from, const char *op, const uint8_t *p, size_t len, const char *why) {
  deliver_message(to, from, "discovery", op, p, len, 0);
  const bb_step *steps;
  size_t n;
  bb_error err;
  CHECK(bb_node_poll(to, 0, &steps, &n, &err) == 0);
  CHECK_EQ_INT(count_steps(steps, n, BB_STEP_OP_FAILED), 1);
  for (size_t i = 0; i < n; i++)
    if (steps[i].kind == BB_STEP_OP_FAILED) {
      CHECK_STR(steps[i].reason, "message_failed");
      CHECK_MSG(steps[i].detail && strstr(steps[i].detail, why), "detail `%s` lacks `%s`",
                steps[i].detail ? steps[i].detail : "", why);
    }
  CHECK_EQ_INT(count_steps(steps, n, BB_STEP_SEND), 0);
}

static void test_malformed_refused(void) {
  size_t slen = 0, clen = 0;
  uint8_t *sart = compile(&DIRECTORY, true, &slen), *cart = compile(&MEMBER, false, &clen);
  const char *st[] = {"Directory"}, *ct[] = {"Member"};
  bb_node *server = sart ? install_peer(sart, slen, SERVER, st, 1, shipped_registry(), NULL) : NULL;
  bb_node *client = cart ? install_peer(cart, clen, 1, ct, 1, shipped_registry(), NULL) : NULL;
  if (server && client) {
    /* Announce: version 1, peer (len 2: identity multihash of 0), 1 address /p2p/1 */
    uint8_t good_peer[1 + BB_PEER_ID_MAX];
    bb_peer_id p1 = bb_peer_id_from_u64(1);
    good_peer[0] = p1.len;
    memcpy(good_peer + 1, p1.bytes, p1.len);
    const uint8_t empty[] = {0};
    expect_refused(server, 1, "Announce", empty, 0, "truncated at byte 0");
    const uint8_t v2[] = {2, 0};
    expect_refused(server, 1, "Announce", v2, sizeof v2, "version 2");
    uint8_t no_addr[2 + BB_PEER_ID_MAX];
    no_addr[0] = 1;
    memcpy(no_addr + 1, good_peer, 1 + p1.len);
    no_addr[2 + p1.len] = 0;
    expect_refused(server, 1, "Announce", no_addr, 3 + p1.len, "0 addresses");
    uint8_t cut[4 + BB_PEER_ID_MAX];
    memcpy(cut, no_addr, 2 + p1.len);
    cut[2 + p1.len] = 1;     /* one address ... */
    cut[3 + p1.len] = 40;    /* ... of 40 bytes, none given */
    expect_refused(server, 1, "Announce", cut, 4 + p1.len, "truncated");
    expect_refused(server, 2, "Announce", no_addr, 2 + p1.len, "truncated"); /* cut before the count */
    expect_refused(server, 1, "Leave", empty, 1, "unknown message `Leave`");
    CHECK_EQ_INT(bb_node_counter(server, "global_registry.joined"), 0);
    /* a Handshake the client did not ask for */
    const uint8_t hs[] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    expect_refused(client, SERVER, "Handshake", hs, sizeof hs, "did not announce to");
    CHECK_EQ_INT(bb_node_counter(server, "messages.failed"), 6);
  }
  bb_node_free(server);
  bb_node_free(client);
  free(sart);
  free(cart);
}

static void test_save_load(void) {
  world w;
  if (!world_start(&w, 3)) return world_end(&w);
  run_to(&w, 100 * MS);
  const bb_component_type *type = NULL;
  void *reg = bb_node_component(w.server, "discovery", &type);
  CHECK(reg && type && strcmp(type->type_name, "GlobalRegistryServer") == 0);
  if (!reg) return world_end(&w);
  uint8_t *bytes = NULL;
  size_t len = 0;
  bb_error err;
  CHECK(type->save(reg, bb_default_allocator(), &bytes, &len, &err) == 0);
  /* a fresh server takes the membership and shows it */
  const char *st[] = {"Directory"};
  bb_node *fresh = install_peer(w.server_art, w.server_len, SERVER, st, 1, shipped_registry(), NULL);
  if (fresh) {
    void *other = bb_node_component(fresh, "discovery", NULL);
    CHECK(type->load(other, bytes, len - 1, &err) == BB_ERR_MALFORMED); /* cut: refused */
    CHECK(type->load(other, bytes, len, &err) == 0);
    CHECK_EQ_INT(bb_node_invoke(fresh, "Directory", NULL, 0, 100 * MS, &err), 0);
    const bb_step *steps;
    size_t n;
    CHECK(bb_node_poll(fresh, 100 * MS, &steps, &n, &err) == 0);
    size_t seen = 0;
    for (size_t i = 0; i < n; i++)
      if (steps[i].kind == BB_STEP_APP_EVENT && strcmp(steps[i].topic, "view") == 0)
        seen = bb_val_count(steps[i].value);
    CHECK_EQ_INT(seen, 3);
    bb_node_free(fresh);
  }
  free(bytes);
  /* the client round-trips too */
  void *cl = bb_node_component(w.clients[0], "discovery", &type);
  CHECK(cl && type->save(cl, bb_default_allocator(), &bytes, &len, &err) == 0);
  if (cl) {
    CHECK(type->load(cl, bytes, len, &err) == 0);
    bytes[0] = 9;
    CHECK(type->load(cl, bytes, len, &err) == BB_ERR_MALFORMED);
    CHECK(strstr(err.message, "version 9") != NULL);
    free(bytes);
  }
  world_end(&w);
}

/* ---- byte formats: the payloads and states are read by other builds, so their bytes are
 * pinned here against the documented layouts (docs/WIRE.md, docs/COMPONENTS.md). ---- */

static void test_message_bytes_pinned(void) {
  size_t slen = 0, clen = 0;
  uint8_t *sart = compile(&DIRECTORY, true, &slen), *cart = compile(&MEMBER, false, &clen);
  const char *st[] = {"Directory"}, *ct[] = {"Member"};
  bb_node *server = sart ? install_peer(sart, slen, SERVER, st, 1, shipped_registry(), NULL) : NULL;
  bb_node *client = cart ? install_peer(cart, clen, 1, ct, 1, shipped_registry(), NULL) : NULL;
  if (server && client) {
    bb_error err;
    const bb_step *steps;
    size_t n;
    uint8_t got[1024];
    /* the client's Announce: version, its peer id, its one address */
    bb_peer_id sp = bb_peer_id_from_u64(SERVER);
    bb_address sa = p2p_address(&sp);
    CHECK(bb_node_add_peer(client, &sp, &sa, &err) == 0);
    bb_val *server_val = bb_val_peer(NULL, &sp);
    bb_named_value in = {"server", server_val};
    CHECK_MSG(bb_node_invoke(client, "Member", &in, 1, 0, &err) == 0, "%s", err.message);
    bb_val_release(server_val);
    CHECK(bb_node_poll(client, 0, &steps, &n, &err) == 0);
    bytes_out announce = {{0}, 0};
    out_u8(&announce, 1);
    out_peer(&announce, 1);
    out_u8(&announce, 1);
    out_p2p_address(&announce, 1);
    size_t len = sent_payload(steps, n, "Announce", got, sizeof got);
    CHECK_EQ_INT(len, announce.n);
    CHECK(len == announce.n && memcmp(got, announce.b, len) == 0);
    /* the server's Handshake: version, ttl, ttl/3, its one address */
    deliver_message(server, 1, "discovery", "Announce", announce.b, announce.n, 0);
    CHECK(bb_node_poll(server, 0, &steps, &n, &err) == 0);
    bytes_out handshake = {{0}, 0};
    out_u8(&handshake, 1);
    out_le(&handshake, TTL_MS * MS, 8);
    out_le(&handshake, TTL_MS * MS / 3, 8);
    out_u8(&handshake, 1);
    out_p2p_address(&handshake, SERVER);
    len = sent_payload(steps, n, "Handshake", got, sizeof got);
    CHECK_EQ_INT(len, handshake.n);
    CHECK(len == handshake.n && memcmp(got, handshake.b, len) == 0);
  }
  bb_node_free(server);
  bb_node_free(client);
  free(sart);
  free(cart);
}

/* Loads `state` into the slot's component and saves it again: the same bytes come out. */
static void check_state_round_trip(bb_node *node, const bytes_out *state, const bytes_out *expected) {
  const bb_component_type *type = NULL;
  void *self = bb_node_component(node, "discovery", &type);
  CHECK(self && type);
  if (!self) return;
  bb_error err;
  CHECK_MSG(type->load(self, state->b, state->n, &err) == 0, "%s", err.message);
  uint8_t *bytes = NULL;
  size_t len = 0;
  CHECK_MSG(type->save(self, bb_default_allocator(), &bytes, &len, &err) == 0, "%s", err.message);
  CHECK_EQ_INT(len, expected->n);
  CHECK(bytes && len == expected->n && memcmp(bytes, expected->b, len) == 0);
  free(bytes);
}

static void test_state_bytes_pinned(void) {
  size_t slen = 0, clen = 0;
  uint8_t *sart = compile(&DIRECTORY, true, &slen), *cart = compile(&MEMBER, false, &clen);
  const char *st[] = {"Directory"}, *ct[] = {"Member"};
  bb_node *server = sart ? install_peer(sart, slen, SERVER, st, 1, shipped_registry(), NULL) : NULL;
  bb_node *client = cart ? install_peer(cart, clen, 1, ct, 1, shipped_registry(), NULL) : NULL;
  if (server && client) {
    /* server: version, ttl, u32 count, then (peer, expiry) in peer-id order */
    bytes_out s = {{0}, 0};
    out_u8(&s, 1);
    out_le(&s, 5000 * MS, 8);
    out_le(&s, 2, 4);
    out_peer(&s, 3);
    out_le(&s, 0x0102030405060708ull, 8);
    out_peer(&s, 7);
    out_le(&s, 42 * MS, 8);
    check_state_round_trip(server, &s, &s);
    /* client: version, has_server, server peer, ttl, interval, timer token */
    bytes_out c = {{0}, 0};
    out_u8(&c, 1);
    out_u8(&c, 1);
    out_peer(&c, SERVER);
    out_le(&c, 9000 * MS, 8);
    out_le(&c, 3000 * MS, 8);
    out_le(&c, 17, 8);
    check_state_round_trip(client, &c, &c);
    /* a client state without the token saves with token 0 */
    bytes_out old = c;
    old.n -= 8;
    bytes_out zero = c;
    memset(zero.b + zero.n - 8, 0, 8);
    check_state_round_trip(client, &old, &zero);
    /* no server: the peer is absent */
    bytes_out none = {{1, 0}, 2};
    out_le(&none, 0, 8);
    out_le(&none, 0, 8);
    out_le(&none, 0, 8);
    check_state_round_trip(client, &none, &none);
  }
  bb_node_free(server);
  bb_node_free(client);
  free(sart);
  free(cart);
}

/* One artifact: discovery = GlobalRegistryClient (registry=view) everywhere, view =
 * GlobalRegistryServer; the bootstrap records the server's id and address as constants,
 * InsertMany, Announce. */
static const int64_t BOOT_SERVER[] = {SERVER};

static void fed_bootstrap(bb_rec *g, void *user) {
  (void)user;
  static const int64_t one[] = {1};
  bb_address a = p2p_address(&(bb_peer_id){0});
  a.seg[0].peer = bb_peer_id_from_u64(SERVER);
  char text[128];
  size_t len = bb_address_to_text(&a, text, sizeof text);
  int64_t dims[] = {(int64_t)len};
  bb_literal peer_lit = {BB_DTYPE_INT64, one, 1, BOOT_SERVER, sizeof BOOT_SERVER};
  bb_literal addr_lit = {BB_DTYPE_UINT8, dims, 1, text, len};
  bb_value peer = bb_rec_constant(g, "server_peer_const", BB_TYPE_PEER_ID, &peer_lit);
  bb_rec_address_book_insert_many(g, peer, bb_rec_constant(g, "server_addrs_const", BB_TYPE_ADDRESS_VEC, &addr_lit));
  bb_rec_announce(g, peer);
}

static void fed_body(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "view", bb_rec_peer_selector_current_view(g, &VIEW));
}

static const bb_module FED = {sizeof(bb_module), "Fed", fed_body, fed_bootstrap, NULL, NULL, 0};

static void test_one_artifact_bootstrap(void) {
  bb_error err;
  bb_model *model = NULL;
  uint8_t *bytes = NULL, *art = NULL;
  size_t blen = 0, len = 0;
  CHECK_MSG(bb_module_build(&FED, NULL, &model, &err) == 0, "%s", err.message);
  if (!model) return;
  CHECK(bb_model_encode(model, &bytes, &blen, &err) == 0);
  bb_model_free(model);
  bb_compiler *c = bb_compiler_new(NULL);
  bb_compiler_set_permissive_types(c, true);
  int rc = bb_compiler_bind_peer_selector(c, "view", "GlobalRegistryServer", "ttl_ms=3000", &err) ||
           bb_compiler_bind_protocol(c, "discovery", "GlobalRegistryClient", "registry=view", &err) ||
           bb_compiler_compile(c, bytes, blen, &art, &len, &err);
  CHECK_MSG(rc == 0, "%s", err.message);
  bb_compiler_free(c);
  free(bytes);
  if (rc) return;
  world w;
  memset(&w, 0, sizeof w);
  bb_sim_config sc = {sizeof sc, 5, 1 * MS, 0, 0, 0, 0, 0, 0, 0};
  CHECK(bb_sim_new(&sc, &w.sim, &err) == 0);
  bb_sim_set_observer(w.sim, observe, &w);
  const char *t[] = {"Fed"};
  bb_node *nodes[4] = {0};
  for (int i = 0; i < 4; i++) {
    uint64_t id = i ? (uint64_t)i : SERVER;
    bb_peer_id p = bb_peer_id_from_u64(id);
    nodes[i] = install_peer(art, len, id, t, 1, shipped_registry(), NULL);
    if (!nodes[i]) continue;
    CHECK(bb_sim_attach(w.sim, nodes[i], &p, &err) == 0);
    CHECK(bb_node_run_bootstrap(nodes[i], 0, &err) == 0);
  }
  if (nodes[0]) {
    CHECK(bb_sim_run_until(w.sim, 100 * MS, &err) >= 0);
    CHECK_EQ_INT(bb_node_counter(nodes[0], "global_registry.joined"), 3);
    CHECK_EQ_INT(bb_node_counter(nodes[0], "global_registry.self_announce_skipped"), 1);
    for (int i = 1; i < 4; i++) CHECK_EQ_INT(bb_node_counter(nodes[i], "global_registry.handshakes"), 1);
    CHECK(bb_node_invoke(nodes[0], "Fed", NULL, 0, bb_sim_now(w.sim), &err) == 0);
    CHECK(bb_sim_run_until(w.sim, bb_sim_now(w.sim) + 1, &err) >= 0);
    CHECK_EQ_INT(w.view_n, 3);
    CHECK_MSG(w.failures == 0, "%s", w.last_failure);
  }
  bb_sim_free(w.sim);
  for (int i = 0; i < 4; i++) bb_node_free(nodes[i]);
  free(art);
}

/* The Announce of test identity `id`, with its /p2p address. */
static size_t announce_of(uint64_t id, uint8_t *out, size_t cap) {
  bbi_registry_announce a = {.peer = bb_peer_id_from_u64(id), .n_addrs = 1};
  a.addrs[0] = p2p_address(&a.peer);
  return bbi_registry_announce_encode(&a, out, cap);
}

/* The ids of the server's Directory view after a run at `now`. */
static size_t directory_at(bb_node *server, uint64_t now, uint64_t *ids, size_t cap) {
  bb_error err;
  const bb_step *steps;
  size_t n, got = 0;
  CHECK_MSG(bb_node_invoke(server, "Directory", NULL, 0, now, &err) == 0, "%s", err.message);
  CHECK(bb_node_poll(server, now, &steps, &n, &err) == 0);
  for (size_t i = 0; i < n; i++)
    if (steps[i].kind == BB_STEP_APP_EVENT && strcmp(steps[i].topic, "view") == 0)
      for (size_t j = 0; j < bb_val_count(steps[i].value) && got < cap; j++)
        bb_peer_id_as_u64(&bb_val_as_peers(steps[i].value)[j], &ids[got++]);
  return got;
}

/* Under a join policy the registry registers only peers whose token admits them: a Sybil's
 * Announce is refused before anything is registered (and counted), and a member whose
 * token has expired leaves the view though its lease has not. Without a policy anyone who
 * announces is a member. */
static void test_policy_admits_only_token_holders(void) {
  size_t len = 0;
  uint8_t *art = compile(&DIRECTORY, true, &len);
  if (!art) return;
  const char *const targets[] = {"Directory"};
  const bbt_keys op = bbt_keys_counting(0x00);
  const bb_join_policy policy = {"room-1", op.pk, 1};
  bb_install_args a = install_args(art, len, SERVER, targets, 1, shipped_registry());
  a.admission = &policy;
  bb_node *server = NULL, *open = install_peer(art, len, SERVER, targets, 1, shipped_registry(), NULL);
  bb_error err;
  CHECK_MSG(bb_install(&a, &server, NULL, &err) == 0, "%s", err.message);
  if (server && open) {
    /* peer 1 holds a client's token for two seconds, peer 2 a long one, peer 7 none */
    const uint64_t holders[2] = {1, 2}, expiry[2] = {1700000002, 1700003600};
    for (int i = 0; i < 2; i++) {
      bb_peer_id p = bb_peer_id_from_u64(holders[i]);
      uint8_t token[BB_JOIN_TOKEN_MAX_BYTES];
      size_t n = bbt_make_token(&op, BB_JOIN_CLIENT, expiry[i], &p, "room-1", token);
      CHECK(bb_node_admit_token(server, &p, token, n, 1700000000, 0, NULL, NULL) == 0);
    }
    uint8_t msg[BBI_REGISTRY_MESSAGE_MAX];
    const uint64_t announcing[3] = {1, 2, 7};
    for (int i = 0; i < 3; i++) {
      size_t n = announce_of(announcing[i], msg, sizeof msg);
      deliver_message(server, announcing[i], "discovery", "Announce", msg, n, 0);
      deliver_message(open, announcing[i], "discovery", "Announce", msg, n, 0);
    }
    const bb_step *steps;
    size_t k;
    CHECK(bb_node_poll(server, 0, &steps, &k, &err) == 0);
    CHECK_EQ_INT(count_steps(steps, k, BB_STEP_OP_FAILED), 1);
    CHECK(bb_node_poll(open, 0, &steps, &k, &err) == 0);
    CHECK_EQ_INT(count_steps(steps, k, BB_STEP_OP_FAILED), 0);
    CHECK_EQ_INT(bb_node_counter(server, "global_registry.refused_unadmitted"), 1);
    CHECK_EQ_INT(bb_node_counter(server, "global_registry.joined"), 2);
    CHECK_EQ_INT(bb_node_counter(open, "global_registry.joined"), 3);
    uint64_t ids[8];
    CHECK_EQ_INT(directory_at(server, MS, ids, 8), 2);
    CHECK(ids[0] == 1 && ids[1] == 2);
    CHECK_EQ_INT(directory_at(open, MS, ids, 8), 3);
    /* at 2.5 s peer 1's token has expired, its lease (3 s) has not */
    CHECK_EQ_INT(directory_at(server, 2500 * MS, ids, 8), 1);
    CHECK(ids[0] == 2);
  }
  bb_node_free(server);
  bb_node_free(open);
  free(art);
}

int main(void) {
  RUN(test_announce_handshake_and_eviction);
  RUN(test_min_view_waits_for_enough_peers);
  RUN(test_policy_admits_only_token_holders);
  RUN(test_sample_deterministic);
  RUN(test_malformed_refused);
  RUN(test_save_load);
  RUN(test_message_bytes_pinned);
  RUN(test_state_bytes_pinned);
  RUN(test_restored_client_keeps_heartbeating);
  RUN(test_one_artifact_bootstrap);
  return bb_test_finish();
}
