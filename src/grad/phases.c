/* The forward and backward phases of a training graph with upstream gradients: a node is
 * late when it reads an upstream gradient or a value a late node makes; everything else
 * runs in the forward phase, which also hands the backward phase the values it reads. */
#include "grad/phases.h"

#include <string.h>

#include "grad/builder.h"
#include "util/mem.h"
#include "util/strmap.h"

enum { EARLY = 1, LATE = 2 };

typedef struct phases {
  bb_model *fwd, *bwd;
  bbi_strmap made; /* value → EARLY or LATE, by the phase of the node making it */
  bool *late;      /* per node of the training graph */
  bb_error *err;
} phases;

static int oom(phases *p) { return bb_error_set(p->err, BB_ERR_NOMEM, "out of memory splitting the training graph"); }

static uint32_t made_by(const phases *p, const char *name) {
  uint32_t v = 0;
  return *name && bbi_strmap_get(&p->made, name, &v) ? v : 0;
}

/* Which nodes are late, and which phase makes each value. */
static int classify(phases *p, const bb_grad_graph *g) {
  const bb_graph *t = p->fwd->graph;
  for (size_t i = 0; i < g->n_upstream; i++)
    if (bbi_strmap_put(&p->made, g->upstream[i], LATE)) return oom(p);
  for (size_t i = 0; i < t->nodes.len; i++) {
    const bb_ir_node *n = t->nodes.items[i];
    for (size_t k = 0; k < n->inputs.len && !p->late[i]; k++) p->late[i] = made_by(p, n->inputs.items[k]) == LATE;
    for (size_t k = 0; k < n->outputs.len; k++)
      if (*n->outputs.items[k] && bbi_strmap_put(&p->made, n->outputs.items[k], p->late[i] ? LATE : EARLY)) return oom(p);
  }
  return 0;
}

/* The values early nodes make that late nodes read, each once. */
static int find_saved(phases *p, const char ***saved, size_t *n_saved) {
  const bb_graph *t = p->fwd->graph;
  bbi_strmap seen;
  bbi_strmap_init(&seen, bbi_arena_allocator(p->fwd->arena));
  size_t cap = 16;
  *saved = bbi_arena_alloc(p->fwd->arena, cap * sizeof **saved);
  *n_saved = 0;
  int rc = *saved ? 0 : oom(p);
  for (size_t i = 0; i < t->nodes.len && !rc; i++) {
    const bb_ir_node *n = t->nodes.items[i];
    for (size_t k = 0; p->late[i] && k < n->inputs.len && !rc; k++) {
      const char *v = n->inputs.items[k];
      uint32_t dummy;
      if (made_by(p, v) != EARLY || bbi_strmap_get(&seen, v, &dummy)) continue;
      if (*n_saved == cap) {
        const char **grown = bbi_arena_alloc(p->fwd->arena, 2 * cap * sizeof *grown);
        if (!grown) {
          rc = oom(p);
          break;
        }
        memcpy(grown, *saved, cap * sizeof *grown);
        *saved = grown, cap *= 2;
      }
      (*saved)[(*n_saved)++] = v;
      if (bbi_strmap_put(&seen, v, 1)) rc = oom(p);
    }
  }
  bbi_strmap_free(&seen);
  return rc;
}

/* Keeps the nodes of one phase and the outputs it makes (graph outputs no phase makes,
 * an input passed through, stay with the forward phase). */
static int keep_phase(phases *p, bb_model *m, bool late) {
  bb_graph *t = m->graph;
  size_t kept = 0;
  for (size_t i = 0; i < t->nodes.len; i++)
    if (p->late[i] == late) t->nodes.items[kept++] = t->nodes.items[i];
  t->nodes.len = kept;
  kept = 0;
  for (size_t i = 0; i < t->outputs.len; i++) {
    uint32_t by = made_by(p, t->outputs.items[i]->name);
    if (late ? by == LATE : by != LATE) t->outputs.items[kept++] = t->outputs.items[i];
  }
  t->outputs.len = kept;
  return 0;
}

/* The forward phase also outputs the saved values, the backward phase takes them in. */
static int hand_over(phases *p, const bb_grad_graph *g, const char *const *saved, size_t n_saved) {
  bb_graph *f = p->fwd->graph, *b = p->bwd->graph;
  for (size_t i = 0; i < g->n_upstream; i++)
    for (size_t k = 0; k < f->inputs.len; k++)
      if (strcmp(f->inputs.items[k]->name, g->upstream[i]) == 0) bb_vilist_remove(&f->inputs, k--);
  for (size_t i = 0; i < n_saved; i++) {
    /* saved values are typed at run time: the phases are the trainer's own graphs */
    bb_type *tf = bb_type_new_tensor(p->fwd, BB_DTYPE_UNDEFINED, -1, NULL);
    bb_type *tb = bb_type_new_tensor(p->bwd, BB_DTYPE_UNDEFINED, -1, NULL);
    if (!tf || !tb || !bb_vilist_add(p->bwd, &b->inputs, saved[i], tb)) return oom(p);
    if (!bb_vilist_find(&f->outputs, saved[i]) && !bb_vilist_add(p->fwd, &f->outputs, saved[i], tf)) return oom(p);
  }
  return 0;
}

int bbi_grad_phases(const bb_grad_graph *g, const bb_allocator *alloc, bb_model **forward, bb_model **backward,
                    const char ***saved, size_t *n_saved, bb_error *err) {
  phases p = {.err = err};
  *forward = *backward = NULL;
  int rc = gb_copy_model(g->model, alloc, &p.fwd, err);
  if (!rc) rc = gb_copy_model(g->model, alloc, &p.bwd, err);
  if (!rc) {
    bbi_strmap_init(&p.made, alloc);
    p.late = bbi_mem_calloc(alloc, p.fwd->graph->nodes.len + 1, sizeof *p.late);
    rc = p.late ? classify(&p, g) : oom(&p);
    if (!rc) rc = find_saved(&p, saved, n_saved);
    if (!rc) rc = keep_phase(&p, p.fwd, false);
    if (!rc) rc = keep_phase(&p, p.bwd, true);
    if (!rc) rc = hand_over(&p, g, *saved, *n_saved);
    bbi_mem_free(alloc, p.late);
    bbi_strmap_free(&p.made);
  }
  if (rc) {
    bb_model_free(p.fwd);
    bb_model_free(p.bwd);
    return rc;
  }
  *forward = p.fwd;
  *backward = p.bwd;
  return 0;
}
