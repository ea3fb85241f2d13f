/* SplitModel: one side's part(s) of an ONNX model trained by split learning, as a Model
 * concrete over the engine of split_model.h.
 *
 * Config (docs/COMPONENTS.md): model=PATH (native hosts; or host_data: a bb_bytes of the
 *   whole model's ModelProto bytes, the same on every side), OnnxModel's training keys
 *   (loss, optimizer, lr, momentum, beta1, beta2, eps, weight_decay, input, output, seed,
 *   freeze), data=data (the clients' DataSource slot), timeout_ms=10000 (a client's step
 *   given up without gradients),
 *   max_pending=64 (a middle part's forwards kept, one per client), round_steps=10
 *   (SplitFed: a client's steps between sharing its part), and cuts, side, shape,
 *   which the compiler writes from the Module's split (bb_rec_split).
 * Methods: SplitForward, SplitRelay, SplitLoss, SplitBackward (the training step),
 * SplitShare (SplitFed: the client's part every round_steps steps, to be averaged),
 * Forward (the first part held, in inference form), Evaluate (the part with the loss),
 * Params / LoadParameters (every part held, flattened, in order), Export (the first part
 * held, as plain ONNX). Counters: split.steps, split.timeouts, split.stale,
 * split.refused_activations, split.refused_gradients, split.evicted, split.shares,
 * split.average_timeouts. */
#include <string.h>

#include "bb/bytes.h"
#include "bb/roles.h"
#include "components/models/model_bytes.h"
#include "components/models/split_model.h"
#include "components/shipped.h"
#include "util/mem.h"

typedef struct split_component {
  const bb_allocator *alloc;
  bbi_split_model *m;
  char data[64]; /* the DataSource slot a client draws its batches from */
  bbi_split_counts reported; /* what the node's counters have been told */
} split_component;

/* Every key of the config: the component reads model, the engine the others. */
static const char *const KEYS[] = {"model", "input", "output", "loss", "optimizer", "lr", "momentum", "beta1", "beta2",
                                   "eps", "weight_decay", "max_grad_norm", "seed", "freeze", "cuts", "side", "shape",
                                   "data", "timeout_ms", "max_pending", "round_steps", "max_total_bytes", NULL};

static void sc_destroy(void *self) {
  split_component *s = self;
  bbi_split_model_free(s->m);
  bbi_mem_free(s->alloc, s);
}

static int named(int rc, bb_error *err) { return rc ? bb_error_prefix(err, "SplitModel: ") : 0; }

static int sc_create(const bb_component_init *init, void **self, bb_error *err) {
  split_component *s = bbi_mem_calloc(init->alloc, 1, sizeof *s);
  if (!s) return bb_error_set(err, BB_ERR_NOMEM, "SplitModel: out of memory");
  s->alloc = init->alloc;
  bbi_split_config c;
  char path[512];
  bb_bytes bytes = {NULL, 0};
  bool owned = false;
  int rc = bbi_split_config_parse(init->config, KEYS, init->seed, &c, err);
  if (!rc) rc = bb_config_str(init->config, "model", "", path, sizeof path, err);
  if (!rc) rc = bbi_model_bytes("SplitModel", init, path, &bytes, &owned, err);
  if (!rc) rc = bbi_split_model_new(bytes.data, bytes.len, &c, s->alloc, &s->m, err);
  memcpy(s->data, c.data, sizeof s->data);
  if (owned) bbi_mem_free(s->alloc, bytes.data);
  if (rc) {
    if (err && strncmp(err->message, "SplitModel", 10) != 0) bb_error_prefix(err, "SplitModel: ");
    sc_destroy(s);
    return rc;
  }
  *self = s;
  return 0;
}

/* The engine's counts since the last report, as node counters. */
static void report(split_component *s, bb_ctx *ctx) {
  const bbi_split_counts *now = bbi_split_model_counts(s->m);
  static const struct {
    const char *name;
    size_t at;
  } COUNTERS[] = {
      {"split.steps", offsetof(bbi_split_counts, steps)},
      {"split.timeouts", offsetof(bbi_split_counts, timeouts)},
      {"split.stale", offsetof(bbi_split_counts, stale)},
      {"split.refused_activations", offsetof(bbi_split_counts, refused_activations)},
      {"split.refused_gradients", offsetof(bbi_split_counts, refused_gradients)},
      {"split.evicted", offsetof(bbi_split_counts, evicted)},
      {"split.shares", offsetof(bbi_split_counts, shares)},
      {"split.average_timeouts", offsetof(bbi_split_counts, average_timeouts)},
  };
  for (size_t i = 0; i < sizeof COUNTERS / sizeof *COUNTERS; i++) {
    uint64_t a = *(const uint64_t *)((const char *)now + COUNTERS[i].at);
    uint64_t *b = (uint64_t *)((char *)&s->reported + COUNTERS[i].at);
    if (a != *b) bb_ctx_count(ctx, COUNTERS[i].name, a - *b);
    *b = a;
  }
}

static int reported(split_component *s, bb_ctx *ctx, int rc, bb_error *err) {
  report(s, ctx);
  return named(rc, err);
}

