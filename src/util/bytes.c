#include "bb/bytes.h"

#include "util/mem.h"

static bool reserve(bb_le_writer *w, size_t len) {
  if (w->failed) return false;
  if (len > SIZE_MAX - w->len) {
    w->failed = true;
    return false;
  }
  if (w->len + len <= w->cap) return true;
  if (!w->alloc) return false;
  size_t cap = w->cap ? w->cap : 256;
  while (cap < w->len + len) {
    if (cap > SIZE_MAX / 2) {
      w->failed = true;
      return false;
    }
    cap *= 2;
  }
  uint8_t *b = bbi_mem_realloc(w->alloc, w->buf, cap);
  if (!b) {
    w->failed = true;
    return false;
  }
  w->buf = b;
  w->cap = cap;
  return true;
}

void bb_le_write(bb_le_writer *w, const void *data, size_t len) {
  if (reserve(w, len)) {
    if (len) memcpy(w->buf + w->len, data, len);
  }
  if (!w->failed) w->len += len;
}

uint8_t *bb_le_write_span(bb_le_writer *w, size_t len) {
  uint8_t *at = reserve(w, len) ? w->buf + w->len : NULL;
  if (!w->failed) w->len += len;
  return at;
}

void bb_le_write_u8(bb_le_writer *w, uint8_t v) { bb_le_write(w, &v, 1); }
void bb_le_write_u16(bb_le_writer *w, uint16_t v) {
  uint8_t b[2];
  bb_le_put_u16(b, v);
  bb_le_write(w, b, 2);
}
void bb_le_write_u32(bb_le_writer *w, uint32_t v) {
  uint8_t b[4];
  bb_le_put_u32(b, v);
  bb_le_write(w, b, 4);
}
void bb_le_write_u64(bb_le_writer *w, uint64_t v) {
  uint8_t b[8];
  bb_le_put_u64(b, v);
  bb_le_write(w, b, 8);
}
void bb_le_write_f32(bb_le_writer *w, float v) {
  uint8_t b[4];
  bb_le_put_f32(b, v);
  bb_le_write(w, b, 4);
}

const uint8_t *bb_le_read_span(bb_le_reader *r, size_t len) {
  if (len > r->len - r->at) {
    r->short_read = true;
    return NULL;
  }
  const uint8_t *p = r->p + r->at;
  r->at += len;
  return p;
}

bool bb_le_read(bb_le_reader *r, void *out, size_t len) {
  const uint8_t *p = bb_le_read_span(r, len);
  if (!p) return false;
  if (out && len) memcpy(out, p, len);
  return true;
}

bool bb_le_read_u8(bb_le_reader *r, uint8_t *out) {
  const uint8_t *p = bb_le_read_span(r, 1);
  if (p) *out = p[0];
  return p != NULL;
}
bool bb_le_read_u16(bb_le_reader *r, uint16_t *out) {
  const uint8_t *p = bb_le_read_span(r, 2);
  if (p) *out = bb_le_get_u16(p);
  return p != NULL;
}
bool bb_le_read_u32(bb_le_reader *r, uint32_t *out) {
  const uint8_t *p = bb_le_read_span(r, 4);
  if (p) *out = bb_le_get_u32(p);
  return p != NULL;
}
bool bb_le_read_u64(bb_le_reader *r, uint64_t *out) {
  const uint8_t *p = bb_le_read_span(r, 8);
  if (p) *out = bb_le_get_u64(p);
  return p != NULL;
}
bool bb_le_read_f32(bb_le_reader *r, float *out) {
  const uint8_t *p = bb_le_read_span(r, 4);
  if (p) *out = bb_le_get_f32(p);
  return p != NULL;
}
