/* Kernel throughput, SIMD against the scalar twins: GEMM in GFLOP/s, elementwise and
 * row kernels in GB/s (bytes read plus bytes written). Native and, built with Emscripten,
 * under Node (`node build-wasm/bench/bench_kernels.js`).
 *
 *   bench_kernels            the standard table
 *   bench_kernels sweep      GEMM micro-kernel shapes and cache blocks, for tuning
 *   bench_kernels rows       the elementwise and row kernels alone
 *   bench_kernels winograd [THREADS [I]]  3×3 convolutions in a session, Winograd on and
 *                            off (I: the I-th shape alone)
 *   bench_kernels dwconv     the depthwise kernel on MobileNet's and EfficientNet's layers,
 *                            one thread's CPU time, best of 300 calls */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bb/cpu.h"
#include "tensor/kernels/gemm_f32x4.h"
#include "tensor/kernels/gemm_x86.h"
#include "tensor/kernels/kernels.h"

/* The clock the timings read: the wall clock, or the thread's CPU time (for tuning on a
 * machine other work shares). */
static clockid_t bench_clock = CLOCK_MONOTONIC;

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(bench_clock, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *xmalloc(size_t size) {
  void *p = malloc(size ? size : 1);
  if (!p) {
    fprintf(stderr, "out of memory (%zu bytes)\n", size);
    exit(1);
  }
  return p;
}

static float *random_floats(size_t n, uint32_t seed, float lo, float hi) {
  float *x = xmalloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = lo + (hi - lo) * (float)(seed >> 8) / 16777216.0f;
  }
  return x;
}

/* Keeps the optimiser from dropping work whose result nobody reads. */
static volatile float sink;

typedef void (*bench_fn)(void *ctx);

/* Seconds per call: repeat until a batch takes at least min_batch seconds, then keep the
 * fastest of `batches` batches. */
static double time_call(bench_fn fn, void *ctx, double min_batch, int batches) {
  fn(ctx); /* warm caches and pages */
  size_t reps = 1;
  for (;;) {
    const double t0 = now_seconds();
    for (size_t r = 0; r < reps; r++) fn(ctx);
    const double t = now_seconds() - t0;
    if (t >= min_batch || reps >= (1u << 20)) {
      double best = t / (double)reps;
      for (int b = 1; b < batches; b++) {
        const double t1 = now_seconds();
        for (size_t r = 0; r < reps; r++) fn(ctx);
        const double tb = (now_seconds() - t1) / (double)reps;
        if (tb < best) best = tb;
      }
      return best;
    }
    reps *= 2;
  }
}

/* ---- GEMM ---------------------------------------------------------------------------- */

typedef struct gemm_ctx {
  const bbi_f32_gemm_config *cfg; /* NULL: the scalar reference */
  bbi_f32_gemm_args args;
  void *scratch;
  size_t scratch_size;
} gemm_ctx;

static void run_gemm(void *p) {
  gemm_ctx *g = p;
  if (g->cfg) {
    if (bbi_f32_gemm_run(g->cfg, &g->args, g->scratch, g->scratch_size) != 0) {
      fprintf(stderr, "gemm failed\n");
      exit(1);
    }
  } else {
    bbi_f32_gemm_scalar(&g->args);
  }
  sink = g->args.c[0];
}

/* GFLOP/s of C[m×n] = A[m×k]·B[k×n] (B stored transposed when trans_b; packed once,
 * outside the timing, when prepack). */
static double gemm_gflops(const bbi_f32_gemm_config *cfg, size_t m, size_t n, size_t k,
                          int trans_b, int prepack, double min_batch) {
  gemm_ctx g = {0};
  g.cfg = cfg;
  g.args.m = m, g.args.n = n, g.args.k = k, g.args.alpha = 1.0f, g.args.trans_b = trans_b;
  float *a = random_floats(m * k, 1, -1, 1), *b = random_floats(k * n, 2, -1, 1);
  float *c = random_floats(m * n, 3, -1, 1);
  g.args.a = a, g.args.lda = k, g.args.b = b, g.args.ldb = trans_b ? k : n, g.args.c = c;
  g.args.ldc = n;
  void *packed = NULL;
  if (cfg) {
    g.scratch_size = bbi_f32_gemm_scratch_size_for(cfg, m, n, k);
    g.scratch = xmalloc(g.scratch_size);
  }
  if (cfg && prepack) {
    const size_t size = bbi_f32_gemm_packed_b_size(cfg, n, k);
    packed = xmalloc(size);
    if (bbi_f32_gemm_pack_b(cfg, n, k, trans_b, b, g.args.ldb, packed, size) != 0) {
      fprintf(stderr, "packing B failed\n");
      exit(1);
    }
    g.args.packed_b = packed;
  }
  const double t = time_call(run_gemm, &g, min_batch, cfg ? 5 : 1);
  free(a), free(b), free(c), free(g.scratch), free(packed);
  return 2.0 * (double)m * (double)n * (double)k / t * 1e-9;
}

