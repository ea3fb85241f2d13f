/* The engine: executions, the FIFO frontier, firing ops and their completions.
 *
 * An op fires at most once per execution: it is scheduled only when every input it reads
 * holds a value, and scheduling marks it, so neither a value written twice nor an input
 * that arrives after the op ran can fire it again. Values are written by position; a
 * function call runs its body in a child execution whose formal outputs are forwarded to
 * the caller as they are written. */
#include <string.h>

#include "runtime/ctx.h"
#include "runtime/engine.h"
#include "runtime/send.h"
#include "util/mem.h"
#include "util/ring.h"

/* ---- executions ----------------------------------------------------------------------- */

/* One allocation: the header, then per site a value and its charge, then the bitset. */
rt_exec *rt_exec_alloc(const bb_node *n, uint32_t graph) {
  const rt_graph *g = &n->graphs[graph];
  size_t sites = g->n_sites, bits = (g->n_ops + 7) / 8;
  rt_exec *e = bbi_mem_calloc(n->alloc, 1, sizeof(rt_exec) + sites * (sizeof(bb_val *) + sizeof(size_t)) + bits);
  if (!e) return NULL;
  e->vals = (bb_val **)(e + 1);
  e->charged = (size_t *)(e->vals + sites);
  e->scheduled = (uint8_t *)(e->charged + sites);
  e->graph = graph;
  return e;
}

rt_exec *rt_exec_new(bb_node *n, uint32_t graph, rt_exec *parent, int target) {
  if (n->n_execs >= n->cfg.max_executions) return NULL;
  const rt_graph *g = &n->graphs[graph];
  rt_exec *e = rt_exec_alloc(n, graph);
  if (!e) return NULL;
  e->id = n->next_exec++;
  e->graph = graph;
  e->refs = 1; /* the creator's hold: released with rt_exec_unref when it is done */
  e->born_ns = n->now;
  e->target = target;
  if (parent) {
    e->parent = parent;
    parent->refs++;
    e->has_src = parent->has_src;
    e->src = parent->src;
    e->wire_req_id = parent->wire_req_id;
    e->deadline_at = parent->deadline_at;
    e->bootstrap = parent->bootstrap;
    e->target = parent->target;
    e->born_ns = parent->born_ns;
  }
  n->n_execs++;
  const rt_target *t = target >= 0 && !parent ? &n->targets[target] : NULL;
  if (t && t->bound && t->graph == graph)
    for (uint32_t i = 0; i < g->n_in; i++)
      if (t->bound[i] && g->formal_in[i] != RT_NONE) rt_write(n, e, g->formal_in[i], bb_val_retain(t->bound[i]), 0);
  return e;
}

void rt_exec_unref(bb_node *n, rt_exec *e) {
  if (--e->refs) return;
  e->next_dead = n->dead;
  n->dead = e;
}

/* Releases finished executions (and, through them, their callers when those finish). */
void rt_exec_collect(bb_node *n) {
  while (n->dead) {
    rt_exec *e = n->dead;
    n->dead = e->next_dead;
    const rt_graph *g = &n->graphs[e->graph];
    for (uint32_t s = 0; s < g->n_sites; s++) {
      bb_val_release(e->vals[s]);
      rt_ingress_uncharge(&n->ingress, e->charged[s]);
    }
    if (e == n->bootstrap_root) n->bootstrap_root = NULL;
    if (e->parent) rt_exec_unref(n, e->parent);
    n->n_execs--;
    bbi_mem_free(n->alloc, e);
  }
}

static bool is_scheduled(const rt_exec *e, uint32_t op) { return e->scheduled[op / 8] & (1u << (op % 8)); }

static bool ready(const bb_node *n, const rt_exec *e, uint32_t op) {
  const rt_op *o = &n->graphs[e->graph].ops[op];
  for (uint32_t i = 0; i < o->n_in; i++)
    if (o->in[i] != RT_NONE && !e->vals[o->in[i]]) return false;
  return true;
}

int rt_push(bb_node *n, rt_exec *e, uint32_t op) {
  if (bbi_ring_push(&n->frontier, n->alloc, &(rt_task){e, op})) {
    n->failed_nomem = true;
    return BB_ERR_NOMEM;
  }
  e->scheduled[op / 8] |= (uint8_t)(1u << (op % 8));
  e->refs++;
  return 0;
}

void rt_push_ready(bb_node *n, rt_exec *e, uint32_t site) {
  const rt_graph *g = &n->graphs[e->graph];
  for (uint32_t k = g->cons_start[site]; k < g->cons_start[site + 1]; k++) {
    uint32_t op = g->cons[k];
    if (!is_scheduled(e, op) && ready(n, e, op)) rt_push(n, e, op);
  }
}

