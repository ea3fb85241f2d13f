/* The runtime's internals: installed graphs, executions, the frontier, timers, queues.
 * Only src/runtime/ includes this; components see bb_ctx (runtime.h). */
#ifndef BB_RUNTIME_NODE_H
#define BB_RUNTIME_NODE_H

#include "bb/runtime.h"
#include "util/error.h"
#include "util/mem.h"
#include "util/ring.h"
#include "util/strmap.h"

#define RT_NONE UINT32_MAX

typedef struct rt_exec rt_exec;
typedef struct rt_graph rt_graph;
typedef struct rt_op rt_op;

/* ---- ops ------------------------------------------------------------------------------ */

typedef enum rt_op_kind {
  RT_OP_UNRESOLVED = 0, /* in a partition this peer does not run */
  RT_OP_SYSCALL,
  RT_OP_CALL,
  RT_OP_COMPONENT,
  RT_OP_SEND,
  RT_OP_RECV
} rt_op_kind;

/* What a syscall gets: inputs and outputs by position. */
typedef struct rt_call {
  bb_node *node;
  rt_graph *graph;
  rt_op *op;
  uint32_t op_index;
  rt_exec *exec;
  bb_val **in;
  size_t n_in;
  bb_val **out;
  size_t n_out;
  uint64_t now;
  const char *reason;  /* a failing syscall's stable token (default "op_failed") */
  uint64_t command;    /* set by a syscall that returns BB_LATER */
} rt_call;

typedef int (*rt_syscall_fn)(rt_call *c, bb_error *err);

typedef struct rt_syscall {
  const char *domain, *op_type;
  rt_syscall_fn fn;
} rt_syscall;

/* One data input of a Send and where it lands. */
typedef struct rt_send_fill {
  uint32_t input;   /* position in the node's inputs */
  uint64_t site;    /* the receiving Recv payload's global site */
} rt_send_fill;

struct rt_op {
  const bb_ir_node *ir;
  rt_op_kind kind;
  rt_syscall_fn fn;      /* SYSCALL */
  uint32_t callee;       /* CALL: graph index */
  uint32_t component;    /* COMPONENT */
  bb_role role;          /* COMPONENT */
  uint32_t *in, n_in;    /* local sites (RT_NONE for "") */
  uint32_t *out, n_out;
  char *label;           /* "domain::OpType" or "domain::OpType@name" */
  rt_send_fill *fills;   /* SEND */
  uint32_t n_fills;
  int64_t deadline_ns;   /* SEND, DeadlineCheck: the deadline_ns attribute (relative), 0 none */
};

struct rt_graph {
  const bb_function *fn;
  uint64_t site_base;
  uint32_t n_sites;
  const char **site_names; /* local site → value name (borrowed from the IR) */
  bb_strmap names;         /* value name → local site */
  rt_op *ops;
  uint32_t n_ops;
  uint32_t *cons_start, *cons; /* consumers of each local site (CSR, op indices) */
  uint32_t *formal_in, n_in;   /* local sites of the function's inputs */
  uint32_t *formal_out, n_out; /* ... and outputs */
  uint32_t *out_index;         /* local site → position in the outputs, or RT_NONE */
  uint32_t *recv_sender;       /* Recv payload site → its sender site (RT_NONE if none) */
  uint8_t *is_recv;            /* local site → 1 when it is a Recv payload */
  bool active;                 /* one of my targets or reachable from them */
  int target;                  /* index in node->targets, or -1 */
  bool bootstrap;              /* module_phase = bootstrap */
};

/* ---- executions --------------------------------------------------------------------- */

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

typedef struct rt_task {
  rt_exec *exec;
  uint32_t op;
} rt_task;

/* ---- timers, pending work, queues ---------------------------------------------------- */

typedef enum rt_timer_kind {
  RT_TIMER_COMPLETE,  /* complete command `id` with a trigger */
  RT_TIMER_INTERVAL,  /* run op `op` of execution `exec` again, with what depends on it */
  RT_TIMER_COMPONENT  /* on_timer(token = id) of component `component` */
} rt_timer_kind;

typedef struct rt_timer {
  uint64_t at, seq;
  rt_timer_kind kind;
  uint64_t id;
  uint32_t op, component;
  rt_exec *exec; /* INTERVAL: held (one reference) until the timer fires */
} rt_timer;

