/* The host's calls on a node besides poll, deliver and bootstraps: app inputs and
 * completions, the address book and join tokens, introspection and teardown. */
#include <stdio.h>
#include <string.h>

#include "runtime/engine.h"
#include "runtime/syscalls/table.h"
#include "bb/common.h"
#include "util/mem.h"
#include "util/ring.h"
#include "util/strmap.h"

#define COMPLETION_DETAIL_MAX 4096

static int find_target(const bb_node *n, const char *module) {
  if (!module) return -1;
  size_t ml = strlen(module);
  for (size_t t = 0; t < n->n_targets; t++) {
    const char *name = n->targets[t].name;
    if (strcmp(name, module) == 0 || (strncmp(name, module, ml) == 0 && name[ml] == '#')) return (int)t;
  }
  return -1;
}

/* ---- app inputs ------------------------------------------------------------------------- */

int bb_node_invoke(bb_node *n, const char *module, const bb_named_value *inputs, size_t n_inputs, uint64_t now_ns,
                   bb_error *err) {
  rt_advance(n, now_ns);
  int t = find_target(n, module);
  if (t < 0) return bb_error_set(err, BB_ERR_NOT_FOUND, "invoke: `%s` is not a target of this node", module ? module : "");
  if (n_inputs > n->cfg.max_invoke_inputs)
    return bb_error_set(err, BB_ERR_LIMIT, "invoke: %zu inputs, at most %zu", n_inputs, n->cfg.max_invoke_inputs);
  const rt_graph *g = &n->graphs[n->targets[t].graph];
  size_t bytes = 0;
  for (size_t i = 0; i < n_inputs; i++) {
    if (!inputs[i].name || !inputs[i].value) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "invoke: input %zu", i);
    if (bb_strlist_find(&g->fn->inputs, inputs[i].name) < 0)
      return bb_error_set(err, BB_ERR_NOT_FOUND, "invoke: `%s` has no input `%s`", n->targets[t].name, inputs[i].name);
    size_t size = bb_val_encoded_size(inputs[i].value);
    if (size > n->cfg.max_app_event_bytes)
      return bb_error_set(err, BB_ERR_LIMIT, "invoke: input `%s` is %zu bytes, at most %zu", inputs[i].name, size,
                          n->cfg.max_app_event_bytes);
    bytes += size;
  }
  if (!rt_ingress_fits(&n->ingress, bytes))
    return bb_error_set(err, BB_ERR_LIMIT, "invoke: the ingress byte budget (%zu) is exhausted",
                        n->cfg.ingress_byte_budget);
  if (n->ingress.events.len >= n->cfg.max_ingress_events)
    return bb_error_set(err, BB_ERR_LIMIT, "invoke: the ingress queue is full; poll first");
  rt_event ev = {.kind = RT_EV_INVOKE, .at = n->now, .target = t};
  ev.names = bbi_mem_calloc(n->alloc, n_inputs + 1, sizeof *ev.names);
  ev.vals = bbi_mem_calloc(n->alloc, n_inputs + 1, sizeof *ev.vals);
  if (!ev.names || !ev.vals) {
    bbi_mem_free(n->alloc, ev.names);
    bbi_mem_free(n->alloc, ev.vals);
    return bb_error_set(err, BB_ERR_NOMEM, "invoke: out of memory");
  }
  for (size_t i = 0; i < n_inputs; i++) {
    ev.names[i] = bbi_mem_strdup(n->alloc, inputs[i].name);
    ev.vals[i] = bb_val_retain(inputs[i].value);
    ev.n_vals++;
    if (!ev.names[i]) {
      rt_event_release(&n->ingress, &ev);
      return bb_error_set(err, BB_ERR_NOMEM, "invoke: out of memory");
    }
  }
  ev.charged = bytes;
  rt_ingress_charge(&n->ingress, bytes);
  int rc = rt_ingress_push(&n->ingress, &ev, n->cfg.max_ingress_events);
  if (rc) {
    rt_event_release(&n->ingress, &ev);
    return bb_error_set(err, rc, "invoke: out of memory");
  }
  return 0;
}