void rt_seed(bb_node *n, rt_exec *e) {
  const rt_graph *g = &n->graphs[e->graph];
  for (uint32_t op = 0; op < g->n_ops; op++)
    if (g->ops[op].kind != RT_OP_RECV && !is_scheduled(e, op) && ready(n, e, op)) rt_push(n, e, op);
}

/* Drops e's frontier entries whose op a re-arm unscheduled: they would fire with the
 * inputs the re-arm cleared, or — once the op is pushed again — a second time. */
static void drop_unscheduled(bb_node *n, rt_exec *e) {
  size_t kept = 0;
  for (size_t k = 0; k < n->frontier.len; k++) {
    rt_task t = *(rt_task *)bbi_ring_at(&n->frontier, k);
    if (t.exec == e && !is_scheduled(e, t.op)) {
      rt_exec_unref(n, e); /* never the last reference: the caller holds e */
      continue;
    }
    *(rt_task *)bbi_ring_at(&n->frontier, kept++) = t;
  }
  bbi_ring_truncate(&n->frontier, kept);
}

void rt_rearm(bb_node *n, rt_exec *e, uint32_t op) {
  const rt_graph *g = &n->graphs[e->graph];
  uint32_t stack_buf[64], *stack = stack_buf;
  size_t cap = 64, len = 0;
  e->scheduled[op / 8] &= (uint8_t)~(1u << (op % 8));
  stack[len++] = op;
  while (len) {
    const rt_op *o = &g->ops[stack[--len]];
    for (uint32_t k = 0; k < o->n_out; k++) {
      uint32_t s = o->out[k];
      if (s == RT_NONE) continue;
      for (uint32_t c = g->cons_start[s]; c < g->cons_start[s + 1]; c++) {
        uint32_t d = g->cons[c];
        if (!is_scheduled(e, d)) continue; /* not run yet (or already cleared): nothing to reset */
        e->scheduled[d / 8] &= (uint8_t)~(1u << (d % 8));
        for (uint32_t j = 0; j < g->ops[d].n_out; j++) /* stale results must not satisfy readiness */
          if (g->ops[d].out[j] != RT_NONE) rt_write(n, e, g->ops[d].out[j], NULL, 0);
        if (len == cap) {
          uint32_t *grown = bbi_mem_alloc(n->alloc, cap * 2 * sizeof *grown);
          if (!grown) {
            n->failed_nomem = true;
            break;
          }
          memcpy(grown, stack, len * sizeof *grown);
          if (stack != stack_buf) bbi_mem_free(n->alloc, stack);
          stack = grown;
          cap *= 2;
        }
        stack[len++] = d;
      }
    }
  }
  if (stack != stack_buf) bbi_mem_free(n->alloc, stack);
  drop_unscheduled(n, e);
}

static const char *module_of(const bb_node *n, const rt_exec *e) {
  if (e->target >= 0) return n->targets[e->target].name;
  return n->graphs[e->graph].fn->name;
}

static void app_event(bb_node *n, rt_exec *e, const char *topic, bb_val *v) {
  bb_step *s = rt_step(&n->acc, BB_STEP_APP_EVENT);
  if (!s) return;
  s->module = module_of(n, e);
  if (rt_step_hold(&n->acc, v)) { /* an event without its value is no event */
    rt_step_cancel(&n->acc);
    return;
  }
  s->topic = rt_step_str(&n->acc, topic);
  s->value = v;
  s->exec_id = e->id;
  if (bb_val_kind_of(v) == BB_VAL_BYTES) { /* other kinds: the host encodes `value` if it wants bytes */
    s->bytes = bb_val_as_bytes(v);
    s->len = bb_val_count(v);
  }
}

int rt_write(bb_node *n, rt_exec *e, uint32_t site, bb_val *v, size_t charged) {
  if (site == RT_NONE) {
    bb_val_release(v);
    rt_ingress_uncharge(&n->ingress, charged);
    return 0;
  }
  bb_val_release(e->vals[site]);
  rt_ingress_uncharge(&n->ingress, e->charged[site]);
  e->vals[site] = v;
  e->charged[site] = charged;
  if (!v) return 0; /* cleared (an Interval re-arm) */
  const rt_graph *g = &n->graphs[e->graph];
  uint32_t out = g->out_index[site];
  if (out != RT_NONE) {
    if (e->parent) {
      rt_exec *p = e->parent;
      const rt_op *call = &n->graphs[p->graph].ops[e->call_op];
      if (out < call->n_out && call->out[out] != RT_NONE) {
        rt_write(n, p, call->out[out], bb_val_retain(v), 0);
        rt_push_ready(n, p, call->out[out]);
      }
    } else if (g->target >= 0 || g->bootstrap) {
      app_event(n, e, g->fn->outputs.items[out], v);
    }
  }
  return 0;
}

