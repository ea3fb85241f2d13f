/* The shipped 4-lane GEMM micro-kernels (SIMD128 in WebAssembly, SSE2 on x86-64).
 *
 * Why 5x8: V8 keeps 15 SIMD registers allocatable and hoists a k step's broadcast loads to
 * its top, so 5x8 (10 accumulators) already spills two accumulators per k step, yet its 20
 * multiply-adds per step win; larger tiles spill far more. Measured under Node 20 on an
 * AMD EPYC (Zen 5) with bench_kernels sweep, GFLOP/s at 256^3..1024^3: 5x8 48-50,
 * 3x12 41-46, 4x8 41-43, 2x16 39-41, 8x8 33, 6x8 25. Unrolling k by 2 costs 5x8 a quarter. */
#include "tensor/kernels/gemm_f32x4.h"

void bbi_f32_gemm_ukernel_5x8__f32x4(size_t kc, const float *pa, const float *pb, float *c,
                                    size_t ldc, size_t mr, size_t nr,
                                    const bbi_f32_gemm_tile *tile) {
  bbi_f32x4_gemm_tile(5, 2, kc, pa, pb, c, ldc, mr, nr, tile);
}

/* Products whose rows come in fours and which 5-row panels would pad by a ninth or more (16
 * or 32 output channels of a convolution; see the driver's four_row_panels). Per multiply-add
 * 4x8 runs a few % slower than 5x8 under V8 (the loop's own instructions, its stack check
 * among them, spread over 16 vector operations instead of 20), so it pays only there. */
void bbi_f32_gemm_ukernel_4x8__f32x4(size_t kc, const float *pa, const float *pb, float *c,
                                    size_t ldc, size_t mr, size_t nr,
                                    const bbi_f32_gemm_tile *tile) {
  bbi_f32x4_gemm_tile(4, 2, kc, pa, pb, c, ldc, mr, nr, tile);
}

void bbi_f32_gemm_ukernel_1x8__f32x4(size_t kc, const float *pa, const float *pb, float *c,
                                    size_t ldc, size_t mr, size_t nr,
                                    const bbi_f32_gemm_tile *tile) {
  bbi_f32x4_gemm_tile(1, 2, kc, pa, pb, c, ldc, mr, nr, tile);
}
