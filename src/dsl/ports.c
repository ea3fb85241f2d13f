/* A function's boundary: inputs (formals), local output ports (PassThrough), network
 * ports (wire.Send) and reading a declared port back. */
#include <stdio.h>
#include <string.h>

#include "dsl/recorder.h"

static const bb_binding *find_binding(const rec_frame *f, const char *input) {
  for (size_t i = 0; i < f->n_bindings; i++)
    if (strcmp(f->bindings[i].input, input) == 0) return &f->bindings[i];
  return NULL;
}

bb_value bb_rec_input(bb_rec *rec, const char *name, const char *type) {
  bb_value none = {0};
  if (!rec || !rec_check_name(rec, "input", name) || (type && !rec_check_type(rec, type))) return none;
  rec_fn *f = rec_cur(rec);
  uint32_t id;
  if (bbi_strmap_get(&f->names, name, &id)) {
    if (bb_strlist_find(&f->fn->inputs, name) < 0) {
      rec_name_free(rec, name, "input");
      return none;
    }
    const char *had = rec->values.items[id].type;
    if (type && rec_types_conflict(type, had)) {
      rec_error(rec, BB_ERR_TYPE, "input '%s' declared again as %s; it was declared %s", name, type, had);
      return none;
    }
    return rec_handle(rec, id);
  }
  const bb_binding *b = find_binding(rec_top(rec), name);
  if (rec->frames.len > 1 && !b) {
    rec_error(rec, BB_ERR_NOT_FOUND, "input '%s' is not bound by the call (give it a bb_binding)", name);
    return none;
  }
  const char *bound = b ? rec->values.items[b->value.id].type : NULL;
  if (type && bound && rec_types_conflict(type, bound)) {
    rec_error(rec, BB_ERR_TYPE, "input '%s' is declared %s, but the call binds '%s' of type %s", name, type,
              b->value.name, bound);
    return none;
  }
  const char *vtype = type ? rec_copy(rec, type) : bound ? bound : BB_TYPE_BYTES;
  const char *vname = rec_copy(rec, name);
  if (!vtype || !vname) return none;
  if (bb_strlist_append(rec->model, &f->fn->inputs, vname)) {
    rec_nomem(rec);
    return none;
  }
  return rec_define(rec, vname, vtype);
}

/* True when `port` can become a new output port of the current function. */
static bool port_free(bb_rec *r, const char *port, const char *what) {
  if (!rec_check_name(r, what, port)) return false;
  if (bb_strlist_find(&rec_cur(r)->fn->outputs, port) >= 0) {
    rec_error(r, BB_ERR_EXISTS, "%s '%s' is declared twice", what, port);
    return false;
  }
  return rec_name_free(r, port, what);
}

bb_value bb_rec_output(bb_rec *rec, const char *name, bb_value value) {
  bb_value none = {0};
  char what[REC_NAME_MAX + 32];
  if (!rec || !port_free(rec, name, "output port")) return none;
  snprintf(what, sizeof what, "the value of output port '%s'", name);
  if (!rec_check_value(rec, value, what)) return none;
  bb_ir_node *n = rec_node_begin(rec, "PassThrough", BB_DOMAIN_SYSCALL, &value, 1);
  const char *port = rec_copy(rec, name);
  if (!n || !port || rec_node_output(rec, n, port) || rec_node_push(rec, n)) return none;
  if (bb_strlist_append(rec->model, &rec_cur(rec)->fn->outputs, port)) {
    rec_nomem(rec);
    return none;
  }
  return rec_define(rec, port, rec_value_type(rec, value));
}

/* A wire name given by the author: what bb_wire_name_valid accepts. */
static bool wire_name_ok(bb_rec *r, const char *wire) {
  if (bb_wire_name_valid(wire)) return true;
  rec_error(r, BB_ERR_INVALID_ARGUMENT, "wire name '%s' is not 1 to %d printable characters without blanks or '|'",
            wire ? wire : "(null)", BB_WIRE_NAME_MAX);
  return false;
}

