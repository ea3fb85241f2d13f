/* Top-k sparse vectors (components/codecs/sparse.h): the selection against a brute-force
 * ranking (ties to the lower index), the byte layout, exact float32 and rounded float16
 * round trips, and a decoder given the bytes a hostile sender would write — k above n, a
 * length above the bound or unequal to the reference's, indices out of range, repeated or
 * out of order, NaN and infinity, an unknown value type, and every truncation and extension
 * of a valid encoding (each copied into a buffer of its exact length, so the sanitizer build
 * catches a read past it). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bb/bytes.h"
#include "bb/tensor.h"
#include "components/codecs/sparse.h"
#include "harness.h"

static uint64_t rng_state = 1;
static uint64_t rng_next(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

/* Whether i outranks j: a larger magnitude, or the same and a lower index. */
static bool outranks(const float *x, size_t i, size_t j) {
  return fabsf(x[i]) > fabsf(x[j]) || (fabsf(x[i]) == fabsf(x[j]) && i < j);
}

static void test_select_matches_brute_force(void) {
  for (int trial = 0; trial < 200; trial++) {
    const size_t n = 1 + rng_next() % 300, k = rng_next() % (n + 1);
    float *x = malloc(n * sizeof *x);
    uint32_t *idx = malloc((k ? k : 1) * sizeof *idx);
    /* few distinct magnitudes and both signs, so ties are common */
    for (size_t i = 0; i < n; i++) x[i] = (float)((int)(rng_next() % 9) - 4) * 0.5f;
    bb_error err;
    CHECK_MSG(bbi_sparse_select(x, n, k, idx, &err) == 0, "%s", err.message);
    /* exactly the entries outranked by fewer than k others, in increasing order */
    size_t found = 0;
    for (size_t i = 0; i < n; i++) {
      size_t above = 0;
      for (size_t j = 0; j < n; j++) above += outranks(x, j, i);
      if (above < k) {
        CHECK_MSG(found < k && idx[found] == i, "trial %d: entry %zu of rank %zu missing", trial, i, above);
        found++;
      }
    }
    CHECK_EQ_INT(found, k);
    free(x);
    free(idx);
  }
}

static void test_select_refuses_nonfinite(void) {
  float x[4] = {1, NAN, 2, 3};
  uint32_t idx[2];
  bb_error err;
  CHECK(bbi_sparse_select(x, 4, 2, idx, &err) == BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "value 1") != NULL);
  x[1] = INFINITY;
  CHECK(bbi_sparse_select(x, 4, 2, idx, &err) == BB_ERR_INVALID_ARGUMENT);
  CHECK(bbi_sparse_select(x, 4, 5, idx, &err) == BB_ERR_INVALID_ARGUMENT);
}

static void test_keep(void) {
  CHECK_EQ_INT(bbi_sparse_keep(0, 0.5), 0);
  CHECK_EQ_INT(bbi_sparse_keep(1000, 0.05), 50);
  CHECK_EQ_INT(bbi_sparse_keep(10, 0.001), 1);
  CHECK_EQ_INT(bbi_sparse_keep(10, 1.0), 10);
  CHECK_EQ_INT(bbi_sparse_keep(7, 0.5), 4);
}

/* x (n values) with its top k encoded as `values`; the caller frees *out. */
static uint8_t *encode_top(const float *x, size_t n, size_t k, bbi_sparse_values values, size_t *len) {
  uint32_t *idx = malloc((k ? k : 1) * sizeof *idx);
  bb_error err;
  CHECK(bbi_sparse_select(x, n, k, idx, &err) == 0);
  *len = bbi_sparse_encoded_size(k, values);
  uint8_t *out = malloc(*len);
  size_t written = 0;
  CHECK_MSG(bbi_sparse_encode(x, n, idx, k, values, out, *len, &written, &err) == 0, "%s", err.message);
  CHECK_EQ_INT(written, *len);
  free(idx);
  return out;
}

