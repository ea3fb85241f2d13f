/* Allocation failure at every point of a build: the build reports BB_ERR_NOMEM, hands
 * out no model and leaves nothing allocated; once allocations succeed, the model equals
 * the one a plain build makes. */
#include "dsltest.h"
#include "failalloc.h"

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot PEERS = {BB_ROLE_PEER_SELECTOR, "peers", "gossip_peer"};
static const bb_slot CODEC = {BB_ROLE_CODEC, "codec", NULL};

static void sub_body(bb_rec *g, void *u) {
  (void)u;
  bb_rec_output(g, "y", bb_rec_model_forward(g, &MODEL, bb_rec_input(g, "x", NULL)));
}
static void sub_bootstrap(bb_rec *g, void *u) {
  (void)u;
  bb_rec_codec_train(g, &CODEC, bb_rec_input(g, "samples", NULL));
}
static const bb_module SUB = {sizeof(bb_module), "Sub", sub_body, sub_bootstrap, NULL, NULL, 0};
static const bb_module *const SUBS[] = {&SUB};

static void top_body(bb_rec *g, void *u) {
  (void)u;
  static const float w[3] = {1, 2, 3};
  static const int64_t dims[1] = {3};
  bb_literal lit = {BB_DTYPE_FLOAT, dims, 1, w, sizeof w};
  bb_value x = bb_rec_constant(g, "w", NULL, &lit);
  for (int i = 0; i < 3; i++) x = bb_rec_call_output(g, bb_rec_call(g, &SUB, (bb_binding[]){{"x", x}}, 1), "y");
  bb_value both = bb_rec_bundle(g, (bb_value[]){x, x}, 2);
  bb_rec_net_out(g, "out", bb_rec_peer_selector_sample(g, &PEERS, 2), both);
}
static void top_bootstrap(bb_rec *g, void *u) {
  (void)u;
  bb_rec_call_bootstrap(g, &SUB, (bb_binding[]){{"samples", bb_rec_input(g, "seed", NULL)}}, 1);
}
static const bb_module TOP = {sizeof(bb_module), "Top", top_body, top_bootstrap, NULL, SUBS, 1};

static void test_every_allocation_failure(void) {
  bb_model *reference = dt_build(&TOP);
  if (!reference) return;
  long budget = 0;
  for (;; budget++) {
    failing f = {budget, 0};
    bb_allocator alloc = failing_allocator(&f);
    bb_model *m = (bb_model *)1;
    bb_error err;
    int rc = bb_module_build(&TOP, &alloc, &m, &err);
    if (rc == 0) {
      CHECK(bb_model_equal(m, reference));
      bb_model_free(m);
      CHECK_EQ_INT(f.live, 0);
      break;
    }
    CHECK_MSG(rc == BB_ERR_NOMEM, "budget %ld: got %d (%s)", budget, rc, err.message);
    CHECK(m == NULL);
    CHECK_MSG(f.live == 0, "budget %ld: %ld allocations left behind", budget, f.live);
    if (budget > 100000) {
      CHECK_MSG(0, "the build never succeeded");
      break;
    }
  }
  printf("    %ld allocation points failed cleanly\n", budget);
  CHECK(budget > 10);
  bb_model_free(reference);
}

int main(void) {
  RUN(test_every_allocation_failure);
  return bb_test_finish();
}
