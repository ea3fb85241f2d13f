/* CpuMlp: the trainable Model concrete (a multilayer perceptron on the CPU kernels).
 *
 * Config: inputs=64,hidden=32x16,outputs=10,activation=relu|tanh|sigmoid|identity,
 *         loss=xent|mse,lr=0.05,momentum=0.9,weight_decay=0,seed=<u64>,
 *         input_scale=1,input_shift=0   (applied to every feature before layer 1)
 *         fit_steps=10,data=data          (Fit: SGD steps on batches of that DataSource slot)
 * Forward remembers its input and ComputeLoss its target; Backward then takes one SGD
 * step on that batch. Params/LoadParameters/ApplyDelta use the flat parameter vector
 * (docs/LEARNING.md gives its layout); Export gives the network as ONNX (mlp_onnx.c). */
#include <stdlib.h>
#include <string.h>

#include "bb/roles.h"
#include "components/models/mlp.h"
#include "bb/common.h"
#include "util/mem.h"

typedef struct cpu_mlp {
  const bb_allocator *alloc;
  bbi_mlp *m;
  uint64_t fit_steps;
  char data_slot[64];
  bb_tensor *last_x, *last_target;
  size_t target_width; /* target floats per row: 1 (a class index) for xent, outputs for mse */
} cpu_mlp;

static const char *const KEYS[] = {"inputs", "hidden", "outputs", "activation", "loss", "lr", "momentum",
                                   "weight_decay", "seed", "input_scale", "input_shift", "fit_steps", "data",
                                   NULL};

static int parse_hidden(const char *text, size_t *hidden, size_t *n, bb_error *err) {
  *n = 0;
  for (const char *p = text; *p;) {
    char *end = (char *)p;
    unsigned long w = *p >= '0' && *p <= '9' ? strtoul(p, &end, 10) : 0; /* digits only: no sign, no blanks */
    if (end == p || w == 0 || *n == BBI_MLP_MAX_HIDDEN || (*end && (*end != 'x' || !end[1])))
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "CpuMlp: hidden=`%s` is not widths joined by x (e.g. 32x16)",
                          text);
    hidden[(*n)++] = w;
    p = *end ? end + 1 : end;
  }
  return 0;
}

/* A bbi_mlp as the config describes it (seed: the default of seed=); the Fit keys into
 * fit_steps and data_slot when those are not NULL. */
