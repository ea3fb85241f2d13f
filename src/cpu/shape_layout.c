/* CPU operators that rearrange elements: Transpose, Concat, Split, Slice. Each describes
 * its work as strided boxes for bbi_copy_strided. */
#include "cpu/shape_args.h"
#include "cpu/shape_copy.h"
#include "cpu/shape.h"
#include "util/mem.h"

/* Whether perm leaves every axis longer than 1 in its order: the elements then keep their
 * places (a batch of one swapped with the channels), and the output is a view. */
static bool keeps_layout(const bb_tensor *in, const int64_t *perm) {
  int64_t last = -1;
  for (int k = 0; k < in->rank; k++) {
    if (in->dims[perm[k]] == 1) continue;
    if (perm[k] < last) return false;
    last = perm[k];
  }
  return true;
}

int bbi_cpu_transpose(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *in = ctx->inputs[0];
  size_t esize;
  int rc = bbi_cpu_elem_size(ctx, 0, &esize);
  if (rc) return rc;
  int64_t perm[BB_MAX_RANK];
  long n;
  if ((rc = bbi_cpu_int_list(ctx, "perm", 0, false, perm, BB_MAX_RANK, &n))) return rc;
  if (n <= 0) { /* absent (or empty, as the role contract writes it): reverse the axes */
    n = in->rank;
    for (int k = 0; k < in->rank; k++) perm[k] = in->rank - 1 - k;
  }
  if (n != in->rank)
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "perm has %ld entries for an input of rank %d", n, in->rank);
  bool seen[BB_MAX_RANK] = {false};
  for (int k = 0; k < in->rank; k++) {
    if (perm[k] < 0 || perm[k] >= in->rank || seen[perm[k]])
      return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "perm is not a permutation of 0..%d (entry %d is %lld)",
                         in->rank - 1, k, (long long)perm[k]);
    seen[perm[k]] = true;
  }
  int64_t dims[BB_MAX_RANK], in_strides[BB_MAX_RANK], src_strides[BB_MAX_RANK], dst_strides[BB_MAX_RANK];
  for (int k = 0; k < in->rank; k++) dims[k] = in->dims[perm[k]];
  if (keeps_layout(in, perm)) return bbi_cpu_view_output(ctx, 0, in, in->rank, dims);
  if ((rc = bbi_cpu_make_output(ctx, 0, in->dtype, in->rank, dims))) return rc;
  bbi_copy_strides(in->rank, in->dims, (int64_t)esize, in_strides);
  for (int k = 0; k < in->rank; k++) src_strides[k] = in_strides[perm[k]];
  bbi_copy_strides(in->rank, dims, (int64_t)esize, dst_strides);
  bbi_copy_strided(esize, in->rank, dims, bb_tensor_data(in), src_strides, bb_tensor_data(ctx->outputs[0]),
                  dst_strides);
  return 0;
}

int bbi_cpu_concat(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *first = ctx->inputs[0];
  size_t esize;
  int rc = bbi_cpu_elem_size(ctx, 0, &esize);
  if (rc) return rc;
  const bb_attr *a = bb_attr_find(&ctx->node->attrs, "axis");
  if (!a && ctx->opset >= 4) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "the axis attribute is missing");
  int axis;
  if ((rc = bbi_cpu_axis(ctx, a ? a->i : 1, first->rank, &axis))) return rc;
  int64_t dims[BB_MAX_RANK];
  for (int k = 0; k < first->rank; k++) dims[k] = first->dims[k];
  dims[axis] = 0;
  char d1[96], d2[96];
  for (size_t i = 0; i < ctx->n_inputs; i++) {
    const bb_tensor *t = ctx->inputs[i];
    if (!t) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "input %zu is missing", i);
    if (t->dtype != first->dtype || t->rank != first->rank)
      return bbi_cpu_fail(ctx, BB_ERR_TYPE, "input %zu is %s, input 0 is %s", i, bb_tensor_describe(t, d1, sizeof d1),
                         bb_tensor_describe(first, d2, sizeof d2));
    for (int k = 0; k < t->rank; k++)
      if (k != axis && t->dims[k] != first->dims[k])
        return bbi_cpu_fail(ctx, BB_ERR_TYPE, "input %zu is %s, input 0 is %s: they differ off axis %d", i,
                           bb_tensor_describe(t, d1, sizeof d1), bb_tensor_describe(first, d2, sizeof d2), axis);
    dims[axis] += t->dims[axis];
  }
  if ((rc = bbi_cpu_make_output(ctx, 0, first->dtype, first->rank, dims))) return rc;
  int64_t dst_strides[BB_MAX_RANK], src_strides[BB_MAX_RANK];
  bbi_copy_strides(first->rank, dims, (int64_t)esize, dst_strides);
  char *dst = bb_tensor_data(ctx->outputs[0]);
  for (size_t i = 0; i < ctx->n_inputs; i++) {
    const bb_tensor *t = ctx->inputs[i];
    bbi_copy_strides(t->rank, t->dims, (int64_t)esize, src_strides);
    bbi_copy_strided(esize, t->rank, t->dims, bb_tensor_data(t), src_strides, dst, dst_strides);
    dst += t->dims[axis] * dst_strides[axis];
  }
  return 0;
}

