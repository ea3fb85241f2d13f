/* Machinery shared by the CPU backend's elementwise operators: sets of element types,
 * checks that name the node, the broadcasting walk, element type conversion, and the
 * operator entry points that elementwise.c lists in its table.
 *
 * Broadcasting (ONNX's multidirectional rule) is planned once per call: every operand
 * gets an element stride per output dimension, 0 where it is broadcast; size-1 output
 * dimensions are dropped and neighbouring dimensions that every operand walks in the same
 * contiguous way are merged. What is left is an innermost run, along which each operand
 * either advances one element at a time or repeats one element, and a few outer
 * dimensions walked by an odometer. Kernels therefore only ever see three cases
 * (array-array, array-scalar, scalar-array); the same-shape and scalar-operand cases are a
 * single run over the whole tensor. A short run whose operands repeat the same row along
 * the next dimension ([N,8] + [8]) is widened: that row is copied side by side into a
 * local tile, so one call covers many rows. */
#ifndef BBI_OPS_CPU_ELEMENTWISE_H
#define BBI_OPS_CPU_ELEMENTWISE_H

#include <stdbool.h>

#include "cpu/cpu_op.h"

/* ---- sets of element types ------------------------------------------------------------- */

#define BBI_EW_TYPE(dtype) (1u << (dtype))
#define BBI_EW_FLOATS                                                                                     \
  (BBI_EW_TYPE(BB_DTYPE_FLOAT) | BBI_EW_TYPE(BB_DTYPE_DOUBLE) | BBI_EW_TYPE(BB_DTYPE_FLOAT16) |            \
   BBI_EW_TYPE(BB_DTYPE_BFLOAT16))
/* float, double and float16: the ops ONNX 1.12 does not define on bfloat16 */
#define BBI_EW_FLOATS_NO_BF16 (BBI_EW_FLOATS & ~BBI_EW_TYPE(BB_DTYPE_BFLOAT16))
#define BBI_EW_SIGNED                                                                                     \
  (BBI_EW_TYPE(BB_DTYPE_INT8) | BBI_EW_TYPE(BB_DTYPE_INT16) | BBI_EW_TYPE(BB_DTYPE_INT32) |                \
   BBI_EW_TYPE(BB_DTYPE_INT64))
#define BBI_EW_UNSIGNED                                                                                   \
  (BBI_EW_TYPE(BB_DTYPE_UINT8) | BBI_EW_TYPE(BB_DTYPE_UINT16) | BBI_EW_TYPE(BB_DTYPE_UINT32) |             \
   BBI_EW_TYPE(BB_DTYPE_UINT64))
#define BBI_EW_INTS (BBI_EW_SIGNED | BBI_EW_UNSIGNED)
#define BBI_EW_NUMERIC (BBI_EW_FLOATS | BBI_EW_INTS)
#define BBI_EW_ALL (BBI_EW_NUMERIC | BBI_EW_TYPE(BB_DTYPE_BOOL))
/* The highest dtype code a set can hold, for tables indexed by dtype. */
#define BBI_EW_DTYPE_MAX BB_DTYPE_BFLOAT16

static inline bool bbi_ew_in(uint32_t types, int32_t dtype) {
  return dtype >= 0 && dtype <= BBI_EW_DTYPE_MAX && (types & BBI_EW_TYPE(dtype));
}

static inline bool bbi_ew_is_half(int32_t dtype) {
  return dtype == BB_DTYPE_FLOAT16 || dtype == BB_DTYPE_BFLOAT16;
}

/* Fails with BB_ERR_TYPE unless input i is present and its type is in `types`. */
int bbi_ew_check_type(bbi_cpu_op_ctx *ctx, size_t i, uint32_t types);

/* Fails with BB_ERR_TYPE unless inputs first..last (those present) have the type of input
 * `first`, as ONNX requires where one type variable binds several inputs. */
int bbi_ew_check_same_type(bbi_cpu_op_ctx *ctx, size_t first, size_t last);

