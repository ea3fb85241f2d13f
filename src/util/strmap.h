/* A string → uint32 hash map (open addressing, FNV-1a). Keys are borrowed, not copied:
 * they must outlive the map. Nothing iterates it, so its order never leaks into output. */
#ifndef BBI_UTIL_STRMAP_H
#define BBI_UTIL_STRMAP_H

#include <stdbool.h>
#include <stdint.h>

#include "bb/common.h"

typedef struct bbi_strmap {
  const bb_allocator *alloc;
  const char **keys;
  uint32_t *values;
  size_t cap, len;
} bbi_strmap;

void bbi_strmap_init(bbi_strmap *m, const bb_allocator *alloc);
void bbi_strmap_free(bbi_strmap *m);
/* Inserts or replaces; 0 or BB_ERR_NOMEM. */
int bbi_strmap_put(bbi_strmap *m, const char *key, uint32_t value);
/* True and *value when present. */
bool bbi_strmap_get(const bbi_strmap *m, const char *key, uint32_t *value);

#endif
