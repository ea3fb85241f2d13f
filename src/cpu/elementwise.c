/* CPU operators: the elementwise family's table, and the operators that move or convert
 * values without computing: Cast, CastLike, Identity and (inference-only) Dropout.
 *
 * Each op accepts the element types of its newest ONNX 1.12 (opset 17) version at every
 * opset, and implements the older forms where they differ: broadcast/axis attributes
 * before opset 7, Clip's min/max attributes before 11, Dropout's ratio attribute before 12,
 * Pow's single type before 12 and Cast's string `to` before 6. The kernels and the
 * broadcasting walk are in elementwise_*.c. */
#include <ctype.h>
#include <limits.h>
#include <string.h>

#include "cpu/elementwise.h"

/* Output 0 is input 0: a new header over the same buffer. */
static int share_input(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *x = ctx->inputs[0];
  ctx->outputs[0] = bb_tensor_view(x, x->rank, x->dims);
  return ctx->outputs[0] ? 0 : bbi_cpu_fail(ctx, BB_ERR_NOMEM, "out of memory");
}

/* ---- Cast, CastLike ------------------------------------------------------------------- */

static bool same_name(const char *a, const char *b) {
  for (; *a && *b; a++, b++)
    if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
  return *a == *b;
}

/* Cast's target type: an INT attribute (opset 6 on) or a type name such as "FLOAT"
 * (opset 1 to 5). */
static int cast_target(bbi_cpu_op_ctx *ctx, int32_t *dtype) {
  const bb_attr *to = bb_attr_find(&ctx->node->attrs, "to");
  if (!to) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "the attribute `to` is missing");
  if (to->has_type && to->type == BB_ATTR_STRING) {
    const char *name = bb_attr_get_string(&ctx->node->attrs, "to", "");
    for (int32_t dt = 1; dt <= BBI_EW_DTYPE_MAX; dt++)
      if (bb_dtype_name(dt) && same_name(bb_dtype_name(dt), name)) {
        *dtype = dt;
        return 0;
      }
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "`to` names no data type: \"%s\"", name);
  }
  const int64_t v = bb_attr_get_int(&ctx->node->attrs, "to", 0);
  if (v <= 0 || v > BBI_EW_DTYPE_MAX || !bb_dtype_name((int)v))
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "`to` = %lld is not a data type", (long long)v);
  *dtype = (int32_t)v;
  return 0;
}

static int cast_to(bbi_cpu_op_ctx *ctx, int32_t dtype) {
  if (!bbi_ew_convertible(dtype))
    return bbi_cpu_fail(ctx, BB_ERR_UNSUPPORTED, "casting to %s is not supported", bb_dtype_name(dtype));
  int rc = bbi_ew_check_type(ctx, 0, BBI_EW_ALL);
  if (rc) return rc;
  const bb_tensor *x = ctx->inputs[0];
  if (x->dtype == dtype) return share_input(ctx);
  if ((rc = bbi_cpu_make_output(ctx, 0, dtype, x->rank, x->dims))) return rc;
  bbi_ew_convert(dtype, bb_tensor_data(ctx->outputs[0]), x->dtype, bb_tensor_data(x), (size_t)x->numel);
  return 0;
}

static int cast(bbi_cpu_op_ctx *ctx) {
  int32_t dtype = BB_DTYPE_UNDEFINED;
  int rc = cast_target(ctx, &dtype);
  return rc ? rc : cast_to(ctx, dtype);
}

static int cast_like(bbi_cpu_op_ctx *ctx) {
  int rc = bbi_ew_check_type(ctx, 1, BBI_EW_ALL);
  return rc ? rc : cast_to(ctx, ctx->inputs[1]->dtype);
}

/* ---- Identity, Dropout ---------------------------------------------------------------- */

static int identity(bbi_cpu_op_ctx *ctx) {
  int rc = bbi_ew_check_type(ctx, 0, BBI_EW_ALL);
  return rc ? rc : share_input(ctx);
}

/* Reads optional input i, a one-element tensor of one of `types`, as a double; leaves
 * *value alone when the input is absent. */
static int scalar_input(bbi_cpu_op_ctx *ctx, size_t i, const char *what, uint32_t types, double *value) {
  const bb_tensor *t = bbi_cpu_input(ctx, i);
  if (!t) return 0;
  int rc = bbi_ew_check_type(ctx, i, types);
  if (rc) return rc;
  if (t->numel != 1)
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "%s must be a scalar, it has %lld elements", what,
                       (long long)t->numel);
  *value = bbi_cpu_get_f64(t, 0);
  return 0;
}

/* Inference Dropout: the output is the input and the mask is all true. Training mode with
 * a nonzero ratio (a random mask) is not supported; training with ratio 0 is the
 * identity, as ONNX defines it. Before opset 7 an explicit is_test=0 asks for training. */
