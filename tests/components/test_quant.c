/* The float16 and uint8 codecs: exact conversions at the edges of half precision, the
 * documented error bounds on seeded random vectors, empty and constant vectors, inf and
 * NaN, the byte layout, and decoders given every truncation and corruption of a valid
 * encoding (each copied into a buffer of its exact length, so the sanitizer build
 * catches a read past it). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "bb/common.h"
#include "harness.h"
#include "components/codecs/quant.h"

static uint64_t rng_state;

static void rng_seed(uint64_t seed) { rng_state = seed; }

static uint64_t rng_next(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

static float rng_uniform(float lo, float hi) {
  /* in double, so that ranges as wide as ±FLT_MAX do not overflow */
  return (float)(lo + ((double)hi - lo) * ((double)(rng_next() >> 40) / (double)(1u << 24)));
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  return p;
}

static uint32_t bits_of(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

/* ---- float16 ------------------------------------------------------------------------- */

/* Encodes one value and returns its half-precision code. */
static uint16_t half_of(float v) {
  uint8_t buf[6];
  bb_error err;
  size_t written = 0;
  CHECK(bbi_quant_f16_encode(&v, 1, buf, sizeof buf, &written, &err) == 0);
  CHECK_EQ_INT(written, 6);
  return (uint16_t)(buf[4] | buf[5] << 8);
}

static float value_of_half(uint16_t h) {
  uint8_t buf[6] = {1, 0, 0, 0, (uint8_t)h, (uint8_t)(h >> 8)};
  float v = 0;
  size_t n = 0;
  bb_error err;
  CHECK(bbi_quant_f16_decode(buf, sizeof buf, &v, 1, &n, &err) == 0);
  CHECK_EQ_INT(n, 1);
  return v;
}

static void test_f16_edges(void) {
  static const struct {
    float v;
    uint16_t h;
  } cases[] = {
      {1.0f, 0x3c00},
      {-2.0f, 0xc000},
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {65504.0f, 0x7bff},              /* largest half */
      {65519.0f, 0x7bff},              /* below the midpoint to 2^16: rounds down */
      {65520.0f, 0x7c00},              /* the midpoint: to even, which is inf */
      {1e10f, 0x7c00},
      {-1e10f, 0xfc00},
      {INFINITY, 0x7c00},
      {-INFINITY, 0xfc00},
      {0x1p-14f, 0x0400},              /* smallest normal */
      {0x1p-24f, 0x0001},              /* smallest subnormal */
      {0x3ffp-24f, 0x03ff},            /* largest subnormal */
      {0x1p-25f, 0x0000},              /* half the smallest subnormal: ties to even 0 */
      {0x1.8p-25f, 0x0001},            /* above the tie: up */
      {0x3p-25f, 0x0002},              /* 1.5 subnormal steps: ties to even 2 */
      {1e-10f, 0x0000},
      {1.0f + 0x1p-11f, 0x3c00},       /* tie: stays on even 1.0 */
      {1.0f + 0x3p-11f, 0x3c02},       /* tie: up to even */
      {1.0f + 0x1.2p-11f, 0x3c01},     /* above the tie */
      {0.1f, 0x2e66},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const uint16_t h = half_of(cases[i].v);
    CHECK_MSG(h == cases[i].h, "%a encodes to 0x%04x, not 0x%04x", (double)cases[i].v, h,
              cases[i].h);
  }
  CHECK((half_of(NAN) & 0x7c00) == 0x7c00 && (half_of(NAN) & 0x03ff) != 0);
  CHECK(isnan(value_of_half(0x7e00)) && isnan(value_of_half(0xfc01)));
  CHECK(value_of_half(0x7c00) == INFINITY && value_of_half(0xfc00) == -INFINITY);
  CHECK(value_of_half(0x0001) == 0x1p-24f);
  CHECK(value_of_half(0x8001) == -0x1p-24f);
  CHECK(bits_of(value_of_half(0x8000)) == 0x80000000u);
}

/* Every half decodes to a float that encodes back to the same half (NaNs stay NaN). */
static void test_f16_every_code(void) {
  enum { N = 65536 };
  uint8_t *buf = xmalloc(4 + 2 * N), *again = xmalloc(4 + 2 * N);
  float *v = xmalloc(N * sizeof(float));
  buf[0] = 0;
  buf[1] = 0;
  buf[2] = 1;
  buf[3] = 0;
  for (uint32_t h = 0; h < N; h++) {
    buf[4 + 2 * h] = (uint8_t)h;
    buf[5 + 2 * h] = (uint8_t)(h >> 8);
  }
  bb_error err;
  size_t n = 0, written = 0;
  CHECK(bbi_quant_f16_decode(buf, 4 + 2 * N, v, N, &n, &err) == 0);
  CHECK_EQ_INT(n, N);
  CHECK(bbi_quant_f16_encode(v, N, again, 4 + 2 * N, &written, &err) == 0);
  size_t mismatches = 0;
  for (uint32_t h = 0; h < N; h++) {
    const int nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    const uint16_t back = (uint16_t)(again[4 + 2 * h] | again[5 + 2 * h] << 8);
    if (nan ? !isnan(v[h]) || (back & 0x7c00) != 0x7c00 || !(back & 0x3ff) : back != h)
      mismatches++;
  }
  CHECK_EQ_INT(mismatches, 0);
  free(buf);
  free(again);
  free(v);
}

/* Relative error at most 2^-11 over the normal range, at most 2^-25 absolute below it. */
static void test_f16_error_bound(void) {
  rng_seed(1);
  enum { N = 20000 };
  float *x = xmalloc(N * sizeof(float)), *y = xmalloc(N * sizeof(float));
  uint8_t *buf = xmalloc(bbi_quant_f16_encoded_size(N));
  for (size_t i = 0; i < N; i++) {
    const float mag = ldexpf(rng_uniform(1, 2), (int)(rng_next() % 46) - 30); /* 2^-30..2^16 */
    x[i] = (rng_next() & 1 ? -1 : 1) * fminf(mag, 65504.0f);
  }
  bb_error err;
  size_t written = 0, n = 0;
  CHECK(bbi_quant_f16_encode(x, N, buf, bbi_quant_f16_encoded_size(N), &written, &err) == 0);
  CHECK_EQ_INT(written, 4 + 2 * N);
  CHECK(bbi_quant_f16_decode(buf, written, y, N, &n, &err) == 0);
  double worst_rel = 0, worst_abs = 0;
  for (size_t i = 0; i < N; i++) {
    const double e = fabs((double)y[i] - (double)x[i]);
    if (fabsf(x[i]) >= 0x1p-14f)
      worst_rel = fmax(worst_rel, e / fabs((double)x[i]));
    else
      worst_abs = fmax(worst_abs, e);
  }
  CHECK_MSG(worst_rel <= 0x1p-11, "relative error %g", worst_rel);
  CHECK_MSG(worst_rel > 0x1p-13, "relative error %g: too good to be half precision", worst_rel);
  CHECK_MSG(worst_abs <= 0x1p-25, "subnormal error %g", worst_abs);
  free(x);
  free(y);
  free(buf);
}

/* ---- uint8 ----------------------------------------------------------------------------- */

/* Round trip of x through the uint8 codec, checking the bound; returns the scale. */
static float u8_round_trip(const float *x, size_t n, const char *what) {
  const size_t size = bbi_quant_u8_encoded_size(n);
  CHECK_EQ_INT(size, 9 + n);
  uint8_t *buf = xmalloc(size);
  float *y = xmalloc(n * sizeof(float));
  bb_error err;
  size_t written = 0, count = 99;
  int rc = bbi_quant_u8_encode(x, n, buf, size, &written, &err);
  CHECK_MSG(rc == 0, "%s: %s", what, err.message);
  CHECK_EQ_INT(written, size);
  CHECK(bbi_quant_u8_count(buf, size, &count, &err) == 0);
  CHECK_EQ_INT(count, n);
  CHECK(bbi_quant_u8_decode(buf, size, y, n, &count, &err) == 0);
  float scale;
  uint8_t zp;
  CHECK(bbi_quant_u8_params(x, n, &scale, &zp, &err) == 0);
  float header_scale;
  memcpy(&header_scale, buf + 4, 4); /* the test host is little-endian, like wasm */
  CHECK(header_scale == scale && buf[8] == zp);
  double worst = 0, excess = 0;
  for (size_t i = 0; i < n; i++) {
    const double e = fabs((double)y[i] - (double)x[i]);
    worst = fmax(worst, e);
    excess = fmax(excess, e - (scale / 2.0 + fabs((double)x[i]) * 0x1p-23));
    if (x[i] == 0.0f) CHECK_MSG(y[i] == 0.0f, "%s: 0 decodes to %g", what, (double)y[i]);
  }
  CHECK_MSG(excess <= 0, "%s: error %g exceeds scale/2 = %g", what, worst, scale / 2.0);
  free(buf);
  free(y);
  return scale;
}

static void test_u8_error_bound(void) {
  rng_seed(2);
  enum { N = 5000 };
  static const float ranges[][2] = {{-1, 1},   {-0.01f, 3}, {0.5f, 2},   {-7, -2},
                                    {100, 101}, {-1e-30f, 1e-30f}, {-3e38f, 3e38f},
                                    {-1, 1e-6f}, {-1.49f, 253.51f}, {-300, 2.2f}};
  float *x = xmalloc(N * sizeof(float));
  for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
    const float lo = ranges[r][0], hi = ranges[r][1];
    for (size_t i = 0; i < N; i++) x[i] = rng_uniform(lo, hi);
    x[0] = lo; /* the ends themselves */
    x[1] = hi;
    if (lo < 0 && hi > 0) x[2] = 0;
    char what[64];
    snprintf(what, sizeof what, "[%g, %g]", (double)lo, (double)hi);
    const float scale = u8_round_trip(x, N, what);
    /* the range, widened to hold 0, spread over 255 steps; a step more at most */
    const double span = fmax(hi, 0.0) - fmin(lo, 0.0);
    CHECK_MSG(scale >= span / 255 && scale <= span / 254 * 1.0001, "%s: scale %g for span %g",
              what, (double)scale, span);
  }
  free(x);
}

