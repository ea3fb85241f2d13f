/* A 2-D convolution with few input channels and a wide window (an image model's stem: 7×7
 * stride 2 on 3 channels) computed from its input's rows, without a column matrix. The
 * column matrix of such a layer is kh/sh times larger than the input it is read from (the
 * stem's 147 rows of 1024 positions against 3·7 rows of 70×32 here), and writing it is a
 * pass of its own over the layer's largest data. Instead, per input channel c and window
 * column kx, the input rows are laid out once as the positions each output column reads
 * through that column of the window (`shifted rows`: the stride's gather and the padding
 * done once for all ky and output rows), and an output row's 8×32 tile reads its B
 * vectors straight from them:
 * row oy·sh + ky·dh of (c, kx) is the column matrix's row (c, ky, kx) for output row oy.
 * The tile runs the GEMM micro-kernel's operations in the GEMM's order (the dot product
 * from 0 over k in (c, ky, kx) order by fused multiply-adds, then the bias, the addend,
 * Relu and the clamp by bbi_f32_gemm_tile's rules), so where the GEMM runs k as one block
 * the output is the bits of im2col + bbi_f32_gemm. */
#include <string.h>

#include "tensor/kernels/kernels.h"

#if BBI_HAVE_X86_GEMM
#include <immintrin.h>

#include "tensor/kernels/vec.h"

#define CONV_ROWS_AVX512 __attribute__((target("avx512f")))
CONV_ROWS_AVX512 static void shift_row_avx512(const float *row, size_t iw, size_t sw, int64_t off, size_t ow,
                                              size_t width, float *out);
#endif

/* Output positions of one tile: two 16-lane vectors of one output row. */
#define TILE_COLUMNS 32
/* Output channels of one tile: the 8-row panels of the GEMM's packed A. */
#define TILE_ROWS 8
/* Output rows whose tiles run together for every output channel. */
#define ROW_BLOCK 8

/* The rows of the window that the output rows reach, padding included. */
static size_t shifted_height(const bbi_window2d *g) {
  return g->oh ? (g->oh - 1) * g->sh + (g->kh - 1) * g->dh + 1 : 0;
}

/* Floats per shifted row: ow rounded up to whole tiles. */
static size_t shifted_width(const bbi_window2d *g) {
  return (g->ow + TILE_COLUMNS - 1) / TILE_COLUMNS * TILE_COLUMNS;
}

size_t bbi_f32_conv_rows_shifted_floats(const bbi_window2d *g, size_t channels) {
  return channels * g->kw * shifted_height(g) * shifted_width(g);
}

int bbi_f32_conv_rows_available(void) {
#if BBI_HAVE_X86_GEMM
  /* the compiler's runtime reads the CPU's features once, before main: settled data */
  return __builtin_cpu_supports("avx512f");
#else
  return 0;
#endif
}

/* out[ox] = row[ox·sw + off] where that is inside the row (iw floats) and ox < ow, else 0,
 * for ox < width (a multiple of 16); the scalar rule the vector form keeps. */
static void shift_row_scalar(const float *row, size_t iw, size_t sw, int64_t off, size_t ow, size_t width,
                             float *out) {
  for (size_t ox = 0; ox < width; ox++) {
    const int64_t ix = (int64_t)(ox * sw) + off;
    out[ox] = ox < ow && ix >= 0 && ix < (int64_t)iw ? row[ix] : 0.0f;
  }
}

void bbi_f32_conv_rows_shift(const bbi_window2d *g, size_t c0, size_t c1, const float *x, size_t plane,
                             float *shifted) {
  const size_t hs = shifted_height(g), ws = shifted_width(g);
#if BBI_HAVE_X86_GEMM
  /* (the vector form's lanes hold column offsets in 32 bits) */
  const int vector = bbi_f32_conv_rows_available() && g->sw <= 2 && g->iw + g->pw + 2 * ws < ((size_t)1 << 30);
#endif
  for (size_t c = c0; c < c1; c++) {
    const float *xc = x + c * plane;
    for (size_t kx = 0; kx < g->kw; kx++) {
      float *out = shifted + (c * g->kw + kx) * hs * ws;
      const int64_t off = (int64_t)(kx * g->dw) - (int64_t)g->pw;
      for (size_t r = 0; r < hs; r++, out += ws) {
        const int64_t iy = (int64_t)r - (int64_t)g->ph;
        if (iy < 0 || iy >= (int64_t)g->ih) {
          memset(out, 0, ws * sizeof(float));
          continue;
        }
        const float *row = xc + (size_t)iy * g->iw;
#if BBI_HAVE_X86_GEMM
        if (vector) {
          shift_row_avx512(row, g->iw, g->sw, off, g->ow, ws, out);
          continue;
        }
#endif
        shift_row_scalar(row, g->iw, g->sw, off, g->ow, ws, out);
      }
    }
  }
}

