/* The way out: wire.Send writes each value straight into one envelope per destination
 * peer, and envelopes wait in the outbound queue (oldest dropped past max_outbound) until
 * a poll hands them out as SEND steps. A Send to more peers than the queue holds fails
 * as a whole before it queues anything: dropping part of its own broadcast would look,
 * downstream, like peers that never answered. */
#include <string.h>

#include "runtime/book.h"
#include "runtime/send.h"
#include "runtime/steps.h"
#include "bb/bytes.h"
#include "bb/common.h"
#include "util/hash.h"
#include "util/mem.h"
#include "util/ring.h"

/* Addresses written per destination peer (its address book entry holds at most 8). */
#define MAX_DEST 8

/* ---- outbound -------------------------------------------------------------------------- */

int rt_queue_outbound(bb_node *n, const bb_peer_id *peer, uint8_t *bytes, size_t len) {
  rt_outbound old;
  if (n->outbound.len == n->cfg.max_outbound && bbi_ring_pop(&n->outbound, &old)) { /* the oldest goes */
    bbi_mem_free(n->alloc, old.bytes);
    n->outbound_dropped++;
    rt_count(n, "outbound.dropped", 1);
  }
  if (bbi_ring_push(&n->outbound, n->alloc, &(rt_outbound){*peer, bytes, len})) {
    bbi_mem_free(n->alloc, bytes);
    return BB_ERR_NOMEM;
  }
  return 0;
}

/* ---- wire.Send --------------------------------------------------------------------------- */

static bool is_fill_input(const rt_op *o, uint32_t input) {
  for (uint32_t f = 0; f < o->n_fills; f++)
    if (o->fills[f].input == input) return true;
  return false;
}

static size_t address_bytes(const bb_address *a, uint8_t *buf, size_t cap) { return bb_address_to_bytes(a, buf, cap); }

/* Each envelope gets the value written straight into it: one copy per destination. */
static size_t write_value(const void *value, uint8_t *out) { return bb_val_encode_into(value, out); }

/* The request id a Send forwards for an execution an envelope started. Receivers key
 * replays by (sender, request id, site), and this node is the sender of both what it
 * forwards and what it starts; the ids it mints count from 1, as every peer's do, so a
 * forwarded id must never equal one of them. It is derived from (origin, incoming id)
 * with the top bit set, which minted ids never reach, so replays of one incoming envelope
 * still forward one id. */
static uint64_t forwarded_request(const bb_peer_id *origin, uint64_t req) {
  uint8_t key[BB_PEER_ID_MAX + 8];
  size_t len = origin->len <= BB_PEER_ID_MAX ? origin->len : BB_PEER_ID_MAX;
  memcpy(key, origin->bytes, len);
  bb_le_put_u64(key + len, req);
  return bbi_fnv1a64(key, len + 8) | (1ull << 63);
}

