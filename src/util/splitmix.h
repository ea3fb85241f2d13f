/* splitmix64, the project's seeded generator for simulations and draws that must come out
 * the same on every platform: each call advances *state and returns 64 well-mixed bits. */
#ifndef BBI_UTIL_SPLITMIX_H
#define BBI_UTIL_SPLITMIX_H

#include <stdint.h>

static inline uint64_t bbi_splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform in (0, 1]: never 0, so its logarithm is finite. */
static inline double bbi_splitmix_unit(uint64_t *state) {
  return (double)((bbi_splitmix64(state) >> 11) + 1) * (1.0 / 9007199254740992.0);
}

#endif
