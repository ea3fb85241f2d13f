/* Winograd's F(2×2, 3×3) for float 3×3 convolutions (stride 1, dilation 1, one group) in
 * a session whose weights are constants: each 2×2 block of outputs (a tile) comes from the
 * tile's 4×4 input patch d as Aᵀ[U ⊙ (Bᵀ d B)]A, where U = G g Gᵀ is the 4×4 transform of
 * each 3×3 kernel g, made once per session (in double, rounded once) and kept in the
 * node's cache beside its GEMM packing. Summed over input channels, the 16 points ⊙ become
 * 16 GEMMs on the packed GEMM kernels, Y_e [M, tiles] = U_e [M, C] · V_e [C, tiles]: 16
 * multiplies where the direct convolution does 36 for 2×2 outputs of a channel pair.
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
  const char *packed;
  size_t pack_stride;
  bbi_cpu_epilogue *e;
  /* scratch: the block's V [16][C][tiles] at v_at, products O [16][M][tiles] at o_at,
   * a participant's padded rows (4 rows of row_len) and GEMM scratch in its slot */
  char *mem;
  size_t v_at, o_at, slot_at, slot_bytes, row_len, rows_at, gemm_at, gemm_bytes, block_bytes;
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

/* Channels [c0, c1) of a block's tiles into V: per tile row, the patch's four input rows
 * (zero in the padding) take Bᵀ (Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]) along the
 * whole row at once, then B along each tile's four columns. */
static void input_transform(const wino_job *j, size_t row0, size_t tiles, size_t c0, size_t c1, float *v,
                            float *rows) {
  const bbi_window2d *g = j->win;
  const size_t tw = j->tw, len = j->row_len, plane = g->ih * g->iw;
  float *d[4] = {rows, rows + len, rows + 2 * len, rows + 3 * len};
  float *t[4] = {rows + 4 * len, rows + 5 * len, rows + 6 * len, rows + 7 * len};
  for (size_t c = c0; c < c1; c++)
    for (size_t r = 0; r < tiles / tw; r++) {
      const size_t n = (row0 + r) / j->th, ty = (row0 + r) % j->th;
      const float *xc = j->x + (n * j->c + c) * plane;
      for (size_t i = 0; i < 4; i++) {
        const ptrdiff_t iy = (ptrdiff_t)(2 * ty + i) - (ptrdiff_t)g->ph;
        memset(d[i], 0, len * sizeof(float));
        if (iy < 0 || iy >= (ptrdiff_t)g->ih) continue;
        const size_t from = g->pw, count = from >= len ? 0 : g->iw < len - from ? g->iw : len - from;
        memcpy(d[i] + from, xc + (size_t)iy * g->iw, count * sizeof(float));
      }
      for (size_t k = 0; k < len; k++) {
        const float a = d[0][k], b = d[1][k], cc = d[2][k], e = d[3][k];
        t[0][k] = a - cc, t[1][k] = b + cc, t[2][k] = cc - b, t[3][k] = b - e;
      }
      for (size_t i = 0; i < 4; i++) {
        const float *s = t[i];
        float *v0 = v + ((i * 4 + 0) * j->c + c) * tiles + r * tw, *v1 = v0 + j->c * tiles;
        float *v2 = v1 + j->c * tiles, *v3 = v2 + j->c * tiles;
        for (size_t x = 0; x < tw; x++) {
          const float a = s[2 * x], b = s[2 * x + 1], cc = s[2 * x + 2], e = s[2 * x + 3];
          v0[x] = a - cc, v1[x] = b + cc, v2[x] = cc - b, v3[x] = b - e;
        }
      }
    }
}

