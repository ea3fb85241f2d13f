/* validate_runtime_complete: a partition whose Sends/Recvs
 * carry a `peer` attribute has the TX/RX gates, one with deadlines has a DeadlineCheck,
 * and every node carrying deadline_ns is wired to its check (the gate contract). */
#include <string.h>

#include "compiler/compiler.h"

static bool has_op(const bb_function *f, const char *op) {
  for (size_t i = 0; i < f->nodes.len; i++)
    if (cc_is(f->nodes.items[i], BB_DOMAIN_SYSCALL, op)) return true;
  return false;
}

static bool has_attr_on(const bb_function *f, const char *op, const char *attr) {
  for (size_t i = 0; i < f->nodes.len; i++) {
    const bb_ir_node *n = f->nodes.items[i];
    if ((!op || cc_is(n, BB_DOMAIN_WIRE, op)) && bb_attr_find(&n->attrs, attr)) return true;
  }
  return false;
}

int cc_check_runtime_complete(cc_ctx *x, cc_partition *p) {
  const bb_function *f = p->fn;
  const char *name = f->name ? f->name : "";
  if (has_attr_on(f, "Send", BB_ATTR_PEER))
    for (int i = 0; i < 2; i++) {
      const char *op = i ? "BackoffGateTx" : "PeerHealthGateTx";
      if (!has_op(f, op))
        return cc_fail(x, BB_COMPILE_INTERNAL, "partition `%s` (class %s) sends to a `peer` but has no %s", name,
                       p->klass, op);
    }
  if (has_attr_on(f, "Recv", BB_ATTR_PEER))
    for (int i = 0; i < 3; i++) {
      const char *op = i == 0 ? "DedupGateRx" : i == 1 ? "PeerHealthGateRx" : "BackoffGateRx";
      if (!has_op(f, op))
        return cc_fail(x, BB_COMPILE_INTERNAL, "partition `%s` (class %s) receives from a `peer` but has no %s", name,
                       p->klass, op);
    }
  if (has_attr_on(f, NULL, BB_ATTR_DEADLINE_NS) && !has_op(f, "DeadlineCheck")) {
    for (size_t i = 0; i < f->nodes.len; i++)
      if (bb_attr_find(&f->nodes.items[i]->attrs, BB_ATTR_DEADLINE_NS))
        return cc_fail(x, BB_COMPILE_INTERNAL, "node `%s` in class %s carries deadline_ns but no DeadlineCheck",
                       cc_node_label(x, f, f->nodes.items[i]), p->klass);
  }
  /* gate contract "DeadlineCheck" */
  for (size_t i = 0; i < f->nodes.len; i++) {
    const bb_ir_node *n = f->nodes.items[i];
    if (!bb_attr_find(&n->attrs, BB_ATTR_DEADLINE_NS) || cc_is(n, BB_DOMAIN_SYSCALL, "DeadlineCheck") ||
        cc_meta(n, BB_KEY_DEADLINE_GATED))
      continue;
    bool wired = false;
    size_t sl = strlen(BB_DEADLINE_TRIGGER_SUFFIX);
    for (size_t k = 0; k < n->inputs.len && !wired; k++) {
      size_t l = strlen(n->inputs.items[k]);
      wired = l >= sl && strcmp(n->inputs.items[k] + l - sl, BB_DEADLINE_TRIGGER_SUFFIX) == 0;
    }
    if (!wired)
      return cc_fail(x, BB_COMPILE_RUNTIME_INCOMPLETE,
                     "gate contract DeadlineCheck: node `%s` in class %s carries deadline_ns but reads no "
                     "`…" BB_DEADLINE_TRIGGER_SUFFIX "` trigger",
                     cc_node_label(x, f, n), p->klass);
  }
  return 0;
}
