/* The GEMM driver: Goto/BLIS-style cache blocking around a register-blocked micro-kernel.
 *
 *   for each nc-wide block of columns of B and C
 *     for each kc-deep block of k:   pack B[kc×nc] into NR-wide panels (k-major)
 *       for each mc-tall block of rows: pack alpha*A[mc×kc] into MR-tall panels (k-major)
 *         for each NR panel of B, for each MR panel of A: micro-kernel on one C tile
 *
 * A packed B panel (kc×NR) stays in L1 while the micro-kernel walks down the A block
 * (mc×kc, in L2). Packing also absorbs the transposes and alpha, and zero-pads the edge
 * panels so the micro-kernel always runs a full tile. Products with one row or one column
 * of C are matrix-vector products, run without packing.
 *
 * On several threads (util/parallel.h) C is cut into regions — one mc block of rows by a
 * chunk of whole NR panels of columns. Where the scratch has room (SHARED_PANELS_MAX), the
 * participants first pack all of A's and B's panels once, side by side, into one shared
 * part of it, and the regions then only multiply; otherwise each participant packs what
 * its region reads into its own part (every A block once per column chunk, every B panel
 * once per row block). The blocking comes from the whole product, so every element of C
 * meets the same panels, k blocks, micro-kernel and tile as on one thread: the result is
 * the same bits on any number of threads. */
#include <stdint.h>
#include <string.h>

#include "bb/common.h"
#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"
#include "util/parallel.h"

#define SCRATCH_ALIGN 64

/* Blockings from bench_kernels sweep (see gemm_f32x4.c and gemm_x86.c): a B panel
 * (kc×NR, 8 to 64 KiB) stays in L1, an A block (mc×kc, 100 to 200 KiB) in L2; nc 2048
 * bounds the B block. Within the sweep's noise (a few %) the neighbours do as well.
 * The 4-lane kc is 320 rather than 256 so that a 3×3 convolution on 32 channels (k = 288)
 * runs as one k block: C is written once, not read back and added to. */
static const bbi_f32_gemm_config config_f32x4 = {
    "5x8-f32x4", 5, 8, 100, 320, 2048, bbi_f32_gemm_ukernel_5x8__f32x4,
    bbi_f32_gemm_ukernel_1x8__f32x4, bbi_f32_gemm_ukernel_4x8__f32x4};

#if BBI_HAVE_X86_GEMM
static const bbi_f32_gemm_config config_avx2fma = {
    "6x16-avx2fma", 6, 16, 96, 512, 2048, bbi_f32_gemm_ukernel_6x16__avx2fma,
    bbi_f32_gemm_ukernel_1x16__avx2fma, NULL};
static const bbi_f32_gemm_config config_avx512 = {
    "8x32-avx512", 8, 32, 96, 512, 2048, bbi_f32_gemm_ukernel_8x32__avx512,
    bbi_f32_gemm_ukernel_1x32__avx512, bbi_f32_gemm_ukernel_4x32__avx512};
#endif

int bbi_kernels_relaxed(void) { return BBI_KERNELS_RELAXED; }

size_t bbi_f32_gemm_configs(const bbi_f32_gemm_config *const **list) {
#if BBI_HAVE_X86_GEMM
  static const bbi_f32_gemm_config *const avx512[] = {&config_avx512, &config_avx2fma,
                                                     &config_f32x4};
  static const bbi_f32_gemm_config *const avx2[] = {&config_avx2fma, &config_f32x4};
  const int has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (has_avx2 && __builtin_cpu_supports("avx512f")) {
    *list = avx512;
    return sizeof avx512 / sizeof avx512[0];
  }
  if (has_avx2) {
    *list = avx2;
    return sizeof avx2 / sizeof avx2[0];
  }
#endif
  static const bbi_f32_gemm_config *const portable[] = {&config_f32x4};
  *list = portable;
  return sizeof portable / sizeof portable[0];
}

const bbi_f32_gemm_config *bbi_f32_gemm_default_config(void) {
  const bbi_f32_gemm_config *const *list;
  bbi_f32_gemm_configs(&list);
  return list[0];
}

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }
static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }
static size_t div_ceil(size_t a, size_t b) { return (a + b - 1) / b; }
static size_t round_up(size_t a, size_t b) { return div_ceil(a, b) * b; }

/* The block actually used for `total` elements: as many blocks as `limit` forces, made
 * equal, rounded up to `unit` (limit is a multiple of unit, so this never exceeds it). */
static size_t even_block(size_t total, size_t limit, size_t unit) {
  return round_up(div_ceil(total, div_ceil(total, limit)), unit);
}

/* Whether m rows take 4-row panels (the config's ukernel_4row) rather than MR-row ones: 2 to
 * 4 rows, which an MR-row tile would mostly pad, and, where MR is not a multiple of 4 (the
 * 4-lane 5x8), row counts that MR-row panels pad by over 1/32 more rows than 4-row ones
 * (16 or 32 output channels: 20 and 35 rows against 16 and 32; 64 and 1024 keep MR). */
static int four_row_panels(const bbi_f32_gemm_config *cfg, size_t m) {
  if (m <= 1 || !cfg->ukernel_4row || cfg->mr <= 4) return 0;
  return m <= 4 || (cfg->mr % 4 != 0 && round_up(m, 4) * 33 < round_up(m, cfg->mr) * 32);
}

/* The panel height the driver uses for m rows (see bbi_f32_gemm_run). */
static size_t panel_rows(const bbi_f32_gemm_config *cfg, size_t m) {
  return m == 1 ? 1 : four_row_panels(cfg, m) ? 4 : cfg->mr;
}

