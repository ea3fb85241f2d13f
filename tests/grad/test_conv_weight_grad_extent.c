/* A Conv's weight gradient is a convolution with the batch as channels whose last window
 * may reach past the kernel (per axis in + pads - d(k-1) - 1 = s(out-1) + r, r >= d): the
 * builder takes the excess off that convolution's end pad where the pad allows it, and
 * keeps a Slice of the first k positions only where it does not (a 1×1, stride-2 Conv
 * without padding on an even input). Each case's training graph must have exactly the
 * Slices it needs, and its gradients must be PyTorch's (the cases of
 * tests/tools/torch_make_grad_models.py's conv_extent_cases). */
#include "gradtest.h"

#define DATA BB_TEST_SOURCE_DIR "/tests/data/grad/"
#define GRAD_TOL 1e-5

static size_t count_op(const bb_model *m, const char *op_type) {
  size_t n = 0;
  for (size_t i = 0; i < m->graph->nodes.len; i++) n += strcmp(m->graph->nodes.items[i]->op_type, op_type) == 0;
  return n;
}

static void check_case(const char *name, size_t slices) {
  bb_model *model, *ref;
  if (!gt_load_case(DATA, name, &model, &ref)) return;
  const char *params[1] = {"p.w"};
  bb_grad_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.loss = BB_GRAD_LOSS_OUTPUT;
  o.params = params;
  o.n_params = 1;
  bb_grad_graph *g = NULL;
  bb_error err;
  int rc = bb_grad_build(model, &o, NULL, &g, &err);
  CHECK_MSG(!rc, "%s: %s", name, err.message);
  if (!rc) {
    CHECK_MSG(count_op(g->model, "Slice") == slices, "%s: %zu Slices in the training graph, want %zu", name,
              count_op(g->model, "Slice"), slices);
    const char *names[2] = {"x"};
    bb_tensor *values[2] = {gt_tensor(ref, "input:x")};
    bb_tensor **outs = NULL;
    size_t n_out = 0;
    rc = gt_run(g, names, values, 1, &outs, &n_out, &err);
    CHECK_MSG(!rc, "%s: %s", name, err.message);
    if (!rc) {
      bb_tensor *want = gt_tensor(ref, "grad:p.w");
      double e = gt_rel_error(outs[1], want, 1e-6);
      CHECK_MSG(e <= GRAD_TOL, "%s: d loss / d w differs from torch's by %.3g of its scale", name, e);
      bb_tensor_release(want);
      gt_release(outs, n_out);
    }
    bb_tensor_release(values[0]);
  }
  bb_grad_graph_free(g);
  bb_model_free(model);
  bb_model_free(ref);
}

int main(void) {
  check_case("conv_wgrad_s2_even_odd", 0); /* 3×3, stride 2, pad 1: H 8 (r = 1 of pad 1), W 7 (r = 0) */
  check_case("conv_wgrad_7x7_s2", 0);      /* 7×7, stride 2, pad 3: H 12 (r = 1 of pad 3), W 11 */
  check_case("conv_wgrad_dilated_s3", 0);  /* dilation 2, stride 3: H r = 2 of pad 2, W r = 2 of pad 1 (one left, < d) */
  check_case("conv_wgrad_1x1_s2", 1);      /* 1×1, stride 2, no pad, H = W = 8: r = 1 > pad 0 */
  check_case("conv", 0);                   /* 3×3, stride 2, pad 1 on 7×6: W r = 1 of pad 1, H exact */
  return bb_test_finish();
}
