/* CumSum: running sums along an axis, inclusive or exclusive, forwards or reversed. The
 * outer×len×inner block is walked a whole row of inner elements at a time into a row of
 * accumulators: float for float32 (as numpy sums it), double for the other real types,
 * wrapping int64 for integers. */
#include "cpu/reduce.h"
#include "cpu/shape_args.h"
#include "util/mem.h"

static const int32_t CUMSUM_TYPES[] = {BB_DTYPE_FLOAT,  BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_BFLOAT16,
                                       BB_DTYPE_INT32,  BB_DTYPE_INT64,  BB_DTYPE_UINT32,  BB_DTYPE_UINT64,
                                       BB_DTYPE_UNDEFINED};

typedef struct scan {
  int64_t outer, len, inner;
  bool exclusive, reverse;
} scan;

/* Flat index of element i of the step-th row visited in block o. */
static int64_t scan_at(const scan *s, int64_t o, int64_t step, int64_t i) {
  int64_t l = s->reverse ? s->len - 1 - step : step;
  return (o * s->len + l) * s->inner + i;
}

static void cumsum_f32(const scan *s, const float *x, float *y, float *acc) {
  for (int64_t o = 0; o < s->outer; o++) {
    for (int64_t i = 0; i < s->inner; i++) acc[i] = 0.0f;
    for (int64_t step = 0; step < s->len; step++) {
      const int64_t row = scan_at(s, o, step, 0);
      for (int64_t i = 0; i < s->inner; i++) {
        float v = x[row + i];
        if (!s->exclusive) acc[i] += v;
        y[row + i] = acc[i];
        if (s->exclusive) acc[i] += v;
      }
    }
  }
}

static void cumsum_real(const scan *s, const bb_tensor *x, bb_tensor *y, double *acc) {
  for (int64_t o = 0; o < s->outer; o++) {
    for (int64_t i = 0; i < s->inner; i++) acc[i] = 0.0;
    for (int64_t step = 0; step < s->len; step++)
      for (int64_t i = 0; i < s->inner; i++) {
        const int64_t at = scan_at(s, o, step, i);
        double v = bbi_cpu_get_f64(x, at);
        if (!s->exclusive) acc[i] += v;
        bbi_cpu_set_f64(y, at, acc[i]);
        if (s->exclusive) acc[i] += v;
      }
  }
}

static void cumsum_int(const scan *s, const bb_tensor *x, bb_tensor *y, uint64_t *acc) {
  for (int64_t o = 0; o < s->outer; o++) {
    for (int64_t i = 0; i < s->inner; i++) acc[i] = 0;
    for (int64_t step = 0; step < s->len; step++)
      for (int64_t i = 0; i < s->inner; i++) {
        const int64_t at = scan_at(s, o, step, i);
        uint64_t v = (uint64_t)bbi_cpu_get_i64(x, at);
        if (!s->exclusive) acc[i] += v;
        bbi_cpu_set_i64(y, at, (int64_t)acc[i]);
        if (s->exclusive) acc[i] += v;
      }
  }
}

int bbi_cpu_cumsum(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *in = ctx->inputs[0];
  int rc = bbi_cpu_expect_dtype(ctx, 0, CUMSUM_TYPES);
  int64_t a;
  long n;
  int axis;
  if (rc || (rc = bbi_cpu_int_list(ctx, "axis", 1, true, &a, 1, &n))) return rc;
  if (n != 1) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "axis must be one value");
  if ((rc = bbi_cpu_axis(ctx, a, in->rank, &axis))) return rc;
  scan s = {1, in->dims[axis], 1, bb_attr_get_int(&ctx->node->attrs, "exclusive", 0) != 0,
            bb_attr_get_int(&ctx->node->attrs, "reverse", 0) != 0};
  for (int k = 0; k < in->rank; k++) {
    if (k < axis) s.outer *= in->dims[k];
    if (k > axis) s.inner *= in->dims[k];
  }
  if ((rc = bbi_cpu_make_output(ctx, 0, in->dtype, in->rank, in->dims))) return rc;
  bb_tensor *out = ctx->outputs[0];
  void *acc = bbi_mem_alloc(ctx->alloc, (size_t)s.inner * 8);
  if (!acc) return bbi_cpu_fail(ctx, BB_ERR_NOMEM, "cannot allocate %lld accumulators", (long long)s.inner);
  if (in->dtype == BB_DTYPE_FLOAT) cumsum_f32(&s, bb_tensor_data(in), bb_tensor_data(out), acc);
  else if (in->dtype == BB_DTYPE_DOUBLE || in->dtype == BB_DTYPE_FLOAT16 || in->dtype == BB_DTYPE_BFLOAT16)
    cumsum_real(&s, in, out, acc);
  else cumsum_int(&s, in, out, acc);
  bbi_mem_free(ctx->alloc, acc);
  return 0;
}
