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
