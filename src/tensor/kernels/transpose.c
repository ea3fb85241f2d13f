/* Matrix transposes, by 4×4 blocks of vectors. */
#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"

void bbi_f32_transpose(size_t rows, size_t cols, const float *x, size_t ldx, float *y, size_t ldy) {
  size_t i = 0;
  for (; i + 4 <= rows; i += 4) {
    size_t j = 0;
    for (; j + 4 <= cols; j += 4) {
      bbi_f32x4 r[4];
      for (size_t q = 0; q < 4; q++) r[q] = bbi_f32x4_load(x + (i + q) * ldx + j);
      bbi_f32x4_transpose(r);
      for (size_t q = 0; q < 4; q++) bbi_f32x4_store(y + (j + q) * ldy + i, r[q]);
    }
    for (; j < cols; j++)
      for (size_t q = 0; q < 4; q++) y[j * ldy + i + q] = x[(i + q) * ldx + j];
  }
  for (; i < rows; i++)
    for (size_t j = 0; j < cols; j++) y[j * ldy + i] = x[i * ldx + j];
}

void bbi_f32_transpose_scalar(size_t rows, size_t cols, const float *x, size_t ldx, float *y, size_t ldy) {
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < cols; j++) y[j * ldy + i] = x[i * ldx + j];
}
