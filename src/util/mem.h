/* Allocation through a caller's bb_allocator: the one set of wrappers every layer uses,
 * so a size of 0, a count × size overflow and a NULL free mean the same thing everywhere. */
#ifndef BBI_UTIL_MEM_H
#define BBI_UTIL_MEM_H

#include <stddef.h>

#include "bb/common.h"

/* size bytes (at least 1, so a NULL result always means out of memory). */
void *bbi_mem_alloc(const bb_allocator *a, size_t size);

/* count × size zeroed bytes; NULL when the product overflows or memory runs out. */
void *bbi_mem_calloc(const bb_allocator *a, size_t count, size_t size);

/* Resizes p (NULL: allocates) to size bytes (at least 1); NULL leaves p untouched. */
void *bbi_mem_realloc(const bb_allocator *a, void *p, size_t size);

/* Frees p; NULL is a no-op. */
void bbi_mem_free(const bb_allocator *a, void *p);

/* A copy of the NUL-terminated s, or NULL. */
char *bbi_mem_strdup(const bb_allocator *a, const char *s);

/* Makes *items (an array of *cap elements of size bytes) hold at least need elements,
 * doubling from 8; 0, or BB_ERR_NOMEM with *items and *cap unchanged. */
int bbi_mem_grow(const bb_allocator *a, void **items, size_t *cap, size_t need, size_t size);

#endif
