/* float16 and bfloat16 conversions against bit patterns computed outside this code
 * (numpy's float16 casts; bfloat16 by the definition: the float's high 16 bits, rounded
 * to nearest even): normals, subnormals, the largest finite value, overflow, underflow,
 * ties, signed zeros, infinities and NaN. */
#include <math.h>
#include <string.h>

#include "bb/tensor.h"
#include "harness.h"

static float float_of(uint32_t bits) {
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* float32 bits → float16 bits, from numpy.float32(...).astype(numpy.float16). */
static const struct {
  uint32_t f32;
  uint16_t f16;
} TO_F16[] = {
    {0x00000000u, 0x0000}, /* 0 */
    {0x80000000u, 0x8000}, /* -0 */
    {0x3f800000u, 0x3c00}, /* 1 */
    {0xbf800000u, 0xbc00}, /* -1 */
    {0x477fe000u, 0x7bff}, /* 65504, the largest finite float16 */
    {0x477fefffu, 0x7bff}, /* just below 65520: still 65504 */
    {0x477ff000u, 0x7c00}, /* 65520: the tie with 65536 goes to the even pattern, inf */
    {0x47c35000u, 0x7c00}, /* 1e5: overflow */
    {0x322bcc77u, 0x0000}, /* 1e-8: underflow to zero */
    {0x33800000u, 0x0001}, /* 2^-24, the smallest subnormal */
    {0x33000000u, 0x0000}, /* 2^-25: the tie between 0 and 2^-24 goes to 0 */
    {0x33000001u, 0x0001}, /* just above 2^-25 */
    {0x33c00000u, 0x0002}, /* 3·2^-25: the tie between codes 1 and 2 goes to 2 */
    {0x38800000u, 0x0400}, /* 2^-14, the smallest normal */
    {0x387fc000u, 0x03ff}, /* the largest subnormal */
    {0x3f801000u, 0x3c00}, /* 1 + 2^-11: the tie goes down to 1 (even) */
    {0x3f803000u, 0x3c02}, /* 1 + 3·2^-11: the tie goes up to the even code */
    {0x3dcccccdu, 0x2e66}, /* 0.1 */
    {0x40490fd0u, 0x4248}, /* 3.14159 */
    {0xc0200000u, 0xc100}, /* -2.5 */
    {0x7f800000u, 0x7c00}, /* inf */
    {0xff800000u, 0xfc00}, /* -inf */
    {0x7fc00000u, 0x7e00}, /* the quiet NaN */
    {0xffc00000u, 0xfe00}, /* the negative quiet NaN */
};

/* float16 bits → float32 bits, from numpy.float16(...).astype(numpy.float32). */
static const struct {
  uint16_t f16;
  uint32_t f32;
} FROM_F16[] = {
    {0x0000, 0x00000000u}, {0x8000, 0x80000000u}, /* signed zeros */
    {0x0001, 0x33800000u},                        /* 2^-24 */
    {0x03ff, 0x387fc000u},                        /* the largest subnormal */
    {0x0400, 0x38800000u},                        /* the smallest normal */
    {0x3555, 0x3eaaa000u},                        /* 0.333251953125 */
    {0x3c00, 0x3f800000u},                        /* 1 */
    {0x7bff, 0x477fe000u},                        /* 65504 */
    {0x8001, 0xb3800000u},                        /* -2^-24 */
    {0xc000, 0xc0000000u},                        /* -2 */
    {0x7c00, 0x7f800000u}, {0xfc00, 0xff800000u}, /* ±inf */
    {0x7e00, 0x7fc00000u}, {0xfe00, 0xffc00000u}, /* quiet NaNs */
    {0x7d01, 0x7fa02000u},                        /* a NaN's payload moves to the high bits */
};

static void test_f32_to_f16(void) {
  for (size_t i = 0; i < sizeof TO_F16 / sizeof *TO_F16; i++) {
    uint16_t got = bb_f32_to_f16(float_of(TO_F16[i].f32));
    CHECK_MSG(got == TO_F16[i].f16, "0x%08x gave 0x%04x, numpy 0x%04x", TO_F16[i].f32, got, TO_F16[i].f16);
  }
  /* any NaN stays a NaN, quiet, with its sign */
  static const uint32_t nans[] = {0x7f800001u, 0x7fa02000u, 0xff800001u, 0x7fffffffu};
  for (size_t i = 0; i < sizeof nans / sizeof *nans; i++) {
    uint16_t h = bb_f32_to_f16(float_of(nans[i]));
    CHECK_MSG((h & 0x7e00) == 0x7e00 && (h & 0x8000) == ((nans[i] >> 16) & 0x8000), "0x%08x gave 0x%04x", nans[i], h);
  }
}

static void test_f16_to_f32(void) {
  for (size_t i = 0; i < sizeof FROM_F16 / sizeof *FROM_F16; i++) {
    uint32_t got = bits_of(bb_f16_to_f32(FROM_F16[i].f16));
    CHECK_MSG(got == FROM_F16[i].f32, "0x%04x gave 0x%08x, numpy 0x%08x", FROM_F16[i].f16, got, FROM_F16[i].f32);
  }
  /* every code: the value a float16 stands for, (-1)^s · 2^(e-15) · 1.m or 2^-14 · 0.m,
   * converts back to the same code (NaNs to a NaN) */
  for (uint32_t h = 0; h <= 0xffff; h++) {
    uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float f = bb_f16_to_f32((uint16_t)h);
    if (e == 0x1f) {
      CHECK(m ? isnan(f) : isinf(f));
      continue;
    }
    double want = e ? ldexp(1.0 + m / 1024.0, (int)e - 15) : ldexp(m / 1024.0, -14);
    if (h & 0x8000) want = -want;
    CHECK_MSG((double)f == want && !!signbit(f) == !!(h & 0x8000), "0x%04x gave %g, want %g", h, (double)f, want);
    CHECK_MSG(bb_f32_to_f16(f) == h, "0x%04x does not come back", h);
  }
}

/* bfloat16 by its definition: the high half of the float, rounded to nearest even. */
static void test_bf16(void) {
  static const struct {
    uint32_t f32;
    uint16_t bf16;
  } TO[] = {
      {0x00000000u, 0x0000}, {0x80000000u, 0x8000}, /* signed zeros */
      {0x3f800000u, 0x3f80},                        /* 1 */
      {0x3f808000u, 0x3f80},                        /* 1 + 2^-8: the tie goes down to the even code */
      {0x3f818000u, 0x3f82},                        /* 1 + 3·2^-8: the tie goes up */
      {0x3f808001u, 0x3f81},                        /* just above the tie */
      {0x3f807fffu, 0x3f80},                        /* just below it */
      {0x7f7fffffu, 0x7f80},                        /* the largest float rounds to inf */
      {0x00000001u, 0x0000},                        /* the smallest float subnormal */
      {0x00018000u, 0x0002},                        /* a subnormal tie to even */
      {0xc0490fdbu, 0xc049},                        /* -pi */
      {0x7f800000u, 0x7f80}, {0xff800000u, 0xff80}, /* ±inf */
      {0x7fc00000u, 0x7fc0}, {0xffc00000u, 0xffc0}, /* quiet NaNs */
  };
  for (size_t i = 0; i < sizeof TO / sizeof *TO; i++) {
    uint16_t got = bb_f32_to_bf16(float_of(TO[i].f32));
    CHECK_MSG(got == TO[i].bf16, "0x%08x gave 0x%04x, want 0x%04x", TO[i].f32, got, TO[i].bf16);
  }
  /* a NaN never rounds into inf: 0x7fff8000 would carry into the exponent */
  uint16_t h = bb_f32_to_bf16(float_of(0x7fff8000u));
  CHECK((h & 0x7fc0) == 0x7fc0);
  h = bb_f32_to_bf16(float_of(0x7f800001u));
  CHECK((h & 0x7fc0) == 0x7fc0);
  /* every code widens to the float with those high bits and comes back */
  for (uint32_t b = 0; b <= 0xffff; b++) {
    float f = bb_bf16_to_f32((uint16_t)b);
    CHECK(bits_of(f) == b << 16);
    if (!isnan(f)) CHECK(bb_f32_to_bf16(f) == b);
  }
}

int main(void) {
  RUN(test_f32_to_f16);
  RUN(test_f16_to_f32);
  RUN(test_bf16);
  return bb_test_finish();
}
