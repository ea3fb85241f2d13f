/* Deadline ops: DeadlineCheck fails once an execution's budget is spent, DeadlineMatch
 * lets the first of a result and its timeout through, once per execution. */
#include <inttypes.h>

#include "runtime/syscalls/syscall.h"
#include "bb/common.h"
#include "util/mem.h"
#include "util/ring.h"

/* Deadlines are relative: to the start of the execution, or the absolute time an inbound
 * envelope's remaining deadline gives — so peers need no common clock. */
static int sys_deadline_check(rt_call *c, bb_error *err) {
  const rt_exec *e = c->exec;
  int64_t d = c->op->deadline_ns;
  if (d <= 0 && !e->deadline_at) {
    c->reason = "missing_attribute";
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "DeadlineCheck needs a positive `deadline_ns` attribute");
  }
  uint64_t at = d > 0 ? e->born_ns + (uint64_t)d : UINT64_MAX;
  if (e->deadline_at && e->deadline_at < at) at = e->deadline_at;
  if (c->now >= at) {
    c->reason = "deadline_exceeded";
    return bb_error_set(err, BB_ERR_LIMIT, "deadline exceeded: %" PRIu64 " ns after the execution began (budget %" PRIu64
                                           " ns)", c->now - e->born_ns, at - e->born_ns);
  }
  return emit_trigger(c, err);
}

/* DeadlineMatch: the race between a result and its timeout resolves once per execution.
 * The engine fires an op once per execution, except that an Interval tick re-arms what
 * depends on it in the same execution; so the first firing is latched by (execution, op).
 * Only an execution an Interval can still re-arm can fire the op again, so a full table
 * keeps just those entries (and this execution's) before it grows: memory stays flat. */
struct rt_latch {
  uint64_t exec;
  uint32_t op;
};

/* True while an Interval can still re-arm the execution: its timer waits, or the tick
 * that fired it is queued to run (between the two the execution holds no timer). */
static bool exec_may_rerun(const bb_node *n, uint64_t exec) {
  for (size_t i = 0; i < n->timers.len; i++)
    if (n->timers.items[i].kind == RT_TIMER_INTERVAL && n->timers.items[i].exec && n->timers.items[i].exec->id == exec)
      return true;
  for (size_t k = 0; k < n->frontier.len; k++)
    if (((const rt_task *)bbi_ring_at(&n->frontier, k))->exec->id == exec) return true;
  return false;
}

static void prune_latches(bb_node *n, uint64_t current) {
  size_t kept = 0;
  for (size_t i = 0; i < n->n_latches; i++)
    if (n->latches[i].exec == current || exec_may_rerun(n, n->latches[i].exec)) n->latches[kept++] = n->latches[i];
  n->n_latches = kept;
}

static int sys_deadline_match(rt_call *c, bb_error *err) {
  if (!first_input(c)) {
    c->reason = "missing_input";
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "DeadlineMatch requires at least one input");
  }
  bb_node *n = c->node;
  for (size_t i = 0; i < n->n_latches; i++)
    if (n->latches[i].exec == c->exec->id && n->latches[i].op == c->op_index) return 0; /* lost the race: absorb */
  if (n->n_latches == n->cap_latches) {
    prune_latches(n, c->exec->id);
    if (n->n_latches >= n->cap_latches / 2 && /* grow only when pruning freed too little */
        bbi_mem_grow(n->alloc, (void **)&n->latches, &n->cap_latches, n->n_latches + 1, sizeof *n->latches))
      return nomem(err);
  }
  n->latches[n->n_latches++] = (struct rt_latch){c->exec->id, c->op_index};
  return emit_trigger(c, err);
}

void rt_syscalls_free_latches(bb_node *n) {
  bbi_mem_free(n->alloc, n->latches);
  n->latches = NULL;
  n->n_latches = n->cap_latches = 0;
}

const rt_syscall rt_syscalls_deadlines[] = {
    {BB_DOMAIN_SYSCALL, "DeadlineCheck", sys_deadline_check},
    {BB_DOMAIN_SYSCALL, "DeadlineMatch", sys_deadline_match},
};
const size_t rt_syscalls_deadlines_count = sizeof rt_syscalls_deadlines / sizeof *rt_syscalls_deadlines;
