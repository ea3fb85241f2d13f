/* A FIFO of fixed-size elements in a ring that grows: the runtime's frontier, ingress and
 * outbound queues and its bounded histories. Callers keep their own caps (a ring only
 * grows when pushed); order is preserved across growth. */
#ifndef BBI_UTIL_RING_H
#define BBI_UTIL_RING_H

#include <stdbool.h>
#include <stddef.h>

#include "bb/common.h"

typedef struct bbi_ring {
  void *items;
  size_t elem; /* element size in bytes */
  size_t head, len, cap;
} bbi_ring;

/* An empty ring of elements of elem bytes. */
static inline bbi_ring bbi_ring_of(size_t elem) { return (bbi_ring){NULL, elem, 0, 0, 0}; }

/* The k-th element from the head (k < len). */
static inline void *bbi_ring_at(const bbi_ring *r, size_t k) {
  return (char *)r->items + ((r->head + k) % r->cap) * r->elem;
}

/* Appends a copy of item at the tail, growing the ring; 0 or BB_ERR_NOMEM. */
int bbi_ring_push(bbi_ring *r, const bb_allocator *a, const void *item);

/* Removes the head into out (NULL: drops it); false when empty. */
bool bbi_ring_pop(bbi_ring *r, void *out);

/* Removes the k-th element (k < len), keeping the order of the others. */
void bbi_ring_remove(bbi_ring *r, size_t k);

/* Keeps the first len elements (len ≤ r->len): after a caller compacted the ones it
 * keeps to the front with bbi_ring_at. */
void bbi_ring_truncate(bbi_ring *r, size_t len);

/* Frees the storage; the ring is empty again. */
void bbi_ring_free(bbi_ring *r, const bb_allocator *a);

#endif
