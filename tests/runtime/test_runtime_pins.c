/* Byte pins of the runtime's own formats: a snapshot of a node with parked work (values,
 * executions, a pending operation, Interval and component timers, counters, the address
 * book with a blocked peer, component state), which also restores and saves back
 * unchanged, a snapshot holding a replay window, an envelope a Send wrote, a control
 * message's envelope, and the seed a component gets from its slot name. Each is an
 * FNV-1a-64 (or the value itself) that must never change without a reason: peers and
 * saved snapshots of other builds depend on these bytes. */
#include "programs/examples.h"
#include "rttest.h"
#include "util/hash.h"

/* ---- a model that counts, sets a far timer per call and answers later ------------------ */

typedef struct counter {
  float count;
} counter;

static uint64_t deferred;
static float deferred_value;
static uint64_t last_seed; /* what create got: derived from the node seed and the slot name */

static int counter_create(const bb_component_init *init, void **self, bb_error *err) {
  (void)err;
  last_seed = init->seed;
  *self = calloc(1, sizeof(counter));
  return *self ? 0 : BB_ERR_NOMEM;
}
static void counter_destroy(void *self) { free(self); }
static int counter_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  counter *c = self;
  if (strcmp(call->op_type, "Params") != 0) return bb_error_set(err, BB_ERR_UNSUPPORTED, "Counter: %s", call->op_type);
  c->count += 1 + (float)(bb_ctx_random(ctx) % 3);
  bb_ctx_count(ctx, "counter.calls", 1);
  int rc = bb_ctx_set_timer(ctx, bb_ctx_now(ctx) + 10000000000ull, (uint64_t)c->count, err);
  if (rc) return rc;
  deferred = bb_ctx_defer(ctx);
  deferred_value = c->count;
  return BB_LATER;
}
static int counter_save(const void *self, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  (void)err;
  *out = alloc->malloc(sizeof(float), alloc->user_data);
  if (!*out) return BB_ERR_NOMEM;
  memcpy(*out, &((const counter *)self)->count, sizeof(float));
  *len = sizeof(float);
  return 0;
}
static int counter_load(void *self, const uint8_t *data, size_t len, bb_error *err) {
  if (len != sizeof(float)) return bb_error_set(err, BB_ERR_MALFORMED, "Counter: state of %zu bytes", len);
  memcpy(&((counter *)self)->count, data, sizeof(float));
  return 0;
}
static const bb_component_type COUNTER = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "Counter",
    .roles = 1u << BB_ROLE_MODEL,
    .create = counter_create,
    .destroy = counter_destroy,
    .invoke = counter_invoke,
    .save = counter_save,
    .load = counter_load,
};

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};

/* ---- a model that sends a control message to peer 5 whenever it is asked -------------- */

static int pinger_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  (void)self;
  bb_peer_id to = bb_peer_id_from_u64(5);
  int rc = bb_ctx_send_message(ctx, &to, "ping", (const uint8_t *)"hello", 5, err);
  if (rc) return rc;
  float one = 1;
  return (call->outputs[0] = f32_val(&one, 1)) ? 0 : BB_ERR_NOMEM;
}
static const bb_component_type PINGER = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "Pinger",
    .roles = 1u << BB_ROLE_MODEL,
    .create = counter_create,
    .destroy = counter_destroy,
    .invoke = pinger_invoke,
};

static int bind_pinger(bb_compiler *c, const void *user, bb_error *err) {
  (void)user;
  return bb_compiler_bind_model(c, "model", "Pinger", NULL, err);
}

/* Tick every 10 ms: the model's count as "p", through a function call so the parked
 * state holds a caller and its body. */
static void tick_body(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "p", bb_rec_model_params_after(g, &MODEL, bb_rec_interval(g, 10000000)));
}
static const bb_module TICK = {sizeof(bb_module), "Tick", tick_body, NULL, NULL, NULL, 0};
static const bb_module *const LOOP_SUBS[] = {&TICK};
static void loop_body(bb_rec *g, void *user) {
  (void)user;
  bb_call tick = bb_rec_call(g, &TICK, NULL, 0);
  bb_rec_output(g, "p", bb_rec_pass_through(g, bb_rec_call_output(g, tick, "p")));
}
static const bb_module LOOP = {sizeof(bb_module), "Loop", loop_body, NULL, NULL, LOOP_SUBS, 1};

static int bind_counter(bb_compiler *c, const void *user, bb_error *err) {
  (void)user;
  return bb_compiler_bind_model(c, "model", "Counter", NULL, err);
}

static uint64_t fnv(const uint8_t *p, size_t len) { return bbi_fnv1a64(p, len); }

