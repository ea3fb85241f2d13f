/* The Model contract end to end: a recorded module whose body runs Forward, ComputeLoss
 * and Backward on the shipped CpuMlp, installed on a node and invoked batch after batch,
 * learns (the loss it reports falls); CpuBackend runs a backend op of the same graph;
 * wrong inputs and configs fail with the method named. */
#include <math.h>
#include <stdlib.h>

#include "../runtime/rttest.h"
#include "bb/cpu.h"
#include "bb/dataset.h"
#include "bb/roles.h"

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot BACKEND = {BB_ROLE_BACKEND, "backend", NULL};

static void train_body(bb_rec *g, void *user) {
  (void)user;
  bb_value x = bb_rec_input(g, "x", "ai.bytesandbrains.tensor.f32");
  bb_value y = bb_rec_input(g, "y", "ai.bytesandbrains.tensor.f32");
  bb_value probs = bb_rec_model_forward(g, &MODEL, x);
  bb_value loss = bb_rec_model_compute_loss(g, &MODEL, probs, y);
  bb_rec_model_backward(g, &MODEL, loss);
  bb_rec_output(g, "loss", loss);
  bb_rec_output(g, "relu", bb_rec_backend(g, &BACKEND, "Relu", &x, 1, NULL, 0));
}

static const bb_slot DATA = {BB_ROLE_DATA_SOURCE, "data", NULL};

/* Each run: the next batch of the data source, one training step on it. */
static void stream_body(bb_rec *g, void *user) {
  (void)user;
  bb_value batch, labels;
  bb_rec_data_source_next_batch(g, &DATA, &batch, &labels);
  bb_value loss = bb_rec_model_compute_loss(g, &MODEL, bb_rec_model_forward(g, &MODEL, batch), labels);
  bb_rec_model_backward(g, &MODEL, loss);
  bb_rec_output(g, "loss", loss);
}

static const bb_module STREAM = {sizeof(bb_module), "Stream", stream_body, NULL, NULL, NULL, 0};

/* Forward, then Export once the forward ran: the exported network must compute it. */
static void export_body(bb_rec *g, void *user) {
  (void)user;
  bb_value x = bb_rec_input(g, "x", "ai.bytesandbrains.tensor.f32");
  bb_value probs = bb_rec_model_forward(g, &MODEL, x);
  bb_rec_output(g, "probs", probs);
  bb_rec_output(g, "onnx", bb_rec_model_export_after(g, &MODEL, probs));
}

static const bb_module EXPORT = {sizeof(bb_module), "Export", export_body, NULL, NULL, NULL, 0};

static const bb_module TRAIN = {sizeof(bb_module), "Train", train_body, NULL, NULL, NULL, 0};

typedef struct model_setup {
  const bb_module *module;
  const char *model_config;
} model_setup;

static int bind_model(bb_compiler *c, const void *user, bb_error *err) {
  const model_setup *m = user;
  static const bb_component_port f32[] = {{"tensor", "ai.bytesandbrains.tensor.f32"}};
  bb_component_decl mlp = {sizeof mlp, "CpuMlp", f32, 1, NULL, 0};
  bb_component_decl cpu = {sizeof cpu, "CpuBackend", f32, 1, NULL, 0};
  static const bb_component_port sample[] = {{"sample", "ai.bytesandbrains.tensor.f32"}};
  bb_component_decl src = {sizeof src, "ArraySource", sample, 1, NULL, 0};
  int rc = bb_compiler_declare_component(c, &mlp, err) || bb_compiler_declare_component(c, &cpu, err) ||
           bb_compiler_declare_component(c, &src, err) ||
           bb_compiler_bind_model(c, "model", "CpuMlp", m->model_config, err);
  if (!rc && m->module == &TRAIN) rc = bb_compiler_bind_backend(c, "backend", "CpuBackend", NULL, err);
  if (!rc && m->module == &STREAM) rc = bb_compiler_bind_data_source(c, "data", "ArraySource", "batch=16,seed=5", err);
  return rc ? err->code : 0;
}

