/* Shared by the operator tests: a seeded random generator (define OPTEST_SEED before
 * including to pick the sequence) and reading tensor elements independently of the
 * library (float16/bfloat16 decoded here, not by the code under test). */
#ifndef BB_TESTS_OPS_OPTEST_H
#define BB_TESTS_OPS_OPTEST_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "bb/tensor.h"

#ifndef OPTEST_SEED
#define OPTEST_SEED 0x243f6a8885a308d3u
#endif

static uint64_t rng_state = OPTEST_SEED;

static inline uint64_t rng_next(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

/* A uniform integer in [lo, hi] and a uniform real in [lo, hi). */
static inline int64_t rng_int(int64_t lo, int64_t hi) {
  return lo + (int64_t)(rng_next() % (uint64_t)(hi - lo + 1));
}
static inline double rng_real(double lo, double hi) {
  return lo + (hi - lo) * (double)(rng_next() >> 11) / 9007199254740992.0;
}

static inline double f16_value(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
  return h & 0x8000 ? -v : v;
}

static inline double bf16_value(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* Element i of an integer or bool tensor (uint64 as its two's-complement bits). */
static inline int64_t tensor_int(const bb_tensor *t, int64_t i) {
  const void *d = bb_tensor_data(t);
  switch (t->dtype) {
  case BB_DTYPE_INT8: return ((const int8_t *)d)[i];
  case BB_DTYPE_INT16: return ((const int16_t *)d)[i];
  case BB_DTYPE_INT32: return ((const int32_t *)d)[i];
  case BB_DTYPE_INT64: return ((const int64_t *)d)[i];
  case BB_DTYPE_UINT8: case BB_DTYPE_BOOL: return ((const uint8_t *)d)[i];
  case BB_DTYPE_UINT16: return ((const uint16_t *)d)[i];
  case BB_DTYPE_UINT32: return ((const uint32_t *)d)[i];
  case BB_DTYPE_UINT64: return (int64_t)((const uint64_t *)d)[i];
  default: return 0;
  }
}

/* Element i of any tensor as a double. */
static inline double tensor_real(const bb_tensor *t, int64_t i) {
  const void *d = bb_tensor_data(t);
  switch (t->dtype) {
  case BB_DTYPE_FLOAT: return ((const float *)d)[i];
  case BB_DTYPE_DOUBLE: return ((const double *)d)[i];
  case BB_DTYPE_FLOAT16: return f16_value(((const uint16_t *)d)[i]);
  case BB_DTYPE_BFLOAT16: return bf16_value(((const uint16_t *)d)[i]);
  case BB_DTYPE_UINT64: return (double)((const uint64_t *)d)[i];
  default: return (double)tensor_int(t, i);
  }
}

static inline int optest_is_real(int32_t dt) {
  return dt == BB_DTYPE_FLOAT || dt == BB_DTYPE_DOUBLE || dt == BB_DTYPE_FLOAT16 || dt == BB_DTYPE_BFLOAT16;
}

#endif
