/* The role dispatchers: an op call of the graph → a typed contract method → the op's
 * outputs. Methods without a result write a trigger (so their consumers run), k and n
 * come from attributes, and a local Contribute has a source: the node itself. */
#include <string.h>

#include "bb/roles.h"
#include "bb/common.h"

/* ---- inputs ------------------------------------------------------------------------- */

static int input_tensor(const bb_op_call *call, size_t i, const bb_tensor **out, bb_error *err) {
  const bb_val *v = i < call->n_inputs ? call->inputs[i] : NULL;
  if (!v) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "input %zu of %s is missing", i, call->op_type);
  if (bb_val_kind_of(v) != BB_VAL_TENSOR)
    return bb_error_set(err, BB_ERR_TYPE, "input %zu of %s must be a Tensor, got %s", i, call->op_type,
                        bb_val_kind_name((int)bb_val_kind_of(v)));
  *out = bb_val_as_tensor(v);
  return 0;
}

/* A tensor input that may be absent or a trigger (Backward's "grad" is often the loss or
 * just the fact that one was computed). */
static const bb_tensor *optional_tensor(const bb_op_call *call, size_t i) {
  const bb_val *v = i < call->n_inputs ? call->inputs[i] : NULL;
  return bb_val_as_tensor(v);
}

static int unsupported(const bb_op_call *call, bb_error *err) {
  return bb_error_set(err, BB_ERR_UNSUPPORTED, "this component does not implement %s::%s", call->domain,
                      call->op_type);
}

static int unknown_op(const bb_op_call *call, bb_error *err) {
  return bb_error_set(err, BB_ERR_UNSUPPORTED, "%s is not an op of role domain %s", call->op_type, call->domain);
}

/* ---- outputs ------------------------------------------------------------------------ */

static int put_tensor(const bb_op_call *call, size_t i, bb_tensor *t, bb_error *err) {
  if (!t) return 0;
  if (i >= call->n_outputs) {
    bb_tensor_release(t);
    return 0;
  }
  call->outputs[i] = bb_val_tensor(NULL, t);
  bb_tensor_release(t);
  return call->outputs[i] ? 0 : bb_error_set(err, BB_ERR_NOMEM, "out of memory");
}

static int put_value(const bb_op_call *call, size_t i, bb_val *v) {
  if (i < call->n_outputs) call->outputs[i] = v;
  else bb_val_release(v);
  return 0;
}

/* A method with no result finished: its first output becomes a trigger. */
static int done(const bb_op_call *call, int rc, bb_error *err) {
  if (rc || !call->n_outputs) return rc;
  call->outputs[0] = bb_val_trigger(NULL);
  return call->outputs[0] ? 0 : bb_error_set(err, BB_ERR_NOMEM, "out of memory");
}

static bool is(const bb_op_call *call, const char *op) { return strcmp(call->op_type, op) == 0; }

/* ---- Model ---------------------------------------------------------------------------- */

/* A method's tensor outputs, all or none (a method that gives some and not the others is
 * wrong). */
static int put_all(const bb_op_call *call, bb_tensor **outs, size_t n, bb_error *err) {
  size_t given = 0;
  for (size_t i = 0; i < n; i++) given += outs[i] != NULL;
  int rc = given && given != n ? bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s gave %zu of its %zu outputs", call->op_type,
                                              given, n)
                               : 0;
  for (size_t i = 0; i < n; i++) {
    if (!rc) rc = put_tensor(call, i, outs[i], err);
    else bb_tensor_release(outs[i]);
  }
  return rc;
}

/* The split-learning methods: SplitForward and SplitShare take an ordering trigger, the
 * others two tensors. */
