/* What dp.c shares with the tests. */
#ifndef BBI_PRIVACY_DP_H
#define BBI_PRIVACY_DP_H

#include <stddef.h>

#include "bb/common.h"

/* Clips x so that, rounded to the grid, its L2 norm is within clip: to clip less the
 * rounding's worst case (sqrt(n) grid / 2) first, then shrinking until the squared norm of
 * the rounded integers, summed exactly, says so. *scale gets the first step's factor. */
int bbi_dp_clip_to_grid(float *x, size_t n, double clip, double grid, double *scale, bb_error *err);

#endif
