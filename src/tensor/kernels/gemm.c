/* The GEMM driver: Goto/BLIS-style cache blocking around a register-blocked micro-kernel.
 *
 *   for each nc-wide block of columns of B and C
 *     for each kc-deep block of k:   pack B[kc×nc] into NR-wide panels (k-major)
 *       for each mc-tall block of rows: pack alpha*A[mc×kc] into MR-tall panels (k-major)
 *         for each NR panel of B, for each MR panel of A: micro-kernel on one C tile
 *
 * A packed B panel (kc×NR) stays in L1 while the micro-kernel walks down the A block
 * (mc×kc, in L2). Packing also absorbs the transposes and alpha, and zero-pads the edge
 * panels so the micro-kernel always runs a full tile. */
#include <stdint.h>

#include "bb/common.h"
#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"

#define SCRATCH_ALIGN 64

static const bb_f32_gemm_config config_6x8_f32x4 = {
    "6x8-f32x4", 6, 8, 120, 256, 1024, bb_f32_gemm_ukernel_6x8__f32x4};

#if BB_HAVE_X86_GEMM
static const bb_f32_gemm_config config_6x16_avx2fma = {
    "6x16-avx2fma", 6, 16, 120, 256, 2048, bb_f32_gemm_ukernel_6x16__avx2fma};
#endif

size_t bb_f32_gemm_configs(const bb_f32_gemm_config *const **list) {
#if BB_HAVE_X86_GEMM
  static const bb_f32_gemm_config *const with_avx2[] = {&config_6x16_avx2fma,
                                                         &config_6x8_f32x4};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    *list = with_avx2;
    return sizeof with_avx2 / sizeof with_avx2[0];
  }
#endif
  static const bb_f32_gemm_config *const portable[] = {&config_6x8_f32x4};
  *list = portable;
  return sizeof portable / sizeof portable[0];
}

const bb_f32_gemm_config *bb_f32_gemm_default_config(void) {
  const bb_f32_gemm_config *const *list;
  bb_f32_gemm_configs(&list);
  return list[0];
}

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }
static size_t div_ceil(size_t a, size_t b) { return (a + b - 1) / b; }
static size_t round_up(size_t a, size_t b) { return div_ceil(a, b) * b; }

/* The block actually used for `total` elements: as many blocks as `limit` forces, made
 * equal, rounded up to `unit` (limit is a multiple of unit, so this never exceeds it). */
static size_t even_block(size_t total, size_t limit, size_t unit) {
  return round_up(div_ceil(total, div_ceil(total, limit)), unit);
}

typedef struct gemm_blocking {
  size_t mc, kc, nc;
} gemm_blocking;

static gemm_blocking blocking_for(const bb_f32_gemm_config *cfg, size_t m, size_t n, size_t k) {
  gemm_blocking b;
  b.mc = even_block(m, cfg->mc, cfg->mr);
  b.kc = even_block(k, cfg->kc, 1);
  b.nc = even_block(n, cfg->nc, cfg->nr);
  return b;
}

size_t bb_f32_gemm_scratch_size_for(const bb_f32_gemm_config *cfg, size_t m, size_t n,
                                    size_t k) {
  if (m == 0 || n == 0 || k == 0) return 0;
  const gemm_blocking b = blocking_for(cfg, m, n, k);
  return (b.mc * b.kc + b.nc * b.kc) * sizeof(float) + 2 * SCRATCH_ALIGN;
}

size_t bb_f32_gemm_scratch_size(size_t m, size_t n, size_t k) {
  return bb_f32_gemm_scratch_size_for(bb_f32_gemm_default_config(), m, n, k);
}

static float *align_up(void *p) {
  const uintptr_t u = (uintptr_t)p;
  return (float *)((u + SCRATCH_ALIGN - 1) & ~(uintptr_t)(SCRATCH_ALIGN - 1));
}

/* Copies `count` floats (a multiple of 4) with vector moves. */
static void copy_f32(float *dst, const float *src, size_t count) {
  for (size_t i = 0; i < count; i += 4) bb_f32x4_store(dst + i, bb_f32x4_load(src + i));
}

/* Packs rows p0..p0+kc and columns j0..j0+nc of op(B) into nr-wide panels: panel q holds
 * op(B)[p][j0 + q*nr + c] at [q*nr*kc + p*nr + c], zero past column nc. */
static void pack_b(const bb_f32_gemm_args *g, size_t p0, size_t j0, size_t kc, size_t nc,
                   size_t nr, float *out) {
  for (size_t jr = 0; jr < nc; jr += nr, out += nr * kc) {
    const size_t w = min_size(nr, nc - jr);
    if (!g->trans_b) {
      const float *src = g->b + p0 * g->ldb + j0 + jr;
      for (size_t p = 0; p < kc; p++, src += g->ldb) {
        float *dst = out + p * nr;
        if (w == nr && nr % 4 == 0) {
          copy_f32(dst, src, nr);
        } else {
          for (size_t c = 0; c < w; c++) dst[c] = src[c];
          for (size_t c = w; c < nr; c++) dst[c] = 0.0f;
        }
      }
    } else {
      const float *src = g->b + (j0 + jr) * g->ldb + p0; /* op(B)[p][j] = src[j*ldb + p] */
      for (size_t c = 0; c < w; c++) {
        const float *row = src + c * g->ldb;
        for (size_t p = 0; p < kc; p++) out[p * nr + c] = row[p];
      }
      for (size_t c = w; c < nr; c++) {
        for (size_t p = 0; p < kc; p++) out[p * nr + c] = 0.0f;
      }
    }
  }
}

