/* Softmax and log-softmax along contiguous rows. Each row is shifted by its maximum, so
 * exp never overflows and the largest term is exactly 1. */
#include <math.h>

#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"
#include "tensor/kernels/vmath.h"

/* The first n (< 4) floats of p, and `fill` in the other lanes. */
BB_INLINE bb_f32x4 load_tail_fill(const float *p, size_t n, float fill) {
  bb_f32x4 v = bb_f32x4_splat(fill);
  for (size_t i = 0; i < n; i++) v[i] = p[i];
  return v;
}

/* Sum of exp(x[i] - max) over the row; stores the terms in y when y is not NULL. */
static float sum_exp(size_t n, const float *x, float max, float *y) {
  const bb_f32x4 vmax = bb_f32x4_splat(max);
  bb_f32x4 acc0 = bb_f32x4_splat(0.0f), acc1 = acc0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const bb_f32x4 e0 = bb_f32x4_exp(bb_f32x4_load(x + i) - vmax);
    const bb_f32x4 e1 = bb_f32x4_exp(bb_f32x4_load(x + i + 4) - vmax);
    if (y) {
      bb_f32x4_store(y + i, e0);
      bb_f32x4_store(y + i + 4, e1);
    }
    acc0 += e0;
    acc1 += e1;
  }
  for (; i + 4 <= n; i += 4) {
    const bb_f32x4 e = bb_f32x4_exp(bb_f32x4_load(x + i) - vmax);
    if (y) bb_f32x4_store(y + i, e);
    acc0 += e;
  }
  if (i < n) {
    /* -inf in the unused lanes makes their terms exactly 0. */
    const bb_f32x4 e = bb_f32x4_exp(load_tail_fill(x + i, n - i, -INFINITY) - vmax);
    if (y) bb_f32x4_store_tail(y + i, e, n - i);
    acc0 += e;
  }
  return bb_f32x4_hsum(acc0 + acc1);
}

void bb_f32_softmax_rows(size_t rows, size_t cols, const float *x, float *y) {
  if (cols == 0) return;
  for (size_t r = 0; r < rows; r++, x += cols, y += cols) {
    float max;
    bb_f32_reduce_rows(BB_REDUCE_MAX, 1, cols, x, &max);
    const float sum = sum_exp(cols, x, max, y);
    bb_f32_vbinary_c(BB_BINARY_MUL, cols, y, 1.0f / sum, y);
  }
}

void bb_f32_log_softmax_rows(size_t rows, size_t cols, const float *x, float *y) {
  if (cols == 0) return;
  for (size_t r = 0; r < rows; r++, x += cols, y += cols) {
    float max;
    bb_f32_reduce_rows(BB_REDUCE_MAX, 1, cols, x, &max);
    const float log_sum = logf(sum_exp(cols, x, max, NULL));
    const bb_f32x4 vmax = bb_f32x4_splat(max), vlog = bb_f32x4_splat(log_sum);
    size_t i = 0;
    for (; i + 4 <= cols; i += 4) bb_f32x4_store(y + i, (bb_f32x4_load(x + i) - vmax) - vlog);
    for (; i < cols; i++) y[i] = (x[i] - max) - log_sum;
  }
}

static float row_max_scalar(size_t n, const float *x) {
  float max;
  bb_f32_reduce_rows_scalar(BB_REDUCE_MAX, 1, n, x, &max);
  return max;
}

void bb_f32_softmax_rows_scalar(size_t rows, size_t cols, const float *x, float *y) {
  if (cols == 0) return;
  for (size_t r = 0; r < rows; r++, x += cols, y += cols) {
    const float max = row_max_scalar(cols, x);
    float sum = 0.0f;
    for (size_t i = 0; i < cols; i++) {
      y[i] = expf(x[i] - max);
      sum += y[i];
    }
    for (size_t i = 0; i < cols; i++) y[i] /= sum;
  }
}

void bb_f32_log_softmax_rows_scalar(size_t rows, size_t cols, const float *x, float *y) {
  if (cols == 0) return;
  for (size_t r = 0; r < rows; r++, x += cols, y += cols) {
    const float max = row_max_scalar(cols, x);
    float sum = 0.0f;
    for (size_t i = 0; i < cols; i++) sum += expf(x[i] - max);
    const float log_sum = logf(sum);
    for (size_t i = 0; i < cols; i++) y[i] = (x[i] - max) - log_sum;
  }
}
