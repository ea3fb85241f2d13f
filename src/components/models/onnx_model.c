/* OnnxModel: any ONNX model as a trainable Model concrete. At creation the gradient
 * builder makes its training graph, an optimizer graph is built for it, and both are
 * planned once (a bb_grad_trainer); predictions run the model's inference form with the
 * current parameters passed in place of its initializers, so nothing is rebuilt after a
 * step.
 *
 * Config (docs/COMPONENTS.md): model=PATH (or host_data: a bb_bytes of ModelProto bytes),
 *   input=NAME, output=NAME, loss=xent|mse|bce, optimizer=sgd|momentum|nesterov|adam|adamw,
 *   lr, momentum, beta1, beta2, eps, weight_decay, max_grad_norm, fit_steps=10, data=data,
 *   seed=<u64> (Dropout masks).
 * The flat parameter vector is every trained parameter, in the training graph's order (the
 * model's initializer order), each flattened row-major, concatenated. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/cpu.h"
#include "bb/grad.h"
#include "bb/roles.h"
#include "components/shipped.h"
#include "bb/common.h"
#include "util/mem.h"

#define MAX_SESSION_OUTPUTS 64

typedef struct onnx_model {
  const bb_allocator *alloc;
  bb_model *model, *inference;
  bb_grad_graph *graph;
  bb_grad_optimizer *opt;
  bb_grad_trainer *trainer;
  bb_cpu_session *predict;
  bb_grad_loss loss;
  const char *input;    /* the data input's name (in `model`) */
  int in_rank;          /* its declared shape; dims after the batch reshape each row */
  int64_t in_dims[BB_MAX_RANK];
  int32_t target_dtype; /* what the training graph's target input takes */
  int target_rank;
  size_t n_params, param_count; /* parameters, and floats in the flat vector */
  uint64_t fit_steps;
  char data_slot[64];
  /* predictions: the data input, then every held tensor the inference model has as an
   * initializer, passed in its place (names fixed at creation, tensors read per call) */
  const char **names;
  bb_tensor **args;
  size_t n_args;
  bb_tensor *last_x, *last_target;
} onnx_model;

static const char *const KEYS[] = {"model", "input", "output", "loss", "optimizer", "lr", "momentum", "beta1", "beta2",
                                   "eps", "weight_decay", "max_grad_norm", "fit_steps", "data", "seed", NULL};

static void om_destroy(void *self) {
  onnx_model *s = self;
  bb_cpu_session_free(s->predict);
  bb_grad_trainer_free(s->trainer);
  bb_grad_optimizer_free(s->opt);
  bb_grad_graph_free(s->graph);
  bb_model_free(s->inference);
  bb_model_free(s->model);
  bb_tensor_release(s->last_x);
  bb_tensor_release(s->last_target);
  bbi_mem_free(s->alloc, s->names);
  bbi_mem_free(s->alloc, s->args);
  bbi_mem_free(s->alloc, s);
}

/* The model bytes: host_data (a bb_bytes) or the file config names. */
static int load_model(onnx_model *s, const bb_component_init *init, const char *path, bb_error *err) {
  const bb_bytes *given = init->host_data;
  if (given) return bb_model_decode(given->data, given->len, s->alloc, NULL, &s->model, err);
  if (!*path) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "OnnxModel: config needs model=PATH (or host_data bytes)");
#ifdef __EMSCRIPTEN__
  /* bb.wasm has no file system (its only imports are the loader's): the host hands the bytes */
  return bb_error_set(err, BB_ERR_UNSUPPORTED, "OnnxModel: model=%s: bb.wasm reads no files; pass the model bytes as host_data",
                      path);
#else
  FILE *f = fopen(path, "rb");
  if (!f) return bb_error_set(err, BB_ERR_IO, "OnnxModel: cannot open model %s", path);
  uint8_t *buf = NULL;
  size_t len = 0, cap = 0;
  int rc = 0;
  for (;;) {
    if (len == cap && bbi_mem_grow(s->alloc, (void **)&buf, &cap, len + 65536, 1)) {
      rc = bb_error_set(err, BB_ERR_NOMEM, "OnnxModel: out of memory reading %s", path);
      break;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (!got) break;
  }
  if (!rc && ferror(f)) rc = bb_error_set(err, BB_ERR_IO, "OnnxModel: cannot read model %s", path);
  fclose(f);
  if (!rc) rc = bb_model_decode(buf, len, s->alloc, NULL, &s->model, err);
  bbi_mem_free(s->alloc, buf);
  return rc ? bb_error_prefix(err, "OnnxModel: %s: ", path) : 0;
#endif
}

