/* Artifacts compiled apart talk over named wires: a Module receives what another Module's
 * network port sends (bb_rec_net_in), on its own peer or on one node beside it; a fill no
 * installed Recv listens to, a value of another type and an envelope of the positional
 * format are refused, reported and counted; wires that cannot be told apart (one name
 * declared with two types, two names with one id) are refused at compile and install;
 * and a node installed from a newer artifact takes over from the one it replaces. */
#include <inttypes.h>

#include "rttest.h"

/* Two names with one FNV-1a-64 (0x5e08d54d78217e0e), found by cycle-finding over
 * 16-hex-digit strings: the collision checks are exercised by a real collision. */
#define COLLIDING_A "bf13eaba83dea434"
#define COLLIDING_B "b3b828bb3655e2a7"

/* ---- the Modules ----------------------------------------------------------------------------- */

static void sender_body(bb_rec *g, void *user) {
  (void)user;
  bb_value x = bb_rec_input(g, "x", BB_TYPE_TENSOR_F32);
  bb_rec_net_out(g, "out", bb_rec_input(g, "peers", BB_TYPE_PEER_ID_VEC), x);
}

/* A receiver of "Sender.out" declaring `type` (user). */
static void receiver_body(bb_rec *g, void *user) {
  bb_value from;
  bb_value got = bb_rec_net_in(g, "Sender.out", (const char *)user, &from);
  bb_rec_output(g, "got", got);
  bb_rec_output(g, "from", from);
}

static void other_body(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "got", bb_rec_net_in(g, "Somebody.else", BB_TYPE_TENSOR_F32, NULL));
}

/* Receives from the wire named `user` (a tensor). */
static void named_in_body(bb_rec *g, void *user) {
  bb_rec_output(g, "got", bb_rec_net_in(g, (const char *)user, BB_TYPE_TENSOR_F32, NULL));
}

/* Sends x on the wire named `user`. */
static void named_out_body(bb_rec *g, void *user) {
  bb_value x = bb_rec_input(g, "x", BB_TYPE_TENSOR_F32);
  bb_rec_net_out_wire(g, "out", (const char *)user, bb_rec_input(g, "peers", BB_TYPE_PEER_ID_VEC), x);
}

static const bb_module SENDER = {sizeof(bb_module), "Sender", sender_body, NULL, NULL, NULL, 0};
static const bb_module RECEIVER = {sizeof(bb_module), "Receiver", receiver_body, NULL, (void *)BB_TYPE_TENSOR_F32,
                                   NULL, 0};
static const bb_module RECEIVER16 = {sizeof(bb_module), "Receiver16", receiver_body, NULL, (void *)BB_TYPE_TENSOR_F16,
                                     NULL, 0};
static const bb_module OTHER = {sizeof(bb_module), "Other", other_body, NULL, NULL, NULL, 0};
static const bb_module COLLIDE_A = {sizeof(bb_module), "CollideA", named_in_body, NULL, (void *)COLLIDING_A, NULL, 0};
static const bb_module COLLIDE_B = {sizeof(bb_module), "CollideB", named_in_body, NULL, (void *)COLLIDING_B, NULL, 0};
static const bb_module COLLIDE_SEND = {sizeof(bb_module), "CollideSend", named_out_body, NULL, (void *)COLLIDING_A,
                                       NULL, 0};

static int no_bindings(bb_compiler *c, const void *user, bb_error *err) {
  (void)c, (void)user, (void)err;
  return 0;
}

typedef struct artifact {
  uint8_t *bytes;
  size_t len;
} artifact;

static artifact compile(const bb_module *m) {
  artifact a = {NULL, 0};
  a.bytes = compile_test_module(m, no_bindings, NULL, &a.len);
  return a;
}

/* Installs artifacts[0..n) on one node as peer `id`, each with its Module's name as its
 * target; returns the node or NULL, the error kind in *kind and message in *err. */
