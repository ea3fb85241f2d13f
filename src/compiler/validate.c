/* Structural checks: the entry checks (functions present, IR version), the seam checks
 * (every node has an op type), validate (known domains, no dangling input, one producer
 * per value, typed inputs, slot metadata on role nodes, imported opsets, no cycle) and
 * verify_no_dangling_calls (every CALL a partition reaches has its function). */
#include <string.h>

#include "compiler/compiler.h"

int cc_entry_checks(cc_ctx *x) {
  if (!x->m->functions.len) return cc_fail(x, BB_COMPILE_EMPTY_FUNCTION_TABLE, "the model has no functions");
  const char *v = bb_kv_get(&x->m->metadata, BB_KEY_IR_VERSION);
  uint32_t got;
  if (v && (!cc_parse_u32(v, &got) || got != x->c->target_version))
    return cc_fail(x, BB_COMPILE_IR_VERSION_MISMATCH, "model %s is \"%s\", the compiler targets %u",
                   BB_KEY_IR_VERSION, v, x->c->target_version);
  return 0;
}

int cc_check_seams(cc_ctx *x) {
  const bb_model *m = x->m;
  if (!m->functions.len)
    return cc_fail(x, BB_COMPILE_INTERNAL, "verify::types failed at frontend seam: empty function table");
  for (size_t f = 0; f < m->functions.len; f++) {
    const bb_function *fn = m->functions.items[f];
    for (size_t i = 0; i < fn->nodes.len; i++)
      if (!fn->nodes.items[i]->op_type || !*fn->nodes.items[i]->op_type)
        return cc_fail(x, BB_COMPILE_INTERNAL, "verify::types failed at frontend seam: node %zu of `%s` has no op_type",
                       i, fn->name ? fn->name : "");
  }
  return 0;
}

static bool known_domain(const char *d) {
  static const char *const ROOTS[] = {BB_DOMAIN_FRAMEWORK, BB_DOMAIN_ONNX_ALIAS};
  if (!d || !*d) return true; /* the default ONNX domain */
  for (size_t i = 0; i < 2; i++) {
    size_t n = strlen(ROOTS[i]);
    if (strncmp(d, ROOTS[i], n) == 0 && (d[n] == 0 || d[n] == '.')) return true;
  }
  return false;
}

static bool is_input(const bb_function *f, const char *v) { return bb_strlist_find(&f->inputs, v) >= 0; }

/* Kahn's algorithm over producer → consumer edges; the nodes left over form cycles. */
static int check_acyclic(cc_ctx *x, const bb_function *f, const bbi_strmap *producers) {
  size_t n = f->nodes.len;
  uint32_t *indeg = bbi_arena_alloc(x->m->arena, (n + 1) * sizeof *indeg);
  uint32_t *queue = bbi_arena_alloc(x->m->arena, (n + 1) * sizeof *queue);
  /* consumers as a CSR list: offsets then node indices */
  uint32_t *start = bbi_arena_alloc(x->m->arena, (n + 2) * sizeof *start);
  if (!indeg || !queue || !start) return cc_nomem(x);
  size_t edges = 0;
  for (size_t i = 0; i < n; i++) {
    const bb_ir_node *nd = f->nodes.items[i];
    for (size_t k = 0; k < nd->inputs.len; k++) {
      uint32_t p;
      if (*nd->inputs.items[k] && bbi_strmap_get(producers, nd->inputs.items[k], &p) && p != i) {
        indeg[i]++;
        start[p + 1]++;
        edges++;
      }
    }
  }
  for (size_t i = 0; i < n; i++) start[i + 1] += start[i];
  uint32_t *adj = bbi_arena_alloc(x->m->arena, (edges + 1) * sizeof *adj);
  uint32_t *fill = bbi_arena_alloc(x->m->arena, (n + 1) * sizeof *fill);
  if (!adj || !fill) return cc_nomem(x);
  for (size_t i = 0; i < n; i++) {
    const bb_ir_node *nd = f->nodes.items[i];
    for (size_t k = 0; k < nd->inputs.len; k++) {
      uint32_t p;
      if (*nd->inputs.items[k] && bbi_strmap_get(producers, nd->inputs.items[k], &p) && p != i)
        adj[start[p] + fill[p]++] = (uint32_t)i;
    }
  }
  size_t head = 0, tail = 0;
  for (size_t i = 0; i < n; i++)
    if (!indeg[i]) queue[tail++] = (uint32_t)i;
  while (head < tail) {
    uint32_t p = queue[head++];
    for (uint32_t e = start[p]; e < start[p + 1]; e++)
      if (--indeg[adj[e]] == 0) queue[tail++] = adj[e];
  }
  if (tail == n) return 0;
  char names[300] = "";
  for (size_t i = 0; i < n; i++)
    if (indeg[i]) {
      size_t used = strlen(names);
      if (used + 4 >= sizeof names) break;
      snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", cc_node_label(x, f, f->nodes.items[i]));
    }
  return cc_fail(x, BB_COMPILE_CYCLIC_GRAPH, "function `%s` has a cycle involving [%s]", f->name ? f->name : "",
                 names);
}