typedef struct rt_pending {
  uint64_t command;
  rt_exec *exec;
  uint32_t op;
  bool used;
} rt_pending;

typedef enum rt_event_kind {
  RT_EV_ENVELOPE,
  RT_EV_INVOKE,
  RT_EV_COMPLETE,
  RT_EV_FAIL
} rt_event_kind;

/* One fill of a delivered envelope, decoded at delivery. */
typedef struct rt_fill {
  uint64_t site;         /* data plane */
  uint32_t component;    /* control plane: the component number in the address */
  char *op;              /* control plane: the op name (owned) */
  uint8_t *payload;      /* control plane: the raw payload (owned) */
  size_t payload_len;
  bb_val *value;         /* data plane */
  size_t charged;
  int index;
} rt_fill;

typedef struct rt_event {
  rt_event_kind kind;
  uint64_t at;
  /* ENVELOPE */
  bb_peer_id from;
  rt_fill *fills;
  size_t n_fills;
  uint64_t wire_req_id, remaining_deadline_ns;
  /* INVOKE */
  int target;
  char **names;
  bb_val **vals;
  size_t n_vals;
  size_t charged;
  /* COMPLETE / FAIL */
  uint64_t command;
  char *detail;
} rt_event;

typedef struct rt_outbound {
  bb_peer_id peer;
  uint8_t *bytes;
  size_t len;
} rt_outbound;

/* Steps accumulate in `acc` (deliveries and polls add to it); a poll hands them out as
 * `batch`, which lives until the next poll. Strings and buffers a step points to are
 * owned by its list. */
typedef struct rt_steps {
  bb_step *items;
  size_t len, cap;
  void **owned;
  size_t n_owned, cap_owned;
  bb_val **held;
  size_t n_held, cap_held;
} rt_steps;

/* ---- the address book ------------------------------------------------------------------ */

typedef struct rt_peer_entry {
  bb_peer_id peer;
  bb_address *addrs;
  size_t n_addrs;
  bool blocked;
} rt_peer_entry;

typedef struct rt_book {
  rt_peer_entry *items;
  size_t len, cap;
  uint32_t *slots; /* open addressing over items, by peer bytes */
  size_t n_slots;
} rt_book;

/* ---- components ------------------------------------------------------------------------- */

typedef struct rt_component {
  const bb_component_type *type;
  void *self;
  char *slot;
  uint32_t number;    /* stable across peers: FNV-1a-32 of the slot name */
  bb_role role;       /* the role it is bound as */
  char *config;
} rt_component;

struct bb_ctx {
  bb_node *node;
  rt_component *component;
  rt_exec *exec;
  uint64_t now;
  uint64_t deferred; /* the command bb_ctx_defer minted (0: none) */
  const bb_peer_id *source;
};

typedef struct rt_target {
  char *name;       /* resolved partition name */
  uint32_t graph;
  int bootstrap;    /* graph index of its bootstrap, or -1 */
  bool bootstrap_done;
  bb_val **bound;   /* per formal input: a value every new run starts with (or NULL) */
} rt_target;

typedef struct rt_counter {
  char *name;
  uint64_t value;
} rt_counter;

struct bb_node {
  const bb_allocator *alloc;
  bb_node_config cfg;
  bb_peer_id self;
  bb_address *self_addrs;
  size_t n_self_addrs;
  bb_model *model;

  rt_graph *graphs;
  uint32_t n_graphs;
  uint64_t n_sites;
  rt_target *targets;
  size_t n_targets;
  rt_component *components;
  size_t n_components;

  /* executions */
  uint64_t next_exec, next_command, next_wire_req;
  size_t n_execs;
  rt_exec *dead;
  bb_ring frontier; /* of rt_task, FIFO */
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
  bb_ring ingress; /* of rt_event, FIFO */
  size_t ingress_bytes;
  bb_ring outbound; /* of rt_outbound, FIFO */
  size_t outbound_dropped;

  rt_book book;
  uint64_t rng;
  bb_ring dedup; /* of uint64_t: the latest dedup_window (peer, request, site) keys */

  rt_counter *counters;
  size_t n_counters, cap_counters;

  rt_steps acc, batch;
  bool failed_nomem; /* an allocation failed where no error could be returned */

