/* Shape-like arguments of CPU operators: integer lists that older opsets carry in an
 * attribute and newer ones in an input, lists of axes, and element sizes. Shared by the
 * shape and reduce families. */
#ifndef BBI_CPU_SHAPE_ARGS_H
#define BBI_CPU_SHAPE_ARGS_H

#include <stdbool.h>

#include "cpu/cpu_op.h"

/* Reads an integer list from the INTS attribute `attr` (from_input false) or from input
 * `input` (from_input true; int32 or int64, 1-D). *count is the number of values, or -1
 * when the attribute or input is absent. More than max values is an error. */
int bbi_cpu_int_list(bbi_cpu_op_ctx *ctx, const char *attr, size_t input, bool from_input, int64_t *values,
                    size_t max, long *count);

/* Marks each of the n axes (possibly negative, counted against rank) in mask[0..rank);
 * fails on an axis out of range or given twice. */
int bbi_cpu_axes_mask(bbi_cpu_op_ctx *ctx, const int64_t *axes, long n, int rank, bool *mask);

/* The element size of input i; fails for types without a fixed size (string). */
int bbi_cpu_elem_size(bbi_cpu_op_ctx *ctx, size_t i, size_t *esize);

/* Output i as a view of `in` with another shape and the same element count (no copy). */
int bbi_cpu_view_output(bbi_cpu_op_ctx *ctx, size_t i, const bb_tensor *in, int rank, const int64_t *dims);

#endif
