/* Unary elementwise operators: math functions, activations, Not and Clip.
 *
 * Each operator has a float and a double kernel (float32 uses the SIMD kernels where one
 * exists), integer kernels where ONNX defines the op on integers, and runs float16 and
 * bfloat16 through its float kernel in chunks. An integer type without its own kernel
 * (Erf) is computed in double and converted back with Cast's rules. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "cpu/elementwise.h"
#include "tensor/kernels/split.h"
#include "util/parallel.h"
#include "tensor/kernels/kernels.h"

typedef struct unary_args {
  float alpha, beta, gamma;
} unary_args;

typedef void (*unary_f32_fn)(size_t n, const float *x, float *y, const unary_args *p);
typedef void (*unary_f64_fn)(size_t n, const double *x, double *y, const unary_args *p);
typedef void (*unary_int_fn)(size_t n, const void *x, void *y);

typedef struct unary_op {
  uint32_t types;
  unary_f32_fn f32;
  unary_f64_fn f64;
  unary_int_fn ints[BBI_EW_DTYPE_MAX + 1]; /* integer and bool kernels by dtype */
} unary_op;

/* A double kernel from an expression of x (and the attributes in p). */
#define DEFINE_F64_UNARY(name, EXPR_D)                                                                    \
  static void name##_f64(size_t n, const double *in, double *y, const unary_args *p) {                   \
    for (size_t i = 0; i < n; i++) {                                                                      \
      const double x = in[i];                                                                             \
      y[i] = (EXPR_D);                                                                                    \
    }                                                                                                     \
  }

/* float and double kernels from an expression each. */
#define DEFINE_UNARY(name, EXPR_F, EXPR_D)                                                                \
  static void name##_f32(size_t n, const float *in, float *y, const unary_args *p) {                     \
    for (size_t i = 0; i < n; i++) {                                                                      \
      const float x = in[i];                                                                              \
      y[i] = (EXPR_F);                                                                                    \
    }                                                                                                     \
  }                                                                                                       \
  DEFINE_F64_UNARY(name, EXPR_D)

/* float32 from the SIMD kernels, double from an expression. */
#define DEFINE_SIMD_UNARY(name, OP, EXPR_D)                                                               \
  static void name##_f32(size_t n, const float *x, float *y, const unary_args *p) {                      \
    bbi_f32_vunary(OP, n, x, y);                                                                           \
  }                                                                                                       \
  DEFINE_F64_UNARY(name, EXPR_D)

DEFINE_SIMD_UNARY(neg, BBI_UNARY_NEG, -x)
DEFINE_SIMD_UNARY(abs, BBI_UNARY_ABS, fabs(x))
DEFINE_SIMD_UNARY(sqrt, BBI_UNARY_SQRT, sqrt(x))
DEFINE_SIMD_UNARY(exp, BBI_UNARY_EXP, exp(x))
DEFINE_SIMD_UNARY(log, BBI_UNARY_LOG, log(x))
DEFINE_SIMD_UNARY(relu, BBI_UNARY_RELU, x < 0 ? 0.0 : x)
DEFINE_SIMD_UNARY(sigmoid, BBI_UNARY_SIGMOID, 1.0 / (1.0 + exp(-x)))
DEFINE_SIMD_UNARY(tanh, BBI_UNARY_TANH, tanh(x))
DEFINE_UNARY(leaky_relu, x < 0 ? p->alpha * x : x, x < 0 ? p->alpha * x : x)
DEFINE_UNARY(reciprocal, 1.0f / x, 1.0 / x)
DEFINE_UNARY(floor, floorf(x), floor(x))
DEFINE_UNARY(ceil, ceilf(x), ceil(x))
/* the default rounding mode rounds halves to even, as ONNX Round asks */
DEFINE_UNARY(round, nearbyintf(x), nearbyint(x))
/* zeros (of either sign) and NaN are their own sign */
DEFINE_UNARY(sign, x > 0 ? 1.0f : x < 0 ? -1.0f : x, x > 0 ? 1.0 : x < 0 ? -1.0 : x)
DEFINE_UNARY(erf, erff(x), erf(x))
/* log(1 + e^x) without overflow for large x */
DEFINE_UNARY(softplus, x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x)), x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)))
DEFINE_UNARY(softsign, x / (1.0f + fabsf(x)), x / (1.0 + fabs(x)))
DEFINE_UNARY(elu, x < 0 ? p->alpha * expm1f(x) : x, x < 0 ? p->alpha * expm1(x) : x)
DEFINE_UNARY(selu, x > 0 ? p->gamma * x : p->gamma * (p->alpha * expm1f(x)),
             x > 0 ? p->gamma * x : p->gamma * (p->alpha * expm1(x)))
