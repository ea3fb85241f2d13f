/* Softmax and LogSoftmax. float32 runs on the SIMD kernels: over contiguous rows when
 * the axis is innermost (or the input is coerced to 2-D), otherwise a whole row of the
 * outer×len×inner block at a time. float16, bfloat16 and double are computed in double. */
#include <math.h>

#include "cpu/reduce.h"
#include "tensor/kernels/split.h"
#include "util/mem.h"
#include "util/parallel.h"

static const int32_t SOFTMAX_TYPES[] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_BFLOAT16,
                                        BB_DTYPE_UNDEFINED};

int bbi_cpu_softmax_layout(bbi_cpu_op_ctx *ctx, const bb_tensor *in, int64_t *outer, int64_t *len, int64_t *inner) {
  int rc = bbi_cpu_expect_dtype(ctx, 0, SOFTMAX_TYPES);
  if (rc) return rc;
  bool coerce = ctx->opset < 13;
  int64_t a = bb_attr_get_int(&ctx->node->attrs, "axis", coerce ? 1 : -1);
  int axis;
  if (coerce && a == in->rank) axis = in->rank; /* [N, 1]: every row holds one element */
  else if ((rc = bbi_cpu_axis(ctx, a, in->rank, &axis))) return rc;
  *outer = *len = *inner = 1;
  for (int k = 0; k < in->rank; k++) {
    if (k < axis) *outer *= in->dims[k];
    else if (k == axis || coerce) *len *= in->dims[k];
    else *inner *= in->dims[k];
  }
  return 0;
}

/* float32 along the middle axis of one len×inner block, with inner floats of scratch in
 * m and s. */
static void f32_block(bool is_log, int64_t len, int64_t inner, const float *x, float *y, float *m, float *s) {
  size_t n = (size_t)len, k = (size_t)inner;
  bbi_f32_reduce_strided(BBI_REDUCE_MAX, 1, n, k, x, m);
  bbi_f32_vbinary_row(BBI_BINARY_SUB, n, k, x, m, 0, y);
  bbi_f32_vunary(BBI_UNARY_EXP, n * k, y, y);
  bbi_f32_reduce_strided(BBI_REDUCE_SUM, 1, n, k, y, s);
  if (!is_log) {
    bbi_f32_vbinary_row(BBI_BINARY_DIV, n, k, y, s, 0, y);
    return;
  }
  /* log-softmax: x - (m + log(s)) */
  for (size_t i = 0; i < k; i++) s[i] = m[i] + logf(s[i]);
  bbi_f32_vbinary_row(BBI_BINARY_SUB, n, k, x, s, 0, y);
}

/* double along the middle axis of one len×inner block, in place, with inner doubles of
 * scratch in m and s. */
static void f64_block(bool is_log, int64_t len, int64_t inner, double *x, double *m, double *s) {
  for (int64_t i = 0; i < inner; i++) {
    m[i] = -INFINITY;
    s[i] = 0.0;
  }
  for (int64_t l = 0; l < len; l++)
    for (int64_t i = 0; i < inner; i++)
      if (x[l * inner + i] > m[i] || x[l * inner + i] != x[l * inner + i]) m[i] = x[l * inner + i];
  for (int64_t l = 0; l < len; l++)
    for (int64_t i = 0; i < inner; i++) s[i] += exp(x[l * inner + i] - m[i]);
  for (int64_t i = 0; i < inner; i++) s[i] = is_log ? m[i] + log(s[i]) : s[i];
  for (int64_t l = 0; l < len; l++)
    for (int64_t i = 0; i < inner; i++) {
      double *v = &x[l * inner + i];
      *v = is_log ? *v - s[i] : exp(*v - m[i]) / s[i];
    }
}

/* float32 blocks side by side on the pool: each participant has its own m and s. */
typedef struct f32_blocks {
  bool is_log;
  int64_t outer, len, inner, per_task;
  const float *x;
  float *y, *scratch; /* 2 * inner floats per slot */
} f32_blocks;

static void f32_blocks_task(void *ctx, size_t task, size_t slot) {
  const f32_blocks *j = ctx;
  float *m = j->scratch + 2 * (size_t)j->inner * slot, *s = m + j->inner;
  const int64_t o0 = (int64_t)task * j->per_task, o1 = o0 + j->per_task < j->outer ? o0 + j->per_task : j->outer;
  const int64_t block = j->len * j->inner;
  for (int64_t o = o0; o < o1; o++) f32_block(j->is_log, j->len, j->inner, j->x + o * block, j->y + o * block, m, s);
}

static int run(bbi_cpu_op_ctx *ctx, bool is_log) {
  const bb_tensor *in = ctx->inputs[0];
  int64_t outer, len, inner;
  int rc = bbi_cpu_softmax_layout(ctx, in, &outer, &len, &inner);
  if (rc || (rc = bbi_cpu_make_output(ctx, 0, in->dtype, in->rank, in->dims))) return rc;
  bb_tensor *out = ctx->outputs[0];
  if (out->numel == 0) return 0;
  const float *x = bb_tensor_data(in);
  float *y = bb_tensor_data(out);
  if (in->dtype == BB_DTYPE_FLOAT && inner == 1) {
    if (is_log) bbi_par_f32_log_softmax_rows((size_t)outer, (size_t)len, x, y);
    else bbi_par_f32_softmax_rows((size_t)outer, (size_t)len, x, y);
    return 0;
  }
  size_t esize = in->dtype == BB_DTYPE_FLOAT ? sizeof(float) : sizeof(double);
  /* scratch: m and s (per participant for float32), plus the whole input in double for the other types */
  const size_t width = in->dtype == BB_DTYPE_FLOAT ? bbi_parallel_width() : 1;
  size_t n_scratch = 2 * (size_t)inner * width + (in->dtype == BB_DTYPE_FLOAT ? 0 : (size_t)in->numel);
  void *buf = bbi_mem_alloc(ctx->alloc, n_scratch * esize);
  if (!buf) return bbi_cpu_fail(ctx, BB_ERR_NOMEM, "cannot allocate %zu bytes of scratch", n_scratch * esize);
  if (in->dtype == BB_DTYPE_FLOAT) {
    int64_t per_task = (int64_t)bbi_par_grain((size_t)(len * inner));
    while ((outer + per_task - 1) / per_task > BBI_PARALLEL_MAX_TASKS) per_task *= 2;
    f32_blocks j = {is_log, outer, len, inner, per_task, x, y, buf};
    bbi_parallel_run((size_t)((outer + per_task - 1) / per_task), width, f32_blocks_task, &j);
  } else {
    double *m = buf, *s = m + inner, *v = s + inner;
    for (int64_t i = 0; i < in->numel; i++) v[i] = bbi_cpu_get_f64(in, i);
    for (int64_t o = 0; o < outer; o++) f64_block(is_log, len, inner, v + o * len * inner, m, s);
    for (int64_t i = 0; i < in->numel; i++) bbi_cpu_set_f64(out, i, v[i]);
  }
  bbi_mem_free(ctx->alloc, buf);
  return 0;
}

int bbi_cpu_softmax(bbi_cpu_op_ctx *ctx) { return run(ctx, false); }
int bbi_cpu_log_softmax(bbi_cpu_op_ctx *ctx) { return run(ctx, true); }