int rt_send(rt_call *c, bb_error *err) {
  bb_node *n = c->node;
  const rt_op *o = c->op;
  rt_exec *e = c->exec;
  /* the destination peers: the first non-fill input holding peers */
  const bb_val *peers = NULL;
  for (uint32_t i = 0; i < o->n_in && !peers; i++)
    if (!is_fill_input(o, i) && bb_val_as_peers(c->in[i]))
      peers = c->in[i];
  uint64_t req = e->wire_req_id ? forwarded_request(&e->src, e->wire_req_id) : n->next_wire_req++;
  /* only the outputs the node declares: the engine releases no others */
  if (o->n_out > 0 && !(c->out[0] = bb_val_trigger(n->alloc))) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  if (o->n_out > 1 && !(c->out[1] = bb_val_u64(n->alloc, BB_VAL_WIRE_REQ_ID, req)))
    return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  if (!peers || !bb_val_count(peers)) return 0; /* nobody to send to: not an error */
  if (bb_val_count(peers) > n->cfg.max_outbound) {
    c->reason = "outbound_limit";
    rt_count(n, "send.refused_fanout", 1);
    return bb_error_set(err, BB_ERR_LIMIT,
                        "wire.Send to %zu peers: more envelopes than the outbound queue holds (max_outbound %zu)",
                        (size_t)bb_val_count(peers), n->cfg.max_outbound);
  }

  /* each suffix is one /site segment (at most 11 bytes); past 16 fills, every one of
   * them still goes out, from arrays on the heap */
  bb_slot_fill fills_stack[16], *fills = fills_stack;
  uint8_t suffix_stack[16][16], (*suffix)[16] = suffix_stack;
  uint32_t nf = o->n_fills;
  if (nf > 16) {
    fills = bbi_mem_calloc(n->alloc, nf, sizeof *fills);
    suffix = bbi_mem_calloc(n->alloc, nf, sizeof *suffix);
    if (!fills || !suffix) {
      bbi_mem_free(n->alloc, fills);
      bbi_mem_free(n->alloc, suffix);
      return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
    }
  }
  int rc = 0;
  for (uint32_t f = 0; f < nf && !rc; f++) {
    const bb_val *v = c->in[o->fills[f].input];
    bb_address a = {.n = 1};
    a.seg[0].kind = BB_ADDR_SITE;
    a.seg[0].value = o->fills[f].site;
    fills[f].dest_suffix = (bb_bytes){suffix[f], address_bytes(&a, suffix[f], sizeof suffix[f])};
    fills[f].trigger_only = !v || bb_val_kind_of(v) == BB_VAL_TRIGGER;
    fills[f].type_hash = bb_val_kind_hash(v ? (int)bb_val_kind_of(v) : BB_VAL_TRIGGER);
    fills[f].payload = (bb_bytes){NULL, fills[f].trigger_only ? 0 : bb_val_encoded_size(v)};
    fills[f].write_payload = fills[f].trigger_only ? NULL : write_value;
    fills[f].payload_ctx = v;
  }
  uint8_t src_buf[BB_ADDR_MAX_SEGMENTS][512];
  bb_bytes src[BB_ADDR_MAX_SEGMENTS];
  size_t n_src = 0;
  for (size_t i = 0; i < n->n_self_addrs && n_src < BB_ADDR_MAX_SEGMENTS; i++, n_src++)
    src[n_src] = (bb_bytes){src_buf[n_src], address_bytes(&n->self_addrs[i], src_buf[n_src], sizeof src_buf[n_src])};
  uint64_t remaining = 0;
  if (e->deadline_at) remaining = e->deadline_at > n->now ? e->deadline_at - n->now : 1;
  else if (o->deadline_ns > 0) remaining = (uint64_t)o->deadline_ns;

  for (size_t p = 0; p < bb_val_count(peers) && !rc; p++) {
    const bb_peer_id *to = &bb_val_as_peers(peers)[p];
    rt_peer_entry *entry = rt_book_find(&n->book, to);
    if (!entry || !entry->n_addrs) {
      rt_count(n, "send.unresolved_peer", 1);
      bb_step *s = rt_step(n, BB_STEP_PEER_RESOLVE_FAILED);
      if (s) {
        s->has_peer = true;
        s->peer = *to;
        s->module = e->target >= 0 ? n->targets[e->target].name : c->graph->fn->name;
        s->op = o->label;
        s->reason = "no_address";
        s->detail = "the address book has no address for the destination peer (bb_node_add_peer)";
      }
      continue;
    }
    uint8_t dest_buf[MAX_DEST][512];
    bb_bytes dest[MAX_DEST];
    size_t n_dest = 0;
    for (size_t i = 0; i < entry->n_addrs && n_dest < MAX_DEST; i++, n_dest++)
      dest[n_dest] = (bb_bytes){dest_buf[n_dest], address_bytes(&entry->addrs[i], dest_buf[n_dest], 512)};
    bb_envelope env = {0};
    env.dest_peer_addresses = dest;
    env.n_dest_peer_addresses = n_dest;
    env.fills = fills;
    env.n_fills = nf;
    env.has_correlation = true;
    env.correlation_kind = BB_CORR_REQUEST;
    env.wire_req_id = req;
    env.remaining_deadline_ns = remaining;
    env.schema_version = BB_ENVELOPE_SCHEMA_VERSION;
    env.src_peer_addresses = src;
    env.n_src_peer_addresses = n_src;
    uint8_t *bytes = NULL;
    size_t len = 0;
    if ((rc = bb_envelope_encode(&env, n->alloc, &bytes, &len, err))) break;
    if ((rc = rt_queue_outbound(n, to, bytes, len))) {
      bb_error_set(err, rc, "out of memory queueing an envelope");
      break;
    }
    rt_count(n, "send.envelopes", 1);
    entry->sent = true;
    entry->sent_ns = n->now;
    rt_book_touch(&n->book, entry);
  }
  if (fills != fills_stack) {
    bbi_mem_free(n->alloc, fills);
    bbi_mem_free(n->alloc, suffix);
  }
  return rc;
}
