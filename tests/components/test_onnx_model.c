/* OnnxModel, the Model concrete over any ONNX model: the LeNet-style CNN PyTorch exported
 * (tests/data/grad) installed on a node learns through Forward / ComputeLoss / Backward,
 * Evaluate scores it, Params / LoadParameters move the documented flat vector, Fit trains
 * on an ArraySource, Export gives the trained model as plain ONNX, a snapshot restores
 * every tensor, and bad configs are refused with the key named. The engine under it takes
 * integer token rows and frozen initializers, and holds every run to max_total_bytes. */
#include <math.h>
#include <stdlib.h>

#include "../grad/gradtest.h"
#include "../runtime/rttest.h"
#include "bb/cpu.h"
#include "bb/dataset.h"
#include "bb/onnx_model.h"
#include "bb/roles.h"
#include "components/shipped.h"

#define LENET BB_TEST_SOURCE_DIR "/tests/data/grad/lenet_dynamic.onnx"

/* The model's bytes, handed to OnnxModel as host_data (what every host can do; reading
 * model=PATH is for native hosts only: bb.wasm reads no files). */
static uint8_t lenet_data[1 << 16];
static bb_bytes lenet = {lenet_data, 0};

static void read_lenet(void) {
  FILE *f = fopen(LENET, "rb");
  lenet.len = f ? fread(lenet_data, 1, sizeof lenet_data, f) : 0;
  if (f) fclose(f);
  CHECK_MSG(lenet.len > 0, "cannot read %s", LENET);
}
#define CLASSES 10
#define ROWS 64

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};

/* Train: one step on (x, y), its loss, the score on (x, y) and the parameters after. */
static void train_body(bb_rec *g, void *user) {
  (void)user;
  bb_value x = bb_rec_input(g, "x", "ai.bytesandbrains.tensor.f32");
  bb_value y = bb_rec_input(g, "y", "ai.bytesandbrains.tensor.f32");
  bb_value loss = bb_rec_model_compute_loss(g, &MODEL, bb_rec_model_forward(g, &MODEL, x), y);
  bb_value after = bb_rec_model_backward(g, &MODEL, loss);
  bb_rec_output(g, "loss", loss);
  bb_rec_output(g, "score", bb_rec_model_evaluate(g, &MODEL, x, y));
  bb_rec_output(g, "params", bb_rec_model_params_after(g, &MODEL, after));
}

/* Load: the given flat vector in, the flat vector out. */
static void load_body(bb_rec *g, void *user) {
  (void)user;
  bb_value p = bb_rec_input(g, "p", "ai.bytesandbrains.tensor.f32");
  bb_rec_output(g, "params", bb_rec_model_params_after(g, &MODEL, bb_rec_model_load_parameters(g, &MODEL, p)));
}

/* Fit: the given parameters trained on the data slot. */
static void fit_body(bb_rec *g, void *user) {
  (void)user;
  bb_value p = bb_rec_input(g, "p", "ai.bytesandbrains.tensor.f32"), trained, samples;
  bb_rec_model_fit(g, &MODEL, p, &trained, &samples);
  bb_rec_output(g, "trained", trained);
  bb_rec_output(g, "samples", samples);
}

/* Export: one step on (x, y), then the score on (x, y) and the exported model. */
static void export_body(bb_rec *g, void *user) {
  (void)user;
  bb_value x = bb_rec_input(g, "x", "ai.bytesandbrains.tensor.f32");
  bb_value y = bb_rec_input(g, "y", "ai.bytesandbrains.tensor.f32");
  bb_value loss = bb_rec_model_compute_loss(g, &MODEL, bb_rec_model_forward(g, &MODEL, x), y);
  bb_value after = bb_rec_model_backward(g, &MODEL, loss);
  bb_value eval_in[3] = {x, y, after}, score;
  bb_rec_role_call(g, &MODEL, "Evaluate", eval_in, 3, NULL, 0, &score, 1);
  bb_rec_output(g, "score", score);
  bb_rec_output(g, "onnx", bb_rec_model_export_after(g, &MODEL, after));
}

static const bb_module TRAIN = {sizeof(bb_module), "Train", train_body, NULL, NULL, NULL, 0};
static const bb_module EXPORT = {sizeof(bb_module), "Export", export_body, NULL, NULL, NULL, 0};
static const bb_module LOAD = {sizeof(bb_module), "Load", load_body, NULL, NULL, NULL, 0};
static const bb_module FIT = {sizeof(bb_module), "Fit", fit_body, NULL, NULL, NULL, 0};