static void trace(bb_node *n, bb_step_kind kind, rt_exec *e, uint32_t op, uint64_t command) {
  if (!n->cfg.trace_ops) return;
  bb_step *s = rt_step(&n->acc, kind);
  if (!s) return;
  s->module = module_of(n, e);
  s->op = n->graphs[e->graph].ops[op].label;
  s->exec_id = e->id;
  s->command = command;
}

static void write_outputs(bb_node *n, rt_exec *e, uint32_t op, bb_val *const *vals, size_t n_vals) {
  const rt_op *o = &n->graphs[e->graph].ops[op];
  for (size_t i = 0; i < n_vals; i++) {
    if (!vals[i]) continue;
    if (i >= o->n_out || o->out[i] == RT_NONE) {
      bb_val_release(vals[i]);
      continue;
    }
    rt_write(n, e, o->out[i], vals[i], 0);
  }
  for (size_t i = 0; i < n_vals && i < o->n_out; i++)
    if (vals[i] && o->out[i] != RT_NONE) rt_push_ready(n, e, o->out[i]);
}

void rt_complete(bb_node *n, uint64_t command, bb_val *const *vals, size_t n_vals) {
  rt_pending *p = rt_pending_find(&n->pending, command);
  if (!p) {
    rt_count(&n->counters, "completions.unknown", 1);
    for (size_t i = 0; i < n_vals; i++) bb_val_release(vals[i]);
    return;
  }
  rt_pending parked = rt_pending_remove(&n->pending, p);
  trace(n, BB_STEP_OP_COMPLETED, parked.exec, parked.op, command);
  write_outputs(n, parked.exec, parked.op, vals, n_vals);
  rt_exec_unref(n, parked.exec);
}

void rt_fail_command(bb_node *n, uint64_t command, const char *detail) {
  rt_pending *p = rt_pending_find(&n->pending, command);
  if (!p) {
    rt_count(&n->counters, "completions.unknown", 1);
    return;
  }
  rt_pending parked = rt_pending_remove(&n->pending, p);
  rt_op_failed(n, parked.exec, parked.op, "completion_failed", detail);
  rt_exec_unref(n, parked.exec);
}

void rt_op_failed(bb_node *n, rt_exec *e, uint32_t op, const char *reason, const char *detail) {
  rt_count(&n->counters, "ops.failed", 1);
  bb_step *s = rt_step(&n->acc, BB_STEP_OP_FAILED);
  if (!s) return;
  s->module = module_of(n, e);
  s->op = n->graphs[e->graph].ops[op].label;
  s->reason = rt_step_str(&n->acc, reason);
  s->detail = rt_step_str(&n->acc, detail);
  s->exec_id = e->id;
  if (e->has_src) {
    s->has_peer = true;
    s->peer = e->src;
  }
}

/* ---- holds that parts keep ------------------------------------------------------------------ */

int rt_park(bb_node *n, uint64_t command, rt_exec *e, uint32_t op) {
  int rc = rt_pending_add(&n->pending, command, e, op);
  if (!rc) e->refs++;
  return rc;
}

int rt_set_interval(bb_node *n, uint64_t at, rt_exec *e, uint32_t op) {
  int rc = rt_timers_add(&n->timers, at, RT_TIMER_INTERVAL, 0, e, op, 0);
  if (!rc) e->refs++;
  return rc;
}

void rt_engine_release(bb_node *n) {
  for (size_t k = 0; k < n->frontier.len; k++) rt_exec_unref(n, ((rt_task *)bbi_ring_at(&n->frontier, k))->exec);
  bbi_ring_truncate(&n->frontier, 0);
  for (size_t i = 0; i < n->pending.cap; i++) /* a removal may shift another entry into slot i */
    while (n->pending.items[i].used) rt_exec_unref(n, rt_pending_remove(&n->pending, &n->pending.items[i]).exec);
  rt_timer t;
  while (rt_timers_pop_due(&n->timers, UINT64_MAX, &t))
    if (t.exec) rt_exec_unref(n, t.exec);
  rt_exec_collect(n);
}

/* ---- firing ------------------------------------------------------------------------------ */

