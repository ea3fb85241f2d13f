/* The engine: executions, the FIFO frontier, firing ops and their completions, and the
 * references parts hold to executions (a parked op, an Interval timer). It sees the node;
 * below it, the component context (ctx.h) and sends (send.h) see only the node's parts. */
#ifndef BBI_RUNTIME_ENGINE_H
#define BBI_RUNTIME_ENGINE_H

#include "runtime/node.h"

/* Moves the node's clock to `now` if that is later (the clock is the largest time seen). */
static inline void rt_advance(bb_node *n, uint64_t now) {
  if (now > n->now) n->now = now;
}
/* A zeroed execution of graph with its arrays laid out (no id, not counted, no
 * references): what rt_exec_new and restore fill in. NULL when out of memory. */
rt_exec *rt_exec_alloc(const bb_node *n, uint32_t graph);
/* A new execution of graph (a function body when parent is set), holding one reference
 * for its creator; NULL at max_executions or out of memory. A target's bound inputs are
 * written into a new root run of that target. */
rt_exec *rt_exec_new(bb_node *n, uint32_t graph, rt_exec *parent, int target);
/* Drops a reference; the last one queues e for rt_exec_collect. */
void rt_exec_unref(bb_node *n, rt_exec *e);
/* Releases the executions nothing refers to any more, and their values. */
void rt_exec_collect(bb_node *n);
/* Stores v at a site of e (taking v; NULL clears the site) and forwards function outputs
 * to the caller or reports target outputs as app events. */
int rt_write(bb_node *n, rt_exec *e, uint32_t site, bb_val *v, size_t charged);
/* Schedules every consumer of the site that has become ready. */
void rt_push_ready(bb_node *n, rt_exec *e, uint32_t site);
/* Schedules every op of e that is ready (a new run). */
void rt_seed(bb_node *n, rt_exec *e);
/* Makes an op and everything downstream of it in e runnable again (an Interval tick). */
void rt_rearm(bb_node *n, rt_exec *e, uint32_t op);
/* Appends (e, op) to the frontier and marks op scheduled in e; BB_ERR_NOMEM. */
int rt_push(bb_node *n, rt_exec *e, uint32_t op);
/* Writes a completed command's outputs into its parked op (unknown commands are counted). */
void rt_complete(bb_node *n, uint64_t command, bb_val *const *vals, size_t n_vals);
/* Fails a parked op with the host's detail. */
void rt_fail_command(bb_node *n, uint64_t command, const char *detail);
/* Reports an OP_FAILED step for op of e. */
void rt_op_failed(bb_node *n, rt_exec *e, uint32_t op, const char *reason, const char *detail);
/* Parks op of e until `command` completes: the pending table takes a reference to e.
 * BB_ERR_EXISTS (the command is awaited already), BB_ERR_NOMEM. */
int rt_park(bb_node *n, uint64_t command, rt_exec *e, uint32_t op);
/* Sets an Interval timer re-running op of e at `at`: the timer takes a reference to e.
 * BB_ERR_LIMIT (max_timers), BB_ERR_NOMEM. */
int rt_set_interval(bb_node *n, uint64_t at, rt_exec *e, uint32_t op);
/* Drops every reference the frontier, pending operations and timers hold (emptying
 * them) and releases the executions: what teardown does first. */
void rt_engine_release(bb_node *n);
/* Fires ready ops until none is left or the budget is spent; returns how many ran. */
int rt_drain(bb_node *n, size_t *budget);

#endif /* BBI_RUNTIME_ENGINE_H */