static void bench_gemm(void) {
  static const size_t shapes[][3] = {
      {128, 128, 128}, {256, 256, 256}, {512, 512, 512}, {1024, 1024, 1024}, {32, 128, 784}};
  const bbi_f32_gemm_config *const *list;
  const size_t ncfg = bbi_f32_gemm_configs(&list);
  printf("GEMM C[m×n] = A[m×k]·B[k×n], GFLOP/s (single thread; first column is the default)\n");
  printf("  %-24s", "m×n×k");
  for (size_t i = 0; i < ncfg; i++) printf(" %13s", list[i]->name);
  printf(" %9s %8s\n", "scalar", "ratio");
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    const size_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
    char label[64];
    snprintf(label, sizeof label, "%zux%zux%zu", m, n, k);
    printf("  %-24s", label);
    double best = 0.0;
    for (size_t i = 0; i < ncfg; i++) {
      const double gf = gemm_gflops(list[i], m, n, k, 0, 0, 0.2);
      if (i == 0) best = gf;
      printf(" %13.2f", gf);
      fflush(stdout);
    }
    /* The naive reference is slow; one timed call is plenty at the big sizes. */
    const double ref = gemm_gflops(NULL, m, n, k, 0, 0, m * n * k > 100000000u ? 0.0 : 0.2);
    printf(" %9.2f %7.1fx\n", ref, best / ref);
  }
  /* Shapes of inference: weights transposed (ONNX Gemm transB=1), packed once, batch 1. */
  static const struct {
    const char *label;
    size_t m, n, k;
    int trans_b, prepack;
  } extra[] = {{"32x128x784 B^T", 32, 128, 784, 1, 0},
               {"32x128x784 B packed", 32, 128, 784, 0, 1},
               {"1x128x784 (gemv)", 1, 128, 784, 0, 0},
               {"1x128x784 B^T (gemv)", 1, 128, 784, 1, 0},
               {"1x1024x1024 (gemv)", 1, 1024, 1024, 0, 0},
               {"1x1024x1024 B packed", 1, 1024, 1024, 0, 1}};
  for (size_t s = 0; s < sizeof extra / sizeof extra[0]; s++) {
    printf("  %-24s", extra[s].label);
    for (size_t i = 0; i < ncfg; i++)
      printf(" %13.2f", gemm_gflops(list[i], extra[s].m, extra[s].n, extra[s].k,
                                    extra[s].trans_b, extra[s].prepack, 0.2));
    printf("\n");
  }
}

/* ---- elementwise and rows --------------------------------------------------------------- */

typedef struct vec_ctx {
  int simd;
  size_t rows, cols;
  float *a, *b, *y;
} vec_ctx;

static void run_add(void *p) {
  vec_ctx *v = p;
  const size_t n = v->rows * v->cols;
  if (v->simd)
    bbi_f32_vbinary(BBI_BINARY_ADD, n, v->a, v->b, v->y);
  else
    bbi_f32_vbinary_scalar(BBI_BINARY_ADD, n, v->a, v->b, v->y);
  sink = v->y[n / 2];
}

static void run_softmax(void *p) {
  vec_ctx *v = p;
  if (v->simd)
    bbi_f32_softmax_rows(v->rows, v->cols, v->a, v->y);
  else
    bbi_f32_softmax_rows_scalar(v->rows, v->cols, v->a, v->y);
  sink = v->y[0];
}

