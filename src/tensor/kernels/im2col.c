/* The column matrix of a 2-D convolution and its adjoint, and its transpose (one row of
 * patch values per output position, for windows wider than the output). Each (channel, ky, kx) row is
 * oh runs of ow values (for a stride-1 convolution that keeps the width, one run of the
 * flat plane with its edge columns zeroed); per run, the columns whose window falls inside the image are one
 * block [x0, x1) found once per row, so the inner loops are plain copies (or, for the
 * adjoint, additions) four floats at a time with unit stride, at stride 2 (the column
 * matrix only) the even lanes of two vector loads, and strided elsewhere. Both
 * forms visit the elements in the same order, so the adjoint's sums agree bit for bit.
 * Undilated windows on small maps (and every undilated patch-row and col2im call whose
 * copy fits) go through a copy of each channel's plane with its padding written out as
 * zeros instead, where every run is whole: the same floats, and for col2im the same sums
 * in the same order. */
#include <stdbool.h>
#include <string.h>

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

/* The tails of zero_run and copy_run: a run of four or more ends with a vector over its
 * last four floats (written twice, the same values), a shorter one with up to three stores
 * that are not a loop (a loop here becomes a call of memset or memcpy, whose call costs
 * more than the few floats on short padded rows). */
static void zero_run(float *dst, size_t n) {
  size_t i = 0;
  const bbi_f32x4 zero = bbi_f32x4_splat(0.0f);
  for (; i + 4 <= n; i += 4) bbi_f32x4_store(dst + i, zero);
  if (i == n) return;
  if (n >= 4) {
    bbi_f32x4_store(dst + n - 4, zero);
    return;
  }
  dst[0] = 0.0f;
  if (n > 1) dst[1] = 0.0f;
  if (n > 2) dst[2] = 0.0f;
}

static void copy_run(float *dst, const float *src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    bbi_f32x4_store(dst + i, bbi_f32x4_load(src + i));
    bbi_f32x4_store(dst + i + 4, bbi_f32x4_load(src + i + 4));
  }
  for (; i + 4 <= n; i += 4) bbi_f32x4_store(dst + i, bbi_f32x4_load(src + i));
  if (i == n) return;
  if (n >= 4) {
    bbi_f32x4_store(dst + n - 4, bbi_f32x4_load(src + n - 4));
    return;
  }
  dst[0] = src[0];
  if (n > 1) dst[1] = src[1];
  if (n > 2) dst[2] = src[2];
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

void bbi_f32_padded_row(float *dst, size_t len, size_t left, const float *src, size_t inside) {
  if (!src) inside = 0;
  zero_run(dst, left);
  copy_run(dst + left, src, inside);
  zero_run(dst + left + inside, len - left - inside);
}

/* Floats of the zero-bordered copy of one channel's plane (on the stack). */
#define PATCH_BORDERED_MAX 2048

/* Columns of output at most for which im2col reads a zero-bordered copy: on small maps
 * finding each run's edges costs more than the copy. */
#define IM2COL_BORDERED_MAX_OW 16

/* Whether an undilated window's zero-bordered plane fits: the rows and columns every
 * window reaches, ((oh-1)·sh + kh) × ((ow-1)·sw + kw). */
static bool bordered_fits(const bbi_window2d *g, size_t *rows, size_t *width) {
  if (g->dh != 1 || g->dw != 1 || g->oh == 0 || g->ow == 0) return false;
  *rows = (g->oh - 1) * g->sh + g->kh, *width = (g->ow - 1) * g->sw + g->kw;
  return *width <= PATCH_BORDERED_MAX && *rows <= PATCH_BORDERED_MAX / *width;
}

/* Channel plane copied into `bordered` (rows × width): bordered (r, j) is plane (r - ph,
 * j - pw), 0 outside the plane. */
static void fill_bordered(const bbi_window2d *g, const float *plane, size_t rows, size_t width, float *bordered) {
  const size_t lo = g->pw < width ? g->pw : width;
  const size_t hi = g->pw + g->iw < width ? g->pw + g->iw : width;
  for (size_t r = 0; r < rows; r++) {
    const int64_t iy = (int64_t)r - (int64_t)g->ph;
    const bool inside = iy >= 0 && iy < (int64_t)g->ih && hi > lo;
    bbi_f32_padded_row(bordered + r * width, width, lo, inside ? plane + (size_t)iy * g->iw : NULL, inside ? hi - lo : 0);
  }
}

