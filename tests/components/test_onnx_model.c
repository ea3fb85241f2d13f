/* OnnxModel, the Model concrete over any ONNX model: the LeNet-style CNN PyTorch exported
 * (tests/data/grad) installed on a node learns through Forward / ComputeLoss / Backward,
 * Evaluate scores it, Params / LoadParameters move the documented flat vector, Fit trains
 * on an ArraySource, a snapshot restores every tensor, and bad configs are refused with
 * the key named. */
#include <math.h>
#include <stdlib.h>

#include "../grad/gradtest.h"
#include "../runtime/rttest.h"
#include "bb/roles.h"
#include "bb/dataset.h"
#include "components/shipped.h"

#define LENET BB_TEST_SOURCE_DIR "/tests/data/grad/lenet_dynamic.onnx"
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

static const bb_module TRAIN = {sizeof(bb_module), "Train", train_body, NULL, NULL, NULL, 0};
static const bb_module LOAD = {sizeof(bb_module), "Load", load_body, NULL, NULL, NULL, 0};
static const bb_module FIT = {sizeof(bb_module), "Fit", fit_body, NULL, NULL, NULL, 0};

static int bind(bb_compiler *c, const void *user, bb_error *err) {
  static const bb_component_port f32[] = {{"tensor", "ai.bytesandbrains.tensor.f32"}};
  static const bb_component_port sample[] = {{"sample", "ai.bytesandbrains.tensor.f32"}};
  bb_component_decl om = {sizeof om, "OnnxModel", f32, 1, NULL, 0};
  bb_component_decl src = {sizeof src, "ArraySource", sample, 1, NULL, 0};
  int rc = bb_compiler_declare_component(c, &om, err) || bb_compiler_declare_component(c, &src, err) ||
           bb_compiler_bind_model(c, "model", "OnnxModel", "model=" LENET ",optimizer=adam,lr=0.01,fit_steps=8,seed=3", err);
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
  }
}

static bb_node *install(const bb_module *module, const char *target, const bb_dataset *ds, uint8_t **art) {
  size_t len = 0;
  *art = compile_test_module(module, bind, module, &len);
  if (!*art) return NULL;
  bb_slot_config slot = {"data", NULL, ds};
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = bb_peer_id_from_u64(1);
  a.artifact = *art;
  a.artifact_len = len;
  a.targets = &target;
  a.n_targets = 1;
  a.slots = ds ? &slot : NULL;
  a.n_slots = ds ? 1 : 0;
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
  bb_component_init init = {"model", "model=" LENET ",optimizer=adamw,seed=1", 0, 1, bb_default_allocator(), NULL, NULL};
  init.config_len = strlen(init.config);
  void *a = NULL, *b = NULL;
  bb_error err;
  CHECK(!BBI_ONNX_MODEL.create(&init, &a, &err));
  init.seed = 2; /* another seed: the restore must replace every value */
  init.config = "model=" LENET ",optimizer=adamw";
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
  CHECK_EQ_INT(create("model=/nonexistent.onnx", NULL, &err), BB_ERR_IO);
  CHECK(strstr(err.message, "OnnxModel: cannot open model /nonexistent.onnx"));
  CHECK_EQ_INT(create("model=" LENET ",loss=hinge", NULL, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "loss `hinge`"));
  CHECK_EQ_INT(create("model=" LENET ",optimizer=rmsprop", NULL, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "optimizer `rmsprop`"));
  CHECK(create("model=" LENET ",layers=3", NULL, &err) < 0 && strstr(err.message, "layers"));
  CHECK_EQ_INT(create("model=" LENET ",loss=mse", NULL, &err), BB_ERR_TYPE); /* [N, 10] needs [N, 10] targets */
  CHECK(strstr(err.message, "OnnxModel:"));
  CHECK_EQ_INT(create("model=" LENET ",input=nope", NULL, &err), BB_ERR_NOT_FOUND);
  /* the model as host_data bytes instead of a path */
  FILE *f = fopen(LENET, "rb");
  uint8_t buf[1 << 16];
  bb_bytes bytes = {buf, f ? fread(buf, 1, sizeof buf, f) : 0};
  if (f) fclose(f);
  CHECK_MSG(create("optimizer=sgd", &bytes, &err) == 0, "%s", err.message);
}

int main(void) {
  RUN(test_learns_through_the_graph);
  RUN(test_load_parameters_round_trips);
  RUN(test_fit_on_a_data_source);
  RUN(test_snapshot_restores_every_tensor);
  RUN(test_configs_are_checked);
  return bb_test_finish();
}