static void run_log_softmax(void *p) {
  vec_ctx *v = p;
  if (v->simd)
    bbi_f32_log_softmax_rows(v->rows, v->cols, v->a, v->y);
  else
    bbi_f32_log_softmax_rows_scalar(v->rows, v->cols, v->a, v->y);
  sink = v->y[0];
}

static void run_reduce_sum(void *p) {
  vec_ctx *v = p;
  if (v->simd)
    bbi_f32_reduce_rows(BBI_REDUCE_SUM, v->rows, v->cols, v->a, v->y);
  else
    bbi_f32_reduce_rows_scalar(BBI_REDUCE_SUM, v->rows, v->cols, v->a, v->y);
  sink = v->y[0];
}

static void run_first_nonfinite(void *p) {
  vec_ctx *v = p;
  const size_t n = v->rows * v->cols;
  sink = (float)(v->simd ? bbi_f32_first_nonfinite(v->a, n) : bbi_f32_first_nonfinite_scalar(v->a, n));
}

static bbi_unary_op unary_under_test;

static void run_unary(void *p) {
  vec_ctx *v = p;
  const size_t n = v->rows * v->cols;
  if (v->simd)
    bbi_f32_vunary(unary_under_test, n, v->a, v->y);
  else
    bbi_f32_vunary_scalar(unary_under_test, n, v->a, v->y);
  sink = v->y[n / 2];
}

/* Prints SIMD and scalar throughput in GB/s, `bytes` being the traffic of one call; the
 * first input is uniform in [lo, hi]. */
static void bench_rows(const char *label, bench_fn fn, size_t rows, size_t cols, double bytes,
                       float lo, float hi) {
  vec_ctx v = {1, rows, cols, NULL, NULL, NULL};
  v.a = random_floats(rows * cols, 4, lo, hi);
  v.b = random_floats(rows * cols, 5, -8, 8);
  v.y = random_floats(rows * cols, 6, -8, 8);
  const double simd = bytes / time_call(fn, &v, 0.1, 5) * 1e-9;
  v.simd = 0;
  const double scalar = bytes / time_call(fn, &v, 0.1, 3) * 1e-9;
  printf("  %-26s %9.2f %9.2f %7.1fx\n", label, simd, scalar, simd / scalar);
  free(v.a), free(v.b), free(v.y);
}

static void bench_elementwise(void) {
  const size_t n = 1u << 20;
  printf("Elementwise and row kernels, GB/s (read + written)\n");
  printf("  %-26s %9s %9s %8s\n", "", "simd", "scalar", "ratio");
  bench_rows("Add 1M floats", run_add, 1, n, 12.0 * (double)n, -8, 8);
  bench_rows("Softmax 1024x1024", run_softmax, 1024, 1024, 8.0 * (double)n, -8, 8);
  bench_rows("Softmax 64x1000", run_softmax, 64, 1000, 8.0 * 64000.0, -8, 8);
  bench_rows("LogSoftmax 1024x1024", run_log_softmax, 1024, 1024, 8.0 * (double)n, -8, 8);
  bench_rows("ReduceSum 1024x1024", run_reduce_sum, 1024, 1024, 4.0 * (double)n, -8, 8);
  /* all finite, so the whole array is read: 1M floats, and resnet18's 11.7M parameters */
  bench_rows("FirstNonfinite 1M floats", run_first_nonfinite, 1, n, 4.0 * (double)n, -8, 8);
  bench_rows("FirstNonfinite 11.7M", run_first_nonfinite, 1, 11700000, 4.0 * 11700000.0, -8, 8);
  static const struct {
    bbi_unary_op op;
    const char *label;
  } unaries[] = {{BBI_UNARY_EXP, "Exp 1M floats"},
                 {BBI_UNARY_LOG, "Log 1M floats"},
                 {BBI_UNARY_SIGMOID, "Sigmoid 1M floats"},
                 {BBI_UNARY_TANH, "Tanh 1M floats"}};
  for (size_t i = 0; i < sizeof unaries / sizeof unaries[0]; i++) {
    unary_under_test = unaries[i].op;
    /* Log on positive inputs: libm takes a shortcut for negative ones. */
    const float lo = unaries[i].op == BBI_UNARY_LOG ? 1e-3f : -8.0f;
    bench_rows(unaries[i].label, run_unary, 1, n, 8.0 * (double)n, lo, 8.0f);
  }
}