static bool is_initializer(const bb_model *m, const char *name) {
  for (size_t i = 0; i < m->graph->initializers.len; i++)
    if (strcmp(m->graph->initializers.items[i]->name, name) == 0) return true;
  return false;
}

static int parse_choices(const char *loss, const char *optimizer, bb_grad_loss *kind, bb_optimizer_config *c, bb_error *err) {
  if (strcmp(loss, "xent") == 0) *kind = BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY;
  else if (strcmp(loss, "mse") == 0) *kind = BB_GRAD_LOSS_MSE;
  else if (strcmp(loss, "bce") == 0) *kind = BB_GRAD_LOSS_BCE_WITH_LOGITS;
  else return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "OnnxModel: loss `%s` is not xent|mse|bce", loss);
  static const char *const NAMES[] = {"sgd", "momentum", "nesterov", "adam", "adamw"};
  static const bb_optimizer_kind KINDS[] = {BB_OPTIMIZER_SGD, BB_OPTIMIZER_MOMENTUM, BB_OPTIMIZER_MOMENTUM, BB_OPTIMIZER_ADAM,
                                            BB_OPTIMIZER_ADAMW};
  for (size_t i = 0; i < 5; i++)
    if (strcmp(optimizer, NAMES[i]) == 0) {
      *c = bb_optimizer_defaults(KINDS[i]);
      c->nesterov = i == 2;
      return 0;
    }
  return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "OnnxModel: optimizer `%s` is not sgd|momentum|nesterov|adam|adamw",
                      optimizer);
}

static int read_config(onnx_model *s, const bb_component_init *init, char *path, size_t path_size, char *input,
                       char *output, bb_optimizer_config *c, uint64_t *seed, bb_error *err) {
  const char *cfg = init->config;
  char loss[16], optimizer[16];
  int rc;
  if ((rc = bb_config_check(cfg, KEYS, err)) || (rc = bb_config_str(cfg, "model", "", path, path_size, err)) ||
      (rc = bb_config_str(cfg, "input", "", input, 128, err)) || (rc = bb_config_str(cfg, "output", "", output, 128, err)) ||
      (rc = bb_config_str(cfg, "loss", "xent", loss, sizeof loss, err)) ||
      (rc = bb_config_str(cfg, "optimizer", "adam", optimizer, sizeof optimizer, err)) ||
      (rc = parse_choices(loss, optimizer, &s->loss, c, err)) || (rc = bb_config_f32(cfg, "lr", c->lr, &c->lr, err)) ||
      (rc = bb_config_f32(cfg, "momentum", c->momentum, &c->momentum, err)) ||
      (rc = bb_config_f32(cfg, "beta1", c->beta1, &c->beta1, err)) || (rc = bb_config_f32(cfg, "beta2", c->beta2, &c->beta2, err)) ||
      (rc = bb_config_f32(cfg, "eps", c->eps, &c->eps, err)) ||
      (rc = bb_config_f32(cfg, "weight_decay", c->weight_decay, &c->weight_decay, err)) ||
      (rc = bb_config_f32(cfg, "max_grad_norm", 0, &c->max_grad_norm, err)) ||
      (rc = bb_config_u64(cfg, "fit_steps", 10, &s->fit_steps, err)) ||
      (rc = bb_config_str(cfg, "data", "data", s->data_slot, sizeof s->data_slot, err)) ||
      (rc = bb_config_u64(cfg, "seed", init->seed, seed, err)))
    return rc;
  return 0;
}