/* No zero point gives a smaller scale that still covers the range (brute force over all
 * 256, with the codec's float rounding up). */
static void test_u8_scale_is_smallest(void) {
  rng_seed(3);
  for (int trial = 0; trial < 500; trial++) {
    float x[2] = {rng_uniform(-10, 0), rng_uniform(0, 10)};
    if (trial % 5 == 0) x[0] = -ldexpf(x[0], -(trial % 30)); /* all positive */
    if (trial % 7 == 0) x[1] = -ldexpf(x[1], -(trial % 30)); /* all negative */
    const double lo = fmin(fmin(x[0], x[1]), 0), hi = fmax(fmax(x[0], x[1]), 0);
    double best = INFINITY;
    for (int zp = 0; zp < 256; zp++) {
      if ((lo < 0 && zp == 0) || (hi > 0 && zp == 255)) continue;
      best = fmin(best, fmax(zp ? -lo / zp : 0, zp < 255 ? hi / (255 - zp) : 0));
    }
    float scale;
    uint8_t zp;
    bb_error err;
    CHECK(bbi_quant_u8_params(x, 2, &scale, &zp, &err) == 0);
    CHECK_MSG((double)scale >= best && (double)nextafterf(scale, 0) < best,
              "[%g, %g]: scale %.9g, the best is %.9g", lo, hi, (double)scale, best);
  }
}

