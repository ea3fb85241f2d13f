/* Syscall helpers: framework ops a Module records directly (pass-through, constants,
 * timers, gates, the address book, registry announcements). */
#include <stdio.h>

#include "dsl/recorder.h"

bb_value bb_rec_pass_through(bb_rec *rec, bb_value x) {
  bb_value none = {0};
  if (!rec || !rec_check_value(rec, x, "the input of PassThrough")) return none;
  bb_ir_node *n = rec_node_begin(rec, "PassThrough", BB_DOMAIN_SYSCALL, &x, 1);
  return n ? rec_node_end(rec, n, rec_value_type(rec, x)) : none;
}

bb_value bb_rec_constant(bb_rec *rec, const char *label, const char *type, const bb_literal *value) {
  bb_value none = {0};
  if (!rec || rec->failed) return none;
  if (type && !rec_check_type(rec, type)) return none;
  const char *vtype = type ? rec_copy(rec, type) : value ? bb_tensor_type(value->dtype) : NULL;
  bb_tensor_proto *t = rec_literal(rec, value, "Constant");
  if (!t) return none;
  if (!vtype) {
    rec_error(rec, BB_ERR_INVALID_ARGUMENT, "Constant of element type %d needs an explicit type", (int)value->dtype);
    return none;
  }
  bb_ir_node *n = rec_node_begin(rec, "Constant", BB_DOMAIN_SYSCALL, NULL, 0);
  if (!n) return none;
  if (!bb_attr_set_tensor(rec->model, &n->attrs, BB_ATTR_VALUE, t)) {
    rec_nomem(rec);
    return none;
  }
  if (label && rec_node_meta(rec, n, BB_KEY_BOOTSTRAP_SEED, label)) return none;
  return rec_node_end(rec, n, vtype);
}

bb_value bb_rec_interval(bb_rec *rec, int64_t period_ns) {
  bb_value none = {0};
  if (!rec || rec->failed) return none;
  if (period_ns < 0) {
    rec_error(rec, BB_ERR_INVALID_ARGUMENT, "Interval period %lld ns is negative", (long long)period_ns);
    return none;
  }
  bb_ir_node *n = rec_node_begin(rec, "Interval", BB_DOMAIN_SYSCALL, NULL, 0);
  if (!n) return none;
  if (period_ns && !bb_attr_set_int(rec->model, &n->attrs, BB_ATTR_PERIOD_NS, period_ns)) {
    rec_nomem(rec);
    return none;
  }
  return rec_node_end(rec, n, BB_TYPE_TRIGGER);
}

bb_value bb_rec_gate_dispatch(bb_rec *rec, const bb_value *inputs, size_t n_inputs) {
  bb_value none = {0};
  if (!rec || rec->failed) return none;
  if (!n_inputs || !inputs) {
    rec_error(rec, BB_ERR_INVALID_ARGUMENT, "GateDispatch needs at least one input");
    return none;
  }
  for (size_t i = 0; i < n_inputs; i++) {
    char what[64];
    snprintf(what, sizeof what, "input %zu of GateDispatch", i);
    if (!rec_check_value(rec, inputs[i], what)) return none;
  }
  bb_ir_node *n = rec_node_begin(rec, "GateDispatch", BB_DOMAIN_SYSCALL, inputs, n_inputs);
  return n ? rec_node_end(rec, n, BB_TYPE_BYTES) : none;
}

/* A checked value naming one peer: a peer id, or an untyped or abstract value. */
static bool check_peer(bb_rec *r, bb_value peer, const char *op) {
  char what[64];
  snprintf(what, sizeof what, "the peer of %s", op);
  if (!rec_check_value(r, peer, what)) return false;
  if (!rec_is_peer_type(rec_value_type(r, peer), false)) {
    rec_error(r, BB_ERR_TYPE, "%s is value '%s' of type %s; expected %s or an untyped input", what, peer.name,
              rec_value_type(r, peer), BB_TYPE_PEER_ID);
    return false;
  }
  return true;
}

/* op(peer[, second]) in `domain`, one output of `type`. */
static bb_value peer_op(bb_rec *r, const char *op, const char *domain, bb_value peer, const bb_value *second,
                        const char *type) {
  bb_value none = {0};
  if (!r || !check_peer(r, peer, op)) return none;
  char what[64];
  snprintf(what, sizeof what, "input 1 of %s", op);
  if (second && !rec_check_value(r, *second, what)) return none;
  bb_value in[2] = {peer, second ? *second : none};
  bb_ir_node *n = rec_node_begin(r, op, domain, in, second ? 2 : 1);
  return n ? rec_node_end(r, n, type) : none;
}

bb_value bb_rec_address_book_insert(bb_rec *rec, bb_value peer, bb_value address) {
  return peer_op(rec, "Insert", BB_DOMAIN_ADDRESS_BOOK, peer, &address, BB_TYPE_TRIGGER);
}

bb_value bb_rec_address_book_insert_many(bb_rec *rec, bb_value peer, bb_value addresses) {
  return peer_op(rec, "InsertMany", BB_DOMAIN_ADDRESS_BOOK, peer, &addresses, BB_TYPE_TRIGGER);
}

bb_value bb_rec_address_book_lookup(bb_rec *rec, bb_value peer) {
  return peer_op(rec, "Lookup", BB_DOMAIN_ADDRESS_BOOK, peer, NULL, BB_TYPE_ADDRESS_VEC);
}

bb_value bb_rec_announce(bb_rec *rec, bb_value server_peer) {
  bb_value none = {0};
  if (!rec || !check_peer(rec, server_peer, "Announce")) return none;
  bb_ir_node *n = rec_node_begin(rec, "Announce", BB_DOMAIN_GLOBAL_REGISTRY, &server_peer, 1);
  if (!n || rec_node_meta(rec, n, BB_KEY_INPUT_SERVER_PEER, server_peer.name)) return none;
  return rec_node_end(rec, n, BB_TYPE_TRIGGER);
}
