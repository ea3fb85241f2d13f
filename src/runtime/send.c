/* The way out: wire.Send writes each value straight into one envelope per destination
 * peer, and envelopes wait in the outbound queue (oldest dropped past max_outbound) until
 * a poll hands them out as SEND steps. A Send to more peers than the queue holds fails
 * as a whole before it queues anything: dropping part of its own broadcast would look,
 * downstream, like peers that never answered. */
#include <string.h>

#include "runtime/envelope.h"
#include "runtime/parts.h"
#include "runtime/send.h"
#include "bb/bytes.h"
#include "bb/common.h"
#include "util/hash.h"
#include "util/mem.h"

/* The fills of one Send: each suffix is one /site segment (at most 11 bytes); past 16
 * fills, every one of them still goes out, from arrays on the heap. */
typedef struct send_fills {
  bb_slot_fill stack[16], *items;
  uint8_t suffix_stack[16][16], (*suffix)[16];
  uint32_t n;
} send_fills;

static bool is_fill_input(const rt_op *o, uint32_t input) {
  for (uint32_t f = 0; f < o->n_fills; f++)
    if (o->fills[f].input == input) return true;
  return false;
}

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

static int fills_init(send_fills *fs, const rt_call *c) {
  const rt_op *o = c->op;
  const bb_allocator *alloc = c->parts->alloc;
  fs->n = o->n_fills;
  fs->items = fs->stack;
  fs->suffix = fs->suffix_stack;
  if (fs->n > 16) {
    fs->items = bbi_mem_calloc(alloc, fs->n, sizeof *fs->items);
    fs->suffix = bbi_mem_calloc(alloc, fs->n, sizeof *fs->suffix);
    if (!fs->items || !fs->suffix) {
      bbi_mem_free(alloc, fs->items);
      bbi_mem_free(alloc, fs->suffix);
      return BB_ERR_NOMEM;
    }
  }
  for (uint32_t f = 0; f < fs->n; f++) {
    const bb_val *v = c->in[o->fills[f].input];
    bb_slot_fill *x = &fs->items[f];
    x->dest_suffix = (bb_bytes){fs->suffix[f], rt_suffix_site(o->fills[f].site, fs->suffix[f], sizeof fs->suffix[f])};
    x->trigger_only = !v || bb_val_kind_of(v) == BB_VAL_TRIGGER;
    x->type_hash = bb_val_kind_hash(v ? (int)bb_val_kind_of(v) : BB_VAL_TRIGGER);
    x->payload = (bb_bytes){NULL, x->trigger_only ? 0 : bb_val_encoded_size(v)};
    x->write_payload = x->trigger_only ? NULL : write_value;
    x->payload_ctx = v;
  }
  return 0;
}

static void fills_free(send_fills *fs, const bb_allocator *alloc) {
  if (fs->items == fs->stack) return;
  bbi_mem_free(alloc, fs->items);
  bbi_mem_free(alloc, fs->suffix);
}

/* A PEER_RESOLVE_FAILED step: the book has no address for `to`. */
static void unresolved(const rt_call *c, const bb_peer_id *to) {
  rt_count(c->parts->counters, "send.unresolved_peer", 1);
  bb_step *s = rt_step(c->parts->steps, BB_STEP_PEER_RESOLVE_FAILED);
  if (!s) return;
  s->has_peer = true;
  s->peer = *to;
  s->module = c->module;
  s->op = c->op->label;
  s->reason = "no_address";
  s->detail = "the address book has no address for the destination peer (bb_node_add_peer)";
}

/* One envelope to `to`, queued; the book records that data went to it now. */
static int send_to(const rt_call *c, rt_sender *from, const rt_envelope_body *body, const bb_peer_id *to,
                   bb_error *err) {
  rt_parts *p = c->parts;
  rt_peer_entry *entry = rt_book_find(p->book, to);
  if (!entry || !entry->n_addrs) {
    unresolved(c, to);
    return 0;
  }
  uint8_t *bytes = NULL;
  size_t len = 0;
  int rc = rt_envelope_encode(p->alloc, from, entry->addrs, entry->n_addrs, body, &bytes, &len, err);
  if (rc) return rc;
  if ((rc = rt_outbound_push(p->outbound, to, bytes, len)))
    return bb_error_set(err, rc, "out of memory queueing an envelope");
  rt_count(p->counters, "send.envelopes", 1);
  entry->sent = true;
  entry->sent_ns = c->now;
  rt_book_touch(p->book, entry);
  return 0;
}

/* The destination peers: the first non-fill input holding peers (NULL: none). */
static const bb_val *destinations(const rt_call *c) {
  for (uint32_t i = 0; i < c->op->n_in; i++)
    if (!is_fill_input(c->op, i) && bb_val_as_peers(c->in[i])) return c->in[i];
  return NULL;
}

/* The deadline budget the envelopes carry: what is left of the execution's, else the
 * op's own. */
static uint64_t remaining_deadline(const rt_call *c) {
  const rt_exec *e = c->exec;
  if (e->deadline_at) return e->deadline_at > c->now ? e->deadline_at - c->now : 1;
  return c->op->deadline_ns > 0 ? (uint64_t)c->op->deadline_ns : 0;
}

int rt_send(rt_call *c, bb_error *err) {
  rt_parts *p = c->parts;
  const rt_exec *e = c->exec;
  const bb_val *peers = destinations(c);
  uint64_t req = e->wire_req_id ? forwarded_request(&e->src, e->wire_req_id) : (*p->next_wire_req)++;
  /* only the outputs the node declares: the engine releases no others */
  if (c->op->n_out > 0 && !(c->out[0] = bb_val_trigger(p->alloc)))
    return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  if (c->op->n_out > 1 && !(c->out[1] = bb_val_u64(p->alloc, BB_VAL_WIRE_REQ_ID, req)))
    return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  size_t n_peers = peers ? bb_val_count(peers) : 0;
  if (!n_peers) return 0; /* nobody to send to: not an error */
  if (n_peers > p->outbound->max) {
    c->reason = "outbound_limit";
    rt_count(p->counters, "send.refused_fanout", 1);
    return bb_error_set(err, BB_ERR_LIMIT,
                        "wire.Send to %zu peers: more envelopes than the outbound queue holds (max_outbound %zu)",
                        n_peers, p->outbound->max);
  }
  send_fills fs;
  if (fills_init(&fs, c)) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  rt_sender from;
  rt_sender_init(&from, p->self_addrs, p->n_self_addrs);
  rt_envelope_body body = {fs.items, fs.n, true, req, remaining_deadline(c)};
  int rc = 0;
  for (size_t i = 0; i < n_peers && !rc; i++) rc = send_to(c, &from, &body, &bb_val_as_peers(peers)[i], err);
  fills_free(&fs, p->alloc);
  return rc;
}
