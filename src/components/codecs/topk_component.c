/* TopKCodec: the Codec concrete over src/components/codecs/sparse.h. Encode sends the k
 * values of largest magnitude (a share `k` of the vector) with where they are; with error
 * feedback (the default) what it leaves out is kept and added to the next vector it
 * encodes, so every coordinate is sent eventually and the sum of what arrives follows the
 * sum of what was meant. With a reference (reference.h) it carries the difference from it.
 *
 * Config: k (the share kept, in (0, 1]; default 0.3), values (f32, f16 or u8: how the
 * kept values travel; default u8), feedback (1 or 0; default 1), max_len (the longest vector
 * Decode takes without a reference; default 4194304). State: the error-feedback residual,
 * saved and restored with the node. */
#include <math.h>
#include <string.h>

#include "bb/bytes.h"
#include "bb/roles.h"
#include "components/codecs/reference.h"
#include "components/codecs/sparse.h"
#include "components/shipped.h"
#include "util/mem.h"

#define TOPK_DEFAULT_MAX_LEN 4194304u

typedef struct topk_codec {
  const bb_allocator *alloc;
  double fraction;
  bbi_sparse_values values;
  bool feedback;
  size_t max_len;
  float *residual; /* what was left out so far; NULL until the first Encode */
  size_t n;        /* its length */
} topk_codec;

static int topk_config(const char *c, topk_codec *t, bb_error *err) {
  static const char *const KEYS[] = {"k", "values", "feedback", "max_len", NULL};
  float k = 0;
  uint64_t feedback = 1, max_len = 0;
  char values[8];
  int rc = bb_config_check(c, KEYS, err);
  if (rc || (rc = bb_config_f32(c, "k", 0.3f, &k, err)) ||
      (rc = bb_config_str(c, "values", "u8", values, sizeof values, err)) ||
      (rc = bb_config_u64(c, "feedback", 1, &feedback, err)) ||
      (rc = bb_config_u64(c, "max_len", TOPK_DEFAULT_MAX_LEN, &max_len, err)))
    return rc;
  if (!(k > 0.0f && k <= 1.0f))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "TopKCodec: k is the share of values kept, in (0, 1]; got %g",
                        (double)k);
  static const char *const FORMS[] = {"f32", "f16", "u8"};
  size_t form = 0;
  while (form < 3 && strcmp(values, FORMS[form]) != 0) form++;
  if (form == 3) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "TopKCodec: values is f32, f16 or u8, got '%s'", values);
  if (feedback > 1) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "TopKCodec: feedback is 0 or 1");
  if (max_len == 0 || max_len > BBI_SPARSE_MAX_LEN)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "TopKCodec: max_len must be in [1, %lu]",
                        (unsigned long)BBI_SPARSE_MAX_LEN);
  t->fraction = k;
  t->values = (bbi_sparse_values)(BBI_SPARSE_F32 + form);
  t->feedback = feedback == 1;
  t->max_len = (size_t)max_len;
  return 0;
}

static int topk_create(const bb_component_init *init, void **self, bb_error *err) {
  topk_codec *t = bbi_mem_calloc(init->alloc, 1, sizeof *t);
  if (!t) return bb_error_set(err, BB_ERR_NOMEM, "TopKCodec: out of memory");
  t->alloc = init->alloc;
  int rc = topk_config(init->config, t, err);
  if (rc) {
    bbi_mem_free(init->alloc, t);
    return rc;
  }
  *self = t;
  return 0;
}

static void topk_destroy(void *self) {
  topk_codec *t = self;
  bbi_mem_free(t->alloc, t->residual);
  bbi_mem_free(t->alloc, t);
}

/* A residual of n zeros (a vector of another length than the last one starts afresh). */
static int residual_for(topk_codec *t, size_t n, bb_error *err) {
  if (t->residual && t->n == n) return 0;
  float *r = bbi_mem_calloc(t->alloc, n ? n : 1, sizeof *r);
  if (!r) return bb_error_set(err, BB_ERR_NOMEM, "TopKCodec: out of memory for a residual of %zu values", n);
  bbi_mem_free(t->alloc, t->residual);
  t->residual = r;
  t->n = n;
  return 0;
}

