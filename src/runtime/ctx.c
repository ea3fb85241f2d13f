/* Components at run time: op calls, control-plane messages, component timers, and what
 * a component can reach through its bb_ctx: the node's parts (parts.h). */
#include <string.h>

#include "runtime/ctx.h"
#include "runtime/envelope.h"
#include "bb/common.h"

bb_ctx rt_ctx_make(rt_parts *p, rt_component *c, rt_exec *e, uint64_t now) {
  bb_ctx ctx = {p, c, e, now, 0, NULL};
  if (e && e->has_src) ctx.source = &e->src;
  return ctx;
}

int rt_invoke_component(rt_call *c, bb_error *err) {
  rt_component *comp = &c->parts->components->items[c->op->component];
  bb_ctx ctx = rt_ctx_make(c->parts, comp, c->exec, c->now);
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

void rt_component_message(rt_parts *p, uint64_t now, const bb_peer_id *from, uint32_t component, const char *op,
                          const uint8_t *payload, size_t len) {
  rt_component *comp = rt_component_by_number(p->components, component);
  if (!comp || !comp->type->on_message) {
    rt_count(p->counters, "wire.rejected", 1);
    rt_report(p->steps, BB_STEP_WIRE_RECEIVE_FAILED, from, "unknown_component",
              "no component numbered %u takes messages on this node (op `%s`)", component, op);
    return;
  }
  bb_ctx ctx = rt_ctx_make(p, comp, NULL, now);
  ctx.source = from;
  bb_error err;
  bb_error_clear(&err);
  int rc = comp->type->on_message(comp->self, &ctx, op, from, payload, len, &err);
  if (rc < 0) {
    rt_count(p->counters, "messages.failed", 1);
    rt_report(p->steps, BB_STEP_OP_FAILED, from, "message_failed", "%s (slot `%s`) refused message `%s`: %s",
              comp->type->type_name, comp->slot, op, err.message[0] ? err.message : bb_strerror(rc));
  }
}

void rt_component_timer(rt_parts *p, uint64_t now, uint32_t component, uint64_t token) {
  rt_component *comp = &p->components->items[component];
  if (!comp->type->on_timer) return;
  bb_ctx ctx = rt_ctx_make(p, comp, NULL, now);
  bb_error err;
  bb_error_clear(&err);
  int rc = comp->type->on_timer(comp->self, &ctx, token, &err);
  if (rc < 0)
    rt_report(p->steps, BB_STEP_OP_FAILED, NULL, "timer_failed", "%s (slot `%s`) timer %llu failed: %s",
              comp->type->type_name, comp->slot, (unsigned long long)token,
              err.message[0] ? err.message : bb_strerror(rc));
}

/* ---- bb_ctx --------------------------------------------------------------------------- */

uint64_t bb_ctx_now(const bb_ctx *ctx) { return ctx->now; }
const bb_peer_id *bb_ctx_self(const bb_ctx *ctx) { return ctx->parts->self; }
const bb_peer_id *bb_ctx_source(const bb_ctx *ctx) { return ctx->source; }
const bb_allocator *bb_ctx_allocator(const bb_ctx *ctx) { return ctx->parts->alloc; }
const char *bb_ctx_slot(const bb_ctx *ctx) { return ctx->component ? ctx->component->slot : ""; }

bool bb_ctx_can_sign(const bb_ctx *ctx) { return ctx->parts->sign != NULL; }

int bb_ctx_sign(bb_ctx *ctx, const uint8_t *msg, size_t len, uint8_t signature[64], bb_error *err) {
  if (!ctx->parts->sign)
    return bb_error_set(err, BB_ERR_UNSUPPORTED,
                        "this node signs nothing: it was installed without a signer (bb_install_args.sign)");
  bb_error_clear(err);
  int rc = ctx->parts->sign(ctx->parts->sign_user, bb_ctx_slot(ctx), msg, len, signature, err);
  if (rc < 0 && !err->message[0]) bb_error_set(err, rc, "the node's signer refused: %s", bb_strerror(rc));
  return rc;
}

/* splitmix64: small, fast and fully determined by the seed. */
uint64_t bb_ctx_random(bb_ctx *ctx) {
  uint64_t z = (*ctx->parts->rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void *bb_ctx_dependency(bb_ctx *ctx, const char *slot, const bb_component_type **type) {
  const rt_component *c = rt_component_by_slot(ctx->parts->components, slot);
  if (type) *type = c ? c->type : NULL;
  return c ? c->self : NULL;
}

uint64_t bb_ctx_defer(bb_ctx *ctx) {
  if (!ctx->deferred) ctx->deferred = (*ctx->parts->next_command)++;
  return ctx->deferred;
}

int bb_ctx_send_message(bb_ctx *ctx, const bb_peer_id *to, const char *op, const uint8_t *payload, size_t len,
                        bb_error *err) {
  rt_parts *p = ctx->parts;
  if (!ctx->component) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "send_message: not inside a component");
  uint8_t suffix[300];
  size_t suffix_len = op ? rt_suffix_control(ctx->component->number, op, suffix, sizeof suffix) : 0;
  if (!suffix_len)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "send_message: op name missing or over %d bytes", BB_ADDR_OP_MAX);
  rt_peer_entry *entry = rt_book_find(p->book, to);
  if (!entry || !entry->n_addrs) {
    char text[128];
    bb_peer_id_to_text(to, text, sizeof text);
    return bb_error_set(err, BB_ERR_NOT_FOUND, "send_message: no address for peer %s", text);
  }
  bb_slot_fill fill = {.dest_suffix = {suffix, suffix_len},
                       .payload = {(uint8_t *)payload, len},
                       .type_hash = bb_val_kind_hash(BB_VAL_BYTES)};
  rt_sender from;
  rt_sender_init(&from, p->self_addrs, p->n_self_addrs);
  rt_envelope_body body = {.fills = &fill, .n_fills = 1};
  uint8_t *bytes;
  size_t blen;
  int rc = rt_envelope_encode(p->alloc, &from, entry->addrs, entry->n_addrs, &body, &bytes, &blen, err);
  if (rc) return rc;
  rc = rt_outbound_push(p->outbound, to, bytes, blen);
  if (rc) return bb_error_set(err, rc, "send_message: out of memory");
  rt_book_touch(p->book, entry);
  return 0;
}

int bb_ctx_wake_loops(bb_ctx *ctx, bb_error *err) {
  if (!ctx || !ctx->component) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "wake_loops: not inside a component");
  ctx->component->wake = true;
  return 0;
}

