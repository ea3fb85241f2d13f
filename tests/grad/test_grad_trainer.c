/* Training steps: a step with a non-finite loss is refused and counted and changes
 * nothing; inputs are checked against the graph; the state stored into the graphs
 * resumes training exactly; Dropout masks follow the trainer's seed; a small model
 * learns; allocation failures are reported without leaks; the CPU backend's limits
 * reach every session a trainer runs; and its convolutions keep the direct path's bits. */
#include "failalloc.h"
#include "fixture.h"

/* z = log((x * w)²), trained with MSE: a zero x makes the loss infinite. */
static void log_model(fx *f) {
  fx_init(f, 17);
  fx_param(f, "w", 2, (int64_t[]){1, 3});
  fx_input(f, "x", fx_random(BB_DTYPE_DOUBLE, 2, (int64_t[]){4, 3}, 0.5, 1.5), (const char *[]){"N", NULL});
  fx_node(f, "Mul", NULL, "x,w", "xw");
  fx_node(f, "Mul", NULL, "xw,xw", "sq");
  fx_node(f, "Log", NULL, "sq", "z");
  bb_vilist_add(f->m, &f->m->graph->outputs, "z", bb_type_new_tensor(f->m, BB_DTYPE_DOUBLE, -1, NULL));
}

typedef struct setup {
  bb_grad_graph *g;
  bb_grad_optimizer *o;
  bb_grad_trainer *t;
} setup;

static bool make(fx *f, bb_grad_loss loss, bb_optimizer_kind kind, uint64_t seed, setup *s) {
  memset(s, 0, sizeof *s);
  bb_grad_options opt;
  memset(&opt, 0, sizeof opt);
  opt.struct_size = sizeof opt;
  opt.loss = loss;
  bb_error err;
  bb_optimizer_config c = bb_optimizer_defaults(kind);
  c.lr = 0.05f;
  int rc = bb_grad_build(f->m, &opt, NULL, &s->g, &err);
  if (!rc) rc = bb_grad_optimizer_build(s->g, &c, &s->o, &err);
  if (!rc) rc = bb_grad_trainer_new(s->g, s->o, seed, NULL, &s->t, &err);
  CHECK_MSG(!rc, "%s", err.message);
  return !rc;
}

static void unmake(setup *s) {
  bb_grad_trainer_free(s->t);
  bb_grad_optimizer_free(s->o);
  bb_grad_graph_free(s->g);
}

static double first(const bb_tensor *t) {
  if (!t) return NAN;
  return t->dtype == BB_DTYPE_INT64 ? (double)*(const int64_t *)bb_tensor_data(t) : gt_value(t, 0);
}

static void test_non_finite_steps_are_refused(void) {
  fx f;
  log_model(&f);
  setup s;
  if (!make(&f, BB_GRAD_LOSS_MSE, BB_OPTIMIZER_ADAM, 0, &s)) return fx_free(&f);
  bb_tensor *target = fx_random(BB_DTYPE_DOUBLE, 2, (int64_t[]){4, 3}, -1, 1);
  bb_tensor *zero_x = bb_tensor_new_zeros(NULL, BB_DTYPE_DOUBLE, 2, (int64_t[]){4, 3}); /* log 0 = -inf */
  const char *names[] = {"x", "target"};
  bb_tensor *bad[] = {zero_x, target}, *good[] = {f.values[0], target};
  double w0 = first(bb_grad_trainer_value(s.t, "w")), step0 = first(bb_grad_trainer_value(s.t, "optimizer.step"));
  bb_grad_step st;
  bb_error err;
  CHECK(!bb_grad_trainer_step(s.t, names, bad, 2, &st, &err));
  CHECK(!st.applied && !isfinite(st.loss));
  CHECK_EQ_INT(bb_grad_trainer_steps(s.t), 1);
  CHECK_EQ_INT(bb_grad_trainer_refused(s.t), 1);
  CHECK(first(bb_grad_trainer_value(s.t, "w")) == w0);
  CHECK(first(bb_grad_trainer_value(s.t, "optimizer.step")) == step0);
  CHECK(!bb_grad_trainer_step(s.t, names, good, 2, &st, &err));
  CHECK(st.applied && isfinite(st.loss));
  CHECK(first(bb_grad_trainer_value(s.t, "w")) != w0);
  CHECK(first(bb_grad_trainer_value(s.t, "optimizer.step")) == 1);
  CHECK_EQ_INT(bb_grad_trainer_refused(s.t), 1);
  bb_tensor_release(target);
  bb_tensor_release(zero_x);
  unmake(&s);
  fx_free(&f);
}

