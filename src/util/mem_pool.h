/* A recycling allocator: blocks freed through it are kept by size and handed out again to
 * the next request of that size, so a computation that repeats the same allocations (a
 * graph run step after step) stops calling the underlying allocator once it is warm.
 *
 * Sizes are rounded up to classes (multiples of 64 bytes; from 1 KiB on, eight classes per
 * doubling, so at most 12.5 % is added) and a free block serves requests of its class only.
 *
 * Bounds: the pool keeps at most twice as many free bytes as were ever outstanding at once
 * (its high-water mark), so it never holds more than three times what its users needed at
 * their peak (a run that needs several sizes one after the other keeps a block of each),
 * and it tracks at most BBI_MEM_POOL_MAX_SIZES distinct block sizes (others pass straight
 * through). Not thread-safe: one owner, one thread.
 *
 * Lifetime: blocks may outlive the owner's interest in the pool (a tensor an executor
 * handed out). bbi_mem_pool_close gives the cached blocks back at once; the pool itself is
 * freed when its last outstanding block is, and blocks freed after the close go straight
 * to the underlying allocator. */
#ifndef BBI_UTIL_MEM_POOL_H
#define BBI_UTIL_MEM_POOL_H

#include <stddef.h>

#include "bb/common.h"

#define BBI_MEM_POOL_MAX_SIZES 4096

typedef struct bbi_mem_pool bbi_mem_pool;

/* A pool over base (NULL: the default allocator), or NULL when out of memory. */
bbi_mem_pool *bbi_mem_pool_new(const bb_allocator *base);

/* The allocator to hand to users; valid until the pool is freed (see above). */
const bb_allocator *bbi_mem_pool_allocator(bbi_mem_pool *p);

/* The owner lets go (NULL is a no-op): cached blocks are freed now, the pool once no block
 * is outstanding. */
void bbi_mem_pool_close(bbi_mem_pool *p);

typedef struct bbi_mem_pool_stats {
  size_t outstanding;      /* bytes handed out and not yet freed */
  size_t high_water;       /* the most bytes outstanding at once */
  size_t cached;           /* bytes kept for reuse */
  size_t held_high_water;  /* the most bytes taken from the underlying allocator at once */
  size_t base_allocations; /* requests the pool passed to the underlying allocator */
  size_t reuses;           /* requests served from the cache */
} bbi_mem_pool_stats;

void bbi_mem_pool_get_stats(const bbi_mem_pool *p, bbi_mem_pool_stats *out);

#endif