/* written so that NaN stays NaN; alpha*x + beta in double, since it cancels near 0 */
#define HARD_SIGMOID(v) ((v) < 0 ? 0 : (v) > 1 ? 1 : (v))
DEFINE_UNARY(hard_sigmoid, (float)HARD_SIGMOID((double)p->alpha * x + p->beta), HARD_SIGMOID(p->alpha * x + p->beta))

/* Integer kernels; negation wraps (-MIN is MIN, as in two's complement hardware). */
#define DEFINE_INT_UNARY(name, T, EXPR)                                                                   \
  static void name(size_t n, const void *px, void *py) {                                                  \
    const T *in = px;                                                                                     \
    T *y = py;                                                                                            \
    for (size_t i = 0; i < n; i++) {                                                                      \
      const T x = in[i];                                                                                  \
      y[i] = (T)(EXPR);                                                                                   \
    }                                                                                                     \
  }
#define SIGNED_UNARY(sfx, T, W)                                                                           \
  DEFINE_INT_UNARY(neg_##sfx, T, 0 - (W)x)                                                                \
  DEFINE_INT_UNARY(abs_##sfx, T, x < 0 ? 0 - (W)x : (W)x)                                                 \
  DEFINE_INT_UNARY(relu_##sfx, T, x < 0 ? 0 : x)                                                          \
  DEFINE_INT_UNARY(sign_##sfx, T, x > 0 ? 1 : x < 0 ? -1 : 0)
#define UNSIGNED_UNARY(sfx, T)                                                                            \
  DEFINE_INT_UNARY(abs_##sfx, T, x)                                                                       \
  DEFINE_INT_UNARY(sign_##sfx, T, x > 0)
SIGNED_UNARY(i8, int8_t, uint32_t)
SIGNED_UNARY(i16, int16_t, uint32_t)
SIGNED_UNARY(i32, int32_t, uint32_t)
SIGNED_UNARY(i64, int64_t, uint64_t)
UNSIGNED_UNARY(u8, uint8_t)
UNSIGNED_UNARY(u16, uint16_t)
UNSIGNED_UNARY(u32, uint32_t)
UNSIGNED_UNARY(u64, uint64_t)
DEFINE_INT_UNARY(not_bool, uint8_t, x == 0)

#define SIGNED_FNS(prefix)                                                                                \
  [BB_DTYPE_INT8] = prefix##i8, [BB_DTYPE_INT16] = prefix##i16, [BB_DTYPE_INT32] = prefix##i32,           \
  [BB_DTYPE_INT64] = prefix##i64
#define INT_FNS(prefix)                                                                                   \
  SIGNED_FNS(prefix), [BB_DTYPE_UINT8] = prefix##u8, [BB_DTYPE_UINT16] = prefix##u16,                     \
                      [BB_DTYPE_UINT32] = prefix##u32, [BB_DTYPE_UINT64] = prefix##u64
#define FLOAT_OP(name, types)                                                                             \
  static const unary_op name##_OP = {types, name##_f32, name##_f64, {0}};

static const unary_op neg_OP = {BBI_EW_FLOATS | BBI_EW_SIGNED, neg_f32, neg_f64, {SIGNED_FNS(neg_)}};
static const unary_op abs_OP = {BBI_EW_NUMERIC, abs_f32, abs_f64, {INT_FNS(abs_)}};
static const unary_op relu_OP = {BBI_EW_FLOATS | BBI_EW_SIGNED, relu_f32, relu_f64, {SIGNED_FNS(relu_)}};
static const unary_op sign_OP = {BBI_EW_NUMERIC, sign_f32, sign_f64, {INT_FNS(sign_)}};
static const unary_op erf_OP = {BBI_EW_NUMERIC, erf_f32, erf_f64, {0}}; /* integers via double */
static const unary_op not_OP = {BBI_EW_TYPE(BB_DTYPE_BOOL), NULL, NULL, {[BB_DTYPE_BOOL] = not_bool}};
FLOAT_OP(sqrt, BBI_EW_FLOATS)
FLOAT_OP(exp, BBI_EW_FLOATS)
FLOAT_OP(log, BBI_EW_FLOATS)
FLOAT_OP(sigmoid, BBI_EW_FLOATS)
FLOAT_OP(tanh, BBI_EW_FLOATS)
FLOAT_OP(leaky_relu, BBI_EW_FLOATS)
FLOAT_OP(reciprocal, BBI_EW_FLOATS)
FLOAT_OP(floor, BBI_EW_FLOATS)
FLOAT_OP(ceil, BBI_EW_FLOATS)
FLOAT_OP(round, BBI_EW_FLOATS_NO_BF16)
FLOAT_OP(softplus, BBI_EW_FLOATS_NO_BF16)
FLOAT_OP(softsign, BBI_EW_FLOATS_NO_BF16)
FLOAT_OP(elu, BBI_EW_FLOATS_NO_BF16)
FLOAT_OP(selu, BBI_EW_FLOATS_NO_BF16)
FLOAT_OP(hard_sigmoid, BBI_EW_FLOATS_NO_BF16)

/* Elements [begin, end) of one unary operator's input. */
typedef struct unary_job {
  const unary_op *op;
  const unary_args *args;
  int32_t dtype;
  const char *in;
  char *out;
} unary_job;

static void unary_range(void *ctx, size_t begin, size_t end) {
  const unary_job *j = ctx;
  const unary_op *op = j->op;
  const int32_t dt = j->dtype;
  const size_t n = end - begin, esize = bb_dtype_size(dt);
  const char *in = j->in + begin * esize;
  char *out = j->out + begin * esize;
  if (dt == BB_DTYPE_FLOAT) {
    op->f32(n, (const float *)in, (float *)out, j->args);
  } else if (dt == BB_DTYPE_DOUBLE) {
    op->f64(n, (const double *)in, (double *)out, j->args);
  } else if (op->ints[dt]) {
    op->ints[dt](n, in, out);
  } else if (bbi_ew_is_half(dt)) {
    float v[BBI_EW_CHUNK];
    for (size_t done = 0; done < n; done += BBI_EW_CHUNK) {
      const size_t m = n - done < BBI_EW_CHUNK ? n - done : BBI_EW_CHUNK;
      bbi_ew_widen(dt, in + done * esize, m, v);
      op->f32(m, v, v, j->args);
      bbi_ew_narrow(dt, v, m, out + done * esize);
    }
  } else { /* an integer type computed in double */
    double v[BBI_EW_CHUNK];
    for (size_t done = 0; done < n; done += BBI_EW_CHUNK) {
      const size_t m = n - done < BBI_EW_CHUNK ? n - done : BBI_EW_CHUNK;
      bbi_ew_convert(BB_DTYPE_DOUBLE, v, dt, in + done * esize, m);
      op->f64(m, v, v, j->args);
      bbi_ew_convert(dt, out + done * esize, BB_DTYPE_DOUBLE, v, m);
    }
  }
}

/* Pieces for the pool start at multiples of this (bbi_parallel_for may double it): whole
 * vector blocks and whole chunks, so every element meets the code it meets in one call. */
#define UNARY_PIECE (BBI_PAR_GRAIN / BBI_EW_CHUNK * BBI_EW_CHUNK)
_Static_assert(UNARY_PIECE % BBI_PAR_ALIGN == 0 && UNARY_PIECE % BBI_EW_CHUNK == 0, "pieces keep blocks whole");

static int run_unary(bbi_cpu_op_ctx *ctx, const unary_op *op, const unary_args *args) {
  int rc = bbi_ew_check_type(ctx, 0, op->types);
  if (rc) return rc;
  const bb_tensor *x = ctx->inputs[0];
  if ((rc = bbi_cpu_make_output(ctx, 0, x->dtype, x->rank, x->dims))) return rc;
  unary_job j = {op, args, x->dtype, bb_tensor_data(x), bb_tensor_data(ctx->outputs[0])};
  bbi_parallel_for((size_t)x->numel, UNARY_PIECE, unary_range, &j);
  return 0;
}

static const unary_args NO_ARGS = {0, 0, 0};

int bbi_ew_neg(bbi_cpu_op_ctx *ctx) { return run_unary(ctx, &neg_OP, &NO_ARGS); }
int bbi_ew_abs(bbi_cpu_op_ctx *ctx) { return run_unary(ctx, &abs_OP, &NO_ARGS); }
int bbi_ew_sqrt(bbi_cpu_op_ctx *ctx) { return run_unary(ctx, &sqrt_OP, &NO_ARGS); }
int bbi_ew_exp(bbi_cpu_op_ctx *ctx) { return run_unary(ctx, &exp_OP, &NO_ARGS); }
int bbi_ew_log(bbi_cpu_op_ctx *ctx) { return run_unary(ctx, &log_OP, &NO_ARGS); }
int bbi_ew_relu(bbi_cpu_op_ctx *ctx) { return run_unary(ctx, &relu_OP, &NO_ARGS); }
int bbi_ew_sigmoid(bbi_cpu_op_ctx *ctx) { return run_unary(ctx, &sigmoid_OP, &NO_ARGS); }
int bbi_ew_tanh(bbi_cpu_op_ctx *ctx) { return run_unary(ctx, &tanh_OP, &NO_ARGS); }
int bbi_ew_reciprocal(bbi_cpu_op_ctx *ctx) { return run_unary(ctx, &reciprocal_OP, &NO_ARGS); }
int bbi_ew_floor(bbi_cpu_op_ctx *ctx) { return run_unary(ctx, &floor_OP, &NO_ARGS); }
int bbi_ew_ceil(bbi_cpu_op_ctx *ctx) { return run_unary(ctx, &ceil_OP, &NO_ARGS); }
int bbi_ew_round(bbi_cpu_op_ctx *ctx) { return run_unary(ctx, &round_OP, &NO_ARGS); }
int bbi_ew_sign(bbi_cpu_op_ctx *ctx) { return run_unary(ctx, &sign_OP, &NO_ARGS); }
int bbi_ew_erf(bbi_cpu_op_ctx *ctx) { return run_unary(ctx, &erf_OP, &NO_ARGS); }
int bbi_ew_softplus(bbi_cpu_op_ctx *ctx) { return run_unary(ctx, &softplus_OP, &NO_ARGS); }
int bbi_ew_softsign(bbi_cpu_op_ctx *ctx) { return run_unary(ctx, &softsign_OP, &NO_ARGS); }
int bbi_ew_not(bbi_cpu_op_ctx *ctx) { return run_unary(ctx, &not_OP, &NO_ARGS); }

static float attr_float(const bbi_cpu_op_ctx *ctx, const char *name, float dflt) {
  return bb_attr_get_float(&ctx->node->attrs, name, dflt);
}

int bbi_ew_leaky_relu(bbi_cpu_op_ctx *ctx) {
  const unary_args a = {attr_float(ctx, "alpha", 0.01f), 0, 0};
  return run_unary(ctx, &leaky_relu_OP, &a);
}

int bbi_ew_elu(bbi_cpu_op_ctx *ctx) {
  const unary_args a = {attr_float(ctx, "alpha", 1.0f), 0, 0};
  return run_unary(ctx, &elu_OP, &a);
}

int bbi_ew_selu(bbi_cpu_op_ctx *ctx) {
  const unary_args a = {attr_float(ctx, "alpha", 1.67326319217681884765625f), 0,
                        attr_float(ctx, "gamma", 1.05070102214813232421875f)};
  return run_unary(ctx, &selu_OP, &a);
}

int bbi_ew_hard_sigmoid(bbi_cpu_op_ctx *ctx) {
  const unary_args a = {attr_float(ctx, "alpha", 0.2f), attr_float(ctx, "beta", 0.5f), 0};
  return run_unary(ctx, &hard_sigmoid_OP, &a);
}

/* ---- Clip ------------------------------------------------------------------------------ */

/* The lowest and highest value of dtype (numeric_limits lowest()/max(), ONNX's defaults
 * for absent bounds), stored as elements of that type. */
static void type_limits(int32_t dtype, void *lo, void *hi) {
#define LIMITS(T, L, H)                                                                                   \
  do {                                                                                                    \
    const T l = L, h = H;                                                                                 \
    memcpy(lo, &l, sizeof l);                                                                             \
    memcpy(hi, &h, sizeof h);                                                                             \
  } while (0)
  switch (dtype) {
  case BB_DTYPE_FLOAT: LIMITS(float, -FLT_MAX, FLT_MAX); break;
  case BB_DTYPE_DOUBLE: LIMITS(double, -DBL_MAX, DBL_MAX); break;
  case BB_DTYPE_FLOAT16: LIMITS(uint16_t, 0xfbff, 0x7bff); break;  /* -+65504 */
  case BB_DTYPE_BFLOAT16: LIMITS(uint16_t, 0xff7f, 0x7f7f); break; /* -+3.39e38 */
  case BB_DTYPE_INT8: LIMITS(int8_t, INT8_MIN, INT8_MAX); break;
  case BB_DTYPE_INT16: LIMITS(int16_t, INT16_MIN, INT16_MAX); break;
  case BB_DTYPE_INT32: LIMITS(int32_t, INT32_MIN, INT32_MAX); break;
  case BB_DTYPE_INT64: LIMITS(int64_t, INT64_MIN, INT64_MAX); break;
  case BB_DTYPE_UINT8: LIMITS(uint8_t, 0, UINT8_MAX); break;
  case BB_DTYPE_UINT16: LIMITS(uint16_t, 0, UINT16_MAX); break;
  case BB_DTYPE_UINT32: LIMITS(uint32_t, 0, UINT32_MAX); break;
  default: LIMITS(uint64_t, 0, UINT64_MAX); break;
  }
#undef LIMITS
}

/* y = min(max(x, lo), hi) as ONNX (and numpy.clip) define it, so lo > hi gives hi and
 * NaN stays NaN. lo and hi point at elements of x's type. */
#define CLIP_LOOP(T)                                                                                      \
  do {                                                                                                    \
    T l, h;                                                                                               \
    memcpy(&l, lo, sizeof l);                                                                             \
    memcpy(&h, hi, sizeof h);                                                                             \
    const T *in = x;                                                                                      \
    T *out = y;                                                                                           \
    for (size_t i = 0; i < n; i++) {                                                                      \
      const T v = in[i] < l ? l : in[i];                                                                  \
      out[i] = v > h ? h : v;                                                                             \
    }                                                                                                     \
  } while (0)

static void clip_run(int32_t dtype, const void *x, void *y, size_t n, const void *lo, const void *hi) {
  switch (dtype) {
  case BB_DTYPE_FLOAT: CLIP_LOOP(float); break;
  case BB_DTYPE_DOUBLE: CLIP_LOOP(double); break;
  case BB_DTYPE_INT8: CLIP_LOOP(int8_t); break;
  case BB_DTYPE_INT16: CLIP_LOOP(int16_t); break;
  case BB_DTYPE_INT32: CLIP_LOOP(int32_t); break;
  case BB_DTYPE_INT64: CLIP_LOOP(int64_t); break;
  case BB_DTYPE_UINT8: CLIP_LOOP(uint8_t); break;
  case BB_DTYPE_UINT16: CLIP_LOOP(uint16_t); break;
  case BB_DTYPE_UINT32: CLIP_LOOP(uint32_t); break;
  case BB_DTYPE_UINT64: CLIP_LOOP(uint64_t); break;
  default: { /* float16 / bfloat16: bounds and values widen exactly to float */
    float bounds[2], v[BBI_EW_CHUNK];
    bbi_ew_widen(dtype, lo, 1, &bounds[0]);
    bbi_ew_widen(dtype, hi, 1, &bounds[1]);
    for (size_t done = 0; done < n; done += BBI_EW_CHUNK) {
      const size_t m = n - done < BBI_EW_CHUNK ? n - done : BBI_EW_CHUNK;
      bbi_ew_widen(dtype, (const uint16_t *)x + done, m, v);
      clip_run(BB_DTYPE_FLOAT, v, v, m, &bounds[0], &bounds[1]);
      bbi_ew_narrow(dtype, v, m, (uint16_t *)y + done);
    }
    break;
  }
  }
}

/* Clip's bound `which` (1 min, 2 max) into bound: from the attribute before opset 11, from
 * the optional input after; left alone when absent. */
static int clip_bound(bbi_cpu_op_ctx *ctx, int which, void *bound) {
  const int32_t dt = ctx->inputs[0]->dtype;
  const char *name = which == 1 ? "min" : "max";
  if (ctx->opset < 11) {
    if (bb_attr_find(&ctx->node->attrs, name)) {
      const float v = bb_attr_get_float(&ctx->node->attrs, name, 0.0f);
      bbi_ew_convert(dt, bound, BB_DTYPE_FLOAT, &v, 1);
    }
    return 0;
  }
  const bb_tensor *t = bbi_cpu_input(ctx, (size_t)which);
  if (!t) return 0;
  if (t->dtype != dt)
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "%s has element type %s but the input is %s", name,
                       bb_dtype_name(t->dtype) ? bb_dtype_name(t->dtype) : "unknown", bb_dtype_name(dt));
  if (t->numel != 1)
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "%s must be a scalar, it has %lld elements", name,
                       (long long)t->numel);
  memcpy(bound, bb_tensor_data(t), bb_dtype_size(dt));
  return 0;
}

int bbi_ew_clip(bbi_cpu_op_ctx *ctx) {
  int rc = bbi_ew_check_type(ctx, 0, BBI_EW_NUMERIC);
  if (rc) return rc;
  if (ctx->opset < 11 && (bbi_cpu_input(ctx, 1) || bbi_cpu_input(ctx, 2)))
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "takes min and max as attributes before opset 11, not inputs");
  const bb_tensor *x = ctx->inputs[0];
  unsigned char lo[8], hi[8];
  type_limits(x->dtype, lo, hi);
  if ((rc = clip_bound(ctx, 1, lo)) || (rc = clip_bound(ctx, 2, hi))) return rc;
  if ((rc = bbi_cpu_make_output(ctx, 0, x->dtype, x->rank, x->dims))) return rc;
  clip_run(x->dtype, bb_tensor_data(x), bb_tensor_data(ctx->outputs[0]), (size_t)x->numel, lo, hi);
  return 0;
}
