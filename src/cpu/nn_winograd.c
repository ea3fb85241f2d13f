/* Winograd's F(2×2, 3×3) for float 3×3 convolutions (stride 1, dilation 1, one group) in
 * a session whose weights are constants: each 2×2 block of outputs (a tile) comes from the
 * tile's 4×4 input patch d as Aᵀ[U ⊙ (Bᵀ d B)]A, where U = G g Gᵀ is the 4×4 transform of
 * each 3×3 kernel g, made once per session (in double, rounded once) and kept in the
 * node's cache beside its GEMM packing. Summed over input channels, the 16 points ⊙ become
 * 16 GEMMs on the packed GEMM kernels, O_e [M, tiles] = U_e [M, C] · V_e [C, tiles] (or,
 * with few tiles, O_eᵀ with tiles as the GEMM's rows): 16 multiplies where the direct
 * convolution does 36 for 2×2 outputs of a channel pair. Which shapes take it is
 * winograd_pays's rule, measured per build.
 *
 * Tiles go in blocks of whole tile rows (across images when an image has few), the block
 * size following the shape alone; a block's input transform, 16 products and output
 * transform compute each output the same way whichever participant runs them, so any
 * number of threads gives the same bits. The output transform adds the bias, then the
 * fused epilogue (addend, activation) by its own rules.
 *
 * Where it applies (docs/DEVIATIONS.md): the result is within a bound of the direct
 * convolution's, not its bits; with a NaN or an infinity anywhere in the output (from the
 * input, or from a finite value the transforms took past the float range) the direct
 * path computes the convolution again, so non-finite values propagate as the direct
 * convolution propagates them; weights with a non-finite value never take this path. */
#include <math.h>
#include <string.h>

#include "cpu/nn.h"
#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"
#include "util/parallel.h"

#define POINTS 16 /* the 4×4 transformed points of a tile */

/* Bytes of a block's transformed input and products, at most: a block is written, then
 * read by its 16 products while in L2. */
#define WINO_BLOCK_BYTES ((size_t)512 << 10)

/* What the node's cache holds: this header, U as 16 matrices [M, C] (the products of one
 * row or one column take it as it is), then each point's U packed as the GEMM's A. */
typedef struct wino_weights {
  int finite; /* every weight is finite */
} wino_weights;

typedef struct wino_job {
  const bbi_window2d *win;
  size_t c, m, th, tw, block_rows, rows, blocks; /* rows: tile rows of the whole batch */
  const float *x, *b;
  float *y;
  const float *u;
  /* false: O_e [M, tiles] = U_e · V_e, U_e packed as the GEMM's A; true (few tiles, fewer
   * than a GEMM tile is wide): O_e [tiles, M] = V_eᵀ · U_eᵀ, U_e packed as its B */
  bool tiles_as_rows;
  const char *packed;
  size_t pack_stride;
  /* floats from one point's V (O) to the next: a block's C (M) rows of tiles and 64 bytes
   * more, so the 16 points' streams do not fall on one cache set (O's 64 bytes also hold
   * what output_row's tail vectors read past its last row) */
  size_t v_point, o_point;
  bbi_cpu_epilogue *e;
  /* scratch: a block's V [16][C][tiles] at v_at and products O [16][M][tiles] at o_at
   * (block_bytes in all); in a participant's slot (slot_bytes) its padded input rows
   * (row_len floats each) at rows_at and its GEMM scratch at gemm_at */
  char *mem;
  size_t v_at, o_at, slot_bytes, row_len, rows_at, gemm_at, gemm_bytes, block_bytes;
  /* the block (by_block: the first of the job's) and the phases' groups of channels */
  size_t block, group;
  char *block_mem;
  int rc[BBI_PARALLEL_MAX_THREADS];
  bool bad[BBI_PARALLEL_MAX_THREADS]; /* a participant wrote a non-finite output */
} wino_job;

static size_t block_tiles(const wino_job *j, size_t blk, size_t *row0) {
  *row0 = blk * j->block_rows;
  const size_t row1 = *row0 + j->block_rows < j->rows ? *row0 + j->block_rows : j->rows;
  return (row1 - *row0) * j->tw;
}

