/* Deadlines: derive_wire_deadlines stamps every Send with deadline_ns = chain_depth ×
 * per-hop budget; insert_async_deadlines guards every node carrying deadline_ns with a
 * DeadlineCheck whose trigger becomes an extra input. The check's names derive from the
 * node's name or, when it is unnamed (always, for recorded nodes), from its first output,
 * so two Sends in one partition never collide; and the check is placed right before the
 * node it guards, so the partition stays topologically sorted. */
#include <string.h>

#include "compiler/compiler.h"

int cc_derive_deadlines(cc_ctx *x) {
  uint64_t budget = x->c->per_hop_budget_ns;
  for (size_t f = 0; f < x->m->functions.len; f++) {
    bb_function *fn = x->m->functions.items[f];
    for (size_t i = 0; i < fn->nodes.len; i++) {
      bb_ir_node *n = fn->nodes.items[i];
      if (!cc_is(n, BB_DOMAIN_WIRE, "Send")) continue;
      uint64_t depth = 1;
      const char *d = cc_meta(n, BB_KEY_CHAIN_DEPTH);
      if (d) {
        uint64_t v = 0;
        bool ok = *d != 0;
        for (const char *p = d; *p && ok; p++) {
          if (*p < '0' || *p > '9' || v > UINT64_MAX / 10) ok = false;
          else v = v * 10 + (uint64_t)(*p - '0');
        }
        if (ok) depth = v;
      }
      uint64_t ns = depth && budget > (uint64_t)INT64_MAX / depth ? (uint64_t)INT64_MAX : depth * budget;
      if (ns > (uint64_t)INT64_MAX) ns = (uint64_t)INT64_MAX;
      if (!bb_attr_set_int(x->m, &n->attrs, BB_ATTR_DEADLINE_NS, (int64_t)ns)) return cc_nomem(x);
    }
  }
  return 0;
}

const char *cc_site_base(const bb_ir_node *n) {
  if (n->name && *n->name) return n->name;
  for (size_t i = 0; i < n->outputs.len; i++)
    if (*n->outputs.items[i]) return n->outputs.items[i];
  return n->inputs.len ? n->inputs.items[0] : "";
}

static bool has_int_attr(const bb_ir_node *n, const char *name) {
  const bb_attr *a = bb_attr_find(&n->attrs, name);
  return a && a->has_type && a->type == BB_ATTR_INT;
}

int cc_insert_deadline_checks(cc_ctx *x, cc_partition *p) {
  bb_function *f = p->fn;
  for (size_t i = 0; i < f->nodes.len; i++) {
    bb_ir_node *n = f->nodes.items[i];
    if (!has_int_attr(n, BB_ATTR_DEADLINE_NS) || !n->inputs.len || cc_meta(n, BB_KEY_DEADLINE_GATED)) continue;
    if (cc_is(n, BB_DOMAIN_SYSCALL, "DeadlineCheck")) continue;
    const char *base = cc_site_base(n);
    bb_ir_node *g = bb_ir_node_new(x->m, "DeadlineCheck", BB_DOMAIN_SYSCALL, cc_printf(x, "DeadlineCheck@%s", base));
    const char *out = cc_printf(x, "%s" BB_DEADLINE_TRIGGER_SUFFIX, base);
    if (!g || !g->name || !out || bb_strlist_append(x->m, &g->inputs, n->inputs.items[0]) ||
        bb_strlist_append(x->m, &g->outputs, out) ||
        !bb_attr_set_int(x->m, &g->attrs, BB_ATTR_DEADLINE_NS, bb_attr_get_int(&n->attrs, BB_ATTR_DEADLINE_NS, 0)) ||
        bb_kv_append(x->m, &g->metadata, BB_KEY_DEADLINE_SOURCE, base) ||
        bb_kv_append(x->m, &g->metadata, BB_KEY_DEADLINE_GATED, BB_FLAG_TRUE) ||
        bb_kv_append(x->m, &g->metadata, BB_KEY_HOME_CLASS, p->klass) ||
        bb_strlist_append(x->m, &n->inputs, out) ||
        bb_kv_upsert(x->m, &n->metadata, BB_KEY_DEADLINE_GATED, BB_FLAG_TRUE) ||
        bb_nodelist_insert(x->m, &f->nodes, i, g))
      return cc_nomem(x);
    if (cc_set_value_type(x, f, out, BB_TYPE_TRIGGER)) return cc_nomem(x);
    i++; /* past the guarded node */
  }
  return 0;
}