/* Point e's product O_e [M, tiles] = U_e · V_e, on the caller alone. */
static int point_product(const wino_job *j, size_t tiles, size_t e, const float *v, float *o, void *scratch) {
  bbi_f32_gemm_args a;
  memset(&a, 0, sizeof a);
  a.alpha = 1.0f;
  a.m = j->m, a.n = tiles, a.k = j->c;
  a.a = j->u + e * j->m * j->c, a.lda = j->c;
  if (tiles > 1 && j->m > 1) a.packed_a = j->packed + e * j->pack_stride;
  a.b = v + e * j->c * tiles, a.ldb = tiles;
  a.c = o + e * j->m * tiles, a.ldc = tiles;
  return bbi_f32_gemm(&a, scratch, j->gemm_bytes);
}

/* Whether all n floats are finite. */
static bool all_finite(const float *y, size_t n) {
  uint32_t hit = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t bits;
    memcpy(&bits, y + i, sizeof bits);
    hit |= (bits & 0x7f800000u) == 0x7f800000u;
  }
  return !hit;
}

/* Output channels [m0, m1) of a block's tiles from O: Aᵀ (Aᵀ = [1 1 1 0; 0 1 -1 -1]) on
 * each tile's 4×4 products, plus the bias, stored where the tile lies in Y (a tile cut by
 * the output's edge keeps the part inside); then each image's rows of the block are
 * checked for non-finite values and finished by the epilogue. Returns whether all were
 * finite. */