static void test_inputs_are_checked(void) {
  fx f;
  log_model(&f);
  setup s;
  if (!make(&f, BB_GRAD_LOSS_MSE, BB_OPTIMIZER_SGD, 0, &s)) return fx_free(&f);
  bb_tensor *target = fx_random(BB_DTYPE_DOUBLE, 2, (int64_t[]){4, 3}, -1, 1);
  bb_tensor *narrow = fx_random(BB_DTYPE_DOUBLE, 2, (int64_t[]){4, 1}, -1, 1);
  bb_tensor *floats = fx_random(BB_DTYPE_FLOAT, 2, (int64_t[]){4, 3}, -1, 1);
  bb_tensor *wide_x = fx_random(BB_DTYPE_DOUBLE, 2, (int64_t[]){4, 5}, 0.5, 1);
  bb_grad_step st;
  bb_error err;
  CHECK_EQ_INT(bb_grad_trainer_step(s.t, (const char *[]){"x", "target"}, (bb_tensor *[]){floats, target}, 2, &st, &err), BB_ERR_TYPE);
  CHECK(strstr(err.message, "input x: the graph declares double, got float32[4,3]"));
  CHECK_EQ_INT(bb_grad_trainer_step(s.t, (const char *[]){"x", "target"}, (bb_tensor *[]){wide_x, target}, 2, &st, &err), BB_ERR_TYPE);
  CHECK_MSG(strstr(err.message, "input x: got float64[4,5], which does not fit the declared shape"), "%s", err.message);
  CHECK_EQ_INT(bb_grad_trainer_step(s.t, (const char *[]){"x", "w"}, (bb_tensor *[]){f.values[0], target}, 2, &st, &err),
               BB_ERR_NOT_FOUND);
  CHECK(strstr(err.message, "w is not a data input"));
  /* [4, 1] would broadcast against [4, 3]: the target is declared with the prediction's shape */
  CHECK_EQ_INT(bb_grad_trainer_step(s.t, (const char *[]){"x", "target"}, (bb_tensor *[]){f.values[0], narrow}, 2, &st, &err),
               BB_ERR_TYPE);
  CHECK_MSG(strstr(err.message, "input target: got float64[4,1]"), "%s", err.message);
  CHECK_EQ_INT(bb_grad_trainer_steps(s.t), 0);
  unmake(&s);
  fx_free(&f);
  /* a prediction whose dims only the run knows: the trainer compares after the run */
  log_model(&f);
  fx_input(&f, "shape", bb_tensor_new_empty(NULL, BB_DTYPE_INT64, 1, (int64_t[]){2}), NULL);
  memcpy(bb_tensor_data(f.values[1]), (int64_t[]){3, 4}, 2 * sizeof(int64_t));
  fx_node(&f, "Reshape", NULL, "z,shape", "zr");
  f.m->graph->outputs.len = 0;
  bb_vilist_add(f.m, &f.m->graph->outputs, "zr", bb_type_new_tensor(f.m, BB_DTYPE_DOUBLE, -1, NULL));
  if (!make(&f, BB_GRAD_LOSS_MSE, BB_OPTIMIZER_SGD, 0, &s)) return fx_free(&f);
  bb_tensor *row = fx_random(BB_DTYPE_DOUBLE, 2, (int64_t[]){1, 4}, -1, 1); /* would broadcast over [3, 4] */
  CHECK_EQ_INT(bb_grad_trainer_step(s.t, (const char *[]){"x", "shape", "target"}, (bb_tensor *[]){f.values[0], f.values[1], row}, 3,
                                    &st, &err),
               BB_ERR_TYPE);
  CHECK_MSG(strstr(err.message, "target target is float64[1,4], but the prediction zr is float64[3,4]"), "%s", err.message);
  bb_tensor_release(row);
  CHECK_EQ_INT(bb_grad_trainer_steps(s.t), 0);
  bb_tensor_release(target), bb_tensor_release(narrow), bb_tensor_release(floats), bb_tensor_release(wide_x);
  unmake(&s);
  fx_free(&f);
}

