/* CPU operators: reduce family. This file holds the family's table and the Reduce*
 * operators; ArgMax/ArgMin/Hardmax/TopK are in reduce_arg.c, Softmax/LogSoftmax in
 * reduce_softmax.c, CumSum in reduce_scan.c.
 *
 * A reduction is planned on the input shape with size-1 axes dropped and neighbouring
 * axes of the same kind (reduced or kept) merged, e.g. [K0, R0, K1, R1]. It then runs as
 * one pass per reduced group, last group first, each an outer×len×inner block reduction
 * (reduce_block.c): the common single-group case is one pass straight into the output,
 * over contiguous rows when the group is innermost. Every operator is a first pass, the
 * passes after it and a final elementwise step, which is exact because each is
 * associative over groups: L2 is a sum of squares then sums then sqrt, LogSumExp is
 * LogSumExp of LogSumExps, and Mean is sums divided once by the reduced count. */
#include <math.h>

#include "cpu/reduce_block.h"
#include "cpu/reduce.h"
#include "cpu/shape_args.h"
#include "util/mem.h"

typedef enum finish { FINISH_NONE, FINISH_MEAN, FINISH_SQRT, FINISH_LOG } finish;

typedef struct reduce_def {
  bbi_rblock_op first, rest;
  finish fin;
  int axes_input_since; /* the opset from which axes is an input, not an attribute */
  const int32_t *types;
} reduce_def;

typedef enum accumulator { ACC_F32, ACC_F64, ACC_I64 } accumulator;

typedef struct plan {
  int n; /* groups of merged axes, outermost first */
  int64_t size[BB_MAX_RANK + 1];
  bool reduced[BB_MAX_RANK + 1];
  int64_t count; /* input elements per output element */
} plan;

static void make_plan(const bb_tensor *in, const bool *mask, plan *p) {
  p->n = 0;
  p->count = 1;
  bool any = false;
  for (int k = 0; k < in->rank; k++) {
    if (mask[k]) p->count *= in->dims[k];
    if (in->dims[k] == 1) continue;
    if (p->n && p->reduced[p->n - 1] == mask[k]) {
      p->size[p->n - 1] *= in->dims[k];
    } else {
      p->size[p->n] = in->dims[k];
      p->reduced[p->n++] = mask[k];
    }
    any |= mask[k];
  }
  if (!any) { /* nothing left to reduce: one pass over groups of one still applies the op */
    p->size[p->n] = 1;
    p->reduced[p->n++] = true;
  }
}

static bool has_reduced(const plan *p) {
  for (int g = 0; g < p->n; g++)
    if (p->reduced[g]) return true;
  return false;
}

/* Takes the last reduced group out of the plan as an outer×len×inner block. */
static bool next_pass(plan *p, int64_t *outer, int64_t *len, int64_t *inner) {
  int g = p->n - 1;
  while (g >= 0 && !p->reduced[g]) g--;
  if (g < 0) return false;
  *outer = *inner = 1;
  for (int k = 0; k < g; k++) *outer *= p->size[k];
  for (int k = g + 1; k < p->n; k++) *inner *= p->size[k];
  *len = p->size[g];
  for (int k = g + 1; k < p->n; k++) {
    p->size[k - 1] = p->size[k];
    p->reduced[k - 1] = p->reduced[k];
  }
  p->n--;
  return true;
}

static void *scratch(bbi_cpu_op_ctx *ctx, size_t bytes) {
  void *p = bbi_mem_alloc(ctx->alloc, bytes);
  if (!p) bbi_cpu_fail(ctx, BB_ERR_NOMEM, "cannot allocate %zu bytes of scratch", bytes);
  return p;
}

static void release(bbi_cpu_op_ctx *ctx, void *p) { bbi_mem_free(ctx->alloc, p); }

static void run_pass(accumulator acc, bbi_rblock_op op, bool is_unsigned, int64_t outer, int64_t len, int64_t inner,
                     const void *x, void *y) {
  switch (acc) {
  case ACC_F32: bbi_rblock_f32(op, outer, len, inner, x, y); break;
  case ACC_F64: bbi_rblock_f64(op, outer, len, inner, x, y); break;
  case ACC_I64: bbi_rblock_i64(op, is_unsigned, outer, len, inner, x, y); break;
  }
}

/* Stores the reduced values into out, applying the final step. For float the values are
 * already in out. */
