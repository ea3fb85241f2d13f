/* Depthwise 2-D convolution on planes (CHW): every channel convolved with its own kh×kw
 * filter, one output channel per input channel.
 *
 * Per channel the plane is first copied into a zero-padded scratch plane (the padding's
 * places, the same for every channel, zeroed once per call) whose columns are
 * split by phase of the stride: padded column j lands in phase j % sw at position j / sw,
 * so the value output column ox reads at kernel column kx sits at position ox + (kx·dw)/sw
 * of phase (kx·dw) % sw — consecutive output columns read consecutive floats whatever the
 * stride, and the inner loop is four (or eight) outputs at a time with unit-stride loads
 * and no test for the border. Each output is bias + the window's products in row-major
 * kernel order, the padding read as 0 and multiplied like any value (as the column matrix
 * of im2col + GEMM does); the scalar twin sums in the same order, so the two agree bit for
 * bit. With AVX-512, 3×3 and 5×5 filters at stride 2 read the input plane directly and
 * split its columns by phase in registers (dw_direct_s2), the same sums without the copy. */
#include <string.h>

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

/* Outputs narrower than this take the channel-lane path. */
#define DW_LANES_BELOW 8

/* The channel-lane path's padded window extent: rows and columns the outputs read. */
static size_t lane_rows(const bbi_window2d *g) { return (g->oh - 1) * g->sh + (g->kh - 1) * g->dh + 1; }
static size_t lane_cols(const bbi_window2d *g) { return (g->ow - 1) * g->sw + (g->kw - 1) * g->dw + 1; }

static int use_lanes16(const bbi_window2d *g);

size_t bbi_f32_dwconv2d_chw_scratch_size(const bbi_window2d *g) {
  if (!g->oh || !g->ow) return 0;
  if (use_lanes16(g)) return (lane_rows(g) * lane_cols(g) + g->oh * g->ow) * 16 * sizeof(float);
  if (g->ow < DW_LANES_BELOW) return (lane_rows(g) * lane_cols(g) + g->oh * g->ow) * 4 * sizeof(float);
  const padded_plane p = padded_shape(g);
  return p.rows * p.phases * p.width * sizeof(float);
}

/* Where the image's columns land in one phase row: positions [begin, end) hold padded
 * columns pos·sw + phase, image column pos·sw + phase - pw; the others are padding. */
static void phase_span(const bbi_window2d *g, const padded_plane *p, size_t phase, size_t *begin, size_t *end) {
  const size_t sw = p->phases;
  size_t b = g->pw > phase ? (g->pw - phase + sw - 1) / sw : 0;
  size_t e = (g->iw + g->pw + sw - 1 - phase) / sw; /* first pos with pos·sw + phase >= iw + pw */
  if (e > p->width) e = p->width;
  if (b > e) b = e;
  *begin = b, *end = e;
}

/* Copies plane x [ih, iw] into the image's places in the phase-split layout. The padding's
 * places are the same for every channel: they are zeroed once per call and never written. */
