/* Shamir sharing over GF(2^8) (bb/privacy.h): the field arithmetic against a carry-less
 * multiply reduced by the polynomial, written here independently; split and combine for
 * every subset of a threshold; refusals. The interoperation with the npm package
 * shamir-secret-sharing is tests/privacy/shamir_interop.mjs. */
#include <string.h>

#include "bb/privacy.h"
#include "harness.h"
#include "privacy/shamir.h"
#include "privacy/seeded_random.h"

/* a × b in GF(2)[x], then reduced modulo x^8 + x^4 + x^3 + x + 1 (0x11b) bit by bit */
static uint8_t reference_mul(uint8_t a, uint8_t b) {
  unsigned product = 0;
  for (int i = 0; i < 8; i++)
    if (b >> i & 1) product ^= (unsigned)a << i;
  for (int bit = 14; bit >= 8; bit--)
    if (product >> bit & 1) product ^= 0x11bu << (bit - 8);
  return (uint8_t)product;
}

static void test_field(void) {
  int wrong = 0;
  for (int a = 0; a < 256; a++)
    for (int b = 0; b < 256; b++) wrong += bbi_gf256_mul((uint8_t)a, (uint8_t)b) != reference_mul((uint8_t)a, (uint8_t)b);
  CHECK_EQ_INT(wrong, 0);
  for (int a = 1; a < 256; a++) CHECK_EQ_INT(bbi_gf256_mul((uint8_t)a, bbi_gf256_inv((uint8_t)a)), 1);
  CHECK_EQ_INT(bbi_gf256_inv(0), 0);
  /* the AES field's textbook example: {57} · {83} = {c1} */
  CHECK_EQ_INT(bbi_gf256_mul(0x57, 0x83), 0xc1);
}

/* p(x) at x from the share layout: y bytes then x; the naive sum of c_i x^i */
static void test_every_subset_reconstructs(void) {
  sr_rng rng;
  sr_rng_seed(&rng, 42);
  bb_random_source src = sr_source(&rng);
  uint8_t secret[32], shares[6 * 33], got[32];
  for (int i = 0; i < 32; i++) secret[i] = (uint8_t)(i * 37 + 5);
  bb_error err = {0};
  CHECK_EQ_INT(bb_shamir_split(secret, 32, 6, 3, NULL, &src, shares, &err), 0);
  for (int s = 0; s < 6; s++) CHECK_EQ_INT(shares[s * 33 + 32], s + 1);
  int subsets = 0, wrong = 0, below = 0;
  for (unsigned mask = 0; mask < 64; mask++) {
    const int count = __builtin_popcount(mask);
    if (count < 2) continue;
    uint8_t picked[6 * 33];
    int n = 0;
    for (int s = 0; s < 6; s++)
      if (mask >> s & 1) memcpy(picked + 33 * n++, shares + 33 * s, 33);
    CHECK_EQ_INT(bb_shamir_combine(picked, (uint32_t)n, 33, got, &err), 0);
    if (count >= 3) {
      subsets++;
      wrong += memcmp(got, secret, 32) != 0;
    } else {
      below += memcmp(got, secret, 32) == 0; /* two shares of a degree-2 polynomial say nothing */
    }
  }
  CHECK_EQ_INT(subsets, 42);
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT(below, 0);
}

static void test_given_coordinates(void) {
  const uint8_t xs[4] = {200, 7, 255, 1};
  uint8_t secret[5] = {1, 2, 3, 4, 5}, shares[4 * 6], got[5];
  bb_error err = {0};
  CHECK_EQ_INT(bb_shamir_split(secret, 5, 4, 4, xs, NULL, shares, &err), 0);
  for (int s = 0; s < 4; s++) CHECK_EQ_INT(shares[s * 6 + 5], xs[s]);
  CHECK_EQ_INT(bb_shamir_combine(shares, 4, 6, got, &err), 0);
  CHECK(memcmp(got, secret, 5) == 0);
  /* 255 shares, the most there are */
  static uint8_t many[255 * 3];
  CHECK_EQ_INT(bb_shamir_split(secret, 2, 255, 128, NULL, NULL, many, &err), 0);
  CHECK_EQ_INT(bb_shamir_combine(many + 3 * 100, 128, 3, got, &err), 0);
  CHECK(got[0] == 1 && got[1] == 2);
}

static void test_refusals(void) {
  uint8_t secret[4] = {9, 9, 9, 9}, shares[3 * 5], got[4];
  bb_error err = {0};
  CHECK_EQ_INT(bb_shamir_split(secret, 4, 3, 1, NULL, NULL, shares, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_shamir_split(secret, 4, 3, 4, NULL, NULL, shares, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_shamir_split(secret, 4, 256, 2, NULL, NULL, shares, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_shamir_split(secret, 0, 3, 2, NULL, NULL, shares, &err), BB_ERR_INVALID_ARGUMENT);
  const uint8_t repeated[3] = {4, 9, 4}, zero[3] = {1, 0, 2};
  CHECK_EQ_INT(bb_shamir_split(secret, 4, 3, 2, repeated, NULL, shares, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "repeated") != NULL);
  CHECK_EQ_INT(bb_shamir_split(secret, 4, 3, 2, zero, NULL, shares, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_shamir_split(secret, 4, 3, 2, NULL, NULL, shares, &err), 0);
  /* a share offered twice, and a share at x = 0, are malformed */
  uint8_t twice[2 * 5];
  memcpy(twice, shares, 5);
  memcpy(twice + 5, shares, 5);
  CHECK_EQ_INT(bb_shamir_combine(twice, 2, 5, got, &err), BB_ERR_MALFORMED);
  CHECK(strstr(err.message, "same x coordinate") != NULL);
  shares[4] = 0;
  CHECK_EQ_INT(bb_shamir_combine(shares, 3, 5, got, &err), BB_ERR_MALFORMED);
  CHECK_EQ_INT(bb_shamir_combine(shares, 3, 1, got, &err), BB_ERR_INVALID_ARGUMENT);
}

int main(void) {
  RUN(test_field);
  RUN(test_every_subset_reconstructs);
  RUN(test_given_coordinates);
  RUN(test_refusals);
  return bb_test_finish();
}