/* Sends the top k of u (the vector to send: the difference plus the residual) and, with
 * feedback, keeps what the receiver will not get as the next residual. */
static int send_top(topk_codec *t, bb_ctx *ctx, const float *u, size_t n, bb_val **encoded, bb_error *err) {
  const bb_allocator *a = bb_ctx_allocator(ctx);
  const size_t k = bbi_sparse_keep(n, t->fraction), size = bbi_sparse_encoded_size(n, k, t->values);
  uint32_t *idx = bbi_mem_calloc(a, k ? k : 1, sizeof *idx);
  float *kept = bbi_mem_calloc(a, k ? k : 1, sizeof *kept);
  uint8_t *buf = size ? bbi_mem_alloc(a, size) : NULL;
  int rc = idx && kept && buf ? 0 : bb_error_set(err, BB_ERR_NOMEM, "TopKCodec: out of memory for %zu entries", k);
  if (!rc) rc = bbi_sparse_select(u, n, k, idx, err);
  if (!rc) rc = bbi_sparse_encode(u, n, idx, k, t->values, buf, size, NULL, kept, err);
  if (!rc) rc = bbi_codec_emit(ctx, buf, size, encoded, err);
  if (!rc && t->feedback) {
    memcpy(t->residual, u, n * sizeof *u);
    for (size_t j = 0; j < k; j++) t->residual[idx[j]] = u[idx[j]] - kept[j];
  }
  bbi_mem_free(a, idx);
  bbi_mem_free(a, kept);
  bbi_mem_free(a, buf);
  return rc;
}

static int topk_encode_against(void *self, bb_ctx *ctx, const bb_tensor *x, const bb_tensor *reference,
                               bb_val **encoded, bb_error *err) {
  topk_codec *t = self;
  float *u = NULL;
  int rc = bbi_codec_delta(ctx, x, reference, &u, err);
  if (rc) return rc;
  const size_t n = (size_t)x->numel;
  if (n > BBI_SPARSE_MAX_LEN) rc = bb_error_set(err, BB_ERR_LIMIT, "TopKCodec: %zu values are too many", n);
  if (!rc && t->feedback && !(rc = residual_for(t, n, err)))
    for (size_t i = 0; i < n; i++) u[i] += t->residual[i];
  if (!rc) rc = send_top(t, ctx, u, n, encoded, err);
  bbi_mem_free(bb_ctx_allocator(ctx), u);
  return rc;
}

static int topk_encode(void *self, bb_ctx *ctx, const bb_tensor *x, bb_val **encoded, bb_error *err) {
  return topk_encode_against(self, ctx, x, NULL, encoded, err);
}

static const bbi_codec_refusal REFUSAL_OF[] = {
    [BBI_SPARSE_BAD_LENGTH] = BBI_CODEC_REFUSED_LENGTH, [BBI_SPARSE_BAD_COUNT] = BBI_CODEC_REFUSED_COUNT,
    [BBI_SPARSE_BAD_EXPECTED] = BBI_CODEC_REFUSED_REFERENCE, [BBI_SPARSE_BAD_INDEX] = BBI_CODEC_REFUSED_INDEX,
    [BBI_SPARSE_BAD_VALUE] = BBI_CODEC_REFUSED_NONFINITE};