static bb_value net_out(bb_rec *rec, const char *port, const char *wire, bb_value peers, bb_value value) {
  bb_value none = {0};
  char what[REC_NAME_MAX + 48];
  if (!rec || !port_free(rec, port, "network port") || (wire && !wire_name_ok(rec, wire))) return none;
  snprintf(what, sizeof what, "the value sent on network port '%s'", port);
  if (!rec_check_value(rec, value, what)) return none;
  snprintf(what, sizeof what, "the peers of network port '%s'", port);
  if (!rec_check_value(rec, peers, what)) return none;
  if (!rec_is_peer_type(rec_value_type(rec, peers), true)) {
    rec_error(rec, BB_ERR_TYPE, "%s are value '%s' of type %s; expected %s, %s or an untyped input", what,
              peers.name, rec_value_type(rec, peers), BB_TYPE_PEER_ID, BB_TYPE_PEER_ID_VEC);
    return none;
  }
  const char *handle = rec_mint_name(rec);
  const char *pname = rec_copy(rec, port);
  bb_ir_node *n = rec_node_new(rec, "Send", BB_DOMAIN_WIRE);
  if (!handle || !pname || !n || rec_node_input(rec, n, value.name) || rec_node_input(rec, n, peers.name) ||
      rec_node_output(rec, n, pname) || rec_node_output(rec, n, handle) ||
      (wire && rec_node_meta(rec, n, BB_KEY_WIRE_ID, wire)) || rec_node_push(rec, n))
    return none;
  if (!rec_define(rec, pname, rec_value_type(rec, value)).name) return none;
  bb_value req = rec_define(rec, handle, BB_TYPE_WIRE_REQ_ID);
  if (req.name && bb_strlist_append(rec->model, &rec_cur(rec)->fn->outputs, pname)) {
    rec_nomem(rec);
    return none;
  }
  return req;
}

bb_value bb_rec_net_out(bb_rec *rec, const char *port, bb_value peers, bb_value value) {
  return net_out(rec, port, NULL, peers, value);
}

bb_value bb_rec_net_out_wire(bb_rec *rec, const char *port, const char *wire, bb_value peers, bb_value value) {
  if (rec && !wire) {
    rec_error(rec, BB_ERR_INVALID_ARGUMENT, "network port '%s' needs a wire name", port ? port : "(null)");
    return (bb_value){0};
  }
  return net_out(rec, port, wire, peers, value);
}

bb_value bb_rec_net_in(bb_rec *rec, const char *wire, const char *type, bb_value *sender) {
  bb_value none = {0};
  if (sender) *sender = none;
  if (!rec || !wire_name_ok(rec, wire) || !rec_check_type(rec, type)) return none;
  const char *payload = rec_mint_name(rec);
  const char *from = rec_mint_name(rec);
  const char *vtype = rec_copy(rec, type);
  bb_ir_node *n = rec_node_new(rec, "Recv", BB_DOMAIN_WIRE);
  if (!payload || !from || !vtype || !n || rec_node_output(rec, n, payload) || rec_node_output(rec, n, from) ||
      rec_node_meta(rec, n, BB_KEY_WIRE_ID, wire) || rec_node_push(rec, n))
    return none;
  bb_value got = rec_define(rec, payload, vtype);
  bb_value peer = got.name ? rec_define(rec, from, BB_TYPE_PEER_ID) : none;
  if (!peer.name) return none;
  if (sender) *sender = peer;
  return got;
}

bb_value bb_rec_lookup_output(bb_rec *rec, const char *port) {
  bb_value none = {0};
  if (!rec || !rec_check_name(rec, "output port", port)) return none;
  rec_fn *f = rec_cur(rec);
  uint32_t id;
  if (bb_strlist_find(&f->fn->outputs, port) < 0 || !bbi_strmap_get(&f->names, port, &id)) {
    rec_error(rec, BB_ERR_NOT_FOUND, "no output port '%s' has been declared in this function", port);
    return none;
  }
  return rec_handle(rec, id);
}

bb_value bb_rec_lookup_sender(bb_rec *rec, const char *port) {
  bb_value none = {0};
  if (!rec || !rec_check_name(rec, "network port", port)) return none;
  rec_fn *f = rec_cur(rec);
  bb_ir_node *send = NULL;
  for (size_t i = 0; i < f->fn->nodes.len && !send; i++) {
    bb_ir_node *n = f->fn->nodes.items[i];
    if (n->outputs.len && strcmp(n->op_type, "Send") == 0 && n->domain && strcmp(n->domain, BB_DOMAIN_WIRE) == 0 &&
        strcmp(n->outputs.items[0], port) == 0)
      send = n;
  }
  if (!send) {
    rec_error(rec, BB_ERR_NOT_FOUND, "no network port '%s' has been declared in this function", port);
    return none;
  }
  /* the Send's third output: the compiler wires it to the sender of what its Recvs take */
  char name[REC_NAME_MAX + sizeof BB_SENDER_SUFFIX];
  snprintf(name, sizeof name, "%s" BB_SENDER_SUFFIX, port);
  uint32_t id;
  if (send->outputs.len > 2 && bbi_strmap_get(&f->names, send->outputs.items[2], &id)) return rec_handle(rec, id);
  const char *sender = rec_copy(rec, name);
  if (!sender || rec_node_output(rec, send, sender)) return none;
  return rec_define(rec, sender, BB_TYPE_PEER_ID);
}
