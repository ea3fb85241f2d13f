#include "util/arena.h"

#include <stdint.h>
#include <string.h>

#define BBI_ARENA_ALIGN 16u
#define BBI_ARENA_MIN_BLOCK (16u * 1024u)
#define BBI_ARENA_MAX_BLOCK (16u * 1024u * 1024u)

typedef struct bbi_arena_block {
  struct bbi_arena_block *prev;
  size_t size; /* usable bytes after the header */
  size_t used;
  max_align_t data[]; /* aligned start of the usable bytes */
} bbi_arena_block;

struct bb_arena {
  bb_allocator alloc;
  bbi_arena_block *head;
  void *last;       /* most recent allocation, for in-place growth */
  size_t footprint; /* bytes obtained from the allocator */
};

static size_t align_up(size_t n) { return (n + (BBI_ARENA_ALIGN - 1)) & ~(size_t)(BBI_ARENA_ALIGN - 1); }

bb_arena *bbi_arena_new(const bb_allocator *alloc) {
  if (!alloc) alloc = bb_default_allocator();
  bb_arena *a = alloc->malloc(sizeof(*a), alloc->user_data);
  if (!a) return NULL;
  memset(a, 0, sizeof(*a));
  a->alloc = *alloc;
  return a;
}

void bbi_arena_free(bb_arena *arena) {
  if (!arena) return;
  bbi_arena_block *b = arena->head;
  while (b) {
    bbi_arena_block *prev = b->prev;
    arena->alloc.free(b, arena->alloc.user_data);
    b = prev;
  }
  arena->alloc.free(arena, arena->alloc.user_data);
}

const bb_allocator *bbi_arena_allocator(const bb_arena *arena) { return &arena->alloc; }

size_t bbi_arena_footprint(const bb_arena *arena) { return arena->footprint; }

static bbi_arena_block *new_block(bb_arena *a, size_t need) {
  /* Blocks double up to a cap, so small models stay small and big ones take few blocks. */
  size_t size = BBI_ARENA_MIN_BLOCK;
  if (a->head) size = a->head->size < BBI_ARENA_MAX_BLOCK / 2 ? a->head->size * 2 : BBI_ARENA_MAX_BLOCK;
  if (size < need) size = need;
  if (size > SIZE_MAX - sizeof(bbi_arena_block)) return NULL;
  bbi_arena_block *b = a->alloc.malloc(sizeof(bbi_arena_block) + size, a->alloc.user_data);
  if (!b) return NULL;
  b->prev = a->head;
  b->size = size;
  b->used = 0;
  a->head = b;
  a->footprint += sizeof(bbi_arena_block) + size;
  return b;
}

void *bbi_arena_alloc(bb_arena *a, size_t size) {
  if (size > SIZE_MAX - BBI_ARENA_ALIGN) return NULL;
  size_t need = align_up(size ? size : 1);
  bbi_arena_block *b = a->head;
  if (!b || b->size - b->used < need) {
    b = new_block(a, need);
    if (!b) return NULL;
  }
  void *p = (char *)b->data + b->used;
  b->used += need;
  memset(p, 0, size);
  a->last = p;
  return p;
}

void *bbi_arena_grow(bb_arena *a, void *ptr, size_t old_size, size_t new_size) {
  if (!ptr) return bbi_arena_alloc(a, new_size);
  if (new_size <= old_size) return ptr;
  bbi_arena_block *b = a->head;
  if (ptr == a->last && b) {
    size_t start = (size_t)((char *)ptr - (char *)b->data);
    size_t need = align_up(new_size);
    if (new_size <= SIZE_MAX - BBI_ARENA_ALIGN && b->size - start >= need) {
      memset((char *)ptr + old_size, 0, new_size - old_size);
      b->used = start + need;
      return ptr;
    }
  }
  void *p = bbi_arena_alloc(a, new_size);
  if (!p) return NULL;
  memcpy(p, ptr, old_size);
  return p;
}

void *bbi_arena_memdup(bb_arena *a, const void *src, size_t size) {
  void *p = bbi_arena_alloc(a, size);
  if (p && size) memcpy(p, src, size);
  return p;
}

char *bbi_arena_strndup(bb_arena *a, const char *s, size_t len) {
  if (!s) return NULL;
  if (len == SIZE_MAX) return NULL;
  char *p = bbi_arena_alloc(a, len + 1);
  if (!p) return NULL;
  memcpy(p, s, len);
  p[len] = '\0';
  return p;
}

uint8_t *bbi_arena_bytesdup(bb_arena *a, const void *src, size_t len) {
  return (uint8_t *)bbi_arena_strndup(a, src, len);
}

char *bbi_arena_strdup(bb_arena *a, const char *s) { return s ? bbi_arena_strndup(a, s, strlen(s)) : NULL; }

int bbi_arena_reserve(bb_arena *a, void **items, size_t *cap, size_t len, size_t elem_size) {
  if (len < *cap) return 0;
  size_t new_cap = *cap ? *cap * 2 : 4;
  if (new_cap < len + 1 || new_cap > SIZE_MAX / elem_size) return BB_ERR_NOMEM;
  void *p = bbi_arena_grow(a, *items, *cap * elem_size, new_cap * elem_size);
  if (!p) return BB_ERR_NOMEM;
  *items = p;
  *cap = new_cap;
  return 0;
}