static void test_layout_and_round_trip(void) {
  const float x[6] = {0.5f, -3.0f, 0.25f, 2.0f, 0.1f, -0.0625f};
  size_t len = 0;
  uint8_t *b = encode_top(x, 6, 2, BBI_SPARSE_F32, &len);
  CHECK_EQ_INT(len, 9 + 2 * 8);
  CHECK_EQ_INT(bb_le_get_u32(b), 6);
  CHECK_EQ_INT(bb_le_get_u32(b + 4), 2);
  CHECK_EQ_INT(b[8], BBI_SPARSE_F32);
  CHECK_EQ_INT(bb_le_get_u32(b + 9), 1); /* -3 and 2, in index order */
  CHECK_EQ_INT(bb_le_get_u32(b + 13), 3);
  CHECK(bb_le_get_f32(b + 17) == -3.0f && bb_le_get_f32(b + 21) == 2.0f);
  float out[6];
  bb_error err;
  bbi_sparse_fault fault = BBI_SPARSE_OK;
  CHECK_MSG(bbi_sparse_decode(b, len, out, 6, &fault, &err) == 0, "%s", err.message);
  const float want[6] = {0, -3.0f, 0, 2.0f, 0, 0};
  CHECK(memcmp(out, want, sizeof want) == 0);
  free(b);

  /* float16 values: 6 bytes an entry, each value as binary16 rounds it */
  const float y[3] = {0.1f, -1000.3f, 3.14159f};
  b = encode_top(y, 3, 3, BBI_SPARSE_F16, &len);
  CHECK_EQ_INT(len, 9 + 3 * 6);
  CHECK_MSG(bbi_sparse_decode(b, len, out, 3, &fault, &err) == 0, "%s", err.message);
  for (int i = 0; i < 3; i++) {
    CHECK(out[i] == bb_f16_to_f32(bb_f32_to_f16(y[i])));
    CHECK(out[i] == bbi_sparse_stored(y[i], BBI_SPARSE_F16));
  }
  free(b);
}

/* Decodes a copy of bytes exactly len long; returns the code and the fault. */
static int decode_copy(const uint8_t *bytes, size_t len, size_t n, bbi_sparse_fault *fault) {
  uint8_t *copy = malloc(len ? len : 1);
  memcpy(copy, bytes, len);
  float *out = malloc((n ? n : 1) * sizeof *out);
  bb_error err;
  int rc = bbi_sparse_decode(copy, len, out, n, fault, &err);
  free(copy);
  free(out);
  return rc;
}

