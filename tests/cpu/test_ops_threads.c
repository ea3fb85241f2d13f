/* The operators the work pool splits give the same bits on 1, 2, 3 and 4 threads —
 * MatMul and Gemm (the blocked GEMM and its matrix-vector products), Conv and ConvTranspose
 * (column matrices, GEMM, col2im, the depthwise plane kernel), pooling, reductions, softmax and large elementwise
 * operators — and so does a training step of a CNN. Each case also checks that its
 * operator did go to the pool on several threads, so the comparison is never between two
 * single-threaded runs. In a build without threads it checks one thread only. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bb/cpu.h"
#include "bb/grad.h"
#include "harness.h"
#include "optest.h"
#include "util/parallel.h"

static bb_tensor *rand_tensor(int rank, const int64_t *dims) { return optest_rand(BB_DTYPE_FLOAT, rank, dims, -1, 1); }

static bb_model *model;

static bb_ir_node *node(const char *op, int n_in, int n_out) { return optest_node(model, op, n_in, n_out); }

static size_t most_threads(void) { return bbi_parallel_supported() ? 4 : 1; }

static uint64_t pool_jobs(void) {
  bbi_parallel_stats s;
  bbi_parallel_get_stats(&s);
  return s.jobs;
}

static int set_threads(size_t n) {
  bb_error err;
  int rc = bb_cpu_set_threads(n, &err);
  CHECK_MSG(rc == 0, "%s", err.message);
  return rc;
}

/* Runs the node on 1..4 threads and compares every output with the one-thread run, bit
 * for bit; with `pooled`, on 2 threads and more the node must have handed work to the pool. */
static void same_bits_on_1_to_4(const char *label, const bb_ir_node *n, bb_tensor *const *in, int n_in, int n_out,
                                bool pooled) {
  bb_tensor *ref[4] = {NULL}, *got[4] = {NULL};
  bb_error err;
  for (size_t threads = 1; threads <= most_threads(); threads++) {
    if (set_threads(threads)) return;
    const uint64_t jobs = pool_jobs();
    bb_tensor **out = threads == 1 ? ref : got;
    int rc = bb_cpu_run_node(n, 17, in, (size_t)n_in, out, (size_t)n_out, NULL, &err);
    CHECK_MSG(rc == 0, "%s: %s", label, err.message);
    if (rc) break;
    if (threads > 1 && pooled)
      CHECK_MSG(pool_jobs() > jobs, "%s did not use the pool on %zu threads", label, threads);
    for (int o = 0; threads > 1 && o < n_out; o++) {
      CHECK_MSG(got[o] && ref[o] && got[o]->numel == ref[o]->numel &&
                    memcmp(bb_tensor_data(got[o]), bb_tensor_data(ref[o]), bb_tensor_nbytes(ref[o])) == 0,
                "%s: output %d differs on %zu threads", label, o, threads);
      bb_tensor_release(got[o]);
      got[o] = NULL;
    }
  }
  for (int o = 0; o < n_out; o++) bb_tensor_release(ref[o]);
  set_threads(1);
}

static void same_on_any_thread_count(const char *label, const bb_ir_node *n, bb_tensor *const *in, int n_in,
                                     int n_out) {
  same_bits_on_1_to_4(label, n, in, n_in, n_out, true);
}

#define DIMS(...) (const int64_t[]){__VA_ARGS__}, (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

static void check2(const char *label, bb_ir_node *n, const int64_t *ad, int ar, const int64_t *bd, int br) {
  bb_tensor *in[2] = {rand_tensor(ar, ad), rand_tensor(br, bd)};
  same_on_any_thread_count(label, n, in, 2, 1);
  bb_tensor_release(in[0]);
  bb_tensor_release(in[1]);
}

static void check1(const char *label, bb_ir_node *n, const int64_t *xd, int xr, int n_out) {
  bb_tensor *x = rand_tensor(xr, xd);
  same_on_any_thread_count(label, n, &x, 1, n_out);
  bb_tensor_release(x);
}

static void test_matmul_and_gemm(void) {
  check2("MatMul 256x512 . 512x384", node("MatMul", 2, 1), DIMS(256, 512), DIMS(512, 384));
  check2("MatMul batched, odd edges", node("MatMul", 2, 1), DIMS(3, 131, 170), DIMS(170, 191));
  check2("MatMul one row", node("MatMul", 2, 1), DIMS(1, 700), DIMS(700, 900));
  check2("MatMul one column", node("MatMul", 2, 1), DIMS(900, 700), DIMS(700, 1));
  for (int form = 0; form < 4; form++) {
    bb_ir_node *n = node("Gemm", 3, 1);
    bb_attr_set_int(model, &n->attrs, "transA", form & 1);
    bb_attr_set_int(model, &n->attrs, "transB", form >> 1);
    bb_attr_set_float(model, &n->attrs, "alpha", 0.75f);
    bb_attr_set_float(model, &n->attrs, "beta", -1.5f);
    const int64_t M = 203, N = 333, K = 177;
    int64_t ad[2] = {form & 1 ? K : M, form & 1 ? M : K}, bd[2] = {form >> 1 ? N : K, form >> 1 ? K : N}, cd[1] = {N};
    bb_tensor *in[3] = {rand_tensor(2, ad), rand_tensor(2, bd), rand_tensor(1, cd)};
    char label[64];
    snprintf(label, sizeof label, "Gemm transA %d transB %d", form & 1, form >> 1);
    same_on_any_thread_count(label, n, in, 3, 1);
    for (int i = 0; i < 3; i++) bb_tensor_release(in[i]);
  }
}

static bb_ir_node *window_node(const char *op, int n_in, int n_out, int64_t k, int64_t stride, int64_t pad,
                               int64_t dilation, int64_t group) {
  bb_ir_node *n = node(op, n_in, n_out);
  int64_t ks[2] = {k, k}, st[2] = {stride, stride}, pads[4] = {pad, pad, pad, pad}, dil[2] = {dilation, dilation};
  if (strcmp(op, "Conv") && strcmp(op, "ConvTranspose")) bb_attr_set_ints(model, &n->attrs, "kernel_shape", ks, 2);
  bb_attr_set_ints(model, &n->attrs, "strides", st, 2);
  bb_attr_set_ints(model, &n->attrs, "pads", pads, 4);
  if (dilation != 1) bb_attr_set_ints(model, &n->attrs, "dilations", dil, 2);
  if (group != 1) bb_attr_set_int(model, &n->attrs, "group", group);
  return n;
}

static void test_convolutions(void) {
  check2("Conv 3x3 pad 1", window_node("Conv", 2, 1, 3, 1, 1, 1, 1), DIMS(2, 16, 30, 30), DIMS(32, 16, 3, 3));
  check2("Conv stride 2, groups 2, dilation 2", window_node("Conv", 2, 1, 3, 2, 2, 2, 2), DIMS(3, 8, 41, 37),
         DIMS(12, 4, 3, 3));
  check2("Conv 3x3 on a 16x16 map (columns packed as GEMM panels)", window_node("Conv", 2, 1, 3, 1, 1, 1, 1),
         DIMS(1, 64, 16, 16), DIMS(64, 64, 3, 3));
  check2("Conv 7x7 stride 2 stem (from the input's shifted rows, or columns packed as GEMM panels)", window_node("Conv", 2, 1, 7, 2, 3, 1, 1),
         DIMS(1, 3, 64, 64), DIMS(64, 3, 7, 7));
  check2("Conv 7x7 stride 2 on odd sizes, 20 output channels, 2 images (from the input's shifted rows)",
         window_node("Conv", 2, 1, 7, 2, 3, 1, 1), DIMS(2, 3, 67, 61), DIMS(20, 3, 7, 7));
  check2("Conv 3x3 on a 4x4 map, one image (columns packed as the GEMM's A)", window_node("Conv", 2, 1, 3, 1, 1, 1, 1),
         DIMS(1, 128, 4, 4), DIMS(256, 128, 3, 3));
  check2("Conv 3x3 stride 2 to a 2x2 map, one image (4-row A panels)", window_node("Conv", 2, 1, 3, 2, 1, 1, 1),
         DIMS(1, 64, 4, 4), DIMS(512, 64, 3, 3));
  check2("Conv 1x1", window_node("Conv", 2, 1, 1, 1, 0, 1, 1), DIMS(2, 64, 28, 28), DIMS(96, 64, 1, 1));
  /* MobileNet's projections on small maps: few output channels against few positions,
   * one region of the GEMM's default width, cut into narrower ones to be shared */
  check2("Conv 1x1 192 -> 32 on an 8x8 map", window_node("Conv", 2, 1, 1, 1, 0, 1, 1), DIMS(1, 192, 8, 8),
         DIMS(32, 192, 1, 1));
  check2("Conv 1x1 384 -> 64 on a 4x4 map", window_node("Conv", 2, 1, 1, 1, 0, 1, 1), DIMS(1, 384, 4, 4),
         DIMS(64, 384, 1, 1));
  check2("Conv 1x1 576 -> 96 on a 4x4 map", window_node("Conv", 2, 1, 1, 1, 0, 1, 1), DIMS(1, 576, 4, 4),
         DIMS(96, 576, 1, 1));
  check2("Conv small images batched", window_node("Conv", 2, 1, 3, 1, 1, 1, 1), DIMS(64, 8, 8, 8), DIMS(16, 8, 3, 3));
  /* depthwise: the plane kernel's row path and its four-channel path for narrow outputs */
  check2("Conv depthwise 3x3", window_node("Conv", 2, 1, 3, 1, 1, 1, 96), DIMS(1, 96, 32, 32), DIMS(96, 1, 3, 3));
  check2("Conv depthwise 5x5 stride 2 narrow", window_node("Conv", 2, 1, 5, 2, 2, 1, 402), DIMS(2, 402, 9, 9),
         DIMS(402, 1, 5, 5));
  check2("ConvTranspose stride 2", window_node("ConvTranspose", 2, 1, 3, 2, 1, 1, 1), DIMS(2, 32, 15, 15),
         DIMS(32, 16, 3, 3));
  /* batches: the chunks of images (one image each on the plane, several small ones) are the
   * pool's tasks, shared out evenly or not (7 images on 2 and 3 threads) */
  check2("Conv batch 32, 1 channel 28x28", window_node("Conv", 2, 1, 3, 1, 1, 1, 1), DIMS(32, 1, 28, 28),
         DIMS(16, 1, 3, 3));
  check2("Conv batch 7, 16 channels 14x14", window_node("Conv", 2, 1, 3, 1, 1, 1, 1), DIMS(7, 16, 14, 14),
         DIMS(32, 16, 3, 3));
  check2("Conv batch 7 small images, groups 2", window_node("Conv", 2, 1, 3, 1, 1, 1, 2), DIMS(7, 8, 6, 6),
         DIMS(16, 4, 3, 3));
  check2("Conv depthwise batch 5", window_node("Conv", 2, 1, 3, 1, 1, 1, 24), DIMS(5, 24, 20, 20), DIMS(24, 1, 3, 3));
  check2("ConvTranspose batch 7 (the gradient of a stride-1 Conv's input)",
         window_node("ConvTranspose", 2, 1, 3, 1, 1, 1, 1), DIMS(7, 32, 14, 14), DIMS(32, 16, 3, 3));
  check2("ConvTranspose batch 9 small images", window_node("ConvTranspose", 2, 1, 3, 1, 1, 1, 1), DIMS(9, 16, 7, 7),
         DIMS(16, 8, 3, 3));
  /* the gradient of a convolution's weights: a Conv whose kernel is the output gradient */
  check2("Conv weight gradient shape", window_node("Conv", 2, 1, 3, 1, 1, 1, 1), DIMS(16, 32, 10, 10),
         DIMS(24, 32, 10, 10));
}

/* A 3×3 / pad 1 Conv on a 2×2 map (resnet18's last stage, narrowed): its four positions'
 * patches are packed straight into the GEMM's one 4-row A panel and the 256 output
 * channels are its columns, which go to the pool as at least four regions a participant
 * (column chunks down to one 32-wide panel): the same bits on 1–4 threads, and on two
 * threads at least eight tasks for the product (natively it had two regions of 128
 * columns, and the patches' pack job two more). */
static void test_conv_small_map_regions(void) {
  bb_ir_node *n = window_node("Conv", 2, 1, 3, 1, 1, 1, 1);
  check2("Conv 3x3 on a 2x2 map (A packed from the planes)", n, DIMS(1, 64, 2, 2), DIMS(256, 64, 3, 3));
  check2("Conv 3x3 stride 2 from 4x4 to 2x2, 8 channels", window_node("Conv", 2, 1, 3, 2, 1, 1, 1), DIMS(1, 8, 4, 4),
         DIMS(300, 8, 3, 3));
  if (!bbi_parallel_supported()) return;
  bb_tensor *in[2] = {rand_tensor(4, (const int64_t[]){1, 64, 2, 2}), rand_tensor(4, (const int64_t[]){256, 64, 3, 3})};
  bb_tensor *out = NULL;
  bb_error err;
  if (!set_threads(2)) {
    bbi_parallel_stats before, after;
    bbi_parallel_get_stats(&before);
    CHECK_MSG(!bb_cpu_run_node(n, 17, in, 2, &out, 1, NULL, &err), "%s", err.message);
    bbi_parallel_get_stats(&after);
    /* one job natively with AVX-512 (the patches packed as A by the caller alone), else
     * the patch rows' job before the product's */
    uint64_t jobs = 2;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("bmi2")) jobs = 1;
#endif
    CHECK_MSG(after.tasks - before.tasks >= 8 && after.jobs - before.jobs <= jobs,
              "the 2x2 map's product went to the pool as %llu tasks in %llu jobs",
              (unsigned long long)(after.tasks - before.tasks), (unsigned long long)(after.jobs - before.jobs));
  }
  set_threads(1);
  bb_tensor_release(out), bb_tensor_release(in[0]), bb_tensor_release(in[1]);
}

