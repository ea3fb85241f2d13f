/* Float16Codec and Uint8Codec: the dense Codec concretes over src/components/codecs/quant.h.
 * Encode takes a float32 tensor (any shape; it travels flattened) and yields Bytes; Decode
 * gives back a float32 vector [n]. With a reference (reference.h) they carry the difference
 * from it. No config, no training, no state. */
#include "bb/roles.h"
#include "components/codecs/quant.h"
#include "components/codecs/reference.h"
#include "components/shipped.h"
#include "bb/common.h"
#include "util/mem.h"

typedef struct codec_kind {
  size_t (*size)(size_t n);
  int (*encode)(const float *x, size_t n, uint8_t *out, size_t cap, size_t *written, bb_error *err);
  int (*count)(const uint8_t *in, size_t len, size_t *n, bb_error *err);
  int (*decode)(const uint8_t *in, size_t len, float *out, size_t cap, size_t *n, bb_error *err);
} codec_kind;

static const codec_kind F16 = {bbi_quant_f16_encoded_size, bbi_quant_f16_encode, bbi_quant_f16_count,
                               bbi_quant_f16_decode};
static const codec_kind U8 = {bbi_quant_u8_encoded_size, bbi_quant_u8_encode, bbi_quant_u8_count, bbi_quant_u8_decode};

static int codec_create_kind(const bb_component_init *init, void **self, const codec_kind *kind, bb_error *err) {
  static const char *const NONE[] = {NULL};
  *self = (void *)kind;
  return bb_config_check(init->config, NONE, err);
}
static int f16_create(const bb_component_init *init, void **self, bb_error *err) {
  return codec_create_kind(init, self, &F16, err);
}
static int u8_create(const bb_component_init *init, void **self, bb_error *err) {
  return codec_create_kind(init, self, &U8, err);
}
static void codec_destroy(void *self) { (void)self; }

static int codec_encode_against(void *self, bb_ctx *ctx, const bb_tensor *x, const bb_tensor *reference,
                                bb_val **encoded, bb_error *err) {
  const codec_kind *k = self;
  float *values = NULL;
  int rc = bbi_codec_delta(ctx, x, reference, &values, err);
  if (rc) return rc;
  const bb_allocator *a = bb_ctx_allocator(ctx);
  size_t n = (size_t)x->numel, size = k->size(n);
  uint8_t *buf = size ? bbi_mem_alloc(a, size) : NULL;
  if (!size)
    rc = bb_error_set(err, BB_ERR_LIMIT, "Encode: %zu values are too many", n);
  else if (!buf)
    rc = bb_error_set(err, BB_ERR_NOMEM, "Encode: out of memory");
  else if (!(rc = k->encode(values, n, buf, size, NULL, err)))
    rc = bbi_codec_emit(ctx, buf, size, encoded, err);
  bbi_mem_free(a, buf);
  bbi_mem_free(a, values);
  return rc;
}

static int codec_encode(void *self, bb_ctx *ctx, const bb_tensor *x, bb_val **encoded, bb_error *err) {
  return codec_encode_against(self, ctx, x, NULL, encoded, err);
}

static int codec_decode_against(void *self, bb_ctx *ctx, const bb_val *encoded, const bb_tensor *reference,
                                bb_tensor **x, bb_error *err) {
  const codec_kind *k = self;
  const uint8_t *bytes = NULL;
  size_t len = 0, n = 0, expect = 0;
  int rc = bbi_codec_bytes_of(ctx, encoded, &bytes, &len, err);
  if (!rc) rc = bbi_codec_expected(reference, &expect, err);
  if (rc) return rc;
  if ((rc = k->count(bytes, len, &n, err))) return bbi_codec_refuse(ctx, BBI_CODEC_REFUSED_LENGTH, rc);
  if (reference && n != expect)
    return bbi_codec_refuse(ctx, BBI_CODEC_REFUSED_REFERENCE,
                            bb_error_set(err, BB_ERR_MALFORMED, "Decode: %zu values against a reference of %zu", n,
                                         expect));
  bb_tensor *t = NULL;
  if ((rc = bbi_codec_output(ctx, n, reference, &t, err))) return rc;
  if ((rc = k->decode(bytes, len, bb_tensor_data(t), n, NULL, err))) {
    bb_tensor_release(t);
    return bbi_codec_refuse(ctx, BBI_CODEC_REFUSED_LENGTH, rc);
  }
  bbi_codec_finish(ctx, t, reference, len);
  *x = t;
  return 0;
}

static int codec_decode(void *self, bb_ctx *ctx, const bb_val *encoded, bb_tensor **x, bb_error *err) {
  return codec_decode_against(self, ctx, encoded, NULL, x, err);
}

static const bb_codec_ops CODEC_OPS = {
    .encode = codec_encode, .decode = codec_decode, .encode_against = codec_encode_against, .decode_against = codec_decode_against};

static int codec_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_codec_dispatch(&CODEC_OPS, self, ctx, call, err);
}

static const bb_component_port CODEC_STORAGE[] = {{"in", BB_TYPE_TENSOR_F32},
                                                  {"out", BB_TYPE_BYTES}};

const bb_component_type BBI_FLOAT16_CODEC = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "Float16Codec",
    .roles = 1u << BB_ROLE_CODEC,
    .storage = CODEC_STORAGE,
    .n_storage = 2,
    .create = f16_create,
    .destroy = codec_destroy,
    .invoke = codec_invoke,
};
const bb_component_type BBI_UINT8_CODEC = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "Uint8Codec",
    .roles = 1u << BB_ROLE_CODEC,
    .storage = CODEC_STORAGE,
    .n_storage = 2,
    .create = u8_create,
    .destroy = codec_destroy,
    .invoke = codec_invoke,
};
