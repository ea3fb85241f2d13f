/* OnnxModel: any ONNX model as a trainable Model concrete, over the engine of
 * bb/onnx_model.h (onnx_model.c).
 *
 * Config (docs/COMPONENTS.md): model=PATH (native hosts; or host_data: a bb_bytes of
 *   ModelProto bytes, the only way in bb.wasm, which reads no files), input=NAME,
 *   output=NAME, loss=xent|mse|bce, optimizer=sgd|momentum|nesterov|adam|adamw, lr,
 *   momentum, beta1, beta2, eps, weight_decay, max_grad_norm, fit_steps=10, data=data,
 *   seed=<u64> (Dropout masks).
 * The flat parameter vector is every trained parameter, in the training graph's order (the
 * model's initializer order), each flattened row-major, concatenated. */
#include <stdio.h>
#include <string.h>

#include "bb/onnx_model.h"
#include "bb/roles.h"
#include "components/models/model_bytes.h"
#include "components/shipped.h"
#include "bb/common.h"
#include "util/mem.h"

typedef struct onnx_model {
  const bb_allocator *alloc;
  bb_onnx_model *m;
  uint64_t fit_steps;
  char data_slot[64];
  bb_tensor *last_x, *last_labels; /* what Forward and ComputeLoss saw, for Backward */
} onnx_model;

/* Every key of the config: the component reads model, fit_steps and data, the engine the
 * others (bb_onnx_model_config_parse). */
static const char *const KEYS[] = {"model", "input", "output", "loss", "optimizer", "lr", "momentum", "beta1", "beta2",
                                   "eps", "weight_decay", "max_grad_norm", "fit_steps", "data", "seed", "freeze", NULL};

static void om_destroy(void *self) {
  onnx_model *s = self;
  bb_onnx_model_free(s->m);
  bb_tensor_release(s->last_x);
  bb_tensor_release(s->last_labels);
  bbi_mem_free(s->alloc, s);
}

static int om_create(const bb_component_init *init, void **self, bb_error *err) {
  onnx_model *s = bbi_mem_calloc(init->alloc, 1, sizeof *s);
  if (!s) return bb_error_set(err, BB_ERR_NOMEM, "OnnxModel: out of memory");
  s->alloc = init->alloc;
  const char *cfg = init->config;
  char path[512];
  bb_onnx_model_config c;
  bb_bytes bytes = {NULL, 0};
  bool owned = false;
  int rc = bb_config_check(cfg, KEYS, err);
  if (!rc) rc = bb_onnx_model_config_parse(cfg, KEYS, init->seed, &c, err);
  if (!rc && !(rc = bb_config_str(cfg, "model", "", path, sizeof path, err)) &&
      !(rc = bb_config_u64(cfg, "fit_steps", 10, &s->fit_steps, err)))
    rc = bb_config_str(cfg, "data", "data", s->data_slot, sizeof s->data_slot, err);
  if (!rc) rc = bbi_model_bytes("OnnxModel", init, path, &bytes, &owned, err);
  if (!rc) {
    rc = bb_onnx_model_new(bytes.data, bytes.len, &c, s->alloc, &s->m, err);
    if (rc && *path) bb_error_prefix(err, "%s: ", path);
  }
  if (owned) bbi_mem_free(s->alloc, bytes.data);
  if (rc) { /* every message starts with the component's name */
    if (err && strncmp(err->message, "OnnxModel", 9) != 0) bb_error_prefix(err, "OnnxModel: ");
    om_destroy(s);
    return rc;
  }
  *self = s;
  return 0;
}

/* ---- the Model role ------------------------------------------------------------------------- */

static int named(int rc, bb_error *err) { return rc ? bb_error_prefix(err, "OnnxModel: ") : 0; }

static int om_forward(void *self, bb_ctx *ctx, const bb_tensor *x, bb_tensor **y, bb_error *err) {
  (void)ctx;
  onnx_model *s = self;
  int rc = bb_onnx_model_predict(s->m, x, y, err);
  if (rc) return named(rc, err);
  bb_tensor_release(s->last_x);
  s->last_x = bb_tensor_retain((bb_tensor *)x);
  return 0;
}

static int scalar_out(bb_ctx *ctx, float v, bb_tensor **out, bb_error *err) {
  bb_tensor *t = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 0, NULL);
  if (!t) return bb_error_set(err, BB_ERR_NOMEM, "OnnxModel: out of memory");
  *(float *)bb_tensor_data(t) = v;
  *out = t;
  return 0;
}

/* The loss the training graph computes, here from a given prediction. */
static int om_loss(void *self, bb_ctx *ctx, const bb_tensor *pred, const bb_tensor *labels, bb_tensor **loss, bb_error *err) {
  onnx_model *s = self;
  float value;
  int rc = bb_onnx_model_loss(s->m, pred, labels, &value, err);
  if (!rc) rc = scalar_out(ctx, value, loss, err);
  if (rc) return named(rc, err);
  bb_tensor_release(s->last_labels);
  s->last_labels = bb_tensor_retain((bb_tensor *)labels);
  return 0;
}

static int om_backward(void *self, bb_ctx *ctx, const bb_tensor *grad, bb_error *err) {
  (void)ctx, (void)grad;
  onnx_model *s = self;
  if (!s->last_x || !s->last_labels)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "OnnxModel: Backward needs a Forward and a ComputeLoss first");
  if (s->last_labels->numel != s->last_x->dims[0])
    return bb_error_set(err, BB_ERR_TYPE, "OnnxModel: the last ComputeLoss had %lld rows, the last Forward %lld",
                        (long long)s->last_labels->numel, (long long)s->last_x->dims[0]);
  bb_grad_step st;
  return named(bb_onnx_model_step(s->m, s->last_x, s->last_labels, &st, err), err);
}

