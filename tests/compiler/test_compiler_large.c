/* A 10,000-node module compiles, into the expected partitions, in bounded time (the
 * goal natively is under 100 ms; the bound checked here is loose so that sanitizer and
 * WebAssembly builds pass too — bench/ measures it properly). */
#include "cctest.h"

#include <time.h>

#define N_NODES 10000
#define SEND_EVERY 1000

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot BACKEND = {BB_ROLE_BACKEND, "compute", NULL};
static const bb_slot AGGREGATOR = {BB_ROLE_AGGREGATOR, "aggregator", NULL};

/* Params, then a long chain of backend ops; every SEND_EVERY nodes the current value is
 * sent to `peers`, whose side contributes it to the aggregator. */
static void big_body(bb_rec *g, void *user) {
  (void)user;
  bb_value peers = bb_rec_input(g, "peers", NULL);
  bb_value v = bb_rec_model_params(g, &MODEL);
  size_t sends = 0;
  for (size_t i = 1; i < N_NODES - 3 * (N_NODES / SEND_EVERY) && !bb_rec_failed(g); i++) {
    if (i % 2) v = bb_rec_backend(g, &BACKEND, "Relu", &v, 1, NULL, 0);
    else {
      bb_value ins[] = {v, v};
      v = bb_rec_backend(g, &BACKEND, "Add", ins, 2, NULL, 0);
    }
    if (i % SEND_EVERY == 0) {
      char port[32];
      snprintf(port, sizeof port, "port%zu", sends++);
      bb_rec_net_out(g, port, peers, v);
      bb_value got = bb_rec_lookup_output(g, port);
      bb_rec_aggregator_contribute(g, &AGGREGATOR, got, got);
    }
  }
  bb_rec_output(g, "out", v);
}
static const bb_module BIG = {sizeof(bb_module), "Big", big_body, NULL, NULL, NULL, 0};

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
