/* Every SIMD kernel against its scalar twin (and the transcendental ones against libm),
 * on seeded random inputs over many shapes: 1, tile edges, primes, sizes that cross the
 * cache blocks, and the special values 0, -0, inf, NaN, subnormals. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "bb/common.h"
#include "harness.h"
#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vmath.h"

/* Set when this program is linked with the relaxed-SIMD kernels (test_kernels_relaxed):
 * their multiply-adds may fuse, so where a kernel and its scalar twin otherwise agree bit
 * for bit, the dot products are held to a rounding bound instead. */
#ifndef BB_TEST_RELAXED_KERNELS
#define BB_TEST_RELAXED_KERNELS 0
#endif

/* ---- helpers ---------------------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static void rng_seed(uint64_t seed) { rng_state = seed; }

static uint64_t rng_next(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

static float rng_uniform(float lo, float hi) {
  return lo + (hi - lo) * (float)((double)(rng_next() >> 40) / (double)(1u << 24));
}

static int rng_int(int lo, int hi) { return lo + (int)(rng_next() % (uint64_t)(hi - lo + 1)); }

static float *floats(size_t n) {
  float *p = malloc((n ? n : 1) * sizeof *p);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  return p;
}

static uint32_t bits_of(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static float float_of(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* Distance in units in the last place, counting across zero (+0 and -0 are 0 apart);
 * 0 for two NaNs, "infinite" for a NaN against a number. */
static int64_t ulp_distance(float a, float b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0 : INT64_MAX;
  const int64_t ia = bits_of(a) & 0x80000000u ? -(int64_t)(bits_of(a) & 0x7fffffffu)
                                              : (int64_t)bits_of(a);
  const int64_t ib = bits_of(b) & 0x80000000u ? -(int64_t)(bits_of(b) & 0x7fffffffu)
                                              : (int64_t)bits_of(b);
  return ia > ib ? ia - ib : ib - ia;
}

/* Bit-identical, or both NaN (NaN payloads may differ between SSE and scalar code). */
static int same_float(float a, float b) {
  return bits_of(a) == bits_of(b) || (isnan(a) && isnan(b));
}

static const float specials[] = {0.0f,     -0.0f,   INFINITY, -INFINITY, NAN,
                                 -NAN,     1.0f,    -1.0f,    FLT_MIN,   -FLT_MIN,
                                 FLT_MAX,  -FLT_MAX, 1e-45f,  -1e-45f,   3e-39f,
                                 0.5f,     2.0f,    1e30f,    -1e30f,    1e-30f};
#define N_SPECIALS (sizeof specials / sizeof specials[0])

/* Random values of assorted magnitudes, with a special value every so often. */
static void fill_mixed(float *x, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const int kind = rng_int(0, 9);
    if (kind == 0)
      x[i] = specials[rng_next() % N_SPECIALS];
    else if (kind < 3)
      x[i] = rng_uniform(-1e6f, 1e6f);
    else
      x[i] = rng_uniform(-4.0f, 4.0f);
  }
}

static void fill_uniform(float *x, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; i++) x[i] = rng_uniform(lo, hi);
}

/* ---- GEMM ------------------------------------------------------------------------------- */

/* One product run through cfg and through the reference on copies of the same C, with
 * every element of the padded C buffers (ldc gap, rows below m) checked for being left
 * alone. `exact` demands identical results (integer-valued data); otherwise each element
 * may differ by the error bound of two k-term float dot products. */
typedef struct gemm_case {
  size_t m, n, k;
  int trans_a, trans_b;
  float alpha, beta;
  int bias, clamp;
  float min, max;
  int exact;
  int bias_per_row; /* also add an m-long bias down the rows */
  int prepack;      /* pack B beforehand with bbi_f32_gemm_pack_b */
  int addend;       /* add an m×n matrix (C's row stride) after the last k block */
  int relu;         /* then Relu's rule, before the clamp */
} gemm_case;

static int gemm_check(const bbi_f32_gemm_config *cfg, const gemm_case *t) {
  const size_t pad = 3;
  const size_t a_rows = t->trans_a ? t->k : t->m, a_cols = t->trans_a ? t->m : t->k;
  const size_t b_rows = t->trans_b ? t->n : t->k, b_cols = t->trans_b ? t->k : t->n;
  const size_t lda = a_cols + pad, ldb = b_cols + 1, ldc = t->n + pad, c_rows = t->m + 1;
  float *a = floats(a_rows * lda), *b = floats(b_rows * ldb), *bias = floats(t->n);
  float *row_bias = floats(t->m), *addend = floats(c_rows * ldc);
  float *c = floats(c_rows * ldc), *c_ref = floats(c_rows * ldc);
  if (t->exact) {
    for (size_t i = 0; i < a_rows * lda; i++) a[i] = (float)rng_int(-3, 3);
    for (size_t i = 0; i < b_rows * ldb; i++) b[i] = (float)rng_int(-3, 3);
    for (size_t i = 0; i < t->n; i++) bias[i] = (float)rng_int(-9, 9);
    for (size_t i = 0; i < t->m; i++) row_bias[i] = (float)rng_int(-9, 9);
    for (size_t i = 0; i < c_rows * ldc; i++) c[i] = (float)rng_int(-9, 9);
    for (size_t i = 0; i < c_rows * ldc; i++) addend[i] = (float)rng_int(-20, 9);
  } else {
    fill_uniform(a, a_rows * lda, -1.0f, 1.0f);
    fill_uniform(b, b_rows * ldb, -1.0f, 1.0f);
    fill_uniform(bias, t->n, -1.0f, 1.0f);
    fill_uniform(row_bias, t->m, -1.0f, 1.0f);
    fill_uniform(c, c_rows * ldc, -1.0f, 1.0f);
    fill_uniform(addend, c_rows * ldc, -2.0f, 1.0f);
  }
  /* NaN, infinities and signed zeros in the addend keep to the rules of Add then Relu */
  if (t->m * t->n >= 4) {
    addend[0] = NAN, addend[ldc * (t->m / 2) + t->n / 2] = -INFINITY;
    addend[ldc * (t->m - 1) + t->n - 1] = INFINITY, addend[t->n - 1] = -0.0f;
  }
  /* With beta 0, C must not be read: NaN there must not reach the result. */
  if (t->beta == 0.0f) {
    for (size_t i = 0; i < t->m; i++)
      for (size_t j = 0; j < t->n; j++) c[i * ldc + j] = NAN;
  }
  memcpy(c_ref, c, c_rows * ldc * sizeof *c);

  bbi_f32_gemm_args g = {0};
  g.m = t->m, g.n = t->n, g.k = t->k, g.trans_a = t->trans_a, g.trans_b = t->trans_b;
  g.alpha = t->alpha, g.beta = t->beta, g.a = a, g.lda = lda, g.b = b, g.ldb = ldb;
  g.bias = t->bias ? bias : NULL, g.ldc = ldc, g.clamp = t->clamp, g.min = t->min;
  g.max = t->max, g.bias_per_row = t->bias_per_row ? row_bias : NULL;
  g.addend = t->addend ? addend : NULL, g.relu = t->relu;
  g.c = c_ref;
  bbi_f32_gemm_scalar(&g);

  const size_t scratch_size = bbi_f32_gemm_scratch_size_for(cfg, t->m, t->n, t->k);
  void *scratch = malloc(scratch_size + 1);
  void *packed = NULL;
  int rc = 0;
  if (t->prepack) {
    /* The product must then take B from the packed copy only. */
    const size_t size = bbi_f32_gemm_packed_b_size(cfg, t->n, t->k);
    packed = malloc(size);
    rc = bbi_f32_gemm_pack_b(cfg, t->n, t->k, t->trans_b, b, ldb, packed, size);
    g.packed_b = packed, g.b = NULL;
  }
  g.c = c;
  if (rc == 0) rc = bbi_f32_gemm_run(cfg, &g, scratch, scratch_size);
  int bad = rc != 0;
  for (size_t i = 0; i < c_rows && !bad; i++) {
    for (size_t j = 0; j < ldc && !bad; j++) {
      const float got = c[i * ldc + j], want = c_ref[i * ldc + j];
      if (i >= t->m || j >= t->n || t->exact) {
        bad = !same_float(got, want) && got != want; /* +0 == -0 */
        continue;
      }
      double mag = 0.0;
      for (size_t p = 0; p < t->k; p++) {
        const float av = t->trans_a ? a[p * lda + i] : a[i * lda + p];
        const float bv = t->trans_b ? b[j * ldb + p] : b[p * ldb + j];
        mag += fabs((double)av * bv);
      }
      mag = mag * fabs(t->alpha) + (t->beta != 0.0f ? fabs(t->beta * c_ref[i * ldc + j]) : 0.0);
      mag += t->bias ? fabs(bias[j]) : 0.0;
      mag += t->bias_per_row ? fabs(row_bias[i]) : 0.0;
      mag += t->addend ? fabs(addend[i * ldc + j]) : 0.0;
      if (same_float(got, want)) continue;
      const double tol = 2.0 * (double)(t->k + 3) * FLT_EPSILON * (mag + fabs(want)) + 1e-30;
      bad = !(fabs((double)got - want) <= tol) && !(isnan(got) && isnan(want));
    }
  }
  static int reported;
  if (bad && reported++ < 5) {
    fprintf(stderr,
            "gemm %s (kc %zu) m=%zu n=%zu k=%zu ta=%d tb=%d alpha=%g beta=%g bias=%d/%d "
            "clamp=%d prepack=%d addend=%d relu=%d rc=%d\n",
            cfg->name, cfg->kc, t->m, t->n, t->k, t->trans_a, t->trans_b, t->alpha, t->beta,
            t->bias, t->bias_per_row, t->clamp, t->prepack, t->addend, t->relu, rc);
  }
  free(a), free(b), free(bias), free(row_bias), free(addend), free(c), free(c_ref), free(scratch), free(packed);
  return !bad;
}

/* Each usable configuration as shipped, and with tiny cache blocks so that small products
 * cross every block boundary (several jc, pc and ic blocks, partial tiles in each). */
static size_t test_configs(bbi_f32_gemm_config *out, size_t cap) {
  const bbi_f32_gemm_config *const *list;
  const size_t n = bbi_f32_gemm_configs(&list);
  size_t count = 0;
  for (size_t i = 0; i < n && count + 2 <= cap; i++) {
    out[count++] = *list[i];
    bbi_f32_gemm_config tiny = *list[i];
    tiny.mc = 2 * tiny.mr, tiny.kc = 5, tiny.nc = 2 * tiny.nr;
    out[count++] = tiny;
  }
  return count;
}

static void test_gemm_exact_small_shapes(void) {
  bbi_f32_gemm_config cfgs[8];
  const size_t ncfg = test_configs(cfgs, 8);
  static const size_t mn[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 23, 31, 33};
  static const size_t ks[] = {1, 2, 3, 7, 16, 29, 64};
  static const float alphas[] = {1.0f, 2.0f, -1.0f};
  static const float betas[] = {0.0f, 1.0f, -2.0f};
  rng_seed(1);
  size_t v = 0;
  for (size_t ci = 0; ci < ncfg; ci++) {
    int ok = 1;
    for (size_t mi = 0; mi < sizeof mn / sizeof mn[0]; mi++)
      for (size_t ni = 0; ni < sizeof mn / sizeof mn[0]; ni++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
          for (int tr = 0; tr < 4; tr++, v++) {
            gemm_case t = {mn[mi], mn[ni], ks[ki], tr & 1, tr >> 1, alphas[v % 3],
                           betas[(v / 3) % 3], (int)(v / 9) % 2, (int)(v % 5 == 0),
                           -20.0f, 25.0f, 1, (int)(v % 7 < 3), (int)(v % 4 == 1),
                           (int)(v % 6 < 3), (int)(v % 11 < 5)};
            if (!gemm_check(&cfgs[ci], &t)) ok = 0;
          }
    CHECK_MSG(ok, "exact GEMM results differ for %s (mc=%zu kc=%zu nc=%zu)", cfgs[ci].name,
              cfgs[ci].mc, cfgs[ci].kc, cfgs[ci].nc);
  }
}

static void test_gemm_random_large_shapes(void) {
  bbi_f32_gemm_config cfgs[8];
  const size_t ncfg = test_configs(cfgs, 8);
  static const size_t shapes[][3] = {
      {1, 1, 1},     {1, 1000, 300}, {300, 1, 200},  {1, 7, 1000},    {128, 128, 128},
      {257, 129, 300}, {64, 1100, 40}, {32, 128, 784}, {127, 255, 513}, {97, 61, 1},
      {6, 2100, 9},  {121, 17, 257}};
  rng_seed(2);
  for (size_t ci = 0; ci < ncfg; ci++) {
    /* The tiny-block variants are slow on big shapes and add nothing there. */
    if (cfgs[ci].kc < 16) continue;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      const int tr = (int)(s % 4);
      gemm_case t = {shapes[s][0], shapes[s][1], shapes[s][2], tr & 1, tr >> 1,
                     s % 3 ? 1.0f : 0.75f, s % 2 ? 0.0f : 0.5f, (int)(s % 3 == 1), 0,
                     0.0f, 0.0f, 0, (int)(s % 3 == 2), 0, 0, 0};
      CHECK_MSG(gemm_check(&cfgs[ci], &t), "%s shape %zu", cfgs[ci].name, s);
      t.clamp = 1, t.min = -0.5f, t.max = 0.25f, t.bias = 1, t.prepack = 1;
      CHECK_MSG(gemm_check(&cfgs[ci], &t), "%s shape %zu clamped, B packed", cfgs[ci].name, s);
      t.clamp = 0, t.addend = 1, t.relu = 1, t.bias_per_row = 1;
      CHECK_MSG(gemm_check(&cfgs[ci], &t), "%s shape %zu with an addend and ReLU", cfgs[ci].name, s);
    }
  }
}

/* The 4-lane 5x8 configuration takes 4-row panels (its 4x8 kernel) for row counts 5-row
 * panels would pad by over 1/32 (16 and 32 output channels), 5-row ones otherwise (64);
 * either way each element is the same k-ordered sum, so the product gives the bits of the
 * same configuration made to use 5-row panels throughout, biases and clamp included. */
static void test_gemm_four_row_panels(void) {
  const bbi_f32_gemm_config *const *list;
  const size_t ncfg = bbi_f32_gemm_configs(&list);
  static const size_t ms[] = {8, 12, 16, 32, 36, 64};
  static const size_t ks[] = {9, 144, 331};
  rng_seed(23);
  int found = 0;
  for (size_t ci = 0; ci < ncfg; ci++) {
    const bbi_f32_gemm_config *cfg = list[ci];
    if (strcmp(cfg->name, "5x8-f32x4") != 0) continue; /* every machine lists the 4-lane 5x8 */
    found = 1;
    bbi_f32_gemm_config tall = *cfg;
    tall.ukernel_4row = NULL; /* MR-row panels for every row count */
    const size_t k = 7;
    CHECK_EQ_INT(bbi_f32_gemm_packed_a_size(cfg, 16, k), 64 + 16 * k * sizeof(float));
    CHECK_EQ_INT(bbi_f32_gemm_packed_a_size(cfg, 32, k), 64 + 32 * k * sizeof(float));
    CHECK_EQ_INT(bbi_f32_gemm_packed_a_size(cfg, 64, k), 64 + ((64 + cfg->mr - 1) / cfg->mr * cfg->mr) * k * sizeof(float));
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
      for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        const size_t m = ms[mi], n = 37 + 8 * ki, k2 = ks[ki];
        float *a = floats(m * k2), *b = floats(k2 * n), *bias = floats(m), *c = floats(m * n), *c_tall = floats(m * n);
        fill_uniform(a, m * k2, -1.0f, 1.0f);
        fill_uniform(b, k2 * n, -1.0f, 1.0f);
        fill_uniform(bias, m, -1.0f, 1.0f);
        bbi_f32_gemm_args g = {0};
        g.m = m, g.n = n, g.k = k2, g.alpha = 1.0f, g.a = a, g.lda = k2, g.b = b, g.ldb = n, g.ldc = n;
        g.bias_per_row = bias, g.clamp = 1, g.min = 0.0f, g.max = INFINITY;
        const size_t size = bbi_f32_gemm_scratch_size_for(cfg, m, n, k2);
        const size_t size_tall = bbi_f32_gemm_scratch_size_for(&tall, m, n, k2);
        void *scratch = malloc(size > size_tall ? size : size_tall);
        g.c = c;
        CHECK_EQ_INT(bbi_f32_gemm_run(cfg, &g, scratch, size), BB_OK);
        g.c = c_tall;
        CHECK_EQ_INT(bbi_f32_gemm_run(&tall, &g, scratch, size_tall), BB_OK);
        int same = 1;
        for (size_t i = 0; i < m * n; i++) same &= same_float(c[i], c_tall[i]);
        CHECK_MSG(same, "%s m=%zu k=%zu: 4-row panels differ from %zu-row ones", cfg->name, m, k2, cfg->mr);
        free(a), free(b), free(bias), free(c), free(c_tall), free(scratch);
      }
  }
  CHECK_MSG(found, "no 5x8-f32x4 configuration listed");
}