static int split_dispatch(const bb_model_ops *ops, void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  const bb_tensor *a = NULL, *b = NULL;
  bb_tensor *outs[3] = {NULL, NULL, NULL};
  bool forward = is(call, "SplitForward"), relay = is(call, "SplitRelay"), loss = is(call, "SplitLoss"),
       backward = is(call, "SplitBackward"), share = is(call, "SplitShare");
  if (!forward && !relay && !loss && !backward && !share) return unknown_op(call, err);
  if ((forward && !ops->split_forward) || (relay && !ops->split_relay) || (loss && !ops->split_loss) ||
      (backward && !ops->split_backward) || (share && !ops->split_share))
    return unsupported(call, err);
  int rc;
  if (share) return (rc = ops->split_share(self, ctx, &outs[0], err)) ? rc : put_tensor(call, 0, outs[0], err);
  if (forward)
    return (rc = ops->split_forward(self, ctx, &outs[0], &outs[1], &outs[2], err)) ? rc : put_all(call, outs, 3, err);
  if ((rc = input_tensor(call, 0, &a, err)) || (rc = input_tensor(call, 1, &b, err))) return rc;
  if (loss) return (rc = ops->split_loss(self, ctx, a, b, &outs[0], &outs[1], err)) ? rc : put_all(call, outs, 2, err);
  if (relay) return (rc = ops->split_relay(self, ctx, a, b, &outs[0], err)) ? rc : put_tensor(call, 0, outs[0], err);
  bb_val *out = NULL;
  return (rc = ops->split_backward(self, ctx, a, b, &out, err)) ? rc : out ? put_value(call, 0, out) : 0;
}

int bb_model_dispatch(const bb_model_ops *ops, void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  const bb_tensor *a = NULL, *b = NULL;
  bb_tensor *out = NULL;
  int rc;
  if (is(call, "Forward")) {
    if (!ops->forward) return unsupported(call, err);
    if ((rc = input_tensor(call, 0, &a, err))) return rc;
    rc = ops->forward(self, ctx, a, &out, err);
    return rc ? rc : put_tensor(call, 0, out, err);
  }
  if (is(call, "ComputeLoss")) {
    if (!ops->compute_loss) return unsupported(call, err);
    if ((rc = input_tensor(call, 0, &a, err)) || (rc = input_tensor(call, 1, &b, err))) return rc;
    rc = ops->compute_loss(self, ctx, a, b, &out, err);
    return rc ? rc : put_tensor(call, 0, out, err);
  }
  if (is(call, "Backward")) {
    if (!ops->backward) return unsupported(call, err);
    return done(call, ops->backward(self, ctx, optional_tensor(call, 0), err), err);
  }
  if (is(call, "ApplyDelta") || is(call, "LoadParameters")) {
    int (*fn)(void *, bb_ctx *, const bb_tensor *, bb_error *) =
        is(call, "ApplyDelta") ? ops->apply_delta : ops->load_parameters;
    if (!fn) return unsupported(call, err);
    if ((rc = input_tensor(call, 0, &a, err))) return rc;
    return done(call, fn(self, ctx, a, err), err);
  }
  if (is(call, "Params")) {
    if (!ops->params) return unsupported(call, err);
    rc = ops->params(self, ctx, &out, err);
    return rc ? rc : put_tensor(call, 0, out, err);
  }
  if (is(call, "Fit")) {
    if (!ops->fit) return unsupported(call, err);
    if ((rc = input_tensor(call, 0, &a, err))) return rc;
    uint64_t samples = 0;
    if ((rc = ops->fit(self, ctx, a, &out, &samples, err)) || (rc = put_tensor(call, 0, out, err))) return rc;
    bb_val *n = bb_val_u64(NULL, BB_VAL_U64, samples);
    return n ? put_value(call, 1, n) : bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  }
  if (is(call, "Evaluate")) {
    if (!ops->evaluate) return unsupported(call, err);
    if ((rc = input_tensor(call, 0, &a, err)) || (rc = input_tensor(call, 1, &b, err))) return rc;
    rc = ops->evaluate(self, ctx, a, b, &out, err);
    return rc ? rc : put_tensor(call, 0, out, err);
  }
  if (is(call, "Export")) {
    if (!ops->export_onnx) return unsupported(call, err);
    bb_val *onnx = NULL;
    if ((rc = ops->export_onnx(self, ctx, &onnx, err))) return rc;
    return put_value(call, 0, onnx);
  }
  if (strncmp(call->op_type, "Split", 5) == 0) return split_dispatch(ops, self, ctx, call, err);
  return unknown_op(call, err);
}

/* ---- DataSource ------------------------------------------------------------------------ */