static void fill_plane(const bbi_window2d *g, const padded_plane *p, const size_t *span, const float *x,
                       float *out) {
  const size_t r_end = g->ph + g->ih < p->rows ? g->ph + g->ih : p->rows;
  for (size_t r = g->ph; r < r_end; r++) {
    const float *src = x + (r - g->ph) * g->iw;
    if (p->phases == 2) { /* one phase starts at image column 0, the other at column 1 */
      const size_t even = g->pw % 2; /* the phase of column 0 (padded column pw) */
      float *de = out + (r * 2 + even) * p->width + span[2 * even];
      float *dodd = out + (r * 2 + 1 - even) * p->width + span[2 * (1 - even)];
      const size_t ne = span[2 * even + 1] - span[2 * even], no = span[3 - 2 * even] - span[2 - 2 * even];
      size_t q = 0;
      for (; q + 4 <= ne && q + 4 <= no; q += 4) { /* reads columns 2q to 2q + 7 < 2·no <= iw */
        const bbi_f32x4 a = bbi_f32x4_load(src + 2 * q), b = bbi_f32x4_load(src + 2 * q + 4);
        bbi_f32x4_store(de + q, BBI_F32X4_SHUFFLE(a, b, 0, 2, 4, 6));
        bbi_f32x4_store(dodd + q, BBI_F32X4_SHUFFLE(a, b, 1, 3, 5, 7));
      }
      for (size_t i = q; i < ne; i++) de[i] = src[2 * i];
      for (size_t i = q; i < no; i++) dodd[i] = src[2 * i + 1];
      continue;
    }
    for (size_t phase = 0; phase < p->phases; phase++) {
      float *dst = out + (r * p->phases + phase) * p->width;
      const size_t b = span[2 * phase], e = span[2 * phase + 1];
      const float *s = src + b * p->phases + phase - g->pw;
      if (p->phases == 1) memcpy(dst + b, s, (e - b) * sizeof(float));
      else
        for (size_t pos = b; pos < e; pos++) dst[pos] = s[(pos - b) * p->phases];
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

/* Sets up the zero-padded plane of pixels `width` floats apart in `scratch` (lane_rows ×
 * lane_cols pixels, zeroed): the input rows and columns that land inside it, each tap's
 * offset in floats, and where the outputs go after it (returned). */
BBI_INLINE float *dw_lane_plane(const bbi_window2d *g, size_t width, float *scratch, size_t *iy_end, size_t *ix_end,
                                size_t off[DW_MAX_TAPS]) {
  const size_t rows = lane_rows(g), cols = lane_cols(g);
  memset(scratch, 0, rows * cols * width * sizeof(float));
  *iy_end = rows > g->ph ? (g->ih < rows - g->ph ? g->ih : rows - g->ph) : 0;
  *ix_end = cols > g->pw ? (g->iw < cols - g->pw ? g->iw : cols - g->pw) : 0;
  for (size_t ky = 0; ky < g->kh; ky++)
    for (size_t kx = 0; kx < g->kw; kx++) off[ky * g->kw + kx] = (ky * g->dh * cols + kx * g->dw) * width;
  return scratch + rows * cols * width;
}

/* Interleaves four input planes (xs, rows iy < iy_end and columns ix < ix_end of each) into
 * a zero-padded plane of pixels `width` floats apart: pixel (iy, ix) of plane l goes to
 * scratch[((iy + ph) * cols + pw + ix) * width + l]. Four pixels at a time by a 4×4 transpose. */
BBI_INLINE void dw_interleave4(const bbi_window2d *g, const float *const xs[4], size_t iy_end, size_t ix_end,
                               size_t cols, size_t width, float *scratch) {
  for (size_t iy = 0; iy < iy_end; iy++) {
    float *dst = scratch + ((iy + g->ph) * cols + g->pw) * width;
    const size_t at = iy * g->iw;
    size_t ix = 0;
    for (; ix + 4 <= ix_end; ix += 4) {
      bbi_f32x4 r[4];
      for (size_t l = 0; l < 4; l++) r[l] = bbi_f32x4_load(xs[l] + at + ix);
      bbi_f32x4_transpose(r);
      for (size_t q = 0; q < 4; q++) bbi_f32x4_store(dst + (ix + q) * width, r[q]);
    }
    for (; ix < ix_end; ix++)
      for (size_t l = 0; l < 4; l++) dst[ix * width + l] = xs[l][at + ix];
  }
}

/* One output of four channels: bias + the window's products in row-major kernel order. */
BBI_INLINE bbi_f32x4 dw_lane_point(size_t KK, const float *src, const size_t *off, const bbi_f32x4 *wv,
                                   bbi_f32x4 acc) {
  BBI_UNROLL for (size_t k = 0; k < KK; k++) acc += wv[k] * bbi_f32x4_load(src + off[k]);
  return acc;
}

/* Narrow outputs (the last stages of MobileNet and EfficientNet: 2×2 to 7×7 planes of
 * hundreds of channels), four channels at a time, one in each lane: the four planes are
 * interleaved into a zero-padded plane of vectors (pixel by pixel, the padding zeroed once
 * per call), every output is then one vector of four channels whatever the stride, and
 * the results are deinterleaved into their planes. */
static void dw_lanes(const bbi_window2d *g, size_t channels, const float *x, const float *w, const float *bias,
                     float *y, float *scratch) {
  const size_t cols = lane_cols(g), taps = g->kh * g->kw;
  const size_t plane_in = g->ih * g->iw, plane_out = g->oh * g->ow;
  size_t iy_end, ix_end, off[DW_MAX_TAPS];
  float *out = dw_lane_plane(g, 4, scratch, &iy_end, &ix_end, off);
  for (size_t c0 = 0; c0 < channels; c0 += 4) {
    const size_t nc = channels - c0 < 4 ? channels - c0 : 4;
    const float *xs[4];
    for (size_t l = 0; l < 4; l++) xs[l] = x + (c0 + (l < nc ? l : 0)) * plane_in; /* spare lanes: never stored */
    dw_interleave4(g, xs, iy_end, ix_end, cols, 4, scratch);
    bbi_f32x4 wv[DW_MAX_TAPS], acc0 = bbi_f32x4_splat(0.0f);
    for (size_t k = 0; k < taps; k++) {
      wv[k] = bbi_f32x4_splat(0.0f);
      for (size_t l = 0; l < nc; l++) wv[k][l] = w[(c0 + l) * taps + k];
    }
    for (size_t l = 0; l < nc && bias; l++) acc0[l] = bias[c0 + l];
    for (size_t oy = 0; oy < g->oh; oy++)
      for (size_t ox = 0; ox < g->ow; ox++) {
        const float *src = scratch + (oy * g->sh * cols + ox * g->sw) * 4;
        bbi_f32x4 a;
        if (taps == 9) a = dw_lane_point(9, src, off, wv, acc0);
        else if (taps == 25) a = dw_lane_point(25, src, off, wv, acc0);
        else a = dw_lane_point(taps, src, off, wv, acc0);
        bbi_f32x4_store(out + (oy * g->ow + ox) * 4, a);
      }
    size_t p = 0;
    if (nc == 4)
      for (; p + 4 <= plane_out; p += 4) {
        bbi_f32x4 r[4];
        for (size_t q = 0; q < 4; q++) r[q] = bbi_f32x4_load(out + (p + q) * 4);
        bbi_f32x4_transpose(r);
        for (size_t l = 0; l < 4; l++) bbi_f32x4_store(y + (c0 + l) * plane_out + p, r[l]);
      }
    for (; p < plane_out; p++)
      for (size_t l = 0; l < nc; l++) y[(c0 + l) * plane_out + p] = out[p * 4 + l];
  }
}

#if BBI_HAVE_X86_GEMM
#include <immintrin.h>

/* Natively on x86-64 with AVX-512 the channel-lane path takes sixteen channels a vector
 * (outputs narrower than 16 columns), and wider rows sixteen outputs a vector: lane for
 * lane the four-lane code's operations in its order (bias, then each tap's product added,
 * no multiply-add contracted), so the same bits. Planes are interleaved and results
 * put back by 4×4 transposes; the spare lanes of a last group are computed, never stored. */
#define DW16 __attribute__((target("avx512f")))
#define DW16_INLINE DW16 static inline __attribute__((always_inline))

/* The fused Clip in the store (clip NULL: none): min(max(v, lo), hi) as vec.h's
 * (v < lo ? lo : v, then hi < t ? hi : t: maxps(lo, v) and minps(hi, t) return their second
 * operand for NaN and for equal values), so the same bits as bbi_f32_vactivate's Clip. */
DW16_INLINE __m512 dw16_clip(const bbi_f32_activation *clip, __m512 v) {
  if (!clip) return v;
  return _mm512_min_ps(_mm512_set1_ps(clip->max), _mm512_max_ps(_mm512_set1_ps(clip->min), v));
}

/* wv: tap k's sixteen lanes at wv + 16·k */
DW16_INLINE __m512 dw16_point(size_t KK, const float *src, const size_t *off, const float *wv, __m512 acc) {
  BBI_UNROLL for (size_t k = 0; k < KK; k++)
    acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_loadu_ps(wv + 16 * k), _mm512_loadu_ps(src + off[k])));
  return acc;
}

/* The same sum under an undilated KH×KW filter, tap (ky, kx) at src + ky·row + 16·kx: the
 * taps' addresses from the row's stride rather than an offset table (bias, then the
 * products in row-major order: dw16_point's sums). wk holds the taps' weights. */
DW16_INLINE __m512 dw16_point_rows(size_t KH, size_t KW, const float *src, size_t row, const __m512 *wk,
                                   __m512 acc) {
  BBI_UNROLL for (size_t ky = 0; ky < KH; ky++) {
    BBI_UNROLL for (size_t kx = 0; kx < KW; kx++)
      acc = _mm512_add_ps(acc, _mm512_mul_ps(wk[ky * KW + kx], _mm512_loadu_ps(src + ky * row + 16 * kx)));
  }
  return acc;
}

/* Every output of a group of sixteen channels under an undilated K×K filter (K = 3: the
 * weights held in registers; K = 5 loads them per output), two outputs of a row side by
 * side so that their chains of adds overlap. */
DW16_INLINE void dw16_plane_rows(size_t K, const bbi_window2d *g, size_t cols, const float *scratch,
                                 const float *wv, __m512 acc0, const bbi_f32_activation *clip, float *out) {
  __m512 wk[25];
  BBI_UNROLL for (size_t k = 0; k < K * K; k++) wk[k] = _mm512_loadu_ps(wv + 16 * k);
  const size_t row = cols * 16, step = g->sw * 16;
  for (size_t oy = 0; oy < g->oh; oy++) {
    const float *src = scratch + oy * g->sh * row;
    float *o = out + oy * g->ow * 16;
    size_t ox = 0;
    for (; ox + 2 <= g->ow; ox += 2, src += 2 * step, o += 32) {
      const __m512 a = dw16_point_rows(K, K, src, row, wk, acc0);
      const __m512 b = dw16_point_rows(K, K, src + step, row, wk, acc0);
      _mm512_storeu_ps(o, dw16_clip(clip, a));
      _mm512_storeu_ps(o + 16, dw16_clip(clip, b));
    }
    if (ox < g->ow) _mm512_storeu_ps(o, dw16_clip(clip, dw16_point_rows(K, K, src, row, wk, acc0)));
  }
}

DW16 static void dw_lanes16(const bbi_window2d *g, size_t channels, const float *x, const float *w,
                            const float *lanes, const float *bias, const bbi_f32_activation *clip, float *y,
                            float *scratch) {
  const size_t cols = lane_cols(g), taps = g->kh * g->kw;
  const size_t plane_in = g->ih * g->iw, plane_out = g->oh * g->ow;
  size_t iy_end, ix_end, off[DW_MAX_TAPS];
  float *out = dw_lane_plane(g, 16, scratch, &iy_end, &ix_end, off);
  const __m512 zero = _mm512_setzero_ps();
  const __m512i tap_index = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                               _mm512_set1_epi32((int)taps));
  float gathered[DW_MAX_TAPS * 16];
  for (size_t c0 = 0; c0 < channels; c0 += 16) {
    const size_t nc = channels - c0 < 16 ? channels - c0 : 16;
    const __mmask16 m = (__mmask16)(nc == 16 ? 0xffffu : (1u << nc) - 1u);
    /* the planes interleaved four channels at a time by 4×4 transposes (spare lanes read
     * the group's first channel and are never stored) */
    for (size_t l0 = 0; l0 < 16; l0 += 4) {
      const float *xs[4];
      for (size_t l = 0; l < 4; l++) xs[l] = x + (c0 + (l0 + l < nc ? l0 + l : 0)) * plane_in;
      dw_interleave4(g, xs, iy_end, ix_end, cols, 16, scratch + l0);
    }
    /* tap k of the group's channels, one per lane: laid out already, or gathered (lane l
     * reads w[(c0 + l)·taps + k]); spare lanes hold 0 */
    const float *wv = lanes ? lanes + c0 * taps : gathered;
    for (size_t k = 0; !lanes && k < taps; k++)
      _mm512_storeu_ps(gathered + 16 * k, _mm512_mask_i32gather_ps(zero, m, tap_index, w + c0 * taps + k, 4));
    const __m512 acc0 = bias ? _mm512_maskz_loadu_ps(m, bias + c0) : zero;
    if (g->kh == g->kw && (g->kh == 3 || g->kh == 5) && g->dh == 1 && g->dw == 1) {
      if (g->kh == 3) dw16_plane_rows(3, g, cols, scratch, wv, acc0, clip, out);
      else dw16_plane_rows(5, g, cols, scratch, wv, acc0, clip, out);
    } else {
      for (size_t oy = 0; oy < g->oh; oy++)
        for (size_t ox = 0; ox < g->ow; ox++) {
          const float *src = scratch + (oy * g->sh * cols + ox * g->sw) * 16;
          __m512 a;
          if (taps == 9) a = dw16_point(9, src, off, wv, acc0);
          else if (taps == 25) a = dw16_point(25, src, off, wv, acc0);
          else a = dw16_point(taps, src, off, wv, acc0);
          _mm512_storeu_ps(out + (oy * g->ow + ox) * 16, dw16_clip(clip, a));
        }
    }
    /* back to planes, four channels and four positions a transpose */
    for (size_t l0 = 0; l0 < nc; l0 += 4) {
      float *yc = y + (c0 + l0) * plane_out;
      size_t p = 0;
      if (nc - l0 >= 4)
        for (; p + 4 <= plane_out; p += 4) {
          bbi_f32x4 r[4];
          for (size_t q = 0; q < 4; q++) r[q] = bbi_f32x4_load(out + (p + q) * 16 + l0);
          bbi_f32x4_transpose(r);
          for (size_t l = 0; l < 4; l++) bbi_f32x4_store(yc + l * plane_out + p, r[l]);
        }
      for (; p < plane_out; p++)
        for (size_t l = 0; l < 4 && l0 + l < nc; l++) yc[l * plane_out + p] = out[p * 16 + l0 + l];
    }
  }
}

