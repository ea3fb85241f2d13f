/* What execution mutates: executions and the tasks of the frontier, the call frame of a
 * firing op, timers, operations waiting for completions, queued events and envelopes,
 * steps, the address book, counters, and the context a component runs in. */
#ifndef BBI_RUNTIME_EXEC_H
#define BBI_RUNTIME_EXEC_H

#include "runtime/graph.h"

typedef struct rt_exec rt_exec;

/* ---- executions ----------------------------------------------------------------------- */

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

/* What a firing op gets: inputs and outputs by position. */
struct rt_call {
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
};

/* ---- timers and pending work ------------------------------------------------------------ */

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

/* An op waiting for the completion of `command`. */
typedef struct rt_pending {
  uint64_t command;
  rt_exec *exec;
  uint32_t op;
  bool used;
} rt_pending;

/* ---- queues ------------------------------------------------------------------------------ */

typedef enum rt_event_kind {
  RT_EV_ENVELOPE,
  RT_EV_INVOKE,
  RT_EV_COMPLETE,
  RT_EV_FAIL
} rt_event_kind;

/* One fill of a delivered envelope, decoded at delivery. */
typedef struct rt_fill {
  bool control;          /* a control-plane message (component, op), else a data-plane value */
  uint64_t site;         /* data plane: the wire id */
  uint32_t component;    /* control plane: the component number in the address */
  char *op;              /* control plane: the op name (owned) */
  uint8_t *payload;      /* control plane: the raw payload (owned) */
  size_t payload_len;
  bb_val *value;         /* data plane */
  size_t charged;
  int index;
} rt_fill;

/* What waits in the ingress queue for the next poll. */
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

/* An encoded envelope waiting to be handed out as a SEND step. */
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

/* ---- the address book and counters --------------------------------------------------------- */

typedef struct rt_peer_entry {
  bb_peer_id peer;
  bb_address *addrs;
  size_t n_addrs;
  bool blocked;
  bool sent;          /* a wire.Send queued data for this peer (at sent_ns) */
  uint64_t sent_ns;   /* the node's clock then: what round membership is judged by */
  uint64_t last_used; /* the book's use clock at the last send, receipt or insert */
} rt_peer_entry;

typedef struct rt_book {
  rt_peer_entry *items;
  size_t len, cap;
  uint32_t *slots; /* open addressing over items, by peer bytes */
  size_t n_slots;
  uint64_t clock;  /* ticks once per use; the least recently used entry is evicted first */
} rt_book;

typedef struct rt_counter {
  char *name;
  uint64_t value;
} rt_counter;

/* ---- components at run time ------------------------------------------------------------------ */

struct bb_ctx {
  bb_node *node;
  rt_component *component;
  rt_exec *exec;
  uint64_t now;
  uint64_t deferred; /* the command bb_ctx_defer minted (0: none) */
  const bb_peer_id *source;
};

#endif /* BBI_RUNTIME_EXEC_H */