static void test_u8_edges(void) {
  bb_error err;
  /* empty */
  uint8_t empty[9];
  size_t written = 0, n = 7;
  CHECK(bbi_quant_u8_encode(NULL, 0, empty, sizeof empty, &written, &err) == 0);
  CHECK_EQ_INT(written, 9);
  CHECK(bbi_quant_u8_decode(empty, 9, NULL, 0, &n, &err) == 0);
  CHECK_EQ_INT(n, 0);
  uint8_t empty16[4];
  CHECK(bbi_quant_f16_encode(NULL, 0, empty16, sizeof empty16, &written, &err) == 0);
  CHECK_EQ_INT(written, 4);
  CHECK(bbi_quant_f16_decode(empty16, 4, NULL, 0, &n, &err) == 0);
  CHECK_EQ_INT(n, 0);

  /* all zeros: scale 0, exact */
  float zeros[5] = {0, -0.0f, 0, 0, 0};
  CHECK(u8_round_trip(zeros, 5, "zeros") == 0.0f);

  /* constant vectors */
  float c[6] = {3, 3, 3, 3, 3, 3}, neg[3] = {-0.25f, -0.25f, -0.25f};
  u8_round_trip(c, 6, "constant 3");
  u8_round_trip(neg, 3, "constant -0.25");
  float tiny[2] = {1e-45f, 0};
  u8_round_trip(tiny, 2, "smallest subnormal");

  /* byte layout */
  float v[3] = {-1, 0, 1};
  uint8_t buf[12];
  CHECK(bbi_quant_u8_encode(v, 3, buf, sizeof buf, &written, &err) == 0);
  CHECK(buf[0] == 3 && buf[1] == 0 && buf[2] == 0 && buf[3] == 0);
  float scale;
  memcpy(&scale, buf + 4, 4);
  CHECK((double)scale >= 1.0 / 127 && (double)nextafterf(scale, 0) < 1.0 / 127); /* rounded up */
  /* the ideal zero point 127.5: 127 and 128 both need the scale 1/127; the lower wins */
  CHECK(buf[8] == 127);
  CHECK(buf[9] == 0 && buf[10] == 127 && buf[11] == 254);

  /* float16 layout: u32 count, then each code little-endian (codes from numpy) */
  const float hv[4] = {1, -2, 65504, 0.1f};
  uint8_t henc[12];
  static const uint8_t hexpect[12] = {4, 0, 0, 0, 0x00, 0x3c, 0x00, 0xc0, 0xff, 0x7b, 0x66, 0x2e};
  CHECK(bbi_quant_f16_encode(hv, 4, henc, sizeof henc, &written, &err) == 0);
  CHECK_EQ_INT(written, 12);
  CHECK(memcmp(henc, hexpect, sizeof hexpect) == 0);

  /* non-finite values are refused, naming the index */
  float bad[4] = {1, 2, INFINITY, 3};
  CHECK(bbi_quant_u8_encode(bad, 4, buf, sizeof buf + 1, &written, &err) != 0);
  uint8_t big[16];
  CHECK(bbi_quant_u8_encode(bad, 4, big, sizeof big, &written, &err) == BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "value 2") != NULL);
  bad[2] = NAN;
  CHECK(bbi_quant_u8_encode(bad, 4, big, sizeof big, &written, &err) == BB_ERR_INVALID_ARGUMENT);

  /* float16 keeps them */
  float specials[4] = {INFINITY, -INFINITY, NAN, 1e6f}, back[4];
  uint8_t h[12];
  CHECK(bbi_quant_f16_encode(specials, 4, h, sizeof h, &written, &err) == 0);
  CHECK(bbi_quant_f16_decode(h, sizeof h, back, 4, &n, &err) == 0);
  CHECK(back[0] == INFINITY && back[1] == -INFINITY && isnan(back[2]) && back[3] == INFINITY);

  /* output buffers that are too small */
  CHECK(bbi_quant_f16_encode(v, 3, h, 9, &written, &err) == BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "10 bytes") != NULL);
  CHECK(bbi_quant_u8_encode(v, 3, buf, 11, &written, &err) == BB_ERR_INVALID_ARGUMENT);
  CHECK(bbi_quant_u8_encode(v, 3, buf, sizeof buf, &written, &err) == 0);
  float out[3] = {7, 7, 7};
  CHECK(bbi_quant_u8_decode(buf, sizeof buf, out, 2, &n, &err) == BB_ERR_INVALID_ARGUMENT);
  CHECK(out[0] == 7 && out[1] == 7); /* not written */
  CHECK(bbi_quant_f16_encoded_size(3) == 10 && bbi_quant_u8_encoded_size(3) == 12);
  CHECK(bbi_quant_f16_encoded_size(SIZE_MAX) == 0 && bbi_quant_u8_encoded_size(SIZE_MAX) == 0);
}

