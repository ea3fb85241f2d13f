/* Helpers every CPU operator uses: errors that name the node, dtype checks, outputs,
 * small integer inputs, axes and type-generic element access. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cpu/cpu_op.h"

int bbi_cpu_fail(bbi_cpu_op_ctx *ctx, int code, const char *fmt, ...) {
  if (!ctx->err) return code;
  char msg[BB_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const bb_ir_node *n = ctx->node;
  return bb_error_set(ctx->err, code, "node %s (%s): %s", n->name && *n->name ? n->name : "(unnamed)",
                      n->op_type ? n->op_type : "?", msg);
}

int bbi_cpu_expect_dtype(bbi_cpu_op_ctx *ctx, size_t i, const int32_t *allowed) {
  const bb_tensor *t = bbi_cpu_input(ctx, i);
  if (!t) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "input %zu is missing", i);
  for (const int32_t *a = allowed; *a != BB_DTYPE_UNDEFINED; a++)
    if (*a == t->dtype) return 0;
  const char *name = bb_dtype_name(t->dtype);
  return bbi_cpu_fail(ctx, BB_ERR_TYPE, "input %zu has element type %s, which this op does not take", i,
                     name ? name : "unknown");
}

bool bbi_cpu_output_wanted(const bbi_cpu_op_ctx *ctx, size_t i) {
  const bb_strlist *outs = &ctx->node->outputs;
  return i < ctx->n_outputs && i < outs->len && outs->items[i] && *outs->items[i];
}

int bbi_cpu_check_size(bbi_cpu_op_ctx *ctx, int64_t count, size_t elem_size, const char *what) {
  uint64_t bytes;
  if (count < 0 || __builtin_mul_overflow((uint64_t)count, (uint64_t)elem_size, &bytes))
    return bbi_cpu_fail(ctx, BB_ERR_LIMIT, "%s would take more bytes than 64 bits can count", what);
  if (bytes > ctx->max_output_bytes)
    return bbi_cpu_fail(ctx, BB_ERR_LIMIT, "%s would take %llu bytes, over the %zu-byte cap on one value "
                       "(bb_cpu_limits.max_output_bytes)", what, (unsigned long long)bytes, ctx->max_output_bytes);
  return 0;
}

int bbi_cpu_make_output(bbi_cpu_op_ctx *ctx, size_t i, int32_t dtype, int rank, const int64_t *dims) {
  if (i >= ctx->n_outputs) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "output %zu is not declared", i);
  /* the size is checked before anything is allocated; a negative dim or a rank over the
   * limit is left to the allocation below, which refuses it */
  int64_t numel = 1;
  bool overflow = false;
  for (int k = 0; k < rank && k < BB_MAX_RANK; k++)
    if (dims[k] >= 0) overflow |= __builtin_mul_overflow(numel, dims[k], &numel);
  uint64_t bytes;
  if (overflow || __builtin_mul_overflow((uint64_t)numel, (uint64_t)bb_dtype_size(dtype), &bytes) ||
      bytes > ctx->max_output_bytes) { /* named with its shape only when refused */
    char what[160];
    int at = snprintf(what, sizeof what, "output %zu (%s [", i, bb_dtype_name(dtype) ? bb_dtype_name(dtype) : "?");
    for (int k = 0; k < rank && k < BB_MAX_RANK && at < (int)sizeof what - 24; k++)
      at += snprintf(what + at, sizeof what - (size_t)at, "%s%lld", k ? ", " : "", (long long)dims[k]);
    snprintf(what + at, sizeof what - (size_t)at, "])");
    return bbi_cpu_check_size(ctx, overflow ? -1 : numel, bb_dtype_size(dtype), what);
  }
  bb_tensor *t = bb_tensor_new_empty(ctx->alloc, dtype, rank, dims);
  if (!t) {
    if (rank > BB_MAX_RANK) return bbi_cpu_fail(ctx, BB_ERR_UNSUPPORTED, "output rank %d is over %d", rank, BB_MAX_RANK);
    return bbi_cpu_fail(ctx, BB_ERR_NOMEM, "cannot allocate output %zu", i);
  }
  bb_tensor_release(ctx->outputs[i]);
  ctx->outputs[i] = t;
  return 0;
}