static bool output_transform(const wino_job *j, size_t row0, size_t tiles, size_t m0, size_t m1, const float *o) {
  const bbi_window2d *g = j->win;
  const size_t tw = j->tw, oh = g->oh, ow = g->ow, full = ow / 2;
  const size_t plane = oh * ow, rows = tiles / tw;
  bool finite = true;
  for (size_t m = m0; m < m1; m++) {
    const float bias = j->b ? j->b[m] : 0.0f;
    const float *s[POINTS];
    for (size_t e = 0; e < POINTS; e++) s[e] = o + (e * j->m + m) * tiles;
    for (size_t r = 0; r < rows; r++) {
      const size_t n = (row0 + r) / j->th, oy = 2 * ((row0 + r) % j->th);
      float *y0 = j->y + (n * j->m + m) * plane + oy * ow;
      float *y1 = oy + 1 < oh ? y0 + ow : NULL;
      const size_t at = r * tw;
      for (size_t x = 0; x < tw; x++) {
        const size_t q = at + x;
        float r0[4], r1[4];
        for (int c = 0; c < 4; c++) {
          r0[c] = s[c][q] + s[4 + c][q] + s[8 + c][q];
          r1[c] = s[4 + c][q] - s[8 + c][q] - s[12 + c][q];
        }
        const float a00 = r0[0] + r0[1] + r0[2] + bias, a01 = r0[1] - r0[2] - r0[3] + bias;
        const float a10 = r1[0] + r1[1] + r1[2] + bias, a11 = r1[1] - r1[2] - r1[3] + bias;
        y0[2 * x] = a00;
        if (x < full) y0[2 * x + 1] = a01;
        if (y1) {
          y1[2 * x] = a10;
          if (x < full) y1[2 * x + 1] = a11;
        }
      }
    }
    /* each image's rows of the block are one run of Y */
    for (size_t r = 0; r < rows;) {
      const size_t n = (row0 + r) / j->th, ty = (row0 + r) % j->th;
      size_t span = j->th - ty < rows - r ? j->th - ty : rows - r;
      const size_t oy0 = 2 * ty, oy1 = 2 * (ty + span) < oh ? 2 * (ty + span) : oh;
      const size_t at = (n * j->m + m) * plane + oy0 * ow, count = (oy1 - oy0) * ow;
      finite = finite && all_finite(j->y + at, count);
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

/* Whether the fast path is faster than the direct convolution for this shape (measured:
 * docs/PERFORMANCE.md, Winograd). */
static bool winograd_pays(const bbi_window2d *g, size_t c_in, size_t m_out) {
  const size_t tiles = ((g->oh + 1) / 2) * ((g->ow + 1) / 2);
  return c_in >= 8 && m_out >= 8 && tiles >= 4;
}

int bbi_nn_conv_winograd(bbi_cpu_op_ctx *ctx, const bbi_window2d *g, bbi_cpu_epilogue *e, bb_tensor *y, bool *done) {
  *done = false;
  const bb_tensor *x = ctx->inputs[0], *w = ctx->inputs[1], *b = bbi_cpu_input(ctx, 2);
  const size_t c_in = (size_t)x->dims[1], m_out = (size_t)w->dims[0];
  if (!ctx->state || !ctx->state->winograd || g->kh != 3 || g->kw != 3 || g->sh != 1 || g->sw != 1 || g->dh != 1 ||
      g->dw != 1 || !winograd_pays(g, c_in, m_out))
    return 0;
  /* the weights' transform, kept with the session's constants (none: W is not one) */
  const size_t u_floats = POINTS * m_out * c_in;
  const size_t pack_stride = (bbi_f32_gemm_packed_a_size(NULL, m_out, c_in) + 63) & ~(size_t)63;
  const size_t u_at = 64, packed_at = (u_at + u_floats * sizeof(float) + 63) & ~(size_t)63;
  bool fresh;
  char *cache = bbi_cpu_node_cache_get(ctx, 1, BBI_NN_CACHE_WINOGRAD, packed_at + POINTS * pack_stride + 64, &fresh);
  if (!cache) return 0;
  char *base = (char *)(((uintptr_t)cache + 63) & ~(uintptr_t)63);
  wino_weights *head = (wino_weights *)base;
  float *u = (float *)(base + u_at);
  if (fresh) {
    head->finite = transform_weights(bb_tensor_data(w), m_out, c_in, u);
    for (size_t p = 0; p < POINTS; p++)
      bbi_f32_gemm_pack_a(NULL, m_out, c_in, 0, 1.0f, u + p * m_out * c_in, c_in, base + packed_at + p * pack_stride,
                          pack_stride);
  }
  if (!head->finite) return 0;

  wino_job job, *j = &job;
  memset(j, 0, sizeof *j);
  j->win = g, j->c = c_in, j->m = m_out, j->th = (g->oh + 1) / 2, j->tw = (g->ow + 1) / 2;
  j->rows = (size_t)x->dims[0] * j->th;
  const size_t per_tile = POINTS * (c_in + m_out) * sizeof(float);
  size_t target = WINO_BLOCK_BYTES / per_tile;
  j->block_rows = target > j->tw ? target / j->tw : 1;
  if (j->block_rows > j->rows) j->block_rows = j->rows;
  j->blocks = (j->rows + j->block_rows - 1) / j->block_rows;
  const size_t tiles = j->block_rows * j->tw;
  int rc = bbi_cpu_check_size(ctx, (int64_t)(tiles * POINTS * (c_in + m_out)), sizeof(float), "Winograd's tiles");
  if (rc) return rc;
  j->x = bb_tensor_data(x), j->b = b ? bb_tensor_data(b) : NULL, j->y = bb_tensor_data(y);
  j->u = u, j->packed = base + packed_at, j->pack_stride = pack_stride, j->e = e;
  j->row_len = 2 * j->tw + 2;
  j->gemm_bytes = bbi_f32_gemm_scratch_size_alone(m_out, tiles, c_in);
  /* a block's V and O, then a participant's rows and GEMM scratch */
  j->v_at = 0;
  j->o_at = (POINTS * c_in * tiles * sizeof(float) + 63) & ~(size_t)63;
  j->block_bytes = (j->o_at + POINTS * m_out * tiles * sizeof(float) + 63) & ~(size_t)63;
  const size_t width = bbi_parallel_width();
  const bool by_block = width == 1 || j->blocks >= 2 * width;
  j->rows_at = by_block ? j->block_bytes : 0;
  j->gemm_at = j->rows_at + ((8 * j->row_len * sizeof(float) + 63) & ~(size_t)63);
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