/* A batch of images is one job of the pool, one task per image (the split by images, not
 * a job per image), and each image of it is what the image alone gives. */
static void test_conv_batch_split(void) {
  bb_ir_node *n = window_node("Conv", 2, 1, 3, 1, 1, 1, 1);
  const int64_t batch = 7, xd[4] = {batch, 16, 14, 14}, wd[4] = {32, 16, 3, 3}, one[4] = {1, 16, 14, 14};
  bb_tensor *in[2] = {rand_tensor(4, xd), rand_tensor(4, wd)}, *y = NULL;
  bb_error err;
  const size_t threads = most_threads() < 2 ? 1 : 2;
  if (set_threads(threads)) return;
  bbi_parallel_stats before, after;
  bbi_parallel_get_stats(&before);
  int rc = bb_cpu_run_node(n, 17, in, 2, &y, 1, NULL, &err);
  bbi_parallel_get_stats(&after);
  CHECK_MSG(rc == 0, "%s", err.message);
  if (threads > 1)
    CHECK_MSG(after.jobs - before.jobs == 1 && after.tasks - before.tasks == (uint64_t)batch,
              "a batch of %lld images went to the pool as %llu jobs of %llu tasks in all", (long long)batch,
              (unsigned long long)(after.jobs - before.jobs), (unsigned long long)(after.tasks - before.tasks));
  set_threads(1);
  const size_t image_floats = 32 * 14 * 14;
  for (int64_t i = 0; !rc && i < batch; i++) {
    bb_tensor *xi = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 4, one), *yi = NULL;
    memcpy(bb_tensor_data(xi), (const float *)bb_tensor_data(in[0]) + i * 16 * 14 * 14, 16 * 14 * 14 * sizeof(float));
    bb_tensor *in1[2] = {xi, in[1]};
    rc = bb_cpu_run_node(n, 17, in1, 2, &yi, 1, NULL, &err);
    CHECK_MSG(rc == 0 && memcmp(bb_tensor_data(yi), (const float *)bb_tensor_data(y) + i * image_floats,
                                image_floats * sizeof(float)) == 0,
              "image %lld of the batch differs from the image alone", (long long)i);
    bb_tensor_release(xi);
    bb_tensor_release(yi);
  }
  bb_tensor_release(y);
  bb_tensor_release(in[0]);
  bb_tensor_release(in[1]);
}

/* The node on 2 threads is one job of the pool cut into exactly `tasks` tasks (and its
 * outputs are those of one thread, bit for bit, on 1 to 4; on 3, four chunks may run one
 * after the other, each product on the pool or not by its size). */
static void one_job_of(const char *label, const bb_ir_node *n, bb_tensor *const *in, int n_in, int n_out,
                       uint64_t tasks) {
  same_bits_on_1_to_4(label, n, in, n_in, n_out, false);
  if (most_threads() < 2 || set_threads(2)) return;
  bb_tensor *out[4] = {NULL};
  bb_error err;
  bbi_parallel_stats before, after;
  bbi_parallel_get_stats(&before);
  int rc = bb_cpu_run_node(n, 17, in, (size_t)n_in, out, (size_t)n_out, NULL, &err);
  bbi_parallel_get_stats(&after);
  CHECK_MSG(rc == 0, "%s: %s", label, err.message);
  CHECK_MSG(after.jobs - before.jobs == 1 && after.tasks - before.tasks == tasks,
            "%s went to the pool as %llu jobs of %llu tasks in all, not one of %llu", label,
            (unsigned long long)(after.jobs - before.jobs), (unsigned long long)(after.tasks - before.tasks),
            (unsigned long long)tasks);
  for (int o = 0; o < n_out; o++) bb_tensor_release(out[o]);
  set_threads(1);
}

/* The convolutions of a small CNN's training step at batch 32 (the digits CNN's second
 * layer: 16→32 channels on 4×4 maps): the images are batched a few at a time into each
 * GEMM, in an even number of equal chunks (four of 8 images, or of 4 for the weight
 * gradient's 16 planes), so two threads share them out evenly as one job; and MaxPool
 * with indices (what its gradient scatters by) on planes of 2×2 outputs is cut into
 * several pieces. */
static void test_small_cnn_step_ops(void) {
  bb_tensor *x = rand_tensor(4, (const int64_t[]){32, 16, 4, 4}), *w = rand_tensor(4, (const int64_t[]){32, 16, 3, 3});
  bb_tensor *dy = rand_tensor(4, (const int64_t[]){32, 32, 4, 4}), *xt = rand_tensor(4, (const int64_t[]){16, 32, 4, 4});
  bb_tensor *dyt = rand_tensor(4, (const int64_t[]){32, 32, 4, 4});
  one_job_of("Conv batch 32 on 4x4 maps", window_node("Conv", 2, 1, 3, 1, 1, 1, 1), (bb_tensor *[]){x, w}, 2, 1, 4);
  one_job_of("ConvTranspose batch 32 on 4x4 maps (the input's gradient)",
             window_node("ConvTranspose", 2, 1, 3, 1, 1, 1, 1), (bb_tensor *[]){dy, w}, 2, 1, 4);
  one_job_of("Conv of 16 planes by a 4x4 kernel (the weights' gradient)", window_node("Conv", 2, 1, 4, 1, 1, 1, 1),
             (bb_tensor *[]){xt, dyt}, 2, 1, 4);
  bb_tensor *h = rand_tensor(4, (const int64_t[]){32, 32, 4, 4});
  same_on_any_thread_count("MaxPool 2x2 with indices on 4x4 planes", window_node("MaxPool", 1, 2, 2, 2, 0, 1, 1), &h,
                           1, 2);
  bb_tensor *h8 = rand_tensor(4, (const int64_t[]){32, 16, 8, 8});
  same_on_any_thread_count("MaxPool 2x2 with indices on 8x8 planes", window_node("MaxPool", 1, 2, 2, 2, 0, 1, 1), &h8,
                           1, 2);
  bb_tensor *all[] = {x, w, dy, xt, dyt, h, h8};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) bb_tensor_release(all[i]);
}

/* Transposes (the weight gradient's [C_in, C_out, kh, kw] → [C_out, C_in, kh, kw], of
 * single elements and of runs of kh·kw, a batched 2-D one with odd edges) are cut across
 * the pool, and every element lands where
 * a plain loop puts it, bit for bit (NaN payloads and int32 patterns included). */
static void test_transposes(void) {
  const int64_t perm_w[4] = {1, 0, 2, 3}, perm_b[3] = {0, 2, 1};
  bb_ir_node *tw = node("Transpose", 1, 1), *tb = node("Transpose", 1, 1);
  bb_attr_set_ints(model, &tw->attrs, "perm", perm_w, 4);
  bb_attr_set_ints(model, &tb->attrs, "perm", perm_b, 3);
  bb_tensor *w = rand_tensor(4, (const int64_t[]){960, 160, 1, 1});
  uint32_t *bits = bb_tensor_data(w);
  bits[5] = 0x7fa00001u, bits[161 * 7] = 0xffc12345u; /* a signalling and a quiet NaN with payloads */
  same_on_any_thread_count("Transpose [960,160,1,1] perm 1,0,2,3", tw, &w, 1, 1);
  bb_tensor *y = NULL;
  bb_error err;
  if (most_threads() >= 2) set_threads(2);
  CHECK_MSG(bb_cpu_run_node(tw, 17, &w, 1, &y, 1, NULL, &err) == 0, "%s", err.message);
  set_threads(1);
  bool same = y != NULL;
  for (int64_t i = 0; same && i < 960; i++)
    for (int64_t j = 0; same && j < 160; j++) same = ((const uint32_t *)bb_tensor_data(y))[j * 960 + i] == bits[i * 160 + j];
  CHECK_MSG(same, "Transpose [960,160] on 2 threads is not the plain loop's, bit for bit");
  bb_tensor_release(y);
  bb_tensor_release(w);
  check1("Transpose batched 3x131x67 perm 0,2,1", tb, DIMS(3, 131, 67), 1);
  /* a 3×3 convolution's weight gradient: runs of 9 floats, walked on the pool */
  check1("Transpose [48,256,3,3] perm 1,0,2,3", tw, DIMS(48, 256, 3, 3), 1);
  bb_tensor *ints = bb_tensor_new_empty(NULL, BB_DTYPE_INT32, 3, (const int64_t[]){5, 97, 203});
  for (int64_t i = 0; i < ints->numel; i++) ((int32_t *)bb_tensor_data(ints))[i] = (int32_t)(i * 2654435761u);
  same_on_any_thread_count("Transpose int32 5x97x203 perm 0,2,1", tb, &ints, 1, 1);
  bb_tensor_release(ints);
}

/* A depthwise ConvTranspose (a depthwise Conv's input gradient) runs plane by plane on
 * the pool; each channel of it is, bit for bit, the same ConvTranspose of that channel
 * alone (one group of one channel: the GEMM and col2im), on 1 to 4 threads. */
static void test_depthwise_conv_transpose(void) {
  const struct {
    int64_t n, c, h, w, k, stride, pad, dil;
  } cases[] = {{1, 960, 2, 2, 3, 1, 1, 1}, {2, 144, 16, 16, 3, 2, 1, 1}, {1, 40, 9, 7, 5, 2, 2, 1},
               {3, 24, 8, 8, 3, 1, 2, 2}, {1, 32, 5, 5, 5, 1, 2, 1}};
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    const int64_t n = cases[t].n, c = cases[t].c, k = cases[t].k;
    bb_ir_node *dw = window_node("ConvTranspose", 3, 1, k, cases[t].stride, cases[t].pad, cases[t].dil, c);
    bb_ir_node *one = window_node("ConvTranspose", 3, 1, k, cases[t].stride, cases[t].pad, cases[t].dil, 1);
    bb_tensor *in[3] = {rand_tensor(4, (const int64_t[]){n, c, cases[t].h, cases[t].w}),
                        rand_tensor(4, (const int64_t[]){c, 1, k, k}), rand_tensor(1, (const int64_t[]){c})};
    char label[96];
    snprintf(label, sizeof label, "depthwise ConvTranspose case %zu", t);
    same_on_any_thread_count(label, dw, in, 3, 1);
    bb_tensor *y = NULL;
    bb_error err;
    CHECK_MSG(bb_cpu_run_node(dw, 17, in, 3, &y, 1, NULL, &err) == 0, "%s: %s", label, err.message);
    const int64_t plane = cases[t].h * cases[t].w;
    bool same = y != NULL;
    for (int64_t ch = 0; same && ch < c; ch++) {
      bb_tensor *xi = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 4, (const int64_t[]){n, 1, cases[t].h, cases[t].w});
      bb_tensor *wi = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 4, (const int64_t[]){1, 1, k, k});
      bb_tensor *bi = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 1, (const int64_t[]){1});
      for (int64_t i = 0; i < n; i++)
        memcpy((float *)bb_tensor_data(xi) + i * plane, (const float *)bb_tensor_data(in[0]) + (i * c + ch) * plane,
               (size_t)plane * sizeof(float));
      memcpy(bb_tensor_data(wi), (const float *)bb_tensor_data(in[1]) + ch * k * k, (size_t)(k * k) * sizeof(float));
      ((float *)bb_tensor_data(bi))[0] = ((const float *)bb_tensor_data(in[2]))[ch];
      bb_tensor *ins[3] = {xi, wi, bi}, *yi = NULL;
      CHECK_MSG(bb_cpu_run_node(one, 17, ins, 3, &yi, 1, NULL, &err) == 0, "%s: %s", label, err.message);
      const int64_t out_plane = yi ? yi->dims[2] * yi->dims[3] : 0;
      for (int64_t i = 0; same && yi && i < n; i++)
        same = memcmp((const float *)bb_tensor_data(yi) + i * out_plane,
                      (const float *)bb_tensor_data(y) + (i * c + ch) * out_plane, (size_t)out_plane * sizeof(float)) == 0;
      CHECK_MSG(same, "%s: channel %lld differs from that channel alone", label, (long long)ch);
      bb_tensor_release(xi), bb_tensor_release(wi), bb_tensor_release(bi), bb_tensor_release(yi);
    }
    bb_tensor_release(y);
    for (int i = 0; i < 3; i++) bb_tensor_release(in[i]);
  }
}

/* A model of one graph from float input "x" to float output "y", nodes still to add. */
static bb_model *graph_from_x_to_y(void) {
  bb_model *m = bb_model_new(NULL);
  bb_opset_set(m, &m->opsets, "", 17);
  m->graph = bb_graph_new(m, "g");
  bb_vilist_add(m, &m->graph->inputs, "x", bb_type_new_tensor(m, BB_DTYPE_FLOAT, -1, NULL));
  bb_vilist_add(m, &m->graph->outputs, "y", bb_type_new_tensor(m, BB_DTYPE_FLOAT, -1, NULL));
  return m;
}

/* Whether y holds ref's floats bit for bit. WebAssembly leaves the sign and payload of an
 * operation's NaN result to the engine, so there a NaN matches any NaN; every other float
 * must have the same bits. */
static bool same_floats(const bb_tensor *y, const bb_tensor *ref) {
  if (!y || !ref || y->numel != ref->numel) return false;
  const float *a = bb_tensor_data(y), *b = bb_tensor_data(ref);
  for (int64_t i = 0; i < y->numel; i++) {
#if defined(__wasm__)
    if (isnan(a[i]) && isnan(b[i])) continue;
#endif
    if (memcmp(a + i, b + i, sizeof(float)) != 0) return false;
  }
  return true;
}

/* Adds tensor t to the graph's initializers as `name`, taking the caller's reference. */
static void add_initializer(bb_model *m, const char *name, bb_tensor *t) {
  bb_error err = {0};
  CHECK_MSG(!optest_add_initializer(m, name, t, &err), "%s", err.message);
}

