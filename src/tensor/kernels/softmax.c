/* Softmax and log-softmax along contiguous rows. Each row is shifted by its maximum, so
 * exp never overflows and the largest term is exactly 1. */
#include <math.h>
#include <stdbool.h>

#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"
#include "tensor/kernels/vmath.h"

/* The first n (< 4) floats of p, and `fill` in the other lanes. */
BBI_INLINE bbi_f32x4 load_tail_fill(const float *p, size_t n, float fill) {
  bbi_f32x4 v = bbi_f32x4_splat(fill);
  for (size_t i = 0; i < n; i++) v[i] = p[i];
  return v;
}

/* max (or min) of the four lanes taken in lane order, ((l0 ? l1) ? l2) ? l3, as the scalar
 * rules would fold them: the same result for zeros of either sign. In registers, by
 * shuffles: a loop over the lanes (or v[l] one by one) goes through memory under V8, with
 * a branch per lane that the data decides. */
BBI_INLINE float lanes_in_order(bool max, bbi_f32x4 v) {
  const bbi_f32x4 v1 = BBI_F32X4_SHUFFLE(v, v, 1, 1, 1, 1), v2 = BBI_F32X4_SHUFFLE(v, v, 2, 2, 2, 2);
  const bbi_f32x4 v3 = BBI_F32X4_SHUFFLE(v, v, 3, 3, 3, 3);
  const bbi_f32x4 m = max ? bbi_f32x4_max(bbi_f32x4_max(bbi_f32x4_max(v, v1), v2), v3)
                          : bbi_f32x4_min(bbi_f32x4_min(bbi_f32x4_min(v, v1), v2), v3);
  return m[0];
}

/* The row's maximum and minimum in one pass, NaNs passed over (pmax/pmin keep the running
 * value when the new one is NaN). A NaN in the row still makes every output NaN: its term
 * exp(NaN - max) is NaN, so the row's sum is, and softmax's 1/sum and log-softmax's
 * log(sum) spread it to every element, as a NaN maximum would. Four accumulators of each,
 * sixteen floats a step, so that no step waits on the previous one's max. */
static float row_max_min(size_t n, const float *x, float *min) {
  bbi_f32x4 hi0 = bbi_f32x4_splat(-INFINITY), hi1 = hi0, hi2 = hi0, hi3 = hi0;
  bbi_f32x4 lo0 = bbi_f32x4_splat(INFINITY), lo1 = lo0, lo2 = lo0, lo3 = lo0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const bbi_f32x4 a = bbi_f32x4_load(x + i), b = bbi_f32x4_load(x + i + 4);
    const bbi_f32x4 c = bbi_f32x4_load(x + i + 8), d = bbi_f32x4_load(x + i + 12);
    hi0 = bbi_f32x4_max(hi0, a);
    hi1 = bbi_f32x4_max(hi1, b);
    hi2 = bbi_f32x4_max(hi2, c);
    hi3 = bbi_f32x4_max(hi3, d);
    lo0 = bbi_f32x4_min(lo0, a);
    lo1 = bbi_f32x4_min(lo1, b);
    lo2 = bbi_f32x4_min(lo2, c);
    lo3 = bbi_f32x4_min(lo3, d);
  }
  for (; i + 4 <= n; i += 4) {
    const bbi_f32x4 a = bbi_f32x4_load(x + i);
    hi0 = bbi_f32x4_max(hi0, a);
    lo0 = bbi_f32x4_min(lo0, a);
  }
  hi0 = bbi_f32x4_max(bbi_f32x4_max(hi0, hi1), bbi_f32x4_max(hi2, hi3));
  lo0 = bbi_f32x4_min(bbi_f32x4_min(lo0, lo1), bbi_f32x4_min(lo2, lo3));
  float hi = lanes_in_order(true, hi0), lo = lanes_in_order(false, lo0);
  for (; i < n; i++) {
    hi = bbi_f32_max_scalar(hi, x[i]);
    lo = bbi_f32_min_scalar(lo, x[i]);
  }
  *min = lo;
  return hi;
}

