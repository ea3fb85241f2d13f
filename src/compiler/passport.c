/* The passport, the binding table, the wire tables and the artifact's shape. The
 * artifact's functions are the partition mains (sorted by peer class), then every shared
 * function once (a copy per partition would give two functions one name). Every function
 * and the model import every domain their nodes use, as onnx.checker requires. Model
 * metadata: compiled=v2, then per partition per binding
 *   binding.<partition>.<slot> = <Role>|<type>|<slot id or -1>,
 * then config.<slot> = <config> for bindings that carry one, then the wires the
 * partitions send on and receive from, each direction sorted by wire name:
 *   wire_out.<wire> / wire_in.<wire> = <Kind>|<type>|0x<type hash>. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"

/* The slot id a binding dispatches to in a partition: its slot's id on the first node
 * (partition main, then shared functions) that names the slot — or, for nodes without a
 * slot name, that requires the binding's role. -1 when unused there. */
static long slot_id_in(const cc_ctx *x, const cc_partition *p, const cc_binding *b) {
  /* functions.items[0] is the root the partitions were cut from: skip it */
  for (size_t i = 0; i < x->m->functions.len; i++) {
    const bb_function *f = i == 0 ? p->fn : x->m->functions.items[i];
    for (size_t n = 0; n < f->nodes.len; n++) {
      const bb_ir_node *node = f->nodes.items[n];
      const char *trait = cc_meta(node, BB_KEY_REQUIRED_TRAIT);
      const char *slot = cc_meta(node, BB_KEY_SLOT_NAME);
      uint32_t id;
      if (!trait || !cc_parse_u32(cc_meta(node, BB_KEY_SLOT_ID), &id)) continue;
      if (slot ? strcmp(slot, b->slot) == 0 : strcmp(trait, bb_role_trait(b->role)) == 0) return (long)id;
    }
  }
  return -1;
}

static int stamp_recv_slot_ids(cc_ctx *x, bb_function *f) {
  for (size_t i = 0; i < f->nodes.len; i++) {
    bb_ir_node *recv = f->nodes.items[i];
    if (!cc_is(recv, BB_DOMAIN_WIRE, "Recv") || !recv->outputs.len) continue;
    for (size_t k = 0; k < f->nodes.len; k++) {
      const char *id = cc_meta(f->nodes.items[k], BB_KEY_SLOT_ID);
      if (id && bb_strlist_find(&f->nodes.items[k]->inputs, recv->outputs.items[0]) >= 0) {
        if (bb_kv_upsert(x->m, &recv->metadata, BB_KEY_RECV_SLOT_ID, id)) return cc_nomem(x);
        break;
      }
    }
  }
  return 0;
}

static int import_domains(cc_ctx *x, bb_function *f) {
  for (size_t i = 0; i < f->nodes.len; i++) {
    const char *d = f->nodes.items[i]->domain ? f->nodes.items[i]->domain : "";
    int64_t v = bb_domain_is_onnx(d) ? BB_ONNX_OPSET_VERSION : BB_FRAMEWORK_OPSET_VERSION;
    if (bb_opset_get(&f->opsets, d) < 0 && bb_opset_set(x->m, &f->opsets, d, v)) return cc_nomem(x);
    if (bb_opset_get(&x->m->opsets, d) < 0 && bb_opset_set(x->m, &x->m->opsets, d, v)) return cc_nomem(x);
  }
  const char *fd = f->domain ? f->domain : "";
  if (bb_opset_get(&x->m->opsets, fd) < 0 && bb_opset_set(x->m, &x->m->opsets, fd, BB_FRAMEWORK_OPSET_VERSION))
    return cc_nomem(x);
  return 0;
}

/* ---- wire tables --------------------------------------------------------------------- */

typedef struct wire_decl {
  const char *name, *type;
  bool in; /* received (a Recv listens to it), else sent */
  const char *where; /* the partition declaring it, for messages */
} wire_decl;

static int cmp_decl(const void *a, const void *b) {
  const wire_decl *x = a, *y = b;
  if (x->in != y->in) return x->in ? 1 : -1; /* out first */
  int c = strcmp(x->name, y->name);
  if (!c) c = strcmp(x->type, y->type);
  return c ? c : strcmp(x->where, y->where);
}

