/* The CPU backend's nn family past the conformance tests' shapes and attribute
 * combinations: the losses (SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss),
 * LayerNormalization, InstanceNormalization and ConvTranspose, checked against
 * double-precision references written here (log-softmax as log(Σexp) directly,
 * statistics by two plain passes, ConvTranspose in its gather form). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bb/cpu.h"
#include "harness.h"
#include "optest.h"

static bb_model *model;

static bb_tensor *labels_tensor(int32_t dtype, int rank, const int64_t *dims, int64_t classes, int64_t ignore) {
  bb_tensor *t = bb_tensor_new_empty(NULL, dtype, rank, dims);
  for (int64_t i = 0; i < t->numel; i++) {
    int64_t v = i % 4 == 1 ? ignore : rng_int(0, classes - 1); /* every fourth label ignored */
    if (dtype == BB_DTYPE_INT64) ((int64_t *)bb_tensor_data(t))[i] = v;
    else ((int32_t *)bb_tensor_data(t))[i] = (int32_t)v;
  }
  return t;
}

/* Reference loss over x [N, C, inner] (flattened d...), labels [N, inner]: per element
 * losses into per (may be NULL), the weighted sum and the weight total. */
static void ref_loss(const bb_tensor *x, const bb_tensor *lab, const bb_tensor *w, bool softmax, bool has_ii,
                     int64_t ii, double *per, double *logp, double *sum, double *wsum) {
  int64_t n_batch = x->dims[0], classes = x->dims[1], inner = x->numel / (n_batch * classes);
  *sum = *wsum = 0;
  for (int64_t n = 0; n < n_batch; n++)
    for (int64_t j = 0; j < inner; j++) {
      double z = 0;
      for (int64_t c = 0; c < classes; c++) z += exp(tensor_real(x, (n * classes + c) * inner + j));
      for (int64_t c = 0; c < classes && logp; c++)
        logp[(n * classes + c) * inner + j] = tensor_real(x, (n * classes + c) * inner + j) - log(z);
      int64_t l = tensor_int(lab, n * inner + j);
      double loss = 0, wt = 0;
      if (!(has_ii && l == ii)) {
        wt = w ? tensor_real(w, l) : 1.0;
        double v = tensor_real(x, (n * classes + l) * inner + j);
        loss = -wt * (softmax ? v - log(z) : v);
      }
      if (per) per[n * inner + j] = loss;
      *sum += loss;
      *wsum += wt;
    }
}

static void test_sce_weighted_mean_ignore_high_rank(void) {
  int64_t xd[] = {3, 5, 2, 3}, ld[] = {3, 2, 3}, wd[] = {5};
  int32_t types[] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE};
  for (int t = 0; t < 2; t++) {
    bb_tensor *in[3] = {optest_rand(types[t], 4, xd, -3, 3), labels_tensor(BB_DTYPE_INT64, 3, ld, 5, -1),
                        optest_rand(types[t], 1, wd, 0.2, 2)};
    bb_tensor *out[2];
    bb_ir_node *n = optest_node(model, "SoftmaxCrossEntropyLoss", 3, 2);
    bb_attr_set_int(model, &n->attrs, "ignore_index", -1); /* default reduction: mean */
    bb_error err;
    CHECK_EQ_INT(bb_cpu_run_node(n, 13, in, 3, out, 2, NULL, &err), 0);
    double logp[90], sum, wsum;
    ref_loss(in[0], in[1], in[2], true, true, -1, NULL, logp, &sum, &wsum);
    CHECK(out[0]->rank == 0 && out[0]->dtype == types[t]);
    double want = sum / wsum, tol = t ? 1e-12 : 1e-5;
    CHECK_MSG(fabs(tensor_real(out[0], 0) - want) < tol * (1 + fabs(want)), "got %g want %g", tensor_real(out[0], 0),
              want);
    CHECK(out[1]->rank == 4 && out[1]->numel == 90);
    CHECK_MSG(optest_max_err(out[1], logp) < tol, "log_prob error %g", optest_max_err(out[1], logp));
    for (int i = 0; i < 2; i++) bb_tensor_release(out[i]);
    for (int i = 0; i < 3; i++) bb_tensor_release(in[i]);
  }
}

