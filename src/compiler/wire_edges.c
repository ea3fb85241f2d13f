/* analyze_wire_edges: both halves of every wire edge learn its
 * transport (trigger_only when the value is a bb.trigger, else data) and its batch
 * group; the Send also learns where its value lands:
 * dest_site_name.<sent value> = <Recv payload>, which install resolves to a site. */
#include <string.h>

#include "compiler/compiler.h"

static bool in_partition(const cc_partition *p, const bb_ir_node *n) {
  const char *home = bb_kv_get(&n->metadata, BB_KEY_HOME_CLASS);
  return strcmp(home ? home : BB_SELF_CLASS, p->klass) == 0;
}

/* Appends key=value unless that exact pair is there (a Send feeding Recvs on several
 * classes has one entry per site). */
static int add_unique(cc_ctx *x, bb_kvlist *list, const char *key, const char *value) {
  for (size_t i = 0; i < list->len; i++)
    if (list->items[i].key && list->items[i].value && strcmp(list->items[i].key, key) == 0 &&
        strcmp(list->items[i].value, value) == 0)
      return 0;
  return bb_kv_append(x->m, list, key, value) ? cc_nomem(x) : 0;
}

int cc_analyze_wire_edges(cc_ctx *x, cc_partition *p) {
  for (size_t i = 0; i < x->edges.len; i++) {
    const cc_edge *e = &x->edges.items[i];
    const char *type = cc_value_type(x, x->root, e->site);
    const char *transport =
        strcmp(type, BB_TYPE_TRIGGER) == 0 ? BB_WIRE_TRANSPORT_TRIGGER_ONLY : BB_WIRE_TRANSPORT_DATA;
    char *group = cc_printf(x, "%u", e->batch_group);
    if (!group) return cc_nomem(x);
    bb_ir_node *halves[2] = {e->send, e->recv};
    for (int h = 0; h < 2; h++) {
      if (!in_partition(p, halves[h])) continue;
      if (bb_kv_upsert(x->m, &halves[h]->metadata, BB_KEY_WIRE_TRANSPORT, transport) ||
          bb_kv_upsert(x->m, &halves[h]->metadata, BB_KEY_BATCH_GROUP, group))
        return cc_nomem(x);
      if (h == 0) {
        char *key = cc_printf(x, BB_KEY_DEST_SITE_PREFIX "%s", e->value);
        int rc = key ? add_unique(x, &e->send->metadata, key, e->site) : cc_nomem(x);
        if (rc) return rc;
      }
    }
  }
  return 0;
}