static void test_gemm_degenerate_and_errors(void) {
  float a[6] = {NAN, NAN, NAN, NAN, NAN, NAN}, b[6] = {1, 2, 3, 4, 5, 6};
  float c[4] = {1, 2, 3, 4}, bias[2] = {10, 20};
  float scratch[512];
  bbi_f32_gemm_args g = {0};
  g.m = 2, g.n = 2, g.k = 3, g.a = a, g.lda = 3, g.b = b, g.ldb = 2, g.c = c, g.ldc = 2;
  /* alpha 0: A is not read, C = beta*C + bias. */
  g.alpha = 0.0f, g.beta = 2.0f, g.bias = bias;
  CHECK_EQ_INT(bbi_f32_gemm(&g, NULL, 0), BB_OK);
  CHECK(c[0] == 12 && c[1] == 24 && c[2] == 16 && c[3] == 28);
  /* k 0: the same, and no scratch needed. */
  g.k = 0, g.alpha = 1.0f, g.beta = 0.0f, g.bias = NULL;
  CHECK_EQ_INT(bbi_f32_gemm_scratch_size(2, 2, 0), 0);
  CHECK_EQ_INT(bbi_f32_gemm(&g, NULL, 0), BB_OK);
  CHECK(c[0] == 0 && c[3] == 0);
  /* m 0: nothing happens, even with no C. */
  g.m = 0, g.k = 3, g.c = NULL;
  CHECK_EQ_INT(bbi_f32_gemm(&g, NULL, 0), BB_OK);
  /* Bad arguments are refused before anything is written. */
  for (int i = 0; i < 6; i++) a[i] = (float)i;
  c[0] = 7;
  g.m = 2, g.c = c;
  const size_t need = bbi_f32_gemm_scratch_size(2, 2, 3);
  CHECK(need > 0 && need <= sizeof scratch);
  CHECK_EQ_INT(bbi_f32_gemm(&g, scratch, need - 1), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bbi_f32_gemm(&g, NULL, need), BB_ERR_INVALID_ARGUMENT);
  g.lda = 2;
  CHECK_EQ_INT(bbi_f32_gemm(&g, scratch, need), BB_ERR_INVALID_ARGUMENT);
  g.lda = 3, g.ldb = 1;
  CHECK_EQ_INT(bbi_f32_gemm(&g, scratch, need), BB_ERR_INVALID_ARGUMENT);
  g.ldb = 2, g.ldc = 1;
  CHECK_EQ_INT(bbi_f32_gemm(&g, scratch, need), BB_ERR_INVALID_ARGUMENT);
  g.ldc = 2, g.b = NULL;
  CHECK_EQ_INT(bbi_f32_gemm(&g, scratch, need), BB_ERR_INVALID_ARGUMENT);
  CHECK(c[0] == 7);
  /* And a good call: [0 1 2; 3 4 5] x [1 2; 3 4; 5 6]. */
  g.b = b;
  CHECK_EQ_INT(bbi_f32_gemm(&g, scratch, need), BB_OK);
  CHECK(c[0] == 13 && c[1] == 16 && c[2] == 40 && c[3] == 52);
  /* The default configuration is the first usable one. */
  const bbi_f32_gemm_config *const *list;
  CHECK(bbi_f32_gemm_configs(&list) >= 1 && list[0] == bbi_f32_gemm_default_config());
}

/* A packed B is refused by products it was not packed for, and packing checks its
 * arguments. */
static void test_gemm_packed_b_mismatch(void) {
  const bbi_f32_gemm_config *const *list;
  const size_t ncfg = bbi_f32_gemm_configs(&list);
  const bbi_f32_gemm_config *cfg = list[0];
  enum { M = 7, N = 20, K = 9 };
  float a[M * K], b[K * N], c[M * N], c_ref[M * N];
  for (int i = 0; i < M * K; i++) a[i] = (float)(i % 5) - 2.0f;
  for (int i = 0; i < K * N; i++) b[i] = (float)(i % 7) - 3.0f;
  const size_t size = bbi_f32_gemm_packed_b_size(cfg, N, K);
  char *packed = malloc(size);
  CHECK_EQ_INT(bbi_f32_gemm_pack_b(cfg, N, K, 0, b, N, packed, size - 1), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bbi_f32_gemm_pack_b(cfg, N, K, 0, b, N - 1, packed, size), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bbi_f32_gemm_pack_b(cfg, N, K, 0, NULL, N, packed, size), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bbi_f32_gemm_pack_b(cfg, N, K, 0, b, N, packed, size), BB_OK);
  bbi_f32_gemm_args g = {0};
  g.m = M, g.n = N, g.k = K, g.alpha = 1.0f, g.a = a, g.lda = K, g.b = b, g.ldb = N;
  g.c = c_ref, g.ldc = N;
  bbi_f32_gemm_scalar(&g);
  const size_t scratch_size = bbi_f32_gemm_scratch_size_for(cfg, M, N + 8, K + 8);
  void *scratch = malloc(scratch_size);
  g.b = NULL, g.packed_b = packed, g.c = c;
  CHECK_EQ_INT(bbi_f32_gemm_run(cfg, &g, scratch, scratch_size), BB_OK);
  CHECK(memcmp(c, c_ref, sizeof c) == 0);
  for (int i = 0; i < M * N; i++) c[i] = 42.0f;
  g.n = N - 1;
  CHECK_EQ_INT(bbi_f32_gemm_run(cfg, &g, scratch, scratch_size), BB_ERR_INVALID_ARGUMENT);
  g.n = N, g.k = K - 1;
  CHECK_EQ_INT(bbi_f32_gemm_run(cfg, &g, scratch, scratch_size), BB_ERR_INVALID_ARGUMENT);
  g.k = K;
  for (size_t i = 1; i < ncfg; i++)
    CHECK_EQ_INT(bbi_f32_gemm_run(list[i], &g, scratch, scratch_size), BB_ERR_INVALID_ARGUMENT);
  bbi_f32_gemm_config other_blocks = *cfg;
  other_blocks.kc = 4;
  CHECK_EQ_INT(bbi_f32_gemm_run(&other_blocks, &g, scratch, scratch_size), BB_ERR_INVALID_ARGUMENT);
  packed[0] ^= 1;
  CHECK_EQ_INT(bbi_f32_gemm_run(cfg, &g, scratch, scratch_size), BB_ERR_INVALID_ARGUMENT);
  CHECK(c[0] == 42.0f && c[M * N - 1] == 42.0f);
  free(packed), free(scratch);
}

/* W packed once as the left operand (bbi_f32_gemm_pack_a, what a convolution on the plane
 * keeps per session) gives the bits of the product that packs A itself, with B as given
 * or packed; B packed from rows in pieces (bbi_f32_gemm_pack_b_rows, a column matrix a
 * channel at a time, the pieces in reverse order) is byte for byte bbi_f32_gemm_pack_b's.
 * Every configuration, shipped and with tiny blocks (several ic, pc and jc blocks), every
 * panel height (1, 2-4 and MR rows), both layouts of A and alphas 1 and -0.5; a packed A
 * is refused by products it was not packed for. */
static void test_gemm_packed_a_and_rows(void) {
  bbi_f32_gemm_config cfgs[8];
  const size_t ncfg = test_configs(cfgs, 8);
  static const size_t ms[] = {1, 3, 4, 5, 9, 16, 17, 40};
  static const size_t ns[] = {1, 7, 33, 64};
  static const size_t ks[] = {1, 6, 29, 70};
  rng_seed(21);
  int ok_a = 1, ok_rows = 1, ok_refused = 1;
  for (size_t ci = 0; ci < ncfg; ci++)
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
      for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
          const bbi_f32_gemm_config *cfg = &cfgs[ci];
          const size_t m = ms[mi], n = ns[ni], k = ks[ki];
          const int trans_a = (int)((mi + ni + ki) % 2);
          const float alpha = (ki % 2) ? -0.5f : 1.0f;
          float *a = floats(m * k), *b = floats(k * n), *c = floats(m * n), *c_ref = floats(m * n);
          float *bias = floats(m);
          fill_uniform(a, m * k, -1.0f, 1.0f);
          fill_uniform(b, k * n, -1.0f, 1.0f);
          fill_uniform(bias, m, -1.0f, 1.0f);
          bbi_f32_gemm_args g = {0};
          g.m = m, g.n = n, g.k = k, g.trans_a = trans_a, g.alpha = alpha, g.a = a, g.lda = trans_a ? m : k;
          g.b = b, g.ldb = n, g.c = c_ref, g.ldc = n, g.bias_per_row = bias, g.clamp = 1, g.min = -2.0f;
          g.max = 2.0f;
          const size_t scratch_size = bbi_f32_gemm_scratch_size_for(cfg, m, n, k);
          void *scratch = malloc(scratch_size);
          int rc = bbi_f32_gemm_run(cfg, &g, scratch, scratch_size);
          const size_t a_size = bbi_f32_gemm_packed_a_size(cfg, m, k), b_size = bbi_f32_gemm_packed_b_size(cfg, n, k);
          char *pa = malloc(a_size), *pb = malloc(b_size), *pb_rows = malloc(b_size);
          memset(pb, 0xab, b_size), memset(pb_rows, 0xab, b_size); /* a panel float left unwritten shows */
          rc |= bbi_f32_gemm_pack_a(cfg, m, k, trans_a, alpha, a, g.lda, pa, a_size);
          rc |= bbi_f32_gemm_pack_b(cfg, n, k, 0, b, n, pb, b_size);
          /* B's rows in pieces of up to 4, last piece first */
          for (size_t end = k; end > 0;) {
            const size_t p0 = end > 4 ? end - 4 : 0;
            bbi_f32_gemm_pack_b_rows(cfg, n, k, p0, end, b + p0 * n, pb_rows);
            end = p0;
          }
          bbi_f32_gemm_pack_b_header(cfg, n, k, pb_rows);
          ok_rows &= memcmp(pb, pb_rows, b_size) == 0;
          const int gemv = m == 1 || n == 1; /* a matrix-vector product refuses a packed A */
          for (int with_b = 0; with_b < 2 && !rc && !gemv; with_b++) {
            for (size_t i = 0; i < m * n; i++) c[i] = NAN;
            g.a = NULL, g.packed_a = pa, g.c = c;
            g.packed_b = with_b ? pb_rows : NULL, g.b = with_b ? NULL : b;
            rc |= bbi_f32_gemm_run(cfg, &g, scratch, scratch_size);
            for (size_t i = 0; i < m * n; i++) ok_a &= same_float(c[i], c_ref[i]);
          }
          ok_a &= rc == 0;
          /* packed for another product: refused, C untouched */
          g.a = NULL, g.packed_a = pa, g.c = c, g.packed_b = NULL, g.b = b, c[0] = 42.0f;
          ok_refused &= !gemv || bbi_f32_gemm_run(cfg, &g, scratch, scratch_size) == BB_ERR_INVALID_ARGUMENT;
          g.alpha = alpha * 2.0f;
          ok_refused &= bbi_f32_gemm_run(cfg, &g, scratch, scratch_size) == BB_ERR_INVALID_ARGUMENT;
          g.alpha = alpha, g.k = k - 1;
          ok_refused &= k == 1 || bbi_f32_gemm_run(cfg, &g, scratch, scratch_size) == BB_ERR_INVALID_ARGUMENT;
          g.k = k, g.m = m - 1;
          ok_refused &= m <= 2 || bbi_f32_gemm_run(cfg, &g, scratch, scratch_size) == BB_ERR_INVALID_ARGUMENT;
          ok_refused &= c[0] == 42.0f;
          free(a), free(b), free(c), free(c_ref), free(bias), free(scratch), free(pa), free(pb), free(pb_rows);
        }
  CHECK_MSG(ok_a, "a product on a packed A differs from the one that packs A itself");
  CHECK_MSG(ok_rows, "B packed from rows in pieces differs from bbi_f32_gemm_pack_b");
  CHECK_MSG(ok_refused, "a packed A was taken by a product it was not packed for");
  float a[4] = {1, 2, 3, 4};
  char small[64];
  CHECK_EQ_INT(bbi_f32_gemm_pack_a(NULL, 2, 2, 0, 1.0f, a, 2, small, sizeof small), BB_ERR_INVALID_ARGUMENT);
  char *room = malloc(bbi_f32_gemm_packed_a_size(NULL, 2, 2));
  CHECK_EQ_INT(bbi_f32_gemm_pack_a(NULL, 2, 2, 0, 1.0f, a, 1, room, bbi_f32_gemm_packed_a_size(NULL, 2, 2)),
               BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bbi_f32_gemm_pack_a(NULL, 2, 2, 0, 1.0f, NULL, 2, room, bbi_f32_gemm_packed_a_size(NULL, 2, 2)),
               BB_ERR_INVALID_ARGUMENT);
  free(room);
}

/* ---- elementwise ------------------------------------------------------------------------ */

static const char *const binary_names[] = {"add", "sub", "mul", "div", "max", "min"};

/* Lengths 0..70 cover every tail of the 16- and 4-wide loops; offsets 1 and 3 make the
 * arrays unaligned. */
static void test_binary_matches_scalar(void) {
  rng_seed(3);
  const size_t cap = 5000;
  float *a = floats(cap + 4), *b = floats(cap + 4), *y = floats(cap + 4), *r = floats(cap + 4);
  for (int op = 0; op < BBI_BINARY_OP_COUNT; op++) {
    int ok = 1;
    for (size_t n = 0; n <= 4099 && ok; n = n < 70 ? n + 1 : n * 3 + 7) {
      const size_t off = n % 4;
      float *pa = a + off, *pb = b + (n % 3), *py = y + 1, *pr = r + 1;
      fill_mixed(pa, n);
      fill_mixed(pb, n);
      const float s = specials[n % N_SPECIALS] + (n % 2 ? rng_uniform(-3, 3) : 0.0f);
      for (int variant = 0; variant < 4; variant++) {
        switch (variant) {
        case 0:
          bbi_f32_vbinary((bbi_binary_op)op, n, pa, pb, py);
          bbi_f32_vbinary_scalar((bbi_binary_op)op, n, pa, pb, pr);
          break;
        case 1:
          bbi_f32_vbinary_c((bbi_binary_op)op, n, pa, s, py);
          bbi_f32_vbinary_c_scalar((bbi_binary_op)op, n, pa, s, pr);
          break;
        case 2:
          bbi_f32_vbinary_rc((bbi_binary_op)op, n, s, pb, py);
          bbi_f32_vbinary_rc_scalar((bbi_binary_op)op, n, s, pb, pr);
          break;
        default:
          /* In place: y is a. */
          memcpy(py, pa, n * sizeof *pa);
          memcpy(pr, pa, n * sizeof *pa);
          bbi_f32_vbinary((bbi_binary_op)op, n, py, pb, py);
          bbi_f32_vbinary_scalar((bbi_binary_op)op, n, pr, pb, pr);
          break;
        }
        for (size_t i = 0; i < n && ok; i++) {
          if (!same_float(py[i], pr[i])) {
            fprintf(stderr, "%s variant %d n=%zu i=%zu: %a vs %a\n", binary_names[op], variant,
                    n, i, py[i], pr[i]);
            ok = 0;
          }
        }
      }
    }
    CHECK_MSG(ok, "binary %s", binary_names[op]);
  }
  free(a), free(b), free(y), free(r);
}

