/* The built-in losses, appended to the forward graph as standard ONNX operators, and the
 * target input they read: made with the type the loss needs, or an existing graph input
 * checked against it. */
#include <string.h>

#include "grad/builder.h"

static bool is_float(int32_t dt) {
  return dt == BB_DTYPE_FLOAT || dt == BB_DTYPE_DOUBLE || dt == BB_DTYPE_FLOAT16 || dt == BB_DTYPE_BFLOAT16;
}

static const char *dtype_name(int32_t dt) { return bb_dtype_name(dt) ? bb_dtype_name(dt) : "an unknown type"; }

static const char *loss_name(bb_grad_loss loss) {
  return loss == BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY ? "softmax cross-entropy"
         : loss == BB_GRAD_LOSS_MSE                 ? "mean squared error"
                                                    : "binary cross-entropy with logits";
}

/* What the target must be: its element type and shape (rank -1 when unknown). */
static int expected_target(gb *b, const bb_grad_options *opt, const gb_value *p, gb_value *want) {
  memset(want, 0, sizeof *want);
  want->rank = -1;
  if (opt->loss != BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY) {
    gb_val_set_shape(want, p->dtype, p->rank, p->dims);
    return 0;
  }
  want->dtype = BB_DTYPE_INT64;
  if (p->rank < 0) return 0;
  if (p->rank < 2)
    return gb_fail(b, BB_ERR_TYPE, "softmax cross-entropy needs logits [N, C, ...]; the prediction %s has rank %d", p->name,
                   p->rank);
  gb_dim dims[BB_MAX_RANK];
  dims[0] = p->dims[0];
  for (int d = 2; d < p->rank; d++) dims[d - 1] = p->dims[d];
  gb_val_set_shape(want, BB_DTYPE_INT64, p->rank - 1, dims);
  return 0;
}

/* An existing target input must have the type and the known dims the loss needs. */
static int check_target(gb *b, const bb_grad_options *opt, const gb_value *t, const gb_value *want, const char *pred) {
  bool labels = opt->loss == BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY;
  if (t->dtype && (labels ? t->dtype != BB_DTYPE_INT64 && t->dtype != BB_DTYPE_INT32 : t->dtype != want->dtype))
    return gb_fail(b, BB_ERR_TYPE, "target %s is %s, but %s of %s needs %s", t->name, dtype_name(t->dtype),
                   loss_name(opt->loss), pred, labels ? "int64 or int32 class labels" : dtype_name(want->dtype));
  if (t->rank < 0 || want->rank < 0) return 0;
  if (t->rank != want->rank)
    return gb_fail(b, BB_ERR_TYPE, "target %s has rank %d, but %s of %s (rank %d) needs rank %d", t->name, t->rank,
                   loss_name(opt->loss), pred, gb_val(b, pred)->rank, want->rank);
  for (int d = 0; d < t->rank; d++)
    if (GB_KNOWN(t->dims[d]) && GB_KNOWN(want->dims[d]) && t->dims[d] != want->dims[d])
      return gb_fail(b, BB_ERR_TYPE, "target %s has %lld in dim %d where %s of %s needs %lld", t->name,
                     (long long)t->dims[d], d, loss_name(opt->loss), pred, (long long)want->dims[d]);
  return 0;
}

static int make_target(gb *b, const bb_grad_options *opt, const char *prediction, const char **target) {
  gb_value *p = gb_val(b, prediction), want;
  if (!is_float(p->dtype))
    return gb_fail(b, BB_ERR_TYPE, "the prediction %s is %s; %s needs floating-point scores", prediction, dtype_name(p->dtype),
                   loss_name(opt->loss));
  if (expected_target(b, opt, p, &want)) return b->rc;
  const char *name = opt->target ? opt->target : "target";
  if (bb_vilist_find(&b->g->inputs, name)) {
    *target = bb_vilist_find(&b->g->inputs, name)->name;
    return check_target(b, opt, gb_val(b, name), &want, prediction);
  }
  if (gb_val(b, name))
    return gb_fail(b, BB_ERR_EXISTS, "%s already names a value of the graph; choose another target name", name);
  gb_value *t = gb_val_add(b, bb_model_strdup(b->m, name));
  if (!t) return b->rc;
  gb_val_set_shape(t, want.dtype, want.rank, want.dims);
  bb_type *type = gb_val_type(b, t);
  if (!type || !bb_vilist_add(b->m, &b->g->inputs, t->name, type))
    return gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
  *target = t->name;
  return 0;
}

int gb_add_loss(gb *b, const bb_grad_options *opt, const char *prediction, const char **target, const char **loss) {
  if (make_target(b, opt, prediction, target)) return b->rc;
  b->prefix = "loss";
  const char *t = *target;
  bb_ir_node *last;
  if (opt->loss == BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY) {
    last = gb_new(b, "SoftmaxCrossEntropyLoss", NULL, 1, 2, prediction, t);
  } else {
    const char *per_element;
    if (opt->loss == BB_GRAD_LOSS_MSE) {
      const char *d = gb_op(b, "Sub", 2, prediction, t);
      per_element = gb_op(b, "Mul", 2, d, d);
    } else { /* softplus(z) - z t = -[t log σ(z) + (1 - t) log(1 - σ(z))] */
      per_element = gb_op(b, "Sub", 2, gb_op(b, "Softplus", 1, prediction), gb_op(b, "Mul", 2, prediction, t));
    }
    last = gb_new(b, "ReduceMean", NULL, 1, 1, per_element);
    gb_attr_int(b, last, "keepdims", 0);
  }
  gb_rename_output(b, last, 0, "loss");
  *loss = gb_add(b, last);
  return b->rc;
}
