/* The ingress queue, a part of its own: envelopes, invokes and completions wait here, in
 * order, for a poll, and the bytes values hold — queued here or written into executions —
 * count against the ingress byte budget until released. A snapshot is taken only when
 * the queue is empty, so it has no section of its own; the bytes executions hold are
 * charged again when they are restored. */
#ifndef BBI_RUNTIME_INGRESS_H
#define BBI_RUNTIME_INGRESS_H

#include "bb/runtime.h"
#include "util/ring.h"

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

/* Invariant: `bytes` is the sum of every live charge (queued events' values and the
 * values executions hold), each charged once and returned once. */
typedef struct rt_ingress {
  const bb_allocator *alloc;
  bbi_ring events; /* of rt_event, FIFO */
  size_t bytes;    /* charged against the ingress byte budget */
  size_t budget;   /* ingress_byte_budget */
} rt_ingress;

void rt_ingress_init(rt_ingress *q, const bb_allocator *alloc, size_t budget);
/* Whether `more` bytes fit the budget beside what is charged. */
bool rt_ingress_fits(const rt_ingress *q, size_t more);
/* Charges bytes a value now holds against the budget (where a peer or the host hands
 * them in, rt_ingress_fits says first whether they fit). */
static inline void rt_ingress_charge(rt_ingress *q, size_t bytes) { q->bytes += bytes; }
/* Returns the bytes a released value held. */
static inline void rt_ingress_uncharge(rt_ingress *q, size_t bytes) { q->bytes -= bytes; }
/* Queues a copy of *ev (which then owns nothing); BB_ERR_LIMIT when `limit` events wait,
 * BB_ERR_NOMEM. */
int rt_ingress_push(rt_ingress *q, rt_event *ev, size_t limit);
/* The k-th queued event. */
rt_event *rt_ingress_at(const rt_ingress *q, size_t k);
/* Frees what an event owns, returns its bytes to the budget and zeroes it. */
void rt_event_release(rt_ingress *q, rt_event *ev);
/* Releases every queued event and frees the queue. */
void rt_ingress_free(rt_ingress *q);

#endif /* BBI_RUNTIME_INGRESS_H */
