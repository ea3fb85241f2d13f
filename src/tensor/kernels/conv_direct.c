/* A 2-D convolution with a small dot product per output (few input channels times a small
 * window: a first layer on one grey channel) and unit column stride, computed with the
 * 4-lane GEMM's micro-kernel operations straight from a zero-padded copy of its input rows,
 * without a column matrix. Through im2col + the GEMM such a layer copies each input value
 * kh·kw times into the column matrix and again into the GEMM's panels, and runs the
 * micro-kernel over a k of 9: the copies cost as much as the product.
 *
 * A tile is 4 output channels by 8 output columns of one output row, 8 accumulators. For
 * tap t = (c, ky, kx) its B vectors are the padded copy of channel c at row oy·sh + ky·dh,
 * columns ox + kx·dw .. + 7 (the column matrix's row t for those positions), its A values
 * W[i][t]. The tile runs bbi_f32x4_gemm_tile's operations in its order: the accumulators
 * from 0, over t = 0..k-1 by BBI_F32X4_MADD, then the bias per row, the addend, Relu's
 * (x < 0 ? 0 : x) + 0 and the clamp by bbi_f32_gemm_tile's rules. Where the 4-lane GEMM
 * runs k as one block (k <= its kc) and has more than one row, every output is therefore
 * the bits of im2col + bbi_f32_gemm with that configuration, whatever cut of output rows
 * computes it. */
#include <string.h>

#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"

#define TILE_ROWS 4 /* output channels of a tile */
#define TILE_COLUMNS 8 /* output columns of a tile: two vectors */

size_t bbi_f32_conv_direct_padded_width(const bbi_window2d *g) {
  const size_t reach = (g->ow + TILE_COLUMNS - 1) / TILE_COLUMNS * TILE_COLUMNS + (g->kw - 1) * g->dw;
  const size_t whole = g->pw + g->iw + g->pw_end;
  return reach > whole ? reach : whole;
}

/* Padded input rows output rows [oy0, oy1) read. */
static size_t band_height(const bbi_window2d *g, size_t oy0, size_t oy1) {
  return (oy1 - oy0 - 1) * g->sh + (g->kh - 1) * g->dh + 1;
}

size_t bbi_f32_conv_direct_scratch_floats(const bbi_window2d *g, size_t channels, size_t m, size_t rows) {
  const size_t k = channels * g->kh * g->kw, panels = (m + TILE_ROWS - 1) / TILE_ROWS;
  return panels * TILE_ROWS * k + channels * band_height(g, 0, rows) * bbi_f32_conv_direct_padded_width(g) +
         TILE_COLUMNS;
}

int bbi_f32_conv_direct_fits(const bbi_window2d *g, size_t channels, size_t m) {
  const size_t k = channels * g->kh * g->kw;
  return g->sw == 1 && m >= 2 && k >= 1 && k <= BBI_F32_CONV_DIRECT_MAX_K && g->oh && g->ow;
}

/* One tile: rows (output channels) of `wp` (k taps of TILE_ROWS floats), columns from
 * `base` at the tap offsets `off`, finished by the tile's epilogue and stored: `rows`
 * output channels (<= TILE_ROWS) at y (row stride ld), `cols` columns (<= TILE_COLUMNS). */
BBI_INLINE void tile(size_t k, const float *wp, const float *base, const size_t *off, float *y, size_t ld,
                     size_t rows, size_t cols, const float *bias, const float *addend, int relu, int clamp,
                     float lo, float hi) {
  bbi_f32x4 acc[TILE_ROWS][2];
  BBI_UNROLL for (size_t i = 0; i < TILE_ROWS; i++) acc[i][0] = acc[i][1] = bbi_f32x4_splat(0.0f);
  for (size_t t = 0; t < k; t++) {
    const float *b = base + off[t];
    const bbi_f32x4 b0 = bbi_f32x4_load(b), b1 = bbi_f32x4_load(b + 4);
    BBI_UNROLL for (size_t i = 0; i < TILE_ROWS; i++) {
      const bbi_f32x4 a = bbi_f32x4_splat(wp[i]);
      acc[i][0] = BBI_F32X4_MADD(a, b0, acc[i][0]);
      acc[i][1] = BBI_F32X4_MADD(a, b1, acc[i][1]);
    }
    wp += TILE_ROWS;
  }
  const bbi_f32x4 zero = bbi_f32x4_splat(0.0f), vlo = bbi_f32x4_splat(lo), vhi = bbi_f32x4_splat(hi);
  BBI_UNROLL for (size_t i = 0; i < TILE_ROWS; i++) {
    BBI_UNROLL for (size_t j = 0; j < 2; j++) {
      const size_t lanes = cols > 4 * j ? (cols - 4 * j < 4 ? cols - 4 * j : 4) : 0;
      if (i < rows && lanes) {
        float *yo = y + i * ld + 4 * j;
        bbi_f32x4 v = acc[i][j];
        if (bias) v += bbi_f32x4_splat(bias[i]);
        if (addend) {
          const float *ad = addend + i * ld + 4 * j;
          v += lanes == 4 ? bbi_f32x4_load(ad) : bbi_f32x4_load_tail(ad, lanes);
        }
        /* max(v, 0) is v < 0 ? 0 : v (pmax), then + 0: Relu's rule */
        if (relu) v = bbi_f32x4_max(v, zero) + zero;
        if (clamp) v = bbi_f32x4_min(bbi_f32x4_max(v, vlo), vhi);
        if (lanes == 4) bbi_f32x4_store(yo, v);
        else bbi_f32x4_store_tail(yo, v, lanes);
      }
    }
  }
}

