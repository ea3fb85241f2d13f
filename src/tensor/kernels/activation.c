/* A producer's output finished in place: an added tensor, then an activation. This is what
 * the session runs for nodes it fused (a Conv or Gemm followed by Add, Relu, Clip, Sigmoid
 * or Sigmoid and Mul); each lane computes exactly what the separate operators' SIMD kernels
 * compute (Add's a + b, Relu's (x < 0 ? 0 : x) + 0, Clip's min(max(x, lo), hi),
 * vmath.h's sigmoid, Mul's x · sigmoid(x)), so a fused graph gives the same bits as the
 * unfused one. */
#include <math.h>
#include <string.h>

#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"
#include "tensor/kernels/vmath.h"

BBI_INLINE bbi_f32x4 activate(bbi_activation kind, bbi_f32x4 v, bbi_f32x4 lo, bbi_f32x4 hi, const bbi_vmath_consts *k) {
  const bbi_f32x4 zero = k->zero;
  switch (kind) {
  case BBI_ACTIVATION_RELU: return bbi_f32x4_select(v < zero, zero, v) + zero;
  case BBI_ACTIVATION_CLIP: return bbi_f32x4_min(bbi_f32x4_max(v, lo), hi);
  case BBI_ACTIVATION_SIGMOID: return bbi_f32x4_sigmoid(v, k);
  case BBI_ACTIVATION_SILU: return v * bbi_f32x4_sigmoid(v, k);
  default: return v;
  }
}

BBI_INLINE void activate_loop(bbi_activation kind, const bbi_f32_activation *a, size_t n, const float *addend,
                              float *y) {
  const bbi_f32x4 lo = bbi_f32x4_splat(a->min), hi = bbi_f32x4_splat(a->max);
  const bbi_vmath_consts k = bbi_vmath_k;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    bbi_f32x4 v = bbi_f32x4_load(y + i);
    if (addend) v = v + bbi_f32x4_load(addend + i);
    bbi_f32x4_store(y + i, activate(kind, v, lo, hi, &k));
  }
  if (i < n) {
    bbi_f32x4 v = bbi_f32x4_load_tail(y + i, n - i);
    if (addend) v = v + bbi_f32x4_load_tail(addend + i, n - i);
    bbi_f32x4_store_tail(y + i, activate(kind, v, lo, hi, &k), n - i);
  }
}

#if BBI_HAVE_X86_GEMM
#include <immintrin.h>

/* Natively on x86-64 with AVX-512, sixteen lanes at a time: lane for lane the same IEEE
 * operations, in the same order and with the same constants, as the four-lane path and
 * vmath.h (the build is ISO C, so no multiply-add is contracted), hence the same bits;
 * min and max keep vec.h's rules (a < b ? b : a). Only the first multiple of 16 elements
 * goes this way, the rest through the four-lane loop. */
#define WIDE __attribute__((target("avx512f"))) static inline __attribute__((always_inline))
typedef float w_f32 __attribute__((vector_size(64)));
typedef int32_t w_i32 __attribute__((vector_size(64)));
typedef uint32_t w_u32 __attribute__((vector_size(64)));

