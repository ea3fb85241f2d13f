/* MatMul, Gemm, Conv and pooling on sizes past the conformance tests' toy shapes (so the
 * blocked GEMM's edges, groups, strides and dilations are all crossed), checked against
 * straightforward double-precision references written here. */
#include <math.h>
#include <stdlib.h>

#include "bb/cpu.h"
#include "harness.h"

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static float frand(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((rng_state >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

static bb_tensor *rand_tensor(int rank, const int64_t *dims) {
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, rank, dims);
  float *d = bb_tensor_data(t);
  for (int64_t i = 0; i < t->numel; i++) d[i] = frand();
  return t;
}

static bb_model *model;

static bb_ir_node *node(const char *op, int n_in, int n_out) {
  bb_ir_node *n = bb_ir_node_new(model, op, NULL, "under_test");
  char name[16];
  for (int i = 0; i < n_in; i++) snprintf(name, sizeof name, "in%d", i), bb_strlist_append(model, &n->inputs, name);
  for (int i = 0; i < n_out; i++) snprintf(name, sizeof name, "out%d", i), bb_strlist_append(model, &n->outputs, name);
  return n;
}

/* max |got - want| / (1 + |want|) over all elements */
static double max_rel_err(const bb_tensor *got, const double *want) {
  const float *g = bb_tensor_data(got);
  double worst = 0;
  for (int64_t i = 0; i < got->numel; i++) {
    double e = fabs(g[i] - want[i]) / (1.0 + fabs(want[i]));
    if (!(e <= worst)) worst = e;
  }
  return worst;
}

static void test_matmul_broadcast_batches(void) {
  int64_t ad[] = {2, 3, 37, 65}, bd[] = {65, 29};
  bb_tensor *in[2] = {rand_tensor(4, ad), rand_tensor(2, bd)}, *out[1];
  bb_error err;
  CHECK_EQ_INT(bb_cpu_run_node(node("MatMul", 2, 1), 13, in, 2, out, 1, NULL, &err), 0);
  CHECK(out[0]->rank == 4 && out[0]->dims[2] == 37 && out[0]->dims[3] == 29);
  double *want = calloc((size_t)out[0]->numel, sizeof *want);
  const float *a = bb_tensor_data(in[0]), *b = bb_tensor_data(in[1]);
  for (int64_t bt = 0; bt < 6; bt++)
    for (int64_t i = 0; i < 37; i++)
      for (int64_t j = 0; j < 29; j++) {
        double acc = 0;
        for (int64_t p = 0; p < 65; p++) acc += (double)a[(bt * 37 + i) * 65 + p] * b[p * 29 + j];
        want[(bt * 37 + i) * 29 + j] = acc;
      }
  CHECK_MSG(max_rel_err(out[0], want) < 1e-5, "error %g", max_rel_err(out[0], want));
  free(want);
  bb_tensor_release(out[0]);
  /* 1-D operands: vector · matrix drops the promoted axis */
  int64_t vd[] = {65};
  bb_tensor *v = rand_tensor(1, vd), *in2[2] = {v, in[1]};
  CHECK_EQ_INT(bb_cpu_run_node(node("MatMul", 2, 1), 13, in2, 2, out, 1, NULL, &err), 0);
  CHECK(out[0]->rank == 1 && out[0]->dims[0] == 29);
  bb_tensor_release(out[0]);
  /* mismatched inner dimensions are an error naming the node */
  bb_tensor *bad[2] = {in[1], in[1]};
  CHECK_EQ_INT(bb_cpu_run_node(node("MatMul", 2, 1), 13, bad, 2, out, 1, NULL, &err), BB_ERR_TYPE);
  CHECK(strstr(err.message, "node under_test (MatMul)") != NULL);
  bb_tensor_release(v);
  bb_tensor_release(in[0]);
  bb_tensor_release(in[1]);
}

static void test_gemm_forms(void) {
  const int64_t M = 33, N = 47, K = 70;
  for (int form = 0; form < 8; form++) {
    int ta = form & 1, tb = (form >> 1) & 1, cshape = form >> 2; /* C as [N] or [M, 1] */
    int64_t ad[] = {ta ? K : M, ta ? M : K}, bd[] = {tb ? N : K, tb ? K : N};
    int64_t cd1[] = {N}, cd2[] = {M, 1};
    bb_tensor *in[3] = {rand_tensor(2, ad), rand_tensor(2, bd), cshape ? rand_tensor(2, cd2) : rand_tensor(1, cd1)};
    bb_tensor *out[1];
    bb_ir_node *n = node("Gemm", 3, 1);
    bb_attr_set_int(model, &n->attrs, "transA", ta);
    bb_attr_set_int(model, &n->attrs, "transB", tb);
    bb_attr_set_float(model, &n->attrs, "alpha", 0.5f);
    bb_attr_set_float(model, &n->attrs, "beta", form == 3 ? 1.0f : -2.0f);
    bb_error err;
    CHECK_EQ_INT(bb_cpu_run_node(n, 13, in, 3, out, 1, NULL, &err), 0);
    double *want = calloc((size_t)(M * N), sizeof *want);
    const float *a = bb_tensor_data(in[0]), *b = bb_tensor_data(in[1]), *c = bb_tensor_data(in[2]);
    float beta = form == 3 ? 1.0f : -2.0f;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double acc = 0;
        for (int64_t p = 0; p < K; p++) acc += (double)a[ta ? p * M + i : i * K + p] * b[tb ? j * K + p : p * N + j];
        want[i * N + j] = 0.5 * acc + beta * (cshape ? c[i] : c[j]);
      }
    CHECK_MSG(max_rel_err(out[0], want) < 1e-5, "form %d: error %g", form, max_rel_err(out[0], want));
    free(want);
    for (int i = 0; i < 3; i++) bb_tensor_release(in[i]);
    bb_tensor_release(out[0]);
  }
}

/* Direct 2-D convolution in double. */
static void conv_ref(const float *x, const float *w, const float *b, double *y, int64_t n, int64_t c, int64_t h,
                     int64_t wd, int64_t m, int64_t kh, int64_t kw, int64_t group, int64_t s, int64_t d, int64_t p,
                     int64_t oh, int64_t ow) {
  int64_t cg = c / group, mg = m / group;
  for (int64_t bn = 0; bn < n; bn++)
    for (int64_t om = 0; om < m; om++)
      for (int64_t oy = 0; oy < oh; oy++)
        for (int64_t ox = 0; ox < ow; ox++) {
          double acc = b ? b[om] : 0;
          int64_t g = om / mg;
          for (int64_t ic = 0; ic < cg; ic++)
            for (int64_t ky = 0; ky < kh; ky++)
              for (int64_t kx = 0; kx < kw; kx++) {
                int64_t iy = oy * s - p + ky * d, ix = ox * s - p + kx * d;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                acc += (double)x[((bn * c + g * cg + ic) * h + iy) * wd + ix] * w[((om * cg + ic) * kh + ky) * kw + kx];
              }
          y[((bn * m + om) * oh + oy) * ow + ox] = acc;
        }
}

static void test_conv_2d(void) {
  struct { int64_t n, c, h, w, m, k, group, stride, dil, pad; } cases[] = {
      {1, 8, 28, 28, 16, 3, 1, 1, 1, 1}, /* the benchmark's shape */
      {2, 6, 13, 11, 9, 3, 3, 2, 1, 1},  /* groups, stride */
      {1, 4, 17, 19, 8, 3, 2, 1, 2, 2},  /* dilation */
      {2, 5, 7, 9, 7, 1, 1, 1, 1, 0},    /* 1×1: the no-im2col path */
      {1, 3, 9, 9, 4, 5, 1, 3, 1, 0},    /* big kernel, big stride */
      {1, 8, 12, 12, 12, 1, 2, 1, 1, 0}, /* 1×1, groups, one image on the NCHW plane */
      {1, 16, 19, 19, 16, 3, 16, 2, 1, 1}, /* depthwise, stride 2: the plane kernel's row path */
      {2, 12, 9, 9, 12, 5, 12, 2, 1, 2},   /* depthwise 5×5 on narrow outputs: four channels a vector */
      /* one image's columns packed a band of output rows at a time (CONV_BAND_FLOATS): */
      {1, 16, 40, 40, 8, 3, 1, 1, 1, 1},  /* four bands, the last one short */
      {1, 24, 61, 47, 6, 3, 1, 2, 2, 3},  /* stride and dilation: bands start past the top padding */
      {1, 64, 20, 90, 4, 3, 1, 1, 1, 2},  /* one-row bands, the second still in the top padding */
      {1, 32, 30, 30, 8, 3, 2, 1, 1, 1},  /* groups, two bands each */
      /* few input channels under a tall or strided window: from the input's shifted rows
       * (bbi_nn_conv_rows) on a machine with AVX-512 */
      {2, 3, 67, 61, 20, 7, 1, 2, 1, 3},  /* a stem on odd sizes; output channels end mid-panel */
      {1, 3, 65, 97, 9, 7, 1, 2, 2, 3},   /* dilation; two tiles a row, the second part-filled */
      {1, 2, 40, 40, 8, 5, 1, 1, 1, 2},   /* 5×5 at stride 1 */
  };
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    int64_t n = cases[t].n, c = cases[t].c, h = cases[t].h, w = cases[t].w, m = cases[t].m, k = cases[t].k;
    int64_t xd[] = {n, c, h, w}, wd[] = {m, c / cases[t].group, k, k}, bd[] = {m};
    bb_tensor *in[3] = {rand_tensor(4, xd), rand_tensor(4, wd), rand_tensor(1, bd)}, *out[1];
    bb_ir_node *nd = node("Conv", 3, 1);
    int64_t two[2] = {cases[t].stride, cases[t].stride}, dil[2] = {cases[t].dil, cases[t].dil};
    int64_t pads[4] = {cases[t].pad, cases[t].pad, cases[t].pad, cases[t].pad};
    bb_attr_set_ints(model, &nd->attrs, "strides", two, 2);
    bb_attr_set_ints(model, &nd->attrs, "dilations", dil, 2);
    bb_attr_set_ints(model, &nd->attrs, "pads", pads, 4);
    bb_attr_set_int(model, &nd->attrs, "group", cases[t].group);
    bb_error err;
    CHECK_EQ_INT(bb_cpu_run_node(nd, 13, in, 3, out, 1, NULL, &err), 0);
    int64_t span = (k - 1) * cases[t].dil + 1;
    int64_t oh = (h + 2 * cases[t].pad - span) / cases[t].stride + 1, ow = (w + 2 * cases[t].pad - span) / cases[t].stride + 1;
    CHECK_MSG(out[0]->dims[2] == oh && out[0]->dims[3] == ow, "case %zu: output %lldx%lld", t,
              (long long)out[0]->dims[2], (long long)out[0]->dims[3]);
    double *want = calloc((size_t)(n * m * oh * ow), sizeof *want);
    conv_ref(bb_tensor_data(in[0]), bb_tensor_data(in[1]), bb_tensor_data(in[2]), want, n, c, h, w, m, k, k,
             cases[t].group, cases[t].stride, cases[t].dil, cases[t].pad, oh, ow);
    CHECK_MSG(max_rel_err(out[0], want) < 1e-5, "case %zu: error %g", t, max_rel_err(out[0], want));
    free(want);
    for (int i = 0; i < 3; i++) bb_tensor_release(in[i]);
    bb_tensor_release(out[0]);
  }
  /* channel mismatch is reported, not computed */
  int64_t xd[] = {1, 3, 5, 5}, wd[] = {2, 4, 3, 3};
  bb_tensor *in[2] = {rand_tensor(4, xd), rand_tensor(4, wd)}, *out[1];
  bb_error err;
  CHECK_EQ_INT(bb_cpu_run_node(node("Conv", 2, 1), 13, in, 2, out, 1, NULL, &err), BB_ERR_TYPE);
  CHECK(strstr(err.message, "input channels") != NULL);
  bb_tensor_release(in[0]);
  bb_tensor_release(in[1]);
}