static uint8_t *compile_module(const bb_module *module, const char *model_config, size_t *len) {
  model_setup setup = {module, model_config};
  return compile_test_module(module, bind_model, &setup, len);
}

static uint8_t *compile_train(const char *model_config, size_t *len) { return compile_module(&TRAIN, model_config, len); }

static bb_val *tensor2(const float *data, int64_t rows, int64_t cols) {
  int64_t dims[2] = {rows, cols};
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, cols ? 2 : 1, dims);
  memcpy(bb_tensor_data(t), data, (size_t)(rows * (cols ? cols : 1)) * sizeof(float));
  bb_val *v = bb_val_tensor(NULL, t);
  bb_tensor_release(t);
  return v;
}

/* Two Gaussian blobs, class = sign of x0 + x1. */
static void make_batch(uint64_t *rng, float *x, float *y, int n) {
  for (int i = 0; i < n; i++) {
    *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    int cls = (int)(*rng >> 63);
    float a = (float)((*rng >> 20) & 0xffff) / 65536.0f - 0.5f, b = (float)((*rng >> 40) & 0xffff) / 65536.0f - 0.5f;
    x[2 * i] = (cls ? 0.4f : -0.4f) + a;
    x[2 * i + 1] = (cls ? 0.3f : -0.3f) + b;
    y[i] = (float)cls;
  }
}

/* Runs Train once with x and y (both released) and returns the poll's steps (valid until
 * the next poll). */
static const bb_step *train_once(bb_node *node, bb_val *vx, bb_val *vy, uint64_t now, size_t *ns) {
  bb_named_value in[] = {{"x", vx}, {"y", vy}};
  bb_error err;
  CHECK_MSG(bb_node_invoke(node, "Train", in, 2, now, &err) == 0, "%s", err.message);
  bb_val_release(vx);
  bb_val_release(vy);
  const bb_step *steps = NULL;
  *ns = 0;
  CHECK(bb_node_poll(node, now, &steps, ns, &err) == 0);
  return steps;
}

/* The artifact installed as peer 1 for Train (what the install tests vary). */
static const char *const TRAIN_TARGETS[] = {"Train"};
static bb_install_args train_args(const uint8_t *art, size_t len) {
  return install_args(art, len, 1, TRAIN_TARGETS, 1, shipped_registry());
}

static float run_batch(bb_node *node, const float *x, const float *y, int n, uint64_t now, float *relu_first) {
  size_t ns;
  const bb_step *steps = train_once(node, tensor2(x, n, 2), tensor2(y, n, 0), now, &ns);
  float loss = NAN;
  for (size_t i = 0; i < ns; i++) {
    if (steps[i].kind == BB_STEP_OP_FAILED) print_steps("train", steps, ns);
    if (steps[i].kind != BB_STEP_APP_EVENT || bb_val_kind_of(steps[i].value) != BB_VAL_TENSOR) continue;
    const float *d = bb_tensor_data(bb_val_as_tensor(steps[i].value));
    if (strcmp(steps[i].topic, "loss") == 0) loss = d[0];
    if (strcmp(steps[i].topic, "relu") == 0 && relu_first) *relu_first = d[0];
  }
  CHECK_EQ_INT(count_steps(steps, ns, BB_STEP_OP_FAILED), 0);
  return loss;
}