int bb_ctx_set_timer(bb_ctx *ctx, uint64_t at_ns, uint64_t token, bb_error *err) {
  if (!ctx->component) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "set_timer: not inside a component");
  uint32_t index = (uint32_t)(ctx->component - ctx->parts->components->items);
  int rc = rt_timers_add(ctx->parts->timers, at_ns, RT_TIMER_COMPONENT, token, NULL, 0, index);
  return rc ? bb_error_set(err, rc, "set_timer: %s", rc == BB_ERR_LIMIT ? "too many timers" : "out of memory") : 0;
}

int bb_ctx_emit(bb_ctx *ctx, const char *topic, bb_val *value, bb_error *err) {
  rt_steps *steps = ctx->parts->steps;
  bb_step *s = rt_step(steps, BB_STEP_APP_EVENT);
  if (!s) return bb_error_set(err, BB_ERR_NOMEM, "emit: out of memory");
  s->module = ctx->component ? ctx->component->slot : "";
  if (rt_step_hold(steps, value)) {
    rt_step_cancel(steps);
    return bb_error_set(err, BB_ERR_NOMEM, "emit: out of memory");
  }
  s->topic = rt_step_str(steps, topic);
  s->value = value;
  if (bb_val_kind_of(value) == BB_VAL_BYTES) {
    s->bytes = bb_val_as_bytes(value);
    s->len = bb_val_count(value);
  }
  return 0;
}

const bb_address *bb_ctx_addresses_of(bb_ctx *ctx, const bb_peer_id *peer, size_t *count) {
  const rt_peer_entry *e = rt_book_find(ctx->parts->book, peer);
  *count = e ? e->n_addrs : 0;
  return e && e->n_addrs ? e->addrs : NULL;
}

int bb_ctx_add_address(bb_ctx *ctx, const bb_peer_id *peer, const bb_address *address, bb_error *err) {
  return rt_admission_add_peer(ctx->parts->admission, ctx->parts->book, ctx->now, peer, address, BB_ADMIT_COMPONENT,
                               err);
}

bool bb_ctx_addressed_since(const bb_ctx *ctx, const bb_peer_id *peer, uint64_t since_ns) {
  const rt_peer_entry *e = rt_book_find(ctx->parts->book, peer);
  return e && e->sent && e->sent_ns >= since_ns;
}

void bb_ctx_count(bb_ctx *ctx, const char *name, uint64_t delta) { rt_count(ctx->parts->counters, name, delta); }

bool bb_ctx_tokens_required(const bb_ctx *ctx) { return ctx->parts->admission->on; }

bb_join_role bb_ctx_peer_role(const bb_ctx *ctx, const bb_peer_id *peer) {
  const rt_admission *a = ctx->parts->admission;
  return peer && a->on ? rt_admission_role(a, ctx->now, peer) : BB_JOIN_NONE;
}