/* Square planes of 4 or 16 pixels (2×2 and 4×4 maps) under a stride-1, undilated window whose
 * output is the input's size: a vector holds whole planes (16 / P channels of P pixels,
 * contiguous in memory as they are), so nothing is interleaved. Each tap's inputs are the
 * vector's lanes moved by a permute, the lanes outside the plane zeroed by its mask; the
 * sums are bias, then every tap's product (a padding tap's with 0) in row-major order,
 * multiplies and adds: the scalar twin's bits. */
static int planes_in_lanes(const bbi_window2d *g) {
  return (g->ih == 2 || g->ih == 4) && g->iw == g->ih && g->oh == g->ih && g->ow == g->iw && g->sh == 1 && g->sw == 1 &&
         g->dh == 1 && g->dw == 1 && g->kh * g->kw <= 25 && g->ph < g->kh && g->pw < g->kw;
}

/* A 16-pixel plane's sum: bias (in acc), then tap k's weight (wc[16·k], broadcast) times
 * the plane moved by tap k's permute, in order. */
DW16_INLINE __m512 dw16_plane_taps(size_t K, const int32_t (*idx)[16], const __mmask16 *inside, const float *wc,
                                   __m512 v, __m512 acc) {
  BBI_UNROLL for (size_t k = 0; k < K; k++) {
    const __m512 xk = _mm512_maskz_permutexvar_ps(inside[k], _mm512_loadu_si512(idx[k]), v);
    acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_set1_ps(wc[16 * k]), xk));
  }
  return acc;
}

