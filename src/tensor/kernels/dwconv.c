/* Depthwise 2-D convolution on planes (CHW): every channel convolved with its own kh×kw
 * filter, one output channel per input channel.
 *
 * Per channel the plane is first copied into a zero-padded scratch plane whose columns are
 * split by phase of the stride: padded column j lands in phase j % sw at position j / sw,
 * so the value output column ox reads at kernel column kx sits at position ox + (kx·dw)/sw
 * of phase (kx·dw) % sw — consecutive output columns read consecutive floats whatever the
 * stride, and the inner loop is four (or eight) outputs at a time with unit-stride loads
 * and no test for the border. Each output is bias + the window's products in row-major
 * kernel order, the padding read as 0 and multiplied like any value (as the column matrix
 * of im2col + GEMM does); the scalar twin sums in the same order, so the two agree bit for
 * bit. */
#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"

static size_t round_up4(size_t n) { return (n + 3) & ~(size_t)3; }

/* The scratch plane's shape: rows, phases (= sw) and floats per phase row. */
typedef struct padded_plane {
  size_t rows, phases, width;
} padded_plane;

static padded_plane padded_shape(const bbi_window2d *g) {
  padded_plane p;
  p.rows = (g->oh - 1) * g->sh + (g->kh - 1) * g->dh + 1;
  p.phases = g->sw;
  /* the vector loop writes round_up4(ow) columns; the last reads this far into a phase */
  p.width = round_up4(g->ow) + ((g->kw - 1) * g->dw) / g->sw + 1;
  return p;
}

size_t bbi_f32_dwconv2d_chw_scratch_size(const bbi_window2d *g) {
  if (!g->oh || !g->ow) return 0;
  const padded_plane p = padded_shape(g);
  return p.rows * p.phases * p.width * sizeof(float);
}

/* Copies plane x [ih, iw] into the phase-split padded layout. */
static void pad_plane(const bbi_window2d *g, const padded_plane *p, const float *x, float *out) {
  for (size_t r = 0; r < p->rows; r++) {
    const int64_t iy = (int64_t)r - (int64_t)g->ph;
    const int inside_row = iy >= 0 && iy < (int64_t)g->ih;
    for (size_t phase = 0; phase < p->phases; phase++) {
      float *dst = out + (r * p->phases + phase) * p->width;
      for (size_t pos = 0; pos < p->width; pos++) {
        const int64_t ix = (int64_t)(pos * p->phases + phase) - (int64_t)g->pw;
        dst[pos] = inside_row && ix >= 0 && ix < (int64_t)g->iw ? x[(size_t)iy * g->iw + (size_t)ix] : 0.0f;
      }
    }
  }
}

/* One output row: y[ox] = bias + sum over k < KK of w[k] · src[k][ox]. KK is a constant
 * for the common 3×3 and 5×5 filters, so the compiler unrolls the taps. */
BBI_INLINE void dw_row(size_t KK, size_t ow, const float *const *src, const bbi_f32x4 *wv, float bias,
                       float *y) {
  const bbi_f32x4 b = bbi_f32x4_splat(bias);
  size_t ox = 0;
  for (; ox + 8 <= ow; ox += 8) {
    bbi_f32x4 a0 = b, a1 = b;
    BBI_UNROLL for (size_t k = 0; k < KK; k++) {
      a0 = BBI_F32X4_MADD(wv[k], bbi_f32x4_load(src[k] + ox), a0);
      a1 = BBI_F32X4_MADD(wv[k], bbi_f32x4_load(src[k] + ox + 4), a1);
    }
    bbi_f32x4_store(y + ox, a0);
    bbi_f32x4_store(y + ox + 4, a1);
  }
  for (; ox < ow; ox += 4) {
    bbi_f32x4 a = b;
    BBI_UNROLL for (size_t k = 0; k < KK; k++) a = BBI_F32X4_MADD(wv[k], bbi_f32x4_load(src[k] + ox), a);
    if (ox + 4 <= ow) bbi_f32x4_store(y + ox, a);
    else bbi_f32x4_store_tail(y + ox, a, ow - ox);
  }
}

#define DW_MAX_TAPS 64 /* filters up to 8×8 take the vector path */

void bbi_f32_dwconv2d_chw(const bbi_window2d *g, size_t channels, const float *x, const float *w,
                          const float *bias, float *y, float *scratch) {
  const size_t taps = g->kh * g->kw;
  if (taps > DW_MAX_TAPS) {
    bbi_f32_dwconv2d_chw_scalar(g, channels, x, w, bias, y);
    return;
  }
  if (!g->oh || !g->ow) return;
  const padded_plane p = padded_shape(g);
  for (size_t c = 0; c < channels; c++) {
    pad_plane(g, &p, x + c * g->ih * g->iw, scratch);
    bbi_f32x4 wv[DW_MAX_TAPS];
    size_t offset[DW_MAX_TAPS]; /* where tap k's row 0 starts in the scratch plane */
    for (size_t ky = 0; ky < g->kh; ky++)
      for (size_t kx = 0; kx < g->kw; kx++) {
        const size_t k = ky * g->kw + kx, col = kx * g->dw;
        wv[k] = bbi_f32x4_splat(w[c * taps + k]);
        offset[k] = (ky * g->dh * p.phases + col % p.phases) * p.width + col / p.phases;
      }
    const float b = bias ? bias[c] : 0.0f;
    float *yc = y + c * g->oh * g->ow;
    for (size_t oy = 0; oy < g->oh; oy++) {
      const float *row = scratch + oy * g->sh * p.phases * p.width;
      const float *src[DW_MAX_TAPS];
      for (size_t k = 0; k < taps; k++) src[k] = row + offset[k];
      float *yr = yc + oy * g->ow;
      if (taps == 9) dw_row(9, g->ow, src, wv, b, yr);
      else if (taps == 25) dw_row(25, g->ow, src, wv, b, yr);
      else dw_row(taps, g->ow, src, wv, b, yr);
    }
  }
}

void bbi_f32_dwconv2d_chw_scalar(const bbi_window2d *g, size_t channels, const float *x, const float *w,
                                 const float *bias, float *y) {
  for (size_t c = 0; c < channels; c++) {
    const float *plane = x + c * g->ih * g->iw, *wc = w + c * g->kh * g->kw;
    for (size_t oy = 0; oy < g->oh; oy++)
      for (size_t ox = 0; ox < g->ow; ox++) {
        float acc = bias ? bias[c] : 0.0f;
        for (size_t ky = 0; ky < g->kh; ky++)
          for (size_t kx = 0; kx < g->kw; kx++) {
            const int64_t iy = (int64_t)(oy * g->sh + ky * g->dh) - (int64_t)g->ph;
            const int64_t ix = (int64_t)(ox * g->sw + kx * g->dw) - (int64_t)g->pw;
            const int inside = iy >= 0 && iy < (int64_t)g->ih && ix >= 0 && ix < (int64_t)g->iw;
            acc += wc[ky * g->kw + kx] * (inside ? plane[(size_t)iy * g->iw + (size_t)ix] : 0.0f);
          }
        y[(c * g->oh + oy) * g->ow + ox] = acc;
      }
  }
}
