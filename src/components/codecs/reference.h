/* What every shipped codec does with a reference (the optional second input of Encode and
 * Decode): Encode(x, reference) sends x - reference, Decode(y, reference) gives back
 * reference + what y holds, Decode(y) what y holds alone. A federated client sends its
 * update against the global model it trained from, and the server adds it back to that
 * model; a receiver that wants the update itself (a buffered asynchronous server) decodes
 * without one. The helpers also keep the codecs' counters: bytes encoded and decoded, and
 * each refusal by reason (docs/COMPONENTS.md, "Codecs"). */
#ifndef BBI_OPS_CODECS_REFERENCE_H
#define BBI_OPS_CODECS_REFERENCE_H

#include "bb/runtime.h"
#include "bb/tensor.h"

/* Why a decode was refused; each is counted as codec.refused_<name>. */
typedef enum bbi_codec_refusal {
  BBI_CODEC_REFUSED_LENGTH,    /* the bytes do not hold what their header says */
  BBI_CODEC_REFUSED_COUNT,     /* a count out of bounds (k above n, n above the cap) */
  BBI_CODEC_REFUSED_INDEX,     /* an index out of range, or repeated */
  BBI_CODEC_REFUSED_NONFINITE, /* a NaN or an infinity */
  BBI_CODEC_REFUSED_REFERENCE  /* a length other than the reference's */
} bbi_codec_refusal;

/* Counts a refusal and passes rc (negative) through. */
int bbi_codec_refuse(bb_ctx *ctx, bbi_codec_refusal why, int rc);

/* The float32 values Encode sends: x - reference (reference may be NULL: x itself), in a
 * new buffer of x->numel floats from the ctx's allocator. BB_ERR_TYPE for a tensor that is
 * not float32, BB_ERR_INVALID_ARGUMENT for a reference of another length. */
int bbi_codec_delta(bb_ctx *ctx, const bb_tensor *x, const bb_tensor *reference, float **out, bb_error *err);

/* The Bytes value Encode gives (a copy of bytes[0..len)); counts codec.bytes_encoded. */
int bbi_codec_emit(bb_ctx *ctx, const uint8_t *bytes, size_t len, bb_val **encoded, bb_error *err);

/* The Bytes Decode takes: BB_ERR_TYPE (counted as a length refusal) for another kind;
 * counts codec.bytes_decoded for the accepted ones once decoded (bbi_codec_decoded). */
int bbi_codec_bytes_of(bb_ctx *ctx, const bb_val *encoded, const uint8_t **bytes, size_t *len, bb_error *err);

/* The length a decoded vector must have: the reference's, 0 without one (*n). BB_ERR_TYPE
 * for a reference that is not float32. */
int bbi_codec_expected(const bb_tensor *reference, size_t *n, bb_error *err);

/* A new float32 tensor for n decoded values: shaped as the reference (whose length the
 * caller checked is n), or [n] without one. */
int bbi_codec_output(bb_ctx *ctx, size_t n, const bb_tensor *reference, bb_tensor **t, bb_error *err);

/* Finishes a decode into t: adds the reference when there is one, and counts len bytes
 * as decoded. */
void bbi_codec_finish(bb_ctx *ctx, bb_tensor *t, const bb_tensor *reference, size_t len);

#endif
