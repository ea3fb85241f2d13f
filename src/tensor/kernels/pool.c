/* 2-D max and average pooling over planes. The SIMD form computes four neighbouring
 * outputs of a row at once where every column of their windows lies inside the image
 * (rows may still fall in the padding: they are skipped, as the scalar form skips them);
 * the outputs at the left and right edges go through the scalar form's per-output code.
 * Each lane visits its window in the scalar order, so the two forms agree bit for bit. */
#include <math.h>

#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"

/* ---- one output, the reference ------------------------------------------------------------ */

/* The window of output (oy, ox): the rows and columns it covers, -1 where they fall in
 * the padding; `padded` counts the positions inside the padded extent (for
 * count_include_pad). */
static float pool_one(const bb_window2d *g, int is_max, const float *plane, size_t oy, size_t ox, int64_t *arg) {
  float acc = is_max ? -INFINITY : 0.0f;
  int64_t best = -1;
  size_t count = 0;
  for (size_t ky = 0; ky < g->kh; ky++) {
    const int64_t iy = (int64_t)(oy * g->sh + ky * g->dh) - (int64_t)g->ph;
    const int row_in_pad = iy >= -(int64_t)g->ph && iy < (int64_t)(g->ih + g->ph_end);
    for (size_t kx = 0; kx < g->kw; kx++) {
      const int64_t ix = (int64_t)(ox * g->sw + kx * g->dw) - (int64_t)g->pw;
      if (iy < 0 || iy >= (int64_t)g->ih || ix < 0 || ix >= (int64_t)g->iw) {
        if (g->count_include_pad && row_in_pad && ix >= -(int64_t)g->pw && ix < (int64_t)(g->iw + g->pw_end)) count++;
        continue;
      }
      const int64_t off = iy * (int64_t)g->iw + ix;
      const float v = plane[off];
      count++;
      if (!is_max) acc += v;
      else if (v > acc || best < 0) acc = v, best = off;
    }
  }
  if (arg) *arg = best;
  return is_max ? acc : count ? acc / (float)count : NAN;
}

static void pool_scalar(const bb_window2d *g, int is_max, size_t planes, const float *x, float *y, int64_t *indices) {
  const size_t in_size = g->ih * g->iw;
  for (size_t p = 0; p < planes; p++, x += in_size)
    for (size_t oy = 0; oy < g->oh; oy++)
      for (size_t ox = 0; ox < g->ow; ox++, y++) {
        int64_t arg;
        *y = pool_one(g, is_max, x, oy, ox, indices ? &arg : NULL);
        if (indices) *indices++ = (int64_t)(p * in_size) + arg;
      }
}

void bb_f32_maxpool2d_scalar(const bb_window2d *g, size_t planes, const float *x, float *y, int64_t *indices) {
  pool_scalar(g, 1, planes, x, y, indices);
}

void bb_f32_avgpool2d_scalar(const bb_window2d *g, size_t planes, const float *x, float *y) {
  pool_scalar(g, 0, planes, x, y, NULL);
}

/* ---- SIMD ---------------------------------------------------------------------------------- */

/* Lanes x[at], x[at + s], x[at + 2s], x[at + 3s] of one row; `room` is how many floats
 * after at the row holds, so the paired loads of stride 2 never read past it. */
BB_INLINE bb_f32x4 load_strided(const float *x, size_t s, size_t room) {
  if (s == 1) return bb_f32x4_load(x);
  if (s == 2 && room >= 8) return BB_F32X4_SHUFFLE(bb_f32x4_load(x), bb_f32x4_load(x + 4), 0, 2, 4, 6);
  return (bb_f32x4){x[0], x[s], x[2 * s], x[3 * s]};
}

/* The first and one-past-last outputs of a row whose windows' columns are all inside. */
static void interior_columns(const bb_window2d *g, size_t *first, size_t *end) {
  size_t lo = 0;
  while (lo < g->ow && lo * g->sw < g->pw) lo++;
  const size_t span = (g->kw - 1) * g->dw + 1;
  size_t hi = lo;
  while (hi < g->ow && hi * g->sw + span <= g->iw + g->pw) hi++;
  *first = lo;
  *end = hi;
}