/* Sum of exp(x[i] - max) over the row; stores the terms in y with `store` (softmax) and
 * not without (log-softmax, y NULL), a constant in each copy so that the loop holds no test
 * of it. With `fast`, every x[i] - max is known to be at least BBI_EXP_SHIFTED_FAST (the
 * row's minimum says so), and the vectors skip the test for the slow path. */
BBI_INLINE float sum_exp_as(bool fast, bool store, size_t n, const float *x, float max, float *y) {
  const bbi_vmath_consts k = bbi_vmath_k;
  const bbi_f32x4 vmax = bbi_f32x4_splat(max);
  bbi_f32x4 acc0 = bbi_f32x4_splat(0.0f), acc1 = acc0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const bbi_f32x4 d0 = bbi_f32x4_load(x + i) - vmax, d1 = bbi_f32x4_load(x + i + 4) - vmax;
    bbi_f32x4 e0, e1;
    /* one test for both vectors */
    if (!fast && bbi_i32x4_any((d0 < k.shifted_fast) | (d1 < k.shifted_fast))) {
      e0 = bbi_f32x4_exp(d0, &k);
      e1 = bbi_f32x4_exp(d1, &k);
    } else {
      e0 = bbi_f32x4_exp_shifted_fast(d0, &k);
      e1 = bbi_f32x4_exp_shifted_fast(d1, &k);
    }
    if (store) {
      bbi_f32x4_store(y + i, e0);
      bbi_f32x4_store(y + i + 4, e1);
    }
    acc0 += e0;
    acc1 += e1;
  }
  for (; i + 4 <= n; i += 4) {
    const bbi_f32x4 e = bbi_f32x4_exp_shifted(bbi_f32x4_load(x + i) - vmax, &k);
    if (store) bbi_f32x4_store(y + i, e);
    acc0 += e;
  }
  if (i < n) {
    /* -inf in the unused lanes makes their terms exactly 0. */
    const bbi_f32x4 e = bbi_f32x4_exp_shifted(load_tail_fill(x + i, n - i, -INFINITY) - vmax, &k);
    if (store) bbi_f32x4_store_tail(y + i, e, n - i);
    acc0 += e;
  }
  return bbi_f32x4_hsum(acc0 + acc1);
}

static float sum_exp_fast(size_t n, const float *x, float max, float *y) {
  return y ? sum_exp_as(true, true, n, x, max, y) : sum_exp_as(true, false, n, x, max, NULL);
}
static float sum_exp_checked(size_t n, const float *x, float max, float *y) {
  return y ? sum_exp_as(false, true, n, x, max, y) : sum_exp_as(false, false, n, x, max, NULL);
}

/* The row's maximum, and the sum of exp(x[i] - max) (the terms stored in y if not NULL). */
static float max_and_sum_exp(size_t n, const float *x, float *y, float *sum) {
  float min;
  const float max = row_max_min(n, x, &min);
  /* false for an infinite max, a -inf in the row, or a row of NaNs alone */
  const bool fast = min - max >= BBI_EXP_SHIFTED_FAST;
  *sum = fast ? sum_exp_fast(n, x, max, y) : sum_exp_checked(n, x, max, y);
  return max;
}

void bbi_f32_softmax_rows(size_t rows, size_t cols, const float *x, float *y) {
  if (cols == 0) return;
  for (size_t r = 0; r < rows; r++, x += cols, y += cols) {
    float sum;
    max_and_sum_exp(cols, x, y, &sum);
    bbi_f32_vbinary_c(BBI_BINARY_MUL, cols, y, 1.0f / sum, y);
  }
}

void bbi_f32_log_softmax_rows(size_t rows, size_t cols, const float *x, float *y) {
  if (cols == 0) return;
  for (size_t r = 0; r < rows; r++, x += cols, y += cols) {
    float sum;
    const float max = max_and_sum_exp(cols, x, NULL, &sum);
    const float log_sum = logf(sum);
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
