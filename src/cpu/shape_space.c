/* CPU operators that move blocks between depth and space: DepthToSpace and SpaceToDepth
 * on [N, C, H, W]. Each is a single strided copy over a rank-6 box: the output walked in
 * order, split into (batch, channel, row block, row in block, column block, column in
 * block) in whichever order the mode lays those out. */
#include <string.h>

#include "cpu/shape_args.h"
#include "cpu/shape_copy.h"
#include "cpu/shape.h"

/* Input 0 as [N, C, H, W] with its byte strides, and the blocksize. */
static int space_args(bbi_cpu_op_ctx *ctx, size_t *esize, int64_t *strides, int64_t *b) {
  const bb_tensor *in = ctx->inputs[0];
  int rc = bbi_cpu_elem_size(ctx, 0, esize);
  if (rc) return rc;
  if (in->rank != 4) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "input must have rank 4, not %d", in->rank);
  *b = bb_attr_get_int(&ctx->node->attrs, "blocksize", 0);
  if (*b <= 0) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "blocksize must be positive");
  bbi_copy_strides(4, in->dims, (int64_t)*esize, strides);
  return 0;
}

int bbi_cpu_depth_to_space(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *in = ctx->inputs[0];
  size_t esize;
  int64_t s[4], b = 0;
  int rc = space_args(ctx, &esize, s, &b);
  if (rc) return rc;
  const char *mode = ctx->opset >= 11 ? bb_attr_get_string(&ctx->node->attrs, "mode", "DCR") : "DCR";
  bool dcr = strcmp(mode, "DCR") == 0;
  if (!dcr && strcmp(mode, "CRD") != 0) return bbi_cpu_fail(ctx, BB_ERR_UNSUPPORTED, "mode %s is not supported", mode);
  const int64_t n = in->dims[0], h = in->dims[2], w = in->dims[3];
  if (in->dims[1] % (b * b))
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "%lld channels do not divide into blocks of %lld",
                       (long long)in->dims[1], (long long)(b * b));
  const int64_t c = in->dims[1] / (b * b), dims[4] = {n, c, h * b, w * b};
  if ((rc = bbi_cpu_make_output(ctx, 0, in->dtype, 4, dims))) return rc;
  /* output (n, c, h, i, w, j) reads channel (i*b + j)*c + cc (DCR) or cc*b*b + i*b + j (CRD) */
  const int64_t box[6] = {n, c, h, b, w, b};
  const int64_t src[6] = {s[0], dcr ? s[1] : b * b * s[1], s[2], dcr ? b * c * s[1] : b * s[1], s[3],
                          dcr ? c * s[1] : s[1]};
  int64_t dst[6];
  bbi_copy_strides(6, box, (int64_t)esize, dst);
  bbi_copy_strided(esize, 6, box, bb_tensor_data(in), src, bb_tensor_data(ctx->outputs[0]), dst);
  return 0;
}

int bbi_cpu_space_to_depth(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *in = ctx->inputs[0];
  size_t esize;
  int64_t s[4], b = 0;
  int rc = space_args(ctx, &esize, s, &b);
  if (rc) return rc;
  const int64_t n = in->dims[0], c = in->dims[1];
  if (in->dims[2] % b || in->dims[3] % b)
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "%lldx%lld does not divide into blocks of %lld",
                       (long long)in->dims[2], (long long)in->dims[3], (long long)b);
  const int64_t h = in->dims[2] / b, w = in->dims[3] / b, dims[4] = {n, c * b * b, h, w};
  if ((rc = bbi_cpu_make_output(ctx, 0, in->dtype, 4, dims))) return rc;
  /* output channel (i*b + j)*c + cc holds input (cc, h*b + i, w*b + j) */
  const int64_t box[6] = {n, b, b, c, h, w};
  const int64_t src[6] = {s[0], s[2], s[3], s[1], b * s[2], b * s[3]};
  int64_t dst[6];
  bbi_copy_strides(6, box, (int64_t)esize, dst);
  bbi_copy_strided(esize, 6, box, bb_tensor_data(in), src, bb_tensor_data(ctx->outputs[0]), dst);
  return 0;
}