static int bind(bb_compiler *c, const void *user, bb_error *err) {
  static const bb_component_port f32[] = {{"tensor", "ai.bytesandbrains.tensor.f32"}};
  static const bb_component_port sample[] = {{"sample", "ai.bytesandbrains.tensor.f32"}};
  bb_component_decl om = {sizeof om, "OnnxModel", f32, 1, NULL, 0};
  bb_component_decl src = {sizeof src, "ArraySource", sample, 1, NULL, 0};
  int rc = bb_compiler_declare_component(c, &om, err) || bb_compiler_declare_component(c, &src, err) ||
           bb_compiler_bind_model(c, "model", "OnnxModel", "optimizer=adam,lr=0.01,fit_steps=8,seed=3", err);
  if (!rc && user == &FIT) rc = bb_compiler_bind_data_source(c, "data", "ArraySource", "batch=16,seed=5", err);
  return rc ? err->code : 0;
}

/* Ten noisy 8×8 patterns, features in [0, 1] like scaled digits. */
static void make_data(bb_dataset *ds, uint64_t seed) {
  bb_error err;
  CHECK(!bb_dataset_init(ds, ROWS, 64, 1, NULL, &err));
  float proto[CLASSES][64];
  uint64_t r = 99;
  for (int c = 0; c < CLASSES; c++)
    for (int k = 0; k < 64; k++) r = r * 6364136223846793005ull + 1442695040888963407ull, proto[c][k] = (float)(r >> 63);
  for (size_t i = 0; i < ROWS; i++) {
    int c = (int)(i % CLASSES);
    ds->labels[i] = (float)c;
    for (int k = 0; k < 64; k++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      ds->features[i * 64 + k] = 0.8f * proto[c][k] + 0.2f * (float)((seed >> 40) & 0xffff) / 65536.0f;
    }
  }
}

static bb_val *tensor_val(const float *data, int rank, const int64_t *dims) {
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, rank, dims);
  memcpy(bb_tensor_data(t), data, bb_tensor_nbytes(t));
  bb_val *v = bb_val_tensor(NULL, t);
  bb_tensor_release(t);
  return v;
}

static bb_val *last_bytes; /* the last Bytes output invoke saw */

/* Invokes target with named inputs (released) and copies the app events' tensors out. */
static void invoke(bb_node *node, const char *target, bb_named_value *in, size_t n_in, const char *const *topics,
                   bb_tensor **outs, size_t n_out, uint64_t *samples) {
  bb_error err;
  static uint64_t now = 0;
  now += 1000;
  CHECK_MSG(!bb_node_invoke(node, target, in, n_in, now, &err), "%s", err.message);
  for (size_t i = 0; i < n_in; i++) bb_val_release(in[i].value);
  const bb_step *steps;
  size_t ns;
  CHECK(!bb_node_poll(node, now, &steps, &ns, &err));
  if (count_steps(steps, ns, BB_STEP_OP_FAILED)) print_steps(target, steps, ns);
  CHECK_EQ_INT(count_steps(steps, ns, BB_STEP_OP_FAILED), 0);
  for (size_t i = 0; i < ns; i++) {
    if (steps[i].kind != BB_STEP_APP_EVENT || !steps[i].value) continue;
    for (size_t k = 0; k < n_out; k++)
      if (strcmp(steps[i].topic, topics[k]) == 0 && bb_val_kind_of(steps[i].value) == BB_VAL_TENSOR)
        outs[k] = bb_tensor_retain(bb_val_as_tensor(steps[i].value));
    if (samples && strcmp(steps[i].topic, "samples") == 0 && bb_val_kind_of(steps[i].value) == BB_VAL_U64) *samples = bb_val_as_u64(steps[i].value);
    if (bb_val_kind_of(steps[i].value) == BB_VAL_BYTES) {
      bb_val_release(last_bytes);
      last_bytes = bb_val_retain(steps[i].value);
    }
  }
}