/* Three steps, a snapshot into the graphs (encoded and decoded), two more steps from it:
 * the same as five steps straight. */
static void test_snapshot_resumes_exactly(void) {
  fx f;
  log_model(&f);
  setup a, b;
  if (!make(&f, BB_GRAD_LOSS_MSE, BB_OPTIMIZER_ADAMW, 0, &a)) return fx_free(&f);
  bb_tensor *target = fx_random(BB_DTYPE_DOUBLE, 2, (int64_t[]){4, 3}, -1, 1);
  const char *names[] = {"x", "target"};
  bb_tensor *ins[] = {f.values[0], target};
  bb_grad_step st;
  bb_error err;
  for (int i = 0; i < 3; i++) CHECK(!bb_grad_trainer_step(a.t, names, ins, 2, &st, &err) && st.applied);
  CHECK(!bb_grad_trainer_store(a.t, a.g->model, &err));
  CHECK(!bb_grad_trainer_store(a.t, a.o->model, &err));
  /* the snapshot as bytes: both graphs carry everything */
  uint8_t *tb = NULL, *ob = NULL;
  size_t tl = 0, ol = 0;
  CHECK(!bb_model_encode(a.g->model, &tb, &tl, &err));
  CHECK(!bb_model_encode(a.o->model, &ob, &ol, &err));
  memset(&b, 0, sizeof b);
  b.g = calloc(1, sizeof *b.g);
  b.o = calloc(1, sizeof *b.o);
  *b.g = *a.g, *b.o = *a.o; /* the same names, over decoded copies */
  CHECK(!bb_model_decode(tb, tl, NULL, NULL, &b.g->model, &err) && !bb_model_decode(ob, ol, NULL, NULL, &b.o->model, &err));
  bb_buffer_free(NULL, tb), bb_buffer_free(NULL, ob);
  CHECK(!bb_grad_trainer_new(b.g, b.o, 3, NULL, &b.t, &err));
  CHECK(first(bb_grad_trainer_value(b.t, "optimizer.step")) == 3);
  for (int i = 0; i < 2; i++) {
    bb_grad_step sa, sb;
    CHECK(!bb_grad_trainer_step(a.t, names, ins, 2, &sa, &err) && !bb_grad_trainer_step(b.t, names, ins, 2, &sb, &err));
    CHECK(sa.loss == sb.loss);
  }
  const char *keys[] = {"w", "w.exp_avg", "w.exp_avg_sq", "optimizer.step"};
  for (int i = 0; i < 4; i++) {
    const bb_tensor *x = bb_grad_trainer_value(a.t, keys[i]), *y = bb_grad_trainer_value(b.t, keys[i]);
    CHECK_MSG(x && y && memcmp(bb_tensor_data(x), bb_tensor_data(y), bb_tensor_nbytes(x)) == 0, "%s differs", keys[i]);
  }
  /* an export: the inference model with the trained values */
  CHECK(!bb_grad_trainer_store(a.t, f.m, &err));
  bb_tensor *exported = gt_tensor(f.m, "w");
  CHECK(exported && memcmp(bb_tensor_data(exported), bb_tensor_data(bb_grad_trainer_value(a.t, "w")), 3 * sizeof(double)) == 0);
  bb_tensor_release(exported);
  bb_grad_trainer_free(b.t);
  bb_model_free(b.g->model), bb_model_free(b.o->model);
  free(b.g), free(b.o);
  bb_tensor_release(target);
  unmake(&a);
  fx_free(&f);
}

