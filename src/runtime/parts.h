/* The parts of a node that code below the engine reaches — a component through its
 * bb_ctx, a wire.Send — without the node itself. The node holds one, pointing at its
 * own parts; nothing here owns what it points to. */
#ifndef BBI_RUNTIME_PARTS_H
#define BBI_RUNTIME_PARTS_H

#include "runtime/admission.h"
#include "runtime/book.h"
#include "runtime/components.h"
#include "runtime/outbound.h"
#include "runtime/steps.h"
#include "runtime/timers.h"

struct rt_parts {
  const bb_allocator *alloc;
  const bb_peer_id *self;
  const bb_address *self_addrs; /* this node's own addresses, what envelopes claim */
  size_t n_self_addrs;
  uint64_t *rng;           /* bb_ctx_random's splitmix64 state */
  uint64_t *next_command;  /* the next command id (bb_ctx_defer, timers, BootstrapDispatch) */
  uint64_t *next_wire_req; /* the next request id a Send mints */
  rt_components *components;
  rt_book *book;
  const rt_admission *admission;
  rt_outbound_queue *outbound;
  rt_timers *timers;
  rt_steps *steps; /* where steps accumulate */
  rt_counters *counters;
  bb_sign_fn sign; /* the host's signer (NULL: none) */
  void *sign_user;
};

#endif /* BBI_RUNTIME_PARTS_H */
