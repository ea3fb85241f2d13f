/* The engine: executions, the FIFO frontier, firing ops and their completions. */
#ifndef BBI_RUNTIME_ENGINE_H
#define BBI_RUNTIME_ENGINE_H

#include "runtime/node.h"

/* A zeroed execution of graph with its arrays laid out (no id, not counted, no
 * references): what rt_exec_new and restore fill in. NULL when out of memory. */
rt_exec *rt_exec_alloc(bb_node *n, uint32_t graph);
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
/* Fires ready ops until none is left or the budget is spent; returns how many ran. */
int rt_drain(bb_node *n, size_t *budget);

#endif /* BBI_RUNTIME_ENGINE_H */