static bb_node *install(const bb_module *module, const char *target, const bb_dataset *ds, uint8_t **art) {
  size_t len = 0;
  *art = compile_test_module(module, bind, module, &len);
  if (!*art) return NULL;
  bb_slot_config slots[2] = {{"model", NULL, &lenet}, {"data", NULL, ds}};
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = bb_peer_id_from_u64(1);
  a.artifact = *art;
  a.artifact_len = len;
  a.targets = &target;
  a.n_targets = 1;
  a.slots = slots;
  a.n_slots = ds ? 2 : 1;
  a.registry = shipped_registry();
  bb_node *n = NULL;
  bb_error err;
  bb_install_error_kind kind;
  CHECK_MSG(!bb_install(&a, &n, &kind, &err), "install: %s (%s)", err.message, bb_install_error_name(kind));
  return n;
}

/* The flat vector's length from the model itself: every float initializer but BatchNorm's
 * running statistics. */
static int64_t expected_params(void) {
  bb_model *m = gt_load(LENET);
  int64_t total = 0;
  for (size_t i = 0; m && i < m->graph->initializers.len; i++) {
    const bb_tensor_proto *p = m->graph->initializers.items[i];
    if (p->data_type == BB_DTYPE_FLOAT && !strstr(p->name, "running_")) total += bb_tensor_proto_numel(p);
  }
  bb_model_free(m);
  return total;
}

static void test_learns_through_the_graph(void) {
  bb_dataset ds;
  make_data(&ds, 1);
  uint8_t *art;
  bb_node *node = install(&TRAIN, "Train", NULL, &art);
  const char *topics[] = {"loss", "score", "params"};
  float first = NAN, last = NAN, score = NAN;
  int64_t dims[2] = {ROWS, 64};
  for (int step = 0; node && step < 40; step++) {
    bb_named_value in[] = {{"x", tensor_val(ds.features, 2, dims)}, {"y", tensor_val(ds.labels, 1, dims)}};
    bb_tensor *outs[3] = {NULL, NULL, NULL};
    invoke(node, "Train", in, 2, topics, outs, 3, NULL);
    if (outs[0]) last = *(float *)bb_tensor_data(outs[0]);
    if (!step) first = last;
    if (outs[1]) score = *(float *)bb_tensor_data(outs[1]);
    if (outs[2]) CHECK_EQ_INT(outs[2]->numel, expected_params());
    for (int k = 0; k < 3; k++) bb_tensor_release(outs[k]);
  }
  CHECK_MSG(last < first * 0.5f && score > 0.9f, "loss %g -> %g, accuracy %g", first, last, score);
  bb_node_free(node);
  free(art);
  bb_dataset_free(&ds);
}

/* The exported model is the trained one in inference form: the input model's inputs,
 * outputs and initializer names, no training-only operator, and the CPU executor running
 * it scores what Evaluate scored. */