/* ---- pins --------------------------------------------------------------------------------- */

static void test_snapshot_with_parked_work(void) {
  size_t len = 0;
  uint8_t *artifact = compile_test_module(&LOOP, bind_counter, NULL, &len);
  if (!artifact) return;
  bb_registry *reg = bb_registry_new(NULL);
  CHECK(reg && bb_registry_add(reg, &COUNTER, NULL) == 0);
  bb_node_config cfg = {.struct_size = sizeof cfg, .seed = 77};
  const char *targets[] = {"Loop"};
  bb_node *n = install_peer(artifact, len, 1, targets, 1, reg, &cfg);
  if (n) {
    /* the slot's seed: the node seed xor FNV-1a-32("model") (0xb08b665a) times 2^64/φ */
    CHECK_MSG(last_seed == (77 ^ 0xb08b665aull * 0x9E3779B97F4A7C15ull), "seed 0x%016" PRIx64, last_seed);
    bb_peer_id p5 = bb_peer_id_from_u64(5), p6 = bb_peer_id_from_u64(6);
    bb_address a5 = p2p_address(&p5), a6 = p2p_address(&p6);
    CHECK(bb_node_add_peer(n, &p5, &a5, NULL) == 0 && bb_node_add_peer(n, &p6, &a6, NULL) == 0);
    CHECK(bb_node_block_peer(n, &p6, true, NULL) == 0);
    bb_error err;
    CHECK_MSG(bb_node_invoke(n, "Loop", NULL, 0, 0, &err) == 0, "%s", err.message);
    for (int t = 0; t < 12; t++) {
      const bb_step *s;
      size_t k;
      CHECK(bb_node_poll(n, (uint64_t)t * 10000000, &s, &k, NULL) == 0);
      if (t == 11) break; /* the last tick stays parked */
      bb_val *v = f32_val(&deferred_value, 1);
      CHECK(bb_node_complete(n, deferred, &v, 1, NULL) == 0);
      bb_val_release(v);
      CHECK(bb_node_poll(n, (uint64_t)t * 10000000, &s, &k, NULL) == 0);
    }
    bb_node_stats st;
    bb_node_stats_get(n, &st);
    CHECK(st.pending_async == 1 && st.timers > 2);
    uint8_t *snap = NULL;
    size_t snap_len = 0;
    CHECK_MSG(bb_node_snapshot(n, &snap, &snap_len, &err) == 0, "%s", err.message);
    if (snap)
      CHECK_MSG(snap_len == 1097 && fnv(snap, snap_len) == 0x1e031d4bc5e5b79full, "%zu bytes, FNV-1a-64 0x%016" PRIx64,
                snap_len, fnv(snap, snap_len));
    /* the pinned bytes (what earlier builds wrote) restore, and save back unchanged */
    bb_node *again = install_peer(artifact, len, 1, targets, 1, reg, &cfg);
    uint8_t *resaved = NULL;
    size_t resaved_len = 0;
    CHECK_MSG(snap && again && bb_node_restore(again, snap, snap_len, &err) == 0, "%s", err.message);
    CHECK_MSG(again && bb_node_snapshot(again, &resaved, &resaved_len, &err) == 0, "%s", err.message);
    CHECK(resaved && resaved_len == snap_len && memcmp(resaved, snap, snap_len) == 0);
    bb_buffer_free(NULL, resaved);
    bb_node_free(again);
    bb_buffer_free(NULL, snap);
    bb_node_free(n);
  }
  bb_registry_free(reg);
  free(artifact);
}

/* A sender's envelope, and the receiver's snapshot after it and its replay: the replay
 * window, the counters (the address the envelope claims for its sender is not believed:
 * the receiver does not know the sender). */
