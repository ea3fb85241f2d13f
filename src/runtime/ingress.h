/* The ingress queue: events (envelopes, invokes, completions) waiting for a poll. */
#ifndef BBI_RUNTIME_INGRESS_H
#define BBI_RUNTIME_INGRESS_H

#include "runtime/node.h"

/* Queues a copy of *ev (which then owns nothing); BB_ERR_LIMIT when `limit` events wait,
 * BB_ERR_NOMEM. */
int rt_ingress_push(bb_node *n, rt_event *ev, size_t limit);
/* Frees what an event owns, returns its bytes to the ingress budget and zeroes it. */
void rt_event_release(bb_node *n, rt_event *ev);

#endif /* BBI_RUNTIME_INGRESS_H */