static void finish_values(accumulator acc, finish fin, bool is_unsigned, int64_t count, const void *vals,
                          bb_tensor *out) {
  int64_t n = out->numel;
  if (acc == ACC_F32) {
    float *y = bb_tensor_data(out);
    for (int64_t i = 0; i < n && fin != FINISH_NONE; i++)
      y[i] = fin == FINISH_MEAN ? y[i] / (float)count : fin == FINISH_SQRT ? sqrtf(y[i]) : logf(y[i]);
  } else if (acc == ACC_F64) {
    const double *y = vals;
    for (int64_t i = 0; i < n; i++) {
      double v = fin == FINISH_MEAN ? y[i] / (double)count : fin == FINISH_SQRT ? sqrt(y[i])
                                                         : fin == FINISH_LOG   ? log(y[i])
                                                                               : y[i];
      bbi_cpu_set_f64(out, i, v);
    }
  } else {
    const int64_t *y = vals;
    for (int64_t i = 0; i < n; i++) {
      double real = is_unsigned ? (double)(uint64_t)y[i] : (double)y[i];
      if (fin == FINISH_SQRT) bbi_cpu_set_f64(out, i, sqrt(real));
      else if (fin == FINISH_LOG) bbi_cpu_set_f64(out, i, log(real));
      else if (fin == FINISH_MEAN && count == 0) bbi_cpu_set_i64(out, i, 0);
      else if (fin == FINISH_MEAN && is_unsigned) bbi_cpu_set_i64(out, i, (int64_t)((uint64_t)y[i] / (uint64_t)count));
      else if (fin == FINISH_MEAN) bbi_cpu_set_i64(out, i, y[i] / count);
      else bbi_cpu_set_i64(out, i, y[i]);
    }
  }
}

/* The input converted to the accumulator type (float is read in place). */
static void *load_values(bbi_cpu_op_ctx *ctx, accumulator acc, const bb_tensor *in) {
  if (acc == ACC_F32) return bb_tensor_data(in);
  void *buf = scratch(ctx, (size_t)in->numel * 8);
  if (!buf) return NULL;
  const float *f = bb_tensor_data(in);
  for (int64_t i = 0; i < in->numel; i++) {
    if (in->dtype == BB_DTYPE_FLOAT) ((double *)buf)[i] = f[i]; /* float ReduceProd */
    else if (acc == ACC_F64) ((double *)buf)[i] = bbi_cpu_get_f64(in, i);
    else ((int64_t *)buf)[i] = bbi_cpu_get_i64(in, i);
  }
  return buf;
}

static int run_passes(bbi_cpu_op_ctx *ctx, const reduce_def *def, accumulator acc, plan *p) {
  const bb_tensor *in = ctx->inputs[0];
  bb_tensor *out = ctx->outputs[0];
  bool is_unsigned = in->dtype == BB_DTYPE_UINT64; /* narrower unsigned types fit int64 as they are */
  size_t esize = acc == ACC_F32 ? sizeof(float) : 8;
  void *values = load_values(ctx, acc, in);
  if (!values) return BB_ERR_NOMEM;
  /* two scratch blocks the size of the first pass's output (later ones are smaller) */
  size_t block = (size_t)out->numel * esize;
  int64_t outer, len, inner;
  plan probe = *p;
  if (next_pass(&probe, &outer, &len, &inner)) block = (size_t)(outer * inner) * esize;
  void *tmp[2] = {NULL, NULL};
  const void *src = values;
  int rc = 0;
  for (int pass = 0; next_pass(p, &outer, &len, &inner); pass++) {
    void *dst;
    if (acc == ACC_F32 && !has_reduced(p)) { /* the last pass writes the output */
      dst = bb_tensor_data(out);
    } else {
      if (!tmp[pass % 2] && !(tmp[pass % 2] = scratch(ctx, block))) {
        rc = BB_ERR_NOMEM;
        break;
      }
      dst = tmp[pass % 2];
    }
    run_pass(acc, pass ? def->rest : def->first, is_unsigned, outer, len, inner, src, dst);
    src = dst;
  }
  if (!rc) finish_values(acc, def->fin, is_unsigned, p->count, src, out);
  if (values != bb_tensor_data(in)) release(ctx, values);
  release(ctx, tmp[0]);
  release(ctx, tmp[1]);
  return rc;
}

static accumulator choose_accumulator(int32_t dtype, const reduce_def *def) {
  switch (dtype) {
  case BB_DTYPE_FLOAT: return def->first == BBI_RBLOCK_PROD ? ACC_F64 : ACC_F32;
  case BB_DTYPE_DOUBLE:
  case BB_DTYPE_FLOAT16:
  case BB_DTYPE_BFLOAT16: return ACC_F64;
  default: return def->first == BBI_RBLOCK_LSE ? ACC_F64 : ACC_I64;
  }
}

