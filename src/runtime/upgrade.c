/* bb_node_take_over: a node freshly installed on a peer (from a newer artifact, say)
 * carries on where the node it replaces left off, as far as the peers it talks to can
 * tell: the clock, request ids that never repeat, the address book (with whom it sent
 * to and when), the named counters, the join tokens it verified (under the same join
 * policy), and what each component kept — its saved state and its timers — for the slots
 * both nodes bind to the same type. Executions belong to the old graphs and are not
 * carried. */
#include <string.h>

#include "runtime/admission.h"
#include "runtime/book.h"
#include "runtime/steps.h"
#include "runtime/timers.h"
#include "bb/common.h"
#include "util/mem.h"

/* The component of `fresh` that takes over old's component c: same slot, same type. */
static long successor(const bb_node *fresh, const rt_component *c) {
  for (size_t i = 0; i < fresh->n_components; i++)
    if (strcmp(fresh->components[i].slot, c->slot) == 0 &&
        strcmp(fresh->components[i].type->type_name, c->type->type_name) == 0)
      return (long)i;
  return -1;
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

static bool has_run(const bb_node *n) {
  return n->bootstrap_started || n->next_exec != 1 || n->ingress.len || n->frontier.len || n->n_timers ||
         n->outbound.len || n->acc.len || n->batch.len;
}

int bb_node_take_over(bb_node *fresh, const bb_node *old, bb_error *err) {
  if (!fresh || !old || fresh == old)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "take_over: two different nodes are required");
  if (!bb_peer_id_equal(&fresh->self, &old->self))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "take_over: the nodes belong to different peers");
  if (has_run(fresh))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "take_over: the new node has already run (take over before any bootstrap, invoke or delivery)");
  int rc = 0;
  for (size_t i = 0; i < old->n_components && !rc; i++) {
    long to = successor(fresh, &old->components[i]);
    if (to >= 0) rc = carry_component(&fresh->components[to], old, &old->components[i], err);
  }
  for (size_t i = 0; i < old->n_timers && !rc; i++) {
    const rt_timer *t = &old->timers[i];
    long to = t->kind == RT_TIMER_COMPONENT ? successor(fresh, &old->components[t->component]) : -1;
    if (to >= 0 && (rc = rt_timer_add(fresh, t->at, RT_TIMER_COMPONENT, t->id, NULL, 0, (uint32_t)to)))
      bb_error_set(err, rc, "take_over: the timers of slot `%s` do not fit", fresh->components[to].slot);
  }
  for (size_t i = 0; i < old->book.len && !rc; i++) {
    const rt_peer_entry *e = &old->book.items[i];
    rt_peer_entry *mine = rt_book_get(fresh, &e->peer);
    if (!mine) rc = bb_error_set(err, BB_ERR_NOMEM, "take_over: the address book does not fit");
    for (size_t k = 0; !rc && k < e->n_addrs; k++)
      if ((rc = rt_book_add(fresh, &e->peer, &e->addrs[k])))
        bb_error_set(err, rc, "take_over: the address book does not fit");
    if (!rc) { /* whom this peer sent to, and when, stays true: aggregators tell round members by it */
      rt_peer_entry *now = rt_book_get(fresh, &e->peer);
      now->blocked = e->blocked;
      now->sent = e->sent;
      now->sent_ns = e->sent_ns;
    }
  }
  if (!rc && (rc = rt_admission_carry(fresh, old)))
    bb_error_set(err, rc, "take_over: the verified join tokens do not fit");
  if (rc) return rc;
  for (size_t i = 0; i < old->n_counters; i++) rt_count(fresh, old->counters[i].name, old->counters[i].value);
  if (fresh->failed_nomem) {
    fresh->failed_nomem = false;
    return bb_error_set(err, BB_ERR_NOMEM, "take_over: the counters do not fit");
  }
  if (old->now > fresh->now) fresh->now = old->now;
  if (old->next_wire_req > fresh->next_wire_req) fresh->next_wire_req = old->next_wire_req;
  return 0;
}