/* A session keeps a constant W packed (as the GEMM's left operand for a convolution on the
 * plane, 16×16 here; as its right one with positions as rows, 4×4) and, with Winograd off,
 * gives the bits of the node run on its own, which packs W on every call: on 1 to 4
 * threads, across changes of input size that switch the kept layout, and with W replaced
 * by an input (the kept packing is not used for other weights, and is used again after).
 * With Winograd on, the session keeps W's transform instead: its results are the same
 * bits on every thread count, and W given as an input (not a constant: nothing to keep)
 * takes the direct path, the node's bits. */
static bb_tensor *run_conv_session(bb_cpu_session *s, bb_tensor *x, bb_tensor *w) {
  const char *names[2] = {"x", "w"};
  bb_tensor *in[2] = {x, w}, *y = NULL;
  bb_error err;
  int rc = bb_cpu_session_run(s, names, in, w ? 2 : 1, &y, &err);
  CHECK_MSG(rc == 0, "%s", err.message);
  return y;
}

static void test_session_keeps_conv_weights_packed(void) {
  bb_model *m = graph_from_x_to_y();
  bb_ir_node *n = bb_ir_node_new(m, "Conv", "", "conv");
  bb_strlist_append(m, &n->inputs, "x");
  bb_strlist_append(m, &n->inputs, "w");
  bb_strlist_append(m, &n->outputs, "y");
  int64_t pads[4] = {1, 1, 1, 1};
  bb_attr_set_ints(m, &n->attrs, "pads", pads, 4);
  bb_nodelist_append(m, &m->graph->nodes, n);
  bb_tensor *w = rand_tensor(4, (const int64_t[]){48, 32, 3, 3}), *w2 = rand_tensor(4, (const int64_t[]){48, 32, 3, 3});
  bb_tensor *big = rand_tensor(4, (const int64_t[]){1, 32, 16, 16});
  bb_tensor *small = rand_tensor(4, (const int64_t[]){1, 32, 4, 4});
  bb_error err;
  bb_cpu_session *s = NULL, *fast = NULL;
  add_initializer(m, "w", bb_tensor_retain(w));
  const bb_cpu_session_options direct = {sizeof direct, BB_CPU_REWRITE_WINOGRAD};
  CHECK_MSG(!bb_cpu_session_new_with_options(m, NULL, &direct, &s, &err) && !bb_cpu_session_new(m, NULL, &fast, &err),
            "%s", err.message);
  /* the node on its own, one thread: the reference; the fast session's own on one thread */
  bb_tensor *ref[3] = {NULL, NULL, NULL}, *fast_ref[3] = {NULL, NULL, NULL};
  bb_tensor *args[3][2] = {{big, w}, {small, w}, {big, w2}};
  for (int i = 0; i < 3 && s && fast; i++) {
    CHECK_MSG(!bb_cpu_run_node(n, 17, args[i], 2, &ref[i], 1, NULL, &err), "%s", err.message);
    fast_ref[i] = run_conv_session(fast, args[i][0], i == 2 ? w2 : NULL);
  }
  CHECK_MSG(fast_ref[0] && ref[0] && memcmp(bb_tensor_data(fast_ref[0]), bb_tensor_data(ref[0]), bb_tensor_nbytes(ref[0])),
            "the session with Winograd on gave the direct path's bits at 16×16");
  /* which reference each run must give, and with which W as an input (NULL: the initializer) */
  static const int order[] = {0, 0, 1, 0, 2, 0, 1, 1};
  for (size_t threads = 1; s && fast && threads <= most_threads(); threads++) {
    if (set_threads(threads)) break;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
      const int r = order[i];
      bb_tensor *y = run_conv_session(s, args[r][0], r == 2 ? w2 : NULL);
      CHECK_MSG(y && ref[r] && y->numel == ref[r]->numel &&
                    memcmp(bb_tensor_data(y), bb_tensor_data(ref[r]), bb_tensor_nbytes(y)) == 0,
                "session run %zu (case %d) on %zu threads differs from the node run on its own", i, r, threads);
      bb_tensor_release(y);
      y = run_conv_session(fast, args[r][0], r == 2 ? w2 : NULL);
      bb_tensor *want = r == 2 ? ref[r] : fast_ref[r];
      CHECK_MSG(y && want && y->numel == want->numel && memcmp(bb_tensor_data(y), bb_tensor_data(want), bb_tensor_nbytes(y)) == 0,
                "Winograd session run %zu (case %d) on %zu threads differs from %s", i, r, threads,
                r == 2 ? "the node run on its own" : "its run on one thread");
      bb_tensor_release(y);
    }
  }
  set_threads(1);
  for (int i = 0; i < 3; i++) bb_tensor_release(ref[i]), bb_tensor_release(fast_ref[i]);
  bb_cpu_session_free(s), bb_cpu_session_free(fast);
  bb_tensor_release(w), bb_tensor_release(w2), bb_tensor_release(big), bb_tensor_release(small);
  bb_model_free(m);
}

/* Two sessions of model m: `fused` with the default rewrites (the ones it made in `made`)
 * and `plain` with none, the graph run as written. */
static void fused_and_as_written(bb_model *m, bb_cpu_session **fused, bb_cpu_session **plain,
                                 bb_cpu_session_rewrites *made) {
  bb_error err;
  const bb_cpu_session_options as_written = {sizeof as_written, BB_CPU_REWRITE_ALL};
  CHECK_MSG(!bb_cpu_session_new(m, NULL, fused, &err) && !bb_cpu_session_new_with_options(m, NULL, &as_written, plain, &err),
            "%s", err.message);
  if (*fused) bb_cpu_session_rewrites_made(*fused, false, made);
}

/* A 1×1 Conv followed by Clip: the session fuses the Clip into the convolution's GEMM
 * (its clamp), which must give the bits of the graph run as written (no rewrites), on
 * the plane (16×16), with the positions as rows (4×4) and as a matrix-vector product
 * (1×1), NaN and signed zeros in the input, on 1 to 4 threads. */
static void test_session_fused_clip(void) {
  bb_model *m = graph_from_x_to_y();
  bb_ir_node *conv = bb_ir_node_new(m, "Conv", "", "conv"), *clip = bb_ir_node_new(m, "Clip", "", "clip");
  const char *conv_in[] = {"x", "w", "b"}, *clip_in[] = {"c", "lo", "hi"};
  for (int i = 0; i < 3; i++) bb_strlist_append(m, &conv->inputs, conv_in[i]), bb_strlist_append(m, &clip->inputs, clip_in[i]);
  bb_strlist_append(m, &conv->outputs, "c");
  bb_strlist_append(m, &clip->outputs, "y");
  bb_nodelist_append(m, &m->graph->nodes, conv);
  bb_nodelist_append(m, &m->graph->nodes, clip);
  add_initializer(m, "w", rand_tensor(4, (const int64_t[]){40, 24, 1, 1}));
  add_initializer(m, "b", rand_tensor(1, (const int64_t[]){40}));
  bb_tensor *lo = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 0, NULL), *hi = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 0, NULL);
  *(float *)bb_tensor_data(lo) = -0.5f, *(float *)bb_tensor_data(hi) = 0.75f;
  add_initializer(m, "lo", lo);
  add_initializer(m, "hi", hi);
  bb_error err;
  bb_cpu_session *fused = NULL, *plain = NULL;
  bb_cpu_session_rewrites made = {0};
  fused_and_as_written(m, &fused, &plain, &made);
  CHECK_MSG(made.fused_activations == 1, "the Clip was not fused");
  static const int64_t sides[] = {16, 4, 1};
  for (size_t t = 0; fused && plain && t < sizeof sides / sizeof sides[0]; t++) {
    bb_tensor *x = rand_tensor(4, (const int64_t[]){1, 24, sides[t], sides[t]});
    float *xd = bb_tensor_data(x);
    xd[0] = NAN, xd[x->numel / 2] = -0.0f, xd[x->numel - 1] = 0.0f;
    const char *names[1] = {"x"};
    bb_tensor *ref = NULL;
    CHECK_MSG(!bb_cpu_session_run(plain, names, &x, 1, &ref, &err), "%s", err.message);
    for (size_t threads = 1; ref && threads <= most_threads(); threads++) {
      if (set_threads(threads)) break;
      bb_tensor *y = NULL;
      CHECK_MSG(!bb_cpu_session_run(fused, names, &x, 1, &y, &err), "%s", err.message);
      CHECK_MSG(y && y->numel == ref->numel && memcmp(bb_tensor_data(y), bb_tensor_data(ref), bb_tensor_nbytes(y)) == 0,
                "1×1 Conv + Clip at %lld×%lld on %zu threads differs from the graph as written", (long long)sides[t],
                (long long)sides[t], threads);
      bb_tensor_release(y);
    }
    set_threads(1);
    bb_tensor_release(ref), bb_tensor_release(x);
  }
  bb_cpu_session_free(fused), bb_cpu_session_free(plain);
  bb_model_free(m);
}

/* A 3×3 Conv, a residual Add and Relu: the session fuses both into the convolution, whose
 * GEMM applies them as it stores on the plane (15×15 and 8×8: tiles cut at the edges; 64
 * input channels, so two k blocks) and whose epilogue applies them with the positions as
 * rows (4×4) and for one position. Either must give the bits of the graph run as written
 * (no rewrites), NaN, infinities and signed zeros in the input and the residual, on 1 to 4
 * threads. */
static void test_session_fused_residual_relu(void) {
  bb_model *m = graph_from_x_to_y();
  bb_vilist_add(m, &m->graph->inputs, "r", bb_type_new_tensor(m, BB_DTYPE_FLOAT, -1, NULL));
  bb_ir_node *conv = bb_ir_node_new(m, "Conv", "", "conv"), *add = bb_ir_node_new(m, "Add", "", "add");
  bb_ir_node *relu = bb_ir_node_new(m, "Relu", "", "relu");
  const char *conv_in[] = {"x", "w", "b"};
  for (int i = 0; i < 3; i++) bb_strlist_append(m, &conv->inputs, conv_in[i]);
  bb_attr_set_ints(m, &conv->attrs, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
  bb_strlist_append(m, &conv->outputs, "c");
  bb_strlist_append(m, &add->inputs, "c"), bb_strlist_append(m, &add->inputs, "r");
  bb_strlist_append(m, &add->outputs, "s");
  bb_strlist_append(m, &relu->inputs, "s"), bb_strlist_append(m, &relu->outputs, "y");
  bb_nodelist_append(m, &m->graph->nodes, conv);
  bb_nodelist_append(m, &m->graph->nodes, add);
  bb_nodelist_append(m, &m->graph->nodes, relu);
  add_initializer(m, "w", rand_tensor(4, (const int64_t[]){36, 64, 3, 3}));
  add_initializer(m, "b", rand_tensor(1, (const int64_t[]){36}));
  bb_error err;
  bb_cpu_session *fused = NULL, *plain = NULL;
  bb_cpu_session_rewrites made = {0};
  fused_and_as_written(m, &fused, &plain, &made);
  CHECK_MSG(made.fused_activations == 1 && made.fused_adds == 1, "the Add and Relu were not fused");
  static const int64_t sides[] = {15, 8, 4, 1};
  for (size_t t = 0; fused && plain && t < sizeof sides / sizeof sides[0]; t++) {
    bb_tensor *in[2] = {rand_tensor(4, (const int64_t[]){1, 64, sides[t], sides[t]}),
                        rand_tensor(4, (const int64_t[]){1, 36, sides[t], sides[t]})};
    float *xd = bb_tensor_data(in[0]), *rd = bb_tensor_data(in[1]);
    const size_t rn = (size_t)in[1]->numel;
    xd[in[0]->numel - 1] = NAN;
    rd[0] = NAN, rd[rn / 2] = -0.0f, rd[rn / 3] = INFINITY, rd[rn - 1] = -INFINITY;
    for (size_t i = 1; i < rn; i += 7) rd[i] = -8.0f; /* ReLU's zeros where the sum is negative */
    const char *names[2] = {"x", "r"};
    bb_tensor *ref = NULL;
    CHECK_MSG(!bb_cpu_session_run(plain, names, in, 2, &ref, &err), "%s", err.message);
    for (size_t threads = 1; ref && threads <= most_threads(); threads++) {
      if (set_threads(threads)) break;
      bb_tensor *y = NULL;
      CHECK_MSG(!bb_cpu_session_run(fused, names, in, 2, &y, &err), "%s", err.message);
      CHECK_MSG(same_floats(y, ref),
                "3×3 Conv + Add + Relu at %lld×%lld on %zu threads differs from the graph as written", (long long)sides[t],
                (long long)sides[t], threads);
      bb_tensor_release(y);
    }
    set_threads(1);
    bb_tensor_release(ref), bb_tensor_release(in[0]), bb_tensor_release(in[1]);
  }
  bb_cpu_session_free(fused), bb_cpu_session_free(plain);
  bb_model_free(m);
}

/* same_floats, but a NaN matches a NaN of any sign: the fused Swish, x · sigmoid(x), and the
 * graph's Mul of x and Sigmoid(x) give NaNs of different signs for a NaN x (as they did
 * with the epilogue in a pass of its own after the kernel). */
static bool same_floats_any_nan(const bb_tensor *y, const bb_tensor *ref) {
  if (!y || !ref || y->numel != ref->numel) return false;
  const float *a = bb_tensor_data(y), *b = bb_tensor_data(ref);
  for (int64_t i = 0; i < y->numel; i++)
    if (!(isnan(a[i]) && isnan(b[i])) && memcmp(a + i, b + i, sizeof(float)) != 0) return false;
  return true;
}

/* x → depthwise Conv (k×k, stride, padded to keep k/2 each side, W and B constants) →
 * Relu (act 0), Clip(0, 6) (1: ReLU6, as MobileNet's) or Sigmoid and Mul (2: Swish, as
 * EfficientNet's) → y. */
static bb_model *depthwise_then(int act, int64_t channels, int64_t k, int64_t stride, bb_tensor *w, bb_tensor *b) {
  bb_model *m = graph_from_x_to_y();
  bb_ir_node *conv = bb_ir_node_new(m, "Conv", "", "conv");
  const char *conv_in[] = {"x", "w", "b"};
  for (int i = 0; i < 3; i++) bb_strlist_append(m, &conv->inputs, conv_in[i]);
  bb_strlist_append(m, &conv->outputs, "c");
  const int64_t pad = k / 2;
  bb_attr_set_int(m, &conv->attrs, "group", channels);
  bb_attr_set_ints(m, &conv->attrs, "kernel_shape", (const int64_t[]){k, k}, 2);
  bb_attr_set_ints(m, &conv->attrs, "strides", (const int64_t[]){stride, stride}, 2);
  bb_attr_set_ints(m, &conv->attrs, "pads", (const int64_t[]){pad, pad, pad, pad}, 4);
  bb_nodelist_append(m, &m->graph->nodes, conv);
  add_initializer(m, "w", w);
  add_initializer(m, "b", b);
  if (act < 2) {
    bb_ir_node *n = bb_ir_node_new(m, act ? "Clip" : "Relu", "", "act");
    bb_strlist_append(m, &n->inputs, "c");
    if (act) {
      bb_strlist_append(m, &n->inputs, "lo"), bb_strlist_append(m, &n->inputs, "hi");
      bb_tensor *lo = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 0, NULL);
      bb_tensor *hi = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 0, NULL);
      *(float *)bb_tensor_data(lo) = 0.0f, *(float *)bb_tensor_data(hi) = 6.0f;
      add_initializer(m, "lo", lo);
      add_initializer(m, "hi", hi);
    }
    bb_strlist_append(m, &n->outputs, "y");
    bb_nodelist_append(m, &m->graph->nodes, n);
  } else {
    bb_ir_node *sig = bb_ir_node_new(m, "Sigmoid", "", "sig"), *mul = bb_ir_node_new(m, "Mul", "", "mul");
    bb_strlist_append(m, &sig->inputs, "c"), bb_strlist_append(m, &sig->outputs, "s");
    bb_strlist_append(m, &mul->inputs, "c"), bb_strlist_append(m, &mul->inputs, "s");
    bb_strlist_append(m, &mul->outputs, "y");
    bb_nodelist_append(m, &m->graph->nodes, sig);
    bb_nodelist_append(m, &m->graph->nodes, mul);
  }
  return m;
}