static bb_node *install_apart(const artifact *arts, const char *const *targets, size_t n, uint64_t id,
                              bb_install_error_kind *kind, bb_error *err) {
  bb_install_artifact more[4];
  for (size_t i = 1; i < n; i++) more[i - 1] = (bb_install_artifact){arts[i].bytes, arts[i].len, &targets[i], 1};
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = bb_peer_id_from_u64(id);
  bb_address addr = p2p_address(&a.self);
  a.addresses = &addr;
  a.n_addresses = 1;
  a.artifact = arts[0].bytes;
  a.artifact_len = arts[0].len;
  a.targets = &targets[0];
  a.n_targets = 1;
  a.more = more;
  a.n_more = n - 1;
  bb_node *node = NULL;
  bb_install(&a, &node, kind, err);
  return node;
}

/* Invokes Sender on `node` (target `target`) with x = [1, 2, 3] to peer `to`; returns the
 * envelope it sends (malloc'd). */
static uint8_t *send_from(bb_node *node, const char *target, uint64_t to, size_t *len) {
  bb_peer_id pt = bb_peer_id_from_u64(to);
  bb_address at = p2p_address(&pt);
  CHECK(bb_node_add_peer(node, &pt, &at, NULL) == 0);
  bb_val *x = f32_val((const float[]){1, 2, 3}, 3), *peers = bb_val_peers(NULL, &pt, 1);
  bb_named_value in[2] = {{"x", x}, {"peers", peers}};
  bb_error err;
  CHECK_MSG(bb_node_invoke(node, target, in, 2, 1000, &err) == 0, "%s", err.message);
  bb_val_release(x);
  bb_val_release(peers);
  const bb_step *s;
  size_t n;
  CHECK(bb_node_poll(node, 1000, &s, &n, &err) == 0);
  uint8_t *env = NULL;
  for (size_t i = 0; i < n; i++)
    if (s[i].kind == BB_STEP_SEND && !env) {
      CHECK(bb_peer_id_equal(&s[i].peer, &pt));
      env = malloc(s[i].len);
      memcpy(env, s[i].bytes, s[i].len);
      *len = s[i].len;
    }
  CHECK(env != NULL);
  return env;
}

static const bb_step *find_step(const bb_step *s, size_t n, bb_step_kind kind, const char *topic) {
  for (size_t i = 0; i < n; i++)
    if (s[i].kind == kind && (!topic || (s[i].topic && strcmp(s[i].topic, topic) == 0))) return &s[i];
  return NULL;
}

/* ---- talking apart --------------------------------------------------------------------------- */

static void test_artifacts_compiled_apart_talk(void) {
  artifact tx = compile(&SENDER), rx = compile(&RECEIVER);
  if (!tx.bytes || !rx.bytes) goto out;
  /* each declares its half of the wire, with its type */
  bb_model *m = NULL;
  CHECK(bb_model_decode(tx.bytes, tx.len, NULL, NULL, &m, NULL) == 0);
  if (m) CHECK_STR(bb_kv_get(&m->metadata, BB_KEY_WIRE_OUT_PREFIX "Sender.out"),
                   "Tensor|ai.bytesandbrains.tensor.f32|0xd004f177a0b61c58");
  bb_model_free(m);
  CHECK(bb_model_decode(rx.bytes, rx.len, NULL, NULL, &m, NULL) == 0);
  if (m) CHECK_STR(bb_kv_get(&m->metadata, BB_KEY_WIRE_IN_PREFIX "Sender.out"),
                   "Tensor|ai.bytesandbrains.tensor.f32|0xd004f177a0b61c58");
  bb_model_free(m);

  const char *ta[] = {"Sender"}, *tb[] = {"Receiver"};
  bb_node *a = install_peer(tx.bytes, tx.len, 1, ta, 1, NULL, NULL);
  bb_node *b = install_peer(rx.bytes, rx.len, 2, tb, 1, NULL, NULL);
  if (a && b) {
    size_t len = 0;
    uint8_t *env = send_from(a, "Sender", 2, &len);
    bb_error err;
    bb_peer_id pa = bb_peer_id_from_u64(1);
    CHECK_MSG(env && bb_node_deliver(b, &pa, env, len, 2000, &err) == 0, "%s", err.message);
    const bb_step *s;
    size_t n;
    CHECK(bb_node_poll(b, 2000, &s, &n, &err) == 0);
    const bb_step *got = find_step(s, n, BB_STEP_APP_EVENT, "got"), *from = find_step(s, n, BB_STEP_APP_EVENT, "from");
    CHECK(got && bb_val_kind_of(got->value) == BB_VAL_TENSOR && bb_val_as_tensor(got->value)->numel == 3);
    if (got) CHECK(((const float *)bb_tensor_data(bb_val_as_tensor(got->value)))[2] == 3.0f);
    CHECK(from && bb_val_kind_of(from->value) == BB_VAL_PEER && bb_peer_id_equal(&bb_val_as_peers(from->value)[0], &pa));
    CHECK_EQ_INT(bb_node_counter(b, "wire.fills_delivered"), 1);
    CHECK_EQ_INT(bb_node_counter(b, "wire.rejected"), 0);
    free(env);
  }
  bb_node_free(a);
  bb_node_free(b);
out:
  free(tx.bytes);
  free(rx.bytes);
}

