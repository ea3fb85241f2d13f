/* CPU operators of the ai.bytesandbrains.grad domain: what training graphs need and ONNX
 * lacks (docs/GRAD.md states their semantics).
 *
 * Dropout(data, ratio?, seed) -> (output, mask?): a seeded training-mode dropout. Element i
 * of a node with attribute `stream` s is kept when u(seed, s, i) >= ratio, where
 *   key = mix(seed + G * (s + 1)),  u = (mix(key + G * (i + 1)) >> 40) / 2^24,
 * G = 0x9e3779b97f4a7c15 and mix is splitmix64's finaliser (all arithmetic mod 2^64);
 * kept elements are scaled by 1 / (1 - ratio) (inverted dropout), dropped ones are 0.
 * ratio defaults to 0.5 and must lie in [0, 1).
 *
 * SumToShape(data, shape) -> output: data summed down to `shape`, which must broadcast
 * to data's shape (ONNX's unidirectional rule); the adjoint of Expand.
 *
 * RNNGrad, GRUGrad, LSTMGrad: the backward passes of the recurrent operators
 * (recurrent_grad.c). */
#include <string.h>

#include "cpu/cpu_op.h"
#include "cpu/recurrent.h"

static const int32_t FLOAT_TYPES[] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_BFLOAT16,
                                      BB_DTYPE_UNDEFINED};

#define GOLDEN 0x9e3779b97f4a7c15u

static uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

static int op_dropout(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *x = ctx->inputs[0], *ratio_t = bbi_cpu_input(ctx, 1), *seed_t = bbi_cpu_input(ctx, 2);
  int rc = bbi_cpu_expect_dtype(ctx, 0, FLOAT_TYPES);
  if (rc) return rc;
  if (!seed_t || seed_t->dtype != BB_DTYPE_INT64 || seed_t->numel != 1)
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "seed (input 2) must be one int64");
  double ratio = 0.5;
  if (ratio_t) {
    if (ratio_t->numel != 1 || (rc = bbi_cpu_expect_dtype(ctx, 1, FLOAT_TYPES)))
      return rc ? rc : bbi_cpu_fail(ctx, BB_ERR_TYPE, "ratio must be one floating-point value");
    ratio = bbi_cpu_get_f64(ratio_t, 0);
  }
  if (!(ratio >= 0 && ratio < 1)) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "ratio %g is outside [0, 1)", ratio);
  if ((rc = bbi_cpu_make_output(ctx, 0, x->dtype, x->rank, x->dims))) return rc;
  bb_tensor *mask = NULL;
  if (bbi_cpu_output_wanted(ctx, 1)) {
    if ((rc = bbi_cpu_make_output(ctx, 1, BB_DTYPE_BOOL, x->rank, x->dims))) return rc;
    mask = ctx->outputs[1];
  }
  uint64_t seed = (uint64_t)bbi_cpu_get_i64(seed_t, 0), stream = (uint64_t)bb_attr_get_int(&ctx->node->attrs, "stream", 0);
  uint64_t key = mix(seed + GOLDEN * (stream + 1));
  /* the threshold in the 24-bit units u is drawn in: kept when bits >= ratio * 2^24 */
  double threshold = ratio * 16777216.0;
  bb_tensor *y = ctx->outputs[0];
  float scale_f = (float)(1.0 / (1.0 - ratio));
  double scale = 1.0 / (1.0 - ratio);
  for (int64_t i = 0; i < x->numel; i++) {
    uint64_t bits = mix(key + GOLDEN * ((uint64_t)i + 1)) >> 40;
    bool keep = (double)bits >= threshold;
    if (mask) ((uint8_t *)bb_tensor_data(mask))[i] = keep;
    if (x->dtype == BB_DTYPE_FLOAT) /* one float multiply, as the float kernels of other frameworks do */
      ((float *)bb_tensor_data(y))[i] = keep ? ((const float *)bb_tensor_data(x))[i] * scale_f : 0.0f;
    else
      bbi_cpu_set_f64(y, i, keep ? bbi_cpu_get_f64(x, i) * scale : 0.0);
  }
  return 0;
}

static int op_sum_to_shape(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *x = ctx->inputs[0];
  int rc = bbi_cpu_expect_dtype(ctx, 0, FLOAT_TYPES);
  if (rc) return rc;
  int64_t dims[BB_MAX_RANK];
  long rank = bbi_cpu_read_ints(ctx, ctx->inputs[1], dims, BB_MAX_RANK, "shape");
  if (rank < 0) return (int)rank;
  if (rank > x->rank) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "shape has rank %ld, over the data's %d", rank, x->rank);
  int lead = x->rank - (int)rank;
  for (long d = 0; d < rank; d++)
    if (dims[d] != 1 && dims[d] != x->dims[lead + d])
      return bbi_cpu_fail(ctx, BB_ERR_TYPE, "shape dim %ld (%lld) does not broadcast to the data's %lld", d,
                         (long long)dims[d], (long long)x->dims[lead + d]);
  if ((rc = bbi_cpu_make_output(ctx, 0, x->dtype, (int)rank, dims))) return rc;
  bb_tensor *y = ctx->outputs[0];
  double *acc = ctx->alloc->malloc((size_t)(y->numel ? y->numel : 1) * sizeof *acc, ctx->alloc->user_data);
  if (!acc) return bbi_cpu_fail(ctx, BB_ERR_NOMEM, "no memory for the sums");
  memset(acc, 0, (size_t)y->numel * sizeof *acc);
  for (int64_t i = 0; i < x->numel; i++) {
    int64_t rest = i, target = 0, stride = 1;
    for (int d = x->rank - 1; d >= lead; d--) { /* x's coordinate in each kept dim, 0 in a summed one */
      int64_t c = rest % x->dims[d];
      rest /= x->dims[d];
      if (dims[d - lead] != 1) target += c * stride;
      stride *= dims[d - lead];
    }
    acc[target] += bbi_cpu_get_f64(x, i);
  }
  for (int64_t i = 0; i < y->numel; i++) bbi_cpu_set_f64(y, i, acc[i]);
  ctx->alloc->free(acc, ctx->alloc->user_data);
  return 0;
}

/* in alphabetical order (bb_cpu_grad_op_name lists them so) */
const bbi_cpu_op bbi_cpu_ops_grad[] = {
    {"Dropout", 1, 1, 3, 1, 2, "float,double,float16,bfloat16", op_dropout},
    {"GRUGrad", 1, 3, 8, 1, 5, "float", bbi_cpu_op_recurrent_grad},
    {"LSTMGrad", 1, 3, 11, 1, 7, "float", bbi_cpu_op_recurrent_grad},
    {"RNNGrad", 1, 3, 8, 1, 5, "float", bbi_cpu_op_recurrent_grad},
    {"SumToShape", 1, 2, 2, 1, 1, "float,double,float16,bfloat16", op_sum_to_shape},
};
const size_t bbi_cpu_ops_grad_count = sizeof bbi_cpu_ops_grad / sizeof bbi_cpu_ops_grad[0];