/* A depthwise Conv followed by Relu, ReLU6 or Swish: the session fuses the activation into
 * the depthwise kernel (ReLU6 into its stores with AVX-512, the others as a pass over each
 * block of channels). Each must give the bits of the graph run as written (no rewrites):
 * narrow outputs (the channel-lane paths), wide ones at stride 1 and 2 (the row paths and
 * the direct stride-2 one), planes of an odd number of outputs, 40 channels (a last part
 * group), NaN, infinities and signed zeros in the input, on 1 to 4 threads. */
static void test_session_fused_depthwise(void) {
  static const struct {
    int64_t side, k, stride;
  } shapes[] = {{5, 3, 1}, {9, 5, 2}, {15, 3, 1}, {33, 3, 2}, {32, 3, 1}, {35, 5, 2}, {21, 5, 1}};
  static const char *names_of[] = {"Relu", "Clip(0, 6)", "Swish"};
  const int64_t channels = 40;
  for (int a = 0; a < 3; a++)
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
      const int64_t k = shapes[t].k, side = shapes[t].side;
      bb_tensor *w = rand_tensor(4, (const int64_t[]){channels, 1, k, k});
      bb_tensor *b = rand_tensor(1, (const int64_t[]){channels});
      bb_tensor *x = rand_tensor(4, (const int64_t[]){1, channels, side, side});
      float *wd = bb_tensor_data(w), *xd = bb_tensor_data(x);
      const size_t xn = (size_t)x->numel;
      /* wide enough sums that ReLU6 clips at both ends and some of Swish's inputs take
       * Sigmoid's slow path (|x| > 86.5) */
      for (size_t i = 0; i < (size_t)w->numel; i++) wd[i] *= 8.0f;
      for (size_t i = 0; i < xn; i++) xd[i] *= a == 2 ? 12.0f : 2.0f;
      xd[0] = NAN, xd[xn / 2] = -0.0f, xd[xn / 3] = INFINITY, xd[xn / 5] = -INFINITY, xd[xn - 1] = NAN;
      ((float *)bb_tensor_data(b))[3] = -0.0f;
      bb_model *m = depthwise_then(a, channels, k, shapes[t].stride, w, b);
      bb_error err;
      bb_cpu_session *fused = NULL, *plain = NULL;
      bb_cpu_session_rewrites made = {0};
      fused_and_as_written(m, &fused, &plain, &made);
      CHECK_MSG(made.fused_activations == 1, "the %s was not fused into the depthwise Conv", names_of[a]);
      const char *names[1] = {"x"};
      bb_tensor *ref = NULL;
      CHECK_MSG(plain && !bb_cpu_session_run(plain, names, &x, 1, &ref, &err), "%s", err.message);
      for (size_t threads = 1; fused && ref && threads <= most_threads(); threads++) {
        if (set_threads(threads)) break;
        bb_tensor *y = NULL;
        CHECK_MSG(!bb_cpu_session_run(fused, names, &x, 1, &y, &err), "%s", err.message);
        CHECK_MSG(a == 2 ? same_floats_any_nan(y, ref) : same_floats(y, ref),
                  "depthwise %lld×%lld stride %lld on %lld×%lld + %s on %zu threads differs from the graph as written",
                  (long long)k, (long long)k, (long long)shapes[t].stride, (long long)side, (long long)side, names_of[a],
                  threads);
        bb_tensor_release(y);
      }
      set_threads(1);
      bb_tensor_release(ref), bb_tensor_release(x);
      bb_cpu_session_free(fused), bb_cpu_session_free(plain);
      bb_model_free(m);
    }
}

/* A session reads a Conv's and a pool's attributes once and keeps them per step: an
 * AveragePool (3×3, stride 2, ceil_mode, count_include_pad) then a grouped 3×3 Conv
 * (stride 2, pads 1, dilation 2) then a MaxPool (2×2) must give the bits of the three
 * nodes run on their own, across input sizes (the kept attributes, not a kept geometry)
 * and runs, on 1 to 4 threads; and a run whose input has another rank must be refused as
 * the node on its own refuses it (a 2-value kernel_shape for one spatial dim), with the
 * next run of the first rank right again. */
static void test_session_keeps_window_attrs(void) {
  bb_model *m = graph_from_x_to_y();
  bb_ir_node *avg = bb_ir_node_new(m, "AveragePool", "", "avg"), *conv = bb_ir_node_new(m, "Conv", "", "conv");
  bb_ir_node *maxp = bb_ir_node_new(m, "MaxPool", "", "max");
  int64_t k3[2] = {3, 3}, k2[2] = {2, 2}, s2[2] = {2, 2}, d2[2] = {2, 2}, p1[4] = {1, 1, 1, 1};
  bb_attr_set_ints(m, &avg->attrs, "kernel_shape", k3, 2);
  bb_attr_set_ints(m, &avg->attrs, "strides", s2, 2);
  bb_attr_set_int(m, &avg->attrs, "ceil_mode", 1);
  bb_attr_set_int(m, &avg->attrs, "count_include_pad", 1);
  bb_attr_set_ints(m, &avg->attrs, "pads", p1, 4);
  bb_attr_set_ints(m, &conv->attrs, "strides", s2, 2);
  bb_attr_set_ints(m, &conv->attrs, "pads", p1, 4);
  bb_attr_set_ints(m, &conv->attrs, "dilations", d2, 2);
  bb_attr_set_int(m, &conv->attrs, "group", 2);
  bb_attr_set_ints(m, &maxp->attrs, "kernel_shape", k2, 2);
  bb_strlist_append(m, &avg->inputs, "x");
  bb_strlist_append(m, &avg->outputs, "a");
  const char *conv_in[] = {"a", "w", "b"};
  for (int i = 0; i < 3; i++) bb_strlist_append(m, &conv->inputs, conv_in[i]);
  bb_strlist_append(m, &conv->outputs, "c");
  bb_strlist_append(m, &maxp->inputs, "c");
  bb_strlist_append(m, &maxp->outputs, "y");
  bb_nodelist_append(m, &m->graph->nodes, avg);
  bb_nodelist_append(m, &m->graph->nodes, conv);
  bb_nodelist_append(m, &m->graph->nodes, maxp);
  bb_tensor *w = rand_tensor(4, (const int64_t[]){24, 8, 3, 3}), *b = rand_tensor(1, (const int64_t[]){24});
  add_initializer(m, "w", bb_tensor_retain(w));
  add_initializer(m, "b", bb_tensor_retain(b));
  bb_error err;
  bb_cpu_session *s = NULL;
  CHECK_MSG(!bb_cpu_session_new(m, NULL, &s, &err), "%s", err.message);
  static const int64_t sides[][2] = {{21, 21}, {40, 26}, {21, 21}, {17, 33}};
  for (size_t threads = 1; s && threads <= most_threads(); threads++) {
    if (set_threads(threads)) break;
    for (size_t t = 0; t < sizeof sides / sizeof sides[0]; t++) {
      bb_tensor *x = rand_tensor(4, (const int64_t[]){1, 16, sides[t][0], sides[t][1]});
      bb_tensor *a = NULL, *c = NULL, *ref = NULL, *y = NULL;
      bb_tensor *conv_args[3] = {NULL, w, b};
      CHECK_MSG(!bb_cpu_run_node(avg, 17, &x, 1, &a, 1, NULL, &err), "%s", err.message);
      conv_args[0] = a;
      CHECK_MSG(a && !bb_cpu_run_node(conv, 17, conv_args, 3, &c, 1, NULL, &err), "%s", err.message);
      CHECK_MSG(c && !bb_cpu_run_node(maxp, 17, &c, 1, &ref, 1, NULL, &err), "%s", err.message);
      const char *names[1] = {"x"};
      CHECK_MSG(!bb_cpu_session_run(s, names, &x, 1, &y, &err), "%s", err.message);
      CHECK_MSG(y && ref && y->numel == ref->numel && y->rank == ref->rank &&
                    memcmp(y->dims, ref->dims, sizeof y->dims[0] * (size_t)y->rank) == 0 && same_floats(y, ref),
                "pool, Conv, pool in a session at %lld×%lld on %zu threads differ from the nodes on their own",
                (long long)sides[t][0], (long long)sides[t][1], threads);
      bb_tensor_release(x), bb_tensor_release(a), bb_tensor_release(c), bb_tensor_release(ref), bb_tensor_release(y);
    }
  }
  set_threads(1);
  bb_cpu_session_free(s);
  /* one pool, then an input of rank 3: the kept 2-D attributes must not serve it */
  bb_model *m1 = graph_from_x_to_y();
  bb_ir_node *p = bb_ir_node_new(m1, "MaxPool", "", "max");
  bb_attr_set_ints(m1, &p->attrs, "kernel_shape", k2, 2);
  bb_strlist_append(m1, &p->inputs, "x");
  bb_strlist_append(m1, &p->outputs, "y");
  bb_nodelist_append(m1, &m1->graph->nodes, p);
  CHECK_MSG(!bb_cpu_session_new(m1, NULL, &s, &err), "%s", err.message);
  bb_tensor *x2 = rand_tensor(4, (const int64_t[]){1, 3, 6, 6}), *x1 = rand_tensor(3, (const int64_t[]){1, 3, 6});
  const char *names[1] = {"x"};
  for (int round = 0; s && round < 2; round++) {
    bb_tensor *y = NULL, *ref = NULL;
    CHECK_MSG(!bb_cpu_session_run(s, names, &x2, 1, &y, &err), "%s", err.message);
    CHECK_MSG(!bb_cpu_run_node(p, 17, &x2, 1, &ref, 1, NULL, &err), "%s", err.message);
    CHECK_MSG(y && ref && same_floats(y, ref), "MaxPool in a session (round %d) differs from the node on its own", round);
    bb_tensor_release(y), bb_tensor_release(ref);
    y = NULL;
    const int rc = bb_cpu_session_run(s, names, &x1, 1, &y, &err);
    CHECK_MSG(rc != 0 && !y && strstr(err.message, "must hold 1 integers"),
              "a 1-D input to a MaxPool of a 2-D kernel_shape was not refused after a 2-D run (round %d)", round);
  }
  bb_tensor_release(x2), bb_tensor_release(x1);
  bb_cpu_session_free(s);
  bb_model_free(m1);
  bb_tensor_release(w), bb_tensor_release(b);
  bb_model_free(m);
}

static void test_pooling(void) {
  check1("MaxPool with indices", window_node("MaxPool", 1, 2, 3, 2, 1, 1, 1), DIMS(4, 24, 33, 31), 2);
  check1("MaxPool 3x3 stride 2 (a resnet's stem)", window_node("MaxPool", 1, 1, 3, 2, 1, 1, 1), DIMS(1, 64, 32, 32), 1);
  bb_ir_node *avg = window_node("AveragePool", 1, 1, 3, 1, 1, 1, 1);
  bb_attr_set_int(model, &avg->attrs, "count_include_pad", 1);
  check1("AveragePool", avg, DIMS(4, 24, 33, 31), 1);
  check1("GlobalAveragePool", node("GlobalAveragePool", 1, 1), DIMS(8, 64, 14, 14), 1);
  check1("GlobalMaxPool", node("GlobalMaxPool", 1, 1), DIMS(8, 64, 14, 14), 1);
}

