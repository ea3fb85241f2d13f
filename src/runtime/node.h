/* One peer's node: what install fixed (graph.h) and the parts execution changes, each a
 * struct of its own with its invariants and its save/load (pending.h, timers.h, steps.h,
 * ingress.h, outbound.h, book.h, admission.h, replay.h, components.h). Only the node
 * (install, host calls, poll, bootstraps, snapshots, upgrades), delivery and the engine
 * (with the framework ops it fires, syscalls/) include this header; components and sends
 * reach the parts through rt_parts. */
#ifndef BBI_RUNTIME_NODE_H
#define BBI_RUNTIME_NODE_H

#include "runtime/admission.h"
#include "runtime/book.h"
#include "runtime/components.h"
#include "runtime/exec.h"
#include "runtime/graph.h"
#include "runtime/ingress.h"
#include "runtime/outbound.h"
#include "runtime/parts.h"
#include "runtime/pending.h"
#include "runtime/replay.h"
#include "runtime/steps.h"
#include "runtime/timers.h"
#include "util/ring.h"
#include "util/strmap.h"

struct bb_node {
  const bb_allocator *alloc;
  bb_node_config cfg; /* cfg.envelope_caps is NULL: install copied them into envelope_caps */
  bb_envelope_caps envelope_caps;
  bb_peer_id self;
  bb_address *self_addrs;
  size_t n_self_addrs;
  bb_model **models; /* the installed artifacts, in install order */
  size_t n_models;

  /* what install fixed */
  rt_graph *graphs;
  uint32_t n_graphs;
  uint64_t n_sites;
  rt_target *targets;
  size_t n_targets;
  rt_wire *wires; /* sorted by (id, graph, site) */
  size_t n_wires, cap_wires;

  /* the clock and the ids the node mints */
  uint64_t now;
  uint64_t next_exec, next_command, next_wire_req;
  uint64_t rng;

  /* the engine: executions and the frontier */
  size_t n_execs;
  rt_exec *dead;
  bbi_ring frontier; /* of rt_task, FIFO */
  bool failed_nomem; /* an allocation failed where no error could be returned */

  /* bootstrap */
  bool bootstrap_started;
  int bootstrap_running; /* target index whose bootstrap runs, -1 none */
  rt_exec *bootstrap_root;

  /* the parts */
  rt_components components;
  rt_pending_table pending;
  rt_timers timers;
  rt_ingress ingress;
  rt_outbound_queue outbound;
  rt_book book;
  rt_admission admission;
  rt_replay replay;
  rt_counters counters;
  rt_steps acc, batch; /* steps accumulate in acc; a poll hands them out as batch */
  rt_parts parts;      /* what components and sends reach */

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