static int make_mlp(const char *c, uint64_t default_seed, const bb_allocator *alloc, bbi_mlp **out, uint64_t *fit_steps,
                    char *data_slot, bb_error *err) {
  uint64_t inputs, outputs, seed, steps;
  char slot[64];
  float lr, momentum, wd, scale, shift;
  char hidden_text[256], act[16], loss[16];
  size_t hidden[BBI_MLP_MAX_HIDDEN], n_hidden;
  int rc;
  if ((rc = bb_config_check(c, KEYS, err)) || (rc = bb_config_u64(c, "inputs", 0, &inputs, err)) ||
      (rc = bb_config_u64(c, "outputs", 0, &outputs, err)) || (rc = bb_config_u64(c, "seed", default_seed, &seed, err)) ||
      (rc = bb_config_f32(c, "lr", 0.05f, &lr, err)) || (rc = bb_config_f32(c, "momentum", 0.9f, &momentum, err)) ||
      (rc = bb_config_f32(c, "weight_decay", 0, &wd, err)) ||
      (rc = bb_config_f32(c, "input_scale", 1, &scale, err)) || (rc = bb_config_f32(c, "input_shift", 0, &shift, err)) ||
      (rc = bb_config_str(c, "hidden", "", hidden_text, sizeof hidden_text, err)) ||
      (rc = bb_config_str(c, "activation", "relu", act, sizeof act, err)) ||
      (rc = bb_config_str(c, "loss", "xent", loss, sizeof loss, err)) ||
      (rc = bb_config_u64(c, "fit_steps", 10, &steps, err)) ||
      (rc = bb_config_str(c, "data", "data", slot, sizeof slot, err)) ||
      (rc = parse_hidden(hidden_text, hidden, &n_hidden, err)))
    return rc;
  if (!inputs || !outputs)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "CpuMlp: config needs inputs=<n> and outputs=<n> (got `%s`)", c);
  bbi_mlp_config cfg = {0};
  cfg.inputs = inputs;
  cfg.hidden = hidden;
  cfg.n_hidden = n_hidden;
  cfg.outputs = outputs;
  static const char *const ACTS[] = {"relu", "tanh", "sigmoid", "identity"};
  int a = -1;
  for (int i = 0; i < 4; i++)
    if (strcmp(act, ACTS[i]) == 0) a = i;
  if (a < 0) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "CpuMlp: activation `%s` is not relu|tanh|sigmoid|identity", act);
  cfg.activation = (bbi_mlp_activation)a;
  if (strcmp(loss, "xent") == 0) cfg.loss = BBI_MLP_SOFTMAX_CROSS_ENTROPY;
  else if (strcmp(loss, "mse") == 0) cfg.loss = BBI_MLP_MEAN_SQUARED_ERROR;
  else return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "CpuMlp: loss `%s` is not xent|mse", loss);
  cfg.learning_rate = lr;
  cfg.momentum = momentum;
  cfg.weight_decay = wd;
  cfg.seed = seed;
  float *sc = NULL, *sh = NULL;
  if (scale != 1 || shift != 0) {
    sc = bbi_mem_calloc(alloc, inputs, sizeof *sc);
    sh = bbi_mem_calloc(alloc, inputs, sizeof *sh);
    if (!sc || !sh) {
      bbi_mem_free(alloc, sc);
      bbi_mem_free(alloc, sh);
      return bb_error_set(err, BB_ERR_NOMEM, "CpuMlp: out of memory");
    }
    for (size_t i = 0; i < inputs; i++) sc[i] = scale, sh[i] = shift;
    cfg.input_scale = sc;
    cfg.input_shift = sh;
  }
  rc = bbi_mlp_create(&cfg, alloc, out, err);
  bbi_mem_free(alloc, sc);
  bbi_mem_free(alloc, sh);
  if (fit_steps) *fit_steps = steps;
  if (data_slot) memcpy(data_slot, slot, sizeof slot);
  return rc;
}

static int mlp_create(const bb_component_init *init, void **self, bb_error *err) {
  cpu_mlp *s = bbi_mem_calloc(init->alloc, 1, sizeof *s);
  if (!s) return bb_error_set(err, BB_ERR_NOMEM, "CpuMlp: out of memory");
  s->alloc = init->alloc;
  int rc = make_mlp(init->config, init->seed, init->alloc, &s->m, &s->fit_steps, s->data_slot, err);
  if (rc) {
    bbi_mem_free(init->alloc, s);
    return rc;
  }
  bbi_mlp_shape sh;
  bbi_mlp_describe(s->m, &sh);
  s->target_width = sh.loss == BBI_MLP_MEAN_SQUARED_ERROR ? bbi_mlp_outputs(s->m) : 1;
  *self = s;
  return 0;
}

int bb_cpu_mlp_export(const char *config, const bb_tensor *params, uint8_t **onnx, size_t *len, bb_error *err) {
  bbi_mlp *m = NULL;
  int rc = make_mlp(config ? config : "", 0, bb_default_allocator(), &m, NULL, NULL, err);
  if (!rc && (params->dtype != BB_DTYPE_FLOAT || (size_t)params->numel != bbi_mlp_param_count(m)))
    rc = bb_error_set(err, BB_ERR_TYPE, "CpuMlp: parameters must be float32 [%zu], got %lld floats",
                      bbi_mlp_param_count(m), (long long)params->numel);
  if (!rc) rc = bbi_mlp_load_params(m, bb_tensor_data(params), (size_t)params->numel, err);
  if (!rc) rc = bbi_mlp_export_onnx(m, onnx, len, err);
  bbi_mlp_free(m);
  return rc;
}

