/* Softmax and log-softmax along contiguous rows. Each row is shifted by its maximum, so
 * exp never overflows and the largest term is exactly 1. */
#include <math.h>

#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"
#include "tensor/kernels/vmath.h"

/* The first n (< 4) floats of p, and `fill` in the other lanes. */
BBI_INLINE bbi_f32x4 load_tail_fill(const float *p, size_t n, float fill) {
  bbi_f32x4 v = bbi_f32x4_splat(fill);
  for (size_t i = 0; i < n; i++) v[i] = p[i];
  return v;
}

bbi_exp_shifted_consts bbi_exp_shifted_k = {
    {1.44269504f, 1.44269504f, 1.44269504f, 1.44269504f},
    {12583039.0f, 12583039.0f, 12583039.0f, 12583039.0f},
    {BBI_LN2_HI, BBI_LN2_HI, BBI_LN2_HI, BBI_LN2_HI},
    {BBI_LN2_LO, BBI_LN2_LO, BBI_LN2_LO, BBI_LN2_LO},
    {0.008312858f, 0.008312858f, 0.008312858f, 0.008312858f},
    {0.04188907f, 0.04188907f, 0.04188907f, 0.04188907f},
    {0.16667111f, 0.16667111f, 0.16667111f, 0.16667111f},
    {0.49999243f, 0.49999243f, 0.49999243f, 0.49999243f},
    {1.0f, 1.0f, 1.0f, 1.0f},
    {BBI_EXP_SHIFTED_FAST, BBI_EXP_SHIFTED_FAST, BBI_EXP_SHIFTED_FAST, BBI_EXP_SHIFTED_FAST},
};

/* Sum of exp(x[i] - max) over the row; stores the terms in y when y is not NULL. */
static float sum_exp(size_t n, const float *x, float max, float *y) {
  const bbi_exp_shifted_consts k = bbi_exp_shifted_k;
  const bbi_f32x4 vmax = bbi_f32x4_splat(max);
  bbi_f32x4 acc0 = bbi_f32x4_splat(0.0f), acc1 = acc0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const bbi_f32x4 d0 = bbi_f32x4_load(x + i) - vmax, d1 = bbi_f32x4_load(x + i + 4) - vmax;
    bbi_f32x4 e0, e1;
    /* one test for both vectors */
    if (bbi_i32x4_any((d0 < k.fast) | (d1 < k.fast))) {
      e0 = bbi_f32x4_exp(d0);
      e1 = bbi_f32x4_exp(d1);
    } else {
      e0 = bbi_f32x4_exp_shifted_fast(d0, &k);
      e1 = bbi_f32x4_exp_shifted_fast(d1, &k);
    }
    if (y) {
      bbi_f32x4_store(y + i, e0);
      bbi_f32x4_store(y + i + 4, e1);
    }
    acc0 += e0;
    acc1 += e1;
  }
  for (; i + 4 <= n; i += 4) {
    const bbi_f32x4 e = bbi_f32x4_exp_shifted(bbi_f32x4_load(x + i) - vmax, &k);
    if (y) bbi_f32x4_store(y + i, e);
    acc0 += e;
  }
  if (i < n) {
    /* -inf in the unused lanes makes their terms exactly 0. */
    const bbi_f32x4 e = bbi_f32x4_exp_shifted(load_tail_fill(x + i, n - i, -INFINITY) - vmax, &k);
    if (y) bbi_f32x4_store_tail(y + i, e, n - i);
    acc0 += e;
  }
  return bbi_f32x4_hsum(acc0 + acc1);
}

void bbi_f32_softmax_rows(size_t rows, size_t cols, const float *x, float *y) {
  if (cols == 0) return;
  for (size_t r = 0; r < rows; r++, x += cols, y += cols) {
    float max;
    bbi_f32_reduce_rows(BBI_REDUCE_MAX, 1, cols, x, &max);
    const float sum = sum_exp(cols, x, max, y);
    bbi_f32_vbinary_c(BBI_BINARY_MUL, cols, y, 1.0f / sum, y);
  }
}

void bbi_f32_log_softmax_rows(size_t rows, size_t cols, const float *x, float *y) {
  if (cols == 0) return;
  for (size_t r = 0; r < rows; r++, x += cols, y += cols) {
    float max;
    bbi_f32_reduce_rows(BBI_REDUCE_MAX, 1, cols, x, &max);
    const float log_sum = logf(sum_exp(cols, x, max, NULL));
    const bbi_f32x4 vmax = bbi_f32x4_splat(max), vlog = bbi_f32x4_splat(log_sum);
    size_t i = 0;
    for (; i + 4 <= cols; i += 4) bbi_f32x4_store(y + i, (bbi_f32x4_load(x + i) - vmax) - vlog);
    for (; i < cols; i++) y[i] = (x[i] - max) - log_sum;
  }
}

static float row_max_scalar(size_t n, const float *x) {
  float max;
  bbi_f32_reduce_rows_scalar(BBI_REDUCE_MAX, 1, n, x, &max);
  return max;
}

void bbi_f32_softmax_rows_scalar(size_t rows, size_t cols, const float *x, float *y) {
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

void bbi_f32_log_softmax_rows_scalar(size_t rows, size_t cols, const float *x, float *y) {
  if (cols == 0) return;
  for (size_t r = 0; r < rows; r++, x += cols, y += cols) {
    const float max = row_max_scalar(cols, x);
    float sum = 0.0f;
    for (size_t i = 0; i < cols; i++) sum += expf(x[i] - max);
    const float log_sum = logf(sum);
    for (size_t i = 0; i < cols; i++) y[i] = (x[i] - max) - log_sum;
  }
}