/* The data input and the target's declared form. */
static int describe_io(onnx_model *s, const char *input, bb_error *err) {
  const bb_graph *g = s->model->graph;
  const bb_value_info *in = NULL;
  for (size_t i = 0; i < g->inputs.len && !in; i++) {
    const bb_value_info *vi = g->inputs.items[i];
    if (!is_initializer(s->model, vi->name) && (!*input || strcmp(vi->name, input) == 0)) in = vi;
  }
  if (!in) return bb_error_set(err, BB_ERR_NOT_FOUND, "OnnxModel: the model has no data input%s%s", *input ? " " : "", input);
  const bb_type *t = in->type;
  if (!t || t->kind != BB_TYPE_TENSOR || t->elem_type != BB_DTYPE_FLOAT || !t->shape || t->shape->rank < 1 ||
      t->shape->rank > BB_MAX_RANK)
    return bb_error_set(err, BB_ERR_TYPE, "OnnxModel: input %s must be a float32 tensor of known rank", in->name);
  s->input = in->name;
  s->in_rank = (int)t->shape->rank;
  for (int d = 0; d < s->in_rank; d++) s->in_dims[d] = t->shape->dims[d].kind == BB_DIM_VALUE ? t->shape->dims[d].value : -1;
  const bb_value_info *target = bb_vilist_find(&s->graph->model->graph->inputs, s->graph->target);
  const bb_shape *ts = target->type->shape;
  s->target_dtype = target->type->elem_type;
  s->target_rank = ts ? (int)ts->rank : 1;
  /* labels come one per row */
  if (s->target_rank > 2 || (s->target_rank == 2 && ts->dims[1].kind == BB_DIM_VALUE && ts->dims[1].value != 1))
    return bb_error_set(err, BB_ERR_TYPE, "OnnxModel: the loss compares output %s to one label per row, but it gives %s per row",
                        s->graph->prediction, s->target_rank > 2 ? "a tensor" : "several values");
  return 0;
}

/* The flat vector's size; every parameter must be float32. */
static int count_params(onnx_model *s, bb_error *err) {
  s->n_params = s->graph->n_params;
  for (size_t i = 0; i < s->n_params; i++) {
    const bb_tensor *p = bb_grad_trainer_value(s->trainer, s->graph->params[i]);
    if (p->dtype != BB_DTYPE_FLOAT)
      return bb_error_set(err, BB_ERR_TYPE, "OnnxModel: parameter %s is %s; the flat vector holds float32", s->graph->params[i],
                          bb_dtype_name(p->dtype));
    s->param_count += (size_t)p->numel;
  }
  return 0;
}

static int om_create(const bb_component_init *init, void **self, bb_error *err) {
  onnx_model *s = bbi_mem_calloc(init->alloc, 1, sizeof *s);
  if (!s) return bb_error_set(err, BB_ERR_NOMEM, "OnnxModel: out of memory");
  s->alloc = init->alloc;
  char path[512], input[128], output[128];
  bb_optimizer_config c;
  uint64_t seed;
  int rc = read_config(s, init, path, sizeof path, input, output, &c, &seed, err);
  if (!rc) rc = load_model(s, init, path, err);
  if (!rc) {
    bb_grad_options o;
    memset(&o, 0, sizeof o);
    o.loss = s->loss;
    o.output = *output ? output : NULL;
    rc = bb_grad_build(s->model, &o, s->alloc, &s->graph, err);
  }
  if (!rc) rc = bb_grad_optimizer_build(s->graph, &c, &s->opt, err);
  if (!rc) rc = bb_grad_trainer_new(s->graph, s->opt, seed, s->alloc, &s->trainer, err);
  if (!rc) rc = bb_grad_inference_model(s->model, s->alloc, &s->inference, err);
  if (!rc) rc = bb_cpu_session_new(s->inference, s->alloc, &s->predict, err);
  if (!rc) rc = describe_io(s, input, err);
  if (!rc) rc = count_params(s, err);
  if (!rc && bb_cpu_session_output_count(s->predict) > MAX_SESSION_OUTPUTS)
    rc = bb_error_set(err, BB_ERR_LIMIT, "OnnxModel: the model has over %d outputs", MAX_SESSION_OUTPUTS);
  size_t held = rc ? 0 : bb_grad_trainer_value_count(s->trainer);
  if (!rc && (!(s->names = bbi_mem_calloc(s->alloc, held + 1, sizeof *s->names)) ||
              !(s->args = bbi_mem_calloc(s->alloc, held + 1, sizeof *s->args))))
    rc = bb_error_set(err, BB_ERR_NOMEM, "OnnxModel: out of memory");
  if (!rc) {
    s->names[s->n_args++] = s->input;
    for (size_t i = 0; i < held; i++) {
      const char *name = bb_grad_trainer_value_name(s->trainer, i);
      if (is_initializer(s->inference, name)) s->names[s->n_args++] = name;
    }
  }
  if (rc) { /* every message starts with the component's name */
    if (err && strncmp(err->message, "OnnxModel", 9) != 0) bb_error_prefix(err, "OnnxModel: ");
    om_destroy(s);
    return rc;
  }
  *self = s;
  return 0;
}