typedef struct gemm_blocking {
  size_t mc, kc, nc;
} gemm_blocking;

static gemm_blocking blocking_for(const bbi_f32_gemm_config *cfg, size_t m, size_t n, size_t k) {
  gemm_blocking b;
  b.mc = even_block(m, cfg->mc, panel_rows(cfg, m));
  b.kc = even_block(k, cfg->kc, 1);
  b.nc = even_block(n, cfg->nc, cfg->nr);
  return b;
}

/* A matrix-vector product: one row of C (m = 1), or one column (n = 1, computed as the
 * row C^T = op(B)^T op(A)^T). */
static int is_gemv(size_t m, size_t n) { return m == 1 || n == 1; }

/* Products of fewer multiply-adds than this run on one thread: below it, handing out the
 * work costs about what it saves. */
#define PARALLEL_MIN_MACS ((size_t)1 << 16)
/* Columns of C per region on several threads (rounded to whole panels); rows come in mc
 * blocks. */
#define REGION_COLUMNS 128
/* Regions a participant at least, where narrower column chunks (whole panels) can make
 * them: two, so that a product of few regions is shared at all; four where A is packed
 * beforehand (no region repacks it), so that a participant slowed or late leaves work to
 * take. */
#define REGIONS_PER_SLOT 2
#define REGIONS_PER_SLOT_PACKED_A 4
/* Elements of the vector per task of a parallel matrix-vector product. */
#define GEMV_TASK_ELEMENTS 256

/* Most bytes of A's and B's panels packed once for all participants (the scratch grows by
 * that much on several threads); larger products pack per region. */
#define SHARED_PANELS_MAX ((size_t)16 << 20)

/* Whether the product is worth cutting across threads (the cut never changes the result). */
static int worth_splitting(size_t m, size_t n, size_t k) {
  return (uint64_t)m * n * k >= PARALLEL_MIN_MACS;
}

/* Floats one participant needs: the sequential layout (A block, B block) for slot 0, a
 * region's (A block, a region's B panels) for the others; a matrix-vector product shares
 * one x and one y among all. */
static size_t slot0_floats(const gemm_blocking *b, size_t m, size_t n, size_t k) {
  size_t floats = b->mc * b->kc + b->nc * b->kc;
  if (is_gemv(m, n)) floats = max_size(floats, k + max_size(m, n));
  return floats;
}

static size_t region_columns(const bbi_f32_gemm_config *cfg, const gemm_blocking *b) {
  return min_size(b->nc, round_up(REGION_COLUMNS, cfg->nr));
}

static size_t slot_floats(const bbi_f32_gemm_config *cfg, const gemm_blocking *b) {
  return b->mc * b->kc + region_columns(cfg, b) * b->kc;
}

/* Bytes of every panel of A and of B, packed once for all participants (see pack_task),
 * or 0 where that exceeds SHARED_PANELS_MAX. */
static size_t shared_panels_bytes(const bbi_f32_gemm_config *cfg, size_t m, size_t n, size_t k) {
  const uint64_t floats = ((uint64_t)round_up(m, panel_rows(cfg, m)) + round_up(n, cfg->nr)) * k;
  const uint64_t bytes = floats * sizeof(float) + 2 * SCRATCH_ALIGN;
  return bytes <= SHARED_PANELS_MAX ? (size_t)bytes : 0;
}

size_t bbi_f32_gemm_scratch_size_for(const bbi_f32_gemm_config *cfg, size_t m, size_t n,
                                    size_t k) {
  if (m == 0 || n == 0 || k == 0) return 0;
  const gemm_blocking b = blocking_for(cfg, m, n, k);
  size_t bytes = slot0_floats(&b, m, n, k) * sizeof(float) + 2 * SCRATCH_ALIGN;
  const size_t width = bbi_parallel_width();
  if (width > 1 && !is_gemv(m, n) && worth_splitting(m, n, k)) {
    bytes += (width - 1) * (slot_floats(cfg, &b) * sizeof(float) + 2 * SCRATCH_ALIGN);
    bytes += shared_panels_bytes(cfg, m, n, k);
  }
  return bytes;
}

size_t bbi_f32_gemm_scratch_size(size_t m, size_t n, size_t k) {
  return bbi_f32_gemm_scratch_size_for(bbi_f32_gemm_default_config(), m, n, k);
}

size_t bbi_f32_gemm_scratch_size_alone(size_t m, size_t n, size_t k) {
  if (m == 0 || n == 0 || k == 0) return 0;
  const gemm_blocking b = blocking_for(bbi_f32_gemm_default_config(), m, n, k);
  return slot0_floats(&b, m, n, k) * sizeof(float) + 2 * SCRATCH_ALIGN;
}

static float *align_up(void *p) {
  const uintptr_t u = (uintptr_t)p;
  return (float *)((u + SCRATCH_ALIGN - 1) & ~(uintptr_t)(SCRATCH_ALIGN - 1));
}

/* dst[p*stride + i] = scale * src[i*ld + p] for i < 4, p < kc: four rows of the source
 * become four columns of the panel, by 4×4 transposes. */
static void pack_4_rows_transposed(const float *src, size_t ld, size_t kc, float scale,
                                   float *dst, size_t stride) {
  const bbi_f32x4 s = bbi_f32x4_splat(scale);
  size_t p = 0;
  for (; p + 4 <= kc; p += 4) {
    bbi_f32x4 r[4];
    for (size_t i = 0; i < 4; i++) r[i] = bbi_f32x4_load(src + i * ld + p) * s;
    bbi_f32x4_transpose(r);
    for (size_t q = 0; q < 4; q++) bbi_f32x4_store(dst + (p + q) * stride, r[q]);
  }
  for (; p < kc; p++) {
    for (size_t i = 0; i < 4; i++) dst[p * stride + i] = scale * src[i * ld + p];
  }
}

