/* The address book: who may enter it (claims from strangers are not believed; the
 * admission hook decides for the artifact's and components' inserts), eviction of the
 * least recently used entry instead of refusing when full, and its snapshot (version 2
 * with send times and use ticks; version 1 still read). */
#include "programs/examples.h"
#include "rttest.h"
#include "bb/bytes.h"
#include "util/hash.h"
#include "wire/join_tokens.h"

static uint8_t *fednet;
static size_t fednet_len;
static const char *const SENDER[] = {"FedNetwork"};
static const char *const SINK[] = {"FedNetwork_sink_peers"};

static const bb_step *poll_at(bb_node *n, uint64_t now, size_t *count) {
  const bb_step *steps = NULL;
  bb_error err;
  *count = 0;
  CHECK_MSG(bb_node_poll(n, now, &steps, count, &err) == 0, "%s", err.message);
  return steps;
}

static void add_p2p(bb_node *n, uint64_t id) {
  bb_peer_id p = bb_peer_id_from_u64(id);
  bb_address a = p2p_address(&p);
  bb_error err;
  CHECK_MSG(bb_node_add_peer(n, &p, &a, &err) == 0, "peer %llu: %s", (unsigned long long)id, err.message);
}

static bool has_address(bb_node *n, uint64_t id) {
  /* a node's book is internal: a Send to the peer tells whether it has an address */
  bb_peer_id p = bb_peer_id_from_u64(id);
  bb_val *peers = bb_val_peers(NULL, &p, 1);
  bb_named_value in = {"sink_peers", peers};
  CHECK(bb_node_invoke(n, "FedNetwork", &in, 1, 0, NULL) == 0);
  bb_val_release(peers);
  size_t k;
  const bb_step *s = poll_at(n, 0, &k);
  return count_steps(s, k, BB_STEP_SEND) == 1 && count_steps(s, k, BB_STEP_PEER_RESOLVE_FAILED) == 0;
}

/* The sender's envelope to the sink, re-encoded as if `id` had sent it and claimed
 * /p2p/<id> (the attack: fresh ids, each claiming its own address). */
static uint8_t *forged(const uint8_t *tmpl, size_t tmpl_len, uint64_t id, size_t *len) {
  bb_envelope *env = NULL;
  bb_error err;
  CHECK_MSG(bb_envelope_decode(tmpl, tmpl_len, NULL, NULL, &env, &err) == 0, "%s", err.message);
  if (!env) return NULL;
  bb_peer_id p = bb_peer_id_from_u64(id);
  bb_address a = p2p_address(&p);
  uint8_t buf[128];
  bb_bytes claim = {buf, bb_address_to_bytes(&a, buf, sizeof buf)};
  env->src_peer_addresses = &claim;
  env->n_src_peer_addresses = 1;
  uint8_t *out = NULL;
  CHECK(bb_envelope_encode(env, NULL, &out, len, &err) == 0);
  bb_envelope_free(env, NULL);
  return out;
}

/* One envelope of sender 1 to the sink, peer 2 (malloc'd copy). */
static uint8_t *template_envelope(const bb_registry *reg, size_t *len) {
  bb_node *a = install_peer(fednet, fednet_len, 1, SENDER, 1, reg, NULL);
  if (!a) return NULL;
  add_p2p(a, 2);
  bb_peer_id p2 = bb_peer_id_from_u64(2);
  bb_val *peers = bb_val_peers(NULL, &p2, 1);
  bb_named_value in = {"sink_peers", peers};
  CHECK(bb_node_invoke(a, "FedNetwork", &in, 1, 0, NULL) == 0);
  bb_val_release(peers);
  size_t k;
  const bb_step *s = poll_at(a, 0, &k);
  uint8_t *copy = NULL;
  for (size_t i = 0; i < k && !copy; i++)
    if (s[i].kind == BB_STEP_SEND) {
      copy = malloc(s[i].len);
      memcpy(copy, s[i].bytes, s[i].len);
      *len = s[i].len;
    }
  bb_node_free(a);
  CHECK(copy != NULL);
  return copy;
}