static int add_decl(cc_ctx *x, wire_decl **decls, size_t *n, size_t *cap, wire_decl d) {
  if (!bb_wire_name_valid(d.name))
    return cc_fail(x, BB_COMPILE_WIRE_CONFLICT,
                   "partition `%s` %s wire `%s`, which is not a wire name (1 to %d printable bytes, no blanks "
                   "or '|')",
                   d.where, d.in ? "receives from" : "sends on", d.name, BB_WIRE_NAME_MAX);
  if (*n == *cap) {
    size_t c = *cap ? 2 * *cap : 16;
    wire_decl *g = bbi_arena_grow(x->m->arena, *decls, *cap * sizeof *g, c * sizeof *g);
    if (!g) return cc_nomem(x);
    *decls = g;
    *cap = c;
  }
  (*decls)[(*n)++] = d;
  return 0;
}

/* Every wire the partitions declare: Sends (the type of the value sent) and Recvs (the
 * type of the payload). A Recv must name its wire. */
static int collect_wires(cc_ctx *x, wire_decl **decls, size_t *n) {
  size_t cap = 0;
  for (size_t i = 0; i < x->parts.len; i++) {
    const bb_function *f = x->parts.items[i].fn;
    for (size_t k = 0; k < f->nodes.len; k++) {
      const bb_ir_node *nd = f->nodes.items[k];
      bool send = cc_is(nd, BB_DOMAIN_WIRE, "Send"), recv = cc_is(nd, BB_DOMAIN_WIRE, "Recv");
      if ((!send && !recv) || (send && (!nd->inputs.len || !*nd->inputs.items[0]))) continue;
      const char *name = cc_meta(nd, BB_KEY_WIRE_ID);
      if (!name)
        return cc_fail(x, BB_COMPILE_WIRE_CONFLICT, "%s `%s` in partition `%s` names no wire (no " BB_KEY_WIRE_ID ")",
                       send ? "Send" : "Recv", cc_node_label(x, f, nd), f->name);
      const char *value = send ? nd->inputs.items[0] : nd->outputs.len ? nd->outputs.items[0] : "";
      int rc = add_decl(x, decls, n, &cap, (wire_decl){name, cc_value_type(x, f, value), recv, f->name});
      if (rc) return rc;
    }
  }
  return 0;
}

typedef struct wire_id {
  uint64_t id;
  const char *name;
} wire_id;