static int dropout(bbi_cpu_op_ctx *ctx) {
  int rc = bbi_ew_check_type(ctx, 0, BBI_EW_FLOATS);
  if (rc) return rc;
  double ratio = 0.5;
  bool training = false;
  if (ctx->opset < 12) {
    if (bbi_cpu_input(ctx, 1) || bbi_cpu_input(ctx, 2))
      return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "takes ratio as an attribute before opset 12, not an input");
    ratio = bb_attr_get_float(&ctx->node->attrs, "ratio", 0.5f);
    training = ctx->opset < 7 && bb_attr_find(&ctx->node->attrs, "is_test") &&
               bb_attr_get_int(&ctx->node->attrs, "is_test", 1) == 0;
  } else {
    double mode = 0;
    if ((rc = scalar_input(ctx, 1, "ratio", BBI_EW_FLOATS, &ratio)) ||
        (rc = scalar_input(ctx, 2, "training_mode", BBI_EW_TYPE(BB_DTYPE_BOOL), &mode)))
      return rc;
    training = mode != 0;
  }
  if (!(ratio >= 0 && ratio < 1))
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "ratio %g is outside [0, 1)", ratio);
  if (training && ratio > 0)
    return bbi_cpu_fail(ctx, BB_ERR_UNSUPPORTED, "training mode (a random mask, ratio %g) is not supported", ratio);
  if ((rc = share_input(ctx)) || ctx->n_outputs < 2) return rc;
  const bb_tensor *x = ctx->inputs[0];
  /* the mask is bool from opset 10, the input's type before */
  const int32_t mask_type = ctx->opset >= 10 ? BB_DTYPE_BOOL : x->dtype;
  if ((rc = bbi_cpu_make_output(ctx, 1, mask_type, x->rank, x->dims))) return rc;
  const uint8_t one_bool = 1;
  unsigned char one[8];
  bbi_ew_convert(mask_type, one, BB_DTYPE_BOOL, &one_bool, 1);
  const size_t esize = bb_dtype_size(mask_type);
  char *mask = bb_tensor_data(ctx->outputs[1]);
  for (int64_t i = 0; i < x->numel; i++) memcpy(mask + (size_t)i * esize, one, esize);
  return 0;
}

/* ---- the table -------------------------------------------------------------------------- */

#define T_FLOATS "float,double,float16,bfloat16"
#define T_FLOATS_NO_BF16 "float,double,float16"
#define T_SIGNED "int8,int16,int32,int64"
#define T_UNSIGNED "uint8,uint16,uint32,uint64"
#define T_NUMERIC T_FLOATS "," T_SIGNED "," T_UNSIGNED
#define T_ALL T_NUMERIC ",bool"