/* ScatterElements as the pooling gradients use it (flat float data, int64 indices, add):
 * the same bits on 1 to 4 threads as the one-thread loop, on the pool — updates landing in
 * order (each piece of 2048 above the pieces before it, repeats inside pieces), in no order
 * (repeats across pieces: the updates then run in one loop), and reduction none with
 * repeats; an index out of range fails on every thread count. */
static void test_scatter_elements(void) {
  const int64_t n = 16384, dim = 65536;
  for (int c = 0; c < 3; c++) {
    bb_ir_node *sc = node("ScatterElements", 3, 1);
    bb_attr_set_int(model, &sc->attrs, "axis", 0);
    bb_attr_set_string(model, &sc->attrs, "reduction", c == 2 ? "none" : "add");
    bb_tensor *in[3] = {rand_tensor(1, (const int64_t[]){dim}), bb_tensor_new_empty(NULL, BB_DTYPE_INT64, 1, &n),
                        rand_tensor(1, &n)};
    int64_t *idx = bb_tensor_data(in[1]);
    for (int64_t i = 0; i < n; i++)
      idx[i] = c == 1 ? (i * 7919) % 1000 - 500 /* negative ones too */ : (i / 4) * 4 + (i % 4) / 2;
    const char *labels[] = {"ScatterElements add, in order", "ScatterElements add, out of order",
                            "ScatterElements none, in order"};
    same_on_any_thread_count(labels[c], sc, in, 3, 1);
    if (c == 0) { /* one index out of range, in the last piece */
      idx[n - 5] = dim;
      for (size_t threads = 1; threads <= most_threads(); threads++) {
        bb_tensor *out = NULL;
        bb_error err;
        if (set_threads(threads)) break;
        CHECK_MSG(bb_cpu_run_node(sc, 17, in, 3, &out, 1, NULL, &err) == BB_ERR_INVALID_ARGUMENT && !out,
                  "an index out of range passed on %zu threads", threads);
        bb_tensor_release(out);
      }
      set_threads(1);
    }
    for (int k = 0; k < 3; k++) bb_tensor_release(in[k]);
  }
}

static bb_ir_node *reduce_node(const char *op, const int64_t *axes, size_t n_axes, int keepdims) {
  bb_ir_node *n = node(op, 1, 1);
  bb_attr_set_ints(model, &n->attrs, "axes", axes, n_axes);
  bb_attr_set_int(model, &n->attrs, "keepdims", keepdims);
  return n;
}

static void test_reductions_and_softmax(void) {
  /* opset 17: axes are an attribute of ReduceMean/Max, an input of ReduceSum (opset 13) */
  check1("ReduceMean last axis, long rows", reduce_node("ReduceMean", (const int64_t[]){-1}, 1, 0), DIMS(64, 3000), 1);
  check1("ReduceMax middle axis", reduce_node("ReduceMax", (const int64_t[]){1}, 1, 1), DIMS(16, 100, 200), 1);
  check1("ReduceMean over N, H, W", reduce_node("ReduceMean", (const int64_t[]){0, 2, 3}, 3, 1), DIMS(8, 32, 16, 16), 1);
  check1("ReduceMean of everything", reduce_node("ReduceMean", (const int64_t[]){0}, 1, 0), DIMS(300001), 1);
  check1("ReduceL2 rows", reduce_node("ReduceL2", (const int64_t[]){1}, 1, 0), DIMS(512, 300), 1);
  check1("Softmax rows", node("Softmax", 1, 1), DIMS(512, 1000), 1);
  check1("LogSoftmax rows", node("LogSoftmax", 1, 1), DIMS(512, 1000), 1);
  bb_ir_node *mid = node("Softmax", 1, 1);
  bb_attr_set_int(model, &mid->attrs, "axis", 1);
  check1("Softmax middle axis", mid, DIMS(64, 100, 50), 1);
}

static void test_elementwise(void) {
  check2("Add same shape", node("Add", 2, 1), DIMS(700, 1003), DIMS(700, 1003));
  check2("Mul by a row", node("Mul", 2, 1), DIMS(512, 1024), DIMS(1024));
  check2("Sub a column", node("Sub", 2, 1), DIMS(512, 1), DIMS(512, 300));
  check2("Div short rows", node("Div", 2, 1), DIMS(4000, 3, 7), DIMS(3, 7));
  check1("Relu", node("Relu", 1, 1), DIMS(1000003), 1);
  check1("Exp", node("Exp", 1, 1), DIMS(300007), 1);
  check1("Sigmoid", node("Sigmoid", 1, 1), DIMS(300007), 1);
  check1("Tanh", node("Tanh", 1, 1), DIMS(1000, 301), 1);
}

/* ---- a training step ------------------------------------------------------------------------ */

static bb_model *load_model(const char *rel) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", BB_TEST_SOURCE_DIR, rel);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc((size_t)size);
  size_t got = fread(buf, 1, (size_t)size, f);
  fclose(f);
  bb_model *m = NULL;
  bb_error err;
  if (got != (size_t)size || bb_model_decode(buf, got, NULL, NULL, &m, &err)) m = NULL;
  free(buf);
  return m;
}

/* Three Adam steps of a CNN on the given thread count; the parameters afterwards, one
 * buffer. */
static float *train_cnn(const char *rel, const char *input, const int64_t *dims, size_t threads, size_t *n_floats,
                        uint64_t *jobs) {
  bb_model *m = load_model(rel);
  CHECK_MSG(m != NULL, "cannot read %s", rel);
  if (!m || set_threads(threads)) return NULL;
  bb_grad_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.loss = BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY;
  o.target = "labels";
  bb_grad_graph *g = NULL;
  bb_grad_optimizer *opt = NULL;
  bb_grad_trainer *t = NULL;
  bb_optimizer_config cfg = bb_optimizer_defaults(BB_OPTIMIZER_ADAM);
  bb_error err;
  float *params = NULL;
  int rc = bb_grad_build(m, &o, NULL, &g, &err);
  if (!rc) rc = bb_grad_optimizer_build(g, &cfg, &opt, &err);
  if (!rc) rc = bb_grad_trainer_new(g, opt, 7, NULL, &t, &err);
  CHECK_MSG(!rc, "%s: %s", rel, err.message);
  if (!rc) {
    rng_state = 12345;
    bb_tensor *x = rand_tensor(4, dims);
    int64_t ld[1] = {dims[0]};
    bb_tensor *labels = bb_tensor_new_empty(NULL, BB_DTYPE_INT64, 1, ld);
    for (int64_t i = 0; i < dims[0]; i++) ((int64_t *)bb_tensor_data(labels))[i] = i % 10;
    const char *names[2] = {input, "labels"};
    bb_tensor *ins[2] = {x, labels};
    const uint64_t before = pool_jobs();
    for (int s = 0; s < 3 && !rc; s++) {
      bb_grad_step st;
      rc = bb_grad_trainer_step(t, names, ins, 2, &st, &err);
      CHECK_MSG(!rc && st.applied, "%s step %d: %s", rel, s, err.message);
    }
    *jobs = pool_jobs() - before;
    size_t total = 0;
    for (size_t p = 0; p < g->n_params; p++) total += (size_t)bb_grad_trainer_value(t, g->params[p])->numel;
    params = malloc(total * sizeof *params);
    *n_floats = total;
    size_t at = 0;
    for (size_t p = 0; p < g->n_params; p++) {
      const bb_tensor *v = bb_grad_trainer_value(t, g->params[p]);
      memcpy(params + at, bb_tensor_data(v), (size_t)v->numel * sizeof *params);
      at += (size_t)v->numel;
    }
    bb_tensor_release(x);
    bb_tensor_release(labels);
  }
  bb_grad_trainer_free(t);
  bb_grad_optimizer_free(opt);
  bb_grad_graph_free(g);
  bb_model_free(m);
  set_threads(1);
  return params;
}

static void test_cnn_training_steps(void) {
  const struct {
    const char *model, *input;
    int64_t dims[4];
  } cases[] = {{"examples/models/digits_cnn.onnx", "pixels", {32, 1, 8, 8}},
               {"tests/data/grad/lenet_dynamic.onnx", "x", {64, 1, 8, 8}}};
  for (size_t c = 0; c < 2; c++) {
    size_t n_ref = 0, n = 0;
    uint64_t jobs = 0;
    float *ref = train_cnn(cases[c].model, cases[c].input, cases[c].dims, 1, &n_ref, &jobs);
    for (size_t threads = 2; ref && threads <= most_threads(); threads++) {
      float *got = train_cnn(cases[c].model, cases[c].input, cases[c].dims, threads, &n, &jobs);
      CHECK_MSG(got && n == n_ref && memcmp(got, ref, n * sizeof *got) == 0, "%s: parameters differ on %zu threads",
                cases[c].model, threads);
      CHECK_MSG(jobs > 0, "%s: no work went to the pool on %zu threads", cases[c].model, threads);
      free(got);
    }
    free(ref);
  }
}

/* A parameter initializer of the given shape, zeros (the optimizer graph reads only its shape). */
static void add_param(bb_model *m, const char *name, int32_t dtype, int rank, const int64_t *dims) {
  bb_tensor_proto *t = bb_tensor_proto_new(m, name, dtype, (size_t)rank, dims);
  size_t bytes = (size_t)bb_tensor_proto_numel(t) * bb_dtype_size(dtype);
  void *zeros = calloc(1, bytes + 1);
  CHECK(t && zeros && !bb_tensor_proto_set_raw(m, t, zeros, bytes) && !bb_tensorlist_append(m, &m->graph->initializers, t));
  free(zeros);
}

/* A node of m reading `a` (and `b`, `c` when given) into `out`. */
static bb_ir_node *graph_node(bb_model *m, const char *op, const char *a, const char *b, const char *c, const char *out) {
  bb_ir_node *n = bb_ir_node_new(m, op, "", out);
  bb_strlist_append(m, &n->inputs, a);
  if (b) bb_strlist_append(m, &n->inputs, b);
  if (c) bb_strlist_append(m, &n->inputs, c);
  bb_strlist_append(m, &n->outputs, out);
  bb_nodelist_append(m, &m->graph->nodes, n);
  return n;
}

/* ---- optimizer updates ------------------------------------------------------------------- */

#define UPDATE_STEPS 3
#define UPDATE_MAX_PARAMS 100
#define UPDATE_MAX_VALUES (4 * UPDATE_MAX_PARAMS + 1) /* parameters, gradients, two states each, the step */

/* An optimizer graph's runs: its inputs (the parameters, then its state, then the
 * gradients of each step) and, per step, its outputs (the next parameters, then the next
 * state), each step's parameters and state the outputs of the step before. */
typedef struct update_runs {
  const bb_grad_optimizer *opt;
  size_t n_carried; /* parameters and state */
  const char *names[UPDATE_MAX_VALUES];
  bb_tensor *first[UPDATE_MAX_VALUES];              /* the carried values of step 0 */
  bb_tensor *grads[UPDATE_STEPS][UPDATE_MAX_PARAMS]; /* each step's gradients */
} update_runs;

static const bb_tensor_proto *initializer_of(const bb_model *m, const char *name) {
  for (size_t i = 0; i < m->graph->initializers.len; i++)
    if (strcmp(m->graph->initializers.items[i]->name, name) == 0) return m->graph->initializers.items[i];
  return NULL;
}

/* A value for `name`, a parameter of params_model or a state initializer of the optimizer,
 * of its shape and type: in [lo, hi], Adam's v in [0, 0.01], the step 4. */
static bb_tensor *update_value(const bb_model *params_model, const bb_grad_optimizer *opt, const char *name, double lo,
                               double hi) {
  const bb_tensor_proto *like = initializer_of(params_model, name);
  if (!like) like = initializer_of(opt->model, name);
  if (!like) return NULL;
  if (like->data_type == BB_DTYPE_INT64) {
    bb_tensor *step = bb_tensor_new_empty(NULL, BB_DTYPE_INT64, 0, NULL);
    *(int64_t *)bb_tensor_data(step) = 4;
    return step;
  }
  size_t len = strlen(name);
  if (len > 11 && strcmp(name + len - 11, ".exp_avg_sq") == 0) lo = 0, hi = 0.01;
  return optest_rand(like->data_type, (int)like->n_dims, like->dims, lo, hi);
}

static bool update_runs_init(update_runs *u, const bb_model *params_model, const bb_grad_optimizer *opt, uint64_t seed) {
  memset(u, 0, sizeof *u);
  u->opt = opt;
  if (opt->n_params > UPDATE_MAX_PARAMS) return false;
  rng_state = seed;
  for (size_t i = 0; i < opt->n_params; i++) u->names[u->n_carried] = opt->params[i], u->first[u->n_carried++] = NULL;
  for (size_t i = 0; i < opt->n_state; i++) u->names[u->n_carried] = opt->state[i], u->first[u->n_carried++] = NULL;
  for (size_t i = 0; i < u->n_carried; i++)
    u->first[i] = update_value(params_model, opt, u->names[i], i < opt->n_params ? -1 : -0.1, i < opt->n_params ? 1 : 0.1);
  for (size_t i = 0; i < opt->n_params; i++) u->names[u->n_carried + i] = opt->grads[i];
  for (size_t t = 0; t < UPDATE_STEPS; t++)
    for (size_t i = 0; i < opt->n_params; i++) u->grads[t][i] = update_value(params_model, opt, opt->params[i], -1, 1);
  return true;
}

static void update_runs_free(update_runs *u) {
  for (size_t i = 0; i < u->n_carried; i++) bb_tensor_release(u->first[i]);
  for (size_t t = 0; t < UPDATE_STEPS; t++)
    for (size_t i = 0; i < UPDATE_MAX_PARAMS; i++) bb_tensor_release(u->grads[t][i]);
}