static int run_reduce(bbi_cpu_op_ctx *ctx, const reduce_def *def) {
  const bb_tensor *in = ctx->inputs[0];
  int rc = bbi_cpu_expect_dtype(ctx, 0, def->types);
  if (rc) return rc;
  bool axes_input = ctx->opset >= def->axes_input_since;
  int64_t axes[BB_MAX_RANK];
  long n;
  if ((rc = bbi_cpu_int_list(ctx, "axes", 1, axes_input, axes, BB_MAX_RANK, &n))) return rc;
  bool keepdims = bb_attr_get_int(&ctx->node->attrs, "keepdims", 1) != 0;
  bool noop = axes_input && bb_attr_get_int(&ctx->node->attrs, "noop_with_empty_axes", 0) != 0;
  bool mask[BB_MAX_RANK];
  if (n > 0) {
    if ((rc = bbi_cpu_axes_mask(ctx, axes, n, in->rank, mask))) return rc;
  } else {
    for (int k = 0; k < in->rank; k++) mask[k] = !noop;
  }
  int64_t dims[BB_MAX_RANK];
  int rank = 0;
  for (int k = 0; k < in->rank; k++)
    if (!mask[k]) dims[rank++] = in->dims[k];
    else if (keepdims) dims[rank++] = 1;
  if ((rc = bbi_cpu_make_output(ctx, 0, in->dtype, rank, dims))) return rc;
  if (ctx->outputs[0]->numel == 0) return 0;
  plan p;
  make_plan(in, mask, &p);
  return run_passes(ctx, def, choose_accumulator(in->dtype, def), &p);
}

static const int32_t REDUCE_TYPES[] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_BFLOAT16,
                                       BB_DTYPE_INT32, BB_DTYPE_INT64,  BB_DTYPE_UINT32,  BB_DTYPE_UINT64,
                                       BB_DTYPE_UNDEFINED};
static const int32_t MINMAX_TYPES[] = {BB_DTYPE_FLOAT,  BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_BFLOAT16,
                                       BB_DTYPE_INT8,   BB_DTYPE_INT32,  BB_DTYPE_INT64,   BB_DTYPE_UINT8,
                                       BB_DTYPE_UINT32, BB_DTYPE_UINT64, BB_DTYPE_BOOL,    BB_DTYPE_UNDEFINED};
#define REDUCE_TYPE_NAMES "float,double,float16,bfloat16,int32,int64,uint32,uint64"
#define MINMAX_TYPE_NAMES "float,double,float16,bfloat16,int8,int32,int64,uint8,uint32,uint64,bool"

static const reduce_def SUM = {BBI_RBLOCK_SUM, BBI_RBLOCK_SUM, FINISH_NONE, 13, REDUCE_TYPES};
static const reduce_def MEAN = {BBI_RBLOCK_SUM, BBI_RBLOCK_SUM, FINISH_MEAN, 18, REDUCE_TYPES};
static const reduce_def MAX = {BBI_RBLOCK_MAX, BBI_RBLOCK_MAX, FINISH_NONE, 18, MINMAX_TYPES};
static const reduce_def MIN = {BBI_RBLOCK_MIN, BBI_RBLOCK_MIN, FINISH_NONE, 18, MINMAX_TYPES};
static const reduce_def PROD = {BBI_RBLOCK_PROD, BBI_RBLOCK_PROD, FINISH_NONE, 18, REDUCE_TYPES};
static const reduce_def SUM_SQUARE = {BBI_RBLOCK_SUMSQ, BBI_RBLOCK_SUM, FINISH_NONE, 18, REDUCE_TYPES};
static const reduce_def L1 = {BBI_RBLOCK_ABSSUM, BBI_RBLOCK_SUM, FINISH_NONE, 18, REDUCE_TYPES};
static const reduce_def L2 = {BBI_RBLOCK_SUMSQ, BBI_RBLOCK_SUM, FINISH_SQRT, 18, REDUCE_TYPES};
static const reduce_def LOG_SUM = {BBI_RBLOCK_SUM, BBI_RBLOCK_SUM, FINISH_LOG, 18, REDUCE_TYPES};
static const reduce_def LOG_SUM_EXP = {BBI_RBLOCK_LSE, BBI_RBLOCK_LSE, FINISH_NONE, 18, REDUCE_TYPES};

static int reduce_sum(bbi_cpu_op_ctx *ctx) { return run_reduce(ctx, &SUM); }
static int reduce_mean(bbi_cpu_op_ctx *ctx) { return run_reduce(ctx, &MEAN); }
static int reduce_max(bbi_cpu_op_ctx *ctx) { return run_reduce(ctx, &MAX); }
static int reduce_min(bbi_cpu_op_ctx *ctx) { return run_reduce(ctx, &MIN); }
static int reduce_prod(bbi_cpu_op_ctx *ctx) { return run_reduce(ctx, &PROD); }
static int reduce_sum_square(bbi_cpu_op_ctx *ctx) { return run_reduce(ctx, &SUM_SQUARE); }
static int reduce_l1(bbi_cpu_op_ctx *ctx) { return run_reduce(ctx, &L1); }
static int reduce_l2(bbi_cpu_op_ctx *ctx) { return run_reduce(ctx, &L2); }
static int reduce_log_sum(bbi_cpu_op_ctx *ctx) { return run_reduce(ctx, &LOG_SUM); }
static int reduce_log_sum_exp(bbi_cpu_op_ctx *ctx) { return run_reduce(ctx, &LOG_SUM_EXP); }

