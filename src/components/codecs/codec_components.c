/* Float16Codec and Uint8Codec: the Codec concretes over src/components/codecs/quant.h. Encode
 * takes a float32 tensor (any shape; it travels flattened) and yields Bytes; Decode gives
 * back a float32 vector [n]. No config, no training. */
#include "bb/roles.h"
#include "components/codecs/quant.h"
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

static int codec_encode(void *self, bb_ctx *ctx, const bb_tensor *x, bb_val **encoded, bb_error *err) {
  const codec_kind *k = self;
  if (x->dtype != BB_DTYPE_FLOAT) return bb_error_set(err, BB_ERR_TYPE, "Encode takes a float32 tensor");
  size_t n = (size_t)x->numel, size = k->size(n);
  if (!size) return bb_error_set(err, BB_ERR_LIMIT, "Encode: %zu values are too many", n);
  const bb_allocator *a = bb_ctx_allocator(ctx);
  uint8_t *buf = bbi_mem_alloc(a, size);
  if (!buf) return bb_error_set(err, BB_ERR_NOMEM, "Encode: out of memory");
  int rc = k->encode(bb_tensor_data(x), n, buf, size, NULL, err);
  if (!rc) {
    *encoded = bb_val_bytes(a, buf, size);
    if (!*encoded) rc = bb_error_set(err, BB_ERR_NOMEM, "Encode: out of memory");
  }
  bbi_mem_free(a, buf);
  return rc;
}

static int codec_decode(void *self, bb_ctx *ctx, const bb_val *encoded, bb_tensor **x, bb_error *err) {
  const codec_kind *k = self;
  if (bb_val_kind_of(encoded) != BB_VAL_BYTES)
    return bb_error_set(err, BB_ERR_TYPE, "Decode takes Bytes, got %s", bb_val_kind_name((int)bb_val_kind_of(encoded)));
  size_t n = 0;
  int rc = k->count(bb_val_as_bytes(encoded), bb_val_count(encoded), &n, err);
  if (rc) return rc;
  int64_t dim = (int64_t)n;
  bb_tensor *t = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 1, &dim);
  if (!t) return bb_error_set(err, BB_ERR_NOMEM, "Decode: out of memory");
  if ((rc = k->decode(bb_val_as_bytes(encoded), bb_val_count(encoded), bb_tensor_data(t), n, NULL, err))) {
    bb_tensor_release(t);
    return rc;
  }
  *x = t;
  return 0;
}

static const bb_codec_ops CODEC_OPS = {NULL, codec_encode, codec_decode};

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