static void test_binary_row_broadcast(void) {
  rng_seed(4);
  static const size_t shapes[][2] = {{1, 1}, {3, 5}, {7, 16}, {4, 33}, {17, 3}, {2, 100}};
  for (int op = 0; op < BBI_BINARY_OP_COUNT; op++) {
    int ok = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      const size_t rows = shapes[s][0], cols = shapes[s][1], n = rows * cols;
      float *a = floats(n), *b = floats(cols), *y = floats(n), *r = floats(n);
      fill_mixed(a, n);
      fill_mixed(b, cols);
      for (int b_first = 0; b_first < 2; b_first++) {
        bbi_f32_vbinary_row((bbi_binary_op)op, rows, cols, a, b, b_first, y);
        bbi_f32_vbinary_row_scalar((bbi_binary_op)op, rows, cols, a, b, b_first, r);
        for (size_t i = 0; i < n; i++) ok &= same_float(y[i], r[i]);
      }
      free(a), free(b), free(y), free(r);
    }
    CHECK_MSG(ok, "row broadcast %s", binary_names[op]);
  }
  /* Values with known answers: the loops above only compare the two forms. */
  const float a[4] = {1, NAN, 3, -0.0f}, b[4] = {2, 0, NAN, 0.0f};
  float y[4];
  bbi_f32_vbinary(BBI_BINARY_MAX, 4, a, b, y);
  CHECK(y[0] == 2 && isnan(y[1]) && isnan(y[2]) && y[3] == 0);
  bbi_f32_vbinary(BBI_BINARY_MIN, 4, a, b, y);
  CHECK(y[0] == 1 && isnan(y[1]) && isnan(y[2]) && y[3] == 0);
  bbi_f32_vbinary_rc(BBI_BINARY_SUB, 4, 10.0f, a, y);
  CHECK(y[0] == 9 && y[2] == 7);
  bbi_f32_vbinary_c(BBI_BINARY_DIV, 4, a, 2.0f, y);
  CHECK(y[0] == 0.5f && y[2] == 1.5f);
}

static const char *const unary_names[] = {"neg", "abs",  "sqrt",    "exp",
                                          "log", "relu", "sigmoid", "tanh"};

static int unary_is_exact(int op) {
  return op == BBI_UNARY_NEG || op == BBI_UNARY_ABS || op == BBI_UNARY_SQRT || op == BBI_UNARY_RELU;
}

/* Inputs for the unary sweep: the specials, points where the approximations switch
 * branches or the result leaves the normal range, a stride through all 2^32 bit patterns
 * (every exponent, both signs, subnormals, infinities and NaNs), and dense random values in
 * the range where the functions are not saturated. */
static size_t unary_inputs(float *x, size_t cap) {
  static const float edges[] = {
      88.7228f,  88.72284f, 88.7229f,  88.8f,      89.0f,      -87.33654f, -87.3366f, -88.0f,
      -100.0f,   -103.9721f, -103.98f, -104.0f,    -150.0f,    0.693147f, -0.693147f, 0.34657f,
      0.625f,    -0.625f,   0.62499f, 0.62501f,   9.0f,       9.1f,       -9.1f,     1e-7f,
      -1e-7f,    1.41421f,  1.41422f, 0.70710f,   0.70711f,   1.0000001f, 0.99999994f, 1e-38f,
      5e-39f,    1e38f,     16.0f,    -16.0f,     20.0f,      -20.0f,     1e-20f,    -30.0f};
  size_t n = 0;
  for (size_t i = 0; i < N_SPECIALS; i++) x[n++] = specials[i];
  for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) x[n++] = edges[i];
  for (uint64_t u = 0; u < (1ull << 32) && n < cap / 2; u += 8191) x[n++] = float_of((uint32_t)u);
  while (n < cap) {
    const int kind = rng_int(0, 2);
    x[n++] = kind == 0 ? rng_uniform(-1.0f, 1.0f)
                       : kind == 1 ? rng_uniform(-20.0f, 20.0f) : rng_uniform(-105.0f, 90.0f);
  }
  return n;
}

static void test_unary_against_libm(void) {
  rng_seed(5);
  const size_t cap = 1100000;
  float *x = floats(cap), *y = floats(cap), *r = floats(cap);
  const size_t n = unary_inputs(x, cap);
  for (int op = 0; op < BBI_UNARY_OP_COUNT; op++) {
    bbi_f32_vunary((bbi_unary_op)op, n, x, y);
    bbi_f32_vunary_scalar((bbi_unary_op)op, n, x, r);
    int64_t worst = 0;
    size_t worst_i = 0;
    for (size_t i = 0; i < n; i++) {
      const int64_t d = unary_is_exact(op) ? (same_float(y[i], r[i]) ? 0 : INT64_MAX)
                                           : ulp_distance(y[i], r[i]);
      if (d > worst) worst = d, worst_i = i;
    }
    const int64_t bound = unary_is_exact(op) ? 0 : 2;
    printf("  %-7s max error %lld ulp over %zu inputs%s\n", unary_names[op], (long long)worst, n,
           worst == INT64_MAX ? " (a NaN or a sign mismatch)" : "");
    CHECK_MSG(worst <= bound, "%s(%a) = %a, reference %a", unary_names[op], x[worst_i],
              y[worst_i], r[worst_i]);
  }
  /* Short and unaligned arrays go through the tail code. */
  int ok = 1;
  for (int op = 0; op < BBI_UNARY_OP_COUNT; op++) {
    for (size_t len = 0; len < 20; len++) {
      bbi_f32_vunary((bbi_unary_op)op, len, x + 1 + len, y + 3);
      bbi_f32_vunary_scalar((bbi_unary_op)op, len, x + 1 + len, r + 3);
      for (size_t i = 0; i < len; i++) ok &= ulp_distance(y[3 + i], r[3 + i]) <= 2;
    }
  }
  CHECK(ok);
  /* Values whose exact answer is known. */
  const float in[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -1.0f};
  float out[6];
  bbi_f32_vunary(BBI_UNARY_EXP, 6, in, out);
  CHECK(out[0] == 1 && out[1] == 1 && out[2] == INFINITY && out[3] == 0 && isnan(out[4]));
  bbi_f32_vunary(BBI_UNARY_LOG, 6, in, out);
  CHECK(out[0] == -INFINITY && out[1] == -INFINITY && out[2] == INFINITY && isnan(out[3]) &&
        isnan(out[4]) && isnan(out[5]));
  bbi_f32_vunary(BBI_UNARY_TANH, 6, in, out);
  CHECK(out[0] == 0 && signbit(out[1]) && out[2] == 1 && out[3] == -1 && isnan(out[4]));
  bbi_f32_vunary(BBI_UNARY_SIGMOID, 6, in, out);
  CHECK(out[0] == 0.5f && out[1] == 0.5f && out[2] == 1 && out[3] == 0 && isnan(out[4]));
  bbi_f32_vunary(BBI_UNARY_RELU, 6, in, out);
  CHECK(out[0] == 0 && out[1] == 0 && !signbit(out[1]) && out[2] == INFINITY && out[3] == 0 &&
        isnan(out[4]) && out[5] == 0);
  free(x), free(y), free(r);
}

/* bbi_f32_vunary's sigmoid tests several vectors at once for the fast range; each float
 * must still get what bbi_f32x4_sigmoid gives its own vector of four: blocks of sixteen
 * where one lane (in each position in turn) is far out of the fast range, or none is. */
static void test_sigmoid_blocks(void) {
  const bbi_vmath_consts k = bbi_vmath_k;
  enum { N = 16 * 17 + 5 };
  float x[N], y[N], r[N];
  rng_seed(17);
  fill_uniform(x, N, -9.0f, 9.0f);
  /* far out on either side; block 16 stays fast */
  for (size_t b = 0; b < 16; b++) x[16 * b + b] = b % 3 == 0 ? -1e30f : b % 3 == 1 ? -95.0f - (float)b : 95.0f + (float)b;
  bbi_f32_vunary(BBI_UNARY_SIGMOID, N, x, y);
  int same = 1;
  for (size_t i = 0; i + 4 <= N; i += 4) {
    const bbi_f32x4 v = bbi_f32x4_sigmoid(bbi_f32x4_load(x + i), &k);
    bbi_f32x4_store(r + i, v);
  }
  for (size_t i = 0; i < N / 4 * 4; i++) same &= same_float(y[i], r[i]);
  CHECK_MSG(same, "vunary's sigmoid differs from bbi_f32x4_sigmoid's per-vector choice");
  CHECK(y[0] == 0.0f && y[17] > 0.0f && y[17] < 1e-40f); /* -1e30 and a subnormal result */
}

/* Sigmoid's fast path, 1 / (1 + exp(-x)) for |x| <= 86.5, within 2 ulp of the scalar twin
 * (sigmoid in double, rounded once): every 2039th float of that range on both sides, and
 * the 2 floats after each (3.3 million floats; all 2.2e9 of them, checked once, gave 2). A polynomial of one degree less, or e/(1 + e) dropped for x < 0 without this
 * form's care, shows 3 ulp or more here. */
static void test_sigmoid_fast_range(void) {
  enum { BLOCK = 3, STRIDE = 2039 };
  const uint32_t last = 0x42ad0000u; /* 86.5f */
  const size_t cap = 2 * (last / STRIDE + 1) * BLOCK;
  float *x = floats(cap), *y = floats(cap), *r = floats(cap);
  size_t n = 0;
  for (uint32_t sign = 0; sign < 2; sign++)
    for (uint32_t u = 0; u <= last; u += STRIDE)
      for (uint32_t d = 0; d < BLOCK && u + d <= last; d++) x[n++] = float_of((u + d) | sign << 31);
  bbi_f32_vunary(BBI_UNARY_SIGMOID, n, x, y);
  bbi_f32_vunary_scalar(BBI_UNARY_SIGMOID, n, x, r);
  int64_t worst = 0;
  size_t worst_i = 0;
  for (size_t i = 0; i < n; i++) {
    const int64_t d = ulp_distance(y[i], r[i]);
    if (d > worst) worst = d, worst_i = i;
  }
  printf("  sigmoid max error %lld ulp over %zu floats with |x| <= 86.5\n", (long long)worst, n);
  CHECK_MSG(worst <= 2, "sigmoid(%a) = %a, reference %a", x[worst_i], y[worst_i], r[worst_i]);
  free(x), free(y), free(r);
}

/* Lane j of y = exp_shifted(x) against exp in double: its error as a fraction of its bound
 * (test_exp_shifted), the largest kept in *worst. */
static void exp_shifted_check(bbi_f32x4 x, bbi_f32x4 y, int j, double *worst, float *worst_x) {
  const bbi_vmath_consts k = bbi_vmath_k;
  const double ref = exp((double)x[j]);
  double of_bound;
  if (bbi_i32x4_any(x < k.shifted_fast))
    of_bound = (double)ulp_distance(y[j], (float)ref) / 2.0;
  else
    of_bound = fabs(y[j] - ref) / (1.4 * (2.0 - x[j]) * 0x1p-24 * ref);
  if (of_bound > *worst) *worst = of_bound, *worst_x = x[j];
}

/* Softmax's exp of the shifted values (x - max <= 0), against exp in double over [-104, 0]
 * (a stride through every float there, where the results go subnormal and then 0, and
 * dense values where they do not), on both of its paths. Vectors whose lanes are all above
 * BBI_EXP_SHIFTED_FAST: within 1.4 (2 + |x|) 2^-24, relative (vmath.h; every float there,
 * checked once, gave 1.372); a polynomial of one degree less, refitted, is off by 2.8e-6,
 * 17 times the bound near 0. Vectors with a lane below it take bbi_f32x4_exp: within 2 ulp
 * of the correctly rounded result, which is what counts where the results are subnormal. */
static void test_exp_shifted(void) {
  rng_seed(11);
  const bbi_vmath_consts k = bbi_vmath_k;
  const uint32_t last = 0xc2d00000u; /* -104.0f */
  double worst = 0.0;
  float worst_x = 0.0f;
  size_t n = 0;
  for (uint64_t u = 0x80000000u; u <= last + 4ull * 8191; u += 4 * 8191) {
    bbi_f32x4 x;
    for (int j = 0; j < 4; j++) {
      const uint64_t b = u + (uint64_t)j * 2039;
      x[j] = b > last ? rng_uniform(-86.0f, 0.0f) : float_of((uint32_t)b);
    }
    const bbi_f32x4 y = bbi_f32x4_exp_shifted(x, &k);
    for (int j = 0; j < 4; j++, n++) exp_shifted_check(x, y, j, &worst, &worst_x);
  }
  for (size_t i = 0; i < 250000; i++) {
    bbi_f32x4 x;
    for (int j = 0; j < 4; j++) x[j] = rng_uniform(-87.0f, 0.0f);
    const bbi_f32x4 y = bbi_f32x4_exp_shifted(x, &k);
    for (int j = 0; j < 4; j++, n++) exp_shifted_check(x, y, j, &worst, &worst_x);
  }
  printf("  exp of shifted values: max error %.3f of the bound over %zu inputs\n", worst, n);
  CHECK_MSG(worst <= 1.0, "exp_shifted(%a) is off by %.3f of the bound", worst_x, worst);
  const bbi_f32x4 edges = bbi_f32x4_exp_shifted((bbi_f32x4){-INFINITY, NAN, -0.0f, 0.0f}, &k);
  CHECK(edges[0] == 0.0f && isnan(edges[1]) && edges[2] == 1.0f && edges[3] == 1.0f);
  const bbi_f32x4 fast = bbi_f32x4_exp_shifted((bbi_f32x4){NAN, -1.0f, -86.0f, -0.5f}, &k);
  CHECK(isnan(fast[0]) && fabs(fast[1] - exp(-1.0)) <= 4.2 * 0x1p-24 * exp(-1.0) &&
        fabs(fast[2] - exp(-86.0)) <= 123.0 * 0x1p-24 * exp(-86.0));
}

/* ---- reductions and softmax -------------------------------------------------------------- */

static const char *const reduce_names[] = {"sum", "mean", "max", "min"};

