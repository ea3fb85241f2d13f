/* CPU operators: the classification losses SoftmaxCrossEntropyLoss and
 * NegativeLogLikelihoodLoss over [N, C, d1, ...] scores. Arithmetic is done in double
 * precision per element and rounded once into the output type. */
#include <math.h>
#include <string.h>

#include "cpu/nn.h"

static const int32_t FLOAT_TYPES[] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_BFLOAT16,
                                      BB_DTYPE_UNDEFINED};
static const int32_t FLOAT_NO_BF16[] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_UNDEFINED};
static const int32_t LABEL_TYPES[] = {BB_DTYPE_INT32, BB_DTYPE_INT64, BB_DTYPE_UNDEFINED};

/* ---- SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss ---------------------------------- */

enum { RED_NONE, RED_SUM, RED_MEAN };

/* Shared by both losses. logp(n, c, j) is the log-probability of class c at batch n and
 * position j (flattened d1..dk); scores has shape [N, C, d...], labels [N, d...]. */
static int class_loss(bbi_cpu_op_ctx *ctx, bool softmax) {
  const bb_tensor *x = ctx->inputs[0], *labels = ctx->inputs[1], *w = bbi_cpu_input(ctx, 2);
  int rc = bbi_cpu_expect_dtype(ctx, 0, ctx->opset >= 13 ? FLOAT_TYPES : FLOAT_NO_BF16);
  if (rc || (rc = bbi_cpu_expect_dtype(ctx, 1, LABEL_TYPES))) return rc;
  if (x->rank < 2) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "input must be [N, C, ...] (rank %d)", x->rank);
  if (labels->rank != x->rank - 1 || labels->dims[0] != x->dims[0])
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "labels must be [N, d1, ...] matching the input");
  for (int d = 2; d < x->rank; d++)
    if (labels->dims[d - 1] != x->dims[d]) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "labels do not match the input's dims");
  int64_t n_batch = x->dims[0], classes = x->dims[1], inner = 1;
  for (int d = 2; d < x->rank; d++) inner *= x->dims[d];
  if (w) {
    if (w->dtype != x->dtype) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "weights must have the input's element type");
    if (w->rank != 1 || w->dims[0] != classes)
      return bbi_cpu_fail(ctx, BB_ERR_TYPE, "weights must be 1-D with %lld values", (long long)classes);
  }
  const char *red_s = bb_attr_get_string(&ctx->node->attrs, "reduction", "mean");
  int red = strcmp(red_s, "none") == 0 ? RED_NONE : strcmp(red_s, "sum") == 0 ? RED_SUM
                                                  : strcmp(red_s, "mean") == 0 ? RED_MEAN : -1;
  if (red < 0) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "reduction %s is not none, sum or mean", red_s);
  bool has_ignore = bb_attr_find(&ctx->node->attrs, "ignore_index") != NULL;
  int64_t ignore = bb_attr_get_int(&ctx->node->attrs, "ignore_index", 0);

  if (red == RED_NONE) rc = bbi_cpu_make_output(ctx, 0, x->dtype, labels->rank, labels->dims);
  else rc = bbi_cpu_make_output(ctx, 0, x->dtype, 0, NULL);
  if (rc) return rc;
  bb_tensor *logp = NULL;
  if (softmax && bbi_cpu_output_wanted(ctx, 1)) {
    if ((rc = bbi_cpu_make_output(ctx, 1, x->dtype, x->rank, x->dims))) return rc;
    logp = ctx->outputs[1];
  }
  bb_tensor *y = ctx->outputs[0];
  double total = 0.0, weight_sum = 0.0;
  for (int64_t n = 0; n < n_batch; n++)
    for (int64_t j = 0; j < inner; j++) {
      int64_t base = n * classes * inner + j; /* element (n, 0, j); classes are inner apart */
      double lse = 0.0;
      if (softmax) {
        double mx = -INFINITY;
        for (int64_t c = 0; c < classes; c++) {
          double v = bbi_cpu_get_f64(x, base + c * inner);
          if (v > mx || v != v) mx = v;
        }
        double s = 0.0;
        for (int64_t c = 0; c < classes; c++) s += exp(bbi_cpu_get_f64(x, base + c * inner) - mx);
        lse = mx + log(s);
        if (logp)
          for (int64_t c = 0; c < classes; c++)
            bbi_cpu_set_f64(logp, base + c * inner, bbi_cpu_get_f64(x, base + c * inner) - lse);
      }
      int64_t lab = bbi_cpu_get_i64(labels, n * inner + j);
      double loss = 0.0, wt = 0.0;
      if (!(has_ignore && lab == ignore)) {
        if (lab < 0 || lab >= classes)
          return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "label %lld is outside [0, %lld)", (long long)lab,
                             (long long)classes);
        wt = w ? bbi_cpu_get_f64(w, lab) : 1.0;
        double lp = bbi_cpu_get_f64(x, base + lab * inner) - lse;
        loss = -lp * wt;
      }
      if (red == RED_NONE) bbi_cpu_set_f64(y, n * inner + j, loss);
      total += loss;
      weight_sum += wt;
    }
  if (red == RED_SUM) bbi_cpu_set_f64(y, 0, total);
  else if (red == RED_MEAN) bbi_cpu_set_f64(y, 0, total / weight_sum);
  return 0;
}

int bbi_nn_softmax_cross_entropy_loss(bbi_cpu_op_ctx *ctx) { return class_loss(ctx, true); }
int bbi_nn_negative_log_likelihood_loss(bbi_cpu_op_ctx *ctx) { return class_loss(ctx, false); }
