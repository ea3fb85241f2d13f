/* Binary elementwise operators with ONNX multidirectional broadcasting: arithmetic,
 * Pow, Mod, comparisons, logic, the variadic Max/Min/Sum/Mean and Where.
 *
 * A kernel handles one run of the broadcast walk (elementwise.h) for one element type.
 * float32 runs go to the SIMD kernels; float16 and bfloat16 are staged through float in
 * chunks and computed with the float kernel. Integer arithmetic wraps around like
 * unsigned arithmetic (as numpy and onnxruntime do) without C's signed-overflow traps;
 * integer division and remainder by zero give 0, and INT_MIN / -1 gives INT_MIN. */
#include <math.h>
#include <string.h>

#include "cpu/elementwise.h"
#include "tensor/kernels/kernels.h"

/* y = a op b over one run; sa / sb are 1 for an operand that advances, 0 for one that
 * repeats its first element. y may be a when sa is 1. */
typedef void (*binary_fn)(size_t n, const void *a, size_t sa, const void *b, size_t sb, void *y);

/* One loop per step combination, so each is a plain loop the compiler vectorises. */
#define DEFINE_BINARY(name, TA, TY, EXPR)                                                                 \
  static void name(size_t n, const void *pa, size_t sa, const void *pb, size_t sb, void *py) {           \
    const TA *a = pa, *b = pb;                                                                            \
    TY *y = py;                                                                                           \
    if (sa && sb) {                                                                                       \
      for (size_t i = 0; i < n; i++) {                                                                    \
        const TA x = a[i], z = b[i];                                                                      \
        y[i] = (TY)(EXPR);                                                                                \
      }                                                                                                   \
    } else if (sa) {                                                                                      \
      const TA z = b[0];                                                                                  \
      for (size_t i = 0; i < n; i++) {                                                                    \
        const TA x = a[i];                                                                                \
        y[i] = (TY)(EXPR);                                                                                \
      }                                                                                                   \
    } else if (sb) {                                                                                      \
      const TA x = a[0];                                                                                  \
      for (size_t i = 0; i < n; i++) {                                                                    \
        const TA z = b[i];                                                                                \
        y[i] = (TY)(EXPR);                                                                                \
      }                                                                                                   \
    } else {                                                                                              \
      const TA x = a[0], z = b[0];                                                                        \
      const TY v = (TY)(EXPR);                                                                            \
      for (size_t i = 0; i < n; i++) y[i] = v;                                                            \
    }                                                                                                     \
  }

/* Integer types: kernel suffix, C type, and the unsigned type their wrapping arithmetic
 * is done in (at least unsigned int, so nothing is promoted to a signed int). */
#define SIGNED_TYPES(X)                                                                                   \
  X(i8, int8_t, uint32_t) X(i16, int16_t, uint32_t) X(i32, int32_t, uint32_t) X(i64, int64_t, uint64_t)
#define UNSIGNED_TYPES(X)                                                                                 \
  X(u8, uint8_t, uint32_t) X(u16, uint16_t, uint32_t) X(u32, uint32_t, uint32_t) X(u64, uint64_t, uint64_t)

/* Division and remainder with every case defined: by 0 gives 0; MIN / -1 wraps to MIN and
 * MIN % -1 is 0. mod_ has the sign of the divisor (ONNX Mod, fmod=0), rem_ the sign of
 * the dividend (fmod=1). */
#define SIGNED_DIVISION(sfx, T, W)                                                                        \
  static inline T div_##sfx(T x, T z) { return z == 0 ? 0 : z == -1 ? (T)(0 - (W)x) : (T)(x / z); }     \
  static inline T rem_##sfx(T x, T z) { return z == 0 || z == -1 ? 0 : (T)(x % z); }                    \
  static inline T mod_##sfx(T x, T z) {                                                                   \
    const T r = rem_##sfx(x, z);                                                                          \
    return r != 0 && (r < 0) != (z < 0) ? (T)(r + z) : r;                                                 \
  }
#define UNSIGNED_DIVISION(sfx, T, W)                                                                      \
  static inline T div_##sfx(T x, T z) { return z == 0 ? 0 : (T)(x / z); }                                \
  static inline T rem_##sfx(T x, T z) { return z == 0 ? 0 : (T)(x % z); }                                \
  static inline T mod_##sfx(T x, T z) { return rem_##sfx(x, z); }