static int cmp_id(const void *a, const void *b) {
  const wire_id *x = a, *y = b;
  if (x->id != y->id) return x->id < y->id ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* One entry per (direction, wire): declarations of one wire must agree on its type (the
 * abstract type agrees with any), within a direction and across the two; distinct names
 * must have distinct ids. */
static int check_wires(cc_ctx *x, wire_decl *d, size_t n, size_t *n_unique) {
  if (n) qsort(d, n, sizeof *d, cmp_decl);
  size_t u = 0;
  for (size_t i = 0; i < n; i++) {
    if (u && d[u - 1].in == d[i].in && strcmp(d[u - 1].name, d[i].name) == 0) {
      if (!bb_wire_types_agree(d[u - 1].type, d[i].type))
        return cc_fail(x, BB_COMPILE_WIRE_CONFLICT, "wire `%s` is %s as `%s` in `%s` and as `%s` in `%s`", d[i].name,
                       d[i].in ? "received" : "sent", d[u - 1].type, d[u - 1].where, d[i].type, d[i].where);
      if (!*d[u - 1].type) d[u - 1] = d[i]; /* the concrete type is what the wire carries */
      continue;
    }
    d[u++] = d[i];
  }
  /* out entries come first, both halves sorted by name */
  size_t outs = 0;
  while (outs < u && !d[outs].in) outs++;
  for (size_t i = outs, o = 0; i < u; i++) {
    while (o < outs && strcmp(d[o].name, d[i].name) < 0) o++;
    if (o < outs && strcmp(d[o].name, d[i].name) == 0 && !bb_wire_types_agree(d[o].type, d[i].type))
      return cc_fail(x, BB_COMPILE_WIRE_CONFLICT, "wire `%s` is sent as `%s` (in `%s`) but received as `%s` (in `%s`)",
                     d[i].name, d[o].type, d[o].where, d[i].type, d[i].where);
  }
  wire_id *ids = bbi_arena_alloc(x->m->arena, (u + 1) * sizeof *ids);
  if (!ids) return cc_nomem(x);
  for (size_t i = 0; i < u; i++) ids[i] = (wire_id){bb_wire_id(d[i].name), d[i].name};
  qsort(ids, u, sizeof *ids, cmp_id);
  for (size_t i = 1; i < u; i++)
    if (ids[i].id == ids[i - 1].id && strcmp(ids[i].name, ids[i - 1].name) != 0)
      return cc_fail(x, BB_COMPILE_WIRE_CONFLICT, "wires `%s` and `%s` have the same id 0x%016llx; rename one",
                     ids[i - 1].name, ids[i].name, (unsigned long long)ids[i].id);
  *n_unique = u;
  return 0;
}

static int stamp_wires(cc_ctx *x) {
  wire_decl *d = NULL;
  size_t n = 0, u = 0;
  int rc = collect_wires(x, &d, &n);
  if (!rc) rc = check_wires(x, d, n, &u);
  for (size_t i = 0; i < u && !rc; i++) {
    char *key = cc_printf(x, "%s%s", d[i].in ? BB_KEY_WIRE_IN_PREFIX : BB_KEY_WIRE_OUT_PREFIX, d[i].name);
    char value[BB_WIRE_NAME_MAX + 64];
    if (strlen(d[i].type) > BB_WIRE_NAME_MAX || bb_wire_entry_format(d[i].type, value, sizeof value) >= sizeof value)
      rc = cc_fail(x, BB_COMPILE_WIRE_CONFLICT, "wire `%s` carries a type too long to declare: %s", d[i].name,
                   d[i].type);
    else if (!key || bb_kv_upsert(x->m, &x->m->metadata, key, value)) rc = cc_nomem(x);
  }
  return rc;
}

int cc_stamp_passport(cc_ctx *x) {
  bb_model *m = x->m;
  const bb_compiler *c = x->c;
  if (!x->parts.len) return cc_fail(x, BB_COMPILE_INTERNAL, "no partitions");
  if (bb_kv_upsert(m, &m->metadata, BB_KEY_COMPILED, BB_COMPILED_VERSION)) return cc_nomem(x);
  for (size_t i = 0; i < x->parts.len; i++) {
    const cc_partition *p = &x->parts.items[i];
    for (size_t b = 0; b < c->bindings.len; b++) {
      const cc_binding *bind = &c->bindings.items[b];
      if (!cc_split_binds(x, p, bind)) continue;
      char *key = cc_printf(x, BB_KEY_BINDING_PREFIX "%s.%s", p->fn->name, bind->slot);
      char *value = cc_printf(x, "%s|%s|%ld", bb_role_name(bind->role), bind->type, slot_id_in(x, p, bind));
      if (!key || !value || bb_kv_upsert(m, &m->metadata, key, value)) return cc_nomem(x);
    }
  }
  for (size_t b = 0; b < c->bindings.len; b++) {
    const cc_binding *bind = &c->bindings.items[b];
    if (!bind->config) continue;
    char *key = cc_printf(x, BB_KEY_CONFIG_PREFIX "%s", bind->slot);
    if (!key || bb_kv_upsert(m, &m->metadata, key, bind->config)) return cc_nomem(x);
  }
  /* the artifact's function table */
  bb_functionlist fns = {0};
  for (size_t i = 0; i < x->parts.len; i++)
    if (BBI_ARENA_PUSH(m->arena, &fns, x->parts.items[i].fn)) return cc_nomem(x);
  for (size_t i = 1; i < m->functions.len; i++) {
    bb_function *f = m->functions.items[i];
    bool dup = false;
    for (size_t k = 0; k < fns.len && !dup; k++) dup = fns.items[k]->name && f->name && strcmp(fns.items[k]->name, f->name) == 0;
    if (dup) return cc_fail(x, BB_COMPILE_INTERNAL, "duplicate function name after partition merge: %s", f->name);
    if (BBI_ARENA_PUSH(m->arena, &fns, f)) return cc_nomem(x);
  }
  m->functions = fns;
  int wrc = stamp_wires(x);
  if (wrc) return wrc;
  if (bb_opset_get(&m->opsets, "") < 0 && bb_opset_set(m, &m->opsets, "", BB_ONNX_OPSET_VERSION)) return cc_nomem(x);
  for (size_t i = 0; i < fns.len; i++) {
    int rc = stamp_recv_slot_ids(x, fns.items[i]);
    if (!rc) rc = import_domains(x, fns.items[i]);
    if (rc) return rc;
  }
  if (!m->has_ir_version) m->has_ir_version = true, m->ir_version = BB_ONNX_IR_VERSION;
  if (!m->graph && !(m->graph = bb_graph_new(m, x->root->name ? x->root->name : "main"))) return cc_nomem(x);
  return 0;
}