static void mlp_destroy(void *self) {
  cpu_mlp *s = self;
  bbi_mlp_free(s->m);
  bb_tensor_release(s->last_x);
  bb_tensor_release(s->last_target);
  bbi_mem_free(s->alloc, s);
}

/* Targets for n rows: float32, target_width per row (what the loss reads). */
static int check_targets(const cpu_mlp *s, const bb_tensor *t, size_t n, const char *op, bb_error *err) {
  if (t->dtype != BB_DTYPE_FLOAT || (size_t)t->numel != n * s->target_width)
    return bb_error_set(err, BB_ERR_TYPE, "CpuMlp: %s takes %zu float32 targets for %zu rows, got %lld", op,
                        n * s->target_width, n, (long long)t->numel);
  return 0;
}

/* Rows of a float32 input: [n, inputs] or one row [inputs]. */
static int rows_of(const cpu_mlp *s, const bb_tensor *x, size_t *n, bb_error *err) {
  size_t in = bbi_mlp_inputs(s->m);
  if (x->dtype != BB_DTYPE_FLOAT || x->rank < 1 || !x->numel || (size_t)x->numel % in ||
      x->dims[x->rank - 1] != (int64_t)in)
    return bb_error_set(err, BB_ERR_TYPE, "CpuMlp: input must be float32 [n, %zu]", in);
  *n = (size_t)x->numel / in;
  return 0;
}

static int mlp_forward(void *self, bb_ctx *ctx, const bb_tensor *x, bb_tensor **y, bb_error *err) {
  cpu_mlp *s = self;
  size_t n = 0;
  int rc = rows_of(s, x, &n, err);
  if (rc) return rc;
  int64_t dims[2] = {(int64_t)n, (int64_t)bbi_mlp_outputs(s->m)};
  bb_tensor *out = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 2, dims);
  if (!out) return bb_error_set(err, BB_ERR_NOMEM, "CpuMlp: out of memory");
  if ((rc = bbi_mlp_forward(s->m, bb_tensor_data(x), n, bb_tensor_data(out), err))) {
    bb_tensor_release(out);
    return rc;
  }
  bb_tensor_release(s->last_x);
  s->last_x = bb_tensor_retain((bb_tensor *)x);
  *y = out;
  return 0;
}

static int mlp_loss(void *self, bb_ctx *ctx, const bb_tensor *pred, const bb_tensor *target, bb_tensor **loss,
                    bb_error *err) {
  cpu_mlp *s = self;
  size_t out = bbi_mlp_outputs(s->m);
  if (pred->dtype != BB_DTYPE_FLOAT || target->dtype != BB_DTYPE_FLOAT || !pred->numel || (size_t)pred->numel % out)
    return bb_error_set(err, BB_ERR_TYPE, "CpuMlp: ComputeLoss takes float32 predictions [n, %zu] and targets", out);
  size_t n = (size_t)pred->numel / out;
  float value;
  int rc = check_targets(s, target, n, "ComputeLoss", err);
  if (rc) return rc;
  rc = bbi_mlp_loss_of(s->m, bb_tensor_data(pred), bb_tensor_data(target), n, &value, err);
  if (rc) return rc;
  bb_tensor *t = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 0, NULL);
  if (!t) return bb_error_set(err, BB_ERR_NOMEM, "CpuMlp: out of memory");
  *(float *)bb_tensor_data(t) = value;
  bb_tensor_release(s->last_target);
  s->last_target = bb_tensor_retain((bb_tensor *)target);
  *loss = t;
  return 0;
}

