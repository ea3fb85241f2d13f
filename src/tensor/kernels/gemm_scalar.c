/* The reference GEMM every optimised path is tested against. */
#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"

void bbi_f32_gemm_scalar(const bbi_f32_gemm_args *g) {
  for (size_t i = 0; i < g->m; i++) {
    for (size_t j = 0; j < g->n; j++) {
      float dot = 0.0f;
      if (g->alpha != 0.0f) {
        for (size_t p = 0; p < g->k; p++) {
          const float a = g->trans_a ? g->a[p * g->lda + i] : g->a[i * g->lda + p];
          const float b = g->trans_b ? g->b[j * g->ldb + p] : g->b[p * g->ldb + j];
          dot += a * b;
        }
      }
      float *cij = g->c + i * g->ldc + j;
      float v = g->alpha * dot;
      if (g->beta != 0.0f) v += g->beta * *cij;
      if (g->bias) v += g->bias[j];
      if (g->bias_per_row) v += g->bias_per_row[i];
      if (g->addend) v += g->addend[i * g->ldc + j];
      if (g->relu) v = bbi_f32_relu_scalar(v);
      if (g->clamp) v = bbi_f32_min_scalar(bbi_f32_max_scalar(v, g->min), g->max);
      *cij = v;
    }
  }
}
