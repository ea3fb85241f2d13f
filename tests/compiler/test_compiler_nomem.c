/* Allocation failure at every point of a compile: the compile reports BB_ERR_NOMEM,
 * hands out no artifact and leaves nothing allocated; once allocations succeed, the
 * artifact is byte-identical to the one a plain compile makes. */
#include "cctest.h"
#include "failalloc.h"

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot AGGREGATOR = {BB_ROLE_AGGREGATOR, "fedavg", NULL};

static void leaf_body(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "y", bb_rec_model_forward(g, &MODEL, bb_rec_input(g, "x", NULL)));
}
static const bb_module LEAF = {sizeof(bb_module), "Leaf", leaf_body, NULL, NULL, NULL, 0};

static void round_body(bb_rec *g, void *user) {
  (void)user;
  bb_value clients = bb_rec_input(g, "clients", NULL);
  bb_value server = bb_rec_input(g, "server", NULL);
  bb_rec_net_out(g, "global", clients, bb_rec_model_params(g, &MODEL));
  bb_binding b[] = {{"x", bb_rec_lookup_output(g, "global")}};
  bb_value y = bb_rec_call_output(g, bb_rec_call(g, &LEAF, b, 1), "y");
  bb_rec_net_out(g, "update", server, y);
  bb_value update = bb_rec_lookup_output(g, "update");
  bb_rec_aggregator_contribute(g, &AGGREGATOR, update, update);
  bb_rec_output(g, "tick", bb_rec_interval(g, 0));
}
static const bb_module *const SUBS[] = {&LEAF};
static const bb_module ROUND = {sizeof(bb_module), "Round", round_body, NULL, NULL, SUBS, 1};

static bb_compiler *make_compiler(const bb_allocator *alloc) {
  bb_compiler *c = bb_compiler_new(alloc);
  if (!c) return NULL;
  ct_declare(c, "Mlp", F32);
  ct_declare(c, "FedAvg", F32);
  ct_bind(c, BB_ROLE_MODEL, "model", "Mlp");
  ct_bind(c, BB_ROLE_AGGREGATOR, "fedavg", "FedAvg");
  return c;
}

static void test_every_failure_point(void) {
  bb_model *rec = dt_build(&ROUND);
  uint8_t *bytes = NULL, *want = NULL;
  size_t len = 0, want_len = 0;
  bb_error err;
  if (!rec || dt_encode(rec, &bytes, &len)) {
    bb_model_free(rec);
    return;
  }
  bb_compiler *plain = make_compiler(NULL);
  CHECK(bb_compiler_compile(plain, bytes, len, &want, &want_len, &err) == 0);
  bb_compiler_free(plain);
  failing f = {-1, 0};
  bb_allocator alloc = failing_allocator(&f);
  bb_compiler *c = make_compiler(&alloc);
  bool done = false;
  long budget;
  for (budget = 0; budget < 100000 && !done && c; budget++) {
    f.budget = budget;
    long live_before = f.live;
    uint8_t *out = NULL;
    size_t out_len = 0;
    int rc = bb_compiler_compile(c, bytes, len, &out, &out_len, &err);
    f.budget = -1;
    if (rc == 0) {
      done = true;
      CHECK_MSG(out_len == want_len && memcmp(out, want, out_len) == 0, "the artifact differs after %ld failures", budget);
      bb_buffer_free(&alloc, out);
    } else {
      CHECK_MSG(rc == BB_ERR_NOMEM, "budget %ld: got %d (%s)", budget, rc, err.message);
      CHECK(out == NULL);
    }
    CHECK_MSG(f.live == live_before, "budget %ld: %ld allocations left", budget, f.live - live_before);
  }
  CHECK(done);
  printf("    %ld failure points\n", budget - 1);
  bb_compiler_free(c);
  CHECK_EQ_INT(f.live, 0);
  bb_buffer_free(NULL, want);
  bb_buffer_free(NULL, bytes);
  bb_model_free(rec);
}

int main(void) {
  RUN(test_every_failure_point);
  return bb_test_finish();
}
