/* Element type conversion with ONNX Cast's rules, and the float16/bfloat16 <-> float
 * staging the half-precision kernels use.
 *
 * Every source type fits exactly in one of three carriers (double for the floating types,
 * int64 for signed integers and bool, uint64 for unsigned integers), so a conversion is a
 * load into the carrier and a store out of it, chunk by chunk; the common float <-> half
 * pairs go direct. */
#include <math.h>
#include <string.h>

#include "cpu/elementwise.h"

void bbi_ew_widen(int32_t dtype, const void *src, size_t n, float *dst) {
  const uint16_t *s = src;
  if (dtype == BB_DTYPE_FLOAT16)
    for (size_t i = 0; i < n; i++) dst[i] = bb_f16_to_f32(s[i]);
  else
    for (size_t i = 0; i < n; i++) dst[i] = bb_bf16_to_f32(s[i]);
}

void bbi_ew_narrow(int32_t dtype, const float *src, size_t n, void *dst) {
  uint16_t *d = dst;
  if (dtype == BB_DTYPE_FLOAT16)
    for (size_t i = 0; i < n; i++) d[i] = bb_f32_to_f16(src[i]);
  else
    for (size_t i = 0; i < n; i++) d[i] = bb_f32_to_bf16(src[i]);
}

/* double -> float rounded to odd (truncated, with the last bit set when inexact). A value
 * rounded to odd with at least two spare bits rounds correctly to the narrower format
 * afterwards, so double -> float16/bfloat16 goes through it without double rounding. */
