/* What the gradient builder refuses, and how it says so: each message names the node,
 * value or parameter at fault. Also: a parameter the loss does not depend on is a warning,
 * one it depends on only through operators without a gradient is an error, buffers and
 * frozen initializers are not trained, and every allocation failure is reported without a
 * leak. */
#include "bb/artifact.h"
#include "failalloc.h"
#include "fixture.h"

static int build(fx *f, const bb_grad_options *o, bb_grad_graph **g, bb_error *err) {
  bb_grad_options dflt;
  memset(&dflt, 0, sizeof dflt);
  dflt.struct_size = sizeof dflt;
  if (!o) {
    dflt.params = f->params;
    dflt.n_params = f->n_params;
    o = &dflt;
  }
  *g = NULL;
  return bb_grad_build(f->m, o, NULL, g, err);
}

#define EXPECT_ERROR(f, o, code, ...)                                                        \
  do {                                                                                       \
    bb_grad_graph *g_;                                                                       \
    bb_error e_;                                                                             \
    bb_error_clear(&e_);                                                                     \
    int rc_ = build(f, o, &g_, &e_);                                                         \
    CHECK_MSG(rc_ == (code), "rc %d (%s), expected %d", rc_, e_.message, (int)(code));       \
    const char *want_[] = {__VA_ARGS__, NULL};                                               \
    for (int i_ = 0; want_[i_]; i_++)                                                        \
      CHECK_MSG(strstr(e_.message, want_[i_]), "\"%s\" lacks \"%s\"", e_.message, want_[i_]); \
    CHECK(!g_);                                                                              \
  } while (0)

static void test_op_without_gradient(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "p", 1, (int64_t[]){3});
  fx_node(&f, "Sin", NULL, "p", "s");
  fx_loss(&f, "s");
  EXPECT_ERROR(&f, NULL, BB_ERR_UNSUPPORTED, "node s (Sin)", "parameter p", "has no gradient");
  fx_free(&f);
}

static void test_integer_only_path(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "p", 2, (int64_t[]){2, 3});
  fx_node(&f, "ArgMax", NULL, "p", "idx");
  bb_ir_node *c = fx_node(&f, "Cast", NULL, "idx", "y");
  bb_attr_set_int(f.m, &c->attrs, "to", BB_DTYPE_DOUBLE);
  fx_loss(&f, "y");
  EXPECT_ERROR(&f, NULL, BB_ERR_TYPE, "the loss loss depends on parameter p", "node idx (ArgMax)");
  fx_free(&f);
}

static void test_parameter_not_reaching_the_loss_warns(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "p", 1, (int64_t[]){3});
  fx_param(&f, "unused", 1, (int64_t[]){2});
  fx_param(&f, "shape_only", 1, (int64_t[]){3});
  fx_node(&f, "Shape", NULL, "shape_only", "s");
  fx_node(&f, "Reshape", NULL, "p,s", "y");
  fx_loss(&f, "y");
  bb_grad_graph *g;
  bb_error err;
  CHECK(!build(&f, NULL, &g, &err));
  CHECK(g && g->n_params == 1 && strcmp(g->params[0], "p") == 0);
  CHECK(g && g->n_warnings == 2);
  for (size_t i = 0; g && i < g->n_warnings; i++) CHECK(strstr(g->warnings[i], "does not reach the loss"));
  CHECK(g && strstr(g->warnings[0], "unused") && strstr(g->warnings[1], "shape_only"));
  bb_grad_graph_free(g);
  fx_free(&f);
}

/* A parameter whose every path to the loss passes an operator without a gradient would stay
 * untrained while the rest trains: refused, naming the parameter and the operator, unless
 * it is frozen. */
