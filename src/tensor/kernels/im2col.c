/* The column matrix of a 2-D convolution and its adjoint. Each (channel, ky, kx) row is
 * oh runs of ow values; per run, the columns whose window falls inside the image are one
 * block [x0, x1) found once per row, so the inner loops are plain copies (or, for the
 * adjoint, additions) four floats at a time with unit stride, and strided elsewhere. Both
 * forms visit the elements in the same order, so the adjoint's sums agree bit for bit. */
#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"

/* The window columns [*x0, *x1) of kernel column kx that read inside the image. */
static void inside_columns(const bbi_window2d *g, size_t kx, size_t *x0, size_t *x1) {
  const int64_t off = (int64_t)(kx * g->dw) - (int64_t)g->pw;
  size_t lo = 0, hi = g->ow;
  while (lo < g->ow && (int64_t)(lo * g->sw) + off < 0) lo++;
  while (hi > lo && (int64_t)((hi - 1) * g->sw) + off >= (int64_t)g->iw) hi--;
  *x0 = lo, *x1 = hi;
}

static void zero_run(float *dst, size_t n) {
  size_t i = 0;
  for (; i + 4 <= n; i += 4) bbi_f32x4_store(dst + i, bbi_f32x4_splat(0.0f));
  for (; i < n; i++) dst[i] = 0.0f;
}

void bbi_f32_im2col_2d(const bbi_window2d *g, size_t channels, const float *x, float *col, size_t ld) {
  for (size_t c = 0; c < channels; c++) {
    const float *plane = x + c * g->ih * g->iw;
    for (size_t ky = 0; ky < g->kh; ky++)
      for (size_t kx = 0; kx < g->kw; kx++) {
        float *row = col + ((c * g->kh + ky) * g->kw + kx) * ld;
        size_t x0, x1;
        inside_columns(g, kx, &x0, &x1);
        const size_t first = x0 * g->sw + kx * g->dw - g->pw; /* the image column of x0 (when x0 < x1) */
        for (size_t oy = 0; oy < g->oh; oy++, row += g->ow) {
          const int64_t iy = (int64_t)(oy * g->sh + ky * g->dh) - (int64_t)g->ph;
          if (iy < 0 || iy >= (int64_t)g->ih || x0 >= x1) {
            zero_run(row, g->ow);
            continue;
          }
          const float *src = plane + (size_t)iy * g->iw + first;
          zero_run(row, x0);
          size_t i = 0, n = x1 - x0;
          float *dst = row + x0;
          if (g->sw == 1)
            for (; i + 4 <= n; i += 4) bbi_f32x4_store(dst + i, bbi_f32x4_load(src + i));
          for (; i < n; i++) dst[i] = src[i * g->sw];
          zero_run(row + x1, g->ow - x1);
        }
      }
  }
}

void bbi_f32_col2im_2d(const bbi_window2d *g, size_t channels, const float *col, size_t ld, float *x) {
  for (size_t c = 0; c < channels; c++) {
    float *plane = x + c * g->ih * g->iw;
    for (size_t ky = 0; ky < g->kh; ky++)
      for (size_t kx = 0; kx < g->kw; kx++) {
        const float *row = col + ((c * g->kh + ky) * g->kw + kx) * ld;
        size_t x0, x1;
        inside_columns(g, kx, &x0, &x1);
        if (x0 >= x1) continue;
        const size_t first = x0 * g->sw + kx * g->dw - g->pw;
        for (size_t oy = 0; oy < g->oh; oy++, row += g->ow) {
          const int64_t iy = (int64_t)(oy * g->sh + ky * g->dh) - (int64_t)g->ph;
          if (iy < 0 || iy >= (int64_t)g->ih) continue;
          float *dst = plane + (size_t)iy * g->iw + first;
          const float *src = row + x0;
          size_t i = 0, n = x1 - x0;
          if (g->sw == 1)
            for (; i + 4 <= n; i += 4) bbi_f32x4_store(dst + i, bbi_f32x4_load(dst + i) + bbi_f32x4_load(src + i));
          for (; i < n; i++) dst[i * g->sw] += src[i];
        }
      }
  }
}

/* ---- the reference: one element at a time -------------------------------------------------- */

/* The plane offset window position (oy, ox) reads at kernel position (ky, kx), or -1 in the padding. */
static int64_t source(const bbi_window2d *g, size_t oy, size_t ox, size_t ky, size_t kx) {
  const int64_t iy = (int64_t)(oy * g->sh + ky * g->dh) - (int64_t)g->ph;
  const int64_t ix = (int64_t)(ox * g->sw + kx * g->dw) - (int64_t)g->pw;
  if (iy < 0 || iy >= (int64_t)g->ih || ix < 0 || ix >= (int64_t)g->iw) return -1;
  return iy * (int64_t)g->iw + ix;
}

void bbi_f32_im2col_2d_scalar(const bbi_window2d *g, size_t channels, const float *x, float *col, size_t ld) {
  for (size_t c = 0; c < channels; c++)
    for (size_t ky = 0; ky < g->kh; ky++)
      for (size_t kx = 0; kx < g->kw; kx++) {
        float *row = col + ((c * g->kh + ky) * g->kw + kx) * ld;
        for (size_t oy = 0; oy < g->oh; oy++)
          for (size_t ox = 0; ox < g->ow; ox++) {
            const int64_t s = source(g, oy, ox, ky, kx);
            row[oy * g->ow + ox] = s < 0 ? 0.0f : x[c * g->ih * g->iw + (size_t)s];
          }
      }
}

void bbi_f32_col2im_2d_scalar(const bbi_window2d *g, size_t channels, const float *col, size_t ld, float *x) {
  for (size_t c = 0; c < channels; c++)
    for (size_t ky = 0; ky < g->kh; ky++)
      for (size_t kx = 0; kx < g->kw; kx++) {
        const float *row = col + ((c * g->kh + ky) * g->kw + kx) * ld;
        for (size_t oy = 0; oy < g->oh; oy++)
          for (size_t ox = 0; ox < g->ow; ox++) {
            const int64_t s = source(g, oy, ox, ky, kx);
            if (s >= 0) x[c * g->ih * g->iw + (size_t)s] += row[oy * g->ow + ox];
          }
      }
}