/* ---- tuning sweep ------------------------------------------------------------------------ */

/* Micro-kernel shapes the shipped ones were chosen from, made here from the same bodies. */
#define SWEEP_F32X4(MR, NR)                                                                  \
  static void sweep_##MR##x##NR##_f32x4(size_t kc, const float *pa, const float *pb,        \
                                        float *c, size_t ldc, size_t mr, size_t nr,         \
                                        const bbi_f32_gemm_tile *tile) {                     \
    bbi_f32x4_gemm_tile(MR, (NR) / 4, kc, pa, pb, c, ldc, mr, nr, tile);                     \
  }
SWEEP_F32X4(4, 8)
SWEEP_F32X4(6, 8)
SWEEP_F32X4(8, 8)
SWEEP_F32X4(3, 12)
SWEEP_F32X4(2, 16)

#if BBI_HAVE_X86_GEMM
/* sweep_<MR>x<NR>_<ISA>: the x86 tile of MR rows by NV vectors as a micro-kernel. */
#define SWEEP_X86(ISA, ATTR, MR, NV, NR)                                                         \
  ATTR static void sweep_##MR##x##NR##_##ISA(size_t kc, const float *pa, const float *pb, float *c, \
                                            size_t ldc, size_t mr, size_t nr,                     \
                                            const bbi_f32_gemm_tile *tile) {                      \
    bbi_##ISA##_gemm_tile(MR, NV, kc, pa, pb, c, ldc, mr, nr, tile);                              \
  }
SWEEP_X86(avx2fma, BBI_AVX2FMA, 4, 2, 16)
SWEEP_X86(avx512, BBI_AVX512, 12, 2, 32)
SWEEP_X86(avx512, BBI_AVX512, 14, 2, 32)
SWEEP_X86(avx512, BBI_AVX512, 4, 4, 64)
SWEEP_X86(avx512, BBI_AVX512, 6, 4, 64)
#endif

static const struct {
  const char *name;
  size_t mr, nr;
  bbi_f32_gemm_ukernel_fn fn;
  int x86; /* needs the CPU check of bbi_f32_gemm_configs */
  } sweep_kernels[] = {
    {"5x8-f32x4", 5, 8, bbi_f32_gemm_ukernel_5x8__f32x4, 0},
    {"4x8-f32x4", 4, 8, sweep_4x8_f32x4, 0},
    {"6x8-f32x4", 6, 8, sweep_6x8_f32x4, 0},
    {"8x8-f32x4", 8, 8, sweep_8x8_f32x4, 0},
    {"3x12-f32x4", 3, 12, sweep_3x12_f32x4, 0},
    {"2x16-f32x4", 2, 16, sweep_2x16_f32x4, 0},
#if BBI_HAVE_X86_GEMM
    {"6x16-avx2fma", 6, 16, bbi_f32_gemm_ukernel_6x16__avx2fma, 1},
    {"4x16-avx2fma", 4, 16, sweep_4x16_avx2fma, 1},
    {"8x32-avx512", 8, 32, bbi_f32_gemm_ukernel_8x32__avx512, 2},
    {"12x32-avx512", 12, 32, sweep_12x32_avx512, 2},
    {"14x32-avx512", 14, 32, sweep_14x32_avx512, 2},
    {"6x64-avx512", 6, 64, sweep_6x64_avx512, 2},
    {"4x64-avx512", 4, 64, sweep_4x64_avx512, 2},
#endif
};

