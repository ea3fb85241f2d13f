/* The OnnxModel engine: any ONNX model as a trainable model. At creation the gradient
 * builder makes its training graph, an optimizer graph is built for it, and both are
 * planned once (a bb_grad_trainer); predictions run the model's inference form with the
 * current parameters passed in place of its initializers, so nothing is rebuilt after a
 * step. The component (onnx_model_component.c) puts the Model role on top. */
#include "bb/onnx_model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bb/cpu.h"
#include "bb/roles.h"
#include "bb/common.h"
#include "components/models/onnx_rows.h"
#include "util/mem.h"

#define MAX_SESSION_OUTPUTS 64

struct bb_onnx_model {
  const bb_allocator *alloc;
  bb_model *model, *inference;
  bb_grad_graph *graph;
  bb_grad_optimizer *opt;
  bb_grad_trainer *trainer;
  bb_cpu_session *predict;
  bb_grad_loss loss;
  bbi_onnx_rows in;     /* the data input (its name is `model`'s) */
  bbi_onnx_rows target; /* the training graph's target input */
  size_t n_params, param_count; /* parameters, and floats in the flat vector */
  /* predictions: the data input, then every held tensor the inference model has as an
   * initializer, passed in its place (names fixed at creation, tensors read per call) */
  const char **names;
  bb_tensor **args;
  size_t n_args;
};

static const char *const KEYS[] = {"input", "output", "loss", "optimizer", "lr", "momentum", "beta1", "beta2",
                                   "eps", "weight_decay", "max_grad_norm", "seed", "freeze", "max_total_bytes", NULL};

void bb_onnx_model_free(bb_onnx_model *s) {
  if (!s) return;
  bb_cpu_session_free(s->predict);
  bb_grad_trainer_free(s->trainer);
  bb_grad_optimizer_free(s->opt);
  bb_grad_graph_free(s->graph);
  bb_model_free(s->inference);
  bb_model_free(s->model);
  bbi_mem_free(s->alloc, s->names);
  bbi_mem_free(s->alloc, s->args);
  bbi_mem_free(s->alloc, s);
}

static bool is_initializer(const bb_model *m, const char *name) {
  for (size_t i = 0; i < m->graph->initializers.len; i++)
    if (strcmp(m->graph->initializers.items[i]->name, name) == 0) return true;
  return false;
}

static int parse_choices(const char *loss, const char *optimizer, bb_onnx_model_config *out, bb_error *err) {
  if (strcmp(loss, "xent") == 0) out->loss = BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY;
  else if (strcmp(loss, "mse") == 0) out->loss = BB_GRAD_LOSS_MSE;
  else if (strcmp(loss, "bce") == 0) out->loss = BB_GRAD_LOSS_BCE_WITH_LOGITS;
  else return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "loss `%s` is not xent|mse|bce", loss);
  static const char *const NAMES[] = {"sgd", "momentum", "nesterov", "adam", "adamw"};
  static const bb_optimizer_kind KINDS[] = {BB_OPTIMIZER_SGD, BB_OPTIMIZER_MOMENTUM, BB_OPTIMIZER_MOMENTUM, BB_OPTIMIZER_ADAM,
                                            BB_OPTIMIZER_ADAMW};
  for (size_t i = 0; i < 5; i++)
    if (strcmp(optimizer, NAMES[i]) == 0) {
      out->optimizer = bb_optimizer_defaults(KINDS[i]);
      out->optimizer.nesterov = i == 2;
      return 0;
    }
  return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "optimizer `%s` is not sgd|momentum|nesterov|adam|adamw", optimizer);
}

/* Refuses a key of text that is neither the engine's nor one of more_keys. */
static int check_keys(const char *text, const char *const *more_keys, bb_error *err) {
  const char *all[64];
  size_t n = 0;
  for (size_t i = 0; KEYS[i]; i++) all[n++] = KEYS[i];
  for (size_t i = 0; more_keys && more_keys[i] && n + 1 < sizeof all / sizeof all[0]; i++) all[n++] = more_keys[i];
  all[n] = NULL;
  return bb_config_check(text, all, err);
}