/* The same for the planes of two channels side by side (two chains of adds in flight):
 * each sum as dw16_plane_taps makes it. */
DW16_INLINE void dw16_plane_taps2(size_t K, const int32_t (*idx)[16], const __mmask16 *inside, const float *wc,
                                  __m512 v0, __m512 v1, __m512 *acc0, __m512 *acc1) {
  __m512 a0 = *acc0, a1 = *acc1;
  BBI_UNROLL for (size_t k = 0; k < K; k++) {
    const __m512i ik = _mm512_loadu_si512(idx[k]);
    a0 = _mm512_add_ps(a0, _mm512_mul_ps(_mm512_set1_ps(wc[16 * k]), _mm512_maskz_permutexvar_ps(inside[k], ik, v0)));
    a1 = _mm512_add_ps(a1, _mm512_mul_ps(_mm512_set1_ps(wc[16 * k + 1]), _mm512_maskz_permutexvar_ps(inside[k], ik, v1)));
  }
  *acc0 = a0, *acc1 = a1;
}

DW16 static void dw_planes16(const bbi_window2d *g, size_t channels, const float *x, const float *w,
                             const float *lanes, const float *bias, const bbi_f32_activation *clip, float *y) {
  const size_t P = g->ih * g->iw, per = 16 / P, taps = g->kh * g->kw;
  /* tap k: lane l (channel l / P, pixel l % P) reads lane idx[k][l], or 0 where mask bit l
   * is clear; made with vector compares, since a call may take as few as sixteen channels */
  int32_t idx[25][16];
  __mmask16 inside[25];
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const int shift_w = g->iw == 2 ? 1 : 2; /* iw is 2 or 4 */
  const __m512i pix = _mm512_and_si512(lane, _mm512_set1_epi32((int)P - 1));
  const __m512i base = _mm512_sub_epi32(lane, pix); /* the lane of the channel's pixel 0 */
  const __m512i oy = _mm512_srli_epi32(pix, (unsigned)shift_w), ox = _mm512_and_si512(pix, _mm512_set1_epi32((int)g->iw - 1));
  const __m512i zero_i = _mm512_setzero_si512(), ih = _mm512_set1_epi32((int)g->ih), iw = _mm512_set1_epi32((int)g->iw);
  for (size_t ky = 0; ky < g->kh; ky++)
    for (size_t kx = 0; kx < g->kw; kx++) {
      const size_t k = ky * g->kw + kx;
      const __m512i iy = _mm512_add_epi32(oy, _mm512_set1_epi32((int)ky - (int)g->ph));
      const __m512i ix = _mm512_add_epi32(ox, _mm512_set1_epi32((int)kx - (int)g->pw));
      const __mmask16 in = _mm512_cmpge_epi32_mask(iy, zero_i) & _mm512_cmplt_epi32_mask(iy, ih) &
                           _mm512_cmpge_epi32_mask(ix, zero_i) & _mm512_cmplt_epi32_mask(ix, iw);
      const __m512i at = _mm512_add_epi32(base, _mm512_add_epi32(_mm512_slli_epi32(iy, (unsigned)shift_w), ix));
      _mm512_storeu_si512(idx[k], _mm512_maskz_mov_epi32(in, at));
      inside[k] = in;
    }
  const __m512 zero = _mm512_setzero_ps();
  const __m512i tap_index = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                               _mm512_set1_epi32((int)taps));
  float gathered[25 * 16];
  for (size_t c0 = 0; c0 < channels; c0 += 16) {
    const size_t group = channels - c0 < 16 ? channels - c0 : 16;
    const __mmask16 gm = (__mmask16)(group == 16 ? 0xffffu : (1u << group) - 1u);
    /* tap k of the group's channels, one per lane (as dw_lanes16 lays them out) */
    const float *wv = lanes ? lanes + c0 * taps : gathered;
    for (size_t k = 0; !lanes && k < taps; k++)
      _mm512_storeu_ps(gathered + 16 * k, _mm512_mask_i32gather_ps(zero, gm, tap_index, w + c0 * taps + k, 4));
    const __m512 b16 = bias ? _mm512_maskz_loadu_ps(gm, bias + c0) : zero;
    size_t c = c0;
    for (; P == 16 && c + 2 <= c0 + group; c += 2) { /* two channels at once */
      const float *wc = wv + (c - c0);
      const __m512 v0 = _mm512_loadu_ps(x + c * P), v1 = _mm512_loadu_ps(x + (c + 1) * P);
      __m512 a0 = _mm512_set1_ps(bias ? bias[c] : 0.0f), a1 = _mm512_set1_ps(bias ? bias[c + 1] : 0.0f);
      if (taps == 9) dw16_plane_taps2(9, idx, inside, wc, v0, v1, &a0, &a1);
      else if (taps == 25) dw16_plane_taps2(25, idx, inside, wc, v0, v1, &a0, &a1);
      else dw16_plane_taps2(taps, idx, inside, wc, v0, v1, &a0, &a1);
      _mm512_storeu_ps(y + c * P, dw16_clip(clip, a0));
      _mm512_storeu_ps(y + (c + 1) * P, dw16_clip(clip, a1));
    }
    const __m512i quads = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    for (; P == 4 && c + 8 <= c0 + group; c += 8) { /* eight channels in two vectors at once */
      const __m512i pick0 = _mm512_add_epi32(_mm512_set1_epi32((int)(c - c0)), quads);
      const __m512i pick1 = _mm512_add_epi32(_mm512_set1_epi32((int)(c + 4 - c0)), quads);
      const __m512 v0 = _mm512_loadu_ps(x + c * P), v1 = _mm512_loadu_ps(x + (c + 4) * P);
      __m512 a0 = _mm512_permutexvar_ps(pick0, b16), a1 = _mm512_permutexvar_ps(pick1, b16);
      for (size_t k = 0; k < taps; k++) {
        const __m512i ik = _mm512_loadu_si512(idx[k]);
        const __m512 w16 = _mm512_loadu_ps(wv + 16 * k);
        a0 = _mm512_add_ps(a0, _mm512_mul_ps(_mm512_permutexvar_ps(pick0, w16), _mm512_maskz_permutexvar_ps(inside[k], ik, v0)));
        a1 = _mm512_add_ps(a1, _mm512_mul_ps(_mm512_permutexvar_ps(pick1, w16), _mm512_maskz_permutexvar_ps(inside[k], ik, v1)));
      }
      _mm512_storeu_ps(y + c * P, dw16_clip(clip, a0));
      _mm512_storeu_ps(y + (c + 4) * P, dw16_clip(clip, a1));
    }
    for (; c < c0 + group; c += per) {
      const size_t nc = c0 + group - c < per ? c0 + group - c : per;
      const __mmask16 m = (__mmask16)(nc * P == 16 ? 0xffffu : (1u << (nc * P)) - 1u);
      const __m512 v = _mm512_maskz_loadu_ps(m, x + c * P);
      __m512 acc;
      if (P == 16) { /* one channel a vector: its weights and bias broadcast */
        const float *wc = wv + (c - c0);
        acc = _mm512_set1_ps(bias ? bias[c] : 0.0f);
        if (taps == 9) acc = dw16_plane_taps(9, idx, inside, wc, v, acc);
        else if (taps == 25) acc = dw16_plane_taps(25, idx, inside, wc, v, acc);
        else acc = dw16_plane_taps(taps, idx, inside, wc, v, acc);
      } else { /* lane l takes the weights and bias of the group's lane c - c0 + l / 4 */
        const __m512i pick = _mm512_add_epi32(_mm512_set1_epi32((int)(c - c0)), quads);
        acc = _mm512_permutexvar_ps(pick, b16);
        for (size_t k = 0; k < taps; k++) {
          const __m512 wk = _mm512_permutexvar_ps(pick, _mm512_loadu_ps(wv + 16 * k));
          const __m512 xk = _mm512_maskz_permutexvar_ps(inside[k], _mm512_loadu_si512(idx[k]), v);
          acc = _mm512_add_ps(acc, _mm512_mul_ps(wk, xk));
        }
      }
      _mm512_mask_storeu_ps(y + c * P, m, dw16_clip(clip, acc));
    }
  }
}