/* ---- malformed input -------------------------------------------------------------------- */

typedef int (*decode_fn)(const uint8_t *, size_t, float *, size_t, size_t *, bb_error *);
typedef int (*count_fn)(const uint8_t *, size_t, size_t *, bb_error *);

/* Decodes len bytes of src from a heap block of exactly len bytes. */
static int decode_exact(decode_fn decode, const uint8_t *src, size_t len, float *out,
                        size_t cap, bb_error *err) {
  uint8_t *copy = xmalloc(len);
  if (len) memcpy(copy, src, len);
  size_t n = 0;
  const int rc = decode(len ? copy : NULL, len, out, cap, &n, err);
  free(copy);
  return rc;
}

static void check_truncations(const char *codec, decode_fn decode, count_fn count,
                              const uint8_t *enc, size_t len) {
  float out[64];
  bb_error err;
  for (size_t cut = 0; cut < len; cut++) {
    const int rc = decode_exact(decode, enc, cut, out, 64, &err);
    CHECK_MSG(rc == BB_ERR_MALFORMED, "%s cut to %zu bytes: %d", codec, cut, rc);
    CHECK(err.message[0] != '\0');
    size_t n;
    CHECK(count(cut ? enc : NULL, cut, &n, &err) == BB_ERR_MALFORMED);
  }
  /* a trailing byte */
  uint8_t *longer = xmalloc(len + 1);
  memcpy(longer, enc, len);
  longer[len] = 0;
  CHECK(decode_exact(decode, longer, len + 1, out, 64, &err) == BB_ERR_MALFORMED);
  CHECK(strstr(err.message, "byte 0") != NULL);
  /* counts that claim more or far more than there is */
  static const uint32_t counts[] = {11, 0xffffffffu, 0x80000000u, 0x7fffffffu};
  for (size_t i = 0; i < 4; i++) {
    memcpy(longer, enc, len);
    longer[0] = (uint8_t)counts[i];
    longer[1] = (uint8_t)(counts[i] >> 8);
    longer[2] = (uint8_t)(counts[i] >> 16);
    longer[3] = (uint8_t)(counts[i] >> 24);
    CHECK(decode_exact(decode, longer, len, out, 64, &err) == BB_ERR_MALFORMED);
  }
  free(longer);
  CHECK(decode_exact(decode, enc, len, out, 64, &err) == 0);
}

