/* The way in: bb_node_deliver checks an envelope against the caps, decodes each fill and
 * queues the envelope; at poll, routing writes each fill into the wire.Recv it names.
 * Only Recv payload sites accept data, fills of one envelope that land in one graph share
 * one execution, and every refusal is reported as a step. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "runtime/book.h"
#include "runtime/ctx.h"
#include "runtime/deliver.h"
#include "runtime/engine.h"
#include "runtime/ingress.h"
#include "runtime/steps.h"
#include "bb/common.h"
#include "util/hash.h"
#include "util/mem.h"
#include "util/ring.h"

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
    f->op = bbi_mem_strdup(n->alloc, op->op);
    f->payload = bbi_mem_alloc(n->alloc, sf->payload.len);
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
  ev.fills = env->n_fills ? bbi_mem_calloc(n->alloc, env->n_fills, sizeof *ev.fills) : NULL;
  if (env->n_fills && !ev.fills) {
    bb_envelope_free(env, n->alloc);
    return bb_error_set(err, BB_ERR_NOMEM, "deliver: out of memory");
  }
  for (size_t i = 0; i < env->n_fills; i++) {
    rt_fill f = {0};
    if (decode_fill(n, from, &env->fills[i], (int)i, &f) == 0) ev.fills[ev.n_fills++] = f;
    else {
      bbi_mem_free(n->alloc, f.op);
      bbi_mem_free(n->alloc, f.payload);
      bb_val_release(f.value);
    }
  }
  /* claimed addresses: only /p2p addresses of the sender itself, and only from a sender
   * the address book holds already or the admission hook admits */
  bool admitted = env->n_src_peer_addresses && rt_book_admits(n, from, BB_ADMIT_CLAIM);
  if (env->n_src_peer_addresses && !admitted) rt_count(n, "book.claims_refused", 1);
  for (size_t i = 0; admitted && i < env->n_src_peer_addresses; i++) {
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
  uint64_t key = bbi_fnv1a64(from->bytes, from->len) ^ (req * 0x9E3779B97F4A7C15ull) ^ (site * 0xC2B2AE3D27D4EB4Full);
  for (size_t i = 0; i < n->dedup.len; i++)
    if (*(const uint64_t *)bbi_ring_at(&n->dedup, i) == key) return true;
  if (n->dedup.len == n->cfg.dedup_window) bbi_ring_pop(&n->dedup, NULL); /* the oldest key leaves */
  bbi_ring_push(&n->dedup, n->alloc, &key); /* out of memory: this key is not remembered */
  return false;
}

bool rt_replayed(bb_node *n, rt_exec *e, uint64_t site) {
  return e->has_src && e->wire_req_id && seen_before(n, &e->src, e->wire_req_id, site);
}

void rt_route(bb_node *n, rt_event *ev) {
  rt_peer_entry *pe = rt_book_find(&n->book, &ev->from);
  if (pe) rt_book_touch(&n->book, pe);
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
      uint64_t type_hash = bb_val_kind_hash((int)bb_val_kind_of(f->value));
      fill_failed(n, &ev->from, f->index, type_hash, f->charged, "unknown_site", msg);
      continue;
    }
    size_t k = 0;
    while (k < n_execs && exec_graph[k] != gi) k++;
    if (k == n_execs) {
      if (n_execs == 8 || !(execs[k] = rt_exec_new(n, gi, NULL, g->target))) {
        uint64_t type_hash = bb_val_kind_hash((int)bb_val_kind_of(f->value));
        fill_failed(n, &ev->from, f->index, type_hash, f->charged, "execution_limit",
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
