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

/* For aggregators, which anyone may push refused updates to at any rate: notices at most one per
 * BBI_REFUSAL_NOTICE_PEER_NS to a peer, and at most BBI_REFUSAL_NOTICE_GLOBAL in any
 * BBI_REFUSAL_NOTICE_PEER_NS to all, by the node's clock; the ones held back are counted
 * in `refusal_notice.held`. The table of peers told is fixed: when one more may be told,
 * fewer than 2 × BBI_REFUSAL_NOTICE_GLOBAL were told within the last interval (this
 * window's and the previous one's), so one told before it is there to make room. */
#define BBI_REFUSAL_NOTICE_PEER_NS 1000000000ull
#define BBI_REFUSAL_NOTICE_GLOBAL 16
#define BBI_REFUSAL_NOTICE_PEERS (2 * BBI_REFUSAL_NOTICE_GLOBAL)

typedef struct bbi_refusal_limit {
  bb_peer_id peer[BBI_REFUSAL_NOTICE_PEERS];
  uint64_t told_ns[BBI_REFUSAL_NOTICE_PEERS]; /* when each was last told */
  size_t n_peers;
  uint64_t window_ns; /* when the current global window opened */
  size_t in_window;   /* notices sent in it */
} bbi_refusal_limit;

/* bbi_refusal_notice_send within `limit`'s bounds (zero-initialised: nothing sent yet). */
void bbi_refusal_notice_send_limited(bbi_refusal_limit *limit, bb_ctx *ctx, const bb_peer_id *to, const char *message);

/* A `Refused` notice arriving: raised as the app event `refused` when it comes from a peer
 * this node sent data to (its server); from anyone else it is refused (BB_ERR_DENIED).
 * Another op is BB_ERR_UNSUPPORTED. */
int bbi_refusal_notice_receive(bb_ctx *ctx, const char *op, const bb_peer_id *from, const uint8_t *payload,
                               size_t len, bb_error *err);

/* bbi_refusal_notice_receive as a component's on_message (its state is not needed). */
int bbi_refusal_notice_receive_for(void *self, bb_ctx *ctx, const char *op, const bb_peer_id *from,
                                   const uint8_t *payload, size_t len, bb_error *err);

#endif
