/* Backward rules of reductions, Softmax / LogSoftmax and the classification losses. */
#include <string.h>

#include "grad/builder.h"

#define IN(i) (n->inputs.items[i])
#define OUT(k) (n->outputs.items[k])

/* ReduceSum / ReduceMean: dY, with the reduced axes put back when keepdims was 0, spread
 * over X's shape (and divided by the count for the mean). */
static int reduce_back(gb *b, bb_ir_node *n, const char *const *dy, bool mean) {
  gb_value *x = gb_val(b, IN(0));
  int64_t axes[BB_MAX_RANK];
  long count = x->rank < 0 ? -1 : gb_node_axes(b, n, 1, mean ? 18 : 13, x->rank, axes);
  if (count < 0)
    return gb_fail(b, BB_ERR_UNSUPPORTED, "%s: the gradient needs the input's rank and constant axes", gb_node_label(b, n));
  if (!count && bb_attr_get_int(&n->attrs, "noop_with_empty_axes", 0)) {
    gb_grad(b, n, 0, dy[0]);
    return b->rc;
  }
  if (!count)
    for (int d = 0; d < x->rank; d++) axes[count++] = d;
  const char *g = dy[0];
  if (!bb_attr_get_int(&n->attrs, "keepdims", 1) && x->rank) g = gb_unsqueeze(b, g, axes, (size_t)count);
  if (mean) g = gb_op(b, "Div", 2, g, gb_count(b, IN(0), axes, (size_t)count, x->dtype));
  gb_grad(b, n, 0, gb_op(b, "Expand", 2, g, gb_shape_of(b, IN(0))));
  return b->rc;
}

static int reducesum_back(gb *b, bb_ir_node *n, const char *const *dy) { return reduce_back(b, n, dy, false); }
static int reducemean_back(gb *b, bb_ir_node *n, const char *const *dy) { return reduce_back(b, n, dy, true); }

/* The axes Softmax / LogSoftmax normalise over: `axis` from opset 13, every axis from
 * `axis` on before (the input was viewed as 2-D there). */
static long softmax_axes(gb *b, bb_ir_node *n, int64_t *axes) {
  gb_value *x = gb_val(b, IN(0));
  if (x->rank < 1) {
    gb_fail(b, BB_ERR_UNSUPPORTED, "%s: the gradient needs the input's rank", gb_node_label(b, n));
    return -1;
  }
  int64_t axis = bb_attr_get_int(&n->attrs, "axis", b->opset >= 13 ? -1 : 1);
  if (axis < 0) axis += x->rank;
  long count = 0;
  for (int64_t d = axis; d < (b->opset >= 13 ? axis + 1 : x->rank); d++) axes[count++] = d;
  return count;
}

/* Y = softmax(X): dX = Y * (dY - Σ dY·Y). */
static int softmax_back(gb *b, bb_ir_node *n, const char *const *dy) {
  int64_t axes[BB_MAX_RANK];
  long count = softmax_axes(b, n, axes);
  if (count < 0) return b->rc;
  const char *dot = gb_reduce_sum(b, gb_op(b, "Mul", 2, dy[0], OUT(0)), axes, (size_t)count, true);
  gb_grad(b, n, 0, gb_op(b, "Mul", 2, OUT(0), gb_op(b, "Sub", 2, dy[0], dot)));
  return b->rc;
}

/* Y = log softmax(X): dX = dY - exp(Y) * Σ dY. */
static int logsoftmax_back(gb *b, bb_ir_node *n, const char *const *dy) {
  int64_t axes[BB_MAX_RANK];
  long count = softmax_axes(b, n, axes);
  if (count < 0) return b->rc;
  const char *total = gb_reduce_sum(b, dy[0], axes, (size_t)count, true);
  gb_grad(b, n, 0, gb_op(b, "Sub", 2, dy[0], gb_op(b, "Mul", 2, gb_op(b, "Exp", 1, OUT(0)), total)));
  return b->rc;
}

/* SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss over scores [N, C, d..] and labels
 * [N, d..]: with w the weight of each element's label (its class weight, 0 where the label
 * is ignore_index) and f = dLoss * w (divided by Σ w for "mean"), the gradient is
 * (softmax(scores) - onehot(label)) * f, or -onehot(label) * f for the log-probability
 * input of NegativeLogLikelihoodLoss. */
