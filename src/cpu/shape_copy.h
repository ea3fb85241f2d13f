/* Moving elements between strided boxes: the one copy routine behind Transpose, Slice,
 * Concat, Split, Expand, Tile and Pad. */
#ifndef BBI_CPU_SHAPE_COPY_H
#define BBI_CPU_SHAPE_COPY_H

#include <stddef.h>
#include <stdint.h>

#include "bb/tensor.h"

/* Tile views a rank-r tensor as 2r axes, so boxes may have twice the tensor rank. */
#define BBI_COPY_MAX_RANK (2 * BB_MAX_RANK)

/* For every index i of the box dims[0..rank), copies the element at
 * src + sum(i[k] * src_strides[k]) to dst + sum(i[k] * dst_strides[k]). Strides are in
 * bytes; source strides may be 0 (broadcast) or negative. Contiguous runs become memcpy,
 * broadcast runs a fill, and transposed boxes are copied in cache-sized tiles. */
void bbi_copy_strided(size_t esize, int rank, const int64_t *dims, const char *src, const int64_t *src_strides,
                     char *dst, const int64_t *dst_strides);

/* Row-major strides of dims, in units of `unit` (1 for elements, esize for bytes). */
void bbi_copy_strides(int rank, const int64_t *dims, int64_t unit, int64_t *strides);

/* Sets n elements of esize bytes at dst to the element at value. */
void bbi_copy_fill(char *dst, size_t esize, int64_t n, const void *value);

#endif
