/* The way in: bb_node_deliver checks an envelope against the caps, decodes each fill and
 * queues the envelope; at poll, routing writes each fill into every wire.Recv of my
 * partitions that listens to the wire it names, when the value fits the type the wire is
 * declared with. Only Recv payloads accept data, fills of one envelope that land in one
 * graph share one execution, and every refusal is reported as a step and counted. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "runtime/ctx.h"
#include "runtime/deliver.h"
#include "runtime/engine.h"
#include "bb/common.h"
#include "util/mem.h"

static void fill_failed(bb_node *n, const bb_peer_id *from, int index, uint64_t hash, size_t size, const char *reason,
                        const char *detail) {
  rt_count(&n->counters, "wire.rejected", 1);
  bb_step *s = rt_step(&n->acc, BB_STEP_WIRE_RECEIVE_FAILED);
  if (!s) return;
  s->has_peer = from != NULL;
  if (from) s->peer = *from;
  s->fill_index = index;
  s->type_hash = hash;
  s->count = size;
  s->reason = rt_step_str(&n->acc, reason);
  s->detail = rt_step_str(&n->acc, detail);
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
      if (!rt_ingress_fits(&n->ingress, sf->payload.len)) {
        char msg[160];
        snprintf(msg, sizeof msg, "ingress byte budget exhausted: %zu bytes held, %zu more would pass %zu",
                 n->ingress.bytes, sf->payload.len, n->ingress.budget);
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
      rt_ingress_charge(&n->ingress, f->charged);
    }
    if (!f->value) {
      fill_failed(n, from, index, sf->type_hash, sf->payload.len, "out_of_memory", "out of memory");
      return 1;
    }
    return 0;
  }
  if (comp && op) {
    f->control = true;
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
  rt_advance(n, now_ns);
  if (n->ingress.events.len >= n->cfg.max_ingress_events) {
    rt_count(&n->counters, "ingress.refused", 1);
    return bb_error_set(err, BB_ERR_LIMIT, "deliver: the ingress queue is full (%zu events); poll first",
                        n->ingress.events.len);
  }
  bb_envelope *env = NULL;
  int rc = bb_envelope_decode(bytes, len, &n->envelope_caps, n->alloc, &env, err);
  if (rc) {
    rt_count(&n->counters, "wire.invalid_envelopes", 1);
    return rc;
  }
  if (env->schema_version < BB_ENVELOPE_SCHEMA_WIRE_IDS) {
    /* its sites are numbers of the sender's artifact, not wire ids: routing them could
     * land a value anywhere */
    uint32_t v = env->schema_version;
    bb_envelope_free(env, n->alloc);
    rt_count(&n->counters, "wire.invalid_envelopes", 1);
    rt_count(&n->counters, "wire.old_schema", 1);
    return bb_error_set(err, BB_ERR_UNSUPPORTED,
                        "deliver: envelope schema_version %" PRIu32 " numbers sites by their place in the sender's "
                        "artifact; this node reads version %d (sites are wire ids): the sender runs an older "
                        "bytesandbrains",
                        v, BB_ENVELOPE_SCHEMA_VERSION);
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
  bool admitted =
      env->n_src_peer_addresses && rt_admission_admits(&n->admission, &n->book, n->now, from, BB_ADMIT_CLAIM);
  if (env->n_src_peer_addresses && !admitted) rt_count(&n->counters, "book.claims_refused", 1);
  for (size_t i = 0; admitted && i < env->n_src_peer_addresses; i++) {
    bb_address a;
    const bb_addr_segment *p2p;
    if (bb_address_from_bytes(env->src_peer_addresses[i].data, env->src_peer_addresses[i].len, &a, NULL) == 0 &&
        (p2p = bb_address_find(&a, BB_ADDR_P2P)) && bb_peer_id_equal(&p2p->peer, from))
      rt_book_add(&n->book, from, &a);
  }
  bb_envelope_free(env, n->alloc);
  if ((rc = rt_ingress_push(&n->ingress, &ev, n->cfg.max_ingress_events))) {
    rt_event_release(&n->ingress, &ev);
    return bb_error_set(err, rc, "deliver: out of memory queueing the envelope");
  }
  rt_count(&n->counters, "wire.envelopes_received", 1);
  rt_count(&n->counters, "wire.bytes_received", len);
  return 0;
}

