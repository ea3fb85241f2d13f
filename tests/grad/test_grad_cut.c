/* Cuts and upstream gradients as a confused author or a lying peer would use them: a cut
 * that does not separate the graph, names that are no values, an upstream value that is
 * not floating point or depends on nothing trained; and the trainer's two-call step fed a
 * gradient of the wrong shape, a non-finite one, or none at all. Every refusal names what
 * was wrong and changes nothing. */
#include "fixture.h"

#define MODELS BB_TEST_SOURCE_DIR "/examples/models/"
#define GRAD BB_TEST_SOURCE_DIR "/tests/data/grad/"

#define EXPECT_CUT_ERROR(model, ins, n_ins, outs, n_outs, code, ...)                                   \
  do {                                                                                                 \
    bb_grad_cut_options o_ = {sizeof o_, ins, n_ins, outs, n_outs};                                    \
    bb_model *p_ = NULL;                                                                               \
    bb_error e_;                                                                                       \
    bb_error_clear(&e_);                                                                               \
    int rc_ = bb_grad_cut(model, &o_, NULL, &p_, &e_);                                                 \
    CHECK_MSG(rc_ == (code), "rc %d (%s), expected %d", rc_, e_.message, (int)(code));                 \
    const char *want_[] = {__VA_ARGS__, NULL};                                                         \
    for (int i_ = 0; want_[i_]; i_++) CHECK_MSG(strstr(e_.message, want_[i_]), "\"%s\" lacks \"%s\"", e_.message, want_[i_]); \
    CHECK(!p_);                                                                                        \
  } while (0)

static void test_cuts_that_do_not_separate(void) {
  bb_model *tf = gt_load(GRAD "transformer.onnx"), *cnn = gt_load(MODELS "digits_cnn.onnx");
  CHECK(tf && cnn);
  /* the residual stream passes around a cut at the second LayerNormalization alone */
  const char *ln2[] = {"/ln2/LayerNormalization_output_0"};
  EXPECT_CUT_ERROR(tf, ln2, 1, NULL, 0, BB_ERR_INVALID_ARGUMENT, "does not separate the graph", "tokens");
  /* the outputs come before the inputs: they depend on the model's input, not on the cut */
  const char *late[] = {"/MaxPool_1_output_0"}, *early[] = {"/Relu_output_0"};
  EXPECT_CUT_ERROR(cnn, late, 1, early, 1, BB_ERR_INVALID_ARGUMENT, "does not separate the graph", "pixels");
  /* an input the outputs do not depend on */
  const char *both[] = {"/Relu_output_0", "/Relu_1_output_0"}, *pool0[] = {"/MaxPool_output_0"};
  EXPECT_CUT_ERROR(cnn, both, 2, pool0, 1, BB_ERR_INVALID_ARGUMENT, "do not depend on /Relu_1_output_0");
  bb_model_free(tf);
  bb_model_free(cnn);
}

static void test_cut_names(void) {
  bb_model *cnn = gt_load(MODELS "digits_cnn.onnx");
  const char *nothing[] = {"conv_out"}, *weight[] = {"conv1.weight"}, *twice[] = {"/Relu_output_0", "/Relu_output_0"};
  const char *relu[] = {"/Relu_output_0"};
  EXPECT_CUT_ERROR(cnn, nothing, 1, NULL, 0, BB_ERR_NOT_FOUND, "conv_out", "no value of the graph");
  EXPECT_CUT_ERROR(cnn, weight, 1, NULL, 0, BB_ERR_INVALID_ARGUMENT, "conv1.weight", "initializer");
  EXPECT_CUT_ERROR(cnn, twice, 2, NULL, 0, BB_ERR_INVALID_ARGUMENT, "twice");
  EXPECT_CUT_ERROR(cnn, relu, 1, relu, 1, BB_ERR_INVALID_ARGUMENT, "both an input and an output");
  bb_grad_cut_options bad;
  memset(&bad, 0, sizeof bad);
  bad.struct_size = 1;
  bb_model *p = NULL;
  bb_error err;
  CHECK_EQ_INT(bb_grad_cut(cnn, &bad, NULL, &p, &err), BB_ERR_INVALID_ARGUMENT);
  bb_model_free(cnn);
}

/* The part after the convolutions: typed inputs ([batch, 32, 2, 2], the batch symbolic),
 * only the initializers it reads, the model's output. */