static void test_mlp_learns_through_the_graph(void) {
  size_t len = 0;
  uint8_t *art = compile_train("inputs=2,outputs=2,lr=0.2,momentum=0.5,seed=7", &len);
  if (!art) return;
  const char *targets[] = {"Train"};
  bb_node *node = install_peer(art, len, 1, targets, 1, shipped_registry(), NULL);
  if (!node) return free(art);
  uint64_t rng = 42;
  float held_x[64], held_y[32], x[64], y[32];
  make_batch(&rng, held_x, held_y, 32);
  float first = run_batch(node, held_x, held_y, 32, 0, NULL); /* the loss before its step */
  for (int step = 1; step <= 100; step++) {
    make_batch(&rng, x, y, 32);
    run_batch(node, x, y, 32, (uint64_t)step * 1000, NULL);
  }
  float last = run_batch(node, held_x, held_y, 32, 200000, NULL);
  CHECK_MSG(first > 0.2f && last < first * 0.5f, "held-out loss %g -> %g", first, last);
  /* the backend op computes the real Relu of the first feature */
  make_batch(&rng, x, y, 1);
  float r = NAN;
  run_batch(node, x, y, 1, 999999, &r);
  CHECK(r == (x[0] > 0 ? x[0] : 0.0f));
  bb_node_stats st;
  bb_node_stats_get(node, &st);
  CHECK_EQ_INT(st.executions, 0);
  bb_node_free(node);
  free(art);
}

/* CpuMlp's Export: an ONNX model the CPU executor runs to the Forward's probabilities. */
static void test_export_computes_forward(void) {
  size_t len = 0;
  uint8_t *art = compile_module(&EXPORT, "inputs=2,hidden=5x3,outputs=3,activation=tanh,input_scale=0.5,input_shift=1,seed=3", &len);
  if (!art) return;
  const char *targets[] = {"Export"};
  bb_node *node = install_peer(art, len, 1, targets, 1, shipped_registry(), NULL);
  if (!node) return free(art);
  float x[8] = {0.5f, -1, 2, 0.25f, -3, 1, 0, 0};
  bb_val *vx = tensor2(x, 4, 2);
  bb_named_value in[] = {{"x", vx}};
  bb_error err;
  CHECK_MSG(bb_node_invoke(node, "Export", in, 1, 0, &err) == 0, "%s", err.message);
  const bb_step *steps = NULL;
  size_t ns = 0;
  CHECK(bb_node_poll(node, 0, &steps, &ns, &err) == 0);
  const bb_val *probs = NULL, *onnx = NULL;
  for (size_t i = 0; i < ns; i++) {
    if (steps[i].kind != BB_STEP_APP_EVENT) continue;
    if (strcmp(steps[i].topic, "probs") == 0) probs = steps[i].value;
    if (strcmp(steps[i].topic, "onnx") == 0) onnx = steps[i].value;
  }
  CHECK(probs && bb_val_kind_of(probs) == BB_VAL_TENSOR && onnx && bb_val_kind_of(onnx) == BB_VAL_BYTES);
  bb_model *m = NULL;
  bb_cpu_session *s = NULL;
  bb_tensor *y = NULL;
  if (probs && onnx && !bb_model_decode(bb_val_as_bytes(onnx), bb_val_count(onnx), NULL, NULL, &m, &err) &&
      !bb_cpu_session_new(m, NULL, &s, &err)) {
    const char *names[] = {"x"};
    bb_tensor *input = bb_val_as_tensor(vx);
    CHECK_MSG(!bb_cpu_session_run(s, names, &input, 1, &y, &err), "%s", err.message);
    CHECK_STR(bb_cpu_session_output_name(s, 0), "probabilities");
    const float *want = bb_tensor_data(bb_val_as_tensor(probs)), *got = y ? bb_tensor_data(y) : NULL;
    for (int i = 0; got && i < 12; i++) CHECK_MSG(fabsf(got[i] - want[i]) < 1e-6f, "%d: %g vs %g", i, got[i], want[i]);
  } else {
    CHECK_MSG(0, "%s", err.message);
  }
  bb_tensor_release(y);
  bb_cpu_session_free(s);
  bb_model_free(m);
  bb_val_release(vx);
  bb_node_free(node);
  free(art);
}