int bb_node_signed(bb_node *n, const char *slot, const uint8_t signature[64], uint64_t now_ns, bb_error *err) {
  if (!n || !slot || !signature) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "signed: node, slot and signature");
  const rt_component *c = rt_component_by_slot(&n->components, slot);
  if (!c) return bb_error_set(err, BB_ERR_NOT_FOUND, "signed: no component is bound at slot `%s`", slot);
  rt_advance(n, now_ns);
  if (n->ingress.events.len >= n->cfg.max_ingress_events) {
    rt_count(&n->counters, "ingress.refused", 1);
    return bb_error_set(err, BB_ERR_LIMIT, "signed: the ingress queue is full (%zu events); poll first",
                        n->ingress.events.len);
  }
  /* a control message from this node itself: no peer can send one */
  rt_event ev = {.kind = RT_EV_ENVELOPE, .at = n->now, .from = n->self};
  ev.fills = bbi_mem_calloc(n->alloc, 1, sizeof *ev.fills);
  if (ev.fills) {
    ev.n_fills = 1;
    ev.fills[0] = (rt_fill){.control = true, .component = c->number, .payload_len = 64};
    ev.fills[0].op = bbi_mem_strdup(n->alloc, BB_SIGNED_OP);
    ev.fills[0].payload = bbi_mem_alloc(n->alloc, 64);
    if (ev.fills[0].payload) memcpy(ev.fills[0].payload, signature, 64);
  }
  if (!ev.fills || !ev.fills[0].op || !ev.fills[0].payload || rt_ingress_push(&n->ingress, &ev, n->cfg.max_ingress_events)) {
    rt_event_release(&n->ingress, &ev);
    return bb_error_set(err, BB_ERR_NOMEM, "signed: out of memory");
  }
  return 0;
}

/* ---- routing (at poll) ------------------------------------------------------------------- */

/* The graphs one envelope can start executions in (its fills are capped; each graph
 * beyond these is refused with execution_limit). */
#define RT_ENVELOPE_GRAPHS 8

size_t rt_first_wire(const bb_node *n, uint64_t id) {
  size_t lo = 0, hi = n->n_wires;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (n->wires[mid].id < id) lo = mid + 1;
    else hi = mid;
  }
  return lo < n->n_wires && n->wires[lo].id == id ? lo : n->n_wires;
}

/* The execution of this envelope in graph gi: one per graph, made on first use. */
static rt_exec *envelope_exec(bb_node *n, rt_event *ev, uint32_t gi, rt_exec **execs, uint32_t *exec_graph,
                              size_t *n_execs) {
  for (size_t k = 0; k < *n_execs; k++)
    if (exec_graph[k] == gi) return execs[k];
  rt_exec *e = *n_execs < RT_ENVELOPE_GRAPHS ? rt_exec_new(n, gi, NULL, n->graphs[gi].target) : NULL;
  if (!e) return NULL;
  e->has_src = true;
  e->src = ev->from;
  e->wire_req_id = ev->wire_req_id;
  e->born_ns = ev->at;
  if (ev->remaining_deadline_ns) e->deadline_at = ev->at + ev->remaining_deadline_ns;
  execs[*n_execs] = e;
  exec_graph[(*n_execs)++] = gi;
  return e;
}

