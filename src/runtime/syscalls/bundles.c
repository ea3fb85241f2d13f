/* Bundles: several values as one composite (Bundle) and back (Unbundle). */
#include <inttypes.h>

#include "runtime/syscalls/syscall.h"
#include "bb/common.h"

static int sys_bundle(rt_call *c, bb_error *err) {
  size_t n = 0;
  bb_val *stack[32];
  for (size_t i = 0; i < c->n_in && n < 32; i++)
    if (c->in[i]) stack[n++] = c->in[i];
  if (!n) {
    c->reason = "bundle_no_children";
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "Bundle has no inputs");
  }
  return put_output(c, bb_val_composite(c->node->alloc, stack, n), err);
}

static int sys_unbundle(rt_call *c, bb_error *err) {
  const bb_val *b = c->n_in ? c->in[0] : NULL;
  if (!b) return need_input(c, err);
  if (bb_val_kind_of(b) != BB_VAL_COMPOSITE) {
    c->reason = "expected_composite";
    return bb_error_set(err, BB_ERR_TYPE, "Unbundle expects a bundle, got %s",
                        bb_val_kind_name((int)bb_val_kind_of(b)));
  }
  int64_t count = attr_int(c, BB_ATTR_CHILD_COUNT, -1);
  if (count >= 0 && (uint64_t)count != bb_val_count(b)) {
    c->reason = "unbundle_child_count_mismatch";
    return bb_error_set(err, BB_ERR_TYPE, "Unbundle expects %" PRId64 " children, the bundle has %zu", count,
                        bb_val_count(b));
  }
  for (size_t i = 0; i < bb_val_count(b) && i < c->n_out; i++) c->out[i] = bb_val_retain(bb_val_child(b, i));
  return 0;
}

const rt_syscall rt_syscalls_bundles[] = {
    {BB_DOMAIN_COMPOSITE, "Bundle", sys_bundle},
    {BB_DOMAIN_COMPOSITE, "Unbundle", sys_unbundle},
};
const size_t rt_syscalls_bundles_count = sizeof rt_syscalls_bundles / sizeof *rt_syscalls_bundles;