int bb_onnx_model_config_parse(const char *text, const char *const *more_keys, uint64_t default_seed,
                               bb_onnx_model_config *out, bb_error *err) {
  const char *c = text ? text : "";
  char loss[16], optimizer[16];
  uint64_t total = 0;
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  bb_optimizer_config *o = &out->optimizer;
  int rc;
  if ((rc = check_keys(c, more_keys, err)) || (rc = bb_config_str(c, "input", "", out->input, sizeof out->input, err)) ||
      (rc = bb_config_str(c, "output", "", out->output, sizeof out->output, err)) ||
      (rc = bb_config_str(c, "loss", "xent", loss, sizeof loss, err)) ||
      (rc = bb_config_str(c, "optimizer", "adam", optimizer, sizeof optimizer, err)) ||
      (rc = parse_choices(loss, optimizer, out, err)) || (rc = bb_config_f32(c, "lr", o->lr, &o->lr, err)) ||
      (rc = bb_config_f32(c, "momentum", o->momentum, &o->momentum, err)) ||
      (rc = bb_config_f32(c, "beta1", o->beta1, &o->beta1, err)) || (rc = bb_config_f32(c, "beta2", o->beta2, &o->beta2, err)) ||
      (rc = bb_config_f32(c, "eps", o->eps, &o->eps, err)) ||
      (rc = bb_config_f32(c, "weight_decay", o->weight_decay, &o->weight_decay, err)) ||
      (rc = bb_config_f32(c, "max_grad_norm", 0, &o->max_grad_norm, err)) ||
      (rc = bb_config_u64(c, "seed", default_seed, &out->seed, err)) ||
      (rc = bb_config_str(c, "freeze", "", out->freeze, sizeof out->freeze, err)) ||
      (rc = bb_config_u64(c, "max_total_bytes", 0, &total, err)))
    return rc;
  if (total > SIZE_MAX)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "max_total_bytes %llu does not fit this machine's size_t",
                        (unsigned long long)total);
  out->max_total_bytes = (size_t)total;
  return 0;
}

/* The data input and the target's declared form. */
static int describe_io(bb_onnx_model *s, const char *input, bb_error *err) {
  int rc = bbi_onnx_rows_input_of(s->model, input, &s->in, err);
  if (rc || !s->graph->target) return rc;
  return bbi_onnx_rows_target_of(s->graph->model, s->graph->target, s->graph->prediction, &s->target, err);
}

/* The flat vector's size; every parameter must be float32. */
static int count_params(bb_onnx_model *s, bb_error *err) {
  s->n_params = s->graph->n_params;
  for (size_t i = 0; i < s->n_params; i++) {
    const bb_tensor *p = bb_grad_trainer_value(s->trainer, s->graph->params[i]);
    if (p->dtype != BB_DTYPE_FLOAT)
      return bb_error_set(err, BB_ERR_TYPE, "parameter %s is %s; the flat vector holds float32", s->graph->params[i],
                          bb_dtype_name(p->dtype));
    s->param_count += (size_t)p->numel;
  }
  return 0;
}

/* The config's '|'-separated freeze list as names (pointing into buf, a copy). */
static size_t split_frozen(const char *list, char *buf, const char **names, size_t max) {
  size_t n = 0;
  strcpy(buf, list);
  for (char *p = buf; *p && n < max;) {
    names[n++] = p;
    char *bar = strchr(p, '|');
    if (!bar) break;
    *bar = '\0';
    p = bar + 1;
  }
  return n;
}

/* The total-bytes cap of every run: the trainer's sessions and the predictions. */
static int apply_limits(bb_onnx_model *s, size_t max_total_bytes, bb_error *err) {
  bb_cpu_limits limits = {.struct_size = sizeof limits, .max_total_bytes = max_total_bytes};
  int rc = bb_grad_trainer_set_limits(s->trainer, &limits, err);
  return rc ? rc : bb_cpu_session_set_limits(s->predict, &limits, err);
}

