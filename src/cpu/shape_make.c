/* CPU operators that make a tensor from attributes or small inputs: Constant,
 * ConstantOfShape, Range and OneHot. */
#include <math.h>
#include <string.h>

#include "cpu/shape_args.h"
#include "cpu/shape_copy.h"
#include "cpu/shape.h"

/* A TensorProto attribute as a new tensor, failing with the converter's reason. */
static int tensor_attr(bbi_cpu_op_ctx *ctx, const bb_attr *a, bb_tensor **out) {
  if (!a->t) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "attribute %s holds no tensor", a->name);
  bb_error why;
  int rc = bb_tensor_from_proto(a->t, ctx->alloc, out, &why);
  return rc ? bbi_cpu_fail(ctx, rc, "attribute %s: %s", a->name, why.message) : 0;
}

int bbi_cpu_constant(bbi_cpu_op_ctx *ctx) {
  static const char *const forms[] = {"value",       "value_float",  "value_floats",  "value_int",
                                      "value_ints",  "value_string", "value_strings", "sparse_value"};
  const bb_attr *a = NULL;
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
    const bb_attr *f = bb_attr_find(&ctx->node->attrs, forms[i]);
    if (f && a) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "has both %s and %s", a->name, f->name);
    if (f) a = f;
  }
  if (!a) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "has no value attribute");
  const char *name = a->name;
  if (strcmp(name, "value") == 0) {
    bb_tensor *t;
    int rc = tensor_attr(ctx, a, &t);
    if (rc) return rc;
    bb_tensor_release(ctx->outputs[0]);
    ctx->outputs[0] = t;
    return 0;
  }
  bool floats = strcmp(name, "value_float") == 0 || strcmp(name, "value_floats") == 0;
  bool list = strcmp(name, "value_floats") == 0 || strcmp(name, "value_ints") == 0;
  if (!floats && strcmp(name, "value_int") != 0 && !list)
    return bbi_cpu_fail(ctx, BB_ERR_UNSUPPORTED, "attribute %s is not supported (no string or sparse tensors)", name);
  int64_t n = list ? (int64_t)(floats ? a->n_floats : a->n_ints) : 1;
  int rc = bbi_cpu_make_output(ctx, 0, floats ? BB_DTYPE_FLOAT : BB_DTYPE_INT64, list ? 1 : 0, &n);
  if (rc) return rc;
  void *dst = bb_tensor_data(ctx->outputs[0]);
  if (floats && list) memcpy(dst, a->floats, (size_t)n * sizeof(float));
  else if (list) memcpy(dst, a->ints, (size_t)n * sizeof(int64_t));
  else if (floats) *(float *)dst = a->f;
  else *(int64_t *)dst = a->i;
  return 0;
}

int bbi_cpu_constant_of_shape(bbi_cpu_op_ctx *ctx) {
  int64_t dims[BB_MAX_RANK];
  long rank = bbi_cpu_read_ints(ctx, ctx->inputs[0], dims, BB_MAX_RANK, "shape");
  if (rank < 0) return (int)rank;
  for (long k = 0; k < rank; k++)
    if (dims[k] < 0) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "shape[%ld] is %lld", k, (long long)dims[k]);
  const bb_attr *a = bb_attr_find(&ctx->node->attrs, "value");
  bb_tensor *value = NULL;
  int rc = 0;
  if (a && (rc = tensor_attr(ctx, a, &value))) return rc;
  if (value && value->numel != 1) rc = bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "value must hold one element");
  if (!rc) rc = bbi_cpu_make_output(ctx, 0, value ? value->dtype : BB_DTYPE_FLOAT, (int)rank, dims);
  if (!rc) {
    bb_tensor *out = ctx->outputs[0];
    if (value) bbi_copy_fill(bb_tensor_data(out), bb_dtype_size(out->dtype), out->numel, bb_tensor_data(value));
    else memset(bb_tensor_data(out), 0, bb_tensor_nbytes(out));
  }
  bb_tensor_release(value);
  return rc;
}

static const int32_t RANGE_TYPES[] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_INT16, BB_DTYPE_INT32,
                                      BB_DTYPE_INT64, BB_DTYPE_UNDEFINED};

