/* The host-facing node API: poll and its phases, app inputs, completions, bootstrap,
 * expiry, introspection and teardown. */
#include <stdio.h>
#include <string.h>

#include "runtime/book.h"
#include "runtime/ctx.h"
#include "runtime/deliver.h"
#include "runtime/engine.h"
#include "runtime/ingress.h"
#include "runtime/pending.h"
#include "runtime/steps.h"
#include "runtime/syscalls/table.h"
#include "runtime/timers.h"
#include "bb/common.h"
#include "util/mem.h"
#include "util/ring.h"
#include "util/strmap.h"

#define COMPLETION_DETAIL_MAX 4096

static void advance(bb_node *n, uint64_t now) {
  if (now > n->now) n->now = now;
}

static int find_target(const bb_node *n, const char *module) {
  if (!module) return -1;
  size_t ml = strlen(module);
  for (size_t t = 0; t < n->n_targets; t++) {
    const char *name = n->targets[t].name;
    if (strcmp(name, module) == 0 || (strncmp(name, module, ml) == 0 && name[ml] == '#')) return (int)t;
  }
  return -1;
}

/* ---- app inputs ------------------------------------------------------------------------- */

int bb_node_invoke(bb_node *n, const char *module, const bb_named_value *inputs, size_t n_inputs, uint64_t now_ns,
                   bb_error *err) {
  advance(n, now_ns);
  int t = find_target(n, module);
  if (t < 0) return bb_error_set(err, BB_ERR_NOT_FOUND, "invoke: `%s` is not a target of this node", module ? module : "");
  if (n_inputs > n->cfg.max_invoke_inputs)
    return bb_error_set(err, BB_ERR_LIMIT, "invoke: %zu inputs, at most %zu", n_inputs, n->cfg.max_invoke_inputs);
  const rt_graph *g = &n->graphs[n->targets[t].graph];
  size_t bytes = 0;
  for (size_t i = 0; i < n_inputs; i++) {
    if (!inputs[i].name || !inputs[i].value) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "invoke: input %zu", i);
    if (bb_strlist_find(&g->fn->inputs, inputs[i].name) < 0)
      return bb_error_set(err, BB_ERR_NOT_FOUND, "invoke: `%s` has no input `%s`", n->targets[t].name, inputs[i].name);
    size_t size = bb_val_encoded_size(inputs[i].value);
    if (size > n->cfg.max_app_event_bytes)
      return bb_error_set(err, BB_ERR_LIMIT, "invoke: input `%s` is %zu bytes, at most %zu", inputs[i].name, size,
                          n->cfg.max_app_event_bytes);
    bytes += size;
  }
  if (n->ingress_bytes + bytes > n->cfg.ingress_byte_budget)
    return bb_error_set(err, BB_ERR_LIMIT, "invoke: the ingress byte budget (%zu) is exhausted",
                        n->cfg.ingress_byte_budget);
  if (n->ingress.len >= n->cfg.max_ingress_events)
    return bb_error_set(err, BB_ERR_LIMIT, "invoke: the ingress queue is full; poll first");
  rt_event ev = {.kind = RT_EV_INVOKE, .at = n->now, .target = t};
  ev.names = bbi_mem_calloc(n->alloc, n_inputs + 1, sizeof *ev.names);
  ev.vals = bbi_mem_calloc(n->alloc, n_inputs + 1, sizeof *ev.vals);
  if (!ev.names || !ev.vals) {
    bbi_mem_free(n->alloc, ev.names);
    bbi_mem_free(n->alloc, ev.vals);
    return bb_error_set(err, BB_ERR_NOMEM, "invoke: out of memory");
  }
  for (size_t i = 0; i < n_inputs; i++) {
    ev.names[i] = bbi_mem_strdup(n->alloc, inputs[i].name);
    ev.vals[i] = bb_val_retain(inputs[i].value);
    ev.n_vals++;
    if (!ev.names[i]) {
      rt_event_release(n, &ev);
      return bb_error_set(err, BB_ERR_NOMEM, "invoke: out of memory");
    }
  }
  ev.charged = bytes;
  n->ingress_bytes += bytes;
  int rc = rt_ingress_push(n, &ev, n->cfg.max_ingress_events);
  if (rc) {
    rt_event_release(n, &ev);
    return bb_error_set(err, rc, "invoke: out of memory");
  }
  return 0;
}

