#include "util/mem.h"

#include <stdint.h>
#include <string.h>

void *bbi_mem_alloc(const bb_allocator *a, size_t size) { return a->malloc(size ? size : 1, a->user_data); }

void *bbi_mem_calloc(const bb_allocator *a, size_t count, size_t size) {
  if (size && count > SIZE_MAX / size) return NULL;
  size_t total = count * size;
  void *p = bbi_mem_alloc(a, total);
  if (p) memset(p, 0, total ? total : 1);
  return p;
}

void *bbi_mem_realloc(const bb_allocator *a, void *p, size_t size) {
  return a->realloc(p, size ? size : 1, a->user_data);
}

void bbi_mem_free(const bb_allocator *a, void *p) {
  if (p) a->free(p, a->user_data);
}

char *bbi_mem_strdup(const bb_allocator *a, const char *s) {
  size_t len = strlen(s);
  char *d = bbi_mem_alloc(a, len + 1);
  if (d) memcpy(d, s, len + 1);
  return d;
}

int bbi_mem_grow(const bb_allocator *a, void **items, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap : 8;
  while (c < need) {
    if (c > SIZE_MAX / 2) return BB_ERR_NOMEM;
    c *= 2;
  }
  if (c > SIZE_MAX / size) return BB_ERR_NOMEM;
  void *p = bbi_mem_realloc(a, *items, c * size);
  if (!p) return BB_ERR_NOMEM;
  *items = p;
  *cap = c;
  return 0;
}