long bbi_cpu_read_ints(bbi_cpu_op_ctx *ctx, const bb_tensor *t, int64_t *values, size_t max, const char *what) {
  if (!t) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "%s is missing", what);
  if (t->dtype != BB_DTYPE_INT64 && t->dtype != BB_DTYPE_INT32)
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "%s must be int64 or int32", what);
  if (t->rank > 1) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "%s must be 1-D (rank %d)", what, t->rank);
  if ((uint64_t)t->numel > max) return bbi_cpu_fail(ctx, BB_ERR_LIMIT, "%s has %lld values, over %zu", what,
                                                  (long long)t->numel, max);
  for (int64_t i = 0; i < t->numel; i++) values[i] = bbi_cpu_get_i64(t, i);
  return (long)t->numel;
}

int bbi_cpu_axis(bbi_cpu_op_ctx *ctx, int64_t axis, int rank, int *out) {
  if (axis < -(int64_t)rank || axis >= rank)
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "axis %lld is out of range for rank %d", (long long)axis, rank);
  *out = (int)(axis < 0 ? axis + rank : axis);
  return 0;
}

/* ---- type-generic element access --------------------------------------------------------- */

double bbi_cpu_get_f64(const bb_tensor *t, int64_t i) {
  const void *d = bb_tensor_data(t);
  switch (t->dtype) {
  case BB_DTYPE_FLOAT: return ((const float *)d)[i];
  case BB_DTYPE_DOUBLE: return ((const double *)d)[i];
  case BB_DTYPE_FLOAT16: return bb_f16_to_f32(((const uint16_t *)d)[i]);
  case BB_DTYPE_BFLOAT16: return bb_bf16_to_f32(((const uint16_t *)d)[i]);
  case BB_DTYPE_INT8: return ((const int8_t *)d)[i];
  case BB_DTYPE_UINT8: return ((const uint8_t *)d)[i];
  case BB_DTYPE_INT16: return ((const int16_t *)d)[i];
  case BB_DTYPE_UINT16: return ((const uint16_t *)d)[i];
  case BB_DTYPE_INT32: return ((const int32_t *)d)[i];
  case BB_DTYPE_UINT32: return ((const uint32_t *)d)[i];
  case BB_DTYPE_INT64: return (double)((const int64_t *)d)[i];
  case BB_DTYPE_UINT64: return (double)((const uint64_t *)d)[i];
  case BB_DTYPE_BOOL: return ((const uint8_t *)d)[i] ? 1.0 : 0.0;
  default: return 0.0;
  }
}

int64_t bbi_cpu_get_i64(const bb_tensor *t, int64_t i) {
  const void *d = bb_tensor_data(t);
  switch (t->dtype) {
  case BB_DTYPE_INT8: return ((const int8_t *)d)[i];
  case BB_DTYPE_UINT8: return ((const uint8_t *)d)[i];
  case BB_DTYPE_INT16: return ((const int16_t *)d)[i];
  case BB_DTYPE_UINT16: return ((const uint16_t *)d)[i];
  case BB_DTYPE_INT32: return ((const int32_t *)d)[i];
  case BB_DTYPE_UINT32: return ((const uint32_t *)d)[i];
  case BB_DTYPE_INT64: return ((const int64_t *)d)[i];
  case BB_DTYPE_UINT64: return (int64_t)((const uint64_t *)d)[i];
  case BB_DTYPE_BOOL: return ((const uint8_t *)d)[i] != 0;
  default: {
    double v = bbi_cpu_get_f64(t, i);
    if (v != v) return 0;
    if (v >= 9.2233720368547758e18) return INT64_MAX;
    if (v <= -9.2233720368547758e18) return INT64_MIN;
    return (int64_t)v;
  }
  }
}