static int topk_decode_against(void *self, bb_ctx *ctx, const bb_val *encoded, const bb_tensor *reference,
                               bb_tensor **x, bb_error *err) {
  const topk_codec *t = self;
  const uint8_t *bytes = NULL;
  size_t len = 0, n = 0, expect = 0;
  bbi_sparse_fault fault = BBI_SPARSE_OK;
  int rc = bbi_codec_bytes_of(ctx, encoded, &bytes, &len, err);
  if (!rc) rc = bbi_codec_expected(reference, &expect, err);
  if (rc) return rc;
  /* with a reference the length is the reference's, else at most max_len */
  if ((rc = bbi_sparse_count(bytes, len, reference ? expect : t->max_len, expect, &n, &fault, err)))
    return bbi_codec_refuse(ctx, REFUSAL_OF[fault], rc);
  bb_tensor *out = NULL;
  if ((rc = bbi_codec_output(ctx, n, reference, &out, err))) return rc;
  if ((rc = bbi_sparse_decode(bytes, len, bb_tensor_data(out), n, &fault, err))) {
    bb_tensor_release(out);
    return bbi_codec_refuse(ctx, REFUSAL_OF[fault], rc);
  }
  bbi_codec_finish(ctx, out, reference, len);
  *x = out;
  return 0;
}

static int topk_decode(void *self, bb_ctx *ctx, const bb_val *encoded, bb_tensor **x, bb_error *err) {
  return topk_decode_against(self, ctx, encoded, NULL, x, err);
}

static const bb_codec_ops TOPK_OPS = {
    .encode = topk_encode, .decode = topk_decode, .encode_against = topk_encode_against, .decode_against = topk_decode_against};

static int topk_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_codec_dispatch(&TOPK_OPS, self, ctx, call, err);
}

/* State: "BBTK", u32 version 1, u64 n, then n float32 residual values (n = 0: none yet). */
#define TOPK_STATE_HEADER 16

static int topk_save(const void *self, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  const topk_codec *t = self;
  const size_t n = t->residual ? t->n : 0;
  bb_le_writer w = bb_le_writer_growing(alloc);
  bb_le_write(&w, "BBTK", 4);
  bb_le_write_u32(&w, 1);
  bb_le_write_u64(&w, n);
  for (size_t i = 0; i < n; i++) bb_le_write_f32(&w, t->residual[i]);
  if (!bb_le_writer_ok(&w)) {
    bb_buffer_free(alloc, w.buf);
    return bb_error_set(err, BB_ERR_NOMEM, "TopKCodec: out of memory saving %zu values", n);
  }
  *out = w.buf;
  *len = w.len;
  return 0;
}

static int topk_load(void *self, const uint8_t *data, size_t len, bb_error *err) {
  topk_codec *t = self;
  if (len < TOPK_STATE_HEADER || memcmp(data, "BBTK", 4) != 0 || bb_le_get_u32(data + 4) != 1)
    return bb_error_set(err, BB_ERR_MALFORMED, "TopKCodec: saved state of %zu bytes is not a version-1 residual", len);
  const uint64_t n = bb_le_get_u64(data + 8);
  if (n > t->max_len || (uint64_t)(len - TOPK_STATE_HEADER) != n * 4)
    return bb_error_set(err, BB_ERR_MALFORMED,
                        "TopKCodec: saved state says %llu values (at most %zu) in %zu bytes",
                        (unsigned long long)n, t->max_len, len);
  for (uint64_t i = 0; i < n; i++)
    if (!isfinite(bb_le_get_f32(data + TOPK_STATE_HEADER + 4 * i)))
      return bb_error_set(err, BB_ERR_MALFORMED, "TopKCodec: saved residual value %llu is not finite",
                          (unsigned long long)i);
  if (n == 0) {
    bbi_mem_free(t->alloc, t->residual);
    t->residual = NULL;
    t->n = 0;
    return 0;
  }
  int rc = residual_for(t, (size_t)n, err);
  if (rc) return rc;
  for (size_t i = 0; i < n; i++) t->residual[i] = bb_le_get_f32(data + TOPK_STATE_HEADER + 4 * i);
  return 0;
}

static const bb_component_port TOPK_STORAGE[] = {{"in", BB_TYPE_TENSOR_F32}, {"out", BB_TYPE_BYTES}};

const bb_component_type BBI_TOPK_CODEC = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "TopKCodec",
    .roles = 1u << BB_ROLE_CODEC,
    .storage = TOPK_STORAGE,
    .n_storage = 2,
    .create = topk_create,
    .destroy = topk_destroy,
    .invoke = topk_invoke,
    .save = topk_save,
    .load = topk_load,
};