/* x → Dropout(0.5) → w: the masks follow seed0 + step. */
static void test_dropout_follows_the_seed(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "w", 2, (int64_t[]){8, 2});
  fx_input(&f, "x", fx_random(BB_DTYPE_DOUBLE, 2, (int64_t[]){6, 8}, -1, 1), NULL);
  fx_scalar(&f, "ratio", BB_DTYPE_DOUBLE, 0.5);
  fx_scalar(&f, "train", BB_DTYPE_BOOL, 1);
  fx_node(&f, "Dropout", NULL, "x,ratio,train", "xd");
  fx_node(&f, "MatMul", NULL, "xd,w", "y");
  bb_vilist_add(f.m, &f.m->graph->outputs, "y", bb_type_new_tensor(f.m, BB_DTYPE_DOUBLE, -1, NULL));
  setup s[3];
  uint64_t seeds[3] = {7, 7, 8};
  bb_tensor *target = fx_random(BB_DTYPE_DOUBLE, 2, (int64_t[]){6, 2}, -1, 1);
  double losses[3][3];
  for (int k = 0; k < 3; k++) {
    if (!make(&f, BB_GRAD_LOSS_MSE, BB_OPTIMIZER_SGD, seeds[k], &s[k])) return fx_free(&f);
    for (int step = 0; step < 3; step++) {
      bb_grad_step st;
      bb_error err;
      CHECK(!bb_grad_trainer_step(s[k].t, (const char *[]){"x", "target"}, (bb_tensor *[]){f.values[0], target}, 2, &st, &err));
      losses[k][step] = st.loss;
    }
  }
  CHECK(memcmp(losses[0], losses[1], sizeof losses[0]) == 0);
  CHECK(memcmp(losses[0], losses[2], sizeof losses[0]) != 0);
  CHECK(losses[0][0] != losses[0][1]); /* each step draws a new mask */
  for (int k = 0; k < 3; k++) unmake(&s[k]);
  bb_tensor_release(target);
  fx_free(&f);
}

/* A float32 two-layer network separates two Gaussian blobs. */
static void test_a_small_model_learns(void) {
  fx f;
  fx_init(&f, 17);
  bb_tensor *w1 = fx_random(BB_DTYPE_FLOAT, 2, (int64_t[]){2, 8}, -0.5, 0.5), *w2 = fx_random(BB_DTYPE_FLOAT, 2, (int64_t[]){8, 2}, -0.5, 0.5);
  bb_tensor *b1 = bb_tensor_new_zeros(NULL, BB_DTYPE_FLOAT, 1, (int64_t[]){8});
  bb_tensor *ws[] = {w1, b1, w2};
  const char *wn[] = {"w1", "b1", "w2"};
  for (int i = 0; i < 3; i++) {
    bb_tensor_proto *p;
    bb_error err;
    bb_tensor_to_proto(f.m, ws[i], wn[i], &p, &err);
    bb_tensorlist_append(f.m, &f.m->graph->initializers, p);
    bb_tensor_release(ws[i]);
  }
  bb_tensor *x = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 2, (int64_t[]){32, 2});
  bb_tensor *labels = bb_tensor_new_empty(NULL, BB_DTYPE_INT64, 1, (int64_t[]){32});
  for (int i = 0; i < 32; i++) {
    int64_t c = i % 2;
    ((int64_t *)bb_tensor_data(labels))[i] = c;
    ((float *)bb_tensor_data(x))[2 * i] = (float)(rng_real(-0.7, 0.7) + (c ? 1.0 : -1.0));
    ((float *)bb_tensor_data(x))[2 * i + 1] = (float)(rng_real(-0.7, 0.7) + (c ? -0.5 : 0.5));
  }
  fx_input(&f, "x", x, (const char *[]){"N", NULL});
  fx_node(&f, "MatMul", NULL, "x,w1", "h0");
  fx_node(&f, "Add", NULL, "h0,b1", "h1");
  fx_node(&f, "Tanh", NULL, "h1", "h");
  fx_node(&f, "MatMul", NULL, "h,w2", "logits");
  bb_vilist_add(f.m, &f.m->graph->outputs, "logits", bb_type_new_tensor(f.m, BB_DTYPE_FLOAT, -1, NULL));
  setup s;
  if (!make(&f, BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY, BB_OPTIMIZER_ADAM, 0, &s)) return fx_free(&f);
  bb_grad_step st = {0};
  bb_error err;
  float start = 0;
  for (int i = 0; i < 150; i++) {
    CHECK(!bb_grad_trainer_step(s.t, (const char *[]){"x", "target"}, (bb_tensor *[]){x, labels}, 2, &st, &err));
    if (!i) start = st.loss;
  }
  CHECK_MSG(st.loss < 0.1f && st.loss < start / 5, "loss %g after 150 steps (from %g)", st.loss, start);
  /* warm: a step takes nothing from the allocator */
  bb_grad_trainer_memory_stats m0, m1;
  bb_grad_trainer_memory(s.t, &m0);
  for (int i = 0; i < 5; i++)
    CHECK(!bb_grad_trainer_step(s.t, (const char *[]){"x", "target"}, (bb_tensor *[]){x, labels}, 2, &st, &err));
  bb_grad_trainer_memory(s.t, &m1);
  CHECK_EQ_INT(m1.allocations, m0.allocations);
  CHECK(m0.allocations > 0 && m1.step_high_water == m0.step_high_water);
  CHECK_EQ_INT(m1.held_bytes, (2 * 8 + 8 + 8 * 2) * 4 * 3 + 8); /* w1, b1, w2 with Adam's two moments; the step count */
  bb_tensor_release(labels);
  unmake(&s);
  fx_free(&f);
}

