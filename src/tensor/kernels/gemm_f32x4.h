/* The body of every 4-lane GEMM micro-kernel, for MR rows by 4*NV columns (MR <= 8,
 * NV <= 4). Called with constant MR and NV, the compiler unrolls every loop and keeps the
 * MR*NV accumulators in registers; gemm_f32x4.c makes the shipped shape from it and
 * bench/bench_kernels.c the shapes it compares against. */
#ifndef BBI_TENSOR_KERNELS_GEMM_F32X4_H
#define BBI_TENSOR_KERNELS_GEMM_F32X4_H

#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"

#define BBI_F32X4_TILE_MAX_MR 8
#define BBI_F32X4_TILE_MAX_NV 4 /* vectors per tile row */

BBI_INLINE void bbi_f32x4_gemm_tile(size_t MR, size_t NV, size_t kc, const float *pa,
                               const float *pb, float *c, size_t ldc, size_t mr, size_t nr,
                               const bbi_f32_gemm_tile *tile) {
  bbi_f32x4 acc[BBI_F32X4_TILE_MAX_MR][BBI_F32X4_TILE_MAX_NV];
  BBI_UNROLL for (size_t i = 0; i < MR; i++) {
    BBI_UNROLL for (size_t j = 0; j < NV; j++) acc[i][j] = bbi_f32x4_splat(0.0f);
  }
  for (size_t p = 0; p < kc; p++) {
    bbi_f32x4 b[BBI_F32X4_TILE_MAX_NV];
    BBI_UNROLL for (size_t j = 0; j < NV; j++) b[j] = bbi_f32x4_load(pb + 4 * j);
    BBI_UNROLL for (size_t i = 0; i < MR; i++) {
      const bbi_f32x4 a = bbi_f32x4_splat(pa[i]);
      BBI_UNROLL for (size_t j = 0; j < NV; j++) acc[i][j] = BBI_F32X4_MADD(a, b[j], acc[i][j]);
    }
    pa += MR;
    pb += 4 * NV;
  }

  if (mr != MR || nr != 4 * NV) {
    float part[BBI_F32X4_TILE_MAX_MR * BBI_F32X4_TILE_MAX_NV * 4];
    BBI_UNROLL for (size_t i = 0; i < MR; i++) {
      BBI_UNROLL for (size_t j = 0; j < NV; j++) bbi_f32x4_store(part + i * 4 * NV + 4 * j, acc[i][j]);
    }
    bbi_f32_gemm_tile_apply(part, 4 * NV, c, ldc, mr, nr, tile);
    return;
  }
  const bbi_f32x4 beta = bbi_f32x4_splat(tile->beta);
  const bbi_f32x4 lo = bbi_f32x4_splat(tile->min), hi = bbi_f32x4_splat(tile->max);
  const bbi_f32x4 zero = bbi_f32x4_splat(0.0f);
  BBI_UNROLL for (size_t i = 0; i < MR; i++) {
    float *ci = c + i * ldc;
    BBI_UNROLL for (size_t j = 0; j < NV; j++) {
      bbi_f32x4 v = acc[i][j];
      if (!tile->first) {
        v += bbi_f32x4_load(ci + 4 * j);
      } else {
        if (tile->beta != 0.0f) v += beta * bbi_f32x4_load(ci + 4 * j);
        if (tile->bias) v += bbi_f32x4_load(tile->bias + 4 * j);
        if (tile->bias_per_row) v += bbi_f32x4_splat(tile->bias_per_row[i]);
      }
      if (tile->addend) v += bbi_f32x4_load(tile->addend + i * ldc + 4 * j);
      /* max(v, 0) is v < 0 ? 0 : v (pmax), then + 0: Relu's rule */
      if (tile->relu) v = bbi_f32x4_max(v, zero) + zero;
      if (tile->clamp) v = bbi_f32x4_min(bbi_f32x4_max(v, lo), hi);
      bbi_f32x4_store(ci + 4 * j, v);
    }
  }
}

#endif
