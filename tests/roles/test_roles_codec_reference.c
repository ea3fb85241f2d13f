/* Codecs with a reference, as a federated client and server use them: the client encodes
 * its trained model against the global model it trained from, the server decodes against
 * the same model (or without one, to get the update itself). Every shipped codec round
 * trips within its bound of the difference; TopKCodec keeps what it leaves out (error
 * feedback), so over rounds the sum of what arrives follows the sum of what was meant,
 * and its residual survives a snapshot; hostile bytes sent to a decoding node fail the op
 * and are counted by reason, as are the bytes encoded and decoded. */
#include <math.h>
#include <stdlib.h>

#include "../runtime/rttest.h"
#include "bb/roles.h"
#include "components/shipped.h"

static const bb_slot CODEC = {BB_ROLE_CODEC, "codec", NULL};

/* encoded = Encode(x, ref); decoded = Decode(encoded, ref); delta = Decode(encoded) */
static void against_body(bb_rec *g, void *user) {
  (void)user;
  bb_value x = bb_rec_input(g, "x", "ai.bytesandbrains.tensor.f32");
  bb_value ref = bb_rec_input(g, "ref", "ai.bytesandbrains.tensor.f32");
  bb_value y = bb_rec_codec_encode_against(g, &CODEC, x, ref);
  bb_rec_output(g, "encoded", y);
  bb_rec_output(g, "decoded", bb_rec_codec_decode_against(g, &CODEC, y, ref));
  bb_rec_output(g, "delta", bb_rec_codec_decode(g, &CODEC, y));
}
static const bb_module AGAINST = {sizeof(bb_module), "Against", against_body, NULL, NULL, NULL, 0};

/* what a server does with bytes a peer sent: decoded = Decode(y, ref) */
static void receive_body(bb_rec *g, void *user) {
  (void)user;
  bb_value y = bb_rec_input(g, "y", "ai.bytesandbrains.bytes");
  bb_value ref = bb_rec_input(g, "ref", "ai.bytesandbrains.tensor.f32");
  bb_rec_output(g, "decoded", bb_rec_codec_decode_against(g, &CODEC, y, ref));
}
static const bb_module RECEIVE = {sizeof(bb_module), "Receive", receive_body, NULL, NULL, NULL, 0};

typedef struct codec_binding {
  const char *type, *config;
} codec_binding;

static int configure(bb_compiler *c, const void *user, bb_error *err) {
  const codec_binding *b = user;
  static const bb_component_port ports[] = {{"in", "ai.bytesandbrains.tensor.f32"}, {"out", "ai.bytesandbrains.opaque"}};
  bb_component_decl d = {sizeof d, b->type, ports, 2, NULL, 0};
  int rc = bb_compiler_declare_component(c, &d, err);
  return rc ? rc : bb_compiler_bind_codec(c, "codec", b->type, b->config, err);
}

typedef struct codec_node {
  uint8_t *artifact;
  size_t len;
  bb_node *node;
  const char *module;
} codec_node;

static codec_node open_node(const bb_module *m, const char *type, const char *config) {
  codec_binding b = {type, config};
  codec_node n = {NULL, 0, NULL, m->name};
  n.artifact = compile_test_module(m, configure, &b, &n.len);
  const char *targets[] = {m->name};
  if (n.artifact) n.node = install_peer(n.artifact, n.len, 1, targets, 1, shipped_registry(), NULL);
  return n;
}

static void close_node(codec_node *n) {
  bb_node_free(n->node);
  free(n->artifact);
}

static bb_val *tensor_of(const float *x, int64_t n) {
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 1, &n);
  memcpy(bb_tensor_data(t), x, (size_t)n * sizeof *x);
  bb_val *v = bb_val_tensor(NULL, t);
  bb_tensor_release(t);
  return v;
}

/* What one run of the node gave: each output's value (new references) and failures. */
typedef struct run_result {
  bb_val *encoded, *decoded, *delta;
  size_t failed;
  char reason[128];
} run_result;

static void run_result_free(run_result *r) {
  bb_val_release(r->encoded);
  bb_val_release(r->decoded);
  bb_val_release(r->delta);
}

