/* Winograd's F(2×2, 3×3) in a session (src/cpu/nn_winograd.c): against the convolution in
 * double within the stated bound (docs/DEVIATIONS.md) over odd sizes, asymmetric padding,
 * tiles cut by the output's edge and batches whose tile blocks cross images; its fused
 * bias, residual Add and Relu; NaN and infinities propagated as the direct convolution
 * propagates them (the same bits); the direct path's bits with the rewrite off; and the
 * same bits on 1 to 4 threads. Each case checks that the fast path was taken (its result
 * differs from the direct convolution's bits somewhere), so no case compares the direct
 * path with itself. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "bb/cpu.h"
#include "harness.h"
#include "optest.h"
#include "util/parallel.h"

/* |y − y_ref| ≤ WINO_BOUND · (|b| + Σ |x||w|) for every output, y_ref the convolution in
 * double over the same floats. */
#define WINO_BOUND 0x1p-20

static bb_tensor *rand_tensor(int rank, const int64_t *dims) { return optest_rand(BB_DTYPE_FLOAT, rank, dims, -1, 1); }

static void add_initializer(bb_model *m, const char *name, bb_tensor *t) {
  bb_error err = {0};
  CHECK_MSG(!optest_add_initializer(m, name, t, &err), "%s", err.message);
}

typedef struct conv_case {
  int64_t n, c, m, h, w;
  int64_t pads[4]; /* top, left, bottom, right */
  bool bias, residual_relu;
  bool relu; /* (without residual_relu) Relu on the Conv's output */
} conv_case;

/* Conv (W, B initializers) from "x", then with residual_relu Add "r" and Relu, or with
 * relu Relu alone, to "y". */
static bb_model *conv_model(const conv_case *k, const bb_tensor *w, const bb_tensor *b) {
  bb_model *m = bb_model_new(NULL);
  bb_opset_set(m, &m->opsets, "", 17);
  m->graph = bb_graph_new(m, "g");
  bb_vilist_add(m, &m->graph->inputs, "x", bb_type_new_tensor(m, BB_DTYPE_FLOAT, -1, NULL));
  if (k->residual_relu) bb_vilist_add(m, &m->graph->inputs, "r", bb_type_new_tensor(m, BB_DTYPE_FLOAT, -1, NULL));
  bb_vilist_add(m, &m->graph->outputs, "y", bb_type_new_tensor(m, BB_DTYPE_FLOAT, -1, NULL));
  bb_ir_node *conv = bb_ir_node_new(m, "Conv", "", "conv");
  bb_strlist_append(m, &conv->inputs, "x");
  bb_strlist_append(m, &conv->inputs, "w");
  if (b) bb_strlist_append(m, &conv->inputs, "b");
  bb_attr_set_ints(m, &conv->attrs, "pads", (const int64_t[]){k->pads[0], k->pads[1], k->pads[2], k->pads[3]}, 4);
  bb_strlist_append(m, &conv->outputs, k->residual_relu || k->relu ? "c" : "y");
  bb_nodelist_append(m, &m->graph->nodes, conv);
  if (k->relu && !k->residual_relu) {
    bb_ir_node *relu = bb_ir_node_new(m, "Relu", "", "relu");
    bb_strlist_append(m, &relu->inputs, "c"), bb_strlist_append(m, &relu->outputs, "y");
    bb_nodelist_append(m, &m->graph->nodes, relu);
  }
  if (k->residual_relu) {
    bb_ir_node *add = bb_ir_node_new(m, "Add", "", "add"), *relu = bb_ir_node_new(m, "Relu", "", "relu");
    bb_strlist_append(m, &add->inputs, "c"), bb_strlist_append(m, &add->inputs, "r");
    bb_strlist_append(m, &add->outputs, "s");
    bb_strlist_append(m, &relu->inputs, "s"), bb_strlist_append(m, &relu->outputs, "y");
    bb_nodelist_append(m, &m->graph->nodes, add);
    bb_nodelist_append(m, &m->graph->nodes, relu);
  }
  add_initializer(m, "w", bb_tensor_retain((bb_tensor *)w));
  if (b) add_initializer(m, "b", bb_tensor_retain((bb_tensor *)b));
  return m;
}

static bb_tensor *run(bb_cpu_session *s, bb_tensor *x, bb_tensor *r) {
  const char *names[2] = {"x", "r"};
  bb_tensor *in[2] = {x, r}, *y = NULL;
  bb_error err;
  CHECK_MSG(!bb_cpu_session_run(s, names, in, r ? 2 : 1, &y, &err), "%s", err.message);
  return y;
}