static void test_optimizer_and_trainer_allocation_failures(void) {
  fx f;
  log_model(&f);
  bb_grad_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.loss = BB_GRAD_LOSS_MSE;
  bb_grad_graph *g;
  bb_error err;
  if (bb_grad_build(f.m, &o, NULL, &g, &err)) return fx_free(&f);
  /* a config without its struct_size, or from a newer header, is refused */
  bb_optimizer_config unsized = bb_optimizer_defaults(BB_OPTIMIZER_SGD);
  bb_grad_optimizer *none = NULL;
  unsized.struct_size = 0;
  CHECK_EQ_INT(bb_grad_optimizer_build(g, &unsized, &none, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "optimizer config: struct_size 0") && !none);
  unsized.struct_size = sizeof unsized + 4;
  CHECK_EQ_INT(bb_grad_optimizer_build(g, &unsized, &none, &err), BB_ERR_INVALID_ARGUMENT);
  bb_tensor *target = fx_random(BB_DTYPE_DOUBLE, 2, (int64_t[]){4, 3}, -1, 1);
  long done_at = -1;
  for (long budget = 0; budget < 5000 && done_at < 0; budget++) {
    failing fa = {budget, 0};
    bb_allocator a = failing_allocator(&fa);
    g->alloc = &a; /* the optimizer graph takes the training graph's allocator */
    bb_optimizer_config c = bb_optimizer_defaults(BB_OPTIMIZER_ADAM);
    c.max_grad_norm = 1;
    bb_grad_optimizer *opt = NULL;
    bb_grad_trainer *t = NULL;
    int rc = bb_grad_optimizer_build(g, &c, &opt, &err);
    if (!rc) rc = bb_grad_trainer_new(g, opt, 0, &a, &t, &err);
    bb_grad_step st;
    if (!rc) rc = bb_grad_trainer_step(t, (const char *[]){"x", "target"}, (bb_tensor *[]){f.values[0], target}, 2, &st, &err);
    if (!rc) done_at = budget;
    else CHECK_MSG(rc == BB_ERR_NOMEM, "budget %ld: %d %s", budget, rc, err.message);
    bb_grad_trainer_free(t);
    bb_grad_optimizer_free(opt);
    CHECK_MSG(fa.live == 0, "budget %ld: %ld blocks leaked", budget, fa.live);
  }
  CHECK(done_at > 0);
  g->alloc = bb_default_allocator();
  bb_grad_graph_free(g);
  bb_tensor_release(target);
  fx_free(&f);
}

