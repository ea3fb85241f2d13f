/* The bodies of the x86-64 GEMM micro-kernels: AVX2+FMA (8 lanes, MR <= 14, NV <= 4
 * vectors per row) and AVX-512 (16 lanes). Each function carries its target, so the
 * library and the benchmark stay baseline x86-64 builds; gemm_x86.c makes the shipped
 * shapes and bench/bench_kernels.c the ones it compares against. */
#ifndef BBI_TENSOR_KERNELS_GEMM_X86_H
#define BBI_TENSOR_KERNELS_GEMM_X86_H

#include "tensor/kernels/kernels.h"

#if BBI_HAVE_X86_GEMM
#include <immintrin.h>

#include "tensor/kernels/vec.h"

#define BBI_AVX2FMA __attribute__((target("avx2,fma")))
#define BBI_X86_TILE_MAX_MR 14
#define BBI_X86_TILE_MAX_NV 4

BBI_INLINE BBI_AVX2FMA void bbi_avx2fma_gemm_tile(size_t MR, size_t NV, size_t kc, const float *pa,
                                         const float *pb, float *c, size_t ldc, size_t mr,
                                         size_t nr, const bbi_f32_gemm_tile *tile) {
  __m256 acc[BBI_X86_TILE_MAX_MR][BBI_X86_TILE_MAX_NV];
  BBI_UNROLL for (size_t i = 0; i < MR; i++) {
    BBI_UNROLL for (size_t j = 0; j < NV; j++) acc[i][j] = _mm256_setzero_ps();
  }
  for (size_t p = 0; p < kc; p++) {
    __m256 b[BBI_X86_TILE_MAX_NV];
    BBI_UNROLL for (size_t j = 0; j < NV; j++) b[j] = _mm256_loadu_ps(pb + 8 * j);
    BBI_UNROLL for (size_t i = 0; i < MR; i++) {
      const __m256 a = _mm256_broadcast_ss(pa + i);
      BBI_UNROLL for (size_t j = 0; j < NV; j++) acc[i][j] = _mm256_fmadd_ps(a, b[j], acc[i][j]);
    }
    pa += MR;
    pb += 8 * NV;
  }

  if (mr != MR || nr != 8 * NV) {
    float part[BBI_X86_TILE_MAX_MR * BBI_X86_TILE_MAX_NV * 8];
    BBI_UNROLL for (size_t i = 0; i < MR; i++) {
      BBI_UNROLL for (size_t j = 0; j < NV; j++) _mm256_storeu_ps(part + i * 8 * NV + 8 * j, acc[i][j]);
    }
    bbi_f32_gemm_tile_apply(part, 8 * NV, c, ldc, mr, nr, tile);
    return;
  }
  const __m256 beta = _mm256_set1_ps(tile->beta);
  const __m256 lo = _mm256_set1_ps(tile->min), hi = _mm256_set1_ps(tile->max);
  const __m256 zero = _mm256_setzero_ps();
  BBI_UNROLL for (size_t i = 0; i < MR; i++) {
    float *ci = c + i * ldc;
    BBI_UNROLL for (size_t j = 0; j < NV; j++) {
      __m256 v = acc[i][j];
      if (!tile->first) {
        v = _mm256_add_ps(v, _mm256_loadu_ps(ci + 8 * j));
      } else {
        if (tile->beta != 0.0f) v = _mm256_add_ps(v, _mm256_mul_ps(beta, _mm256_loadu_ps(ci + 8 * j)));
        if (tile->bias) v = _mm256_add_ps(v, _mm256_loadu_ps(tile->bias + 8 * j));
        if (tile->bias_per_row) v = _mm256_add_ps(v, _mm256_set1_ps(tile->bias_per_row[i]));
      }
      /* max(lo, v) is v < lo ? lo : v and min(hi, v) is hi < v ? hi : v, the rules of
       * bbi_f32_max_scalar / bbi_f32_min_scalar. */
      if (tile->addend) v = _mm256_add_ps(v, _mm256_loadu_ps(tile->addend + i * ldc + 8 * j));
      /* max(0, v) is v < 0 ? 0 : v, then + 0: Relu's rule */
      if (tile->relu) v = _mm256_add_ps(_mm256_max_ps(zero, v), zero);
      if (tile->clamp) v = _mm256_min_ps(hi, _mm256_max_ps(lo, v));
      _mm256_storeu_ps(ci + 8 * j, v);
    }
  }
}

#define BBI_AVX512 __attribute__((target("avx512f")))
/* Floats ahead of the B panel that each k step prefetches into L1 (4 KiB: the next page
 * while the current one is read). Small maps' products (2 to 16 rows against a layer's
 * weights, 0.6 to 9.4 MB streamed from memory per run) wait on these loads; the hardware
 * prefetcher stops at page ends. 10-15 % more bandwidth on a 9.4 MB panel set at 1, 4 and
 * 16 rows (512 to 4096 floats all did about as well); the prefetch touches no result. */
