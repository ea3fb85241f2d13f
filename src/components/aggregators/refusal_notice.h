/* Telling a contributor why its contribution was refused. The aggregator that refuses one
 * sends the refusing message back as a control message `Refused` to the same slot on the
 * contributor; the aggregator there (every peer of a federation binds the slot) raises it
 * as the app event `refused` (Bytes: the message), so the client's host can say why its
 * updates do not count. */
#ifndef BBI_COMPONENTS_AGGREGATORS_REFUSAL_NOTICE_H
#define BBI_COMPONENTS_AGGREGATORS_REFUSAL_NOTICE_H

#include <stddef.h>
#include <stdint.h>

#include "bb/runtime.h"

/* The longest message told: longer ones are cut there. */
#define BBI_REFUSAL_NOTICE_MAX 240

/* Sends `message` to `to` (nothing to this node itself). Best effort: a notice that cannot
 * go (the peer left the address book, the outbound queue is full) is counted in
 * `refusal_notice.unsent` and dropped. */
void bbi_refusal_notice_send(bb_ctx *ctx, const bb_peer_id *to, const char *message);

/* A `Refused` notice arriving: raised as the app event `refused` when it comes from a peer
 * this node sent data to (its server); from anyone else it is refused (BB_ERR_DENIED).
 * Another op is BB_ERR_UNSUPPORTED. */
int bbi_refusal_notice_receive(bb_ctx *ctx, const char *op, const bb_peer_id *from, const uint8_t *payload,
                               size_t len, bb_error *err);

/* bbi_refusal_notice_receive as a component's on_message (its state is not needed). */
int bbi_refusal_notice_receive_for(void *self, bb_ctx *ctx, const char *op, const bb_peer_id *from,
                                   const uint8_t *payload, size_t len, bb_error *err);

#endif
