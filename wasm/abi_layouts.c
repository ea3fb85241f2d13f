/* bytesandbrains — the byte layouts bb.wasm's engine functions share (bb_wasm.h, "byte
 * layouts"): value lists in and out, length-prefixed fields, packed strings and peer ids
 * as text. Every integer is little-endian, through bb/bytes.h. */
#include <stdlib.h>
#include <string.h>

#include "abi_internal.h"

/* ---- value lists in ------------------------------------------------------------------- */

void bbw_value_list_free(bbw_value_list *l) {
  for (size_t i = 0; i < l->n; i++) bb_val_release(l->items[i]);
  free(l->items);
  *l = (bbw_value_list){0};
}

int32_t bbw_value_list_decode(const uint8_t *data, size_t len, const char *what, bbw_value_list *out) {
  *out = (bbw_value_list){0};
  if (data == NULL && len > 0) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "%s: NULL value list of %zu bytes", what, len);
  if (len < 8) return bbw_fail(BB_ERR_MALFORMED, "%s: a value list starts with a u64 count (%zu bytes given)", what, len);
  uint64_t n = bb_le_get_u64(data);
  if (n > BBW_VALUE_LIST_MAX || n > (len - 8) / 16)
    return bbw_fail(BB_ERR_MALFORMED, "%s: %llu values do not fit in a %zu-byte list (at most %d)", what,
                    (unsigned long long)n, len, BBW_VALUE_LIST_MAX);
  out->items = calloc(n ? (size_t)n : 1, sizeof *out->items);
  if (out->items == NULL) return bbw_fail(BB_ERR_NOMEM, "%s: out of memory", what);
  size_t at = 8;
  for (size_t i = 0; i < (size_t)n; i++) {
    if (len - at < 16) {
      bbw_value_list_free(out);
      return bbw_fail(BB_ERR_MALFORMED, "%s: value %zu is cut short", what, i);
    }
    uint64_t hash = bb_le_get_u64(data + at), size = bb_le_get_u64(data + at + 8);
    at += 16;
    if (size > len - at) {
      bbw_value_list_free(out);
      return bbw_fail(BB_ERR_MALFORMED, "%s: value %zu claims %llu bytes, %zu are left", what, i,
                      (unsigned long long)size, len - at);
    }
    out->n = i + 1;
    if (hash != 0) {
      bb_error err;
      bb_error_clear(&err);
      int rc = bb_val_decode(hash, data + at, (size_t)size, NULL, &out->items[i], &err);
      if (rc < 0) {
        bbw_value_list_free(out);
        return bbw_fail(rc, "%s: value %zu: %s", what, i, err.message[0] ? err.message : bb_strerror(rc));
      }
    } else if (size != 0) {
      bbw_value_list_free(out);
      return bbw_fail(BB_ERR_MALFORMED, "%s: value %zu is absent (type hash 0) but has %llu bytes", what, i,
                      (unsigned long long)size);
    }
    at += (size_t)size;
  }
  if (at != len) {
    size_t extra = len - at;
    bbw_value_list_free(out);
    return bbw_fail(BB_ERR_MALFORMED, "%s: %zu bytes after the last value", what, extra);
  }
  return BB_OK;
}

/* ---- results out ---------------------------------------------------------------------- */

bb_le_writer bbw_writer(void) { return bb_le_writer_growing(bb_default_allocator()); }

void bbw_write_field(bb_le_writer *w, const void *data, size_t len) {
  /* the length is a u32: a longer field cannot be written, and the result fails */
  if (len > UINT32_MAX) {
    w->failed = true;
    return;
  }
  bb_le_write_u32(w, (uint32_t)len);
  bb_le_write(w, data, len);
}

void bbw_write_text(bb_le_writer *w, const char *text) { bbw_write_field(w, text, text ? strlen(text) : 0); }

/* The payload, encoded in place. */
static void write_payload(bb_le_writer *w, const bb_val *v, size_t size) {
  uint8_t *at = bb_le_write_span(w, size);
  if (at != NULL) bb_val_encode_into(v, at);
}

void bbw_write_value(bb_le_writer *w, const bb_val *v) {
  if (v == NULL) {
    bb_le_write_u64(w, 0);
    bb_le_write_u64(w, 0);
    return;
  }
  size_t size = bb_val_encoded_size(v);
  bb_le_write_u64(w, bb_val_kind_hash((int)bb_val_kind_of(v)));
  bb_le_write_u64(w, size);
  write_payload(w, v, size);
}

void bbw_write_value_field(bb_le_writer *w, const bb_val *v) {
  size_t size = bb_val_encoded_size(v);
  if (size > UINT32_MAX) {
    w->failed = true;
    return;
  }
  bb_le_write_u32(w, (uint32_t)size);
  write_payload(w, v, size);
}

int32_t bbw_result_from(bb_le_writer *w, const char *what) {
  if (!bb_le_writer_ok(w)) {
    bb_buffer_free(NULL, w->buf);
    return bbw_fail(BB_ERR_NOMEM, "%s: out of memory", what);
  }
  bbw_result_take(w->buf, w->len);
  return BB_OK;
}

/* ---- peer ids and packed strings --------------------------------------------------------- */

int32_t bbw_peer_parse(const char *text, const char *what, bb_peer_id *out) {
  if (text == NULL) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "%s: no peer id", what);
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_peer_id_from_text(text, out, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, what) : BB_OK;
}

int32_t bbw_count_strings(const char *packed, size_t len, size_t max, const char *what) {
  if (len == 0) return 0;
  if (packed == NULL) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "%s: NULL list of %zu bytes", what, len);
  if (packed[len - 1] != '\0') return bbw_fail(BB_ERR_INVALID_ARGUMENT, "%s: the last name is not NUL-terminated", what);
  size_t n = 0;
  for (size_t i = 0; i < len; i++) n += packed[i] == '\0';
  if (n > max) return bbw_fail(BB_ERR_LIMIT, "%s: %zu names, at most %zu", what, n, max);
  return (int32_t)n;
}