int bb_node_bind_input(bb_node *n, const char *module, const char *input, bb_val *value, bb_error *err) {
  int t = find_target(n, module);
  if (t < 0) return bb_error_set(err, BB_ERR_NOT_FOUND, "bind_input: `%s` is not a target of this node",
                                 module ? module : "");
  rt_target *tg = &n->targets[t];
  const rt_graph *g = &n->graphs[tg->graph];
  long k = input ? bb_strlist_find(&g->fn->inputs, input) : -1;
  if (k < 0) return bb_error_set(err, BB_ERR_NOT_FOUND, "bind_input: `%s` has no input `%s`", tg->name,
                                 input ? input : "");
  if (!tg->bound && !(tg->bound = bbi_mem_calloc(n->alloc, g->n_in, sizeof *tg->bound)))
    return bb_error_set(err, BB_ERR_NOMEM, "bind_input: out of memory");
  bb_val_release(tg->bound[k]);
  tg->bound[k] = bb_val_retain(value);
  return 0;
}

int bb_node_deliver_event(bb_node *n, const char *module, const char *input, const uint8_t *bytes, size_t len,
                          uint64_t now_ns, bb_error *err) {
  bb_val *v = bb_val_bytes(n->alloc, bytes, len);
  if (!v) return bb_error_set(err, BB_ERR_NOMEM, "deliver_event: out of memory");
  bb_named_value in = {input, v};
  int rc = bb_node_invoke(n, module, &in, 1, now_ns, err);
  bb_val_release(v);
  return rc;
}

/* Completions get headroom past the event cap: refusing them would strand parked ops. */
static int queue_simple(bb_node *n, rt_event *ev, bb_error *err) {
  int rc = rt_ingress_push(n, ev, n->cfg.max_ingress_events + 64);
  if (rc == BB_ERR_LIMIT) return bb_error_set(err, rc, "the ingress queue is full; poll first");
  if (rc) return bb_error_set(err, rc, "out of memory");
  return 0;
}

int bb_node_complete(bb_node *n, uint64_t command, bb_val *const *outputs, size_t n_outputs, bb_error *err) {
  rt_event ev = {.kind = RT_EV_COMPLETE, .at = n->now, .command = command};
  ev.vals = bbi_mem_calloc(n->alloc, n_outputs + 1, sizeof *ev.vals);
  if (!ev.vals) return bb_error_set(err, BB_ERR_NOMEM, "complete: out of memory");
  for (size_t i = 0; i < n_outputs; i++) ev.vals[i] = bb_val_retain(outputs[i]);
  ev.n_vals = n_outputs;
  int rc = queue_simple(n, &ev, err);
  if (rc) rt_event_release(n, &ev);
  return rc;
}

int bb_node_fail(bb_node *n, uint64_t command, const char *detail, bb_error *err) {
  rt_event ev = {.kind = RT_EV_FAIL, .at = n->now, .command = command};
  size_t len = detail ? strlen(detail) : 0;
  if (len > COMPLETION_DETAIL_MAX) { /* cut at a UTF-8 boundary */
    len = COMPLETION_DETAIL_MAX;
    while (len && ((unsigned char)detail[len] & 0xC0) == 0x80) len--;
  }
  ev.detail = bbi_mem_alloc(n->alloc, len + 1);
  if (!ev.detail) return bb_error_set(err, BB_ERR_NOMEM, "fail: out of memory");
  if (len) memcpy(ev.detail, detail, len);
  ev.detail[len] = 0;
  int rc = queue_simple(n, &ev, err);
  if (rc) rt_event_release(n, &ev);
  return rc;
}

/* ---- bootstrap --------------------------------------------------------------------------- */

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
      if (strcmp(n->components[op->component].slot, slots[k]) == 0) return true;
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
      for (size_t c = 0; c < n->n_components && !found; c++) found = strcmp(n->components[c].slot, name) == 0;
      for (size_t c = 0; !found && c < n->n_components && at < sizeof have - 64; c++)
        at += (size_t)snprintf(have + at, sizeof have - at, "%s%s", at ? ", " : "", n->components[c].slot);
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
  advance(n, now_ns);
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
static void bootstrap_progress(bb_node *n) {
  while (n->bootstrap_running >= 0) {
    rt_exec_collect(n);
    if (n->bootstrap_root) return;
    rt_target *t = &n->targets[n->bootstrap_running];
    if (!t->bootstrap_done) {
      t->bootstrap_done = true;
      t->bootstrap_wanted = false;
      bb_step *s = rt_step(n, BB_STEP_BOOTSTRAP_COMPLETE);
      if (s) s->module = t->name;
    }
    int rc = start_bootstrap(n);
    if (rc < 0) n->failed_nomem = true;
    if (rc <= 0) return;
  }
}