/* Delivers `count` envelopes to b, each from a fresh id claiming its own address, polling
 * as the ingress queue fills. */
static void flood(bb_node *b, const uint8_t *tmpl, size_t tmpl_len, uint64_t first_id, size_t count) {
  for (size_t i = 0; i < count; i++) {
    size_t len = 0;
    uint8_t *env = forged(tmpl, tmpl_len, first_id + i, &len);
    bb_peer_id from = bb_peer_id_from_u64(first_id + i);
    bb_error err;
    CHECK_MSG(env && bb_node_deliver(b, &from, env, len, 0, &err) == 0, "%s", err.message);
    bb_buffer_free(NULL, env);
    if (i % 1000 == 999 || i + 1 == count) {
      size_t k;
      do poll_at(b, 0, &k);
      while (k);
    }
  }
}

/* The finding: 20,000 envelopes from fresh ids, each claiming its own /p2p address,
 * filled the book and a legitimate client could not be added afterwards. Claims of
 * senders the node does not know are not believed now: the book does not grow. */
static void test_strangers_cannot_fill_the_book(void) {
  bb_registry *reg = stub_registry();
  size_t tmpl_len = 0;
  uint8_t *tmpl = template_envelope(reg, &tmpl_len);
  bb_node *b = install_peer(fednet, fednet_len, 2, SINK, 1, reg, NULL);
  if (tmpl && b) {
    flood(b, tmpl, tmpl_len, 100000, 20000);
    CHECK_EQ_INT(bb_node_counter(b, "book.claims_refused"), 20000);
    CHECK_EQ_INT(bb_node_counter(b, "wire.fills_delivered"), 20000); /* the data itself still arrived */
    bb_peer_id legit = bb_peer_id_from_u64(7);
    bb_address a = p2p_address(&legit);
    bb_error err;
    CHECK_MSG(bb_node_add_peer(b, &legit, &a, &err) == 0, "%s", err.message);
    /* a sender the node knows has its claims believed, as before */
    size_t len = 0;
    uint8_t *env = forged(tmpl, tmpl_len, 7, &len);
    CHECK(bb_node_deliver(b, &legit, env, len, 0, NULL) == 0);
    bb_buffer_free(NULL, env);
    CHECK_EQ_INT(bb_node_counter(b, "book.claims_refused"), 20000);
  }
  bb_node_free(b);
  free(tmpl);
  bb_registry_free(reg);
}

static size_t admitted_calls;
static bool admit_all(void *user, const bb_peer_id *peer, bb_admission_source source) {
  (void)user;
  (void)peer;
  admitted_calls += source == BB_ADMIT_CLAIM;
  return true;
}

/* A host whose admission hook lets everyone in: 20,000 fresh ids then fill the book, and
 * the least recently used entries make room, so the legitimate client still gets in and
 * the peer the node keeps talking to stays. */
static void test_full_book_evicts_the_least_recently_used(void) {
  bb_registry *reg = stub_registry();
  size_t tmpl_len = 0;
  uint8_t *tmpl = template_envelope(reg, &tmpl_len);
  bb_install_args args = install_args(fednet, fednet_len, 1, SENDER, 1, reg);
  bb_address self = p2p_address(&args.self);
  args.addresses = &self;
  args.n_addresses = 1;
  args.admit = admit_all;
  bb_node *n = NULL;
  bb_error err;
  CHECK_MSG(bb_install(&args, &n, NULL, &err) == 0, "%s", err.message);
  if (tmpl && n) {
    add_p2p(n, 2); /* the peer this node talks to */
    for (size_t i = 0; i < 20000; i += 1000) {
      size_t len = 0;
      for (size_t j = 0; j < 1000; j++) {
        uint8_t *env = forged(tmpl, tmpl_len, 100000 + i + j, &len);
        bb_peer_id from = bb_peer_id_from_u64(100000 + i + j);
        CHECK(bb_node_deliver(n, &from, env, len, 0, NULL) == 0);
        bb_buffer_free(NULL, env);
      }
      size_t k;
      do poll_at(n, 0, &k);
      while (k);
      CHECK(has_address(n, 2)); /* a send is a use: peer 2 is never the least recent */
    }
    CHECK_EQ_INT(admitted_calls, 20000);
    CHECK_EQ_INT(bb_node_counter(n, "book.evicted"), 20000 + 2 - 16384);
    add_p2p(n, 7);
    CHECK(has_address(n, 7) && has_address(n, 2) && has_address(n, 1));
    CHECK(!has_address(n, 100000));     /* the oldest strangers are gone */
    CHECK(has_address(n, 100000 + 19999)); /* the newest are still there */
  }
  bb_node_free(n);
  free(tmpl);
  bb_registry_free(reg);
}