static void test_export_is_the_trained_model(void) {
  bb_dataset ds;
  make_data(&ds, 3);
  uint8_t *art;
  bb_node *node = install(&EXPORT, "Export", NULL, &art);
  const char *topics[] = {"score"};
  float score = NAN;
  int64_t dims[2] = {ROWS, 64};
  for (int step = 0; node && step < 20; step++) {
    bb_named_value in[] = {{"x", tensor_val(ds.features, 2, dims)}, {"y", tensor_val(ds.labels, 1, dims)}};
    bb_tensor *out = NULL;
    invoke(node, "Export", in, 2, topics, &out, 1, NULL);
    if (out) score = *(float *)bb_tensor_data(out);
    bb_tensor_release(out);
  }
  bb_model *m = NULL, *original = gt_load(LENET);
  bb_cpu_session *s = NULL;
  bb_tensor *logits[1] = {NULL};
  bb_error err;
  CHECK(last_bytes && bb_val_kind_of(last_bytes) == BB_VAL_BYTES);
  if (last_bytes && original && !bb_model_decode(bb_val_as_bytes(last_bytes), bb_val_count(last_bytes), NULL, NULL, &m, &err) &&
      !bb_cpu_session_new(m, NULL, &s, &err)) {
    CHECK_EQ_INT(m->graph->initializers.len, original->graph->initializers.len);
    for (size_t i = 0; i < m->graph->initializers.len; i++)
      CHECK_STR(m->graph->initializers.items[i]->name, original->graph->initializers.items[i]->name);
    CHECK_STR(m->graph->inputs.items[0]->name, original->graph->inputs.items[0]->name);
    CHECK_STR(m->graph->outputs.items[0]->name, original->graph->outputs.items[0]->name);
    for (size_t i = 0; i < m->graph->nodes.len; i++) CHECK(!m->graph->nodes.items[i]->domain || !*m->graph->nodes.items[i]->domain);
    int64_t xd[4] = {ROWS, 1, 8, 8};
    bb_tensor *x = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 4, xd);
    memcpy(bb_tensor_data(x), ds.features, bb_tensor_nbytes(x));
    const char *name = bb_cpu_session_input_name(s, 0);
    CHECK_MSG(bb_cpu_session_output_count(s) == 1 && !bb_cpu_session_run(s, &name, &x, 1, logits, &err), "%s", err.message);
    int correct = 0;
    for (int i = 0; logits[0] && i < ROWS; i++) {
      const float *row = (const float *)bb_tensor_data(logits[0]) + i * CLASSES;
      int best = 0;
      for (int k = 1; k < CLASSES; k++) best = row[k] > row[best] ? k : best;
      correct += best == (int)ds.labels[i];
    }
    CHECK_MSG(fabsf((float)correct / ROWS - score) < 1e-6f && score > 0.5f, "exported %d/%d, Evaluate %g", correct, ROWS, score);
    bb_tensor_release(x);
  } else {
    CHECK_MSG(0, "%s", err.message);
  }
  bb_tensor_release(logits[0]);
  bb_cpu_session_free(s);
  bb_model_free(m);
  bb_model_free(original);
  bb_val_release(last_bytes);
  last_bytes = NULL;
  bb_node_free(node);
  free(art);
  bb_dataset_free(&ds);
}

static void test_load_parameters_round_trips(void) {
  uint8_t *art;
  bb_node *node = install(&LOAD, "Load", NULL, &art);
  int64_t n = expected_params();
  float *p = malloc((size_t)n * sizeof *p);
  for (int64_t i = 0; i < n; i++) p[i] = (float)i / (float)n - 0.5f;
  const char *topics[] = {"params"};
  bb_tensor *out = NULL;
  bb_named_value in[] = {{"p", tensor_val(p, 1, &n)}};
  if (node) invoke(node, "Load", in, 1, topics, &out, 1, NULL);
  else bb_val_release(in[0].value);
  CHECK(out && out->numel == n && memcmp(bb_tensor_data(out), p, (size_t)n * sizeof *p) == 0);
  bb_tensor_release(out);
  free(p);
  bb_node_free(node);
  free(art);
}

static void test_fit_on_a_data_source(void) {
  bb_dataset ds;
  make_data(&ds, 2);
  uint8_t *art;
  bb_node *node = install(&FIT, "Fit", &ds, &art);
  int64_t n = expected_params();
  float *p = calloc((size_t)n, sizeof *p); /* all zero: Fit must move them */
  const char *topics[] = {"trained"};
  bb_tensor *out = NULL;
  uint64_t samples = 0;
  bb_named_value in[] = {{"p", tensor_val(p, 1, &n)}};
  if (node) invoke(node, "Fit", in, 1, topics, &out, 1, &samples);
  else bb_val_release(in[0].value);
  CHECK_EQ_INT(samples, 8 * 16);
  bool moved = false;
  for (int64_t i = 0; out && i < out->numel; i++) moved = moved || ((float *)bb_tensor_data(out))[i] != 0;
  CHECK(out && moved);
  bb_tensor_release(out);
  free(p);
  bb_node_free(node);
  free(art);
  bb_dataset_free(&ds);
}