/* ---- poll -------------------------------------------------------------------------------- */

static bool held_back(const bb_node *n, const rt_event *ev) {
  return n->bootstrap_running >= 0 && (ev->kind == RT_EV_ENVELOPE || ev->kind == RT_EV_INVOKE);
}

static void process_event(bb_node *n, rt_event *ev) {
  switch (ev->kind) {
  case RT_EV_ENVELOPE: rt_route(n, ev); return;
  case RT_EV_INVOKE: {
    const rt_target *t = &n->targets[ev->target];
    rt_exec *e = rt_exec_new(n, t->graph, NULL, ev->target);
    if (!e) {
      rt_report(n, BB_STEP_INGRESS_DROPPED, NULL, "execution_limit",
                "invoke of `%s` dropped: too many executions alive or out of memory", t->name);
      break;
    }
    const rt_graph *g = &n->graphs[t->graph];
    for (size_t i = 0; i < ev->n_vals; i++) {
      long k = bb_strlist_find(&g->fn->inputs, ev->names[i]);
      size_t charged = bb_val_encoded_size(ev->vals[i]);
      if (charged > ev->charged) charged = ev->charged;
      ev->charged -= charged;
      rt_write(n, e, g->formal_in[k], ev->vals[i], charged);
      ev->vals[i] = NULL;
    }
    rt_seed(n, e);
    rt_exec_unref(n, e);
    break;
  }
  case RT_EV_COMPLETE:
    rt_complete(n, ev->command, ev->vals, ev->n_vals);
    ev->n_vals = 0;
    break;
  case RT_EV_FAIL: rt_fail_command(n, ev->command, ev->detail); break;
  }
  rt_event_release(n, ev);
}

/* Handles queued events in order; events that must wait for the bootstrap keep their
 * place. */
static void process_ingress(bb_node *n) {
  size_t count = n->ingress.len, kept = 0;
  for (size_t k = 0; k < count; k++) {
    rt_event ev = *(rt_event *)bbi_ring_at(&n->ingress, k);
    if (held_back(n, &ev)) {
      *(rt_event *)bbi_ring_at(&n->ingress, kept++) = ev;
      continue;
    }
    process_event(n, &ev);
  }
  /* events queued while processing (none today) would sit after `count` */
  for (size_t k = count; k < n->ingress.len; k++)
    *(rt_event *)bbi_ring_at(&n->ingress, kept++) = *(rt_event *)bbi_ring_at(&n->ingress, k);
  bbi_ring_truncate(&n->ingress, kept);
}

static void fire_timers(bb_node *n) {
  rt_timer t;
  while (rt_timer_pop_due(n, &t)) {
    switch (t.kind) {
    case RT_TIMER_COMPLETE: {
      bb_val *trigger = bb_val_trigger(n->alloc);
      if (trigger) rt_complete(n, t.id, &trigger, 1);
      else n->failed_nomem = true;
      break;
    }
    case RT_TIMER_INTERVAL:
      t.exec->born_ns = n->now; /* each tick is a new run: deadlines count from it */
      rt_rearm(n, t.exec, t.op);
      rt_push(n, t.exec, t.op);
      rt_exec_unref(n, t.exec);
      break;
    case RT_TIMER_COMPONENT: rt_component_timer(n, t.component, t.id); break;
    }
  }
}

static void emit_outbound(bb_node *n) {
  rt_outbound o;
  while (bbi_ring_pop(&n->outbound, &o)) {
    bb_step *s = rt_step(n, BB_STEP_SEND);
    if (!s) {
      bbi_mem_free(n->alloc, o.bytes);
      continue;
    }
    if (rt_step_own(n, o.bytes)) { /* (which freed the bytes) */
      rt_step_cancel(n);
      continue;
    }
    s->has_peer = true;
    s->peer = o.peer;
    s->bytes = o.bytes;
    s->len = o.len;
  }
  if (n->outbound_dropped) {
    bb_step *s = rt_step(n, BB_STEP_OUTBOUND_DROPPED);
    if (s) s->count = n->outbound_dropped;
    n->outbound_dropped = 0;
  }
}

