/* Bootstraps: bb_node_run_bootstraps chooses which of my targets' bootstraps run (all,
 * those of some Modules, those that reach some slots), and they run one after another in
 * target order while body work waits (docs/RUNTIME.md, "Bootstrap"). */
#include <stdio.h>
#include <string.h>

#include "runtime/bootstrap.h"
#include "runtime/engine.h"
#include "bb/common.h"

/* Starts the first chosen bootstrap not yet done (in target order): 1 when one started,
 * 0 when none is left (the gate opens), BB_ERR_NOMEM when it cannot start now (out of
 * memory or max_executions: the gate stays closed and the start is retried). */
static int start_bootstrap(bb_node *n) {
  for (size_t t = 0; t < n->n_targets; t++) {
    if (!n->targets[t].bootstrap_wanted) continue;
    rt_exec *e = rt_exec_new(n, (uint32_t)n->targets[t].bootstrap, NULL, (int)t);
    if (!e) return BB_ERR_NOMEM;
    e->bootstrap = true;
    n->bootstrap_running = (int)t;
    n->bootstrap_root = e;
    rt_seed(n, e);
    rt_exec_unref(n, e);
    return 1;
  }
  n->bootstrap_running = -1;
  return 0;
}

/* The Module a target's bootstrap belongs to: its name without BB_BOOTSTRAP_SUFFIX. */
static bool bootstrap_of_module(const bb_node *n, const rt_target *t, const char *module) {
  const char *fn = t->bootstrap >= 0 ? n->graphs[t->bootstrap].fn->name : NULL;
  size_t ml = strlen(module);
  return fn && strncmp(fn, module, ml) == 0 && strcmp(fn + ml, BB_BOOTSTRAP_SUFFIX) == 0;
}

/* True when graph gi, or a function it calls, runs an op on a component bound at one of
 * the slots. depth bounds the walk (calls nest at most as deep as the graphs go). */
static bool reaches_slot(const bb_node *n, uint32_t gi, const char *const *slots, size_t n_slots, uint32_t depth) {
  const rt_graph *g = &n->graphs[gi];
  for (uint32_t oi = 0; depth <= n->n_graphs && oi < g->n_ops; oi++) {
    const rt_op *op = &g->ops[oi];
    if (op->kind == RT_OP_CALL && reaches_slot(n, op->callee, slots, n_slots, depth + 1)) return true;
    for (size_t k = 0; op->kind == RT_OP_COMPONENT && k < n_slots; k++)
      if (strcmp(n->components.items[op->component].slot, slots[k]) == 0) return true;
  }
  return false;
}

static bool chooses(const bb_node *n, const rt_target *t, const bb_bootstrap_targets *w) {
  if (t->bootstrap < 0) return false;
  if (w->scope == BB_BOOTSTRAP_ALL) return true;
  if (w->scope == BB_BOOTSTRAP_SLOTS) return reaches_slot(n, (uint32_t)t->bootstrap, w->names, w->n_names, 0);
  for (size_t k = 0; k < w->n_names; k++)
    if (bootstrap_of_module(n, t, w->names[k])) return true;
  return false;
}

/* Every name must choose something: a Module one of my targets' bootstraps belongs to, a
 * slot a component is bound at. */
static int check_names(const bb_node *n, const bb_bootstrap_targets *w, bb_error *err) {
  for (size_t k = 0; k < w->n_names; k++) {
    const char *name = w->names[k];
    bool found = false;
    if (!name) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "run_bootstraps: name %zu is NULL", k);
    char have[256] = "";
    size_t at = 0;
    if (w->scope == BB_BOOTSTRAP_MODULES) {
      for (size_t t = 0; t < n->n_targets && !found; t++) found = bootstrap_of_module(n, &n->targets[t], name);
      for (size_t t = 0; !found && t < n->n_targets && at < sizeof have - 64; t++)
        if (n->targets[t].bootstrap >= 0)
          at += (size_t)snprintf(have + at, sizeof have - at, "%s%s", at ? ", " : "",
                                 n->graphs[n->targets[t].bootstrap].fn->name);
    } else {
      for (size_t c = 0; c < n->components.len && !found; c++) found = strcmp(n->components.items[c].slot, name) == 0;
      for (size_t c = 0; !found && c < n->components.len && at < sizeof have - 64; c++)
        at += (size_t)snprintf(have + at, sizeof have - at, "%s%s", at ? ", " : "", n->components.items[c].slot);
    }
    if (!found)
      return bb_error_set(err, BB_ERR_NOT_FOUND, "run_bootstraps: %s `%s` %s (there are: [%s])",
                          w->scope == BB_BOOTSTRAP_MODULES ? "Module" : "slot", name,
                          w->scope == BB_BOOTSTRAP_MODULES ? "has no bootstrap among my targets"
                                                           : "has no component on this node",
                          have);
  }
  return 0;
}

int bb_node_run_bootstraps(bb_node *n, const bb_bootstrap_targets *w, uint64_t now_ns, bb_error *err) {
  if (!n || !w || w->struct_size < sizeof *w || (w->n_names && !w->names))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "run_bootstraps: node and targets (with struct_size) required");
  if (w->scope != BB_BOOTSTRAP_ALL && w->scope != BB_BOOTSTRAP_MODULES && w->scope != BB_BOOTSTRAP_SLOTS)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "run_bootstraps: unknown scope %d", (int)w->scope);
  int rc = w->scope == BB_BOOTSTRAP_ALL ? 0 : check_names(n, w, err);
  if (rc) return rc;
  rt_advance(n, now_ns);
  for (size_t t = 0; t < n->n_targets; t++) {
    rt_target *tg = &n->targets[t];
    if (!tg->bootstrap_done && chooses(n, tg, w)) tg->bootstrap_wanted = true;
  }
  n->bootstrap_started = true;
  if (n->bootstrap_running < 0 && start_bootstrap(n) < 0)
    return bb_error_set(err, BB_ERR_NOMEM,
                        "run_bootstraps: cannot start a bootstrap (out of memory or max_executions); poll and call "
                        "again");
  return 0;
}

int bb_node_run_bootstrap(bb_node *n, uint64_t now_ns, bb_error *err) {
  bb_bootstrap_targets all = {sizeof all, BB_BOOTSTRAP_ALL, NULL, 0};
  return bb_node_run_bootstraps(n, &all, now_ns, err);
}

/* A finished bootstrap is reported (once) and the next one starts; one that cannot start
 * yet keeps the gate closed and is retried by the next poll. */
void rt_bootstrap_progress(bb_node *n) {
  while (n->bootstrap_running >= 0) {
    rt_exec_collect(n);
    if (n->bootstrap_root) return;
    rt_target *t = &n->targets[n->bootstrap_running];
    if (!t->bootstrap_done) {
      t->bootstrap_done = true;
      t->bootstrap_wanted = false;
      bb_step *s = rt_step(&n->acc, BB_STEP_BOOTSTRAP_COMPLETE);
      if (s) s->module = t->name;
    }
    int rc = start_bootstrap(n);
    if (rc < 0) n->failed_nomem = true;
    if (rc <= 0) return;
  }
}

bool rt_bootstrap_holds_back(const bb_node *n, const rt_event *ev) {
  return n->bootstrap_running >= 0 && (ev->kind == RT_EV_ENVELOPE || ev->kind == RT_EV_INVOKE);
}