/* `count` source rows (src + i*ld) become the first columns of a `width`-wide panel,
 * dst[p*width + i] = scale * src[i*ld + p]; the columns after them are zero-filled. */
static void pack_rows_transposed(const float *src, size_t ld, size_t count, size_t width,
                                 size_t kc, float scale, float *dst) {
  size_t i = 0;
  for (; i + 4 <= count; i += 4) pack_4_rows_transposed(src + i * ld, ld, kc, scale, dst + i, width);
  for (; i < count; i++) {
    for (size_t p = 0; p < kc; p++) dst[p * width + i] = scale * src[i * ld + p];
  }
  for (; i < width; i++) {
    for (size_t p = 0; p < kc; p++) dst[p * width + i] = 0.0f;
  }
}

/* Full-width rows of W (a multiple of 4) floats: dst[p*W + j] = scale * src[p*ld + j]. */
BBI_INLINE void copy_rows(size_t W, const float *src, size_t ld, size_t kc, float scale,
                         float *dst) {
  const bbi_f32x4 s = bbi_f32x4_splat(scale);
  for (size_t p = 0; p < kc; p++, src += ld, dst += W) {
    BBI_UNROLL for (size_t j = 0; j < W; j += 4) bbi_f32x4_store(dst + j, bbi_f32x4_load(src + j) * s);
  }
}

/* The same for a narrow panel, 4 <= W <= 8 floats (an A panel is MR rows, 5 in wasm): two
 * vectors per row, the second one ending at the row's end (they overlap when W < 8). */
BBI_INLINE void copy_rows_narrow(size_t W, const float *src, size_t ld, size_t kc, float scale,
                                float *dst) {
  const bbi_f32x4 s = bbi_f32x4_splat(scale);
  for (size_t p = 0; p < kc; p++, src += ld, dst += W) {
    const bbi_f32x4 lo = bbi_f32x4_load(src), hi = bbi_f32x4_load(src + W - 4);
    bbi_f32x4_store(dst, lo * s);
    bbi_f32x4_store(dst + W - 4, hi * s);
  }
}

/* Columns of the panel copied from consecutive source rows: dst[p*width + j] =
 * scale * src[p*ld + j] for j < count, zero up to width. The full widths of the shipped
 * tiles get loops the compiler unrolls: a row of a B panel is only two to eight vectors. */
static void pack_rows_direct(const float *src, size_t ld, size_t count, size_t width,
                             size_t kc, float scale, float *dst) {
  if (count == width) {
    switch (width) {
    case 8: copy_rows(8, src, ld, kc, scale, dst); return;
    case 16: copy_rows(16, src, ld, kc, scale, dst); return;
    case 32: copy_rows(32, src, ld, kc, scale, dst); return;
    default:
      if (width >= 4 && width < 8) {
        copy_rows_narrow(width, src, ld, kc, scale, dst);
        return;
      }
      break;
    }
  }
  for (size_t p = 0; p < kc; p++, src += ld, dst += width) {
    size_t j = 0;
    for (; j < count; j++) dst[j] = scale * src[j];
    for (; j < width; j++) dst[j] = 0.0f;
  }
}

/* Packs rows p0..p0+kc and columns j0..j0+nc of op(B) into nr-wide panels: panel q holds
 * op(B)[p][j0 + q*nr + c] at [q*nr*kc + p*nr + c], zero past column nc. */
static void pack_b(const float *b, size_t ldb, int trans_b, size_t p0, size_t j0, size_t kc,
                   size_t nc, size_t nr, float *out) {
  for (size_t jr = 0; jr < nc; jr += nr, out += nr * kc) {
    const size_t w = min_size(nr, nc - jr);
    if (trans_b)
      pack_rows_transposed(b + (j0 + jr) * ldb + p0, ldb, w, nr, kc, 1.0f, out);
    else
      pack_rows_direct(b + p0 * ldb + j0 + jr, ldb, w, nr, kc, 1.0f, out);
  }
}

/* Packs alpha * op(A) rows i0..i0+mc, columns p0..p0+kc into mr-tall panels: panel q holds
 * alpha*op(A)[i0 + q*mr + r][p] at [q*mr*kc + p*mr + r], zero past row mc. */
static void pack_a_from(const float *a, size_t lda, int trans_a, float alpha, size_t i0, size_t p0, size_t mc,
                        size_t kc, size_t mr, float *out) {
  for (size_t ir = 0; ir < mc; ir += mr, out += mr * kc) {
    const size_t h = min_size(mr, mc - ir);
    if (trans_a)
      pack_rows_direct(a + p0 * lda + i0 + ir, lda, h, mr, kc, alpha, out);
    else
      pack_rows_transposed(a + (i0 + ir) * lda + p0, lda, h, mr, kc, alpha, out);
  }
}

static void pack_a(const bbi_f32_gemm_args *g, size_t i0, size_t p0, size_t mc, size_t kc,
                   size_t mr, float *out) {
  pack_a_from(g->a, g->lda, g->trans_a, g->alpha, i0, p0, mc, kc, mr, out);
}

