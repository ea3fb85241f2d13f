/* The way out: wire.Send builds one envelope per destination peer, and envelopes wait in
 * the outbound queue until a poll hands them out. */
#ifndef BBI_RUNTIME_SEND_H
#define BBI_RUNTIME_SEND_H

#include "runtime/node.h"

/* Runs a wire.Send op. */
int rt_send(rt_call *c, bb_error *err);
/* Queues an encoded envelope for peer (taking bytes; freed on failure); past max_outbound
 * the oldest is dropped and counted. */
int rt_queue_outbound(bb_node *n, const bb_peer_id *peer, uint8_t *bytes, size_t len);

#endif /* BBI_RUNTIME_SEND_H */
