/* CPU operators: the normalisations BatchNormalization (inference and, from opset 14,
 * training mode), LayerNormalization and InstanceNormalization. Statistics are computed in
 * double precision; each output element is rounded once into the output type. */
#include <math.h>

#include "cpu/nn.h"

static const int32_t FLOAT_TYPES[] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_BFLOAT16,
                                      BB_DTYPE_UNDEFINED};
static const int32_t FLOAT_NO_BF16[] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_UNDEFINED};

/* ---- BatchNormalization -------------------------------------------------------------------- */

int bbi_nn_batch_normalization(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *x = ctx->inputs[0];
  int rc = bbi_cpu_expect_dtype(ctx, 0, FLOAT_TYPES);
  if (rc) return rc;
  if (x->rank < 2) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "X must be [N, C, ...] (rank %d)", x->rank);
  int64_t channels = x->dims[1];
  for (size_t i = 1; i < 5; i++) {
    const bb_tensor *p = ctx->inputs[i];
    if ((rc = bbi_cpu_expect_dtype(ctx, i, FLOAT_TYPES))) return rc;
    if (p->numel != channels)
      return bbi_cpu_fail(ctx, BB_ERR_TYPE, "input %zu has %lld values, X has %lld channels", i, (long long)p->numel,
                         (long long)channels);
  }
  if (ctx->opset < 9 && bb_attr_get_int(&ctx->node->attrs, "spatial", 1) != 1)
    return bbi_cpu_fail(ctx, BB_ERR_UNSUPPORTED, "spatial=0 is not supported");
  double eps = bb_attr_get_float(&ctx->node->attrs, "epsilon", 1e-5f);
  double momentum = bb_attr_get_float(&ctx->node->attrs, "momentum", 0.9f);
  /* training: opset ≥ 14 says so with training_mode; earlier opsets by asking for the statistics outputs */
  bool training = ctx->opset >= 14 ? bb_attr_get_int(&ctx->node->attrs, "training_mode", 0) != 0
                                   : ctx->node->outputs.len > 1;
  if (training && ctx->opset < 14)
    return bbi_cpu_fail(ctx, BB_ERR_UNSUPPORTED, "training-mode outputs of BatchNormalization-%lld",
                       (long long)ctx->opset);
  if ((rc = bbi_cpu_make_output(ctx, 0, x->dtype, x->rank, x->dims))) return rc;
  int64_t n_batch = x->dims[0], spatial = 1; /* the product of the dims after C (any may be 0) */
  for (int d = 2; d < x->rank; d++) spatial *= x->dims[d];
  if (!x->numel) return 0;
  const bb_tensor *scale = ctx->inputs[1], *bias = ctx->inputs[2], *mean_in = ctx->inputs[3], *var_in = ctx->inputs[4];
  if (training) {
    for (size_t o = 1; o < 3 && o < ctx->n_outputs; o++)
      if ((rc = bbi_cpu_make_output(ctx, o, mean_in->dtype, 1, &channels))) return rc;
  }
  for (int64_t c = 0; c < channels; c++) {
    double mean = bbi_cpu_get_f64(mean_in, c), var = bbi_cpu_get_f64(var_in, c);
    if (training) { /* batch statistics (population variance), and the running averages */
      double s = 0, ss = 0, count = (double)(n_batch * spatial);
      for (int64_t n = 0; n < n_batch; n++)
        for (int64_t i = 0; i < spatial; i++) {
          double v = bbi_cpu_get_f64(x, (n * channels + c) * spatial + i);
          s += v;
          ss += v * v;
        }
      double bmean = s / count, bvar = ss / count - bmean * bmean;
      if (ctx->n_outputs > 1 && ctx->outputs[1]) bbi_cpu_set_f64(ctx->outputs[1], c, mean * momentum + bmean * (1 - momentum));
      if (ctx->n_outputs > 2 && ctx->outputs[2]) bbi_cpu_set_f64(ctx->outputs[2], c, var * momentum + bvar * (1 - momentum));
      mean = bmean;
      var = bvar;
    }
    double k = bbi_cpu_get_f64(scale, c) / sqrt(var + eps), shift = bbi_cpu_get_f64(bias, c) - mean * k;
    for (int64_t n = 0; n < n_batch; n++) {
      int64_t base = (n * channels + c) * spatial;
      if (x->dtype == BB_DTYPE_FLOAT) {
        const float *xs = (const float *)bb_tensor_data(x) + base;
        float *ys = (float *)bb_tensor_data(ctx->outputs[0]) + base;
        for (int64_t i = 0; i < spatial; i++) ys[i] = (float)(xs[i] * k + shift);
      } else {
        for (int64_t i = 0; i < spatial; i++)
          bbi_cpu_set_f64(ctx->outputs[0], base + i, bbi_cpu_get_f64(x, base + i) * k + shift);
      }
    }
  }
  return 0;
}

/* ---- LayerNormalization / InstanceNormalization ------------------------------------------ */

