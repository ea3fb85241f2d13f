/* The 10,000-node module of the compiler's scale test and benchmark
 * (tests/compiler/test_compiler_large.c, bench/bench_compiler.c). */
#ifndef BB_TESTS_COMPILER_BIG_MODULE_H
#define BB_TESTS_COMPILER_BIG_MODULE_H

#include <stdio.h>

#include "bb/graph.h"

#define N_NODES 10000
#define SEND_EVERY 1000

static const bb_slot BIG_MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot BIG_BACKEND = {BB_ROLE_BACKEND, "compute", NULL};
static const bb_slot BIG_AGGREGATOR = {BB_ROLE_AGGREGATOR, "aggregator", NULL};

/* Params, then a long chain of backend ops; every SEND_EVERY nodes the current value is
 * sent to `peers`, whose side contributes it to the aggregator. */
static void big_body(bb_rec *g, void *user) {
  (void)user;
  bb_value peers = bb_rec_input(g, "peers", NULL);
  bb_value v = bb_rec_model_params(g, &BIG_MODEL);
  size_t sends = 0;
  for (size_t i = 1; i < N_NODES - 3 * (N_NODES / SEND_EVERY) && !bb_rec_failed(g); i++) {
    if (i % 2) v = bb_rec_backend(g, &BIG_BACKEND, "Relu", &v, 1, NULL, 0);
    else {
      bb_value ins[] = {v, v};
      v = bb_rec_backend(g, &BIG_BACKEND, "Add", ins, 2, NULL, 0);
    }
    if (i % SEND_EVERY == 0) {
      char port[32];
      snprintf(port, sizeof port, "port%zu", sends++);
      bb_rec_net_out(g, port, peers, v);
      bb_value got = bb_rec_lookup_output(g, port);
      bb_rec_aggregator_contribute(g, &BIG_AGGREGATOR, got, got);
    }
  }
  bb_rec_output(g, "out", v);
}
static const bb_module BIG = {sizeof(bb_module), "Big", big_body, NULL, NULL, NULL, 0};

#endif