/* The peer whose envelope started this run: what a server keys a client's step by. */
static int source(bb_ctx *ctx, const bb_peer_id **from, bb_error *err) {
  *from = bb_ctx_source(ctx);
  return *from ? 0 : bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "a server's split op runs on what a client sent");
}

/* A client's step: when none waits, a batch from the DataSource, then the first part's
 * forward on it. */
static int sc_split_forward(void *self, bb_ctx *ctx, bb_tensor **activations, bb_tensor **labels, bb_tensor **step,
                            bb_error *err) {
  split_component *s = self;
  *activations = *labels = *step = NULL;
  int rc = 0;
  if (!bbi_split_ready(s->m, bb_ctx_now(ctx))) return reported(s, ctx, 0, err);
  bb_val *batch[2] = {NULL, NULL};
  rc = bb_ctx_call(ctx, s->data, "NextBatch", NULL, 0, batch, 2, err);
  if (!rc && (!batch[0] || !batch[1] || bb_val_kind_of(batch[0]) != BB_VAL_TENSOR || bb_val_kind_of(batch[1]) != BB_VAL_TENSOR))
    rc = bb_error_set(err, BB_ERR_TYPE, "NextBatch of slot `%s` gave no (batch, labels) tensors", s->data);
  if (!rc) rc = bbi_split_forward(s->m, bb_ctx_now(ctx), bb_val_as_tensor(batch[0]), bb_val_as_tensor(batch[1]), activations,
                                  step, err);
  if (!rc && *activations) *labels = bb_tensor_retain((bb_tensor *)bb_val_as_tensor(batch[1]));
  bb_val_release(batch[0]);
  bb_val_release(batch[1]);
  return reported(s, ctx, rc, err);
}

static int sc_split_relay(void *self, bb_ctx *ctx, const bb_tensor *activations, const bb_tensor *step, bb_tensor **out,
                          bb_error *err) {
  split_component *s = self;
  const bb_peer_id *from;
  int rc = source(ctx, &from, err);
  if (!rc) rc = bbi_split_relay(s->m, from, activations, step, out, err);
  return reported(s, ctx, rc, err);
}

static int sc_split_loss(void *self, bb_ctx *ctx, const bb_tensor *activations, const bb_tensor *target,
                         bb_tensor **gradient, bb_tensor **loss, bb_error *err) {
  split_component *s = self;
  return reported(s, ctx, bbi_split_loss(s->m, activations, target, gradient, loss, err), err);
}

static int sc_split_backward(void *self, bb_ctx *ctx, const bb_tensor *gradient, const bb_tensor *step, bb_val **out,
                             bb_error *err) {
  split_component *s = self;
  const bb_peer_id *from = bb_ctx_source(ctx);
  bb_tensor *input_gradient = NULL;
  bool applied = false;
  int rc = bbi_split_backward(s->m, from, gradient, step, &input_gradient, &applied, err);
  if (!rc && applied) {
    *out = input_gradient ? bb_val_tensor(bb_ctx_allocator(ctx), input_gradient) : bb_val_trigger(bb_ctx_allocator(ctx));
    if (!*out) rc = bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  }
  bb_tensor_release(input_gradient);
  return reported(s, ctx, rc, err);
}

static int sc_forward(void *self, bb_ctx *ctx, const bb_tensor *x, bb_tensor **y, bb_error *err) {
  split_component *s = self;
  return reported(s, ctx, bbi_split_predict(s->m, x, y, err), err);
}

static int sc_evaluate(void *self, bb_ctx *ctx, const bb_tensor *x, const bb_tensor *labels, bb_tensor **score,
                       bb_error *err) {
  split_component *s = self;
  float value = 0;
  int rc = bbi_split_evaluate(s->m, x, labels, &value, err);
  if (!rc && !(*score = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 0, NULL)))
    rc = bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  if (!rc) *(float *)bb_tensor_data(*score) = value;
  return reported(s, ctx, rc, err);
}

/* ---- the parameters of the parts held, one flat vector -------------------------------------- */

static size_t param_count(const split_component *s) {
  size_t n = 0;
  for (size_t i = 0; i < bbi_split_part_count(s->m); i++) n += bb_onnx_model_param_count(bbi_split_part(s->m, i));
  return n;
}

static int sc_params(void *self, bb_ctx *ctx, bb_tensor **out, bb_error *err) {
  split_component *s = self;
  int64_t n = (int64_t)param_count(s);
  bb_tensor *t = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 1, &n);
  if (!t) return bb_error_set(err, BB_ERR_NOMEM, "SplitModel: out of memory");
  float *at = bb_tensor_data(t);
  for (size_t i = 0; i < bbi_split_part_count(s->m); i++) {
    bb_onnx_model *p = bbi_split_part(s->m, i);
    bb_onnx_model_get_params(p, at, bb_onnx_model_param_count(p), err);
    at += bb_onnx_model_param_count(p);
  }
  *out = t;
  return 0;
}

