/* bytesandbrains — the byte layouts bb.wasm's engine functions share (bb_wasm.h, "byte
 * layouts"): value lists in and out, length-prefixed fields, packed strings, peer ids as
 * text, and the attributes and tensor literals a recording takes. Every integer is
 * little-endian, through bb/bytes.h. */
#include <stdio.h>
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

/* ---- scratch memory --------------------------------------------------------------------- */

void *bbw_scratch_alloc(bbw_scratch *s, size_t size, const char *what) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 16;
    void **blocks = realloc(s->blocks, cap * sizeof *blocks);
    if (blocks == NULL) {
      bbw_fail(BB_ERR_NOMEM, "%s: out of memory", what);
      return NULL;
    }
    s->blocks = blocks;
    s->cap = cap;
  }
  void *p = calloc(1, size ? size : 1);
  if (p == NULL) {
    bbw_fail(BB_ERR_NOMEM, "%s: out of memory", what);
    return NULL;
  }
  s->blocks[s->n++] = p;
  return p;
}

void bbw_scratch_free(bbw_scratch *s) {
  for (size_t i = 0; i < s->n; i++) free(s->blocks[i]);
  free(s->blocks);
  *s = (bbw_scratch){0};
}

/* ---- attributes and literals in ------------------------------------------------------------ */

/* A u32-length text as a NUL-terminated copy in s; NULL (recorded) when cut short or
 * holding a NUL byte. */
static const char *read_text(bb_le_reader *r, const char *what, const char *field, bbw_scratch *s) {
  uint32_t len = 0;
  const uint8_t *at = bb_le_read_u32(r, &len) ? bb_le_read_span(r, len) : NULL;
  if (at == NULL) {
    bbw_fail(BB_ERR_MALFORMED, "%s: %s is cut short", what, field);
    return NULL;
  }
  if (memchr(at, '\0', len) != NULL) {
    bbw_fail(BB_ERR_MALFORMED, "%s: %s holds a NUL byte", what, field);
    return NULL;
  }
  char *copy = bbw_scratch_alloc(s, (size_t)len + 1, what);
  if (copy != NULL) memcpy(copy, at, len);
  return copy;
}

/* A u32 item count no larger than what is left at `item_size` bytes each. */
static bool read_count(bb_le_reader *r, size_t item_size, uint32_t *n) {
  return bb_le_read_u32(r, n) && *n <= BBW_ATTR_ITEMS_MAX && (size_t)*n <= bb_le_left(r) / item_size;
}

int32_t bbw_literal_decode(bb_le_reader *r, const char *what, bbw_scratch *s, bb_literal *out) {
  *out = (bb_literal){0};
  uint32_t dtype = 0, rank = 0, len = 0;
  uint8_t has_data = 0;
  if (!bb_le_read_u32(r, &dtype) || !read_count(r, 8, &rank))
    return bbw_fail(BB_ERR_MALFORMED, "%s: the literal's element type and rank are cut short", what);
  int64_t *dims = bbw_scratch_alloc(s, (size_t)rank * sizeof *dims, what);
  if (dims == NULL) return bbw_last();
  for (uint32_t i = 0; i < rank; i++) {
    uint64_t d = 0;
    bb_le_read_u64(r, &d);
    dims[i] = (int64_t)d;
  }
  if (!bb_le_read_u8(r, &has_data) || !bb_le_read_u32(r, &len) || has_data > 1)
    return bbw_fail(BB_ERR_MALFORMED, "%s: the literal's data flag and length are cut short or invalid", what);
  const uint8_t *data = bb_le_read_span(r, len);
  if (data == NULL) return bbw_fail(BB_ERR_MALFORMED, "%s: the literal's %u data bytes are cut short", what, len);
  void *copy = NULL;
  if (has_data && (copy = bbw_scratch_alloc(s, len, what)) == NULL) return bbw_last();
  if (copy != NULL) memcpy(copy, data, len);
  *out = (bb_literal){(bb_dtype)dtype, dims, rank, copy, has_data ? len : 0};
  return BB_OK;
}

/* One attribute's value, by its type; types the layout has no value for carry none (the
 * recorder refuses them with its own message). */
