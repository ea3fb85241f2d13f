#include "util/ring.h"

#include <string.h>

#include "util/mem.h"

int bb_ring_push(bb_ring *r, const bb_allocator *a, const void *item) {
  if (r->len == r->cap) {
    size_t old_cap = r->cap;
    if (bb_mem_grow(a, &r->items, &r->cap, r->len + 1, r->elem)) return BB_ERR_NOMEM;
    /* the part that had wrapped around the old end moves into the new space after it */
    size_t wrapped = r->head + r->len > old_cap ? r->head + r->len - old_cap : 0;
    for (size_t i = 0; i < wrapped; i++)
      memcpy((char *)r->items + ((old_cap + i) % r->cap) * r->elem, (char *)r->items + i * r->elem, r->elem);
  }
  memcpy(bb_ring_at(r, r->len), item, r->elem);
  r->len++;
  return 0;
}

bool bb_ring_pop(bb_ring *r, void *out) {
  if (!r->len) return false;
  if (out) memcpy(out, bb_ring_at(r, 0), r->elem);
  r->head = (r->head + 1) % r->cap;
  r->len--;
  return true;
}

void bb_ring_remove(bb_ring *r, size_t k) {
  for (size_t j = k; j > 0; j--) memcpy(bb_ring_at(r, j), bb_ring_at(r, j - 1), r->elem);
  r->head = (r->head + 1) % r->cap;
  r->len--;
}

void bb_ring_truncate(bb_ring *r, size_t len) {
  if (len < r->len) r->len = len;
}

void bb_ring_free(bb_ring *r, const bb_allocator *a) {
  bb_mem_free(a, r->items);
  *r = bb_ring_of(r->elem);
}
