/* expand_ops: syscall Interval gets its default period,
 * syscall Constant must carry a tensor `value`; every visited node is stamped expanded
 * (idempotent). */
#include <string.h>

#include "compiler/compiler.h"

#define DEFAULT_PERIOD_NS 1000000000

int cc_expand_ops(cc_ctx *x) {
  bb_function *f = x->root;
  for (size_t i = 0; i < f->nodes.len; i++) {
    bb_ir_node *n = f->nodes.items[i];
    if (cc_meta(n, BB_KEY_EXPANDED)) continue;
    if (cc_is(n, BB_DOMAIN_SYSCALL, "Interval")) {
      if (!bb_attr_find(&n->attrs, BB_ATTR_PERIOD_NS) &&
          !bb_attr_set_int(x->m, &n->attrs, BB_ATTR_PERIOD_NS, DEFAULT_PERIOD_NS))
        return cc_nomem(x);
    } else if (cc_is(n, BB_DOMAIN_SYSCALL, "Constant")) {
      const bb_attr *a = bb_attr_find(&n->attrs, BB_ATTR_VALUE);
      const char *why = !a ? "missing attribute `value`"
                        : !a->has_type || a->type != BB_ATTR_TENSOR ? "attribute `value` is not a TENSOR"
                        : !a->t ? "attribute `value` holds no tensor"
                                : NULL;
      if (why)
        return cc_fail(x, BB_COMPILE_EXPANSION_FAILED, "node `%s` (Constant, domain %s): %s",
                       cc_node_label(x, f, n), BB_DOMAIN_SYSCALL, why);
    } else {
      continue;
    }
    if (bb_kv_upsert(x->m, &n->metadata, BB_KEY_EXPANDED, BB_FLAG_TRUE)) return cc_nomem(x);
  }
  return 0;
}