/* U_e[m][c] = (G g Gᵀ)_e for each kernel g = W[m][c] (G = [1 0 0; ½ ½ ½; ½ -½ ½; 0 0 1]),
 * in double; returns whether every weight is finite. */
static bool transform_weights(const float *w, size_t m_out, size_t c_in, float *u) {
  static const double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  bool finite = true;
  for (size_t m = 0; m < m_out; m++)
    for (size_t c = 0; c < c_in; c++) {
      const float *g = w + (m * c_in + c) * 9;
      double t[4][3];
      for (int i = 0; i < 9; i++) finite = finite && isfinite(g[i]);
      for (int i = 0; i < 4; i++)
        for (int k = 0; k < 3; k++) t[i][k] = G[i][0] * g[k] + G[i][1] * g[3 + k] + G[i][2] * g[6 + k];
      for (int i = 0; i < 4; i++)
        for (int l = 0; l < 4; l++)
          u[((size_t)(i * 4 + l) * m_out + m) * c_in + c] =
              (float)(t[i][0] * G[l][0] + t[i][1] * G[l][1] + t[i][2] * G[l][2]);
    }
  return finite;
}

/* Bᵀ d B for the tiles of one tile row, d the 4×4 patches of padded rows p[0..3] (tile x's
 * at columns 2x..2x+3; rows readable through column 2·w + 5, w = tw rounded up to a
 * multiple of four), Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]: point e of tile x goes
 * to v[e·stride + x]. Four tiles a step: column k of their patches is the even or odd
 * lanes of two loads; the rows' transform, then the columns'. */
static void input_row(size_t tw, const float *const p[4], float *v, size_t stride) {
  for (size_t x = 0; x < tw; x += 4) {
    bbi_f32x4 col[4][4], t[4][4], out[POINTS];
    for (int i = 0; i < 4; i++) {
      const float *r = p[i] + 2 * x;
      const bbi_f32x4 a = bbi_f32x4_load(r), b = bbi_f32x4_load(r + 4);
      const bbi_f32x4 c = bbi_f32x4_load(r + 2), d = bbi_f32x4_load(r + 6);
      col[i][0] = BBI_F32X4_SHUFFLE(a, b, 0, 2, 4, 6), col[i][1] = BBI_F32X4_SHUFFLE(a, b, 1, 3, 5, 7);
      col[i][2] = BBI_F32X4_SHUFFLE(c, d, 0, 2, 4, 6), col[i][3] = BBI_F32X4_SHUFFLE(c, d, 1, 3, 5, 7);
    }
    for (int k = 0; k < 4; k++) {
      t[0][k] = col[0][k] - col[2][k], t[1][k] = col[1][k] + col[2][k];
      t[2][k] = col[2][k] - col[1][k], t[3][k] = col[1][k] - col[3][k];
    }
    for (int i = 0; i < 4; i++) {
      out[4 * i + 0] = t[i][0] - t[i][2], out[4 * i + 1] = t[i][1] + t[i][2];
      out[4 * i + 2] = t[i][2] - t[i][1], out[4 * i + 3] = t[i][1] - t[i][3];
    }
    if (x + 4 <= tw) {
      for (int e = 0; e < POINTS; e++) bbi_f32x4_store(v + e * stride + x, out[e]);
    } else {
      for (int e = 0; e < POINTS; e++) bbi_f32x4_store_tail(v + e * stride + x, out[e], tw - x);
    }
  }
}

/* Channels [c0, c1) of a block's tiles into V: per image's run of tile rows in the block,
 * the input rows it reads copied once into `rows` with the padding's zeros (row_len floats
 * a row), then each tile row's transform. */