/* Delivers what Sender sends to a node of `module` and returns the one refusal step's
 * reason and detail (copied into the buffers). */
static void refused_by(const bb_module *module, const char *target, char *reason, char *detail, bb_node **keep) {
  artifact tx = compile(&SENDER), rx = compile(module);
  const char *ta[] = {"Sender"}, *tb[] = {target};
  bb_node *a = tx.bytes ? install_peer(tx.bytes, tx.len, 1, ta, 1, NULL, NULL) : NULL;
  bb_node *b = rx.bytes ? install_peer(rx.bytes, rx.len, 2, tb, 1, NULL, NULL) : NULL;
  *reason = *detail = 0;
  if (a && b) {
    size_t len = 0;
    uint8_t *env = send_from(a, "Sender", 2, &len);
    bb_peer_id pa = bb_peer_id_from_u64(1);
    CHECK(env && bb_node_deliver(b, &pa, env, len, 2000, NULL) == 0);
    const bb_step *s;
    size_t n;
    CHECK(bb_node_poll(b, 2000, &s, &n, NULL) == 0);
    CHECK_EQ_INT(count_steps(s, n, BB_STEP_WIRE_RECEIVE_FAILED), 1);
    CHECK_EQ_INT(count_steps(s, n, BB_STEP_APP_EVENT), 0);
    const bb_step *f = find_step(s, n, BB_STEP_WIRE_RECEIVE_FAILED, NULL);
    if (f) {
      snprintf(reason, 64, "%s", f->reason);
      snprintf(detail, 512, "%s", f->detail);
      CHECK(f->has_peer && bb_peer_id_equal(&f->peer, &pa) && f->fill_index == 0);
    }
    free(env);
  }
  bb_node_free(a);
  *keep = b;
  free(tx.bytes);
  free(rx.bytes);
}

static void test_unknown_wire_is_refused_at_the_receiver(void) {
  char reason[64], detail[512], want[64];
  bb_node *b = NULL;
  refused_by(&OTHER, "Other", reason, detail, &b);
  CHECK_STR(reason, "unknown_site");
  snprintf(want, sizeof want, "wire 0x%016" PRIx64, bb_wire_id("Sender.out"));
  CHECK_MSG(strstr(detail, want) != NULL, "%s", detail);
  if (b) {
    CHECK_EQ_INT(bb_node_counter(b, "wire.unknown_site"), 1);
    CHECK_EQ_INT(bb_node_counter(b, "wire.rejected"), 1);
    CHECK_EQ_INT(bb_node_counter(b, "wire.fills_delivered"), 0);
  }
  bb_node_free(b);
}

static void test_a_fill_of_another_type_is_refused(void) {
  char reason[64], detail[512];
  bb_node *b = NULL;
  refused_by(&RECEIVER16, "Receiver16", reason, detail, &b);
  CHECK_STR(reason, "type_mismatch");
  CHECK_MSG(strstr(detail, "wire `Sender.out` carries ai.bytesandbrains.tensor.f16") != NULL &&
                strstr(detail, "float32") != NULL,
            "%s", detail);
  if (b) {
    CHECK_EQ_INT(bb_node_counter(b, "wire.type_mismatch"), 1);
    CHECK_EQ_INT(bb_node_counter(b, "wire.rejected"), 1);
  }
  bb_node_free(b);
}