int bb_data_source_dispatch(const bb_data_source_ops *ops, void *self, bb_ctx *ctx, const bb_op_call *call,
                            bb_error *err) {
  if (is(call, "NextBatch")) {
    if (!ops->next_batch) return unsupported(call, err);
    bb_tensor *batch = NULL, *labels = NULL;
    int rc = ops->next_batch(self, ctx, &batch, &labels, err);
    if (rc) return rc;
    if ((rc = put_tensor(call, 0, batch, err))) {
      bb_tensor_release(labels);
      return rc;
    }
    return put_tensor(call, 1, labels, err);
  }
  if (is(call, "Reset")) return ops->reset ? done(call, ops->reset(self, ctx, err), err) : unsupported(call, err);
  if (is(call, "OnDataLoaded"))
    return ops->on_data_loaded ? done(call, ops->on_data_loaded(self, ctx, err), err) : unsupported(call, err);
  return unknown_op(call, err);
}

/* ---- Aggregator -------------------------------------------------------------------------- */

int bb_aggregator_dispatch(const bb_aggregator_ops *ops, void *self, bb_ctx *ctx, const bb_op_call *call,
                           bb_error *err) {
  if (is(call, "Contribute")) {
    if (!ops->contribute) return unsupported(call, err);
    const bb_val *first = call->n_inputs ? call->inputs[0] : NULL;
    const bb_peer_id *from = bb_ctx_source(ctx) ? bb_ctx_source(ctx) : bb_ctx_self(ctx);
    /* a bundle [update, metadata...] as one value */
    const bb_tensor *bundled = bb_val_as_tensor(bb_val_child(first, 0));
    if (bundled) {
      size_t n = bb_val_count(first);
      bb_val *meta = n == 2  ? bb_val_retain(bb_val_child(first, 1))
                     : n > 2 ? bb_val_composite(NULL, bb_val_children(first) + 1, n - 1)
                             : NULL;
      if (n > 2 && !meta) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
      int rc = ops->contribute(self, ctx, from, bundled, meta, err);
      bb_val_release(meta);
      return done(call, rc, err);
    }
    const bb_tensor *update = NULL;
    int rc = input_tensor(call, 0, &update, err);
    if (rc) return rc;
    const bb_val *meta = call->n_inputs > 1 ? call->inputs[1] : NULL;
    if (meta == call->inputs[0]) meta = NULL; /* the same value wired twice carries no metadata */
    return done(call, ops->contribute(self, ctx, from, update, meta, err), err);
  }
  if (is(call, "Aggregate")) {
    if (!ops->aggregate) return unsupported(call, err);
    bb_tensor *params = NULL;
    bb_val *meta = NULL;
    int rc = ops->aggregate(self, ctx, &params, &meta, err);
    if (rc) return rc;
    if (!params) { /* no round ready: nothing downstream runs */
      bb_val_release(meta);
      return 0;
    }
    if ((rc = put_tensor(call, 0, params, err))) {
      bb_val_release(meta);
      return rc;
    }
    return meta ? put_value(call, 1, meta) : 0;
  }
  return unknown_op(call, err);
}

/* ---- Codec ---------------------------------------------------------------------------------- */

static int unsupported_reference(const bb_op_call *call, bb_error *err) {
  return bb_error_set(err, BB_ERR_UNSUPPORTED, "this codec does not implement %s::%s with a reference (input 1)",
                      call->domain, call->op_type);
}

/* The optional reference of Encode / Decode (input 1): NULL when absent. */
static int codec_reference(const bb_op_call *call, const bb_tensor **reference, bb_error *err) {
  *reference = NULL;
  if (call->n_inputs < 2 || !call->inputs[1]) return 0;
  return input_tensor(call, 1, reference, err);
}