void bbi_f32_gemm_tile_apply(const float *acc, size_t ld, float *c, size_t ldc, size_t mr,
                            size_t nr, const bbi_f32_gemm_tile *tile) {
  for (size_t i = 0; i < mr; i++) {
    for (size_t j = 0; j < nr; j++) {
      float v = acc[i * ld + j];
      float *cij = c + i * ldc + j;
      if (!tile->first) {
        v += *cij;
      } else {
        if (tile->beta != 0.0f) v += tile->beta * *cij;
        if (tile->bias) v += tile->bias[j];
        if (tile->bias_per_row) v += tile->bias_per_row[i];
      }
      if (tile->addend) v += tile->addend[i * ldc + j];
      if (tile->relu) v = bbi_f32_relu_scalar(v);
      if (tile->clamp) v = bbi_f32_min_scalar(bbi_f32_max_scalar(v, tile->min), tile->max);
      *cij = v;
    }
  }
}

/* The tile settings of a k block that is both the first and the last, for all of C. */
static bbi_f32_gemm_tile whole_tile(const bbi_f32_gemm_args *g) {
  const bbi_f32_gemm_tile tile = {1, g->clamp, g->beta, g->bias, g->min, g->max,
                                 g->bias_per_row, g->addend, g->relu};
  return tile;
}

/* The tile settings for the part of C from row i0, column j0 on: its slices of the biases. */
static void tile_with_bias(bbi_f32_gemm_tile *tile, const bbi_f32_gemm_args *g, size_t j0, size_t i0) {
  tile->bias = g->bias ? g->bias + j0 : NULL;
  tile->bias_per_row = g->bias_per_row ? g->bias_per_row + i0 : NULL;
}

/* C = beta*C + biases (clamped): the whole job when alpha or k is 0. A zero accumulator
 * tile with row stride 0 serves every row. */
static void scale_c(const bbi_f32_gemm_args *g) {
  static const float zeros[16];
  bbi_f32_gemm_tile tile = whole_tile(g);
  for (size_t j = 0; j < g->n; j += 16) {
    tile.bias = g->bias ? g->bias + j : NULL;
    tile.addend = g->addend ? g->addend + j : NULL;
    bbi_f32_gemm_tile_apply(zeros, 0, g->c + j, g->ldc, g->m, min_size(16, g->n - j), &tile);
  }
}

/* A matrix-vector product: x (k floats, alpha already in) times the matrix operand, into
 * y; tasks take GEMV_TASK_ELEMENTS elements of y each. */
typedef struct gemv_job {
  const bbi_f32_gemm_args *g;
  const float *x;
  float *y;
  size_t len; /* elements of y */
} gemv_job;

/* Elements [j0, j1) of y and of C. One row (m = 1): y = x op(B); one column (n = 1):
 * C^T = x^T op(A)^T, and op(A)^T is A read the other way. */
static void gemv_part(const gemv_job *job, size_t j0, size_t j1) {
  const bbi_f32_gemm_args *g = job->g;
  bbi_f32_gemm_tile tile = whole_tile(g);
  if (g->m == 1) {
    const float *b = g->trans_b ? g->b + j0 * g->ldb : g->b + j0;
    bbi_f32_gemv(j1 - j0, g->k, job->x, b, g->ldb, g->trans_b, job->y + j0);
    tile_with_bias(&tile, g, j0, 0);
    tile.addend = g->addend ? g->addend + j0 : NULL;
    bbi_f32_gemm_tile_apply(job->y + j0, 0, g->c + j0, g->ldc, 1, j1 - j0, &tile);
  } else {
    const float *a = g->trans_a ? g->a + j0 : g->a + j0 * g->lda;
    bbi_f32_gemv(j1 - j0, g->k, job->x, a, g->lda, !g->trans_a, job->y + j0);
    tile_with_bias(&tile, g, 0, j0);
    tile.addend = g->addend ? g->addend + j0 * g->ldc : NULL;
    bbi_f32_gemm_tile_apply(job->y + j0, 1, g->c + j0 * g->ldc, g->ldc, j1 - j0, 1, &tile);
  }
}

static void gemv_task(void *ctx, size_t task, size_t slot) {
  (void)slot;
  const gemv_job *job = ctx;
  const size_t j0 = task * GEMV_TASK_ELEMENTS;
  gemv_part(job, j0, min_size(job->len, j0 + GEMV_TASK_ELEMENTS));
}

/* C (one row or one column) through bbi_f32_gemv: the vector operand, times alpha, and the
 * raw products go to scratch; the biases, beta and clamp come after, in C's own
 * coordinates. */
static void run_gemv(const bbi_f32_gemm_args *g, float *scratch) {
  const size_t k = g->k;
  gemv_job job = {g, scratch, scratch + k, g->m == 1 ? g->n : g->m};
  /* x = row 0 of op(A) (strided when A is transposed), or column 0 of op(B) */
  const float *v = g->m == 1 ? g->a : g->b;
  const size_t step = g->m == 1 ? (g->trans_a ? g->lda : 1) : (g->trans_b ? 1 : g->ldb);
  for (size_t p = 0; p < k; p++) scratch[p] = g->alpha * v[p * step];
  const size_t width = bbi_parallel_width();
  if (width > 1 && worth_splitting(g->m, g->n, k))
    bbi_parallel_run(div_ceil(job.len, GEMV_TASK_ELEMENTS), width, gemv_task, &job);
  else
    gemv_part(&job, 0, job.len);
}

/* ---- packed B ------------------------------------------------------------------------ */

/* A packed op(B) opens with this header (padded to SCRATCH_ALIGN bytes) so a product can
 * check that the panels were cut for it. The (jc, pc) block starts jc*k + (its padded
 * width)*pc floats into the data, which is what the driver would have packed there. */
#define PACKED_B_MAGIC 0x62625042u /* "BPbb" */