int bb_node_bind_input(bb_node *n, const char *module, const char *input, bb_val *value, bb_error *err) {
  int t = find_target(n, module);
  if (t < 0) return bb_error_set(err, BB_ERR_NOT_FOUND, "bind_input: `%s` is not a target of this node",
                                 module ? module : "");
  rt_target *tg = &n->targets[t];
  const rt_graph *g = &n->graphs[tg->graph];
  long k = input ? bb_strlist_find(&g->fn->inputs, input) : -1;
  if (k < 0) return bb_error_set(err, BB_ERR_NOT_FOUND, "bind_input: `%s` has no input `%s`", tg->name,
                                 input ? input : "");
  if (!tg->bound && !(tg->bound = bbi_mem_calloc(n->alloc, g->n_in, sizeof *tg->bound)))
    return bb_error_set(err, BB_ERR_NOMEM, "bind_input: out of memory");
  bb_val_release(tg->bound[k]);
  tg->bound[k] = bb_val_retain(value);
  return 0;
}

int bb_node_deliver_event(bb_node *n, const char *module, const char *input, const uint8_t *bytes, size_t len,
                          uint64_t now_ns, bb_error *err) {
  bb_val *v = bb_val_bytes(n->alloc, bytes, len);
  if (!v) return bb_error_set(err, BB_ERR_NOMEM, "deliver_event: out of memory");
  bb_named_value in = {input, v};
  int rc = bb_node_invoke(n, module, &in, 1, now_ns, err);
  bb_val_release(v);
  return rc;
}

/* Completions get headroom past the event cap: refusing them would strand parked ops. */
static int queue_simple(bb_node *n, rt_event *ev, bb_error *err) {
  int rc = rt_ingress_push(&n->ingress, ev, n->cfg.max_ingress_events + 64);
  if (rc == BB_ERR_LIMIT) return bb_error_set(err, rc, "the ingress queue is full; poll first");
  if (rc) return bb_error_set(err, rc, "out of memory");
  return 0;
}

int bb_node_complete(bb_node *n, uint64_t command, bb_val *const *outputs, size_t n_outputs, bb_error *err) {
  rt_event ev = {.kind = RT_EV_COMPLETE, .at = n->now, .command = command};
  ev.vals = bbi_mem_calloc(n->alloc, n_outputs + 1, sizeof *ev.vals);
  if (!ev.vals) return bb_error_set(err, BB_ERR_NOMEM, "complete: out of memory");
  for (size_t i = 0; i < n_outputs; i++) ev.vals[i] = bb_val_retain(outputs[i]);
  ev.n_vals = n_outputs;
  int rc = queue_simple(n, &ev, err);
  if (rc) rt_event_release(&n->ingress, &ev);
  return rc;
}

int bb_node_fail(bb_node *n, uint64_t command, const char *detail, bb_error *err) {
  rt_event ev = {.kind = RT_EV_FAIL, .at = n->now, .command = command};
  size_t len = detail ? strlen(detail) : 0;
  if (len > COMPLETION_DETAIL_MAX) { /* cut at a UTF-8 boundary */
    len = COMPLETION_DETAIL_MAX;
    while (len && ((unsigned char)detail[len] & 0xC0) == 0x80) len--;
  }
  ev.detail = bbi_mem_alloc(n->alloc, len + 1);
  if (!ev.detail) return bb_error_set(err, BB_ERR_NOMEM, "fail: out of memory");
  if (len) memcpy(ev.detail, detail, len);
  ev.detail[len] = 0;
  int rc = queue_simple(n, &ev, err);
  if (rc) rt_event_release(&n->ingress, &ev);
  return rc;
}

/* ---- the address book and join tokens ------------------------------------------------------ */

int bb_node_add_peer(bb_node *n, const bb_peer_id *peer, const bb_address *address, bb_error *err) {
  return rt_book_add_or_explain(&n->book, peer, address, err);
}

void bb_node_forget_peer(bb_node *n, const bb_peer_id *peer) { rt_book_forget(&n->book, peer); }

int bb_node_block_peer(bb_node *n, const bb_peer_id *peer, bool blocked, bb_error *err) {
  return rt_book_block(&n->book, peer, blocked, err);
}

int bb_node_admit_token(bb_node *n, const bb_peer_id *peer, const uint8_t *token, size_t len, uint64_t now_unix_s,
                        uint64_t now_ns, bb_join_role *role, bb_error *err) {
  if (role) *role = BB_JOIN_NONE;
  if (!n || !peer) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "admit token: a node and a peer are required");
  if (n->admission.on) rt_advance(n, now_ns); /* a node without a policy refuses before it reads the clock */
  return rt_admission_verify(&n->admission, n->now, peer, token, len, now_unix_s, role, err);
}

bb_join_role bb_node_peer_role(const bb_node *n, const bb_peer_id *peer) {
  return n && peer && n->admission.on ? rt_admission_role(&n->admission, n->now, peer) : BB_JOIN_NONE;
}

