/* The shipped x86-64 GEMM micro-kernels, picked at run time by bbi_f32_gemm_configs.
 * Measured with bench_kernels sweep on an AMD EPYC (Zen 5), GFLOP/s at 512^3:
 * 6x16-avx2fma 104 (12 ymm accumulators, 2 B vectors, 1 broadcast of 16 registers);
 * 8x32-avx512 200, steadier than 12x32 and 14x32 and a smaller edge for short A. */
#include "tensor/kernels/gemm_x86.h"

#if BBI_HAVE_X86_GEMM
BBI_AVX2FMA void bbi_f32_gemm_ukernel_6x16__avx2fma(size_t kc, const float *pa, const float *pb,
                                                  float *c, size_t ldc, size_t mr, size_t nr,
                                                  const bbi_f32_gemm_tile *tile) {
  bbi_avx2fma_gemm_tile(6, 2, kc, pa, pb, c, ldc, mr, nr, tile);
}

BBI_AVX2FMA void bbi_f32_gemm_ukernel_1x16__avx2fma(size_t kc, const float *pa, const float *pb,
                                                  float *c, size_t ldc, size_t mr, size_t nr,
                                                  const bbi_f32_gemm_tile *tile) {
  bbi_avx2fma_gemm_tile(1, 2, kc, pa, pb, c, ldc, mr, nr, tile);
}

BBI_AVX512 void bbi_f32_gemm_ukernel_8x32__avx512(size_t kc, const float *pa, const float *pb,
                                                float *c, size_t ldc, size_t mr, size_t nr,
                                                const bbi_f32_gemm_tile *tile) {
  bbi_avx512_gemm_tile(8, 2, kc, pa, pb, c, ldc, mr, nr, tile);
}

BBI_AVX512 void bbi_f32_gemm_ukernel_4x32__avx512(size_t kc, const float *pa, const float *pb,
                                                float *c, size_t ldc, size_t mr, size_t nr,
                                                const bbi_f32_gemm_tile *tile) {
  bbi_avx512_gemm_tile(4, 2, kc, pa, pb, c, ldc, mr, nr, tile);
}

BBI_AVX512 void bbi_f32_gemm_ukernel_1x32__avx512(size_t kc, const float *pa, const float *pb,
                                                float *c, size_t ldc, size_t mr, size_t nr,
                                                const bbi_f32_gemm_tile *tile) {
  bbi_avx512_gemm_tile(1, 2, kc, pa, pb, c, ldc, mr, nr, tile);
}
#endif