static run_result run(codec_node *n, const bb_named_value *in, size_t n_in, uint64_t now) {
  run_result r = {0};
  bb_error err;
  CHECK_MSG(bb_node_invoke(n->node, n->module, in, n_in, now, &err) == 0, "%s", err.message);
  const bb_step *steps;
  size_t ns;
  CHECK(bb_node_poll(n->node, now, &steps, &ns, &err) == 0);
  for (size_t i = 0; i < ns; i++) {
    const bb_step *s = &steps[i];
    if (s->kind == BB_STEP_OP_FAILED) {
      r.failed++;
      snprintf(r.reason, sizeof r.reason, "%s", s->detail ? s->detail : "");
    }
    if (s->kind != BB_STEP_APP_EVENT) continue;
    bb_val **slot = strcmp(s->topic, "encoded") == 0 ? &r.encoded : strcmp(s->topic, "decoded") == 0 ? &r.decoded : &r.delta;
    *slot = bb_val_retain(s->value);
  }
  return r;
}

static const float *floats(const bb_val *v) {
  return v && bb_val_kind_of(v) == BB_VAL_TENSOR ? bb_tensor_data(bb_val_as_tensor(v)) : NULL;
}

enum { N = 400 };

/* A global model and a trained one near it. */
static void model_pair(float *ref, float *x) {
  uint64_t s = 7;
  for (int i = 0; i < N; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    ref[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 20.0 - 10.0);
    x[i] = ref[i] + (float)(((int)(s >> 40) % 201) - 100) * 1e-4f;
  }
}

/* Decode(Encode(x, ref), ref) is x within `bound` of each difference; Decode alone is the
 * difference; the encoding is `size` bytes. */
static void round_trip_against(const char *type, const char *config, size_t size, double rel, double abs_bound) {
  codec_node n = open_node(&AGAINST, type, config);
  if (!n.node) return close_node(&n);
  float ref[N], x[N];
  model_pair(ref, x);
  bb_val *xv = tensor_of(x, N), *rv = tensor_of(ref, N);
  bb_named_value in[] = {{"x", xv}, {"ref", rv}};
  run_result r = run(&n, in, 2, 0);
  CHECK_MSG(r.failed == 0, "%s: %s", type, r.reason);
  const float *decoded = floats(r.decoded), *delta = floats(r.delta);
  CHECK(r.encoded && bb_val_count(r.encoded) == size);
  CHECK(decoded && delta);
  for (int i = 0; decoded && delta && i < N; i++) {
    const double d = (double)x[i] - ref[i];
    CHECK_MSG(fabs(delta[i] - d) <= rel * fabs(d) + abs_bound, "%s: delta %d is %g, want %g", type, i, delta[i], d);
    CHECK_MSG(fabs(decoded[i] - x[i]) <= rel * fabs(d) + abs_bound + 1e-5, "%s: value %d is %g, want %g", type, i,
              decoded[i], x[i]);
  }
  CHECK_EQ_INT(bb_node_counter(n.node, "codec.bytes_encoded"), size);
  CHECK_EQ_INT(bb_node_counter(n.node, "codec.bytes_decoded"), 2 * size);
  run_result_free(&r);
  bb_val_release(xv);
  bb_val_release(rv);
  close_node(&n);
}

static void test_float16_against_reference(void) { round_trip_against("Float16Codec", NULL, 4 + 2 * N, 1.0 / 2048, 1e-8); }
/* the differences span ±0.01: a uint8 step of about 0.02/255 */
static void test_uint8_against_reference(void) { round_trip_against("Uint8Codec", NULL, 9 + N, 0, 0.0201 / 255 / 2 + 1e-7); }
/* every value kept, as float32: exact differences */
static void test_topk_against_reference(void) { round_trip_against("TopKCodec", "k=1,values=f32", 10 + N / 8 + 4 * N, 0, 0); }

/* The same update sent T times with 10 % kept: with feedback what arrives sums to T times
 * the update less the last residual, which does not grow with T; without it the
 * coordinates it never picks never arrive, and the error grows with every round. Returns
 * the total error of the sum over the coordinates. */
static double feedback_error(const char *config, int T) {
  codec_node n = open_node(&AGAINST, "TopKCodec", config);
  if (!n.node) return close_node(&n), INFINITY;
  float ref[N], x[N];
  model_pair(ref, x);
  double sum[N] = {0};
  bb_val *xv = tensor_of(x, N), *rv = tensor_of(ref, N);
  bb_named_value in[] = {{"x", xv}, {"ref", rv}};
  for (int t = 0; t < T; t++) {
    run_result r = run(&n, in, 2, (uint64_t)t);
    const float *delta = floats(r.delta);
    CHECK(delta != NULL && r.failed == 0);
    for (int i = 0; delta && i < N; i++) sum[i] += delta[i];
    CHECK_EQ_INT(bb_val_count(r.encoded), 10 + N / 8 + 4 * 40); /* a bitmap, 40 float32 */
    run_result_free(&r);
  }
  double total = 0;
  for (int i = 0; i < N; i++) total += fabs(sum[i] - T * ((double)x[i] - ref[i]));
  bb_val_release(xv);
  bb_val_release(rv);
  close_node(&n);
  return total;
}