void bbi_f32_conv_direct(const bbi_f32_conv_direct_args *a, size_t oy0, size_t oy1, float *scratch) {
  const bbi_window2d *g = a->win;
  if (oy1 > g->oh) oy1 = g->oh;
  if (oy0 >= oy1) return;
  const size_t taps = g->kh * g->kw, k = a->channels * taps, m = a->m, ow = g->ow, npos = g->oh * ow;
  const size_t wpad = bbi_f32_conv_direct_padded_width(g), hb = band_height(g, oy0, oy1);
  const size_t panels = (m + TILE_ROWS - 1) / TILE_ROWS;
  /* W as panels of TILE_ROWS output channels, tap-major (zeros past row m) */
  float *wp = scratch, *pad = scratch + panels * TILE_ROWS * k;
  for (size_t p = 0; p < panels; p++)
    for (size_t t = 0; t < k; t++)
      for (size_t i = 0; i < TILE_ROWS; i++) {
        const size_t r = p * TILE_ROWS + i;
        wp[(p * k + t) * TILE_ROWS + i] = r < m ? a->w[r * k + t] : 0.0f;
      }
  /* padded row q of the band is the input's row oy0·sh - ph + q, columns from -pw */
  for (size_t c = 0; c < a->channels; c++)
    for (size_t q = 0; q < hb; q++) {
      const int64_t iy = (int64_t)(oy0 * g->sh + q) - (int64_t)g->ph;
      const int inside = iy >= 0 && iy < (int64_t)g->ih;
      bbi_f32_padded_row(pad + (c * hb + q) * wpad, wpad, g->pw,
                         inside ? a->x + c * a->plane + (size_t)iy * g->iw : NULL, inside ? g->iw : 0);
    }
  memset(pad + a->channels * hb * wpad, 0, TILE_COLUMNS * sizeof(float));
  size_t off[BBI_F32_CONV_DIRECT_MAX_K];
  for (size_t c = 0, t = 0; c < a->channels; c++)
    for (size_t ky = 0; ky < g->kh; ky++)
      for (size_t kx = 0; kx < g->kw; kx++, t++) off[t] = (c * hb + ky * g->dh) * wpad + kx * g->dw;
  for (size_t oy = oy0; oy < oy1; oy++) {
    const float *row = pad + (oy - oy0) * g->sh * wpad;
    for (size_t p = 0; p < panels; p++) {
      const size_t m0 = p * TILE_ROWS, rows = m - m0 < TILE_ROWS ? m - m0 : TILE_ROWS;
      const float *bias = a->bias ? a->bias + m0 : NULL;
      float *y = a->y + m0 * npos + oy * ow;
      const float *addend = a->addend ? a->addend + m0 * npos + oy * ow : NULL;
      const float *w = wp + p * k * TILE_ROWS;
      size_t ox = 0;
      if (rows == TILE_ROWS) /* (constant sizes: the common tile's epilogue unrolled) */
        for (; ox + TILE_COLUMNS <= ow; ox += TILE_COLUMNS)
          tile(k, w, row + ox, off, y + ox, npos, TILE_ROWS, TILE_COLUMNS, bias, addend ? addend + ox : NULL,
               a->relu, a->clamp, a->min, a->max);
      for (; ox + TILE_COLUMNS <= ow; ox += TILE_COLUMNS)
        tile(k, w, row + ox, off, y + ox, npos, rows, TILE_COLUMNS, bias, addend ? addend + ox : NULL, a->relu,
             a->clamp, a->min, a->max);
      if (ox < ow)
        tile(k, w, row + ox, off, y + ox, npos, rows, ow - ox, bias, addend ? addend + ox : NULL, a->relu, a->clamp,
             a->min, a->max);
    }
  }
}