/* Range's element count, max(ceil((limit - start) / delta), 0), exact for integers. */
static int range_count(bbi_cpu_op_ctx *ctx, bool integer, const bb_tensor *const *args, int64_t *n) {
  if (integer) {
    int64_t start = bbi_cpu_get_i64(args[0], 0), limit = bbi_cpu_get_i64(args[1], 0), delta = bbi_cpu_get_i64(args[2], 0);
    if (delta == 0) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "delta is 0");
    uint64_t span = delta > 0 ? (limit > start ? (uint64_t)limit - (uint64_t)start : 0)
                              : (start > limit ? (uint64_t)start - (uint64_t)limit : 0);
    uint64_t mag = delta > 0 ? (uint64_t)delta : 0 - (uint64_t)delta;
    uint64_t count = span ? (span - 1) / mag + 1 : 0;
    if (count > (uint64_t)INT64_MAX) return bbi_cpu_fail(ctx, BB_ERR_LIMIT, "the range is too long");
    *n = (int64_t)count;
    return 0;
  }
  double start = bbi_cpu_get_f64(args[0], 0), limit = bbi_cpu_get_f64(args[1], 0), delta = bbi_cpu_get_f64(args[2], 0);
  if (delta == 0.0) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "delta is 0");
  double count = ceil((limit - start) / delta);
  if (count != count || count >= 9.2e18) return bbi_cpu_fail(ctx, BB_ERR_LIMIT, "the range has no finite length");
  *n = count > 0 ? (int64_t)count : 0;
  return 0;
}

int bbi_cpu_range(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *const *args = (const bb_tensor *const *)ctx->inputs;
  int rc;
  for (size_t i = 0; i < 3; i++) {
    if ((rc = bbi_cpu_expect_dtype(ctx, i, RANGE_TYPES))) return rc;
    if (args[i]->dtype != args[0]->dtype)
      return bbi_cpu_fail(ctx, BB_ERR_TYPE, "start, limit and delta differ in element type");
    if (args[i]->numel != 1) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "input %zu is not a scalar", i);
  }
  int32_t dtype = args[0]->dtype;
  bool integer = dtype != BB_DTYPE_FLOAT && dtype != BB_DTYPE_DOUBLE;
  int64_t n;
  if ((rc = range_count(ctx, integer, args, &n)) || (rc = bbi_cpu_make_output(ctx, 0, dtype, 1, &n))) return rc;
  bb_tensor *out = ctx->outputs[0];
  if (integer) {
    uint64_t start = (uint64_t)bbi_cpu_get_i64(args[0], 0), delta = (uint64_t)bbi_cpu_get_i64(args[2], 0);
    for (int64_t i = 0; i < n; i++) bbi_cpu_set_i64(out, i, (int64_t)(start + (uint64_t)i * delta));
  } else {
    double start = bbi_cpu_get_f64(args[0], 0), delta = bbi_cpu_get_f64(args[2], 0);
    for (int64_t i = 0; i < n; i++) bbi_cpu_set_f64(out, i, start + (double)i * delta);
  }
  return 0;
}

int bbi_cpu_one_hot(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *indices = ctx->inputs[0], *depth_t = ctx->inputs[1], *values = ctx->inputs[2];
  size_t esize;
  int rc = bbi_cpu_elem_size(ctx, 2, &esize);
  if (rc) return rc;
  if (depth_t->numel != 1 || values->numel != 2)
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "depth must be one value and values two (off, on)");
  int64_t depth = bbi_cpu_get_i64(depth_t, 0);
  if (depth <= 0) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "depth %lld is not positive", (long long)depth);
  int rank = indices->rank + 1, axis;
  if (rank > BB_MAX_RANK) return bbi_cpu_fail(ctx, BB_ERR_UNSUPPORTED, "output rank %d is over %d", rank, BB_MAX_RANK);
  if ((rc = bbi_cpu_axis(ctx, bb_attr_get_int(&ctx->node->attrs, "axis", -1), rank, &axis))) return rc;
  int64_t dims[BB_MAX_RANK], outer = 1, inner = 1;
  for (int k = 0, src = 0; k < rank; k++) {
    dims[k] = k == axis ? depth : indices->dims[src++];
    if (k < axis) outer *= dims[k];
    if (k > axis) inner *= dims[k];
  }
  if ((rc = bbi_cpu_make_output(ctx, 0, values->dtype, rank, dims))) return rc;
  const char *off = bb_tensor_data(values), *on = off + esize;
  char *out = bb_tensor_data(ctx->outputs[0]);
  bbi_copy_fill(out, esize, ctx->outputs[0]->numel, off);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t v = bbi_cpu_get_i64(indices, o * inner + i); /* real indices truncate toward zero */
      if (v < 0) v += depth;
      if (v >= 0 && v < depth) memcpy(out + (size_t)((o * depth + v) * inner + i) * esize, on, esize);
    }
  return 0;
}
