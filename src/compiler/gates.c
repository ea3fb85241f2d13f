/* Gate insertion. RX: every Recv's payload passes DedupGateRx → PeerHealthGateRx →
 * BackoffGateRx before its consumers. TX: a Send with a `peer` attribute sends through
 * PeerHealthGateTx → BackoffGateTx. Each pass is idempotent (…_gated metadata). Gate
 * names derive from the Recv payload / Send node, so unnamed nodes never collide, and
 * each gate is placed right after its chain head or right before its Send, so
 * partitions stay topologically sorted (onnx.checker requires it of functions). */
#include <string.h>

#include "compiler/compiler.h"

static const struct {
  const char *op, *suffix, *gated, *source;
} RX[3] = {
    {"DedupGateRx", "#dedup_rx_out", BB_KEY_DEDUP_RX_GATED, BB_KEY_DEDUP_RX_SOURCE},
    {"PeerHealthGateRx", "#peer_health_rx_out", BB_KEY_PEER_HEALTH_RX_GATED, BB_KEY_PEER_HEALTH_RX_SOURCE},
    {"BackoffGateRx", "#backoff_rx_out", BB_KEY_BACKOFF_RX_GATED, BB_KEY_BACKOFF_RX_SOURCE},
};

static const struct {
  const char *op, *suffix, *gated, *source;
} TX[2] = {
    {"PeerHealthGateTx", "#peer_health_tx_gated", BB_KEY_PEER_HEALTH_TX_GATED, BB_KEY_PEER_HEALTH_TX_SOURCE},
    {"BackoffGateTx", "#backoff_tx_gated", BB_KEY_BACKOFF_TX_GATED, BB_KEY_BACKOFF_TX_SOURCE},
};

int cc_gate_rx(cc_ctx *x, cc_partition *p, int which) {
  bb_function *f = p->fn;
  for (size_t i = 0; i < f->nodes.len; i++) {
    bb_ir_node *recv = f->nodes.items[i];
    if (!cc_is(recv, BB_DOMAIN_WIRE, "Recv") || !recv->outputs.len || cc_meta(recv, RX[which].gated)) continue;
    const char *base = cc_site_base(recv);
    const char *head = cc_meta(recv, BB_KEY_RX_CHAIN_HEAD);
    if (!head) head = recv->outputs.items[0];
    const char *out = cc_printf(x, "%s%s", base, RX[which].suffix);
    bb_ir_node *g = bb_ir_node_new(x->m, RX[which].op, BB_DOMAIN_SYSCALL, cc_printf(x, "%s@%s", RX[which].op, base));
    if (!out || !g || !g->name || bb_strlist_append(x->m, &g->inputs, head) || bb_strlist_append(x->m, &g->outputs, out) ||
        bb_kv_append(x->m, &g->metadata, RX[which].source, base))
      return cc_nomem(x);
    if (bb_kv_append(x->m, &g->metadata, BB_KEY_HOME_CLASS, p->klass)) return cc_nomem(x);
    for (size_t k = 0; k < f->nodes.len; k++) {
      bb_strlist *ins = &f->nodes.items[k]->inputs;
      for (size_t a = 0; a < ins->len; a++)
        if (strcmp(ins->items[a], head) == 0) ins->items[a] = (char *)out;
    }
    /* right after the head's producer (the Recv or the previous gate) */
    long at = (long)i;
    for (size_t k = i; k < f->nodes.len; k++)
      if (bb_strlist_find(&f->nodes.items[k]->outputs, head) >= 0) at = (long)k;
    if (bb_nodelist_insert(x->m, &f->nodes, (size_t)at + 1, g) ||
        bb_kv_upsert(x->m, &recv->metadata, RX[which].gated, BB_FLAG_TRUE) ||
        bb_kv_upsert(x->m, &recv->metadata, BB_KEY_RX_CHAIN_HEAD, out))
      return cc_nomem(x);
    const char *type = cc_value_type(x, f, head);
    if (cc_set_value_type(x, f, out, type)) return cc_nomem(x);
  }
  return 0;
}

int cc_gate_tx(cc_ctx *x, cc_partition *p, int which) {
  bb_function *f = p->fn;
  for (size_t i = 0; i < f->nodes.len; i++) {
    bb_ir_node *send = f->nodes.items[i];
    const bb_attr *peer = bb_attr_find(&send->attrs, BB_ATTR_PEER);
    if (!cc_is(send, BB_DOMAIN_WIRE, "Send") || !peer || !send->inputs.len || cc_meta(send, TX[which].gated)) continue;
    const char *base = cc_site_base(send);
    const char *out = cc_printf(x, "%s%s", base, TX[which].suffix);
    bb_ir_node *g = bb_ir_node_new(x->m, TX[which].op, BB_DOMAIN_SYSCALL, cc_printf(x, "%s@%s", TX[which].op, base));
    const char *type = cc_value_type(x, f, send->inputs.items[0]);
    if (!out || !g || !g->name || bb_strlist_append(x->m, &g->inputs, send->inputs.items[0]) ||
        bb_strlist_append(x->m, &g->outputs, out) || BBI_ARENA_PUSH(x->m->arena, &g->attrs, (bb_attr *)peer) ||
        bb_kv_append(x->m, &g->metadata, TX[which].source, base) ||
        bb_kv_append(x->m, &g->metadata, TX[which].gated, BB_FLAG_TRUE) ||
        bb_kv_append(x->m, &g->metadata, BB_KEY_HOME_CLASS, p->klass) ||
        bb_kv_upsert(x->m, &send->metadata, TX[which].gated, BB_FLAG_TRUE) || bb_nodelist_insert(x->m, &f->nodes, i, g))
      return cc_nomem(x);
    send->inputs.items[0] = (char *)out;
    if (*type && cc_set_value_type(x, f, out, type)) return cc_nomem(x);
    i++;
  }
  return 0;
}