static bb_cpu_session *session(bb_model *m, uint32_t off) {
  const bb_cpu_session_options o = {sizeof o, off};
  bb_cpu_session *s = NULL;
  bb_error err;
  CHECK_MSG(!bb_cpu_session_new_with_options(m, NULL, &o, &s, &err), "%s", err.message);
  return s;
}

/* The case's output in double and each output's Σ|x||w| + |b| (the residual added and
 * Relu applied to the reference, and to the scale's |r| too). */
static void reference(const conv_case *k, const bb_tensor *x, const bb_tensor *w, const bb_tensor *b,
                      const bb_tensor *r, double *ref, double *scale) {
  const int64_t oh = k->h + k->pads[0] + k->pads[2] - 2, ow = k->w + k->pads[1] + k->pads[3] - 2;
  const float *xd = bb_tensor_data(x), *wd = bb_tensor_data(w), *bd = b ? bb_tensor_data(b) : NULL;
  const float *rd = r ? bb_tensor_data(r) : NULL;
  for (int64_t n = 0; n < k->n; n++)
    for (int64_t mo = 0; mo < k->m; mo++)
      for (int64_t oy = 0; oy < oh; oy++)
        for (int64_t ox = 0; ox < ow; ox++) {
          double acc = bd ? bd[mo] : 0, mag = bd ? fabs(bd[mo]) : 0;
          for (int64_t c = 0; c < k->c; c++)
            for (int64_t ky = 0; ky < 3; ky++)
              for (int64_t kx = 0; kx < 3; kx++) {
                const int64_t iy = oy + ky - k->pads[0], ix = ox + kx - k->pads[1];
                if (iy < 0 || iy >= k->h || ix < 0 || ix >= k->w) continue;
                const double p = (double)xd[((n * k->c + c) * k->h + iy) * k->w + ix] *
                                 (double)wd[((mo * k->c + c) * 3 + ky) * 3 + kx];
                acc += p, mag += fabs(p);
              }
          const int64_t i = ((n * k->m + mo) * oh + oy) * ow + ox;
          if (rd) acc += rd[i], acc = acc < 0 ? 0 : acc, mag += fabs(rd[i]);
          if (k->relu && !rd) acc = acc < 0 ? 0 : acc;
          ref[i] = acc, scale[i] = mag;
        }
}

static const conv_case cases[] = {
    /* resnet18's 16×16 and 8×8 maps at batch 1 (one block: its phases on the pool; the
     * smaller with tiles as the GEMM's rows where its tile is wider than 16 tiles), and
     * 4×4 maps of four images (its own 4×4 maps take the direct path natively:
     * test_four_tiles_natively_direct) */
    {1, 64, 64, 16, 16, {1, 1, 1, 1}, true, false, false},
    {1, 128, 128, 8, 8, {1, 1, 1, 1}, false, true, false},
    {4, 64, 64, 4, 4, {1, 1, 1, 1}, true, true, false},
    /* odd sizes: tiles cut by the right and bottom edges; asymmetric and no padding */
    {1, 64, 72, 15, 13, {1, 1, 1, 1}, true, false, false},
    {2, 64, 72, 9, 11, {0, 2, 1, 0}, true, true, false},
    {8, 40, 36, 7, 7, {0, 0, 0, 0}, false, false, false},
    {3, 32, 48, 11, 6, {2, 1, 0, 2}, true, false, false},
    /* a batch of small maps: blocks of whole images and of parts of them */
    {64, 32, 32, 14, 14, {1, 1, 1, 1}, true, true, false},
    {3, 40, 48, 33, 31, {1, 1, 1, 1}, true, false, false},
    /* Relu alone, fused into the output transform's store (the small CNN's second
     * convolution's shape on 32 channels; odd sizes, edge tiles) */
    {8, 32, 32, 14, 14, {1, 1, 1, 1}, true, false, true},
    {3, 32, 48, 11, 6, {2, 1, 0, 2}, true, false, true},
    {2, 64, 72, 9, 11, {0, 2, 1, 0}, false, false, true},
    {1, 64, 64, 15, 13, {1, 1, 1, 1}, true, false, true},
};

/* The fast path against the convolution in double, against the direct path, fused against
 * unfused, and on 1 to 4 threads. */