/* Output rows per step of the sixteen-wide plane kernel: each row's sum is its own chain of
 * dependent adds, so several rows side by side keep the adder busy. */
#define DW16_ROWS 4

/* R output rows of one channel from the phase-split scratch plane (dw_row's sums, sixteen
 * outputs a vector, the last vector of a row masked): src points at tap 0 of the first
 * row, row_step floats on to the next row, off[k] from tap 0 to tap k. */
DW16_INLINE void dw_rows16(size_t KK, size_t R, size_t ow, const float *src, size_t row_step, const size_t *off,
                           const __m512 *wv, __m512 b, const bbi_f32_activation *clip, float *y) {
  for (size_t ox = 0; ox < ow; ox += 16) {
    const __mmask16 m = (__mmask16)(ow - ox >= 16 ? 0xffffu : (1u << (ow - ox)) - 1u);
    __m512 a[DW16_ROWS];
    BBI_UNROLL for (size_t r = 0; r < R; r++) a[r] = b;
    BBI_UNROLL for (size_t k = 0; k < KK; k++) {
      const float *s = src + off[k] + ox;
      BBI_UNROLL for (size_t r = 0; r < R; r++)
        a[r] = _mm512_add_ps(a[r], _mm512_mul_ps(wv[k], _mm512_maskz_loadu_ps(m, s + r * row_step)));
    }
    BBI_UNROLL for (size_t r = 0; r < R; r++) _mm512_mask_storeu_ps(y + r * ow + ox, m, dw16_clip(clip, a[r]));
  }
}

/* dw_rows16 for an undilated KH×KW filter at vertical stride SH, each input vector loaded
 * once for all the output rows that read it: padded row q (row_floats apart) at filter row
 * q - r·SH of output row r. Each sum still takes its taps in row-major order (q rising,
 * then kx), the same operations as dw_rows16's, so the same bits with R·KH·KW loads cut
 * to ((R - 1)·SH + KH)·KW. col_off[kx]: kernel column kx's offset in the row. */
