/* validate_bootstrap_composition: the bootstrap function's CALL
 * tree must reach only existing functions and contain no cycle. */
#include <string.h>

#include "compiler/compiler.h"

static bool is_bootstrap(const bb_function *f) {
  const char *phase = bb_kv_get(&f->metadata, BB_KEY_MODULE_PHASE);
  return phase && strcmp(phase, BB_MODULE_PHASE_BOOTSTRAP) == 0;
}

static long find_fn(const bb_model *m, const char *name) {
  for (size_t i = 0; i < m->functions.len; i++)
    if (m->functions.items[i]->name && strcmp(m->functions.items[i]->name, name) == 0) return (long)i;
  return -1;
}

/* Bounds the recursion below on hostile input (WebAssembly stacks are small). */
#define MAX_BOOTSTRAP_DEPTH 1024

/* Depth-first with a grey stack: 0 white, 1 grey (on the stack), 2 black. */
static int visit(cc_ctx *x, size_t fi, uint8_t *color, size_t *stack, size_t depth) {
  const bb_model *m = x->m;
  const bb_function *f = m->functions.items[fi];
  if (depth >= MAX_BOOTSTRAP_DEPTH)
    return cc_fail(x, BB_COMPILE_INTERNAL, "bootstrap composition nests deeper than %d functions (at `%s`)",
                   MAX_BOOTSTRAP_DEPTH, f->name ? f->name : "");
  color[fi] = 1;
  stack[depth] = fi;
  for (size_t i = 0; i < f->nodes.len; i++) {
    const bb_ir_node *n = f->nodes.items[i];
    if (!cc_domain_is(n, BB_DOMAIN_MODULE)) continue;
    long callee = find_fn(m, n->op_type);
    if (callee < 0)
      return cc_fail(x, BB_COMPILE_BOOTSTRAP_COMPOSITION_GAP, "bootstrap function `%s` calls missing function `%s`",
                     f->name, n->op_type);
    if (!is_bootstrap(m->functions.items[callee])) continue;
    if (color[callee] == 1) {
      char path[400] = "";
      size_t from = 0;
      while (stack[from] != (size_t)callee) from++;
      for (size_t k = from; k <= depth; k++) {
        size_t used = strlen(path);
        snprintf(path + used, sizeof path - used, "%s, ", m->functions.items[stack[k]]->name);
      }
      size_t used = strlen(path);
      snprintf(path + used, sizeof path - used, "%s", m->functions.items[callee]->name);
      return cc_fail(x, BB_COMPILE_BOOTSTRAP_COMPOSITION_CYCLE, "bootstrap composition cycle involving [%s]", path);
    }
    if (color[callee] == 0) {
      int rc = visit(x, (size_t)callee, color, stack, depth + 1);
      if (rc) return rc;
    }
  }
  color[fi] = 2;
  return 0;
}

int cc_check_bootstrap(cc_ctx *x) {
  const bb_model *m = x->m;
  const char *root = m->functions.items[0]->name ? m->functions.items[0]->name : "";
  char *name = cc_printf(x, "%s" BB_BOOTSTRAP_SUFFIX, root);
  if (!name) return cc_nomem(x);
  long b = find_fn(m, name);
  if (b < 0 || !is_bootstrap(m->functions.items[b])) return 0;
  uint8_t *color = bbi_arena_alloc(m->arena, m->functions.len + 1);
  size_t *stack = bbi_arena_alloc(m->arena, (m->functions.len + 1) * sizeof *stack);
  if (!color || !stack) return cc_nomem(x);
  return visit(x, (size_t)b, color, stack, 0);
}