static float round_to_odd_f32(double d) {
  float f = (float)d;
  if (f != f || (double)f == d) return f;
  if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f);
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  bits |= 1;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static int64_t f64_to_i64(double v) {
  if (v != v) return 0;
  if (v >= 9223372036854775808.0) return INT64_MAX;
  if (v < -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

static uint64_t f64_to_u64(double v) {
  if (v >= 18446744073709551616.0) return UINT64_MAX;
  if (v >= 0) return (uint64_t)v;
  return (uint64_t)f64_to_i64(v); /* negative: wraps like every other integer narrowing */
}

typedef enum { CARRIER_F64, CARRIER_I64, CARRIER_U64 } carrier;

static carrier carrier_of(int32_t dtype) {
  if (bbi_ew_in(BBI_EW_FLOATS, dtype)) return CARRIER_F64;
  if (bbi_ew_in(BBI_EW_UNSIGNED, dtype)) return CARRIER_U64;
  return CARRIER_I64; /* signed integers and bool */
}

typedef union {
  double f[BBI_EW_CHUNK];
  int64_t i[BBI_EW_CHUNK];
  uint64_t u[BBI_EW_CHUNK];
} carrier_buf;

#define LOAD(T, field)                                                                                    \
  do {                                                                                                    \
    const T *s = src;                                                                                     \
    for (size_t k = 0; k < n; k++) c->field[k] = s[k];                                                    \
  } while (0)

/* n <= BBI_EW_CHUNK elements of src into the carrier of its type. */
static void load(int32_t dtype, const void *src, size_t n, carrier_buf *c) {
  switch (dtype) {
  case BB_DTYPE_FLOAT: LOAD(float, f); break;
  case BB_DTYPE_DOUBLE: LOAD(double, f); break;
  case BB_DTYPE_FLOAT16: {
    const uint16_t *s = src;
    for (size_t k = 0; k < n; k++) c->f[k] = bb_f16_to_f32(s[k]);
    break;
  }
  case BB_DTYPE_BFLOAT16: {
    const uint16_t *s = src;
    for (size_t k = 0; k < n; k++) c->f[k] = bb_bf16_to_f32(s[k]);
    break;
  }
  case BB_DTYPE_INT8: LOAD(int8_t, i); break;
  case BB_DTYPE_INT16: LOAD(int16_t, i); break;
  case BB_DTYPE_INT32: LOAD(int32_t, i); break;
  case BB_DTYPE_INT64: LOAD(int64_t, i); break;
  case BB_DTYPE_UINT8: LOAD(uint8_t, u); break;
  case BB_DTYPE_UINT16: LOAD(uint16_t, u); break;
  case BB_DTYPE_UINT32: LOAD(uint32_t, u); break;
  case BB_DTYPE_UINT64: LOAD(uint64_t, u); break;
  case BB_DTYPE_BOOL: {
    const uint8_t *s = src;
    for (size_t k = 0; k < n; k++) c->i[k] = s[k] != 0;
    break;
  }
  default: break;
  }
}

/* Stores the carrier `from` into dst with the conversion `CONV(value)`. */
#define STORE(T, CONV)                                                                                    \
  do {                                                                                                    \
    T *d = dst;                                                                                           \
    for (size_t k = 0; k < n; k++) d[k] = CONV;                                                           \
  } while (0)

#define STORE_ALL(V, TO_INT, TO_UINT64)                                                                   \
  switch (dtype) {                                                                                        \
  case BB_DTYPE_FLOAT: STORE(float, (float)(V)); break;                                                   \
  case BB_DTYPE_DOUBLE: STORE(double, (double)(V)); break;                                                \
  case BB_DTYPE_FLOAT16: STORE(uint16_t, bb_f32_to_f16(round_to_odd_f32((double)(V)))); break;            \
  case BB_DTYPE_BFLOAT16: STORE(uint16_t, bb_f32_to_bf16(round_to_odd_f32((double)(V)))); break;          \
  case BB_DTYPE_INT8: STORE(int8_t, (int8_t)TO_INT(V)); break;                                            \
  case BB_DTYPE_INT16: STORE(int16_t, (int16_t)TO_INT(V)); break;                                         \
  case BB_DTYPE_INT32: STORE(int32_t, (int32_t)TO_INT(V)); break;                                         \
  case BB_DTYPE_INT64: STORE(int64_t, (int64_t)TO_INT(V)); break;                                         \
  case BB_DTYPE_UINT8: STORE(uint8_t, (uint8_t)TO_INT(V)); break;                                         \
  case BB_DTYPE_UINT16: STORE(uint16_t, (uint16_t)TO_INT(V)); break;                                      \
  case BB_DTYPE_UINT32: STORE(uint32_t, (uint32_t)TO_INT(V)); break;                                      \
  case BB_DTYPE_UINT64: STORE(uint64_t, TO_UINT64(V)); break;                                             \
  case BB_DTYPE_BOOL: STORE(uint8_t, (uint8_t)((V) != 0)); break;                                         \
  default: break;                                                                                         \
  }

#define AS_IS(v) (v)

static void store(int32_t dtype, const carrier_buf *c, carrier from, size_t n, void *dst) {
  switch (from) {
  case CARRIER_F64: STORE_ALL(c->f[k], f64_to_i64, f64_to_u64) break;
  case CARRIER_I64: STORE_ALL(c->i[k], AS_IS, (uint64_t)) break;
  case CARRIER_U64: STORE_ALL(c->u[k], AS_IS, (uint64_t)) break;
  }
}

void bbi_ew_convert(int32_t dst_dtype, void *dst, int32_t src_dtype, const void *src, size_t n) {
  if (dst_dtype == src_dtype) {
    memmove(dst, src, n * bb_dtype_size(src_dtype));
    return;
  }
  if (dst_dtype == BB_DTYPE_FLOAT && bbi_ew_is_half(src_dtype)) {
    bbi_ew_widen(src_dtype, src, n, dst);
    return;
  }
  if (src_dtype == BB_DTYPE_FLOAT && bbi_ew_is_half(dst_dtype)) {
    bbi_ew_narrow(dst_dtype, src, n, dst);
    return;
  }
  const size_t src_size = bb_dtype_size(src_dtype), dst_size = bb_dtype_size(dst_dtype);
  const carrier from = carrier_of(src_dtype);
  carrier_buf buf;
  for (size_t done = 0; done < n; done += BBI_EW_CHUNK) {
    size_t m = n - done < BBI_EW_CHUNK ? n - done : BBI_EW_CHUNK;
    load(src_dtype, (const char *)src + done * src_size, m, &buf);
    store(dst_dtype, &buf, from, m, (char *)dst + done * dst_size);
  }
}
