/* bytesandbrains — little-endian bytes: fixed-width loads and stores, a writer (growing
 * through an allocator, or into a fixed buffer) and a bounds-checked reader. Every binary
 * format of the project (values, snapshots, component states, control messages, the byte
 * layouts of bb.wasm's ABI) is built on these, so each byte order and bounds rule is
 * written once; a component written in C saves and loads its state with them too. */
#ifndef BB_BYTES_H
#define BB_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bb/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- loads and stores at a pointer the caller has checked ---------------------------- */

static inline void bb_le_put_u16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static inline void bb_le_put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void bb_le_put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void bb_le_put_f32(uint8_t *p, float f) {
  uint32_t v;
  memcpy(&v, &f, 4);
  bb_le_put_u32(p, v);
}
static inline uint16_t bb_le_get_u16(const uint8_t *p) { return (uint16_t)(p[0] | (uint16_t)p[1] << 8); }
static inline uint32_t bb_le_get_u32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static inline uint64_t bb_le_get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static inline float bb_le_get_f32(const uint8_t *p) {
  uint32_t v = bb_le_get_u32(p);
  float f;
  memcpy(&f, &v, 4);
  return f;
}

/* ---- the writer ----------------------------------------------------------------------- */

/* Appends bytes. Growing (alloc set): the buffer doubles as needed and `failed` records an
 * allocation that did not succeed (later writes are dropped). Fixed (alloc NULL): bytes
 * past cap are not stored but still counted, so a first pass over a NULL buffer measures
 * what a second pass writes. */
typedef struct bb_le_writer {
  const bb_allocator *alloc;
  uint8_t *buf;
  size_t len, cap;
  bool failed;
} bb_le_writer;

/* A writer that grows through alloc; the caller frees w.buf with bb_buffer_free(alloc, ...). */
static inline bb_le_writer bb_le_writer_growing(const bb_allocator *alloc) {
  return (bb_le_writer){alloc, NULL, 0, 0, false};
}
/* A writer into buf[0..cap) (buf may be NULL with cap 0: a measuring pass). */
static inline bb_le_writer bb_le_writer_fixed(uint8_t *buf, size_t cap) {
  return (bb_le_writer){NULL, buf, 0, cap, false};
}

/* True when every byte written so far is in the buffer. */
static inline bool bb_le_writer_ok(const bb_le_writer *w) { return !w->failed && w->len <= w->cap; }

BB_API void bb_le_write(bb_le_writer *w, const void *data, size_t len);
BB_API void bb_le_write_u8(bb_le_writer *w, uint8_t v);
BB_API void bb_le_write_u16(bb_le_writer *w, uint16_t v);
BB_API void bb_le_write_u32(bb_le_writer *w, uint32_t v);
BB_API void bb_le_write_u64(bb_le_writer *w, uint64_t v);
BB_API void bb_le_write_f32(bb_le_writer *w, float v);
/* Appends len bytes the caller fills in place (an encoder that writes into a buffer):
 * where they go, or NULL when they are not stored (the writer failed, or they pass a
 * fixed buffer's end; they still count, as every write does). */
BB_API uint8_t *bb_le_write_span(bb_le_writer *w, size_t len);

/* ---- the reader ----------------------------------------------------------------------- */

/* Reads from p[0..len). A read past the end returns false, leaves `at` where it was and
 * sets `short_read`, so a caller may read a whole record and check once. */
typedef struct bb_le_reader {
  const uint8_t *p;
  size_t len, at;
  bool short_read;
} bb_le_reader;

static inline bb_le_reader bb_le_reader_of(const void *p, size_t len) {
  return (bb_le_reader){(const uint8_t *)p, len, 0, false};
}
/* Bytes not read yet. */
static inline size_t bb_le_left(const bb_le_reader *r) { return r->len - r->at; }

/* Copies len bytes to out (NULL: skips them). */
BB_API bool bb_le_read(bb_le_reader *r, void *out, size_t len);
/* The next len bytes in place (NULL when fewer are left). */
BB_API const uint8_t *bb_le_read_span(bb_le_reader *r, size_t len);
BB_API bool bb_le_read_u8(bb_le_reader *r, uint8_t *out);
BB_API bool bb_le_read_u16(bb_le_reader *r, uint16_t *out);
BB_API bool bb_le_read_u32(bb_le_reader *r, uint32_t *out);
BB_API bool bb_le_read_u64(bb_le_reader *r, uint64_t *out);
BB_API bool bb_le_read_f32(bb_le_reader *r, float *out);

#ifdef __cplusplus
}
#endif
#endif /* BB_BYTES_H */