static void call_function(bb_node *n, rt_exec *e, uint32_t op, bb_val *const *in) {
  const rt_op *o = &n->graphs[e->graph].ops[op];
  rt_exec *child = rt_exec_new(n, o->callee, e, e->target);
  if (!child) {
    rt_op_failed(n, e, op, "execution_limit", "cannot start the function body: execution limit or out of memory");
    return;
  }
  child->call_op = op;
  const rt_graph *cg = &n->graphs[o->callee];
  for (uint32_t i = 0; i < o->n_in && i < cg->n_in; i++)
    if (in[i] && cg->formal_in[i] != RT_NONE) rt_write(n, child, cg->formal_in[i], bb_val_retain(in[i]), 0);
  rt_seed(n, child);
  rt_exec_unref(n, child);
}

/* Runs a syscall, a Send or a component op; its outputs are written now, or when its
 * command completes (BB_LATER parks it). */
static void run_op(bb_node *n, rt_exec *e, uint32_t op, bb_val **in, bb_val **out) {
  rt_graph *g = &n->graphs[e->graph];
  rt_op *o = &g->ops[op];
  rt_call c = {n, &n->parts, g, o, op, e, module_of(n, e), in, o->n_in, out, o->n_out, n->now, NULL, 0};
  bb_error err;
  bb_error_clear(&err);
  int rc = o->kind == RT_OP_SEND        ? rt_send(&c, &err)
           : o->kind == RT_OP_COMPONENT ? rt_invoke_component(&c, &err)
                                        : o->fn(&c, &err);
  if (rc == BB_LATER) {
    for (uint32_t i = 0; i < o->n_out; i++) bb_val_release(out[i]);
    if (rt_park(n, c.command, e, op)) rt_op_failed(n, e, op, "out_of_memory", "out of memory parking the op");
    else trace(n, BB_STEP_ASYNC_SUSPENDED, e, op, c.command);
  } else if (rc < 0) {
    for (uint32_t i = 0; i < o->n_out; i++) bb_val_release(out[i]);
    rt_op_failed(n, e, op, c.reason ? c.reason : "op_failed", err.message[0] ? err.message : bb_strerror(rc));
  } else {
    trace(n, BB_STEP_OP_COMPLETED, e, op, 0);
    write_outputs(n, e, op, out, o->n_out);
  }
}

static void fire(bb_node *n, rt_exec *e, uint32_t op) {
  const rt_op *o = &n->graphs[e->graph].ops[op];
  bb_val *in_stack[16], *out_stack[16];
  bb_val **in = in_stack, **out = out_stack;
  if (o->n_in > 16 || o->n_out > 16) {
    in = bbi_mem_calloc(n->alloc, o->n_in + 1, sizeof *in);
    out = bbi_mem_calloc(n->alloc, o->n_out + 1, sizeof *out);
    if (!in || !out) {
      if (in != in_stack) bbi_mem_free(n->alloc, in);
      if (out != out_stack) bbi_mem_free(n->alloc, out);
      rt_op_failed(n, e, op, "out_of_memory", "out of memory preparing the op's inputs");
      return;
    }
  }
  memset(out, 0, (o->n_out ? o->n_out : 1) * sizeof *out);
  for (uint32_t i = 0; i < o->n_in; i++) in[i] = o->in[i] == RT_NONE ? NULL : e->vals[o->in[i]];

  if (o->kind == RT_OP_CALL) {
    call_function(n, e, op, in);
    trace(n, BB_STEP_OP_COMPLETED, e, op, 0);
  } else if (o->kind == RT_OP_RECV || o->kind == RT_OP_UNRESOLVED) {
    /* Recv is where deliveries land, not something that runs; unresolved ops are only in
     * partitions this peer does not run, which never execute */
  } else if (n->pending.len >= n->cfg.max_pending_async) {
    rt_op_failed(n, e, op, "pending_async_limit", "too many operations wait for completions (max_pending_async)");
  } else {
    run_op(n, e, op, in, out);
  }
  if (in != in_stack) bbi_mem_free(n->alloc, in);
  if (out != out_stack) bbi_mem_free(n->alloc, out);
}

/* The next task allowed to run: while a bootstrap runs, only its own executions are. */
static bool pop_task(bb_node *n, rt_task *t) {
  for (size_t k = 0; k < n->frontier.len; k++) {
    const rt_task *at = bbi_ring_at(&n->frontier, k);
    if (n->bootstrap_running >= 0 && !at->exec->bootstrap) continue;
    *t = *at;
    bbi_ring_remove(&n->frontier, k); /* the skipped entries keep their order */
    return true;
  }
  return false;
}

/* Fires ready ops until none is left or the budget is spent; returns how many ran. */
int rt_drain(bb_node *n, size_t *budget) {
  int ran = 0;
  rt_task t;
  while (*budget && pop_task(n, &t)) {
    fire(n, t.exec, t.op);
    rt_exec_unref(n, t.exec);
    (*budget)--;
    ran++;
    rt_exec_collect(n);
  }
  return ran;
}
