/* One reduction pass: y[o][i] = op over l of x[o][l][i] for an outer×len×inner block,
 * in one of three accumulator types (float, double, int64). The Reduce* operators are
 * made of such passes (ops_reduce.c). Outputs never alias inputs. */
#ifndef BB_CPU_REDUCE_BLOCK_H
#define BB_CPU_REDUCE_BLOCK_H

#include <stdbool.h>
#include <stdint.h>

typedef enum bb_rblock_op {
  BB_RBLOCK_SUM,
  BB_RBLOCK_PROD,
  BB_RBLOCK_MAX,    /* NaN-propagating */
  BB_RBLOCK_MIN,    /* NaN-propagating */
  BB_RBLOCK_SUMSQ,  /* sum of x*x */
  BB_RBLOCK_ABSSUM, /* sum of |x| */
  BB_RBLOCK_LSE     /* log(sum(exp(x))), shifted by the maximum so it never overflows */
} bb_rblock_op;

/* float: every op but PROD (which the caller runs in double). */
void bb_rblock_f32(bb_rblock_op op, int64_t outer, int64_t len, int64_t inner, const float *x, float *y);
void bb_rblock_f64(bb_rblock_op op, int64_t outer, int64_t len, int64_t inner, const double *x, double *y);
/* int64 (every op but LSE), wrapping like the narrower ONNX integer types do. Unsigned
 * values are stored as their bit patterns and compared as unsigned. */
void bb_rblock_i64(bb_rblock_op op, bool is_unsigned, int64_t outer, int64_t len, int64_t inner, const int64_t *x,
                   int64_t *y);

#endif
