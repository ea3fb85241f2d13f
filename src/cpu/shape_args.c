/* Shape-like arguments of CPU operators. */
#include <string.h>

#include "cpu/shape_args.h"

int bbi_cpu_int_list(bbi_cpu_op_ctx *ctx, const char *attr, size_t input, bool from_input, int64_t *values,
                    size_t max, long *count) {
  *count = -1;
  if (from_input) {
    const bb_tensor *t = bbi_cpu_input(ctx, input);
    if (!t) return 0;
    long n = bbi_cpu_read_ints(ctx, t, values, max, attr);
    if (n < 0) return (int)n;
    *count = n;
    return 0;
  }
  const bb_attr *a = bb_attr_find(&ctx->node->attrs, attr);
  if (!a) return 0;
  if (a->has_type && a->type != BB_ATTR_INTS)
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "attribute %s must be INTS", attr);
  if (a->n_ints > max)
    return bbi_cpu_fail(ctx, BB_ERR_LIMIT, "attribute %s has %zu values, over %zu", attr, a->n_ints, max);
  if (a->n_ints) memcpy(values, a->ints, a->n_ints * sizeof *values);
  *count = (long)a->n_ints;
  return 0;
}

int bbi_cpu_axes_mask(bbi_cpu_op_ctx *ctx, const int64_t *axes, long n, int rank, bool *mask) {
  for (int i = 0; i < rank; i++) mask[i] = false;
  for (long i = 0; i < n; i++) {
    int axis;
    int rc = bbi_cpu_axis(ctx, axes[i], rank, &axis);
    if (rc) return rc;
    if (mask[axis]) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "axis %lld is given twice", (long long)axes[i]);
    mask[axis] = true;
  }
  return 0;
}

int bbi_cpu_elem_size(bbi_cpu_op_ctx *ctx, size_t i, size_t *esize) {
  const bb_tensor *t = bbi_cpu_input(ctx, i);
  if (!t) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "input %zu is missing", i);
  *esize = bb_dtype_size(t->dtype);
  if (!*esize) {
    const char *name = bb_dtype_name(t->dtype);
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "input %zu has element type %s, which this op does not take", i,
                       name ? name : "unknown");
  }
  return 0;
}

int bbi_cpu_view_output(bbi_cpu_op_ctx *ctx, size_t i, const bb_tensor *in, int rank, const int64_t *dims) {
  if (i >= ctx->n_outputs) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "output %zu is not declared", i);
  bb_tensor *t = bb_tensor_view(in, rank, dims);
  if (!t) return bbi_cpu_fail(ctx, BB_ERR_NOMEM, "cannot allocate output %zu", i);
  bb_tensor_release(ctx->outputs[i]);
  ctx->outputs[i] = t;
  return 0;
}