static void test_against_double(void) {
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    const conv_case *k = &cases[t];
    const int64_t oh = k->h + k->pads[0] + k->pads[2] - 2, ow = k->w + k->pads[1] + k->pads[3] - 2;
    bb_tensor *w = rand_tensor(4, (const int64_t[]){k->m, k->c, 3, 3});
    bb_tensor *b = k->bias ? rand_tensor(1, (const int64_t[]){k->m}) : NULL;
    bb_tensor *x = rand_tensor(4, (const int64_t[]){k->n, k->c, k->h, k->w});
    bb_tensor *r = k->residual_relu ? rand_tensor(4, (const int64_t[]){k->n, k->m, oh, ow}) : NULL;
    bb_model *m = conv_model(k, w, b);
    bb_cpu_session *fast = session(m, 0), *direct = session(m, BB_CPU_REWRITE_WINOGRAD);
    /* (bands off too: a band runs its Conv on chunks of the batch, whose Winograd blocks differ) */
    bb_cpu_session *unfused = session(m, BB_CPU_REWRITE_FUSE_ACTIVATIONS | BB_CPU_REWRITE_BATCH_BANDS);
    bb_tensor *y = fast ? run(fast, x, r) : NULL, *yd = direct ? run(direct, x, r) : NULL;
    bb_tensor *yu = unfused ? run(unfused, x, r) : NULL;
    if (y && yd && yu) {
      const size_t count = (size_t)y->numel;
      double *ref = malloc(count * sizeof *ref), *scale = malloc(count * sizeof *scale);
      reference(k, x, w, b, r, ref, scale);
      double worst = 0;
      for (size_t i = 0; i < count; i++) {
        const double e = fabs(((const float *)bb_tensor_data(y))[i] - ref[i]) / (scale[i] > 0 ? scale[i] : 1);
        if (!(e <= worst)) worst = e;
      }
      CHECK_MSG(worst <= WINO_BOUND, "case %zu: error %.3g of Σ|x||w| over the bound %.3g", t, worst, WINO_BOUND);
      CHECK_MSG(!optest_same_bits(y, yd), "case %zu: the fast path was not taken (the direct path's bits)", t);
      CHECK_MSG(optest_same_bits(y, yu), "case %zu: the fused bias, Add and Relu differ from the unfused graph's", t);
      free(ref), free(scale);
    }
    for (size_t threads = 2; y && threads <= (bbi_parallel_supported() ? 4u : 1u); threads++) {
      bb_error err;
      CHECK_MSG(!bb_cpu_set_threads(threads, &err), "%s", err.message);
      bbi_parallel_stats before, after;
      bbi_parallel_get_stats(&before);
      bb_tensor *yt = run(fast, x, r);
      bbi_parallel_get_stats(&after);
      CHECK_MSG(after.jobs > before.jobs, "case %zu did not use the pool on %zu threads", t, threads);
      CHECK_MSG(optest_same_bits(y, yt), "case %zu: %zu threads differ from one", t, threads);
      bb_tensor_release(yt);
      bb_cpu_set_threads(1, &err);
    }
    bb_tensor_release(y), bb_tensor_release(yd), bb_tensor_release(yu);
    bb_cpu_session_free(fast), bb_cpu_session_free(direct), bb_cpu_session_free(unfused);
    bb_model_free(m);
    bb_tensor_release(w), bb_tensor_release(b), bb_tensor_release(x), bb_tensor_release(r);
  }
}

/* A NaN or an infinity in the input (or in the residual) gives the direct path's bits:
 * non-finite outputs send the convolution back to the direct path. Finite weights beyond
 * what the transforms keep in range do the same; non-finite weights never take the fast
 * path. */
