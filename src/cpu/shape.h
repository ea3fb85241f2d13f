/* The shape family's operators that live outside shape.c (which holds the table and
 * the view-only operators). Each follows the bbi_cpu_op contract in cpu_op.h and reads
 * ctx->opset to pick the attribute or the input form of its arguments. */
#ifndef BBI_CPU_SHAPE_H
#define BBI_CPU_SHAPE_H

#include "cpu/cpu_op.h"

/* shape_layout.c: operators that rearrange elements */
int bbi_cpu_transpose(bbi_cpu_op_ctx *ctx);
int bbi_cpu_concat(bbi_cpu_op_ctx *ctx);
int bbi_cpu_split(bbi_cpu_op_ctx *ctx);
int bbi_cpu_slice(bbi_cpu_op_ctx *ctx);

/* shape_index.c: operators that read or write by index */
int bbi_cpu_gather(bbi_cpu_op_ctx *ctx);
int bbi_cpu_gather_elements(bbi_cpu_op_ctx *ctx);
int bbi_cpu_gather_nd(bbi_cpu_op_ctx *ctx);
int bbi_cpu_scatter_elements(bbi_cpu_op_ctx *ctx);
int bbi_cpu_scatter_nd(bbi_cpu_op_ctx *ctx);

/* shape_space.c: operators that move blocks between depth and space */
int bbi_cpu_depth_to_space(bbi_cpu_op_ctx *ctx);
int bbi_cpu_space_to_depth(bbi_cpu_op_ctx *ctx);

/* shape_triangle.c */
int bbi_cpu_trilu(bbi_cpu_op_ctx *ctx);

/* shape_repeat.c: operators that repeat elements into a larger tensor */
int bbi_cpu_expand(bbi_cpu_op_ctx *ctx);
int bbi_cpu_tile(bbi_cpu_op_ctx *ctx);
int bbi_cpu_pad(bbi_cpu_op_ctx *ctx);

/* shape_make.c: operators that make a tensor from attributes or small inputs */
int bbi_cpu_constant(bbi_cpu_op_ctx *ctx);
int bbi_cpu_constant_of_shape(bbi_cpu_op_ctx *ctx);
int bbi_cpu_range(bbi_cpu_op_ctx *ctx);
int bbi_cpu_one_hot(bbi_cpu_op_ctx *ctx);

#endif
