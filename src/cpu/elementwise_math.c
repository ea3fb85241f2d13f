/* CPU operators: elementwise functions computed in double precision per element and
 * rounded once into the output type: the trigonometric and hyperbolic functions, IsNaN
 * and IsInf, and the activations PRelu (slope broadcast to X), ThresholdedRelu and Celu. */
#include <math.h>

#include "cpu/elementwise.h"

static const int32_t FLOAT_TYPES[] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_BFLOAT16,
                                      BB_DTYPE_UNDEFINED};
static const int32_t FLOAT_NO_BF16[] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_UNDEFINED};
static const int32_t FLOAT_DOUBLE[] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_UNDEFINED};
static const int32_t FLOAT_ONLY[] = {BB_DTYPE_FLOAT, BB_DTYPE_UNDEFINED};

/* ---- PRelu ------------------------------------------------------------------------------- */

int bbi_ew_prelu(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *x = ctx->inputs[0], *slope = ctx->inputs[1];
  int rc = bbi_cpu_expect_dtype(ctx, 0, ctx->opset >= 16 ? FLOAT_TYPES : FLOAT_NO_BF16);
  if (rc) return rc;
  if (slope->dtype != x->dtype) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "X and slope must share one element type");
  if ((rc = bbi_cpu_check_unidirectional(ctx, slope, x, "slope"))) return rc;
  if ((rc = bbi_cpu_make_output(ctx, 0, x->dtype, x->rank, x->dims))) return rc;
  for (int64_t i = 0; i < x->numel; i++) {
    double v = bbi_cpu_get_f64(x, i);
    if (v < 0) v *= bbi_cpu_get_f64(slope, bbi_cpu_broadcast_index(slope, x->rank, x->dims, i));
    bbi_cpu_set_f64(ctx->outputs[0], i, v);
  }
  return 0;
}
/* ---- elementwise functions of one float input ---------------------------------------------- */

/* f(v, alpha): alpha is the op's one float attribute, read once per node */
typedef double (*unary_fn)(double v, double alpha);

static int map_unary(bbi_cpu_op_ctx *ctx, const int32_t *types, unary_fn f, double alpha) {
  const bb_tensor *x = ctx->inputs[0];
  int rc = bbi_cpu_expect_dtype(ctx, 0, types);
  if (rc || (rc = bbi_cpu_make_output(ctx, 0, x->dtype, x->rank, x->dims))) return rc;
  bb_tensor *y = ctx->outputs[0];
  if (x->dtype == BB_DTYPE_FLOAT) {
    const float *xs = bb_tensor_data(x);
    float *ys = bb_tensor_data(y);
    for (int64_t i = 0; i < x->numel; i++) ys[i] = (float)f(xs[i], alpha);
  } else {
    for (int64_t i = 0; i < x->numel; i++) bbi_cpu_set_f64(y, i, f(bbi_cpu_get_f64(x, i), alpha));
  }
  return 0;
}

#define TRIG(FN)                                                                                       \
  static double fn_##FN(double v, double alpha) {                                                            \
    (void)alpha;                                                                                             \
    return FN(v);                                                                                            \
  }                                                                                                          \
  int bbi_ew_##FN(bbi_cpu_op_ctx *ctx) { return map_unary(ctx, FLOAT_NO_BF16, fn_##FN, 0.0); }
TRIG(sin)
TRIG(cos)
TRIG(tan)
TRIG(asin)
TRIG(acos)
TRIG(atan)
TRIG(sinh)
TRIG(cosh)
TRIG(asinh)
TRIG(acosh)
TRIG(atanh)
#undef TRIG

static double fn_thresholded_relu(double v, double alpha) { return v > alpha ? v : 0.0; }
int bbi_ew_thresholded_relu(bbi_cpu_op_ctx *ctx) {
  return map_unary(ctx, FLOAT_NO_BF16, fn_thresholded_relu, bb_attr_get_float(&ctx->node->attrs, "alpha", 1.0f));
}

static double fn_celu(double v, double alpha) { return v > 0 ? v : alpha * expm1(v / alpha); }
int bbi_ew_celu(bbi_cpu_op_ctx *ctx) {
  double alpha = bb_attr_get_float(&ctx->node->attrs, "alpha", 1.0f);
  if (alpha == 0.0) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "alpha must not be 0");
  return map_unary(ctx, FLOAT_ONLY, fn_celu, alpha);
}
/* ---- IsNaN / IsInf ----------------------------------------------------------------------- */

static int classify(bbi_cpu_op_ctx *ctx, const int32_t *types, bool is_nan) {
  const bb_tensor *x = ctx->inputs[0];
  int rc = bbi_cpu_expect_dtype(ctx, 0, types);
  if (rc || (rc = bbi_cpu_make_output(ctx, 0, BB_DTYPE_BOOL, x->rank, x->dims))) return rc;
  bool neg = bb_attr_get_int(&ctx->node->attrs, "detect_negative", 1) != 0;
  bool pos = bb_attr_get_int(&ctx->node->attrs, "detect_positive", 1) != 0;
  uint8_t *ys = bb_tensor_data(ctx->outputs[0]);
  for (int64_t i = 0; i < x->numel; i++) {
    double v = bbi_cpu_get_f64(x, i);
    ys[i] = is_nan ? v != v : (pos && v == INFINITY) || (neg && v == -INFINITY);
  }
  return 0;
}
int bbi_ew_isnan(bbi_cpu_op_ctx *ctx) { return classify(ctx, ctx->opset >= 13 ? FLOAT_TYPES : FLOAT_NO_BF16, true); }
int bbi_ew_isinf(bbi_cpu_op_ctx *ctx) { return classify(ctx, FLOAT_DOUBLE, false); }