/* Runs the steps on session s; out[t] gets step t's outputs (n_carried of them). */
static bool run_updates(bb_cpu_session *s, const update_runs *u, bb_tensor *out[UPDATE_STEPS][UPDATE_MAX_VALUES]) {
  bb_error err;
  const size_t n_params = u->opt->n_params;
  if (bb_cpu_session_output_count(s) != u->n_carried) return false;
  for (size_t o = 0; o < u->n_carried; o++) {
    const char *want = o < n_params ? u->opt->params_next[o] : u->opt->state_next[o - n_params];
    if (strcmp(bb_cpu_session_output_name(s, o), want) != 0) return false;
  }
  for (size_t t = 0; t < UPDATE_STEPS; t++) {
    bb_tensor *ins[UPDATE_MAX_VALUES];
    for (size_t i = 0; i < u->n_carried; i++) ins[i] = t ? out[t - 1][i] : u->first[i];
    for (size_t i = 0; i < n_params; i++) ins[u->n_carried + i] = u->grads[t][i];
    int rc = bb_cpu_session_run(s, u->names, ins, u->n_carried + n_params, out[t], &err);
    CHECK_MSG(!rc, "step %zu: %s", t, err.message);
    if (rc) return false;
  }
  return true;
}

static bool same_tensor(const bb_tensor *a, const bb_tensor *b) {
  return a && b && a->dtype == b->dtype && bb_tensor_same_shape(a, b) &&
         memcmp(bb_tensor_data(a), bb_tensor_data(b), (size_t)a->numel * bb_dtype_size(a->dtype)) == 0;
}

static void release_updates(bb_tensor *out[UPDATE_STEPS][UPDATE_MAX_VALUES]) {
  for (size_t t = 0; t < UPDATE_STEPS; t++)
    for (size_t o = 0; o < UPDATE_MAX_VALUES; o++) bb_tensor_release(out[t][o]), out[t][o] = NULL;
}

/* The sessions of opt's graph with the optimizer fusion (every rewrite) and without it
 * (every other rewrite) give the same bits, every step, on 1 to 4 threads; with `pooled`
 * the fused updates go to the pool on 2 threads and more. *made gets what the fused
 * session's general plan (the one runs that give the state take) made. */
static void check_fused_updates(const char *label, const bb_model *params_model, const bb_grad_optimizer *opt,
                                uint64_t seed, bool pooled, bb_cpu_session_rewrites *made) {
  bb_error err;
  bb_cpu_session *fused = NULL, *plain = NULL;
  const bb_cpu_session_options unfused = {sizeof unfused, BB_CPU_REWRITE_FUSE_OPTIMIZER};
  CHECK_MSG(!bb_cpu_session_new(opt->model, NULL, &fused, &err) &&
                !bb_cpu_session_new_with_options(opt->model, NULL, &unfused, &plain, &err),
            "%s: %s", label, err.message);
  bb_cpu_session_rewrites made_off = {0};
  if (fused) bb_cpu_session_rewrites_made(fused, true, made);
  if (plain) bb_cpu_session_rewrites_made(plain, true, &made_off);
  CHECK_MSG(made_off.fused_updates == 0, "%s: the session without the fusion fused %zu updates", label, made_off.fused_updates);
  CHECK_MSG(made->fused_adam == made->fused_updates, "%s: fused_adam names fused_updates", label);
  update_runs u;
  bb_tensor *ref[UPDATE_STEPS][UPDATE_MAX_VALUES] = {{NULL}}, *got[UPDATE_STEPS][UPDATE_MAX_VALUES] = {{NULL}};
  bool ok = fused && plain && update_runs_init(&u, params_model, opt, seed) && run_updates(plain, &u, ref);
  CHECK_MSG(ok, "%s: the graph as written did not run", label);
  for (size_t threads = 1; ok && threads <= most_threads(); threads++) {
    if (set_threads(threads)) break;
    const uint64_t before = pool_jobs();
    CHECK_MSG(run_updates(fused, &u, got), "%s: the fused session did not run on %zu threads", label, threads);
    if (threads > 1 && pooled)
      CHECK_MSG(pool_jobs() > before, "%s: the updates did not use the pool on %zu threads", label, threads);
    for (size_t t = 0; t < UPDATE_STEPS; t++)
      for (size_t o = 0; o < u.n_carried; o++)
        CHECK_MSG(same_tensor(got[t][o], ref[t][o]), "%s, %zu threads, step %zu: output %s differs from the unfused graph's",
                  label, threads, t, bb_cpu_session_output_name(fused, o));
    release_updates(got);
  }
  set_threads(1);
  release_updates(ref);
  if (fused && plain) update_runs_free(&u);
  bb_cpu_session_free(fused), bb_cpu_session_free(plain);
}

/* A decoupled decay written by hand into an SGD or momentum graph, as AdamW's graph has
 * it: each parameter's last Sub reads Mul(p, optimizer.decay) in place of p. */
static void decouple(bb_grad_optimizer *opt) {
  bb_model *m = opt->model;
  bb_tensor_proto *decay = bb_tensor_proto_new(m, "optimizer.decay", BB_DTYPE_FLOAT, 0, NULL);
  const float scale = 0.9995f;
  CHECK(decay && !bb_tensor_proto_set_raw(m, decay, &scale, sizeof scale) &&
        !bb_tensorlist_append(m, &m->graph->initializers, decay));
  const size_t n_nodes = m->graph->nodes.len;
  for (size_t i = 0; i < opt->n_params; i++)
    for (size_t k = 0; k < n_nodes; k++) {
      bb_ir_node *sub = m->graph->nodes.items[k];
      if (strcmp(sub->op_type, "Sub") != 0 || strcmp(sub->outputs.items[0], opt->params_next[i]) != 0) continue;
      char name[64];
      snprintf(name, sizeof name, "%s.decayed", opt->params[i]);
      graph_node(m, "Mul", opt->params[i], "optimizer.decay", NULL, name);
      sub->inputs.items[0] = m->graph->nodes.items[m->graph->nodes.len - 1]->outputs.items[0];
    }
}

/* An optimizer graph over parameters w0, w1, ... of the given shapes (zeros: it reads
 * their shapes), gradients w0.g, w1.g, ... */
static bb_grad_optimizer *optimizer_over(const bb_optimizer_config *cfg, int32_t dtype, size_t n_params,
                                         const int *ranks, const int64_t (*shapes)[2], bb_model **params_model) {
  static char text[UPDATE_MAX_PARAMS][2][16];
  const char *params[UPDATE_MAX_PARAMS], *grads[UPDATE_MAX_PARAMS];
  for (size_t i = 0; i < n_params && i < UPDATE_MAX_PARAMS; i++) {
    snprintf(text[i][0], sizeof text[i][0], "w%zu", i), snprintf(text[i][1], sizeof text[i][1], "w%zu.g", i);
    params[i] = text[i][0], grads[i] = text[i][1];
  }
  bb_model *pm = bb_model_new(NULL);
  pm->graph = bb_graph_new(pm, "params");
  for (size_t i = 0; i < n_params; i++) add_param(pm, params[i], dtype, ranks[i], shapes[i]);
  bb_grad_graph tg;
  memset(&tg, 0, sizeof tg);
  tg.model = pm, tg.n_params = n_params, tg.params = params, tg.grads = grads;
  bb_grad_optimizer *opt = NULL;
  bb_error err;
  CHECK_MSG(!bb_grad_optimizer_build(&tg, cfg, &opt, &err), "%s", err.message);
  *params_model = pm;
  return opt;
}

typedef enum decay_form { DECAY_NONE, DECAY_L2, DECAY_DECOUPLED } decay_form;

/* Every rule (SGD, momentum, Nesterov, Adam) with no weight decay, L2 weight decay or a
 * decoupled decay (AdamW's; written by hand for the others), with and without gradient
 * clipping, over parameters of 100003 (cut into pieces, a tail of 3), 4096, 70, 5 and 1
 * elements (rank 0): the session runs each parameter's update as one pass, which gives
 * the bits of the session without the fusion on 1 to 4 threads, three steps running,
 * the large parameter on the pool; the stat counts the five updates, and each took in
 * every node of its rule, its clipping and its decay (the plan has that many fewer steps). */
static void test_session_fused_updates(void) {
  static const int64_t shapes[][2] = {{100003, 0}, {64, 64}, {7, 10}, {5, 0}, {0, 0}};
  static const int ranks[] = {1, 2, 2, 1, 0};
  static const char *kinds[] = {"sgd", "momentum", "nesterov", "adam"}, *decays[] = {"no decay", "L2", "decoupled"};
  static const size_t rule_nodes[] = {2, 4, 6, 13}, decay_nodes[] = {0, 2, 1};
  for (size_t kind = 0; kind < 4; kind++)
    for (int decay = DECAY_NONE; decay <= DECAY_DECOUPLED; decay++)
      for (int clip = 0; clip < 2; clip++) {
        const bool adam = kind == 3;
        bb_optimizer_config cfg = bb_optimizer_defaults(adam ? (decay == DECAY_DECOUPLED ? BB_OPTIMIZER_ADAMW : BB_OPTIMIZER_ADAM)
                                                        : kind == 0 ? BB_OPTIMIZER_SGD : BB_OPTIMIZER_MOMENTUM);
        cfg.nesterov = kind == 2;
        cfg.weight_decay = decay == DECAY_L2 ? 0.01f : decay == DECAY_DECOUPLED && adam ? 0.05f : 0.0f;
        cfg.max_grad_norm = clip ? 1.0f : 0.0f;
        bb_model *pm = NULL;
        bb_grad_optimizer *opt = optimizer_over(&cfg, BB_DTYPE_FLOAT, 5, ranks, shapes, &pm);
        if (opt && decay == DECAY_DECOUPLED && !adam) decouple(opt);
        char label[96];
        snprintf(label, sizeof label, "%s, %s, %s", kinds[kind], decays[decay], clip ? "clipped" : "not clipped");
        bb_cpu_session_rewrites made = {0};
        if (opt) check_fused_updates(label, pm, opt, 99 + kind * 8 + (size_t)decay * 2 + (size_t)clip, true, &made);
        const size_t taken = rule_nodes[kind] + decay_nodes[decay] + (size_t)clip;
        CHECK_MSG(made.fused_updates == 5, "%s: %zu of 5 updates fused", label, made.fused_updates);
        CHECK_MSG(made.nodes - made.steps == 5 * (taken - 1), "%s: %zu nodes as %zu steps, not %zu nodes an update", label,
                  made.nodes, made.steps, taken);
        bb_grad_optimizer_free(opt);
        bb_model_free(pm);
      }
}

/* Clipping over 100 parameters, more than a node may take inputs (64): the squares are
 * added by a chain of Sums; the session runs the graph, fused, with the unfused graph's
 * bits, and the clipped step is p − g·min(1, max_norm / (‖g‖₂ + 1e-6)) with the norm over
 * all 100 gradients (computed here in double). */
static void test_session_clips_many_parameters(void) {
  enum { N = 100 };
  int ranks[N];
  int64_t shapes[N][2];
  for (size_t i = 0; i < N; i++) ranks[i] = 1, shapes[i][0] = 3, shapes[i][1] = 0;
  bb_optimizer_config cfg = bb_optimizer_defaults(BB_OPTIMIZER_SGD);
  cfg.lr = 1.0f, cfg.max_grad_norm = 0.5f;
  bb_model *pm = NULL;
  bb_grad_optimizer *opt = optimizer_over(&cfg, BB_DTYPE_FLOAT, N, ranks, (const int64_t(*)[2])shapes, &pm);
  bb_cpu_session_rewrites made = {0};
  if (opt) check_fused_updates("100 parameters", pm, opt, 3, false, &made);
  CHECK_MSG(made.fused_updates == N, "%zu of %d updates fused", made.fused_updates, N);
  update_runs u;
  bb_cpu_session *s = NULL;
  bb_error err;
  bb_tensor *out[UPDATE_STEPS][UPDATE_MAX_VALUES] = {{NULL}};
  if (opt && update_runs_init(&u, pm, opt, 3) && !bb_cpu_session_new(opt->model, NULL, &s, &err) && run_updates(s, &u, out)) {
    double norm = 0, worst = 0;
    for (size_t i = 0; i < N; i++)
      for (int64_t k = 0; k < 3; k++) {
        const double g = ((const float *)bb_tensor_data(u.grads[0][i]))[k];
        norm += g * g;
      }
    const double coef = fmin(1.0, 0.5 / (sqrt(norm) + 1e-6));
    for (size_t i = 0; i < N; i++)
      for (int64_t k = 0; k < 3; k++) {
        const double p = ((const float *)bb_tensor_data(u.first[i]))[k], g = ((const float *)bb_tensor_data(u.grads[0][i]))[k];
        worst = fmax(worst, fabs(((const float *)bb_tensor_data(out[0][i]))[k] - (p - g * coef)));
      }
    CHECK_MSG(coef < 1 && worst <= 1e-6, "the clipped step is %.3g from p - g * %.6f", worst, coef);
  }
  CHECK_MSG(s, "the session did not run");
  release_updates(out);
  if (opt) update_runs_free(&u);
  bb_cpu_session_free(s);
  bb_grad_optimizer_free(opt);
  bb_model_free(pm);
}

/* Where the values do not allow the one pass, the update's nodes run as written, with
 * the bits of the session without the fusion: parameters of type double (every rule),
 * a gradient that broadcasts ([1, 10] for a [7, 10] parameter), a learning rate that is
 * not one scalar ([7, 10]), and one scalar of higher rank than the parameter ([1, 1, 1]:
 * the nodes' result is [1, 7, 10]). */
