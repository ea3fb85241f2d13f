/* Matrix-vector products for GEMMs with one row or one column: memory-bound, so they read
 * B where it lies instead of packing it, and keep enough independent accumulators to hide
 * the add latency. */
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

static void gemv_t(size_t n, size_t k, const float *x, const float *b, size_t ldb, float *y) {
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