static void input_transform(const wino_job *j, size_t row0, size_t tiles, size_t c0, size_t c1, float *v,
                            float *rows) {
  const bbi_window2d *g = j->win;
  const size_t tw = j->tw, len = j->row_len, plane = g->ih * g->iw, n_rows = tiles / tw;
  const size_t stride = j->v_point;
  const size_t left = g->pw < len ? g->pw : len, inside = g->iw < len - left ? g->iw : len - left;
  for (size_t c = c0; c < c1; c++)
    for (size_t r = 0; r < n_rows;) {
      const size_t n = (row0 + r) / j->th, ty = (row0 + r) % j->th;
      const size_t span = j->th - ty < n_rows - r ? j->th - ty : n_rows - r;
      const float *xc = j->x + (n * j->c + c) * plane;
      for (size_t i = 0; i < 2 * span + 2; i++) {
        float *d = rows + i * len;
        const ptrdiff_t iy = (ptrdiff_t)(2 * ty + i) - (ptrdiff_t)g->ph;
        bbi_f32_padded_row(d, len, left, iy < 0 || iy >= (ptrdiff_t)g->ih ? NULL : xc + (size_t)iy * g->iw, inside);
      }
      for (size_t k = 0; k < span; k++) {
        const float *p = rows + 2 * k * len, *pr[4] = {p, p + len, p + 2 * len, p + 3 * len};
        input_row(tw, pr, v + c * tiles + (r + k) * tw, stride);
      }
      r += span;
    }
}

/* Point e's product on the caller alone: O_e [M, tiles] = U_e · V_e, or with tiles as
 * rows O_e [tiles, M] = V_eᵀ · U_eᵀ. */
static int point_product(const wino_job *j, size_t tiles, size_t e, const float *v, float *o, void *scratch) {
  bbi_f32_gemm_args a;
  memset(&a, 0, sizeof a);
  a.alpha = 1.0f;
  if (j->tiles_as_rows) {
    a.m = tiles, a.n = j->m, a.k = j->c;
    a.trans_a = 1, a.a = v + e * j->v_point, a.lda = tiles;
    a.trans_b = 1, a.b = j->u + e * j->m * j->c, a.ldb = j->c;
    if (tiles > 1 && j->m > 1) a.packed_b = j->packed + e * j->pack_stride;
    a.c = o + e * j->o_point, a.ldc = j->m;
    return bbi_f32_gemm(&a, scratch, j->gemm_bytes);
  }
  a.m = j->m, a.n = tiles, a.k = j->c;
  a.a = j->u + e * j->m * j->c, a.lda = j->c;
  if (tiles > 1 && j->m > 1) a.packed_a = j->packed + e * j->pack_stride;
  a.b = v + e * j->v_point, a.ldb = tiles;
  a.c = o + e * j->o_point, a.ldc = tiles;
  return bbi_f32_gemm(&a, scratch, j->gemm_bytes);
}

/* Aᵀ m A plus the bias for tiles q0..q0+count of one tile row, m the tile's 4×4 products
 * (point e at s[e][q]), Aᵀ = [1 1 1 0; 0 1 -1 -1]: the 2×2 outputs of tile x at
 * columns 2x, 2x + 1 of y0 and y1 (NULL: the tile's lower row is past the output's edge).
 * Four tiles a step, their outputs interleaved into eight columns. Each stored output v,
 * before Relu, adds v·0 to *check (NaN from then on where v is NaN or infinite); with
 * `relu` it is stored as (v < 0 ? 0 : v) + 0, Relu's rule. With `wide_tail` the last 1 to
 * 3 tiles come from whole vectors too, which read up to 3 tiles' products past q0 + count
 * (the next row's, or the padding after O's rows); the same operations lane by lane as the
 * tile-by-tile tail. */
