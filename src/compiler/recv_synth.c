/* synthesize_wire_recvs: every Send names its wire (wire_id: what the author named it,
 * else "<Module>.<D>" for its data output D, the network port), and every Send whose
 * data output (or sender, its third output) is read gets a Recv per consuming peer class
 * (classes in sorted order), placed right after it and listening to that wire; the Send's
 * data output becomes a sentinel "<D>__send_sentinel_<i>" and the consumers read
 * "<D>__recv_<seq>" instead, the sender's readers "<D>__recv_<seq>__sender" (the Recv's
 * second output; the Send keeps its two outputs).
 * The Recv records the Send's index i in synthesized_from_send (an integer: partitioning
 * pairs by it) and its value infos stay in the root, where the type solver and the
 * partitions find them. A self-send (consumer on the Send's own class) gets its Recv
 * too. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static const char *home_of(const bb_ir_node *n) {
  const char *h = cc_meta(n, BB_KEY_HOME_CLASS);
  return h ? h : BB_SELF_CLASS;
}

int cc_synthesize_recvs(cc_ctx *x) {
  bb_function *f = x->root;
  size_t n0 = f->nodes.len;
  bb_ir_node **snapshot = bbi_arena_alloc(x->m->arena, (n0 + 1) * sizeof *snapshot);
  if (!snapshot) return cc_nomem(x);
  memcpy(snapshot, f->nodes.items, n0 * sizeof *snapshot);
  uint64_t seq = 0;
  bb_nodelist out = {0};
  int rc = 0;
  const char **classes = bbi_arena_alloc(x->m->arena, (n0 + 1) * sizeof *classes);
  if (!classes) rc = cc_nomem(x);
  for (size_t i = 0; i < n0 && !rc; i++) {
    bb_ir_node *send = snapshot[i];
    if (BBI_ARENA_PUSH(x->m->arena, &out, send)) {
      rc = cc_nomem(x);
      break;
    }
    if (!cc_is(send, BB_DOMAIN_WIRE, "Send") || !send->outputs.len || !*send->outputs.items[0]) continue;
    const char *d = send->outputs.items[0];
    const char *from_peer = send->outputs.len > 2 ? send->outputs.items[2] : NULL; /* bb_rec_lookup_sender's */
    const char *wire = cc_wire_of_send(x, send);
    if (!wire || bb_kv_upsert(x->m, &send->metadata, BB_KEY_WIRE_ID, wire)) return cc_nomem(x);
    if (from_peer) send->outputs.len = 2; /* the runtime's Send makes two outputs; its Recvs give the sender */
    size_t nc = 0;
    for (size_t k = 0; k < n0; k++) {
      if (k == i) continue;
      const bb_ir_node *c = snapshot[k];
      if (bb_strlist_find(&c->inputs, d) < 0 && (!from_peer || bb_strlist_find(&c->inputs, from_peer) < 0)) continue;
      const char *h = home_of(c);
      bool seen = false;
      for (size_t j = 0; j < nc && !seen; j++) seen = strcmp(classes[j], h) == 0;
      if (!seen) classes[nc++] = h;
    }
    if (!nc) continue; /* fire and forget */
    qsort(classes, nc, sizeof *classes, cmp_str);
    const char *type = cc_value_type(x, f, d);
    char *sentinel = cc_printf(x, "%s__send_sentinel_%zu", d, i);
    if (!sentinel) return cc_nomem(x);
    send->outputs.items[0] = sentinel;
    if (*type && cc_set_value_type(x, f, sentinel, type)) return cc_nomem(x);
    for (size_t j = 0; j < nc && !rc; j++) {
      char *payload = cc_printf(x, "%s__recv_%llu", d, (unsigned long long)seq);
      char *sender = cc_printf(x, "%s__recv_%llu__sender", d, (unsigned long long)seq);
      char *from = cc_printf(x, "%zu", i);
      seq++;
      bb_ir_node *recv = bb_ir_node_new(x->m, "Recv", BB_DOMAIN_WIRE, NULL);
      if (!payload || !sender || !from || !recv || bb_strlist_append(x->m, &recv->outputs, payload) ||
          bb_strlist_append(x->m, &recv->outputs, sender) ||
          bb_kv_append(x->m, &recv->metadata, BB_KEY_HOME_CLASS, classes[j]) ||
          bb_kv_append(x->m, &recv->metadata, BB_KEY_SYNTHESIZED_FROM_SEND, from) ||
          bb_kv_append(x->m, &recv->metadata, BB_KEY_WIRE_ID, wire) ||
          BBI_ARENA_PUSH(x->m->arena, &out, recv))
        return cc_nomem(x);
      if ((rc = cc_set_value_type(x, f, payload, type)) != 0) break;
      if ((rc = cc_set_value_type(x, f, sender, BB_TYPE_PEER_ID)) != 0) break;
      for (size_t k = 0; k < n0; k++) {
        if (k == i || strcmp(home_of(snapshot[k]), classes[j]) != 0) continue;
        bb_strlist *ins = &snapshot[k]->inputs;
        for (size_t a = 0; a < ins->len; a++) {
          if (strcmp(ins->items[a], d) == 0) ins->items[a] = payload;
          else if (from_peer && strcmp(ins->items[a], from_peer) == 0) ins->items[a] = sender;
        }
      }
    }
  }
  if (!rc) f->nodes = out;
  return rc;
}