/* ---- data in the model's shapes ------------------------------------------------------------ */

/* x as the data input takes it: rows [n, features] take the input's dims after the batch. */
static int model_input(const onnx_model *s, const bb_tensor *x, bb_tensor **out, bb_error *err) {
  if (x->dtype != BB_DTYPE_FLOAT || x->rank < 1 || !x->numel)
    return bb_error_set(err, BB_ERR_TYPE, "OnnxModel: input must be float32 rows [n, ...]");
  int64_t dims[BB_MAX_RANK], row = 1, n = x->dims[0];
  memcpy(dims, s->in_dims, sizeof dims);
  dims[0] = n;
  int hole = -1;
  for (int d = 1; d < s->in_rank; d++) {
    if (dims[d] >= 0) row *= dims[d];
    else if (hole < 0) hole = d;
    else return bb_error_set(err, BB_ERR_TYPE, "OnnxModel: input %s has several unknown dims after the batch", s->input);
  }
  if (hole > 0 && row && (x->numel / n) % row == 0) dims[hole] = x->numel / n / row, row *= dims[hole];
  if (row * n != x->numel || (s->in_dims[0] >= 0 && s->in_dims[0] != n))
    return bb_error_set(err, BB_ERR_TYPE, "OnnxModel: %lld rows of %lld values do not fit input %s", (long long)n,
                        (long long)(x->numel / n), s->input);
  *out = bb_tensor_view(x, s->in_rank, dims);
  return *out ? 0 : bb_error_set(err, BB_ERR_NOMEM, "OnnxModel: out of memory");
}

/* Labels as float32 (one per row; what a DataSource gives) in the target's form. */
static int model_target(const onnx_model *s, const bb_tensor *labels, int64_t n, bb_tensor **out, bb_error *err) {
  if (labels->dtype != BB_DTYPE_FLOAT || labels->numel != n)
    return bb_error_set(err, BB_ERR_TYPE, "OnnxModel: takes %lld float32 labels, one per row, got %lld", (long long)n,
                        (long long)labels->numel);
  int64_t dims[2] = {n, 1};
  bb_tensor *t = bb_tensor_new_empty(s->alloc, s->target_dtype, s->target_rank == 2 ? 2 : 1, dims);
  if (!t) return bb_error_set(err, BB_ERR_NOMEM, "OnnxModel: out of memory");
  const float *l = bb_tensor_data(labels);
  for (int64_t i = 0; i < n; i++) {
    if (s->target_dtype == BB_DTYPE_INT64) {
      if (!(l[i] >= 0) || l[i] != floorf(l[i])) {
        bb_tensor_release(t);
        return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "OnnxModel: label %g of row %lld is not a class id", l[i], (long long)i);
      }
      ((int64_t *)bb_tensor_data(t))[i] = (int64_t)l[i];
    } else {
      ((float *)bb_tensor_data(t))[i] = l[i];
    }
  }
  *out = t;
  return 0;
}

