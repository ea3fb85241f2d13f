/* bb_node_take_over: a node freshly installed on a peer (from a newer artifact, say)
 * carries on where the node it replaces left off, as far as the peers it talks to can
 * tell: the clock, request ids that never repeat, the address book (with whom it sent
 * to and when), the named counters, the join tokens it verified (under the same join
 * policy), and what each component kept — its saved state and its timers — for the slots
 * both nodes bind to the same type. Executions belong to the old graphs and are not
 * carried. */
#include <string.h>

#include "runtime/node.h"
#include "bb/common.h"
#include "util/mem.h"

/* The component of `fresh` that takes over old's component c: same slot, same type. */
static long successor(const bb_node *fresh, const rt_component *c) {
  long to = rt_component_index(&fresh->components, c->slot);
  return to >= 0 && strcmp(fresh->components.items[to].type->type_name, c->type->type_name) == 0 ? to : -1;
}

static int carry_component(rt_component *to, const bb_node *old, const rt_component *from, bb_error *err) {
  if (!from->type->save || !to->type->load || !from->self || !to->self) return 0;
  uint8_t *state = NULL;
  size_t len = 0;
  int rc = from->type->save(from->self, old->alloc, &state, &len, err);
  if (!rc) rc = to->type->load(to->self, state, len, err);
  bbi_mem_free(old->alloc, state);
  if (rc) bb_error_prefix(err, "take_over: slot `%s`: ", to->slot);
  return rc;
}

/* Each slot both nodes bind to one type: the component's saved state, and its timers. */
static int carry_components(bb_node *fresh, const bb_node *old, bb_error *err) {
  int rc = 0;
  for (size_t i = 0; i < old->components.len && !rc; i++) {
    long to = successor(fresh, &old->components.items[i]);
    if (to >= 0) rc = carry_component(&fresh->components.items[to], old, &old->components.items[i], err);
  }
  for (size_t i = 0; i < old->timers.len && !rc; i++) {
    const rt_timer *t = &old->timers.items[i];
    long to = t->kind == RT_TIMER_COMPONENT ? successor(fresh, &old->components.items[t->component]) : -1;
    if (to >= 0 && (rc = rt_timers_add(&fresh->timers, t->at, RT_TIMER_COMPONENT, t->id, NULL, 0, (uint32_t)to)))
      bb_error_set(err, rc, "take_over: the timers of slot `%s` do not fit", fresh->components.items[to].slot);
  }
  return rc;
}

/* Every peer with its addresses, its block flag and whether and when this peer sent to
 * it: aggregators tell round members by the last. */
static int carry_book(rt_book *to, const rt_book *from, bb_error *err) {
  int rc = 0;
  for (size_t i = 0; i < from->len && !rc; i++) {
    const rt_peer_entry *e = &from->items[i];
    if (!rt_book_get(to, &e->peer)) rc = bb_error_set(err, BB_ERR_NOMEM, "take_over: the address book does not fit");
    for (size_t k = 0; !rc && k < e->n_addrs; k++)
      if ((rc = rt_book_add(to, &e->peer, &e->addrs[k])))
        bb_error_set(err, rc, "take_over: the address book does not fit");
    if (!rc) {
      rt_peer_entry *now = rt_book_get(to, &e->peer);
      now->blocked = e->blocked;
      now->sent = e->sent;
      now->sent_ns = e->sent_ns;
    }
  }
  return rc;
}

static bool has_run(const bb_node *n) {
  return n->bootstrap_started || n->next_exec != 1 || n->ingress.events.len || n->frontier.len || n->timers.len ||
         n->outbound.items.len || n->acc.len || n->batch.len;
}

int bb_node_take_over(bb_node *fresh, const bb_node *old, bb_error *err) {
  if (!fresh || !old || fresh == old)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "take_over: two different nodes are required");
  if (!bb_peer_id_equal(&fresh->self, &old->self))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "take_over: the nodes belong to different peers");
  if (has_run(fresh))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "take_over: the new node has already run (take over before any bootstrap, invoke or delivery)");
  int rc = carry_components(fresh, old, err);
  if (!rc) rc = carry_book(&fresh->book, &old->book, err);
  if (!rc && (rc = rt_admission_carry(&fresh->admission, &old->admission, fresh->now)))
    bb_error_set(err, rc, "take_over: the verified join tokens do not fit");
  if (rc) return rc;
  for (size_t i = 0; i < old->counters.len; i++)
    rt_count(&fresh->counters, old->counters.items[i].name, old->counters.items[i].value);
  if (fresh->counters.nomem) {
    fresh->counters.nomem = false;
    return bb_error_set(err, BB_ERR_NOMEM, "take_over: the counters do not fit");
  }
  if (old->now > fresh->now) fresh->now = old->now;
  if (old->next_wire_req > fresh->next_wire_req) fresh->next_wire_req = old->next_wire_req;
  return 0;
}