#if BBI_HAVE_X86_GEMM
/* shift_row_scalar for sw 1 or 2, sixteen outputs a step: the input floats they span
 * (16·sw from ox·sw + off) by masked loads that read only inside the row, the stride-2
 * outputs as the even lanes of two such loads, then the lanes past ow zeroed. */
CONV_ROWS_AVX512 static void shift_row_avx512(const float *row, size_t iw, size_t sw, int64_t off, size_t ow,
                                              size_t width, float *out) {
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i zero = _mm512_setzero_si512(), end = _mm512_set1_epi32((int)iw);
  for (size_t ox = 0; ox < width; ox += 16) {
    const int64_t at = (int64_t)(ox * sw) + off;
    const __m512i i0 = _mm512_add_epi32(_mm512_set1_epi32((int)at), iota);
    const __mmask16 m0 = _mm512_cmpge_epi32_mask(i0, zero) & _mm512_cmplt_epi32_mask(i0, end);
    /* a masked load touches only its lanes, so the unread ones may lie outside the row:
     * the address is kept as an integer */
    const uintptr_t first = (uintptr_t)row + (uintptr_t)(at * (int64_t)sizeof(float));
    __m512 v = _mm512_maskz_loadu_ps(m0, (const void *)first);
    if (sw == 2) {
      const __m512i i1 = _mm512_add_epi32(i0, _mm512_set1_epi32(16));
      const __mmask16 m1 = _mm512_cmpge_epi32_mask(i1, zero) & _mm512_cmplt_epi32_mask(i1, end);
      v = _mm512_permutex2var_ps(v, even, _mm512_maskz_loadu_ps(m1, (const void *)(first + 16 * sizeof(float))));
    }
    const __mmask16 in_ow = ox >= ow ? 0 : ow - ox >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (ow - ox)) - 1);
    _mm512_storeu_ps(out + ox, _mm512_maskz_mov_ps(in_ow, v));
  }
}

/* One tile of NV vectors: output channels [0, mr) of the panel pa (TILE_ROWS floats a k
 * step, k in (c, ky, kx) order) at output row oy, columns [ox0, ox0 + nr), stored at c (row
 * stride ldc: the output plane) with `tile`'s rules (tile->first, beta 0): the product,
 * then the bias, the addend, Relu (max(0, v) + 0) and the clamp, as the GEMM's store and
 * bbi_f32_gemm_tile_apply apply them; lanes past nr and rows past mr are not stored. */
