/* What backward rules hand back: whether an input needs a gradient, a contribution to
 * one, and forward outputs a rule wants to read (a MaxPool's indices, a LayerNormalization's
 * statistics) named when the model left them out. */
#include <string.h>

#include "grad/builder.h"

bool gb_needs(gb *b, const bb_ir_node *n, size_t i) {
  if (!gb_has_input(n, i)) return false;
  const gb_rule *r = gb_rule_find(n->domain, n->op_type);
  if (!r || (i < 32 && !(r->diff_inputs & (1u << i)))) return false;
  gb_value *v = gb_val(b, n->inputs.items[i]);
  return v && v->requires_grad;
}

void gb_grad(gb *b, const bb_ir_node *n, size_t i, const char *g) {
  if (!g || b->rc || !gb_needs(b, n, i)) return;
  gb_value *v = gb_val(b, n->inputs.items[i]);
  if (v->n_contrib == v->cap_contrib) {
    size_t cap = v->cap_contrib ? 2 * v->cap_contrib : 4;
    const char **grown = bbi_arena_alloc(b->scratch, cap * sizeof *grown);
    if (!grown) {
      gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
      return;
    }
    if (v->n_contrib) memcpy(grown, v->contrib, v->n_contrib * sizeof *grown);
    v->contrib = grown;
    v->cap_contrib = cap;
  }
  v->contrib[v->n_contrib++] = g;
}

const char *gb_ensure_output(gb *b, bb_ir_node *n, size_t k, const char *suffix) {
  if (b->rc) return NULL;
  if (k < n->outputs.len && *n->outputs.items[k]) return n->outputs.items[k];
  const char *name = gb_fresh_name(b, gb_printf(b, "%s%s", n->outputs.items[0], suffix));
  if (!name) return NULL;
  while (n->outputs.len <= k)
    if (bb_strlist_append(b->m, &n->outputs, "")) {
      gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
      return NULL;
    }
  n->outputs.items[k] = (char *)name;
  if (!gb_val_add(b, name) || gb_infer_node(b, n)) return NULL;
  return name;
}