static void test_wrong_input_kind_names_the_method(void) {
  size_t len = 0;
  uint8_t *art = compile_train("inputs=2,outputs=2", &len);
  if (!art) return;
  const char *targets[] = {"Train"};
  bb_node *node = install_peer(art, len, 1, targets, 1, shipped_registry(), NULL);
  if (!node) return free(art);
  size_t ns;
  const bb_step *steps = train_once(node, bb_val_bytes(NULL, "abc", 3), tensor2((const float[]){0}, 1, 0), 0, &ns);
  bool named = false;
  for (size_t i = 0; i < ns; i++)
    if (steps[i].kind == BB_STEP_OP_FAILED && strstr(steps[i].detail, "input 0 of Forward must be a Tensor, got Bytes"))
      named = true;
  CHECK(named);
  if (!named) print_steps("wrong", steps, ns);
  bb_node_free(node);
  free(art);
}

/* Runs Train once with x and y; returns the first OP_FAILED detail (copied), or "". */
static void train_failure(bb_node *node, bb_val *vx, bb_val *vy, char *detail, size_t size) {
  size_t ns;
  const bb_step *steps = train_once(node, vx, vy, 0, &ns);
  detail[0] = 0;
  for (size_t i = 0; i < ns && !detail[0]; i++)
    if (steps[i].kind == BB_STEP_OP_FAILED) snprintf(detail, size, "%s", steps[i].detail);
}

/* Targets shorter than the rows (or the wrong width for mse) and a rank-0 input are refused
 * with the op's name, never read past their end. */
static void test_target_length_is_checked(void) {
  size_t len = 0;
  uint8_t *art = compile_train("inputs=2,outputs=3,loss=mse", &len);
  if (!art) return;
  const char *targets[] = {"Train"};
  bb_node *node = install_peer(art, len, 1, targets, 1, shipped_registry(), NULL);
  if (!node) return free(art);
  static const float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[12] = {0};
  char detail[512];
  /* 4 rows need 4 x 3 mse targets; 4 are given */
  train_failure(node, tensor2(x, 4, 2), tensor2(y, 4, 0), detail, sizeof detail);
  CHECK_MSG(strstr(detail, "ComputeLoss takes 12 float32 targets for 4 rows, got 4") != NULL, "%s", detail);
  /* a rank-0 input (inputs=2 makes it fail anyway; the check must not read dims[-1]) */
  bb_tensor *scalar = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 0, NULL);
  bb_val *vs = bb_val_tensor(NULL, scalar);
  bb_tensor_release(scalar);
  train_failure(node, vs, tensor2(y, 12, 0), detail, sizeof detail);
  CHECK_MSG(strstr(detail, "input must be float32 [n, 2]") != NULL, "%s", detail);
  bb_node_free(node);
  free(art);

  art = compile_train("inputs=1,outputs=2", &len);
  if (!art) return;
  node = install_peer(art, len, 1, targets, 1, shipped_registry(), NULL);
  if (!node) return free(art);
  scalar = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 0, NULL);
  vs = bb_val_tensor(NULL, scalar);
  bb_tensor_release(scalar);
  train_failure(node, vs, tensor2(y, 1, 0), detail, sizeof detail);
  CHECK_MSG(strstr(detail, "input must be float32 [n, 1]") != NULL, "%s", detail);
  /* xent: one class index per row */
  train_failure(node, tensor2(x, 4, 1), tensor2(y, 3, 0), detail, sizeof detail);
  CHECK_MSG(strstr(detail, "4 float32 targets for 4 rows, got 3") != NULL, "%s", detail);
  bb_node_free(node);
  free(art);
}

static void test_hidden_widths_are_digits(void) {
  static const char *const bad[] = {"inputs=2,outputs=2,hidden=8x", "inputs=2,outputs=2,hidden=-1",
                                    "inputs=2,outputs=2,hidden=x8", "inputs=2,outputs=2,hidden=8x+4"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    size_t len = 0;
    uint8_t *art = compile_train(bad[i], &len);
    if (!art) continue;
    bb_install_args a = train_args(art, len);
    bb_node *n = NULL;
    bb_error err;
    CHECK_MSG(bb_install(&a, &n, NULL, &err) != 0 && strstr(err.message, "hidden=") != NULL, "%s: %s", bad[i],
              err.message);
    bb_node_free(n);
    free(art);
  }
}