static void test_parameter_cut_from_the_loss_is_refused(void) {
  static const char *const ops[] = {"Floor", "Round", "ArgMax"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    fx f;
    fx_init(&f, 17);
    fx_param(&f, "p", 1, (int64_t[]){3});
    fx_param(&f, "cut", 1, (int64_t[]){3});
    fx_node(&f, ops[i], NULL, "cut", "c");
    const char *path = "c";
    if (strcmp(ops[i], "ArgMax") == 0) { /* an index back to floating point */
      bb_ir_node *cast = fx_node(&f, "Cast", NULL, "c", "cf");
      bb_attr_set_int(f.m, &cast->attrs, "to", BB_DTYPE_DOUBLE);
      path = "cf";
    }
    char inputs[16];
    snprintf(inputs, sizeof inputs, "p,%s", path);
    fx_node(&f, "Add", NULL, inputs, "y");
    fx_loss(&f, "y");
    char label[64];
    snprintf(label, sizeof label, "node c (%s)", ops[i]);
    EXPECT_ERROR(&f, NULL, BB_ERR_UNSUPPORTED, "parameter cut reaches the loss loss only through values without a gradient",
                 label, "freeze cut");
    bb_grad_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.freeze = (const char *[]){"cut"};
    o.n_freeze = 1;
    bb_grad_graph *g;
    bb_error err;
    CHECK_MSG(!build(&f, &o, &g, &err), "%s frozen: %s", ops[i], err.message);
    CHECK(g && g->n_params == 1 && strcmp(g->params[0], "p") == 0 && g->n_warnings == 0);
    bb_grad_graph_free(g);
    o.freeze = (const char *[]){"nope"};
    EXPECT_ERROR(&f, &o, BB_ERR_NOT_FOUND, "frozen parameter nope is not an initializer");
    o.freeze = (const char *[]){"p"};
    o.params = (const char *[]){"p"};
    o.n_params = 1;
    EXPECT_ERROR(&f, &o, BB_ERR_INVALID_ARGUMENT, "parameter p is both trained and frozen");
    fx_free(&f);
  }
}

/* The initializers the model's metadata names as buffers are never trained. */
static void test_buffers_are_not_trained(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "w", 1, (int64_t[]){3});
  fx_param(&f, "mean", 1, (int64_t[]){3});
  fx_param(&f, "std", 1, (int64_t[]){3});
  fx_node(&f, "Sub", NULL, "w,mean", "centred");
  fx_node(&f, "Div", NULL, "centred,std", "y");
  fx_loss(&f, "y");
  bb_kv_upsert(f.m, &f.m->metadata, BB_KEY_BUFFERS, "mean,std,not_exported");
  bb_grad_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  bb_grad_graph *g;
  bb_error err;
  CHECK_MSG(!build(&f, &o, &g, &err), "%s", err.message);
  CHECK(g && g->n_params == 1 && strcmp(g->params[0], "w") == 0 && g->n_warnings == 0);
  bb_grad_graph_free(g);
  o.struct_size = 0; /* an options struct without its size */
  EXPECT_ERROR(&f, &o, BB_ERR_INVALID_ARGUMENT, "struct_size 0");
  o.struct_size = sizeof o + 8;
  EXPECT_ERROR(&f, &o, BB_ERR_INVALID_ARGUMENT, "this library knows");
  fx_free(&f);
}