static int mlp_backward(void *self, bb_ctx *ctx, const bb_tensor *grad, bb_error *err) {
  (void)ctx;
  (void)grad;
  cpu_mlp *s = self;
  if (!s->last_x || !s->last_target)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "CpuMlp: Backward needs a Forward and a ComputeLoss first");
  size_t n = 0;
  int rc = rows_of(s, s->last_x, &n, err);
  if (!rc) rc = check_targets(s, s->last_target, n, "Backward (the last ComputeLoss's targets)", err);
  return rc ? rc : bbi_mlp_train_batch(s->m, bb_tensor_data(s->last_x), bb_tensor_data(s->last_target), n, NULL, err);
}

static int flat_params(const cpu_mlp *s, const bb_tensor *p, bb_error *err) {
  if (p->dtype != BB_DTYPE_FLOAT || (size_t)p->numel != bbi_mlp_param_count(s->m))
    return bb_error_set(err, BB_ERR_TYPE, "CpuMlp: parameters must be float32 [%zu], got %lld floats",
                        bbi_mlp_param_count(s->m), (long long)p->numel);
  return 0;
}

static int mlp_apply_delta(void *self, bb_ctx *ctx, const bb_tensor *delta, bb_error *err) {
  (void)ctx;
  cpu_mlp *s = self;
  int rc = flat_params(s, delta, err);
  return rc ? rc : bbi_mlp_apply_delta(s->m, bb_tensor_data(delta), (size_t)delta->numel, err);
}

static int mlp_load(void *self, bb_ctx *ctx, const bb_tensor *params, bb_error *err) {
  (void)ctx;
  cpu_mlp *s = self;
  int rc = flat_params(s, params, err);
  return rc ? rc : bbi_mlp_load_params(s->m, bb_tensor_data(params), (size_t)params->numel, err);
}

static int mlp_params(void *self, bb_ctx *ctx, bb_tensor **out, bb_error *err) {
  cpu_mlp *s = self;
  int64_t n = (int64_t)bbi_mlp_param_count(s->m);
  bb_tensor *t = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 1, &n);
  if (!t) return bb_error_set(err, BB_ERR_NOMEM, "CpuMlp: out of memory");
  int rc = bbi_mlp_params(s->m, bb_tensor_data(t), (size_t)n, err);
  if (rc) bb_tensor_release(t);
  else *out = t;
  return rc;
}

/* Fit: the params, then fit_steps SGD steps on batches drawn from the data slot. */
static int mlp_fit(void *self, bb_ctx *ctx, const bb_tensor *params, bb_tensor **trained, uint64_t *samples,
                   bb_error *err) {
  cpu_mlp *s = self;
  int rc = mlp_load(self, ctx, params, err);
  for (uint64_t step = 0; step < s->fit_steps && !rc; step++) {
    bb_val *batch[2];
    if ((rc = bb_ctx_call(ctx, s->data_slot, "NextBatch", NULL, 0, batch, 2, err))) break;
    size_t n = 0;
    const bb_tensor *x = bb_val_as_tensor(batch[0]), *y = bb_val_as_tensor(batch[1]);
    if (!x || !y)
      rc = bb_error_set(err, BB_ERR_TYPE, "CpuMlp: NextBatch of slot `%s` gave no (batch, labels) tensors",
                        s->data_slot);
    else if (!(rc = rows_of(s, x, &n, err)) && !(rc = check_targets(s, y, n, "Fit (NextBatch's labels)", err)))
      rc = bbi_mlp_train_batch(s->m, bb_tensor_data(x), bb_tensor_data(y), n, NULL, err);
    if (!rc) bb_ctx_count(ctx, "train.steps", 1);
    *samples += n;
    bb_val_release(batch[0]);
    bb_val_release(batch[1]);
  }
  return rc ? rc : mlp_params(self, ctx, trained, err);
}

