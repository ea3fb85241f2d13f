/* A Conv with few products per output (one or two input channels, windows up to 4×4, unit
 * column stride) on feature maps of 512 positions or more, in a session: where the 4-lane
 * GEMM is the default (WebAssembly) it runs from zero-padded input rows
 * (bbi_f32_conv_direct, whose bits against im2col + the GEMM test_kernels holds), else on
 * the GEMM. Against the convolution in double within a rounding bound, NaN and infinities
 * where the double reference has them, and the same bits on 1 to 4 threads (whole images,
 * or one image's bands of rows, as the pool's tasks); an empty batch. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bb/cpu.h"
#include "harness.h"
#include "optest.h"
#include "util/parallel.h"

/* |y − y_ref| ≤ BOUND · (|b| + Σ |x||w|): k ≤ 16 products and the bias summed in float. */
#define BOUND 0x1p-18

typedef struct conv_case {
  int64_t n, c, m, h, w, kh, kw;
  int64_t pads[4]; /* top, left, bottom, right */
  bool relu;
} conv_case;

static const conv_case cases[] = {
    {64, 1, 16, 28, 28, 3, 3, {1, 1, 1, 1}, true}, /* the small CNN's first convolution */
    {1, 1, 16, 30, 31, 3, 3, {1, 1, 1, 1}, true},  /* one image: its rows in bands */
    {3, 1, 5, 25, 29, 3, 3, {0, 2, 1, 0}, false},  /* 5 channels: a panel cut short */
    {2, 2, 7, 33, 20, 2, 3, {1, 0, 0, 1}, true},   /* two input channels */
    {5, 1, 3, 24, 23, 4, 4, {2, 1, 1, 2}, false},  /* k = 16 */
    {0, 1, 16, 28, 28, 3, 3, {1, 1, 1, 1}, true},  /* an empty batch */
};

static void add_initializer(bb_model *m, const char *name, bb_tensor *t) {
  bb_error err;
  CHECK_MSG(!optest_add_initializer(m, name, t, &err), "%s", err.message);
}

static bb_model *conv_model(const conv_case *k, const bb_tensor *w, const bb_tensor *b) {
  bb_model *m = bb_model_new(NULL);
  bb_opset_set(m, &m->opsets, "", 17);
  m->graph = bb_graph_new(m, "g");
  bb_vilist_add(m, &m->graph->inputs, "x", bb_type_new_tensor(m, BB_DTYPE_FLOAT, -1, NULL));
  bb_vilist_add(m, &m->graph->outputs, "y", bb_type_new_tensor(m, BB_DTYPE_FLOAT, -1, NULL));
  bb_ir_node *conv = bb_ir_node_new(m, "Conv", "", "conv");
  bb_strlist_append(m, &conv->inputs, "x");
  bb_strlist_append(m, &conv->inputs, "w");
  bb_strlist_append(m, &conv->inputs, "b");
  bb_attr_set_ints(m, &conv->attrs, "pads", (const int64_t[]){k->pads[0], k->pads[1], k->pads[2], k->pads[3]}, 4);
  bb_strlist_append(m, &conv->outputs, k->relu ? "c" : "y");
  bb_nodelist_append(m, &m->graph->nodes, conv);
  if (k->relu) {
    bb_ir_node *relu = bb_ir_node_new(m, "Relu", "", "relu");
    bb_strlist_append(m, &relu->inputs, "c"), bb_strlist_append(m, &relu->outputs, "y");
    bb_nodelist_append(m, &m->graph->nodes, relu);
  }
  add_initializer(m, "w", bb_tensor_retain((bb_tensor *)w));
  add_initializer(m, "b", bb_tensor_retain((bb_tensor *)b));
  return m;
}

static bb_tensor *run(bb_cpu_session *s, bb_tensor *x) {
  const char *names[1] = {"x"};
  bb_tensor *in[1] = {x}, *y = NULL;
  bb_error err;
  CHECK_MSG(!bb_cpu_session_run(s, names, in, 1, &y, &err), "%s", err.message);
  return y;
}

/* Every output against the convolution in double (Relu applied): within the bound where
 * finite, NaN where it is NaN, the same infinity where it is one. Returns whether all
 * held. */
