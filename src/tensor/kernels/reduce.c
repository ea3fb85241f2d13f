/* Reductions: along contiguous rows, and along the middle axis of outer×len×inner. */
#include <math.h>

#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"

static float identity(bbi_reduce_op op) {
  switch (op) {
  case BBI_REDUCE_MAX: return -INFINITY;
  case BBI_REDUCE_MIN: return INFINITY;
  default: return 0.0f;
  }
}

/* The NaN-propagating combine used by both forms: a NaN already in acc stays (the
 * vec.h rules pass their first operand's NaN), a NaN in x is taken. */
BBI_INLINE bbi_f32x4 vcombine(bbi_reduce_op op, bbi_f32x4 acc, bbi_f32x4 x) {
  switch (op) {
  case BBI_REDUCE_MAX: return bbi_f32x4_select(x != x, x, bbi_f32x4_max(acc, x));
  case BBI_REDUCE_MIN: return bbi_f32x4_select(x != x, x, bbi_f32x4_min(acc, x));
  default: return acc + x;
  }
}

static float combine_scalar(bbi_reduce_op op, float acc, float x) {
  switch (op) {
  case BBI_REDUCE_MAX: return x != x ? x : bbi_f32_max_scalar(acc, x);
  case BBI_REDUCE_MIN: return x != x ? x : bbi_f32_min_scalar(acc, x);
  default: return acc + x;
  }
}

/* Folds the four lanes of each of the four accumulators into one float. */
BBI_INLINE float vfinish(bbi_reduce_op op, const bbi_f32x4 acc[4]) {
  const bbi_f32x4 v = vcombine(op, vcombine(op, acc[0], acc[1]), vcombine(op, acc[2], acc[3]));
  return combine_scalar(op, combine_scalar(op, v[0], v[2]), combine_scalar(op, v[1], v[3]));
}

BBI_INLINE float reduce_row(bbi_reduce_op op, size_t n, const float *x) {
  bbi_f32x4 acc[4];
  BBI_UNROLL for (size_t q = 0; q < 4; q++) acc[q] = bbi_f32x4_splat(identity(op));
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    BBI_UNROLL for (size_t q = 0; q < 4; q++) acc[q] = vcombine(op, acc[q], bbi_f32x4_load(x + i + 4 * q));
  }
  for (; i + 4 <= n; i += 4) acc[0] = vcombine(op, acc[0], bbi_f32x4_load(x + i));
  float r = vfinish(op, acc);
  for (; i < n; i++) r = combine_scalar(op, r, x[i]);
  return r;
}

BBI_INLINE void reduce_rows(bbi_reduce_op op, size_t rows, size_t cols, const float *x, float *y) {
  for (size_t r = 0; r < rows; r++) y[r] = reduce_row(op, cols, x + r * cols);
}

/* acc[i] = combine(acc[i], x[i]) for i < n. */
BBI_INLINE void combine_into(bbi_reduce_op op, size_t n, float *acc, const float *x) {
  size_t i = 0;
  for (; i + 4 <= n; i += 4)
    bbi_f32x4_store(acc + i, vcombine(op, bbi_f32x4_load(acc + i), bbi_f32x4_load(x + i)));
  for (; i < n; i++) acc[i] = combine_scalar(op, acc[i], x[i]);
}

BBI_INLINE void reduce_strided(bbi_reduce_op op, size_t outer, size_t len, size_t inner,
                              const float *x, float *y) {
  for (size_t o = 0; o < outer; o++, x += len * inner, y += inner) {
    for (size_t i = 0; i < inner; i++) y[i] = identity(op);
    for (size_t l = 0; l < len; l++) combine_into(op, inner, y, x + l * inner);
  }
}

/* What a reduction over nothing gives (x is then never touched, and may be NULL). */
static void reduce_empty(bbi_reduce_op op, size_t count, float *y) {
  for (size_t i = 0; i < count; i++) y[i] = op == BBI_REDUCE_MEAN ? NAN : identity(op);
}

/* Mean is a sum scaled afterwards, in both forms. */
static void divide(size_t n, float *y, size_t count) {
  for (size_t i = 0; i < n; i++) y[i] /= (float)count;
}

void bbi_f32_reduce_rows(bbi_reduce_op op, size_t rows, size_t cols, const float *x, float *y) {
  if (cols == 0) {
    reduce_empty(op, rows, y);
    return;
  }
  switch (op) {
  case BBI_REDUCE_SUM: reduce_rows(BBI_REDUCE_SUM, rows, cols, x, y); break;
  case BBI_REDUCE_MEAN:
    reduce_rows(BBI_REDUCE_SUM, rows, cols, x, y);
    divide(rows, y, cols);
    break;
  case BBI_REDUCE_MAX: reduce_rows(BBI_REDUCE_MAX, rows, cols, x, y); break;
  case BBI_REDUCE_MIN: reduce_rows(BBI_REDUCE_MIN, rows, cols, x, y); break;
  default: break;
  }
}

void bbi_f32_reduce_strided(bbi_reduce_op op, size_t outer, size_t len, size_t inner,
                           const float *x, float *y) {
  if (len == 0) {
    reduce_empty(op, outer * inner, y);
    return;
  }
  if (inner == 1) {
    bbi_f32_reduce_rows(op, outer, len, x, y);
    return;
  }
  switch (op) {
  case BBI_REDUCE_SUM: reduce_strided(BBI_REDUCE_SUM, outer, len, inner, x, y); break;
  case BBI_REDUCE_MEAN:
    reduce_strided(BBI_REDUCE_SUM, outer, len, inner, x, y);
    divide(outer * inner, y, len);
    break;
  case BBI_REDUCE_MAX: reduce_strided(BBI_REDUCE_MAX, outer, len, inner, x, y); break;
  case BBI_REDUCE_MIN: reduce_strided(BBI_REDUCE_MIN, outer, len, inner, x, y); break;
  default: break;
  }
}

void bbi_f32_reduce_rows_scalar(bbi_reduce_op op, size_t rows, size_t cols, const float *x,
                               float *y) {
  bbi_f32_reduce_strided_scalar(op, rows, cols, 1, x, y);
}

void bbi_f32_reduce_strided_scalar(bbi_reduce_op op, size_t outer, size_t len, size_t inner,
                                  const float *x, float *y) {
  if (len == 0) {
    reduce_empty(op, outer * inner, y);
    return;
  }
  const bbi_reduce_op base = op == BBI_REDUCE_MEAN ? BBI_REDUCE_SUM : op;
  for (size_t o = 0; o < outer; o++) {
    for (size_t i = 0; i < inner; i++) {
      float acc = identity(base);
      for (size_t l = 0; l < len; l++) acc = combine_scalar(base, acc, x[(o * len + l) * inner + i]);
      y[o * inner + i] = op == BBI_REDUCE_MEAN ? acc / (float)len : acc;
    }
  }
}
