/* The codecs' shared handling of a reference and their counters (reference.h). */
#include "components/codecs/reference.h"

#include "util/mem.h"

static const char *const REFUSALS[] = {"codec.refused_length", "codec.refused_count", "codec.refused_index",
                                       "codec.refused_nonfinite", "codec.refused_reference"};

int bbi_codec_refuse(bb_ctx *ctx, bbi_codec_refusal why, int rc) {
  bb_ctx_count(ctx, REFUSALS[why], 1);
  return rc;
}

int bbi_codec_delta(bb_ctx *ctx, const bb_tensor *x, const bb_tensor *reference, float **out, bb_error *err) {
  if (x->dtype != BB_DTYPE_FLOAT) return bb_error_set(err, BB_ERR_TYPE, "Encode takes a float32 tensor");
  if (reference && (reference->dtype != BB_DTYPE_FLOAT || reference->numel != x->numel))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "Encode: the reference must be float32 values as many as x's %lld (it has %lld)",
                        (long long)x->numel, (long long)reference->numel);
  const size_t n = (size_t)x->numel;
  float *d = bbi_mem_calloc(bb_ctx_allocator(ctx), n ? n : 1, sizeof *d);
  if (!d) return bb_error_set(err, BB_ERR_NOMEM, "Encode: out of memory for %zu values", n);
  const float *xs = bb_tensor_data(x), *rs = reference ? bb_tensor_data(reference) : NULL;
  for (size_t i = 0; i < n; i++) d[i] = rs ? xs[i] - rs[i] : xs[i];
  *out = d;
  return 0;
}

int bbi_codec_emit(bb_ctx *ctx, const uint8_t *bytes, size_t len, bb_val **encoded, bb_error *err) {
  *encoded = bb_val_bytes(bb_ctx_allocator(ctx), bytes, len);
  if (!*encoded) return bb_error_set(err, BB_ERR_NOMEM, "Encode: out of memory");
  bb_ctx_count(ctx, "codec.bytes_encoded", len);
  return 0;
}

int bbi_codec_bytes_of(bb_ctx *ctx, const bb_val *encoded, const uint8_t **bytes, size_t *len, bb_error *err) {
  if (bb_val_kind_of(encoded) != BB_VAL_BYTES)
    return bbi_codec_refuse(ctx, BBI_CODEC_REFUSED_LENGTH,
                            bb_error_set(err, BB_ERR_TYPE, "Decode takes Bytes, got %s",
                                         bb_val_kind_name((int)bb_val_kind_of(encoded))));
  *bytes = bb_val_as_bytes(encoded);
  *len = bb_val_count(encoded);
  return 0;
}

int bbi_codec_expected(const bb_tensor *reference, size_t *n, bb_error *err) {
  if (reference && reference->dtype != BB_DTYPE_FLOAT)
    return bb_error_set(err, BB_ERR_TYPE, "Decode: the reference must be a float32 tensor");
  *n = reference ? (size_t)reference->numel : 0;
  return 0;
}

int bbi_codec_output(bb_ctx *ctx, size_t n, const bb_tensor *reference, bb_tensor **t, bb_error *err) {
  int64_t dim = (int64_t)n;
  *t = reference ? bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, reference->rank, reference->dims)
                 : bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 1, &dim);
  return *t ? 0 : bb_error_set(err, BB_ERR_NOMEM, "Decode: out of memory for %zu values", n);
}

void bbi_codec_finish(bb_ctx *ctx, bb_tensor *t, const bb_tensor *reference, size_t len) {
  if (reference) {
    float *out = bb_tensor_data(t);
    const float *r = bb_tensor_data(reference);
    for (int64_t i = 0; i < t->numel; i++) out[i] += r[i];
  }
  bb_ctx_count(ctx, "codec.bytes_decoded", len);
}
