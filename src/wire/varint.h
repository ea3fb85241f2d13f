/* Unsigned LEB128 varints as protobuf and multiformats write them. */
#ifndef BBI_WIRE_VARINT_H
#define BBI_WIRE_VARINT_H

#include <stddef.h>
#include <stdint.h>

/* Reads a varint at *pos. Returns 0, 1 when the input ends first, 2 when it runs past
 * 10 bytes, 3 when it is not minimal (a trailing 0x00 byte; only when strict). */
static inline int bbi_varint_read(const uint8_t *d, size_t len, size_t *pos, uint64_t *out, int strict) {
  uint64_t v = 0;
  for (unsigned i = 0; i < 10; i++) {
    if (*pos >= len) return 1;
    uint8_t b = d[(*pos)++];
    if (i == 9 && b > 1) return 2; /* bits past 64 */
    v |= (uint64_t)(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      if (strict && i > 0 && b == 0) return 3;
      *out = v;
      return 0;
    }
  }
  return 2;
}

/* Bytes a varint of v takes. */
static inline size_t bbi_varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) v >>= 7, n++;
  return n;
}

/* Writes v at out (room for 10 bytes); returns the bytes written. */
static inline size_t bbi_varint_write(uint64_t v, uint8_t *out) {
  size_t n = 0;
  while (v >= 0x80) out[n++] = (uint8_t)(v | 0x80), v >>= 7;
  out[n++] = (uint8_t)v;
  return n;
}

#endif