static int32_t read_attr_value(bb_le_reader *r, const char *what, bbw_scratch *s, bb_op_attr *a) {
  uint64_t u = 0;
  uint32_t n = 0;
  switch (a->type) {
  case BB_ATTR_INT:
    if (!bb_le_read_u64(r, &u)) break;
    a->i = (int64_t)u;
    return BB_OK;
  case BB_ATTR_FLOAT:
    return bb_le_read_f32(r, &a->f) ? BB_OK : bbw_fail(BB_ERR_MALFORMED, "%s: its FLOAT is cut short", what);
  case BB_ATTR_STRING:
    return (a->s = read_text(r, what, "its STRING", s)) != NULL ? BB_OK : bbw_last();
  case BB_ATTR_INTS: {
    if (!read_count(r, 8, &n)) break;
    int64_t *v = bbw_scratch_alloc(s, (size_t)n * sizeof *v, what);
    if (v == NULL) return bbw_last();
    for (uint32_t i = 0; i < n; i++) bb_le_read_u64(r, (uint64_t *)&v[i]);
    a->ints = v;
    a->n = n;
    return BB_OK;
  }
  case BB_ATTR_FLOATS: {
    if (!read_count(r, 4, &n)) break;
    float *v = bbw_scratch_alloc(s, (size_t)n * sizeof *v, what);
    if (v == NULL) return bbw_last();
    for (uint32_t i = 0; i < n; i++) bb_le_read_f32(r, &v[i]);
    a->floats = v;
    a->n = n;
    return BB_OK;
  }
  case BB_ATTR_STRINGS: {
    if (!read_count(r, 4, &n)) break;
    const char **v = bbw_scratch_alloc(s, (size_t)n * sizeof *v, what);
    if (v == NULL) return bbw_last();
    for (uint32_t i = 0; i < n; i++)
      if ((v[i] = read_text(r, what, "one of its STRINGS", s)) == NULL) return bbw_last();
    a->strings = v;
    a->n = n;
    return BB_OK;
  }
  case BB_ATTR_TENSOR: {
    bb_literal *lit = bbw_scratch_alloc(s, sizeof *lit, what);
    if (lit == NULL || bbw_literal_decode(r, what, s, lit) < 0) return bbw_last();
    a->t = lit;
    return BB_OK;
  }
  default:
    return BB_OK;
  }
  return bbw_fail(BB_ERR_MALFORMED, "%s: its %s value is cut short", what, bb_attr_type_name(a->type));
}

int32_t bbw_attrs_decode(const uint8_t *data, size_t len, const char *what, bbw_scratch *s, bb_op_attr **out,
                         size_t *n_out) {
  *out = NULL;
  *n_out = 0;
  if (len == 0) return BB_OK;
  if (data == NULL) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "%s: NULL attributes of %zu bytes", what, len);
  bb_le_reader r = bb_le_reader_of(data, len);
  uint32_t n = 0;
  if (!bb_le_read_u32(&r, &n) || n > BBW_ATTRS_MAX)
    return bbw_fail(BB_ERR_MALFORMED, "%s: an attribute list starts with a u32 count of at most %d", what,
                    BBW_ATTRS_MAX);
  bb_op_attr *attrs = bbw_scratch_alloc(s, (size_t)n * sizeof *attrs, what);
  if (attrs == NULL) return bbw_last();
  for (uint32_t i = 0; i < n; i++) {
    char each[BBW_NAME_MAX + 32];
    snprintf(each, sizeof each, "%s: attribute %u", what, i);
    uint32_t type = 0;
    if ((attrs[i].name = read_text(&r, each, "its name", s)) == NULL) return bbw_last();
    if (!bb_le_read_u32(&r, &type)) return bbw_fail(BB_ERR_MALFORMED, "%s: its type is cut short", each);
    attrs[i].type = (bb_attr_type)type;
    if (read_attr_value(&r, each, s, &attrs[i]) < 0) return bbw_last();
  }
  if (bb_le_left(&r) != 0) return bbw_fail(BB_ERR_MALFORMED, "%s: %zu bytes after the last attribute", what, bb_le_left(&r));
  *out = attrs;
  *n_out = n;
  return BB_OK;
}