static int flat_in(onnx_model *s, const bb_tensor *p, bool add, bb_error *err) {
  if (p->dtype != BB_DTYPE_FLOAT)
    return bb_error_set(err, BB_ERR_TYPE, "OnnxModel: parameters must be float32 [%zu]", bb_onnx_model_param_count(s->m));
  return named(bb_onnx_model_set_params(s->m, bb_tensor_data(p), (size_t)p->numel, add, err), err);
}

static int om_apply_delta(void *self, bb_ctx *ctx, const bb_tensor *delta, bb_error *err) {
  (void)ctx;
  return flat_in(self, delta, true, err);
}

static int om_load(void *self, bb_ctx *ctx, const bb_tensor *params, bb_error *err) {
  (void)ctx;
  return flat_in(self, params, false, err);
}

static int om_params(void *self, bb_ctx *ctx, bb_tensor **out, bb_error *err) {
  onnx_model *s = self;
  int64_t n = (int64_t)bb_onnx_model_param_count(s->m);
  bb_tensor *t = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 1, &n);
  if (!t) return bb_error_set(err, BB_ERR_NOMEM, "OnnxModel: out of memory");
  bb_onnx_model_get_params(s->m, bb_tensor_data(t), (size_t)n, err);
  *out = t;
  return 0;
}

/* Fit: the params, then fit_steps steps on batches drawn from the data slot. */
static int om_fit(void *self, bb_ctx *ctx, const bb_tensor *params, bb_tensor **trained, uint64_t *samples, bb_error *err) {
  onnx_model *s = self;
  int rc = flat_in(s, params, false, err);
  for (uint64_t i = 0; i < s->fit_steps && !rc; i++) {
    bb_val *batch[2] = {NULL, NULL};
    if ((rc = bb_ctx_call(ctx, s->data_slot, "NextBatch", NULL, 0, batch, 2, err))) break;
    if (!batch[0] || !batch[1] || bb_val_kind_of(batch[0]) != BB_VAL_TENSOR || bb_val_kind_of(batch[1]) != BB_VAL_TENSOR) {
      rc = bb_error_set(err, BB_ERR_TYPE, "OnnxModel: NextBatch of slot `%s` gave no (batch, labels) tensors", s->data_slot);
    } else {
      bb_grad_step st;
      /* a step refused for a non-finite loss or gradient trained on nothing: its rows do not count */
      if (!(rc = named(bb_onnx_model_step(s->m, bb_val_as_tensor(batch[0]), bb_val_as_tensor(batch[1]), &st, err), err))) {
        if (st.applied) *samples += (uint64_t)bb_val_as_tensor(batch[0])->dims[0];
        else bb_ctx_count(ctx, "onnx_model.steps_skipped", 1);
      }
    }
    bb_val_release(batch[0]);
    bb_val_release(batch[1]);
  }
  return rc ? rc : om_params(self, ctx, trained, err);
}

/* Accuracy (xent: the largest output at the label; bce: logit > 0 against label > 0.5) or,
 * for mse, the mean squared error. */
static int om_evaluate(void *self, bb_ctx *ctx, const bb_tensor *x, const bb_tensor *labels, bb_tensor **score, bb_error *err) {
  onnx_model *s = self;
  float value;
  int rc = bb_onnx_model_evaluate(s->m, x, labels, &value, err);
  return rc ? named(rc, err) : scalar_out(ctx, value, score, err);
}

/* The model in inference form with the current parameters and statistics (the engine's
 * export). */
static int om_export(void *self, bb_ctx *ctx, bb_val **onnx, bb_error *err) {
  onnx_model *s = self;
  uint8_t *bytes = NULL;
  size_t len = 0;
  int rc = bb_onnx_model_export(s->m, &bytes, &len, err);
  if (!rc && !(*onnx = bb_val_bytes(bb_ctx_allocator(ctx), bytes, len)))
    rc = bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  bb_buffer_free(NULL, bytes);
  return rc ? bb_error_prefix(err, "OnnxModel: export: ") : 0;
}

static const bb_model_ops OM_OPS = {om_forward, om_loss,   om_backward, om_apply_delta, om_load,
                                    om_params,  om_fit,    om_evaluate, om_export, NULL, NULL, NULL, NULL, NULL};

static int om_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_model_dispatch(&OM_OPS, self, ctx, call, err);
}

/* ---- snapshots ------------------------------------------------------------------------------- */

/* State: a ModelProto whose graph holds every trainer tensor (parameters, running
 * statistics, optimizer state) as an initializer. */
static int om_save(const void *self, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  const onnx_model *s = self;
  return named(bb_onnx_model_save(s->m, alloc, out, len, err), err);
}

static int om_restore(void *self, const uint8_t *data, size_t len, bb_error *err) {
  onnx_model *s = self;
  int rc = bb_onnx_model_restore(s->m, data, len, err);
  return rc ? bb_error_prefix(err, "OnnxModel: saved state: ") : 0;
}

static const bb_component_port OM_STORAGE[] = {{"tensor", BB_TYPE_TENSOR_F32}};

const bb_component_type BBI_ONNX_MODEL = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "OnnxModel",
    .roles = 1u << BB_ROLE_MODEL,
    .storage = OM_STORAGE,
    .n_storage = 1,
    .create = om_create,
    .destroy = om_destroy,
    .invoke = om_invoke,
    .save = om_save,
    .load = om_restore,
};
