/* A part of a model: the nodes that compute some of its values (the cut's outputs) from
 * others (its inputs), with the initializers they read, as a standalone model whose inputs
 * and outputs are typed by the builder's inference. The part must not reach past its
 * inputs: a value it needs that only the model's own data inputs give means the cut does
 * not separate the graph. */
#include <string.h>

#include "grad/builder.h"
#include "util/mem.h"

static int oom(gb *b) { return gb_fail(b, BB_ERR_NOMEM, "out of memory cutting the model"); }

static const char *list_text(gb *b, const char *const *names, size_t n) {
  const char *text = "";
  for (size_t i = 0; i < n && text; i++) text = gb_printf(b, "%s%s%s", text, i ? ", " : "", names[i]);
  return text ? text : "";
}

static bool is_initializer(const gb *b, const char *name) {
  for (size_t k = 0; k < b->g->initializers.len; k++)
    if (strcmp(b->g->initializers.items[k]->name, name) == 0) return true;
  return false;
}

static bool in_list(const char *const *names, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(names[i], name) == 0) return true;
  return false;
}

/* The cut's ends: given names (each a value of the graph, listed once), or the graph's
 * data inputs / outputs. */
static int ends(gb *b, const char *const *given, size_t n_given, bool inputs, const char ***out, size_t *n) {
  const bb_vilist *own = inputs ? &b->g->inputs : &b->g->outputs;
  *n = given ? n_given : 0;
  *out = bbi_arena_alloc(b->scratch, (own->len + n_given + 1) * sizeof **out);
  if (!*out) return oom(b);
  if (given) {
    for (size_t i = 0; i < n_given; i++) {
      if (!given[i] || !gb_val(b, given[i]))
        return gb_fail(b, BB_ERR_NOT_FOUND, "the cut names %s, which is no value of the graph", given[i] ? given[i] : "(null)");
      if (in_list(given, i, given[i])) return gb_fail(b, BB_ERR_INVALID_ARGUMENT, "the cut names %s twice", given[i]);
      (*out)[i] = gb_val(b, given[i])->name;
    }
    return 0;
  }
  for (size_t i = 0; i < own->len; i++)
    if (!is_initializer(b, own->items[i]->name)) (*out)[(*n)++] = own->items[i]->name;
  return 0;
}

/* Marks the nodes the outputs need, walking back until the inputs; refuses a path that
 * reaches a data input of the model around them. */
static int walk_back(gb *b, const char *const *in, size_t n_in, const char *const *out, size_t n_out, bool *keep) {
  size_t cap = b->n_values + 1, len = 0;
  const char **stack = bbi_arena_alloc(b->scratch, cap * sizeof *stack);
  if (!stack) return oom(b);
  for (size_t i = 0; i < b->n_values; i++) b->values[i]->mark = false;
  for (size_t i = 0; i < n_out; i++) {
    gb_value *v = gb_val(b, out[i]);
    if (in_list(in, n_in, v->name))
      return gb_fail(b, BB_ERR_INVALID_ARGUMENT, "%s is both an input and an output of the cut", v->name);
    if (!v->mark) v->mark = true, stack[len++] = v->name;
  }
  while (len) {
    const char *name = stack[--len];
    if (in_list(in, n_in, name)) continue;
    long p = -1;
    for (size_t i = 0; i < b->g->nodes.len && p < 0; i++)
      if (bb_strlist_find(&b->g->nodes.items[i]->outputs, name) >= 0) p = (long)i;
    if (p < 0) {
      if (!is_initializer(b, name))
        return gb_fail(b, BB_ERR_INVALID_ARGUMENT,
                       "the cut at %s does not separate the graph: %s is reached from the model's input %s on a path that "
                       "does not pass through the cut",
                       list_text(b, in, n_in), list_text(b, out, n_out), name);
      continue;
    }
    keep[p] = true;
    const bb_ir_node *n = b->g->nodes.items[p];
    for (size_t k = 0; k < n->inputs.len; k++) {
      gb_value *v = gb_input_val(b, n, k);
      if (v && !v->mark) v->mark = true, stack[len++] = v->name;
    }
  }
  for (size_t i = 0; i < n_in; i++)
    if (!gb_val(b, in[i])->mark)
      return gb_fail(b, BB_ERR_INVALID_ARGUMENT, "the cut at %s does not separate the graph: %s do not depend on %s",
                     list_text(b, in, n_in), list_text(b, out, n_out), in[i]);
  return 0;
}