static int mlp_evaluate(void *self, bb_ctx *ctx, const bb_tensor *x, const bb_tensor *labels, bb_tensor **score,
                        bb_error *err) {
  cpu_mlp *s = self;
  size_t n = 0;
  int rc = rows_of(s, x, &n, err);
  if (rc) return rc;
  if (labels->dtype != BB_DTYPE_FLOAT || (size_t)labels->numel != n)
    return bb_error_set(err, BB_ERR_TYPE, "CpuMlp: Evaluate takes %zu float32 labels", n);
  float acc = 0;
  if ((rc = bbi_mlp_accuracy(s->m, bb_tensor_data(x), bb_tensor_data(labels), n, &acc, err))) return rc;
  bb_tensor *t = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 0, NULL);
  if (!t) return bb_error_set(err, BB_ERR_NOMEM, "CpuMlp: out of memory");
  *(float *)bb_tensor_data(t) = acc;
  *score = t;
  return 0;
}

static int mlp_export(void *self, bb_ctx *ctx, bb_val **onnx, bb_error *err) {
  cpu_mlp *s = self;
  uint8_t *bytes = NULL;
  size_t len = 0;
  int rc = bbi_mlp_export_onnx(s->m, &bytes, &len, err);
  if (!rc && !(*onnx = bb_val_bytes(bb_ctx_allocator(ctx), bytes, len)))
    rc = bb_error_set(err, BB_ERR_NOMEM, "CpuMlp: out of memory");
  bb_buffer_free(NULL, bytes);
  return rc;
}

static const bb_model_ops MLP_OPS = {mlp_forward, mlp_loss, mlp_backward, mlp_apply_delta, mlp_load,
                                     mlp_params,  mlp_fit,  mlp_evaluate, mlp_export, NULL, NULL, NULL, NULL, NULL};

static int mlp_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_model_dispatch(&MLP_OPS, self, ctx, call, err);
}

/* State: the parameter vector, then the momentum velocity (2P raw float32, host byte
 * order). A state of P floats (what earlier builds saved) leaves the velocity as it is
 * (zero in a freshly installed node). */
static int mlp_save(const void *self, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  const cpu_mlp *s = self;
  size_t n = bbi_mlp_param_count(s->m);
  float *buf = bbi_mem_calloc(alloc, 2 * n, sizeof *buf);
  if (!buf) return bb_error_set(err, BB_ERR_NOMEM, "CpuMlp: out of memory");
  int rc = bbi_mlp_params(s->m, buf, n, err);
  if (!rc) rc = bbi_mlp_velocity(s->m, buf + n, n, err);
  if (rc) {
    bbi_mem_free(alloc, buf);
    return rc;
  }
  *out = (uint8_t *)buf;
  *len = 2 * n * sizeof *buf;
  return 0;
}

static int mlp_restore(void *self, const uint8_t *data, size_t len, bb_error *err) {
  cpu_mlp *s = self;
  size_t n = bbi_mlp_param_count(s->m);
  if (len != n * sizeof(float) && len != 2 * n * sizeof(float))
    return bb_error_set(err, BB_ERR_MALFORMED, "CpuMlp: saved state is %zu bytes, expected %zu (or %zu)", len,
                        2 * n * sizeof(float), n * sizeof(float));
  /* a copy: data need not be float-aligned */
  float *state = bbi_mem_alloc(s->alloc, len);
  if (!state) return bb_error_set(err, BB_ERR_NOMEM, "CpuMlp: out of memory");
  memcpy(state, data, len);
  int rc = bbi_mlp_load_params(s->m, state, n, err);
  if (!rc && len > n * sizeof(float)) rc = bbi_mlp_load_velocity(s->m, state + n, n, err);
  bbi_mem_free(s->alloc, state);
  return rc;
}

static const bb_component_port MLP_STORAGE[] = {{"tensor", BB_TYPE_TENSOR_F32}};

const bb_component_type BBI_CPU_MLP = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "CpuMlp",
    .roles = 1u << BB_ROLE_MODEL,
    .storage = MLP_STORAGE,
    .n_storage = 1,
    .create = mlp_create,
    .destroy = mlp_destroy,
    .invoke = mlp_invoke,
    .save = mlp_save,
    .load = mlp_restore,
};
