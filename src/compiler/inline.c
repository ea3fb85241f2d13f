/* inline_for_partition: CALLs to sub-Modules that touch the wire, are pure ONNX, or are
 * called once are replaced by a renamed copy of the callee's body, callees first, to a
 * fixpoint. Functions stamped module_phase=bootstrap are never inlined: they have no
 * call site, and install finds them by name. Every order is function-table order, so the
 * #inl<k> suffixes are deterministic. */
#include <string.h>

#include "compiler/compiler.h"

typedef struct inl_state {
  bool *wire, *pure, *inlinable, *removed;
  uint32_t *calls;
  uint64_t next_site; /* k of #inl<k> */
  bbi_strmap by_name;  /* function name → first index */
} inl_state;

static bool is_bootstrap(const bb_function *f) {
  const char *phase = bb_kv_get(&f->metadata, BB_KEY_MODULE_PHASE);
  return phase && strcmp(phase, BB_MODULE_PHASE_BOOTSTRAP) == 0;
}

static long find_fn(const bb_model *m, const char *name, const inl_state *s) {
  uint32_t first;
  if (!name || !bbi_strmap_get(&s->by_name, name, &first)) return -1;
  if (!s->removed[first]) return (long)first;
  for (size_t i = first + 1; i < m->functions.len; i++) /* a later function of the same name */
    if (!s->removed[i] && m->functions.items[i]->name && strcmp(m->functions.items[i]->name, name) == 0)
      return (long)i;
  return -1;
}

static bool is_call(const bb_ir_node *n) { return cc_domain_is(n, BB_DOMAIN_MODULE); }

static void classify(const bb_model *m, inl_state *s) {
  size_t nf = m->functions.len;
  for (size_t i = 0; i < nf; i++) s->wire[i] = s->pure[i] = false, s->calls[i] = 0;
  for (size_t i = 0; i < nf; i++) {
    if (s->removed[i] || is_bootstrap(m->functions.items[i])) continue;
    const bb_function *f = m->functions.items[i];
    bool pure = f->nodes.len > 0;
    for (size_t k = 0; k < f->nodes.len; k++) {
      const bb_ir_node *n = f->nodes.items[k];
      if (cc_domain_is(n, BB_DOMAIN_WIRE)) s->wire[i] = true;
      /* PassThrough (what an output port records) is a rename, so it keeps a body pure */
      if (!cc_domain_is(n, "") && !is_call(n) && !cc_is(n, BB_DOMAIN_SYSCALL, "PassThrough")) pure = false;
      if (is_call(n)) {
        long callee = find_fn(m, n->op_type, s);
        if (callee >= 0 && (size_t)callee != i) s->calls[callee]++;
      }
    }
    s->pure[i] = pure;
  }
  /* closures: a function calling a wire-touching one touches the wire; a pure function
   * may only call pure ones. Callees are recorded after their callers, so walking the
   * table backwards settles a call chain in one or two rounds. Bootstrap functions are
   * never inlined and take no part. */
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = nf; r-- > 0;) {
      size_t i = r;
      if (s->removed[i] || is_bootstrap(m->functions.items[i])) continue;
      const bb_function *f = m->functions.items[i];
      for (size_t k = 0; k < f->nodes.len; k++) {
        const bb_ir_node *n = f->nodes.items[k];
        if (!is_call(n)) continue;
        long callee = find_fn(m, n->op_type, s);
        if (callee >= 0 && s->wire[callee] && !s->wire[i]) s->wire[i] = changed = true;
        if (s->pure[i] && (callee < 0 || !s->pure[callee])) s->pure[i] = false, changed = true;
      }
    }
  }
  for (size_t i = 0; i < nf; i++) {
    const bb_function *f = m->functions.items[i];
    s->inlinable[i] = i > 0 && !s->removed[i] && f->name && !is_bootstrap(f) && (s->wire[i] || s->pure[i] || s->calls[i] == 1);
  }
}