static void test_session_update_falls_back(void) {
  static const int64_t shapes[][2] = {{7, 10}, {5, 0}};
  static const int ranks[] = {2, 1};
  static const bb_optimizer_kind kinds[] = {BB_OPTIMIZER_SGD, BB_OPTIMIZER_MOMENTUM, BB_OPTIMIZER_ADAMW};
  for (size_t k = 0; k < 3; k++) {
    bb_optimizer_config cfg = bb_optimizer_defaults(kinds[k]);
    cfg.weight_decay = 0.01f, cfg.max_grad_norm = 1.0f;
    bb_model *pm = NULL;
    bb_grad_optimizer *opt = optimizer_over(&cfg, BB_DTYPE_DOUBLE, 2, ranks, shapes, &pm);
    bb_cpu_session_rewrites made = {0};
    if (opt) check_fused_updates("double", pm, opt, 7 + k, false, &made);
    CHECK_MSG(made.fused_updates == 2, "double, kind %zu: %zu of 2 updates planned as one pass", k, made.fused_updates);
    bb_grad_optimizer_free(opt);
    bb_model_free(pm);
  }
  for (size_t k = 0; k < 3; k++) {
    bb_optimizer_config cfg = bb_optimizer_defaults(kinds[k]);
    bb_model *pm = NULL;
    bb_grad_optimizer *opt = optimizer_over(&cfg, BB_DTYPE_FLOAT, 1, ranks, shapes, &pm);
    bb_error err;
    bb_cpu_session *fused = NULL, *plain = NULL;
    const bb_cpu_session_options unfused = {sizeof unfused, BB_CPU_REWRITE_FUSE_OPTIMIZER};
    CHECK_MSG(opt && !bb_cpu_session_new(opt->model, NULL, &fused, &err) &&
                  !bb_cpu_session_new_with_options(opt->model, NULL, &unfused, &plain, &err),
              "%s", err.message);
    update_runs u;
    for (int form = 0; fused && plain && form < 3; form++) {
      update_runs_init(&u, pm, opt, 40 + k);
      if (form == 0) { /* a gradient of [1, 10] */
        bb_tensor_release(u.grads[0][0]);
        u.grads[0][0] = optest_rand(BB_DTYPE_FLOAT, 2, (const int64_t[]){1, 10}, -1, 1);
      }
      bb_tensor *lr = form == 1 ? optest_rand(BB_DTYPE_FLOAT, 2, (const int64_t[]){7, 10}, 0, 0.01)
                    : form == 2 ? optest_rand(BB_DTYPE_FLOAT, 3, (const int64_t[]){1, 1, 1}, 0, 0.01)
                                : NULL;
      const char *names[UPDATE_MAX_VALUES + 1];
      bb_tensor *ins[UPDATE_MAX_VALUES + 1], *ref[UPDATE_MAX_VALUES] = {NULL}, *got[UPDATE_MAX_VALUES] = {NULL};
      size_t n = 0;
      for (size_t i = 0; i < u.n_carried; i++) names[n] = u.names[i], ins[n++] = u.first[i];
      names[n] = u.names[u.n_carried], ins[n++] = u.grads[0][0];
      if (lr) names[n] = "optimizer.lr", ins[n++] = lr;
      for (size_t threads = 1; threads <= most_threads(); threads++) {
        if (set_threads(threads)) break;
        CHECK_MSG(!bb_cpu_session_run(plain, names, ins, n, ref, &err) && !bb_cpu_session_run(fused, names, ins, n, got, &err),
                  "form %d: %s", form, err.message);
        for (size_t o = 0; o < u.n_carried; o++) {
          CHECK_MSG(same_tensor(got[o], ref[o]), "kind %zu, form %d, %zu threads: output %s differs from the unfused graph's",
                    k, form, threads, bb_cpu_session_output_name(fused, o));
          bb_tensor_release(got[o]), bb_tensor_release(ref[o]), got[o] = ref[o] = NULL;
        }
      }
      set_threads(1);
      bb_tensor_release(lr);
      update_runs_free(&u);
    }
    bb_cpu_session_free(fused), bb_cpu_session_free(plain);
    bb_grad_optimizer_free(opt);
    bb_model_free(pm);
  }
}

/* ---- batch bands ------------------------------------------------------------------------------ */

/* How the small CNN of the thread benches ends (after its second MaxPool, p2 [N, 32, 4, 4]):
 * per sample, or with a step that is not. */
typedef enum cnn_tail {
  TAIL_FLATTEN,         /* Flatten, Gemm (the bench's network): one band */
  TAIL_RESHAPE,         /* Reshape to [-1, 512], Gemm: one band */
  TAIL_RESHAPE_LITERAL, /* Reshape to [64, -1]: the batch written into the graph */
  TAIL_GEMM_BATCHED_C,  /* Gemm with C [64, 10]: a bias per sample */
  TAIL_SOFTMAX_AXIS0,   /* Flatten, Gemm, Softmax over the batch */
  TAIL_TRANSPOSE,       /* a Transpose between the two MaxPools' halves: two bands */
} cnn_tail;

/* The small CNN on 16×16 images: Conv 3×3 1→16, Relu, MaxPool 2, Conv 3×3 16→32, Relu,
 * MaxPool 2, then the tail. */
static bb_model *small_cnn(cnn_tail tail) {
  bb_model *m = graph_from_x_to_y();
  int64_t pads[4] = {1, 1, 1, 1}, two[2] = {2, 2};
  const char *p1 = "p1";
  bb_attr_set_ints(m, &graph_node(m, "Conv", "x", "w1", "b1", "c1")->attrs, "pads", pads, 4);
  graph_node(m, "Relu", "c1", NULL, NULL, "r1");
  bb_ir_node *mp = graph_node(m, "MaxPool", "r1", NULL, NULL, "p1");
  bb_attr_set_ints(m, &mp->attrs, "kernel_shape", two, 2), bb_attr_set_ints(m, &mp->attrs, "strides", two, 2);
  if (tail == TAIL_TRANSPOSE) {
    const int64_t perm[4] = {0, 1, 3, 2};
    bb_attr_set_ints(m, &graph_node(m, "Transpose", "p1", NULL, NULL, "t1")->attrs, "perm", perm, 4);
    p1 = "t1";
  }
  bb_attr_set_ints(m, &graph_node(m, "Conv", p1, "w2", "b2", "c2")->attrs, "pads", pads, 4);
  graph_node(m, "Relu", "c2", NULL, NULL, "r2");
  mp = graph_node(m, "MaxPool", "r2", NULL, NULL, "p2");
  bb_attr_set_ints(m, &mp->attrs, "kernel_shape", two, 2), bb_attr_set_ints(m, &mp->attrs, "strides", two, 2);
  const bool reshape = tail == TAIL_RESHAPE || tail == TAIL_RESHAPE_LITERAL;
  if (reshape) graph_node(m, "Reshape", "p2", "shape", NULL, "f");
  else graph_node(m, "Flatten", "p2", NULL, NULL, "f");
  bb_attr_set_int(m, &graph_node(m, "Gemm", "f", "w3", "b3", tail == TAIL_SOFTMAX_AXIS0 ? "g" : "y")->attrs, "transB", 1);
  if (tail == TAIL_SOFTMAX_AXIS0) bb_attr_set_int(m, &graph_node(m, "Softmax", "g", NULL, NULL, "y")->attrs, "axis", 0);
  add_initializer(m, "w1", rand_tensor(4, (const int64_t[]){16, 1, 3, 3}));
  add_initializer(m, "b1", rand_tensor(1, (const int64_t[]){16}));
  add_initializer(m, "w2", rand_tensor(4, (const int64_t[]){32, 16, 3, 3}));
  add_initializer(m, "b2", rand_tensor(1, (const int64_t[]){32}));
  add_initializer(m, "w3", rand_tensor(2, (const int64_t[]){10, 512}));
  add_initializer(m, "b3", tail == TAIL_GEMM_BATCHED_C ? rand_tensor(2, (const int64_t[]){64, 10})
                                                       : rand_tensor(1, (const int64_t[]){10}));
  if (reshape) {
    bb_tensor *shape = bb_tensor_new_empty(NULL, BB_DTYPE_INT64, 1, (const int64_t[]){2});
    int64_t *s = bb_tensor_data(shape);
    s[0] = tail == TAIL_RESHAPE ? -1 : 64, s[1] = tail == TAIL_RESHAPE ? 512 : -1;
    add_initializer(m, "shape", shape);
  }
  return m;
}

static bb_tensor *run_x(bb_cpu_session *s, bb_tensor *x) {
  const char *names[1] = {"x"};
  bb_tensor *y = NULL;
  bb_error err;
  int rc = bb_cpu_session_run(s, names, &x, 1, &y, &err);
  CHECK_MSG(rc == 0, "%s", err.message);
  return y;
}


/* A session keeps a constant B of Gemm (transB 0 and 1) and of a 2-D MatMul packed, and
 * gives the bits of the node run on its own (which packs B on every call): for several row
 * counts (one row: a matrix-vector product, which packs nothing), on 1 to 4 threads, and
 * with B fed as an input in its place (the general plan: nothing kept). */
static void test_session_keeps_gemm_b_packed(void) {
  for (int variant = 0; variant < 3; variant++) {
    const char *op = variant == 2 ? "MatMul" : "Gemm";
    const int trans_b = variant == 1;
    bb_model *m = graph_from_x_to_y();
    bb_ir_node *n = graph_node(m, op, "x", "w", NULL, "y");
    if (variant < 2) bb_attr_set_int(m, &n->attrs, "transB", trans_b);
    const int64_t k = 300, cols = 37;
    bb_tensor *w = rand_tensor(2, trans_b ? (const int64_t[]){cols, k} : (const int64_t[]){k, cols});
    bb_tensor *w2 = rand_tensor(2, trans_b ? (const int64_t[]){cols, k} : (const int64_t[]){k, cols});
    add_initializer(m, "w", bb_tensor_retain(w));
    bb_cpu_session *s = NULL;
    bb_error err;
    CHECK_MSG(!bb_cpu_session_new(m, NULL, &s, &err), "%s", err.message);
    const int64_t rows[] = {64, 8, 1, 64, 33};
    for (size_t threads = 1; s && threads <= most_threads(); threads++) {
      if (set_threads(threads)) break;
      for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        for (int fed = 0; fed < 2; fed++) {
          bb_tensor *x = rand_tensor(2, (const int64_t[]){rows[i], k}), *ref = NULL, *y = NULL;
          bb_tensor *args[2] = {x, fed ? w2 : w};
          CHECK_MSG(!bb_cpu_run_node(n, 17, args, 2, &ref, 1, NULL, &err), "%s", err.message);
          const char *names[2] = {"x", "w"};
          CHECK_MSG(!bb_cpu_session_run(s, names, args, fed ? 2 : 1, &y, &err), "%s", err.message);
          CHECK_MSG(same_floats(y, ref), "%s transB %d, %lld rows, B %s, %zu threads: not the node's own bits", op,
                    trans_b, (long long)rows[i], fed ? "fed" : "kept", threads);
          bb_tensor_release(x), bb_tensor_release(ref), bb_tensor_release(y);
        }
    }
    set_threads(1);
    bb_cpu_session_free(s);
    bb_tensor_release(w), bb_tensor_release(w2);
    bb_model_free(m);
  }
}

/* Whether y is within float rounding of ref (the same sums, cut into other blocks). */
static bool close_floats(const bb_tensor *y, const bb_tensor *ref) {
  if (!y || !ref || y->numel != ref->numel) return false;
  const float *a = bb_tensor_data(y), *b = bb_tensor_data(ref);
  for (int64_t i = 0; i < y->numel; i++)
    if (!(fabsf(a[i] - b[i]) <= 1e-4f * (1.0f + fabsf(b[i])))) return false;
  return true;
}

/* Two sessions of m: one with the default rewrites, batch bands among them, and one with
 * batch bands off. */
static void banded_and_whole(bb_model *m, bb_cpu_session **banded, bb_cpu_session **whole) {
  bb_error err;
  const bb_cpu_session_options off = {sizeof off, BB_CPU_REWRITE_BATCH_BANDS};
  CHECK_MSG(!bb_cpu_session_new(m, NULL, banded, &err) && !bb_cpu_session_new_with_options(m, NULL, &off, whole, &err),
            "%s", err.message);
}

/* The small CNN at batch 64 is one band: on 2 to 4 threads a warm run is ONE job of the
 * pool, of 8 tasks (chunks of 8 images, from the batch size alone), with the bits of one
 * thread; its results are within float rounding of the steps run whole (bands off), which
 * are themselves checked against onnxruntime (tests/tools/rewrite_cases.py). Batches no
 * chunking fits (1, 2, 17) and a session fed batches of several sizes in turn give the
 * steps' own bits where no band applies. */
static void test_session_batch_band(void) {
  const cnn_tail tails[] = {TAIL_FLATTEN, TAIL_RESHAPE};
  for (size_t ti = 0; ti < sizeof tails / sizeof tails[0]; ti++) {
    bb_model *m = small_cnn(tails[ti]);
    bb_cpu_session *banded = NULL, *whole = NULL;
    banded_and_whole(m, &banded, &whole);
    bb_cpu_session_rewrites made, made_off;
    bb_cpu_session_rewrites_made(banded, false, &made);
    bb_cpu_session_rewrites_made(whole, false, &made_off);
    CHECK_MSG(made.batch_bands == 1 && made_off.batch_bands == 0, "tail %zu: %zu bands planned (%zu with bands off)", ti,
              made.batch_bands, made_off.batch_bands);
    const int64_t batches[] = {64, 17, 64, 1, 32, 2, 64};
    for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
      const int64_t n = batches[bi];
      const bool bands = n == 64 || n == 32;
      bb_tensor *x = rand_tensor(4, (const int64_t[]){n, 1, 16, 16});
      set_threads(1);
      bb_tensor *ref = run_x(banded, x), *plain = run_x(whole, x);
      CHECK_MSG(bands ? close_floats(ref, plain) : same_floats(ref, plain),
                "tail %zu batch %lld: the band's results are not those of its steps run whole", ti, (long long)n);
      for (size_t threads = 2; threads <= most_threads(); threads++) {
        if (set_threads(threads)) break;
        for (int warm = 0; warm < 2; warm++) {
          bbi_parallel_stats before, after;
          bbi_parallel_get_stats(&before);
          bb_tensor *y = run_x(banded, x);
          bbi_parallel_get_stats(&after);
          CHECK_MSG(same_floats(y, ref), "tail %zu batch %lld on %zu threads (run %d) differs from one thread", ti,
                    (long long)n, threads, warm);
          if (warm && n == 64)
            CHECK_MSG(after.jobs - before.jobs == 1 && after.tasks - before.tasks == 8,
                      "tail %zu batch 64 on %zu threads: %llu jobs of %llu tasks, not one of 8", ti, threads,
                      (unsigned long long)(after.jobs - before.jobs), (unsigned long long)(after.tasks - before.tasks));
          bb_tensor_release(y);
        }
      }
      bb_tensor_release(ref), bb_tensor_release(plain), bb_tensor_release(x);
    }
    set_threads(1);
    bb_cpu_session_free(banded), bb_cpu_session_free(whole);
    bb_model_free(m);
  }
}