/* ---- broadcasting ---------------------------------------------------------------------- */

#define BBI_EW_MAX_OPERANDS 4 /* the output and up to three inputs (Where) */

typedef struct bbi_ew_plan {
  int n_operands; /* 0 is the output, 1.. the inputs */
  int rank;       /* outer dimensions, the innermost run excluded */
  int64_t dims[BB_MAX_RANK];
  int64_t strides[BBI_EW_MAX_OPERANDS][BB_MAX_RANK]; /* in elements; 0 = broadcast */
  int64_t run;                                      /* elements per run; 0 when empty */
  size_t step[BBI_EW_MAX_OPERANDS];                  /* 1: advances along the run, 0: repeats */
} bbi_ew_plan;

/* The broadcast shape of the present inputs first..last, or a failure naming the node
 * and the shapes that do not broadcast. */
int bbi_ew_broadcast(bbi_cpu_op_ctx *ctx, size_t first, size_t last, int *rank, int64_t *dims);

/* Plans the walk over an output of shape (rank, dims) for n_inputs inputs whose shapes
 * (right-aligned) broadcast to it. */
void bbi_ew_plan_init(bbi_ew_plan *p, int rank, const int64_t *dims, int n_inputs, const int *in_ranks,
                     const int64_t *const *in_dims);

/* One run: n elements; ptr[0] is the output's first element, ptr[k] input k's; step[k]
 * is 1 when operand k advances along the run and 0 when it repeats one element. */
typedef void (*bbi_ew_run_fn)(void *user, size_t n, void *const *ptr, const size_t *step);

/* Calls fn for every run of the plan (short runs widened over several rows). base[k] is
 * operand k's element 0, elem_size[k] its element size in bytes. */
void bbi_ew_plan_each(const bbi_ew_plan *p, void *const *base, const size_t *elem_size, bbi_ew_run_fn fn,
                     void *user);

/* Plans and walks output y against inputs in[0..n_inputs) with their own shapes. */
void bbi_ew_apply(bb_tensor *y, const bb_tensor *const *in, int n_inputs, bbi_ew_run_fn fn, void *user);

/* ---- element type conversion (elementwise_convert.c) --------------------------------- */

/* Elements per chunk when a kernel stages values through a local buffer. */
#define BBI_EW_CHUNK 256

/* True for the types bbi_ew_convert handles: numbers, float16/bfloat16 and bool. */
static inline bool bbi_ew_convertible(int32_t dtype) { return bbi_ew_in(BBI_EW_ALL, dtype); }

/* Converts n elements with Cast's rules: float to integer truncates toward zero (NaN
 * gives 0; values past the int64 range saturate to it, and the result wraps modulo the
 * target's width like every integer narrowing, so -1.0 becomes 255 as uint8); anything
 * to bool is "not zero" (NaN is true); float to float16/bfloat16 rounds to nearest even,
 * straight from double without a double rounding. Same-type conversion copies. */
void bbi_ew_convert(int32_t dst_dtype, void *dst, int32_t src_dtype, const void *src, size_t n);

/* float16/bfloat16 (dtype) <-> float, for kernels that compute half types in float. */
void bbi_ew_widen(int32_t dtype, const void *src, size_t n, float *dst);
void bbi_ew_narrow(int32_t dtype, const float *src, size_t n, void *dst);

/* ---- operators (their table is in elementwise.c) -------------------------------------- */

