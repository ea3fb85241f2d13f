/* GEMM micro-kernels on the portable 4-lane vector layer (SIMD128 in WebAssembly, SSE2
 * on x86-64). One generic body; each tile shape is an instance whose loops the compiler
 * unrolls completely, so the MR×NR/4 accumulators live in registers. */
#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"

#define MAX_MR 8
#define MAX_NV 4 /* vectors per tile row */

BB_INLINE void gemm_tile_f32x4(size_t MR, size_t NV, size_t kc, const float *pa,
                               const float *pb, float *c, size_t ldc, size_t mr, size_t nr,
                               const bb_f32_gemm_tile *tile) {
  bb_f32x4 acc[MAX_MR][MAX_NV];
  BB_UNROLL for (size_t i = 0; i < MR; i++) {
    BB_UNROLL for (size_t j = 0; j < NV; j++) acc[i][j] = bb_f32x4_splat(0.0f);
  }
  for (size_t p = 0; p < kc; p++) {
    bb_f32x4 b[MAX_NV];
    BB_UNROLL for (size_t j = 0; j < NV; j++) b[j] = bb_f32x4_load(pb + 4 * j);
    BB_UNROLL for (size_t i = 0; i < MR; i++) {
      const bb_f32x4 a = bb_f32x4_splat(pa[i]);
      BB_UNROLL for (size_t j = 0; j < NV; j++) acc[i][j] += a * b[j];
    }
    pa += MR;
    pb += 4 * NV;
  }

  if (mr != MR || nr != 4 * NV) {
    float part[MAX_MR * MAX_NV * 4];
    BB_UNROLL for (size_t i = 0; i < MR; i++) {
      BB_UNROLL for (size_t j = 0; j < NV; j++) bb_f32x4_store(part + i * 4 * NV + 4 * j, acc[i][j]);
    }
    bb_f32_gemm_tile_apply(part, 4 * NV, c, ldc, mr, nr, tile);
    return;
  }
  const bb_f32x4 beta = bb_f32x4_splat(tile->beta);
  const bb_f32x4 lo = bb_f32x4_splat(tile->min), hi = bb_f32x4_splat(tile->max);
  BB_UNROLL for (size_t i = 0; i < MR; i++) {
    float *ci = c + i * ldc;
    BB_UNROLL for (size_t j = 0; j < NV; j++) {
      bb_f32x4 v = acc[i][j];
      if (!tile->first) {
        v += bb_f32x4_load(ci + 4 * j);
      } else {
        if (tile->beta != 0.0f) v += beta * bb_f32x4_load(ci + 4 * j);
        if (tile->bias) v += bb_f32x4_load(tile->bias + 4 * j);
      }
      if (tile->clamp) v = bb_f32x4_min(bb_f32x4_max(v, lo), hi);
      bb_f32x4_store(ci + 4 * j, v);
    }
  }
}

#define DEFINE_UKERNEL(MR, NR)                                                               \
  void bb_f32_gemm_ukernel_##MR##x##NR##__f32x4(size_t kc, const float *pa, const float *pb, \
                                                 float *c, size_t ldc, size_t mr, size_t nr, \
                                                 const bb_f32_gemm_tile *tile) {             \
    gemm_tile_f32x4(MR, (NR) / 4, kc, pa, pb, c, ldc, mr, nr, tile);                         \
  }

DEFINE_UKERNEL(4, 8)
DEFINE_UKERNEL(5, 8)
DEFINE_UKERNEL(6, 8)
DEFINE_UKERNEL(8, 8)
DEFINE_UKERNEL(3, 12)
DEFINE_UKERNEL(2, 16)
