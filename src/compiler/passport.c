/* The passport, the binding table and the artifact's shape. The artifact's functions are
 * the partition mains (sorted by peer class), then every shared function once (a copy
 * per partition would give two functions one name). Every function and the model import
 * every domain their nodes use, as onnx.checker requires. Model
 * metadata: compiled=v1, then per partition per binding
 *   binding.<partition>.<slot> = <Role>|<type>|<slot id or -1>,
 * then config.<slot> = <config> for bindings that carry one. */
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

int cc_stamp_passport(cc_ctx *x) {
  bb_model *m = x->m;
  const bb_compiler *c = x->c;
  if (!x->parts.len) return cc_fail(x, BB_COMPILE_INTERNAL, "no partitions");
  if (bb_kv_upsert(m, &m->metadata, BB_KEY_COMPILED, BB_COMPILED_VERSION)) return cc_nomem(x);
  for (size_t i = 0; i < x->parts.len; i++) {
    const cc_partition *p = &x->parts.items[i];
    for (size_t b = 0; b < c->bindings.len; b++) {
      const cc_binding *bind = &c->bindings.items[b];
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
