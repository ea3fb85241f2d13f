/* Fixed-point quantisation into the SecAgg+ ring (the scheme of Flower's SecAgg+): clip to
 * [-c, c], map onto [0, Q] and round stochastically, so the expected value is exact; the
 * server maps the sum of n clients back by the same affine map, less n × c. */
#ifndef BBI_PRIVACY_SECAGG_QUANT_H
#define BBI_PRIVACY_SECAGG_QUANT_H

#include "bb/privacy.h"
#include "privacy/random.h"

/* out[e] in [0, quant_range]; returns how many elements the clip range cut. */
uint64_t sa_quantize(const float *x, uint32_t len, const bb_secagg_params *p, bbi_prng *prng, uint64_t *out);
/* The float sum of n clients from the ring sum. */
void sa_dequantize(const uint64_t *sum, uint32_t len, const bb_secagg_params *p, uint32_t n, float *out);

#endif