static void pool_simd(const bb_window2d *g, int is_max, size_t planes, const float *x, float *y, int64_t *indices) {
  const size_t in_size = g->ih * g->iw;
  if (in_size > INT32_MAX || g->kh == 0 || g->kw == 0) { /* the lanes track offsets in 32 bits */
    pool_scalar(g, is_max, planes, x, y, indices);
    return;
  }
  size_t c0, c1;
  interior_columns(g, &c0, &c1);
  for (size_t p = 0; p < planes; p++, x += in_size)
    for (size_t oy = 0; oy < g->oh; oy++, y += g->ow) {
      int64_t *idx = indices ? indices + (p * g->oh + oy) * g->ow : NULL;
      const int64_t base = (int64_t)(p * in_size);
      size_t ox = 0;
      for (; ox < c0; ox++) {
        int64_t arg;
        y[ox] = pool_one(g, is_max, x, oy, ox, idx ? &arg : NULL);
        if (idx) idx[ox] = base + arg;
      }
      /* the rows of the window inside the image, and (with count_include_pad) inside the padding */
      size_t rows = 0, padded_rows = 0;
      for (size_t ky = 0; ky < g->kh; ky++) {
        const int64_t iy = (int64_t)(oy * g->sh + ky * g->dh) - (int64_t)g->ph;
        rows += iy >= 0 && iy < (int64_t)g->ih;
        padded_rows += iy >= -(int64_t)g->ph && iy < (int64_t)(g->ih + g->ph_end);
      }
      const size_t count = (g->count_include_pad ? padded_rows : rows) * g->kw;
      const bb_f32x4 scale = bb_f32x4_splat((float)count);
      for (; ox + 4 <= c1 && rows; ox += 4) {
        bb_f32x4 acc = bb_f32x4_splat(is_max ? -INFINITY : 0.0f);
        bb_i32x4 arg = {0, 0, 0, 0};
        int first = 1;
        for (size_t ky = 0; ky < g->kh; ky++) {
          const int64_t iy = (int64_t)(oy * g->sh + ky * g->dh) - (int64_t)g->ph;
          if (iy < 0 || iy >= (int64_t)g->ih) continue;
          for (size_t kx = 0; kx < g->kw; kx++) {
            const size_t ix = ox * g->sw + kx * g->dw - g->pw;
            const bb_f32x4 v = load_strided(x + (size_t)iy * g->iw + ix, g->sw, g->iw - ix);
            if (!is_max) {
              acc += v;
              continue;
            }
            const int32_t off = (int32_t)((size_t)iy * g->iw + ix), s = (int32_t)g->sw;
            const bb_i32x4 here = {off, off + s, off + 2 * s, off + 3 * s};
            if (first) {
              acc = v, arg = here, first = 0;
            } else {
              const bb_i32x4 gt = v > acc;
              acc = bb_f32x4_select(gt, v, acc);
              arg = (bb_i32x4)bb_f32x4_select(gt, (bb_f32x4)here, (bb_f32x4)arg);
            }
          }
        }
        bb_f32x4_store(y + ox, is_max ? acc : acc / scale);
        if (idx)
          for (int l = 0; l < 4; l++) idx[ox + (size_t)l] = base + arg[l];
      }
      for (; ox < g->ow; ox++) {
        int64_t arg;
        y[ox] = pool_one(g, is_max, x, oy, ox, idx ? &arg : NULL);
        if (idx) idx[ox] = base + arg;
      }
    }
}

void bb_f32_maxpool2d(const bb_window2d *g, size_t planes, const float *x, float *y, int64_t *indices) {
  pool_simd(g, 1, planes, x, y, indices);
}

void bb_f32_avgpool2d(const bb_window2d *g, size_t planes, const float *x, float *y) {
  pool_simd(g, 0, planes, x, y, NULL);
}
