/* float16 and uint8 affine codecs for float32 vectors; the layouts are in quant.h. The
 * half-precision conversions are the tensor layer's (bb/tensor.h: round to nearest even,
 * subnormals, inf and NaN), so a value encodes exactly as a float16 tensor holds it. */
#include "components/codecs/quant.h"

#include <math.h>

#include "bb/tensor.h"
#include "bb/bytes.h"
#include "bb/common.h"
#include "tensor/kernels/kernels.h"

/* ---- sizes ----------------------------------------------------------------------------- */

/* header + n * width, or 0 when n overflows the count field or a size_t. */
static size_t encoded_size(size_t n, size_t header, size_t width) {
  if ((uint64_t)n > BBI_QUANT_MAX_COUNT || n > (SIZE_MAX - header) / width) return 0;
  return header + n * width;
}

size_t bbi_quant_f16_encoded_size(size_t n) { return encoded_size(n, BBI_QUANT_F16_HEADER, 2); }
size_t bbi_quant_u8_encoded_size(size_t n) { return encoded_size(n, BBI_QUANT_U8_HEADER, 1); }

static int check_encode(const char *codec, const float *x, size_t n, const uint8_t *out,
                        size_t cap, size_t need, bb_error *err) {
  if (need == 0)
    return bb_error_set(err, BB_ERR_LIMIT, "%s codec: %zu values exceed the u32 count", codec,
                        n);
  if ((n && !x) || !out)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s codec: NULL input or output", codec);
  if (cap < need)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "%s codec: %zu values need %zu bytes, the buffer has %zu", codec, n,
                        need, cap);
  return 0;
}

/* Reads the count at byte 0 and checks that len is exactly header + count * width. */
static int read_count(const char *codec, const uint8_t *in, size_t len, size_t header,
                      size_t width, size_t *n, bb_error *err) {
  if (!in && len)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s codec: NULL input", codec);
  if (len < header)
    return bb_error_set(err, BB_ERR_MALFORMED,
                        "%s codec: %zu bytes end inside the %zu-byte header", codec, len,
                        header);
  const uint32_t count = bb_le_get_u32(in);
  const uint64_t need = (uint64_t)header + (uint64_t)count * width;
  if ((uint64_t)len != need)
    return bb_error_set(err, BB_ERR_MALFORMED,
                        "%s codec: the count at byte 0 says %lu values (%llu bytes), but "
                        "there are %zu bytes",
                        codec, (unsigned long)count, (unsigned long long)need, len);
  *n = count;
  return 0;
}

static int check_decode(const char *codec, const float *out, size_t cap, size_t n,
                        bb_error *err) {
  if (n && !out)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s codec: NULL output", codec);
  if (cap < n)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "%s codec: %zu values do not fit an output of %zu floats", codec, n,
                        cap);
  return 0;
}

/* ---- float16 --------------------------------------------------------------------------- */

int bbi_quant_f16_encode(const float *x, size_t n, uint8_t *out, size_t cap, size_t *written,
                        bb_error *err) {
  const size_t need = bbi_quant_f16_encoded_size(n);
  int rc = check_encode("f16", x, n, out, cap, need, err);
  if (rc) return rc;
  bb_le_put_u32(out, (uint32_t)n);
  uint8_t *p = out + BBI_QUANT_F16_HEADER;
  for (size_t i = 0; i < n; i++) bb_le_put_u16(p + 2 * i, bb_f32_to_f16(x[i]));
  if (written) *written = need;
  return 0;
}

int bbi_quant_f16_count(const uint8_t *in, size_t len, size_t *n, bb_error *err) {
  size_t count = 0;
  int rc = read_count("f16", in, len, BBI_QUANT_F16_HEADER, 2, &count, err);
  if (!rc && n) *n = count;
  return rc;
}

int bbi_quant_f16_decode(const uint8_t *in, size_t len, float *out, size_t cap, size_t *n,
                        bb_error *err) {
  size_t count = 0;
  int rc = read_count("f16", in, len, BBI_QUANT_F16_HEADER, 2, &count, err);
  if (!rc) rc = check_decode("f16", out, cap, count, err);
  if (rc) return rc;
  const uint8_t *p = in + BBI_QUANT_F16_HEADER;
  for (size_t i = 0; i < count; i++) out[i] = bb_f16_to_f32(bb_le_get_u16(p + 2 * i));
  if (n) *n = count;
  return 0;
}

/* ---- uint8 affine ---------------------------------------------------------------------- */