static void test_hostile_bytes(void) {
  const float x[8] = {1, -2, 3, -4, 5, -6, 7, -8};
  size_t len = 0;
  uint8_t *good = encode_top(x, 8, 3, BBI_SPARSE_F32, &len);
  bbi_sparse_fault fault;
  CHECK(decode_copy(good, len, 8, &fault) == 0 && fault == BBI_SPARSE_OK);
  /* every truncation and one byte more */
  for (size_t cut = 0; cut < len; cut++) {
    CHECK(decode_copy(good, cut, 8, &fault) == BB_ERR_MALFORMED);
    CHECK(fault == BBI_SPARSE_BAD_LENGTH);
  }
  uint8_t *longer = calloc(len + 1, 1);
  memcpy(longer, good, len);
  CHECK(decode_copy(longer, len + 1, 8, &fault) == BB_ERR_MALFORMED && fault == BBI_SPARSE_BAD_LENGTH);
  free(longer);

  uint8_t *bad = malloc(len);
#define MUTATE(stmt, want_fault)                                              \
  do {                                                                        \
    memcpy(bad, good, len);                                                   \
    stmt;                                                                     \
    CHECK(decode_copy(bad, len, 8, &fault) == BB_ERR_MALFORMED);              \
    CHECK_MSG(fault == (want_fault), "%s: fault %d", #stmt, (int)fault);      \
  } while (0)
  MUTATE(bb_le_put_u32(bad + 4, 9), BBI_SPARSE_BAD_COUNT);           /* k above n */
  MUTATE(bb_le_put_u32(bad + 4, 0xffffffffu), BBI_SPARSE_BAD_COUNT); /* a hostile k */
  MUTATE(bb_le_put_u32(bad, 9), BBI_SPARSE_BAD_EXPECTED);            /* n unlike the output's */
  MUTATE(bb_le_put_u32(bad, 0xffffffffu), BBI_SPARSE_BAD_EXPECTED);
  MUTATE(bad[8] = 3, BBI_SPARSE_BAD_LENGTH);                         /* unknown value type */
  MUTATE(bb_le_put_u32(bad + 9, 8), BBI_SPARSE_BAD_INDEX);           /* index == n */
  MUTATE(bb_le_put_u32(bad + 17, 0xffffffffu), BBI_SPARSE_BAD_INDEX);
  MUTATE(bb_le_put_u32(bad + 13, bb_le_get_u32(bad + 9)), BBI_SPARSE_BAD_INDEX); /* repeated */
  MUTATE(bb_le_put_u32(bad + 9, 7), BBI_SPARSE_BAD_INDEX);                        /* out of order */
  MUTATE(bb_le_put_f32(bad + 21, NAN), BBI_SPARSE_BAD_VALUE);
  MUTATE(bb_le_put_f32(bad + 25, -INFINITY), BBI_SPARSE_BAD_VALUE);
#undef MUTATE
  /* a length of its own, in bounds, with a count that lies about the bytes */
  memcpy(bad, good, len);
  bb_le_put_u32(bad + 4, 2);
  CHECK(decode_copy(bad, len, 8, &fault) == BB_ERR_MALFORMED && fault == BBI_SPARSE_BAD_LENGTH);
  free(bad);

  /* bbi_sparse_count: a bound without a reference */
  size_t n = 0;
  bb_error err;
  CHECK(bbi_sparse_count(good, len, 8, 0, &n, &fault, &err) == 0 && n == 8);
  CHECK(bbi_sparse_count(good, len, 7, 0, &n, &fault, &err) == BB_ERR_MALFORMED && fault == BBI_SPARSE_BAD_COUNT);
  CHECK(strstr(err.message, "at most") != NULL);
  CHECK(bbi_sparse_count(good, len, 100, 9, &n, &fault, &err) == BB_ERR_MALFORMED && fault == BBI_SPARSE_BAD_EXPECTED);
  CHECK(strstr(err.message, "reference") != NULL);
  free(good);
}

/* Random mutations of a valid encoding: never a crash, never a read outside the bytes;
 * whatever is accepted decodes to a finite vector of the expected length. */
static void test_random_mutations(void) {
  float x[64];
  for (int i = 0; i < 64; i++) x[i] = (float)((int)(rng_next() % 2001) - 1000) / 100.0f;
  size_t len = 0;
  uint8_t *good = encode_top(x, 64, 10, BBI_SPARSE_F16, &len);
  uint8_t *bad = malloc(len);
  float out[64];
  for (int trial = 0; trial < 5000; trial++) {
    memcpy(bad, good, len);
    for (int m = 0; m < 1 + (int)(rng_next() % 4); m++) bad[rng_next() % len] = (uint8_t)rng_next();
    bbi_sparse_fault fault;
    bb_error err;
    if (bbi_sparse_decode(bad, len, out, 64, &fault, &err) != 0) continue;
    for (int i = 0; i < 64; i++) CHECK(isfinite(out[i]));
  }
  free(bad);
  free(good);
}

int main(void) {
  RUN(test_select_matches_brute_force);
  RUN(test_select_refuses_nonfinite);
  RUN(test_keep);
  RUN(test_layout_and_round_trip);
  RUN(test_hostile_bytes);
  RUN(test_random_mutations);
  return bb_test_finish();
}