static void output_row(size_t count, const float *const *s, size_t q0, float bias, float *y0, float *y1, bool relu,
                       bool wide_tail, bbi_f32x4 *check) {
  const bbi_f32x4 b4 = bbi_f32x4_splat(bias), zero = bbi_f32x4_splat(0.0f);
  bbi_f32x4 chk = *check;
  size_t x = 0;
  for (; x + 4 <= count; x += 4) {
    bbi_f32x4 m[POINTS];
    for (int e = 0; e < POINTS; e++) m[e] = bbi_f32x4_load(s[e] + q0 + x);
    bbi_f32x4 r0[4], r1[4];
    for (int c = 0; c < 4; c++) r0[c] = m[c] + m[4 + c] + m[8 + c], r1[c] = m[4 + c] - m[8 + c] - m[12 + c];
    bbi_f32x4 a00 = r0[0] + r0[1] + r0[2] + b4, a01 = r0[1] - r0[2] - r0[3] + b4;
    chk += a00 * zero + a01 * zero;
    if (relu) a00 = bbi_f32x4_max(a00, zero) + zero, a01 = bbi_f32x4_max(a01, zero) + zero;
    bbi_f32x4_store(y0 + 2 * x, BBI_F32X4_SHUFFLE(a00, a01, 0, 4, 1, 5));
    bbi_f32x4_store(y0 + 2 * x + 4, BBI_F32X4_SHUFFLE(a00, a01, 2, 6, 3, 7));
    if (y1) {
      bbi_f32x4 a10 = r1[0] + r1[1] + r1[2] + b4, a11 = r1[1] - r1[2] - r1[3] + b4;
      chk += a10 * zero + a11 * zero;
      if (relu) a10 = bbi_f32x4_max(a10, zero) + zero, a11 = bbi_f32x4_max(a11, zero) + zero;
      bbi_f32x4_store(y1 + 2 * x, BBI_F32X4_SHUFFLE(a10, a11, 0, 4, 1, 5));
      bbi_f32x4_store(y1 + 2 * x + 4, BBI_F32X4_SHUFFLE(a10, a11, 2, 6, 3, 7));
    }
  }
  /* the last 1 to 3 tiles from whole vectors, the lanes past them unstored and unchecked */
  if (x < count && wide_tail) {
    const size_t left = count - x, floats = 2 * left;
    bbi_f32x4 m[POINTS];
    for (int e = 0; e < POINTS; e++) m[e] = bbi_f32x4_load(s[e] + q0 + x);
    bbi_f32x4 r0[4], r1[4];
    for (int c = 0; c < 4; c++) r0[c] = m[c] + m[4 + c] + m[8 + c], r1[c] = m[4 + c] - m[8 + c] - m[12 + c];
    const bbi_i32x4 lane = {0, 1, 2, 3};
    const bbi_i32x4 lo = lane < (bbi_i32x4){(int32_t)floats, (int32_t)floats, (int32_t)floats, (int32_t)floats};
    const bbi_i32x4 hi = lane + 4 < (bbi_i32x4){(int32_t)floats, (int32_t)floats, (int32_t)floats, (int32_t)floats};
    for (int row = 0; row < (y1 ? 2 : 1); row++) {
      const bbi_f32x4 *r = row ? r1 : r0;
      const bbi_f32x4 a0 = r[0] + r[1] + r[2] + b4, a1 = r[1] - r[2] - r[3] + b4;
      bbi_f32x4 v0 = BBI_F32X4_SHUFFLE(a0, a1, 0, 4, 1, 5), v1 = BBI_F32X4_SHUFFLE(a0, a1, 2, 6, 3, 7);
      chk += bbi_f32x4_select(lo, v0 * zero, zero) + bbi_f32x4_select(hi, v1 * zero, zero);
      if (relu) v0 = bbi_f32x4_max(v0, zero) + zero, v1 = bbi_f32x4_max(v1, zero) + zero;
      float *yr = (row ? y1 : y0) + 2 * x;
      if (floats >= 4) bbi_f32x4_store(yr, v0);
      else bbi_f32x4_store_tail(yr, v0, floats);
      if (floats > 4) bbi_f32x4_store_tail(yr + 4, v1, floats - 4);
    }
    x = count;
  }
  float tail = 0.0f;
  for (; x < count; x++) {
    const size_t q = q0 + x;
    float r0[4], r1[4];
    for (int c = 0; c < 4; c++) {
      r0[c] = s[c][q] + s[4 + c][q] + s[8 + c][q];
      r1[c] = s[4 + c][q] - s[8 + c][q] - s[12 + c][q];
    }
    float v[4] = {r0[0] + r0[1] + r0[2] + bias, r0[1] - r0[2] - r0[3] + bias, 0.0f, 0.0f};
    if (y1) v[2] = r1[0] + r1[1] + r1[2] + bias, v[3] = r1[1] - r1[2] - r1[3] + bias;
    for (int i = 0; i < 4; i++) tail += v[i] * 0.0f;
    if (relu)
      for (int i = 0; i < 4; i++) v[i] = bbi_f32_relu_scalar(v[i]);
    y0[2 * x] = v[0], y0[2 * x + 1] = v[1];
    if (y1) y1[2 * x] = v[2], y1[2 * x + 1] = v[3];
  }
  *check = chk + bbi_f32x4_splat(tail);
}