/* A band whose steps run whole in between (a batch no chunking fits), or one of whose
 * chunks takes another path (a NaN), may find their caches
 * in the whole batch's layout (Winograd's transform of a 3×3 Conv on 8×8 maps is packed
 * one way for one image's tiles, the other for a chunk's): its next run checks again on
 * the caller, so that no task rewrites a cache while others read it. Batches of 64 and 1
 * in turn, on 1 to 4 threads, each within float rounding of the steps run whole and the
 * bits of one thread. */
static void test_session_batch_band_after_whole_runs(void) {
  bb_model *m = graph_from_x_to_y();
  int64_t pads[4] = {1, 1, 1, 1};
  bb_attr_set_ints(m, &graph_node(m, "Conv", "x", "w1", NULL, "c1")->attrs, "pads", pads, 4);
  graph_node(m, "Relu", "c1", NULL, NULL, "r1");
  bb_attr_set_ints(m, &graph_node(m, "Conv", "r1", "w2", NULL, "c2")->attrs, "pads", pads, 4);
  graph_node(m, "Relu", "c2", NULL, NULL, "y");
  add_initializer(m, "w1", rand_tensor(4, (const int64_t[]){128, 128, 3, 3}));
  add_initializer(m, "w2", rand_tensor(4, (const int64_t[]){128, 128, 3, 3}));
  bb_cpu_session *banded = NULL, *whole = NULL;
  banded_and_whole(m, &banded, &whole);
  bb_tensor *x64 = rand_tensor(4, (const int64_t[]){64, 128, 8, 8}), *x1 = rand_tensor(4, (const int64_t[]){1, 128, 8, 8});
  set_threads(1);
  bb_tensor *ref64 = run_x(banded, x64), *plain64 = run_x(whole, x64), *ref1 = run_x(banded, x1);
  CHECK_MSG(close_floats(ref64, plain64), "batch 64: the band's results are not those of its steps run whole");
  for (size_t threads = 1; threads <= most_threads(); threads++) {
    if (set_threads(threads)) break;
    for (int i = 0; i < 6; i++) {
      bb_tensor *y = run_x(banded, i % 2 ? x1 : x64);
      CHECK_MSG(same_floats(y, i % 2 ? ref1 : ref64), "run %d (batch %d) on %zu threads differs from one thread", i,
                i % 2 ? 1 : 64, threads);
      bb_tensor_release(y);
    }
  }
  /* a NaN in one image sends its chunk's Winograd convolution to the direct path, which
   * keeps its weights in another layout: in chunk 2 (a task's), and in chunk 0 (the caller's
   * first run): the bits of one thread on every thread count, NaN where the steps run whole
   * give NaN and within rounding of them elsewhere */
  for (int at = 0; at < 2; at++) {
    bb_tensor *xn = rand_tensor(4, (const int64_t[]){64, 128, 8, 8});
    ((float *)bb_tensor_data(xn))[(at ? 3 : 20) * 128 * 64 + 5] = NAN;
    set_threads(1);
    bb_tensor *refn = run_x(banded, xn), *plainn = run_x(whole, xn);
    bool agree = refn && plainn && refn->numel == plainn->numel;
    /* (the steps run whole take the direct path for every image, the band Winograd's for
     * the chunks without the NaN: within Winograd's bound of each other, 3·10⁻⁴ here) */
    for (int64_t i = 0; agree && i < refn->numel; i++) {
      const float a = ((const float *)bb_tensor_data(refn))[i], b = ((const float *)bb_tensor_data(plainn))[i];
      agree = isnan(a) ? isnan(b) : !isnan(b) && fabsf(a - b) <= 1e-3f * (1.0f + fabsf(b));
    }
    CHECK_MSG(agree, "a NaN in image %d: the band's results are not those of its steps run whole", at ? 3 : 20);
    for (size_t threads = 2; threads <= most_threads(); threads++) {
      if (set_threads(threads)) break;
      for (int i = 0; i < 3; i++) {
        bb_tensor *y = run_x(banded, i == 1 ? x64 : xn);
        CHECK_MSG(same_floats(y, i == 1 ? ref64 : refn), "a NaN in image %d, run %d on %zu threads: not one thread's bits",
                  at ? 3 : 20, i, threads);
        bb_tensor_release(y);
      }
    }
    bb_tensor_release(refn), bb_tensor_release(plainn), bb_tensor_release(xn);
  }
  set_threads(1);
  bb_tensor_release(ref64), bb_tensor_release(plain64), bb_tensor_release(ref1);
  bb_tensor_release(x64), bb_tensor_release(x1);
  bb_cpu_session_free(banded), bb_cpu_session_free(whole);
  bb_model_free(m);
}

/* Steps that are not per sample end or cut a band, or make it decline on its first run
 * (its steps then run one by one, with their own bits): a Reshape with the batch written
 * into its shape, a Gemm bias with a row per sample, a Softmax over the batch; a
 * Transpose between two bands leaves two bands. On 1 to 4 threads. */
static void test_session_batch_band_declines(void) {
  const cnn_tail tails[] = {TAIL_RESHAPE_LITERAL, TAIL_GEMM_BATCHED_C, TAIL_SOFTMAX_AXIS0, TAIL_TRANSPOSE};
  const size_t planned[] = {1, 1, 1, 2};
  for (size_t ti = 0; ti < sizeof tails / sizeof tails[0]; ti++) {
    bb_model *m = small_cnn(tails[ti]);
    bb_cpu_session *banded = NULL, *whole = NULL;
    banded_and_whole(m, &banded, &whole);
    bb_cpu_session_rewrites made;
    bb_cpu_session_rewrites_made(banded, false, &made);
    CHECK_MSG(made.batch_bands == planned[ti], "case %zu: %zu bands planned, not %zu", ti, made.batch_bands, planned[ti]);
    bb_tensor *x = rand_tensor(4, (const int64_t[]){64, 1, 16, 16});
    set_threads(1);
    bb_tensor *plain = run_x(whole, x);
    for (size_t threads = 1; threads <= most_threads(); threads++) {
      if (set_threads(threads)) break;
      for (int run = 0; run < 2; run++) {
        bb_tensor *y = run_x(banded, x);
        /* the Transpose's two bands run; the others decline and run the steps whole */
        CHECK_MSG(tails[ti] == TAIL_TRANSPOSE ? close_floats(y, plain) : same_floats(y, plain),
                  "case %zu on %zu threads (run %d): not the steps' own results", ti, threads, run);
        bb_tensor_release(y);
      }
    }
    set_threads(1);
    bb_tensor_release(plain), bb_tensor_release(x);
    bb_cpu_session_free(banded), bb_cpu_session_free(whole);
    bb_model_free(m);
  }
}

/* A band's values are held to max_output_bytes as the whole batch's, not as a chunk's: a
 * Gemm whose output (the band's last, or an intermediate) is over the cap for the batch
 * and under it for a chunk of 8 samples fails with BB_ERR_LIMIT as the steps run whole
 * do, on 1 to 4 threads, on the first run and on later ones. */
static void test_session_batch_band_output_cap(void) {
  for (int wide_last = 0; wide_last < 2; wide_last++) {
    bb_model *m = graph_from_x_to_y();
    bb_attr_set_int(m, &graph_node(m, "Gemm", "x", "w1", NULL, "h")->attrs, "transB", 0);
    graph_node(m, "Tanh", "h", NULL, NULL, wide_last ? "y" : "t");
    if (!wide_last) graph_node(m, "Gemm", "t", "w2", NULL, "y");
    add_initializer(m, "w1", rand_tensor(2, (const int64_t[]){4, 4096}));
    if (!wide_last) add_initializer(m, "w2", rand_tensor(2, (const int64_t[]){4096, 4}));
    bb_cpu_session *banded = NULL, *whole = NULL;
    bb_error err;
    banded_and_whole(m, &banded, &whole);
    bb_cpu_session_rewrites made;
    bb_cpu_session_rewrites_made(banded, false, &made);
    CHECK_MSG(made.batch_bands == 1, "%s: %zu bands planned, not 1", wide_last ? "wide last" : "wide middle",
              made.batch_bands);
    /* the Gemm's [64, 4096] floats are 1 MiB; a chunk's [8, 4096], 128 KiB */
    const bb_cpu_limits limits = {sizeof limits, (size_t)512 << 10, 0};
    CHECK(!bb_cpu_session_set_limits(banded, &limits, &err) && !bb_cpu_session_set_limits(whole, &limits, &err));
    bb_tensor *x = rand_tensor(2, (const int64_t[]){64, 4});
    const char *names[1] = {"x"};
    for (size_t threads = 1; threads <= most_threads(); threads++) {
      if (set_threads(threads)) break;
      for (int run = 0; run < 2; run++) {
        bb_tensor *y = NULL, *plain = NULL;
        int rc = bb_cpu_session_run(banded, names, &x, 1, &y, &err);
        int rc_whole = bb_cpu_session_run(whole, names, &x, 1, &plain, &err);
        CHECK_MSG(rc == BB_ERR_LIMIT && rc_whole == BB_ERR_LIMIT,
                  "%s on %zu threads (run %d): the band gave %d, the steps run whole %d, not BB_ERR_LIMIT",
                  wide_last ? "wide last" : "wide middle", threads, run, rc, rc_whole);
        bb_tensor_release(y), bb_tensor_release(plain);
      }
    }
    set_threads(1);
    bb_tensor_release(x);
    bb_cpu_session_free(banded), bb_cpu_session_free(whole);
    bb_model_free(m);
  }
}

/* Before opset 7 a binary op's `axis` may align its constant with the batch: Add(x [64, 4],
 * c [k]) at axis 0 adds c[n] to sample n, which no chunk of 8 samples can do. c of 64 (a
 * valid graph) runs with the steps' own bits, c of 8 (which fits a chunk, not the batch)
 * is refused as the steps run whole refuse it; on 1 to 4 threads. */
static void test_session_batch_band_legacy_axis(void) {
  for (int64_t k = 64; k >= 8; k -= 56) {
    bb_model *m = graph_from_x_to_y();
    bb_opset_set(m, &m->opsets, "", 6);
    bb_ir_node *add = graph_node(m, "Add", "x", "c", NULL, "a");
    bb_attr_set_int(m, &add->attrs, "broadcast", 1), bb_attr_set_int(m, &add->attrs, "axis", 0);
    graph_node(m, "Tanh", "a", NULL, NULL, "y");
    add_initializer(m, "c", rand_tensor(1, &k));
    bb_cpu_session *banded = NULL, *whole = NULL;
    bb_error err;
    banded_and_whole(m, &banded, &whole);
    bb_tensor *x = rand_tensor(2, (const int64_t[]){64, 4});
    const char *names[1] = {"x"};
    set_threads(1);
    bb_tensor *plain = NULL;
    const int rc_whole = bb_cpu_session_run(whole, names, &x, 1, &plain, &err);
    CHECK_MSG((rc_whole == 0) == (k == 64), "c of %lld: the steps run whole gave %d", (long long)k, rc_whole);
    for (size_t threads = 1; threads <= most_threads(); threads++) {
      if (set_threads(threads)) break;
      for (int run = 0; run < 2; run++) {
        bb_tensor *y = NULL;
        const int rc = bb_cpu_session_run(banded, names, &x, 1, &y, &err);
        CHECK_MSG(rc == rc_whole && (rc || same_floats(y, plain)),
                  "c of %lld on %zu threads (run %d): the band gave %d, the steps run whole %d", (long long)k, threads,
                  run, rc, rc_whole);
        bb_tensor_release(y);
      }
    }
    set_threads(1);
    bb_tensor_release(plain), bb_tensor_release(x);
    bb_cpu_session_free(banded), bb_cpu_session_free(whole);
    bb_model_free(m);
  }
}

int main(void) {
  model = bb_model_new(NULL);
  RUN(test_matmul_and_gemm);
  RUN(test_convolutions);
  RUN(test_conv_batch_split);
  RUN(test_conv_small_map_regions);
  RUN(test_small_cnn_step_ops);
  RUN(test_transposes);
  RUN(test_depthwise_conv_transpose);
  RUN(test_session_keeps_conv_weights_packed);
  RUN(test_session_fused_clip);
  RUN(test_session_fused_residual_relu);
  RUN(test_session_fused_depthwise);
  RUN(test_session_keeps_window_attrs);
  RUN(test_pooling);
  RUN(test_scatter_elements);
  RUN(test_reductions_and_softmax);
  RUN(test_elementwise);
  RUN(test_session_fused_updates);
  RUN(test_session_update_falls_back);
  RUN(test_session_clips_many_parameters);
  RUN(test_session_keeps_gemm_b_packed);
  RUN(test_session_batch_band);
  RUN(test_session_batch_band_declines);
  RUN(test_session_batch_band_after_whole_runs);
  RUN(test_session_batch_band_output_cap);
  RUN(test_session_batch_band_legacy_axis);
  RUN(test_cnn_training_steps);
  bb_model_free(model);
  return bb_test_finish();
}