/* The model's first output for x, with the current parameters and running statistics. */
static int predict(onnx_model *s, const bb_tensor *x, bb_tensor **y, bb_error *err) {
  bb_tensor *in;
  int rc = model_input(s, x, &in, err);
  if (rc) return rc;
  s->args[0] = in;
  for (size_t i = 1; i < s->n_args; i++) s->args[i] = (bb_tensor *)bb_grad_trainer_value(s->trainer, s->names[i]);
  bb_tensor *outs[MAX_SESSION_OUTPUTS];
  rc = bb_cpu_session_run(s->predict, s->names, s->args, s->n_args, outs, err);
  bb_tensor_release(in);
  if (rc) return rc;
  for (size_t i = 1; i < bb_cpu_session_output_count(s->predict); i++) bb_tensor_release(outs[i]);
  *y = outs[0];
  return 0;
}

/* ---- the Model role ------------------------------------------------------------------------- */

static int om_forward(void *self, bb_ctx *ctx, const bb_tensor *x, bb_tensor **y, bb_error *err) {
  (void)ctx;
  onnx_model *s = self;
  int rc = predict(s, x, y, err);
  if (rc) return rc;
  bb_tensor_release(s->last_x);
  s->last_x = bb_tensor_retain((bb_tensor *)x);
  return 0;
}

static int scalar_out(bb_ctx *ctx, double v, bb_tensor **out, bb_error *err) {
  bb_tensor *t = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 0, NULL);
  if (!t) return bb_error_set(err, BB_ERR_NOMEM, "OnnxModel: out of memory");
  *(float *)bb_tensor_data(t) = (float)v;
  *out = t;
  return 0;
}

/* The loss the training graph computes, here from a given prediction. */
static int om_loss(void *self, bb_ctx *ctx, const bb_tensor *pred, const bb_tensor *labels, bb_tensor **loss, bb_error *err) {
  onnx_model *s = self;
  if (pred->dtype != BB_DTYPE_FLOAT || pred->rank < 1 || !pred->numel)
    return bb_error_set(err, BB_ERR_TYPE, "OnnxModel: ComputeLoss takes a float32 prediction [n, ...]");
  int64_t n = pred->dims[0], width = pred->numel / n;
  bb_tensor *target;
  int rc = model_target(s, labels, n, &target, err);
  if (rc) return rc;
  const float *p = bb_tensor_data(pred), *l = bb_tensor_data(labels);
  double total = 0;
  for (int64_t i = 0; i < n && !rc; i++) {
    const float *row = p + i * width;
    if (s->loss == BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY) {
      if (l[i] >= (float)width) rc = bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "OnnxModel: label %g of row %lld is not below %lld", l[i], (long long)i, (long long)width);
      double mx = row[0], sum = 0;
      for (int64_t k = 1; k < width; k++) mx = row[k] > mx ? row[k] : mx;
      for (int64_t k = 0; k < width; k++) sum += exp(row[k] - mx);
      if (!rc) total += mx + log(sum) - row[(int64_t)l[i]];
    } else if (width != 1) {
      rc = bb_error_set(err, BB_ERR_TYPE, "OnnxModel: %s takes one prediction per row, got %lld", s->loss == BB_GRAD_LOSS_MSE ? "mse" : "bce",
                        (long long)width);
    } else if (s->loss == BB_GRAD_LOSS_MSE) {
      total += (row[0] - l[i]) * (double)(row[0] - l[i]);
    } else { /* softplus(z) - z t */
      double z = row[0];
      total += (z > 0 ? z + log1p(exp(-z)) : log1p(exp(z))) - z * l[i];
    }
  }
  if (!rc) rc = scalar_out(ctx, total / (double)n, loss, err);
  if (rc) {
    bb_tensor_release(target);
    return rc;
  }
  bb_tensor_release(s->last_target);
  s->last_target = target;
  return 0;
}

/* One training step on the batch: x and converted labels. */
static int step(onnx_model *s, const bb_tensor *x, const bb_tensor *target, bb_error *err) {
  bb_tensor *in;
  int rc = model_input(s, x, &in, err);
  if (rc) return rc;
  const char *names[2] = {s->input, s->graph->target};
  bb_tensor *inputs[2] = {in, (bb_tensor *)target};
  bb_grad_step st;
  rc = bb_grad_trainer_step(s->trainer, names, inputs, 2, &st, err);
  bb_tensor_release(in);
  return rc ? bb_error_prefix(err, "OnnxModel: ") : 0;
}

