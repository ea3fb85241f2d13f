/* Robust aggregation of K vectors of length D, coordinate by coordinate: the median and
 * the trimmed mean. A few Byzantine contributors with huge values move these little,
 * where a mean follows them anywhere. Both are deterministic (each coordinate's K values
 * are sorted, then summed in sorted order in double) and use K floats of caller scratch
 * beyond the inputs, so memory stays O(K·D). Non-finite inputs are refused: a NaN has no
 * place in a sorted order. */
#ifndef BBI_OPS_AGGREGATORS_ROBUST_H
#define BBI_OPS_AGGREGATORS_ROBUST_H

#include <stddef.h>

#include "bb/common.h"

/* out[j] = median of vecs[0][j] .. vecs[k-1][j]; for even k the mean of the two middle
 * values. scratch holds k floats. BB_ERR_INVALID_ARGUMENT for k == 0 or a non-finite
 * value (err names vector and coordinate). */
int bbi_robust_median(const float *const *vecs, size_t k, size_t d, float *out, float *scratch,
                     bb_error *err);

/* out[j] = mean of coordinate j after dropping the floor(beta·k) smallest and as many
 * largest values; 0 <= beta < 0.5. beta = 0 is the plain mean. scratch holds k floats. */
int bbi_robust_trimmed_mean(const float *const *vecs, size_t k, size_t d, double beta,
                           float *out, float *scratch, bb_error *err);

/* How many values bbi_robust_trimmed_mean drops from each end for k vectors. */
size_t bbi_robust_trim_count(size_t k, double beta);

#endif