static void test_named_parameters_are_checked(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "p", 1, (int64_t[]){3});
  fx_ints(&f, "shape", (int64_t[]){3}, 1);
  fx_node(&f, "Reshape", NULL, "p,shape", "y");
  fx_loss(&f, "y");
  bb_grad_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.params = (const char *[]){"nope"};
  o.n_params = 1;
  EXPECT_ERROR(&f, &o, BB_ERR_NOT_FOUND, "parameter nope is not an initializer");
  o.params = (const char *[]){"y"};
  EXPECT_ERROR(&f, &o, BB_ERR_NOT_FOUND, "parameter y is not an initializer");
  o.params = (const char *[]){"p", "p"};
  o.n_params = 2;
  EXPECT_ERROR(&f, &o, BB_ERR_INVALID_ARGUMENT, "parameter p is listed twice");
  fx_free(&f);
  fx_init(&f, 17);
  bb_tensor_proto *ip = bb_tensor_proto_new(f.m, "counts", BB_DTYPE_INT64, 1, (int64_t[]){2});
  bb_tensor_proto_set_raw(f.m, ip, (int64_t[]){1, 2}, 16);
  bb_tensorlist_append(f.m, &f.m->graph->initializers, ip);
  bb_ir_node *c = fx_node(&f, "Cast", NULL, "counts", "y");
  bb_attr_set_int(f.m, &c->attrs, "to", BB_DTYPE_DOUBLE);
  fx_loss(&f, "y");
  o.params = (const char *[]){"counts"};
  o.n_params = 1;
  EXPECT_ERROR(&f, &o, BB_ERR_TYPE, "parameter counts is int64, not floating point");
  memset(&o, 0, sizeof o); /* by default: no floating-point initializer at all */
  o.struct_size = sizeof o;
  EXPECT_ERROR(&f, &o, BB_ERR_INVALID_ARGUMENT, "the loss loss depends on no trainable parameter");
  /* dims that promise a million values over three: optimizer state would be sized from them */
  bb_tensor_proto *big = bb_tensor_proto_new(f.m, "big", BB_DTYPE_DOUBLE, 1, (int64_t[]){1000000});
  bb_tensor_proto_set_raw(f.m, big, (double[]){1, 2, 3}, 24);
  bb_tensorlist_append(f.m, &f.m->graph->initializers, big);
  EXPECT_ERROR(&f, &o, BB_ERR_MALFORMED, "parameter big: its data (3 values) does not match its dims");
  fx_free(&f);
}

/* A small classifier for the built-in losses: logits [N, 3] from x [N, 4] (N a symbol). */
static void classifier(fx *f) {
  fx_init(f, 17);
  fx_param(f, "w", 2, (int64_t[]){4, 3});
  fx_input(f, "x", fx_random(BB_DTYPE_DOUBLE, 2, (int64_t[]){5, 4}, -1, 1), (const char *[]){"N", NULL});
  fx_node(f, "MatMul", NULL, "x,w", "logits");
  bb_vilist_add(f->m, &f->m->graph->outputs, "logits", bb_type_new_tensor(f->m, BB_DTYPE_DOUBLE, -1, NULL));
}

static void test_targets_are_checked(void) {
  fx f;
  classifier(&f);
  bb_grad_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.loss = BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY;
  bb_grad_graph *g;
  bb_error err;
  CHECK(!build(&f, &o, &g, &err)); /* a new int64 input "target" [N] */
  const bb_value_info *t = g ? bb_vilist_find(&g->model->graph->inputs, "target") : NULL;
  CHECK(t && t->type->elem_type == BB_DTYPE_INT64 && t->type->shape->rank == 1);
  CHECK(t && t->type->shape->dims[0].kind == BB_DIM_PARAM && strcmp(t->type->shape->dims[0].param, "N") == 0);
  CHECK(g && g->target && strcmp(g->target, "target") == 0 && strcmp(g->prediction, "logits") == 0);
  bb_grad_graph_free(g);
  /* an existing input of the wrong type or shape */
  fx_input(&f, "labels", fx_random(BB_DTYPE_DOUBLE, 1, (int64_t[]){5}, 0, 1), (const char *[]){"N"});
  o.target = "labels";
  EXPECT_ERROR(&f, &o, BB_ERR_TYPE, "target labels is double", "softmax cross-entropy of logits", "int64 or int32 class labels");
  o.loss = BB_GRAD_LOSS_MSE;
  EXPECT_ERROR(&f, &o, BB_ERR_TYPE, "target labels has rank 1", "mean squared error of logits (rank 2) needs rank 2");
  fx_input(&f, "wide", fx_random(BB_DTYPE_DOUBLE, 2, (int64_t[]){5, 4}, 0, 1), (const char *[]){"N", NULL});
  o.target = "wide";
  EXPECT_ERROR(&f, &o, BB_ERR_TYPE, "target wide has 4 in dim 1 where mean squared error of logits needs 3");
  o.target = "w"; /* a name the graph uses for something else */
  EXPECT_ERROR(&f, &o, BB_ERR_EXISTS, "w already names a value");
  fx_free(&f);
}