static void test_sce_none_and_sum(void) {
  int64_t xd[] = {4, 6, 5}, ld[] = {4, 5};
  bb_tensor *in[2] = {optest_rand(BB_DTYPE_FLOAT, 3, xd, -4, 4), labels_tensor(BB_DTYPE_INT32, 2, ld, 6, 2)};
  double per[20], sum, wsum;
  ref_loss(in[0], in[1], NULL, true, true, 2, per, NULL, &sum, &wsum);
  bb_error err;
  bb_tensor *out[1];
  bb_ir_node *n = optest_node(model, "SoftmaxCrossEntropyLoss", 2, 1);
  bb_attr_set_string(model, &n->attrs, "reduction", "none");
  bb_attr_set_int(model, &n->attrs, "ignore_index", 2);
  CHECK_EQ_INT(bb_cpu_run_node(n, 12, in, 2, out, 1, NULL, &err), 0);
  CHECK(out[0]->rank == 2 && out[0]->dims[0] == 4 && out[0]->dims[1] == 5);
  CHECK_MSG(optest_max_err(out[0], per) < 1e-5, "error %g", optest_max_err(out[0], per));
  bb_tensor_release(out[0]);
  /* without ignore_index label 2 counts */
  ref_loss(in[0], in[1], NULL, true, false, 0, NULL, NULL, &sum, &wsum);
  n = optest_node(model, "SoftmaxCrossEntropyLoss", 2, 1);
  bb_attr_set_string(model, &n->attrs, "reduction", "sum");
  CHECK_EQ_INT(bb_cpu_run_node(n, 13, in, 2, out, 1, NULL, &err), 0);
  CHECK(fabs(tensor_real(out[0], 0) - sum) < 1e-4 * (1 + fabs(sum)));
  bb_tensor_release(out[0]);
  /* a label outside [0, C) that is not ignore_index is an error naming the node */
  ((int32_t *)bb_tensor_data(in[1]))[3] = 6;
  CHECK(bb_cpu_run_node(n, 13, in, 2, out, 1, NULL, &err) != 0);
  CHECK(strstr(err.message, "under_test") != NULL);
  for (int i = 0; i < 2; i++) bb_tensor_release(in[i]);
}

/* float16 scores: random normal half-precision bit patterns (|v| in [0.25, 4)), decoded by
 * optest.h; the loss is rounded once to half precision. */
static void test_sce_float16(void) {
  int64_t xd[] = {4, 3, 5}, ld[] = {4, 5};
  bb_tensor *in[2] = {bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT16, 3, xd), labels_tensor(BB_DTYPE_INT64, 2, ld, 3, -5)};
  uint16_t *h = bb_tensor_data(in[0]);
  for (int i = 0; i < 60; i++) h[i] = (uint16_t)((rng_int(0, 1) << 15) | (rng_int(13, 16) << 10) | rng_int(0, 1023));
  bb_ir_node *n = optest_node(model, "SoftmaxCrossEntropyLoss", 2, 2);
  bb_attr_set_int(model, &n->attrs, "ignore_index", -5);
  bb_tensor *out[2];
  bb_error err;
  CHECK_EQ_INT(bb_cpu_run_node(n, 13, in, 2, out, 2, NULL, &err), 0);
  double logp[60], sum, wsum;
  ref_loss(in[0], in[1], NULL, true, true, -5, NULL, logp, &sum, &wsum);
  CHECK(out[0]->dtype == BB_DTYPE_FLOAT16 && out[1]->dtype == BB_DTYPE_FLOAT16);
  CHECK_MSG(fabs(tensor_real(out[0], 0) - sum / wsum) < 1e-3 * (1 + fabs(sum / wsum)), "got %g want %g",
            tensor_real(out[0], 0), sum / wsum);
  CHECK_MSG(optest_max_err(out[1], logp) < 1e-3, "log_prob error %g", optest_max_err(out[1], logp));
  for (int i = 0; i < 2; i++) bb_tensor_release(out[i]), bb_tensor_release(in[i]);
}