static void test_malformed(void) {
  float v[10] = {0.5f, -1, 2, 0, 3.25f, -0.125f, 1e-3f, 7, -7, 1};
  uint8_t f16[24], u8[19];
  bb_error err;
  size_t written;
  CHECK(bbi_quant_f16_encode(v, 10, f16, sizeof f16, &written, &err) == 0);
  CHECK(bbi_quant_u8_encode(v, 10, u8, sizeof u8, &written, &err) == 0);
  check_truncations("f16", bbi_quant_f16_decode, bbi_quant_f16_count, f16, sizeof f16);
  check_truncations("u8", bbi_quant_u8_decode, bbi_quant_u8_count, u8, sizeof u8);

  /* scales that are not finite and >= 0 */
  static const float bad_scales[] = {-1.0f, NAN, INFINITY, -0x1p-149f};
  float out[10];
  for (size_t i = 0; i < 4; i++) {
    uint8_t copy[19];
    memcpy(copy, u8, sizeof copy);
    memcpy(copy + 4, &bad_scales[i], 4);
    CHECK(bbi_quant_u8_decode(copy, sizeof copy, out, 10, NULL, &err) == BB_ERR_MALFORMED);
    CHECK(strstr(err.message, "scale at byte 4") != NULL);
  }
}

int main(void) {
  RUN(test_f16_edges);
  RUN(test_f16_every_code);
  RUN(test_f16_error_bound);
  RUN(test_u8_error_bound);
  RUN(test_u8_scale_is_smallest);
  RUN(test_u8_edges);
  RUN(test_malformed);
  return bb_test_finish();
}
