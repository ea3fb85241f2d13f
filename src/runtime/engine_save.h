/* The engine's part of a snapshot: the live executions — those timers, pending operations
 * and the running bootstrap hold, and their callers — with their values, which ops they
 * scheduled, their caller, source peer and deadline. */
#ifndef BBI_RUNTIME_ENGINE_SAVE_H
#define BBI_RUNTIME_ENGINE_SAVE_H

#include "runtime/node.h"

/* Executions by increasing id, each once. */
typedef struct rt_exec_list {
  rt_exec **items;
  size_t len, cap;
} rt_exec_list;

/* Executions read from a snapshot, not yet the node's: each one's refs counts what holds
 * it (its callees, then the pending operations and timers loaded against it). */
typedef struct rt_staged_execs {
  const bb_node *node;
  rt_exec_list list;
  uint64_t *parent; /* per execution: its caller's id (0: none) */
} rt_staged_execs;

/* The live executions of n; BB_ERR_NOMEM. */
int rt_execs_live(const bb_node *n, rt_exec_list *out);
void rt_exec_list_free(const bb_node *n, rt_exec_list *l);
/* Section: u64 count, then per execution its id, graph, caller id, call op, birth,
 * deadline, source peer, request id, bootstrap flag, target, scheduled bitset and values. */
void rt_execs_save(const bb_node *n, const rt_exec_list *live, bb_le_writer *w);
/* Reads a section; ids must be below next_exec and increasing, graphs ones this node
 * runs, callers CALL ops of theirs in the snapshot. */
int rt_execs_load(rt_staged_execs *s, rt_reader *r, uint64_t next_exec);
/* The staged execution with this id, or NULL. */
rt_exec *rt_staged_find(const rt_staged_execs *s, uint64_t id);
/* How pending operations and timers find the staged executions they hold. */
rt_exec_lookup rt_staged_lookup(rt_staged_execs *s);
/* Every staged execution must be held, and together they must fit n's limits
 * (max_executions, the ingress byte budget). */
int rt_execs_check(const rt_staged_execs *s, rt_reader *r);
/* Hands the staged executions to the node (cannot fail). */
void rt_execs_commit(bb_node *n, rt_staged_execs *s);
/* Frees what is still staged. */
void rt_staged_free(rt_staged_execs *s);

#endif /* BBI_RUNTIME_ENGINE_SAVE_H */