static void test_envelope_and_replay_window(void) {
  uint8_t *artifact = NULL;
  size_t len = 0;
  bb_error err;
  CHECK_MSG(bb_example_compile(&BB_EXAMPLE_MULTI_TARGET_NETWORK, 0, &artifact, &len, &err) == 0, "%s", err.message);
  if (!artifact) return;
  bb_registry *reg = stub_registry();
  const char *ta[] = {"FedNetwork"}, *tb[] = {"FedNetwork_sink_peers"};
  bb_node *a = install_peer(artifact, len, 1, ta, 1, reg, NULL);
  bb_node *b = install_peer(artifact, len, 2, tb, 1, reg, NULL);
  bb_peer_id pa = bb_peer_id_from_u64(1), pb = bb_peer_id_from_u64(2);
  bb_address ab = p2p_address(&pb);
  if (a && b) {
    CHECK(bb_node_add_peer(a, &pb, &ab, NULL) == 0);
    bb_val *peers = bb_val_peers(NULL, &pb, 1);
    bb_named_value in = {"sink_peers", peers};
    CHECK(bb_node_invoke(a, "FedNetwork", &in, 1, 1000, NULL) == 0);
    bb_val_release(peers);
    const bb_step *s;
    size_t k;
    CHECK(bb_node_poll(a, 1000, &s, &k, NULL) == 0);
    uint8_t *env = NULL;
    size_t env_len = 0;
    for (size_t i = 0; i < k; i++)
      if (s[i].kind == BB_STEP_SEND) {
        env = malloc(s[i].len);
        memcpy(env, s[i].bytes, s[i].len);
        env_len = s[i].len;
      }
    CHECK(env != NULL);
    if (env) {
      /* schema_version 2; the fill addresses wire FedNetwork.prediction_port by its id */
      CHECK_MSG(env_len == 97 && fnv(env, env_len) == 0x60c7df2dba6ce68bull,
                "envelope: %zu bytes, FNV-1a-64 0x%016" PRIx64, env_len, fnv(env, env_len));
      bb_envelope *e = NULL;
      bb_address to;
      CHECK(bb_envelope_decode(env, env_len, NULL, NULL, &e, NULL) == 0);
      if (e) {
        CHECK(e->schema_version == 2 && e->n_fills == 1);
        CHECK(bb_address_from_bytes(e->fills[0].dest_suffix.data, e->fills[0].dest_suffix.len, &to, NULL) == 0);
        CHECK(to.n == 1 && to.seg[0].kind == BB_ADDR_SITE &&
              to.seg[0].value == bb_wire_id("FedNetwork.prediction_port"));
        bb_envelope_free(e, NULL);
      }
      for (int r = 0; r < 2; r++) {
        CHECK(bb_node_deliver(b, &pa, env, env_len, 2000 + (uint64_t)r, NULL) == 0);
        CHECK(bb_node_poll(b, 2000 + (uint64_t)r, &s, &k, NULL) == 0);
      }
      uint8_t *snap = NULL;
      size_t snap_len = 0;
      CHECK_MSG(bb_node_snapshot(b, &snap, &snap_len, &err) == 0, "%s", err.message);
      /* the counters include wire.bytes_received (2 × 97) */
      if (snap)
        CHECK_MSG(snap_len == 565 && fnv(snap, snap_len) == 0xdadf4cdb74d613d2ull,
                  "snapshot: %zu bytes, FNV-1a-64 0x%016" PRIx64, snap_len, fnv(snap, snap_len));
      bb_buffer_free(NULL, snap);
    }
    free(env);
  }
  bb_node_free(a);
  bb_node_free(b);
  bb_registry_free(reg);
  bb_buffer_free(NULL, artifact);
}

/* A control message's envelope (bb_ctx_send_message): built by the same builder as a
 * Send's, no correlation, one fill addressed /component/<n>/op/ping. */
static void test_control_message_envelope(void) {
  size_t len = 0;
  uint8_t *artifact = compile_test_module(&TICK, bind_pinger, NULL, &len);
  if (!artifact) return;
  bb_registry *reg = bb_registry_new(NULL);
  CHECK(reg && bb_registry_add(reg, &PINGER, NULL) == 0);
  const char *targets[] = {"Tick"};
  bb_node *n = install_peer(artifact, len, 1, targets, 1, reg, NULL);
  bb_peer_id p5 = bb_peer_id_from_u64(5);
  bb_address a5 = p2p_address(&p5);
  if (n && bb_node_add_peer(n, &p5, &a5, NULL) == 0 && bb_node_invoke(n, "Tick", NULL, 0, 0, NULL) == 0) {
    const bb_step *s;
    size_t k;
    CHECK(bb_node_poll(n, 0, &s, &k, NULL) == 0);
    const bb_step *send = NULL;
    for (size_t i = 0; i < k; i++)
      if (s[i].kind == BB_STEP_SEND) send = &s[i];
    CHECK(send != NULL);
    if (send)
      CHECK_MSG(send->len == 66 && fnv(send->bytes, send->len) == 0x450d77122735211full,
                "envelope: %zu bytes, FNV-1a-64 0x%016" PRIx64, send->len, fnv(send->bytes, send->len));
  }
  bb_node_free(n);
  bb_registry_free(reg);
  free(artifact);
}

int main(void) {
  RUN(test_snapshot_with_parked_work);
  RUN(test_control_message_envelope);
  RUN(test_envelope_and_replay_window);
  return bb_test_finish();
}