/* An envelope of the positional format (schema 1, or 0: the field left out) names sites
 * by their place in the sender's artifact: refused whole, never routed. */
static void test_old_schema_is_refused(void) {
  artifact tx = compile(&SENDER), rx = compile(&RECEIVER);
  const char *ta[] = {"Sender"}, *tb[] = {"Receiver"};
  bb_node *a = tx.bytes ? install_peer(tx.bytes, tx.len, 1, ta, 1, NULL, NULL) : NULL;
  bb_node *b = rx.bytes ? install_peer(rx.bytes, rx.len, 2, tb, 1, NULL, NULL) : NULL;
  if (a && b) {
    size_t len = 0;
    uint8_t *env = send_from(a, "Sender", 2, &len);
    bb_envelope *e = NULL;
    CHECK(env && bb_envelope_decode(env, len, NULL, NULL, &e, NULL) == 0);
    for (uint32_t v = 0; e && v < 2; v++) {
      e->schema_version = v;
      uint8_t *old;
      size_t old_len;
      CHECK(bb_envelope_encode(e, NULL, &old, &old_len, NULL) == 0);
      bb_error err;
      bb_peer_id pa = bb_peer_id_from_u64(1);
      CHECK_EQ_INT(bb_node_deliver(b, &pa, old, old_len, 2000, &err), BB_ERR_UNSUPPORTED);
      char want[64];
      snprintf(want, sizeof want, "schema_version %u numbers sites", v);
      CHECK_MSG(strstr(err.message, want) && strstr(err.message, "older bytesandbrains"), "%s", err.message);
      bb_buffer_free(NULL, old);
    }
    CHECK_EQ_INT(bb_node_counter(b, "wire.old_schema"), 2);
    CHECK_EQ_INT(bb_node_counter(b, "wire.invalid_envelopes"), 2);
    const bb_step *s;
    size_t n;
    CHECK(bb_node_poll(b, 2000, &s, &n, NULL) == 0 && n == 0);
    bb_envelope_free(e, NULL);
    free(env);
  }
  bb_node_free(a);
  bb_node_free(b);
  free(tx.bytes);
  free(rx.bytes);
}

/* Two artifacts on one node: the Sender's envelope to this very peer lands in the
 * Receiver beside it. */
static void test_two_artifacts_on_one_node(void) {
  artifact arts[2] = {compile(&SENDER), compile(&RECEIVER)};
  const char *targets[2] = {"Sender", "Receiver"};
  bb_install_error_kind kind;
  bb_error err;
  bb_node *n = arts[0].bytes && arts[1].bytes ? install_apart(arts, targets, 2, 3, &kind, &err) : NULL;
  CHECK_MSG(n != NULL, "%s", err.message);
  if (n) {
    CHECK_EQ_INT(bb_node_target_count(n), 2);
    CHECK(strncmp(bb_node_target(n, 1), "Receiver#", 9) == 0);
    size_t len = 0;
    uint8_t *env = send_from(n, "Sender", 3, &len);
    bb_peer_id self = bb_peer_id_from_u64(3);
    CHECK(env && bb_node_deliver(n, &self, env, len, 2000, &err) == 0);
    const bb_step *s;
    size_t k;
    CHECK(bb_node_poll(n, 2000, &s, &k, &err) == 0);
    const bb_step *got = find_step(s, k, BB_STEP_APP_EVENT, "got");
    CHECK(got && bb_val_kind_of(got->value) == BB_VAL_TENSOR && bb_val_as_tensor(got->value)->numel == 3);
    if (got) CHECK(strncmp(got->module, "Receiver#", 9) == 0);
    free(env);
  }
  bb_node_free(n);
  /* the same artifact twice: its partitions could not be told apart */
  artifact twice[2] = {arts[1], arts[1]};
  const char *both[2] = {"Receiver", "Receiver"};
  n = arts[1].bytes ? install_apart(twice, both, 2, 3, &kind, &err) : NULL;
  CHECK(n == NULL && kind == BB_INSTALL_INVALID_ARGUMENT && strstr(err.message, "is in artifacts 0 and 1"));
  bb_node_free(n);
  free(arts[0].bytes);
  free(arts[1].bytes);
}