int bb_node_poll(bb_node *n, uint64_t now_ns, const bb_step **steps, size_t *n_steps, bb_error *err) {
  if (!n || !steps || !n_steps) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "poll: node and outputs required");
  advance(n, now_ns);
  rt_steps_release(n, &n->batch);
  size_t budget = n->cfg.cycle_op_budget;
  for (int round = 0; round < 4; round++) {
    process_ingress(n);
    rt_drain(n, &budget);
    fire_timers(n);
    rt_drain(n, &budget);
    int was = n->bootstrap_running;
    bootstrap_progress(n);
    /* a bootstrap that just finished releases held events: take them in this poll */
    if (!(was >= 0 && n->bootstrap_running < 0) || !budget) break;
  }
  rt_exec_collect(n);
  emit_outbound(n);
  if (!budget && n->frontier.len) {
    bb_step *s = rt_step(n, BB_STEP_CYCLE_BUDGET_EXCEEDED);
    if (s) s->count = n->cfg.cycle_op_budget;
  }
  if (n->bootstrap_running >= 0) {
    bb_step *s = rt_step(n, BB_STEP_WAITING_ON_BOOTSTRAP);
    if (s) s->module = n->targets[n->bootstrap_running].name;
  }
  /* hand out what accumulated */
  rt_steps done = n->batch;
  n->batch = n->acc;
  n->acc = done;
  n->acc.len = n->acc.n_owned = n->acc.n_held = 0;
  *steps = n->batch.items;
  *n_steps = n->batch.len;
  if (n->failed_nomem) {
    n->failed_nomem = false;
    return bb_error_set(err, BB_ERR_NOMEM, "poll: an allocation failed; some work or reports were lost");
  }
  return 0;
}

bool bb_node_has_work(const bb_node *n) {
  /* a bootstrap that already finished (nothing of it was ready, or its last op ran) is
   * reported, and the body work held for it released, only by a poll */
  if (n->bootstrap_running >= 0 && (!n->bootstrap_root || !n->bootstrap_root->refs)) return true;
  if (n->frontier.len) {
    if (n->bootstrap_running < 0) return true;
    for (size_t k = 0; k < n->frontier.len; k++)
      if (((const rt_task *)bbi_ring_at(&n->frontier, k))->exec->bootstrap) return true;
  }
  for (size_t k = 0; k < n->ingress.len; k++)
    if (!held_back(n, bbi_ring_at(&n->ingress, k))) return true;
  return n->outbound.len || n->acc.len;
}

uint64_t bb_node_expiry(const bb_node *n) {
  if (bb_node_has_work(n)) return n->now;
  return n->n_timers ? n->timers[0].at : UINT64_MAX;
}

/* ---- introspection ------------------------------------------------------------------------- */

const bb_peer_id *bb_node_self(const bb_node *n) { return &n->self; }
size_t bb_node_target_count(const bb_node *n) { return n->n_targets; }
const char *bb_node_target(const bb_node *n, size_t i) { return i < n->n_targets ? n->targets[i].name : NULL; }

void *bb_node_component(const bb_node *n, const char *slot, const bb_component_type **type) {
  for (size_t i = 0; i < n->n_components; i++)
    if (strcmp(n->components[i].slot, slot) == 0) {
      if (type) *type = n->components[i].type;
      return n->components[i].self;
    }
  if (type) *type = NULL;
  return NULL;
}

uint64_t bb_node_site(const bb_node *n, const char *module, const char *value) {
  int t = find_target(n, module);
  if (t < 0) return UINT64_MAX;
  const rt_graph *g = &n->graphs[n->targets[t].graph];
  uint32_t s;
  return bbi_strmap_get(&g->names, value, &s) ? g->site_base + s : UINT64_MAX;
}

void bb_node_stats_get(const bb_node *n, bb_node_stats *out) {
  out->executions = n->n_execs;
  out->frontier = n->frontier.len;
  out->pending_async = n->n_pending;
  out->timers = n->n_timers;
  out->ingress = n->ingress.len;
  out->outbound = n->outbound.len;
  out->ingress_bytes = n->ingress_bytes;
}

/* ---- teardown ------------------------------------------------------------------------------ */