BBI_INLINE CONV_ROWS_AVX512 void tile_8xnv(size_t NV, const bbi_window2d *g, size_t channels, const float *shifted,
                                           const float *pa, size_t oy, size_t ox0, float *c, size_t ldc, size_t mr,
                                           size_t nr, const bbi_f32_gemm_tile *tile) {
  const size_t hs = shifted_height(g), ws = shifted_width(g), kx_stride = hs * ws;
  __m512 acc[TILE_ROWS][2];
  BBI_UNROLL for (size_t i = 0; i < TILE_ROWS; i++) {
    BBI_UNROLL for (size_t j = 0; j < NV; j++) acc[i][j] = _mm512_setzero_ps();
  }
  for (size_t ch = 0; ch < channels; ch++) {
    const float *plane = shifted + ch * g->kw * kx_stride + oy * g->sh * ws + ox0;
    for (size_t ky = 0; ky < g->kh; ky++) {
      const float *pb = plane + ky * g->dh * ws;
      for (size_t kx = 0; kx < g->kw; kx++, pb += kx_stride, pa += TILE_ROWS) {
        __m512 b[2];
        BBI_UNROLL for (size_t j = 0; j < NV; j++) b[j] = _mm512_loadu_ps(pb + 16 * j);
        BBI_UNROLL for (size_t i = 0; i < TILE_ROWS; i++) {
          const __m512 a = _mm512_set1_ps(pa[i]);
          BBI_UNROLL for (size_t j = 0; j < NV; j++) acc[i][j] = _mm512_fmadd_ps(a, b[j], acc[i][j]);
        }
      }
    }
  }
  const __m512 lo = _mm512_set1_ps(tile->min), hi = _mm512_set1_ps(tile->max), zero = _mm512_setzero_ps();
  __mmask16 lanes[2];
  BBI_UNROLL for (size_t j = 0; j < NV; j++) {
    const size_t left = nr > 16 * j ? nr - 16 * j : 0;
    lanes[j] = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
  }
  BBI_UNROLL for (size_t i = 0; i < TILE_ROWS; i++) {
    if (i == mr) break;
    BBI_UNROLL for (size_t j = 0; j < NV; j++) {
      __m512 v = acc[i][j];
      if (tile->bias_per_row) v = _mm512_add_ps(v, _mm512_set1_ps(tile->bias_per_row[i]));
      if (tile->addend) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(lanes[j], tile->addend + i * ldc + 16 * j));
      if (tile->relu) v = _mm512_add_ps(_mm512_max_ps(zero, v), zero);
      if (tile->clamp) v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
      _mm512_mask_storeu_ps(c + i * ldc + 16 * j, lanes[j], v);
    }
  }
}

CONV_ROWS_AVX512 static void tile_8x32(const bbi_window2d *g, size_t channels, const float *shifted,
                                       const float *pa, size_t oy, size_t ox0, float *c, size_t ldc, size_t mr,
                                       size_t nr, const bbi_f32_gemm_tile *tile) {
  tile_8xnv(2, g, channels, shifted, pa, oy, ox0, c, ldc, mr, nr, tile);
}

CONV_ROWS_AVX512 static void tile_8x16(const bbi_window2d *g, size_t channels, const float *shifted,
                                       const float *pa, size_t oy, size_t ox0, float *c, size_t ldc, size_t mr,
                                       size_t nr, const bbi_f32_gemm_tile *tile) {
  tile_8xnv(1, g, channels, shifted, pa, oy, ox0, c, ldc, mr, nr, tile);
}
#endif

int bbi_f32_conv_rows(const bbi_f32_conv_rows_args *a, size_t oy0, size_t oy1) {
#if BBI_HAVE_X86_GEMM
  const bbi_window2d *g = a->win;
  if (!bbi_f32_conv_rows_available()) return 0;
  const size_t npos = g->oh * g->ow;
  /* blocks of output rows, every output channel's tiles over one block before the next:
   * a block's shifted rows stay in L2 (a 224×224 stem's whole set, 2.5 MB, would not) */
  for (size_t b0 = oy0; b0 < oy1; b0 += ROW_BLOCK) {
    const size_t b1 = b0 + ROW_BLOCK < oy1 ? b0 + ROW_BLOCK : oy1;
    for (size_t m0 = 0; m0 < a->m; m0 += TILE_ROWS) {
      const size_t mr = a->m - m0 < TILE_ROWS ? a->m - m0 : TILE_ROWS;
      const float *pa = a->panels + (m0 / TILE_ROWS) * a->panel_stride;
      bbi_f32_gemm_tile tile = {1, a->clamp, 0.0f, NULL, a->min, a->max, a->bias ? a->bias + m0 : NULL, NULL,
                                a->relu};
      for (size_t oy = b0; oy < b1; oy++) {
        for (size_t ox0 = 0; ox0 < g->ow; ox0 += TILE_COLUMNS) {
          const size_t at = m0 * npos + oy * g->ow + ox0;
          const size_t nr = g->ow - ox0 < TILE_COLUMNS ? g->ow - ox0 : TILE_COLUMNS;
          tile.addend = a->addend ? a->addend + at : NULL;
          /* (a row's last 16 columns or fewer: one vector wide) */
          (nr > 16 ? tile_8x32 : tile_8x16)(g, a->channels, a->shifted, pa, oy, ox0, a->y + at, npos, mr, nr, &tile);
        }
      }
    }
  }
  return 1;
#else
  (void)a, (void)oy0, (void)oy1;
  return 0;
#endif
}