static void test_cut_is_a_model(void) {
  bb_model *cnn = gt_load(MODELS "digits_cnn.onnx"), *top = NULL;
  const char *pool[] = {"/MaxPool_1_output_0"};
  bb_grad_cut_options o = {sizeof o, pool, 1, NULL, 0};
  bb_error err;
  CHECK_MSG(!bb_grad_cut(cnn, &o, NULL, &top, &err), "%s", err.message);
  if (!top) return;
  CHECK_EQ_INT(top->graph->inputs.len, 1);
  const bb_type *t = top->graph->inputs.items[0]->type;
  CHECK(t && t->elem_type == BB_DTYPE_FLOAT && t->shape && t->shape->rank == 4);
  if (t && t->shape && t->shape->rank == 4) {
    CHECK(t->shape->dims[0].kind == BB_DIM_PARAM && strcmp(t->shape->dims[0].param, "batch") == 0);
    CHECK(t->shape->dims[1].value == 32 && t->shape->dims[2].value == 2 && t->shape->dims[3].value == 2);
  }
  CHECK_EQ_INT(top->graph->initializers.len, 4); /* fc1 and fc2, weight and bias */
  CHECK_STR(top->graph->outputs.items[0]->name, "logits");
  bb_model_free(top);
  bb_model_free(cnn);
}

#define EXPECT_BUILD_ERROR(model, o, code, ...)                                                         \
  do {                                                                                                \
    bb_grad_graph *g_ = NULL;                                                                         \
    bb_error e_;                                                                                      \
    bb_error_clear(&e_);                                                                              \
    int rc_ = bb_grad_build(model, o, NULL, &g_, &e_);                                                \
    CHECK_MSG(rc_ == (code), "rc %d (%s), expected %d", rc_, e_.message, (int)(code));                \
    const char *want_[] = {__VA_ARGS__, NULL};                                                        \
    for (int i_ = 0; want_[i_]; i_++) CHECK_MSG(strstr(e_.message, want_[i_]), "\"%s\" lacks \"%s\"", e_.message, want_[i_]); \
    CHECK(!g_);                                                                                       \
  } while (0)

static void test_upstream_refusals(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "w", 2, (int64_t[]){3, 2});
  fx_input(&f, "x", fx_random(BB_DTYPE_DOUBLE, 2, (int64_t[]){4, 3}, -1, 1), NULL);
  fx_input(&f, "k", fx_random(BB_DTYPE_DOUBLE, 2, (int64_t[]){4, 2}, -1, 1), NULL);
  fx_node(&f, "MatMul", NULL, "x,w", "y");
  fx_node(&f, "Shape", NULL, "y", "s");
  fx_node(&f, "Relu", NULL, "k", "kr");
  bb_vilist_add(f.m, &f.m->graph->outputs, "y", bb_type_new_tensor(f.m, BB_DTYPE_DOUBLE, -1, NULL));
  bb_grad_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.loss = BB_GRAD_LOSS_UPSTREAM;
  const char *shape[] = {"s"}, *kr[] = {"kr"}, *missing[] = {"z"}, *twice[] = {"y", "y"}, *x[] = {"x"}, *w[] = {"w"};
  o.upstream = shape, o.n_upstream = 1;
  EXPECT_BUILD_ERROR(f.m, &o, BB_ERR_TYPE, "output s is int64");
  o.upstream = kr;
  EXPECT_BUILD_ERROR(f.m, &o, BB_ERR_INVALID_ARGUMENT, "output kr depends on no trainable parameter");
  o.upstream = missing;
  EXPECT_BUILD_ERROR(f.m, &o, BB_ERR_NOT_FOUND, "no value named z");
  o.upstream = twice, o.n_upstream = 2;
  EXPECT_BUILD_ERROR(f.m, &o, BB_ERR_INVALID_ARGUMENT, "y is listed twice");
  o.upstream = x, o.n_upstream = 1;
  EXPECT_BUILD_ERROR(f.m, &o, BB_ERR_INVALID_ARGUMENT, "x is not computed by the graph");
  o.upstream = NULL, o.n_upstream = 0;
  o.input_grads = w, o.n_input_grads = 1;
  EXPECT_BUILD_ERROR(f.m, &o, BB_ERR_NOT_FOUND, "input w", "not a data input");
  const char *xx[] = {"x", "x"};
  o.input_grads = xx, o.n_input_grads = 2;
  EXPECT_BUILD_ERROR(f.m, &o, BB_ERR_INVALID_ARGUMENT, "input x is listed twice");
  /* an operator without a gradient between an input whose gradient is asked and the output */
  fx_node(&f, "Sin", NULL, "x", "sx");
  const char *sx[] = {"sx"};
  o.upstream = sx, o.n_upstream = 1, o.input_grads = x, o.n_input_grads = 1;
  EXPECT_BUILD_ERROR(f.m, &o, BB_ERR_UNSUPPORTED, "node sx (Sin) is on a path from input x to the output sx");
  o.upstream = NULL, o.n_upstream = 0;
  /* an input the output does not depend on gets zeros, and a warning says so */
  const char *k[] = {"k", "x"};
  o.input_grads = k, o.n_input_grads = 2;
  bb_grad_graph *g = NULL;
  bb_error err;
  CHECK_MSG(!bb_grad_build(f.m, &o, NULL, &g, &err), "%s", err.message);
  if (g) {
    CHECK_EQ_INT(g->n_warnings, 1);
    CHECK(g->n_warnings && strstr(g->warnings[0], "input k does not reach the output y"));
    CHECK(g->loss == NULL && g->n_upstream == 1 && g->n_input_grads == 2);
  }
  bb_grad_graph_free(g);
  for (size_t i = 0; i < f.n_inputs; i++) bb_tensor_release(f.values[i]);
  bb_model_free(f.m);
}

