/* The way in: bb_node_deliver checks and decodes an envelope into an ingress event; at
 * poll, routing writes each fill into the wire.Recvs listening to the wire it names. */
#ifndef BBI_RUNTIME_DELIVER_H
#define BBI_RUNTIME_DELIVER_H

#include "runtime/node.h"

/* The first entry of n->wires (sorted by id) for a wire id; n->n_wires if none. */
size_t rt_first_wire(const bb_node *n, uint64_t id);
/* Routes an ENVELOPE event (and releases it). */
void rt_route(bb_node *n, rt_event *ev);

#endif /* BBI_RUNTIME_DELIVER_H */