BBI_INLINE bbi_f32x4 load_lanes(const float *p, size_t lanes) {
  return lanes == 4 ? bbi_f32x4_load(p) : bbi_f32x4_load_tail(p, lanes);
}

/* The output transform with tiles as rows (O_e [tiles, M]): per tile, four channels a
 * step (point e of channel m at s[e][m]), each output stored where it lies in Y. */
static void output_by_channels(const wino_job *j, size_t row0, size_t tiles, size_t m0, size_t m1, const float *o) {
  const bbi_window2d *g = j->win;
  const size_t tw = j->tw, oh = g->oh, ow = g->ow, plane = oh * ow;
  for (size_t q = 0; q < tiles; q++) {
    const size_t n = (row0 + q / tw) / j->th, oy = 2 * ((row0 + q / tw) % j->th), ox = 2 * (q % tw);
    const bool down = oy + 1 < oh, right = ox + 1 < ow;
    float *yq = j->y + n * j->m * plane + oy * ow + ox;
    for (size_t m = m0; m < m1; m += 4) {
      const size_t lanes = m1 - m < 4 ? m1 - m : 4;
      bbi_f32x4 s[POINTS], r0[4], r1[4];
      for (int e = 0; e < POINTS; e++) s[e] = load_lanes(o + e * j->o_point + q * j->m + m, lanes);
      const bbi_f32x4 b = j->b ? load_lanes(j->b + m, lanes) : bbi_f32x4_splat(0.0f);
      for (int c = 0; c < 4; c++) r0[c] = s[c] + s[4 + c] + s[8 + c], r1[c] = s[4 + c] - s[8 + c] - s[12 + c];
      const bbi_f32x4 a00 = r0[0] + r0[1] + r0[2] + b, a01 = r0[1] - r0[2] - r0[3] + b;
      const bbi_f32x4 a10 = r1[0] + r1[1] + r1[2] + b, a11 = r1[1] - r1[2] - r1[3] + b;
      for (size_t i = 0; i < lanes; i++) {
        float *yo = yq + (m + i) * plane;
        yo[0] = a00[i];
        if (right) yo[1] = a01[i];
        if (down) yo[ow] = a10[i];
        if (down && right) yo[ow + 1] = a11[i];
      }
    }
  }
}

/* The output transform with tiles as columns (O_e [M, tiles]): per channel and tile row,
 * four tiles a step (output_row), with Relu's rule in the store when `relu`. Returns
 * whether every output it stored was finite before Relu. */
static bool output_by_tiles(const wino_job *j, size_t row0, size_t tiles, size_t m0, size_t m1, const float *o,
                            bool relu) {
  const bbi_window2d *g = j->win;
  const size_t tw = j->tw, oh = g->oh, ow = g->ow, full = ow / 2, plane = oh * ow, rows = tiles / tw;
  bbi_f32x4 chk = bbi_f32x4_splat(0.0f), unused = chk;
  for (size_t m = m0; m < m1; m++) {
    const float bias = j->b ? j->b[m] : 0.0f;
    const float *s[POINTS];
    for (size_t e = 0; e < POINTS; e++) s[e] = o + e * j->o_point + m * tiles;
    for (size_t r = 0; r < rows; r++) {
      const size_t n = (row0 + r) / j->th, oy = 2 * ((row0 + r) % j->th);
      float *y0 = j->y + (n * j->m + m) * plane + oy * ow;
      output_row(full, s, r * tw, bias, y0, oy + 1 < oh ? y0 + ow : NULL, relu, true, &chk);
      if (full < tw) { /* odd width: the last tile's left column */
        float one[2][4];
        output_row(1, s, r * tw + full, bias, one[0], one[1], false, false, &unused);
        const float v0 = one[0][0], v1 = oy + 1 < oh ? one[1][0] : 0.0f;
        chk += bbi_f32x4_splat(v0 * 0.0f + v1 * 0.0f);
        y0[2 * full] = relu ? bbi_f32_relu_scalar(v0) : v0;
        if (oy + 1 < oh) y0[ow + 2 * full] = relu ? bbi_f32_relu_scalar(v1) : v1;
      }
    }
  }
  const float lanes[4] = {chk[0], chk[1], chk[2], chk[3]};
  return !isnan(lanes[0] + lanes[1] + lanes[2] + lanes[3]);
}

