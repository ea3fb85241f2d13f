/* type_solver and the wire-edge storage check.
 *
 * Types are denotations; "" is abstract and BB_TYPE_BYTES (an untyped input) is a bound
 * that unifies with anything. Seeds come from value infos; value-preserving ops
 * (PassThrough, Send's data output, Recv's payload from its Send) and CALLs of kept
 * functions (their declared output types) carry a type forward, and the op relations
 * below (ops whose inputs and output share one element type) narrow abstract values and
 * reject mixed precision within an op. Strict mode then requires every value of the root
 * to have a type. A Recv's payload must have the type its Send sends; a Codec is how a
 * path changes storage type. Nodes are visited in order until nothing changes, so the
 * result and the first error reported are deterministic. */
#include <string.h>

#include "compiler/compiler.h"

/* Relation sets: SAME = all listed ports share one element type. */
typedef enum { REL_NONE, REL_SAME_ALL_IN_OUT0, REL_SAME_IN0_OUT0 } rel_kind;

static rel_kind relation_of(const bb_ir_node *n) {
  static const char *const BINARY[] = {"Add", "Sub", "Mul", "Div", "Pow", "MatMul"};
  static const char *const UNARY[] = {"Neg",     "Abs",       "Sqrt",    "Exp",     "Log",     "Identity",
                                      "Relu",    "Sigmoid",   "Tanh",    "Reshape", "Transpose", "Slice",
                                      "Squeeze", "Unsqueeze", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"};
  if (cc_domain_is(n, "")) {
    for (size_t i = 0; i < sizeof BINARY / sizeof BINARY[0]; i++)
      if (strcmp(n->op_type, BINARY[i]) == 0) return REL_SAME_ALL_IN_OUT0;
    for (size_t i = 0; i < sizeof UNARY / sizeof UNARY[0]; i++)
      if (strcmp(n->op_type, UNARY[i]) == 0) return REL_SAME_IN0_OUT0;
  }
  if (cc_is(n, BB_DOMAIN_ROLE_MODEL, "Forward")) return REL_SAME_IN0_OUT0;
  return REL_NONE;
}

static bool is_bound(const char *t) { return !*t || strcmp(t, BB_TYPE_BYTES) == 0; }

typedef struct solver {
  cc_ctx *x;
  bb_function *f;
  bbi_strmap index; /* value → slot */
  const char **type;
  const char **name;
  size_t n, cap;
} solver;

static int intern(solver *s, const char *v) {
  uint32_t i;
  if (!*v || bbi_strmap_get(&s->index, v, &i)) return 0;
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    const char **t = bbi_arena_grow(s->x->m->arena, (void *)s->type, s->cap * sizeof *t, cap * sizeof *t);
    if (!t) return cc_nomem(s->x);
    s->type = t;
    const char **nm = bbi_arena_grow(s->x->m->arena, (void *)s->name, s->cap * sizeof *nm, cap * sizeof *nm);
    if (!nm) return cc_nomem(s->x);
    s->name = nm;
    s->cap = cap;
  }
  s->name[s->n] = v;
  s->type[s->n] = cc_value_type(s->x, s->f, v);
  return bbi_strmap_put(&s->index, v, (uint32_t)s->n++) ? cc_nomem(s->x) : 0;
}

static const char **slot(solver *s, const char *v) {
  uint32_t i;
  return *v && bbi_strmap_get(&s->index, v, &i) ? &s->type[i] : NULL;
}

/* Narrows `to` from `from` when `to` is abstract; true when it changed. */
static bool carry(solver *s, const char *from, const char *to) {
  const char **a = slot(s, from), **b = slot(s, to);
  if (!a || !b || !**a || **b) return false;
  *b = *a;
  return true;
}

static int apply_relation(solver *s, const bb_ir_node *n, rel_kind kind, bool *changed) {
  const char **ports[16];
  size_t np = 0;
  size_t n_in = kind == REL_SAME_ALL_IN_OUT0 ? n->inputs.len : (n->inputs.len ? 1 : 0);
  for (size_t i = 0; i < n_in && np < 15; i++)
    if ((ports[np] = slot(s, n->inputs.items[i]))) np++;
  if (n->outputs.len && (ports[np] = slot(s, n->outputs.items[0]))) np++;
  const char *pivot = NULL;
  for (size_t i = 0; i < np; i++)
    if (!is_bound(*ports[i])) {
      if (!pivot) pivot = *ports[i];
      else if (strcmp(pivot, *ports[i]) != 0)
        return cc_fail(s->x, BB_COMPILE_TYPE_CONSTRAINT_FAILED,
                       "op %s::%s (node `%s`): SameType: incompatible concrete types %s and %s",
                       n->domain && *n->domain ? n->domain : BB_DOMAIN_ONNX_ALIAS, n->op_type,
                       cc_node_label(s->x, s->f, n), pivot, *ports[i]);
    }
  if (!pivot) return 0;
  for (size_t i = 0; i < np; i++)
    if (!**ports[i]) *ports[i] = pivot, *changed = true;
  return 0;
}