/* clang-format off */
const bbi_cpu_op bbi_cpu_ops_elementwise[] = {
    /* op_type         since in     out    types                          run */
    {"Abs",              1, 1, 1,       1, 1, T_NUMERIC,                     bbi_ew_abs},
    {"Acos",             7, 1, 1,       1, 1, T_FLOATS_NO_BF16,              bbi_ew_acos},
    {"Acosh",            9, 1, 1,       1, 1, T_FLOATS_NO_BF16,              bbi_ew_acosh},
    {"Add",              1, 2, 2,       1, 1, T_NUMERIC,                     bbi_ew_add},
    {"And",              1, 2, 2,       1, 1, "bool",                        bbi_ew_and},
    {"Asin",             7, 1, 1,       1, 1, T_FLOATS_NO_BF16,              bbi_ew_asin},
    {"Asinh",            9, 1, 1,       1, 1, T_FLOATS_NO_BF16,              bbi_ew_asinh},
    {"Atan",             7, 1, 1,       1, 1, T_FLOATS_NO_BF16,              bbi_ew_atan},
    {"Atanh",            9, 1, 1,       1, 1, T_FLOATS_NO_BF16,              bbi_ew_atanh},
    {"Cast",             1, 1, 1,       1, 1, T_ALL,                         cast},
    {"CastLike",        15, 2, 2,       1, 1, T_ALL,                         cast_like},
    {"Ceil",             1, 1, 1,       1, 1, T_FLOATS,                      bbi_ew_ceil},
    {"Celu",            12, 1, 1,       1, 1, "float",                       bbi_ew_celu},
    {"Clip",             1, 1, 3,       1, 1, T_NUMERIC,                     bbi_ew_clip},
    {"Cos",              7, 1, 1,       1, 1, T_FLOATS_NO_BF16,              bbi_ew_cos},
    {"Cosh",             9, 1, 1,       1, 1, T_FLOATS_NO_BF16,              bbi_ew_cosh},
    {"Div",              1, 2, 2,       1, 1, T_NUMERIC,                     bbi_ew_div},
    {"Dropout",          1, 1, 3,       1, 2, T_FLOATS,                      dropout},
    {"Elu",              1, 1, 1,       1, 1, T_FLOATS_NO_BF16,              bbi_ew_elu},
    {"Equal",            1, 2, 2,       1, 1, T_ALL,                         bbi_ew_equal},
    {"Erf",              9, 1, 1,       1, 1, T_NUMERIC,                     bbi_ew_erf},
    {"Exp",              1, 1, 1,       1, 1, T_FLOATS,                      bbi_ew_exp},
    {"Floor",            1, 1, 1,       1, 1, T_FLOATS,                      bbi_ew_floor},
    {"Greater",          1, 2, 2,       1, 1, T_NUMERIC,                     bbi_ew_greater},
    {"GreaterOrEqual",  12, 2, 2,       1, 1, T_NUMERIC,                     bbi_ew_greater_or_equal},
    {"HardSigmoid",      1, 1, 1,       1, 1, T_FLOATS_NO_BF16,              bbi_ew_hard_sigmoid},
    {"Identity",         1, 1, 1,       1, 1, T_ALL,                         identity},
    {"IsInf",           10, 1, 1,       1, 1, "float,double",                bbi_ew_isinf},
    {"IsNaN",            9, 1, 1,       1, 1, T_FLOATS,                      bbi_ew_isnan},
    {"LeakyRelu",        1, 1, 1,       1, 1, T_FLOATS,                      bbi_ew_leaky_relu},
    {"Less",             1, 2, 2,       1, 1, T_NUMERIC,                     bbi_ew_less},
    {"LessOrEqual",     12, 2, 2,       1, 1, T_NUMERIC,                     bbi_ew_less_or_equal},
    {"Log",              1, 1, 1,       1, 1, T_FLOATS,                      bbi_ew_log},
    {"Max",              1, 1, INT_MAX, 1, 1, T_NUMERIC,                     bbi_ew_max},
    {"Mean",             1, 1, INT_MAX, 1, 1, T_FLOATS,                      bbi_ew_mean},
    {"Min",              1, 1, INT_MAX, 1, 1, T_NUMERIC,                     bbi_ew_min},
    {"Mod",             10, 2, 2,       1, 1, T_NUMERIC,                     bbi_ew_mod},
    {"Mul",              1, 2, 2,       1, 1, T_NUMERIC,                     bbi_ew_mul},
    {"Neg",              1, 1, 1,       1, 1, T_FLOATS "," T_SIGNED,         bbi_ew_neg},
    {"Not",              1, 1, 1,       1, 1, "bool",                        bbi_ew_not},
    {"Or",               1, 2, 2,       1, 1, "bool",                        bbi_ew_or},
    {"PRelu",            7, 2, 2,       1, 1, T_FLOATS,                      bbi_ew_prelu},
    {"Pow",              1, 2, 2,       1, 1, T_FLOATS ",int32,int64",       bbi_ew_pow},
    {"Reciprocal",       1, 1, 1,       1, 1, T_FLOATS,                      bbi_ew_reciprocal},
    {"Relu",             1, 1, 1,       1, 1, T_FLOATS "," T_SIGNED,         bbi_ew_relu},
    {"Round",           11, 1, 1,       1, 1, T_FLOATS_NO_BF16,              bbi_ew_round},
    {"Selu",             1, 1, 1,       1, 1, T_FLOATS_NO_BF16,              bbi_ew_selu},
    {"Sigmoid",          1, 1, 1,       1, 1, T_FLOATS,                      bbi_ew_sigmoid},
    {"Sign",             9, 1, 1,       1, 1, T_NUMERIC,                     bbi_ew_sign},
    {"Sin",              7, 1, 1,       1, 1, T_FLOATS_NO_BF16,              bbi_ew_sin},
    {"Sinh",             9, 1, 1,       1, 1, T_FLOATS_NO_BF16,              bbi_ew_sinh},
    {"Softplus",         1, 1, 1,       1, 1, T_FLOATS_NO_BF16,              bbi_ew_softplus},
    {"Softsign",         1, 1, 1,       1, 1, T_FLOATS_NO_BF16,              bbi_ew_softsign},
    {"Sqrt",             1, 1, 1,       1, 1, T_FLOATS,                      bbi_ew_sqrt},
    {"Sub",              1, 2, 2,       1, 1, T_NUMERIC,                     bbi_ew_sub},
    {"Sum",              1, 1, INT_MAX, 1, 1, T_FLOATS,                      bbi_ew_sum},
    {"Tan",              7, 1, 1,       1, 1, T_FLOATS_NO_BF16,              bbi_ew_tan},
    {"Tanh",             1, 1, 1,       1, 1, T_FLOATS,                      bbi_ew_tanh},
    {"ThresholdedRelu", 10, 1, 1,       1, 1, T_FLOATS_NO_BF16,              bbi_ew_thresholded_relu},
    {"Where",            9, 3, 3,       1, 1, T_ALL,                         bbi_ew_where},
    {"Xor",              1, 2, 2,       1, 1, "bool",                        bbi_ew_xor},
};
/* clang-format on */
const size_t bbi_cpu_ops_elementwise_count = sizeof bbi_cpu_ops_elementwise / sizeof bbi_cpu_ops_elementwise[0];