typedef struct packed_b_header {
  uint32_t magic;
  uint32_t nr;
  size_t n, k, kc, nc;
} packed_b_header;
_Static_assert(sizeof(packed_b_header) <= SCRATCH_ALIGN, "the header fits before the data");

size_t bbi_f32_gemm_packed_b_size(const bbi_f32_gemm_config *cfg, size_t n, size_t k) {
  if (!cfg) cfg = bbi_f32_gemm_default_config();
  return SCRATCH_ALIGN + round_up(n, cfg->nr) * k * sizeof(float);
}

int bbi_f32_gemm_pack_b(const bbi_f32_gemm_config *cfg, size_t n, size_t k, int trans_b,
                       const float *b, size_t ldb, void *packed, size_t packed_size) {
  if (!cfg) cfg = bbi_f32_gemm_default_config();
  if (!packed || packed_size < bbi_f32_gemm_packed_b_size(cfg, n, k))
    return BB_ERR_INVALID_ARGUMENT;
  if (n && k && (!b || ldb < (trans_b ? k : n))) return BB_ERR_INVALID_ARGUMENT;
  const gemm_blocking blk = blocking_for(cfg, 1, n, k);
  bbi_f32_gemm_pack_b_header(cfg, n, k, packed);
  float *data = (float *)((char *)packed + SCRATCH_ALIGN);
  for (size_t jc = 0; jc < n; jc += blk.nc) {
    const size_t nc = min_size(blk.nc, n - jc);
    for (size_t pc = 0; pc < k; pc += blk.kc) {
      pack_b(b, ldb, trans_b, pc, jc, min_size(blk.kc, k - pc), nc, cfg->nr,
             data + jc * k + round_up(nc, cfg->nr) * pc);
    }
  }
  return BB_OK;
}

void bbi_f32_gemm_pack_b_header(const bbi_f32_gemm_config *cfg, size_t n, size_t k, void *packed) {
  if (!cfg) cfg = bbi_f32_gemm_default_config();
  const gemm_blocking blk = blocking_for(cfg, 1, n, k);
  const packed_b_header h = {PACKED_B_MAGIC, (uint32_t)cfg->nr, n, k, blk.kc, blk.nc};
  memcpy(packed, &h, sizeof h);
}

void bbi_f32_gemm_pack_b_rows(const bbi_f32_gemm_config *cfg, size_t n, size_t k, size_t p0, size_t p1,
                             const float *rows, void *packed) {
  if (!cfg) cfg = bbi_f32_gemm_default_config();
  const gemm_blocking blk = blocking_for(cfg, 1, n, k);
  const size_t nr = cfg->nr;
  float *data = (float *)((char *)packed + SCRATCH_ALIGN);
  for (size_t p = p0; p < p1; p++, rows += n) {
    /* row p lies in the k block from pc (every block but the last is kc deep) */
    const size_t pc = p / blk.kc * blk.kc, kc = min_size(blk.kc, k - pc);
    for (size_t jc = 0; jc < n; jc += blk.nc) {
      const size_t nc = min_size(blk.nc, n - jc);
      float *dst = data + jc * k + round_up(nc, nr) * pc + (p - pc) * nr;
      const float *src = rows + jc;
      size_t j = 0;
      for (; j + nr <= nc; j += nr, dst += nr * kc, src += nr) {
        for (size_t c = 0; c < nr; c += 4) bbi_f32x4_store(dst + c, bbi_f32x4_load(src + c));
      }
      if (j < nc) {
        size_t c = 0;
        for (; c < nc - j; c++) dst[c] = src[c];
        for (; c < nr; c++) dst[c] = 0.0f;
      }
    }
  }
}

/* Where step p of the k dimension starts in packed panels `width` wide over `span` (the
 * rows or columns rounded up to whole panels) in one block of those, k cut into blocks of
 * kc_max (every block but the last that deep): the panels of step p are *panel_stride floats
 * apart, and each of the next *rows_after steps of its k block starts `width` floats after
 * the one before. */
static float *packed_run(size_t kc_max, size_t k, size_t width, size_t span, size_t p, void *packed,
                         size_t *panel_stride, size_t *rows_after) {
  const size_t pc = p / kc_max * kc_max, kc = min_size(kc_max, k - pc);
  *panel_stride = width * kc;
  *rows_after = pc + kc - p - 1;
  return (float *)((char *)packed + SCRATCH_ALIGN) + span * pc + (p - pc) * width;
}

float *bbi_f32_gemm_packed_b_row(const bbi_f32_gemm_config *cfg, size_t n, size_t k, size_t p, void *packed,
                                 size_t *panel_stride, size_t *rows_after) {
  if (!cfg) cfg = bbi_f32_gemm_default_config();
  const gemm_blocking blk = blocking_for(cfg, 1, n, k);
  if (n > blk.nc || p >= k) return NULL;
  return packed_run(blk.kc, k, cfg->nr, round_up(n, cfg->nr), p, packed, panel_stride, rows_after);
}

/* The packed data of g->packed_b, or NULL when it was packed for another product. */
static const float *packed_b_data(const bbi_f32_gemm_config *cfg, const bbi_f32_gemm_args *g,
                                  const gemm_blocking *blk) {
  packed_b_header h;
  memcpy(&h, g->packed_b, sizeof h);
  if (h.magic != PACKED_B_MAGIC || h.nr != cfg->nr || h.n != g->n || h.k != g->k ||
      h.kc != blk->kc || h.nc != blk->nc)
    return NULL;
  return (const float *)((const char *)g->packed_b + SCRATCH_ALIGN);
}