static void test_reduce_rows(void) {
  rng_seed(6);
  static const size_t cols_list[] = {0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1000, 4097};
  for (int op = 0; op < BBI_REDUCE_OP_COUNT; op++) {
    int ok = 1;
    for (size_t ci = 0; ci < sizeof cols_list / sizeof cols_list[0]; ci++) {
      const size_t cols = cols_list[ci], rows = 3;
      float *x = floats(rows * cols + 1), y[3], r[3];
      fill_uniform(x + 1, rows * cols, -10.0f, 10.0f);
      /* Row 1 gets a NaN somewhere (when it has room). */
      if (cols > 0) x[1 + cols + (ci * 7) % cols] = NAN;
      bbi_f32_reduce_rows((bbi_reduce_op)op, rows, cols, x + 1, y);
      bbi_f32_reduce_rows_scalar((bbi_reduce_op)op, rows, cols, x + 1, r);
      for (size_t row = 0; row < rows; row++) {
        if (op == BBI_REDUCE_MAX || op == BBI_REDUCE_MIN) {
          ok &= same_float(y[row], r[row]);
          continue;
        }
        double mag = 0.0;
        for (size_t i = 0; i < cols; i++) mag += fabs(x[1 + row * cols + i]);
        if (op == BBI_REDUCE_MEAN && cols) mag /= (double)cols;
        const double tol = 2.0 * (double)(cols + 2) * FLT_EPSILON * mag;
        ok &= fabs((double)y[row] - r[row]) <= tol || (isnan(y[row]) && isnan(r[row]));
      }
      if (cols > 0) ok &= isnan(y[1]);
      free(x);
    }
    CHECK_MSG(ok, "reduce %s", reduce_names[op]);
  }
  float y;
  bbi_f32_reduce_rows(BBI_REDUCE_MAX, 1, 0, NULL, &y);
  CHECK(y == -INFINITY);
  bbi_f32_reduce_rows(BBI_REDUCE_MIN, 1, 0, NULL, &y);
  CHECK(y == INFINITY);
  const float x[5] = {3, -1, 7, 2, 4};
  bbi_f32_reduce_rows(BBI_REDUCE_MEAN, 1, 5, x, &y);
  CHECK(y == 3.0f);
  /* Empty extents never touch the data, so NULL is fine there. */
  float e[4] = {1, 1, 1, 1};
  bbi_f32_reduce_rows(BBI_REDUCE_MEAN, 2, 0, NULL, e);
  CHECK(isnan(e[0]) && isnan(e[1]));
  bbi_f32_reduce_strided(BBI_REDUCE_SUM, 2, 0, 2, NULL, e);
  CHECK(e[0] == 0 && e[3] == 0);
  bbi_f32_softmax_rows(3, 0, NULL, NULL);
  bbi_f32_log_softmax_rows(3, 0, NULL, NULL);
  bbi_f32_vbinary_row(BBI_BINARY_ADD, 3, 0, NULL, NULL, 0, NULL);
  bbi_f32_vbinary(BBI_BINARY_ADD, 0, NULL, NULL, NULL);
  bbi_f32_vunary(BBI_UNARY_EXP, 0, NULL, NULL);
}

/* Over a middle axis the SIMD kernel accumulates in the same order as its twin, so every
 * operation, sums included, must match exactly. */
static void test_reduce_strided(void) {
  rng_seed(7);
  static const size_t shapes[][3] = {{1, 1, 2}, {2, 3, 4}, {3, 7, 5}, {1, 64, 17}, {4, 1, 33},
                                     {2, 0, 6}, {5, 9, 1}, {1, 100, 130}};
  for (int op = 0; op < BBI_REDUCE_OP_COUNT; op++) {
    int ok = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      const size_t outer = shapes[s][0], len = shapes[s][1], inner = shapes[s][2];
      float *x = floats(outer * len * inner), *y = floats(outer * inner), *r = floats(outer * inner);
      fill_uniform(x, outer * len * inner, -10.0f, 10.0f);
      if (outer * len * inner > 10) x[7] = NAN;
      bbi_f32_reduce_strided((bbi_reduce_op)op, outer, len, inner, x, y);
      bbi_f32_reduce_strided_scalar((bbi_reduce_op)op, outer, len, inner, x, r);
      for (size_t i = 0; i < outer * inner; i++) {
        if (inner == 1 && (op == BBI_REDUCE_SUM || op == BBI_REDUCE_MEAN))
          ok &= fabsf(y[i] - r[i]) <= 1e-4f * (float)len * 10.0f || (isnan(y[i]) && isnan(r[i]));
        else
          ok &= same_float(y[i], r[i]);
      }
      free(x), free(y), free(r);
    }
    CHECK_MSG(ok, "strided reduce %s", reduce_names[op]);
  }
}

/* A NaN anywhere in a row makes the whole row NaN, as in the scalar twin (and onnxruntime):
 * the row's maximum passes NaNs over, so the NaN must come through the sum. A row of 37
 * floats has NaN in turn in the sixteen-float steps, the four-float step and the scalar
 * tail of the max pass; then a row of NaNs alone, and a NaN beside +inf. */
static void test_softmax_nan(void) {
  enum { COLS = 37 };
  float x[COLS], y[COLS], r[COLS];
  int ok = 1;
  for (size_t at = 0; at <= COLS + 1; at++) {
    for (size_t i = 0; i < COLS; i++) x[i] = (float)((int)(i * 7 % 11) - 5);
    if (at < COLS) x[at] = NAN;
    else if (at == COLS) for (size_t i = 0; i < COLS; i++) x[i] = NAN;
    else x[3] = INFINITY, x[30] = NAN;
    bbi_f32_softmax_rows(1, COLS, x, y);
    bbi_f32_softmax_rows_scalar(1, COLS, x, r);
    for (size_t i = 0; i < COLS; i++) ok &= isnan(y[i]) && isnan(r[i]);
    bbi_f32_log_softmax_rows(1, COLS, x, y);
    bbi_f32_log_softmax_rows_scalar(1, COLS, x, r);
    for (size_t i = 0; i < COLS; i++) ok &= isnan(y[i]) && isnan(r[i]);
  }
  CHECK_MSG(ok, "a NaN in a softmax row does not make the whole row NaN");
}

/* Softmax against softmax in double on the same float inputs, exp(x_i - max) / sum, element
 * by element, relative to each output. The bound adds what each step may contribute, in
 * units of 2^-24: the subtraction x_i - max (|d_i|), the exp of it (1.4 (2 + |d_i|),
 * vmath.h), the row's float sum (each term goes through at most cols/8 + 4 additions: two
 * accumulators of four lanes, eight floats a step, up to two more steps into the first,
 * then their sum and the four lanes'; plus its terms' own errors, weighted by the terms), and the two roundings of 1/sum and of the product. Rows of
 * 1 to 1025 floats spread over [-8, 8], [-30, 30] and [-100, 100] (where terms leave the fast
 * path). The largest error seen is printed as a fraction of the bound. */
static void test_softmax_reference(void) {
  rng_seed(12);
  static const size_t cols_list[] = {1, 3, 8, 17, 100, 1000, 1025};
  static const float spreads[] = {8.0f, 30.0f, 100.0f};
  double worst = 0.0;
  for (size_t ci = 0; ci < sizeof cols_list / sizeof cols_list[0]; ci++) {
    const size_t cols = cols_list[ci], rows = 3;
    float *x = floats(rows * cols), *y = floats(rows * cols);
    for (size_t row = 0; row < rows; row++)
      fill_uniform(x + row * cols, cols, -spreads[row], spreads[row]);
    bbi_f32_softmax_rows(rows, cols, x, y);
    for (size_t row = 0; row < rows; row++) {
      const float *xr = x + row * cols, *yr = y + row * cols;
      float max = xr[0];
      for (size_t i = 1; i < cols; i++) max = xr[i] > max ? xr[i] : max;
      double sum = 0.0, term_err = 0.0;
      for (size_t i = 0; i < cols; i++) {
        const double d = (double)xr[i] - max, e = exp(d);
        sum += e;
        term_err += e * (1.4 * (2.0 - d) - d);
      }
      const double row_err = (double)(cols / 8 + 4) + term_err / sum + 2.0;
      for (size_t i = 0; i < cols; i++) {
        const double d = (double)xr[i] - max, ref = exp(d) / sum;
        const double bound = (1.4 * (2.0 - d) - d + row_err) * 0x1p-24 * ref + FLT_MIN;
        const double of_bound = fabs(yr[i] - ref) / bound;
        worst = of_bound > worst ? of_bound : worst;
      }
    }
    free(x), free(y);
  }
  printf("  softmax against double: max error %.3f of the bound\n", worst);
  CHECK_MSG(worst <= 1.0, "softmax is off by %.3f of its bound against double", worst);
}

static void test_softmax(void) {
  rng_seed(8);
  static const size_t cols_list[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 100, 1000, 1025};
  int ok = 1, ok_log = 1, ok_sum = 1;
  for (size_t ci = 0; ci < sizeof cols_list / sizeof cols_list[0]; ci++) {
    const size_t cols = cols_list[ci], rows = 4, n = rows * cols;
    float *x = floats(n), *y = floats(n), *r = floats(n);
    for (size_t row = 0; row < rows; row++) {
      /* Row 2 has huge values: only the max shift keeps exp finite. */
      const float scale = row == 2 ? 1e4f : row == 3 ? 30.0f : 3.0f;
      fill_uniform(x + row * cols, cols, -scale, scale);
    }
    const double rel = (double)(2 * cols + 8) * FLT_EPSILON;
    bbi_f32_softmax_rows(rows, cols, x, y);
    bbi_f32_softmax_rows_scalar(rows, cols, x, r);
    for (size_t row = 0; row < rows; row++) {
      double total = 0.0;
      for (size_t i = 0; i < cols; i++) {
        const size_t at = row * cols + i;
        ok &= fabs((double)y[at] - r[at]) <= rel * r[at] + 1e-38;
        total += y[at];
      }
      ok_sum &= fabs(total - 1.0) <= rel;
    }
    bbi_f32_log_softmax_rows(rows, cols, x, y);
    bbi_f32_log_softmax_rows_scalar(rows, cols, x, r);
    for (size_t at = 0; at < n; at++)
      ok_log &= fabs((double)y[at] - r[at]) <= 4.0 * FLT_EPSILON * fabs(r[at]) + rel;
    /* In place gives the same as out of place. */
    memcpy(r, x, n * sizeof *x);
    bbi_f32_softmax_rows(rows, cols, x, y);
    bbi_f32_softmax_rows(rows, cols, r, r);
    ok &= memcmp(r, y, n * sizeof *y) == 0;
    free(x), free(y), free(r);
  }
  CHECK_MSG(ok, "softmax differs from the scalar twin");
  CHECK_MSG(ok_sum, "softmax rows do not sum to 1");
  CHECK_MSG(ok_log, "log-softmax differs from the scalar twin");
  const float x[3] = {1000.0f, 1000.0f, -INFINITY};
  float y[3];
  bbi_f32_softmax_rows(1, 3, x, y);
  CHECK(y[0] == 0.5f && y[1] == 0.5f && y[2] == 0.0f);
  bbi_f32_log_softmax_rows(1, 3, x, y);
  CHECK(fabsf(y[0] + 0.6931472f) < 1e-6f && y[2] == -INFINITY);
  test_softmax_nan();
}

/* ---- comparison and selection ----------------------------------------------------------------- */

static void test_compare_and_select(void) {
  rng_seed(10);
  static const size_t sizes[] = {0, 1, 3, 15, 16, 17, 33, 64, 100, 1000};
  int ok_cmp = 1, ok_sel = 1;
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    const size_t n = sizes[si];
    float *a = floats(n + 1), *b = floats(n + 1), *y = floats(n + 1), *r = floats(n + 1);
    uint8_t *cy = malloc(n + 1), *cr = malloc(n + 1);
    fill_mixed(a, n), fill_mixed(b, n);
    for (size_t i = 0; i < n; i += 7) b[i] = a[i]; /* ties */
    for (int op = BBI_COMPARE_EQ; op <= BBI_COMPARE_LE; op++)
      for (size_t sa = 0; sa < 2; sa++)
        for (size_t sb = 0; sb < 2; sb++) {
          bbi_f32_vcompare((bbi_compare_op)op, n, a, sa, b, sb, cy);
          bbi_f32_vcompare_scalar((bbi_compare_op)op, n, a, sa, b, sb, cr);
          ok_cmp &= n == 0 || memcmp(cy, cr, n) == 0;
          for (size_t i = 0; i < n; i++) ok_cmp &= cy[i] <= 1;
          for (size_t i = 0; i < n; i++) cy[i] = (uint8_t)(cy[i] * (1 + i % 3)); /* any nonzero byte is true */
          bbi_f32_vselect(n, cy, a, sa, b, sb, y);
          bbi_f32_vselect_scalar(n, cy, a, sa, b, sb, r);
          for (size_t i = 0; i < n; i++) ok_sel &= bits_of(y[i]) == bits_of(r[i]);
        }
    free(a), free(b), free(y), free(r), free(cy), free(cr);
  }
  CHECK_MSG(ok_cmp, "comparisons differ from the scalar twin");
  CHECK_MSG(ok_sel, "selection differs from the scalar twin");
  const float x[3] = {NAN, 1.0f, -0.0f}, zero = 0.0f;
  uint8_t c[3];
  bbi_f32_vcompare(BBI_COMPARE_GT, 3, x, 1, &zero, 0, c);
  CHECK(c[0] == 0 && c[1] == 1 && c[2] == 0);
}

/* ---- pooling -------------------------------------------------------------------------------- */

/* The window's output extent as ONNX computes it from its input, kernel, dilations, strides
 * and padding (ceil_mode rounds the last partial step up). */
static void place_window(bbi_window2d *g, int ceil_mode) {
  const size_t span_h = (g->kh - 1) * g->dh + 1, span_w = (g->kw - 1) * g->dw + 1;
  const size_t room_h = g->ih + g->ph + g->ph_end, room_w = g->iw + g->pw + g->pw_end;
  const size_t up_h = ceil_mode ? g->sh - 1 : 0, up_w = ceil_mode ? g->sw - 1 : 0;
  g->oh = room_h < span_h ? 0 : (room_h - span_h + up_h) / g->sh + 1;
  g->ow = room_w < span_w ? 0 : (room_w - span_w + up_w) / g->sw + 1;
}

/* A random convolution window on an input of up to max_ih × max_iw, kernels up to max_k on a
 * side, dilations up to 2, strides up to 3 and padding up to the window's span on each side;
 * its output extent left to the caller. */
static bbi_window2d random_conv_window(int max_ih, int max_iw, int max_k) {
  bbi_window2d g = {0};
  g.ih = (size_t)rng_int(1, max_ih), g.iw = (size_t)rng_int(1, max_iw);
  g.kh = (size_t)rng_int(1, max_k), g.kw = (size_t)rng_int(1, max_k);
  g.dh = (size_t)rng_int(1, 2), g.dw = (size_t)rng_int(1, 2);
  g.sh = (size_t)rng_int(1, 3), g.sw = (size_t)rng_int(1, 3);
  const size_t span_h = (g.kh - 1) * g.dh + 1, span_w = (g.kw - 1) * g.dw + 1;
  g.ph = (size_t)rng_int(0, (int)span_h), g.ph_end = (size_t)rng_int(0, (int)span_h);
  g.pw = (size_t)rng_int(0, (int)span_w), g.pw_end = (size_t)rng_int(0, (int)span_w);
  return g;
}

/* A random window geometry with its output extent as ONNX computes it (ceil_mode or not). */
static bbi_window2d random_pool(void) {
  bbi_window2d g = {0};
  g.ih = (size_t)rng_int(1, 13), g.iw = (size_t)rng_int(1, 37);
  g.kh = (size_t)rng_int(1, 4), g.kw = (size_t)rng_int(1, 4);
  g.sh = (size_t)rng_int(1, 3), g.sw = (size_t)rng_int(1, 3);
  g.dh = (size_t)rng_int(1, 2), g.dw = (size_t)rng_int(1, 2);
  g.ph = (size_t)rng_int(0, (int)g.kh - 1), g.pw = (size_t)rng_int(0, (int)g.kw - 1);
  g.ph_end = (size_t)rng_int(0, (int)g.kh - 1), g.pw_end = (size_t)rng_int(0, (int)g.kw - 1);
  g.count_include_pad = rng_int(0, 1);
  place_window(&g, rng_int(0, 1));
  return g;
}