static void sweep(const char *only) {
  static const size_t kcs[] = {128, 256, 512};
  static const size_t mcs[] = {48, 96, 192};
  static const size_t sizes[] = {256, 512, 1024};
  /* The x86 kernels run only where the shipped configurations say the CPU has them. */
  const bbi_f32_gemm_config *const *list;
  const size_t ncfg = bbi_f32_gemm_configs(&list);
  const int x86_level = ncfg == 3 ? 2 : ncfg == 2 ? 1 : 0;
  printf("GEMM sweep: GFLOP/s at n×n×n for n = 256, 512, 1024 and at 32x128x784\n");
  for (size_t ki = 0; ki < sizeof sweep_kernels / sizeof sweep_kernels[0]; ki++) {
    if (sweep_kernels[ki].x86 > x86_level || (only && !strstr(sweep_kernels[ki].name, only))) continue;
    for (size_t kc = 0; kc < sizeof kcs / sizeof kcs[0]; kc++) {
      for (size_t mc = 0; mc < sizeof mcs / sizeof mcs[0]; mc++) {
        bbi_f32_gemm_config cfg = {sweep_kernels[ki].name, sweep_kernels[ki].mr, sweep_kernels[ki].nr, 0, kcs[kc],
                                  2048, sweep_kernels[ki].fn, NULL, NULL};
        cfg.mc = (mcs[mc] + cfg.mr - 1) / cfg.mr * cfg.mr;
        printf("  %-13s mc=%-4zu kc=%-4zu", cfg.name, cfg.mc, cfg.kc);
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
          printf(" %7.2f", gemm_gflops(&cfg, sizes[s], sizes[s], sizes[s], 0, 0, 0.1));
        printf(" %7.2f\n", gemm_gflops(&cfg, 32, 128, 784, 0, 0, 0.1));
        fflush(stdout);
      }
    }
  }
}

/* The products of resnet18's convolutions at a 64×64 input as the Conv runs them on the
 * plane (W [out channels, 9·C] times the column panels [9·C, positions], B packed
 * beforehand) and, for the 4×4 maps, with positions as rows: GFLOP/s of each tile at the
 * shipped blocking, for choosing the micro-kernel of those shapes. */
static void sweep_convs(const char *only, size_t kc) {
  static const size_t shapes[][3] = {
      {64, 1024, 147}, {64, 256, 576}, {128, 64, 576}, {128, 64, 1152}, {16, 256, 1152}, {16, 256, 2304}};
  const bbi_f32_gemm_config *const *list;
  const size_t ncfg = bbi_f32_gemm_configs(&list);
  const int x86_level = ncfg == 3 ? 2 : ncfg == 2 ? 1 : 0;
  printf("resnet18's convolution products, GFLOP/s of thread CPU time (B packed beforehand)\n  %-13s", "tile");
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    char label[32];
    snprintf(label, sizeof label, "%zux%zux%zu", shapes[s][0], shapes[s][1], shapes[s][2]);
    printf(" %13s", label);
  }
  printf("\n");
  for (size_t ki = 0; ki < sizeof sweep_kernels / sizeof sweep_kernels[0]; ki++) {
    if (sweep_kernels[ki].x86 > x86_level || (only && !strstr(sweep_kernels[ki].name, only))) continue;
    bbi_f32_gemm_config cfg = {sweep_kernels[ki].name, sweep_kernels[ki].mr, sweep_kernels[ki].nr, 0, kc,
                              2048, sweep_kernels[ki].fn, NULL, NULL};
    cfg.mc = (96 + cfg.mr - 1) / cfg.mr * cfg.mr;
    printf("  %-13s kc=%-4zu", cfg.name, kc);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      printf(" %13.2f", gemm_gflops(&cfg, shapes[s][0], shapes[s][1], shapes[s][2], 0, 1, 0.05));
    printf("\n");
    fflush(stdout);
  }
}

