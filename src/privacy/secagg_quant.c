#include "privacy/secagg_quant.h"

#include <math.h>

uint64_t sa_quantize(const float *x, uint32_t len, const bb_secagg_params *p, bbi_prng *prng, uint64_t *out) {
  const double c = p->clip_range, scale = (double)p->quant_range / (2 * c);
  uint64_t clipped = 0;
  for (uint32_t e = 0; e < len; e++) {
    double v = x[e];
    if (v > c || v < -c) {
      clipped++;
      v = v > c ? c : -c;
    }
    const double t = (v + c) * scale, lo = floor(t);
    uint64_t q = (uint64_t)lo + (bbi_prng_unit(prng) < t - lo ? 1 : 0);
    out[e] = q > p->quant_range ? p->quant_range : q;
  }
  return clipped;
}

void sa_dequantize(const uint64_t *sum, uint32_t len, const bb_secagg_params *p, uint32_t n, float *out) {
  const double step = 2 * p->clip_range / (double)p->quant_range, offset = (double)n * p->clip_range;
  for (uint32_t e = 0; e < len; e++) out[e] = (float)((double)sum[e] * step - offset);
}