static void test_nll_weighted(void) {
  int64_t xd[] = {2, 4, 3, 2}, ld[] = {2, 3, 2}, wd[] = {4};
  bb_tensor *in[3] = {optest_rand(BB_DTYPE_DOUBLE, 4, xd, -2, 0), labels_tensor(BB_DTYPE_INT64, 3, ld, 4, 3),
                      optest_rand(BB_DTYPE_DOUBLE, 1, wd, 0.5, 1.5)};
  const char *reds[] = {"mean", "sum", "none"};
  for (int r = 0; r < 3; r++) {
    double per[12], sum, wsum;
    ref_loss(in[0], in[1], in[2], false, true, 3, per, NULL, &sum, &wsum);
    bb_ir_node *n = optest_node(model, "NegativeLogLikelihoodLoss", 3, 1);
    bb_attr_set_string(model, &n->attrs, "reduction", reds[r]);
    bb_attr_set_int(model, &n->attrs, "ignore_index", 3);
    bb_tensor *out[1];
    bb_error err;
    CHECK_EQ_INT(bb_cpu_run_node(n, 13, in, 3, out, 1, NULL, &err), 0);
    if (r == 2) {
      CHECK(out[0]->rank == 3 && out[0]->numel == 12);
      CHECK_MSG(optest_max_err(out[0], per) < 1e-12, "error %g", optest_max_err(out[0], per));
    } else {
      double want = r == 0 ? sum / wsum : sum;
      CHECK_MSG(fabs(tensor_real(out[0], 0) - want) < 1e-12, "got %g want %g", tensor_real(out[0], 0), want);
    }
    bb_tensor_release(out[0]);
  }
  for (int i = 0; i < 3; i++) bb_tensor_release(in[i]);
}

static void test_layernorm_axis_broadcast(void) {
  int64_t xd[] = {2, 3, 4, 5}, sd[] = {4, 5}, bd[] = {5};
  bb_tensor *in[3] = {optest_rand(BB_DTYPE_FLOAT, 4, xd, -2, 5), optest_rand(BB_DTYPE_FLOAT, 2, sd, -1, 1),
                      optest_rand(BB_DTYPE_FLOAT, 1, bd, -1, 1)};
  bb_ir_node *n = optest_node(model, "LayerNormalization", 3, 3);
  bb_attr_set_int(model, &n->attrs, "axis", -2);
  bb_attr_set_float(model, &n->attrs, "epsilon", 1e-3f);
  bb_tensor *out[3];
  bb_error err;
  CHECK_EQ_INT(bb_cpu_run_node(n, 17, in, 3, out, 3, NULL, &err), 0);
  double y[120], mean[6], inv[6];
  for (int r = 0; r < 6; r++) {
    double s = 0, ss = 0;
    for (int i = 0; i < 20; i++) s += tensor_real(in[0], r * 20 + i);
    mean[r] = s / 20;
    for (int i = 0; i < 20; i++) ss += pow(tensor_real(in[0], r * 20 + i) - mean[r], 2);
    inv[r] = 1 / sqrt(ss / 20 + (double)1e-3f);
    for (int i = 0; i < 20; i++)
      y[r * 20 + i] = (tensor_real(in[0], r * 20 + i) - mean[r]) * inv[r] * tensor_real(in[1], i) +
                      tensor_real(in[2], i % 5);
  }
  CHECK_MSG(optest_max_err(out[0], y) < 1e-5, "Y error %g", optest_max_err(out[0], y));
  CHECK(out[1]->rank == 4 && out[1]->dims[1] == 3 && out[1]->dims[2] == 1 && out[1]->dims[3] == 1);
  CHECK(out[1]->dtype == BB_DTYPE_FLOAT && out[2]->numel == 6);
  CHECK(optest_max_err(out[1], mean) < 1e-6 && optest_max_err(out[2], inv) < 1e-6);
  for (int i = 0; i < 3; i++) bb_tensor_release(out[i]), bb_tensor_release(in[i]);
}