/* The split sizes: given (attribute or input, by opset), from num_outputs (opset 18), or
 * equal parts. */
static int split_sizes(bbi_cpu_op_ctx *ctx, int64_t dim, int64_t *sizes, size_t n_out) {
  /* opset 1 takes either form; 2 to 12 the attribute; 13 on the input */
  bool from_input = ctx->opset >= 13 || (ctx->opset < 2 && bbi_cpu_input(ctx, 1));
  long n;
  int rc = bbi_cpu_int_list(ctx, "split", 1, from_input, sizes, n_out, &n);
  if (rc) return rc;
  if (n >= 0) {
    if ((size_t)n != n_out)
      return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "split has %ld sizes for %zu outputs", n, n_out);
    int64_t sum = 0;
    for (size_t i = 0; i < n_out; i++) {
      if (sizes[i] < 0 || sizes[i] > dim)
        return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "split size %lld is invalid", (long long)sizes[i]);
      sum += sizes[i];
    }
    if (sum != dim)
      return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "split sizes add up to %lld, the axis has %lld",
                         (long long)sum, (long long)dim);
    return 0;
  }
  const bb_attr *num = ctx->opset >= 18 ? bb_attr_find(&ctx->node->attrs, "num_outputs") : NULL;
  if (num) {
    if (num->i != (int64_t)n_out)
      return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "num_outputs is %lld, the node has %zu outputs",
                         (long long)num->i, n_out);
    /* ceil-sized parts, the last one smaller */
    int64_t part = (dim + (int64_t)n_out - 1) / (int64_t)n_out, left = dim;
    for (size_t i = 0; i < n_out; i++) {
      sizes[i] = left < part ? left : part;
      left -= sizes[i];
    }
    return 0;
  }
  if (dim % (int64_t)n_out)
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "an axis of %lld cannot be split into %zu equal parts",
                       (long long)dim, n_out);
  for (size_t i = 0; i < n_out; i++) sizes[i] = dim / (int64_t)n_out;
  return 0;
}

int bbi_cpu_split(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *in = ctx->inputs[0];
  size_t esize;
  int rc = bbi_cpu_elem_size(ctx, 0, &esize);
  if (rc) return rc;
  int axis;
  if ((rc = bbi_cpu_axis(ctx, bb_attr_get_int(&ctx->node->attrs, "axis", 0), in->rank, &axis))) return rc;
  size_t n_out = ctx->n_outputs;
  int64_t *sizes = bbi_mem_alloc(ctx->alloc, n_out * sizeof *sizes);
  if (!sizes) return bbi_cpu_fail(ctx, BB_ERR_NOMEM, "cannot allocate %zu split sizes", n_out);
  rc = split_sizes(ctx, in->dims[axis], sizes, n_out);
  int64_t strides[BB_MAX_RANK], dims[BB_MAX_RANK];
  bbi_copy_strides(in->rank, in->dims, (int64_t)esize, strides);
  for (int k = 0; k < in->rank; k++) dims[k] = in->dims[k];
  const char *src = bb_tensor_data(in);
  for (size_t i = 0; !rc && i < n_out; i++) {
    dims[axis] = sizes[i];
    if (bbi_cpu_output_wanted(ctx, i) && !(rc = bbi_cpu_make_output(ctx, i, in->dtype, in->rank, dims))) {
      int64_t dst_strides[BB_MAX_RANK];
      bbi_copy_strides(in->rank, dims, (int64_t)esize, dst_strides);
      bbi_copy_strided(esize, in->rank, dims, src, strides, bb_tensor_data(ctx->outputs[i]), dst_strides);
    }
    src += sizes[i] * strides[axis];
  }
  bbi_mem_free(ctx->alloc, sizes);
  return rc;
}