void bbi_f32_im2col_2d(const bbi_window2d *g, size_t channels, const float *x, float *col, size_t ld) {
  size_t rows, width;
  if (g->sw == 1 && g->ow <= IM2COL_BORDERED_MAX_OW && bordered_fits(g, &rows, &width)) {
    /* each row of the column matrix is oh runs of ow floats of the bordered copy */
    float bordered[PATCH_BORDERED_MAX];
    for (size_t c = 0; c < channels; c++) {
      fill_bordered(g, x + c * g->ih * g->iw, rows, width, bordered);
      for (size_t ky = 0; ky < g->kh; ky++)
        for (size_t kx = 0; kx < g->kw; kx++) {
          float *row = col + ((c * g->kh + ky) * g->kw + kx) * ld;
          for (size_t oy = 0; oy < g->oh; oy++) copy_run(row + oy * g->ow, bordered + (oy * g->sh + ky) * width + kx, g->ow);
        }
    }
    return;
  }
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

/* The patch rows of an undilated window through a copy of each channel's plane with its
 * padding written out as zeros: the rows and columns every window reaches,
 * ((oh-1)·sh + kh) × ((ow-1)·sw + kw). Each patch row is then kh runs of kw floats of that
 * copy, with no edge to find per run. The same floats as patch_taps writes (copies and
 * zeros only); false, having written nothing, when the window is dilated or the copy
 * would not fit. */
static bool patches_bordered(const bbi_window2d *g, size_t channels, const float *x, float *col, size_t ld) {
  size_t rows, width;
  if (!bordered_fits(g, &rows, &width)) return false;
  float bordered[PATCH_BORDERED_MAX];
  for (size_t c = 0; c < channels; c++) {
    fill_bordered(g, x + c * g->ih * g->iw, rows, width, bordered);
    for (size_t oy = 0; oy < g->oh; oy++)
      for (size_t ox = 0; ox < g->ow; ox++) {
        float *row = col + (oy * g->ow + ox) * ld + c * g->kh * g->kw;
        const float *src = bordered + oy * g->sh * width + ox * g->sw;
        for (size_t ky = 0; ky < g->kh; ky++) copy_run(row + ky * g->kw, src + ky * width, g->kw);
      }
  }
  return true;
}

void bbi_f32_im2col_patches_2d(const bbi_window2d *g, size_t channels, const float *x, float *col, size_t ld) {
  if (patches_bordered(g, channels, x, col, ld)) return;
  for (size_t oy = 0; oy < g->oh; oy++)
    for (size_t ox = 0; ox < g->ow; ox++) {
      float *row = col + (oy * g->ow + ox) * ld;
      for (size_t c = 0; c < channels; c++)
        for (size_t ky = 0; ky < g->kh; ky++)
          patch_taps(g, x + c * g->ih * g->iw, oy, ox, ky, row + (c * g->kh + ky) * g->kw);
    }
}

/* col2im of an undilated window through a zero-bordered copy of each channel's plane (the
 * rows and columns every window reaches, as patches_bordered): the plane's values copied
 * in, each column-matrix row added as oh runs of ow floats with no edge to find (what
 * falls outside the image lands in the border), the plane's part copied back. Each float
 * of x gets its value plus the same terms in the same (ky, kx) order as the general
 * loop. False, having written nothing, when dilated or the copy would not fit. */
static bool col2im_bordered(const bbi_window2d *g, size_t channels, const float *col, size_t ld, float *x) {
  size_t rows, width;
  if (!bordered_fits(g, &rows, &width)) return false;
  float bordered[PATCH_BORDERED_MAX];
  const size_t lo = g->pw < width ? g->pw : width;
  const size_t hi = g->pw + g->iw < width ? g->pw + g->iw : width;
  for (size_t c = 0; c < channels; c++) {
    float *plane = x + c * g->ih * g->iw;
    fill_bordered(g, plane, rows, width, bordered);
    for (size_t ky = 0; ky < g->kh; ky++)
      for (size_t kx = 0; kx < g->kw; kx++) {
        const float *src = col + ((c * g->kh + ky) * g->kw + kx) * ld;
        for (size_t oy = 0; oy < g->oh; oy++, src += g->ow) {
          float *dst = bordered + (oy * g->sh + ky) * width + kx;
          size_t i = 0;
          if (g->sw == 1)
            for (; i + 4 <= g->ow; i += 4) bbi_f32x4_store(dst + i, bbi_f32x4_load(dst + i) + bbi_f32x4_load(src + i));
          for (; i < g->ow; i++) dst[i * g->sw] += src[i];
        }
      }
    for (size_t r = 0; r < rows; r++) {
      const int64_t iy = (int64_t)r - (int64_t)g->ph;
      if (iy >= 0 && iy < (int64_t)g->ih && hi > lo) copy_run(plane + (size_t)iy * g->iw, bordered + r * width + lo, hi - lo);
    }
  }
  return true;
}

void bbi_f32_col2im_2d(const bbi_window2d *g, size_t channels, const float *col, size_t ld, float *x) {
  if (col2im_bordered(g, channels, col, ld, x)) return;
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

/* ---- the column matrix straight into packed GEMM panels -------------------------------- */

#if BBI_HAVE_X86_GEMM
#include <immintrin.h>

/* Where row p of the column matrix starts among the panels (as B, or as A's columns). */
static float *panel_row(const bbi_f32_gemm_config *cfg, int as_a, size_t n, size_t k, size_t p, void *packed,
                        size_t *stride, size_t *rows_after, size_t *width) {
  if (as_a) return bbi_f32_gemm_packed_a_row(cfg, n, k, p, packed, stride, rows_after, width);
  *width = cfg->nr;
  return bbi_f32_gemm_packed_b_row(cfg, n, k, p, packed, stride, rows_after);
}

/* Columns (output positions) one call takes, rounded up to its panels: the shipped nc of
 * the 32-wide B panels. */
#define PACK_MAX_COLUMNS 2048
/* Kernel rows (and, apart, kernel columns) times groups of sixteen columns one call takes
 * (a 7×7 window over 32×32 positions is 7·64). */
#define PACK_MAX_MASKS 1024

/* A group's step where its lanes 0-7 are two floats apart and so are its lanes 8-15 (two
 * output rows of eight at stride 2), from two firsts. */
#define HALVES_TWO_APART 3

/* The address of plane[corner + shift], kept as an integer: it may lie outside the plane
 * where the lanes that would read it are masked. */
static inline uintptr_t lane0(const float *plane, int32_t corner, int32_t shift) {
  return (uintptr_t)plane + (uintptr_t)(((intptr_t)corner + shift) * (intptr_t)sizeof(float));
}

/* Row p = (c·kh + ky)·kw + kx of the column matrix, sixteen columns j at a time: the lanes
 * whose window position (oy·sh + ky·dh - ph, ox·sw + kx·dw - pw) lies in the image (and
 * j < oh·ow) read channel c's plane (x + c·plane) there, the others are 0, and the sixteen
 * floats go to their places in the row's panels (W = 8, 16 or 32 wide: half, one or two
 * lanes' worth, none past the last panel; or the one 4-wide panel of at most four
 * positions). Which lanes read the image is the lanes whose window row is inside for ky
 * and whose window column is inside for kx: two small tables, per kernel row and per
 * kernel column, set up once per call for every channel. Lanes at consecutive floats of
 * the plane are one masked load, lanes two floats apart (stride 2) the even floats of two,
 * two rows of eight lanes each two apart the even floats of one load from each row,
 * others one masked gather; masked lanes touch no memory. Copies only, so the panels hold
 * the bytes bbi_f32_im2col_2d and the GEMM's packing would put there. */
__attribute__((target("avx512f,bmi2"))) static void im2col_pack_avx512(const bbi_f32_gemm_config *cfg, int as_a,
                                                                       const bbi_window2d *g, size_t c0, size_t c1,
                                                                       const float *x, size_t plane, size_t k,
                                                                       size_t W, void *packed) {
  const size_t n = g->oh * g->ow, width = (n + W - 1) / W * W, groups = (width + 15) / 16;
  const size_t taps = g->kh * g->kw;
  int32_t at[PACK_MAX_COLUMNS];          /* column j's window corner oy·sh·iw + ox·sw in the plane */
  uint8_t step[PACK_MAX_COLUMNS / 16];   /* a group's lanes 1 or 2 floats apart in the plane, or 0 */
  uint16_t panel[PACK_MAX_COLUMNS / 16]; /* a group's panel, and its first lane's place there */
  uint8_t place[PACK_MAX_COLUMNS / 16];
  /* per kernel row ky and group (row_in[ky·groups + q]): the lanes whose window row is in
   * the image; per kernel column kx (col_in[kx·groups + q]): whose window column is */
  __mmask16 row_in[PACK_MAX_MASKS], col_in[PACK_MAX_MASKS];
  memset(row_in, 0, g->kh * groups * sizeof row_in[0]);
  memset(col_in, 0, g->kw * groups * sizeof col_in[0]);
  for (size_t j = 0, oy = 0, ox = 0; j < groups * 16; j++) {
    const int64_t top = (int64_t)(oy * g->sh), left = (int64_t)(ox * g->sw);
    at[j] = (int32_t)(top * (int64_t)g->iw + left);
    const __mmask16 lane = (__mmask16)(1u << (j % 16));
    for (size_t ky = 0; j < n && ky < g->kh; ky++) {
      const int64_t iy = top + (int64_t)(ky * g->dh) - (int64_t)g->ph;
      if (iy >= 0 && iy < (int64_t)g->ih) row_in[ky * groups + j / 16] |= lane;
    }
    for (size_t kx = 0; j < n && kx < g->kw; kx++) {
      const int64_t ix = left + (int64_t)(kx * g->dw) - (int64_t)g->pw;
      if (ix >= 0 && ix < (int64_t)g->iw) col_in[kx * groups + j / 16] |= lane;
    }
    if (++ox == g->ow) ox = 0, oy++;
  }
  for (size_t q = 0; q < groups; q++) {
    int one = 1, two = 1, halves = 1;
    for (size_t l = 1; l < 16 && q * 16 + l < n; l++) {
      one &= at[q * 16 + l] == at[q * 16] + (int32_t)l;
      two &= at[q * 16 + l] == at[q * 16] + 2 * (int32_t)l;
      halves &= at[q * 16 + l] == at[q * 16 + (l & 8)] + 2 * (int32_t)(l & 7);
    }
    step[q] = one ? 1 : two ? 2 : halves ? HALVES_TWO_APART : 0;
    panel[q] = (uint16_t)(q * 16 / W), place[q] = (uint8_t)(q * 16 % W);
  }
  /* every group's lanes this many floats apart (1 or 2), or 0 */
  unsigned same_step = groups && step[0] != HALVES_TWO_APART ? step[0] : 0;
  for (size_t q = 1; q < groups; q++) same_step = step[q] == same_step ? same_step : 0;
  uint32_t offset[PACK_MAX_COLUMNS / 16]; /* a group's place in a row of panels `offsets_for` apart */
  size_t offsets_for = 0;
  const __m512i evens = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  size_t stride = 0, rows_after = 0, w = 0;
  float *row = NULL;
  for (size_t c = c0; c < c1; c++) {
    const float *src = x + c * plane;
    for (size_t t = 0; t < taps; t++) {
      const size_t p = c * taps + t, ky = t / g->kw, kx = t % g->kw;
      if (!row || rows_after == 0) row = panel_row(cfg, as_a, n, k, p, packed, &stride, &rows_after, &w);
      else row += W, rows_after--;
      const int32_t shift = ((int32_t)(ky * g->dh) - (int32_t)g->ph) * (int32_t)g->iw + (int32_t)(kx * g->dw) -
                            (int32_t)g->pw;
      const __mmask16 *rin = row_in + ky * groups, *cin = col_in + kx * groups;
      if (same_step && W == 32) {
        /* 32-wide panels, every group's lanes 1 (or every group's 2) floats apart */
        if (stride != offsets_for)
          for (size_t q = 0; q < groups; q++) offset[q] = (uint32_t)(panel[q] * stride + place[q]);
        offsets_for = stride;
        if (same_step == 1) {
          for (size_t q = 0; q < groups; q++) {
            const void *first = (const void *)lane0(src, at[q * 16], shift);
            _mm512_storeu_ps(row + offset[q], _mm512_maskz_loadu_ps(rin[q] & cin[q], first));
          }
        } else {
          for (size_t q = 0; q < groups; q++) {
            const uint32_t spread = _pdep_u32(rin[q] & cin[q], 0x55555555u);
            const uintptr_t first = lane0(src, at[q * 16], shift);
            const __m512 lo = _mm512_maskz_loadu_ps((__mmask16)spread, (const void *)first);
            const __m512 hi = _mm512_maskz_loadu_ps((__mmask16)(spread >> 16), (const void *)(first + 16 * sizeof(float)));
            _mm512_storeu_ps(row + offset[q], _mm512_permutex2var_ps(lo, evens, hi));
          }
        }
        continue;
      }
      for (size_t q = 0; q < groups; q++) {
        const __mmask16 m = rin[q] & cin[q];
        const size_t j = q * 16;
        const uintptr_t first = lane0(src, at[j], shift);
        __m512 v = _mm512_setzero_ps();
        if (m && step[q] == 1) {
          v = _mm512_maskz_loadu_ps(m, (const void *)first);
        } else if (m && step[q] == 2) {
          /* lane l reads float 2l of 32: the even floats of two masked loads */
          const uint32_t spread = _pdep_u32(m, 0x55555555u);
          const __m512 lo = _mm512_maskz_loadu_ps((__mmask16)spread, (const void *)first);
          const __m512 hi = _mm512_maskz_loadu_ps((__mmask16)(spread >> 16), (const void *)(first + 16 * sizeof(float)));
          v = _mm512_permutex2var_ps(lo, evens, hi);
        } else if (m && step[q] == HALVES_TWO_APART) {
          /* lanes 0-7 and 8-15 each two floats apart from their own first (two output rows
           * of eight at stride 2): the even floats of one masked load from each */
          const uintptr_t second = lane0(src, at[j + 8], shift);
          const __m512 lo = _mm512_maskz_loadu_ps((__mmask16)_pdep_u32(m & 0xffu, 0x5555u), (const void *)first);
          const __m512 hi = _mm512_maskz_loadu_ps((__mmask16)_pdep_u32(m >> 8, 0x5555u), (const void *)second);
          v = _mm512_permutex2var_ps(lo, evens, hi);
        } else if (m) {
          const __m512i idx = _mm512_add_epi32(_mm512_loadu_si512(at + j), _mm512_set1_epi32(shift));
          v = _mm512_mask_i32gather_ps(v, m, idx, src, 4);
        }
        float *dst = row + panel[q] * stride + place[q];
        if (W >= 16) {
          _mm512_storeu_ps(dst, v);
        } else if (W == 8) {
          const __m512d d = _mm512_castps_pd(v);
          _mm256_storeu_pd((double *)dst, _mm512_castpd512_pd256(d));
          if (j + 8 < width) _mm256_storeu_pd((double *)(dst + stride), _mm512_extractf64x4_pd(d, 1));
        } else { /* four rows, all of them (see bbi_f32_im2col_pack_2d) */
          _mm_storeu_ps(dst, _mm512_castps512_ps128(v));
        }
      }
    }
  }
}

/* Planes of at most this many floats, windows of at most this many taps, take
 * tiny_pack_a_avx512. */
#define TINY_PLANE 16
#define TINY_TAPS 16

/* As A, the one 4-tall panel of exactly four positions (a 3×3 window on a 2×2 map): row p
 * of the column matrix is the four floats at 4p of the panels (a 4-tall panel of at most
 * four positions is one run across every k block), so channel c's taps are the
 * 4·kh·kw floats from 4·c·kh·kw on. Each is a float of c's plane (at most sixteen, one
 * masked load) or 0: a lane table set once per call, then per channel one load and
 * 4·kh·kw / 16 permutes, stored in order, the last by a mask (nothing past channel
 * c1 - 1's taps). The floats im2col_pack_avx512 writes there (copies only). */
__attribute__((target("avx512f"))) static void tiny_pack_a_avx512(const bbi_window2d *g, size_t c0, size_t c1,
                                                                  const float *x, size_t plane, float *dst) {
  const size_t taps = g->kh * g->kw, per = 4 * taps, vectors = (per + 15) / 16, pixels = g->ih * g->iw;
  int32_t at[TINY_TAPS * 4] = {0};
  uint32_t inside[TINY_TAPS * 4 / 16] = {0};
  for (size_t f = 0; f < per; f++) {
    const size_t t = f / 4, j = f % 4, ky = t / g->kw, kx = t % g->kw, oy = j / g->ow, ox = j % g->ow;
    const int64_t iy = (int64_t)(oy * g->sh + ky * g->dh) - (int64_t)g->ph;
    const int64_t ix = (int64_t)(ox * g->sw + kx * g->dw) - (int64_t)g->pw;
    if (iy < 0 || iy >= (int64_t)g->ih || ix < 0 || ix >= (int64_t)g->iw) continue;
    at[f] = (int32_t)(iy * (int64_t)g->iw + ix);
    inside[f / 16] |= 1u << (f % 16);
  }
  __m512i idx[TINY_TAPS * 4 / 16];
  for (size_t v = 0; v < vectors; v++) idx[v] = _mm512_loadu_si512(at + 16 * v);
  const __mmask16 load = (__mmask16)(pixels >= 16 ? 0xffffu : (1u << pixels) - 1);
  const __mmask16 tail = (__mmask16)(per % 16 ? (1u << (per % 16)) - 1 : 0xffffu);
  for (size_t c = c0; c < c1; c++) {
    const __m512 p = _mm512_maskz_loadu_ps(load, x + c * plane);
    float *d = dst + (c - c0) * per;
    size_t v = 0;
    for (; v + 1 < vectors; v++)
      _mm512_storeu_ps(d + 16 * v, _mm512_maskz_permutexvar_ps((__mmask16)inside[v], idx[v], p));
    _mm512_mask_storeu_ps(d + 16 * v, tail, _mm512_maskz_permutexvar_ps((__mmask16)inside[v], idx[v], p));
  }
}
#endif

int bbi_f32_im2col_pack_2d(const bbi_f32_gemm_config *cfg, const bbi_window2d *g, size_t c0, size_t c1,
                           const float *x, size_t plane, size_t k, int as_a, void *packed) {
#if BBI_HAVE_X86_GEMM
  /* the compiler's runtime reads the CPU's features once, before main and any thread of
   * the pool: this is a read of settled data, from any thread */
  const int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("bmi2");
  if (!cfg) cfg = bbi_f32_gemm_default_config();
  const size_t n = g->oh * g->ow, groups = (n + 31) / 16;
  size_t stride, rows_after, w = 0;
  /* plane offsets, windows hanging over the edges included, fit in int32 lanes */
  const size_t reach_h = g->ih + g->ph + (g->kh * g->dh + 1) + g->oh * g->sh;
  const size_t reach_w = g->iw + g->pw + (g->kw * g->dw + 1) + g->ow * g->sw;
  if (!avx512 || cfg->nr != 32 || n == 0 || n + 32 > PACK_MAX_COLUMNS || c1 <= c0 || c1 * g->kh * g->kw > k ||
      plane < g->ih * g->iw || g->kh * groups > PACK_MAX_MASKS || g->kw * groups > PACK_MAX_MASKS ||
      reach_h * reach_w >= ((size_t)1 << 30) ||
      !panel_row(cfg, as_a, n, k, c0 * g->kh * g->kw, packed, &stride, &rows_after, &w) ||
      (w != 4 && w != 8 && w != 16 && w != 32) || (w == 4 && n > 4)) /* 4-tall A panels: m <= 4 */
    return 0;
  if (as_a && w == 4 && n == 4 && g->ih * g->iw <= TINY_PLANE && g->kh * g->kw <= TINY_TAPS) {
    float *first = panel_row(cfg, as_a, n, k, c0 * g->kh * g->kw, packed, &stride, &rows_after, &w);
    tiny_pack_a_avx512(g, c0, c1, x, plane, first);
    return 1;
  }
  im2col_pack_avx512(cfg, as_a, g, c0, c1, x, plane, k, w, packed);
  return 1;
#else
  (void)cfg, (void)g, (void)c0, (void)c1, (void)x, (void)plane, (void)k, (void)as_a, (void)packed;
  return 0;
#endif
}
