/* The Codec contract end to end: a graph encodes an update with each shipped codec and
 * decodes it again; the round trip stays within the codec's error bound and the encoded
 * size is what the format promises. A wrong input kind fails Decode with its name. */
#include <math.h>
#include <stdlib.h>

#include "../runtime/rttest.h"
#include "bb/roles.h"

static const bb_slot CODEC = {BB_ROLE_CODEC, "codec", NULL};

static void roundtrip_body(bb_rec *g, void *user) {
  (void)user;
  bb_value x = bb_rec_input(g, "x", "ai.bytesandbrains.tensor.f32");
  bb_value y = bb_rec_codec_encode(g, &CODEC, x);
  bb_rec_output(g, "encoded", y);
  bb_rec_output(g, "decoded", bb_rec_codec_decode(g, &CODEC, y));
}

static const bb_module ROUNDTRIP = {sizeof(bb_module), "RoundTrip", roundtrip_body, NULL, NULL, NULL, 0};

static uint8_t *compile_with(const char *codec, size_t *len) {
  bb_error err;
  bb_model *m = NULL;
  uint8_t *bytes = NULL, *out = NULL;
  size_t blen = 0;
  CHECK_MSG(bb_module_build(&ROUNDTRIP, NULL, &m, &err) == 0, "%s", err.message);
  if (!m) return NULL;
  CHECK(bb_model_encode(m, &bytes, &blen, &err) == 0);
  bb_compiler *c = bb_compiler_new(NULL);
  static const bb_component_port ports[] = {{"in", "ai.bytesandbrains.tensor.f32"},
                                            {"out", "ai.bytesandbrains.opaque"}};
  bb_component_decl d = {sizeof d, codec, ports, 2, NULL, 0};
  bb_compiler_set_permissive_types(c, true);
  int rc = bb_compiler_declare_component(c, &d, &err) || bb_compiler_bind_codec(c, "codec", codec, NULL, &err);
  CHECK_MSG(rc == 0, "%s", err.message);
  if (!rc) CHECK_MSG(bb_compiler_compile(c, bytes, blen, &out, len, &err) == 0, "%s", err.message);
  bb_compiler_free(c);
  free(bytes);
  bb_model_free(m);
  return out;
}

static void roundtrip(const char *codec, size_t header, size_t per_value, double rel_bound, double abs_bound) {
  size_t len = 0;
  uint8_t *art = compile_with(codec, &len);
  if (!art) return;
  const char *targets[] = {"RoundTrip"};
  bb_node *node = install_peer(art, len, 1, targets, 1, shipped_registry(), NULL);
  if (!node) return free(art);
  enum { N = 1000 };
  int64_t n = N;
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 1, &n);
  float *x = bb_tensor_data(t);
  uint64_t s = 1;
  for (int i = 0; i < N; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 4.0 - 2.0);
  }
  bb_val *v = bb_val_tensor(NULL, t);
  bb_named_value in = {"x", v};
  bb_error err;
  CHECK(bb_node_invoke(node, "RoundTrip", &in, 1, 0, &err) == 0);
  const bb_step *steps;
  size_t ns;
  CHECK(bb_node_poll(node, 0, &steps, &ns, &err) == 0);
  bool got = false;
  for (size_t i = 0; i < ns; i++) {
    if (steps[i].kind == BB_STEP_OP_FAILED) print_steps(codec, steps, ns);
    if (steps[i].kind != BB_STEP_APP_EVENT) continue;
    if (strcmp(steps[i].topic, "encoded") == 0) CHECK_EQ_INT(steps[i].len, header + per_value * N);
    if (strcmp(steps[i].topic, "decoded") == 0 && bb_val_kind_of(steps[i].value) == BB_VAL_TENSOR) {
      got = true;
      const float *d = bb_tensor_data(bb_val_as_tensor(steps[i].value));
      CHECK_EQ_INT(bb_val_as_tensor(steps[i].value)->numel, N);
      double worst = 0;
      for (int k = 0; k < N; k++) {
        double e = fabs((double)d[k] - x[k]) - rel_bound * fabs(x[k]);
        if (e > worst) worst = e;
      }
      CHECK_MSG(worst <= abs_bound, "%s: error %g over its bound", codec, worst);
    }
  }
  CHECK(got);
  bb_val_release(v);
  bb_tensor_release(t);
  bb_node_free(node);
  free(art);
}

static void test_float16(void) { roundtrip("Float16Codec", 4, 2, 1.0 / 2048, 1e-7); }
/* uint8 over [-2, 2]: scale about 4/255, error at most scale/2 */
static void test_uint8(void) { roundtrip("Uint8Codec", 9, 1, 0, 4.0 / 255 / 2 + 1e-6); }

int main(void) {
  RUN(test_float16);
  RUN(test_uint8);
  return bb_test_finish();
}