WIDE w_f32 w_load(const float *p) {
  w_f32 v;
  memcpy(&v, p, sizeof v);
  return v;
}
WIDE w_f32 w_splat(float x) { return (w_f32){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }
WIDE w_f32 w_select(w_i32 mask, w_f32 a, w_f32 b) { return (w_f32)((mask & (w_i32)a) | (~mask & (w_i32)b)); }
WIDE w_f32 w_max(w_f32 a, w_f32 b) { return w_select(a < b, b, a); }
WIDE w_f32 w_min(w_f32 a, w_f32 b) { return w_select(b < a, b, a); }

/* bbi_f32x4_exp, lane for lane */
WIDE w_f32 w_exp(w_f32 x, const bbi_vmath_consts *k) {
  const w_f32 one = w_splat(k->one[0]), magic = w_splat(k->round_magic[0]);
  x = w_min(x, w_splat(k->exp_hi[0]));
  x = w_max(x, w_splat(k->exp_lo[0]));
  const w_f32 t = x * w_splat(k->log2e[0]) + magic;
  const w_f32 n = t - magic;
  const w_i32 ni = (w_i32)t - (w_i32)magic;
  w_f32 r = x - n * w_splat(k->ln2_hi[0]);
  r = r - n * w_splat(k->ln2_lo[0]);
  w_f32 q = w_splat(k->exp_c4[0]);
  q = q * r + w_splat(k->exp_c3[0]);
  q = q * r + w_splat(k->exp_c2[0]);
  q = q * r + w_splat(k->exp_c1[0]);
  q = q * r + w_splat(k->exp_c0[0]);
  const w_f32 p = ((r * r) * q + r) + one;
  const w_i32 n1 = ni >> 1;
  const w_i32 n2 = ni - n1;
  const w_i32 bias = (w_i32)w_splat(0.0f) + k->exp_bias[0];
  const w_f32 s1 = (w_f32)((w_u32)(n1 + bias) << 23);
  const w_f32 s2 = (w_f32)((w_u32)(n2 + bias) << 23);
  return (p * s1) * s2;
}

#if defined(__clang__)
#define W_SHUFFLE(v, ...) __builtin_shufflevector(v, v, __VA_ARGS__)
#else
#define W_SHUFFLE(v, ...) __builtin_shuffle(v, (w_i32){__VA_ARGS__})
#endif

/* Every lane: whether any lane of its group of four (lanes 4i to 4i+3) is set. */
WIDE w_i32 w_group_any(w_i32 m) {
  m |= W_SHUFFLE(m, 1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12);
  m |= W_SHUFFLE(m, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
  return m;
}

/* bbi_f32x4_sigmoid, lane for lane: 1 / (1 + exp(-x)) with its fast-range exp where every
 * lane of the four-lane group has |x| <= -BBI_EXP_SHIFTED_FAST, as the four-lane code
 * decides per vector, and num / (1 + bbi_f32x4_exp(-|x|)) in the groups where one has not. */
WIDE w_f32 w_sigmoid(w_f32 x, const bbi_vmath_consts *k) {
  const w_i32 sign = (w_i32)w_splat(0.0f) + k->sign[0];
  const w_f32 one = w_splat(k->one[0]), zero = w_splat(0.0f), magic = w_splat(k->shifted_magic[0]);
  const w_f32 neg = (w_f32)((w_i32)x ^ sign);
  const w_f32 t = neg * w_splat(k->log2e[0]) + magic;
  const w_f32 n = t - magic;
  const w_f32 s = (w_f32)((w_u32)(w_i32)t << 23);
  w_f32 r = neg - n * w_splat(k->ln2_hi[0]);
  r = r - n * w_splat(k->ln2_lo[0]);
  const w_f32 r2 = r * r;
  const w_f32 low = w_splat(k->exp_c1[0]) * r + w_splat(k->exp_c0[0]);
  const w_f32 high = w_splat(k->exp_c4[0]) * r2 + (w_splat(k->exp_c3[0]) * r + w_splat(k->exp_c2[0]));
  const w_f32 e = ((r2 * (high * r2 + low) + r) + one) * s;
  w_f32 y = one / (one + e);
  const w_f32 z = (w_f32)((w_i32)x | sign);
  const w_i32 slow = z < w_splat(k->shifted_fast[0]);
  if (_mm512_test_epi32_mask((__m512i)slow, (__m512i)slow)) {
    const w_f32 ez = w_exp(z, k);
    const w_f32 full = w_select(x < zero, ez, one) / (one + ez);
    y = w_select(w_group_any(slow), full, y);
  }
  return y;
}

WIDE w_f32 w_activate(bbi_activation kind, w_f32 v, w_f32 lo, w_f32 hi, const bbi_vmath_consts *k) {
  const w_f32 zero = w_splat(0.0f);
  switch (kind) {
  case BBI_ACTIVATION_RELU: return w_select(v < zero, zero, v) + zero;
  case BBI_ACTIVATION_CLIP: return w_min(w_max(v, lo), hi);
  case BBI_ACTIVATION_SIGMOID: return w_sigmoid(v, k);
  case BBI_ACTIVATION_SILU: return v * w_sigmoid(v, k);
  default: return v;
  }
}

/* Elements [0, n rounded down to 16) of y; returns how many it did. */
WIDE size_t w_activate_loop(bbi_activation kind, const bbi_f32_activation *a, size_t n, const float *addend,
                            float *y) {
  const w_f32 lo = w_splat(a->min), hi = w_splat(a->max);
  const bbi_vmath_consts k = bbi_vmath_k;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    w_f32 v = w_load(y + i);
    if (addend) v = v + w_load(addend + i);
    v = w_activate(kind, v, lo, hi, &k);
    memcpy(y + i, &v, sizeof v);
  }
  return i;
}

__attribute__((target("avx512f"))) static size_t activate_avx512(const bbi_f32_activation *a, size_t n,
                                                                 const float *addend, float *y) {
  switch (a->kind) {
  case BBI_ACTIVATION_RELU: return w_activate_loop(BBI_ACTIVATION_RELU, a, n, addend, y);
  case BBI_ACTIVATION_CLIP: return w_activate_loop(BBI_ACTIVATION_CLIP, a, n, addend, y);
  case BBI_ACTIVATION_SIGMOID: return w_activate_loop(BBI_ACTIVATION_SIGMOID, a, n, addend, y);
  case BBI_ACTIVATION_SILU: return w_activate_loop(BBI_ACTIVATION_SILU, a, n, addend, y);
  default: return addend ? w_activate_loop(BBI_ACTIVATION_NONE, a, n, addend, y) : 0;
  }
}

/* How many leading elements the sixteen-lane path did (0 without AVX-512). */
static size_t activate_wide(const bbi_f32_activation *a, size_t n, const float *addend, float *y) {
  static int avx512 = -1;
  if (avx512 < 0) avx512 = __builtin_cpu_supports("avx512f") ? 1 : 0;
  return avx512 && n >= 16 ? activate_avx512(a, n, addend, y) : 0;
}
#else
static size_t activate_wide(const bbi_f32_activation *a, size_t n, const float *addend, float *y) {
  (void)a, (void)n, (void)addend, (void)y;
  return 0;
}
#endif

void bbi_f32_vactivate(const bbi_f32_activation *a, size_t n, const float *addend, float *y) {
  const size_t done = activate_wide(a, n, addend, y);
  n -= done, y += done;
  if (addend) addend += done;
  switch (a->kind) {
  case BBI_ACTIVATION_RELU: activate_loop(BBI_ACTIVATION_RELU, a, n, addend, y); break;
  case BBI_ACTIVATION_CLIP: activate_loop(BBI_ACTIVATION_CLIP, a, n, addend, y); break;
  case BBI_ACTIVATION_SIGMOID: activate_loop(BBI_ACTIVATION_SIGMOID, a, n, addend, y); break;
  case BBI_ACTIVATION_SILU: activate_loop(BBI_ACTIVATION_SILU, a, n, addend, y); break;
  default:
    if (addend) activate_loop(BBI_ACTIVATION_NONE, a, n, addend, y);
    break;
  }
}

static float activate_scalar(const bbi_f32_activation *a, float v) {
  switch (a->kind) {
  case BBI_ACTIVATION_RELU: return bbi_f32_relu_scalar(v);
  case BBI_ACTIVATION_CLIP: return bbi_f32_min_scalar(bbi_f32_max_scalar(v, a->min), a->max);
  case BBI_ACTIVATION_SIGMOID: return (float)(1.0 / (1.0 + exp(-(double)v)));
  case BBI_ACTIVATION_SILU: return v * (float)(1.0 / (1.0 + exp(-(double)v)));
  default: return v;
  }
}

void bbi_f32_vactivate_scalar(const bbi_f32_activation *a, size_t n, const float *addend, float *y) {
  for (size_t i = 0; i < n; i++) y[i] = activate_scalar(a, addend ? y[i] + addend[i] : y[i]);
}