static int class_loss_back(gb *b, bb_ir_node *n, const char *const *dy, bool softmax) {
  gb_value *x = gb_val(b, IN(0));
  if (x->rank < 2) return gb_fail(b, BB_ERR_UNSUPPORTED, "%s: the gradient needs scores of rank 2 or more", gb_node_label(b, n));
  int32_t dtype = x->dtype;
  const char *labels = IN(1);
  if (gb_dtype(b, labels) != BB_DTYPE_INT64) {
    bb_ir_node *cast = gb_new(b, "Cast", NULL, 1, 1, labels);
    gb_attr_int(b, cast, "to", BB_DTYPE_INT64);
    labels = gb_add(b, cast);
  }
  const char *weight = NULL, *mask = NULL;
  if (bb_attr_find(&n->attrs, "ignore_index")) {
    int64_t ignore = bb_attr_get_int(&n->attrs, "ignore_index", 0);
    mask = gb_op(b, "Not", 1, gb_op(b, "Equal", 2, labels, gb_ints(b, &ignore, 1)));
    labels = gb_op(b, "Where", 3, mask, labels, gb_ints(b, (int64_t[]){0}, 1)); /* any valid class: weighted 0 */
  }
  if (gb_has_input(n, 2)) weight = gb_op(b, "Gather", 2, IN(2), labels);
  if (mask) {
    bb_ir_node *cast = gb_new(b, "Cast", NULL, 1, 1, mask);
    gb_attr_int(b, cast, "to", dtype);
    const char *m = gb_add(b, cast);
    weight = weight ? gb_op(b, "Mul", 2, weight, m) : m;
  }
  const char *reduction = bb_attr_get_string(&n->attrs, "reduction", "mean");
  const char *f = dy[0];
  if (strcmp(reduction, "mean") == 0)
    f = gb_op(b, "Div", 2, f, weight ? gb_reduce_sum(b, weight, NULL, 0, false) : gb_count(b, labels, NULL, 0, dtype));
  else if (strcmp(reduction, "sum") != 0 && strcmp(reduction, "none") != 0)
    return gb_fail(b, BB_ERR_UNSUPPORTED, "%s: reduction %s", gb_node_label(b, n), reduction);
  if (weight) f = gb_op(b, "Mul", 2, f, weight);
  gb_value *fv = gb_val(b, f);
  if (fv && fv->rank > 0) f = gb_unsqueeze(b, f, (int64_t[]){1}, 1); /* [N, d..] → [N, 1, d..] */
  const char *depth = GB_KNOWN(x->dims[1]) ? gb_ints(b, &x->dims[1], 1)
                                           : gb_op(b, "Gather", 2, gb_shape_of(b, IN(0)), gb_ints(b, (int64_t[]){1}, 1));
  bb_ir_node *oh = gb_new(b, "OneHot", NULL, 1, 3, labels, depth, gb_tensor(b, dtype, 1, (int64_t[]){2}, (double[]){0, 1}));
  gb_attr_int(b, oh, "axis", 1);
  const char *onehot = gb_add(b, oh);
  const char *diff = softmax ? gb_op(b, "Sub", 2, gb_op(b, "Exp", 1, gb_ensure_output(b, n, 1, ":log_prob")), onehot)
                             : gb_op(b, "Neg", 1, onehot);
  gb_grad(b, n, 0, gb_op(b, "Mul", 2, diff, f));
  return b->rc;
}

static int sce_back(gb *b, bb_ir_node *n, const char *const *dy) { return class_loss_back(b, n, dy, true); }
static int nll_back(gb *b, bb_ir_node *n, const char *const *dy) { return class_loss_back(b, n, dy, false); }

const gb_rule gb_rules_reduce[] = {
    {NULL, "ReduceSum", 1, 1, reducesum_back},
    {NULL, "ReduceMean", 1, 1, reducemean_back},
    {NULL, "Softmax", 1, 1, softmax_back},
    {NULL, "LogSoftmax", 1, 1, logsoftmax_back},
    {NULL, "SoftmaxCrossEntropyLoss", 1, 1, sce_back},
    {NULL, "NegativeLogLikelihoodLoss", 1, 1, nll_back},
};
const size_t gb_rules_reduce_count = sizeof gb_rules_reduce / sizeof gb_rules_reduce[0];