/* The inference form: BatchNormalization on running statistics, Dropout passing through. */
static void test_inference_form(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "g", 1, (int64_t[]){2});
  fx_param(&f, "bias", 1, (int64_t[]){2});
  fx_param(&f, "mean", 1, (int64_t[]){2});
  fx_param(&f, "var", 1, (int64_t[]){2});
  fx_input(&f, "x", fx_random(BB_DTYPE_DOUBLE, 2, (int64_t[]){3, 2}, -1, 1), NULL);
  bb_ir_node *bn = fx_node(&f, "BatchNormalization", NULL, "x,g,bias,mean,var", "y,rm,rv");
  bb_attr_set_int(f.m, &bn->attrs, "training_mode", 1);
  fx_scalar(&f, "ratio", BB_DTYPE_DOUBLE, 0.5);
  fx_scalar(&f, "train", BB_DTYPE_BOOL, 1);
  fx_node(&f, "Dropout", NULL, "y,ratio,train", "z");
  bb_vilist_add(f.m, &f.m->graph->outputs, "z", bb_type_new_tensor(f.m, BB_DTYPE_DOUBLE, -1, NULL));
  bb_model *inf = NULL;
  bb_error err;
  CHECK(!bb_grad_inference_model(f.m, NULL, &inf, &err));
  for (size_t i = 0; inf && i < inf->graph->nodes.len; i++) {
    const bb_ir_node *n = inf->graph->nodes.items[i];
    if (strcmp(n->op_type, "BatchNormalization") == 0) CHECK(n->outputs.len == 1 && !bb_attr_find(&n->attrs, "training_mode"));
    if (strcmp(n->op_type, "Dropout") == 0) CHECK(n->inputs.len == 2);
  }
  bb_cpu_session *s = NULL; /* and it runs: the CPU backend has no random Dropout */
  bb_tensor *out = NULL;
  CHECK(inf && !bb_cpu_session_new(inf, NULL, &s, &err) && !bb_cpu_session_run(s, f.names, f.values, 1, &out, &err));
  bb_tensor_release(out);
  bb_cpu_session_free(s);
  bb_model_free(inf);
  CHECK(f.m->graph->nodes.items[0]->outputs.len == 3); /* the model itself is unchanged */
  /* a training graph is not a model to turn into inference */
  bb_grad_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.loss = BB_GRAD_LOSS_MSE;
  o.params = f.params;
  o.n_params = 2;
  bb_grad_graph *g = NULL;
  CHECK(!bb_grad_build(f.m, &o, NULL, &g, &err));
  CHECK(g && bb_grad_inference_model(g->model, NULL, &inf, &err) == BB_ERR_INVALID_ARGUMENT && strstr(err.message, "training graph"));
  bb_grad_graph_free(g);
  /* a running statistic the graph reads cannot be dropped */
  fx_node(&f, "Identity", NULL, "rm", "seen");
  bb_vilist_add(f.m, &f.m->graph->outputs, "seen", bb_type_new_tensor(f.m, BB_DTYPE_DOUBLE, -1, NULL));
  CHECK_EQ_INT(bb_grad_inference_model(f.m, NULL, &inf, &err), BB_ERR_UNSUPPORTED);
  CHECK(strstr(err.message, "rm, a training-mode statistic, is read by the graph"));
  fx_free(&f);
}

/* The CPU session's caps reach every session of the trainer: y = x·W with a 128×128
 * float64 W (128 KiB) makes one W-sized gradient in the training graph and three W-sized
 * outputs (W, Adam's m and v) in the optimizer graph, so a total cap of 200 KiB passes
 * the first and stops the second; a step stopped there changes nothing, and restoring the
 * defaults (or raising the cap) lets the same step through. */