/* Two instances: one saved, the other restored from its bytes saves the same bytes. */
static void test_snapshot_restores_every_tensor(void) {
  bb_component_init init = {"model", "optimizer=adamw,seed=1", 0, 1, bb_default_allocator(), &lenet, NULL};
  init.config_len = strlen(init.config);
  void *a = NULL, *b = NULL;
  bb_error err;
  CHECK(!BBI_ONNX_MODEL.create(&init, &a, &err));
  init.seed = 2; /* another seed: the restore must replace every value */
  init.config = "optimizer=adamw";
  init.config_len = strlen(init.config);
  CHECK(!BBI_ONNX_MODEL.create(&init, &b, &err));
  uint8_t *sa = NULL, *sb = NULL;
  size_t la = 0, lb = 0;
  CHECK(a && b && !BBI_ONNX_MODEL.save(a, bb_default_allocator(), &sa, &la, &err));
  CHECK(sa && !BBI_ONNX_MODEL.load(b, sa, la, &err));
  CHECK(!BBI_ONNX_MODEL.save(b, bb_default_allocator(), &sb, &lb, &err));
  CHECK(la == lb && sb && memcmp(sa, sb, la) == 0);
  CHECK_EQ_INT(BBI_ONNX_MODEL.load(b, (const uint8_t *)"junk", 4, &err), BB_ERR_MALFORMED);
  CHECK(strstr(err.message, "OnnxModel: saved state"));
  bb_buffer_free(NULL, sa);
  bb_buffer_free(NULL, sb);
  if (a) BBI_ONNX_MODEL.destroy(a);
  if (b) BBI_ONNX_MODEL.destroy(b);
}

static int create(const char *config, const void *host_data, bb_error *err) {
  bb_component_init init = {"model", config, strlen(config), 1, bb_default_allocator(), host_data, NULL};
  void *self = NULL;
  int rc = BBI_ONNX_MODEL.create(&init, &self, err);
  if (self) BBI_ONNX_MODEL.destroy(self);
  return rc;
}

static void test_configs_are_checked(void) {
  bb_error err;
  CHECK_EQ_INT(create("", NULL, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "OnnxModel: config needs model=PATH"));
  CHECK_EQ_INT(create("loss=hinge", &lenet, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "loss `hinge`"));
  CHECK_EQ_INT(create("optimizer=rmsprop", &lenet, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "optimizer `rmsprop`"));
  CHECK(create("layers=3", &lenet, &err) < 0 && strstr(err.message, "layers"));
  CHECK_EQ_INT(create("loss=mse", &lenet, &err), BB_ERR_TYPE); /* [N, 10] needs [N, 10] targets */
  CHECK(strstr(err.message, "OnnxModel:"));
  CHECK_EQ_INT(create("input=nope", &lenet, &err), BB_ERR_NOT_FOUND);
  CHECK_MSG(create("optimizer=sgd", &lenet, &err) == 0, "%s", err.message);
  bb_bytes junk = {(uint8_t *)"junk", 4};
  CHECK(create("", &junk, &err) < 0 && strstr(err.message, "OnnxModel:"));
#ifdef __EMSCRIPTEN__
  /* built for wasm, the component reads no files */
  CHECK_EQ_INT(create("model=" LENET, NULL, &err), BB_ERR_UNSUPPORTED);
  CHECK(strstr(err.message, "reads no files"));
#else
  CHECK_EQ_INT(create("model=/nonexistent.onnx", NULL, &err), BB_ERR_IO);
  CHECK(strstr(err.message, "OnnxModel: cannot open model /nonexistent.onnx"));
  CHECK_MSG(create("model=" LENET ",optimizer=sgd", NULL, &err) == 0, "%s", err.message);
#endif
}

/* The engine on a transformer whose data input is int64 token ids [2, 5]: whole-number
 * rows fill it, a fraction is refused, frozen initializers leave the flat vector and stay
 * as they were, and a config without its struct_size is refused. */
