/* Kernels of kernels.h cut across the work pool (util/parallel.h): the same arguments and
 * the same results, bit for bit, on any number of threads. Each cuts along a dimension
 * whose parts the kernel computes independently — channels of a column matrix, planes of a
 * pooling, rows of a reduction or softmax, columns of a strided reduction — into pieces
 * sized by the shape alone, and runs on the caller when there is one piece or one thread. */
#ifndef BBI_TENSOR_KERNELS_SPLIT_H
#define BBI_TENSOR_KERNELS_SPLIT_H

#include "tensor/kernels/kernels.h"

void bbi_par_f32_im2col_2d(const bbi_window2d *g, size_t channels, const float *x, float *col, size_t ld);
void bbi_par_f32_im2col_patches_2d(const bbi_window2d *g, size_t channels, const float *x, float *col, size_t ld);
/* bbi_f32_im2col_pack_2d (default configuration) for channels [0, channels) of x, cut by
 * channels; 0 (nothing written) where the kernel declines the shape. */
int bbi_par_f32_im2col_pack_2d(const bbi_window2d *g, size_t channels, const float *x, size_t k, int as_a,
                               void *packed);
void bbi_par_f32_col2im_2d(const bbi_window2d *g, size_t channels, const float *col, size_t ld, float *x);
void bbi_par_f32_maxpool2d(const bbi_window2d *g, size_t planes, const float *x, float *y, int64_t *indices);
void bbi_par_f32_avgpool2d(const bbi_window2d *g, size_t planes, const float *x, float *y);
void bbi_par_f32_reduce_rows(bbi_reduce_op op, size_t rows, size_t cols, const float *x, float *y);
void bbi_par_f32_reduce_strided(bbi_reduce_op op, size_t outer, size_t len, size_t inner, const float *x,
                                float *y);
void bbi_par_f32_softmax_rows(size_t rows, size_t cols, const float *x, float *y);
void bbi_par_f32_log_softmax_rows(size_t rows, size_t cols, const float *x, float *y);

/* bbi_f32_update cut into pieces of whole multiples of BBI_PAR_ALIGN elements, by n alone. */
void bbi_par_f32_update(const bbi_f32_update_coef *k, size_t n, const bbi_f32_update_arrays *a);

/* Elements (or element-sized steps of work) one task should get at least: about 10 to 50
 * microseconds of a simple kernel, well above the cost of handing out a task. */
#define BBI_PAR_GRAIN 16384

/* Pieces of a contiguous run start at multiples of this many elements, a multiple of every
 * kernel's vector block, so each element meets the same code path as in one whole call. */
#define BBI_PAR_ALIGN 64

/* Items per piece for items of `cost` elements each: about BBI_PAR_GRAIN elements. */
static inline size_t bbi_par_grain(size_t cost) { return cost >= BBI_PAR_GRAIN ? 1 : BBI_PAR_GRAIN / (cost ? cost : 1); }

#endif