static void test_limits_reach_every_session(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "w", 2, (int64_t[]){128, 128});
  fx_input(&f, "x", fx_random(BB_DTYPE_DOUBLE, 2, (int64_t[]){1, 128}, -1, 1), NULL);
  fx_node(&f, "MatMul", NULL, "x,w", "y");
  bb_vilist_add(f.m, &f.m->graph->outputs, "y", bb_type_new_tensor(f.m, BB_DTYPE_DOUBLE, -1, NULL));
  setup s;
  if (!make(&f, BB_GRAD_LOSS_MSE, BB_OPTIMIZER_ADAM, 0, &s)) return fx_free(&f);
  bb_tensor *target = fx_random(BB_DTYPE_DOUBLE, 2, (int64_t[]){1, 128}, -1, 1);
  const char *names[] = {"x", "target"};
  bb_tensor *inputs[] = {f.values[0], target};
  double w0 = first(bb_grad_trainer_value(s.t, "w")), step0 = first(bb_grad_trainer_value(s.t, "optimizer.step"));
  bb_grad_step st;
  bb_error err;
  bb_cpu_limits tight = {.struct_size = sizeof tight, .max_total_bytes = 200 << 10};
  CHECK_EQ_INT(bb_grad_trainer_set_limits(s.t, &tight, &err), 0);
  CHECK_EQ_INT(bb_grad_trainer_step(s.t, names, inputs, 2, &st, &err), BB_ERR_LIMIT);
  CHECK_MSG(strstr(err.message, "node opt/") && strstr(err.message, "over the cap of 204800"),
            "the optimizer graph's run is the one stopped: %s", err.message);
  CHECK(first(bb_grad_trainer_value(s.t, "w")) == w0);
  CHECK(first(bb_grad_trainer_value(s.t, "optimizer.step")) == step0);
  /* tighter still: the training graph's own run is stopped */
  tight.max_total_bytes = 64 << 10;
  CHECK_EQ_INT(bb_grad_trainer_set_limits(s.t, &tight, &err), 0);
  CHECK_EQ_INT(bb_grad_trainer_step(s.t, names, inputs, 2, &st, &err), BB_ERR_LIMIT);
  CHECK_MSG(strstr(err.message, "node y_grad/") && strstr(err.message, "over the cap of 65536"), "%s", err.message);
  CHECK(first(bb_grad_trainer_value(s.t, "w")) == w0);
  /* a struct_size this library cannot read changes nothing */
  bb_cpu_limits unset = {.max_total_bytes = SIZE_MAX};
  CHECK_EQ_INT(bb_grad_trainer_set_limits(s.t, &unset, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(err.message, "trainer: cpu session: limits have struct_size 0"), "%s", err.message);
  CHECK_EQ_INT(bb_grad_trainer_step(s.t, names, inputs, 2, &st, &err), BB_ERR_LIMIT);
  bb_cpu_limits raised = {.struct_size = sizeof raised, .max_total_bytes = (size_t)2 << 30};
  CHECK_EQ_INT(bb_grad_trainer_set_limits(s.t, &raised, &err), 0);
  CHECK_EQ_INT(bb_grad_trainer_step(s.t, names, inputs, 2, &st, &err), 0);
  CHECK(st.applied && first(bb_grad_trainer_value(s.t, "w")) != w0);
  CHECK_EQ_INT(bb_grad_trainer_set_limits(s.t, &tight, &err), 0);
  CHECK_EQ_INT(bb_grad_trainer_set_limits(s.t, NULL, &err), 0);
  CHECK_EQ_INT(bb_grad_trainer_step(s.t, names, inputs, 2, &st, &err), 0);
  CHECK(st.applied && first(bb_grad_trainer_value(s.t, "optimizer.step")) == 2);
  bb_tensor_release(target);
  unmake(&s);
  fx_free(&f);
}

/* A float initializer of uniform values in [lo, hi). */
static void float_initializer(fx *f, const char *name, int rank, const int64_t *dims, double lo, double hi) {
  bb_tensor *t = fx_random(BB_DTYPE_FLOAT, rank, dims, lo, hi);
  bb_tensor_proto *p;
  bb_error err;
  CHECK_MSG(!bb_tensor_to_proto(f->m, t, name, &p, &err) && !bb_tensorlist_append(f->m, &f->m->graph->initializers, p),
            "%s", err.message);
  bb_tensor_release(t);
}

