/* Every model of libonnx-testdata decodes, re-encodes and decodes to the same IR; the
 * re-encoding holds exactly the fields of the original (checked field by field through
 * protobuf-c's own unpacker), and encoding is a fixed point. */
#include "ir/testutil.h"

#include "bb/ir.h"
#include "harness.h"
#include "onnx.pb-c.h"

static size_t covered, identical_bytes;

static void roundtrip_one(const char *path) {
  size_t len;
  uint8_t *orig = tu_read_file(path, &len);
  CHECK_MSG(orig != NULL, "cannot read %s", path);
  if (!orig) return;
  bb_error err;
  bb_model *m1 = NULL, *m2 = NULL;
  uint8_t *b1 = NULL, *b2 = NULL;
  size_t n1 = 0, n2 = 0;
  int rc = bb_model_decode(orig, len, NULL, NULL, &m1, &err);
  CHECK_MSG(rc == 0, "%s: %s", path, err.message);
  if (rc == 0) rc = bb_model_encode(m1, &b1, &n1, &err);
  CHECK_MSG(rc == 0, "%s: encode: %s", path, err.message);
  if (rc == 0) rc = bb_model_decode(b1, n1, NULL, NULL, &m2, &err);
  CHECK_MSG(rc == 0, "%s: decode of re-encoding: %s", path, err.message);
  if (rc == 0) {
    CHECK_MSG(bb_model_equal(m1, m2), "%s: IR differs after a round trip", path);
    rc = bb_model_encode(m2, &b2, &n2, &err);
    CHECK_MSG(rc == 0 && n1 == n2 && memcmp(b1, b2, n1) == 0, "%s: encoding is not a fixed point", path);
    Onnx__ModelProto *po = onnx__model_proto__unpack(NULL, len, orig);
    Onnx__ModelProto *pr = onnx__model_proto__unpack(NULL, n1, b1);
    CHECK_MSG(po && pr && tu_pb_equal(&po->base, &pr->base), "%s: re-encoding lost or changed a field", path);
    if (po) onnx__model_proto__free_unpacked(po, NULL);
    if (pr) onnx__model_proto__free_unpacked(pr, NULL);
    covered++;
    if (n1 == len && memcmp(b1, orig, len) == 0) identical_bytes++;
  }
  bb_buffer_free(NULL, b1);
  bb_buffer_free(NULL, b2);
  bb_model_free(m1);
  bb_model_free(m2);
  free(orig);
}

static void test_all_testdata_models(void) {
  static const char *groups[] = {"node", "simple", "pytorch-converted", "pytorch-operator", "real"};
  size_t node_models = 0;
  for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", BB_TEST_ONNX_DATA, groups[g]);
    size_t n;
    char **names = tu_list_dir(dir, &n);
    CHECK_MSG(names != NULL, "cannot list %s (is libonnx-testdata installed?)", dir);
    if (!names) continue;
    size_t before = covered;
    for (size_t i = 0; i < n; i++) {
      char path[2048];
      snprintf(path, sizeof path, "%s/%s/model.onnx", dir, names[i]);
      FILE *f = fopen(path, "rb");
      if (!f) continue;
      fclose(f);
      roundtrip_one(path);
    }
    printf("  %s: %zu models round-tripped\n", groups[g], covered - before);
    if (g == 0) node_models = covered - before;
    tu_free_list(names, n);
  }
  CHECK_MSG(node_models >= 900, "only %zu node-test models found", node_models);
  printf("  %zu models in all; %zu re-encode to the very bytes they came from\n", covered, identical_bytes);
}

int main(void) {
  RUN(test_all_testdata_models);
  return bb_test_finish();
}