/* Rewrites the copy's graph into the part: the kept nodes, the inputs and outputs typed
 * from inference, the initializers the kept nodes read. */
static int rewrite(gb *b, const bool *keep, const char *const *in, size_t n_in, const char *const *out, size_t n_out) {
  bb_graph *g = b->g;
  bb_nodelist nodes = {0};
  for (size_t i = 0; i < g->nodes.len; i++)
    if (keep[i] && bb_nodelist_append(b->m, &nodes, g->nodes.items[i])) return oom(b);
  bb_vilist inputs = {0}, outputs = {0};
  for (size_t i = 0; i < n_in + n_out; i++) {
    const char *name = i < n_in ? in[i] : out[i - n_in];
    bb_type *t = gb_val_type(b, gb_val(b, name));
    if (!t || !bb_vilist_add(b->m, i < n_in ? &inputs : &outputs, name, t)) return oom(b);
  }
  size_t kept = 0;
  for (size_t i = 0; i < g->initializers.len; i++)
    if (gb_val(b, g->initializers.items[i]->name)->mark) g->initializers.items[kept++] = g->initializers.items[i];
  g->initializers.len = kept;
  kept = 0;
  for (size_t i = 0; i < g->value_infos.len; i++) {
    gb_value *v = gb_val(b, g->value_infos.items[i]->name);
    if (v && v->mark && !in_list(in, n_in, v->name) && !in_list(out, n_out, v->name)) g->value_infos.items[kept++] = g->value_infos.items[i];
  }
  g->value_infos.len = kept;
  g->nodes = nodes;
  g->inputs = inputs;
  g->outputs = outputs;
  return 0;
}

int bb_grad_cut(const bb_model *model, const bb_grad_cut_options *options, const bb_allocator *alloc, bb_model **out,
                bb_error *err) {
  *out = NULL;
  if (!alloc) alloc = bb_default_allocator();
  bb_grad_cut_options opt;
  memset(&opt, 0, sizeof opt);
  if (options) {
    if (options->struct_size < sizeof options->struct_size || options->struct_size > sizeof opt)
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "cut options: struct_size %zu (this library knows %zu)",
                          options->struct_size, sizeof opt);
    memcpy(&opt, options, options->struct_size);
  }
  if (!model) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "no model");
  gb b;
  int rc = gb_open(&b, model, alloc, err);
  if (rc) return rc;
  if (b.opset < 13) {
    gb_close(&b);
    bb_model_free(b.m);
    return bb_error_set(err, BB_ERR_UNSUPPORTED, "cutting a model needs ai.onnx opset 13 or newer; the model imports %lld",
                        (long long)b.opset);
  }
  const char **in = NULL, **outs = NULL;
  size_t n_in = 0, n_out = 0;
  bool *keep = NULL;
  if (!gb_add_sources(&b))
    for (size_t i = 0; i < b.g->nodes.len && !b.rc; i++)
      if (!gb_check_node(&b, b.g->nodes.items[i])) gb_infer_node(&b, b.g->nodes.items[i]);
  if (!b.rc && !ends(&b, opt.inputs, opt.n_inputs, true, &in, &n_in) && !ends(&b, opt.outputs, opt.n_outputs, false, &outs, &n_out)) {
    for (size_t i = 0; i < n_in && !b.rc; i++)
      if (is_initializer(&b, in[i]))
        gb_fail(&b, BB_ERR_INVALID_ARGUMENT, "the cut names %s, an initializer; a cut is made at computed values", in[i]);
    if (!b.rc && !(keep = bbi_arena_alloc(b.scratch, b.g->nodes.len + 1))) oom(&b);
    if (!b.rc) memset(keep, 0, b.g->nodes.len + 1);
    if (!b.rc && !n_out) gb_fail(&b, BB_ERR_INVALID_ARGUMENT, "the cut has no outputs");
    if (!b.rc && !walk_back(&b, in, n_in, outs, n_out, keep)) rewrite(&b, keep, in, n_in, outs, n_out);
  }
  gb_close(&b);
  if (b.rc) {
    bb_model_free(b.m);
    return b.rc;
  }
  *out = b.m;
  return 0;
}