/* The order of eviction, on a book of four: never this node's entry, never a blocked
 * peer's (evicting it would lift the block), otherwise the least recently used. */
static void test_eviction_order(void) {
  bb_registry *reg = stub_registry();
  bb_node_config cfg = {.struct_size = sizeof cfg, .max_peers = 4};
  bb_node *n = install_peer(fednet, fednet_len, 1, SENDER, 1, reg, &cfg);
  if (n) {
    add_p2p(n, 10);
    add_p2p(n, 11);
    bb_peer_id p12 = bb_peer_id_from_u64(12);
    CHECK(bb_node_block_peer(n, &p12, true, NULL) == 0); /* book: 1, 10, 11, 12 (blocked) */
    CHECK(has_address(n, 10));                           /* 10 is used: 11 is the least recent */
    add_p2p(n, 13);
    CHECK(!has_address(n, 11) && has_address(n, 10) && has_address(n, 13) && has_address(n, 1));
    add_p2p(n, 14); /* 10 now the least recent: 1 is self, 12 blocked */
    CHECK(!has_address(n, 10) && has_address(n, 14));
    CHECK_EQ_INT(bb_node_counter(n, "book.evicted"), 2);
    CHECK(bb_node_block_peer(n, &p12, false, NULL) == 0);
    /* every entry but self blocked: a new peer cannot get in, and the error says why */
    for (uint64_t id = 20; id < 23; id++) {
      bb_peer_id p = bb_peer_id_from_u64(id);
      CHECK(bb_node_block_peer(n, &p, true, NULL) == 0);
    }
    bb_peer_id p30 = bb_peer_id_from_u64(30);
    bb_address a30 = p2p_address(&p30);
    bb_error err;
    CHECK_EQ_INT(bb_node_add_peer(n, &p30, &a30, &err), BB_ERR_LIMIT);
    CHECK_MSG(strstr(err.message, "blocked peers or this node's own") != NULL, "%s", err.message);
  }
  bb_node_free(n);
  bb_registry_free(reg);
}

/* ---- admission of graph and component inserts ------------------------------------------- */

static bb_admission_source last_source;
static bool admit_none(void *user, const bb_peer_id *peer, bb_admission_source source) {
  (void)user;
  (void)peer;
  last_source = source;
  return false;
}

/* Bootstrap: address_book.insert_many(peer 100, its /p2p address as text). */
static void insert_bootstrap(bb_rec *g, void *user) {
  (void)user;
  static const int64_t one[] = {1}, id[] = {100};
  static char text[128];
  bb_peer_id p = bb_peer_id_from_u64(100);
  bb_address a = p2p_address(&p);
  size_t len = bb_address_to_text(&a, text, sizeof text);
  int64_t dims[] = {(int64_t)len};
  bb_literal peer = {BB_DTYPE_INT64, one, 1, id, sizeof id};
  bb_literal addr = {BB_DTYPE_UINT8, dims, 1, text, len};
  bb_rec_address_book_insert_many(g, bb_rec_constant(g, "p", BB_TYPE_PEER_ID, &peer),
                                  bb_rec_constant(g, "a", BB_TYPE_ADDRESS_VEC, &addr));
}
static void empty_body(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "y", bb_rec_pass_through(g, bb_rec_input(g, "x", NULL)));
}
static const bb_module SEEDED = {sizeof(bb_module), "Seeded", empty_body, insert_bootstrap, NULL, NULL, 0};
static int no_bindings(bb_compiler *c, const void *user, bb_error *err) {
  (void)c;
  (void)user;
  (void)err;
  return 0;
}