static void test_maxpool_indices_and_avgpool(void) {
  int64_t xd[] = {2, 3, 9, 8};
  bb_tensor *x = rand_tensor(4, xd), *in[1] = {x}, *out[2];
  bb_ir_node *n = node("MaxPool", 1, 2);
  int64_t k[2] = {3, 2}, s[2] = {2, 2}, pads[4] = {1, 0, 1, 1};
  bb_attr_set_ints(model, &n->attrs, "kernel_shape", k, 2);
  bb_attr_set_ints(model, &n->attrs, "strides", s, 2);
  bb_attr_set_ints(model, &n->attrs, "pads", pads, 4);
  bb_error err;
  CHECK_EQ_INT(bb_cpu_run_node(n, 12, in, 1, out, 2, NULL, &err), 0);
  int64_t oh = (9 + 2 - 3) / 2 + 1, ow = (8 + 1 - 2) / 2 + 1;
  CHECK(out[0]->dims[2] == oh && out[0]->dims[3] == ow);
  const float *xv = bb_tensor_data(x), *yv = bb_tensor_data(out[0]);
  const int64_t *iv = bb_tensor_data(out[1]);
  bool ok = true;
  for (int64_t pl = 0; pl < 6; pl++)
    for (int64_t oy = 0; oy < oh; oy++)
      for (int64_t ox = 0; ox < ow; ox++) {
        float best = -INFINITY;
        int64_t arg = -1;
        for (int64_t ky = 0; ky < 3; ky++)
          for (int64_t kx = 0; kx < 2; kx++) {
            int64_t iy = oy * 2 - 1 + ky, ix = ox * 2 + kx;
            if (iy < 0 || iy >= 9 || ix >= 8) continue;
            int64_t at = (pl * 9 + iy) * 8 + ix;
            if (xv[at] > best) best = xv[at], arg = at;
          }
        int64_t o = (pl * oh + oy) * ow + ox;
        ok = ok && yv[o] == best && iv[o] == arg;
      }
  CHECK(ok);
  bb_tensor_release(out[0]);
  bb_tensor_release(out[1]);
  /* AveragePool excluding padding from the divisor */
  bb_ir_node *a = node("AveragePool", 1, 1);
  bb_attr_set_ints(model, &a->attrs, "kernel_shape", k, 2);
  bb_attr_set_ints(model, &a->attrs, "pads", pads, 4);
  CHECK_EQ_INT(bb_cpu_run_node(a, 11, in, 1, out, 1, NULL, &err), 0);
  yv = bb_tensor_data(out[0]);
  double sum = 0;
  int cnt = 0;
  for (int64_t ky = 0; ky < 3; ky++)
    for (int64_t kx = 0; kx < 2; kx++) {
      int64_t iy = -1 + ky, ix = kx;
      if (iy >= 0) sum += xv[iy * 8 + ix], cnt++;
    }
  CHECK(fabs(yv[0] - sum / cnt) < 1e-6);
  bb_tensor_release(out[0]);
  bb_tensor_release(x);
}

/* An empty batch is a valid input (it once divided by zero). */
static void test_batchnorm_empty_batch(void) {
  int64_t xd[] = {0, 3, 4, 5}, cd[] = {3};
  bb_tensor *in[5] = {rand_tensor(4, xd), rand_tensor(1, cd), rand_tensor(1, cd), rand_tensor(1, cd), rand_tensor(1, cd)};
  bb_tensor *out[1];
  bb_error err;
  CHECK_EQ_INT(bb_cpu_run_node(node("BatchNormalization", 5, 1), 15, in, 5, out, 1, NULL, &err), 0);
  CHECK(out[0] && out[0]->numel == 0 && out[0]->rank == 4 && out[0]->dims[1] == 3);
  bb_tensor_release(out[0]);
  for (int i = 0; i < 5; i++) bb_tensor_release(in[i]);
}

int main(void) {
  model = bb_model_new(NULL);
  RUN(test_matmul_broadcast_batches);
  RUN(test_gemm_forms);
  RUN(test_conv_2d);
  RUN(test_maxpool_indices_and_avgpool);
  RUN(test_batchnorm_empty_batch);
  bb_model_free(model);
  return bb_test_finish();
}
