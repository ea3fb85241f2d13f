/* A producer's output finished in place: an added tensor, then an activation. This is what
 * the session runs for nodes it fused (a Conv or Gemm followed by Add, Relu, Clip, Sigmoid
 * or Sigmoid and Mul); each lane computes exactly what the separate operators' SIMD kernels
 * compute (Add's a + b, Relu's (x < 0 ? 0 : x) + 0, Clip's min(max(x, lo), hi),
 * vmath.h's sigmoid, Mul's x · sigmoid(x)), so a fused graph gives the same bits as the
 * unfused one. */
#include <math.h>

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

void bbi_f32_vactivate(const bbi_f32_activation *a, size_t n, const float *addend, float *y) {
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
  case BBI_ACTIVATION_RELU: return (v < 0.0f ? 0.0f : v) + 0.0f;
  case BBI_ACTIVATION_CLIP: return bbi_f32_min_scalar(bbi_f32_max_scalar(v, a->min), a->max);
  case BBI_ACTIVATION_SIGMOID: return (float)(1.0 / (1.0 + exp(-(double)v)));
  case BBI_ACTIVATION_SILU: return v * (float)(1.0 / (1.0 + exp(-(double)v)));
  default: return v;
  }
}

void bbi_f32_vactivate_scalar(const bbi_f32_activation *a, size_t n, const float *addend, float *y) {
  for (size_t i = 0; i < n; i++) y[i] = activate_scalar(a, addend ? y[i] + addend[i] : y[i]);
}