DW16_INLINE void dw_rows16_shared(size_t KH, size_t KW, size_t SH, size_t R, size_t ow, const float *src,
                                  size_t row_floats, const size_t *col_off, const __m512 *wv, __m512 b,
                                  const bbi_f32_activation *clip, float *y) {
  for (size_t ox = 0; ox < ow; ox += 16) {
    const __mmask16 m = (__mmask16)(ow - ox >= 16 ? 0xffffu : (1u << (ow - ox)) - 1u);
    __m512 a[DW16_ROWS];
    BBI_UNROLL for (size_t r = 0; r < R; r++) a[r] = b;
    BBI_UNROLL for (size_t q = 0; q < (R - 1) * SH + KH; q++) {
      BBI_UNROLL for (size_t kx = 0; kx < KW; kx++) {
        const __m512 v = _mm512_maskz_loadu_ps(m, src + q * row_floats + col_off[kx] + ox);
        BBI_UNROLL for (size_t r = 0; r < R; r++) {
          if (q < r * SH || q - r * SH >= KH) continue;
          a[r] = _mm512_add_ps(a[r], _mm512_mul_ps(wv[(q - r * SH) * KW + kx], v));
        }
      }
    }
    BBI_UNROLL for (size_t r = 0; r < R; r++) _mm512_mask_storeu_ps(y + r * ow + ox, m, dw16_clip(clip, a[r]));
  }
}

/* dw_plane16_body's rows by dw_rows16_shared. */
DW16_INLINE void dw_plane16_shared(size_t KH, size_t KW, size_t SH, size_t oh, size_t ow, const float *src,
                                   size_t row_floats, const size_t *col_off, const float *w, float bias,
                                   const bbi_f32_activation *clip, float *y) {
  __m512 wv[DW_MAX_TAPS];
  BBI_UNROLL for (size_t k = 0; k < KH * KW; k++) wv[k] = _mm512_set1_ps(w[k]);
  const __m512 b = _mm512_set1_ps(bias);
  const size_t row_step = SH * row_floats;
  size_t oy = 0;
  for (; oy + DW16_ROWS <= oh; oy += DW16_ROWS)
    dw_rows16_shared(KH, KW, SH, DW16_ROWS, ow, src + oy * row_step, row_floats, col_off, wv, b, clip, y + oy * ow);
  for (; oy < oh; oy++)
    dw_rows16_shared(KH, KW, SH, 1, ow, src + oy * row_step, row_floats, col_off, wv, b, clip, y + oy * ow);
}

/* One channel's output plane from its phase-split scratch plane, DW16_ROWS rows a step with
 * the filter's taps held in registers. */
DW16_INLINE void dw_plane16_body(size_t KK, size_t oh, size_t ow, const float *src, size_t row_step,
                                 const size_t *off, const float *w, float bias, const bbi_f32_activation *clip,
                                 float *y) {
  __m512 wv[DW_MAX_TAPS];
  BBI_UNROLL for (size_t k = 0; k < KK; k++) wv[k] = _mm512_set1_ps(w[k]);
  const __m512 b = _mm512_set1_ps(bias);
  size_t oy = 0;
  for (; oy + DW16_ROWS <= oh; oy += DW16_ROWS)
    dw_rows16(KK, DW16_ROWS, ow, src + oy * row_step, row_step, off, wv, b, clip, y + oy * ow);
  for (; oy < oh; oy++) dw_rows16(KK, 1, ow, src + oy * row_step, row_step, off, wv, b, clip, y + oy * ow);
}

/* Stride 2 both ways, undilated K×K (3×3 and 5×5): rows of output straight from the input
 * plane, no scratch copy. For sixteen outputs from column ox0 every padded input row is read
 * as three vectors of image columns from c = 2·ox0 - pw (lanes outside the row masked to 0,
 * the padding; rows outside the image are zero vectors) and split in registers: kernel
 * column kx reads image column c + 2j + kx in lane j, the even and odd columns by one
 * two-source permute each, kx >= 2 by shifting those a lane or two with the third vector's
 * first floats. Each row's vectors are made once for the R output rows that read it, and
 * each sum takes bias, then its taps in row-major order (rows rising, then kx), multiplies
 * and adds uncontracted: dw_rows16's operations on the same values, so the same bits. */
DW16_INLINE __m512 dw16_load_cols(__mmask16 m, const float *row, int64_t c) {
  /* masked-off lanes are never read, so c may lie before or past the row */
  return m ? _mm512_maskz_loadu_ps(m, (const float *)((uintptr_t)row + (uintptr_t)(c * (int64_t)sizeof(float))))
           : _mm512_setzero_ps();
}

/* Lanes j with 0 <= c + j < iw. */
static __mmask16 dw16_col_mask(int64_t c, int64_t iw) {
  const int64_t lo = c < 0 ? (-c < 16 ? -c : 16) : 0, hi = iw - c < 0 ? 0 : (iw - c > 16 ? 16 : iw - c);
  return hi > lo ? (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u)) : 0;
}