int bb_onnx_model_new(const uint8_t *onnx, size_t len, const bb_onnx_model_config *config, const bb_allocator *alloc,
                      bb_onnx_model **out, bb_error *err) {
  *out = NULL;
  if (!config || config->struct_size < sizeof config->struct_size || config->struct_size > sizeof(bb_onnx_model_config))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "onnx model: config struct_size %zu (this library knows %zu)",
                        config ? config->struct_size : 0, sizeof(bb_onnx_model_config));
  bb_onnx_model_config cfg;
  if (bb_onnx_model_config_parse(NULL, NULL, 0, &cfg, err)) return err->code;
  memcpy(&cfg, config, config->struct_size);
  cfg.struct_size = sizeof cfg;
  cfg.freeze[sizeof cfg.freeze - 1] = '\0';
  cfg.input_grad[sizeof cfg.input_grad - 1] = '\0';
  const bb_onnx_model_config *c = &cfg;
  if (!alloc) alloc = bb_default_allocator();
  bb_onnx_model *s = bbi_mem_calloc(alloc, 1, sizeof *s);
  if (!s) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  s->alloc = alloc;
  s->loss = c->upstream ? BB_GRAD_LOSS_UPSTREAM : c->loss;
  int rc = bb_model_decode(onnx, len, alloc, NULL, &s->model, err);
  if (!rc) {
    bb_grad_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.loss = c->loss;
    o.output = *c->output ? c->output : NULL;
    char frozen_buf[BB_ONNX_MODEL_FREEZE_MAX];
    const char *frozen[BB_ONNX_MODEL_FREEZE_MAX / 2];
    o.freeze = frozen;
    o.n_freeze = split_frozen(c->freeze, frozen_buf, frozen, sizeof frozen / sizeof frozen[0]);
    const char *grad_input = c->input_grad;
    if (c->upstream) o.loss = BB_GRAD_LOSS_UPSTREAM;
    if (*grad_input) o.input_grads = &grad_input, o.n_input_grads = 1;
    rc = bb_grad_build(s->model, &o, alloc, &s->graph, err);
  }
  if (!rc) rc = bb_grad_optimizer_build(s->graph, &c->optimizer, &s->opt, err);
  if (!rc) rc = bb_grad_trainer_new(s->graph, s->opt, c->seed, alloc, &s->trainer, err);
  if (!rc) rc = bb_grad_inference_model(s->model, alloc, &s->inference, err);
  if (!rc) rc = bb_cpu_session_new(s->inference, alloc, &s->predict, err);
  if (!rc) rc = apply_limits(s, c->max_total_bytes, err);
  if (!rc) rc = describe_io(s, c->input, err);
  if (!rc) rc = count_params(s, err);
  if (!rc && bb_cpu_session_output_count(s->predict) > MAX_SESSION_OUTPUTS)
    rc = bb_error_set(err, BB_ERR_LIMIT, "the model has over %d outputs", MAX_SESSION_OUTPUTS);
  size_t held = rc ? 0 : bb_grad_trainer_value_count(s->trainer);
  if (!rc && (!(s->names = bbi_mem_calloc(alloc, held + 1, sizeof *s->names)) ||
              !(s->args = bbi_mem_calloc(alloc, held + 1, sizeof *s->args))))
    rc = bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  if (!rc) {
    s->names[s->n_args++] = s->in.name;
    for (size_t i = 0; i < held; i++) {
      const char *name = bb_grad_trainer_value_name(s->trainer, i);
      if (is_initializer(s->inference, name)) s->names[s->n_args++] = name;
    }
  }
  if (rc) {
    bb_onnx_model_free(s);
    return rc;
  }
  *out = s;
  return 0;
}

size_t bb_onnx_model_param_count(const bb_onnx_model *m) { return m->param_count; }
const bb_grad_trainer *bb_onnx_model_trainer(const bb_onnx_model *m) { return m->trainer; }

/* ---- data in the model's shapes ------------------------------------------------------------ */

/* A model whose gradients come in has no loss of its own. */
static int no_loss(const bb_onnx_model *s, bb_error *err) {
  return s->loss == BB_GRAD_LOSS_UPSTREAM
             ? bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                            "the model's output gradient comes in (upstream): it has no loss; step with forward and backward")
             : 0;
}