/* The lenet's first block as a part whose gradients come in, with a trainer. */
typedef struct part {
  bb_model *whole, *model;
  bb_grad_graph *g;
  bb_grad_optimizer *opt;
  bb_grad_trainer *t;
  bb_tensor *x;
} part;

static bool part_open(part *p) {
  memset(p, 0, sizeof *p);
  bb_error err;
  p->whole = gt_load(GRAD "lenet.onnx");
  const char *pool[] = {"/MaxPool_output_0"};
  bb_grad_cut_options co = {sizeof co, NULL, 0, pool, 1};
  bb_grad_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.loss = BB_GRAD_LOSS_UPSTREAM;
  bb_optimizer_config c = bb_optimizer_defaults(BB_OPTIMIZER_MOMENTUM);
  int rc = bb_grad_cut(p->whole, &co, NULL, &p->model, &err);
  if (!rc) rc = bb_grad_build(p->model, &o, NULL, &p->g, &err);
  if (!rc) rc = bb_grad_optimizer_build(p->g, &c, &p->opt, &err);
  if (!rc) rc = bb_grad_trainer_new(p->g, p->opt, 0, NULL, &p->t, &err);
  CHECK_MSG(!rc, "%s", err.message);
  p->x = fx_random(BB_DTYPE_FLOAT, 4, (int64_t[]){4, 1, 8, 8}, -1, 1);
  return !rc;
}

static void part_close(part *p) {
  bb_tensor_release(p->x);
  bb_grad_trainer_free(p->t);
  bb_grad_optimizer_free(p->opt);
  bb_grad_graph_free(p->g);
  bb_model_free(p->model);
  bb_model_free(p->whole);
}

static bb_tensor *weights(part *p) {
  const bb_tensor *w = bb_grad_trainer_value(p->t, "conv1.weight");
  bb_tensor *copy = bb_tensor_new_empty(NULL, w->dtype, w->rank, w->dims);
  memcpy(bb_tensor_data(copy), bb_tensor_data(w), bb_tensor_nbytes(w));
  return copy;
}

static bool same(const bb_tensor *a, const bb_tensor *b) {
  return bb_tensor_same_shape(a, b) && !memcmp(bb_tensor_data(a), bb_tensor_data(b), bb_tensor_nbytes(a));
}