/* ONNX Slice bounds for one axis: negative start/end count from the back, then both are
 * clamped to the range the step direction can reach. Returns the element count. */
static int64_t slice_axis(int64_t dim, int64_t *start, int64_t end, int64_t step) {
  if (dim == 0) return 0;
  int64_t s = *start, e = end;
  if (s < 0) s += dim;
  if (e < 0) e += dim;
  if (step > 0) {
    s = s < 0 ? 0 : s > dim ? dim : s;
    e = e < 0 ? 0 : e > dim ? dim : e;
  } else {
    s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
    e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
  }
  *start = s;
  uint64_t span = step > 0 ? (e > s ? (uint64_t)(e - s) : 0) : (s > e ? (uint64_t)(s - e) : 0);
  uint64_t mag = step > 0 ? (uint64_t)step : 0 - (uint64_t)step;
  return span ? (int64_t)((span - 1) / mag + 1) : 0;
}

int bbi_cpu_slice(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *in = ctx->inputs[0];
  size_t esize;
  int rc = bbi_cpu_elem_size(ctx, 0, &esize);
  if (rc) return rc;
  bool from_inputs = ctx->opset >= 10;
  int64_t starts[BB_MAX_RANK], ends[BB_MAX_RANK], axes[BB_MAX_RANK], steps[BB_MAX_RANK];
  long n, n_ends, n_axes, n_steps = -1;
  if ((rc = bbi_cpu_int_list(ctx, "starts", 1, from_inputs, starts, BB_MAX_RANK, &n)) ||
      (rc = bbi_cpu_int_list(ctx, "ends", 2, from_inputs, ends, BB_MAX_RANK, &n_ends)) ||
      (rc = bbi_cpu_int_list(ctx, "axes", 3, from_inputs, axes, BB_MAX_RANK, &n_axes)) ||
      (from_inputs && (rc = bbi_cpu_int_list(ctx, "steps", 4, true, steps, BB_MAX_RANK, &n_steps))))
    return rc;
  if (n < 0 || n_ends < 0) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "starts and ends are required");
  if (n_ends != n || (n_axes >= 0 && n_axes != n) || (n_steps >= 0 && n_steps != n))
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "starts, ends, axes and steps differ in length");
  if (n_axes < 0) {
    if (n > in->rank)
      return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "%ld starts for an input of rank %d", n, in->rank);
    for (long i = 0; i < n; i++) axes[i] = i;
  }
  bool sliced[BB_MAX_RANK];
  if ((rc = bbi_cpu_axes_mask(ctx, axes, n, in->rank, sliced))) return rc;
  int64_t dims[BB_MAX_RANK], first[BB_MAX_RANK], step[BB_MAX_RANK];
  for (int k = 0; k < in->rank; k++) {
    dims[k] = in->dims[k];
    first[k] = 0;
    step[k] = 1;
  }
  for (long i = 0; i < n; i++) {
    int k = (int)(axes[i] < 0 ? axes[i] + in->rank : axes[i]);
    int64_t st = n_steps >= 0 ? steps[i] : 1;
    if (st == 0) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "step %ld is 0", i);
    first[k] = starts[i];
    dims[k] = slice_axis(in->dims[k], &first[k], ends[i], st);
    step[k] = st;
  }
  if ((rc = bbi_cpu_make_output(ctx, 0, in->dtype, in->rank, dims))) return rc;
  if (ctx->outputs[0]->numel == 0) return 0;
  int64_t in_strides[BB_MAX_RANK], src_strides[BB_MAX_RANK], dst_strides[BB_MAX_RANK], offset = 0;
  bbi_copy_strides(in->rank, in->dims, (int64_t)esize, in_strides);
  for (int k = 0; k < in->rank; k++) {
    offset += first[k] * in_strides[k];
    /* |step| < dim whenever more than one element is taken, so this cannot overflow */
    src_strides[k] = dims[k] > 1 ? in_strides[k] * step[k] : 0;
  }
  bbi_copy_strides(in->rank, dims, (int64_t)esize, dst_strides);
  bbi_copy_strided(esize, in->rank, dims, (const char *)bb_tensor_data(in) + offset, src_strides,
                  bb_tensor_data(ctx->outputs[0]), dst_strides);
  return 0;
}