void bbi_cpu_set_f64(bb_tensor *t, int64_t i, double v) {
  void *d = bb_tensor_data(t);
  switch (t->dtype) {
  case BB_DTYPE_FLOAT: ((float *)d)[i] = (float)v; break;
  case BB_DTYPE_DOUBLE: ((double *)d)[i] = v; break;
  case BB_DTYPE_FLOAT16: ((uint16_t *)d)[i] = bb_f32_to_f16((float)v); break;
  case BB_DTYPE_BFLOAT16: ((uint16_t *)d)[i] = bb_f32_to_bf16((float)v); break;
  case BB_DTYPE_BOOL: ((uint8_t *)d)[i] = v != 0.0; break;
  case BB_DTYPE_INT8: case BB_DTYPE_UINT8: case BB_DTYPE_INT16: case BB_DTYPE_UINT16:
  case BB_DTYPE_INT32: case BB_DTYPE_UINT32: case BB_DTYPE_INT64: case BB_DTYPE_UINT64: {
    /* float → integer: truncate toward zero, saturating out-of-range values and NaN → 0 */
    int64_t x = v != v ? 0 : v >= 9.2233720368547758e18 ? INT64_MAX : v <= -9.2233720368547758e18 ? INT64_MIN
                                                                                                  : (int64_t)v;
    bbi_cpu_set_i64(t, i, x);
    break;
  }
  default: break; /* no element access for this type */
  }
}

void bbi_cpu_set_i64(bb_tensor *t, int64_t i, int64_t v) {
  void *d = bb_tensor_data(t);
  switch (t->dtype) {
  case BB_DTYPE_INT8: ((int8_t *)d)[i] = (int8_t)v; break;
  case BB_DTYPE_UINT8: ((uint8_t *)d)[i] = (uint8_t)v; break;
  case BB_DTYPE_INT16: ((int16_t *)d)[i] = (int16_t)v; break;
  case BB_DTYPE_UINT16: ((uint16_t *)d)[i] = (uint16_t)v; break;
  case BB_DTYPE_INT32: ((int32_t *)d)[i] = (int32_t)v; break;
  case BB_DTYPE_UINT32: ((uint32_t *)d)[i] = (uint32_t)v; break;
  case BB_DTYPE_INT64: ((int64_t *)d)[i] = v; break;
  case BB_DTYPE_UINT64: ((uint64_t *)d)[i] = (uint64_t)v; break;
  case BB_DTYPE_BOOL: ((uint8_t *)d)[i] = v != 0; break;
  case BB_DTYPE_FLOAT: case BB_DTYPE_DOUBLE: case BB_DTYPE_FLOAT16: case BB_DTYPE_BFLOAT16:
    bbi_cpu_set_f64(t, i, (double)v);
    break;
  default: break; /* no element access for this type */
  }
}

/* Index into t of element i of a tensor with shape (rank, dims), t broadcasting to that
 * shape unidirectionally (t's dims right-aligned, each 1 or equal). */
int64_t bbi_cpu_broadcast_index(const bb_tensor *t, int rank, const int64_t *dims, int64_t i) {
  int64_t idx = 0, stride = 1;
  for (int d = rank - 1, td = t->rank - 1; d >= 0 && td >= 0; d--, td--) {
    int64_t c = i % dims[d];
    i /= dims[d];
    if (t->dims[td] != 1) idx += c * stride;
    stride *= t->dims[td];
  }
  return idx;
}

int bbi_cpu_check_unidirectional(bbi_cpu_op_ctx *ctx, const bb_tensor *t, const bb_tensor *x, const char *what) {
  if (t->rank > x->rank) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "%s has rank %d, over X's %d", what, t->rank, x->rank);
  for (int d = 0; d < t->rank; d++) {
    int64_t td = t->dims[t->rank - 1 - d], xd = x->dims[x->rank - 1 - d];
    if (td != 1 && td != xd)
      return bbi_cpu_fail(ctx, BB_ERR_TYPE, "%s does not broadcast to X (dim %lld against %lld)", what, (long long)td,
                         (long long)xd);
  }
  return 0;
}
