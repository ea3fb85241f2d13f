#include "util/mem_pool.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "util/mem.h"

/* Every block starts with its size class; the header keeps the payload as aligned as the
 * underlying allocator's blocks are. A free block links to the next in its payload. */
typedef union header {
  size_t size;
  max_align_t align;
} header;

#define SIZE_STEP 64u /* the smallest step between size classes */

typedef struct bin {
  size_t size; /* 0: an empty slot of the table */
  void *head;  /* the first free block (its header), or NULL */
} bin;

struct bbi_mem_pool {
  bb_allocator self;
  const bb_allocator *base;
  bin *bins; /* open addressing, linear probing; cap a power of two */
  size_t cap, n_bins;
  size_t blocks_out;
  bbi_mem_pool_stats stats;
  bool closed;
};

/* Sizes round up to a multiple of SIZE_STEP, and from 1 KiB on to the next of the eight
 * steps per doubling (at most 12.5 % more): near sizes share a bin, so a block freed by
 * one tensor serves the next of about its size. */
static size_t size_class(size_t size) {
  size_t cls = (size + SIZE_STEP - 1) / SIZE_STEP * SIZE_STEP;
  if (cls < 1024) return cls;
  size_t top = (size_t)1 << (sizeof(size_t) * 8 - 1);
  while (!(cls & top)) top >>= 1;
  size_t step = top >> 3;
  return (cls + step - 1) / step * step;
}

static void *block_next(void *block) {
  void *next;
  memcpy(&next, (char *)block + sizeof(header), sizeof next);
  return next;
}

static void set_block_next(void *block, void *next) { memcpy((char *)block + sizeof(header), &next, sizeof next); }

static size_t slot_of(size_t size, size_t cap) {
  uint64_t h = (uint64_t)(size / SIZE_STEP) * 0x9e3779b97f4a7c15ull;
  return (size_t)(h >> 32) & (cap - 1);
}

static bin *find_bin(const bbi_mem_pool *p, size_t size) {
  if (!p->cap) return NULL;
  for (size_t i = slot_of(size, p->cap);; i = (i + 1) & (p->cap - 1)) {
    if (p->bins[i].size == size) return &p->bins[i];
    if (!p->bins[i].size) return NULL;
  }
}

/* The bin for size, made when missing; NULL when the table is full or cannot grow. */
static bin *bin_for(bbi_mem_pool *p, size_t size) {
  bin *b = find_bin(p, size);
  if (b) return b;
  if (p->n_bins >= BBI_MEM_POOL_MAX_SIZES) return NULL;
  if (2 * (p->n_bins + 1) > p->cap) {
    size_t cap = p->cap ? 2 * p->cap : 64;
    bin *grown = bbi_mem_calloc(p->base, cap, sizeof *grown);
    if (!grown) return NULL;
    for (size_t i = 0; i < p->cap; i++) {
      if (!p->bins[i].size) continue;
      size_t k = slot_of(p->bins[i].size, cap);
      while (grown[k].size) k = (k + 1) & (cap - 1);
      grown[k] = p->bins[i];
    }
    bbi_mem_free(p->base, p->bins);
    p->bins = grown;
    p->cap = cap;
  }
  size_t i = slot_of(size, p->cap);
  while (p->bins[i].size) i = (i + 1) & (p->cap - 1);
  p->bins[i].size = size;
  p->bins[i].head = NULL;
  p->n_bins++;
  return &p->bins[i];
}

static void *pool_malloc(size_t size, void *user_data) {
  bbi_mem_pool *p = user_data;
  if (size > SIZE_MAX - sizeof(header) - SIZE_STEP) return NULL;
  size_t cls = size_class(size);
  bin *b = find_bin(p, cls);
  void *block = b ? b->head : NULL;
  if (block) {
    b->head = block_next(block);
    p->stats.cached -= cls;
    p->stats.reuses++;
  } else {
    block = p->base->malloc(sizeof(header) + cls, p->base->user_data);
    if (!block) return NULL;
    p->stats.base_allocations++;
  }
  ((header *)block)->size = cls;
  p->blocks_out++;
  p->stats.outstanding += cls;
  if (p->stats.outstanding > p->stats.high_water) p->stats.high_water = p->stats.outstanding;
  if (p->stats.outstanding + p->stats.cached > p->stats.held_high_water)
    p->stats.held_high_water = p->stats.outstanding + p->stats.cached;
  return (char *)block + sizeof(header);
}

static void release_pool(bbi_mem_pool *p) {
  const bb_allocator *base = p->base;
  bbi_mem_free(base, p->bins);
  bbi_mem_free(base, p);
}

static void pool_free(void *ptr, void *user_data) {
  bbi_mem_pool *p = user_data;
  if (!ptr) return;
  void *block = (char *)ptr - sizeof(header);
  size_t cls = ((header *)block)->size;
  p->blocks_out--;
  p->stats.outstanding -= cls;
  bool keep = !p->closed && p->stats.cached + cls <= 2 * p->stats.high_water;
  bin *b = keep ? bin_for(p, cls) : NULL;
  if (b) {
    set_block_next(block, b->head);
    b->head = block;
    p->stats.cached += cls;
    return;
  }
  bbi_mem_free(p->base, block);
  if (p->closed && !p->blocks_out) release_pool(p);
}

static void *pool_realloc(void *ptr, size_t size, void *user_data) {
  if (!ptr) return pool_malloc(size, user_data);
  size_t cls = ((header *)((char *)ptr - sizeof(header)))->size;
  if (size <= cls) return ptr;
  void *grown = pool_malloc(size, user_data);
  if (!grown) return NULL;
  memcpy(grown, ptr, cls);
  pool_free(ptr, user_data);
  return grown;
}

bbi_mem_pool *bbi_mem_pool_new(const bb_allocator *base) {
  if (!base) base = bb_default_allocator();
  bbi_mem_pool *p = bbi_mem_calloc(base, 1, sizeof *p);
  if (!p) return NULL;
  p->base = base;
  p->self = (bb_allocator){pool_malloc, pool_realloc, pool_free, p};
  return p;
}

const bb_allocator *bbi_mem_pool_allocator(bbi_mem_pool *p) { return &p->self; }

void bbi_mem_pool_close(bbi_mem_pool *p) {
  if (!p) return;
  p->closed = true;
  for (size_t i = 0; i < p->cap; i++)
    for (void *block = p->bins[i].head; block;) {
      void *next = block_next(block);
      bbi_mem_free(p->base, block);
      block = next;
    }
  bbi_mem_free(p->base, p->bins);
  p->bins = NULL;
  p->cap = p->n_bins = 0;
  p->stats.cached = 0;
  if (!p->blocks_out) release_pool(p);
}

void bbi_mem_pool_get_stats(const bbi_mem_pool *p, bbi_mem_pool_stats *out) { *out = p->stats; }