/* A session of one 3×3 Conv (pads 1, bias, W and B initializers) with rewrites_off `off`. */
static bb_cpu_session *conv3x3_session(size_t c, size_t m, uint32_t off, bb_model **model) {
  bb_model *md = bb_model_new(NULL);
  bb_opset_set(md, &md->opsets, "", 17);
  md->graph = bb_graph_new(md, "g");
  bb_vilist_add(md, &md->graph->inputs, "x", bb_type_new_tensor(md, BB_DTYPE_FLOAT, -1, NULL));
  bb_vilist_add(md, &md->graph->outputs, "y", bb_type_new_tensor(md, BB_DTYPE_FLOAT, -1, NULL));
  bb_ir_node *n = bb_ir_node_new(md, "Conv", "", "conv");
  bb_strlist_append(md, &n->inputs, "x"), bb_strlist_append(md, &n->inputs, "w"), bb_strlist_append(md, &n->inputs, "b");
  bb_strlist_append(md, &n->outputs, "y");
  bb_attr_set_ints(md, &n->attrs, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
  bb_nodelist_append(md, &md->graph->nodes, n);
  const int64_t wd[4] = {(int64_t)m, (int64_t)c, 3, 3}, bd[1] = {(int64_t)m};
  bb_tensor *w = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 4, wd), *b = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 1, bd);
  float *r = random_floats((size_t)w->numel, 7, -0.1f, 0.1f);
  memcpy(bb_tensor_data(w), r, (size_t)w->numel * sizeof(float));
  memset(bb_tensor_data(b), 0, m * sizeof(float));
  free(r);
  bb_tensor_proto *p = NULL;
  bb_error err;
  bb_tensor_to_proto(md, w, "w", &p, &err), bb_tensorlist_append(md, &md->graph->initializers, p);
  bb_tensor_to_proto(md, b, "b", &p, &err), bb_tensorlist_append(md, &md->graph->initializers, p);
  bb_tensor_release(w), bb_tensor_release(b);
  const bb_cpu_session_options o = {sizeof o, off};
  bb_cpu_session *s = NULL;
  if (bb_cpu_session_new_with_options(md, NULL, &o, &s, &err)) fprintf(stderr, "%s\n", err.message), exit(1);
  *model = md;
  return s;
}

/* The median of `runs` timed runs of session s on x, in µs. */
static double conv_us(bb_cpu_session *s, bb_tensor *x, int runs) {
  double t[64];
  const char *names[1] = {"x"};
  bb_error err;
  for (int i = -2; i < runs; i++) {
    bb_tensor *y = NULL;
    const double t0 = now_seconds();
    if (bb_cpu_session_run(s, names, &x, 1, &y, &err)) fprintf(stderr, "%s\n", err.message), exit(1);
    if (i >= 0) t[i] = now_seconds() - t0;
    bb_tensor_release(y);
  }
  for (int i = 1; i < runs; i++)
    for (int k = i; k > 0 && t[k] < t[k - 1]; k--) {
      const double v = t[k];
      t[k] = t[k - 1], t[k - 1] = v;
    }
  return 1e6 * t[runs / 2];
}

/* 3×3 convolutions (pads 1) in a session with Winograd on and off, alternately (on one
 * thread its CPU time, else the wall clock): resnet18's maps at a 64×64 input, the small CNN's at batch 64, and others. */
static void bench_winograd(size_t threads, const char *only) {
  static const size_t shapes[][4] = {/* batch, channels in, out, side */
                                     {1, 64, 64, 16},  {1, 128, 128, 8}, {1, 256, 256, 4}, {1, 512, 512, 2},
                                     {1, 64, 64, 32},  {1, 32, 32, 56},  {1, 64, 64, 56},  {64, 16, 32, 14},
                                     {64, 8, 16, 28},  {64, 32, 32, 7},  {1, 16, 16, 32},  {1, 8, 8, 32},
                                     {1, 32, 32, 8},   {1, 64, 64, 8},   {1, 128, 128, 4}, {8, 64, 64, 16}};
  bb_error err;
  if (bb_cpu_set_threads(threads, &err)) fprintf(stderr, "%s\n", err.message), exit(1);
  /* one thread: its CPU time, which other work on the machine disturbs less */
  if (threads == 1) bench_clock = CLOCK_THREAD_CPUTIME_ID;
  printf("3x3 Conv in a session, %zu thread(s): median µs (%s), direct / Winograd (above 1: Winograd faster)\n", threads,
         threads == 1 ? "CPU time" : "wall clock");
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    if (only && (size_t)atoi(only) != i) continue;
    bb_model *m1, *m2;
    bb_cpu_session *fast = conv3x3_session(shapes[i][1], shapes[i][2], 0, &m1);
    bb_cpu_session *direct = conv3x3_session(shapes[i][1], shapes[i][2], BB_CPU_REWRITE_WINOGRAD, &m2);
    const int64_t xd[4] = {(int64_t)shapes[i][0], (int64_t)shapes[i][1], (int64_t)shapes[i][3], (int64_t)shapes[i][3]};
    bb_tensor *x = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 4, xd);
    float *r = random_floats((size_t)x->numel, 3, -1, 1);
    memcpy(bb_tensor_data(x), r, (size_t)x->numel * sizeof(float));
    free(r);
    const double macs = (double)shapes[i][0] * shapes[i][1] * shapes[i][2] * 9 * shapes[i][3] * shapes[i][3];
    const int runs = macs > 5e7 ? 9 : macs > 5e6 ? 31 : 63;
    double best_d = 1e30, best_w = 1e30;
    for (int round = 0; round < 3; round++) {
      const double d = conv_us(direct, x, runs), w = conv_us(fast, x, runs);
      best_d = d < best_d ? d : best_d, best_w = w < best_w ? w : best_w;
    }
    printf("  %3zux%-4zu -> %-4zu %3zux%-3zu  direct %9.1f  winograd %9.1f  %5.2fx\n", shapes[i][0], shapes[i][1],
           shapes[i][2], shapes[i][3], shapes[i][3], best_d, best_w, best_d / best_w);
    fflush(stdout);
    bb_tensor_release(x);
    bb_cpu_session_free(fast), bb_cpu_session_free(direct);
    bb_model_free(m1), bb_model_free(m2);
  }
}