static void test_topk_error_feedback(void) {
  const double with20 = feedback_error("k=0.1,values=f32", 20), with40 = feedback_error("k=0.1,values=f32", 40);
  const double without20 = feedback_error("k=0.1,values=f32,feedback=0", 20), without40 = feedback_error("k=0.1,values=f32,feedback=0", 40);
  CHECK_MSG(with40 < 1.25 * with20, "with feedback the error grew from %g to %g", with20, with40);
  CHECK_MSG(without40 > 1.9 * without20, "without feedback the error went from %g to %g", without20, without40);
  CHECK_MSG(without40 > 5 * with40, "after 40 rounds: %g without feedback, %g with", without40, with40);
}

/* Hostile bytes sent to a decoding node: the op fails with the reason, nothing arrives,
 * and the refusal is counted. */
static void hostile(const char *type, const uint8_t *bytes, size_t len, const char *counter) {
  codec_node n = open_node(&RECEIVE, type, NULL);
  if (!n.node) return close_node(&n);
  float ref[8] = {0};
  bb_val *y = bb_val_bytes(NULL, bytes, len), *rv = tensor_of(ref, 8);
  bb_named_value in[] = {{"y", y}, {"ref", rv}};
  run_result r = run(&n, in, 2, 0);
  CHECK_MSG(r.failed == 1 && r.decoded == NULL, "%s: %s", type, counter);
  CHECK_MSG(bb_node_counter(n.node, counter) == 1, "%s: %s is %llu", type, counter,
            (unsigned long long)bb_node_counter(n.node, counter));
  CHECK_EQ_INT(bb_node_counter(n.node, "codec.bytes_decoded"), 0);
  run_result_free(&r);
  bb_val_release(y);
  bb_val_release(rv);
  close_node(&n);
}

static void test_hostile_bytes_are_refused_and_counted(void) {
  /* n = 8, k = 2, a list, float32 values: indices 1 and 1 (repeated) */
  uint8_t repeated[10 + 16] = {8, 0, 0, 0, 2, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 0, 0};
  hostile("TopKCodec", repeated, sizeof repeated, "codec.refused_index");
  uint8_t beyond[10 + 8] = {8, 0, 0, 0, 1, 0, 0, 0, 1, 1, 8, 0, 0, 0};
  hostile("TopKCodec", beyond, sizeof beyond, "codec.refused_index");
  uint8_t hostile_k[10 + 8] = {8, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 1, 1};
  hostile("TopKCodec", hostile_k, sizeof hostile_k, "codec.refused_count");
  uint8_t lying_length[10 + 8] = {8, 0, 0, 0, 2, 0, 0, 0, 1, 1};
  hostile("TopKCodec", lying_length, sizeof lying_length, "codec.refused_length");
  uint8_t longer[10] = {0, 0, 0, 1, 0, 0, 0, 0, 1, 1}; /* n = 2^24, unlike the reference's 8 */
  hostile("TopKCodec", longer, sizeof longer, "codec.refused_reference");
  uint8_t nan_value[10 + 8] = {8, 0, 0, 0, 1, 0, 0, 0, 1, 1, 3, 0, 0, 0, 0, 0, 0xc0, 0x7f};
  hostile("TopKCodec", nan_value, sizeof nan_value, "codec.refused_nonfinite");
  uint8_t bitmap_count[10 + 1 + 8] = {8, 0, 0, 0, 2, 0, 0, 0, 2, 1, 0x07}; /* 3 bits for a count of 2 */
  hostile("TopKCodec", bitmap_count, sizeof bitmap_count, "codec.refused_index");
  /* a float16 vector of 3 values against a reference of 8 */
  uint8_t f16[4 + 6] = {3, 0, 0, 0};
  hostile("Float16Codec", f16, sizeof f16, "codec.refused_reference");
  uint8_t u8_short[5] = {8, 0, 0, 0, 1};
  hostile("Uint8Codec", u8_short, sizeof u8_short, "codec.refused_length");
}

/* The residual is the codec's state: a node restored from a snapshot encodes the next
 * update exactly as the node it was taken from. */