  /* Framework-op state (syscalls.c, freed by rt_syscalls_free): which DeadlineMatch ops
   * already fired in which execution, and the named tables of Limit, Serialize, Hold and
   * Record with an index over them and the bytes their values hold. */
  struct rt_latch *latches;
  size_t n_latches, cap_latches;
  struct rt_named *named;
  size_t n_named, cap_named;
  bb_strmap named_index;
  size_t named_bytes;
};

/* ---- internal API (src/runtime) ------------------------------------------------------- */

/* engine.c */
rt_exec *rt_exec_new(bb_node *n, uint32_t graph, rt_exec *parent, int target);
void rt_exec_unref(bb_node *n, rt_exec *e);
void rt_exec_collect(bb_node *n);
int rt_write(bb_node *n, rt_exec *e, uint32_t site, bb_val *v, size_t charged); /* takes v */
void rt_push_ready(bb_node *n, rt_exec *e, uint32_t site);
void rt_seed(bb_node *n, rt_exec *e);
/* Makes an op and everything downstream of it in e runnable again (an Interval tick). */
void rt_rearm(bb_node *n, rt_exec *e, uint32_t op);
int rt_push(bb_node *n, rt_exec *e, uint32_t op);
int rt_pending_add(bb_node *n, uint64_t command, rt_exec *e, uint32_t op);
rt_pending *rt_pending_find(bb_node *n, uint64_t command);
void rt_pending_remove(bb_node *n, rt_pending *p);
void rt_complete(bb_node *n, uint64_t command, bb_val *const *vals, size_t n_vals);
void rt_fail_command(bb_node *n, uint64_t command, const char *detail);
void rt_op_failed(bb_node *n, rt_exec *e, uint32_t op, const char *reason, const char *detail);
int rt_drain(bb_node *n, size_t *budget);

/* node.c */
int rt_ingress_push(bb_node *n, rt_event *ev, size_t limit);

/* timers.c */
int rt_timer_add(bb_node *n, uint64_t at, rt_timer_kind kind, uint64_t id, rt_exec *exec, uint32_t op,
                 uint32_t component);
bool rt_timer_pop_due(bb_node *n, rt_timer *out);

/* steps.c */
bb_step *rt_step(bb_node *n, bb_step_kind kind);
const char *rt_step_str(bb_node *n, const char *s);
void rt_steps_release(bb_node *n, rt_steps *s);
/* The step list takes a reference to v (or, out of memory, does not: then drop the step). */
int rt_step_hold(bb_node *n, bb_val *v);
/* Takes ownership of p (freed when the steps are released, or now if that fails). */
int rt_step_own(bb_node *n, void *p);
/* Drops the step rt_step just made (one that could not be completed). */
void rt_step_cancel(bb_node *n);
void rt_count(bb_node *n, const char *name, uint64_t delta);
void rt_report(bb_node *n, bb_step_kind kind, const bb_peer_id *peer, const char *reason, const char *fmt, ...)
    BB_PRINTF(5, 6);

/* book.c */
rt_peer_entry *rt_book_find(const rt_book *b, const bb_peer_id *p);
rt_peer_entry *rt_book_get(bb_node *n, const bb_peer_id *p); /* creates */
int rt_book_add(bb_node *n, const bb_peer_id *p, const bb_address *a);
void rt_book_free(bb_node *n);

/* wire_ops.c */
int rt_send(rt_call *c, bb_error *err);
void rt_route(bb_node *n, rt_event *ev);
void rt_event_release(bb_node *n, rt_event *ev);
int rt_queue_outbound(bb_node *n, const bb_peer_id *peer, uint8_t *bytes, size_t len);
/* True when this (sender, request, site) was delivered before (DedupGateRx). */
bool rt_replayed(bb_node *n, rt_exec *e, uint64_t site);

/* syscalls.c */
rt_syscall_fn rt_syscall_find(const char *domain, const char *op_type);
/* Frees the state framework ops keep in the node (queues, holds, records, limits). */
void rt_syscalls_free(bb_node *n);

/* ctx.c */
int rt_invoke_component(bb_node *n, rt_call *c, bb_error *err);
void rt_component_timer(bb_node *n, uint32_t component, uint64_t token);
void rt_component_message(bb_node *n, rt_event *ev, rt_fill *f);

/* The component number that addresses a slot's component on every peer. */
uint32_t rt_component_number(const char *slot);

#endif /* BB_RUNTIME_NODE_H */
