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
static float pool_one(const bbi_window2d *g, int is_max, const float *plane, size_t oy, size_t ox, int64_t *arg) {
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

static void pool_scalar(const bbi_window2d *g, int is_max, size_t planes, const float *x, float *y, int64_t *indices) {
  const size_t in_size = g->ih * g->iw;
  for (size_t p = 0; p < planes; p++, x += in_size)
    for (size_t oy = 0; oy < g->oh; oy++)
      for (size_t ox = 0; ox < g->ow; ox++, y++) {
        int64_t arg;
        *y = pool_one(g, is_max, x, oy, ox, indices ? &arg : NULL);
        if (indices) *indices++ = (int64_t)(p * in_size) + arg;
      }
}

void bbi_f32_maxpool2d_scalar(const bbi_window2d *g, size_t planes, const float *x, float *y, int64_t *indices) {
  pool_scalar(g, 1, planes, x, y, indices);
}

void bbi_f32_avgpool2d_scalar(const bbi_window2d *g, size_t planes, const float *x, float *y) {
  pool_scalar(g, 0, planes, x, y, NULL);
}

/* ---- SIMD ---------------------------------------------------------------------------------- */

/* Lanes x[at], x[at + s], x[at + 2s], x[at + 3s] of one row; `room` is how many floats
 * after at the row holds, so the paired loads of stride 2 never read past it. */
BBI_INLINE bbi_f32x4 load_strided(const float *x, size_t s, size_t room) {
  if (s == 1) return bbi_f32x4_load(x);
  if (s == 2 && room >= 8) return BBI_F32X4_SHUFFLE(bbi_f32x4_load(x), bbi_f32x4_load(x + 4), 0, 2, 4, 6);
  return (bbi_f32x4){x[0], x[s], x[2 * s], x[3 * s]};
}

/* The first and one-past-last outputs of a row whose windows' columns are all inside. */
static void interior_columns(const bbi_window2d *g, size_t *first, size_t *end) {
  size_t lo = 0;
  while (lo < g->ow && lo * g->sw < g->pw) lo++;
  const size_t span = (g->kw - 1) * g->dw + 1;
  size_t hi = lo;
  while (hi < g->ow && hi * g->sw + span <= g->iw + g->pw) hi++;
  *first = lo;
  *end = hi;
}

/* What a row of outputs shares: the window rows inside the image (iy[0..n_rows)), and the
 * divisor of an average. */
typedef struct row_plan {
  size_t iy[16];
  size_t n_rows, padded_rows;
  bbi_f32x4 count;
} row_plan;

typedef enum pool_mode { MODE_AVG, MODE_MAX, MODE_MAX_INDICES } pool_mode;

/* One more value of each lane's window into the accumulators (`first`: the window's first). */
BBI_INLINE void take(pool_mode mode, bbi_f32x4 v, int32_t at, int32_t s, int first, bbi_f32x4 *acc, bbi_i32x4 *arg) {
  if (mode == MODE_AVG) {
    *acc += v;
  } else if (first) { /* the first value of the window is taken as it is */
    *acc = v;
    if (mode == MODE_MAX_INDICES) *arg = (bbi_i32x4){at, at + s, at + 2 * s, at + 3 * s};
  } else if (mode == MODE_MAX) {
    *acc = bbi_f32x4_max(*acc, v); /* acc < v ? v : acc: a later value replaces only a greater one */
  } else {
    const bbi_i32x4 gt = v > *acc;
    *acc = bbi_f32x4_select(gt, v, *acc);
    *arg = (bbi_i32x4)bbi_f32x4_select(gt, (bbi_f32x4)(bbi_i32x4){at, at + s, at + 2 * s, at + 3 * s}, (bbi_f32x4)*arg);
  }
}

/* Outputs ox..ox+3 of a row, every column of their windows inside the image. Each lane
 * visits its window in row-major order, as pool_one does. */
BBI_INLINE void pool_vec(const bbi_window2d *g, pool_mode mode, const row_plan *r, const float *x, size_t ox, float *y,
                        int64_t *idx, int64_t base) {
  bbi_f32x4 acc = bbi_f32x4_splat(0.0f);
  bbi_i32x4 arg = {0, 0, 0, 0};
  const int32_t s = (int32_t)g->sw;
  /* 2-wide windows at stride 2 (the common 2x2 pooling): one pair of loads gives both
   * columns, the even and the odd lanes */
  const int pairs = g->kw == 2 && g->sw == 2 && g->dw == 1;
  for (size_t k = 0; k < r->n_rows; k++) {
    const size_t ix = ox * g->sw - g->pw, at = r->iy[k] * g->iw + ix;
    if (pairs && g->iw - ix >= 8) {
      const bbi_f32x4 a = bbi_f32x4_load(x + at), b = bbi_f32x4_load(x + at + 4);
      take(mode, BBI_F32X4_SHUFFLE(a, b, 0, 2, 4, 6), (int32_t)at, s, k == 0, &acc, &arg);
      take(mode, BBI_F32X4_SHUFFLE(a, b, 1, 3, 5, 7), (int32_t)at + 1, s, 0, &acc, &arg);
      continue;
    }
    for (size_t kx = 0; kx < g->kw; kx++) {
      const size_t col = ix + kx * g->dw;
      const bbi_f32x4 v = load_strided(x + at + kx * g->dw, g->sw, g->iw - col);
      take(mode, v, (int32_t)(at + kx * g->dw), s, k == 0 && kx == 0, &acc, &arg);
    }
  }
  bbi_f32x4_store(y + ox, mode == MODE_AVG ? acc / r->count : acc);
  if (mode == MODE_MAX_INDICES)
    for (int l = 0; l < 4; l++) idx[ox + (size_t)l] = base + arg[l];
}

/* An output whose window reaches past the image's left or right edge: pool_one's sum and
 * order over the row plan, with the window's columns found once. */
static float pool_edge(const bbi_window2d *g, int is_max, const row_plan *r, const float *x, size_t ox, int64_t *arg) {
  size_t cols[16], n_cols = 0, padded_cols = 0;
  for (size_t kx = 0; kx < g->kw; kx++) {
    const int64_t ix = (int64_t)(ox * g->sw + kx * g->dw) - (int64_t)g->pw;
    if (ix >= 0 && ix < (int64_t)g->iw && n_cols < 16) cols[n_cols++] = (size_t)ix;
    padded_cols += ix >= -(int64_t)g->pw && ix < (int64_t)(g->iw + g->pw_end);
  }
  float acc = is_max ? -INFINITY : 0.0f;
  int64_t best = -1;
  for (size_t k = 0; k < r->n_rows; k++)
    for (size_t c = 0; c < n_cols; c++) {
      const int64_t off = (int64_t)(r->iy[k] * g->iw + cols[c]);
      const float v = x[off];
      if (!is_max) acc += v;
      else if (v > acc || best < 0) acc = v, best = off;
    }
  if (arg) *arg = best;
  const size_t count = g->count_include_pad ? r->padded_rows * padded_cols : r->n_rows * n_cols;
  return is_max ? acc : count ? acc / (float)count : NAN;
}

BBI_INLINE void pool_rows(const bbi_window2d *g, pool_mode mode, size_t planes, const float *x, float *y, int64_t *indices) {
  const size_t in_size = g->ih * g->iw;
  const int is_max = mode != MODE_AVG;
  size_t c0, c1;
  interior_columns(g, &c0, &c1);
  for (size_t p = 0; p < planes; p++, x += in_size)
    for (size_t oy = 0; oy < g->oh; oy++, y += g->ow) {
      int64_t *idx = indices ? indices + (p * g->oh + oy) * g->ow : NULL;
      const int64_t base = (int64_t)(p * in_size);
      /* the window rows inside the image, and (count_include_pad) inside the padding */
      row_plan r; /* iy is filled up to n_rows: zeroing all 16 would cost a memset per row */
      r.n_rows = r.padded_rows = 0;
      for (size_t ky = 0; ky < g->kh; ky++) {
        const int64_t iy = (int64_t)(oy * g->sh + ky * g->dh) - (int64_t)g->ph;
        if (iy >= 0 && iy < (int64_t)g->ih) r.iy[r.n_rows++] = (size_t)iy;
        r.padded_rows += iy >= -(int64_t)g->ph && iy < (int64_t)(g->ih + g->ph_end);
      }
      r.count = bbi_f32x4_splat((float)((g->count_include_pad ? r.padded_rows : r.n_rows) * g->kw));
      const size_t end = r.n_rows && c1 >= c0 + 4 ? c1 : c0; /* the vectors cover [c0, end) */
      for (size_t ox = 0; ox < g->ow; ox++) {
        if (ox == c0 && end > c0) {
          size_t v = c0;
          for (; v + 4 <= end; v += 4) pool_vec(g, mode, &r, x, v, y, idx, base);
          /* the last outputs: one more vector ending at `end`, overlapping the one before
           * (those outputs come out the same) */
          if (v < end) pool_vec(g, mode, &r, x, end - 4, y, idx, base);
          ox = end - 1;
          continue;
        }
        int64_t arg;
        y[ox] = pool_edge(g, is_max, &r, x, ox, idx ? &arg : NULL);
        if (idx) idx[ox] = base + arg;
      }
    }
}

/* Max pooling 2×2 at stride 2 whose windows all lie inside the image (the common layer of
 * a small CNN), at least four outputs a row: per output row, two input rows, four outputs
 * from two vectors of each; a row's last outputs come from one more vector ending at the
 * row's end, overlapping the one before. Each lane takes its window in pool_one's order
 * (top left, top right, bottom left, bottom right), so the results are its bits. */
static void maxpool_2x2(const bbi_window2d *g, size_t planes, const float *x, float *y) {
  const size_t iw = g->iw, ow = g->ow;
  for (size_t p = 0; p < planes; p++, x += g->ih * iw)
    for (size_t oy = 0; oy < g->oh; oy++, y += ow) {
      const float *r0 = x + 2 * oy * iw, *r1 = r0 + iw;
      for (size_t ox = 0;; ox += 4) {
        if (ox + 4 > ow) {
          if (ox == ow) break;
          ox = ow - 4;
        }
        const bbi_f32x4 a0 = bbi_f32x4_load(r0 + 2 * ox), a1 = bbi_f32x4_load(r0 + 2 * ox + 4);
        const bbi_f32x4 b0 = bbi_f32x4_load(r1 + 2 * ox), b1 = bbi_f32x4_load(r1 + 2 * ox + 4);
        bbi_f32x4 acc = BBI_F32X4_SHUFFLE(a0, a1, 0, 2, 4, 6);
        acc = bbi_f32x4_max(acc, BBI_F32X4_SHUFFLE(a0, a1, 1, 3, 5, 7));
        acc = bbi_f32x4_max(acc, BBI_F32X4_SHUFFLE(b0, b1, 0, 2, 4, 6));
        acc = bbi_f32x4_max(acc, BBI_F32X4_SHUFFLE(b0, b1, 1, 3, 5, 7));
        bbi_f32x4_store(y + ox, acc);
        if (ox + 4 == ow) break;
      }
    }
}

/* Max pooling 3×3 at stride 2 (dilation 1, any padding; the stem of a ResNet): per output
 * row, its window rows inside the image (row_plan), the outputs whose windows reach into
 * the left or right padding through pool_edge, and the others four at a time, from four
 * loads per window row that start at the first lane's first column (offsets 0-3, 4-7,
 * 2-5, 5-8): the columns kx = 0, 1 and 2 of the four windows are offsets {0,2,4,6},
 * {1,3,5,7} and {2,4,6,8}. Each lane takes its window in pool_one's order (row by row, left
 * to right, the first value as it is and a later one only when greater), so the results
 * are its bits, NaN and signed zeros included. */
static void maxpool_3x3s2(const bbi_window2d *g, size_t planes, const float *x, float *y) {
  const size_t iw = g->iw, ow = g->ow, in_size = g->ih * iw;
  size_t c0, c1;
  interior_columns(g, &c0, &c1);
  for (size_t p = 0; p < planes; p++, x += in_size)
    for (size_t oy = 0; oy < g->oh; oy++, y += ow) {
      row_plan r;
      r.n_rows = r.padded_rows = 0;
      for (size_t ky = 0; ky < 3; ky++) {
        const int64_t iy = (int64_t)(oy * g->sh + ky) - (int64_t)g->ph;
        if (iy >= 0 && iy < (int64_t)g->ih) r.iy[r.n_rows++] = (size_t)iy;
      }
      const size_t end = r.n_rows && c1 >= c0 + 4 ? c1 : c0; /* the vectors cover [c0, end) */
      for (size_t ox = 0; ox < c0; ox++) y[ox] = pool_edge(g, 1, &r, x, ox, NULL);
      for (size_t ox = end; ox < ow; ox++) y[ox] = pool_edge(g, 1, &r, x, ox, NULL);
      for (size_t ox = c0; ox < end;) {
        bbi_f32x4 acc = bbi_f32x4_splat(0.0f);
        for (size_t k = 0; k < r.n_rows; k++) {
          const float *at = x + r.iy[k] * iw + 2 * ox - g->pw;
          const bbi_f32x4 a = bbi_f32x4_load(at), b = bbi_f32x4_load(at + 4);
          const bbi_f32x4 e = bbi_f32x4_load(at + 2), f = bbi_f32x4_load(at + 5);
          const bbi_f32x4 v0 = BBI_F32X4_SHUFFLE(a, b, 0, 2, 4, 6);
          acc = k == 0 ? v0 : bbi_f32x4_max(acc, v0);
          acc = bbi_f32x4_max(acc, BBI_F32X4_SHUFFLE(a, b, 1, 3, 5, 7));
          acc = bbi_f32x4_max(acc, BBI_F32X4_SHUFFLE(e, f, 0, 2, 5, 7));
        }
        bbi_f32x4_store(y + ox, acc);
        if (ox + 4 == end) break;
        /* the last outputs: one more vector ending at `end`, overlapping the one before
         * (those outputs come out the same) */
        ox = ox + 8 <= end ? ox + 4 : end - 4;
      }
    }
}

#if BBI_HAVE_X86_GEMM
#include <immintrin.h>

/* Lanes i of a 16-float load at column s of a row of iw floats that lie in the row. */
static __mmask16 in_row(int64_t s, int64_t iw) {
  uint32_t m = 0;
  for (int64_t i = 0; i < 16; i++) m |= (uint32_t)(s + i >= 0 && s + i < iw) << i;
  return (__mmask16)m;
}

/* maxpool_3x3s2 sixteen outputs a vector with AVX-512: outputs ox0..ox0+15 of a row read
 * columns b = 2·ox0 - pw to b + 32, four masked loads per window row (columns b, b + 16,
 * b + 2, b + 18 on): the columns kx = 0 and 1 of the sixteen windows are the even and odd
 * floats of the first two, kx = 2 the even floats of the last two. Every output takes its
 * window in pool_one's order: per lane, the first column inside the image as it is (a
 * blend where the lane has nothing yet), every later one where greater (max(v, acc) is
 * v > acc ? v : acc), so the results are pool_one's bits, NaN and signed zeros included;
 * a lane whose window lies wholly in the padding keeps -inf, as pool_one returns. */
/* Sixteen-output chunks of a row maxpool_3x3s2_avx512 takes (widths up to 512). */
#define POOL_MAX_CHUNKS 32

__attribute__((target("avx512f"))) static void maxpool_3x3s2_avx512(const bbi_window2d *g, size_t planes,
                                                                    const float *x, float *y) {
  const size_t iw = g->iw, ow = g->ow, in_size = g->ih * iw, chunks = (ow + 15) / 16;
  const int64_t w = (int64_t)iw;
  const __m512i evens = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odds = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  /* per chunk: the lanes of its four loads inside the row, of its outputs, and per kernel
   * column the lanes whose column is inside the image */
  __mmask16 load_in[POOL_MAX_CHUNKS][4], out[POOL_MAX_CHUNKS], col[POOL_MAX_CHUNKS][3];
  for (size_t q = 0; q < chunks; q++) {
    const int64_t b = 32 * (int64_t)q - (int64_t)g->pw;
    const size_t lanes = ow - 16 * q < 16 ? ow - 16 * q : 16;
    load_in[q][0] = in_row(b, w), load_in[q][1] = in_row(b + 16, w);
    load_in[q][2] = in_row(b + 2, w), load_in[q][3] = in_row(b + 18, w);
    out[q] = (__mmask16)((1u << lanes) - 1);
    col[q][0] = col[q][1] = col[q][2] = 0;
    for (size_t l = 0; l < lanes; l++)
      for (int64_t kx = 0; kx < 3; kx++) {
        const int64_t c = b + 2 * (int64_t)l + kx;
        col[q][kx] |= (__mmask16)((uint32_t)(c >= 0 && c < w) << l);
      }
  }
  const __m512 none = _mm512_set1_ps(-INFINITY);
  for (size_t q = 0; q < chunks; q++) {
    /* the first window row inside the image: each lane starts at its first column inside
     * (-inf where it has none) and takes the later ones where greater; the rows below it:
     * every column inside, where greater */
    const __mmask16 c0 = col[q][0], c1 = col[q][1], c2 = col[q][2];
    const __mmask16 start1 = c1 & (__mmask16)~c0, start2 = c2 & (__mmask16)~(c0 | c1);
    const __mmask16 after1 = c1 & c0, after2 = c2 & (c0 | c1);
    const __mmask16 in0 = load_in[q][0], in1 = load_in[q][1], in2 = load_in[q][2], in3 = load_in[q][3];
    const float *xp = x;
    float *yq = y + 16 * q;
    for (size_t p = 0; p < planes; p++, xp += in_size)
      for (size_t oy = 0; oy < g->oh; oy++, yq += ow) {
        __m512 acc = none;
        int started = 0;
        for (int64_t ky = 0; ky < 3; ky++) {
          const int64_t iy = (int64_t)(oy * g->sh) + ky - (int64_t)g->ph;
          if (iy < 0 || iy >= (int64_t)g->ih) continue;
          /* lane 0's column, which may lie outside the row where the lanes are masked */
          const uintptr_t at = (uintptr_t)(xp + iy * w) + (uintptr_t)((32 * (int64_t)q - (int64_t)g->pw) * 4);
          const __m512 l0 = _mm512_maskz_loadu_ps(in0, (const void *)at);
          const __m512 l1 = _mm512_maskz_loadu_ps(in1, (const void *)(at + 16 * sizeof(float)));
          const __m512 l2 = _mm512_maskz_loadu_ps(in2, (const void *)(at + 2 * sizeof(float)));
          const __m512 l3 = _mm512_maskz_loadu_ps(in3, (const void *)(at + 18 * sizeof(float)));
          const __m512 v0 = _mm512_permutex2var_ps(l0, evens, l1), v1 = _mm512_permutex2var_ps(l0, odds, l1);
          const __m512 v2 = _mm512_permutex2var_ps(l2, evens, l3);
          if (!started) {
            acc = _mm512_mask_blend_ps(c0, none, v0);
            acc = _mm512_mask_blend_ps(start1, acc, v1);
            acc = _mm512_mask_blend_ps(start2, acc, v2);
            acc = _mm512_mask_max_ps(acc, after1, v1, acc);
            acc = _mm512_mask_max_ps(acc, after2, v2, acc);
            started = 1;
            continue;
          }
          acc = _mm512_mask_max_ps(acc, c0, v0, acc);
          acc = _mm512_mask_max_ps(acc, c1, v1, acc);
          acc = _mm512_mask_max_ps(acc, c2, v2, acc);
        }
        _mm512_mask_storeu_ps(yq, out[q], acc);
      }
  }
}
#endif

static void pool_simd(const bbi_window2d *g, pool_mode mode, size_t planes, const float *x, float *y, int64_t *indices) {
  /* lanes track offsets in 32 bits; the row and column plans hold 16 window positions */
  if (g->ih * g->iw > INT32_MAX || g->kh == 0 || g->kw == 0 || g->kh > 16 || g->kw > 16) {
    pool_scalar(g, mode != MODE_AVG, planes, x, y, indices);
    return;
  }
  if (mode == MODE_MAX && !indices && g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->dh == 1 &&
      g->dw == 1 && g->ph == 0 && g->pw == 0 && g->ow >= 4 && 2 * g->oh <= g->ih && 2 * g->ow <= g->iw) {
    maxpool_2x2(g, planes, x, y);
    return;
  }
  if (mode == MODE_MAX && !indices && g->kh == 3 && g->kw == 3 && g->sh == 2 && g->sw == 2 && g->dh == 1 &&
      g->dw == 1) {
#if BBI_HAVE_X86_GEMM
    /* the compiler's runtime reads the CPU's features once, before main */
    if (__builtin_cpu_supports("avx512f") && g->ow <= 16 * POOL_MAX_CHUNKS) {
      maxpool_3x3s2_avx512(g, planes, x, y);
      return;
    }
#endif
    maxpool_3x3s2(g, planes, x, y);
    return;
  }
  /* one specialisation per mode, so the inner loop carries no branch on it */
  if (mode == MODE_AVG) pool_rows(g, MODE_AVG, planes, x, y, NULL);
  else if (indices) pool_rows(g, MODE_MAX_INDICES, planes, x, y, indices);
  else pool_rows(g, MODE_MAX, planes, x, y, NULL);
}

void bbi_f32_maxpool2d(const bbi_window2d *g, size_t planes, const float *x, float *y, int64_t *indices) {
  pool_simd(g, MODE_MAX, planes, x, y, indices);
}

void bbi_f32_avgpool2d(const bbi_window2d *g, size_t planes, const float *x, float *y) {
  pool_simd(g, MODE_AVG, planes, x, y, NULL);
}
