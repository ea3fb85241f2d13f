/* Exact sampling of the discrete Gaussian (Canonne, Kamath and Steinke 2020, "The Discrete
 * Gaussian for Differential Privacy", Algorithms 1-3): only integer arithmetic on
 * uniform random integers, so the samples follow the distribution exactly rather than up
 * to floating-point rounding. */
#ifndef BBI_PRIVACY_DP_SAMPLE_H
#define BBI_PRIVACY_DP_SAMPLE_H

#include <stdint.h>

#include "privacy/random.h"

/* The largest scale sampled; sigma^2 = num / 256 then keeps num below 2^56 and every
 * intermediate of the acceptance test within 128 bits. */
#define BBI_DGAUSS_SCALE_MAX 16777216.0 /* 2^24, as sigma */

/* A sigma^2 fixed as num / 256, rounded up (more noise, never less). */
typedef struct bbi_dgauss {
  uint64_t var_num; /* sigma^2 × 256 */
  uint64_t t;       /* floor(sigma) + 1: the Laplace proposal's scale */
} bbi_dgauss;

/* sigma in [1, BBI_DGAUSS_SCALE_MAX]. */
void bbi_dgauss_init(bbi_dgauss *g, double sigma);
/* One sample of N_Z(0, sigma^2): P(y) ∝ exp(-y^2 / (2 sigma^2)). */
int64_t bbi_dgauss_sample(const bbi_dgauss *g, bbi_prng *r);

#endif
