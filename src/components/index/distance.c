/* Distance kernels (see distance.h). */
#include "components/index/distance.h"

#include "tensor/kernels/vec.h"

/* Four independent accumulators hide the add latency; the tail goes through a zero-padded
 * load, which adds nothing to either sum. */
#define SUM_OF(term)                                                                       \
  bbi_f32x4 acc[4];                                                                         \
  BBI_UNROLL for (size_t q = 0; q < 4; q++) acc[q] = bbi_f32x4_splat(0.0f);                  \
  size_t i = 0;                                                                            \
  for (; i + 16 <= n; i += 16) {                                                           \
    BBI_UNROLL for (size_t q = 0; q < 4; q++) {                                             \
      const bbi_f32x4 x = bbi_f32x4_load(a + i + 4 * q), y = bbi_f32x4_load(b + i + 4 * q);   \
      acc[q] += term;                                                                      \
    }                                                                                      \
  }                                                                                        \
  for (; i + 4 <= n; i += 4) {                                                             \
    const bbi_f32x4 x = bbi_f32x4_load(a + i), y = bbi_f32x4_load(b + i);                     \
    acc[0] += term;                                                                        \
  }                                                                                        \
  if (i < n) {                                                                             \
    const bbi_f32x4 x = bbi_f32x4_load_tail(a + i, n - i), y = bbi_f32x4_load_tail(b + i, n - i); \
    acc[1] += term;                                                                        \
  }                                                                                        \
  return bbi_f32x4_hsum((acc[0] + acc[1]) + (acc[2] + acc[3]))

float bbi_f32_l2sq(const float *a, const float *b, size_t n) { SUM_OF((x - y) * (x - y)); }

float bbi_f32_dot(const float *a, const float *b, size_t n) { SUM_OF(x * y); }

float bbi_f32_l2sq_scalar(const float *a, const float *b, size_t n) {
  float s = 0.0f;
  for (size_t i = 0; i < n; i++) {
    const float t = a[i] - b[i];
    s += t * t;
  }
  return s;
}

float bbi_f32_dot_scalar(const float *a, const float *b, size_t n) {
  float s = 0.0f;
  for (size_t i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}