static void test_losses_must_fit(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "w", 1, (int64_t[]){3});
  fx_node(&f, "Relu", NULL, "w", "v");
  bb_vilist_add(f.m, &f.m->graph->outputs, "v", bb_type_new_tensor(f.m, BB_DTYPE_DOUBLE, -1, NULL));
  bb_grad_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  EXPECT_ERROR(&f, &o, BB_ERR_TYPE, "the loss v must be a scalar");
  o.loss = BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY;
  EXPECT_ERROR(&f, &o, BB_ERR_TYPE, "needs logits [N, C, ...]; the prediction v has rank 1");
  o.loss = BB_GRAD_LOSS_MSE;
  o.output = "missing";
  EXPECT_ERROR(&f, &o, BB_ERR_NOT_FOUND, "the graph has no value named missing");
  fx_free(&f);
}

static void test_unsupported_forms_name_the_node(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "p", 1, (int64_t[]){6});
  fx_ints(&f, "s", (int64_t[]){0}, 1);
  fx_ints(&f, "e", (int64_t[]){6}, 1);
  fx_ints(&f, "a", (int64_t[]){0}, 1);
  fx_ints(&f, "st", (int64_t[]){2}, 1);
  fx_node(&f, "Slice", NULL, "p,s,e,a,st", "y");
  fx_loss(&f, "y");
  EXPECT_ERROR(&f, NULL, BB_ERR_UNSUPPORTED, "node y (Slice)", "step 2");
  fx_free(&f);
  fx_init(&f, 17); /* Dropout whose training_mode is computed */
  fx_param(&f, "p", 1, (int64_t[]){6});
  fx_input(&f, "flag", bb_tensor_new_zeros(NULL, BB_DTYPE_BOOL, 0, NULL), NULL);
  fx_node(&f, "Dropout", NULL, "p,,flag", "y");
  fx_loss(&f, "y");
  EXPECT_ERROR(&f, NULL, BB_ERR_UNSUPPORTED, "node y (Dropout): training_mode must be a constant");
  fx_free(&f);
  fx_init(&f, 17); /* the loss reads LayerNormalization's Mean, which carries no gradient */
  fx_param(&f, "p", 2, (int64_t[]){2, 3});
  fx_param(&f, "g", 1, (int64_t[]){3});
  fx_node(&f, "LayerNormalization", NULL, "p,g", "ln,mean");
  fx_node(&f, "Mul", NULL, "ln,mean", "y");
  fx_loss(&f, "y");
  EXPECT_ERROR(&f, NULL, BB_ERR_UNSUPPORTED, "output 1 (mean) of node ln (LayerNormalization)", "carries no gradient");
  fx_free(&f);
  fx_init(&f, 15); /* MaxPool's scatter needs opset 16 */
  fx_param(&f, "p", 4, (int64_t[]){1, 1, 4, 4});
  bb_ir_node *mp = fx_node(&f, "MaxPool", NULL, "p", "y");
  bb_attr_set_ints(f.m, &mp->attrs, "kernel_shape", (int64_t[]){2, 2}, 2);
  fx_loss(&f, "y");
  EXPECT_ERROR(&f, NULL, BB_ERR_UNSUPPORTED, "node y (MaxPool)", "opset 16");
  fx_free(&f);
  fx_init(&f, 17); /* Conv over spatial dims only the run knows */
  fx_param(&f, "w", 4, (int64_t[]){1, 1, 2, 2});
  fx_input(&f, "x", fx_random(BB_DTYPE_DOUBLE, 4, (int64_t[]){1, 1, 4, 4}, -1, 1), (const char *[]){NULL, NULL, "H", "W"});
  fx_node(&f, "Conv", NULL, "x,w", "y");
  fx_loss(&f, "y");
  EXPECT_ERROR(&f, NULL, BB_ERR_UNSUPPORTED, "node y (Conv)", "spatial dims of x");
  fx_free(&f);
}