/* ---- introspection ------------------------------------------------------------------------- */

const bb_peer_id *bb_node_self(const bb_node *n) { return &n->self; }
size_t bb_node_target_count(const bb_node *n) { return n->n_targets; }
const char *bb_node_target(const bb_node *n, size_t i) { return i < n->n_targets ? n->targets[i].name : NULL; }

void *bb_node_component(const bb_node *n, const char *slot, const bb_component_type **type) {
  const rt_component *c = rt_component_by_slot(&n->components, slot);
  if (type) *type = c ? c->type : NULL;
  return c ? c->self : NULL;
}

uint64_t bb_node_site(const bb_node *n, const char *module, const char *value) {
  int t = find_target(n, module);
  if (t < 0) return UINT64_MAX;
  const rt_graph *g = &n->graphs[n->targets[t].graph];
  uint32_t s;
  return bbi_strmap_get(&g->names, value, &s) ? g->site_base + s : UINT64_MAX;
}

uint64_t bb_node_counter(const bb_node *n, const char *name) { return rt_counter_value(&n->counters, name); }

void bb_node_stats_get(const bb_node *n, bb_node_stats *out) {
  out->executions = n->n_execs;
  out->frontier = n->frontier.len;
  out->pending_async = n->pending.len;
  out->timers = n->timers.len;
  out->ingress = n->ingress.events.len;
  out->outbound = n->outbound.items.len;
  out->ingress_bytes = n->ingress.bytes;
}

/* ---- teardown ------------------------------------------------------------------------------ */

/* What install fixed: graphs, targets and their bound inputs, wires, artifacts. */
static void free_installed(bb_node *n) {
  /* targets before graphs: their bound inputs are counted by their graph */
  for (size_t t = 0; t < n->n_targets; t++) {
    bbi_mem_free(n->alloc, n->targets[t].name);
    if (n->targets[t].bound) {
      const rt_graph *g = &n->graphs[n->targets[t].graph];
      for (uint32_t i = 0; i < g->n_in; i++) bb_val_release(n->targets[t].bound[i]);
      bbi_mem_free(n->alloc, n->targets[t].bound);
    }
  }
  bbi_mem_free(n->alloc, n->targets);
  for (uint32_t gi = 0; gi < n->n_graphs; gi++) {
    rt_graph *g = &n->graphs[gi];
    for (uint32_t oi = 0; oi < g->n_ops; oi++) {
      bbi_mem_free(n->alloc, g->ops[oi].in);
      bbi_mem_free(n->alloc, g->ops[oi].out);
      bbi_mem_free(n->alloc, g->ops[oi].label);
      bbi_mem_free(n->alloc, g->ops[oi].fills);
    }
    bbi_mem_free(n->alloc, g->ops);
    bbi_mem_free(n->alloc, g->site_names);
    bbi_strmap_free(&g->names);
    bbi_mem_free(n->alloc, g->cons_start);
    bbi_mem_free(n->alloc, g->cons);
    bbi_mem_free(n->alloc, g->formal_in);
    bbi_mem_free(n->alloc, g->formal_out);
    bbi_mem_free(n->alloc, g->out_index);
    bbi_mem_free(n->alloc, g->recv_sender);
  }
  bbi_mem_free(n->alloc, n->graphs);
  for (size_t i = 0; i < n->n_wires; i++) {
    bbi_mem_free(n->alloc, n->wires[i].name);
    bbi_mem_free(n->alloc, n->wires[i].type);
  }
  bbi_mem_free(n->alloc, n->wires);
  for (size_t k = 0; k < n->n_models; k++) bb_model_free(n->models[k]);
  bbi_mem_free(n->alloc, n->models);
}

void bb_node_free(bb_node *n) {
  if (!n) return;
  /* every reference to an execution first, then the executions */
  rt_ingress_free(&n->ingress);
  rt_engine_release(n);
  bbi_ring_free(&n->frontier, n->alloc);
  rt_syscalls_free(n);
  rt_pending_free(&n->pending);
  rt_timers_free(&n->timers);
  rt_outbound_free(&n->outbound);
  rt_steps_free(&n->acc);
  rt_steps_free(&n->batch);
  rt_components_free(&n->components);
  free_installed(n);
  rt_counters_free(&n->counters);
  rt_book_free(&n->book);
  rt_admission_free(&n->admission);
  rt_replay_free(&n->replay);
  bbi_mem_free(n->alloc, n->self_addrs);
  bbi_mem_free(n->alloc, n);
}
