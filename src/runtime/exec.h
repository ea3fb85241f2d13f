/* Executions, the data the engine runs: one run of a graph, a frontier entry, the call
 * frame of a firing op, and how a part's load finds the executions a snapshot names.
 * Parts that hold executions (pending operations, timers) see this data, never the
 * engine's functions: the engine manages the references. */
#ifndef BBI_RUNTIME_EXEC_H
#define BBI_RUNTIME_EXEC_H

#include "runtime/graph.h"

typedef struct rt_exec rt_exec;

/* One run of a graph: the values of its sites and which ops were already scheduled. It
 * lives while anything refers to it (frontier entries, pending operations, a running
 * function call of its own); then its values are released. */
struct rt_exec {
  uint64_t id;
  uint32_t graph;
  uint32_t refs;
  rt_exec *parent;       /* the caller for a function body */
  uint32_t call_op;      /* the caller's CALL op */
  bb_val **vals;         /* per local site */
  size_t *charged;       /* per local site: bytes charged to the ingress budget */
  uint8_t *scheduled;    /* bitset per op: pushed once, so fired at most once */
  uint64_t born_ns;
  uint64_t deadline_at;  /* 0 = none: from the envelope's remaining deadline */
  bool has_src;
  bb_peer_id src;
  uint64_t wire_req_id;
  bool bootstrap;
  int target;            /* the target whose run this is (-1: none) */
  rt_exec *next_dead;    /* queued for release */
};

/* A frontier entry: an op of an execution, ready to fire. */
typedef struct rt_task {
  rt_exec *exec;
  uint32_t op;
} rt_task;

typedef struct rt_parts rt_parts; /* runtime/ctx.h */

/* What a firing op gets: inputs and outputs by position. */
struct rt_call {
  bb_node *node;
  rt_parts *parts;     /* the node's parts a component or a Send reaches */
  rt_graph *graph;
  rt_op *op;
  uint32_t op_index;
  rt_exec *exec;
  const char *module;  /* the target (or function) the execution runs, for steps */
  bb_val **in;
  size_t n_in;
  bb_val **out;
  size_t n_out;
  uint64_t now;
  const char *reason;  /* a failing syscall's stable token (default "op_failed") */
  uint64_t command;    /* set by a syscall that returns BB_LATER */
};

/* How a part's load resolves an execution id of the snapshot: the execution with that
 * id whose graph has op `op`, or NULL. Each one found gains a reference
 * for the holder being loaded. */
typedef struct rt_exec_lookup {
  rt_exec *(*find)(void *user, uint64_t id, uint32_t op);
  void *user;
} rt_exec_lookup;

#endif /* BBI_RUNTIME_EXEC_H */
