/* The shape family's operators that live outside ops_shape.c (which holds the table and
 * the view-only operators). Each follows the bb_cpu_op contract in cpu_op.h and reads
 * ctx->opset to pick the attribute or the input form of its arguments. */
#ifndef BB_CPU_SHAPE_OPS_H
#define BB_CPU_SHAPE_OPS_H

#include "cpu/cpu_op.h"

/* shape_layout.c: operators that rearrange elements */
int bb_cpu_transpose(bb_cpu_op_ctx *ctx);
int bb_cpu_concat(bb_cpu_op_ctx *ctx);
int bb_cpu_split(bb_cpu_op_ctx *ctx);
int bb_cpu_slice(bb_cpu_op_ctx *ctx);

/* shape_index.c: operators that read or write by index */
int bb_cpu_gather(bb_cpu_op_ctx *ctx);
int bb_cpu_gather_elements(bb_cpu_op_ctx *ctx);
int bb_cpu_gather_nd(bb_cpu_op_ctx *ctx);
int bb_cpu_scatter_elements(bb_cpu_op_ctx *ctx);
int bb_cpu_scatter_nd(bb_cpu_op_ctx *ctx);

/* shape_space.c: operators that move blocks between depth and space */
int bb_cpu_depth_to_space(bb_cpu_op_ctx *ctx);
int bb_cpu_space_to_depth(bb_cpu_op_ctx *ctx);

/* shape_triangle.c */
int bb_cpu_trilu(bb_cpu_op_ctx *ctx);

/* shape_repeat.c: operators that repeat elements into a larger tensor */
int bb_cpu_expand(bb_cpu_op_ctx *ctx);
int bb_cpu_tile(bb_cpu_op_ctx *ctx);
int bb_cpu_pad(bb_cpu_op_ctx *ctx);

/* shape_make.c: operators that make a tensor from attributes or small inputs */
int bb_cpu_constant(bb_cpu_op_ctx *ctx);
int bb_cpu_constant_of_shape(bb_cpu_op_ctx *ctx);
int bb_cpu_range(bb_cpu_op_ctx *ctx);
int bb_cpu_one_hot(bb_cpu_op_ctx *ctx);

#endif