static void test_bad_config_fails_install(void) {
  size_t len = 0;
  uint8_t *art = compile_train("inputs=2,outputs=2,lr=fast", &len);
  if (!art) return;
  bb_install_args a = train_args(art, len);
  bb_node *n = NULL;
  bb_install_error_kind kind;
  bb_error err;
  CHECK(bb_install(&a, &n, &kind, &err) != 0 && !n);
  CHECK_EQ_INT(kind, BB_INSTALL_CONSTRUCTION_FAILED);
  CHECK(strstr(err.message, "`lr`") != NULL && strstr(err.message, "slot `model`") != NULL);
  /* a host override of the config wins over the artifact's */
  bb_slot_config over = {"model", "inputs=2,outputs=2,lr=0.1", NULL};
  a.slots = &over;
  a.n_slots = 1;
  CHECK_MSG(bb_install(&a, &n, &kind, &err) == 0, "%s", err.message);
  bb_node_free(n);
  free(art);
}

/* The data source streams batches of a host data set; each invoke trains on one. */
static void test_data_source_feeds_training(void) {
  size_t len = 0;
  uint8_t *art = compile_module(&STREAM, "inputs=2,outputs=2,lr=0.2,momentum=0.5,seed=7", &len);
  if (!art) return;
  bb_dataset ds;
  CHECK(bb_dataset_init(&ds, 256, 2, 1, NULL, NULL) == 0);
  uint64_t rng = 9;
  make_batch(&rng, ds.features, ds.labels, 256);
  const char *targets[] = {"Stream"};
  bb_install_args a = install_args(art, len, 1, targets, 1, shipped_registry());
  bb_slot_config data = {"data", NULL, &ds};
  a.slots = &data;
  a.n_slots = 1;
  bb_node *node = NULL;
  bb_error err;
  CHECK_MSG(bb_install(&a, &node, NULL, &err) == 0, "%s", err.message);
  float first = NAN, sum_last = 0;
  for (int step = 0; step < 80 && node; step++) {
    CHECK(bb_node_invoke(node, "Stream", NULL, 0, (uint64_t)step, &err) == 0);
    const bb_step *steps;
    size_t ns;
    CHECK(bb_node_poll(node, (uint64_t)step, &steps, &ns, &err) == 0);
    CHECK_EQ_INT(count_steps(steps, ns, BB_STEP_OP_FAILED), 0);
    for (size_t i = 0; i < ns; i++)
      if (steps[i].kind == BB_STEP_APP_EVENT && strcmp(steps[i].topic, "loss") == 0) {
        float l = *(const float *)bb_tensor_data(bb_val_as_tensor(steps[i].value));
        if (step == 0) first = l;
        if (step >= 70) sum_last += l;
      }
  }
  CHECK_MSG(sum_last / 10 < first * 0.5f, "loss %g -> %g", first, sum_last / 10);
  /* 80 batches of 16 from 256 rows: five passes over the data */
  CHECK_EQ_INT(bb_node_counter(node, "array_source.epochs"), 80 * 16 / 256);
  /* without its data set the source cannot be made, and the message says so */
  a.n_slots = 0;
  bb_node *none = NULL;
  bb_install_error_kind kind;
  CHECK(bb_install(&a, &none, &kind, &err) != 0 && kind == BB_INSTALL_CONSTRUCTION_FAILED);
  CHECK(strstr(err.message, "host_data") != NULL);
  bb_node_free(node);
  bb_dataset_free(&ds);
  free(art);
}

int main(void) {
  RUN(test_data_source_feeds_training);
  RUN(test_mlp_learns_through_the_graph);
  RUN(test_export_computes_forward);
  RUN(test_wrong_input_kind_names_the_method);
  RUN(test_bad_config_fails_install);
  RUN(test_target_length_is_checked);
  RUN(test_hidden_widths_are_digits);
  return bb_test_finish();
}