#define BBI_AVX512_PREFETCH 1024

BBI_INLINE BBI_AVX512 void bbi_avx512_gemm_tile(size_t MR, size_t NV, size_t kc, const float *pa,
                                       const float *pb, float *c, size_t ldc, size_t mr,
                                       size_t nr, const bbi_f32_gemm_tile *tile) {
  __m512 acc[BBI_X86_TILE_MAX_MR][BBI_X86_TILE_MAX_NV];
  BBI_UNROLL for (size_t i = 0; i < MR; i++) {
    BBI_UNROLL for (size_t j = 0; j < NV; j++) acc[i][j] = _mm512_setzero_ps();
  }
  for (size_t p = 0; p < kc; p++) {
    __m512 b[BBI_X86_TILE_MAX_NV];
    BBI_UNROLL for (size_t j = 0; j < NV; j++) _mm_prefetch((const char *)(pb + BBI_AVX512_PREFETCH + 16 * j), _MM_HINT_T0);
    BBI_UNROLL for (size_t j = 0; j < NV; j++) b[j] = _mm512_loadu_ps(pb + 16 * j);
    BBI_UNROLL for (size_t i = 0; i < MR; i++) {
      const __m512 a = _mm512_set1_ps(pa[i]);
      BBI_UNROLL for (size_t j = 0; j < NV; j++) acc[i][j] = _mm512_fmadd_ps(a, b[j], acc[i][j]);
    }
    pa += MR;
    pb += 16 * NV;
  }

  const __m512 beta = _mm512_set1_ps(tile->beta);
  const __m512 lo = _mm512_set1_ps(tile->min), hi = _mm512_set1_ps(tile->max);
  const __m512 zero = _mm512_setzero_ps();
  if (mr != MR || nr != 16 * NV) {
    /* a partial tile: the same operations as a whole one on rows i < mr, and on the lanes
     * of columns j < nr only (masked loads and stores: no other float is read or written) */
    __mmask16 in[BBI_X86_TILE_MAX_NV];
    BBI_UNROLL for (size_t j = 0; j < NV; j++) {
      const size_t cols = nr > 16 * j ? (nr - 16 * j < 16 ? nr - 16 * j : 16) : 0;
      in[j] = (__mmask16)((1u << cols) - 1u);
    }
    BBI_UNROLL for (size_t i = 0; i < MR; i++) {
      if (i >= mr) break;
      float *ci = c + i * ldc;
      BBI_UNROLL for (size_t j = 0; j < NV; j++) {
        const __mmask16 m = in[j];
        __m512 v = acc[i][j];
        if (!tile->first) {
          v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, ci + 16 * j));
        } else {
          if (tile->beta != 0.0f) v = _mm512_add_ps(v, _mm512_mul_ps(beta, _mm512_maskz_loadu_ps(m, ci + 16 * j)));
          if (tile->bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, tile->bias + 16 * j));
          if (tile->bias_per_row) v = _mm512_add_ps(v, _mm512_set1_ps(tile->bias_per_row[i]));
        }
        if (tile->addend) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, tile->addend + i * ldc + 16 * j));
        if (tile->relu) v = _mm512_add_ps(_mm512_max_ps(zero, v), zero);
        if (tile->clamp) v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
        _mm512_mask_storeu_ps(ci + 16 * j, m, v);
      }
    }
    return;
  }
  BBI_UNROLL for (size_t i = 0; i < MR; i++) {
    float *ci = c + i * ldc;
    BBI_UNROLL for (size_t j = 0; j < NV; j++) {
      __m512 v = acc[i][j];
      if (!tile->first) {
        v = _mm512_add_ps(v, _mm512_loadu_ps(ci + 16 * j));
      } else {
        if (tile->beta != 0.0f) v = _mm512_add_ps(v, _mm512_mul_ps(beta, _mm512_loadu_ps(ci + 16 * j)));
        if (tile->bias) v = _mm512_add_ps(v, _mm512_loadu_ps(tile->bias + 16 * j));
        if (tile->bias_per_row) v = _mm512_add_ps(v, _mm512_set1_ps(tile->bias_per_row[i]));
      }
      if (tile->addend) v = _mm512_add_ps(v, _mm512_loadu_ps(tile->addend + i * ldc + 16 * j));
      if (tile->relu) v = _mm512_add_ps(_mm512_max_ps(zero, v), zero);
      if (tile->clamp) v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
      _mm512_storeu_ps(ci + 16 * j, v);
    }
  }
}
#endif
#endif