static void test_residual_survives_snapshot(void) {
  codec_node a = open_node(&AGAINST, "TopKCodec", "k=0.05,values=f16");
  codec_node b = open_node(&AGAINST, "TopKCodec", "k=0.05,values=f16");
  if (!a.node || !b.node) return close_node(&a), close_node(&b);
  float ref[N], x[N];
  model_pair(ref, x);
  bb_val *xv = tensor_of(x, N), *rv = tensor_of(ref, N);
  bb_named_value in[] = {{"x", xv}, {"ref", rv}};
  run_result first = run(&a, in, 2, 0);
  uint8_t *snap = NULL;
  size_t len = 0;
  bb_error err;
  CHECK_MSG(bb_node_snapshot(a.node, &snap, &len, &err) == 0, "%s", err.message);
  CHECK_MSG(bb_node_restore(b.node, snap, len, &err) == 0, "%s", err.message);
  run_result next_a = run(&a, in, 2, 1), next_b = run(&b, in, 2, 1);
  CHECK(next_a.encoded && next_b.encoded && bb_val_count(next_a.encoded) == bb_val_count(next_b.encoded) &&
        memcmp(bb_val_as_bytes(next_a.encoded), bb_val_as_bytes(next_b.encoded), bb_val_count(next_a.encoded)) == 0);
  /* the second update differs from the first: the residual moved other coordinates up */
  CHECK(memcmp(bb_val_as_bytes(first.encoded), bb_val_as_bytes(next_a.encoded), bb_val_count(first.encoded)) != 0);
  run_result_free(&first);
  run_result_free(&next_a);
  run_result_free(&next_b);
  bb_buffer_free(NULL, snap);
  bb_val_release(xv);
  bb_val_release(rv);
  close_node(&a);
  close_node(&b);
}

/* A saved state that is not what TopKCodec writes is refused, never read past. */
static void test_state_refused(void) {
  bb_component_init init = {"codec", "k=0.5,max_len=16", 16, 1, bb_default_allocator(), NULL, NULL};
  void *self = NULL;
  bb_error err;
  CHECK_MSG(BBI_TOPK_CODEC.create(&init, &self, &err) == 0, "%s", err.message);
  if (!self) return;
  uint8_t good[16 + 8] = {'B', 'B', 'T', 'K', 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0};
  CHECK(BBI_TOPK_CODEC.load(self, good, sizeof good, &err) == 0);
  for (size_t cut = 0; cut < sizeof good; cut++) {
    uint8_t *copy = malloc(cut ? cut : 1);
    memcpy(copy, good, cut);
    CHECK(BBI_TOPK_CODEC.load(self, copy, cut, &err) == BB_ERR_MALFORMED);
    free(copy);
  }
  uint8_t bad[sizeof good];
  memcpy(bad, good, sizeof good);
  bad[8] = 17; /* more values than max_len */
  CHECK(BBI_TOPK_CODEC.load(self, bad, sizeof bad, &err) == BB_ERR_MALFORMED);
  memcpy(bad, good, sizeof good);
  bad[23] = 0x7f, bad[22] = 0xc0; /* NaN */
  CHECK(BBI_TOPK_CODEC.load(self, bad, sizeof bad, &err) == BB_ERR_MALFORMED);
  memcpy(bad, good, sizeof good);
  bad[4] = 2; /* another version */
  CHECK(BBI_TOPK_CODEC.load(self, bad, sizeof bad, &err) == BB_ERR_MALFORMED);
  uint8_t *saved = NULL;
  size_t saved_len = 0;
  CHECK(BBI_TOPK_CODEC.save(self, bb_default_allocator(), &saved, &saved_len, &err) == 0);
  CHECK(saved_len == sizeof good && memcmp(saved, good, sizeof good) == 0);
  bb_buffer_free(bb_default_allocator(), saved);
  BBI_TOPK_CODEC.destroy(self);
}

static void test_config_refused(void) {
  const char *bad[] = {"k=0", "k=1.5", "values=f8", "feedback=2", "max_len=0", "kk=0.1"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    bb_component_init init = {"codec", bad[i], strlen(bad[i]), 1, bb_default_allocator(), NULL, NULL};
    void *self = NULL;
    bb_error err;
    CHECK_MSG(BBI_TOPK_CODEC.create(&init, &self, &err) != 0, "%s was accepted", bad[i]);
  }
}

int main(void) {
  RUN(test_float16_against_reference);
  RUN(test_uint8_against_reference);
  RUN(test_topk_against_reference);
  RUN(test_topk_error_feedback);
  RUN(test_hostile_bytes_are_refused_and_counted);
  RUN(test_residual_survives_snapshot);
  RUN(test_state_refused);
  RUN(test_config_refused);
  return bb_test_finish();
}