int cc_validate(cc_ctx *x) {
  const bb_function *f = x->root;
  int rc = 0;
  for (size_t i = 0; i < f->nodes.len; i++) {
    const bb_ir_node *n = f->nodes.items[i];
    if (!known_domain(n->domain))
      return cc_fail(x, BB_COMPILE_UNKNOWN_OP, "node `%s` has op %s in unknown domain \"%s\"", cc_node_label(x, f, n),
                     n->op_type, n->domain);
  }
  bbi_strmap producers;
  bbi_strmap_init(&producers, bbi_arena_allocator(x->m->arena));
  /* duplicate outputs are found first (the producer map needs them) but reported after
   * dangling inputs: a dangling input is the more basic mistake */
  const bb_ir_node *dup_a = NULL, *dup_b = NULL;
  const char *dup_v = NULL;
  for (size_t i = 0; i < f->nodes.len && !rc; i++) {
    const bb_ir_node *n = f->nodes.items[i];
    for (size_t o = 0; o < n->outputs.len && !rc; o++) {
      const char *v = n->outputs.items[o];
      uint32_t p;
      if (!*v) continue;
      if (bbi_strmap_get(&producers, v, &p)) {
        if (!dup_v) dup_v = v, dup_a = f->nodes.items[p], dup_b = n;
      } else if (bbi_strmap_put(&producers, v, (uint32_t)i)) {
        rc = cc_nomem(x);
      }
    }
  }
  for (size_t i = 0; i < f->nodes.len && !rc; i++) {
    const bb_ir_node *n = f->nodes.items[i];
    for (size_t k = 0; k < n->inputs.len && !rc; k++) {
      const char *v = n->inputs.items[k];
      uint32_t p;
      if (*v && !is_input(f, v) && !bbi_strmap_get(&producers, v, &p))
        rc = cc_fail(x, BB_COMPILE_DANGLING_INPUT, "node `%s` reads `%s`, which is neither an input nor produced",
                     cc_node_label(x, f, n), v);
    }
  }
  if (!rc && dup_v)
    rc = cc_fail(x, BB_COMPILE_DUPLICATE_OUTPUT, "value `%s` is produced by both `%s` and `%s`", dup_v,
                 cc_node_label(x, f, dup_a), cc_node_label(x, f, dup_b));
  for (size_t i = 0; i < f->inputs.len && !rc; i++) {
    const bb_value_info *vi = bb_vilist_find(&f->value_infos, f->inputs.items[i]);
    if (!vi || !vi->type)
      rc = cc_fail(x, BB_COMPILE_MISSING_TYPE_INFO, "input `%s` of `%s` has no type", f->inputs.items[i], f->name);
  }
  for (size_t i = 0; i < f->nodes.len && !rc; i++) {
    const bb_ir_node *n = f->nodes.items[i];
    if (!cc_is_role_domain(n->domain)) continue;
    bool concrete = cc_meta(n, BB_KEY_CONCRETE_TYPE) && cc_meta(n, BB_KEY_INSTANCE);
    bool generic = cc_meta(n, BB_KEY_REQUIRED_TRAIT) && cc_meta(n, BB_KEY_SLOT_ID);
    if (!concrete && !generic)
      rc = cc_fail(x, BB_COMPILE_MALFORMED_SLOT_METADATA,
                   "role node `%s` needs (required_trait, slot_id) or (concrete_type, instance) metadata",
                   cc_node_label(x, f, n));
  }
  /* OpsetNotImported: a function that imports opsets must import every domain its nodes
   * use. */
  if (f->opsets.len)
    for (size_t i = 0; i < f->nodes.len && !rc; i++) {
      const bb_ir_node *n = f->nodes.items[i];
      if (bb_opset_get(&f->opsets, n->domain ? n->domain : "") < 0 && !(n->domain == NULL || !*n->domain))
        rc = cc_fail(x, BB_COMPILE_OPSET_NOT_IMPORTED, "node `%s` uses domain \"%s\", which `%s` does not import",
                     cc_node_label(x, f, n), n->domain, f->name);
    }
  if (!rc) rc = check_acyclic(x, f, &producers);
  bbi_strmap_free(&producers);
  return rc;
}

int cc_check_dangling_calls(cc_ctx *x, cc_partition *p) {
  /* BFS from the partition main over CALL nodes. */
  const bb_model *m = x->m;
  size_t nf = m->functions.len;
  bool *seen = bbi_arena_alloc(m->arena, nf + 1);
  const bb_function **queue = bbi_arena_alloc(m->arena, (nf + 2) * sizeof *queue);
  if (!seen || !queue) return cc_nomem(x);
  size_t head = 0, tail = 0;
  queue[tail++] = p->fn;
  while (head < tail) {
    const bb_function *f = queue[head++];
    for (size_t i = 0; i < f->nodes.len; i++) {
      const bb_ir_node *n = f->nodes.items[i];
      if (!cc_domain_is(n, BB_DOMAIN_MODULE)) continue;
      bool found = false;
      for (size_t k = 0; k < nf; k++) {
        const bb_function *g = m->functions.items[k];
        if (g->name && strcmp(g->name, n->op_type) == 0) {
          found = true;
          if (!seen[k] && g != p->fn) {
            seen[k] = true;
            queue[tail++] = g;
          }
          break;
        }
      }
      if (!found)
        return cc_fail(x, BB_COMPILE_INTERNAL, "function `%s` emits CALL chasing missing function `%s`",
                       f->name ? f->name : "", n->op_type);
    }
  }
  return 0;
}
