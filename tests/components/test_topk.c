/* Top-k sparse vectors (components/codecs/sparse.h): the selection against a brute-force
 * ranking (ties to the lower index), the byte layout with a list and with a bitmap, round
 * trips with float32, float16 and uint8 values, and a decoder given the bytes a hostile
 * sender would write — k above n, a length above the bound or unequal to the reference's,
 * indices out of range, repeated or out of order, a bitmap with too many or too few bits or
 * bits past n, NaN, infinity and bad scales, unknown forms, and every truncation and
 * extension of a valid encoding (each copied into a buffer of its exact length, so the
 * sanitizer build catches a read past it). */
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

/* x (n values) with its top k encoded as `values`; the caller frees *out. kept (may be
 * NULL) gets the kept values as decoded. */
static uint8_t *encode_top(const float *x, size_t n, size_t k, bbi_sparse_values values, size_t *len, float *kept) {
  uint32_t *idx = malloc((k ? k : 1) * sizeof *idx);
  float *scratch = kept ? kept : malloc((k ? k : 1) * sizeof *scratch);
  bb_error err;
  CHECK(bbi_sparse_select(x, n, k, idx, &err) == 0);
  *len = bbi_sparse_encoded_size(n, k, values);
  uint8_t *out = malloc(*len);
  size_t written = 0;
  CHECK_MSG(bbi_sparse_encode(x, n, idx, k, values, out, *len, &written, scratch, &err) == 0, "%s", err.message);
  CHECK_EQ_INT(written, *len);
  free(idx);
  if (!kept) free(scratch);
  return out;
}