/* Output channels [m0, m1) of a block's tiles from O: Aᵀ (Aᵀ = [1 1 1 0; 0 1 -1 -1]) on
 * each tile's 4×4 products, plus the bias, stored where the tile lies in Y (a tile cut by
 * the output's edge keeps the part inside); then each image's rows of the block are
 * checked for non-finite values and finished by the epilogue. Returns whether all were
 * finite. */
static bool output_transform(const wino_job *j, size_t row0, size_t tiles, size_t m0, size_t m1, const float *o) {
  const size_t oh = j->win->oh, ow = j->win->ow, plane = oh * ow, rows = tiles / j->tw;
  /* with tiles as columns, no addend and no activation or Relu: the check and Relu in the
   * output transform's store (the same bits as the passes below) */
  const bbi_activation act = j->e ? j->e->act.kind : BBI_ACTIVATION_NONE;
  if (!j->tiles_as_rows && !(j->e && j->e->addend) && (act == BBI_ACTIVATION_NONE || act == BBI_ACTIVATION_RELU))
    return output_by_tiles(j, row0, tiles, m0, m1, o, act == BBI_ACTIVATION_RELU);
  bool finite = true;
  if (j->tiles_as_rows) output_by_channels(j, row0, tiles, m0, m1, o);
  else finite = output_by_tiles(j, row0, tiles, m0, m1, o, false);
  for (size_t m = m0; m < m1; m++) {
    /* each image's rows of the block are one run of Y */
    for (size_t r = 0; r < rows;) {
      const size_t n = (row0 + r) / j->th, ty = (row0 + r) % j->th;
      const size_t span = j->th - ty < rows - r ? j->th - ty : rows - r;
      const size_t oy0 = 2 * ty, oy1 = 2 * (ty + span) < oh ? 2 * (ty + span) : oh;
      const size_t at = (n * j->m + m) * plane + oy0 * ow, count = (oy1 - oy0) * ow;
      finite = finite && bbi_f32_first_nonfinite(j->y + at, count) == count;
      if (j->e) {
        const float *addend = j->e->addend ? (const float *)bb_tensor_data(j->e->addend) + at : NULL;
        bbi_f32_vactivate(&j->e->act, count, addend, j->y + at);
      }
      r += span;
    }
  }
  return finite;
}

/* Block j->block + task whole on one participant, in its slot. */
static void block_task(void *ctx, size_t task, size_t slot) {
  wino_job *j = ctx;
  const size_t blk = j->block + task;
  char *mem = j->mem + slot * j->slot_bytes;
  float *v = (float *)(mem + j->v_at), *o = (float *)(mem + j->o_at);
  size_t row0;
  const size_t tiles = block_tiles(j, blk, &row0);
  input_transform(j, row0, tiles, 0, j->c, v, (float *)(mem + j->rows_at));
  for (size_t e = 0; e < POINTS; e++) {
    const int rc = point_product(j, tiles, e, v, o, mem + j->gemm_at);
    if (rc) {
      if (!j->rc[slot]) j->rc[slot] = rc;
      return;
    }
  }
  if (!output_transform(j, row0, tiles, 0, j->m, o)) j->bad[slot] = true;
}

/* One block's phases cut across the pool: groups of `group` channels, then points. */
static void input_task(void *ctx, size_t task, size_t slot) {
  wino_job *j = ctx;
  size_t row0;
  const size_t tiles = block_tiles(j, j->block, &row0), c0 = task * j->group;
  const size_t c1 = c0 + j->group < j->c ? c0 + j->group : j->c;
  input_transform(j, row0, tiles, c0, c1, (float *)(j->block_mem + j->v_at),
                  (float *)(j->mem + slot * j->slot_bytes + j->rows_at));
}

static void product_task(void *ctx, size_t e, size_t slot) {
  wino_job *j = ctx;
  size_t row0;
  const size_t tiles = block_tiles(j, j->block, &row0);
  const int rc = point_product(j, tiles, e, (const float *)(j->block_mem + j->v_at), (float *)(j->block_mem + j->o_at),
                               j->mem + slot * j->slot_bytes + j->gemm_at);
  if (rc && !j->rc[slot]) j->rc[slot] = rc;
}

