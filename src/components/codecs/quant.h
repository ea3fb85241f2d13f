/* Lossy compression of float32 vectors (model updates, parameters) for the Codec role:
 * IEEE half precision, and 8-bit affine quantization. Both write into a caller's buffer
 * and decode into one, so nothing here allocates.
 *
 * Byte layouts (all integers and floats little-endian):
 *
 *   float16:  offset 0  u32  n, the number of values
 *             offset 4  n × u16, IEEE 754 binary16 (round to nearest even)
 *             total 4 + 2n bytes
 *
 *   uint8:    offset 0  u32  n, the number of values
 *             offset 4  f32  scale (finite, >= 0)
 *             offset 8  u8   zero point
 *             offset 9  n × u8 codes q; each value decodes to (q - zero_point) * scale
 *             total 9 + n bytes
 *
 * The uint8 code is ONNX's QuantizeLinear / DequantizeLinear with a per-vector scale and
 * zero point, the range widened to hold 0 (so 0 round-trips exactly, keeping sparse
 * updates sparse), and of the zero points whose codes cover the whole range, the one
 * needing the smallest scale: every finite value comes back within scale/2 (plus one
 * float rounding of the product). docs/LEARNING.md spells out the choice.
 *
 * Non-finite values: float16 keeps ±inf and NaN, and turns finite values beyond ±65504
 * into ±inf (values at or above 65520 in magnitude, as IEEE rounding does). uint8 cannot
 * represent them and refuses the vector (BB_ERR_INVALID_ARGUMENT naming the index).
 *
 * Decoders take any bytes: a short buffer, trailing bytes, a count that disagrees with
 * the length, or a negative or non-finite scale give BB_ERR_MALFORMED with the offset;
 * nothing outside `in[0..len)` is read. */
#ifndef BBI_OPS_CODECS_QUANT_H
#define BBI_OPS_CODECS_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "bb/common.h"

#define BBI_QUANT_F16_HEADER 4
#define BBI_QUANT_U8_HEADER 9
/* Vectors longer than this do not fit the u32 count (BB_ERR_LIMIT). */
#define BBI_QUANT_MAX_COUNT UINT32_MAX

/* Bytes the encoding of n values takes, or 0 when n is above BBI_QUANT_MAX_COUNT or the
 * size does not fit a size_t. */
size_t bbi_quant_f16_encoded_size(size_t n);
size_t bbi_quant_u8_encoded_size(size_t n);

/* Encodes x[0..n) into out (cap bytes, at least the encoded size); *written (may be NULL)
 * gets the size. Returns 0, BB_ERR_INVALID_ARGUMENT (NULL buffer, small cap, and for uint8
 * a non-finite value), or BB_ERR_LIMIT. */
int bbi_quant_f16_encode(const float *x, size_t n, uint8_t *out, size_t cap, size_t *written,
                        bb_error *err);
int bbi_quant_u8_encode(const float *x, size_t n, uint8_t *out, size_t cap, size_t *written,
                       bb_error *err);

/* Checks the header and length of an encoding and gives its value count, so the caller
 * can size the output. BB_ERR_MALFORMED for anything but a complete, exact encoding. */
int bbi_quant_f16_count(const uint8_t *in, size_t len, size_t *n, bb_error *err);
int bbi_quant_u8_count(const uint8_t *in, size_t len, size_t *n, bb_error *err);

/* Decodes in[0..len) into out (cap floats); *n (may be NULL) gets the value count.
 * BB_ERR_MALFORMED for bad input, BB_ERR_INVALID_ARGUMENT when cap is too small; out is
 * not written then. */
int bbi_quant_f16_decode(const uint8_t *in, size_t len, float *out, size_t cap, size_t *n,
                        bb_error *err);
int bbi_quant_u8_decode(const uint8_t *in, size_t len, float *out, size_t cap, size_t *n,
                       bb_error *err);

/* The uint8 parameters encode would pick for x[0..n): scale and zero point. For tests
 * and for callers that quantize in a graph. Fails as bbi_quant_u8_encode does for a
 * non-finite value. */
int bbi_quant_u8_params(const float *x, size_t n, float *scale, uint8_t *zero_point,
                       bb_error *err);

#endif
