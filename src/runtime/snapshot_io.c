/* The byte forms every part's save and load share (snapshot_io.h). */
#include <string.h>

#include "runtime/snapshot_io.h"
#include "util/mem.h"

rt_reader rt_reader_of(const uint8_t *data, size_t len, const bb_allocator *alloc, bb_error *err) {
  return (rt_reader){bb_le_reader_of(data, len), alloc, err, 0};
}

int rt_read_bad(rt_reader *r, const char *what) {
  if (!r->rc) r->rc = bb_error_set(r->err, BB_ERR_MALFORMED, "restore: %s (at byte %zu)", what, r->in.at);
  return r->rc;
}

int rt_read_nomem(rt_reader *r) {
  if (!r->rc) r->rc = bb_error_set(r->err, BB_ERR_NOMEM, "restore: out of memory");
  return r->rc;
}

bool rt_read_take(rt_reader *r, void *out, size_t len) {
  if (r->rc) return false;
  if (!bb_le_read(&r->in, out, len)) return rt_read_bad(r, "the snapshot is truncated"), false;
  return true;
}

uint64_t rt_read_u64(rt_reader *r) {
  uint8_t b[8] = {0};
  rt_read_take(r, b, 8);
  return bb_le_get_u64(b);
}

uint32_t rt_read_u32(rt_reader *r) {
  uint8_t b[4] = {0};
  rt_read_take(r, b, 4);
  return bb_le_get_u32(b);
}

uint8_t rt_read_u8(rt_reader *r) {
  uint8_t x = 0;
  rt_read_take(r, &x, 1);
  return x;
}

size_t rt_read_count(rt_reader *r, size_t unit, const char *what) {
  uint64_t n = rt_read_u64(r);
  if (!r->rc && n > bb_le_left(&r->in) / unit) rt_read_bad(r, what);
  return r->rc ? 0 : (size_t)n;
}

const uint8_t *rt_read_span(rt_reader *r, size_t *len) {
  *len = rt_read_count(r, 1, "a length runs past the end");
  const uint8_t *p = r->in.p + r->in.at;
  return rt_read_take(r, NULL, *len) ? p : NULL;
}

bool rt_read_peer(rt_reader *r, bb_peer_id *out) {
  size_t len;
  const uint8_t *p = rt_read_span(r, &len);
  if (!p) return false;
  if (bb_peer_id_from_bytes(p, len, out, NULL)) return rt_read_bad(r, "a peer id is malformed"), false;
  return true;
}

bb_val *rt_read_value(rt_reader *r) {
  uint64_t hash = rt_read_u64(r);
  size_t len;
  const uint8_t *p = rt_read_span(r, &len);
  if (r->rc) return NULL;
  bb_val *v = NULL;
  bb_error verr;
  int rc = bb_val_decode(hash, p ? p : (const uint8_t *)"", len, r->alloc, &v, &verr);
  if (rc)
    r->rc = bb_error_set(r->err, rc == BB_ERR_NOMEM ? BB_ERR_NOMEM : BB_ERR_MALFORMED,
                         "restore: a value does not decode: %s", verr.message);
  return rc ? NULL : v;
}

void rt_write_bytes(bb_le_writer *w, const void *data, size_t len) {
  bb_le_write_u64(w, len);
  bb_le_write(w, data, len);
}

void rt_write_str(bb_le_writer *w, const char *s) { rt_write_bytes(w, s, strlen(s)); }

void rt_write_peer(bb_le_writer *w, const bb_peer_id *p) { rt_write_bytes(w, p->bytes, p->len); }

void rt_write_value(bb_le_writer *w, const bb_val *v) {
  size_t size = bb_val_encoded_size(v);
  bb_le_write_u64(w, bb_val_kind_hash((int)bb_val_kind_of(v)));
  bb_le_write_u64(w, size);
  if (w->failed) return;
  uint8_t *tmp = bbi_mem_alloc(w->alloc, size);
  if (!tmp) {
    w->failed = true;
    return;
  }
  bb_val_encode_into(v, tmp);
  bb_le_write(w, tmp, size);
  bbi_mem_free(w->alloc, tmp);
}
