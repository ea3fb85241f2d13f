/* The wire inside a node: wire.Send builds envelopes, bb_node_deliver checks and decodes
 * what arrives, and routing writes each fill into the wire.Recv it names (runtime.md §3,
 * with the [PORT] fixes: only Recv payload sites accept data, fills of one envelope that
 * land in one graph share one execution, every refusal is a step). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "runtime/node.h"
#include "util/bytes.h"
#include "util/hash.h"

/* Addresses written per destination peer (its address book entry holds at most 8). */
#define MAX_DEST 8

/* ---- outbound -------------------------------------------------------------------------- */

int rt_queue_outbound(bb_node *n, const bb_peer_id *peer, uint8_t *bytes, size_t len) {
  rt_outbound old;
  if (n->outbound.len == n->cfg.max_outbound && bb_ring_pop(&n->outbound, &old)) { /* drop the oldest */
    bb_mem_free(n->alloc, old.bytes);
    n->outbound_dropped++;
    rt_count(n, "outbound.dropped", 1);
  }
  if (bb_ring_push(&n->outbound, n->alloc, &(rt_outbound){*peer, bytes, len})) {
    bb_mem_free(n->alloc, bytes);
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
 * forwards and what it starts: forwarding the incoming id unchanged collided with the
 * ids this node mints (both count from 1 on every peer), so a relay and the node's own
 * message to the same site were taken for one replayed envelope. A forwarded id is
 * instead derived from (origin, incoming id) with the top bit set, which minted ids never
 * reach: replays of one incoming envelope still forward one id. */
static uint64_t forwarded_request(const bb_peer_id *origin, uint64_t req) {
  uint8_t key[BB_PEER_ID_MAX + 8];
  size_t len = origin->len <= BB_PEER_ID_MAX ? origin->len : BB_PEER_ID_MAX;
  memcpy(key, origin->bytes, len);
  bb_le_put_u64(key + len, req);
  return bb_fnv1a64(key, len + 8) | (1ull << 63);
}

int rt_send(rt_call *c, bb_error *err) {
  bb_node *n = c->node;
  const rt_op *o = c->op;
  rt_exec *e = c->exec;
  /* the destination peers: the first non-fill input holding peers */
  const bb_val *peers = NULL;
  for (uint32_t i = 0; i < o->n_in && !peers; i++)
    if (c->in[i] && !is_fill_input(o, i) && (c->in[i]->kind == BB_VAL_PEERS || c->in[i]->kind == BB_VAL_PEER))
      peers = c->in[i];
  uint64_t req = e->wire_req_id ? forwarded_request(&e->src, e->wire_req_id) : n->next_wire_req++;
  /* only the outputs the node declares: the engine releases no others */
  if (o->n_out > 0 && !(c->out[0] = bb_val_trigger(n->alloc))) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  if (o->n_out > 1 && !(c->out[1] = bb_val_u64(n->alloc, BB_VAL_WIRE_REQ_ID, req)))
    return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  if (!peers || !peers->n) return 0; /* nobody to send to: not an error (runtime.md §3.3) */

  /* each suffix is one /site segment (at most 11 bytes); past 16 fills they go to the heap
   * (they were cut off at 16: the rest of the Send's values were silently not sent) */
  bb_slot_fill fills_stack[16], *fills = fills_stack;
  uint8_t suffix_stack[16][16], (*suffix)[16] = suffix_stack;
  uint32_t nf = o->n_fills;
  if (nf > 16) {
    fills = bb_mem_calloc(n->alloc, nf, sizeof *fills);
    suffix = bb_mem_calloc(n->alloc, nf, sizeof *suffix);
    if (!fills || !suffix) {
      bb_mem_free(n->alloc, fills);
      bb_mem_free(n->alloc, suffix);
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
    fills[f].trigger_only = !v || v->kind == BB_VAL_TRIGGER;
    fills[f].type_hash = bb_val_kind_hash(v ? (int)v->kind : BB_VAL_TRIGGER);
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

  for (size_t p = 0; p < peers->n && !rc; p++) {
    const bb_peer_id *to = &peers->as.peers[p];
    const rt_peer_entry *entry = rt_book_find(&n->book, to);
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
    if ((rc = rt_queue_outbound(n, to, bytes, len))) bb_error_set(err, rc, "out of memory queueing an envelope");
    else rt_count(n, "send.envelopes", 1);
  }
  if (fills != fills_stack) {
    bb_mem_free(n->alloc, fills);
    bb_mem_free(n->alloc, suffix);
  }
  return rc;
}

/* ---- delivery -------------------------------------------------------------------------- */

void rt_event_release(bb_node *n, rt_event *ev) {
  for (size_t i = 0; i < ev->n_fills; i++) {
    rt_fill *f = &ev->fills[i];
    if (f->value) {
      bb_val_release(f->value);
      n->ingress_bytes -= f->charged;
    }
    bb_mem_free(n->alloc, f->op);
    bb_mem_free(n->alloc, f->payload);
  }
  bb_mem_free(n->alloc, ev->fills);
  for (size_t i = 0; i < ev->n_vals; i++) {
    bb_val_release(ev->vals[i]);
    if (ev->names) bb_mem_free(n->alloc, ev->names[i]);
  }
  bb_mem_free(n->alloc, ev->names);
  bb_mem_free(n->alloc, ev->vals);
  n->ingress_bytes -= ev->charged;
  bb_mem_free(n->alloc, ev->detail);
  memset(ev, 0, sizeof *ev);
}

static void fill_failed(bb_node *n, const bb_peer_id *from, int index, uint64_t hash, size_t size, const char *reason,
                        const char *detail) {
  rt_count(n, "wire.rejected", 1);
  bb_step *s = rt_step(n, BB_STEP_WIRE_RECEIVE_FAILED);
  if (!s) return;
  s->has_peer = from != NULL;
  if (from) s->peer = *from;
  s->fill_index = index;
  s->type_hash = hash;
  s->count = size;
  s->reason = rt_step_str(n, reason);
  s->detail = rt_step_str(n, detail);
}

/* Decodes one fill into f (0), or reports why it is refused (1). */
static int decode_fill(bb_node *n, const bb_peer_id *from, const bb_slot_fill *sf, int index, rt_fill *f) {
  bb_address a;
  bb_error err;
  f->index = index;
  if (bb_address_from_bytes(sf->dest_suffix.data, sf->dest_suffix.len, &a, &err)) {
    fill_failed(n, from, index, sf->type_hash, sf->payload.len, "bad_destination", err.message);
    return 1;
  }
  const bb_addr_segment *site = bb_address_find(&a, BB_ADDR_SITE);
  const bb_addr_segment *comp = bb_address_find(&a, BB_ADDR_COMPONENT);
  const bb_addr_segment *op = bb_address_find(&a, BB_ADDR_OP);
  if (site) {
    f->site = site->value;
    if (sf->trigger_only) {
      f->value = bb_val_trigger(n->alloc);
    } else {
      if (n->ingress_bytes + sf->payload.len > n->cfg.ingress_byte_budget) {
        char msg[160];
        snprintf(msg, sizeof msg, "ingress byte budget exhausted: %zu bytes held, %zu more would pass %zu",
                 n->ingress_bytes, sf->payload.len, n->cfg.ingress_byte_budget);
        fill_failed(n, from, index, sf->type_hash, sf->payload.len, "budget_exceeded", msg);
        return 1;
      }
      int rc = bb_val_decode(sf->type_hash, sf->payload.data, sf->payload.len, n->alloc, &f->value, &err);
      if (rc) {
        fill_failed(n, from, index, sf->type_hash, sf->payload.len,
                    rc == BB_ERR_NOT_FOUND ? "unknown_type_hash" : rc == BB_ERR_NOMEM ? "out_of_memory" : "decode_failed",
                    err.message);
        return 1;
      }
      f->charged = sf->payload.len;
      n->ingress_bytes += f->charged;
    }
    if (!f->value) {
      fill_failed(n, from, index, sf->type_hash, sf->payload.len, "out_of_memory", "out of memory");
      return 1;
    }
    return 0;
  }
  if (comp && op) {
    f->site = UINT64_MAX;
    f->component = (uint32_t)comp->value;
    f->op = bb_mem_strdup(n->alloc, op->op);
    f->payload = bb_mem_alloc(n->alloc, sf->payload.len);
    if (!f->op || !f->payload) {
      fill_failed(n, from, index, sf->type_hash, sf->payload.len, "out_of_memory", "out of memory");
      return 1;
    }
    if (sf->payload.len) memcpy(f->payload, sf->payload.data, sf->payload.len); /* an empty fill has no data */
    f->payload_len = sf->payload.len;
    return 0;
  }
  fill_failed(n, from, index, sf->type_hash, sf->payload.len, "bad_destination",
              "the destination is neither a site nor a component op");
  return 1;
}

int bb_node_deliver(bb_node *n, const bb_peer_id *from, const uint8_t *bytes, size_t len, uint64_t now_ns,
                    bb_error *err) {
  if (!n || !from || (!bytes && len)) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "deliver: node, peer and bytes");
  if (now_ns > n->now) n->now = now_ns;
  if (n->ingress.len >= n->cfg.max_ingress_events) {
    rt_count(n, "ingress.refused", 1);
    return bb_error_set(err, BB_ERR_LIMIT, "deliver: the ingress queue is full (%zu events); poll first",
                        n->ingress.len);
  }
  bb_envelope *env = NULL;
  int rc = bb_envelope_decode(bytes, len, &n->cfg.envelope_caps, n->alloc, &env, err);
  if (rc) {
    rt_count(n, "wire.invalid_envelopes", 1);
    return rc;
  }
  if (env->schema_version > BB_ENVELOPE_SCHEMA_VERSION) {
    uint32_t v = env->schema_version;
    bb_envelope_free(env, n->alloc);
    rt_count(n, "wire.invalid_envelopes", 1);
    return bb_error_set(err, BB_ERR_UNSUPPORTED, "deliver: envelope schema_version %" PRIu32 ", this node reads 1", v);
  }
  rt_event ev = {.kind = RT_EV_ENVELOPE, .at = n->now, .from = *from};
  ev.wire_req_id = env->has_correlation ? env->wire_req_id : 0;
  ev.remaining_deadline_ns = env->remaining_deadline_ns;
  ev.fills = env->n_fills ? bb_mem_calloc(n->alloc, env->n_fills, sizeof *ev.fills) : NULL;
  if (env->n_fills && !ev.fills) {
    bb_envelope_free(env, n->alloc);
    return bb_error_set(err, BB_ERR_NOMEM, "deliver: out of memory");
  }
  for (size_t i = 0; i < env->n_fills; i++) {
    rt_fill f = {0};
    if (decode_fill(n, from, &env->fills[i], (int)i, &f) == 0) ev.fills[ev.n_fills++] = f;
    else {
      bb_mem_free(n->alloc, f.op);
      bb_mem_free(n->alloc, f.payload);
      bb_val_release(f.value);
    }
  }
  /* claimed addresses: only /p2p addresses of the sender itself are believed */
  for (size_t i = 0; i < env->n_src_peer_addresses; i++) {
    bb_address a;
    const bb_addr_segment *p2p;
    if (bb_address_from_bytes(env->src_peer_addresses[i].data, env->src_peer_addresses[i].len, &a, NULL) == 0 &&
        (p2p = bb_address_find(&a, BB_ADDR_P2P)) && bb_peer_id_equal(&p2p->peer, from))
      rt_book_add(n, from, &a);
  }
  bb_envelope_free(env, n->alloc);
  if ((rc = rt_ingress_push(n, &ev, n->cfg.max_ingress_events))) {
    rt_event_release(n, &ev);
    return bb_error_set(err, rc, "deliver: out of memory queueing the envelope");
  }
  rt_count(n, "wire.envelopes_received", 1);
  return 0;
}

/* ---- routing (at poll) ------------------------------------------------------------------- */

static uint32_t graph_of_site(const bb_node *n, uint64_t site) {
  uint32_t lo = 0, hi = n->n_graphs;
  while (lo < hi) { /* last graph whose base <= site */
    uint32_t mid = lo + (hi - lo) / 2;
    if (n->graphs[mid].site_base <= site) lo = mid + 1;
    else hi = mid;
  }
  if (!lo) return RT_NONE;
  const rt_graph *g = &n->graphs[lo - 1];
  return site - g->site_base < g->n_sites ? lo - 1 : RT_NONE;
}

static bool seen_before(bb_node *n, const bb_peer_id *from, uint64_t req, uint64_t site) {
  uint64_t key = bb_fnv1a64(from->bytes, from->len) ^ (req * 0x9E3779B97F4A7C15ull) ^ (site * 0xC2B2AE3D27D4EB4Full);
  for (size_t i = 0; i < n->dedup.len; i++)
    if (*(const uint64_t *)bb_ring_at(&n->dedup, i) == key) return true;
  if (n->dedup.len == n->cfg.dedup_window) bb_ring_pop(&n->dedup, NULL); /* the oldest key leaves */
  bb_ring_push(&n->dedup, n->alloc, &key); /* out of memory: this key is not remembered */
  return false;
}

bool rt_replayed(bb_node *n, rt_exec *e, uint64_t site) {
  return e->has_src && e->wire_req_id && seen_before(n, &e->src, e->wire_req_id, site);
}

void rt_route(bb_node *n, rt_event *ev) {
  const rt_peer_entry *pe = rt_book_find(&n->book, &ev->from);
  if (pe && pe->blocked) {
    rt_count(n, "wire.blocked", 1);
    rt_report(n, BB_STEP_INGRESS_DROPPED, &ev->from, "blocklisted", "envelope from a blocked peer dropped");
    rt_event_release(n, ev);
    return;
  }
  if (ev->remaining_deadline_ns && n->now > ev->at + ev->remaining_deadline_ns) {
    rt_count(n, "wire.expired", 1);
    rt_report(n, BB_STEP_INGRESS_DROPPED, &ev->from, "deadline_expired",
              "envelope held %" PRIu64 " ns, past its remaining deadline of %" PRIu64 " ns", n->now - ev->at,
              ev->remaining_deadline_ns);
    rt_event_release(n, ev);
    return;
  }
  /* data plane: one execution per destination graph */
  rt_exec *execs[8] = {0};
  uint32_t exec_graph[8];
  size_t n_execs = 0;
  for (size_t i = 0; i < ev->n_fills; i++) {
    rt_fill *f = &ev->fills[i];
    if (f->site == UINT64_MAX) {
      rt_component_message(n, ev, f);
      continue;
    }
    uint32_t gi = graph_of_site(n, f->site);
    const rt_graph *g = gi == RT_NONE ? NULL : &n->graphs[gi];
    uint32_t local = g ? (uint32_t)(f->site - g->site_base) : RT_NONE;
    if (!g || !g->active || !g->is_recv[local]) {
      char msg[200];
      snprintf(msg, sizeof msg, "site %" PRIu64 " is not a wire.Recv payload of a partition this node runs", f->site);
      fill_failed(n, &ev->from, f->index, bb_val_kind_hash((int)f->value->kind), f->charged, "unknown_site", msg);
      continue;
    }
    size_t k = 0;
    while (k < n_execs && exec_graph[k] != gi) k++;
    if (k == n_execs) {
      if (n_execs == 8 || !(execs[k] = rt_exec_new(n, gi, NULL, g->target))) {
        fill_failed(n, &ev->from, f->index, bb_val_kind_hash((int)f->value->kind), f->charged, "execution_limit",
                    "too many executions alive (max_executions) or out of memory");
        continue;
      }
      rt_exec *e = execs[k];
      exec_graph[k] = gi;
      n_execs++;
      e->has_src = true;
      e->src = ev->from;
      e->wire_req_id = ev->wire_req_id;
      e->born_ns = ev->at;
      if (ev->remaining_deadline_ns) e->deadline_at = ev->at + ev->remaining_deadline_ns;
    }
    rt_exec *e = execs[k];
    uint32_t sender = g->recv_sender[local];
    if (sender != RT_NONE && !e->vals[sender]) rt_write(n, e, sender, bb_val_peer(n->alloc, &ev->from), 0);
    rt_write(n, e, local, f->value, f->charged);
    f->value = NULL;
    f->charged = 0;
    rt_push_ready(n, e, local);
    if (sender != RT_NONE) rt_push_ready(n, e, sender);
    rt_count(n, "wire.fills_delivered", 1);
  }
  for (size_t k = 0; k < n_execs; k++) rt_exec_unref(n, execs[k]);
  rt_event_release(n, ev);
}