int bb_codec_dispatch(const bb_codec_ops *ops, void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  const bb_tensor *x = NULL, *reference = NULL;
  int rc;
  if (is(call, "Train")) {
    if (!ops->train) return done(call, 0, err); /* nothing to learn: a codec without training */
    if ((rc = input_tensor(call, 0, &x, err))) return rc;
    return done(call, ops->train(self, ctx, x, err), err);
  }
  if (is(call, "Encode")) {
    if ((rc = codec_reference(call, &reference, err))) return rc;
    if (reference && !ops->encode_against) return unsupported_reference(call, err);
    if (!reference && !ops->encode) return unsupported(call, err);
    if ((rc = input_tensor(call, 0, &x, err))) return rc;
    bb_val *y = NULL;
    if ((rc = reference ? ops->encode_against(self, ctx, x, reference, &y, err) : ops->encode(self, ctx, x, &y, err)))
      return rc;
    return put_value(call, 0, y);
  }
  if (is(call, "Decode")) {
    if ((rc = codec_reference(call, &reference, err))) return rc;
    if (reference && !ops->decode_against) return unsupported_reference(call, err);
    if (!reference && !ops->decode) return unsupported(call, err);
    const bb_val *y = call->n_inputs ? call->inputs[0] : NULL;
    if (!y) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "input 0 of Decode is missing");
    bb_tensor *out = NULL;
    if ((rc = reference ? ops->decode_against(self, ctx, y, reference, &out, err) : ops->decode(self, ctx, y, &out, err)))
      return rc;
    return put_tensor(call, 0, out, err);
  }
  return unknown_op(call, err);
}

/* ---- Index ------------------------------------------------------------------------------------ */

int bb_index_dispatch(const bb_index_ops *ops, void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  const bb_tensor *x = NULL;
  int rc;
  if (is(call, "Add")) {
    if (!ops->add) return unsupported(call, err);
    if ((rc = input_tensor(call, 0, &x, err))) return rc;
    uint64_t id = 0;
    if ((rc = ops->add(self, ctx, x, &id, err))) return rc;
    bb_val *v = bb_val_u64(NULL, BB_VAL_U64, id);
    return v ? put_value(call, 0, v) : bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  }
  if (is(call, "Search")) {
    if (!ops->search) return unsupported(call, err);
    if ((rc = input_tensor(call, 0, &x, err))) return rc;
    int64_t k = call->node ? bb_attr_get_int(&call->node->attrs, "k", 10) : 10;
    if (k < 1) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "Search needs k >= 1 (attribute `k` is %lld)",
                                   (long long)k);
    bb_tensor *ids = NULL, *dist = NULL;
    if ((rc = ops->search(self, ctx, x, (size_t)k, &ids, &dist, err))) return rc;
    if ((rc = put_tensor(call, 0, ids, err))) {
      bb_tensor_release(dist);
      return rc;
    }
    return put_tensor(call, 1, dist, err);
  }
  if (is(call, "Remove")) {
    if (!ops->remove) return unsupported(call, err);
    const bb_val *v = call->n_inputs ? call->inputs[0] : NULL;
    if (!v || !bb_val_is_u64(v))
      return bb_error_set(err, BB_ERR_TYPE, "input 0 of Remove must be an id (U64), got %s",
                          v ? bb_val_kind_name((int)bb_val_kind_of(v)) : "nothing");
    return done(call, ops->remove(self, ctx, bb_val_as_u64(v), err), err);
  }
  if (is(call, "Train")) {
    if (!ops->train) return done(call, 0, err);
    if ((rc = input_tensor(call, 0, &x, err))) return rc;
    return done(call, ops->train(self, ctx, x, err), err);
  }
  return unknown_op(call, err);
}

/* ---- PeerSelector -------------------------------------------------------------------------------- */

int bb_peer_selector_dispatch(const bb_peer_selector_ops *ops, void *self, bb_ctx *ctx, const bb_op_call *call,
                              bb_error *err) {
  bb_val *peers = NULL;
  int rc;
  if (is(call, "Sample")) {
    if (!ops->sample) return unsupported(call, err);
    int64_t n = call->node ? bb_attr_get_int(&call->node->attrs, "n", 1) : 1;
    if (n < 0) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "Sample needs n >= 0 (got %lld)", (long long)n);
    if ((rc = ops->sample(self, ctx, (size_t)n, &peers, err))) return rc;
    return put_value(call, 0, peers);
  }
  if (is(call, "CurrentView")) {
    if (!ops->current_view) return unsupported(call, err);
    if ((rc = ops->current_view(self, ctx, &peers, err))) return rc;
    return put_value(call, 0, peers);
  }
  return unknown_op(call, err);
}