static int om_backward(void *self, bb_ctx *ctx, const bb_tensor *grad, bb_error *err) {
  (void)ctx, (void)grad;
  onnx_model *s = self;
  if (!s->last_x || !s->last_target)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "OnnxModel: Backward needs a Forward and a ComputeLoss first");
  if (s->last_target->dims[0] != s->last_x->dims[0])
    return bb_error_set(err, BB_ERR_TYPE, "OnnxModel: the last ComputeLoss had %lld rows, the last Forward %lld",
                        (long long)s->last_target->dims[0], (long long)s->last_x->dims[0]);
  return step(s, s->last_x, s->last_target, err);
}

static int check_flat(const onnx_model *s, const bb_tensor *p, bb_error *err) {
  if (p->dtype != BB_DTYPE_FLOAT || (size_t)p->numel != s->param_count)
    return bb_error_set(err, BB_ERR_TYPE, "OnnxModel: parameters must be float32 [%zu], got %lld values", s->param_count,
                        (long long)p->numel);
  return 0;
}

/* Writes the flat vector into the parameters (add: += instead of =). */
static int scatter(onnx_model *s, const bb_tensor *flat, bool add, bb_error *err) {
  int rc = check_flat(s, flat, err);
  const float *src = bb_tensor_data(flat);
  for (size_t i = 0; i < s->n_params && !rc; i++) {
    bb_tensor *p = (bb_tensor *)bb_grad_trainer_value(s->trainer, s->graph->params[i]);
    float *d = bb_tensor_data(p);
    for (int64_t k = 0; k < p->numel; k++) d[k] = add ? d[k] + src[k] : src[k];
    src += p->numel;
  }
  return rc;
}

static int om_apply_delta(void *self, bb_ctx *ctx, const bb_tensor *delta, bb_error *err) {
  (void)ctx;
  return scatter(self, delta, true, err);
}

static int om_load(void *self, bb_ctx *ctx, const bb_tensor *params, bb_error *err) {
  (void)ctx;
  return scatter(self, params, false, err);
}

static int om_params(void *self, bb_ctx *ctx, bb_tensor **out, bb_error *err) {
  onnx_model *s = self;
  int64_t n = (int64_t)s->param_count;
  bb_tensor *t = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 1, &n);
  if (!t) return bb_error_set(err, BB_ERR_NOMEM, "OnnxModel: out of memory");
  float *d = bb_tensor_data(t);
  for (size_t i = 0; i < s->n_params; i++) {
    const bb_tensor *p = bb_grad_trainer_value(s->trainer, s->graph->params[i]);
    memcpy(d, bb_tensor_data(p), bb_tensor_nbytes(p));
    d += p->numel;
  }
  *out = t;
  return 0;
}

/* Fit: the params, then fit_steps steps on batches drawn from the data slot. */
static int om_fit(void *self, bb_ctx *ctx, const bb_tensor *params, bb_tensor **trained, uint64_t *samples, bb_error *err) {
  onnx_model *s = self;
  int rc = scatter(s, params, false, err);
  for (uint64_t i = 0; i < s->fit_steps && !rc; i++) {
    bb_val *batch[2] = {NULL, NULL};
    if ((rc = bb_ctx_call(ctx, s->data_slot, "NextBatch", NULL, 0, batch, 2, err))) break;
    bb_tensor *target = NULL;
    if (!batch[0] || !batch[1] || bb_val_kind_of(batch[0]) != BB_VAL_TENSOR || bb_val_kind_of(batch[1]) != BB_VAL_TENSOR)
      rc = bb_error_set(err, BB_ERR_TYPE, "OnnxModel: NextBatch of slot `%s` gave no (batch, labels) tensors", s->data_slot);
    else if (!(rc = model_target(s, bb_val_as_tensor(batch[1]), bb_val_as_tensor(batch[0])->rank ? bb_val_as_tensor(batch[0])->dims[0] : 0, &target, err)) &&
             !(rc = step(s, bb_val_as_tensor(batch[0]), target, err)))
      *samples += (uint64_t)bb_val_as_tensor(batch[0])->dims[0];
    bb_tensor_release(target);
    bb_val_release(batch[0]);
    bb_val_release(batch[1]);
  }
  return rc ? rc : om_params(self, ctx, trained, err);
}

