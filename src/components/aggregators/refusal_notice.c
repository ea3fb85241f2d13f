/* Refusal notices between aggregators (refusal_notice.h). */
#include "components/aggregators/refusal_notice.h"

#include <string.h>

#include "bb/value.h"

#define NOTICE_OP "Refused"
#define NOTICE_TOPIC "refused"

void bbi_refusal_notice_send(bb_ctx *ctx, const bb_peer_id *to, const char *message) {
  if (bb_peer_id_equal(to, bb_ctx_self(ctx))) return;
  size_t len = strlen(message);
  if (len > BBI_REFUSAL_NOTICE_MAX) len = BBI_REFUSAL_NOTICE_MAX;
  bb_error err;
  if (bb_ctx_send_message(ctx, to, NOTICE_OP, (const uint8_t *)message, len, &err))
    bb_ctx_count(ctx, "refusal_notice.unsent", 1);
}

void bbi_refusal_notice_send_limited(bbi_refusal_limit *limit, bb_ctx *ctx, const bb_peer_id *to, const char *message) {
  if (bb_peer_id_equal(to, bb_ctx_self(ctx))) return;
  const uint64_t now = bb_ctx_now(ctx);
  size_t slot = limit->n_peers, oldest = 0;
  for (size_t i = 0; i < limit->n_peers && slot == limit->n_peers; i++)
    if (bb_peer_id_equal(&limit->peer[i], to)) slot = i;
  const bool known = slot < limit->n_peers;
  if (known && now - limit->told_ns[slot] < BBI_REFUSAL_NOTICE_PEER_NS) {
    bb_ctx_count(ctx, "refusal_notice.held", 1);
    return;
  }
  if (now - limit->window_ns >= BBI_REFUSAL_NOTICE_PEER_NS) {
    limit->window_ns = now;
    limit->in_window = 0;
  }
  if (limit->in_window >= BBI_REFUSAL_NOTICE_GLOBAL) {
    bb_ctx_count(ctx, "refusal_notice.held", 1);
    return;
  }
  if (!known && limit->n_peers < BBI_REFUSAL_NOTICE_PEERS) {
    slot = limit->n_peers++;
  } else if (!known) { /* the peer told longest ago makes room */
    for (size_t i = 1; i < limit->n_peers; i++)
      if (limit->told_ns[i] < limit->told_ns[oldest]) oldest = i;
    slot = oldest;
  }
  limit->peer[slot] = *to;
  limit->told_ns[slot] = now;
  limit->in_window++;
  bbi_refusal_notice_send(ctx, to, message);
}

int bbi_refusal_notice_receive(bb_ctx *ctx, const char *op, const bb_peer_id *from, const uint8_t *payload,
                               size_t len, bb_error *err) {
  if (strcmp(op, NOTICE_OP) != 0) return bb_error_set(err, BB_ERR_UNSUPPORTED, "aggregator: unknown message `%s`", op);
  if (!bb_ctx_addressed_since(ctx, from, 0)) {
    char who[128];
    bb_peer_id_to_text(from, who, sizeof who);
    return bb_error_set(err, BB_ERR_DENIED, "aggregator: a refusal notice from %s, which this node never sent to", who);
  }
  if (len > BBI_REFUSAL_NOTICE_MAX)
    return bb_error_set(err, BB_ERR_LIMIT, "aggregator: a refusal notice of %zu bytes (at most %d)", len,
                        BBI_REFUSAL_NOTICE_MAX);
  bb_val *text = bb_val_bytes(bb_ctx_allocator(ctx), payload, len);
  if (!text) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  bb_ctx_count(ctx, "refusal_notice.received", 1);
  int rc = bb_ctx_emit(ctx, NOTICE_TOPIC, text, err); /* the step holds its own reference */
  bb_val_release(text);
  return rc;
}

int bbi_refusal_notice_receive_for(void *self, bb_ctx *ctx, const char *op, const bb_peer_id *from,
                                   const uint8_t *payload, size_t len, bb_error *err) {
  (void)self;
  return bbi_refusal_notice_receive(ctx, op, from, payload, len, err);
}