static bool matches_reference(const conv_case *k, const bb_tensor *x, const bb_tensor *w, const bb_tensor *b,
                              const bb_tensor *y) {
  const int64_t oh = k->h + k->pads[0] + k->pads[2] - k->kh + 1, ow = k->w + k->pads[1] + k->pads[3] - k->kw + 1;
  const float *xd = bb_tensor_data(x), *wd = bb_tensor_data(w), *bd = bb_tensor_data(b), *yd = bb_tensor_data(y);
  if (y->numel != k->n * k->m * oh * ow) return false;
  bool ok = true;
  for (int64_t n = 0; n < k->n; n++)
    for (int64_t mo = 0; mo < k->m; mo++)
      for (int64_t oy = 0; oy < oh; oy++)
        for (int64_t ox = 0; ox < ow; ox++) {
          double acc = bd[mo], mag = fabs(bd[mo]);
          for (int64_t c = 0; c < k->c; c++)
            for (int64_t ky = 0; ky < k->kh; ky++)
              for (int64_t kx = 0; kx < k->kw; kx++) {
                const int64_t iy = oy + ky - k->pads[0], ix = ox + kx - k->pads[1];
                if (iy < 0 || iy >= k->h || ix < 0 || ix >= k->w) continue;
                const double p = (double)xd[((n * k->c + c) * k->h + iy) * k->w + ix] *
                                 (double)wd[((mo * k->c + c) * k->kh + ky) * k->kw + kx];
                acc += p, mag += fabs(p);
              }
          if (k->relu && acc < 0) acc = 0;
          const double got = yd[((n * k->m + mo) * oh + oy) * ow + ox];
          if (isnan(acc)) ok = ok && isnan(got);
          else if (isinf(acc) || !isfinite(mag)) ok = ok && (isinf(acc) ? got == acc : true);
          else ok = ok && fabs(got - acc) <= BOUND * mag;
        }
  return ok;
}

static void test_cases(void) {
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    const conv_case *k = &cases[t];
    bb_tensor *w = optest_rand(BB_DTYPE_FLOAT, 4, (const int64_t[]){k->m, k->c, k->kh, k->kw}, -1, 1);
    bb_tensor *b = optest_rand(BB_DTYPE_FLOAT, 1, (const int64_t[]){k->m}, -1, 1);
    bb_tensor *x = optest_rand(BB_DTYPE_FLOAT, 4, (const int64_t[]){k->n, k->c, k->h, k->w}, -4, 4);
    for (int special = 0; special < (x->numel ? 2 : 1); special++) {
      if (special) { /* NaN and infinities, at an edge and inside */
        float *xd = bb_tensor_data(x);
        xd[0] = NAN, xd[k->w + 3] = INFINITY, xd[x->numel - 7] = -INFINITY, xd[x->numel / 2] = -0.0f;
      }
      bb_model *m = conv_model(k, w, b);
      bb_cpu_session *s = NULL;
      bb_error err;
      CHECK_MSG(!bb_cpu_session_new(m, NULL, &s, &err), "%s", err.message);
      bb_tensor *y = s ? run(s, x) : NULL;
      CHECK_MSG(y && matches_reference(k, x, w, b, y), "case %zu (special %d): not the convolution in double", t,
                special);
      for (size_t threads = 2; y && threads <= (bbi_parallel_supported() ? 4u : 1u); threads++) {
        CHECK_MSG(!bb_cpu_set_threads(threads, &err), "%s", err.message);
        bbi_parallel_stats before, after;
        bbi_parallel_get_stats(&before);
        bb_tensor *yt = run(s, x);
        bbi_parallel_get_stats(&after);
        CHECK_MSG(k->n == 0 || after.jobs > before.jobs, "case %zu did not use the pool on %zu threads", t, threads);
        CHECK_MSG(optest_same_bits(y, yt), "case %zu (special %d): %zu threads differ from one", t, special, threads);
        bb_tensor_release(yt);
        bb_cpu_set_threads(1, &err);
      }
      bb_tensor_release(y);
      bb_cpu_session_free(s);
      bb_model_free(m);
    }
    bb_tensor_release(w), bb_tensor_release(b), bb_tensor_release(x);
  }
}

int main(void) {
  RUN(test_cases);
  return bb_test_finish();
}
