/* The first step of every compile (refine_polymorphic_value_info): every role node's
 * binding is found (by slot name; by role for hand-built nodes without one) and the bound
 * component's storage type for the role's port narrows the node's abstract outputs.
 * Checks the slot metadata on the way: a role node needs a required_trait of a role with
 * storage (or a codec port), a u32 slot id and a binding of that role. Forwarding
 * through PassThrough/Send does not overwrite an output the author typed concretely. */
#include <string.h>

#include "compiler/compiler.h"

static const char *storage_of(const bb_compiler *c, const cc_binding *b, const char *port) {
  const cc_component *k = cc_find_component(c, b->type);
  if (!k) return NULL;
  for (size_t i = 0; i < k->n_storage; i++)
    if (strcmp(k->storage[i].port, port) == 0) return k->storage[i].type;
  return NULL;
}

const cc_binding *cc_node_binding(const bb_compiler *c, const bb_ir_node *n, const char *trait) {
  const char *slot = cc_meta(n, BB_KEY_SLOT_NAME);
  if (slot) return cc_find_binding(c, slot);
  for (size_t i = 0; i < c->bindings.len; i++)
    if (strcmp(bb_role_trait(c->bindings.items[i].role), trait) == 0) return &c->bindings.items[i];
  return NULL;
}

/* The binding a role node dispatches to, or the failure. */
static int find_binding(cc_ctx *x, const bb_function *f, const bb_ir_node *n, const char *trait,
                        const cc_binding **out) {
  const bb_compiler *c = x->c;
  const char *slot_name = cc_meta(n, BB_KEY_SLOT_NAME);
  const char *slot_id = cc_meta(n, BB_KEY_SLOT_ID);
  *out = NULL;
  if (!slot_name) {
    /* hand-built IR: bound by role */
    size_t count = 0;
    char names[256] = "";
    for (size_t i = 0; i < c->bindings.len; i++) {
      const cc_binding *b = &c->bindings.items[i];
      if (strcmp(bb_role_trait(b->role), trait) != 0) continue;
      size_t used = strlen(names);
      snprintf(names + used, sizeof names - used, "%s%s", count ? ", " : "", b->slot);
      count++;
    }
    if (count >= 2)
      return cc_fail(x, BB_COMPILE_AMBIGUOUS_ROLE_BINDING,
                     "role %s is bound at several slots [%s] and node `%s` names none of them", trait, names,
                     cc_node_label(x, f, n));
  }
  uint32_t id;
  if (!slot_id) return cc_fail(x, BB_COMPILE_INVALID_SLOT_ID, "node `%s` has no slot_id (value \"\")", cc_node_label(x, f, n));
  if (!cc_parse_u32(slot_id, &id))
    return cc_fail(x, BB_COMPILE_INVALID_SLOT_ID, "node `%s` has slot_id \"%s\", not a u32", cc_node_label(x, f, n), slot_id);
  *out = cc_node_binding(c, n, trait);
  if (!*out)
    return cc_fail(x, BB_COMPILE_UNKNOWN_SLOT_ID,
                   "node `%s` references slot_id %u (slot \"%s\", %s) which has no binding: call bind for it",
                   cc_node_label(x, f, n), id, slot_name ? slot_name : "?", trait);
  if (strcmp(bb_role_trait((*out)->role), trait) != 0)
    return cc_fail(x, BB_COMPILE_BINDING_ROLE_MISMATCH, "slot \"%s\" of node `%s` is a %s slot but is bound as %s",
                   slot_name, cc_node_label(x, f, n), trait, bb_role_trait((*out)->role));
  return 0;
}

