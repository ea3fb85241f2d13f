/* The pipeline driver: the canonical passes in order (bb_compiler_pass_names), user
 * passes at their points, and the assembly of the artifact. */
#include <string.h>

#include "compiler/compiler.h"

static int run_hooks(cc_ctx *x, int point) {
  bb_compiler *c = x->c;
  for (size_t h = 0; h < c->hooks.len; h++) {
    const cc_hook *k = &c->hooks.items[h];
    if (k->after != point) continue;
    bool per_partition = point < 0 || point >= CC_PASS_PARTITION;
    size_t n = per_partition ? x->parts.len : 1;
    for (size_t i = 0; i < n; i++) {
      bb_function *f = per_partition ? x->parts.items[i].fn : x->root ? x->root : x->m->functions.items[0];
      const char *klass = per_partition ? x->parts.items[i].klass : NULL;
      bb_error e;
      bb_error_clear(&e);
      int rc = k->fn(x->m, f, klass, k->user, &e);
      if (rc) return cc_fail(x, BB_COMPILE_INTERNAL, "compiler stage `%s` failed: %s", k->name, e.message);
    }
  }
  return 0;
}

/* Runs a root pass unless disabled, then the user passes after it. */
#define ROOT_PASS(idx, call)                            \
  do {                                                  \
    if (!c->disabled[idx] && (rc = (call)) != 0) return rc; \
    if ((rc = run_hooks(x, idx)) != 0) return rc;       \
  } while (0)

static int per_partition_pass(cc_ctx *x, int idx) {
  int rc = 0;
  if (!x->c->disabled[idx])
    for (size_t i = 0; i < x->parts.len && !rc; i++) {
      cc_partition *p = &x->parts.items[i];
      switch (idx) {
        case CC_PASS_WIRE_EDGES: rc = cc_analyze_wire_edges(x, p); break;
        case CC_PASS_DEDUP_RX: rc = cc_gate_rx(x, p, 0); break;
        case CC_PASS_PEER_HEALTH_RX: rc = cc_gate_rx(x, p, 1); break;
        case CC_PASS_BACKOFF_RX: rc = cc_gate_rx(x, p, 2); break;
        case CC_PASS_PEER_HEALTH_TX: rc = cc_gate_tx(x, p, 0); break;
        case CC_PASS_BACKOFF_TX: rc = cc_gate_tx(x, p, 1); break;
        case CC_PASS_ASYNC_DEADLINES: rc = cc_insert_deadline_checks(x, p); break;
        case CC_PASS_RUNTIME_COMPLETE: rc = cc_check_runtime_complete(x, p); break;
        default: break;
      }
    }
  return rc ? rc : run_hooks(x, idx);
}

static int run_passes(cc_ctx *x) {
  bb_compiler *c = x->c;
  int rc;
  if ((rc = cc_refine_types(x)) != 0) return rc;
  if ((rc = cc_entry_checks(x)) != 0) return rc;
  /* the seam checks run before inlining: inlining matches CALLs by op_type, which must
   * be there */
  if ((rc = cc_check_seams(x)) != 0) return rc;
  ROOT_PASS(CC_PASS_INLINE, cc_inline(x));
  ROOT_PASS(CC_PASS_DEADLINES, cc_derive_deadlines(x));
  if ((rc = cc_check_bootstrap(x)) != 0) return rc;
  x->root = x->m->functions.items[0];
  ROOT_PASS(CC_PASS_VALIDATE, cc_validate(x));
  ROOT_PASS(CC_PASS_EXPAND, cc_expand_ops(x));
  ROOT_PASS(CC_PASS_TYPES, cc_solve_types(x, false));
  ROOT_PASS(CC_PASS_PEER_CLASSES, cc_infer_peer_classes(x));
  if (!c->disabled[CC_PASS_RECV_SYNTH]) {
    if ((rc = cc_synthesize_recvs(x)) != 0) return rc;
    if (!c->disabled[CC_PASS_TYPES] && (rc = cc_solve_types(x, true)) != 0) return rc;
  }
  if ((rc = run_hooks(x, CC_PASS_RECV_SYNTH)) != 0) return rc;
  if ((rc = cc_partition_root(x)) != 0) return rc;
  if ((rc = run_hooks(x, CC_PASS_PARTITION)) != 0) return rc;
  ROOT_PASS(CC_PASS_RESOLVE_SLOTS, cc_resolve_slots(x));
  if ((rc = cc_bind_split(x)) != 0) return rc;
  for (int idx = CC_PASS_WIRE_EDGES; idx <= CC_PASS_RUNTIME_COMPLETE; idx++)
    if ((rc = per_partition_pass(x, idx)) != 0) return rc;
  for (size_t i = 0; i < x->parts.len; i++) {
    if ((rc = cc_name_partition(x, &x->parts.items[i])) != 0) return rc;
    if ((rc = cc_check_dangling_calls(x, &x->parts.items[i])) != 0) return rc;
  }
  if ((rc = run_hooks(x, -1)) != 0) return rc;
  if ((rc = cc_check_dependencies(x)) != 0) return rc;
  if ((rc = cc_check_slots_bound(x)) != 0) return rc;
  return cc_stamp_passport(x);
}

