/* Components at run time: op calls, control-plane messages, component timers, and what
 * a component can reach through its bb_ctx. */
#include <string.h>

#include "runtime/book.h"
#include "runtime/ctx.h"
#include "runtime/send.h"
#include "runtime/steps.h"
#include "runtime/timers.h"
#include "bb/common.h"

static bb_ctx make_ctx(bb_node *n, rt_component *c, rt_exec *e) {
  bb_ctx ctx = {n, c, e, n->now, 0, NULL};
  if (e && e->has_src) ctx.source = &e->src;
  return ctx;
}

int rt_invoke_component(bb_node *n, rt_call *c, bb_error *err) {
  rt_component *comp = &n->components[c->op->component];
  bb_ctx ctx = make_ctx(n, comp, c->exec);
  const bb_ir_node *nd = c->op->ir;
  bb_op_call call = {c->op->role, nd->domain ? nd->domain : "", nd->op_type, nd, c->in, c->n_in, c->out, c->n_out};
  int rc = comp->type->invoke(comp->self, &ctx, &call, err);
  if (rc == BB_LATER) {
    if (!ctx.deferred) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                                           "%s returned BB_LATER without bb_ctx_defer", comp->type->type_name);
    c->command = ctx.deferred;
  } else if (rc < 0 && !err->message[0]) {
    bb_error_set(err, rc, "%s (slot `%s`) failed in %s: %s", comp->type->type_name, comp->slot, nd->op_type,
                 bb_strerror(rc));
  }
  if (rc < 0) c->reason = "component_failed";
  return rc;
}

void rt_component_message(bb_node *n, rt_event *ev, rt_fill *f) {
  rt_component *comp = NULL;
  for (size_t i = 0; i < n->n_components; i++)
    if (n->components[i].number == f->component) comp = &n->components[i];
  if (!comp || !comp->type->on_message) {
    rt_count(n, "wire.rejected", 1);
    rt_report(n, BB_STEP_WIRE_RECEIVE_FAILED, &ev->from, "unknown_component",
              "no component numbered %u takes messages on this node (op `%s`)", f->component, f->op);
    return;
  }
  bb_ctx ctx = make_ctx(n, comp, NULL);
  ctx.source = &ev->from;
  bb_error err;
  bb_error_clear(&err);
  int rc = comp->type->on_message(comp->self, &ctx, f->op, &ev->from, f->payload, f->payload_len, &err);
  if (rc < 0) {
    rt_count(n, "messages.failed", 1);
    rt_report(n, BB_STEP_OP_FAILED, &ev->from, "message_failed", "%s (slot `%s`) refused message `%s`: %s",
              comp->type->type_name, comp->slot, f->op, err.message[0] ? err.message : bb_strerror(rc));
  }
}

void rt_component_timer(bb_node *n, uint32_t component, uint64_t token) {
  rt_component *comp = &n->components[component];
  if (!comp->type->on_timer) return;
  bb_ctx ctx = make_ctx(n, comp, NULL);
  bb_error err;
  bb_error_clear(&err);
  int rc = comp->type->on_timer(comp->self, &ctx, token, &err);
  if (rc < 0)
    rt_report(n, BB_STEP_OP_FAILED, NULL, "timer_failed", "%s (slot `%s`) timer %llu failed: %s",
              comp->type->type_name, comp->slot, (unsigned long long)token,
              err.message[0] ? err.message : bb_strerror(rc));
}

/* ---- bb_ctx --------------------------------------------------------------------------- */

uint64_t bb_ctx_now(const bb_ctx *ctx) { return ctx->now; }
const bb_peer_id *bb_ctx_self(const bb_ctx *ctx) { return &ctx->node->self; }
const bb_peer_id *bb_ctx_source(const bb_ctx *ctx) { return ctx->source; }
const bb_allocator *bb_ctx_allocator(const bb_ctx *ctx) { return ctx->node->alloc; }
const char *bb_ctx_slot(const bb_ctx *ctx) { return ctx->component ? ctx->component->slot : ""; }

