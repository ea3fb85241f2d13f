/* A bump allocator for data that lives and dies together (an IR model, a compile).
 * Blocks come from a bb_allocator; nothing is freed until the arena is. */
#ifndef BBI_UTIL_ARENA_H
#define BBI_UTIL_ARENA_H

#include "bb/common.h"

typedef struct bb_arena bb_arena;

bb_arena *bbi_arena_new(const bb_allocator *alloc);
void bbi_arena_free(bb_arena *arena);
const bb_allocator *bbi_arena_allocator(const bb_arena *arena);

/* Zeroed memory aligned for any scalar type; NULL when out of memory (or size overflow). */
void *bbi_arena_alloc(bb_arena *arena, size_t size);
/* Grows an array allocated from this arena from old_size to new_size bytes, in place
 * when it was the last allocation; the new tail is zeroed. */
void *bbi_arena_grow(bb_arena *arena, void *ptr, size_t old_size, size_t new_size);
/* Copies of memory and strings. NULL in (for strdup) gives NULL out. */
void *bbi_arena_memdup(bb_arena *arena, const void *src, size_t size);
char *bbi_arena_strdup(bb_arena *arena, const char *s);
char *bbi_arena_strndup(bb_arena *arena, const char *s, size_t len);
/* A copy of len bytes followed by a NUL that is not counted in len, so stored bytes can
 * be read as a C string when they hold no NUL of their own. */
uint8_t *bbi_arena_bytesdup(bb_arena *arena, const void *src, size_t len);

/* Bytes the arena holds from its allocator (blocks, not just what was handed out). */
size_t bbi_arena_footprint(const bb_arena *arena);

/* Makes room for one more element in a growable array {items, len, cap} kept in the
 * arena. Returns 0 or BB_ERR_NOMEM. */
int bbi_arena_reserve(bb_arena *arena, void **items, size_t *cap, size_t len, size_t elem_size);

#define BBI_ARENA_PUSH(arena, list, value)                                                   \
  (bbi_arena_reserve((arena), (void **)&(list)->items, &(list)->cap, (list)->len,             \
                    sizeof(*(list)->items)) == 0                                             \
       ? ((list)->items[(list)->len++] = (value), 0)                                         \
       : BB_ERR_NOMEM)

#endif