DW16_INLINE void dw_rows16_s2(size_t K, size_t R, const bbi_window2d *g, const float *x, int64_t iy0,
                              const __m512 *wv, __m512 b, const bbi_f32_activation *clip, float *y) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const __m512i next1 = _mm512_set_epi32(16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1);
  const __m512i next3 = _mm512_set_epi32(17, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1);
  const __m512i next2 = _mm512_set_epi32(18, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2);
  const int64_t ih = (int64_t)g->ih, iw = (int64_t)g->iw;
  const size_t ow = g->ow;
  for (size_t ox = 0; ox < ow; ox += 16) {
    const __mmask16 m = (__mmask16)(ow - ox >= 16 ? 0xffffu : (1u << (ow - ox)) - 1u);
    const int64_t c = 2 * (int64_t)ox - (int64_t)g->pw;
    const __mmask16 m0 = dw16_col_mask(c, iw), m1 = dw16_col_mask(c + 16, iw);
    const __mmask16 m2 = (__mmask16)(dw16_col_mask(c + 32, iw) & (K > 3 ? 0x7u : 0x1u));
    __m512 a[DW16_ROWS];
    BBI_UNROLL for (size_t r = 0; r < R; r++) a[r] = b;
    BBI_UNROLL for (size_t q = 0; q < (R - 1) * 2 + K; q++) {
      const int64_t iy = iy0 + (int64_t)q;
      __m512 v[5];
      if (iy >= 0 && iy < ih) {
        const float *row = x + iy * iw;
        const __m512 l0 = dw16_load_cols(m0, row, c), l1 = dw16_load_cols(m1, row, c + 16);
        const __m512 l2 = dw16_load_cols(m2, row, c + 32);
        v[0] = _mm512_permutex2var_ps(l0, even, l1);
        v[1] = _mm512_permutex2var_ps(l0, odd, l1);
        v[2] = _mm512_permutex2var_ps(v[0], next1, l2);
        if (K > 3) {
          v[3] = _mm512_permutex2var_ps(v[1], next3, l2);
          v[4] = _mm512_permutex2var_ps(v[0], next2, l2);
        }
      } else {
        BBI_UNROLL for (size_t kx = 0; kx < K; kx++) v[kx] = _mm512_setzero_ps();
      }
      BBI_UNROLL for (size_t kx = 0; kx < K; kx++) {
        BBI_UNROLL for (size_t r = 0; r < R; r++) {
          if (q < r * 2 || q - r * 2 >= K) continue;
          a[r] = _mm512_add_ps(a[r], _mm512_mul_ps(wv[(q - r * 2) * K + kx], v[kx]));
        }
      }
    }
    BBI_UNROLL for (size_t r = 0; r < R; r++) _mm512_mask_storeu_ps(y + r * ow + ox, m, dw16_clip(clip, a[r]));
  }
}

/* One channel's output plane by dw_rows16_s2, DW16_ROWS rows a step. */
DW16_INLINE void dw_plane16_s2(size_t K, const bbi_window2d *g, const float *x, const float *w, float bias,
                               const bbi_f32_activation *clip, float *y) {
  __m512 wv[25];
  BBI_UNROLL for (size_t k = 0; k < K * K; k++) wv[k] = _mm512_set1_ps(w[k]);
  const __m512 b = _mm512_set1_ps(bias);
  const size_t oh = g->oh, ow = g->ow;
  size_t oy = 0;
  for (; oy + DW16_ROWS <= oh; oy += DW16_ROWS)
    dw_rows16_s2(K, DW16_ROWS, g, x, 2 * (int64_t)oy - (int64_t)g->ph, wv, b, clip, y + oy * ow);
  for (; oy < oh; oy++) dw_rows16_s2(K, 1, g, x, 2 * (int64_t)oy - (int64_t)g->ph, wv, b, clip, y + oy * ow);
}

/* The planes of an undilated 3×3 or 5×5 filter at stride 2 both ways, 16 outputs wide and
 * more, straight from the input (dw_plane16_s2); 0 when the layer is not one. */
DW16 static int dw_direct_s2(const bbi_window2d *g, size_t channels, const float *x, const float *w,
                             const float *bias, const bbi_f32_activation *clip, float *y) {
  if (!(g->sh == 2 && g->sw == 2 && g->dh == 1 && g->dw == 1 && g->kh == g->kw && (g->kh == 3 || g->kh == 5) &&
        g->ow >= 16 && g->iw <= (size_t)INT32_MAX && g->ih <= (size_t)INT32_MAX && g->pw <= (size_t)INT32_MAX &&
        g->ph <= (size_t)INT32_MAX && g->ow <= (size_t)INT32_MAX / 2 && g->oh <= (size_t)INT32_MAX / 2))
    return 0;
  const size_t taps = g->kh * g->kw, plane_in = g->ih * g->iw, plane_out = g->oh * g->ow;
  for (size_t c = 0; c < channels; c++) {
    const float b = bias ? bias[c] : 0.0f;
    if (g->kh == 3) dw_plane16_s2(3, g, x + c * plane_in, w + c * taps, b, clip, y + c * plane_out);
    else dw_plane16_s2(5, g, x + c * plane_in, w + c * taps, b, clip, y + c * plane_out);
  }
  return 1;
}

/* MobileNet's and EfficientNet's filters (3×3 and 5×5, undilated, vertical stride 1 or 2)
 * share their loads across rows (dw_plane16_shared); the others load per tap. */
DW16 static void dw_plane16(const bbi_window2d *g, size_t row_floats, size_t width, const float *src, size_t row_step,
                            const size_t *off, const float *w, float bias, const bbi_f32_activation *clip,
                            float *y) {
  const size_t taps = g->kh * g->kw, oh = g->oh, ow = g->ow;
  if (g->dh == 1 && g->dw == 1 && g->kh == g->kw && (g->kh == 3 || g->kh == 5) && (g->sh == 1 || g->sh == 2)) {
    size_t col_off[5];
    for (size_t kx = 0; kx < g->kw; kx++) col_off[kx] = kx % g->sw * width + kx / g->sw;
    if (g->kh == 3 && g->sh == 1) dw_plane16_shared(3, 3, 1, oh, ow, src, row_floats, col_off, w, bias, clip, y);
    else if (g->kh == 3) dw_plane16_shared(3, 3, 2, oh, ow, src, row_floats, col_off, w, bias, clip, y);
    else if (g->sh == 1) dw_plane16_shared(5, 5, 1, oh, ow, src, row_floats, col_off, w, bias, clip, y);
    else dw_plane16_shared(5, 5, 2, oh, ow, src, row_floats, col_off, w, bias, clip, y);
    return;
  }
  if (taps == 9) dw_plane16_body(9, oh, ow, src, row_step, off, w, bias, clip, y);
  else if (taps == 25) dw_plane16_body(25, oh, ow, src, row_step, off, w, bias, clip, y);
  else dw_plane16_body(taps, oh, ow, src, row_step, off, w, bias, clip, y);
}

static int has_avx512(void) {
  static int known = -1;
  if (known < 0) known = __builtin_cpu_supports("avx512f") ? 1 : 0;
  return known;
}