SIGNED_TYPES(SIGNED_DIVISION)
UNSIGNED_TYPES(UNSIGNED_DIVISION)

#define INT_KERNELS(sfx, T, W)                                                                            \
  DEFINE_BINARY(add_##sfx, T, T, (W)x + (W)z)                                                             \
  DEFINE_BINARY(sub_##sfx, T, T, (W)x - (W)z)                                                             \
  DEFINE_BINARY(mul_##sfx, T, T, (W)x * (W)z)                                                              \
  DEFINE_BINARY(div_k_##sfx, T, T, div_##sfx(x, z))                                                       \
  DEFINE_BINARY(mod_k_##sfx, T, T, mod_##sfx(x, z))                                                       \
  DEFINE_BINARY(fmod_k_##sfx, T, T, rem_##sfx(x, z))                                                      \
  DEFINE_BINARY(max_##sfx, T, T, x > z ? x : z)                                                           \
  DEFINE_BINARY(min_##sfx, T, T, x < z ? x : z)
SIGNED_TYPES(INT_KERNELS)
UNSIGNED_TYPES(INT_KERNELS)

/* float32 arithmetic: the SIMD kernels. */
static void f32_simd(bbi_binary_op op, size_t n, const float *a, size_t sa, const float *b, size_t sb, float *y) {
  if (sa && sb) {
    bbi_f32_vbinary(op, n, a, b, y);
  } else if (sa) {
    bbi_f32_vbinary_c(op, n, a, b[0], y);
  } else if (sb) {
    bbi_f32_vbinary_rc(op, n, a[0], b, y);
  } else {
    float v;
    bbi_f32_vbinary_scalar(op, 1, a, b, &v);
    for (size_t i = 0; i < n; i++) y[i] = v;
  }
}
#define F32_SIMD(name, OP)                                                                                \
  static void name(size_t n, const void *a, size_t sa, const void *b, size_t sb, void *y) {               \
    f32_simd(OP, n, a, sa, b, sb, y);                                                                     \
  }
F32_SIMD(add_f32, BBI_BINARY_ADD)
F32_SIMD(sub_f32, BBI_BINARY_SUB)
F32_SIMD(mul_f32, BBI_BINARY_MUL)
F32_SIMD(div_f32, BBI_BINARY_DIV)
F32_SIMD(max_f32, BBI_BINARY_MAX)
F32_SIMD(min_f32, BBI_BINARY_MIN)

/* max/min that return a NaN operand, like the float32 kernels and numpy. */
static inline double max_nan(double x, double z) { return x != x || x > z ? x : z; }
static inline double min_nan(double x, double z) { return x != x || x < z ? x : z; }

DEFINE_BINARY(add_f64, double, double, x + z)
DEFINE_BINARY(sub_f64, double, double, x - z)
DEFINE_BINARY(mul_f64, double, double, x * z)
DEFINE_BINARY(div_f64, double, double, x / z)
DEFINE_BINARY(max_f64, double, double, max_nan(x, z))
DEFINE_BINARY(min_f64, double, double, min_nan(x, z))
DEFINE_BINARY(fmod_k_f32, float, float, fmodf(x, z))
DEFINE_BINARY(fmod_k_f64, double, double, fmod(x, z))
DEFINE_BINARY(pow_f32, float, float, powf(x, z))
DEFINE_BINARY(pow_f64, double, double, pow(x, z))

/* Comparisons (bool out) over every numeric type. */
#define COMPARE_KERNELS(sfx, T, W)                                                                        \
  DEFINE_BINARY(eq_##sfx, T, uint8_t, x == z)                                                             \
  DEFINE_BINARY(gt_##sfx, T, uint8_t, x > z)                                                              \
  DEFINE_BINARY(lt_##sfx, T, uint8_t, x < z)                                                              \
  DEFINE_BINARY(ge_##sfx, T, uint8_t, x >= z)                                                             \
  DEFINE_BINARY(le_##sfx, T, uint8_t, x <= z)
SIGNED_TYPES(COMPARE_KERNELS)
UNSIGNED_TYPES(COMPARE_KERNELS)
COMPARE_KERNELS(f64, double, )

/* float32 comparisons: the SIMD kernels. */
#define F32_COMPARE(name, OP)                                                                             \
  static void name(size_t n, const void *a, size_t sa, const void *b, size_t sb, void *y) {               \
    bbi_f32_vcompare(OP, n, a, sa, b, sb, y);                                                              \
  }
F32_COMPARE(eq_f32, BBI_COMPARE_EQ)
F32_COMPARE(gt_f32, BBI_COMPARE_GT)
F32_COMPARE(lt_f32, BBI_COMPARE_LT)
F32_COMPARE(ge_f32, BBI_COMPARE_GE)
F32_COMPARE(le_f32, BBI_COMPARE_LE)

/* bool: any nonzero byte is true. */
DEFINE_BINARY(eq_bool, uint8_t, uint8_t, (x != 0) == (z != 0))
DEFINE_BINARY(and_bool, uint8_t, uint8_t, (x != 0) & (z != 0))
DEFINE_BINARY(or_bool, uint8_t, uint8_t, (x != 0) | (z != 0))
DEFINE_BINARY(xor_bool, uint8_t, uint8_t, (x != 0) ^ (z != 0))

/* ---- operator descriptions -------------------------------------------------------------- */

typedef struct binary_op {
  uint32_t types;
  bool bool_out;
  binary_fn fn[BBI_EW_DTYPE_MAX + 1]; /* float16 and bfloat16 use fn[BB_DTYPE_FLOAT] */
} binary_op;

#define INT_FNS(prefix)                                                                                   \
  [BB_DTYPE_INT8] = prefix##i8, [BB_DTYPE_INT16] = prefix##i16, [BB_DTYPE_INT32] = prefix##i32,           \
  [BB_DTYPE_INT64] = prefix##i64, [BB_DTYPE_UINT8] = prefix##u8, [BB_DTYPE_UINT16] = prefix##u16,         \
  [BB_DTYPE_UINT32] = prefix##u32, [BB_DTYPE_UINT64] = prefix##u64
#define NUMERIC_FNS(prefix) [BB_DTYPE_FLOAT] = prefix##f32, [BB_DTYPE_DOUBLE] = prefix##f64, INT_FNS(prefix)

static const binary_op ADD = {BBI_EW_NUMERIC, false, {NUMERIC_FNS(add_)}};
static const binary_op SUB = {BBI_EW_NUMERIC, false, {NUMERIC_FNS(sub_)}};
static const binary_op MUL = {BBI_EW_NUMERIC, false, {NUMERIC_FNS(mul_)}};
static const binary_op DIV = {BBI_EW_NUMERIC, false, {[BB_DTYPE_FLOAT] = div_f32, [BB_DTYPE_DOUBLE] = div_f64,
                                                     INT_FNS(div_k_)}};
static const binary_op MAX = {BBI_EW_NUMERIC, false, {NUMERIC_FNS(max_)}};
static const binary_op MIN = {BBI_EW_NUMERIC, false, {NUMERIC_FNS(min_)}};
static const binary_op SUM = {BBI_EW_FLOATS, false, {[BB_DTYPE_FLOAT] = add_f32, [BB_DTYPE_DOUBLE] = add_f64}};
static const binary_op MOD = {BBI_EW_INTS, false, {INT_FNS(mod_k_)}}; /* floats need fmod=1 */
static const binary_op FMOD = {BBI_EW_NUMERIC, false, {NUMERIC_FNS(fmod_k_)}};
static const binary_op POW_FLOAT = {BBI_EW_FLOATS, false, {[BB_DTYPE_FLOAT] = pow_f32, [BB_DTYPE_DOUBLE] = pow_f64}};
static const binary_op EQUAL = {BBI_EW_ALL, true, {NUMERIC_FNS(eq_), [BB_DTYPE_BOOL] = eq_bool}};
static const binary_op GREATER = {BBI_EW_NUMERIC, true, {NUMERIC_FNS(gt_)}};
static const binary_op LESS = {BBI_EW_NUMERIC, true, {NUMERIC_FNS(lt_)}};
static const binary_op GREATER_OR_EQUAL = {BBI_EW_NUMERIC, true, {NUMERIC_FNS(ge_)}};
static const binary_op LESS_OR_EQUAL = {BBI_EW_NUMERIC, true, {NUMERIC_FNS(le_)}};
static const binary_op AND = {BBI_EW_TYPE(BB_DTYPE_BOOL), true, {[BB_DTYPE_BOOL] = and_bool}};
static const binary_op OR = {BBI_EW_TYPE(BB_DTYPE_BOOL), true, {[BB_DTYPE_BOOL] = or_bool}};
static const binary_op XOR = {BBI_EW_TYPE(BB_DTYPE_BOOL), true, {[BB_DTYPE_BOOL] = xor_bool}};

/* ---- walking ------------------------------------------------------------------------------ */

typedef struct binary_job {
  binary_fn fn;
  int32_t half; /* the inputs' type when float16/bfloat16, else 0 */
  bool bool_out;
} binary_job;

static void binary_run(void *user, size_t n, void *const *p, const size_t *step) {
  const binary_job *job = user;
  if (!job->half) {
    job->fn(n, p[1], step[1], p[2], step[2], p[0]);
    return;
  }
  float a[BBI_EW_CHUNK], b[BBI_EW_CHUNK], y[BBI_EW_CHUNK];
  for (size_t done = 0; done < n; done += BBI_EW_CHUNK) {
    const size_t m = n - done < BBI_EW_CHUNK ? n - done : BBI_EW_CHUNK;
    bbi_ew_widen(job->half, (const uint16_t *)p[1] + done * step[1], step[1] ? m : 1, a);
    bbi_ew_widen(job->half, (const uint16_t *)p[2] + done * step[2], step[2] ? m : 1, b);
    if (job->bool_out) {
      job->fn(m, a, step[1], b, step[2], (uint8_t *)p[0] + done);
    } else {
      job->fn(m, a, step[1], b, step[2], y);
      bbi_ew_narrow(job->half, y, m, (uint16_t *)p[0] + done);
    }
  }
}

/* y = op(a, b), broadcasting both to y's shape; a and b have y's input type. */
static void binary_apply(bb_tensor *y, const bb_tensor *a, const bb_tensor *b, const binary_op *op) {
  const int32_t dt = a->dtype;
  binary_job job = {op->fn[bbi_ew_is_half(dt) ? BB_DTYPE_FLOAT : dt], bbi_ew_is_half(dt) ? dt : 0, op->bool_out};
  const bb_tensor *in[2] = {a, b};
  bbi_ew_apply(y, in, 2, binary_run, &job);
}

/* Before opset 7 binary ops broadcast only when the `broadcast` attribute is 1, and then
 * only B onto A: B's shape must match a contiguous run of A's dimensions that starts at
 * `axis` (by default it is A's trailing dimensions); size-1 dimensions of B also broadcast.
 * Returns B as a view with A's rank. */
static int legacy_operand(bbi_cpu_op_ctx *ctx, const bb_tensor *a, bb_tensor *b, bb_tensor **out) {
  char sa[96], sb[96];
  if (!bb_attr_get_int(&ctx->node->attrs, "broadcast", 0)) {
    if (!bb_tensor_same_shape(a, b))
      return bbi_cpu_fail(ctx, BB_ERR_TYPE, "shapes %s and %s differ and broadcast is not set (opset %lld)",
                         bb_tensor_describe(a, sa, sizeof sa), bb_tensor_describe(b, sb, sizeof sb),
                         (long long)ctx->opset);
    *out = bb_tensor_retain(b);
    return 0;
  }
  int axis = a->rank - b->rank;
  const bb_attr *attr = bb_attr_find(&ctx->node->attrs, "axis");
  int rc;
  if (attr && (rc = bbi_cpu_axis(ctx, bb_attr_get_int(&ctx->node->attrs, "axis", 0), a->rank, &axis))) return rc;
  bool fits = axis >= 0 && axis + b->rank <= a->rank;
  for (int i = 0; fits && i < b->rank; i++) fits = b->dims[i] == a->dims[axis + i] || b->dims[i] == 1;
  if (!fits)
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "%s does not broadcast onto %s at axis %d (opset %lld rules)",
                       bb_tensor_describe(b, sb, sizeof sb), bb_tensor_describe(a, sa, sizeof sa), axis,
                       (long long)ctx->opset);
  int64_t dims[BB_MAX_RANK];
  for (int i = 0; i < a->rank; i++) dims[i] = 1;
  for (int i = 0; i < b->rank; i++) dims[axis + i] = b->dims[i];
  *out = bb_tensor_view(b, a->rank, dims);
  return *out ? 0 : bbi_cpu_fail(ctx, BB_ERR_NOMEM, "out of memory");
}

/* Makes output 0 (dtype, and the shape of inputs 0 and 1 broadcast) and returns in *b the
 * second operand to walk: input 1, or its opset < 7 view. Release *b afterwards. */
static int binary_output(bbi_cpu_op_ctx *ctx, int32_t dtype, bb_tensor **b) {
  const bb_tensor *a = ctx->inputs[0];
  int rc;
  if (ctx->opset < 7) {
    if ((rc = legacy_operand(ctx, a, ctx->inputs[1], b))) return rc;
    if ((rc = bbi_cpu_make_output(ctx, 0, dtype, a->rank, a->dims))) bb_tensor_release(*b);
    return rc;
  }
  int rank;
  int64_t dims[BB_MAX_RANK];
  if ((rc = bbi_ew_broadcast(ctx, 0, 1, &rank, dims)) || (rc = bbi_cpu_make_output(ctx, 0, dtype, rank, dims)))
    return rc;
  *b = bb_tensor_retain(ctx->inputs[1]);
  return 0;
}

/* Binary op whose two inputs share one type from op->types. */
static int run_binary(bbi_cpu_op_ctx *ctx, const binary_op *op) {
  int rc;
  if ((rc = bbi_ew_check_type(ctx, 0, op->types)) || (rc = bbi_ew_check_same_type(ctx, 0, 1))) return rc;
  const bb_tensor *a = ctx->inputs[0];
  bb_tensor *b;
  if ((rc = binary_output(ctx, op->bool_out ? BB_DTYPE_BOOL : a->dtype, &b))) return rc;
  binary_apply(ctx->outputs[0], a, b, op);
  bb_tensor_release(b);
  return 0;
}

int bbi_ew_add(bbi_cpu_op_ctx *ctx) { return run_binary(ctx, &ADD); }
int bbi_ew_sub(bbi_cpu_op_ctx *ctx) { return run_binary(ctx, &SUB); }
int bbi_ew_mul(bbi_cpu_op_ctx *ctx) { return run_binary(ctx, &MUL); }
int bbi_ew_div(bbi_cpu_op_ctx *ctx) { return run_binary(ctx, &DIV); }
int bbi_ew_equal(bbi_cpu_op_ctx *ctx) { return run_binary(ctx, &EQUAL); }
int bbi_ew_greater(bbi_cpu_op_ctx *ctx) { return run_binary(ctx, &GREATER); }
int bbi_ew_less(bbi_cpu_op_ctx *ctx) { return run_binary(ctx, &LESS); }
int bbi_ew_greater_or_equal(bbi_cpu_op_ctx *ctx) { return run_binary(ctx, &GREATER_OR_EQUAL); }
int bbi_ew_less_or_equal(bbi_cpu_op_ctx *ctx) { return run_binary(ctx, &LESS_OR_EQUAL); }
int bbi_ew_and(bbi_cpu_op_ctx *ctx) { return run_binary(ctx, &AND); }
int bbi_ew_or(bbi_cpu_op_ctx *ctx) { return run_binary(ctx, &OR); }
int bbi_ew_xor(bbi_cpu_op_ctx *ctx) { return run_binary(ctx, &XOR); }

int bbi_ew_mod(bbi_cpu_op_ctx *ctx) {
  int rc = bbi_ew_check_type(ctx, 0, BBI_EW_NUMERIC);
  if (rc) return rc;
  const bool fmod_mode = bb_attr_get_int(&ctx->node->attrs, "fmod", 0) != 0;
  if (!fmod_mode && bbi_ew_in(BBI_EW_FLOATS, ctx->inputs[0]->dtype))
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "floating-point inputs need the attribute fmod=1");
  return run_binary(ctx, fmod_mode ? &FMOD : &MOD);
}

/* ---- Pow ---------------------------------------------------------------------------------- */

/* x^e in wrapping integer arithmetic; a negative exponent gives the result truncated toward
 * zero (0 unless x is 1 or -1; 0 for x = 0, where the true value is infinite). */
static int64_t int_pow(int64_t x, int64_t e_bits, bool e_unsigned) {
  uint64_t e = (uint64_t)e_bits;
  if (!e_unsigned && e_bits < 0) return x == 1 ? 1 : x == -1 ? ((e & 1) ? -1 : 1) : 0;
  uint64_t r = 1, base = (uint64_t)x;
  for (; e; e >>= 1) {
    if (e & 1) r *= base;
    base *= base;
  }
  return (int64_t)r;
}

typedef struct pow_job {
  int32_t y, a, b;
} pow_job;

/* Pow with differing base and exponent types (or an integer base): integer ^ integer is
 * exact; everything else is computed in double and converted to the base's type. */
static void pow_mixed_run(void *user, size_t n, void *const *p, const size_t *step) {
  const pow_job *job = user;
  const size_t ey = bb_dtype_size(job->y), ea = bb_dtype_size(job->a), eb = bb_dtype_size(job->b);
  const bool integral = !bbi_ew_in(BBI_EW_FLOATS, job->a) && !bbi_ew_in(BBI_EW_FLOATS, job->b);
  const bool e_unsigned = bbi_ew_in(BBI_EW_UNSIGNED, job->b);
  union {
    double f[BBI_EW_CHUNK];
    int64_t i[BBI_EW_CHUNK];
  } x, e, r;
  for (size_t done = 0; done < n; done += BBI_EW_CHUNK) {
    const size_t m = n - done < BBI_EW_CHUNK ? n - done : BBI_EW_CHUNK;
    const char *pa = (const char *)p[1] + done * step[1] * ea, *pb = (const char *)p[2] + done * step[2] * eb;
    const size_t ma = step[1] ? m : 1, mb = step[2] ? m : 1;
    if (integral) {
      bbi_ew_convert(BB_DTYPE_INT64, x.i, job->a, pa, ma);
      bbi_ew_convert(e_unsigned ? BB_DTYPE_UINT64 : BB_DTYPE_INT64, e.i, job->b, pb, mb);
      for (size_t i = 0; i < m; i++) r.i[i] = int_pow(x.i[i * step[1]], e.i[i * step[2]], e_unsigned);
      bbi_ew_convert(job->y, (char *)p[0] + done * ey, BB_DTYPE_INT64, r.i, m);
    } else {
      bbi_ew_convert(BB_DTYPE_DOUBLE, x.f, job->a, pa, ma);
      bbi_ew_convert(BB_DTYPE_DOUBLE, e.f, job->b, pb, mb);
      for (size_t i = 0; i < m; i++) r.f[i] = pow(x.f[i * step[1]], e.f[i * step[2]]);
      bbi_ew_convert(job->y, (char *)p[0] + done * ey, BB_DTYPE_DOUBLE, r.f, m);
    }
  }
}

#define POW_BASES (BBI_EW_FLOATS | BBI_EW_TYPE(BB_DTYPE_INT32) | BBI_EW_TYPE(BB_DTYPE_INT64))

int bbi_ew_pow(bbi_cpu_op_ctx *ctx) {
  int rc;
  if ((rc = bbi_ew_check_type(ctx, 0, POW_BASES))) return rc;
  /* opset 12 lets the exponent have its own type; before, both share the base's */
  rc = ctx->opset < 12 ? bbi_ew_check_same_type(ctx, 0, 1) : bbi_ew_check_type(ctx, 1, BBI_EW_NUMERIC);
  if (rc) return rc;
  const bb_tensor *a = ctx->inputs[0];
  if (a->dtype == ctx->inputs[1]->dtype && bbi_ew_in(BBI_EW_FLOATS, a->dtype)) return run_binary(ctx, &POW_FLOAT);
  bb_tensor *b;
  if ((rc = binary_output(ctx, a->dtype, &b))) return rc;
  pow_job job = {a->dtype, a->dtype, b->dtype};
  const bb_tensor *in[2] = {a, b};
  bbi_ew_apply(ctx->outputs[0], in, 2, pow_mixed_run, &job);
  bb_tensor_release(b);
  return 0;
}

/* ---- variadic: Max, Min, Sum, Mean -------------------------------------------------------- */

static void divide_all(bb_tensor *y, double count) {
  void *d = bb_tensor_data(y);
  const size_t n = (size_t)y->numel;
  if (y->dtype == BB_DTYPE_DOUBLE) {
    double *v = d;
    for (size_t i = 0; i < n; i++) v[i] /= count;
  } else if (y->dtype == BB_DTYPE_FLOAT) {
    float *v = d;
    for (size_t i = 0; i < n; i++) v[i] /= (float)count;
  } else { /* float16 / bfloat16 */
    float v[BBI_EW_CHUNK];
    for (size_t done = 0; done < n; done += BBI_EW_CHUNK) {
      const size_t m = n - done < BBI_EW_CHUNK ? n - done : BBI_EW_CHUNK;
      uint16_t *h = (uint16_t *)d + done;
      bbi_ew_widen(y->dtype, h, m, v);
      for (size_t i = 0; i < m; i++) v[i] /= (float)count;
      bbi_ew_narrow(y->dtype, v, m, h);
    }
  }
}

/* Folds op over all inputs (one or more, all of one type), broadcasting them together. */
static int run_variadic(bbi_cpu_op_ctx *ctx, const binary_op *op, bool mean) {
  const size_t n = ctx->n_inputs;
  int rc;
  for (size_t i = 0; i < n; i++)
    if ((rc = bbi_ew_check_type(ctx, i, op->types))) return rc;
  if ((rc = bbi_ew_check_same_type(ctx, 0, n - 1))) return rc;
  int rank;
  int64_t dims[BB_MAX_RANK];
  if ((rc = bbi_ew_broadcast(ctx, 0, n - 1, &rank, dims)) ||
      (rc = bbi_cpu_make_output(ctx, 0, ctx->inputs[0]->dtype, rank, dims)))
    return rc;
  bb_tensor *y = ctx->outputs[0];
  if (n == 1) {
    bbi_ew_convert(y->dtype, bb_tensor_data(y), y->dtype, bb_tensor_data(ctx->inputs[0]), (size_t)y->numel);
    return 0;
  }
  binary_apply(y, ctx->inputs[0], ctx->inputs[1], op);
  for (size_t i = 2; i < n; i++) binary_apply(y, y, ctx->inputs[i], op);
  if (mean) divide_all(y, (double)n);
  return 0;
}

int bbi_ew_max(bbi_cpu_op_ctx *ctx) { return run_variadic(ctx, &MAX, false); }
int bbi_ew_min(bbi_cpu_op_ctx *ctx) { return run_variadic(ctx, &MIN, false); }
int bbi_ew_sum(bbi_cpu_op_ctx *ctx) { return run_variadic(ctx, &SUM, false); }
int bbi_ew_mean(bbi_cpu_op_ctx *ctx) { return run_variadic(ctx, &SUM, true); }

/* ---- Where ----------------------------------------------------------------------------------- */

/* Selection copies elements, so it only depends on the element size. */
#define WHERE_LOOP(T)                                                                                     \
  do {                                                                                                    \
    const uint8_t *c = p[1];                                                                              \
    const T *x = p[2], *z = p[3];                                                                         \
    T *y = p[0];                                                                                          \
    if (step[1] && step[2] && step[3])                                                                    \
      for (size_t i = 0; i < n; i++) y[i] = c[i] ? x[i] : z[i];                                           \
    else                                                                                                  \
      for (size_t i = 0; i < n; i++) y[i] = c[i * step[1]] ? x[i * step[2]] : z[i * step[3]];             \
  } while (0)

static void where_run(void *user, size_t n, void *const *p, const size_t *step) {
  switch (*(const size_t *)user) {
  case 1: WHERE_LOOP(uint8_t); break;
  case 2: WHERE_LOOP(uint16_t); break;
  case 4: /* four-byte elements (float32 or not) are selected bit for bit by the SIMD kernel */
    if (step[1]) bbi_f32_vselect(n, p[1], p[2], step[2], p[3], step[3], p[0]);
    else WHERE_LOOP(uint32_t);
    break;
  default: WHERE_LOOP(uint64_t); break;
  }
}

int bbi_ew_where(bbi_cpu_op_ctx *ctx) {
  int rc;
  if ((rc = bbi_ew_check_type(ctx, 0, BBI_EW_TYPE(BB_DTYPE_BOOL))) || (rc = bbi_ew_check_type(ctx, 1, BBI_EW_ALL)) ||
      (rc = bbi_ew_check_same_type(ctx, 1, 2)))
    return rc;
  int rank;
  int64_t dims[BB_MAX_RANK];
  if ((rc = bbi_ew_broadcast(ctx, 0, 2, &rank, dims)) ||
      (rc = bbi_cpu_make_output(ctx, 0, ctx->inputs[1]->dtype, rank, dims)))
    return rc;
  size_t esize = bb_dtype_size(ctx->inputs[1]->dtype);
  const bb_tensor *in[3] = {ctx->inputs[0], ctx->inputs[1], ctx->inputs[2]};
  bbi_ew_apply(ctx->outputs[0], in, 3, where_run, &esize);
  return 0;
}
