/* One peer's node: what install fixed (runtime/graph.h) and what execution mutates
 * (runtime/exec.h). Only src/runtime/ includes this; components see bb_ctx (bb/runtime.h).
 * The functions over it are declared by the header of the file that holds them
 * (runtime/engine.h, runtime/steps.h, ...). */
#ifndef BBI_RUNTIME_NODE_H
#define BBI_RUNTIME_NODE_H

#include "runtime/admission.h"
#include "runtime/exec.h"
#include "runtime/graph.h"
#include "util/ring.h"
#include "util/strmap.h"

struct bb_node {
  const bb_allocator *alloc;
  bb_node_config cfg;
  bb_peer_id self;
  bb_address *self_addrs;
  size_t n_self_addrs;
  bb_model **models; /* the installed artifacts, in install order */
  size_t n_models;

  rt_graph *graphs;
  uint32_t n_graphs;
  uint64_t n_sites;
  rt_target *targets;
  size_t n_targets;
  rt_component *components;
  size_t n_components;
  rt_wire *wires; /* sorted by (id, graph, site) */
  size_t n_wires, cap_wires;

  /* executions */
  uint64_t next_exec, next_command, next_wire_req;
  size_t n_execs;
  rt_exec *dead;
  bbi_ring frontier; /* of rt_task, FIFO */
  rt_pending *pending; /* open addressing by command */
  size_t n_pending, cap_pending;

  /* time */
  uint64_t now;
  rt_timer *timers; /* min-heap by (at, seq) */
  size_t n_timers, cap_timers;
  uint64_t timer_seq;

  /* bootstrap */
  bool bootstrap_started;
  int bootstrap_running; /* target index whose bootstrap runs, -1 none */
  rt_exec *bootstrap_root;

  /* queues */
  bbi_ring ingress; /* of rt_event, FIFO */
  size_t ingress_bytes;
  bbi_ring outbound; /* of rt_outbound, FIFO */
  size_t outbound_dropped;

  rt_book book;
  bb_admit_fn admit; /* the host's admission hook for the book (NULL: the default rule) */
  void *admit_user;
  rt_admission admission; /* the join policy and the tokens verified under it */
  uint64_t rng;
  bbi_ring dedup; /* of uint64_t: the latest dedup_window (peer, request, site) keys */

  rt_counter *counters;
  size_t n_counters, cap_counters;

  rt_steps acc, batch;
  bool failed_nomem; /* an allocation failed where no error could be returned */

  /* Framework-op state (src/runtime/syscalls, freed by rt_syscalls_free): which
   * DeadlineMatch ops already fired in which execution, and the named tables of Limit,
   * Serialize, Hold and Record with an index over them and the bytes their values hold. */
  struct rt_latch *latches;
  size_t n_latches, cap_latches;
  struct rt_named *named;
  size_t n_named, cap_named;
  bbi_strmap named_index;
  size_t named_bytes;
};

#endif /* BBI_RUNTIME_NODE_H */