/* What a node cannot tell apart is refused at install, and what one artifact cannot tell
 * apart at compile. */
static void test_wire_conflicts(void) {
  bb_install_error_kind kind;
  bb_error err;
  /* one wire received as two types */
  artifact two_types[2] = {compile(&RECEIVER), compile(&RECEIVER16)};
  const char *rr[2] = {"Receiver", "Receiver16"};
  bb_node *n = install_apart(two_types, rr, 2, 4, &kind, &err);
  CHECK(n == NULL && kind == BB_INSTALL_WIRE_CONFLICT);
  CHECK_MSG(strstr(err.message, "wire `Sender.out` is received as `ai.bytesandbrains.tensor.f32`"), "%s", err.message);
  /* two names with one id, received */
  artifact colliding[2] = {compile(&COLLIDE_A), compile(&COLLIDE_B)};
  const char *ab[2] = {"CollideA", "CollideB"};
  n = colliding[0].bytes && colliding[1].bytes ? install_apart(colliding, ab, 2, 4, &kind, &err) : NULL;
  CHECK(n == NULL && kind == BB_INSTALL_WIRE_CONFLICT);
  CHECK_MSG(strstr(err.message, "have the same id 0x5e08d54d78217e0e"), "%s", err.message);
  /* ... sent by one artifact and received by the other */
  artifact send_recv[2] = {compile(&COLLIDE_SEND), colliding[1]};
  const char *sb[2] = {"CollideSend", "CollideB"};
  n = send_recv[0].bytes ? install_apart(send_recv, sb, 2, 4, &kind, &err) : NULL;
  CHECK(n == NULL && kind == BB_INSTALL_WIRE_CONFLICT && strstr(err.message, "same id 0x5e08d54d78217e0e"));
  /* each alone installs */
  for (int i = 0; i < 2; i++) {
    bb_node *one = colliding[i].bytes ? install_apart(&colliding[i], &ab[i], 1, 4, &kind, &err) : NULL;
    CHECK_MSG(one != NULL, "%s", err.message);
    bb_node_free(one);
  }
  for (int i = 0; i < 2; i++) free(two_types[i].bytes), free(colliding[i].bytes);
  free(send_recv[0].bytes);
}

/* Both wires in one Module: the compile refuses it. */
static void both_colliding(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "a", bb_rec_net_in(g, COLLIDING_A, BB_TYPE_TENSOR_F32, NULL));
  bb_rec_output(g, "b", bb_rec_net_in(g, COLLIDING_B, BB_TYPE_TENSOR_F32, NULL));
}
/* A wire sent as f32 and received as f16 by one Module. */
static void self_disagrees(bb_rec *g, void *user) {
  (void)user;
  bb_value x = bb_rec_input(g, "x", BB_TYPE_TENSOR_F32);
  bb_rec_net_out_wire(g, "out", "Loop.w", bb_rec_input(g, "peers", BB_TYPE_PEER_ID_VEC), x);
  bb_rec_output(g, "got", bb_rec_net_in(g, "Loop.w", BB_TYPE_TENSOR_F16, NULL));
}

static void expect_compile_error(const bb_module *module, const char *want) {
  bb_model *m = NULL;
  bb_error err;
  uint8_t *bytes = NULL, *out = NULL;
  size_t len = 0, out_len = 0;
  CHECK(bb_module_build(module, NULL, &m, &err) == 0 && bb_model_encode(m, &bytes, &len, &err) == 0);
  bb_compiler *c = bb_compiler_new(NULL);
  CHECK(bb_compiler_compile(c, bytes, len, &out, &out_len, &err) == BB_ERR_TYPE);
  CHECK_EQ_INT(bb_compiler_error_kind(c), BB_COMPILE_WIRE_CONFLICT);
  CHECK_MSG(strstr(err.message, want) != NULL, "%s", err.message);
  bb_compiler_free(c);
  bb_buffer_free(NULL, out);
  free(bytes);
  bb_model_free(m);
}

