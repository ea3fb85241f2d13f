/* Gates on the way in (DedupGateRx, PeerHealthGateRx, BackoffGateRx) and out
 * (PeerHealthGateTx, BackoffGateTx): a value passes, or the op fails with the reason. */
#include <inttypes.h>

#include "runtime/syscalls/syscall.h"
#include "bb/common.h"

/* A `peer` attribute (the peer's multihash bytes). */
static int attr_peer(rt_call *c, bb_peer_id *out, bb_error *err) {
  const bb_attr *a = bb_attr_find(&c->op->ir->attrs, BB_ATTR_PEER);
  if (!a || !a->has_s) {
    c->reason = "missing_attribute";
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s needs a `peer` attribute", c->op->ir->op_type);
  }
  return bb_peer_id_from_bytes(a->s.data, a->s.len, out, err);
}

static bool peer_blocked(const bb_node *n, const bb_peer_id *p) {
  const rt_peer_entry *e = rt_book_find(&n->book, p);
  return e && e->blocked;
}

static int need_source(rt_call *c, bb_error *err) {
  c->reason = "no_source_peer";
  return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: this execution did not come from a peer",
                      c->op->ir->op_type);
}

static int sys_dedup_rx(rt_call *c, bb_error *err) {
  if (!c->n_in || !c->in[0]) return need_input(c, err);
  if (!c->exec->has_src) return need_source(c, err);
  uint64_t site = c->graph->site_base + c->op->in[0];
  if (c->exec->wire_req_id && rt_replay_seen(&c->node->replay, &c->exec->src, c->exec->wire_req_id, site)) {
    c->reason = "duplicate";
    rt_count(&c->node->counters, "wire.duplicates", 1);
    return bb_error_set(err, BB_ERR_EXISTS, "DedupGateRx dropped a replayed delivery (request %" PRIu64 ")",
                        c->exec->wire_req_id);
  }
  return put_output(c, bb_val_retain(c->in[0]), err);
}

static int sys_peer_health_rx(rt_call *c, bb_error *err) {
  if (!c->n_in || !c->in[0]) return need_input(c, err);
  if (!c->exec->has_src) return need_source(c, err);
  if (peer_blocked(c->node, &c->exec->src)) {
    c->reason = "blocklisted";
    return bb_error_set(err, BB_ERR_LIMIT, "PeerHealthGateRx denied a delivery from a blocked peer");
  }
  return put_output(c, bb_val_retain(c->in[0]), err);
}

static int sys_backoff_rx(rt_call *c, bb_error *err) {
  if (!c->n_in || !c->in[0]) return need_input(c, err);
  if (!c->exec->has_src) return need_source(c, err);
  return put_output(c, bb_val_retain(c->in[0]), err);
}

static int sys_peer_gate_tx(rt_call *c, bb_error *err) {
  bb_peer_id p;
  int rc = attr_peer(c, &p, err);
  if (rc) return rc;
  if (peer_blocked(c->node, &p)) {
    c->reason = "blocklisted";
    return bb_error_set(err, BB_ERR_LIMIT, "%s denied a send to a blocked peer", c->op->ir->op_type);
  }
  return emit_trigger(c, err);
}

const rt_syscall rt_syscalls_gates[] = {
    {BB_DOMAIN_SYSCALL, "DedupGateRx", sys_dedup_rx},
    {BB_DOMAIN_SYSCALL, "PeerHealthGateRx", sys_peer_health_rx},
    {BB_DOMAIN_SYSCALL, "BackoffGateRx", sys_backoff_rx},
    {BB_DOMAIN_SYSCALL, "PeerHealthGateTx", sys_peer_gate_tx},
    {BB_DOMAIN_SYSCALL, "BackoffGateTx", sys_peer_gate_tx},
};
const size_t rt_syscalls_gates_count = sizeof rt_syscalls_gates / sizeof *rt_syscalls_gates;