static void test_layout_and_round_trip(void) {
  /* 2 of 100: a list of indices (8 bytes) is shorter than the bitmap (13) */
  float x[100] = {0};
  x[1] = -3.0f, x[3] = 2.0f, x[50] = 0.5f;
  size_t len = 0;
  uint8_t *b = encode_top(x, 100, 2, BBI_SPARSE_F32, &len, NULL);
  CHECK_EQ_INT(len, 10 + 2 * 4 + 2 * 4);
  CHECK_EQ_INT(bb_le_get_u32(b), 100);
  CHECK_EQ_INT(bb_le_get_u32(b + 4), 2);
  CHECK_EQ_INT(b[8], BBI_SPARSE_LIST);
  CHECK_EQ_INT(b[9], BBI_SPARSE_F32);
  CHECK_EQ_INT(bb_le_get_u32(b + 10), 1); /* -3 and 2, in index order */
  CHECK_EQ_INT(bb_le_get_u32(b + 14), 3);
  CHECK(bb_le_get_f32(b + 18) == -3.0f && bb_le_get_f32(b + 22) == 2.0f);
  float out[100];
  bb_error err;
  bbi_sparse_fault fault = BBI_SPARSE_OK;
  CHECK_MSG(bbi_sparse_decode(b, len, out, 100, &fault, &err) == 0, "%s", err.message);
  for (int i = 0; i < 100; i++) CHECK(out[i] == (i == 1 || i == 3 ? x[i] : 0.0f));
  free(b);

  /* 3 of 6: the bitmap (1 byte) is shorter; float16 values as the float16 codec writes them */
  const float y[6] = {0.1f, -1000.3f, 0.0f, 3.14159f, 0.01f, 7.0f};
  float kept[3];
  b = encode_top(y, 6, 3, BBI_SPARSE_F16, &len, kept);
  CHECK_EQ_INT(len, 10 + 1 + 4 + 3 * 2);
  CHECK_EQ_INT(b[8], BBI_SPARSE_BITMAP);
  CHECK_EQ_INT(b[10], (1 << 1) | (1 << 3) | (1 << 5));
  CHECK_EQ_INT(bb_le_get_u32(b + 11), 3);
  CHECK_MSG(bbi_sparse_decode(b, len, out, 6, &fault, &err) == 0, "%s", err.message);
  const int at[3] = {1, 3, 5};
  for (int j = 0; j < 3; j++) {
    CHECK(out[at[j]] == bb_f16_to_f32(bb_f32_to_f16(y[at[j]])));
    CHECK(kept[j] == out[at[j]]);
  }
  CHECK(out[0] == 0 && out[2] == 0 && out[4] == 0);
  free(b);

  /* uint8 values: the kept values decode within half a step of the uint8 codec's scale */
  float z[300];
  for (int i = 0; i < 300; i++) z[i] = (float)((i * 37) % 101 - 50) / 7.0f;
  float kept_u8[90];
  uint32_t idx[90];
  CHECK(bbi_sparse_select(z, 300, 90, idx, &err) == 0);
  b = encode_top(z, 300, 90, BBI_SPARSE_U8, &len, kept_u8);
  CHECK_EQ_INT(len, 10 + 38 + 9 + 90);
  CHECK_EQ_INT(b[8], BBI_SPARSE_BITMAP);
  float dense[300];
  CHECK_MSG(bbi_sparse_decode(b, len, dense, 300, &fault, &err) == 0, "%s", err.message);
  const float scale = bb_le_get_f32(b + 10 + 38 + 4);
  for (int i = 0, j = 0; i < 300; i++) {
    if (j < 90 && idx[j] == (uint32_t)i) {
      CHECK_MSG(fabsf(dense[i] - z[i]) <= scale / 2 + 1e-6f, "value %d: %g for %g", i, dense[i], z[i]);
      CHECK(kept_u8[j++] == dense[i]);
    } else {
      CHECK(dense[i] == 0.0f);
    }
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

/* Every truncation and one byte more of a valid encoding: refused as a length. */
static void check_lengths(const uint8_t *good, size_t len, size_t n) {
  bbi_sparse_fault fault;
  CHECK(decode_copy(good, len, n, &fault) == 0 && fault == BBI_SPARSE_OK);
  for (size_t cut = 0; cut < len; cut++) {
    CHECK(decode_copy(good, cut, n, &fault) == BB_ERR_MALFORMED);
    CHECK_MSG(fault == BBI_SPARSE_BAD_LENGTH || (cut >= 10 && fault == BBI_SPARSE_BAD_VALUE), "cut %zu: fault %d", cut,
              (int)fault);
  }
  uint8_t *longer = calloc(len + 1, 1);
  memcpy(longer, good, len);
  CHECK(decode_copy(longer, len + 1, n, &fault) == BB_ERR_MALFORMED && fault == BBI_SPARSE_BAD_LENGTH);
  free(longer);
}

#define MUTATE(good, len, n, stmt, want_fault)                                \
  do {                                                                        \
    uint8_t *bad = malloc(len);                                               \
    memcpy(bad, good, len);                                                   \
    stmt;                                                                     \
    bbi_sparse_fault fault_;                                                  \
    CHECK(decode_copy(bad, len, n, &fault_) == BB_ERR_MALFORMED);             \
    CHECK_MSG(fault_ == (want_fault), "%s: fault %d", #stmt, (int)fault_);    \
    free(bad);                                                                \
  } while (0)

static void test_hostile_list(void) {
  /* 3 of 200 as a list: indices at bytes 10, 14, 18, float32 values at 22, 26, 30 */
  float x[200] = {0};
  x[5] = 1, x[9] = -2, x[40] = 3;
  size_t len = 0;
  uint8_t *good = encode_top(x, 200, 3, BBI_SPARSE_F32, &len, NULL);
  CHECK_EQ_INT(good[8], BBI_SPARSE_LIST);
  check_lengths(good, len, 200);
  MUTATE(good, len, 200, bb_le_put_u32(bad + 4, 201), BBI_SPARSE_BAD_COUNT);        /* k above n */
  MUTATE(good, len, 200, bb_le_put_u32(bad + 4, 0xffffffffu), BBI_SPARSE_BAD_COUNT); /* a hostile k */
  MUTATE(good, len, 200, bb_le_put_u32(bad, 201), BBI_SPARSE_BAD_EXPECTED);          /* n unlike the output's */
  MUTATE(good, len, 200, bb_le_put_u32(bad, 0xffffffffu), BBI_SPARSE_BAD_EXPECTED);
  MUTATE(good, len, 200, bad[8] = 3, BBI_SPARSE_BAD_LENGTH); /* unknown index form */
  MUTATE(good, len, 200, bad[9] = 4, BBI_SPARSE_BAD_LENGTH); /* unknown value form */
  MUTATE(good, len, 200, bb_le_put_u32(bad + 10, 200), BBI_SPARSE_BAD_INDEX); /* index == n */
  MUTATE(good, len, 200, bb_le_put_u32(bad + 18, 0xffffffffu), BBI_SPARSE_BAD_INDEX);
  MUTATE(good, len, 200, bb_le_put_u32(bad + 14, 5), BBI_SPARSE_BAD_INDEX);  /* repeated */
  MUTATE(good, len, 200, bb_le_put_u32(bad + 10, 39), BBI_SPARSE_BAD_INDEX); /* out of order */
  MUTATE(good, len, 200, bb_le_put_f32(bad + 26, NAN), BBI_SPARSE_BAD_VALUE);
  MUTATE(good, len, 200, bb_le_put_f32(bad + 30, -INFINITY), BBI_SPARSE_BAD_VALUE);
  /* a count that lies about the bytes */
  MUTATE(good, len, 200, bb_le_put_u32(bad + 4, 2), BBI_SPARSE_BAD_LENGTH);
  free(good);

  /* bbi_sparse_count: a bound without a reference */
  good = encode_top(x, 200, 3, BBI_SPARSE_F32, &len, NULL);
  size_t n = 0;
  bbi_sparse_fault fault;
  bb_error err;
  CHECK(bbi_sparse_count(good, len, 200, 0, &n, &fault, &err) == 0 && n == 200);
  CHECK(bbi_sparse_count(good, len, 199, 0, &n, &fault, &err) == BB_ERR_MALFORMED && fault == BBI_SPARSE_BAD_COUNT);
  CHECK(strstr(err.message, "at most") != NULL);
  CHECK(bbi_sparse_count(good, len, 300, 201, &n, &fault, &err) == BB_ERR_MALFORMED && fault == BBI_SPARSE_BAD_EXPECTED);
  CHECK(strstr(err.message, "reference") != NULL);
  free(good);
}

static void test_hostile_bitmap(void) {
  /* 20 of 60 as a bitmap (8 bytes at 10; the last byte's top 4 bits lie past n), uint8
   * values (the uint8 codec's 9 + 20 bytes at 18: count, scale at 22, zero point, codes) */
  float x[60];
  for (int i = 0; i < 60; i++) x[i] = (float)((i * 7) % 13) - 6.0f;
  size_t len = 0;
  uint8_t *good = encode_top(x, 60, 20, BBI_SPARSE_U8, &len, NULL);
  CHECK_EQ_INT(good[8], BBI_SPARSE_BITMAP);
  CHECK_EQ_INT(len, 10 + 8 + 9 + 20);
  check_lengths(good, len, 60);
  int first = 0;
  while (!(good[10 + first / 8] >> (first % 8) & 1)) first++;
  MUTATE(good, len, 60, bad[10 + first / 8] ^= (uint8_t)(1u << (first % 8)), BBI_SPARSE_BAD_INDEX); /* 19 bits set */
  MUTATE(good, len, 60, bad[17] |= 0x10, BBI_SPARSE_BAD_INDEX);                                     /* bit 60 */
  MUTATE(good, len, 60, bad[17] |= 0x80, BBI_SPARSE_BAD_INDEX);                                     /* bit 63 */
  MUTATE(good, len, 60, bb_le_put_u32(bad + 18, 21), BBI_SPARSE_BAD_VALUE); /* the value block's own count lies */
  MUTATE(good, len, 60, bb_le_put_f32(bad + 22, NAN), BBI_SPARSE_BAD_VALUE);
  MUTATE(good, len, 60, bb_le_put_f32(bad + 22, -1.0f), BBI_SPARSE_BAD_VALUE);
  MUTATE(good, len, 60, bb_le_put_f32(bad + 22, 3e38f), BBI_SPARSE_BAD_VALUE); /* codes overflow to infinity */
  free(good);
}

/* Random mutations of valid encodings: never a crash, never a read outside the bytes;
 * whatever is accepted decodes to a finite vector of the expected length. */
static void test_random_mutations(void) {
  float x[64];
  for (int i = 0; i < 64; i++) x[i] = (float)((int)(rng_next() % 2001) - 1000) / 100.0f;
  const bbi_sparse_values forms[3] = {BBI_SPARSE_F32, BBI_SPARSE_F16, BBI_SPARSE_U8};
  const size_t ks[2] = {3, 30};
  for (int f = 0; f < 6; f++) {
    size_t len = 0;
    uint8_t *good = encode_top(x, 64, ks[f % 2], forms[f / 2], &len, NULL);
    uint8_t *bad = malloc(len);
    float out[64];
    for (int trial = 0; trial < 2000; trial++) {
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
}

/* Encode then decode over many shapes and forms gives exactly the kept values at their
 * indices and zeros elsewhere. */
static void test_round_trips(void) {
  const bbi_sparse_values forms[3] = {BBI_SPARSE_F32, BBI_SPARSE_F16, BBI_SPARSE_U8};
  for (int trial = 0; trial < 300; trial++) {
    const size_t n = 1 + rng_next() % 200, k = rng_next() % (n + 1);
    float *x = malloc(n * sizeof *x), *out = malloc(n * sizeof *out), *kept = malloc((k ? k : 1) * sizeof *kept);
    for (size_t i = 0; i < n; i++) x[i] = (float)((int)(rng_next() % 2001) - 1000) / 64.0f;
    size_t len = 0;
    uint8_t *b = encode_top(x, n, k, forms[trial % 3], &len, kept);
    bbi_sparse_fault fault;
    bb_error err;
    CHECK_MSG(bbi_sparse_decode(b, len, out, n, &fault, &err) == 0, "%s", err.message);
    uint32_t *idx = malloc((k ? k : 1) * sizeof *idx);
    CHECK(bbi_sparse_select(x, n, k, idx, &err) == 0);
    for (size_t i = 0, j = 0; i < n; i++) {
      const bool is_kept = j < k && idx[j] == i;
      CHECK_MSG(is_kept ? out[i] == kept[j] : out[i] == 0.0f, "trial %d: value %zu", trial, i);
      j += is_kept;
    }
    free(idx);
    free(b);
    free(x);
    free(out);
    free(kept);
  }
}

int main(void) {
  RUN(test_select_matches_brute_force);
  RUN(test_select_refuses_nonfinite);
  RUN(test_keep);
  RUN(test_layout_and_round_trip);
  RUN(test_hostile_list);
  RUN(test_hostile_bitmap);
  RUN(test_random_mutations);
  RUN(test_round_trips);
  return bb_test_finish();
}