static void test_compile_refuses_what_cannot_be_told_apart(void) {
  const bb_module both = {sizeof(bb_module), "Both", both_colliding, NULL, NULL, NULL, 0};
  expect_compile_error(&both, "WireConflict: wires `" COLLIDING_B "` and `" COLLIDING_A "` have the same id");
  const bb_module loop = {sizeof(bb_module), "Loop", self_disagrees, NULL, NULL, NULL, 0};
  expect_compile_error(&loop, "wire `Loop.w` is sent as `ai.bytesandbrains.tensor.f32`");
}

/* ---- taking over ------------------------------------------------------------------------------ */

/* Tally: a Model whose Params counts its calls and whose timer adds 100; save/load keep
 * the count. */
typedef struct tally {
  float count;
} tally;

static int tally_create(const bb_component_init *init, void **self, bb_error *err) {
  (void)init, (void)err;
  *self = calloc(1, sizeof(tally));
  return *self ? 0 : BB_ERR_NOMEM;
}
static void tally_destroy(void *self) { free(self); }
static int tally_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  tally *t = self;
  t->count += 1;
  int rc = bb_ctx_set_timer(ctx, bb_ctx_now(ctx) + 5000, 7, err);
  if (!rc) call->outputs[0] = f32_val(&t->count, 1);
  return rc;
}
static int tally_timer(void *self, bb_ctx *ctx, uint64_t token, bb_error *err) {
  tally *t = self;
  t->count += 100;
  bb_val *v = f32_val(&t->count, 1);
  int rc = token == 7 && v ? bb_ctx_emit(ctx, "tally", v, err) : BB_ERR_INVALID_ARGUMENT;
  bb_val_release(v);
  return rc;
}
static int tally_save(const void *self, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  (void)err;
  if (!(*out = alloc->malloc(sizeof(float), alloc->user_data))) return BB_ERR_NOMEM;
  memcpy(*out, &((const tally *)self)->count, sizeof(float));
  *len = sizeof(float);
  return 0;
}
static int tally_load(void *self, const uint8_t *data, size_t len, bb_error *err) {
  if (len != sizeof(float)) return bb_error_set(err, BB_ERR_MALFORMED, "Tally: %zu bytes", len);
  memcpy(&((tally *)self)->count, data, sizeof(float));
  return 0;
}
static const bb_component_type TALLY = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "Tally",
    .roles = 1u << BB_ROLE_MODEL,
    .create = tally_create,
    .destroy = tally_destroy,
    .invoke = tally_invoke,
    .on_timer = tally_timer,
    .save = tally_save,
    .load = tally_load,
};

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};

/* v1 counts and sends the count; v2 does the same and also reports it (one more op, one
 * more output, the same wire). */
static void counter_body(bb_rec *g, void *user) {
  bb_value count = bb_rec_model_params_after(g, &MODEL, bb_rec_input(g, "go", BB_TYPE_TRIGGER));
  bb_rec_net_out_wire(g, "out", "Counter.count", bb_rec_input(g, "peers", BB_TYPE_PEER_ID_VEC), count);
  if (user) bb_rec_output(g, "reported", bb_rec_pass_through(g, count));
}
static const bb_module COUNTER_V1 = {sizeof(bb_module), "Counter", counter_body, NULL, NULL, NULL, 0};
static const bb_module COUNTER_V2 = {sizeof(bb_module), "Counter", counter_body, NULL, (void *)"v2", NULL, 0};

static int bind_tally(bb_compiler *c, const void *user, bb_error *err) {
  (void)user;
  return bb_compiler_bind_model(c, "model", "Tally", NULL, err);
}

