/* Poll and its phases: queued events in order, ready ops, due timers, bootstrap
 * progress, then the outbound queue handed out as SEND steps; and what says whether a
 * poll has work (bb_node_has_work, bb_node_expiry). */
#include <string.h>

#include "runtime/bootstrap.h"
#include "runtime/ctx.h"
#include "runtime/deliver.h"
#include "runtime/engine.h"
#include "bb/common.h"
#include "util/mem.h"
#include "util/ring.h"

static void process_event(bb_node *n, rt_event *ev) {
  switch (ev->kind) {
  case RT_EV_ENVELOPE: rt_route(n, ev); return;
  case RT_EV_INVOKE: {
    const rt_target *t = &n->targets[ev->target];
    rt_exec *e = rt_exec_new(n, t->graph, NULL, ev->target);
    if (!e) {
      rt_report(&n->acc, BB_STEP_INGRESS_DROPPED, NULL, "execution_limit",
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
  rt_event_release(&n->ingress, ev);
}

/* Handles queued events in order; events that must wait for the bootstrap keep their
 * place. */
static void process_ingress(bb_node *n) {
  rt_ingress *q = &n->ingress;
  size_t count = q->events.len, kept = 0;
  for (size_t k = 0; k < count; k++) {
    rt_event ev = *rt_ingress_at(q, k);
    if (rt_bootstrap_holds_back(n, &ev)) {
      *rt_ingress_at(q, kept++) = ev;
      continue;
    }
    process_event(n, &ev);
  }
  /* events queued while processing (none today) would sit after `count` */
  for (size_t k = count; k < q->events.len; k++) *rt_ingress_at(q, kept++) = *rt_ingress_at(q, k);
  bbi_ring_truncate(&q->events, kept);
}

static void fire_timers(bb_node *n) {
  rt_timer t;
  while (rt_timers_pop_due(&n->timers, n->now, &t)) {
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
    case RT_TIMER_COMPONENT: rt_component_timer(&n->parts, n->now, t.component, t.id); break;
    }
  }
}

/* ---- loops a component woke (bb_ctx_wake_loops) ------------------------------------------- */

/* Whether graph g (or a function it calls, to `depth` levels) has an op of a woken component. */
static bool calls_woken(const bb_node *n, uint32_t g, int depth) {
  const rt_graph *gr = &n->graphs[g];
  for (uint32_t k = 0; k < gr->n_ops; k++) {
    const rt_op *o = &gr->ops[k];
    if (o->kind == RT_OP_COMPONENT && n->components.items[o->component].wake) return true;
    if (o->kind == RT_OP_CALL && depth > 0 && calls_woken(n, o->callee, depth - 1)) return true;
  }
  return false;
}

/* Whether an op of a woken component is downstream of op `from` in graph g (itself, an op
 * fed by its outputs, and so on, or inside a function such an op calls). */
static bool reaches_woken(const bb_node *n, uint32_t g, uint32_t from) {
  const rt_graph *gr = &n->graphs[g];
  uint8_t *seen = bbi_mem_calloc(n->alloc, gr->n_ops, 1);
  uint32_t *stack = bbi_mem_alloc(n->alloc, (size_t)gr->n_ops * sizeof *stack);
  bool found = false;
  if (!seen || !stack) { /* out of memory: wake the loop all the same (an early tick is only a poll) */
    found = true;
    goto out;
  }
  size_t len = 0;
  stack[len++] = from;
  seen[from] = 1;
  while (len && !found) {
    const rt_op *o = &gr->ops[stack[--len]];
    if (o->kind == RT_OP_COMPONENT && n->components.items[o->component].wake) found = true;
    if (o->kind == RT_OP_CALL && calls_woken(n, o->callee, 8)) found = true;
    for (uint32_t k = 0; k < o->n_out; k++) {
      uint32_t s = o->out[k];
      if (s == RT_NONE) continue;
      for (uint32_t c = gr->cons_start[s]; c < gr->cons_start[s + 1]; c++)
        if (!seen[gr->cons[c]]) seen[gr->cons[c]] = 1, stack[len++] = gr->cons[c];
    }
  }
out:
  bbi_mem_free(n->alloc, seen);
  bbi_mem_free(n->alloc, stack);
  return found;
}

static bool interval_reaches_woken(const rt_timer *t, void *node) {
  const bb_node *n = node;
  return reaches_woken(n, t->exec->graph, t->op);
}

/* Makes due now the Interval ticks that reach a component which asked for it since the
 * last call, then forgets the asks. */
static void wake_loops(bb_node *n) {
  bool any = false;
  for (size_t i = 0; i < n->components.len; i++) any |= n->components.items[i].wake;
  if (!any) return;
  size_t moved = rt_timers_bring_forward(&n->timers, n->now, interval_reaches_woken, n);
  if (moved) rt_count(&n->counters, "loops.woken", moved);
  for (size_t i = 0; i < n->components.len; i++) n->components.items[i].wake = false;
}

static void emit_outbound(bb_node *n) {
  rt_outbound o;
  while (rt_outbound_pop(&n->outbound, &o)) {
    bb_step *s = rt_step(&n->acc, BB_STEP_SEND);
    if (!s) {
      bbi_mem_free(n->alloc, o.bytes);
      continue;
    }
    if (rt_step_own(&n->acc, o.bytes)) { /* (which freed the bytes) */
      rt_step_cancel(&n->acc);
      continue;
    }
    s->has_peer = true;
    s->peer = o.peer;
    s->bytes = o.bytes;
    s->len = o.len;
    rt_count(&n->counters, "send.bytes", o.len);
  }
  size_t dropped = rt_outbound_take_dropped(&n->outbound);
  if (dropped) {
    bb_step *s = rt_step(&n->acc, BB_STEP_OUTBOUND_DROPPED);
    if (s) s->count = dropped;
  }
}

int bb_node_poll(bb_node *n, uint64_t now_ns, const bb_step **steps, size_t *n_steps, bb_error *err) {
  if (!n || !steps || !n_steps) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "poll: node and outputs required");
  rt_advance(n, now_ns);
  rt_steps_release(&n->batch);
  size_t budget = n->cfg.cycle_op_budget;
  for (int round = 0; round < 4; round++) {
    process_ingress(n);
    rt_drain(n, &budget);
    wake_loops(n);
    fire_timers(n);
    rt_drain(n, &budget);
    wake_loops(n); /* a wake from the ticks' own work: due at the next poll */
    int was = n->bootstrap_running;
    rt_bootstrap_progress(n);
    /* a bootstrap that just finished releases held events: take them in this poll */
    if (!(was >= 0 && n->bootstrap_running < 0) || !budget) break;
  }
  rt_exec_collect(n);
  emit_outbound(n);
  if (!budget && n->frontier.len) {
    bb_step *s = rt_step(&n->acc, BB_STEP_CYCLE_BUDGET_EXCEEDED);
    if (s) s->count = n->cfg.cycle_op_budget;
  }
  if (n->bootstrap_running >= 0) {
    bb_step *s = rt_step(&n->acc, BB_STEP_WAITING_ON_BOOTSTRAP);
    if (s) s->module = n->targets[n->bootstrap_running].name;
  }
  /* hand out what accumulated */
  rt_steps_hand_out(&n->acc, &n->batch);
  *steps = n->batch.items;
  *n_steps = n->batch.len;
  bool lost = n->failed_nomem || n->acc.nomem || n->batch.nomem || n->counters.nomem;
  n->failed_nomem = n->acc.nomem = n->batch.nomem = n->counters.nomem = false;
  if (lost) return bb_error_set(err, BB_ERR_NOMEM, "poll: an allocation failed; some work or reports were lost");
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
  for (size_t k = 0; k < n->ingress.events.len; k++)
    if (!rt_bootstrap_holds_back(n, rt_ingress_at(&n->ingress, k))) return true;
  return n->outbound.items.len || n->acc.len;
}

uint64_t bb_node_expiry(const bb_node *n) {
  if (bb_node_has_work(n)) return n->now;
  return rt_timers_next(&n->timers);
}
