/* ArgMax, ArgMin and Hardmax: the position of the best element along an axis; TopK: the
 * k best, in order. As in numpy (ONNX's reference), a NaN beats every number; ties go to
 * the first position (the last with select_last_index). */
#include <string.h>

#include "cpu/reduce.h"
#include "cpu/shape_args.h"
#include "util/mem.h"

static const int32_t ARG_TYPES[] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_BFLOAT16,
                                    BB_DTYPE_INT8,  BB_DTYPE_INT16,  BB_DTYPE_INT32,   BB_DTYPE_INT64,
                                    BB_DTYPE_UINT8, BB_DTYPE_UINT16, BB_DTYPE_UINT32,  BB_DTYPE_UINT64,
                                    BB_DTYPE_UNDEFINED};

typedef struct arg_rule {
  bool want_max, last;
} arg_rule;

static bool better_real(double x, double best, arg_rule r) {
  if (best != best) return r.last && x != x;
  if (x != x) return true;
  if (x == best) return r.last;
  return r.want_max ? x > best : x < best;
}

static bool better_int(int64_t x, int64_t best, arg_rule r) {
  if (x == best) return r.last;
  return r.want_max ? x > best : x < best;
}

static bool is_real(int32_t dtype) {
  return dtype == BB_DTYPE_FLOAT || dtype == BB_DTYPE_DOUBLE || dtype == BB_DTYPE_FLOAT16 ||
         dtype == BB_DTYPE_BFLOAT16;
}

/* An integer element as an int64 that orders like the value (uint64 has its top bit
 * flipped). */
static int64_t int_key(const bb_tensor *t, int64_t i) {
  int64_t v = bbi_cpu_get_i64(t, i);
  return t->dtype == BB_DTYPE_UINT64 ? (int64_t)((uint64_t)v ^ ((uint64_t)1 << 63)) : v;
}

static double real_key(const bb_tensor *t, int64_t i) {
  return t->dtype == BB_DTYPE_FLOAT ? ((const float *)bb_tensor_data(t))[i] : bbi_cpu_get_f64(t, i);
}

/* idx[o*inner + i] = the best position l along the middle axis of outer×len×inner (len >
 * 0). keys holds inner values of scratch (8 bytes each); whole rows are compared at once. */
static void arg_best(const bb_tensor *t, arg_rule r, int64_t outer, int64_t len, int64_t inner, int64_t *idx,
                     void *keys) {
  bool real = is_real(t->dtype);
  double *rk = keys;
  int64_t *ik = keys;
  for (int64_t o = 0; o < outer; o++, idx += inner) {
    int64_t base = o * len * inner;
    for (int64_t i = 0; i < inner; i++) {
      idx[i] = 0;
      if (real) rk[i] = real_key(t, base + i);
      else ik[i] = int_key(t, base + i);
    }
    for (int64_t l = 1; l < len; l++) {
      int64_t row = base + l * inner;
      for (int64_t i = 0; i < inner; i++) {
        if (real) {
          double v = real_key(t, row + i);
          if (better_real(v, rk[i], r)) {
            rk[i] = v;
            idx[i] = l;
          }
        } else {
          int64_t v = int_key(t, row + i);
          if (better_int(v, ik[i], r)) {
            ik[i] = v;
            idx[i] = l;
          }
        }
      }
    }
  }
}

static int run_arg(bbi_cpu_op_ctx *ctx, bool want_max) {
  const bb_tensor *in = ctx->inputs[0];
  int rc = bbi_cpu_expect_dtype(ctx, 0, ARG_TYPES);
  int axis;
  if (rc || (rc = bbi_cpu_axis(ctx, bb_attr_get_int(&ctx->node->attrs, "axis", 0), in->rank, &axis))) return rc;
  if (in->dims[axis] == 0) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "axis %d is empty", axis);
  bool keepdims = bb_attr_get_int(&ctx->node->attrs, "keepdims", 1) != 0;
  arg_rule r = {want_max, ctx->opset >= 12 && bb_attr_get_int(&ctx->node->attrs, "select_last_index", 0) != 0};
  int64_t dims[BB_MAX_RANK], outer = 1, inner = 1;
  int rank = 0;
  for (int k = 0; k < in->rank; k++) {
    if (k < axis) outer *= in->dims[k];
    if (k > axis) inner *= in->dims[k];
    if (k != axis || keepdims) dims[rank++] = k == axis ? 1 : in->dims[k];
  }
  if ((rc = bbi_cpu_make_output(ctx, 0, BB_DTYPE_INT64, rank, dims))) return rc;
  void *keys = bbi_mem_alloc(ctx->alloc, (size_t)inner * 8);
  if (!keys) return bbi_cpu_fail(ctx, BB_ERR_NOMEM, "cannot allocate %lld keys", (long long)inner);
  arg_best(in, r, outer, in->dims[axis], inner, bb_tensor_data(ctx->outputs[0]), keys);
  bbi_mem_free(ctx->alloc, keys);
  return 0;
}

int bbi_cpu_argmax(bbi_cpu_op_ctx *ctx) { return run_arg(ctx, true); }
int bbi_cpu_argmin(bbi_cpu_op_ctx *ctx) { return run_arg(ctx, false); }