int bbi_nn_layer_normalization(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *x = ctx->inputs[0], *scale = ctx->inputs[1], *bias = bbi_cpu_input(ctx, 2);
  int rc = bbi_cpu_expect_dtype(ctx, 0, FLOAT_TYPES);
  if (rc) return rc;
  if (scale->dtype != x->dtype || (bias && bias->dtype != x->dtype))
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "X, Scale and B must share one element type");
  if ((rc = bbi_cpu_check_unidirectional(ctx, scale, x, "Scale")) || (bias && (rc = bbi_cpu_check_unidirectional(ctx, bias, x, "B"))))
    return rc;
  int axis;
  if ((rc = bbi_cpu_axis(ctx, bb_attr_get_int(&ctx->node->attrs, "axis", -1), x->rank, &axis))) return rc;
  double eps = bb_attr_get_float(&ctx->node->attrs, "epsilon", 1e-5f);
  int64_t stash = bb_attr_get_int(&ctx->node->attrs, "stash_type", 1);
  /* Mean and InvStdDev are float or bfloat16 (type constraint U), as stash_type says */
  int32_t stat_type = stash == 1 ? BB_DTYPE_FLOAT : stash == 16 ? BB_DTYPE_BFLOAT16 : BB_DTYPE_UNDEFINED;
  if (stat_type == BB_DTYPE_UNDEFINED)
    return bbi_cpu_fail(ctx, BB_ERR_UNSUPPORTED, "stash_type %lld is not supported", (long long)stash);
  int64_t outer = 1, inner = 1, stat_dims[BB_MAX_RANK];
  for (int d = 0; d < x->rank; d++) {
    if (d < axis) outer *= x->dims[d];
    else inner *= x->dims[d];
    stat_dims[d] = d < axis ? x->dims[d] : 1;
  }
  if ((rc = bbi_cpu_make_output(ctx, 0, x->dtype, x->rank, x->dims))) return rc;
  bb_tensor *mean_out = NULL, *inv_out = NULL;
  if (bbi_cpu_output_wanted(ctx, 1)) {
    if ((rc = bbi_cpu_make_output(ctx, 1, stat_type, x->rank, stat_dims))) return rc;
    mean_out = ctx->outputs[1];
  }
  if (bbi_cpu_output_wanted(ctx, 2)) {
    if ((rc = bbi_cpu_make_output(ctx, 2, stat_type, x->rank, stat_dims))) return rc;
    inv_out = ctx->outputs[2];
  }
  bb_tensor *y = ctx->outputs[0];
  for (int64_t r = 0; r < outer; r++) {
    int64_t base = r * inner;
    double s = 0.0;
    for (int64_t i = 0; i < inner; i++) s += bbi_cpu_get_f64(x, base + i);
    double mean = inner ? s / (double)inner : 0.0, ss = 0.0;
    for (int64_t i = 0; i < inner; i++) {
      double dv = bbi_cpu_get_f64(x, base + i) - mean;
      ss += dv * dv;
    }
    double inv = 1.0 / sqrt((inner ? ss / (double)inner : 0.0) + eps);
    if (mean_out) bbi_cpu_set_f64(mean_out, r, mean);
    if (inv_out) bbi_cpu_set_f64(inv_out, r, inv);
    for (int64_t i = 0; i < inner; i++) {
      int64_t e = base + i;
      double g = bbi_cpu_get_f64(scale, bbi_cpu_broadcast_index(scale, x->rank, x->dims, e));
      double v = (bbi_cpu_get_f64(x, e) - mean) * inv * g;
      if (bias) v += bbi_cpu_get_f64(bias, bbi_cpu_broadcast_index(bias, x->rank, x->dims, e));
      bbi_cpu_set_f64(y, e, v);
    }
  }
  return 0;
}

int bbi_nn_instance_normalization(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *x = ctx->inputs[0], *scale = ctx->inputs[1], *bias = ctx->inputs[2];
  int rc = bbi_cpu_expect_dtype(ctx, 0, FLOAT_NO_BF16);
  if (rc) return rc;
  if (x->rank < 3) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "input must be [N, C, D1, ...] (rank %d)", x->rank);
  int64_t n_batch = x->dims[0], channels = x->dims[1], spatial = 1;
  for (int d = 2; d < x->rank; d++) spatial *= x->dims[d];
  if (scale->dtype != x->dtype || bias->dtype != x->dtype)
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "input, scale and B must share one element type");
  if (scale->rank != 1 || scale->dims[0] != channels || bias->rank != 1 || bias->dims[0] != channels)
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "scale and B must be 1-D with %lld values", (long long)channels);
  double eps = bb_attr_get_float(&ctx->node->attrs, "epsilon", 1e-5f);
  if ((rc = bbi_cpu_make_output(ctx, 0, x->dtype, x->rank, x->dims))) return rc;
  bb_tensor *y = ctx->outputs[0];
  for (int64_t n = 0; n < n_batch; n++)
    for (int64_t c = 0; c < channels; c++) {
      int64_t base = (n * channels + c) * spatial;
      double s = 0.0, ss = 0.0;
      for (int64_t i = 0; i < spatial; i++) s += bbi_cpu_get_f64(x, base + i);
      double mean = spatial ? s / (double)spatial : 0.0;
      for (int64_t i = 0; i < spatial; i++) {
        double dv = bbi_cpu_get_f64(x, base + i) - mean;
        ss += dv * dv;
      }
      double k = bbi_cpu_get_f64(scale, c) / sqrt((spatial ? ss / (double)spatial : 0.0) + eps);
      double b = bbi_cpu_get_f64(bias, c);
      for (int64_t i = 0; i < spatial; i++) bbi_cpu_set_f64(y, base + i, (bbi_cpu_get_f64(x, base + i) - mean) * k + b);
    }
  return 0;
}
