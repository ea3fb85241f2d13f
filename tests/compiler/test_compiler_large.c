/* A 10,000-node module compiles, into the expected partitions, in bounded time (the
 * goal natively is under 100 ms; the bound checked here is loose so that sanitizer and
 * WebAssembly builds pass too — bench/ measures it properly). */
#include "cctest.h"

#include <time.h>

#include "big_module.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void test_ten_thousand_nodes(void) {
  bb_model *rec = dt_build(&BIG);
  if (!rec) return;
  size_t recorded = rec->functions.items[0]->nodes.len;
  CHECK_MSG(recorded >= 9900 && recorded <= 10000, "recorded %zu nodes", recorded);
  bb_compiler *c = bb_compiler_new(NULL);
  ct_declare(c, "Mlp", F32);
  ct_declare(c, "Cpu", F32);
  ct_declare(c, "FedAvg", F32);
  ct_bind(c, BB_ROLE_MODEL, "model", "Mlp");
  ct_bind(c, BB_ROLE_BACKEND, "compute", "Cpu");
  ct_bind(c, BB_ROLE_AGGREGATOR, "aggregator", "FedAvg");
  uint8_t *bytes, *out = NULL;
  size_t len, out_len;
  bb_error err;
  if (dt_encode(rec, &bytes, &len) == 0) {
    double best = 1e9;
    for (int run = 0; run < 3; run++) {
      double t0 = now_ms();
      int rc = bb_compiler_compile(c, bytes, len, &out, &out_len, &err);
      double dt = now_ms() - t0;
      CHECK_MSG(rc == 0, "compile failed: %s", rc ? err.message : "");
      if (dt < best) best = dt;
      if (run < 2) bb_buffer_free(NULL, out), out = NULL;
    }
    /* how much of that is the ONNX codec: decode the input, encode the artifact */
    double codec = 1e9;
    for (int run = 0; run < 3; run++) {
      double t0 = now_ms();
      bb_model *d = NULL;
      uint8_t *again = NULL;
      size_t again_len;
      if (bb_model_decode(bytes, len, NULL, NULL, &d, &err) == 0 && bb_model_encode(d, &again, &again_len, &err) == 0)
        bb_buffer_free(NULL, again);
      bb_model_free(d);
      double dt = now_ms() - t0;
      if (dt < codec) codec = dt;
    }
    printf("    compiled %zu recorded nodes in %.1f ms (best of 3; %.1f ms of it decoding and encoding)\n", recorded,
           best, codec);
    CHECK_MSG(best < 5000, "compiling took %.1f ms", best);
    bb_buffer_free(NULL, bytes);
  }
  bb_model *m = NULL;
  if (out && bb_model_decode(out, out_len, NULL, NULL, &m, &err) == 0) {
    const bb_function *tx = ct_partition(m, "Big"), *rx = ct_partition(m, "Big_peers");
    CHECK(tx && rx);
    CHECK_EQ_INT(ct_count(tx, "Send"), 9);
    CHECK_EQ_INT(ct_count(rx, "Recv"), 9);
    CHECK_EQ_INT(ct_count(rx, "Contribute"), 9);
    CHECK_EQ_INT(ct_count(tx, "DeadlineCheck"), 9);
    for (int fmt = 0; fmt < 3; fmt++) {
      char *text = NULL;
      size_t text_len = 0;
      double t0 = now_ms();
      CHECK(bb_artifact_describe(m, (bb_artifact_format)fmt, &text, &text_len, &err) == 0);
      printf("    described as format %d (%zu bytes) in %.1f ms\n", fmt, text_len, now_ms() - t0);
      bb_buffer_free(NULL, text);
    }
  }
  bb_model_free(m);
  bb_buffer_free(NULL, out);
  bb_compiler_free(c);
  bb_model_free(rec);
}

int main(void) {
  RUN(test_ten_thousand_nodes);
  return bb_test_finish();
}
