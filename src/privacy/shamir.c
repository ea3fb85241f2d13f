/* Shamir secret sharing over GF(2^8) with the field polynomial x^8 + x^4 + x^3 + x + 1,
 * bytewise: secret byte i is the constant term of its own random polynomial of degree
 * threshold - 1. Multiplication is a fixed sequence of shifts and masked XORs, inversion a
 * fixed chain of multiplications (a^254), so neither branches on nor indexes by a value:
 * the time taken depends only on the lengths and counts, never on a secret byte. */
#include <string.h>

#include <sodium/utils.h>

#include "bb/privacy.h"
#include "privacy/random.h"
#include "privacy/shamir.h"

uint8_t bbi_gf256_mul(uint8_t a, uint8_t b) {
  uint8_t r = 0;
  for (int i = 0; i < 8; i++) {
    r ^= (uint8_t)(a & (uint8_t)-(b & 1));
    b >>= 1;
    /* multiply a by x, reducing by the polynomial when its top bit was set */
    a = (uint8_t)((a << 1) ^ (0x1b & (uint8_t)-(a >> 7)));
  }
  return r;
}

uint8_t bbi_gf256_inv(uint8_t a) {
  /* a^254 = a^-1 for a != 0 (and 0 for 0): a^2, a^3, a^6, a^12, a^15, a^30, a^60, a^63,
   * a^126, a^127, a^254 */
  uint8_t a2 = bbi_gf256_mul(a, a);
  uint8_t a3 = bbi_gf256_mul(a2, a);
  uint8_t a6 = bbi_gf256_mul(a3, a3);
  uint8_t a12 = bbi_gf256_mul(a6, a6);
  uint8_t a15 = bbi_gf256_mul(a12, a3);
  uint8_t a30 = bbi_gf256_mul(a15, a15);
  uint8_t a60 = bbi_gf256_mul(a30, a30);
  uint8_t a63 = bbi_gf256_mul(a60, a3);
  uint8_t a126 = bbi_gf256_mul(a63, a63);
  uint8_t a127 = bbi_gf256_mul(a126, a);
  return bbi_gf256_mul(a127, a127);
}

int bb_shamir_split(const uint8_t *secret, size_t len, uint32_t n, uint32_t threshold, const uint8_t *xs,
                    const bb_random_source *random, uint8_t *shares, bb_error *err) {
  if (!secret || !len || !shares)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "shamir split: a secret of at least one byte and room for the shares are required");
  if (threshold < 2 || threshold > n || n > BB_SHAMIR_MAX_SHARES)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "shamir split: %u shares with threshold %u (2 <= threshold <= shares <= %d)",
                        n, threshold, BB_SHAMIR_MAX_SHARES);
  uint8_t seen[256] = {0};
  for (uint32_t s = 0; s < n; s++) {
    const uint8_t x = xs ? xs[s] : (uint8_t)(s + 1);
    if (x == 0 || seen[x])
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "shamir split: x coordinate %u of share %u is %s", x, s,
                          x ? "repeated" : "zero");
    seen[x] = 1;
    shares[(size_t)s * (len + 1) + len] = x;
  }
  bbi_prng prng;
  int rc = bbi_prng_init(&prng, random, err);
  if (rc) return rc;
  uint8_t coef[BB_SHAMIR_MAX_SHARES];
  for (size_t i = 0; i < len; i++) {
    bbi_prng_bytes(&prng, coef, threshold - 1);
    for (uint32_t s = 0; s < n; s++) {
      uint8_t *share = shares + (size_t)s * (len + 1);
      const uint8_t x = share[len];
      /* Horner: ((c_{t-1} x + c_{t-2}) x + ...) x + secret */
      uint8_t y = 0;
      for (uint32_t d = threshold - 1; d >= 1; d--) y = bbi_gf256_mul((uint8_t)(y ^ coef[d - 1]), x);
      share[i] = (uint8_t)(y ^ secret[i]);
    }
  }
  sodium_memzero(coef, sizeof coef);
  bbi_prng_wipe(&prng);
  return 0;
}

int bbi_shamir_lagrange_at_zero(const uint8_t *xs, uint32_t n, uint8_t *weights, bb_error *err) {
  for (uint32_t i = 0; i < n; i++) {
    if (xs[i] == 0) return bb_error_set(err, BB_ERR_MALFORMED, "shamir combine: share %u has x coordinate 0", i);
    for (uint32_t j = 0; j < i; j++)
      if (xs[i] == xs[j])
        return bb_error_set(err, BB_ERR_MALFORMED, "shamir combine: shares %u and %u have the same x coordinate %u", j,
                            i, xs[i]);
  }
  /* w_i = Π_{j≠i} x_j / (x_i + x_j): the basis polynomials at 0 (minus is plus here) */
  for (uint32_t i = 0; i < n; i++) {
    uint8_t num = 1, den = 1;
    for (uint32_t j = 0; j < n; j++) {
      if (j == i) continue;
      num = bbi_gf256_mul(num, xs[j]);
      den = bbi_gf256_mul(den, (uint8_t)(xs[i] ^ xs[j]));
    }
    weights[i] = bbi_gf256_mul(num, bbi_gf256_inv(den));
  }
  return 0;
}

int bb_shamir_combine(const uint8_t *shares, uint32_t n, size_t share_len, uint8_t *secret, bb_error *err) {
  if (!shares || !secret || share_len < 2 || n < 1 || n > BB_SHAMIR_MAX_SHARES)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "shamir combine: 1..%d shares of at least 2 bytes and room for the secret are required",
                        BB_SHAMIR_MAX_SHARES);
  const size_t len = share_len - 1;
  uint8_t xs[BB_SHAMIR_MAX_SHARES], w[BB_SHAMIR_MAX_SHARES];
  for (uint32_t s = 0; s < n; s++) xs[s] = shares[(size_t)s * share_len + len];
  int rc = bbi_shamir_lagrange_at_zero(xs, n, w, err);
  if (rc) return rc;
  for (size_t i = 0; i < len; i++) {
    uint8_t acc = 0;
    for (uint32_t s = 0; s < n; s++) acc ^= bbi_gf256_mul(shares[(size_t)s * share_len + i], w[s]);
    secret[i] = acc;
  }
  return 0;
}