int bb_onnx_model_predict(bb_onnx_model *s, const bb_tensor *x, bb_tensor **y, bb_error *err) {
  bb_tensor *in;
  int rc = bbi_onnx_rows_feed(&s->in, x, s->alloc, &in, err);
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

int bb_onnx_model_loss(const bb_onnx_model *s, const bb_tensor *pred, const bb_tensor *labels, float *loss, bb_error *err) {
  int rc = no_loss(s, err);
  if (rc) return rc;
  if (pred->dtype != BB_DTYPE_FLOAT || pred->rank < 1 || !pred->numel)
    return bb_error_set(err, BB_ERR_TYPE, "the loss takes a float32 prediction [n, ...]");
  int64_t n = pred->dims[0], width = pred->numel / n;
  if (labels->dtype != BB_DTYPE_FLOAT || labels->numel != n)
    return bb_error_set(err, BB_ERR_TYPE, "takes %lld float32 labels, one per row, got %lld", (long long)n,
                        (long long)labels->numel);
  const float *p = bb_tensor_data(pred), *l = bb_tensor_data(labels);
  double total = 0;
  for (int64_t i = 0; i < n; i++) {
    const float *row = p + i * width;
    if (s->loss == BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY) {
      if (!(l[i] >= 0) || l[i] != floorf(l[i]) || l[i] >= (float)width)
        return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "label %g of row %lld is not a class id below %lld", l[i],
                            (long long)i, (long long)width);
      double mx = row[0], sum = 0;
      for (int64_t k = 1; k < width; k++) mx = row[k] > mx ? row[k] : mx;
      for (int64_t k = 0; k < width; k++) sum += exp(row[k] - mx);
      total += mx + log(sum) - row[(int64_t)l[i]];
    } else if (width != 1) {
      return bb_error_set(err, BB_ERR_TYPE, "%s takes one prediction per row, got %lld",
                          s->loss == BB_GRAD_LOSS_MSE ? "mse" : "bce", (long long)width);
    } else if (s->loss == BB_GRAD_LOSS_MSE) {
      total += (row[0] - l[i]) * (double)(row[0] - l[i]);
    } else { /* softplus(z) - z t */
      double z = row[0];
      total += (z > 0 ? z + log1p(exp(-z)) : log1p(exp(z))) - z * l[i];
    }
  }
  *loss = (float)(total / (double)n);
  return 0;
}

int bb_onnx_model_step(bb_onnx_model *s, const bb_tensor *x, const bb_tensor *labels, bb_grad_step *out, bb_error *err) {
  bb_tensor *in = NULL, *target = NULL;
  int rc = no_loss(s, err);
  if (!rc) rc = bbi_onnx_rows_feed(&s->in, x, s->alloc, &in, err);
  if (!rc) rc = bbi_onnx_rows_labels(&s->target, labels, x->dims[0], s->alloc, &target, err);
  if (!rc) {
    const char *names[2] = {s->in.name, s->graph->target};
    bb_tensor *inputs[2] = {in, target};
    rc = bb_grad_trainer_step(s->trainer, names, inputs, 2, out, err);
  }
  bb_tensor_release(in);
  bb_tensor_release(target);
  return rc;
}

int bb_onnx_model_forward(bb_onnx_model *s, const bb_tensor *x, bb_tensor **y, bb_error *err) {
  *y = NULL;
  bb_tensor *in = NULL;
  int rc = bbi_onnx_rows_feed(&s->in, x, s->alloc, &in, err);
  if (!rc) rc = bb_grad_trainer_forward(s->trainer, &s->in.name, &in, 1, y, err);
  bb_tensor_release(in);
  return rc;
}

int bb_onnx_model_backward(bb_onnx_model *s, const bb_tensor *dy, bb_grad_step *out, bb_error *err) {
  bb_tensor *up = (bb_tensor *)dy;
  return bb_grad_trainer_backward(s->trainer, &up, 1, out, err);
}