/* ---- packed A ------------------------------------------------------------------------ */

/* A packed alpha*op(A) opens with this header; the (ic, pc) block starts ic*k + (its
 * padded height)*pc floats into the data, which is what the driver would have packed for
 * that block. The panel height follows m (one row, two to four rows, or MR), so it is
 * recorded too. */
#define PACKED_A_MAGIC 0x62625041u /* "APbb" */

typedef struct packed_a_header {
  uint32_t magic;
  uint32_t mr;
  float alpha;
  size_t m, k, kc, mc;
} packed_a_header;
_Static_assert(sizeof(packed_a_header) <= SCRATCH_ALIGN, "the header fits before the data");

size_t bbi_f32_gemm_packed_a_size(const bbi_f32_gemm_config *cfg, size_t m, size_t k) {
  if (!cfg) cfg = bbi_f32_gemm_default_config();
  return SCRATCH_ALIGN + round_up(m, panel_rows(cfg, m)) * k * sizeof(float);
}

void bbi_f32_gemm_pack_a_header(const bbi_f32_gemm_config *cfg, size_t m, size_t k, float alpha, void *packed) {
  if (!cfg) cfg = bbi_f32_gemm_default_config();
  const gemm_blocking blk = blocking_for(cfg, m, 1, k);
  const packed_a_header h = {PACKED_A_MAGIC, (uint32_t)panel_rows(cfg, m), alpha, m, k, blk.kc, blk.mc};
  memcpy(packed, &h, sizeof h);
}

int bbi_f32_gemm_pack_a(const bbi_f32_gemm_config *cfg, size_t m, size_t k, int trans_a,
                       float alpha, const float *a, size_t lda, void *packed, size_t packed_size) {
  if (!cfg) cfg = bbi_f32_gemm_default_config();
  if (!packed || packed_size < bbi_f32_gemm_packed_a_size(cfg, m, k)) return BB_ERR_INVALID_ARGUMENT;
  if (m && k && (!a || lda < (trans_a ? m : k))) return BB_ERR_INVALID_ARGUMENT;
  const size_t mr = panel_rows(cfg, m);
  const gemm_blocking blk = blocking_for(cfg, m, 1, k);
  bbi_f32_gemm_pack_a_header(cfg, m, k, alpha, packed);
  float *data = (float *)((char *)packed + SCRATCH_ALIGN);
  for (size_t ic = 0; ic < m; ic += blk.mc) {
    const size_t mc = min_size(blk.mc, m - ic);
    for (size_t pc = 0; pc < k; pc += blk.kc)
      pack_a_from(a, lda, trans_a, alpha, ic, pc, mc, min_size(blk.kc, k - pc), mr,
                  data + ic * k + round_up(mc, mr) * pc);
  }
  return BB_OK;
}

float *bbi_f32_gemm_packed_a_row(const bbi_f32_gemm_config *cfg, size_t m, size_t k, size_t p, void *packed,
                                 size_t *panel_stride, size_t *rows_after, size_t *height) {
  if (!cfg) cfg = bbi_f32_gemm_default_config();
  const gemm_blocking blk = blocking_for(cfg, m, 1, k);
  if (m > blk.mc || p >= k) return NULL;
  const size_t mr = panel_rows(cfg, m);
  *height = mr;
  return packed_run(blk.kc, k, mr, round_up(m, mr), p, packed, panel_stride, rows_after);
}

/* The packed data of g->packed_a, or NULL when it was packed for another product. */
static const float *packed_a_data(const bbi_f32_gemm_config *cfg, const bbi_f32_gemm_args *g,
                                  const gemm_blocking *blk, size_t mr) {
  packed_a_header h;
  memcpy(&h, g->packed_a, sizeof h);
  if (h.magic != PACKED_A_MAGIC || h.mr != mr || h.alpha != g->alpha || h.m != g->m || h.k != g->k ||
      h.kc != blk->kc || h.mc != blk->mc)
    return NULL;
  (void)cfg;
  return (const float *)((const char *)g->packed_a + SCRATCH_ALIGN);
}

/* ---- the driver ---------------------------------------------------------------------- */

/* What every region of one product shares. */
typedef struct gemm_plan {
  const bbi_f32_gemm_args *g;
  gemm_blocking blk;
  size_t mr, nr;
  bbi_f32_gemm_ukernel_fn ukernel;
  const float *packed; /* op(B) packed beforehand, or NULL */
  const float *packed_a; /* alpha*op(A) packed beforehand, or NULL */
  int packed_a_shared;   /* the shared panels include A's (g->packed_a was NULL) */
  /* regions on several threads: row blocks of blk.mc, column chunks of `chunk` within each
   * nc block (chunks_per_block of them, the last block's trailing ones possibly empty) */
  size_t chunk, chunks_per_block, row_blocks, col_chunks;
  char *scratch;     /* slot 0's part; slot s's starts at scratch0_bytes + (s-1)*slot_bytes */
  size_t scratch0_bytes, slot_bytes;
} gemm_plan;

/* Rows [i0, i1) of C (whole mc blocks) by columns [j0, j1) (whole NR panels, within the nc
 * block that starts at jc): for each k block, pack the B panels it reads (unless packed
 * beforehand) and each A block, and run the micro-kernel over every tile. */