static void test_graph_insert_goes_through_admission(void) {
  size_t len = 0;
  uint8_t *artifact = compile_test_module(&SEEDED, no_bindings, NULL, &len);
  if (!artifact) return;
  for (int hook = 0; hook < 2; hook++) {
    static const char *const SEEDED_TARGETS[] = {"Seeded"};
    bb_install_args args = install_args(artifact, len, 1, SEEDED_TARGETS, 1, NULL);
    args.admit = hook ? admit_none : NULL;
    bb_node *n = NULL;
    bb_error err;
    CHECK_MSG(bb_install(&args, &n, NULL, &err) == 0, "%s", err.message);
    if (!n) continue;
    CHECK(bb_node_run_bootstrap(n, 0, NULL) == 0);
    size_t k;
    const bb_step *s = poll_at(n, 0, &k);
    const bb_step *f = NULL;
    for (size_t i = 0; i < k; i++)
      if (s[i].kind == BB_STEP_OP_FAILED) f = &s[i];
    if (hook) { /* refused, naming the peer; counted */
      CHECK(f && strcmp(f->reason, "address_book_insert_failed") == 0 &&
            strstr(f->detail, "was not admitted to the address book"));
      CHECK_EQ_INT(last_source, BB_ADMIT_GRAPH);
      CHECK_EQ_INT(bb_node_counter(n, "book.refused"), 1);
    } else { /* without a hook the artifact's seeds are admitted */
      CHECK(f == NULL);
      CHECK_EQ_INT(bb_node_counter(n, "book.refused"), 0);
    }
    bb_node_free(n);
  }
  free(artifact);
}

/* With a join policy and no hook, only peers holding a valid client or server token enter
 * the book, whatever the source: a stranger's claim, a watcher's, an expired holder's and
 * the artifact's seed without a token are refused; a hook still decides instead. */
static void test_join_tokens_decide_the_book(void) {
  const bbt_keys op = bbt_keys_counting(0x00);
  const bb_join_policy policy = {"room-1", op.pk, 1};
  const uint64_t now = 1700000000;
  bb_registry *reg = stub_registry();
  size_t tmpl_len = 0, seeded_len = 0;
  uint8_t *tmpl = template_envelope(reg, &tmpl_len);
  uint8_t *seeded = compile_test_module(&SEEDED, no_bindings, NULL, &seeded_len);
  for (int hook = 0; hook < 2 && tmpl && seeded; hook++) {
    bb_install_args a = install_args(fednet, fednet_len, 2, SINK, 1, reg);
    a.admission = &policy;
    a.admit = hook ? admit_all : NULL;
    bb_node *b = NULL;
    bb_error err;
    CHECK_MSG(bb_install(&a, &b, NULL, &err) == 0, "%s", err.message);
    if (!b) continue;
    /* 10 client, 11 server, 12 watcher, 13 expired in a second, 14 none */
    const bb_join_role roles[] = {BB_JOIN_CLIENT, BB_JOIN_SERVER, BB_JOIN_WATCHER, BB_JOIN_CLIENT};
    for (uint64_t i = 0; i < 4; i++) {
      bb_peer_id p = bb_peer_id_from_u64(10 + i);
      uint8_t token[BB_JOIN_TOKEN_MAX_BYTES];
      size_t len = bbt_make_token(&op, (int)roles[i], now + (i == 3 ? 1 : 60), &p, "room-1", token);
      CHECK_MSG(bb_node_admit_token(b, &p, token, len, now, 0, NULL, &err) == 0, "%s", err.message);
    }
    size_t k;
    poll_at(b, 2000000000ull, &k); /* 13's token is past */
    for (uint64_t id = 10; id < 15; id++) {
      size_t len = 0;
      uint8_t *env = forged(tmpl, tmpl_len, id, &len);
      bb_peer_id from = bb_peer_id_from_u64(id);
      CHECK(env && bb_node_deliver(b, &from, env, len, 2000000000ull, NULL) == 0);
      bb_buffer_free(NULL, env);
      poll_at(b, 2000000000ull, &k);
    }
    CHECK_EQ_INT(bb_node_counter(b, "book.claims_refused"), hook ? 0 : 3);
    bb_node_free(b);

    /* the artifact's seed, peer 100: refused until it holds a token */
    for (int token = 0; token < 2 && !hook; token++) {
      a.artifact = seeded;
      a.artifact_len = seeded_len;
      a.targets = (const char *[]){"Seeded"};
      bb_node *n = NULL;
      CHECK_MSG(bb_install(&a, &n, NULL, &err) == 0, "%s", err.message);
      if (!n) continue;
      if (token) {
        bb_peer_id p = bb_peer_id_from_u64(100);
        uint8_t t[BB_JOIN_TOKEN_MAX_BYTES];
        size_t len = bbt_make_token(&op, BB_JOIN_CLIENT, now + 60, &p, "room-1", t);
        CHECK(bb_node_admit_token(n, &p, t, len, now, 0, NULL, NULL) == 0);
      }
      CHECK(bb_node_run_bootstrap(n, 0, NULL) == 0);
      poll_at(n, 0, &k);
      CHECK_EQ_INT(bb_node_counter(n, "book.refused"), token ? 0 : 1);
      bb_node_free(n);
    }
  }
  free(seeded);
  free(tmpl);
  bb_registry_free(reg);
}