static int flat_in(split_component *s, const bb_tensor *p, bool add, bb_error *err) {
  size_t n = param_count(s);
  if (p->dtype != BB_DTYPE_FLOAT || (size_t)p->numel != n)
    return bb_error_set(err, BB_ERR_TYPE, "SplitModel: parameters must be float32 [%zu]", n);
  const float *at = bb_tensor_data(p);
  int rc = 0;
  for (size_t i = 0; i < bbi_split_part_count(s->m) && !rc; i++) {
    bb_onnx_model *part = bbi_split_part(s->m, i);
    rc = bb_onnx_model_set_params(part, at, bb_onnx_model_param_count(part), add, err);
    at += bb_onnx_model_param_count(part);
  }
  return named(rc, err);
}

/* A client's LoadParameters is the average of the parts it shared for (SplitFed). */
static int sc_load(void *self, bb_ctx *ctx, const bb_tensor *params, bb_error *err) {
  (void)ctx;
  split_component *s = self;
  int rc = flat_in(s, params, false, err);
  if (!rc) bbi_split_loaded(s->m);
  return rc;
}

/* SplitFed: the client's part, once a round of steps is done, to be averaged. */
static int sc_split_share(void *self, bb_ctx *ctx, bb_tensor **params, bb_error *err) {
  split_component *s = self;
  *params = NULL;
  int rc = bbi_split_share_due(s->m, bb_ctx_now(ctx)) ? sc_params(self, ctx, params, err) : 0;
  return reported(s, ctx, rc, err);
}

static int sc_apply_delta(void *self, bb_ctx *ctx, const bb_tensor *delta, bb_error *err) {
  (void)ctx;
  return flat_in(self, delta, true, err);
}

static int sc_export(void *self, bb_ctx *ctx, bb_val **onnx, bb_error *err) {
  split_component *s = self;
  uint8_t *bytes = NULL;
  size_t len = 0;
  int rc = bb_onnx_model_export(bbi_split_part(s->m, 0), &bytes, &len, err);
  if (!rc && !(*onnx = bb_val_bytes(bb_ctx_allocator(ctx), bytes, len))) rc = bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  bb_buffer_free(NULL, bytes);
  return named(rc, err);
}

static const bb_model_ops SC_OPS = {
    .forward = sc_forward,           .apply_delta = sc_apply_delta,       .load_parameters = sc_load,
    .params = sc_params,             .evaluate = sc_evaluate,             .export_onnx = sc_export,
    .split_forward = sc_split_forward, .split_relay = sc_split_relay,     .split_loss = sc_split_loss,
    .split_backward = sc_split_backward, .split_share = sc_split_share,
};

static int sc_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_model_dispatch(&SC_OPS, self, ctx, call, err);
}

/* ---- snapshots: each part's trainer tensors, length-prefixed --------------------------------- */

static int sc_save(const void *self, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  const split_component *s = self;
  if (!alloc) alloc = bb_default_allocator();
  size_t n = bbi_split_part_count(s->m), total = 0;
  uint8_t *blob[2] = {NULL, NULL};
  size_t sizes[2] = {0, 0};
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++) rc = bb_onnx_model_save(bbi_split_part(s->m, i), alloc, &blob[i], &sizes[i], err);
  for (size_t i = 0; i < n; i++) total += 4 + sizes[i];
  uint8_t *buf = rc ? NULL : bbi_mem_alloc(alloc, total ? total : 1);
  if (!rc && !buf) rc = bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  for (size_t i = 0, at = 0; !rc && i < n; i++) {
    bb_le_put_u32(buf + at, (uint32_t)sizes[i]);
    memcpy(buf + at + 4, blob[i], sizes[i]);
    at += 4 + sizes[i];
  }
  for (size_t i = 0; i < n; i++) bb_buffer_free(alloc, blob[i]);
  if (rc) return named(rc, err);
  *out = buf;
  *len = total;
  return 0;
}

static int sc_restore(void *self, const uint8_t *data, size_t len, bb_error *err) {
  split_component *s = self;
  size_t at = 0;
  for (size_t i = 0; i < bbi_split_part_count(s->m); i++) {
    uint32_t size = len - at >= 4 ? bb_le_get_u32(data + at) : 0;
    if (len - at < 4 || size > len - at - 4)
      return bb_error_set(err, BB_ERR_MALFORMED, "SplitModel: saved state: part %zu is cut short at byte %zu", i, at);
    int rc = bb_onnx_model_restore(bbi_split_part(s->m, i), data + at + 4, size, err);
    if (rc) return bb_error_prefix(err, "SplitModel: saved state: ");
    at += 4 + size;
  }
  return at == len ? 0 : bb_error_set(err, BB_ERR_MALFORMED, "SplitModel: saved state: %zu bytes after the parts", len - at);
}

static const bb_component_port SC_STORAGE[] = {{"tensor", BB_TYPE_TENSOR_F32}};

const bb_component_type BBI_SPLIT_MODEL = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "SplitModel",
    .roles = 1u << BB_ROLE_MODEL,
    .storage = SC_STORAGE,
    .n_storage = 1,
    .create = sc_create,
    .destroy = sc_destroy,
    .invoke = sc_invoke,
    .save = sc_save,
    .load = sc_restore,
};