static void test_instancenorm(void) {
  int64_t xd[] = {2, 3, 7}, cd[] = {3};
  bb_tensor *in[3] = {optest_rand(BB_DTYPE_DOUBLE, 3, xd, -3, 3), optest_rand(BB_DTYPE_DOUBLE, 1, cd, 0.5, 2),
                      optest_rand(BB_DTYPE_DOUBLE, 1, cd, -1, 1)};
  bb_tensor *out[1];
  bb_error err;
  CHECK_EQ_INT(bb_cpu_run_node(optest_node(model, "InstanceNormalization", 3, 1), 6, in, 3, out, 1, NULL, &err), 0);
  double y[42];
  for (int p = 0; p < 6; p++) {
    double s = 0, ss = 0;
    for (int i = 0; i < 7; i++) s += tensor_real(in[0], p * 7 + i);
    for (int i = 0; i < 7; i++) ss += pow(tensor_real(in[0], p * 7 + i) - s / 7, 2);
    for (int i = 0; i < 7; i++)
      y[p * 7 + i] = tensor_real(in[1], p % 3) * (tensor_real(in[0], p * 7 + i) - s / 7) / sqrt(ss / 7 + 1e-5) +
                     tensor_real(in[2], p % 3);
  }
  CHECK_MSG(optest_max_err(out[0], y) < 1e-7, "InstanceNorm error %g", optest_max_err(out[0], y)); /* eps is a float attribute */
  bb_tensor_release(out[0]);
  for (int i = 0; i < 3; i++) bb_tensor_release(in[i]);
}

/* ConvTranspose against the gather form: output o takes x[i]·w[k] for every i, k with
 * i·stride − pad_begin + k·dilation = o. */
static void ref_convtranspose_2d(const bb_tensor *x, const bb_tensor *w, const bb_tensor *b, int64_t group,
                                 const int64_t *s, const int64_t *dl, const int64_t *pb, int64_t oh, int64_t ow,
                                 double *y) {
  int64_t nb = x->dims[0], c = x->dims[1], ih = x->dims[2], iw = x->dims[3];
  int64_t mg = w->dims[1], kh = w->dims[2], kw = w->dims[3], cg = c / group;
  for (int64_t n = 0; n < nb; n++)
    for (int64_t m = 0; m < mg * group; m++)
      for (int64_t oy = 0; oy < oh; oy++)
        for (int64_t ox = 0; ox < ow; ox++) {
          double acc = b ? tensor_real(b, m) : 0;
          int64_t g = m / mg;
          for (int64_t ci = g * cg; ci < (g + 1) * cg; ci++)
            for (int64_t ky = 0; ky < kh; ky++)
              for (int64_t kx = 0; kx < kw; kx++) {
                int64_t ny = oy + pb[0] - ky * dl[0], nx = ox + pb[1] - kx * dl[1];
                if (ny < 0 || nx < 0 || ny % s[0] || nx % s[1] || ny / s[0] >= ih || nx / s[1] >= iw) continue;
                acc += tensor_real(x, ((n * c + ci) * ih + ny / s[0]) * iw + nx / s[1]) *
                       tensor_real(w, ((ci * mg + m % mg) * kh + ky) * kw + kx);
              }
          y[((n * mg * group + m) * oh + oy) * ow + ox] = acc;
        }
}