/* ---- snapshots -------------------------------------------------------------------------- */

static bb_node *sink_node(uint64_t id, const bb_registry *reg, const bb_node_config *cfg) {
  return install_peer(fednet, fednet_len, id, SINK, 1, reg, cfg);
}

/* The book's send times and use ticks survive a snapshot: the restored node evicts the
 * same entry the first one would have. */
static void test_snapshot_keeps_use_order(void) {
  bb_registry *reg = stub_registry();
  bb_node_config cfg = {.struct_size = sizeof cfg, .max_peers = 3};
  bb_node *a = install_peer(fednet, fednet_len, 1, SENDER, 1, reg, &cfg);
  bb_node *b = install_peer(fednet, fednet_len, 1, SENDER, 1, reg, &cfg);
  if (a && b) {
    add_p2p(a, 10);
    add_p2p(a, 11);
    CHECK(has_address(a, 10)); /* 11 is now the least recent */
    uint8_t *snap = NULL;
    size_t len = 0;
    bb_error err;
    CHECK_MSG(bb_node_snapshot(a, &snap, &len, &err) == 0, "%s", err.message);
    CHECK_MSG(bb_node_restore(b, snap, len, &err) == 0, "%s", err.message);
    add_p2p(b, 12);
    CHECK(!has_address(b, 11) && has_address(b, 10) && has_address(b, 12));
    /* a node with a smaller book refuses the snapshot */
    bb_node_config small = {.struct_size = sizeof small, .max_peers = 2};
    bb_node *c = install_peer(fednet, fednet_len, 1, SENDER, 1, reg, &small);
    CHECK_EQ_INT(bb_node_restore(c, snap, len, &err), BB_ERR_MALFORMED);
    CHECK_MSG(strstr(err.message, "more peers than this node's max_peers") != NULL, "%s", err.message);
    bb_node_free(c);
    bb_buffer_free(NULL, snap);
  }
  bb_node_free(a);
  bb_node_free(b);
  bb_registry_free(reg);
}

/* Skips what the snapshot writer puts before the address book (the header, the clock and
 * id counters, the bootstrap state, the counters); returns the book's offset. */
