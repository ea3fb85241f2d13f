/* Slots and dependencies: resolve_slots (one role domain is bound either by concrete
 * type or by slot, never both; every backend node runs an op its bound backend
 * declared), then, after the per-partition passes, the dependency and binding checks.
 *
 * Dependency table design: the caller declares each concrete type's dependencies with
 * bb_compiler_declare_component — a list of (role, slot name). For every binding whose
 * type declares dependencies, each named slot must be bound, and bound as that role;
 * nodes that carry the type in concrete_type learn where their dependencies live
 * (dep.<Role> = <slot>). Types nobody declared depend on nothing.
 *
 * Op sets: a Backend type's ops are what the caller declared with
 * bb_compiler_declare_op_set; a backend type nobody declared runs anything, so a second
 * backend plugs in by declaring its own set. */
#include <string.h>

#include "compiler/compiler.h"

/* Every backend node bound to a type with a declared op set runs one of its ops. The
 * root still holds every node of the partitions; sub-functions hold the rest. */
static int check_backend_ops(cc_ctx *x) {
  const bb_compiler *c = x->c;
  const char *trait = bb_role_trait(BB_ROLE_BACKEND);
  for (size_t i = 0; i < x->m->functions.len; i++) {
    const bb_function *f = x->m->functions.items[i];
    for (size_t k = 0; k < f->nodes.len; k++) {
      const bb_ir_node *n = f->nodes.items[k];
      const char *t = cc_meta(n, BB_KEY_REQUIRED_TRAIT);
      if (!t || strcmp(t, trait) != 0) continue;
      const cc_binding *b = cc_node_binding(c, n, trait);
      const cc_op_set *ops = b ? cc_find_op_set(c, b->type) : NULL;
      if (!ops || cc_op_set_has(ops, n->domain, n->op_type)) continue;
      return cc_fail(x, BB_COMPILE_UNKNOWN_OP,
                     "node `%s` of `%s` runs op %s (domain \"%s\") on Backend slot \"%s\", bound to %s, which does not "
                     "declare that op (its op set has %zu ops)",
                     cc_node_label(x, f, n), f->name ? f->name : "", n->op_type ? n->op_type : "",
                     n->domain ? n->domain : "", b->slot, b->type, ops->n_ops);
    }
  }
  return 0;
}

int cc_resolve_slots(cc_ctx *x) {
  const bb_function *f = x->root;
  /* per role domain, in order of first appearance */
  for (size_t i = 0; i < f->nodes.len; i++) {
    const bb_ir_node *a = f->nodes.items[i];
    if (!cc_is_role_domain(a->domain)) continue;
    const char *concrete = NULL;
    uint32_t generic = UINT32_MAX;
    for (size_t k = 0; k < f->nodes.len; k++) {
      const bb_ir_node *n = f->nodes.items[k];
      if (!n->domain || strcmp(n->domain, a->domain) != 0) continue;
      const char *t = cc_meta(n, BB_KEY_CONCRETE_TYPE);
      uint32_t id;
      if (t && (!concrete || strcmp(t, concrete) < 0)) concrete = t;
      if (cc_meta(n, BB_KEY_REQUIRED_TRAIT) && cc_parse_u32(cc_meta(n, BB_KEY_SLOT_ID), &id) && id < generic)
        generic = id;
    }
    if (concrete && generic != UINT32_MAX)
      return cc_fail(x, BB_COMPILE_AMBIGUOUS_ROLE,
                     "role domain %s has both concrete type %s and generic slot %u; use one or the other", a->domain,
                     concrete, generic);
  }
  return check_backend_ops(x);
}

/* Every function of the artifact: partition mains, then shared functions. */
static size_t n_functions(const cc_ctx *x) { return x->parts.len + x->m->functions.len - 1; }
static bb_function *function_at(const cc_ctx *x, size_t i) {
  return i < x->parts.len ? x->parts.items[i].fn : x->m->functions.items[i - x->parts.len + 1];
}

int cc_check_dependencies(cc_ctx *x) {
  const bb_compiler *c = x->c;
  for (size_t b = 0; b < c->bindings.len; b++) {
    const cc_binding *bind = &c->bindings.items[b];
    const cc_component *k = cc_find_component(c, bind->type);
    if (!k) continue;
    for (size_t d = 0; d < k->n_deps; d++) {
      const bb_component_dep *dep = &k->deps[d];
      const cc_binding *provider = cc_find_binding(c, dep->slot);
      if (!provider)
        return cc_fail(x, BB_COMPILE_UNBOUND_DEPENDENCY,
                       "component %s bound at slot \"%s\" requires a %s at slot \"%s\", which is not bound", k->type,
                       bind->slot, bb_role_name(dep->role), dep->slot);
      if (provider->role != dep->role)
        return cc_fail(x, BB_COMPILE_DEPENDENCY_ROLE_MISMATCH,
                       "component %s bound at slot \"%s\" requires a %s at slot \"%s\", but that slot provides %s",
                       k->type, bind->slot, bb_role_name(dep->role), dep->slot, bb_role_trait(provider->role));
    }
    for (size_t i = 0; i < n_functions(x); i++) {
      bb_function *f = function_at(x, i);
      for (size_t n = 0; n < f->nodes.len; n++) {
        bb_ir_node *node = f->nodes.items[n];
        const char *t = cc_meta(node, BB_KEY_CONCRETE_TYPE);
        if (!t || strcmp(t, k->type) != 0) continue;
        for (size_t d = 0; d < k->n_deps; d++) {
          char *key = cc_printf(x, BB_KEY_DEP_PREFIX "%s", bb_role_name(k->deps[d].role));
          if (!key || bb_kv_upsert(x->m, &node->metadata, key, k->deps[d].slot)) return cc_nomem(x);
        }
      }
    }
  }
  return 0;
}

int cc_check_slots_bound(cc_ctx *x) {
  const bb_compiler *c = x->c;
  for (size_t i = 0; i < n_functions(x); i++) {
    const bb_function *f = function_at(x, i);
    for (size_t n = 0; n < f->nodes.len; n++) {
      const bb_ir_node *node = f->nodes.items[n];
      const char *trait = cc_meta(node, BB_KEY_REQUIRED_TRAIT);
      if (!trait) continue;
      const char *slot = cc_meta(node, BB_KEY_SLOT_NAME);
      bool bound = false;
      if (slot) {
        const cc_binding *b = cc_find_binding(c, slot);
        bound = b && *b->type;
      } else {
        for (size_t k = 0; k < c->bindings.len && !bound; k++)
          bound = strcmp(bb_role_trait(c->bindings.items[k].role), trait) == 0 && *c->bindings.items[k].type;
      }
      if (!bound)
        return cc_fail(x, BB_COMPILE_UNBOUND_SLOT, "role %s (slot \"%s\", node `%s` of `%s`) has no binding",
                       cc_canonical_role(trait), slot ? slot : "?", cc_node_label(x, f, node), f->name);
    }
  }
  for (size_t b = 0; b < c->bindings.len; b++) {
    const cc_component *k = cc_find_component(c, c->bindings.items[b].type);
    for (size_t d = 0; k && d < k->n_deps; d++) {
      const cc_binding *p = cc_find_binding(c, k->deps[d].slot);
      if (!p || !*p->type)
        return cc_fail(x, BB_COMPILE_UNBOUND_SLOT, "role %s (dependency of %s at slot \"%s\", slot \"%s\") has no binding",
                       bb_role_name(k->deps[d].role), k->type, c->bindings.items[b].slot, k->deps[d].slot);
    }
  }
  return 0;
}
