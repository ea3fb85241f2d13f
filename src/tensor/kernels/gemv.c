/* Matrix-vector products for GEMMs with one row or one column: memory-bound, so they read
 * B where it lies instead of packing it, and keep enough independent accumulators to hide
 * the add latency. Natively with AVX-512 the dot products (B stored n×k: a Gemm's or a
 * 1×1 Conv's weights for one input) take sixteen lanes and fused multiply-adds, as the
 * AVX-512 GEMM tiles do. */
#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"

/* y[0..n) += sum over r < R of x[r] * B[r][0..n): R rows of B streamed side by side,
 * each element of y loaded and stored once per R rows. */
BBI_INLINE void gemv_add_rows(size_t R, size_t n, const float *x, const float *b, size_t ldb,
                             float *y) {
  bbi_f32x4 xr[4];
  BBI_UNROLL for (size_t r = 0; r < R; r++) xr[r] = bbi_f32x4_splat(x[r]);
  size_t j = 0;
  for (; j + 4 <= n; j += 4) {
    bbi_f32x4 acc = bbi_f32x4_load(y + j);
    BBI_UNROLL for (size_t r = 0; r < R; r++) acc = BBI_F32X4_MADD(xr[r], bbi_f32x4_load(b + r * ldb + j), acc);
    bbi_f32x4_store(y + j, acc);
  }
  if (j < n) {
    bbi_f32x4 acc = bbi_f32x4_load_tail(y + j, n - j);
    BBI_UNROLL for (size_t r = 0; r < R; r++)
      acc = BBI_F32X4_MADD(xr[r], bbi_f32x4_load_tail(b + r * ldb + j, n - j), acc);
    bbi_f32x4_store_tail(y + j, acc, n - j);
  }
}

/* B row-major (k×n): y is the running sum of rows of B scaled by x, four rows a pass, so
 * B is read front to back and y stays in cache. */
static void gemv_n(size_t n, size_t k, const float *x, const float *b, size_t ldb, float *y) {
  for (size_t j = 0; j < n; j++) y[j] = 0.0f;
  size_t p = 0;
  for (; p + 4 <= k; p += 4) gemv_add_rows(4, n, x + p, b + p * ldb, ldb, y);
  for (; p < k; p++) gemv_add_rows(1, n, x + p, b + p * ldb, ldb, y);
}

/* y[j..j+R) = dot products of x with R rows of B stored n×k, two accumulators per row. */
BBI_INLINE void gemv_rows(size_t R, size_t k, const float *x, const float *b, size_t ldb,
                         float *y) {
  bbi_f32x4 acc[4][2];
  BBI_UNROLL for (size_t r = 0; r < R; r++) acc[r][0] = acc[r][1] = bbi_f32x4_splat(0.0f);
  size_t p = 0;
  for (; p + 8 <= k; p += 8) {
    const bbi_f32x4 x0 = bbi_f32x4_load(x + p), x1 = bbi_f32x4_load(x + p + 4);
    BBI_UNROLL for (size_t r = 0; r < R; r++) {
      acc[r][0] = BBI_F32X4_MADD(x0, bbi_f32x4_load(b + r * ldb + p), acc[r][0]);
      acc[r][1] = BBI_F32X4_MADD(x1, bbi_f32x4_load(b + r * ldb + p + 4), acc[r][1]);
    }
  }
  if (p + 4 <= k) {
    const bbi_f32x4 x0 = bbi_f32x4_load(x + p);
    BBI_UNROLL for (size_t r = 0; r < R; r++) acc[r][0] = BBI_F32X4_MADD(x0, bbi_f32x4_load(b + r * ldb + p), acc[r][0]);
    p += 4;
  }
  BBI_UNROLL for (size_t r = 0; r < R; r++) {
    float s = bbi_f32x4_hsum(acc[r][0] + acc[r][1]);
    for (size_t t = p; t < k; t++) s += x[t] * b[r * ldb + t];
    y[r] = s;
  }
}

#if BBI_HAVE_X86_GEMM
#include <immintrin.h>

#define GEMV512 __attribute__((target("avx512f")))
#define GEMV512_INLINE GEMV512 static inline __attribute__((always_inline))

/* y[j..j+R) = dot products of x with R rows of B stored n×k, natively with AVX-512: per
 * row two sixteen-lane accumulators of fused multiply-adds over 32 floats a step (then 16,
 * then the last few masked), summed across lanes at the end. A row's result depends on x,
 * k and that row alone, not on the rows computed beside it, so any cut of y into tasks
 * gives the same bits. */
GEMV512_INLINE void gemv_rows16(size_t R, size_t k, const float *x, const float *b, size_t ldb, float *y) {
  __m512 acc[4][2];
  BBI_UNROLL for (size_t r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  size_t p = 0;
  for (; p + 32 <= k; p += 32) {
    const __m512 x0 = _mm512_loadu_ps(x + p), x1 = _mm512_loadu_ps(x + p + 16);
    BBI_UNROLL for (size_t r = 0; r < R; r++) {
      acc[r][0] = _mm512_fmadd_ps(x0, _mm512_loadu_ps(b + r * ldb + p), acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(x1, _mm512_loadu_ps(b + r * ldb + p + 16), acc[r][1]);
    }
  }
  if (p + 16 <= k) {
    const __m512 x0 = _mm512_loadu_ps(x + p);
    BBI_UNROLL for (size_t r = 0; r < R; r++) acc[r][0] = _mm512_fmadd_ps(x0, _mm512_loadu_ps(b + r * ldb + p), acc[r][0]);
    p += 16;
  }
  if (p < k) {
    const __mmask16 m = (__mmask16)((1u << (k - p)) - 1u);
    const __m512 x1 = _mm512_maskz_loadu_ps(m, x + p);
    BBI_UNROLL for (size_t r = 0; r < R; r++)
      acc[r][1] = _mm512_fmadd_ps(x1, _mm512_maskz_loadu_ps(m, b + r * ldb + p), acc[r][1]);
  }
  BBI_UNROLL for (size_t r = 0; r < R; r++) y[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]));
}

GEMV512 static void gemv_t16(size_t n, size_t k, const float *x, const float *b, size_t ldb, float *y) {
  size_t j = 0;
  for (; j + 4 <= n; j += 4) gemv_rows16(4, k, x, b + j * ldb, ldb, y + j);
  for (; j < n; j++) gemv_rows16(1, k, x, b + j * ldb, ldb, y + j);
}

static int has_avx512(void) {
  static int known = -1;
  if (known < 0) known = __builtin_cpu_supports("avx512f") ? 1 : 0;
  return known;
}
#endif

static void gemv_t(size_t n, size_t k, const float *x, const float *b, size_t ldb, float *y) {
#if BBI_HAVE_X86_GEMM
  if (has_avx512()) {
    gemv_t16(n, k, x, b, ldb, y);
    return;
  }
#endif
  size_t j = 0;
  for (; j + 4 <= n; j += 4) gemv_rows(4, k, x, b + j * ldb, ldb, y + j);
  for (; j < n; j++) gemv_rows(1, k, x, b + j * ldb, ldb, y + j);
}

void bbi_f32_gemv(size_t n, size_t k, const float *x, const float *b, size_t ldb, int trans_b,
                 float *y) {
  if (trans_b)
    gemv_t(n, k, x, b, ldb, y);
  else
    gemv_n(n, k, x, b, ldb, y);
}