/* True when f calls an inlinable function other than itself (then it waits: callees first). */
static bool calls_inlinable(const bb_model *m, const bb_function *f, size_t self, const inl_state *s) {
  for (size_t k = 0; k < f->nodes.len; k++) {
    const bb_ir_node *n = f->nodes.items[k];
    if (!is_call(n)) continue;
    long callee = find_fn(m, n->op_type, s);
    if (callee >= 0 && (size_t)callee != self && s->inlinable[callee]) return true;
  }
  return false;
}

static const char *renamed(bbi_strmap *map, const char **names, const char *v) {
  uint32_t i;
  if (!*v) return v;
  return bbi_strmap_get(map, v, &i) ? names[i] : v;
}

/* Inlining can grow a graph exponentially (a function calling another twice, nested);
 * past this many nodes in one function the compile stops. */
#define MAX_INLINED_NODES (1u << 18)

/* Replaces caller->nodes[at] (a CALL of callee) by a renamed copy of callee's body. */
static int inline_site(cc_ctx *x, bb_function *caller, size_t at, const bb_function *callee, inl_state *s) {
  const bb_ir_node *call = caller->nodes.items[at];
  if (caller->nodes.len + callee->nodes.len > MAX_INLINED_NODES)
    return cc_fail(x, BB_COMPILE_INTERNAL, "inlining `%s` into `%s` would exceed %u nodes", callee->name,
                   caller->name ? caller->name : "", MAX_INLINED_NODES);
  uint64_t k = s->next_site++;
  bbi_strmap map;
  bbi_strmap_init(&map, bbi_arena_allocator(x->m->arena));
  size_t cap = callee->inputs.len + callee->outputs.len + callee->value_infos.len + 16;
  for (size_t i = 0; i < callee->nodes.len; i++)
    cap += callee->nodes.items[i]->inputs.len + callee->nodes.items[i]->outputs.len;
  const char **names = bbi_arena_alloc(x->m->arena, cap * sizeof *names);
  uint32_t used = 0;
  int rc = names ? 0 : cc_nomem(x);
#define MAP(from, to)                                                                   \
  do {                                                                                  \
    uint32_t prev_;                                                                     \
    if (!rc && *(from) && !bbi_strmap_get(&map, (from), &prev_)) {                       \
      names[used] = (to);                                                               \
      if (!names[used] || bbi_strmap_put(&map, (from), used)) rc = cc_nomem(x);          \
      used++;                                                                           \
    }                                                                                   \
  } while (0)
  for (size_t i = 0; i < callee->inputs.len && i < call->inputs.len; i++) MAP(callee->inputs.items[i], call->inputs.items[i]);
  for (size_t i = 0; i < callee->outputs.len && i < call->outputs.len; i++)
    MAP(callee->outputs.items[i], call->outputs.items[i]);
  for (size_t i = 0; i < callee->inputs.len; i++)
    MAP(callee->inputs.items[i], cc_printf(x, "%s#inl%llu", callee->inputs.items[i], (unsigned long long)k));
  for (size_t i = 0; i < callee->nodes.len; i++) {
    const bb_ir_node *n = callee->nodes.items[i];
    for (size_t o = 0; o < n->outputs.len; o++)
      MAP(n->outputs.items[o], cc_printf(x, "%s#inl%llu", n->outputs.items[o], (unsigned long long)k));
    for (size_t o = 0; o < n->inputs.len; o++)
      MAP(n->inputs.items[o], cc_printf(x, "%s#inl%llu", n->inputs.items[o], (unsigned long long)k));
  }
#undef MAP
  /* the body, renamed, in place of the CALL */
  if (!rc && bb_nodelist_remove(&caller->nodes, at)) rc = cc_nomem(x);
  for (size_t i = 0; i < callee->nodes.len && !rc; i++) {
    bb_ir_node *c = cc_node_clone(x, callee->nodes.items[i]);
    if (!c) {
      rc = cc_nomem(x);
      break;
    }
    for (size_t o = 0; o < c->inputs.len; o++) c->inputs.items[o] = (char *)renamed(&map, names, c->inputs.items[o]);
    for (size_t o = 0; o < c->outputs.len; o++)
      c->outputs.items[o] = (char *)renamed(&map, names, c->outputs.items[o]);
    if (bb_nodelist_insert(x->m, &caller->nodes, at + i, c)) rc = cc_nomem(x);
  }
  /* value infos under their new names; a concrete callee type also replaces an
   * abstract one the caller recorded for a CALL output */
  for (size_t i = 0; i < callee->value_infos.len && !rc; i++) {
    const bb_value_info *vi = callee->value_infos.items[i];
    if (!vi->name) continue;
    const char *name = renamed(&map, names, vi->name);
    bb_value_info *mine = cc_find_vi(x, caller, name);
    const char *theirs = vi->type && vi->type->denotation ? vi->type->denotation : "";
    if (!mine) {
      if (!bb_vilist_add(x->m, &caller->value_infos, name, vi->type)) rc = cc_nomem(x);
    } else if (*theirs && !*cc_value_type(x, caller, name)) {
      mine->type = vi->type;
    }
  }
  /* the caller now uses the callee's domains */
  for (size_t i = 0; i < callee->opsets.len && !rc; i++) {
    const bb_opset *o = &callee->opsets.items[i];
    const char *d = o->domain ? o->domain : "";
    if (bb_opset_get(&caller->opsets, d) < 0 && bb_opset_set(x->m, &caller->opsets, d, o->has_version ? o->version : 1))
      rc = cc_nomem(x);
  }
  bbi_strmap_free(&map);
  return rc;
}

