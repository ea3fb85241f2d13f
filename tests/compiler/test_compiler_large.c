/* A 10,000-node module compiles into the expected partitions, the same bytes every time,
 * and its artifact can be described in every format. How fast is measured by
 * bench/bench_compiler (docs/PERFORMANCE.md), never asserted here. */
#include "cctest.h"

#include <string.h>

#include "big_module.h"

/* The chain big_body records: Relu at odd steps, Add at even ones. */
static size_t chain_ops(bool odd) {
  size_t count = 0;
  for (size_t i = 1; i < N_NODES - 3 * (N_NODES / SEND_EVERY); i++) count += (i % 2 == 1) == odd;
  return count;
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
  uint8_t *bytes = NULL, *out[2] = {NULL, NULL};
  size_t len = 0, out_len[2] = {0, 0};
  bb_error err;
  if (dt_encode(rec, &bytes, &len) == 0)
    for (int run = 0; run < 2; run++) {
      int rc = bb_compiler_compile(c, bytes, len, &out[run], &out_len[run], &err);
      CHECK_MSG(rc == 0, "compile %d failed: %s", run, rc ? err.message : "");
    }
  CHECK_MSG(out[0] && out[1] && out_len[0] == out_len[1] && memcmp(out[0], out[1], out_len[0]) == 0,
            "two compiles of the same bytes differ (%zu and %zu bytes)", out_len[0], out_len[1]);
  bb_model *m = NULL;
  if (out[0] && bb_model_decode(out[0], out_len[0], NULL, NULL, &m, &err) == 0) {
    const bb_function *tx = ct_partition(m, "Big"), *rx = ct_partition(m, "Big_peers");
    CHECK(tx && rx);
    CHECK_EQ_INT(ct_count(tx, "Relu"), chain_ops(true));
    CHECK_EQ_INT(ct_count(tx, "Add"), chain_ops(false));
    CHECK_EQ_INT(ct_count(tx, "Send"), 9);
    CHECK_EQ_INT(ct_count(rx, "Recv"), 9);
    CHECK_EQ_INT(ct_count(rx, "Contribute"), 9);
    CHECK_EQ_INT(ct_count(tx, "DeadlineCheck"), 9);
    const char *expect[] = {"Big_peers", "digraph", "\"partitions\""};
    for (int fmt = 0; fmt < 3; fmt++) {
      char *text = NULL;
      size_t text_len = 0;
      CHECK(bb_artifact_describe(m, (bb_artifact_format)fmt, &text, &text_len, &err) == 0);
      CHECK_MSG(text && strlen(text) == text_len && strstr(text, expect[fmt]), "format %d: %zu bytes", fmt, text_len);
      printf("    described as format %d: %zu bytes\n", fmt, text_len);
      bb_buffer_free(NULL, text);
    }
  }
  bb_model_free(m);
  for (int run = 0; run < 2; run++) bb_buffer_free(NULL, out[run]);
  bb_buffer_free(NULL, bytes);
  bb_compiler_free(c);
  bb_model_free(rec);
}

int main(void) {
  RUN(test_ten_thousand_nodes);
  return bb_test_finish();
}
