#include "util/ring.h"

#include <string.h>

#include "util/mem.h"

int bbi_ring_push(bbi_ring *r, const bb_allocator *a, const void *item) {
  if (r->len == r->cap) {
    size_t old_cap = r->cap;
    if (bbi_mem_grow(a, &r->items, &r->cap, r->len + 1, r->elem)) return BB_ERR_NOMEM;
    /* the part that had wrapped around the old end moves into the new space after it */
    size_t wrapped = r->head + r->len > old_cap ? r->head + r->len - old_cap : 0;
    for (size_t i = 0; i < wrapped; i++)
      memcpy((char *)r->items + ((old_cap + i) % r->cap) * r->elem, (char *)r->items + i * r->elem, r->elem);
  }
  memcpy(bbi_ring_at(r, r->len), item, r->elem);
  r->len++;
  return 0;
}

bool bbi_ring_pop(bbi_ring *r, void *out) {
  if (!r->len) return false;
  if (out) memcpy(out, bbi_ring_at(r, 0), r->elem);
  r->head = (r->head + 1) % r->cap;
  r->len--;
  return true;
}

void bbi_ring_remove(bbi_ring *r, size_t k) {
  for (size_t j = k; j > 0; j--) memcpy(bbi_ring_at(r, j), bbi_ring_at(r, j - 1), r->elem);
  r->head = (r->head + 1) % r->cap;
  r->len--;
}

void bbi_ring_truncate(bbi_ring *r, size_t len) {
  if (len < r->len) r->len = len;
}

void bbi_ring_free(bbi_ring *r, const bb_allocator *a) {
  bbi_mem_free(a, r->items);
  *r = bbi_ring_of(r->elem);
}