static void output_task(void *ctx, size_t task, size_t slot) {
  wino_job *j = ctx;
  size_t row0;
  const size_t tiles = block_tiles(j, j->block, &row0), m0 = task * j->group;
  const size_t m1 = m0 + j->group < j->m ? m0 + j->group : j->m;
  if (!output_transform(j, row0, tiles, m0, m1, (const float *)(j->block_mem + j->o_at))) j->bad[slot] = true;
}

/* Whether the fast path is faster than the direct convolution for this shape, as
 * measured (docs/PERFORMANCE.md, "Winograd" and "(2026-12-03, evening)"): with few
 * channels its products are too short (k = C) to pay for the transforms, and with few
 * tiles its 16/9 more weights cost more than the multiplies it saves. Natively that
 * holds below 16 tiles however many the channels: in a whole model, whose weights do not
 * stay in cache from one run to the next, a 4×4 map's sixteen products stream 16/9 of
 * the direct path's bytes, and the direct path is faster there. WebAssembly's GEMM (four
 * lanes, no fused multiply-add) is slower against the transforms than AVX-512's, so
 * there it pays from fewer channels and tiles. */
static bool winograd_pays(size_t tiles, size_t c_in, size_t m_out) {
#if defined(__wasm__)
  return c_in >= 16 && m_out >= 16 && tiles >= 4;
#endif
  if (c_in < 32 || m_out < 32) return false;
  return tiles >= 64 || (tiles >= 16 && c_in * m_out >= 4096);
}

