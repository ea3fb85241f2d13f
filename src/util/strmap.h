/* A string → uint32 hash map (open addressing, FNV-1a). Keys are borrowed, not copied:
 * they must outlive the map. Nothing iterates it, so its order never leaks into output. */
#ifndef BB_UTIL_STRMAP_H
#define BB_UTIL_STRMAP_H

#include <stdbool.h>
#include <stdint.h>

#include "bb/common.h"

typedef struct bb_strmap {
  const bb_allocator *alloc;
  const char **keys;
  uint32_t *values;
  size_t cap, len;
} bb_strmap;

void bb_strmap_init(bb_strmap *m, const bb_allocator *alloc);
void bb_strmap_free(bb_strmap *m);
/* Inserts or replaces; 0 or BB_ERR_NOMEM. */
int bb_strmap_put(bb_strmap *m, const char *key, uint32_t value);
/* True and *value when present. */
bool bb_strmap_get(const bb_strmap *m, const char *key, uint32_t *value);

#endif
