/* analyze_wire_edges: every Send of a partition learns the wire its value travels on,
 * dest_site_name.<sent value> = <wire name> (install addresses fills by the wire's id),
 * and both halves of every wire edge inside the artifact learn its transport
 * (trigger_only when the value is a bb.trigger, else data) and its batch group. A Send
 * with no Recv in this artifact still names its wire: another artifact may receive it. */
#include <string.h>

#include "compiler/compiler.h"

static bool in_partition(const cc_partition *p, const bb_ir_node *n) {
  const char *home = bb_kv_get(&n->metadata, BB_KEY_HOME_CLASS);
  return strcmp(home ? home : BB_SELF_CLASS, p->klass) == 0;
}

static int name_destination(cc_ctx *x, bb_ir_node *send) {
  if (!send->inputs.len || !*send->inputs.items[0]) return 0;
  const char *wire = cc_wire_of_send(x, send);
  char *key = cc_printf(x, BB_KEY_DEST_SITE_PREFIX "%s", send->inputs.items[0]);
  if (!wire || !key || bb_kv_upsert(x->m, &send->metadata, BB_KEY_WIRE_ID, wire) ||
      bb_kv_upsert(x->m, &send->metadata, key, wire))
    return cc_nomem(x);
  return 0;
}

int cc_analyze_wire_edges(cc_ctx *x, cc_partition *p) {
  for (size_t i = 0; i < p->fn->nodes.len; i++) {
    bb_ir_node *n = p->fn->nodes.items[i];
    int rc = cc_is(n, BB_DOMAIN_WIRE, "Send") ? name_destination(x, n) : 0;
    if (rc) return rc;
  }
  for (size_t i = 0; i < x->edges.len; i++) {
    const cc_edge *e = &x->edges.items[i];
    const char *type = cc_value_type(x, x->root, e->site);
    const char *transport =
        strcmp(type, BB_TYPE_TRIGGER) == 0 ? BB_WIRE_TRANSPORT_TRIGGER_ONLY : BB_WIRE_TRANSPORT_DATA;
    char *group = cc_printf(x, "%u", e->batch_group);
    if (!group) return cc_nomem(x);
    bb_ir_node *halves[2] = {e->send, e->recv};
    for (int h = 0; h < 2; h++)
      if (in_partition(p, halves[h]) && (bb_kv_upsert(x->m, &halves[h]->metadata, BB_KEY_WIRE_TRANSPORT, transport) ||
                                         bb_kv_upsert(x->m, &halves[h]->metadata, BB_KEY_BATCH_GROUP, group)))
        return cc_nomem(x);
  }
  return 0;
}