/* The sixteen-lane channel path: outputs narrower than 16 columns, lane offsets in 32 bits. */
static int use_lanes16(const bbi_window2d *g) {
  return has_avx512() && g->ow < 16 && g->kh * g->kw <= DW_MAX_TAPS && g->sw <= 16 &&
         g->ih * g->iw <= (size_t)INT32_MAX / 16 && g->oh * g->ow <= (size_t)INT32_MAX / 16 &&
         g->kh * g->kw <= (size_t)INT32_MAX / 16;
}
#else
static int use_lanes16(const bbi_window2d *g) {
  (void)g;
  return 0;
}
#endif

#define DW_MAX_PHASES 16 /* strides up to 16 take the vector path */

size_t bbi_f32_dwconv2d_lanes_floats(const bbi_window2d *g, size_t channels) {
  if (!g->oh || !g->ow || !use_lanes16(g)) return 0;
  return (channels + 15) / 16 * 16 * g->kh * g->kw;
}

void bbi_f32_dwconv2d_pack_lanes(const bbi_window2d *g, size_t channels, const float *w, float *lanes) {
  const size_t taps = g->kh * g->kw;
  for (size_t c0 = 0; c0 < channels; c0 += 16)
    for (size_t k = 0; k < taps; k++)
      for (size_t l = 0; l < 16; l++) lanes[c0 * taps + k * 16 + l] = c0 + l < channels ? w[(c0 + l) * taps + k] : 0.0f;
}

void bbi_f32_dwconv2d_chw(const bbi_window2d *g, size_t channels, const float *x, const float *w,
                          const float *bias, float *y, float *scratch) {
  bbi_f32_dwconv2d_chw_lanes(g, channels, x, w, NULL, bias, y, scratch);
}

void bbi_f32_dwconv2d_chw_lanes(const bbi_window2d *g, size_t channels, const float *x, const float *w,
                                const float *lanes, const float *bias, float *y, float *scratch) {
  bbi_f32_dwconv2d_chw_fused(g, channels, x, w, lanes, bias, NULL, NULL, y, scratch);
}

/* The convolution, with `clip` (NULL: none) in the sixteen-lane paths' stores; returns
 * whether it went there. */
static int dw_run(const bbi_window2d *g, size_t channels, const float *x, const float *w, const float *lanes,
                  const float *bias, const bbi_f32_activation *clip, float *y, float *scratch) {
  (void)lanes, (void)clip; /* read by the sixteen-lane paths only */
  const size_t taps = g->kh * g->kw;
  if (taps > DW_MAX_TAPS || g->sw > DW_MAX_PHASES) {
    bbi_f32_dwconv2d_chw_scalar(g, channels, x, w, bias, y);
    return 0;
  }
  if (!g->oh || !g->ow || !channels) return 0;
#if BBI_HAVE_X86_GEMM
  if (has_avx512() && planes_in_lanes(g)) {
    dw_planes16(g, channels, x, w, lanes, bias, clip, y);
    return 1;
  }
  if (use_lanes16(g)) {
    dw_lanes16(g, channels, x, w, lanes, bias, clip, y, scratch);
    return 1;
  }
  const int wide = has_avx512(); /* rows of 16 columns and more, sixteen outputs a vector */
#endif
  if (g->ow < DW_LANES_BELOW) {
    dw_lanes(g, channels, x, w, bias, y, scratch);
    return 0;
  }
#if BBI_HAVE_X86_GEMM
  if (wide && dw_direct_s2(g, channels, x, w, bias, clip, y)) return 1;
#endif
  const padded_plane p = padded_shape(g);
  memset(scratch, 0, p.rows * p.phases * p.width * sizeof(float));
  size_t span[2 * DW_MAX_PHASES];
  for (size_t phase = 0; phase < p.phases; phase++) phase_span(g, &p, phase, span + 2 * phase, span + 2 * phase + 1);
  size_t offset[DW_MAX_TAPS]; /* where tap k's row 0 starts in the scratch plane */
  for (size_t ky = 0; ky < g->kh; ky++)
    for (size_t kx = 0; kx < g->kw; kx++) {
      const size_t col = kx * g->dw;
      offset[ky * g->kw + kx] = (ky * g->dh * p.phases + col % p.phases) * p.width + col / p.phases;
    }
  const size_t row_step = g->sh * p.phases * p.width;
  for (size_t c = 0; c < channels; c++) {
    fill_plane(g, &p, span, x + c * g->ih * g->iw, scratch);
    const float b = bias ? bias[c] : 0.0f;
    float *yc = y + c * g->oh * g->ow;
#if BBI_HAVE_X86_GEMM
    if (wide) {
      dw_plane16(g, p.phases * p.width, p.width, scratch, row_step, offset, w + c * taps, b, clip, yc);
      continue;
    }
#endif
    bbi_f32x4 wv[DW_MAX_TAPS];
    for (size_t k = 0; k < taps; k++) wv[k] = bbi_f32x4_splat(w[c * taps + k]);
    const float *src[DW_MAX_TAPS];
    for (size_t k = 0; k < taps; k++) src[k] = scratch + offset[k];
    for (size_t oy = 0; oy < g->oh; oy++) {
      float *yr = yc + oy * g->ow;
      if (taps == 9) dw_row(9, g->ow, src, wv, b, yr);
      else if (taps == 25) dw_row(25, g->ow, src, wv, b, yr);
      else dw_row(taps, g->ow, src, wv, b, yr);
      for (size_t k = 0; k < taps; k++) src[k] += row_step;
    }
  }
#if BBI_HAVE_X86_GEMM
  return wide;
#else
  return 0;
#endif
}

void bbi_f32_dwconv2d_chw_fused(const bbi_window2d *g, size_t channels, const float *x, const float *w,
                                const float *lanes, const float *bias, const bbi_f32_activation *act,
                                const float *addend, float *y, float *scratch) {
  /* a Clip with nothing added goes into the stores where the kernel takes it */
  const bbi_f32_activation *clip = act && !addend && act->kind == BBI_ACTIVATION_CLIP ? act : NULL;
  if (dw_run(g, channels, x, w, lanes, bias, clip, y, scratch) && clip) return;
  if (act) bbi_f32_vactivate(act, channels * g->oh * g->ow, addend, y);
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