/* Records value → storage type for every output of role nodes in f. */
static int refine_function(cc_ctx *x, bb_function *f, bbi_strmap *refined, const char ***types,
                           size_t *n_types, size_t *cap_types) {
  for (size_t i = 0; i < f->nodes.len; i++) {
    const bb_ir_node *n = f->nodes.items[i];
    const char *trait = cc_meta(n, BB_KEY_REQUIRED_TRAIT);
    const char *slot_id = cc_meta(n, BB_KEY_SLOT_ID);
    if (!trait && !slot_id) continue;
    if (!trait)
      return cc_fail(x, BB_COMPILE_MISSING_REQUIRED_TRAIT_METADATA, "node `%s` has a slot_id but no required_trait",
                     cc_node_label(x, f, n));
    const cc_binding *b;
    int rc = find_binding(x, f, n, trait, &b);
    if (rc) return rc;
    bb_role role = bb_role_from_trait(trait);
    const char *port = bb_role_storage_port(role);
    if (role == BB_ROLE_CODEC) {
      port = cc_meta(n, BB_KEY_CODEC_PORT);
      if (!port)
        return cc_fail(x, BB_COMPILE_MISSING_CODEC_PORT_METADATA, "codec node `%s` has no %s metadata",
                       cc_node_label(x, f, n), BB_KEY_CODEC_PORT);
      if (strcmp(port, BB_CODEC_PORT_IN) != 0 && strcmp(port, BB_CODEC_PORT_OUT) != 0)
        return cc_fail(x, BB_COMPILE_INVALID_CODEC_PORT, "codec node `%s` has port \"%s\" (want in or out)",
                       cc_node_label(x, f, n), port);
    } else if (!role || role == BB_ROLE_PROTOCOL) {
      return cc_fail(x, BB_COMPILE_UNKNOWN_ROLE_RUNTIME, "node `%s` requires %s, which has no storage port",
                     cc_node_label(x, f, n), trait);
    }
    const char *storage = port ? storage_of(x->c, b, port) : NULL;
    if (!storage) continue;
    for (size_t o = 0; o < n->outputs.len; o++) {
      const char *v = n->outputs.items[o];
      uint32_t prev;
      if (!*v || bbi_strmap_get(refined, v, &prev)) continue;
      if (*n_types == *cap_types) {
        size_t cap = *cap_types ? *cap_types * 2 : 16;
        const char **grown = bbi_arena_grow(x->m->arena, (void *)*types, *cap_types * sizeof **types, cap * sizeof **types);
        if (!grown) return cc_nomem(x);
        *types = grown;
        *cap_types = cap;
      }
      (*types)[*n_types] = storage;
      if (bbi_strmap_put(refined, v, (uint32_t)(*n_types)++)) return cc_nomem(x);
    }
  }
  return 0;
}

int cc_refine_types(cc_ctx *x) {
  bb_model *m = x->m;
  bbi_strmap refined;
  bbi_strmap_init(&refined, bbi_arena_allocator(m->arena));
  const char **types = NULL;
  size_t n_types = 0, cap_types = 0;
  int rc = 0;
  for (size_t f = 0; f < m->functions.len && !rc; f++)
    rc = refine_function(x, m->functions.items[f], &refined, &types, &n_types, &cap_types);
  /* value-preserving ops carry the refinement forward, to a fixpoint */
  for (bool changed = true; changed && !rc;) {
    changed = false;
    for (size_t f = 0; f < m->functions.len && !rc; f++) {
      const bb_function *fn = m->functions.items[f];
      for (size_t i = 0; i < fn->nodes.len && !rc; i++) {
        const bb_ir_node *n = fn->nodes.items[i];
        if (!(cc_is(n, BB_DOMAIN_SYSCALL, "PassThrough") || cc_is(n, BB_DOMAIN_WIRE, "Send"))) continue;
        if (!n->inputs.len || !n->outputs.len || !*n->outputs.items[0]) continue;
        uint32_t in, out;
        if (!bbi_strmap_get(&refined, n->inputs.items[0], &in) || bbi_strmap_get(&refined, n->outputs.items[0], &out))
          continue;
        /* an output the author typed concretely keeps its type: a mismatch is then
         * reported where it matters (IncompatibleStorageOnEdge), not silently fixed */
        const char *declared = cc_value_type(x, fn, n->outputs.items[0]);
        if (*declared && strcmp(declared, BB_TYPE_BYTES) != 0) continue;
        if (bbi_strmap_put(&refined, n->outputs.items[0], in)) rc = cc_nomem(x);
        changed = true;
      }
    }
  }
  /* apply to the value infos of every function, matched by name */
  for (size_t f = 0; f < m->functions.len && !rc; f++) {
    bb_function *fn = m->functions.items[f];
    for (size_t i = 0; i < fn->value_infos.len && !rc; i++) {
      bb_value_info *vi = fn->value_infos.items[i];
      uint32_t t;
      if (vi->name && bbi_strmap_get(&refined, vi->name, &t)) rc = cc_set_value_type(x, fn, vi->name, types[t]);
    }
  }
  bbi_strmap_free(&refined);
  return rc;
}