void bb_node_free(bb_node *n) {
  if (!n) return;
  /* drop every reference executions hold, then the executions */
  for (size_t k = 0; k < n->ingress.len; k++) rt_event_release(n, bbi_ring_at(&n->ingress, k));
  for (size_t k = 0; k < n->frontier.len; k++) rt_exec_unref(n, ((rt_task *)bbi_ring_at(&n->frontier, k))->exec);
  for (size_t i = 0; i < n->cap_pending; i++) /* a removal may shift another entry into slot i */
    while (n->pending[i].used) rt_pending_remove(n, &n->pending[i]);
  for (size_t i = 0; i < n->n_timers; i++)
    if (n->timers[i].exec) rt_exec_unref(n, n->timers[i].exec);
  rt_exec_collect(n);
  rt_syscalls_free(n);
  for (size_t k = 0; k < n->outbound.len; k++)
    bbi_mem_free(n->alloc, ((rt_outbound *)bbi_ring_at(&n->outbound, k))->bytes);
  rt_steps_release(n, &n->acc);
  rt_steps_release(n, &n->batch);
  for (rt_steps *s = &n->acc; s; s = s == &n->acc ? &n->batch : NULL) {
    bbi_mem_free(n->alloc, s->items);
    bbi_mem_free(n->alloc, s->owned);
    bbi_mem_free(n->alloc, s->held);
  }
  for (size_t i = 0; i < n->n_components; i++) {
    if (n->components[i].self && n->components[i].type->destroy)
      n->components[i].type->destroy(n->components[i].self);
    bbi_mem_free(n->alloc, n->components[i].slot);
    bbi_mem_free(n->alloc, n->components[i].config);
  }
  bbi_mem_free(n->alloc, n->components);
  /* targets before graphs: their bound inputs are counted by their graph */
  for (size_t t = 0; t < n->n_targets; t++) {
    bbi_mem_free(n->alloc, n->targets[t].name);
    if (n->targets[t].bound) {
      const rt_graph *g = &n->graphs[n->targets[t].graph];
      for (uint32_t i = 0; i < g->n_in; i++) bb_val_release(n->targets[t].bound[i]);
      bbi_mem_free(n->alloc, n->targets[t].bound);
    }
  }
  bbi_mem_free(n->alloc, n->targets);
  for (uint32_t gi = 0; gi < n->n_graphs; gi++) {
    rt_graph *g = &n->graphs[gi];
    for (uint32_t oi = 0; oi < g->n_ops; oi++) {
      bbi_mem_free(n->alloc, g->ops[oi].in);
      bbi_mem_free(n->alloc, g->ops[oi].out);
      bbi_mem_free(n->alloc, g->ops[oi].label);
      bbi_mem_free(n->alloc, g->ops[oi].fills);
    }
    bbi_mem_free(n->alloc, g->ops);
    bbi_mem_free(n->alloc, g->site_names);
    bbi_strmap_free(&g->names);
    bbi_mem_free(n->alloc, g->cons_start);
    bbi_mem_free(n->alloc, g->cons);
    bbi_mem_free(n->alloc, g->formal_in);
    bbi_mem_free(n->alloc, g->formal_out);
    bbi_mem_free(n->alloc, g->out_index);
    bbi_mem_free(n->alloc, g->recv_sender);
  }
  bbi_mem_free(n->alloc, n->graphs);
  for (size_t i = 0; i < n->n_counters; i++) bbi_mem_free(n->alloc, n->counters[i].name);
  bbi_mem_free(n->alloc, n->counters);
  rt_book_free(n);
  rt_admission_free(n);
  bbi_mem_free(n->alloc, n->self_addrs);
  bbi_ring_free(&n->frontier, n->alloc);
  bbi_mem_free(n->alloc, n->pending);
  bbi_mem_free(n->alloc, n->timers);
  bbi_ring_free(&n->ingress, n->alloc);
  bbi_ring_free(&n->outbound, n->alloc);
  bbi_ring_free(&n->dedup, n->alloc);
  for (size_t i = 0; i < n->n_wires; i++) {
    bbi_mem_free(n->alloc, n->wires[i].name);
    bbi_mem_free(n->alloc, n->wires[i].type);
  }
  bbi_mem_free(n->alloc, n->wires);
  for (size_t k = 0; k < n->n_models; k++) bb_model_free(n->models[k]);
  bbi_mem_free(n->alloc, n->models);
  bbi_mem_free(n->alloc, n);
}