/* The depthwise kernel alone (bbi_f32_dwconv2d_chw_lanes, weights gathered) on the
 * layers of mobilenet_v2 and efficientnet_b0 at 3×64×64: channels, input side, stride,
 * filter side (padding side / 2). */
static void bench_dwconv(void) {
  static const size_t layers[][4] = {{32, 32, 1, 3},  {96, 32, 2, 3},  {144, 16, 1, 3}, {144, 16, 2, 5},
                                     {192, 8, 1, 3},  {240, 8, 1, 5},  {384, 4, 1, 3},  {672, 4, 1, 5},
                                     {960, 2, 1, 3},  {1152, 2, 1, 5}};
  printf("depthwise convolution, one thread's CPU time per call (best of 300), µs\n");
  for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
    const size_t channels = layers[i][0], side = layers[i][1], k = layers[i][3];
    bbi_window2d g = {0};
    g.ih = g.iw = side, g.kh = g.kw = k, g.sh = g.sw = layers[i][2], g.dh = g.dw = 1;
    g.ph = g.pw = g.ph_end = g.pw_end = k / 2;
    g.oh = g.ow = (side + 2 * (k / 2) - k) / g.sh + 1;
    float *x = xmalloc(channels * side * side * sizeof(float)), *w = xmalloc(channels * k * k * sizeof(float));
    float *b = xmalloc(channels * sizeof(float)), *y = xmalloc(channels * g.oh * g.ow * sizeof(float));
    float *scratch = xmalloc(bbi_f32_dwconv2d_chw_scratch_size(&g));
    for (size_t j = 0; j < channels * side * side; j++) x[j] = (float)(j % 97) / 97.0f - 0.5f;
    for (size_t j = 0; j < channels * k * k; j++) w[j] = (float)(j % 13) / 13.0f - 0.5f;
    for (size_t j = 0; j < channels; j++) b[j] = 0.01f * (float)j;
    double best = 1e9;
    for (int r = 0; r < 300; r++) {
      const double t0 = now_seconds();
      bbi_f32_dwconv2d_chw_lanes(&g, channels, x, w, NULL, b, y, scratch);
      const double t = now_seconds() - t0;
      best = t < best ? t : best;
    }
    printf("  %4zu channels %2zux%-2zu stride %zu %zux%zu  %7.1f\n", channels, side, side, g.sh, k, k, best * 1e6);
    free(x), free(w), free(b), free(y), free(scratch);
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "dwconv") == 0) {
    bench_clock = CLOCK_THREAD_CPUTIME_ID;
    bench_dwconv();
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "winograd") == 0) {
    bench_winograd(argc > 2 ? (size_t)strtoul(argv[2], NULL, 10) : 1, argc > 3 ? argv[3] : NULL);
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "convs") == 0) {
    bench_clock = CLOCK_THREAD_CPUTIME_ID;
    sweep_convs(argc > 2 ? argv[2] : NULL, argc > 3 ? (size_t)strtoul(argv[3], NULL, 10) : 512);
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "sweep") == 0) {
    sweep(argc > 2 ? argv[2] : NULL);
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "rows") == 0) {
    bench_elementwise();
    return 0;
  }
  bench_gemm();
  bench_elementwise();
  return 0;
}