int cc_inline(cc_ctx *x) {
  bb_model *m = x->m;
  size_t nf = m->functions.len;
  inl_state s = {0};
  s.wire = bbi_arena_alloc(m->arena, nf + 1);
  s.pure = bbi_arena_alloc(m->arena, nf + 1);
  s.inlinable = bbi_arena_alloc(m->arena, nf + 1);
  s.removed = bbi_arena_alloc(m->arena, nf + 1);
  s.calls = bbi_arena_alloc(m->arena, (nf + 1) * sizeof *s.calls);
  if (!s.wire || !s.pure || !s.inlinable || !s.removed || !s.calls) return cc_nomem(x);
  bbi_strmap_init(&s.by_name, bbi_arena_allocator(m->arena));
  for (size_t i = 0; i < nf; i++) {
    uint32_t prev;
    const char *name = m->functions.items[i]->name;
    if (name && !bbi_strmap_get(&s.by_name, name, &prev) && bbi_strmap_put(&s.by_name, name, (uint32_t)i)) {
      bbi_strmap_free(&s.by_name);
      return cc_nomem(x);
    }
  }
  int rc = 0;
  while (!rc) {
    classify(m, &s);
    long pick = -1;
    for (size_t i = 0; i < nf && pick < 0; i++)
      if (s.inlinable[i] && !calls_inlinable(m, m->functions.items[i], i, &s)) pick = (long)i;
    if (pick < 0) break; /* nothing left, or only mutually recursive functions */
    const bb_function *callee = m->functions.items[pick];
    bool self_call = false;
    for (size_t k = 0; k < callee->nodes.len; k++)
      if (is_call(callee->nodes.items[k]) && strcmp(callee->nodes.items[k]->op_type, callee->name) == 0)
        self_call = true;
    if (self_call) break;
    for (size_t f = 0; f < nf && !rc; f++) {
      if (s.removed[f] || (long)f == pick) continue;
      bb_function *caller = m->functions.items[f];
      for (size_t i = 0; i < caller->nodes.len;) {
        const bb_ir_node *n = caller->nodes.items[i];
        if (is_call(n) && strcmp(n->op_type, callee->name) == 0) {
          if ((rc = inline_site(x, caller, i, callee, &s)) != 0) break;
          i += callee->nodes.len;
        } else {
          i++;
        }
      }
    }
    s.removed[pick] = true;
  }
  bbi_strmap_free(&s.by_name);
  if (rc) return rc;
  size_t kept = 0;
  for (size_t i = 0; i < nf; i++)
    if (!s.removed[i]) m->functions.items[kept++] = m->functions.items[i];
  m->functions.len = kept;
  return 0;
}
