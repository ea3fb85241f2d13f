/* CPU operators: shape family. This file holds the family's table and the operators that
 * only change the shape, which answer with a view of their input (no copy): Reshape,
 * Flatten, Squeeze, Unsqueeze; and Shape and Size, which read it. The others are in
 * shape_*.c (see shape.h). */
#include "cpu/shape_args.h"
#include "cpu/shape.h"

static int run_reshape(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *in = ctx->inputs[0];
  size_t esize;
  int rc = bbi_cpu_elem_size(ctx, 0, &esize);
  if (rc) return rc;
  int64_t shape[BB_MAX_RANK];
  long n;
  if (ctx->opset < 5) {
    rc = bbi_cpu_int_list(ctx, "shape", 0, false, shape, BB_MAX_RANK, &n);
    /* the Backend role's reshape records its target as a `dims` attribute; take either */
    if (!rc && n < 0) rc = bbi_cpu_int_list(ctx, "dims", 0, false, shape, BB_MAX_RANK, &n);
    if (!rc && n < 0) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "the shape attribute is missing");
  } else {
    rc = bbi_cpu_int_list(ctx, "shape", 1, true, shape, BB_MAX_RANK, &n);
  }
  if (rc) return rc;
  bool allowzero = ctx->opset >= 14 && bb_attr_get_int(&ctx->node->attrs, "allowzero", 0) != 0;
  int64_t dims[BB_MAX_RANK], known = 1;
  int infer = -1;
  for (long i = 0; i < n; i++) {
    int64_t v = shape[i];
    if (v == -1) {
      if (infer >= 0) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "the shape has more than one -1");
      infer = (int)i;
      dims[i] = 1;
      continue;
    }
    if (v == 0 && !allowzero) {
      if (i >= in->rank)
        return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "shape[%ld] is 0 (copy), but the input has rank %d", i,
                           in->rank);
      v = in->dims[i];
    } else if (v < 0) {
      return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "shape[%ld] is %lld", i, (long long)v);
    }
    if (v && known > INT64_MAX / v) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "the shape overflows");
    dims[i] = v;
    known *= v;
  }
  char desc[96];
  if (infer >= 0) {
    if (known == 0 || in->numel % known)
      return bbi_cpu_fail(ctx, BB_ERR_TYPE, "cannot infer the -1 dimension when reshaping %s",
                         bb_tensor_describe(in, desc, sizeof desc));
    dims[infer] = in->numel / known;
    known *= dims[infer];
  }
  if (known != in->numel)
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "cannot reshape %s (%lld elements) to %lld elements",
                       bb_tensor_describe(in, desc, sizeof desc), (long long)in->numel, (long long)known);
  return bbi_cpu_view_output(ctx, 0, in, (int)n, dims);
}

static int run_flatten(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *in = ctx->inputs[0];
  size_t esize;
  int rc = bbi_cpu_elem_size(ctx, 0, &esize);
  if (rc) return rc;
  int64_t axis = bb_attr_get_int(&ctx->node->attrs, "axis", 1);
  if (axis < -(int64_t)in->rank || axis > in->rank)
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "axis %lld is out of range for rank %d", (long long)axis,
                       in->rank);
  if (axis < 0) axis += in->rank;
  int64_t dims[2] = {1, 1};
  for (int k = 0; k < in->rank; k++) dims[k < axis ? 0 : 1] *= in->dims[k];
  return bbi_cpu_view_output(ctx, 0, in, 2, dims);
}

static int run_squeeze(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *in = ctx->inputs[0];
  size_t esize;
  int rc = bbi_cpu_elem_size(ctx, 0, &esize);
  if (rc) return rc;
  int64_t axes[BB_MAX_RANK];
  long n;
  rc = bbi_cpu_int_list(ctx, "axes", 1, ctx->opset >= 13, axes, BB_MAX_RANK, &n);
  if (rc) return rc;
  bool drop[BB_MAX_RANK];
  if (n < 0) {
    for (int k = 0; k < in->rank; k++) drop[k] = in->dims[k] == 1;
  } else {
    if ((rc = bbi_cpu_axes_mask(ctx, axes, n, in->rank, drop))) return rc;
    for (int k = 0; k < in->rank; k++)
      if (drop[k] && in->dims[k] != 1)
        return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "cannot squeeze axis %d of size %lld", k,
                           (long long)in->dims[k]);
  }
  int64_t dims[BB_MAX_RANK];
  int rank = 0;
  for (int k = 0; k < in->rank; k++)
    if (!drop[k]) dims[rank++] = in->dims[k];
  return bbi_cpu_view_output(ctx, 0, in, rank, dims);
}

static int run_unsqueeze(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *in = ctx->inputs[0];
  size_t esize;
  int rc = bbi_cpu_elem_size(ctx, 0, &esize);
  if (rc) return rc;
  int64_t axes[BB_MAX_RANK];
  long n;
  rc = bbi_cpu_int_list(ctx, "axes", 1, ctx->opset >= 13, axes, BB_MAX_RANK, &n);
  if (rc) return rc;
  if (n < 0) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "axes are missing");
  int rank = in->rank + (int)n;
  if (rank > BB_MAX_RANK)
    return bbi_cpu_fail(ctx, BB_ERR_UNSUPPORTED, "output rank %d is over %d", rank, BB_MAX_RANK);
  bool inserted[BB_MAX_RANK];
  if ((rc = bbi_cpu_axes_mask(ctx, axes, n, rank, inserted))) return rc;
  int64_t dims[BB_MAX_RANK];
  for (int k = 0, src = 0; k < rank; k++) dims[k] = inserted[k] ? 1 : in->dims[src++];
  return bbi_cpu_view_output(ctx, 0, in, rank, dims);
}