/* The recurrent gradient is float32 only: a float64 LSTM is refused by name. */
static void test_recurrent_float64_refused(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "w", 3, (int64_t[]){1, 8, 3});
  fx_param(&f, "r", 3, (int64_t[]){1, 8, 2});
  fx_input(&f, "x", fx_random(BB_DTYPE_DOUBLE, 3, (int64_t[]){4, 1, 3}, -1, 1), NULL);
  bb_ir_node *n = fx_node(&f, "LSTM", NULL, "x,w,r", "y");
  bb_attr_set_int(f.m, &n->attrs, "hidden_size", 2);
  fx_loss(&f, "y");
  EXPECT_ERROR(&f, NULL, BB_ERR_UNSUPPORTED, "node y (LSTM)", "float32 only, not double");
  fx_free(&f);
}

static void test_malformed_graphs(void) {
  fx f;
  fx_init(&f, 12);
  fx_param(&f, "p", 1, (int64_t[]){3});
  fx_loss(&f, "p");
  EXPECT_ERROR(&f, NULL, BB_ERR_UNSUPPORTED, "opset 13 or newer; the model imports 12");
  fx_free(&f);
  fx_init(&f, 17);
  fx_param(&f, "p", 1, (int64_t[]){3});
  fx_node(&f, "Relu", NULL, "later", "y");
  fx_node(&f, "Relu", NULL, "p", "later");
  fx_loss(&f, "y");
  EXPECT_ERROR(&f, NULL, BB_ERR_MALFORMED, "node y (Relu) reads later");
  fx_free(&f);
  fx_init(&f, 17);
  fx_param(&f, "p", 1, (int64_t[]){3});
  fx_node(&f, "Relu", NULL, "p", "y");
  fx_node(&f, "Neg", NULL, "p", "y");
  fx_loss(&f, "y");
  EXPECT_ERROR(&f, NULL, BB_ERR_MALFORMED, "defines y, which is already defined");
  fx_free(&f);
}

/* Every allocation the build makes may fail: the result is an error (never a crash), and
 * nothing is left allocated. */
static void test_allocation_failures(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "w", 4, (int64_t[]){2, 1, 3, 3});
  fx_param(&f, "s", 1, (int64_t[]){2});
  fx_input(&f, "x", fx_random(BB_DTYPE_DOUBLE, 4, (int64_t[]){2, 1, 5, 5}, -1, 1), (const char *[]){"N", NULL, NULL, NULL});
  fx_node(&f, "Conv", NULL, "x,w", "c");
  fx_node(&f, "LayerNormalization", NULL, "c,s", "y");
  fx_loss(&f, "y");
  bb_grad_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  long ok_at = -1;
  for (long budget = 0; budget < 100000 && ok_at < 0; budget += budget < 200 ? 1 : 37) {
    failing fa = {budget, 0};
    bb_allocator a = failing_allocator(&fa);
    bb_grad_graph *g = NULL;
    bb_error err;
    int rc = bb_grad_build(f.m, &o, &a, &g, &err);
    if (!rc) {
      ok_at = budget;
      CHECK(g && g->n_params == 2);
      bb_grad_graph_free(g);
    } else {
      CHECK_MSG(rc == BB_ERR_NOMEM, "budget %ld: %d %s", budget, rc, err.message);
    }
    CHECK_MSG(fa.live == 0, "budget %ld: %ld blocks leaked", budget, fa.live);
  }
  CHECK(ok_at > 0);
  fx_free(&f);
}

int main(void) {
  RUN(test_op_without_gradient);
  RUN(test_integer_only_path);
  RUN(test_parameter_not_reaching_the_loss_warns);
  RUN(test_parameter_cut_from_the_loss_is_refused);
  RUN(test_buffers_are_not_trained);
  RUN(test_named_parameters_are_checked);
  RUN(test_targets_are_checked);
  RUN(test_losses_must_fit);
  RUN(test_unsupported_forms_name_the_node);
  RUN(test_recurrent_float64_refused);
  RUN(test_malformed_graphs);
  RUN(test_allocation_failures);
  return bb_test_finish();
}