static void run_region(const gemm_plan *p, size_t i0, size_t i1, size_t jc, size_t j0, size_t j1,
                       float *pa, float *pb_scratch) {
  const bbi_f32_gemm_args *g = p->g;
  const size_t k = g->k, mr = p->mr, nr = p->nr, nc_block = min_size(p->blk.nc, g->n - jc);
  const size_t width = j1 - j0;
  bbi_f32_gemm_tile tile = whole_tile(g);
  for (size_t pc = 0; pc < k; pc += p->blk.kc) {
    const size_t kc = min_size(p->blk.kc, k - pc);
    const float *pb = pb_scratch;
    if (p->packed)
      pb = p->packed + jc * k + round_up(nc_block, nr) * pc + (j0 - jc) * kc;
    else
      pack_b(g->b, g->ldb, g->trans_b, pc, j0, kc, width, nr, pb_scratch);
    const int last = pc + kc == k;
    tile.first = pc == 0;
    tile.clamp = g->clamp && last;
    tile.relu = g->relu && last;
    for (size_t ic = i0; ic < i1; ic += p->blk.mc) {
      const size_t mc = min_size(p->blk.mc, i1 - ic);
      if (p->packed_a) pa = (float *)(p->packed_a + ic * k + round_up(mc, mr) * pc);
      else pack_a(g, ic, pc, mc, kc, mr, pa);
      for (size_t jr = 0; jr < width; jr += nr) {
        tile.bias = tile.first && g->bias ? g->bias + j0 + jr : NULL;
        const float *panel_b = pb + jr * kc;
        float *c = g->c + ic * g->ldc + j0 + jr;
        for (size_t ir = 0; ir < mc; ir += mr) {
          tile.bias_per_row = tile.first && g->bias_per_row ? g->bias_per_row + ic + ir : NULL;
          tile.addend = last && g->addend ? g->addend + (ic + ir) * g->ldc + j0 + jr : NULL;
          p->ukernel(kc, pa + ir * kc, panel_b, c + ir * g->ldc, g->ldc, min_size(mr, mc - ir),
                     min_size(nr, width - jr), &tile);
        }
      }
    }
  }
}

/* Task t of a product on several threads: row block t / col_chunks, column chunk
 * t % col_chunks, with the participant's own packing buffers. */
static void region_task(void *ctx, size_t task, size_t slot) {
  const gemm_plan *p = ctx;
  const size_t m = p->g->m, n = p->g->n;
  const size_t i0 = task / p->col_chunks * p->blk.mc;
  const size_t q = task % p->col_chunks;
  const size_t jc = q / p->chunks_per_block * p->blk.nc;
  const size_t block_end = min_size(jc + p->blk.nc, n);
  const size_t j0 = jc + q % p->chunks_per_block * p->chunk;
  if (j0 >= block_end) return; /* a trailing chunk of a short last block */
  char *base = slot == 0 ? p->scratch : p->scratch + p->scratch0_bytes + (slot - 1) * p->slot_bytes;
  float *pa = align_up(base);
  float *pb = align_up(pa + p->blk.mc * p->blk.kc);
  run_region(p, i0, min_size(i0 + p->blk.mc, m), jc, j0, min_size(j0 + p->chunk, block_end), pa, pb);
}

/* The shared panels' tasks: A's (row block, k block) pairs first, then B's (column chunk,
 * k block) pairs, each packed where run_region reads packed panels. */
static size_t k_blocks(const gemm_plan *p) { return div_ceil(p->g->k, p->blk.kc); }

static void pack_task(void *ctx, size_t task, size_t slot) {
  (void)slot;
  const gemm_plan *p = ctx;
  const bbi_f32_gemm_args *g = p->g;
  const size_t k = g->k, kb = k_blocks(p), pc = task % kb * p->blk.kc, kc = min_size(p->blk.kc, k - pc);
  const size_t a_tasks = p->packed_a_shared ? p->row_blocks * kb : 0;
  if (task < a_tasks) {
    const size_t ic = task / kb * p->blk.mc, mc = min_size(p->blk.mc, g->m - ic);
    pack_a(g, ic, pc, mc, kc, p->mr, (float *)p->packed_a + ic * k + round_up(mc, p->mr) * pc);
    return;
  }
  const size_t q = (task - a_tasks) / kb;
  const size_t jc = q / p->chunks_per_block * p->blk.nc, block_end = min_size(jc + p->blk.nc, g->n);
  const size_t j0 = jc + q % p->chunks_per_block * p->chunk;
  if (j0 >= block_end) return; /* a trailing chunk of a short last block */
  const size_t width = min_size(j0 + p->chunk, block_end) - j0, nc_block = block_end - jc;
  pack_b(g->b, g->ldb, g->trans_b, pc, j0, kc, width, p->nr,
         (float *)p->packed + jc * k + round_up(nc_block, p->nr) * pc + (j0 - jc) * kc);
}

/* How many participants the scratch has room for, up to the pool's width. */
static size_t scratch_slots(const gemm_plan *p, size_t scratch_size) {
  size_t slots = 1;
  if (scratch_size > p->scratch0_bytes) slots += (scratch_size - p->scratch0_bytes) / p->slot_bytes;
  return min_size(slots, bbi_parallel_width());
}