static void test_non_finite(void) {
  /* the residual Add and Relu after the output transform; Relu alone and no epilogue in
   * its store, the check there too */
  static const conv_case kinds[] = {{3, 32, 40, 10, 9, {1, 1, 1, 1}, true, true, false},
                                    {3, 32, 40, 10, 9, {1, 1, 1, 1}, true, false, true},
                                    {3, 32, 40, 10, 9, {1, 1, 1, 1}, false, false, false},
                                    /* 7 tiles a row: the last 3 from the store's tail vectors */
                                    {2, 32, 40, 14, 14, {1, 1, 1, 1}, true, false, true}};
  for (int kind_variant = 0; kind_variant < 16; kind_variant++) {
    const conv_case k = kinds[kind_variant / 4];
    const int variant = kind_variant % 4;
    const int64_t oh = k.h, ow = k.w;
    /* variant 1's -Inf: inside (its tile's neighbours), or with 7 tiles a row in the last
     * column, which only the row's last tile reads */
    const int64_t spot = kind_variant / 4 == 3 ? k.h * k.w + 5 * k.w + k.w - 1 : k.h * k.w + 2 * k.w + 4;
    bb_tensor *w = rand_tensor(4, (const int64_t[]){k.m, k.c, 3, 3}), *b = rand_tensor(1, (const int64_t[]){k.m});
    bb_tensor *x = rand_tensor(4, (const int64_t[]){k.n, k.c, k.h, k.w});
    bb_tensor *r = k.residual_relu ? rand_tensor(4, (const int64_t[]){k.n, k.m, oh, ow}) : NULL;
    float *xd = bb_tensor_data(x), *wd = bb_tensor_data(w);
    if (variant == 0) xd[5] = NAN, xd[x->numel - 3] = INFINITY;
    if (variant == 1) xd[spot] = -INFINITY;
    if (variant == 2) wd[7] = NAN;
    if (variant == 3) xd[17] = 3e38f; /* finite, but the tile's transform overflows */
    bb_model *m = conv_model(&k, w, b);
    bb_cpu_session *fast = session(m, 0), *direct = session(m, BB_CPU_REWRITE_WINOGRAD);
    bb_tensor *y = fast ? run(fast, x, r) : NULL, *yd = direct ? run(direct, x, r) : NULL;
    CHECK_MSG(optest_same_bits(y, yd), "kind %d variant %d: not the direct convolution's bits", kind_variant / 4, variant);
    /* and after it, finite inputs take the fast path again */
    xd[5] = xd[x->numel - 3] = xd[spot] = xd[17] = 0.25f;
    bb_tensor_release(y), bb_tensor_release(yd);
    y = fast ? run(fast, x, r) : NULL, yd = direct ? run(direct, x, r) : NULL;
    if (variant != 2) CHECK_MSG(y && yd && !optest_same_bits(y, yd), "kind %d variant %d: the fast path was not taken after",
                                kind_variant / 4, variant);
    bb_tensor_release(y), bb_tensor_release(yd);
    bb_cpu_session_free(fast), bb_cpu_session_free(direct);
    bb_model_free(m);
    bb_tensor_release(w), bb_tensor_release(b), bb_tensor_release(x), bb_tensor_release(r);
  }
}

/* resnet18's 4×4 maps (four tiles, 256 channels in and out): natively the direct path,
 * whose weights are 9/16 of the transformed ones the sixteen products stream (the whole
 * model's weights do not stay in cache between runs); in WebAssembly the fast path. */
static void test_four_tiles_natively_direct(void) {
  const conv_case k = {1, 256, 256, 4, 4, {1, 1, 1, 1}, true, true, false};
  bb_tensor *w = rand_tensor(4, (const int64_t[]){k.m, k.c, 3, 3}), *b = rand_tensor(1, (const int64_t[]){k.m});
  bb_tensor *x = rand_tensor(4, (const int64_t[]){k.n, k.c, k.h, k.w});
  bb_tensor *r = rand_tensor(4, (const int64_t[]){1, k.m, 4, 4});
  bb_model *m = conv_model(&k, w, b);
  bb_cpu_session *fast = session(m, 0), *direct = session(m, BB_CPU_REWRITE_WINOGRAD);
  bb_tensor *y = fast ? run(fast, x, r) : NULL, *yd = direct ? run(direct, x, r) : NULL;
  CHECK(y && yd);
#if defined(__wasm__)
  CHECK_MSG(!optest_same_bits(y, yd), "the 4×4 map did not take the fast path in WebAssembly");
#else
  CHECK_MSG(optest_same_bits(y, yd), "the 4×4 map with 256 channels took the fast path natively");
#endif
  bb_tensor_release(y), bb_tensor_release(yd);
  bb_cpu_session_free(fast), bb_cpu_session_free(direct);
  bb_model_free(m);
  bb_tensor_release(w), bb_tensor_release(b), bb_tensor_release(x), bb_tensor_release(r);
}

int main(void) {
  RUN(test_against_double);
  RUN(test_non_finite);
  RUN(test_four_tiles_natively_direct);
  return bb_test_finish();
}
