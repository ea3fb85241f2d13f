/* The outbound queue, a part of its own: encoded envelopes wait here until a poll hands
 * them out as SEND steps. Past `max` the oldest is dropped and counted. A snapshot is
 * taken only when the queue is empty (nothing is sent twice after a restore), so it has
 * no section of its own. */
#ifndef BBI_RUNTIME_OUTBOUND_H
#define BBI_RUNTIME_OUTBOUND_H

#include "runtime/steps.h"
#include "bb/wire.h"
#include "util/ring.h"

/* An encoded envelope for `peer`. */
typedef struct rt_outbound {
  bb_peer_id peer;
  uint8_t *bytes;
  size_t len;
} rt_outbound;

/* Invariant: at most `max` envelopes wait; `dropped` counts those dropped since the last
 * rt_outbound_take_dropped. */
typedef struct rt_outbound_queue {
  const bb_allocator *alloc;
  bbi_ring items; /* of rt_outbound, FIFO */
  size_t max;
  size_t dropped;
  rt_counters *counters; /* outbound.dropped (NULL: not counted) */
} rt_outbound_queue;

void rt_outbound_init(rt_outbound_queue *q, const bb_allocator *alloc, size_t max, rt_counters *counters);
/* Queues bytes for peer (taking them; freed on failure); BB_ERR_NOMEM. */
int rt_outbound_push(rt_outbound_queue *q, const bb_peer_id *peer, uint8_t *bytes, size_t len);
/* Takes the oldest envelope (its bytes are the caller's); false when none waits. */
bool rt_outbound_pop(rt_outbound_queue *q, rt_outbound *out);
/* How many were dropped since the last call (and starts counting again). */
size_t rt_outbound_take_dropped(rt_outbound_queue *q);
void rt_outbound_free(rt_outbound_queue *q);

#endif /* BBI_RUNTIME_OUTBOUND_H */
