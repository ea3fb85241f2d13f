/* The column matrix of a 2-D convolution and its adjoint, and its transpose (one row of
 * patch values per output position, for windows wider than the output). Each (channel, ky, kx) row is
 * oh runs of ow values (for a stride-1 convolution that keeps the width, one run of the
 * flat plane with its edge columns zeroed); per run, the columns whose window falls inside the image are one
 * block [x0, x1) found once per row, so the inner loops are plain copies (or, for the
 * adjoint, additions) four floats at a time with unit stride, at stride 2 (the column
 * matrix only) the even lanes of two vector loads, and strided elsewhere. Both
 * forms visit the elements in the same order, so the adjoint's sums agree bit for bit. */
#include <stdbool.h>

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

static void copy_run(float *dst, const float *src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    bbi_f32x4_store(dst + i, bbi_f32x4_load(src + i));
    bbi_f32x4_store(dst + i + 4, bbi_f32x4_load(src + i + 4));
  }
  for (; i + 4 <= n; i += 4) bbi_f32x4_store(dst + i, bbi_f32x4_load(src + i));
  for (; i < n; i++) dst[i] = src[i];
}

/* One row of the column matrix when both strides are 1 and ow == iw (a "same"
 * convolution): output rows oy0..oy1 read input rows oy0 + ky·dh - ph on, each shifted by
 * the same column offset, so the whole block is one run of the flat plane, shifted. The
 * run's ends that would fall outside the plane are 0, and so are the columns outside
 * [x0, x1) of each row, which read a neighbouring row's values in the flat run. */
static void same_row(const bbi_window2d *g, const float *plane, size_t ky, size_t kx, size_t x0, size_t x1,
                     float *row) {
  const size_t w = g->ow;
  const int64_t first_iy = (int64_t)(ky * g->dh) - (int64_t)g->ph; /* input row of oy = 0 */
  const size_t oy0 = first_iy < 0 ? (size_t)-first_iy : 0;
  const int64_t end = (int64_t)g->ih - first_iy; /* first oy past the input */
  const size_t oy1 = end <= 0 ? 0 : end < (int64_t)g->oh ? (size_t)end : g->oh;
  if (oy1 <= oy0 || x0 >= x1) {
    zero_run(row, g->oh * w);
    return;
  }
  zero_run(row, oy0 * w);
  zero_run(row + oy1 * w, (g->oh - oy1) * w);
  /* element i of the block reads flat index s0 + i of the plane */
  const int64_t s0 = (first_iy + (int64_t)oy0) * (int64_t)w + (int64_t)(kx * g->dw) - (int64_t)g->pw;
  const int64_t size = (int64_t)(g->ih * g->iw), n = (int64_t)((oy1 - oy0) * w);
  const int64_t lo = s0 < 0 ? -s0 : 0, hi = s0 + n > size ? size - s0 : n;
  float *dst = row + oy0 * w;
  zero_run(dst, (size_t)lo);
  copy_run(dst + lo, plane + s0 + lo, (size_t)(hi - lo));
  zero_run(dst + hi, (size_t)(n - hi));
  for (size_t oy = oy0; oy < oy1; oy++) {
    for (size_t ox = 0; ox < x0; ox++) row[oy * w + ox] = 0.0f;
    for (size_t ox = x1; ox < w; ox++) row[oy * w + ox] = 0.0f;
  }
}

void bbi_f32_im2col_2d(const bbi_window2d *g, size_t channels, const float *x, float *col, size_t ld) {
  const bool same = g->sh == 1 && g->sw == 1 && g->ow == g->iw;
  for (size_t c = 0; c < channels; c++) {
    const float *plane = x + c * g->ih * g->iw;
    for (size_t ky = 0; ky < g->kh; ky++)
      for (size_t kx = 0; kx < g->kw; kx++) {
        float *row = col + ((c * g->kh + ky) * g->kw + kx) * ld;
        size_t x0, x1;
        inside_columns(g, kx, &x0, &x1);
        if (same) {
          same_row(g, plane, ky, kx, x0, x1, row);
          continue;
        }
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
          if (g->sw == 1) {
            for (; i + 4 <= n; i += 4) bbi_f32x4_store(dst + i, bbi_f32x4_load(src + i));
          } else if (g->sw == 2) {
            /* the even lanes of two vectors; the second may reach one float past the run,
             * so only while the image row holds it */
            const size_t room = g->iw - first;
            for (; i + 4 <= n && 2 * i + 8 <= room; i += 4)
              bbi_f32x4_store(dst + i, BBI_F32X4_SHUFFLE(bbi_f32x4_load(src + 2 * i), bbi_f32x4_load(src + 2 * i + 4), 0, 2, 4, 6));
          }
          for (; i < n; i++) dst[i] = src[i * g->sw];
          zero_run(row + x1, g->ow - x1);
        }
      }
  }
}

/* One patch row: the kw taps of kernel row ky at output position (oy, ox) of every
 * channel, kernel column fastest. With unit dilation the taps inside the image are one
 * run of the input row. */
static void patch_taps(const bbi_window2d *g, const float *plane, size_t oy, size_t ox, size_t ky, float *dst) {
  const int64_t iy = (int64_t)(oy * g->sh + ky * g->dh) - (int64_t)g->ph;
  if (iy < 0 || iy >= (int64_t)g->ih) {
    zero_run(dst, g->kw);
    return;
  }
  const float *src = plane + (size_t)iy * g->iw;
  const int64_t ix0 = (int64_t)(ox * g->sw) - (int64_t)g->pw;
  if (g->dw == 1) {
    const int64_t lo = ix0 < 0 ? -ix0 : 0, end = (int64_t)g->iw - ix0;
    const int64_t hi = end < 0 ? 0 : end < (int64_t)g->kw ? end : (int64_t)g->kw;
    if (hi <= lo) {
      zero_run(dst, g->kw);
      return;
    }
    zero_run(dst, (size_t)lo);
    copy_run(dst + lo, src + ix0 + lo, (size_t)(hi - lo));
    zero_run(dst + hi, g->kw - (size_t)hi);
    return;
  }
  for (size_t kx = 0; kx < g->kw; kx++) {
    const int64_t ix = ix0 + (int64_t)(kx * g->dw);
    dst[kx] = ix < 0 || ix >= (int64_t)g->iw ? 0.0f : src[ix];
  }
}

void bbi_f32_im2col_patches_2d(const bbi_window2d *g, size_t channels, const float *x, float *col, size_t ld) {
  for (size_t oy = 0; oy < g->oh; oy++)
    for (size_t ox = 0; ox < g->ow; ox++) {
      float *row = col + (oy * g->ow + ox) * ld;
      for (size_t c = 0; c < channels; c++)
        for (size_t ky = 0; ky < g->kh; ky++)
          patch_taps(g, x + c * g->ih * g->iw, oy, ox, ky, row + (c * g->kh + ky) * g->kw);
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

void bbi_f32_im2col_patches_2d_scalar(const bbi_window2d *g, size_t channels, const float *x, float *col, size_t ld) {
  for (size_t oy = 0; oy < g->oh; oy++)
    for (size_t ox = 0; ox < g->ow; ox++)
      for (size_t c = 0; c < channels; c++)
        for (size_t ky = 0; ky < g->kh; ky++)
          for (size_t kx = 0; kx < g->kw; kx++) {
            const int64_t s = source(g, oy, ox, ky, kx);
            col[(oy * g->ow + ox) * ld + (c * g->kh + ky) * g->kw + kx] = s < 0 ? 0.0f : x[c * g->ih * g->iw + (size_t)s];
          }
}