/* A frozen 3×3 convolution's weights stay constants of the trainer's session, where an
 * inference session would take Winograd's fast path: the trainer keeps the direct
 * convolution, so a split step's forward gives the bits of a session with the fast path
 * off (and a session with it on gives other bits: the shape is one it takes). */
static void test_training_convolutions_are_direct(void) {
  fx f;
  fx_init(&f, 17);
  float_initializer(&f, "w", 4, (const int64_t[]){64, 64, 3, 3}, -0.1, 0.1);
  float_initializer(&f, "b", 1, (const int64_t[]){64}, -1, 1);
  fx_input(&f, "x", fx_random(BB_DTYPE_FLOAT, 4, (const int64_t[]){1, 64, 8, 8}, -1, 1), NULL);
  bb_ir_node *conv = fx_node(&f, "Conv", NULL, "x,w,b", "c");
  bb_attr_set_ints(f.m, &conv->attrs, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
  bb_vilist_add(f.m, &f.m->graph->outputs, "c", bb_type_new_tensor(f.m, BB_DTYPE_FLOAT, -1, NULL));
  const char *params[] = {"b"}, *frozen[] = {"w"};
  bb_grad_options opt;
  memset(&opt, 0, sizeof opt);
  opt.struct_size = sizeof opt;
  opt.loss = BB_GRAD_LOSS_UPSTREAM;
  opt.output = "c";
  opt.params = params, opt.n_params = 1;
  opt.freeze = frozen, opt.n_freeze = 1;
  setup s;
  memset(&s, 0, sizeof s);
  bb_error err;
  bb_optimizer_config c = bb_optimizer_defaults(BB_OPTIMIZER_SGD);
  int rc = bb_grad_build(f.m, &opt, NULL, &s.g, &err);
  if (!rc) rc = bb_grad_optimizer_build(s.g, &c, &s.o, &err);
  if (!rc) rc = bb_grad_trainer_new(s.g, s.o, 1, NULL, &s.t, &err);
  CHECK_MSG(!rc, "%s", err.message);
  bb_tensor *trained = NULL, *direct = NULL, *fast = NULL;
  if (!rc) CHECK_MSG(!bb_grad_trainer_forward(s.t, f.names, f.values, 1, &trained, &err), "%s", err.message);
  const bb_cpu_session_options off = {sizeof off, BB_CPU_REWRITE_WINOGRAD}, on = {sizeof on, 0};
  const bb_cpu_session_options *kinds[2] = {&off, &on};
  bb_tensor **outs[2] = {&direct, &fast};
  for (int k = 0; k < 2; k++) {
    bb_cpu_session *session = NULL;
    CHECK_MSG(!bb_cpu_session_new_with_options(f.m, NULL, kinds[k], &session, &err) &&
                  !bb_cpu_session_run(session, f.names, f.values, 1, outs[k], &err),
              "%s", err.message);
    bb_cpu_session_free(session);
  }
  const size_t bytes = direct ? bb_tensor_nbytes(direct) : 0;
  CHECK_MSG(trained && direct && bb_tensor_nbytes(trained) == bytes &&
                memcmp(bb_tensor_data(trained), bb_tensor_data(direct), bytes) == 0,
            "the trainer's convolution is not the direct path's");
  CHECK_MSG(fast && direct && memcmp(bb_tensor_data(fast), bb_tensor_data(direct), bytes) != 0,
            "the inference session did not take the fast path: the comparison shows nothing");
  bb_tensor_release(trained), bb_tensor_release(direct), bb_tensor_release(fast);
  unmake(&s);
  fx_free(&f);
}

int main(void) {
  RUN(test_inference_form);
  RUN(test_non_finite_steps_are_refused);
  RUN(test_inputs_are_checked);
  RUN(test_snapshot_resumes_exactly);
  RUN(test_dropout_follows_the_seed);
  RUN(test_a_small_model_learns);
  RUN(test_optimizer_and_trainer_allocation_failures);
  RUN(test_limits_reach_every_session);
  RUN(test_training_convolutions_are_direct);
  return bb_test_finish();
}
