/* The outbound queue (outbound.h). */
#include <string.h>

#include "runtime/outbound.h"
#include "util/mem.h"

void rt_outbound_init(rt_outbound_queue *q, const bb_allocator *alloc, size_t max, rt_counters *counters) {
  memset(q, 0, sizeof *q);
  q->alloc = alloc;
  q->items = bbi_ring_of(sizeof(rt_outbound));
  q->max = max;
  q->counters = counters;
}

int rt_outbound_push(rt_outbound_queue *q, const bb_peer_id *peer, uint8_t *bytes, size_t len) {
  rt_outbound old;
  if (q->items.len == q->max && bbi_ring_pop(&q->items, &old)) { /* the oldest goes */
    bbi_mem_free(q->alloc, old.bytes);
    q->dropped++;
    rt_count(q->counters, "outbound.dropped", 1);
  }
  if (bbi_ring_push(&q->items, q->alloc, &(rt_outbound){*peer, bytes, len})) {
    bbi_mem_free(q->alloc, bytes);
    return BB_ERR_NOMEM;
  }
  return 0;
}

bool rt_outbound_pop(rt_outbound_queue *q, rt_outbound *out) { return bbi_ring_pop(&q->items, out); }

size_t rt_outbound_take_dropped(rt_outbound_queue *q) {
  size_t d = q->dropped;
  q->dropped = 0;
  return d;
}

void rt_outbound_free(rt_outbound_queue *q) {
  for (size_t k = 0; k < q->items.len; k++) bbi_mem_free(q->alloc, ((rt_outbound *)bbi_ring_at(&q->items, k))->bytes);
  bbi_ring_free(&q->items, q->alloc);
}