/* Accuracy (xent: the largest output at the label; bce: logit > 0 against label > 0.5) or,
 * for mse, the mean squared error. */
static int om_evaluate(void *self, bb_ctx *ctx, const bb_tensor *x, const bb_tensor *labels, bb_tensor **score, bb_error *err) {
  onnx_model *s = self;
  bb_tensor *y;
  int rc = predict(s, x, &y, err);
  if (rc) return rc;
  int64_t n = y->rank ? y->dims[0] : 0, width = n ? y->numel / n : 0;
  if (y->dtype != BB_DTYPE_FLOAT || !n || labels->dtype != BB_DTYPE_FLOAT || labels->numel != n)
    rc = bb_error_set(err, BB_ERR_TYPE, "OnnxModel: Evaluate takes %lld float32 labels and a float32 prediction", (long long)n);
  double total = 0;
  const float *p = rc ? NULL : bb_tensor_data(y), *l = bb_tensor_data(labels);
  for (int64_t i = 0; i < n && !rc; i++) {
    const float *row = p + i * width;
    if (s->loss == BB_GRAD_LOSS_MSE) {
      total += (row[0] - l[i]) * (double)(row[0] - l[i]);
    } else if (s->loss == BB_GRAD_LOSS_BCE_WITH_LOGITS) {
      total += (row[0] > 0) == (l[i] > 0.5f);
    } else {
      int64_t best = 0;
      for (int64_t k = 1; k < width; k++) best = row[k] > row[best] ? k : best;
      total += (float)best == l[i];
    }
  }
  bb_tensor_release(y);
  return rc ? rc : scalar_out(ctx, total / (double)n, score, err);
}

static const bb_model_ops OM_OPS = {om_forward, om_loss, om_backward, om_apply_delta, om_load, om_params, om_fit, om_evaluate};

static int om_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_model_dispatch(&OM_OPS, self, ctx, call, err);
}

/* ---- snapshots ------------------------------------------------------------------------------- */

/* State: a ModelProto whose graph holds every trainer tensor (parameters, running
 * statistics, optimizer state) as an initializer. */
static int om_save(const void *self, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  const onnx_model *s = self;
  bb_model *bag = bb_model_new(alloc);
  int rc = bag && (bag->graph = bb_graph_new(bag, "OnnxModel state")) ? 0 : bb_error_set(err, BB_ERR_NOMEM, "OnnxModel: out of memory");
  for (size_t i = 0; !rc && i < bb_grad_trainer_value_count(s->trainer); i++) {
    const char *name = bb_grad_trainer_value_name(s->trainer, i);
    bb_tensor_proto *p;
    if (!(rc = bb_tensor_to_proto(bag, bb_grad_trainer_value(s->trainer, name), name, &p, err)) &&
        bb_tensorlist_append(bag, &bag->graph->initializers, p))
      rc = bb_error_set(err, BB_ERR_NOMEM, "OnnxModel: out of memory");
  }
  if (!rc) rc = bb_model_encode(bag, out, len, err);
  bb_model_free(bag);
  return rc;
}

static int om_restore(void *self, const uint8_t *data, size_t len, bb_error *err) {
  onnx_model *s = self;
  bb_model *bag = NULL;
  int rc = bb_model_decode(data, len, s->alloc, NULL, &bag, err);
  if (!rc && !bag->graph) rc = bb_error_set(err, BB_ERR_MALFORMED, "OnnxModel: saved state has no graph");
  if (!rc) rc = bb_grad_trainer_load(s->trainer, bag, err);
  bb_model_free(bag);
  return rc ? bb_error_prefix(err, "OnnxModel: saved state: ") : 0;
}

static const bb_component_port OM_STORAGE[] = {{"tensor", BB_TYPE_TENSOR_F32}};

const bb_component_type BBI_ONNX_MODEL = {
    sizeof(bb_component_type), "OnnxModel", 1u << BB_ROLE_MODEL, NULL, NULL, 0, OM_STORAGE, 1,
    om_create, om_destroy, om_invoke, NULL, NULL, om_save, om_restore, NULL};
