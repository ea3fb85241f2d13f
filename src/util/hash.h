/* FNV-1a, the project's one non-cryptographic hash: type hashes on the wire, snapshot and
 * state checksums, slot numbers, hash-table slots and digests. Stable across platforms. */
#ifndef BBI_UTIL_HASH_H
#define BBI_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>

#define BBI_FNV1A64_INIT 0xcbf29ce484222325ull
#define BBI_FNV1A32_INIT 0x811c9dc5u

/* Folds len bytes into a running FNV-1a 64 hash h (start from BBI_FNV1A64_INIT). */
static inline uint64_t bbi_fnv1a64_update(uint64_t h, const void *data, size_t len) {
  const uint8_t *p = data;
  for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

/* FNV-1a 64 of len bytes. */
static inline uint64_t bbi_fnv1a64(const void *data, size_t len) { return bbi_fnv1a64_update(BBI_FNV1A64_INIT, data, len); }

/* Folds len bytes into a running FNV-1a 32 hash h (start from BBI_FNV1A32_INIT). */
static inline uint32_t bbi_fnv1a32_update(uint32_t h, const void *data, size_t len) {
  const uint8_t *p = data;
  for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

/* FNV-1a 32 of len bytes. */
static inline uint32_t bbi_fnv1a32(const void *data, size_t len) { return bbi_fnv1a32_update(BBI_FNV1A32_INIT, data, len); }

#endif
