/* CPU operators that repeat elements into a larger tensor: Expand (broadcast), Tile and
 * Pad. Expand and Tile are single strided copies whose source strides are 0 along the
 * repeated axes; Pad copies the input into the middle of the output and fills the rest. */
#include <string.h>

#include "cpu/shape_args.h"
#include "cpu/shape_copy.h"
#include "cpu/shape.h"

int bbi_cpu_expand(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *in = ctx->inputs[0];
  size_t esize;
  int rc = bbi_cpu_elem_size(ctx, 0, &esize);
  if (rc) return rc;
  int64_t shape[BB_MAX_RANK], dims[BB_MAX_RANK];
  long n;
  if ((rc = bbi_cpu_int_list(ctx, "shape", 1, true, shape, BB_MAX_RANK, &n))) return rc;
  for (long i = 0; i < n; i++)
    if (shape[i] < 0) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "shape[%ld] is %lld", i, (long long)shape[i]);
  int rank;
  bb_error why;
  if ((rc = bb_broadcast_shapes(in->rank, in->dims, (int)n, shape, &rank, dims, &why)))
    return bbi_cpu_fail(ctx, rc, "%s", why.message);
  if ((rc = bbi_cpu_make_output(ctx, 0, in->dtype, rank, dims))) return rc;
  int64_t in_strides[BB_MAX_RANK], src_strides[BB_MAX_RANK], dst_strides[BB_MAX_RANK];
  bbi_copy_strides(in->rank, in->dims, (int64_t)esize, in_strides);
  for (int k = 0; k < rank; k++) {
    int j = k - (rank - in->rank);
    src_strides[k] = j < 0 || in->dims[j] != dims[k] ? 0 : in_strides[j];
  }
  bbi_copy_strides(rank, dims, (int64_t)esize, dst_strides);
  bbi_copy_strided(esize, rank, dims, bb_tensor_data(in), src_strides, bb_tensor_data(ctx->outputs[0]), dst_strides);
  return 0;
}

/* The repeats: input 1 (opset 6), or the scalars tiles and axis (inputs 1 and 2, opset 1). */
static int tile_repeats(bbi_cpu_op_ctx *ctx, int rank, int64_t *repeats) {
  long n;
  int64_t v[BB_MAX_RANK];
  if (ctx->opset >= 6) {
    int rc = bbi_cpu_int_list(ctx, "repeats", 1, true, repeats, BB_MAX_RANK, &n);
    if (rc) return rc;
    if (n != rank)
      return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "repeats has %ld values for an input of rank %d", n, rank);
    return 0;
  }
  int axis, rc;
  if ((rc = bbi_cpu_int_list(ctx, "tiles", 1, true, v, 1, &n))) return rc;
  if (n != 1) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "tiles must be one value");
  int64_t tiles = v[0];
  if ((rc = bbi_cpu_int_list(ctx, "axis", 2, true, v, 1, &n))) return rc;
  if (n != 1) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "axis must be one value");
  if ((rc = bbi_cpu_axis(ctx, v[0], rank, &axis))) return rc;
  for (int k = 0; k < rank; k++) repeats[k] = k == axis ? tiles : 1;
  return 0;
}

