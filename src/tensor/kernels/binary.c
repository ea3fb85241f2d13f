/* Elementwise binary operations: two arrays, an array and a scalar on either side, and a
 * row broadcast. Each public function switches on the operation once; the loops are one
 * generic body specialised per operation by inlining. */
#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"

/* max/min that let a NaN in either operand through (the vec.h rules only pass one). */
BBI_INLINE bbi_f32x4 vmax_nan(bbi_f32x4 a, bbi_f32x4 b) {
  return bbi_f32x4_select(b != b, b, bbi_f32x4_max(a, b));
}
BBI_INLINE bbi_f32x4 vmin_nan(bbi_f32x4 a, bbi_f32x4 b) {
  return bbi_f32x4_select(b != b, b, bbi_f32x4_min(a, b));
}
static inline float max_nan(float a, float b) { return b != b ? b : bbi_f32_max_scalar(a, b); }
static inline float min_nan(float a, float b) { return b != b ? b : bbi_f32_min_scalar(a, b); }

BBI_INLINE bbi_f32x4 vop(bbi_binary_op op, bbi_f32x4 a, bbi_f32x4 b) {
  switch (op) {
  case BBI_BINARY_ADD: return a + b;
  case BBI_BINARY_SUB: return a - b;
  case BBI_BINARY_MUL: return a * b;
  case BBI_BINARY_DIV: return a / b;
  case BBI_BINARY_MAX: return vmax_nan(a, b);
  default: return vmin_nan(a, b);
  }
}

static float op_scalar(bbi_binary_op op, float a, float b) {
  switch (op) {
  case BBI_BINARY_ADD: return a + b;
  case BBI_BINARY_SUB: return a - b;
  case BBI_BINARY_MUL: return a * b;
  case BBI_BINARY_DIV: return a / b;
  case BBI_BINARY_MAX: return max_nan(a, b);
  default: return min_nan(a, b);
  }
}

/* One loop for all three shapes: a_array / b_array are 1 for an array and 0 for a scalar
 * (read once and splatted). */
BBI_INLINE void binary_loop(bbi_binary_op op, size_t n, const float *a, int a_array,
                           const float *b, int b_array, float *y) {
  const bbi_f32x4 a_splat = bbi_f32x4_splat(a_array ? 0.0f : a[0]);
  const bbi_f32x4 b_splat = bbi_f32x4_splat(b_array ? 0.0f : b[0]);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    bbi_f32x4 r[4];
    BBI_UNROLL for (size_t q = 0; q < 4; q++) {
      const bbi_f32x4 va = a_array ? bbi_f32x4_load(a + i + 4 * q) : a_splat;
      const bbi_f32x4 vb = b_array ? bbi_f32x4_load(b + i + 4 * q) : b_splat;
      r[q] = vop(op, va, vb);
    }
    BBI_UNROLL for (size_t q = 0; q < 4; q++) bbi_f32x4_store(y + i + 4 * q, r[q]);
  }
  for (; i + 4 <= n; i += 4) {
    const bbi_f32x4 va = a_array ? bbi_f32x4_load(a + i) : a_splat;
    const bbi_f32x4 vb = b_array ? bbi_f32x4_load(b + i) : b_splat;
    bbi_f32x4_store(y + i, vop(op, va, vb));
  }
  if (i < n) {
    const bbi_f32x4 va = a_array ? bbi_f32x4_load_tail(a + i, n - i) : a_splat;
    const bbi_f32x4 vb = b_array ? bbi_f32x4_load_tail(b + i, n - i) : b_splat;
    bbi_f32x4_store_tail(y + i, vop(op, va, vb), n - i);
  }
}

/* Calls binary_loop with op as a constant, so each case is its own specialised loop. */
#define DISPATCH(op, ...)                                                                    \
  switch (op) {                                                                              \
  case BBI_BINARY_ADD: binary_loop(BBI_BINARY_ADD, __VA_ARGS__); break;                        \
  case BBI_BINARY_SUB: binary_loop(BBI_BINARY_SUB, __VA_ARGS__); break;                        \
  case BBI_BINARY_MUL: binary_loop(BBI_BINARY_MUL, __VA_ARGS__); break;                        \
  case BBI_BINARY_DIV: binary_loop(BBI_BINARY_DIV, __VA_ARGS__); break;                        \
  case BBI_BINARY_MAX: binary_loop(BBI_BINARY_MAX, __VA_ARGS__); break;                        \
  case BBI_BINARY_MIN: binary_loop(BBI_BINARY_MIN, __VA_ARGS__); break;                        \
  default: break;                                                                            \
  }

void bbi_f32_vbinary(bbi_binary_op op, size_t n, const float *a, const float *b, float *y) {
  DISPATCH(op, n, a, 1, b, 1, y)
}

void bbi_f32_vbinary_c(bbi_binary_op op, size_t n, const float *a, float b, float *y) {
  DISPATCH(op, n, a, 1, &b, 0, y)
}

void bbi_f32_vbinary_rc(bbi_binary_op op, size_t n, float a, const float *b, float *y) {
  DISPATCH(op, n, &a, 0, b, 1, y)
}

void bbi_f32_vbinary_row(bbi_binary_op op, size_t rows, size_t cols, const float *a,
                        const float *b, int b_first, float *y) {
  if (cols == 0) return;
  for (size_t r = 0; r < rows; r++) {
    const float *ar = a + r * cols;
    if (b_first)
      bbi_f32_vbinary(op, cols, b, ar, y + r * cols);
    else
      bbi_f32_vbinary(op, cols, ar, b, y + r * cols);
  }
}

void bbi_f32_vbinary_scalar(bbi_binary_op op, size_t n, const float *a, const float *b,
                           float *y) {
  for (size_t i = 0; i < n; i++) y[i] = op_scalar(op, a[i], b[i]);
}

void bbi_f32_vbinary_c_scalar(bbi_binary_op op, size_t n, const float *a, float b, float *y) {
  for (size_t i = 0; i < n; i++) y[i] = op_scalar(op, a[i], b);
}

void bbi_f32_vbinary_rc_scalar(bbi_binary_op op, size_t n, float a, const float *b, float *y) {
  for (size_t i = 0; i < n; i++) y[i] = op_scalar(op, a, b[i]);
}

void bbi_f32_vbinary_row_scalar(bbi_binary_op op, size_t rows, size_t cols, const float *a,
                               const float *b, int b_first, float *y) {
  for (size_t r = 0; r < rows; r++) {
    for (size_t c = 0; c < cols; c++) {
      const float x = a[r * cols + c];
      y[r * cols + c] = b_first ? op_scalar(op, b[c], x) : op_scalar(op, x, b[c]);
    }
  }
}
