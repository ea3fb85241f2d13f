/* One reduction pass: y[o][i] = op over l of x[o][l][i] for an outer×len×inner block,
 * in one of three accumulator types (float, double, int64). The Reduce* operators are
 * made of such passes (reduce.c). Outputs never alias inputs. */
#ifndef BBI_CPU_REDUCE_BLOCK_H
#define BBI_CPU_REDUCE_BLOCK_H

#include <stdbool.h>
#include <stdint.h>

typedef enum bbi_rblock_op {
  BBI_RBLOCK_SUM,
  BBI_RBLOCK_PROD,
  BBI_RBLOCK_MAX,    /* NaN-propagating */
  BBI_RBLOCK_MIN,    /* NaN-propagating */
  BBI_RBLOCK_SUMSQ,  /* sum of x*x */
  BBI_RBLOCK_ABSSUM, /* sum of |x| */
  BBI_RBLOCK_LSE     /* log(sum(exp(x))), shifted by the maximum so it never overflows */
} bbi_rblock_op;

/* float: every op but PROD (which the caller runs in double). */
void bbi_rblock_f32(bbi_rblock_op op, int64_t outer, int64_t len, int64_t inner, const float *x, float *y);
void bbi_rblock_f64(bbi_rblock_op op, int64_t outer, int64_t len, int64_t inner, const double *x, double *y);
/* int64 (every op but LSE), wrapping like the narrower ONNX integer types do. Unsigned
 * values are stored as their bit patterns and compared as unsigned. */
void bbi_rblock_i64(bbi_rblock_op op, bool is_unsigned, int64_t outer, int64_t len, int64_t inner, const int64_t *x,
                   int64_t *y);

#endif