int bbi_cpu_tile(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *in = ctx->inputs[0];
  size_t esize;
  int rc = bbi_cpu_elem_size(ctx, 0, &esize);
  if (rc) return rc;
  int64_t repeats[BB_MAX_RANK], dims[BB_MAX_RANK];
  if ((rc = tile_repeats(ctx, in->rank, repeats))) return rc;
  for (int k = 0; k < in->rank; k++) {
    if (repeats[k] < 0)
      return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "repeat %lld for axis %d", (long long)repeats[k], k);
    if (repeats[k] && in->dims[k] > INT64_MAX / repeats[k])
      return bbi_cpu_fail(ctx, BB_ERR_LIMIT, "axis %d overflows", k);
    dims[k] = in->dims[k] * repeats[k];
  }
  if ((rc = bbi_cpu_make_output(ctx, 0, in->dtype, in->rank, dims))) return rc;
  /* output axis k seen as (repeat, position) pairs; the source ignores the repeat */
  int64_t in_strides[BB_MAX_RANK], out_strides[BB_MAX_RANK];
  int64_t box[BBI_COPY_MAX_RANK], src_strides[BBI_COPY_MAX_RANK], dst_strides[BBI_COPY_MAX_RANK];
  bbi_copy_strides(in->rank, in->dims, (int64_t)esize, in_strides);
  bbi_copy_strides(in->rank, dims, (int64_t)esize, out_strides);
  for (int k = 0; k < in->rank; k++) {
    box[2 * k] = repeats[k];
    src_strides[2 * k] = 0;
    dst_strides[2 * k] = in->dims[k] * out_strides[k];
    box[2 * k + 1] = in->dims[k];
    src_strides[2 * k + 1] = in_strides[k];
    dst_strides[2 * k + 1] = out_strides[k];
  }
  bbi_copy_strided(esize, 2 * in->rank, box, bb_tensor_data(in), src_strides, bb_tensor_data(ctx->outputs[0]),
                  dst_strides);
  return 0;
}

typedef enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE } pad_mode;

/* Begin and end pads per axis, from the attribute (pads, or paddings in opset 1) or from
 * input 1, restricted to input 3's axes in opset 18. */
static int pad_amounts(bbi_cpu_op_ctx *ctx, int rank, int64_t *begin, int64_t *end) {
  int64_t pads[2 * BB_MAX_RANK], axes[BB_MAX_RANK];
  long n, n_axes = -1;
  bool from_input = ctx->opset >= 11;
  int rc = bbi_cpu_int_list(ctx, "pads", 1, from_input, pads, 2 * BB_MAX_RANK, &n);
  if (!rc && n < 0 && ctx->opset < 2) rc = bbi_cpu_int_list(ctx, "paddings", 0, false, pads, 2 * BB_MAX_RANK, &n);
  if (!rc && ctx->opset >= 18) rc = bbi_cpu_int_list(ctx, "axes", 3, true, axes, BB_MAX_RANK, &n_axes);
  if (rc) return rc;
  if (n < 0) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "pads are missing");
  if (n_axes < 0) {
    n_axes = rank;
    for (int k = 0; k < rank; k++) axes[k] = k;
  }
  bool mask[BB_MAX_RANK];
  if ((rc = bbi_cpu_axes_mask(ctx, axes, n_axes, rank, mask))) return rc;
  if (n != 2 * n_axes)
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "pads has %ld values for %ld axes", n, n_axes);
  for (int k = 0; k < rank; k++) begin[k] = end[k] = 0;
  for (long i = 0; i < n_axes; i++) {
    int k = (int)(axes[i] < 0 ? axes[i] + rank : axes[i]);
    begin[k] = pads[i];
    end[k] = pads[i + n_axes];
  }
  return 0;
}

/* The constant-mode fill value as one element of dtype (zero unless given). */
static int pad_value(bbi_cpu_op_ctx *ctx, int32_t dtype, size_t esize, unsigned char *value) {
  memset(value, 0, esize);
  if (ctx->opset < 11) {
    double v = bb_attr_get_float(&ctx->node->attrs, "value", 0.0f);
    if (v == 0.0) return 0;
    bb_tensor *t = bb_tensor_new_empty(ctx->alloc, dtype, 0, NULL);
    if (!t) return bbi_cpu_fail(ctx, BB_ERR_NOMEM, "cannot allocate the pad value");
    bbi_cpu_set_f64(t, 0, v);
    memcpy(value, bb_tensor_data(t), esize);
    bb_tensor_release(t);
    return 0;
  }
  const bb_tensor *c = bbi_cpu_input(ctx, 2);
  if (!c || c->numel == 0) return 0;
  if (c->dtype != dtype) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "constant_value has another element type than data");
  memcpy(value, bb_tensor_data(c), esize);
  return 0;
}

/* Edge and reflect modes: fills the pads of each axis, innermost first, by copying
 * hyperplanes of the output (axes before k limited to the copied interior, axes after k
 * already padded in full). */