static void test_token_input_and_freezing(void) {
  static uint8_t bytes[1 << 16];
  FILE *f = fopen(BB_TEST_SOURCE_DIR "/tests/data/grad/transformer.onnx", "rb");
  size_t len = f ? fread(bytes, 1, sizeof bytes, f) : 0;
  if (f) fclose(f);
  CHECK(len > 0);
  bb_error err;
  bb_onnx_model_config c;
  bb_onnx_model *all = NULL, *frozen = NULL;
  CHECK_MSG(!bb_onnx_model_config_parse("optimizer=sgd,lr=0.1", NULL, 1, &c, &err), "%s", err.message);
  CHECK_MSG(!bb_onnx_model_new(bytes, len, &c, NULL, &all, &err), "%s", err.message);
  CHECK_MSG(!bb_onnx_model_config_parse("optimizer=sgd,lr=0.1,freeze=emb.weight|pos", NULL, 1, &c, &err), "%s", err.message);
  CHECK_MSG(!bb_onnx_model_new(bytes, len, &c, NULL, &frozen, &err), "%s", err.message);
  if (!all || !frozen) goto done;
  CHECK_EQ_INT(bb_onnx_model_param_count(all) - bb_onnx_model_param_count(frozen), 11 * 8 + 5 * 8);
  bb_tensor *x = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 2, (int64_t[]){2, 5});
  bb_tensor *y = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 1, (int64_t[]){2});
  float *xd = bb_tensor_data(x), *yd = bb_tensor_data(y);
  for (int i = 0; i < 10; i++) xd[i] = (float)(i * 3 % 11);
  yd[0] = 2, yd[1] = 0;
  bb_grad_step st;
  CHECK_MSG(!bb_onnx_model_step(frozen, x, y, &st, &err) && st.applied, "%s", err.message);
  CHECK(!bb_grad_trainer_value(bb_onnx_model_trainer(frozen), "emb.weight")); /* not held: not trained */
  CHECK(bb_grad_trainer_value(bb_onnx_model_trainer(all), "emb.weight"));
  xd[3] = 2.5f;
  CHECK_EQ_INT(bb_onnx_model_step(all, x, y, &st, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "value 2.5 at 3 is not a whole number") && strstr(err.message, "int64 input tokens"));
  bb_tensor_release(x);
  bb_tensor_release(y);
  c.struct_size = 0;
  bb_onnx_model *none = NULL;
  CHECK_EQ_INT(bb_onnx_model_new(bytes, len, &c, NULL, &none, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "struct_size 0") && !none);
  CHECK_MSG(!bb_onnx_model_config_parse("freeze=nope", NULL, 1, &c, &err), "%s", err.message);
  CHECK_EQ_INT(bb_onnx_model_new(bytes, len, &c, NULL, &none, &err), BB_ERR_NOT_FOUND);
  CHECK(strstr(err.message, "frozen parameter nope is not an initializer"));
done:
  bb_onnx_model_free(all);
  bb_onnx_model_free(frozen);
}

/* A prediction after a training step uses the stepped weights: the model's predictions
 * before and after one step against a fresh session on the model with the trained values
 * stored into it (whose Conv and Gemm weights are its constants, packed once). LeNet's
 * first convolution runs on the 8×8 plane, its second with positions as rows, so both
 * layouts of packed weights meet a changed W. */
static void test_prediction_follows_training(void) {
  bb_error err;
  bb_onnx_model_config c;
  bb_onnx_model *mm = NULL;
  CHECK_MSG(!bb_onnx_model_config_parse("optimizer=sgd,lr=0.5", NULL, 1, &c, &err), "%s", err.message);
  CHECK_MSG(!bb_onnx_model_new(lenet.data, lenet.len, &c, NULL, &mm, &err), "%s", err.message);
  if (!mm) return;
  bb_dataset ds;
  make_data(&ds, 5);
  bb_tensor *x = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 2, (int64_t[]){ROWS, 64});
  bb_tensor *y = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 1, (int64_t[]){ROWS});
  memcpy(bb_tensor_data(x), ds.features, bb_tensor_nbytes(x));
  memcpy(bb_tensor_data(y), ds.labels, bb_tensor_nbytes(y));
  bb_tensor *before = NULL, *after = NULL, *want[1] = {NULL};
  bb_grad_step st;
  CHECK_MSG(!bb_onnx_model_predict(mm, x, &before, &err), "%s", err.message);
  CHECK_MSG(!bb_onnx_model_step(mm, x, y, &st, &err) && st.applied, "%s", err.message);
  CHECK_MSG(!bb_onnx_model_predict(mm, x, &after, &err), "%s", err.message);
  bb_model *original = gt_load(LENET), *trained = NULL;
  bb_cpu_session *s = NULL;
  bb_tensor *x4 = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 4, (int64_t[]){ROWS, 1, 8, 8});
  memcpy(bb_tensor_data(x4), ds.features, bb_tensor_nbytes(x4));
  if (original && !bb_grad_inference_model(original, NULL, &trained, &err) &&
      !bb_grad_trainer_store(bb_onnx_model_trainer(mm), trained, &err) &&
      !bb_cpu_session_new(trained, NULL, &s, &err)) {
    const char *name = bb_cpu_session_input_name(s, 0);
    for (int run = 0; run < 2; run++) { /* the second run on the kept packings */
      bb_tensor_release(want[0]);
      want[0] = NULL;
      CHECK_MSG(!bb_cpu_session_run(s, &name, &x4, 1, want, &err), "%s", err.message);
    }
  } else {
    CHECK_MSG(0, "%s", err.message);
  }
  double moved = 0, off = 0;
  for (int64_t i = 0; before && after && want[0] && i < want[0]->numel; i++) {
    const float b = ((const float *)bb_tensor_data(before))[i], a = ((const float *)bb_tensor_data(after))[i];
    const float w = ((const float *)bb_tensor_data(want[0]))[i];
    moved = fmax(moved, fabs((double)b - w));
    off = fmax(off, fabs((double)a - w) / (1.0 + fabs((double)w)));
  }
  CHECK_MSG(want[0] && after && want[0]->numel == after->numel && off < 1e-5 && moved > 1e-3,
            "after the step: off the trained model's prediction by %g (the step moved it by %g)", off, moved);
  bb_tensor_release(before), bb_tensor_release(after), bb_tensor_release(want[0]);
  bb_tensor_release(x), bb_tensor_release(y), bb_tensor_release(x4);
  bb_cpu_session_free(s);
  bb_model_free(trained);
  bb_model_free(original);
  bb_dataset_free(&ds);
  bb_onnx_model_free(mm);
}