int bbi_f32_gemm_run(const bbi_f32_gemm_config *cfg, const bbi_f32_gemm_args *g, void *scratch,
                    size_t scratch_size) {
  if (!cfg || !g) return BB_ERR_INVALID_ARGUMENT;
  const size_t m = g->m, n = g->n, k = g->k;
  if (m == 0 || n == 0) return BB_OK;
  if (!g->c || g->ldc < n) return BB_ERR_INVALID_ARGUMENT;
  if (k == 0 || g->alpha == 0.0f) {
    scale_c(g);
    return BB_OK;
  }
  if (!g->packed_a && (!g->a || g->lda < (g->trans_a ? m : k))) return BB_ERR_INVALID_ARGUMENT;
  if (!g->packed_b && (!g->b || g->ldb < (g->trans_b ? k : n))) return BB_ERR_INVALID_ARGUMENT;
  gemm_plan p;
  p.blk = blocking_for(cfg, m, n, k);
  p.scratch0_bytes = slot0_floats(&p.blk, m, n, k) * sizeof(float) + 2 * SCRATCH_ALIGN;
  if (!scratch || scratch_size < p.scratch0_bytes) return BB_ERR_INVALID_ARGUMENT;
  if (g->packed_a && is_gemv(m, n)) return BB_ERR_INVALID_ARGUMENT;
  if (!g->packed_b && is_gemv(m, n)) {
    run_gemv(g, align_up(scratch));
    return BB_OK;
  }
  p.packed = NULL;
  if (g->packed_b && !(p.packed = packed_b_data(cfg, g, &p.blk))) return BB_ERR_INVALID_ARGUMENT;
  p.g = g;
  /* A single row on a packed B takes the one-row kernel, and rows in 4-row panels (see
   * four_row_panels) the four-row one, without padding A to MR rows (the same sums in the
   * same order). */
  const int four = four_row_panels(cfg, m);
  p.mr = panel_rows(cfg, m);
  p.packed_a = NULL;
  p.packed_a_shared = 0;
  if (g->packed_a && !(p.packed_a = packed_a_data(cfg, g, &p.blk, p.mr))) return BB_ERR_INVALID_ARGUMENT;
  p.nr = cfg->nr;
  p.ukernel = m == 1 ? cfg->ukernel_1row : four ? cfg->ukernel_4row : cfg->ukernel;
  p.scratch = scratch;
  p.slot_bytes = slot_floats(cfg, &p.blk) * sizeof(float) + 2 * SCRATCH_ALIGN;
  /* the shared panels, where wanted, at the scratch's end; the slots before them */
  const size_t shared = worth_splitting(m, n, k) && bbi_parallel_width() > 1 && (!g->packed_a || !g->packed_b)
                            ? shared_panels_bytes(cfg, m, n, k) : 0;
  const int share = shared && scratch_size >= p.scratch0_bytes + p.slot_bytes + shared;
  if (share) scratch_size -= shared;
  const size_t slots = worth_splitting(m, n, k) ? scratch_slots(&p, scratch_size) : 1;
  if (slots <= 1) {
    float *const pa = align_up(scratch);
    float *const pb = align_up(pa + p.blk.mc * p.blk.kc);
    for (size_t jc = 0; jc < n; jc += p.blk.nc) run_region(&p, 0, m, jc, jc, min_size(jc + p.blk.nc, n), pa, pb);
    return BB_OK;
  }
  p.chunk = region_columns(cfg, &p.blk);
  p.chunks_per_block = div_ceil(p.blk.nc, p.chunk);
  p.row_blocks = div_ceil(m, p.blk.mc);
  p.col_chunks = div_ceil(n, p.blk.nc) * p.chunks_per_block;
  /* a product of few regions (a small map's 1×1 convolution: 32 to 160 output channels
   * against 4 to 64 positions; a 3×3 one on a 2×2 map: 4 positions against 512 channels)
   * takes narrower ones; a tile's result does not depend on its region */
  const size_t want = (p.packed_a ? REGIONS_PER_SLOT_PACKED_A : REGIONS_PER_SLOT) * slots;
  if (p.row_blocks * p.col_chunks < want) {
    const size_t chunks = div_ceil(want, p.row_blocks);
    const size_t chunk = round_up(div_ceil(min_size(p.blk.nc, n), chunks), p.nr);
    if (chunk < p.chunk) {
      p.chunk = chunk;
      p.chunks_per_block = div_ceil(p.blk.nc, p.chunk);
      p.col_chunks = div_ceil(n, p.blk.nc) * p.chunks_per_block;
    }
  }
  /* very large products take wider regions, so the tasks stay within the pool's count */
  while (p.row_blocks * p.col_chunks > BBI_PARALLEL_MAX_TASKS && p.chunk < p.blk.nc) {
    p.chunk = min_size(p.blk.nc, p.chunk * 2);
    p.chunks_per_block = div_ceil(p.blk.nc, p.chunk);
    p.col_chunks = div_ceil(n, p.blk.nc) * p.chunks_per_block;
  }
  /* shared panels pay where a region would repack what another one packs: B's panels
   * once per row block, A's blocks once per column chunk */
  if (share && ((p.row_blocks > 1 && !g->packed_b) || (p.col_chunks > 1 && !g->packed_a))) {
    float *const panels = align_up((char *)scratch + scratch_size);
    p.packed_a_shared = !p.packed_a;
    if (p.packed_a_shared) p.packed_a = panels;
    const size_t a_floats = p.packed_a_shared ? round_up(m, p.mr) * k : 0;
    if (!p.packed) p.packed = align_up(panels + a_floats);
    const size_t kb = k_blocks(&p);
    const size_t b_tasks = g->packed_b ? 0 : p.col_chunks * kb;
    bbi_parallel_run((p.packed_a_shared ? p.row_blocks * kb : 0) + b_tasks, slots, pack_task, &p);
  }
  bbi_parallel_run(p.row_blocks * p.col_chunks, slots, region_task, &p);
  return BB_OK;
}

int bbi_f32_gemm(const bbi_f32_gemm_args *g, void *scratch, size_t scratch_size) {
  return bbi_f32_gemm_run(bbi_f32_gemm_default_config(), g, scratch, scratch_size);
}