/* elementwise_binary.c */
int bbi_ew_add(bbi_cpu_op_ctx *ctx);
int bbi_ew_sub(bbi_cpu_op_ctx *ctx);
int bbi_ew_mul(bbi_cpu_op_ctx *ctx);
int bbi_ew_div(bbi_cpu_op_ctx *ctx);
int bbi_ew_pow(bbi_cpu_op_ctx *ctx);
int bbi_ew_mod(bbi_cpu_op_ctx *ctx);
int bbi_ew_max(bbi_cpu_op_ctx *ctx);
int bbi_ew_min(bbi_cpu_op_ctx *ctx);
int bbi_ew_sum(bbi_cpu_op_ctx *ctx);
int bbi_ew_mean(bbi_cpu_op_ctx *ctx);
int bbi_ew_equal(bbi_cpu_op_ctx *ctx);
int bbi_ew_greater(bbi_cpu_op_ctx *ctx);
int bbi_ew_less(bbi_cpu_op_ctx *ctx);
int bbi_ew_greater_or_equal(bbi_cpu_op_ctx *ctx);
int bbi_ew_less_or_equal(bbi_cpu_op_ctx *ctx);
int bbi_ew_and(bbi_cpu_op_ctx *ctx);
int bbi_ew_or(bbi_cpu_op_ctx *ctx);
int bbi_ew_xor(bbi_cpu_op_ctx *ctx);
int bbi_ew_where(bbi_cpu_op_ctx *ctx);

/* elementwise_unary.c */
int bbi_ew_neg(bbi_cpu_op_ctx *ctx);
int bbi_ew_abs(bbi_cpu_op_ctx *ctx);
int bbi_ew_sqrt(bbi_cpu_op_ctx *ctx);
int bbi_ew_exp(bbi_cpu_op_ctx *ctx);
int bbi_ew_log(bbi_cpu_op_ctx *ctx);
int bbi_ew_relu(bbi_cpu_op_ctx *ctx);
int bbi_ew_leaky_relu(bbi_cpu_op_ctx *ctx);
int bbi_ew_sigmoid(bbi_cpu_op_ctx *ctx);
int bbi_ew_tanh(bbi_cpu_op_ctx *ctx);
int bbi_ew_reciprocal(bbi_cpu_op_ctx *ctx);
int bbi_ew_floor(bbi_cpu_op_ctx *ctx);
int bbi_ew_ceil(bbi_cpu_op_ctx *ctx);
int bbi_ew_round(bbi_cpu_op_ctx *ctx);
int bbi_ew_sign(bbi_cpu_op_ctx *ctx);
int bbi_ew_erf(bbi_cpu_op_ctx *ctx);
int bbi_ew_softplus(bbi_cpu_op_ctx *ctx);
int bbi_ew_softsign(bbi_cpu_op_ctx *ctx);
int bbi_ew_elu(bbi_cpu_op_ctx *ctx);
int bbi_ew_selu(bbi_cpu_op_ctx *ctx);
int bbi_ew_hard_sigmoid(bbi_cpu_op_ctx *ctx);
int bbi_ew_not(bbi_cpu_op_ctx *ctx);
int bbi_ew_clip(bbi_cpu_op_ctx *ctx);

/* elementwise_math.c */
int bbi_ew_sin(bbi_cpu_op_ctx *ctx);
int bbi_ew_cos(bbi_cpu_op_ctx *ctx);
int bbi_ew_tan(bbi_cpu_op_ctx *ctx);
int bbi_ew_asin(bbi_cpu_op_ctx *ctx);
int bbi_ew_acos(bbi_cpu_op_ctx *ctx);
int bbi_ew_atan(bbi_cpu_op_ctx *ctx);
int bbi_ew_sinh(bbi_cpu_op_ctx *ctx);
int bbi_ew_cosh(bbi_cpu_op_ctx *ctx);
int bbi_ew_asinh(bbi_cpu_op_ctx *ctx);
int bbi_ew_acosh(bbi_cpu_op_ctx *ctx);
int bbi_ew_atanh(bbi_cpu_op_ctx *ctx);
int bbi_ew_isnan(bbi_cpu_op_ctx *ctx);
int bbi_ew_isinf(bbi_cpu_op_ctx *ctx);
int bbi_ew_prelu(bbi_cpu_op_ctx *ctx);
int bbi_ew_thresholded_relu(bbi_cpu_op_ctx *ctx);
int bbi_ew_celu(bbi_cpu_op_ctx *ctx);

#endif
