/* The discrete Gaussian sampler. Probabilities are ratios of integers (unsigned 128-bit):
 * Bernoulli(n/d) compares a uniform integer below d with n; Bernoulli(exp(-n/d)) is
 * Algorithm 1 of Canonne, Kamath and Steinke (a run of Bernoulli(γ/k) trials whose length
 * is odd with probability exp(-γ)), applied whole-number part first. The one departure
 * from exactness: a Laplace proposal beyond 2^64 / (256 t) is rejected outright. Its
 * Gaussian acceptance would be below exp(-2^100), and the proposal itself has probability
 * below exp(-2^39 / t) ≤ exp(-2^15) at the largest scale. */
#include "privacy/dp_sample.h"

#include <math.h>

typedef unsigned __int128 u128;

#define VAR_DEN 256u

static u128 u128_random(bbi_prng *r) {
  const u128 hi = bbi_prng_u64(r);
  return hi << 64 | bbi_prng_u64(r);
}

/* Uniform in [0, d), d >= 1, by rejection on the bits d needs. */
static u128 u128_below(bbi_prng *r, u128 d) {
  if (d <= UINT64_MAX) return bbi_prng_below(r, (uint64_t)d);
  u128 mask = d - 1;
  for (int s = 1; s < 128; s <<= 1) mask |= mask >> s;
  for (;;) {
    const u128 v = u128_random(r) & mask;
    if (v < d) return v;
  }
}

/* Bernoulli(n / d), 0 <= n <= d. */
static int bernoulli(bbi_prng *r, u128 n, u128 d) { return u128_below(r, d) < n; }

/* Bernoulli(exp(-n/d)) for n <= d: K runs while Bernoulli(γ / K) succeeds, where
 * Bernoulli(γ / K) is Bernoulli(γ) and Bernoulli(1 / K) together; exp(-γ) = P(K odd). */
static int bernoulli_exp_unit(bbi_prng *r, u128 n, u128 d) {
  uint64_t k = 1;
  while (bernoulli(r, n, d) && bbi_prng_below(r, k) == 0) k++;
  return k & 1;
}

/* Bernoulli(exp(-n/d)) for any n: exp(-1) once per whole unit, then the remainder. */
static int bernoulli_exp(bbi_prng *r, u128 n, u128 d) {
  while (n >= d) {
    if (!bernoulli_exp_unit(r, 1, 1)) return 0;
    n -= d;
  }
  return bernoulli_exp_unit(r, n, d);
}

/* Discrete Laplace: P(y) ∝ exp(-|y| / t) (Algorithm 2 with s = 1). */
static int64_t discrete_laplace(bbi_prng *r, uint64_t t) {
  for (;;) {
    const uint64_t u = bbi_prng_below(r, t);
    if (!bernoulli_exp(r, u, t)) continue;
    uint64_t v = 0;
    while (bernoulli_exp_unit(r, 1, 1)) v++;
    const uint64_t x = u + t * v;
    const int negative = (int)bbi_prng_below(r, 2);
    if (negative && x == 0) continue;
    if (x > (uint64_t)INT64_MAX) continue;
    return negative ? -(int64_t)x : (int64_t)x;
  }
}

void bbi_dgauss_init(bbi_dgauss *g, double sigma) {
  g->var_num = (uint64_t)ceil(sigma * sigma * VAR_DEN);
  g->t = (uint64_t)floor(sigma) + 1;
}

int64_t bbi_dgauss_sample(const bbi_dgauss *g, bbi_prng *r) {
  const uint64_t t = g->t, s = g->var_num;
  const uint64_t far = UINT64_MAX / (VAR_DEN * t);
  for (;;) {
    const int64_t y = discrete_laplace(r, t);
    const uint64_t a = y < 0 ? (uint64_t)-(y + 1) + 1 : (uint64_t)y;
    if (a >= far) continue;
    /* accept with exp(-(|y| - σ²/t)² / (2σ²)), σ² = s / 256:
     * = exp(-(|y| t 256 - s)² / (2 s 256 t²)) */
    const uint64_t at = a * t * VAR_DEN;
    const u128 diff = at >= s ? (u128)(at - s) : (u128)(s - at);
    const u128 num = diff * diff;
    const u128 den = (u128)2 * s * VAR_DEN * t * t;
    if (bernoulli_exp(r, num, den)) return y;
  }
}
