/* Renaming a value everywhere it is defined or used in one scope (a graph or a function),
 * including references from nested subgraphs that do not define the name themselves. */
#include <string.h>

#include "bb/ir.h"
#include "util/arena.h"

typedef struct rename {
  bb_arena *a;
  const char *from;
  char *to; /* in the arena */
  long changed;
} rename_t;

static bool is(const char *s, const char *name) { return s && strcmp(s, name) == 0; }

static void in_strlist(rename_t *r, bb_strlist *l) {
  for (size_t i = 0; i < l->len; i++)
    if (is(l->items[i], r->from)) l->items[i] = r->to, r->changed++;
}

static void in_vilist(rename_t *r, bb_vilist *l) {
  for (size_t i = 0; i < l->len; i++)
    if (is(l->items[i]->name, r->from)) l->items[i]->name = r->to, r->changed++;
}

/* A subgraph that declares the name as an input, initializer or node output has its own
 * value of that name, which hides the outer one. */
static bool defines(const bb_graph *g, const char *name) {
  if (bb_vilist_find(&g->inputs, name)) return true;
  for (size_t i = 0; i < g->initializers.len; i++)
    if (is(g->initializers.items[i]->name, name)) return true;
  return bb_nodelist_producer(&g->nodes, name) != NULL;
}

static void in_graph(rename_t *r, bb_graph *g);

static void in_nodes(rename_t *r, bb_nodelist *nodes) {
  for (size_t i = 0; i < nodes->len; i++) {
    bb_ir_node *n = nodes->items[i];
    in_strlist(r, &n->inputs);
    in_strlist(r, &n->outputs);
    for (size_t k = 0; k < n->attrs.len; k++) {
      bb_attr *at = n->attrs.items[k];
      if (at->g && !defines(at->g, r->from)) in_graph(r, at->g);
      for (size_t j = 0; j < at->n_graphs; j++)
        if (!defines(at->graphs[j], r->from)) in_graph(r, at->graphs[j]);
    }
  }
}

static void in_graph(rename_t *r, bb_graph *g) {
  in_nodes(r, &g->nodes);
  in_vilist(r, &g->inputs);
  in_vilist(r, &g->outputs);
  in_vilist(r, &g->value_infos);
  for (size_t i = 0; i < g->initializers.len; i++)
    if (is(g->initializers.items[i]->name, r->from)) g->initializers.items[i]->name = r->to, r->changed++;
}

static int start(bb_model *m, rename_t *r, const char *from, const char *to) {
  if (!from || !to || !*from) return BB_ERR_INVALID_ARGUMENT;
  r->a = m->arena;
  r->from = from;
  r->to = bbi_arena_strdup(m->arena, to);
  r->changed = 0;
  return r->to ? 0 : BB_ERR_NOMEM;
}

long bb_graph_rename_value(bb_model *m, bb_graph *g, const char *from, const char *to) {
  rename_t r;
  int rc = start(m, &r, from, to);
  if (rc) return rc;
  in_graph(&r, g);
  return r.changed;
}

long bb_function_rename_value(bb_model *m, bb_function *f, const char *from, const char *to) {
  rename_t r;
  int rc = start(m, &r, from, to);
  if (rc) return rc;
  in_strlist(&r, &f->inputs);
  in_strlist(&r, &f->outputs);
  in_nodes(&r, &f->nodes);
  in_vilist(&r, &f->value_infos);
  return r.changed;
}
