/* BB_CPU_REWRITE_FUSE_TRANSPOSE: a float Conv whose output only a Transpose of perm
 * [1, 0, 2, ..] reads writes that Transpose's output itself. A session with the rewrite
 * must give the bits of one without it on 1 to 4 threads — on the shapes of resnet18's
 * weight gradients (the batch as channels, a kernel as large as the feature map) where the
 * Conv writes the swapped layout, and on one whose path cannot (a product on the plane),
 * where the Transpose runs as written — and so must a training step of a CNN of stride-2
 * convolutions, every gradient bit for bit. */
#include <stdlib.h>
#include <string.h>

#include "bb/cpu.h"
#include "bb/grad.h"
#include "grad/gradtest.h"
#include "harness.h"
#include "optest.h"
#include "util/parallel.h"

static size_t most_threads(void) { return bbi_parallel_supported() ? 4 : 1; }

static int set_threads(size_t n) {
  bb_error err;
  int rc = bb_cpu_set_threads(n, &err);
  CHECK_MSG(rc == 0, "%s", err.message);
  return rc;
}

static bool same_bits(const bb_tensor *a, const bb_tensor *b) {
  return a && b && a->dtype == b->dtype && a->rank == b->rank &&
         memcmp(a->dims, b->dims, (size_t)a->rank * sizeof a->dims[0]) == 0 &&
         memcmp(bb_tensor_data(a), bb_tensor_data(b), bb_tensor_nbytes(a)) == 0;
}

/* Sessions of m with every rewrite (`fused`) and with all but the fused Transpose (`plain`). */
static void fused_and_plain(const bb_model *m, bb_cpu_session **fused, bb_cpu_session **plain) {
  bb_error err;
  const bb_cpu_session_options off = {sizeof off, BB_CPU_REWRITE_FUSE_TRANSPOSE};
  *fused = *plain = NULL;
  CHECK_MSG(!bb_cpu_session_new(m, NULL, fused, &err) && !bb_cpu_session_new_with_options(m, NULL, &off, plain, &err),
            "%s", err.message);
}

static size_t fused_transposes(const bb_cpu_session *s) {
  bb_cpu_session_rewrites made;
  bb_cpu_session_rewrites_made(s, false, &made);
  return made.fused_transposes;
}

static size_t produced_bytes(const bb_cpu_session *s) {
  bb_cpu_session_memory_stats m;
  bb_cpu_session_memory(s, &m);
  return m.produced_bytes;
}

typedef struct conv_case {
  const char *label;
  int64_t x[4], w[4], stride, dilation, pads[4];
  bool swapped; /* the Conv's path writes the Transpose's layout (else the Transpose runs) */
} conv_case;

/* y = Transpose(Conv(x, w), perm [1, 0, 2, 3]), x and w graph inputs (w as a weight
 * gradient's dY is). */
static bb_model *conv_transpose_model(const conv_case *c) {
  bb_model *m = bb_model_new(NULL);
  bb_opset_set(m, &m->opsets, "", 17);
  m->graph = bb_graph_new(m, "g");
  bb_vilist_add(m, &m->graph->inputs, "x", bb_type_new_tensor(m, BB_DTYPE_FLOAT, -1, NULL));
  bb_vilist_add(m, &m->graph->inputs, "w", bb_type_new_tensor(m, BB_DTYPE_FLOAT, -1, NULL));
  bb_vilist_add(m, &m->graph->outputs, "y", bb_type_new_tensor(m, BB_DTYPE_FLOAT, -1, NULL));
  bb_ir_node *conv = bb_ir_node_new(m, "Conv", "", "conv"), *tr = bb_ir_node_new(m, "Transpose", "", "transpose");
  bb_strlist_append(m, &conv->inputs, "x");
  bb_strlist_append(m, &conv->inputs, "w");
  bb_strlist_append(m, &conv->outputs, "c");
  bb_strlist_append(m, &tr->inputs, "c");
  bb_strlist_append(m, &tr->outputs, "y");
  const int64_t strides[2] = {c->stride, c->stride}, dilations[2] = {c->dilation, c->dilation};
  const int64_t perm[4] = {1, 0, 2, 3};
  bb_attr_set_ints(m, &conv->attrs, "strides", strides, 2);
  bb_attr_set_ints(m, &conv->attrs, "dilations", dilations, 2);
  bb_attr_set_ints(m, &conv->attrs, "pads", c->pads, 4);
  bb_attr_set_ints(m, &tr->attrs, "perm", perm, 4);
  bb_nodelist_append(m, &m->graph->nodes, conv);
  bb_nodelist_append(m, &m->graph->nodes, tr);
  return m;
}