/* The role of a binding made with BB_COMPILER_ROLE_OF_SLOT: the required_trait of the
 * first node (function order) that names the slot. */
static bb_role role_of_slot(const bb_model *m, const char *slot) {
  for (size_t f = 0; f < m->functions.len; f++) {
    const bb_function *fn = m->functions.items[f];
    for (size_t i = 0; i < fn->nodes.len; i++) {
      const bb_ir_node *n = fn->nodes.items[i];
      const char *name = cc_meta(n, BB_KEY_SLOT_NAME), *trait = cc_meta(n, BB_KEY_REQUIRED_TRAIT);
      if (!name || !trait || strcmp(name, slot) != 0) continue;
      bb_role r = bb_role_from_trait(trait);
      if (r) return r;
    }
  }
  return BB_COMPILER_ROLE_OF_SLOT;
}

/* This compile's bindings, with every role resolved (the compiler's own list is left
 * as configured, so it compiles other models too). */
static int resolve_binding_roles(cc_ctx *x, cc_binding **out) {
  bb_compiler *c = x->c;
  *out = c->bindings.len ? bbi_arena_memdup(x->m->arena, c->bindings.items, c->bindings.len * sizeof **out) : NULL;
  if (c->bindings.len && !*out) return cc_nomem(x);
  for (size_t i = 0; i < c->bindings.len; i++) {
    cc_binding *b = &(*out)[i];
    if (b->role != BB_COMPILER_ROLE_OF_SLOT) continue;
    if ((b->role = role_of_slot(x->m, b->slot)) == BB_COMPILER_ROLE_OF_SLOT)
      return cc_fail(x, BB_COMPILE_BINDING_ROLE_MISMATCH,
                     "slot \"%s\" is bound without a role and no node of the model names it", b->slot);
  }
  return 0;
}

static int compile_in_place(bb_compiler *c, bb_model *m, bb_error *err) {
  cc_ctx x = {.c = c, .m = m, .err = err};
  cc_binding *configured = c->bindings.items, *resolved;
  int rc = resolve_binding_roles(&x, &resolved);
  if (!rc) {
    c->bindings.items = resolved;
    rc = run_passes(&x);
    c->bindings.items = configured;
  }
  if (x.vi_fn) bbi_strmap_free(&x.vi_map);
  c->last_kind = rc ? (x.kind ? x.kind : BB_COMPILE_INTERNAL) : BB_COMPILE_OK;
  return rc;
}

int bb_compiler_compile(bb_compiler *c, const uint8_t *model, size_t len, uint8_t **out, size_t *out_len,
                        bb_error *err) {
  if (!c || (!model && len) || !out || !out_len)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "compile: missing argument");
  *out = NULL;
  *out_len = 0;
  bb_model *m = NULL;
  int rc = bb_model_decode(model, len, c->alloc, NULL, &m, err);
  if (rc) {
    c->last_kind = BB_COMPILE_BAD_INPUT;
    if (err) bb_error_prefix(err, "BadInput: ");
    return rc;
  }
  rc = compile_in_place(c, m, err);
  if (!rc) rc = bb_model_encode(m, out, out_len, err);
  bb_model_free(m);
  return rc;
}

int bb_compiler_compile_model(bb_compiler *c, const bb_model *model, bb_model **out, bb_error *err) {
  if (!c || !model || !out) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "compile: missing argument");
  *out = NULL;
  uint8_t *bytes;
  size_t len;
  int rc = bb_model_encode(model, &bytes, &len, err);
  if (rc) return rc;
  bb_model *m = NULL;
  rc = bb_model_decode(bytes, len, c->alloc, NULL, &m, err);
  bb_buffer_free(bbi_arena_allocator(model->arena), bytes);
  if (rc) return rc;
  rc = compile_in_place(c, m, err);
  if (rc) {
    bb_model_free(m);
    return rc;
  }
  *out = m;
  return 0;
}