const bb_tensor *bb_onnx_model_input_grad(const bb_onnx_model *s) {
  return s->graph->n_input_grads ? bb_grad_trainer_input_grad(s->trainer, s->graph->inputs[0]) : NULL;
}

int bb_onnx_model_evaluate(bb_onnx_model *s, const bb_tensor *x, const bb_tensor *labels, float *score, bb_error *err) {
  bb_tensor *y;
  int rc = bb_onnx_model_predict(s, x, &y, err);
  if (rc) return rc;
  int64_t n = y->rank ? y->dims[0] : 0, width = n ? y->numel / n : 0;
  if (y->dtype != BB_DTYPE_FLOAT || !n || labels->dtype != BB_DTYPE_FLOAT || labels->numel != n)
    rc = bb_error_set(err, BB_ERR_TYPE, "evaluating takes %lld float32 labels and a float32 prediction", (long long)n);
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
  if (!rc) *score = (float)(total / (double)n);
  return rc;
}

/* ---- the flat parameter vector ----------------------------------------------------------------- */

static int check_count(const bb_onnx_model *s, size_t n, bb_error *err) {
  return n == s->param_count
             ? 0
             : bb_error_set(err, BB_ERR_TYPE, "parameters must be float32 [%zu], got %zu values", s->param_count, n);
}

int bb_onnx_model_get_params(const bb_onnx_model *s, float *out, size_t n, bb_error *err) {
  int rc = check_count(s, n, err);
  for (size_t i = 0; i < s->n_params && !rc; i++) {
    const bb_tensor *p = bb_grad_trainer_value(s->trainer, s->graph->params[i]);
    memcpy(out, bb_tensor_data(p), bb_tensor_nbytes(p));
    out += p->numel;
  }
  return rc;
}

int bb_onnx_model_set_params(bb_onnx_model *s, const float *src, size_t n, bool add, bb_error *err) {
  int rc = check_count(s, n, err);
  for (size_t i = 0; i < s->n_params && !rc; i++) {
    /* the held tensor is the trainer's alone (made by its sessions or from an initializer) */
    bb_tensor *p = (bb_tensor *)bb_grad_trainer_value(s->trainer, s->graph->params[i]);
    float *d = bb_tensor_data(p);
    for (int64_t k = 0; k < p->numel; k++) d[k] = add ? d[k] + src[k] : src[k];
    src += p->numel;
  }
  return rc;
}

/* ---- export and snapshots ---------------------------------------------------------------------- */

int bb_onnx_model_export(bb_onnx_model *s, uint8_t **out, size_t *len, bb_error *err) {
  int rc = bb_grad_trainer_store(s->trainer, s->inference, err);
  return rc ? rc : bb_model_encode(s->inference, out, len, err);
}

int bb_onnx_model_save(const bb_onnx_model *s, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  bb_model *bag = bb_model_new(alloc);
  int rc = bag && (bag->graph = bb_graph_new(bag, "OnnxModel state")) ? 0 : bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  for (size_t i = 0; !rc && i < bb_grad_trainer_value_count(s->trainer); i++) {
    const char *name = bb_grad_trainer_value_name(s->trainer, i);
    bb_tensor_proto *p;
    if (!(rc = bb_tensor_to_proto(bag, bb_grad_trainer_value(s->trainer, name), name, &p, err)) &&
        bb_tensorlist_append(bag, &bag->graph->initializers, p))
      rc = bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  }
  if (!rc) rc = bb_model_encode(bag, out, len, err);
  bb_model_free(bag);
  return rc;
}

int bb_onnx_model_restore(bb_onnx_model *s, const uint8_t *data, size_t len, bb_error *err) {
  bb_model *bag = NULL;
  int rc = bb_model_decode(data, len, s->alloc, NULL, &bag, err);
  if (!rc && !bag->graph) rc = bb_error_set(err, BB_ERR_MALFORMED, "saved state has no graph");
  if (!rc) rc = bb_grad_trainer_load(s->trainer, bag, err);
  bb_model_free(bag);
  return rc;
}