/* Shape's start/end (opset 15): negative counts from the back, then both are clamped. */
static int64_t clamp_bound(int64_t v, int rank) {
  if (v < 0) v += rank;
  return v < 0 ? 0 : v > rank ? rank : v;
}

static int run_shape(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *in = ctx->inputs[0];
  int64_t start = 0, end = in->rank;
  if (ctx->opset >= 15) {
    start = clamp_bound(bb_attr_get_int(&ctx->node->attrs, "start", 0), in->rank);
    end = clamp_bound(bb_attr_get_int(&ctx->node->attrs, "end", in->rank), in->rank);
  }
  int64_t n = end > start ? end - start : 0;
  int rc = bbi_cpu_make_output(ctx, 0, BB_DTYPE_INT64, 1, &n);
  if (rc) return rc;
  int64_t *out = bb_tensor_data(ctx->outputs[0]);
  for (int64_t i = 0; i < n; i++) out[i] = in->dims[start + i];
  return 0;
}

static int run_size(bbi_cpu_op_ctx *ctx) {
  int rc = bbi_cpu_make_output(ctx, 0, BB_DTYPE_INT64, 0, NULL);
  if (rc) return rc;
  *(int64_t *)bb_tensor_data(ctx->outputs[0]) = ctx->inputs[0]->numel;
  return 0;
}

/* Variadic inputs and outputs (Concat, Split) have no fixed bound. */
#define MANY (1 << 20)

#define ANY_TYPE                                                                                                       \
  "float,double,float16,bfloat16,int8,int16,int32,int64,uint8,uint16,uint32,uint64,bool,complex64,complex128"

const bbi_cpu_op bbi_cpu_ops_shape[] = {
    {"Concat", 1, 1, MANY, 1, 1, ANY_TYPE, bbi_cpu_concat},
    {"Constant", 1, 0, 0, 1, 1, ANY_TYPE, bbi_cpu_constant},
    {"ConstantOfShape", 9, 1, 1, 1, 1, ANY_TYPE, bbi_cpu_constant_of_shape},
    {"DepthToSpace", 1, 1, 1, 1, 1, ANY_TYPE, bbi_cpu_depth_to_space},
    {"Expand", 8, 2, 2, 1, 1, ANY_TYPE, bbi_cpu_expand},
    {"Flatten", 1, 1, 1, 1, 1, ANY_TYPE, run_flatten},
    {"Gather", 1, 2, 2, 1, 1, ANY_TYPE, bbi_cpu_gather},
    {"GatherElements", 11, 2, 2, 1, 1, ANY_TYPE, bbi_cpu_gather_elements},
    {"GatherND", 11, 2, 2, 1, 1, ANY_TYPE, bbi_cpu_gather_nd},
    {"OneHot", 9, 3, 3, 1, 1, ANY_TYPE, bbi_cpu_one_hot},
    {"Pad", 1, 1, 1, 1, 1, ANY_TYPE, bbi_cpu_pad},
    {"Pad", 11, 2, 3, 1, 1, ANY_TYPE, bbi_cpu_pad},
    {"Pad", 18, 2, 4, 1, 1, ANY_TYPE, bbi_cpu_pad},
    {"Range", 11, 3, 3, 1, 1, "float,double,int16,int32,int64", bbi_cpu_range},
    {"Reshape", 1, 1, 1, 1, 1, ANY_TYPE, run_reshape},
    {"Reshape", 5, 2, 2, 1, 1, ANY_TYPE, run_reshape},
    {"Scatter", 9, 3, 3, 1, 1, ANY_TYPE, bbi_cpu_scatter_elements},
    {"ScatterElements", 11, 3, 3, 1, 1, ANY_TYPE, bbi_cpu_scatter_elements},
    {"ScatterND", 11, 3, 3, 1, 1, ANY_TYPE, bbi_cpu_scatter_nd},
    {"Shape", 1, 1, 1, 1, 1, ANY_TYPE, run_shape},
    {"Size", 1, 1, 1, 1, 1, ANY_TYPE, run_size},
    {"Slice", 1, 1, 1, 1, 1, ANY_TYPE, bbi_cpu_slice},
    {"Slice", 10, 3, 5, 1, 1, ANY_TYPE, bbi_cpu_slice},
    {"SpaceToDepth", 1, 1, 1, 1, 1, ANY_TYPE, bbi_cpu_space_to_depth},
    {"Split", 1, 1, 2, 1, MANY, ANY_TYPE, bbi_cpu_split},
    {"Split", 2, 1, 1, 1, MANY, ANY_TYPE, bbi_cpu_split},
    {"Split", 13, 1, 2, 1, MANY, ANY_TYPE, bbi_cpu_split},
    {"Squeeze", 1, 1, 1, 1, 1, ANY_TYPE, run_squeeze},
    {"Squeeze", 13, 1, 2, 1, 1, ANY_TYPE, run_squeeze},
    {"Tile", 1, 3, 3, 1, 1, ANY_TYPE, bbi_cpu_tile},
    {"Tile", 6, 2, 2, 1, 1, ANY_TYPE, bbi_cpu_tile},
    {"Transpose", 1, 1, 1, 1, 1, ANY_TYPE, bbi_cpu_transpose},
    {"Trilu", 14, 1, 2, 1, 1, ANY_TYPE, bbi_cpu_trilu},
    {"Unsqueeze", 1, 1, 1, 1, 1, ANY_TYPE, run_unsqueeze},
    {"Unsqueeze", 13, 2, 2, 1, 1, ANY_TYPE, run_unsqueeze},
};
const size_t bbi_cpu_ops_shape_count = sizeof bbi_cpu_ops_shape / sizeof bbi_cpu_ops_shape[0];