#define ARG_TYPE_NAMES "float,double,float16,bfloat16,int8,int16,int32,int64,uint8,uint16,uint32,uint64"
#define SOFTMAX_TYPE_NAMES "float,double,float16,bfloat16"

const bbi_cpu_op bbi_cpu_ops_reduce[] = {
    {"ArgMax", 1, 1, 1, 1, 1, ARG_TYPE_NAMES, bbi_cpu_argmax},
    {"ArgMin", 1, 1, 1, 1, 1, ARG_TYPE_NAMES, bbi_cpu_argmin},
    {"CumSum", 11, 2, 2, 1, 1, "float,double,float16,bfloat16,int32,int64,uint32,uint64", bbi_cpu_cumsum},
    {"Hardmax", 1, 1, 1, 1, 1, SOFTMAX_TYPE_NAMES, bbi_cpu_hardmax},
    {"LogSoftmax", 1, 1, 1, 1, 1, SOFTMAX_TYPE_NAMES, bbi_cpu_log_softmax},
    {"ReduceL1", 1, 1, 1, 1, 1, REDUCE_TYPE_NAMES, reduce_l1},
    {"ReduceL1", 18, 1, 2, 1, 1, REDUCE_TYPE_NAMES, reduce_l1},
    {"ReduceL2", 1, 1, 1, 1, 1, REDUCE_TYPE_NAMES, reduce_l2},
    {"ReduceL2", 18, 1, 2, 1, 1, REDUCE_TYPE_NAMES, reduce_l2},
    {"ReduceLogSum", 1, 1, 1, 1, 1, REDUCE_TYPE_NAMES, reduce_log_sum},
    {"ReduceLogSum", 18, 1, 2, 1, 1, REDUCE_TYPE_NAMES, reduce_log_sum},
    {"ReduceLogSumExp", 1, 1, 1, 1, 1, REDUCE_TYPE_NAMES, reduce_log_sum_exp},
    {"ReduceLogSumExp", 18, 1, 2, 1, 1, REDUCE_TYPE_NAMES, reduce_log_sum_exp},
    {"ReduceMax", 1, 1, 1, 1, 1, MINMAX_TYPE_NAMES, reduce_max},
    {"ReduceMax", 18, 1, 2, 1, 1, MINMAX_TYPE_NAMES, reduce_max},
    {"ReduceMean", 1, 1, 1, 1, 1, REDUCE_TYPE_NAMES, reduce_mean},
    {"ReduceMean", 18, 1, 2, 1, 1, REDUCE_TYPE_NAMES, reduce_mean},
    {"ReduceMin", 1, 1, 1, 1, 1, MINMAX_TYPE_NAMES, reduce_min},
    {"ReduceMin", 18, 1, 2, 1, 1, MINMAX_TYPE_NAMES, reduce_min},
    {"ReduceProd", 1, 1, 1, 1, 1, REDUCE_TYPE_NAMES, reduce_prod},
    {"ReduceProd", 18, 1, 2, 1, 1, REDUCE_TYPE_NAMES, reduce_prod},
    {"ReduceSum", 1, 1, 1, 1, 1, REDUCE_TYPE_NAMES, reduce_sum},
    {"ReduceSum", 13, 1, 2, 1, 1, REDUCE_TYPE_NAMES, reduce_sum},
    {"ReduceSumSquare", 1, 1, 1, 1, 1, REDUCE_TYPE_NAMES, reduce_sum_square},
    {"ReduceSumSquare", 18, 1, 2, 1, 1, REDUCE_TYPE_NAMES, reduce_sum_square},
    {"Softmax", 1, 1, 1, 1, 1, SOFTMAX_TYPE_NAMES, bbi_cpu_softmax},
    {"TopK", 1, 1, 1, 2, 2, ARG_TYPE_NAMES, bbi_cpu_topk},
    {"TopK", 10, 2, 2, 2, 2, ARG_TYPE_NAMES, bbi_cpu_topk},
};
const size_t bbi_cpu_ops_reduce_count = sizeof bbi_cpu_ops_reduce / sizeof bbi_cpu_ops_reduce[0];