int bbi_cpu_hardmax(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *in = ctx->inputs[0];
  int64_t outer, len, inner;
  int rc = bbi_cpu_softmax_layout(ctx, in, &outer, &len, &inner);
  if (rc || (rc = bbi_cpu_make_output(ctx, 0, in->dtype, in->rank, in->dims))) return rc;
  bb_tensor *out = ctx->outputs[0];
  memset(bb_tensor_data(out), 0, bb_tensor_nbytes(out)); /* 0.0 in every float type */
  if (out->numel == 0) return 0;
  size_t n = (size_t)(outer * inner);
  int64_t *idx = bbi_mem_alloc(ctx->alloc, n * sizeof *idx + (size_t)inner * 8);
  if (!idx) return bbi_cpu_fail(ctx, BB_ERR_NOMEM, "cannot allocate %zu indices", n);
  arg_best(in, (arg_rule){true, false}, outer, len, inner, idx, idx + n);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) bbi_cpu_set_f64(out, (o * len + idx[o * inner + i]) * inner + i, 1.0);
  bbi_mem_free(ctx->alloc, idx);
  return 0;
}

/* ---- TopK ------------------------------------------------------------------------------- */

typedef struct topk_keys {
  bool real, largest;
  const double *rk;
  const int64_t *ik;
} topk_keys;

/* Whether position a comes strictly before position b (NaN ranks above every number). */
static bool ranks_before(const topk_keys *k, int64_t a, int64_t b) {
  if (!k->real) return k->largest ? k->ik[a] > k->ik[b] : k->ik[a] < k->ik[b];
  double x = k->largest ? k->rk[a] : k->rk[b], y = k->largest ? k->rk[b] : k->rk[a];
  return (x != x && y == y) || x > y;
}

/* Stable bottom-up merge sort of order[0..n) by rank; tmp holds n more. */
static void sort_by_rank(const topk_keys *k, int64_t n, int64_t *order, int64_t *tmp) {
  int64_t *src = order, *dst = tmp;
  for (int64_t width = 1; width < n; width *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * width) {
      int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
      int64_t a = lo, b = mid, d = lo;
      while (a < mid && b < hi) dst[d++] = ranks_before(k, src[b], src[a]) ? src[b++] : src[a++];
      while (a < mid) dst[d++] = src[a++];
      while (b < hi) dst[d++] = src[b++];
    }
    int64_t *t = src;
    src = dst;
    dst = t;
  }
  if (src != order) memcpy(order, src, (size_t)n * sizeof *order);
}

int bbi_cpu_topk(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *in = ctx->inputs[0];
  int rc = bbi_cpu_expect_dtype(ctx, 0, ARG_TYPES);
  int axis;
  if (rc || (rc = bbi_cpu_axis(ctx, bb_attr_get_int(&ctx->node->attrs, "axis", -1), in->rank, &axis))) return rc;
  int64_t k = 0;
  long n = 1;
  if (ctx->opset >= 10) rc = bbi_cpu_int_list(ctx, "K", 1, true, &k, 1, &n);
  else k = bb_attr_get_int(&ctx->node->attrs, "k", -1);
  const int64_t len = in->dims[axis];
  if (rc) return rc;
  if (n != 1 || k < 0 || k > len)
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "k %lld is out of range for an axis of %lld", (long long)k,
                       (long long)len);
  topk_keys keys = {is_real(in->dtype), ctx->opset < 11 || bb_attr_get_int(&ctx->node->attrs, "largest", 1) != 0,
                    NULL, NULL};
  int64_t dims[BB_MAX_RANK], outer = 1, inner = 1;
  for (int d = 0; d < in->rank; d++) {
    dims[d] = d == axis ? k : in->dims[d];
    if (d < axis) outer *= in->dims[d];
    if (d > axis) inner *= in->dims[d];
  }
  if ((rc = bbi_cpu_make_output(ctx, 0, in->dtype, in->rank, dims)) ||
      (rc = bbi_cpu_make_output(ctx, 1, BB_DTYPE_INT64, in->rank, dims)))
    return rc;
  if (ctx->outputs[0]->numel == 0) return 0;
  /* scratch: len keys, the order and the merge buffer */
  int64_t *buf = bbi_mem_alloc(ctx->alloc, (size_t)len * 3 * 8);
  if (!buf) return bbi_cpu_fail(ctx, BB_ERR_NOMEM, "cannot allocate scratch for %lld elements", (long long)len);
  int64_t *order = buf + len, *tmp = order + len;
  keys.rk = (const double *)buf;
  keys.ik = buf;
  size_t esize = bb_dtype_size(in->dtype);
  const char *x = bb_tensor_data(in);
  char *values = bb_tensor_data(ctx->outputs[0]);
  int64_t *indices = bb_tensor_data(ctx->outputs[1]);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      for (int64_t l = 0; l < len; l++) {
        int64_t at = (o * len + l) * inner + i;
        if (keys.real) ((double *)buf)[l] = real_key(in, at);
        else buf[l] = int_key(in, at);
        order[l] = l;
      }
      sort_by_rank(&keys, len, order, tmp);
      for (int64_t j = 0; j < k; j++) {
        int64_t to = (o * k + j) * inner + i;
        memcpy(values + (size_t)to * esize, x + (size_t)((o * len + order[j]) * inner + i) * esize, esize);
        indices[to] = order[j];
      }
    }
  bbi_mem_free(ctx->alloc, buf);
  return 0;
}