static void test_backward_from_a_lying_peer(void) {
  part p;
  if (!part_open(&p)) {
    part_close(&p);
    return;
  }
  const char *names[] = {"x"};
  bb_error err;
  bb_grad_step st;
  bb_tensor *w0 = weights(&p), *y = NULL;
  /* no forward waits */
  CHECK_EQ_INT(bb_grad_trainer_backward(p.t, &p.x, 1, &st, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "no forward waits"));
  CHECK(!bb_grad_trainer_forward(p.t, names, &p.x, 1, &y, &err));
  CHECK(y && y->rank == 4 && y->dims[1] == 4 && y->dims[2] == 4);
  /* a gradient of another shape: an error naming both shapes, the step lost */
  bb_tensor *wrong = fx_random(BB_DTYPE_FLOAT, 4, (int64_t[]){4, 4, 4, 3}, -1, 1);
  CHECK_EQ_INT(bb_grad_trainer_backward(p.t, &wrong, 1, &st, &err), BB_ERR_TYPE);
  CHECK(strstr(err.message, "float32[4,4,4,3]") && strstr(err.message, "float32[4,4,4,4]"));
  CHECK_EQ_INT(bb_grad_trainer_backward(p.t, &wrong, 1, &st, &err), BB_ERR_INVALID_ARGUMENT);
  bb_tensor *w1 = weights(&p);
  CHECK(same(w0, w1));
  /* a non-finite gradient: refused and counted, nothing changes */
  bb_tensor *nan = fx_random(BB_DTYPE_FLOAT, 4, y->dims, -1, 1);
  ((float *)bb_tensor_data(nan))[17] = NAN;
  bb_tensor_release(y);
  CHECK(!bb_grad_trainer_forward(p.t, names, &p.x, 1, &y, &err));
  CHECK(!bb_grad_trainer_backward(p.t, &nan, 1, &st, &err) && !st.applied);
  CHECK_EQ_INT(bb_grad_trainer_refused(p.t), 1);
  bb_tensor *w2 = weights(&p);
  CHECK(same(w0, w2));
  /* a good gradient after all that is applied */
  bb_tensor *good = fx_random(BB_DTYPE_FLOAT, 4, y->dims, -1, 1);
  CHECK(!bb_grad_trainer_forward(p.t, names, &p.x, 1, NULL, &err));
  CHECK(!bb_grad_trainer_backward(p.t, &good, 1, &st, &err) && st.applied && isnan(st.loss));
  bb_tensor *w3 = weights(&p);
  CHECK(!same(w0, w3));
  CHECK_EQ_INT(bb_grad_trainer_steps(p.t), 2);
  /* a second forward replaces the first: one backward, then none waits */
  CHECK(!bb_grad_trainer_forward(p.t, names, &p.x, 1, NULL, &err));
  CHECK(!bb_grad_trainer_forward(p.t, names, &p.x, 1, NULL, &err));
  CHECK(!bb_grad_trainer_backward(p.t, &good, 1, &st, &err) && st.applied);
  CHECK_EQ_INT(bb_grad_trainer_backward(p.t, &good, 1, &st, &err), BB_ERR_INVALID_ARGUMENT);
  bb_tensor *ws[] = {w0, w1, w2, w3, wrong, nan, good, y};
  for (size_t i = 0; i < sizeof ws / sizeof *ws; i++) bb_tensor_release(ws[i]);
  part_close(&p);
}

/* Warm steps of a part's two phases take nothing from the allocator. */
static void test_warm_phases_allocate_nothing(void) {
  part p;
  if (!part_open(&p)) {
    part_close(&p);
    return;
  }
  const char *names[] = {"x"};
  bb_tensor *up = fx_random(BB_DTYPE_FLOAT, 4, (int64_t[]){4, 4, 4, 4}, -1, 1);
  bb_error err;
  bb_grad_step st;
  uint64_t allocations = 0;
  for (int i = 0; i < 6; i++) {
    CHECK(!bb_grad_trainer_forward(p.t, names, &p.x, 1, NULL, &err));
    CHECK(!bb_grad_trainer_backward(p.t, &up, 1, &st, &err) && st.applied);
    bb_grad_trainer_memory_stats m;
    bb_grad_trainer_memory(p.t, &m);
    if (i == 3) allocations = m.allocations;
    if (i == 5) CHECK_MSG(m.allocations == allocations, "warm steps allocated %llu times", (unsigned long long)(m.allocations - allocations));
  }
  bb_tensor_release(up);
  part_close(&p);
}

int main(void) {
  RUN(test_cuts_that_do_not_separate);
  RUN(test_cut_names);
  RUN(test_cut_is_a_model);
  RUN(test_upstream_refusals);
  RUN(test_backward_from_a_lying_peer);
  RUN(test_warm_phases_allocate_nothing);
  return bb_test_finish();
}