static void convtranspose_case(int32_t dt) {
  int64_t xd[] = {2, 4, 5, 6}, wd[] = {4, 3, 3, 2}, bd[] = {6};
  bb_tensor *in[3] = {optest_rand(dt, 4, xd, -1, 1), optest_rand(dt, 4, wd, -1, 1),
                      optest_rand(dt, 1, bd, -1, 1)};
  int64_t s[] = {2, 3}, dl[] = {2, 1}, pads[] = {1, 0, 2, 1}, opad[] = {1, 2};
  bb_ir_node *n = optest_node(model, "ConvTranspose", 3, 1);
  bb_attr_set_int(model, &n->attrs, "group", 2);
  bb_attr_set_ints(model, &n->attrs, "strides", s, 2);
  bb_attr_set_ints(model, &n->attrs, "dilations", dl, 2);
  bb_attr_set_ints(model, &n->attrs, "pads", pads, 4);
  bb_attr_set_ints(model, &n->attrs, "output_padding", opad, 2);
  bb_tensor *out[1];
  bb_error err;
  CHECK_EQ_INT(bb_cpu_run_node(n, 11, in, 3, out, 1, NULL, &err), 0);
  /* extents: s·(in−1) + output_padding + (k−1)·d + 1 − pads */
  int64_t oh = 2 * 4 + 1 + 2 * 2 + 1 - 1 - 2, ow = 3 * 5 + 2 + 1 + 1 - 0 - 1;
  CHECK(out[0]->rank == 4 && out[0]->dims[0] == 2 && out[0]->dims[1] == 6 && out[0]->dims[2] == oh &&
        out[0]->dims[3] == ow);
  double *want = malloc((size_t)(2 * 6 * oh * ow) * sizeof *want);
  ref_convtranspose_2d(in[0], in[1], in[2], 2, s, dl, pads, oh, ow, want);
  CHECK_MSG(optest_max_err(out[0], want) < 1e-5, "error %g", optest_max_err(out[0], want));
  bb_tensor_release(out[0]);
  /* output_shape with SAME_LOWER: the odd part of the total padding goes first */
  n = optest_node(model, "ConvTranspose", 2, 1);
  int64_t os[] = {10, 15}, one[] = {1, 1};
  bb_attr_set_ints(model, &n->attrs, "strides", s, 2);
  bb_attr_set_ints(model, &n->attrs, "dilations", one, 2);
  bb_attr_set_ints(model, &n->attrs, "output_shape", os, 2);
  bb_attr_set_int(model, &n->attrs, "group", 2);
  bb_attr_set_string(model, &n->attrs, "auto_pad", "SAME_LOWER");
  CHECK_EQ_INT(bb_cpu_run_node(n, 11, in, 2, out, 1, NULL, &err), 0);
  CHECK(out[0]->dims[2] == 10 && out[0]->dims[3] == 15);
  /* total padding: rows 2·4 + 3 − 10 = 1 → begin 1; columns 3·5 + 2 − 15 = 2 → begin 1 */
  int64_t pb[] = {1, 1};
  ref_convtranspose_2d(in[0], in[1], NULL, 2, s, one, pb, 10, 15, want);
  CHECK_MSG(optest_max_err(out[0], want) < 1e-5, "error %g", optest_max_err(out[0], want));
  bb_tensor_release(out[0]);
  free(want);
  for (int i = 0; i < 3; i++) bb_tensor_release(in[i]);
}

/* float32 takes the GEMM + col2im path, double the direct scatter loop */
static void test_convtranspose(void) {
  convtranspose_case(BB_DTYPE_FLOAT);
  convtranspose_case(BB_DTYPE_DOUBLE);
}

int main(void) {
  model = bb_model_new(NULL);
  RUN(test_sce_weighted_mean_ignore_high_rank);
  RUN(test_sce_none_and_sum);
  RUN(test_sce_float16);
  RUN(test_nll_weighted);
  RUN(test_layernorm_axis_broadcast);
  RUN(test_instancenorm);
  RUN(test_convtranspose);
  bb_model_free(model);
  return bb_test_finish();
}