/* A CALL's outputs take the types the callee (a kept, shared function) declares for its
 * outputs. */
static bool carry_from_callee(solver *s, const bb_ir_node *call) {
  const bb_function *callee = bb_model_find_function(s->x->m, BB_DOMAIN_MODULE, call->op_type);
  bool changed = false;
  for (size_t i = 0; callee && callee != s->f && i < call->outputs.len && i < callee->outputs.len; i++) {
    const char **out = slot(s, call->outputs.items[i]);
    const bb_value_info *vi = bb_vilist_find(&callee->value_infos, callee->outputs.items[i]);
    const char *t = vi && vi->type && vi->type->denotation ? vi->type->denotation : "";
    if (out && !**out && *t) *out = t, changed = true;
  }
  return changed;
}

/* The Send whose data output a Recv re-publishes (by the index recv synthesis stored). */
static const bb_ir_node *send_of(const bb_function *f, const bb_ir_node *recv) {
  const char *from = cc_meta(recv, BB_KEY_SYNTHESIZED_FROM_SEND);
  uint32_t idx;
  if (!from || !cc_parse_u32(from, &idx)) return NULL;
  for (size_t i = 0; i < f->nodes.len; i++) {
    const bb_ir_node *n = f->nodes.items[i];
    if (!cc_is(n, BB_DOMAIN_WIRE, "Send") || !n->outputs.len) continue;
    const char *o = n->outputs.items[0];
    const char *tag = strstr(o, "__send_sentinel_");
    uint32_t k;
    if (tag && cc_parse_u32(tag + 16, &k) && k == idx) return n;
  }
  return NULL;
}

int cc_solve_types(cc_ctx *x, bool check_edges) {
  solver s = {.x = x, .f = x->root};
  bbi_strmap_init(&s.index, bbi_arena_allocator(x->m->arena));
  bb_function *f = x->root;
  int rc = 0;
  for (size_t i = 0; i < f->inputs.len && !rc; i++) rc = intern(&s, f->inputs.items[i]);
  for (size_t i = 0; i < f->nodes.len && !rc; i++) {
    const bb_ir_node *n = f->nodes.items[i];
    for (size_t k = 0; k < n->outputs.len && !rc; k++) rc = intern(&s, n->outputs.items[k]);
    for (size_t k = 0; k < n->inputs.len && !rc; k++) rc = intern(&s, n->inputs.items[k]);
  }
  for (bool changed = true; changed && !rc;) {
    changed = false;
    for (size_t i = 0; i < f->nodes.len && !rc; i++) {
      const bb_ir_node *n = f->nodes.items[i];
      if ((cc_is(n, BB_DOMAIN_SYSCALL, "PassThrough") || cc_is(n, BB_DOMAIN_WIRE, "Send")) && n->inputs.len &&
          n->outputs.len)
        changed |= carry(&s, n->inputs.items[0], n->outputs.items[0]);
      if (cc_is(n, BB_DOMAIN_WIRE, "Recv") && n->outputs.len) {
        const bb_ir_node *send = send_of(f, n);
        if (send && send->inputs.len) changed |= carry(&s, send->inputs.items[0], n->outputs.items[0]);
      }
      if (cc_domain_is(n, BB_DOMAIN_MODULE)) changed |= carry_from_callee(&s, n);
      rel_kind kind = relation_of(n);
      if (kind != REL_NONE) rc = apply_relation(&s, n, kind, &changed);
    }
  }
  if (!rc && check_edges)
    for (size_t i = 0; i < f->nodes.len && !rc; i++) {
      const bb_ir_node *n = f->nodes.items[i];
      if (!cc_is(n, BB_DOMAIN_WIRE, "Recv") || !n->outputs.len) continue;
      const bb_ir_node *send = send_of(f, n);
      if (!send || !send->inputs.len) continue;
      const char **sent = slot(&s, send->inputs.items[0]), **got = slot(&s, n->outputs.items[0]);
      if (sent && got && !is_bound(*sent) && !is_bound(*got) && strcmp(*sent, *got) != 0)
        rc = cc_fail(x, BB_COMPILE_INCOMPATIBLE_STORAGE_ON_EDGE,
                     "`%s` (%s) is received as `%s` declared %s: insert a Codec<In=%s, Out=%s> before the Send",
                     send->inputs.items[0], *sent, n->outputs.items[0], *got, *sent, *got);
    }
  if (!rc && !x->c->permissive)
    for (size_t i = 0; i < s.n; i++)
      if (!*s.type[i]) {
        rc = cc_fail(x, BB_COMPILE_UNRESOLVED_TYPE,
                     "value `%s` of `%s` has no concrete type (bind a component that declares its storage, or "
                     "compile with permissive types)",
                     s.name[i], f->name);
        break;
      }
  for (size_t i = 0; i < s.n && !rc; i++)
    if (*s.type[i] && strcmp(s.type[i], cc_value_type(x, f, s.name[i])) != 0)
      rc = cc_set_value_type(x, f, s.name[i], s.type[i]);
  bbi_strmap_free(&s.index);
  return rc;
}