int bbi_nn_conv_winograd(bbi_cpu_op_ctx *ctx, const bbi_window2d *g, bbi_cpu_epilogue *e, bb_tensor *y, bool *done) {
  *done = false;
  const bb_tensor *x = ctx->inputs[0], *w = ctx->inputs[1], *b = bbi_cpu_input(ctx, 2);
  const size_t c_in = (size_t)x->dims[1], m_out = (size_t)w->dims[0];
  if (!ctx->state || !ctx->state->winograd || g->kh != 3 || g->kw != 3 || g->sh != 1 || g->sw != 1 || g->dh != 1 ||
      g->dw != 1 || !winograd_pays((size_t)x->dims[0] * ((g->oh + 1) / 2) * ((g->ow + 1) / 2), c_in, m_out))
    return 0;
  wino_job job, *j = &job;
  memset(j, 0, sizeof *j);
  j->win = g, j->c = c_in, j->m = m_out, j->th = (g->oh + 1) / 2, j->tw = (g->ow + 1) / 2;
  j->rows = (size_t)x->dims[0] * j->th;
  const size_t per_tile = POINTS * (c_in + m_out) * sizeof(float);
  size_t target = WINO_BLOCK_BYTES / per_tile;
  j->block_rows = target > j->tw ? target / j->tw : 1;
  /* whole panels of the GEMM's columns where that keeps within twice the target */
  const size_t nr = bbi_f32_gemm_default_config()->nr;
  size_t gcd = nr, rest = j->tw;
  while (rest) {
    const size_t t = gcd % rest;
    gcd = rest, rest = t;
  }
  const size_t unit = nr / gcd; /* tile rows of a whole number of panels */
  if (j->block_rows > unit) j->block_rows -= j->block_rows % unit;
  else if (2 * j->block_rows >= unit) j->block_rows = unit;
  if (j->block_rows > j->rows) j->block_rows = j->rows;
  j->blocks = (j->rows + j->block_rows - 1) / j->block_rows;
  const size_t tiles = j->block_rows * j->tw;
  /* (a block past the size cap leaves the convolution to the direct path, which checks its own) */
  if (tiles * POINTS * (c_in + m_out + 32) * sizeof(float) > ctx->max_output_bytes) return 0;
  /* the weights' transform, kept with the session's constants (none: W is not one), each
   * point's U packed as the GEMM's A, or as its B with tiles as rows */
  j->tiles_as_rows = tiles < nr;
  const size_t u_floats = POINTS * m_out * c_in;
  const size_t packed_size = j->tiles_as_rows ? bbi_f32_gemm_packed_b_size(NULL, m_out, c_in)
                                              : bbi_f32_gemm_packed_a_size(NULL, m_out, c_in);
  const size_t pack_stride = (packed_size + 63) & ~(size_t)63;
  const size_t u_at = 64, packed_at = (u_at + u_floats * sizeof(float) + 63) & ~(size_t)63;
  bool fresh;
  char *cache = bbi_cpu_node_cache_get(ctx, 1, j->tiles_as_rows ? BBI_NN_CACHE_WINOGRAD_B : BBI_NN_CACHE_WINOGRAD,
                                       packed_at + POINTS * pack_stride + 64, &fresh);
  if (!cache) return 0;
  char *base = (char *)(((uintptr_t)cache + 63) & ~(uintptr_t)63);
  wino_weights *head = (wino_weights *)base;
  float *u = (float *)(base + u_at);
  if (fresh) {
    head->finite = transform_weights(bb_tensor_data(w), m_out, c_in, u);
    for (size_t p = 0; p < POINTS; p++) {
      const float *up = u + p * m_out * c_in;
      char *to = base + packed_at + p * pack_stride;
      if (j->tiles_as_rows) bbi_f32_gemm_pack_b(NULL, m_out, c_in, 1, up, c_in, to, pack_stride);
      else bbi_f32_gemm_pack_a(NULL, m_out, c_in, 0, 1.0f, up, c_in, to, pack_stride);
    }
  }
  if (!head->finite) return 0;
  j->x = bb_tensor_data(x), j->b = b ? bb_tensor_data(b) : NULL, j->y = bb_tensor_data(y);
  j->u = u, j->packed = base + packed_at, j->pack_stride = pack_stride, j->e = e;
  j->row_len = 2 * ((j->tw + 3) & ~(size_t)3) + 6; /* input_row's loads of whole steps of four tiles */
  j->gemm_bytes = j->tiles_as_rows ? bbi_f32_gemm_scratch_size_alone(tiles, m_out, c_in)
                                   : bbi_f32_gemm_scratch_size_alone(m_out, tiles, c_in);
  /* a block's V and O, then a participant's rows and GEMM scratch */
  j->v_at = 0;
  j->v_point = ((c_in * tiles + 15) & ~(size_t)15) + 16, j->o_point = ((m_out * tiles + 15) & ~(size_t)15) + 16;
  j->o_at = POINTS * j->v_point * sizeof(float);
  j->block_bytes = j->o_at + POINTS * j->o_point * sizeof(float);
  const size_t width = bbi_parallel_width();
  const bool by_block = width == 1 || j->blocks >= 2 * width;
  j->rows_at = by_block ? j->block_bytes : 0;
  j->gemm_at = j->rows_at + (((2 * j->block_rows + 2) * j->row_len * sizeof(float) + 63) & ~(size_t)63);
  j->slot_bytes = (j->gemm_at + j->gemm_bytes + 63) & ~(size_t)63;
  char *mem = bbi_cpu_scratch(ctx, (by_block ? 0 : j->block_bytes) + width * j->slot_bytes);
  if (!mem) return BB_ERR_NOMEM;
  if (by_block) {
    j->mem = mem;
    for (j->block = 0; j->block < j->blocks; j->block += BBI_PARALLEL_MAX_TASKS) {
      const size_t left = j->blocks - j->block;
      bbi_parallel_run(left < BBI_PARALLEL_MAX_TASKS ? left : BBI_PARALLEL_MAX_TASKS, width, block_task, j);
    }
  } else {
    j->block_mem = mem, j->mem = mem + j->block_bytes;
    for (size_t blk = 0; blk < j->blocks; blk++) {
      j->block = blk;
      j->group = (c_in + 4 * width - 1) / (4 * width);
      bbi_parallel_run((c_in + j->group - 1) / j->group, width, input_task, j);
      bbi_parallel_run(POINTS, width, product_task, j);
      j->group = (m_out + 4 * width - 1) / (4 * width);
      bbi_parallel_run((m_out + j->group - 1) / j->group, width, output_task, j);
    }
  }
  bool finite = true;
  for (size_t s = 0; s < width; s++) {
    if (j->rc[s]) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "GEMM rejected its arguments");
    finite = finite && !j->bad[s];
  }
  *done = finite;
  return 0;
}