/* Packs alpha * op(A) rows i0..i0+mc, columns p0..p0+kc into mr-tall panels: panel q holds
 * alpha*op(A)[i0 + q*mr + r][p] at [q*mr*kc + p*mr + r], zero past row mc. */
static void pack_a(const bb_f32_gemm_args *g, size_t i0, size_t p0, size_t mc, size_t kc,
                   size_t mr, float *out) {
  const float alpha = g->alpha;
  for (size_t ir = 0; ir < mc; ir += mr, out += mr * kc) {
    const size_t h = min_size(mr, mc - ir);
    if (!g->trans_a) {
      const float *src = g->a + (i0 + ir) * g->lda + p0;
      for (size_t r = 0; r < h; r++) {
        const float *row = src + r * g->lda;
        for (size_t p = 0; p < kc; p++) out[p * mr + r] = alpha * row[p];
      }
      for (size_t r = h; r < mr; r++) {
        for (size_t p = 0; p < kc; p++) out[p * mr + r] = 0.0f;
      }
    } else {
      const float *src = g->a + p0 * g->lda + i0 + ir; /* op(A)[i][p] = src[p*lda + i] */
      for (size_t p = 0; p < kc; p++, src += g->lda) {
        float *dst = out + p * mr;
        for (size_t r = 0; r < h; r++) dst[r] = alpha * src[r];
        for (size_t r = h; r < mr; r++) dst[r] = 0.0f;
      }
    }
  }
}

void bb_f32_gemm_tile_apply(const float *acc, size_t ld, float *c, size_t ldc, size_t mr,
                            size_t nr, const bb_f32_gemm_tile *tile) {
  for (size_t i = 0; i < mr; i++) {
    for (size_t j = 0; j < nr; j++) {
      float v = acc[i * ld + j];
      float *cij = c + i * ldc + j;
      if (!tile->first) {
        v += *cij;
      } else {
        if (tile->beta != 0.0f) v += tile->beta * *cij;
        if (tile->bias) v += tile->bias[j];
      }
      if (tile->clamp) v = bb_f32_min_scalar(bb_f32_max_scalar(v, tile->min), tile->max);
      *cij = v;
    }
  }
}

/* C = beta*C + bias (clamped): the whole job when alpha or k is 0. A zero accumulator
 * tile with row stride 0 serves every row. */
static void scale_c(const bb_f32_gemm_args *g) {
  static const float zeros[16];
  bb_f32_gemm_tile tile = {1, g->clamp, g->beta, NULL, g->min, g->max};
  for (size_t j = 0; j < g->n; j += 16) {
    tile.bias = g->bias ? g->bias + j : NULL;
    bb_f32_gemm_tile_apply(zeros, 0, g->c + j, g->ldc, g->m, min_size(16, g->n - j), &tile);
  }
}

int bb_f32_gemm_run(const bb_f32_gemm_config *cfg, const bb_f32_gemm_args *g, void *scratch,
                    size_t scratch_size) {
  if (!cfg || !g) return BB_ERR_INVALID_ARGUMENT;
  const size_t m = g->m, n = g->n, k = g->k;
  if (m == 0 || n == 0) return BB_OK;
  if (!g->c || g->ldc < n) return BB_ERR_INVALID_ARGUMENT;
  if (k == 0 || g->alpha == 0.0f) {
    scale_c(g);
    return BB_OK;
  }
  if (!g->a || !g->b || g->lda < (g->trans_a ? m : k) || g->ldb < (g->trans_b ? k : n))
    return BB_ERR_INVALID_ARGUMENT;
  if (!scratch || scratch_size < bb_f32_gemm_scratch_size_for(cfg, m, n, k))
    return BB_ERR_INVALID_ARGUMENT;

  const size_t mr = cfg->mr, nr = cfg->nr;
  const gemm_blocking blk = blocking_for(cfg, m, n, k);
  float *const pa = align_up(scratch);
  float *const pb = align_up(pa + blk.mc * blk.kc);
  bb_f32_gemm_tile tile = {0, 0, g->beta, NULL, g->min, g->max};

  for (size_t jc = 0; jc < n; jc += blk.nc) {
    const size_t nc = min_size(blk.nc, n - jc);
    for (size_t pc = 0; pc < k; pc += blk.kc) {
      const size_t kc = min_size(blk.kc, k - pc);
      pack_b(g, pc, jc, kc, nc, nr, pb);
      tile.first = pc == 0;
      tile.clamp = g->clamp && pc + kc == k;
      for (size_t ic = 0; ic < m; ic += blk.mc) {
        const size_t mc = min_size(blk.mc, m - ic);
        pack_a(g, ic, pc, mc, kc, mr, pa);
        for (size_t jr = 0; jr < nc; jr += nr) {
          tile.bias = tile.first && g->bias ? g->bias + jc + jr : NULL;
          const float *panel_b = pb + jr * kc;
          float *c = g->c + ic * g->ldc + jc + jr;
          for (size_t ir = 0; ir < mc; ir += mr) {
            cfg->ukernel(kc, pa + ir * kc, panel_b, c + ir * g->ldc, g->ldc,
                         min_size(mr, mc - ir), min_size(nr, nc - jr), &tile);
          }
        }
      }
    }
  }
  return BB_OK;
}

int bb_f32_gemm(const bb_f32_gemm_args *g, void *scratch, size_t scratch_size) {
  return bb_f32_gemm_run(bb_f32_gemm_default_config(), g, scratch, scratch_size);
}