static void pad_borders(pad_mode mode, size_t esize, int rank, const int64_t *dims, const int64_t *lead,
                        const int64_t *inner, char *out) {
  int64_t strides[BB_MAX_RANK], box[BB_MAX_RANK];
  bbi_copy_strides(rank, dims, (int64_t)esize, strides);
  for (int k = rank - 1; k >= 0; k--) {
    int64_t base = 0;
    for (int j = 0; j < rank; j++) {
      box[j] = j < k ? inner[j] : j == k ? 1 : dims[j];
      if (j < k) base += lead[j] * strides[j];
    }
    int64_t first = lead[k], last = lead[k] + inner[k] - 1;
    for (int64_t p = 0; p < dims[k]; p++) {
      if (p >= first && p <= last) continue;
      int64_t from = p < first ? (mode == PAD_EDGE ? first : 2 * first - p) : (mode == PAD_EDGE ? last : 2 * last - p);
      bbi_copy_strided(esize, rank, box, out + base + from * strides[k], strides, out + base + p * strides[k], strides);
    }
  }
}

int bbi_cpu_pad(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *in = ctx->inputs[0];
  size_t esize;
  int rc = bbi_cpu_elem_size(ctx, 0, &esize);
  if (rc) return rc;
  const char *mode_name = bb_attr_get_string(&ctx->node->attrs, "mode", "constant");
  pad_mode mode;
  if (strcmp(mode_name, "constant") == 0) mode = PAD_CONSTANT;
  else if (strcmp(mode_name, "reflect") == 0) mode = PAD_REFLECT;
  else if (strcmp(mode_name, "edge") == 0) mode = PAD_EDGE;
  else return bbi_cpu_fail(ctx, BB_ERR_UNSUPPORTED, "mode %s is not supported", mode_name);
  int64_t begin[BB_MAX_RANK], end[BB_MAX_RANK];
  if ((rc = pad_amounts(ctx, in->rank, begin, end))) return rc;
  /* negative pads crop the input; the cropped input ("inner") lands at `lead` */
  int64_t dims[BB_MAX_RANK], inner[BB_MAX_RANK], lead[BB_MAX_RANK], crop[BB_MAX_RANK];
  for (int k = 0; k < in->rank; k++) {
    crop[k] = begin[k] < 0 ? -begin[k] : 0;
    lead[k] = begin[k] > 0 ? begin[k] : 0;
    inner[k] = in->dims[k] - crop[k] - (end[k] < 0 ? -end[k] : 0);
    dims[k] = in->dims[k] + begin[k] + end[k];
    if (inner[k] < 0 || dims[k] < 0)
      return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "pads %lld and %lld crop more than axis %d holds",
                         (long long)begin[k], (long long)end[k], k);
    int64_t most = mode == PAD_REFLECT ? inner[k] - 1 : mode == PAD_EDGE && inner[k] == 0 ? 0 : INT64_MAX;
    if (lead[k] > most || dims[k] - lead[k] - inner[k] > most)
      return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "%s pads of axis %d need more than its %lld elements",
                         mode_name, k, (long long)inner[k]);
  }
  unsigned char value[16];
  if (mode == PAD_CONSTANT && (rc = pad_value(ctx, in->dtype, esize, value))) return rc;
  if ((rc = bbi_cpu_make_output(ctx, 0, in->dtype, in->rank, dims))) return rc;
  char *out = bb_tensor_data(ctx->outputs[0]);
  if (mode == PAD_CONSTANT) bbi_copy_fill(out, esize, ctx->outputs[0]->numel, value);
  int64_t in_strides[BB_MAX_RANK], out_strides[BB_MAX_RANK], src = 0, dst = 0;
  bbi_copy_strides(in->rank, in->dims, (int64_t)esize, in_strides);
  bbi_copy_strides(in->rank, dims, (int64_t)esize, out_strides);
  for (int k = 0; k < in->rank; k++) {
    src += crop[k] * in_strides[k];
    dst += lead[k] * out_strides[k];
  }
  bbi_copy_strided(esize, in->rank, inner, (const char *)bb_tensor_data(in) + src, in_strides, out + dst, out_strides);
  if (mode != PAD_CONSTANT) pad_borders(mode, esize, in->rank, dims, lead, inner, out);
  return 0;
}