static void check_conv_case(const conv_case *c) {
  bb_model *m = conv_transpose_model(c);
  bb_cpu_session *fused, *plain;
  fused_and_plain(m, &fused, &plain);
  CHECK_MSG(fused && fused_transposes(fused) == 1, "%s: the Transpose was not fused", c->label);
  bb_tensor *ins[2] = {optest_rand(BB_DTYPE_FLOAT, 4, c->x, -1, 1), optest_rand(BB_DTYPE_FLOAT, 4, c->w, -1, 1)};
  ((float *)bb_tensor_data(ins[0]))[1] = -0.0f;
  const char *names[2] = {"x", "w"};
  bb_tensor *ref = NULL;
  bb_error err;
  if (plain) CHECK_MSG(!bb_cpu_session_run(plain, names, ins, 2, &ref, &err), "%s: %s", c->label, err.message);
  for (size_t threads = 1; ref && fused && threads <= most_threads(); threads++) {
    if (set_threads(threads)) break;
    bb_tensor *y = NULL;
    CHECK_MSG(!bb_cpu_session_run(fused, names, ins, 2, &y, &err), "%s: %s", c->label, err.message);
    CHECK_MSG(same_bits(y, ref), "%s: %zu threads differ from Conv then Transpose", c->label, threads);
    /* written swapped, the Conv's own output is never made */
    const size_t with = produced_bytes(fused), without = produced_bytes(plain);
    CHECK_MSG(c->swapped ? with < without : with == without, "%s: %zu bytes made, %zu without the rewrite", c->label,
              with, without);
    bb_tensor_release(y);
  }
  set_threads(1);
  bb_tensor_release(ref), bb_tensor_release(ins[0]), bb_tensor_release(ins[1]);
  bb_cpu_session_free(fused), bb_cpu_session_free(plain);
  bb_model_free(m);
}

static void test_session_fused_conv_transpose(void) {
  static const conv_case cases[] = {
      /* resnet18's 3×3, stride-1 weight gradient at batch 2: [64, 64, 3, 3] from 16×16 maps */
      {"3x3 stride 1", {64, 2, 16, 16}, {64, 2, 16, 16}, 1, 1, {1, 1, 1, 1}, true},
      /* a 3×3, stride-2 one (dilation 2 here), its end pad cut to the kernel's extent */
      {"3x3 stride 2", {32, 2, 16, 15}, {48, 2, 8, 8}, 1, 2, {1, 1, 0, 1}, true},
      /* the 7×7, stride-2 stem's, three input channels */
      {"7x7 stem", {3, 1, 32, 32}, {16, 1, 16, 16}, 1, 2, {3, 3, 2, 2}, true},
      /* a 1×1's: one position per output channel */
      {"1x1", {24, 3, 8, 8}, {40, 3, 8, 8}, 1, 1, {0, 0, 0, 0}, true},
      /* an odd batch of images in chunks (its weight-gradient-like channels many) */
      {"chunks", {7, 64, 5, 5}, {24, 64, 3, 3}, 1, 1, {0, 0, 0, 0}, true},
      /* one image of 12×12 outputs: a product on the plane, which writes Y's own layout */
      {"on the plane", {1, 8, 12, 12}, {6, 8, 3, 3}, 1, 1, {1, 1, 1, 1}, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_conv_case(&cases[i]);
}

/* The training graph of tests/data/grad/cnn_stride2.onnx (four stride-2 convolutions, one
 * a 1×1 whose weight gradient keeps its Slice): loss and every gradient bit for bit with
 * and without the fused Transposes, on 1 to 4 threads. */
static void test_session_fused_weight_grads(void) {
  bb_model *m = gt_load(BB_TEST_SOURCE_DIR "/tests/data/grad/cnn_stride2.onnx");
  CHECK_MSG(m != NULL, "cannot read cnn_stride2.onnx");
  bb_grad_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.loss = BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY;
  o.target = "labels";
  bb_grad_graph *g = NULL;
  bb_error err;
  CHECK_MSG(m && !bb_grad_build(m, &o, NULL, &g, &err), "%s", m ? err.message : "no model");
  bb_cpu_session *fused = NULL, *plain = NULL;
  if (g) fused_and_plain(g->model, &fused, &plain);
  CHECK_MSG(fused && fused_transposes(fused) == 3, "%zu weight gradients' Transposes fused, want 3",
            fused ? fused_transposes(fused) : 0);
  rng_state = 77;
  bb_tensor *ins[2] = {optest_rand(BB_DTYPE_FLOAT, 4, (const int64_t[]){6, 3, 17, 16}, -1, 1),
                       bb_tensor_new_empty(NULL, BB_DTYPE_INT64, 1, (const int64_t[]){6})};
  for (int i = 0; i < 6; i++) ((int64_t *)bb_tensor_data(ins[1]))[i] = (i * 3) % 10;
  const char *names[2] = {"x", "labels"};
  const size_t n_out = plain ? bb_cpu_session_output_count(plain) : 0;
  bb_tensor **ref = calloc(n_out + 1, sizeof *ref), **got = calloc(n_out + 1, sizeof *got);
  CHECK_MSG(!plain || !bb_cpu_session_run(plain, names, ins, 2, ref, &err), "%s", err.message);
  for (size_t threads = 1; plain && fused && ref[0] && threads <= most_threads(); threads++) {
    if (set_threads(threads)) break;
    CHECK_MSG(!bb_cpu_session_run(fused, names, ins, 2, got, &err), "%s", err.message);
    CHECK_MSG(produced_bytes(fused) < produced_bytes(plain), "the Convs did not write the Transposes' layout");
    for (size_t k = 0; k < n_out; k++) {
      CHECK_MSG(same_bits(got[k], ref[k]), "%s differs on %zu threads with the fused Transposes",
                bb_cpu_session_output_name(fused, k), threads);
      bb_tensor_release(got[k]), got[k] = NULL;
    }
  }
  set_threads(1);
  for (size_t k = 0; k < n_out; k++) bb_tensor_release(ref[k]);
  free(ref), free(got);
  bb_tensor_release(ins[0]), bb_tensor_release(ins[1]);
  bb_cpu_session_free(fused), bb_cpu_session_free(plain);
  bb_grad_graph_free(g);
  bb_model_free(m);
}

int main(void) {
  RUN(test_session_fused_conv_transpose);
  RUN(test_session_fused_weight_grads);
  return bb_test_finish();
}