/* Runs Counter once on `n` at `now` and returns the request id of what it sent. */
static uint64_t count_once(bb_node *n, uint64_t now) {
  bb_peer_id to = bb_peer_id_from_u64(9);
  bb_val *go = bb_val_trigger(NULL), *peers = bb_val_peers(NULL, &to, 1);
  bb_named_value in[2] = {{"go", go}, {"peers", peers}};
  CHECK(bb_node_invoke(n, "Counter", in, 2, now, NULL) == 0);
  bb_val_release(go);
  bb_val_release(peers);
  const bb_step *s;
  size_t k;
  CHECK(bb_node_poll(n, now, &s, &k, NULL) == 0);
  uint64_t req = 0;
  for (size_t i = 0; i < k; i++) {
    bb_envelope *e = NULL;
    if (s[i].kind == BB_STEP_SEND && bb_envelope_decode(s[i].bytes, s[i].len, NULL, NULL, &e, NULL) == 0) {
      req = e->wire_req_id;
      bb_envelope_free(e, NULL);
    }
  }
  return req;
}

static void test_take_over(void) {
  bb_registry *reg = bb_registry_new(NULL);
  CHECK(reg && bb_registry_add(reg, &TALLY, NULL) == 0);
  size_t l1 = 0, l2 = 0;
  uint8_t *v1 = compile_test_module(&COUNTER_V1, bind_tally, NULL, &l1);
  uint8_t *v2 = compile_test_module(&COUNTER_V2, bind_tally, NULL, &l2);
  const char *t[] = {"Counter"};
  bb_node *old = v1 ? install_peer(v1, l1, 5, t, 1, reg, NULL) : NULL;
  bb_node *fresh = v2 ? install_peer(v2, l2, 5, t, 1, reg, NULL) : NULL;
  bb_node *stranger = v2 ? install_peer(v2, l2, 6, t, 1, reg, NULL) : NULL;
  if (old && fresh && stranger) {
    bb_peer_id nine = bb_peer_id_from_u64(9);
    bb_address at = p2p_address(&nine);
    CHECK(bb_node_add_peer(old, &nine, &at, NULL) == 0);
    bb_peer_id eight = bb_peer_id_from_u64(8);
    CHECK(bb_node_block_peer(old, &eight, true, NULL) == 0);
    CHECK(count_once(old, 1000) == 1 && count_once(old, 2000) == 2);
    bb_error err;
    CHECK(bb_node_take_over(stranger, old, &err) == BB_ERR_INVALID_ARGUMENT && strstr(err.message, "different peers"));
    CHECK_MSG(bb_node_take_over(fresh, old, &err) == 0, "%s", err.message);
    CHECK(bb_node_take_over(fresh, old, &err) == BB_ERR_INVALID_ARGUMENT); /* it now has timers */
    /* the count goes on, the request ids do not repeat, the peer stays known */
    tally *tl = bb_node_component(fresh, "model", NULL);
    CHECK(tl && tl->count == 2.0f);
    CHECK_EQ_INT(count_once(fresh, 3000), 3);
    CHECK(tl && tl->count == 3.0f);
    CHECK_EQ_INT(bb_node_counter(fresh, "send.envelopes"), 3);
    /* the old node's pending timer (set at 2000, due at 7000) fires in the new node */
    const bb_step *s;
    size_t k;
    CHECK(bb_node_poll(fresh, 7000, &s, &k, NULL) == 0);
    const bb_step *e = find_step(s, k, BB_STEP_APP_EVENT, "tally");
    CHECK(e && bb_val_kind_of(e->value) == BB_VAL_TENSOR && ((const float *)bb_tensor_data(bb_val_as_tensor(e->value)))[0] == 103.0f);
    /* the old node is left as it was */
    tally *ot = bb_node_component(old, "model", NULL);
    CHECK(ot && ot->count == 2.0f);
  }
  bb_node_free(old);
  bb_node_free(fresh);
  bb_node_free(stranger);
  free(v1);
  free(v2);
  bb_registry_free(reg);
}

int main(void) {
  RUN(test_artifacts_compiled_apart_talk);
  RUN(test_unknown_wire_is_refused_at_the_receiver);
  RUN(test_a_fill_of_another_type_is_refused);
  RUN(test_old_schema_is_refused);
  RUN(test_two_artifacts_on_one_node);
  RUN(test_wire_conflicts);
  RUN(test_compile_refuses_what_cannot_be_told_apart);
  RUN(test_take_over);
  return bb_test_finish();
}