/* The smallest scale whose codes, with zero point zp, reach down to lo and up to hi. */
static double covering_scale(double lo, double hi, double zp) {
  const double below = zp > 0.0 ? -lo / zp : 0.0, above = zp < 255.0 ? hi / (255.0 - zp) : 0.0;
  return below > above ? below : above;
}

int bbi_quant_u8_params(const float *x, size_t n, float *scale, uint8_t *zero_point,
                       bb_error *err) {
  if (n && !x) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "u8 codec: NULL input");
  const size_t bad = bbi_f32_first_nonfinite(x, n);
  if (bad < n)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "u8 codec: value %zu is %g; only finite values can be quantized",
                        bad, (double)x[bad]);
  double lo = 0.0, hi = 0.0; /* the range always holds 0 */
  for (size_t i = 0; i < n; i++) {
    if (x[i] < lo) lo = x[i];
    if (x[i] > hi) hi = x[i];
  }
  if (lo == hi) { /* all zeros, or empty */
    *scale = 0.0f;
    *zero_point = 0;
    return 0;
  }
  /* The ideal zero point splits the 255 steps between the two sides in proportion; of
   * the integers either side of it (kept off an end that has values beyond it), take the
   * one whose covering scale is smaller. */
  const double ideal = -lo * 255.0 / (hi - lo);
  const double zp_min = lo < 0.0 ? 1.0 : 0.0, zp_max = hi > 0.0 ? 254.0 : 255.0;
  double zp = fmin(fmax(floor(ideal), zp_min), zp_max);
  double s = covering_scale(lo, hi, zp);
  const double up = fmin(fmax(ceil(ideal), zp_min), zp_max);
  if (covering_scale(lo, hi, up) < s) {
    zp = up;
    s = covering_scale(lo, hi, up);
  }
  /* rounded up, so the codes still reach both ends of the range */
  float sf = (float)s;
  if ((double)sf < s) sf = nextafterf(sf, INFINITY);
  *scale = sf;
  *zero_point = (uint8_t)zp;
  return 0;
}

int bbi_quant_u8_encode(const float *x, size_t n, uint8_t *out, size_t cap, size_t *written,
                       bb_error *err) {
  const size_t need = bbi_quant_u8_encoded_size(n);
  int rc = check_encode("u8", x, n, out, cap, need, err);
  float scale = 0.0f;
  uint8_t zp = 0;
  if (!rc) rc = bbi_quant_u8_params(x, n, &scale, &zp, err);
  if (rc) return rc;
  bb_le_put_u32(out, (uint32_t)n);
  bb_le_put_f32(out + 4, scale);
  out[8] = zp;
  uint8_t *codes = out + BBI_QUANT_U8_HEADER;
  for (size_t i = 0; i < n; i++) {
    double q = zp + (scale > 0.0f ? nearbyint((double)x[i] / scale) : 0.0);
    codes[i] = (uint8_t)(q < 0.0 ? 0.0 : q > 255.0 ? 255.0 : q);
  }
  if (written) *written = need;
  return 0;
}

/* The count, scale and zero point of a uint8 encoding, checked. */
static int read_u8_header(const uint8_t *in, size_t len, size_t *n, float *scale,
                          uint8_t *zero_point, bb_error *err) {
  int rc = read_count("u8", in, len, BBI_QUANT_U8_HEADER, 1, n, err);
  if (rc) return rc;
  *scale = bb_le_get_f32(in + 4);
  if (!(isfinite(*scale) && *scale >= 0.0f))
    return bb_error_set(err, BB_ERR_MALFORMED,
                        "u8 codec: the scale at byte 4 is %g, not a finite value >= 0",
                        (double)*scale);
  *zero_point = in[8];
  return 0;
}

int bbi_quant_u8_count(const uint8_t *in, size_t len, size_t *n, bb_error *err) {
  size_t count = 0;
  float scale = 0.0f;
  uint8_t zp = 0;
  int rc = read_u8_header(in, len, &count, &scale, &zp, err);
  if (!rc && n) *n = count;
  return rc;
}

int bbi_quant_u8_decode(const uint8_t *in, size_t len, float *out, size_t cap, size_t *n,
                       bb_error *err) {
  size_t count = 0;
  float scale = 0.0f;
  uint8_t zp = 0;
  int rc = read_u8_header(in, len, &count, &scale, &zp, err);
  if (!rc) rc = check_decode("u8", out, cap, count, err);
  if (rc) return rc;
  const uint8_t *codes = in + BBI_QUANT_U8_HEADER;
  for (size_t i = 0; i < count; i++) out[i] = (float)((int)codes[i] - (int)zp) * scale;
  if (n) *n = count;
  return 0;
}