static size_t book_offset(const uint8_t *snap, size_t len, size_t n_targets) {
  bb_le_reader r = bb_le_reader_of(snap, len);
  uint64_t v;
  bb_le_read_span(&r, 8 + 4 + 4 + 8 + 8); /* magic, version, graphs, sites, targets hash */
  bb_le_read_u64(&r, &v);
  bb_le_read_span(&r, (size_t)v); /* the peer id */
  bb_le_read_span(&r, 6 * 8 + 1 + 4 + 8 + n_targets);
  uint64_t counters = 0;
  bb_le_read_u64(&r, &counters);
  for (uint64_t i = 0; i < counters; i++) {
    bb_le_read_u64(&r, &v);
    bb_le_read_span(&r, (size_t)v + 8);
  }
  return r.at;
}

/* A version 1 snapshot (no book clock, no send time or use tick per entry) is still
 * read: its entries take their order as their use order. */
static void test_version_1_snapshot(void) {
  bb_registry *reg = stub_registry();
  bb_node *a = sink_node(2, reg, NULL), *b = sink_node(2, reg, NULL);
  if (a && b) {
    add_p2p(a, 10);
    add_p2p(a, 11);
    uint8_t *snap = NULL;
    size_t len = 0;
    CHECK(bb_node_snapshot(a, &snap, &len, NULL) == 0);
    /* rewrite it as version 1 */
    size_t at = book_offset(snap, len, 1);
    uint8_t *old = malloc(len);
    size_t o = 0;
    memcpy(old, snap, at);
    bb_le_put_u32(old + 8, 1);
    size_t i = at + 8; /* past the book clock */
    uint64_t n_peers = bb_le_get_u64(snap + i);
    memcpy(old + o + at, snap + i, 8);
    o = at + 8;
    i += 8;
    for (uint64_t p = 0; p < n_peers; p++) {
      uint64_t plen = bb_le_get_u64(snap + i);
      memcpy(old + o, snap + i, 8 + plen + 1); /* peer, blocked */
      o += 8 + plen + 1;
      i += 8 + plen + 1 + 1 + 8 + 8;           /* skip sent, sent_ns, last_used */
      uint64_t n_addrs = bb_le_get_u64(snap + i);
      size_t start = i;
      i += 8;
      for (uint64_t k = 0; k < n_addrs; k++) i += 8 + bb_le_get_u64(snap + i);
      memcpy(old + o, snap + start, i - start);
      o += i - start;
    }
    memcpy(old + o, snap + i, len - 8 - i);
    o += len - 8 - i;
    bb_le_put_u64(old + o, bbi_fnv1a64(old, o));
    o += 8;
    bb_error err;
    CHECK_MSG(bb_node_restore(b, old, o, &err) == 0, "%s", err.message);
    /* and version 3 is not a format this build knows */
    bb_le_put_u32(old + 8, 3);
    bb_le_put_u64(old + o - 8, bbi_fnv1a64(old, o - 8));
    bb_node *c = sink_node(2, reg, NULL);
    CHECK_EQ_INT(bb_node_restore(c, old, o, &err), BB_ERR_MALFORMED);
    CHECK(strstr(err.message, "unknown snapshot version") != NULL);
    bb_node_free(c);
    free(old);
    bb_buffer_free(NULL, snap);
  }
  bb_node_free(a);
  bb_node_free(b);
  bb_registry_free(reg);
}

int main(void) {
  bb_error err;
  CHECK_MSG(bb_example_compile(&BB_EXAMPLE_MULTI_TARGET_NETWORK, 0, &fednet, &fednet_len, &err) == 0, "%s",
            err.message);
  if (!fednet) return bb_test_finish();
  RUN(test_strangers_cannot_fill_the_book);
  RUN(test_full_book_evicts_the_least_recently_used);
  RUN(test_eviction_order);
  RUN(test_graph_insert_goes_through_admission);
  RUN(test_join_tokens_decide_the_book);
  RUN(test_snapshot_keeps_use_order);
  RUN(test_version_1_snapshot);
  bb_buffer_free(NULL, fednet);
  return bb_test_finish();
}
