/* The reduce family's operators that live outside reduce.c (which holds the table and
 * the Reduce* operators). */
#ifndef BBI_CPU_REDUCE_H
#define BBI_CPU_REDUCE_H

#include "cpu/cpu_op.h"

/* reduce_softmax.c */
int bbi_cpu_softmax(bbi_cpu_op_ctx *ctx);
int bbi_cpu_log_softmax(bbi_cpu_op_ctx *ctx);

/* Checks that input 0 is float, double, float16 or bfloat16 and gives the outer×len×inner
 * view Softmax, LogSoftmax and Hardmax work on: before opset 13 the input is coerced to
 * 2-D at `axis` (default 1) and len is everything from axis on; from 13 len is the single
 * axis (default -1). */
int bbi_cpu_softmax_layout(bbi_cpu_op_ctx *ctx, const bb_tensor *in, int64_t *outer, int64_t *len, int64_t *inner);

/* reduce_arg.c */
int bbi_cpu_argmax(bbi_cpu_op_ctx *ctx);
int bbi_cpu_argmin(bbi_cpu_op_ctx *ctx);
int bbi_cpu_hardmax(bbi_cpu_op_ctx *ctx);
int bbi_cpu_topk(bbi_cpu_op_ctx *ctx);

/* reduce_scan.c */
int bbi_cpu_cumsum(bbi_cpu_op_ctx *ctx);

#endif