/* The column matrix and its transposed (patch-row) form, SIMD against the scalar twins, bit
 * for bit: random windows (padding up to one more than the window's span, dilations,
 * strides), half of them stride 1 with the width kept (the one-run path), the 3×3 / pad 1
 * convolutions of a small CNN and the weight gradient of the second, a resnet's 7×7
 * stride-2 stem. The
 * matrix is surrounded by sentinels: nothing outside its rows may be written. */
static void test_im2col_matches_scalar(void) {
  rng_seed(12);
  int ok = 1, ok_bounds = 1, ok_patches = 1, ok_col2im = 1;
  for (int t = 0; t < 800; t++) {
    bbi_window2d g = {0};
    g.ih = (size_t)rng_int(1, 13), g.iw = (size_t)rng_int(1, 30);
    g.kh = (size_t)rng_int(1, 4), g.kw = (size_t)rng_int(1, 4);
    g.dh = (size_t)rng_int(1, 2), g.dw = (size_t)rng_int(1, 2);
    const size_t span_h = (g.kh - 1) * g.dh + 1, span_w = (g.kw - 1) * g.dw + 1;
    if (t % 2) {
      g.sh = g.sw = 1;
      g.ph = (size_t)rng_int(0, (int)span_h - 1), g.ph_end = span_h - 1 - g.ph;
      g.pw = (size_t)rng_int(0, (int)span_w - 1), g.pw_end = span_w - 1 - g.pw;
      if (t % 4 == 1) g.ph = (size_t)rng_int(0, (int)span_h + 1); /* height changes, width kept */
    } else {
      g.sh = (size_t)rng_int(1, 3), g.sw = (size_t)rng_int(1, 3);
      g.ph = (size_t)rng_int(0, (int)span_h), g.ph_end = (size_t)rng_int(0, (int)span_h);
      g.pw = (size_t)rng_int(0, (int)span_w), g.pw_end = (size_t)rng_int(0, (int)span_w);
    }
    if (t % 10 == 0) g = (bbi_window2d){28, 28, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    if (t % 10 == 5) g = (bbi_window2d){14, 14, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    /* a weight gradient's convolution: dY's 14×14 as the window, 3×3 positions */
    if (t % 10 == 7) g = (bbi_window2d){14, 14, 3, 3, 14, 14, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    /* the digits CNN's two weight gradients (8×8 and 4×4 windows, 3×3 positions, runs of
     * kw from a zero-bordered copy), the 28×28 CNN's first, and one whose bordered copy
     * (52×52) is too large for it */
    if (t % 20 == 9) g = (bbi_window2d){8, 8, 3, 3, 8, 8, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    if (t % 20 == 19) g = (bbi_window2d){4, 4, 3, 3, 4, 4, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    if (t % 40 == 1) g = (bbi_window2d){28, 28, 3, 3, 28, 28, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    if (t % 40 == 21) g = (bbi_window2d){50, 50, 3, 3, 50, 50, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    /* a resnet's stem, 7×7 at stride 2 (the stride-2 vector copies) */
    if (t % 10 == 3) g = (bbi_window2d){64, 64, 32, 32, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, 0};
    place_window(&g, 0);
    const size_t channels = (size_t)rng_int(1, 3), ld = g.oh * g.ow + (size_t)rng_int(0, 5);
    const size_t rows = channels * g.kh * g.kw, size = rows * ld + 8;
    float *x = floats(channels * g.ih * g.iw), *y = floats(size), *r = floats(size);
    fill_uniform(x, channels * g.ih * g.iw, -4.0f, 4.0f);
    for (size_t i = 0; i < size; i++) y[i] = r[i] = 1234.5f;
    bbi_f32_im2col_2d(&g, channels, x, y + 4, ld);
    bbi_f32_im2col_2d_scalar(&g, channels, x, r + 4, ld);
    ok &= memcmp(y, r, size * sizeof *y) == 0;
    for (size_t i = 0; i < 4; i++) ok_bounds &= y[i] == 1234.5f && y[size - 1 - i] == 1234.5f;
    free(y), free(r);
    /* the adjoint: a column matrix of random values added onto planes that already hold
     * values (ConvTranspose's bias), SIMD against the scalar twin bit for bit, nothing
     * written outside the planes */
    {
      const size_t xs = channels * g.ih * g.iw + 8;
      float *cm = floats(rows * ld + 1), *xa = floats(xs), *xb = floats(xs);
      fill_uniform(cm, rows * ld + 1, -3.0f, 3.0f);
      fill_uniform(xa, xs, -1.0f, 1.0f);
      for (size_t i = 0; i < 4; i++) xa[i] = xa[xs - 1 - i] = 1234.5f;
      memcpy(xb, xa, xs * sizeof *xa);
      bbi_f32_col2im_2d(&g, channels, cm, ld, xa + 4);
      bbi_f32_col2im_2d_scalar(&g, channels, cm, ld, xb + 4);
      ok_col2im &= memcmp(xa, xb, xs * sizeof *xa) == 0;
      for (size_t i = 0; i < 4; i++) ok_bounds &= xa[i] == 1234.5f && xa[xs - 1 - i] == 1234.5f;
      free(cm), free(xa), free(xb);
    }
    /* the transposed layout: one row per output position */
    const size_t pld = rows + (size_t)rng_int(0, 5), psize = g.oh * g.ow * pld + 8;
    y = floats(psize), r = floats(psize);
    for (size_t i = 0; i < psize; i++) y[i] = r[i] = 1234.5f;
    bbi_f32_im2col_patches_2d(&g, channels, x, y + 4, pld);
    bbi_f32_im2col_patches_2d_scalar(&g, channels, x, r + 4, pld);
    ok_patches &= memcmp(y, r, psize * sizeof *y) == 0;
    for (size_t i = 0; i < 4; i++) ok_bounds &= y[i] == 1234.5f && y[psize - 1 - i] == 1234.5f;
    /* and it is the transpose of the column matrix */
    float *cm = floats(rows * g.oh * g.ow + 1);
    bbi_f32_im2col_2d_scalar(&g, channels, x, cm, g.oh * g.ow);
    for (size_t p = 0; p < g.oh * g.ow; p++)
      for (size_t k = 0; k < rows; k++) ok_patches &= same_float(r[4 + p * pld + k], cm[k * g.oh * g.ow + p]);
    free(x), free(y), free(r), free(cm);
  }
  CHECK_MSG(ok, "im2col differs from the scalar twin");
  CHECK_MSG(ok_patches, "im2col's patch rows differ from the scalar twin or from the column matrix transposed");
  CHECK_MSG(ok_col2im, "col2im differs from the scalar twin");
  CHECK_MSG(ok_bounds, "im2col wrote outside the column matrix");
}

/* The column matrix written straight into packed panels (bbi_f32_im2col_pack_2d) is, byte
 * for byte, the scalar column matrix packed by bbi_f32_gemm_pack_b_rows as B and by
 * bbi_f32_gemm_pack_a (read transposed: positions as rows, panels 4 or MR tall) as A: random
 * windows (strides 1 to 3, dilations, padding past the window's span, positions that end
 * mid-panel), the 3×3 / pad 1 and stride-2 convolutions of a resnet's small maps and its
 * 7×7 stride-2 stem, a range of channels in the middle of the input, bands of output rows
 * (a window that starts below the image's first row, channels a whole image apart), every
 * configuration (the tiny ones cut k into several blocks; as A, every channel). Where it declines (no kernel for the
 * configuration or the shape) it must leave the panels untouched; on a machine with
 * AVX-512 it must take the shipped 32-wide configuration's cases. */
static void test_im2col_pack_matches_packing(void) {
  bbi_f32_gemm_config cfgs[8];
  const size_t ncfg = test_configs(cfgs, 8);
  rng_seed(27);
  int ok = 1, ok_a = 1, ok_untouched = 1, ok_range = 1;
  size_t taken = 0, wide_cases = 0, taken_a = 0, wide_a = 0, bands = 0, ranged_a = 0;
  for (int t = 0; t < 300; t++) {
    bbi_window2d g = random_conv_window(20, 40, 4);
    const size_t span_h = (g.kh - 1) * g.dh + 1, span_w = (g.kw - 1) * g.dw + 1;
    if (t % 2) g.sh = g.sw = 1, g.ph_end = span_h - 1 - (g.ph = span_h / 2), g.pw_end = span_w - 1 - (g.pw = span_w / 2);
    if (t % 8 == 0) g = (bbi_window2d){16, 16, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    if (t % 8 == 2) g = (bbi_window2d){8, 8, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    if (t % 8 == 4) g = (bbi_window2d){16, 16, 8, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0};
    if (t % 16 == 6) g = (bbi_window2d){64, 64, 32, 32, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, 0};
    /* a resnet's 2×2 maps: the 3×3 / pad 1 on 2×2 and the 3×3 / 2 from 4×4 */
    if (t % 8 == 5) g = (bbi_window2d){2, 2, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    if (t % 8 == 7) g = (bbi_window2d){4, 4, 2, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0};
    place_window(&g, 0);
    const size_t channels = (size_t)rng_int(1, 5), c0 = (size_t)rng_int(0, (int)channels - 1);
    const size_t c1 = (size_t)rng_int((int)c0 + 1, (int)channels), taps = g.kh * g.kw;
    if (g.oh * g.ow == 0) continue;
    const size_t plane = g.ih * g.iw;
    float *image = floats(channels * plane + 1), *full = floats(channels * taps * g.oh * g.ow + 1);
    fill_uniform(image, channels * plane, -4.0f, 4.0f);
    if (t % 3 == 0) image[0] = -0.0f;
    bbi_f32_im2col_2d_scalar(&g, channels, image, full, g.oh * g.ow);
    /* a third of the cases: output rows [oy0, oy1) only, as a band of a convolution packs
     * them — the band's window reads the image's rows r0.. (with what padding is left above
     * them), its channels a whole image plane apart; its column matrix is those rows'
     * columns of the whole one */
    size_t oy0 = 0, oy1 = g.oh, r0 = 0;
    const bbi_window2d whole = g;
    if (t % 3 == 1) {
      oy0 = (size_t)rng_int(0, (int)g.oh - 1), oy1 = (size_t)rng_int((int)oy0 + 1, (int)g.oh);
      const size_t shift = oy0 * g.sh;
      if (shift <= g.ph) g.ph -= shift;
      else r0 = shift - g.ph < g.ih ? shift - g.ph : g.ih, g.ph = 0;
      g.ih -= r0, g.oh = oy1 - oy0;
      bands += r0 > 0 && g.ih > 0;
    }
    const float *x = image + r0 * whole.iw;
    const size_t n = g.oh * g.ow, k = channels * taps;
    float *col = floats(k * n + 1);
    for (size_t p = 0; p < k; p++) memcpy(col + p * n, full + p * whole.oh * whole.ow + oy0 * g.ow, n * sizeof *col);
    for (size_t ci = 0; ci < ncfg; ci++) {
      const bbi_f32_gemm_config *cfg = &cfgs[ci];
      const size_t size = bbi_f32_gemm_packed_b_size(cfg, n, k);
      char *want = malloc(size), *got = malloc(size);
      memset(want, 0xab, size), memset(got, 0xab, size);
      bbi_f32_gemm_pack_b_rows(cfg, n, k, c0 * taps, c1 * taps, col + c0 * taps * n, want);
      const int did = bbi_f32_im2col_pack_2d(cfg, &g, c0, c1, x, plane, k, 0, got);
      if (did) ok &= memcmp(want, got, size) == 0;
      else {
        for (size_t i = 0; i < size; i++) ok_untouched &= (unsigned char)got[i] == 0xab;
      }
      taken += (size_t)did;
      wide_cases += cfg->nr == 32 && ci % 2 == 0 && n + 32 <= 2048;
      free(want), free(got);
      /* as A, positions as rows (every channel): bbi_f32_gemm_pack_a of the column matrix read transposed */
      const size_t a_size = bbi_f32_gemm_packed_a_size(cfg, n, k);
      want = malloc(a_size), got = malloc(a_size);
      memset(want, 0xab, a_size), memset(got, 0xab, a_size);
      bbi_f32_gemm_pack_a(cfg, n, k, 1, 1.0f, col, n, want, a_size);
      const int did_a = bbi_f32_im2col_pack_2d(cfg, &g, 0, channels, x, plane, k, 1, got);
      if (did_a) {
        bbi_f32_gemm_pack_a_header(cfg, n, k, 1.0f, got);
        ok_a &= memcmp(want + 64, got + 64, a_size - 64) == 0; /* the panels, after the header */
        if (n > 1) { /* and the header: a product takes it, with the bits of pack_a's */
          float *b = floats(k * 5), *c = floats(n * 5), *c_ref = floats(n * 5);
          fill_uniform(b, k * 5, -1.0f, 1.0f);
          bbi_f32_gemm_args ga = {0};
          ga.m = n, ga.n = 5, ga.k = k, ga.alpha = 1.0f, ga.b = b, ga.ldb = 5, ga.ldc = 5;
          const size_t scratch_size = bbi_f32_gemm_scratch_size_for(cfg, n, 5, k);
          void *scratch = malloc(scratch_size);
          ga.packed_a = want, ga.c = c_ref;
          int rc = bbi_f32_gemm_run(cfg, &ga, scratch, scratch_size);
          ga.packed_a = got, ga.c = c;
          rc |= bbi_f32_gemm_run(cfg, &ga, scratch, scratch_size);
          ok_a &= rc == 0 && memcmp(c, c_ref, n * 5 * sizeof *c) == 0;
          free(b), free(c), free(c_ref), free(scratch);
        }
      } else {
        for (size_t i = 0; i < a_size; i++) ok_untouched &= (unsigned char)got[i] == 0xab;
      }
      taken_a += (size_t)did_a;
      wide_a += cfg->nr == 32 && ci % 2 == 0 && n >= 2 && n <= cfg->mc;
      /* as A, channels [c0, c1) only (a piece of a pack cut across the pool), at most four
       * positions (one 4-tall panel): those channels' rows as pack_a's, every other byte
       * untouched */
      if (n <= 4) {
        memset(got, 0xab, a_size);
        if (bbi_f32_im2col_pack_2d(cfg, &g, c0, c1, x, plane, k, 1, got)) {
          ranged_a += cfg->nr == 32 && n == 4 && plane <= 16;
          for (size_t p = c0 * taps; p < c1 * taps; p++) {
            size_t stride, rows_after, height;
            char *row = (char *)bbi_f32_gemm_packed_a_row(cfg, n, k, p, got, &stride, &rows_after, &height);
            const size_t at = (size_t)(row - got), bytes = height * sizeof(float);
            ok_range &= at + bytes <= a_size && memcmp(row, want + at, n * sizeof(float)) == 0;
            memset(row, 0xab, bytes);
          }
          for (size_t i = 0; i < a_size; i++) ok_range &= (unsigned char)got[i] == 0xab;
        }
      }
      free(want), free(got);
    }
    free(image), free(full), free(col);
  }
  CHECK_MSG(bands > 20, "too few bands that start below the image's first row");
  CHECK_MSG(ok, "the column matrix packed straight into panels differs from im2col + pack_b_rows");
  CHECK_MSG(ok_a, "the column matrix packed straight into A panels differs from bbi_f32_gemm_pack_a");
  CHECK_MSG(ok_untouched, "a declined im2col_pack wrote into the panels");
  CHECK_MSG(ok_range, "a range of channels packed as A differs from pack_a's rows or wrote outside them");
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (__builtin_cpu_supports("avx512f")) {
    CHECK_MSG(wide_cases > 0, "no case for the 32-wide configuration");
    CHECK_MSG(taken >= wide_cases, "the AVX-512 kernel declined a shipped configuration's case");
    CHECK_MSG(wide_a > 0 && taken_a >= wide_a, "the AVX-512 kernel declined a shipped configuration's A case");
    CHECK_MSG(ranged_a > 10, "too few ranges of channels as A on four positions of a small plane");
  }
#else
  (void)taken, (void)wide_cases, (void)taken_a, (void)wide_a, (void)ranged_a;
#endif
}

/* bbi_f32_conv_rows against im2col + bbi_f32_gemm with W packed as A, the path it stands
 * in for: the same bits (or NaN for NaN) on random windows — strides 1 to 3, kernels up to
 * 7, dilations, padding past the window's span, odd input sizes, output widths from 1 to
 * past two tiles, output channels that end mid-panel — and a resnet's 7×7 stride-2 stem,
 * with and without the bias, an addend holding NaN, ±∞ and -0, Relu and the clamp, the
 * output rows computed in random bands, nothing written past the output. Cases where W is not one k block are skipped (the
 * Conv does not hand those over); on a machine with AVX-512 enough cases must run. */
#define GUARD_FLOATS 1024 /* after the output: must stay untouched */
static void test_conv_rows_matches_gemm(void) {
  rng_seed(31);
  int ok = 1, ok_untouched = 1;
  size_t ran = 0;
  for (int t = 0; t < 200; t++) {
    bbi_window2d g = random_conv_window(24, 75, 7);
    if (t % 4 == 0) g = (bbi_window2d){64, 64, 0, 0, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, 0};
    if (t % 4 == 1) g.sw = 2, g.dw = 1; /* the stride-2 vector copies */
    place_window(&g, 0);
    if (g.oh * g.ow == 0) continue;
    const size_t channels = (size_t)rng_int(1, 4), m = t % 4 == 0 ? 64 : (size_t)rng_int(1, 21);
    const size_t plane = g.ih * g.iw, npos = g.oh * g.ow, k = channels * g.kh * g.kw;
    size_t stride, rows_after, height;
    const size_t a_size = bbi_f32_gemm_packed_a_size(NULL, m, k);
    char *packed = malloc(a_size);
    float *x = floats(channels * plane), *w = floats(m * k), *bias = floats(m), *addend = floats(m * npos);
    fill_uniform(x, channels * plane, -4.0f, 4.0f);
    if (t % 3 == 0) x[0] = -0.0f;
    fill_uniform(w, m * k, -1.0f, 1.0f);
    fill_uniform(bias, m, -1.0f, 1.0f);
    fill_mixed(addend, m * npos);
    bbi_f32_gemm_pack_a(NULL, m, k, 0, 1.0f, w, k, packed, a_size);
    const float *panels = bbi_f32_gemm_packed_a_row(NULL, m, k, 0, packed, &stride, &rows_after, &height);
    if (!panels || height != 8 || rows_after + 1 < k) {
      free(packed), free(x), free(w), free(bias), free(addend);
      continue;
    }
    float *col = floats(k * npos), *want = floats(m * npos), *got = floats(m * npos + GUARD_FLOATS);
    float *shifted = floats(bbi_f32_conv_rows_shifted_floats(&g, channels));
    bbi_f32_im2col_2d_scalar(&g, channels, x, col, npos);
    bbi_f32_gemm_args a = {0};
    a.m = m, a.n = npos, a.k = k, a.alpha = 1.0f, a.a = w, a.lda = k, a.packed_a = packed;
    a.b = col, a.ldb = npos, a.c = want, a.ldc = npos;
    a.bias_per_row = t % 5 ? bias : NULL;
    a.addend = t % 3 == 1 ? addend : NULL;
    a.relu = t % 4 == 2, a.clamp = t % 6 == 3, a.min = -0.5f, a.max = 0.75f;
    const size_t scratch_size = bbi_f32_gemm_scratch_size_for(bbi_f32_gemm_default_config(), m, npos, k);
    void *scratch = malloc(scratch_size ? scratch_size : 1);
    ok &= bbi_f32_gemm(&a, scratch, scratch_size) == 0;
    bbi_f32_conv_rows_shift(&g, 0, channels, x, plane, shifted);
    const bbi_f32_conv_rows_args r = {&g, channels, m, shifted, panels, stride, a.bias_per_row, a.addend,
                                      a.relu, a.clamp, a.min, a.max, got};
    memset(got, 0xab, (m * npos + GUARD_FLOATS) * sizeof *got);
    int did = 1;
    for (size_t oy0 = 0; oy0 < g.oh;) { /* random bands of output rows */
      const size_t oy1 = oy0 + (size_t)rng_int(1, (int)g.oh);
      did &= bbi_f32_conv_rows(&r, oy0, oy1 < g.oh ? oy1 : g.oh);
      oy0 = oy1;
    }
    for (size_t i = m * npos; i < m * npos + GUARD_FLOATS; i++) ok_untouched &= bits_of(got[i]) == 0xabababab;
    if (did) {
      for (size_t i = 0; i < m * npos; i++) ok &= same_float(got[i], want[i]);
      ran++;
    } else {
      for (size_t i = 0; i < m * npos; i++) ok_untouched &= bits_of(got[i]) == 0xabababab;
    }
    free(packed), free(x), free(w), free(bias), free(addend), free(col), free(want), free(got), free(shifted);
    free(scratch);
  }
  CHECK_MSG(ok, "bbi_f32_conv_rows differs from im2col + the GEMM");
  CHECK_MSG(ok_untouched, "bbi_f32_conv_rows wrote past the output, or into it where it declined");
  CHECK_MSG(!bbi_f32_conv_rows_available() || ran > 100, "only %zu cases ran", ran);
}

/* The 4-lane GEMM's configuration (the only one in WebAssembly; natively the last). */
static const bbi_f32_gemm_config *f32x4_config(void) {
  const bbi_f32_gemm_config *const *list;
  const size_t n = bbi_f32_gemm_configs(&list);
  for (size_t i = 0; i < n; i++)
    if (list[i]->ukernel == bbi_f32_gemm_ukernel_5x8__f32x4) return list[i];
  return NULL;
}

/* bbi_f32_conv_direct against im2col + the 4-lane GEMM, bit for bit: random windows with
 * unit column stride (odd widths, asymmetric padding, dilations, row strides), 2 to 21
 * output channels, the epilogue's combinations, NaN/±Inf/huge values in the input or W,
 * output rows cut into random bands; nothing written past the output. */
static void test_conv_direct_matches_gemm(void) {
  rng_seed(37);
  const bbi_f32_gemm_config *cfg = f32x4_config();
  CHECK_MSG(cfg != NULL, "no 4-lane GEMM configuration");
  if (!cfg) return;
  int ok = 1, ok_untouched = 1, ok_fits = 1;
  size_t ran = 0;
  for (int t = 0; t < 300; t++) {
    bbi_window2d g = random_conv_window(20, 40, 4);
    if (t % 5 == 0) g = (bbi_window2d){28, 28, 0, 0, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0}; /* the small CNN's first */
    g.sw = 1;
    place_window(&g, 0);
    if (g.oh * g.ow < 2) continue; /* (one position: the GEMM's matrix-vector product) */
    const size_t taps = g.kh * g.kw, most = BBI_F32_CONV_DIRECT_MAX_K / taps;
    if (most == 0) {
      ok_fits &= !bbi_f32_conv_direct_fits(&g, 1, 16);
      continue;
    }
    const size_t channels = (size_t)rng_int(1, (int)(most < 3 ? most : 3));
    const size_t m = t % 5 == 0 ? 16 : (size_t)rng_int(2, 21);
    ok_fits &= bbi_f32_conv_direct_fits(&g, channels, m) && !bbi_f32_conv_direct_fits(&g, channels, 1);
    const size_t plane = g.ih * g.iw, npos = g.oh * g.ow, k = channels * taps;
    float *x = floats(channels * plane), *w = floats(m * k), *bias = floats(m), *addend = floats(m * npos);
    if (t % 7 == 3) fill_mixed(x, channels * plane);
    else fill_uniform(x, channels * plane, -4.0f, 4.0f);
    if (t % 11 == 5) fill_mixed(w, m * k);
    else fill_uniform(w, m * k, -1.0f, 1.0f);
    if (t % 3 == 0) x[0] = -0.0f;
    const int tiny = t % 13 == 6; /* products that round to ±0: with fused multiply-adds a sum of -0 */
    if (tiny) {
      for (size_t i = 0; i < channels * plane; i++) x[i] = rng_uniform(-1e-30f, 1e-30f);
      for (size_t i = 0; i < m * k; i++) w[i] = rng_uniform(-1e-20f, 1e-20f);
    }
    fill_uniform(bias, m, -1.0f, 1.0f);
    fill_mixed(addend, m * npos);
    float *col = floats(k * npos), *want = floats(m * npos), *got = floats(m * npos + GUARD_FLOATS);
    bbi_f32_im2col_2d_scalar(&g, channels, x, col, npos);
    bbi_f32_gemm_args a = {0};
    a.m = m, a.n = npos, a.k = k, a.alpha = 1.0f, a.a = w, a.lda = k;
    a.b = col, a.ldb = npos, a.c = want, a.ldc = npos;
    a.bias_per_row = t % 5 && !tiny ? bias : NULL;
    a.addend = t % 3 == 1 && !tiny ? addend : NULL;
    a.relu = t % 4 == 2 || tiny, a.clamp = t % 6 == 3, a.min = -0.5f, a.max = 0.75f;
    const size_t scratch_size = bbi_f32_gemm_scratch_size_for(cfg, m, npos, k);
    void *scratch = malloc(scratch_size ? scratch_size : 1);
    ok &= bbi_f32_gemm_run(cfg, &a, scratch, scratch_size) == 0;
    const bbi_f32_conv_direct_args r = {&g, channels, m, x, plane, w, a.bias_per_row, a.addend,
                                        a.relu, a.clamp, a.min, a.max, got};
    memset(got, 0xab, (m * npos + GUARD_FLOATS) * sizeof *got);
    float *pad = floats(bbi_f32_conv_direct_scratch_floats(&g, channels, m, g.oh));
    for (size_t oy0 = 0; oy0 < g.oh;) { /* random bands of output rows */
      const size_t oy1 = oy0 + (size_t)rng_int(1, (int)g.oh);
      bbi_f32_conv_direct(&r, oy0, oy1 < g.oh ? oy1 : g.oh, pad);
      oy0 = oy1;
    }
    for (size_t i = m * npos; i < m * npos + GUARD_FLOATS; i++) ok_untouched &= bits_of(got[i]) == 0xabababab;
    for (size_t i = 0; i < m * npos; i++) ok &= same_float(got[i], want[i]);
    ran++;
    free(x), free(w), free(bias), free(addend), free(col), free(want), free(got), free(pad), free(scratch);
  }
  CHECK_MSG(ok, "bbi_f32_conv_direct differs from im2col + the 4-lane GEMM");
  CHECK_MSG(ok_untouched, "bbi_f32_conv_direct wrote past the output");
  CHECK_MSG(ok_fits, "bbi_f32_conv_direct_fits disagrees with its rule");
  CHECK_MSG(ran > 150, "only %zu cases ran", ran);
}

static void test_pooling_matches_scalar(void) {
  rng_seed(9);
  int ok_max = 1, ok_avg = 1, ok_idx = 1;
  for (int t = 0; t < 600; t++) {
    bbi_window2d g = random_pool();
    if (t % 5 == 0) g = (bbi_window2d){28, 28, 14, 14, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 0}; /* the common 2×2 / 2 */
    const size_t planes = (size_t)rng_int(1, 3), in = planes * g.ih * g.iw, out = planes * g.oh * g.ow;
    float *x = floats(in), *y = floats(out + 1), *r = floats(out + 1);
    int64_t *iy = malloc((out + 1) * sizeof *iy), *ir = malloc((out + 1) * sizeof *ir);
    if (t % 3) fill_uniform(x, in, -4.0f, 4.0f);
    else fill_mixed(x, in); /* NaN, infinities, signed zeros, ties */
    bbi_f32_maxpool2d(&g, planes, x, y, iy);
    bbi_f32_maxpool2d_scalar(&g, planes, x, r, ir);
    for (size_t i = 0; i < out; i++) ok_max &= same_float(y[i], r[i]), ok_idx &= iy[i] == ir[i];
    bbi_f32_maxpool2d(&g, planes, x, y, NULL);
    for (size_t i = 0; i < out; i++) ok_max &= same_float(y[i], r[i]);
    bbi_f32_avgpool2d(&g, planes, x, y);
    bbi_f32_avgpool2d_scalar(&g, planes, x, r);
    for (size_t i = 0; i < out; i++) ok_avg &= same_float(y[i], r[i]);
    free(x), free(y), free(r), free(iy), free(ir);
  }
  CHECK_MSG(ok_max, "max pooling differs from the scalar twin");
  CHECK_MSG(ok_idx, "max pooling indices differ from the scalar twin");
  CHECK_MSG(ok_avg, "average pooling differs from the scalar twin");
  /* against values worked out by hand: 2×2 windows, stride 2, one column of padding */
  const float x[8] = {1, 5, 2, 0, -1, 3, 7, 7};
  const bbi_window2d g = {2, 4, 1, 3, 2, 2, 2, 2, 1, 1, 0, 1, 0, 1, 0};
  float y[3];
  int64_t idx[3];
  bbi_f32_maxpool2d(&g, 1, x, y, idx);
  CHECK(y[0] == 1 && y[1] == 7 && y[2] == 7 && idx[0] == 0 && idx[1] == 6 && idx[2] == 7);
  bbi_f32_avgpool2d(&g, 1, x, y);
  CHECK(y[0] == 0 && y[1] == 4.25f && y[2] == 3.5f);
}

/* Max pooling 3×3 at stride 2 (its own SIMD path: a ResNet's stem) against the scalar
 * twin, bit for bit (its AVX-512 form where the CPU has one): the stem's 64×32×32 → 16×16
 * and odd sizes (widths where no four outputs lie inside, rows of more than one sixteen-
 * output vector, pads 0 to 2, ceil mode's extra output, a second stride of rows), on values
 * with NaN, infinities, signed zeros and ties. */
static void test_maxpool_3x3_stride2_matches_scalar(void) {
  rng_seed(12);
  int ok = 1;
  for (int t = 0; t < 300; t++) {
    bbi_window2d g = {0};
    g.ih = (size_t)rng_int(1, 19), g.iw = (size_t)rng_int(1, 75);
    if (t == 0) g.ih = g.iw = 32;
    g.kh = g.kw = 3, g.sh = t % 7 == 3 ? 1 : 2, g.sw = 2, g.dh = g.dw = 1;
    g.ph = g.pw = t == 0 ? 1 : (size_t)rng_int(0, 2);
    g.ph_end = g.pw_end = g.ph + (size_t)(t % 4 == 1); /* ceil mode's extra output */
    const size_t room_h = g.ih + g.ph + g.ph_end, room_w = g.iw + g.pw + g.pw_end;
    if (room_h < 3 || room_w < 3) continue;
    g.oh = (room_h - 3) / g.sh + 1, g.ow = (room_w - 3) / g.sw + 1;
    const size_t planes = t == 0 ? 64 : (size_t)rng_int(1, 3), in = planes * g.ih * g.iw, out = planes * g.oh * g.ow;
    float *x = floats(in), *y = floats(out + 1), *r = floats(out + 1);
    if (t % 2) fill_uniform(x, in, -4.0f, 4.0f);
    else fill_mixed(x, in);
    y[out] = r[out] = 7.0f;
    bbi_f32_maxpool2d(&g, planes, x, y, NULL);
    bbi_f32_maxpool2d_scalar(&g, planes, x, r, NULL);
    for (size_t i = 0; i <= out; i++) ok &= same_float(y[i], r[i]);
    free(x), free(y), free(r);
  }
  CHECK_MSG(ok, "3×3 stride-2 max pooling differs from the scalar twin");
}

/* ---- depthwise convolution, activations, transposes --------------------------------------- */

/* The depthwise kernel against its twin, bit for bit, on random geometries (every stride,
 * dilation and padding the window allows, the 3×3 and 5×5 filters of MobileNet and
 * EfficientNet among them, up to 40 channels) and on inputs with NaN, infinities and signed zeros; then split
 * by channels, as a thread pool would run it, with the same bits. */
static void test_dwconv_matches_scalar(void) {
  rng_seed(10);
  float worst = 0.0f;
  int ok = 1, ok_split = 1, ok_lanes = 1, lanes_cases = 0;
  for (int t = 0; t < 400; t++) {
    bbi_window2d g = random_pool();
    if (t % 4 == 0) g.kh = g.kw = 3, g.ph = g.pw = g.ph_end = g.pw_end = 1, g.dh = g.dw = 1;
    if (t % 4 == 1) g.kh = g.kw = 5, g.ph = g.pw = g.ph_end = g.pw_end = 2, g.dh = g.dw = 1;
    place_window(&g, 0);
    g.count_include_pad = 0;
    /* and more than sixteen channels: whole and partial groups of the sixteen-lane path */
    const size_t channels = (size_t)(t % 5 == 4 ? rng_int(16, 40) : rng_int(1, 5));
    const size_t in = channels * g.ih * g.iw, out = channels * g.oh * g.ow;
    float *x = floats(in), *w = floats(channels * g.kh * g.kw), *b = floats(channels);
    float *y = floats(out + 1), *r = floats(out + 1), *scratch = floats(bbi_f32_dwconv2d_chw_scratch_size(&g) / 4 + 1);
    if (t % 3) fill_uniform(x, in, -2.0f, 2.0f);
    else fill_mixed(x, in);
    fill_uniform(w, channels * g.kh * g.kw, -1.0f, 1.0f);
    fill_uniform(b, channels, -1.0f, 1.0f);
    const float *bias = t % 2 ? b : NULL;
    bbi_f32_dwconv2d_chw(&g, channels, x, w, bias, y, scratch);
    bbi_f32_dwconv2d_chw_scalar(&g, channels, x, w, bias, r);
    float *whole = floats(out + 1);
    memcpy(whole, y, (out + 1) * sizeof *y);
    /* with the weights laid out once, whole and from the second group of sixteen on: the same bits */
    const size_t lane_floats = bbi_f32_dwconv2d_lanes_floats(&g, channels);
    if (lane_floats) {
      float *lanes = floats(lane_floats), *yl = floats(out + 1);
      bbi_f32_dwconv2d_pack_lanes(&g, channels, w, lanes);
      bbi_f32_dwconv2d_chw_lanes(&g, channels, x, w, lanes, bias, yl, scratch);
      for (size_t i = 0; i < out; i++) ok_lanes &= same_float(yl[i], whole[i]);
      if (channels > 16) {
        const size_t taps = g.kh * g.kw, po = g.oh * g.ow;
        bbi_f32_dwconv2d_chw_lanes(&g, channels - 16, x + 16 * g.ih * g.iw, w + 16 * taps, lanes + 16 * taps,
                                   bias ? bias + 16 : NULL, yl, scratch);
        for (size_t i = 0; i < (channels - 16) * po; i++) ok_lanes &= same_float(yl[i], whole[16 * po + i]);
      }
      lanes_cases++;
      free(lanes), free(yl);
    }
    if (!BB_TEST_RELAXED_KERNELS) {
      for (size_t i = 0; i < out; i++) ok &= same_float(y[i], r[i]);
    } else {
      /* each output a taps-term dot product plus the bias: fused or not, within the bound
       * of that many roundings on the sum of the terms' magnitudes */
      const size_t taps = g.kh * g.kw;
      for (size_t c = 0; c < channels; c++) {
        float wmax = 0.0f;
        for (size_t k = 0; k < taps; k++) wmax = fmaxf(wmax, fabsf(w[c * taps + k]));
        float xmax = 0.0f;
        for (size_t i = 0; i < g.ih * g.iw; i++) xmax = fmaxf(xmax, fabsf(x[c * g.ih * g.iw + i]));
        const double tol = 2.0 * (double)(taps + 2) * FLT_EPSILON * ((double)taps * wmax * xmax + 1.0);
        for (size_t i = c * g.oh * g.ow; i < (c + 1) * g.oh * g.ow; i++) {
          if (same_float(y[i], r[i])) continue;
          const int close = isfinite(y[i]) && isfinite(r[i]) && fabs((double)y[i] - r[i]) <= tol;
          if (close) worst = fmaxf(worst, (float)(fabs((double)y[i] - r[i]) / tol));
          ok &= close || (!isfinite(xmax) && !isfinite(y[i]) && !isfinite(r[i]));
        }
      }
    }
    const size_t first = channels / 2, plane_in = g.ih * g.iw, plane_out = g.oh * g.ow;
    bbi_f32_dwconv2d_chw(&g, first, x, w, bias, y, scratch);
    bbi_f32_dwconv2d_chw(&g, channels - first, x + first * plane_in, w + first * g.kh * g.kw,
                         bias ? bias + first : NULL, y + first * plane_out, scratch);
    for (size_t i = 0; i < out; i++) ok_split &= same_float(y[i], whole[i]);
    free(x), free(w), free(b), free(y), free(r), free(scratch), free(whole);
  }
  /* the wide planes of MobileNet and EfficientNet (16 to 70 columns, stride 1 and 2, 3×3 and
   * 5×5 and a 3×5 filter; every stride-2 layer of both models at 3×64×64 with 16 outputs a
   * row and more), with row counts that leave 1 to 3 rows after the kernel's groups of rows,
   * fewer rows than one group, and widths that leave a partial vector or none */
  static const size_t wide[][5] = {{32, 32, 3, 1, 3}, {32, 32, 3, 2, 3}, {16, 16, 3, 1, 3}, {16, 16, 5, 1, 5},
                                   {33, 33, 5, 2, 5}, {7, 19, 3, 1, 3},   {6, 40, 5, 1, 3},   {5, 23, 3, 2, 5},
                                   {16, 16, 5, 2, 5}, {9, 70, 3, 2, 3},   {12, 64, 5, 2, 5},  {3, 47, 5, 2, 5}};
  for (size_t t = 0; t < sizeof wide / sizeof wide[0]; t++) {
    bbi_window2d g = {0};
    g.ih = wide[t][0], g.iw = wide[t][1], g.kh = wide[t][2], g.kw = wide[t][4], g.sh = g.sw = wide[t][3];
    g.dh = g.dw = 1, g.ph = g.ph_end = g.kh / 2, g.pw = g.pw_end = g.kw / 2;
    place_window(&g, 0);
    const size_t channels = 17, in = channels * g.ih * g.iw, out = channels * g.oh * g.ow, taps = g.kh * g.kw;
    float *x = floats(in), *w = floats(channels * taps), *b = floats(channels);
    float *y = floats(out + 1), *r = floats(out + 1), *scratch = floats(bbi_f32_dwconv2d_chw_scratch_size(&g) / 4 + 1);
    if (t % 2 && !BB_TEST_RELAXED_KERNELS) fill_mixed(x, in);
    else fill_uniform(x, in, -2.0f, 2.0f);
    fill_uniform(w, channels * taps, -1.0f, 1.0f);
    fill_uniform(b, channels, -1.0f, 1.0f);
    y[out] = r[out] = 7.0f;
    bbi_f32_dwconv2d_chw(&g, channels, x, w, b, y, scratch);
    bbi_f32_dwconv2d_chw_scalar(&g, channels, x, w, b, r);
    for (size_t i = 0; i < out; i++) {
      if (same_float(y[i], r[i])) continue;
      ok &= BB_TEST_RELAXED_KERNELS && isfinite(y[i]) && fabs((double)y[i] - r[i]) <= 1e-4 * (1.0 + fabs((double)r[i]));
    }
    ok &= y[out] == 7.0f;
    free(x), free(w), free(b), free(y), free(r), free(scratch);
  }
  if (BB_TEST_RELAXED_KERNELS) printf("dwconv: largest difference from the scalar twin, as a fraction of the bound: %.3g\n", (double)worst);
  CHECK_MSG(ok, "depthwise convolution differs from the scalar twin");
  CHECK_MSG(ok_split, "depthwise convolution split by channels differs");
  CHECK_MSG(ok_lanes, "depthwise convolution with its weights laid out once differs");
  if (bbi_f32_dwconv2d_lanes_floats(&(const bbi_window2d){4, 4, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0}, 1))
    CHECK_MSG(lanes_cases > 50, "only %d cases took the laid-out weights", lanes_cases);
  /* by hand: a 3×3 box filter of ones, padding 1, over a 2×2 image, bias 0.5 */
  const float x[4] = {1, 2, 3, 4}, w[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, b = 0.5f;
  const bbi_window2d g = {2, 2, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0};
  float y[4], *scratch = floats(bbi_f32_dwconv2d_chw_scratch_size(&g) / 4);
  bbi_f32_dwconv2d_chw(&g, 1, x, w, &b, y, scratch);
  free(scratch);
  CHECK(y[0] == 10.5f && y[1] == 10.5f && y[2] == 10.5f && y[3] == 10.5f);
}

/* 2×2 and 4×4 maps under stride-1 windows whose output is the input's size (with AVX-512
 * whole planes in a vector's lanes): 1×1, 2×2 (padding after only), 3×3 and 5×5 filters,
 * 1 to 40 channels (whole and partial vectors and groups of sixteen), with and without a
 * bias, with the weights laid out once and without, NaN, infinities and signed zeros in
 * the input and infinite weights (their products with the padding's zeros are NaN, as in
 * the twin), and a fused Clip: bit for bit the scalar twin's (then Clip's pass). */
/* Bit for bit; with relaxed SIMD's fused multiply-adds, within 1e-4 of the twin's sum
 * (the inputs are then ordinary floats of at most 2 in magnitude). */
static int dw_matches(float y, float r) {
  return same_float(y, r) || (BB_TEST_RELAXED_KERNELS && isfinite(y) && fabs((double)y - r) <= 1e-4 * (1.0 + fabs((double)r)));
}

static void test_dwconv_small_planes(void) {
  rng_seed(12);
  static const size_t shapes[][3] = {{2, 3, 1}, {4, 3, 1}, {2, 5, 2}, {4, 5, 2}, {2, 1, 0}, {4, 2, 0}, {4, 3, 0}};
  static const size_t channel_counts[] = {1, 2, 3, 5, 8, 16, 17, 23, 40};
  int ok = 1, ok_lanes = 1, ok_clip = 1;
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (size_t ci = 0; ci < sizeof channel_counts / sizeof channel_counts[0]; ci++) {
      bbi_window2d g = {0};
      g.ih = g.iw = g.oh = g.ow = shapes[si][0];
      g.kh = g.kw = shapes[si][1], g.sh = g.sw = g.dh = g.dw = 1;
      g.ph = g.pw = shapes[si][2], g.ph_end = g.pw_end = g.kh - 1 - shapes[si][2];
      const size_t channels = channel_counts[ci], taps = g.kh * g.kw, out = channels * g.oh * g.ow;
      float *x = floats(out), *w = floats(channels * taps), *b = floats(channels);
      float *y = floats(out + 1), *r = floats(out + 1), *scratch = floats(bbi_f32_dwconv2d_chw_scratch_size(&g) / 4 + 1);
      if (ci % 2 && !BB_TEST_RELAXED_KERNELS) fill_mixed(x, out);
      else fill_uniform(x, out, -2.0f, 2.0f);
      fill_uniform(w, channels * taps, -1.0f, 1.0f);
      fill_uniform(b, channels, -1.0f, 1.0f);
      if (ci == 4 && !BB_TEST_RELAXED_KERNELS) w[taps - 1] = INFINITY; /* times a padding zero: NaN */
      const float *bias = (si + ci) % 2 ? b : NULL;
      y[out] = r[out] = 7.0f;
      bbi_f32_dwconv2d_chw(&g, channels, x, w, bias, y, scratch);
      bbi_f32_dwconv2d_chw_scalar(&g, channels, x, w, bias, r);
      for (size_t i = 0; i <= out; i++) ok &= dw_matches(y[i], r[i]);
      const size_t lane_floats = bbi_f32_dwconv2d_lanes_floats(&g, channels);
      if (lane_floats) {
        float *lanes = floats(lane_floats);
        bbi_f32_dwconv2d_pack_lanes(&g, channels, w, lanes);
        bbi_f32_dwconv2d_chw_lanes(&g, channels, x, w, lanes, bias, y, scratch);
        for (size_t i = 0; i <= out; i++) ok_lanes &= dw_matches(y[i], r[i]);
        free(lanes);
      }
      const bbi_f32_activation clip = {BBI_ACTIVATION_CLIP, -0.5f, 0.75f};
      bbi_f32_dwconv2d_chw_fused(&g, channels, x, w, NULL, bias, &clip, NULL, y, scratch);
      bbi_f32_vactivate_scalar(&clip, out, NULL, r);
      for (size_t i = 0; i <= out; i++) ok_clip &= dw_matches(y[i], r[i]);
      free(x), free(w), free(b), free(y), free(r), free(scratch);
    }
  CHECK_MSG(ok, "depthwise convolution on 2×2 and 4×4 maps differs from the scalar twin");
  CHECK_MSG(ok_lanes, "the same with the weights laid out once differs");
  CHECK_MSG(ok_clip, "the same with a fused Clip differs from the twin and Clip");
}

static void test_activation_matches_scalar(void) {
  rng_seed(11);
  static const bbi_activation kinds[] = {BBI_ACTIVATION_NONE, BBI_ACTIVATION_RELU, BBI_ACTIVATION_CLIP,
                                         BBI_ACTIVATION_SIGMOID, BBI_ACTIVATION_SILU};
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    const bbi_f32_activation a = {kinds[k], -1.0f, 6.0f};
    int64_t worst = 0;
    int exact_ok = 1;
    for (int t = 0; t < 50; t++) {
      const size_t n = (size_t)rng_int(0, 70);
      float *x = floats(n + 1), *add = floats(n + 1), *y = floats(n + 1), *r = floats(n + 1);
      if (t % 2) fill_uniform(x, n, -12.0f, 12.0f);
      else fill_mixed(x, n);
      fill_uniform(add, n, -1.0f, 1.0f);
      const float *addend = t % 3 ? add : NULL;
      memcpy(y, x, n * sizeof *x);
      memcpy(r, x, n * sizeof *x);
      bbi_f32_vactivate(&a, n, addend, y);
      bbi_f32_vactivate_scalar(&a, n, addend, r);
      for (size_t i = 0; i < n; i++) {
        if (kinds[k] == BBI_ACTIVATION_SIGMOID || kinds[k] == BBI_ACTIVATION_SILU) {
          int64_t d = ulp_distance(y[i], r[i]);
          if (d > worst) worst = d;
        } else {
          exact_ok &= same_float(y[i], r[i]);
        }
      }
      free(x), free(add), free(y), free(r);
    }
    CHECK_MSG(exact_ok, "activation %zu differs from the scalar twin", k);
    CHECK_MSG(worst <= 4, "activation %zu is %lld ulp from the scalar twin", k, (long long)worst);
  }
  /* the fused forms give exactly what the separate kernels give */
  float x[9] = {-3, -0.0f, 0.5f, 7, NAN, -INFINITY, 2, 1e-3f, -6.5f}, add[9] = {1, 0, 1, 0, 0, 0, -4, 0, 0.5f};
  float fused[9], separate[9], sig[9];
  const bbi_f32_activation relu = {BBI_ACTIVATION_RELU, 0, 0}, silu = {BBI_ACTIVATION_SILU, 0, 0};
  memcpy(fused, x, sizeof x);
  bbi_f32_vactivate(&relu, 9, add, fused);
  bbi_f32_vbinary(BBI_BINARY_ADD, 9, x, add, separate);
  bbi_f32_vunary(BBI_UNARY_RELU, 9, separate, separate);
  int same = 1;
  for (int i = 0; i < 9; i++) same &= same_float(fused[i], separate[i]);
  memcpy(fused, x, sizeof x);
  bbi_f32_vactivate(&silu, 9, NULL, fused);
  bbi_f32_vunary(BBI_UNARY_SIGMOID, 9, x, sig);
  bbi_f32_vbinary(BBI_BINARY_MUL, 9, x, sig, separate);
  for (int i = 0; i < 9; i++) same &= same_float(fused[i], separate[i]);
  CHECK_MSG(same, "a fused activation differs from the separate kernels");
  /* and so on lengths that take the wide path natively (sixteen lanes with AVX-512) and
   * its tail, on values that reach the edges of exp's range */
  rng_seed(13);
  int same_long = 1;
  for (int t = 0; t < 40; t++) {
    const size_t n = (size_t)rng_int(16, 200);
    float *v = floats(n), *f = floats(n), *sp = floats(n), *ad = floats(n), *sep = floats(n);
    if (t % 2) fill_uniform(v, n, -120.0f, 100.0f);
    else fill_mixed(v, n);
    fill_uniform(ad, n, -1.0f, 1.0f);
    const bbi_f32_activation clip = {BBI_ACTIVATION_CLIP, -1.0f, 6.0f}, sigm = {BBI_ACTIVATION_SIGMOID, 0, 0};
    memcpy(f, v, n * sizeof *v);
    bbi_f32_vactivate(&silu, n, NULL, f);
    bbi_f32_vunary(BBI_UNARY_SIGMOID, n, v, sp);
    bbi_f32_vbinary(BBI_BINARY_MUL, n, v, sp, sep);
    for (size_t i = 0; i < n; i++) same_long &= same_float(f[i], sep[i]);
    memcpy(f, v, n * sizeof *v);
    bbi_f32_vactivate(&sigm, n, NULL, f);
    for (size_t i = 0; i < n; i++) same_long &= same_float(f[i], sp[i]);
    memcpy(f, v, n * sizeof *v);
    bbi_f32_vactivate(&relu, n, ad, f);
    bbi_f32_vbinary(BBI_BINARY_ADD, n, v, ad, sep);
    bbi_f32_vunary(BBI_UNARY_RELU, n, sep, sep);
    for (size_t i = 0; i < n; i++) same_long &= same_float(f[i], sep[i]);
    memcpy(f, v, n * sizeof *v);
    memcpy(sep, v, n * sizeof *v);
    bbi_f32_vactivate(&clip, n, NULL, f);
    bbi_f32_vactivate(&clip, 3, NULL, sep); /* the four-lane path and its tail alone */
    bbi_f32_vactivate(&clip, 2, NULL, sep + 3);
    bbi_f32_vactivate_scalar(&clip, n - 5, NULL, sep + 5);
    for (size_t i = 0; i < n; i++) same_long &= same_float(f[i], sep[i]);
    free(v), free(f), free(sp), free(ad), free(sep);
  }
  CHECK_MSG(same_long, "a fused activation over many lanes differs from the separate kernels");
}

/* The kernels linked are the ones this program was built to test; the 4-lane ones'
 * multiply-add either
 * fuses or rounds the product first, and the result says which: with a = 1 + 2^-12,
 * -(1 + 2^-11) + a*a is 2^-24 fused and 0 otherwise (a*a rounds to 1 + 2^-11). Without
 * relaxed SIMD it must be 0 everywhere; with it, either, the same in every lane and path. */
static void test_relaxed_build(void) {
  CHECK_EQ_INT(bbi_kernels_relaxed(), BB_TEST_RELAXED_KERNELS);
  const float a = 1.0f + 0x1p-12f, first = -(1.0f + 0x1p-11f);
  enum { M = 5, N = 8 };
  float x[2] = {1.0f, a}, bt[2 * N], y[N], am[M * 2], c[M * N];
  for (int j = 0; j < N; j++) bt[j] = first, bt[N + j] = a;
  bbi_f32_gemv(N, 2, x, bt, N, 0, y);
  for (int i = 0; i < M; i++) am[2 * i] = 1.0f, am[2 * i + 1] = a;
  bbi_f32_gemm_args g = {0};
  g.m = M, g.n = N, g.k = 2, g.alpha = 1.0f, g.a = am, g.lda = 2, g.b = bt, g.ldb = N, g.c = c, g.ldc = N;
  /* the portable 4-lane micro-kernel (natively, the AVX2 and AVX-512 ones fuse by design) */
  const bbi_f32_gemm_config *const *list;
  const size_t ncfg = bbi_f32_gemm_configs(&list);
  const bbi_f32_gemm_config *cfg = list[ncfg - 1];
  CHECK(strstr(cfg->name, "f32x4") != NULL);
  const size_t scratch_size = bbi_f32_gemm_scratch_size_for(cfg, M, N, 2);
  void *scratch = malloc(scratch_size + 1);
  CHECK_EQ_INT(bbi_f32_gemm_run(cfg, &g, scratch, scratch_size), BB_OK);
  free(scratch);
  const float fused = 0x1p-24f, got = y[0];
  int same = 1;
  for (int j = 0; j < N; j++) same &= same_float(y[j], got);
  for (int i = 0; i < M * N; i++) same &= same_float(c[i], got);
  if (BB_TEST_RELAXED_KERNELS) {
    CHECK_MSG(got == 0.0f || got == fused, "a relaxed multiply-add gave %a", (double)got);
    printf("relaxed multiply-add here: %s\n", got == fused ? "fused (one rounding)" : "multiply, then add");
  } else {
    CHECK_MSG(got == 0.0f, "a multiply-add fused (%a) without relaxed SIMD", (double)got);
  }
  CHECK_MSG(same, "the multiply-adds of one build rounded differently across lanes or paths");
}

/* ---- optimizer updates ------------------------------------------------------------------ */

/* Every rule with and without clipping, L2 and decoupled decay, on lengths 0 to 70 (every
 * tail) of mixed values, special ones included: the SIMD pass gives the scalar twin's
 * bits, and a state the rule has not stays untouched. */
static void test_update_matches_scalar(void) {
  rng_seed(12);
  static const bbi_update_rule rules[] = {BBI_RULE_SGD, BBI_RULE_MOMENTUM, BBI_RULE_NESTEROV, BBI_RULE_ADAM};
  for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++)
    for (unsigned form = 0; form < 8; form++) {
      const bbi_f32_update_coef k = {rules[r], form & 1, (form & 2) != 0, (form & 4) != 0, 0.37f, 0.01f, 0.9995f, 0.05f,
                                     0.9f, 0.9f, 0.1f, 0.999f, 1e-3f, 0.0316f, 1e-8f};
      int same = 1;
      for (int t = 0; t < 12; t++) {
        const size_t n = (size_t)rng_int(0, 70);
        float *in[4], *got[3], *want[3];
        for (int i = 0; i < 4; i++) in[i] = floats(n + 1), fill_mixed(in[i], n);
        fill_uniform(in[3], n, 0.0f, 2.0f); /* Adam's v ≥ 0 */
        for (int i = 0; i < 3; i++) {
          got[i] = floats(n + 1), want[i] = floats(n + 1);
          for (size_t j = 0; j <= n; j++) got[i][j] = want[i][j] = 7.0f; /* nothing writes past n */
        }
        const bbi_f32_update_arrays ga = {in[0], in[1], {in[2], in[3]}, got[0], {got[1], got[2]}};
        const bbi_f32_update_arrays wa = {in[0], in[1], {in[2], in[3]}, want[0], {want[1], want[2]}};
        bbi_f32_update(&k, n, &ga);
        bbi_f32_update_scalar(&k, n, &wa);
        const size_t outs = 1 + bbi_update_states(rules[r]);
        for (size_t o = 0; o < 3; o++)
          for (size_t i = 0; i <= n; i++) same &= same_float(got[o][i], want[o][i]) && (o < outs || got[o][i] == 7.0f);
        for (int i = 0; i < 4; i++) free(in[i]);
        for (int i = 0; i < 3; i++) free(got[i]), free(want[i]);
      }
      CHECK_MSG(same, "rule %zu, form %u differs from the scalar twin", r, form);
    }
}

static void test_transpose(void) {
  rng_seed(12);
  int ok = 1;
  for (int t = 0; t < 100; t++) {
    const size_t rows = (size_t)rng_int(1, 23), cols = (size_t)rng_int(1, 23);
    const size_t ldx = cols + (size_t)rng_int(0, 3), ldy = rows + (size_t)rng_int(0, 3);
    float *x = floats(rows * ldx), *y = floats(cols * ldy), *r = floats(cols * ldy);
    fill_mixed(x, rows * ldx);
    memset(y, 0, cols * ldy * sizeof *y);
    memset(r, 0, cols * ldy * sizeof *r);
    bbi_f32_transpose(rows, cols, x, ldx, y, ldy);
    bbi_f32_transpose_scalar(rows, cols, x, ldx, r, ldy);
    for (size_t i = 0; i < cols * ldy; i++) ok &= same_float(y[i], r[i]);
    for (size_t i = 0; i < rows; i++)
      for (size_t j = 0; j < cols; j++) ok &= same_float(r[j * ldy + i], x[i * ldx + j]);
    free(x), free(y), free(r);
  }
  CHECK_MSG(ok, "transpose differs from the scalar twin or from the definition");
}

/* ---- the first non-finite float ---------------------------------------------------------- */

/* The definition: a plain isfinite scan. */
static size_t first_nonfinite_oracle(const float *x, size_t n) {
  size_t i = 0;
  while (i < n && isfinite(x[i])) i++;
  return i;
}

/* Finite floats that sit next to the non-finite ones in bits: the largest exponent below
 * all ones (±FLT_MAX), denormals, ±0, ±FLT_MIN, and ordinary values between them. */
static void fill_finite_edges(float *x, size_t n) {
  static const uint32_t edges[] = {0x7f7fffffu, 0xff7fffffu, 0x7f000000u, 0x00000001u, 0x807fffffu,
                                   0x00000000u, 0x80000000u, 0x00800000u, 0x80800000u};
  for (size_t i = 0; i < n; i++)
    x[i] = rng_int(0, 1) ? float_of(edges[rng_next() % (sizeof edges / sizeof edges[0])]) : rng_uniform(-1e6f, 1e6f);
}

/* NaN, +Inf, -Inf, a signalling NaN, a negative NaN, and NaNs with the lowest and the
 * highest payloads. */
static const uint32_t nonfinite_bits[] = {0x7fc00000u, 0x7f800000u, 0xff800000u, 0x7fa00000u,
                                          0xffc00000u, 0x7f800001u, 0xffffffffu};
#define N_NONFINITE (sizeof nonfinite_bits / sizeof nonfinite_bits[0])

/* Both forms find the first non-finite float of x[0..n) at `want`, as the oracle does;
 * counts a disagreement into *bad and reports the first. */
static void check_first_nonfinite(const float *x, size_t n, size_t want, int *bad) {
  const size_t got = bbi_f32_first_nonfinite(x, n), twin = bbi_f32_first_nonfinite_scalar(x, n);
  const size_t oracle = first_nonfinite_oracle(x, n);
  if (got == want && twin == want && oracle == want) return;
  if (!(*bad)++)
    fprintf(stderr, "first non-finite of %zu floats: %zu (scalar twin %zu, isfinite scan %zu), want %zu\n", n, got,
            twin, oracle, want);
}

/* Every non-finite value at `pos` of x[0..n) (finite), then a second one after it, which
 * must not be the one found; x is left as it was. */
static void check_nonfinite_at(float *x, size_t n, size_t pos, int *bad) {
  const float keep = x[pos];
  for (size_t v = 0; v < N_NONFINITE; v++) {
    x[pos] = float_of(nonfinite_bits[v]);
    check_first_nonfinite(x, n, pos, bad);
    if (pos + 1 < n) {
      const size_t later = pos + 1 + (size_t)rng_int(0, (int)(n - pos - 2 < 300 ? n - pos - 2 : 300));
      const float keep_later = x[later];
      x[later] = float_of(nonfinite_bits[(v + 1) % N_NONFINITE]);
      check_first_nonfinite(x, n, pos, bad);
      x[later] = keep_later;
    }
  }
  x[pos] = keep;
}

static void test_first_nonfinite_short(void) {
  rng_seed(31);
  int bad = 0;
  float *buf = floats(3 + 70);
  for (size_t offset = 0; offset < 4; offset++) /* unaligned starts too */
    for (size_t n = 0; n <= 70; n++) {
      float *x = buf + offset;
      fill_finite_edges(x, n);
      check_first_nonfinite(n ? x : NULL, n, n, &bad);
      for (size_t pos = 0; pos < n; pos++) check_nonfinite_at(x, n, pos, &bad);
    }
  free(buf);
  CHECK_MSG(bad == 0, "%d short arrays disagree with the isfinite scan", bad);
}

static void test_first_nonfinite_long(void) {
  rng_seed(32);
  int bad = 0;
  static const size_t lengths[] = {255, 256, 257, 1023, 1024, 1027, 4099, 65536 + 5, (1u << 20) + 3};
  for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
    const size_t n = lengths[l];
    float *x = floats(n + 1);
    fill_finite_edges(x, n + 1);
    for (size_t offset = 0; offset < 2; offset++) {
      float *y = x + offset;
      check_first_nonfinite(y, n, n, &bad);
      /* around every boundary of 64 floats in the first 2048, then the last floats */
      for (size_t edge = 64; edge <= 2048 && edge <= n; edge += 64)
        for (size_t pos = edge - 1; pos <= edge + 1 && pos < n; pos++) check_nonfinite_at(y, n, pos, &bad);
      for (size_t back = 1; back <= 5 && back <= n; back++) check_nonfinite_at(y, n, n - back, &bad);
      for (int r = 0; r < 6; r++) check_nonfinite_at(y, n, (size_t)rng_next() % n, &bad);
    }
    free(x);
  }
  CHECK_MSG(bad == 0, "%d long arrays disagree with the isfinite scan", bad);
}

int main(void) {
  printf("gemm configurations:");
  const bbi_f32_gemm_config *const *list;
  const size_t ncfg = bbi_f32_gemm_configs(&list);
  for (size_t i = 0; i < ncfg; i++) printf(" %s", list[i]->name);
  printf("\n");
  RUN(test_relaxed_build);
  RUN(test_gemm_exact_small_shapes);
  RUN(test_gemm_random_large_shapes);
  RUN(test_gemm_four_row_panels);
  RUN(test_gemm_degenerate_and_errors);
  RUN(test_gemm_packed_b_mismatch);
  RUN(test_gemm_packed_a_and_rows);
  RUN(test_binary_matches_scalar);
  RUN(test_binary_row_broadcast);
  RUN(test_unary_against_libm);
  RUN(test_sigmoid_blocks);
  RUN(test_sigmoid_fast_range);
  RUN(test_reduce_rows);
  RUN(test_reduce_strided);
  RUN(test_exp_shifted);
  RUN(test_softmax);
  RUN(test_softmax_reference);
  RUN(test_compare_and_select);
  RUN(test_im2col_matches_scalar);
  RUN(test_im2col_pack_matches_packing);
  RUN(test_conv_rows_matches_gemm);
  RUN(test_conv_direct_matches_gemm);
  RUN(test_pooling_matches_scalar);
  RUN(test_maxpool_3x3_stride2_matches_scalar);
  RUN(test_dwconv_matches_scalar);
  RUN(test_dwconv_small_planes);
  RUN(test_activation_matches_scalar);
  RUN(test_update_matches_scalar);
  RUN(test_transpose);
  RUN(test_first_nonfinite_short);
  RUN(test_first_nonfinite_long);
  return bb_test_finish();
}