/* max_total_bytes reaches every run the engine makes: with 4 KiB LeNet's step and its
 * prediction on 8 rows are stopped with the cap named, with 2 GiB (past the CPU session's
 * 1 GiB default) both run; a cap that is not a count of bytes is refused by name. */
static void test_total_bytes_cap(void) {
  bb_error err;
  bb_onnx_model_config c;
  bb_onnx_model *small = NULL, *big = NULL;
  CHECK_MSG(!bb_onnx_model_config_parse("max_total_bytes=4096", NULL, 1, &c, &err), "%s", err.message);
  CHECK_EQ_INT(c.max_total_bytes, 4096);
  CHECK_MSG(!bb_onnx_model_new(lenet.data, lenet.len, &c, NULL, &small, &err), "%s", err.message);
  CHECK_MSG(!bb_onnx_model_config_parse("max_total_bytes=2147483648", NULL, 1, &c, &err), "%s", err.message);
  CHECK_MSG(!bb_onnx_model_new(lenet.data, lenet.len, &c, NULL, &big, &err), "%s", err.message);
  CHECK_EQ_INT(bb_onnx_model_config_parse("max_total_bytes=-1", NULL, 1, &c, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(err.message, "max_total_bytes"), "%s", err.message);
  if (!small || !big) goto done;
  bb_tensor *x = bb_tensor_new_zeros(NULL, BB_DTYPE_FLOAT, 2, (int64_t[]){8, 64});
  bb_tensor *y = bb_tensor_new_zeros(NULL, BB_DTYPE_FLOAT, 1, (int64_t[]){8});
  bb_grad_step st;
  bb_tensor *pred = NULL;
  CHECK_EQ_INT(bb_onnx_model_step(small, x, y, &st, &err), BB_ERR_LIMIT);
  CHECK_MSG(strstr(err.message, "over the cap of 4096 (bb_cpu_limits.max_total_bytes)"), "%s", err.message);
  CHECK_EQ_INT(bb_onnx_model_predict(small, x, &pred, &err), BB_ERR_LIMIT);
  CHECK(!pred && strstr(err.message, "max_total_bytes"));
  CHECK_MSG(!bb_onnx_model_step(big, x, y, &st, &err) && st.applied, "%s", err.message);
  CHECK_MSG(!bb_onnx_model_predict(big, x, &pred, &err) && pred, "%s", err.message);
  bb_tensor_release(pred);
  bb_tensor_release(x);
  bb_tensor_release(y);
done:
  bb_onnx_model_free(small);
  bb_onnx_model_free(big);
}

int main(void) {
  read_lenet();
  RUN(test_learns_through_the_graph);
  RUN(test_export_is_the_trained_model);
  RUN(test_load_parameters_round_trips);
  RUN(test_fit_on_a_data_source);
  RUN(test_snapshot_restores_every_tensor);
  RUN(test_configs_are_checked);
  RUN(test_token_input_and_freezing);
  RUN(test_total_bytes_cap);
  RUN(test_prediction_follows_training);
  return bb_test_finish();
}
