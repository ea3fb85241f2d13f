/* Robust aggregation of K vectors of length D: coordinate by coordinate, the median and
 * the trimmed mean; whole vectors, Krum's scores and norm bounding. A few Byzantine
 * contributors with huge values move these little, where a mean follows them anywhere.
 * All are deterministic (each coordinate's K values are sorted, then summed in sorted
 * order in double) and use O(K) caller scratch beyond the inputs, so memory stays
 * O(K·D). Non-finite inputs are refused: a NaN has no place in a sorted order. */
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

/* The median of x[0..n), n >= 1 (for even n the mean of the two middle values); sorts x
 * in place. */
double bbi_robust_median_f64(double *x, size_t n);

/* Norm bounding. Each vector's distance from ref (NULL: the origin) is |v_i - ref|, into
 * norms; the bound is the smaller of max_norm (when > 0) and factor times the median
 * distance (when factor > 0), and scale[i] = min(1, bound / |v_i - ref|): ref +
 * scale[i]·(v_i - ref) is v_i pulled back onto the bound. Without either bound every
 * scale is 1. Distances are summed in double, where even 3e38 everywhere cannot overflow.
 * *median (when not NULL) is the median distance. Returns how many vectors are past the
 * bound. */
size_t bbi_robust_norm_scales(const float *const *vecs, size_t k, size_t d, const float *ref, double max_norm,
                             double factor, double *scale, double *norms, double *median);

/* Centered clipping (Karimireddy, He and Jaggi, "Learning from History for Byzantine
 * Robust Optimization", 2021), one step on the server: the center c is ref + step (each
 * NULL: zeros; coordinates held to the float range), every vector's deviation v_i - c
 * is pulled back to tau = factor × the median deviation, and out = c + the weighted mean
 * of the clipped deviations (weights NULL: equal). out is a convex combination of c and
 * the vectors, summed in double, so it is finite. dev holds 2k doubles of scratch,
 * center d. Returns how many deviations were clipped. */
size_t bbi_robust_centered_clip(const float *const *vecs, const double *weights, size_t k, size_t d,
                               const float *ref, const float *step, double factor, float *out, double *dev,
                               double *center);

/* Krum (Blanchard et al., 2017): scores[i] = the sum of the squared distances from
 * vecs[i] to its k - f - 2 nearest other vectors (at least 1 and at most k - 1; every
 * score is 0 for k = 1). The vector with the lowest score is the one whose neighbourhood
 * is tightest, which up to f outliers cannot fake. dist holds k doubles of scratch.
 * BB_ERR_INVALID_ARGUMENT for k == 0 or a non-finite value. Costs O(k²·d). */
int bbi_robust_krum_scores(const float *const *vecs, size_t k, size_t d, size_t f, double *scores, double *dist,
                          bb_error *err);

/* The indexes 0..k-1 ordered by score, lowest first (equal scores by lower index), into
 * order[0..k). */
void bbi_robust_lowest(const double *scores, size_t k, size_t *order);

#endif