/* splitmix64: small, fast and fully determined by the seed. */
uint64_t bb_ctx_random(bb_ctx *ctx) {
  uint64_t z = (ctx->node->rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void *bb_ctx_dependency(bb_ctx *ctx, const char *slot, const bb_component_type **type) {
  return bb_node_component(ctx->node, slot, type);
}

uint64_t bb_ctx_defer(bb_ctx *ctx) {
  if (!ctx->deferred) ctx->deferred = ctx->node->next_command++;
  return ctx->deferred;
}

int bb_ctx_send_message(bb_ctx *ctx, const bb_peer_id *to, const char *op, const uint8_t *payload, size_t len,
                        bb_error *err) {
  bb_node *n = ctx->node;
  if (!ctx->component) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "send_message: not inside a component");
  if (!op || strlen(op) > BB_ADDR_OP_MAX)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "send_message: op name missing or over %d bytes", BB_ADDR_OP_MAX);
  rt_peer_entry *entry = rt_book_find(&n->book, to);
  if (!entry || !entry->n_addrs) {
    char text[128];
    bb_peer_id_to_text(to, text, sizeof text);
    return bb_error_set(err, BB_ERR_NOT_FOUND, "send_message: no address for peer %s", text);
  }
  bb_address suffix = {.n = 2};
  suffix.seg[0].kind = BB_ADDR_COMPONENT;
  suffix.seg[0].value = ctx->component->number;
  suffix.seg[1].kind = BB_ADDR_OP;
  strcpy(suffix.seg[1].op, op);
  uint8_t sbuf[300], dbuf[8][512], abuf[8][512];
  bb_bytes dest[8], src[8];
  size_t nd = 0, ns = 0;
  for (; nd < entry->n_addrs && nd < 8; nd++)
    dest[nd] = (bb_bytes){dbuf[nd], bb_address_to_bytes(&entry->addrs[nd], dbuf[nd], sizeof dbuf[nd])};
  for (; ns < n->n_self_addrs && ns < 8; ns++)
    src[ns] = (bb_bytes){abuf[ns], bb_address_to_bytes(&n->self_addrs[ns], abuf[ns], sizeof abuf[ns])};
  bb_slot_fill fill = {.dest_suffix = {sbuf, bb_address_to_bytes(&suffix, sbuf, sizeof sbuf)},
                       .payload = {(uint8_t *)payload, len},
                       .type_hash = bb_val_kind_hash(BB_VAL_BYTES)};
  bb_envelope env = {0};
  env.dest_peer_addresses = dest;
  env.n_dest_peer_addresses = nd;
  env.fills = &fill;
  env.n_fills = 1;
  env.schema_version = BB_ENVELOPE_SCHEMA_VERSION;
  env.src_peer_addresses = src;
  env.n_src_peer_addresses = ns;
  uint8_t *bytes;
  size_t blen;
  int rc = bb_envelope_encode(&env, n->alloc, &bytes, &blen, err);
  if (rc) return rc;
  rc = rt_queue_outbound(n, to, bytes, blen);
  if (rc) return bb_error_set(err, rc, "send_message: out of memory");
  rt_book_touch(&n->book, entry);
  return 0;
}

int bb_ctx_set_timer(bb_ctx *ctx, uint64_t at_ns, uint64_t token, bb_error *err) {
  if (!ctx->component) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "set_timer: not inside a component");
  uint32_t index = (uint32_t)(ctx->component - ctx->node->components);
  int rc = rt_timer_add(ctx->node, at_ns, RT_TIMER_COMPONENT, token, NULL, 0, index);
  return rc ? bb_error_set(err, rc, "set_timer: %s", rc == BB_ERR_LIMIT ? "too many timers" : "out of memory") : 0;
}

int bb_ctx_emit(bb_ctx *ctx, const char *topic, bb_val *value, bb_error *err) {
  bb_node *n = ctx->node;
  bb_step *s = rt_step(n, BB_STEP_APP_EVENT);
  if (!s) return bb_error_set(err, BB_ERR_NOMEM, "emit: out of memory");
  s->module = ctx->component ? ctx->component->slot : "";
  if (rt_step_hold(n, value)) {
    rt_step_cancel(n);
    return bb_error_set(err, BB_ERR_NOMEM, "emit: out of memory");
  }
  s->topic = rt_step_str(n, topic);
  s->value = value;
  if (bb_val_kind_of(value) == BB_VAL_BYTES) {
    s->bytes = bb_val_as_bytes(value);
    s->len = bb_val_count(value);
  }
  return 0;
}

const bb_address *bb_ctx_addresses_of(bb_ctx *ctx, const bb_peer_id *peer, size_t *count) {
  const rt_peer_entry *e = rt_book_find(&ctx->node->book, peer);
  *count = e ? e->n_addrs : 0;
  return e && e->n_addrs ? e->addrs : NULL;
}

int bb_ctx_add_address(bb_ctx *ctx, const bb_peer_id *peer, const bb_address *address, bb_error *err) {
  return rt_book_add_admitted(ctx->node, peer, address, BB_ADMIT_COMPONENT, err);
}

bool bb_ctx_addressed_since(const bb_ctx *ctx, const bb_peer_id *peer, uint64_t since_ns) {
  const rt_peer_entry *e = rt_book_find(&ctx->node->book, peer);
  return e && e->sent && e->sent_ns >= since_ns;
}

void bb_ctx_count(bb_ctx *ctx, const char *name, uint64_t delta) { rt_count(ctx->node, name, delta); }

bool bb_ctx_tokens_required(const bb_ctx *ctx) { return ctx->node->admission.on; }

bb_join_role bb_ctx_peer_role(const bb_ctx *ctx, const bb_peer_id *peer) { return bb_node_peer_role(ctx->node, peer); }
