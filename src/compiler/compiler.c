/* The compiler object: bindings, the component table, options and user passes. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"

static const char *const PASS_NAMES[CC_PASS_COUNT + 1] = {
    "inline_for_partition",       "derive_wire_deadlines",      "validate",
    "expand_ops",                 "type_solver",                "infer_peer_classes",
    "synthesize_wire_recvs",      "partition_by_wire_ops",      "resolve_slots",
    "analyze_wire_edges",         "insert_dedup_gate_rx",       "insert_peer_health_gate_rx",
    "insert_backoff_gate_rx",     "insert_peer_health_gate_tx", "insert_backoff_gate_tx",
    "insert_async_deadlines",     "validate_runtime_complete",  NULL};

const char *const *bb_compiler_pass_names(void) { return PASS_NAMES; }

static int pass_index(const char *name) {
  for (int i = 0; i < CC_PASS_COUNT; i++)
    if (strcmp(PASS_NAMES[i], name) == 0) return i;
  return -1;
}

bb_compiler *bb_compiler_new(const bb_allocator *alloc) {
  if (!alloc) alloc = bb_default_allocator();
  bb_arena *arena = bbi_arena_new(alloc);
  if (!arena) return NULL;
  bb_compiler *c = bbi_arena_alloc(arena, sizeof *c);
  if (!c) {
    bbi_arena_free(arena);
    return NULL;
  }
  c->alloc = alloc;
  c->arena = arena;
  c->per_hop_budget_ns = BB_COMPILER_DEFAULT_PER_HOP_BUDGET_NS;
  c->target_version = BB_COMPILER_TARGET_IR_VERSION;
  return c;
}

void bb_compiler_free(bb_compiler *c) {
  if (c) bbi_arena_free(c->arena);
}

const cc_binding *cc_find_binding(const bb_compiler *c, const char *slot) {
  for (size_t i = 0; i < c->bindings.len; i++)
    if (strcmp(c->bindings.items[i].slot, slot) == 0) return &c->bindings.items[i];
  return NULL;
}

const cc_component *cc_find_component(const bb_compiler *c, const char *type) {
  for (size_t i = 0; i < c->components.len; i++)
    if (strcmp(c->components.items[i].type, type) == 0) return &c->components.items[i];
  return NULL;
}

const cc_op_set *cc_find_op_set(const bb_compiler *c, const char *type) {
  for (size_t i = 0; i < c->op_sets.len; i++)
    if (strcmp(c->op_sets.items[i].type, type) == 0) return &c->op_sets.items[i];
  return NULL;
}

static int cmp_op(const bb_component_op *a, const char *domain, const char *op_type) {
  int d = strcmp(a->domain, domain);
  return d ? d : strcmp(a->op_type, op_type);
}

static int cmp_ops(const void *a, const void *b) {
  const bb_component_op *y = b;
  return cmp_op(a, y->domain, y->op_type);
}

bool cc_op_set_has(const cc_op_set *s, const char *domain, const char *op_type) {
  if (bb_domain_is_onnx(domain)) domain = BB_DOMAIN_ONNX;
  size_t lo = 0, hi = s->n_ops;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = cmp_op(&s->ops[mid], domain, op_type);
    if (!c) return true;
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return false;
}

static bool is_name(const char *s) {
  if (!s || !*s) return false;
  for (const char *p = s; *p; p++)
    if ((unsigned char)*p <= ' ' || *p == '|' || *p == 0x7f) return false;
  return true;
}

int bb_compiler_bind(bb_compiler *c, bb_role role, const char *slot, const char *concrete_type,
                     const char *config, bb_error *err) {
  if (!c || (role != BB_COMPILER_ROLE_OF_SLOT && !bb_role_trait(role)))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "bind: no compiler or unknown role %d", (int)role);
  if (!is_name(slot) || strchr(slot, '.'))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "bind: bad slot name \"%s\"", slot ? slot : "(null)");
  if (!is_name(concrete_type))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "bind %s: bad concrete type name \"%s\"", slot,
                        concrete_type ? concrete_type : "(null)");
  if (cc_find_binding(c, slot))
    return bb_error_set(err, BB_ERR_EXISTS, "bind: slot \"%s\" is already bound", slot);
  cc_binding b = {role, bbi_arena_strdup(c->arena, slot), bbi_arena_strdup(c->arena, concrete_type),
                  config ? bbi_arena_strdup(c->arena, config) : NULL};
  if (!b.slot || !b.type || (config && !b.config) || BBI_ARENA_PUSH(c->arena, &c->bindings, b))
    return bb_error_set(err, BB_ERR_NOMEM, "bind: out of memory");
  return 0;
}

int bb_compiler_unbind(bb_compiler *c, const char *slot, bb_error *err) {
  if (!c || !slot) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "unbind: no compiler or slot");
  for (size_t i = 0; i < c->bindings.len; i++) {
    if (strcmp(c->bindings.items[i].slot, slot) != 0) continue;
    memmove(&c->bindings.items[i], &c->bindings.items[i + 1], (c->bindings.len - i - 1) * sizeof *c->bindings.items);
    c->bindings.len--;
    return 0;
  }
  return bb_error_set(err, BB_ERR_NOT_FOUND, "unbind: slot \"%s\" is not bound", slot);
}

#define BIND_ROLE(fn, role)                                                                     \
  int fn(bb_compiler *c, const char *slot, const char *type, const char *config, bb_error *err) { \
    return bb_compiler_bind(c, role, slot, type, config, err);                                   \
  }
BIND_ROLE(bb_compiler_bind_backend, BB_ROLE_BACKEND)
BIND_ROLE(bb_compiler_bind_model, BB_ROLE_MODEL)
BIND_ROLE(bb_compiler_bind_index, BB_ROLE_INDEX)
BIND_ROLE(bb_compiler_bind_aggregator, BB_ROLE_AGGREGATOR)
BIND_ROLE(bb_compiler_bind_codec, BB_ROLE_CODEC)
BIND_ROLE(bb_compiler_bind_data_source, BB_ROLE_DATA_SOURCE)
BIND_ROLE(bb_compiler_bind_peer_selector, BB_ROLE_PEER_SELECTOR)
BIND_ROLE(bb_compiler_bind_protocol, BB_ROLE_PROTOCOL)

int bb_compiler_declare_component(bb_compiler *c, const bb_component_decl *decl, bb_error *err) {
  if (!c || !decl || decl->struct_size < sizeof *decl || !is_name(decl->type_name) ||
      (decl->n_storage && !decl->storage) || (decl->n_deps && !decl->deps))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "declare_component: bad declaration");
  cc_component k = {bbi_arena_strdup(c->arena, decl->type_name), NULL, decl->n_storage, NULL, decl->n_deps};
  if (!k.type) return bb_error_set(err, BB_ERR_NOMEM, "declare_component: out of memory");
  if (k.n_storage && !(k.storage = bbi_arena_alloc(c->arena, k.n_storage * sizeof *k.storage)))
    return bb_error_set(err, BB_ERR_NOMEM, "declare_component: out of memory");
  for (size_t i = 0; i < k.n_storage; i++) {
    const bb_component_port *p = &decl->storage[i];
    if (!is_name(p->port) || !p->type)
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "declare_component %s: bad storage port %zu",
                          decl->type_name, i);
    k.storage[i].port = bbi_arena_strdup(c->arena, p->port);
    k.storage[i].type = bbi_arena_strdup(c->arena, p->type);
    if (!k.storage[i].port || !k.storage[i].type) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  }
  if (k.n_deps && !(k.deps = bbi_arena_alloc(c->arena, k.n_deps * sizeof *k.deps)))
    return bb_error_set(err, BB_ERR_NOMEM, "declare_component: out of memory");
  for (size_t i = 0; i < k.n_deps; i++) {
    const bb_component_dep *d = &decl->deps[i];
    if (!bb_role_trait(d->role) || !is_name(d->slot))
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "declare_component %s: bad dependency %zu",
                          decl->type_name, i);
    k.deps[i].role = d->role;
    if (!(k.deps[i].slot = bbi_arena_strdup(c->arena, d->slot)))
      return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  }
  for (size_t i = 0; i < c->components.len; i++)
    if (strcmp(c->components.items[i].type, k.type) == 0) {
      c->components.items[i] = k;
      return 0;
    }
  if (BBI_ARENA_PUSH(c->arena, &c->components, k)) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  return 0;
}

int bb_compiler_declare_op_set(bb_compiler *c, const char *type_name, const bb_component_op *ops, size_t n_ops,
                               bb_error *err) {
  if (!c || !is_name(type_name) || (n_ops && !ops))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "declare_op_set: no compiler, type name or ops");
  for (size_t i = 0; i < n_ops; i++)
    if (!is_name(ops[i].op_type) || (ops[i].domain && *ops[i].domain && !is_name(ops[i].domain)))
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "declare_op_set %s: op %zu is not a (domain, op_type) pair",
                          type_name, i);
  cc_op_set set = {bbi_arena_strdup(c->arena, type_name), NULL, 0};
  if (!set.type || (n_ops && !(set.ops = bbi_arena_alloc(c->arena, n_ops * sizeof *set.ops))))
    return bb_error_set(err, BB_ERR_NOMEM, "declare_op_set: out of memory");
  for (size_t i = 0; i < n_ops; i++) {
    const char *domain = bb_domain_is_onnx(ops[i].domain) ? BB_DOMAIN_ONNX : ops[i].domain;
    set.ops[i].domain = bbi_arena_strdup(c->arena, domain);
    set.ops[i].op_type = bbi_arena_strdup(c->arena, ops[i].op_type);
    if (!set.ops[i].domain || !set.ops[i].op_type) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  }
  if (n_ops) qsort(set.ops, n_ops, sizeof *set.ops, cmp_ops);
  for (size_t i = 0; i < n_ops; i++)
    if (!set.n_ops || cmp_ops(&set.ops[set.n_ops - 1], &set.ops[i]) != 0) set.ops[set.n_ops++] = set.ops[i];
  for (size_t i = 0; i < c->op_sets.len; i++)
    if (strcmp(c->op_sets.items[i].type, set.type) == 0) {
      c->op_sets.items[i] = set;
      return 0;
    }
  if (BBI_ARENA_PUSH(c->arena, &c->op_sets, set)) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  return 0;
}

void bb_compiler_set_per_hop_budget_ns(bb_compiler *c, uint64_t ns) {
  if (c) c->per_hop_budget_ns = ns;
}
void bb_compiler_set_permissive_types(bb_compiler *c, bool permissive) {
  if (c) c->permissive = permissive;
}
void bb_compiler_set_target_version(bb_compiler *c, uint32_t version) {
  if (c) c->target_version = version;
}

int bb_compiler_disable_pass(bb_compiler *c, const char *name, bb_error *err) {
  if (!c || !name) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "disable_pass: no compiler or name");
  int i = pass_index(name);
  if (i == CC_PASS_PARTITION)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "pass %s cannot be disabled", name);
  if (i >= 0) {
    c->disabled[i] = true;
    return 0;
  }
  size_t kept = 0;
  for (size_t k = 0; k < c->hooks.len; k++)
    if (strcmp(c->hooks.items[k].name, name) != 0) c->hooks.items[kept++] = c->hooks.items[k];
  if (kept == c->hooks.len) return bb_error_set(err, BB_ERR_NOT_FOUND, "no pass named %s", name);
  c->hooks.len = kept;
  return 0;
}

int bb_compiler_add_pass(bb_compiler *c, const char *after, const char *name, bb_compiler_pass_fn fn,
                         void *user, bb_error *err) {
  if (!c || !is_name(name) || !fn)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "add_pass: no compiler, name or function");
  int at = after ? pass_index(after) : -1;
  if (after && at < 0) return bb_error_set(err, BB_ERR_NOT_FOUND, "add_pass %s: no canonical pass %s", name, after);
  if (pass_index(name) >= 0)
    return bb_error_set(err, BB_ERR_EXISTS, "add_pass: %s is the name of a canonical pass", name);
  for (size_t k = 0; k < c->hooks.len; k++)
    if (strcmp(c->hooks.items[k].name, name) == 0)
      return bb_error_set(err, BB_ERR_EXISTS, "add_pass: a pass named %s exists", name);
  cc_hook h = {at, bbi_arena_strdup(c->arena, name), fn, user};
  if (!h.name || BBI_ARENA_PUSH(c->arena, &c->hooks, h)) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  return 0;
}

bb_compile_error bb_compiler_error_kind(const bb_compiler *c) { return c ? c->last_kind : BB_COMPILE_OK; }
