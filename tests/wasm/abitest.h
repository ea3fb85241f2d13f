/* Shared by the tests that drive bb.wasm's ABI as js/src does: value lists built as the
 * host builds them, the result buffer, and the step layout of bb_wasm_node_poll. */
#ifndef BB_TESTS_WASM_ABITEST_H
#define BB_TESTS_WASM_ABITEST_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bb/tensor.h"
#include "bb/value.h"
#include "bb_wasm.h"
#include "harness.h"
#include "bb/bytes.h"

/* ---- value lists, as the host builds them ---------------------------------------------- */

typedef struct buf {
  uint8_t *data;
  size_t len;
} buf;

/* A value list of n values (NULL: absent); consumes the references. */
__attribute__((unused)) static buf value_list(bb_val **values, size_t n) {
  size_t len = 8;
  for (size_t i = 0; i < n; i++) len += 16 + (values[i] ? bb_val_encoded_size(values[i]) : 0);
  buf b = {malloc(len), len};
  bb_le_put_u64(b.data, n);
  size_t at = 8;
  for (size_t i = 0; i < n; i++) {
    bb_le_put_u64(b.data + at, values[i] ? bb_val_kind_hash((int)bb_val_kind_of(values[i])) : 0);
    size_t size = values[i] ? bb_val_encoded_size(values[i]) : 0;
    bb_le_put_u64(b.data + at + 8, size);
    at += 16;
    if (values[i]) at += bb_val_encode_into(values[i], b.data + at);
    bb_val_release(values[i]);
  }
  return b;
}

__attribute__((unused)) static bb_val *tensor_value(const float *data, int rank, const int64_t *dims) {
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, rank, dims);
  memcpy(bb_tensor_data(t), data, (size_t)t->numel * sizeof(float));
  bb_val *v = bb_val_tensor(NULL, t);
  bb_tensor_release(t);
  return v;
}

__attribute__((unused)) static const uint8_t *result(size_t *len) {
  *len = bb_wasm_result_len();
  return bb_wasm_result_ptr();
}

/* ---- steps ----------------------------------------------------------------------------------- */

typedef struct step {
  uint32_t kind;
  uint64_t type_hash;
  const char *peer_text;
  size_t peer_len;
  const uint8_t *bytes;
  size_t len;
  char module[128], topic[64], op[256], reason[64], detail[512];
} step;

__attribute__((unused)) static void copy_field(const uint8_t **p, char *out, size_t size) {
  uint32_t n = bb_le_get_u32(*p);
  size_t keep = n < size - 1 ? n : size - 1;
  memcpy(out, *p + 4, keep);
  out[keep] = '\0';
  *p += 4 + n;
}

/* Parses step i of the poll result at *p (advancing it). */
__attribute__((unused)) static void next_step(const uint8_t **p, step *s) {
  const uint8_t *q = *p;
  s->kind = bb_le_get_u32(q);
  s->type_hash = bb_le_get_u64(q + 32);
  q += 40;
  s->peer_len = bb_le_get_u32(q);
  s->peer_text = (const char *)q + 4;
  q += 4 + s->peer_len;
  s->len = bb_le_get_u32(q);
  s->bytes = q + 4;
  q += 4 + s->len;
  copy_field(&q, s->module, sizeof s->module);
  copy_field(&q, s->topic, sizeof s->topic);
  copy_field(&q, s->op, sizeof s->op);
  copy_field(&q, s->reason, sizeof s->reason);
  copy_field(&q, s->detail, sizeof s->detail);
  *p = q;
}

#endif
