/* Comparisons of floats into bools, and selection between two arrays by bools: ReLU's
 * backward is Where(Greater(x, 0), dy, 0). Sixteen elements a step, their bools moved as
 * one 16-byte vector. */
#include <string.h>

#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"

static inline uint8_t compare_one(bbi_compare_op op, float a, float b) {
  switch (op) {
  case BBI_COMPARE_EQ: return a == b;
  case BBI_COMPARE_GT: return a > b;
  case BBI_COMPARE_GE: return a >= b;
  case BBI_COMPARE_LT: return a < b;
  default: return a <= b;
  }
}

BBI_INLINE bbi_i32x4 compare_vec(bbi_compare_op op, bbi_f32x4 a, bbi_f32x4 b) {
  switch (op) {
  case BBI_COMPARE_EQ: return a == b;
  case BBI_COMPARE_GT: return a > b;
  case BBI_COMPARE_GE: return a >= b;
  case BBI_COMPARE_LT: return a < b;
  default: return a <= b;
  }
}

/* Four lanes of an operand that advances (s = 1) or repeats its first element (s = 0). */
BBI_INLINE bbi_f32x4 operand(const float *p, size_t s, size_t i) {
  return s ? bbi_f32x4_load(p + i) : bbi_f32x4_splat(p[0]);
}

void bbi_f32_vcompare_scalar(bbi_compare_op op, size_t n, const float *a, size_t sa, const float *b, size_t sb, uint8_t *y) {
  for (size_t i = 0; i < n; i++) y[i] = compare_one(op, a[i * sa], b[i * sb]);
}

void bbi_f32_vcompare(bbi_compare_op op, size_t n, const float *a, size_t sa, const float *b, size_t sb, uint8_t *y) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    bbi_i32x4_store_bools(compare_vec(op, operand(a, sa, i), operand(b, sb, i)),
                         compare_vec(op, operand(a, sa, i + 4), operand(b, sb, i + 4)),
                         compare_vec(op, operand(a, sa, i + 8), operand(b, sb, i + 8)),
                         compare_vec(op, operand(a, sa, i + 12), operand(b, sb, i + 12)), y + i);
  bbi_f32_vcompare_scalar(op, n - i, a + i * sa, sa, b + i * sb, sb, y + i);
}

/* Through integers, so no float register ever touches the bits (int32 data uses it too). */
void bbi_f32_vselect_scalar(size_t n, const uint8_t *cond, const float *a, size_t sa, const float *b, size_t sb, float *y) {
  for (size_t i = 0; i < n; i++) memcpy(y + i, cond[i] ? a + i * sa : b + i * sb, sizeof *y);
}

void bbi_f32_vselect(size_t n, const uint8_t *cond, const float *a, size_t sa, const float *b, size_t sb, float *y) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    bbi_i32x4 m[4];
    bbi_i32x4_load_bools(cond + i, m);
    for (size_t k = 0; k < 4; k++)
      bbi_f32x4_store(y + i + 4 * k, bbi_f32x4_select(m[k], operand(a, sa, i + 4 * k), operand(b, sb, i + 4 * k)));
  }
  bbi_f32_vselect_scalar(n - i, cond + i, a + i * sa, sa, b + i * sb, sb, y + i);
}