/* Writes a data-plane fill into each Recv of its wire, or reports why it is refused. */
static void route_fill(bb_node *n, rt_event *ev, rt_fill *f, rt_exec **execs, uint32_t *exec_graph, size_t *n_execs) {
  uint64_t hash = bb_val_kind_hash((int)bb_val_kind_of(f->value));
  size_t at = rt_first_wire(n, f->site);
  if (at == n->n_wires) {
    char msg[200];
    snprintf(msg, sizeof msg, "no wire.Recv of a partition this node runs listens to wire 0x%016" PRIx64, f->site);
    rt_count(&n->counters, "wire.unknown_site", 1);
    fill_failed(n, &ev->from, f->index, hash, f->charged, "unknown_site", msg);
    return;
  }
  const rt_wire *w = &n->wires[at];
  if (!bb_val_fits_type(f->value, w->type)) {
    char msg[BB_WIRE_NAME_MAX + 200], have[64];
    snprintf(msg, sizeof msg, "wire `%s` carries %s (%s), the fill holds %s", w->name, w->type,
             bb_type_value_kind(w->type), bb_val_describe(f->value, have, sizeof have));
    rt_count(&n->counters, "wire.type_mismatch", 1);
    fill_failed(n, &ev->from, f->index, hash, f->charged, "type_mismatch", msg);
    return;
  }
  /* every Recv of the wire gets the value; its bytes are charged once */
  for (; at < n->n_wires && n->wires[at].id == f->site; at++) {
    w = &n->wires[at];
    const rt_graph *g = &n->graphs[w->graph];
    rt_exec *e = envelope_exec(n, ev, w->graph, execs, exec_graph, n_execs);
    if (!e) {
      fill_failed(n, &ev->from, f->index, hash, f->charged, "execution_limit",
                  "too many executions alive (max_executions) or out of memory");
      return;
    }
    uint32_t sender = g->recv_sender[w->site];
    if (sender != RT_NONE && !e->vals[sender]) rt_write(n, e, sender, bb_val_peer(n->alloc, &ev->from), 0);
    rt_write(n, e, w->site, bb_val_retain(f->value), f->charged);
    f->charged = 0;
    rt_push_ready(n, e, w->site);
    if (sender != RT_NONE) rt_push_ready(n, e, sender);
  }
  rt_count(&n->counters, "wire.fills_delivered", 1);
}

void rt_route(bb_node *n, rt_event *ev) {
  rt_peer_entry *pe = rt_book_find(&n->book, &ev->from);
  if (pe) rt_book_touch(&n->book, pe);
  if (pe && pe->blocked) {
    rt_count(&n->counters, "wire.blocked", 1);
    rt_report(&n->acc, BB_STEP_INGRESS_DROPPED, &ev->from, "blocklisted", "envelope from a blocked peer dropped");
    rt_event_release(&n->ingress, ev);
    return;
  }
  if (ev->remaining_deadline_ns && n->now > ev->at + ev->remaining_deadline_ns) {
    rt_count(&n->counters, "wire.expired", 1);
    rt_report(&n->acc, BB_STEP_INGRESS_DROPPED, &ev->from, "deadline_expired",
              "envelope held %" PRIu64 " ns, past its remaining deadline of %" PRIu64 " ns", n->now - ev->at,
              ev->remaining_deadline_ns);
    rt_event_release(&n->ingress, ev);
    return;
  }
  /* data plane: one execution per destination graph */
  rt_exec *execs[RT_ENVELOPE_GRAPHS] = {0};
  uint32_t exec_graph[RT_ENVELOPE_GRAPHS];
  size_t n_execs = 0;
  for (size_t i = 0; i < ev->n_fills; i++) {
    rt_fill *f = &ev->fills[i];
    if (f->control) rt_component_message(&n->parts, n->now, &ev->from, f->component, f->op, f->payload, f->payload_len);
    else route_fill(n, ev, f, execs, exec_graph, &n_execs);
  }
  for (size_t k = 0; k < n_execs; k++) rt_exec_unref(n, execs[k]);
  rt_event_release(&n->ingress, ev);
}
