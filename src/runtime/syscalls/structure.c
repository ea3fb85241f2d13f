/* Structure ops: pass a value on (PassThrough, Tee, Gate), make one (Constant, the
 * trigger sources), or let the first of several through (Any). */
#include <stdio.h>

#include "bb/tensor.h"
#include "runtime/steps.h"
#include "runtime/syscalls/syscall.h"
#include "bb/common.h"

static int sys_pass_through(rt_call *c, bb_error *err) {
  bb_val *v = first_input(c);
  if (!v) return need_input(c, err);
  return put_output(c, bb_val_retain(v), err);
}

static int sys_tee(rt_call *c, bb_error *err) {
  bb_val *v = first_input(c);
  if (!v) return need_input(c, err);
  for (size_t i = 0; i < c->n_out; i++) c->out[i] = bb_val_retain(v);
  return 0;
}

static int sys_constant(rt_call *c, bb_error *err) {
  const bb_attr *a = bb_attr_find(&c->op->ir->attrs, BB_ATTR_VALUE);
  if (!a || !a->t) {
    c->reason = "missing_attribute";
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "Constant needs a TENSOR `value` attribute");
  }
  bb_tensor *t;
  int rc = bb_tensor_from_proto(a->t, c->node->alloc, &t, err);
  if (rc) return rc;
  bb_val *v = bb_val_tensor(c->node->alloc, t);
  bb_tensor_release(t);
  return put_output(c, v, err);
}

static int sys_trigger(rt_call *c, bb_error *err) { return emit_trigger(c, err); }

static int sys_on_trigger(rt_call *c, bb_error *err) {
  if (!first_input(c)) return need_input(c, err);
  return emit_trigger(c, err);
}

static int sys_gate(rt_call *c, bb_error *err) {
  if (!c->n_in || !c->in[0]) return need_input(c, err);
  return put_output(c, bb_val_retain(c->in[0]), err);
}

static int sys_any(rt_call *c, bb_error *err) {
  bb_val *v = first_input(c);
  if (!v) return 0; /* nothing arrived: absorb */
  const char *group = attr_string(c, "group");
  if (group && *group) {
    char key[300];
    snprintf(key, sizeof key, "any.%s", group);
    if (rt_counter_value(&c->node->counters, key)) return 0; /* this group already fired */
    rt_count(&c->node->counters, key, 1);
  }
  return put_output(c, bb_val_retain(v), err);
}

const rt_syscall rt_syscalls_structure[] = {
    {BB_DOMAIN_SYSCALL, "PassThrough", sys_pass_through},
    {BB_DOMAIN_SYSCALL, "Tee", sys_tee},
    {BB_DOMAIN_SYSCALL, "Constant", sys_constant},
    {BB_DOMAIN_SYSCALL, "Pulse", sys_trigger},
    {BB_DOMAIN_SYSCALL, "GateDispatch", sys_trigger},
    {BB_DOMAIN_SYSCALL, "OnTrigger", sys_on_trigger},
    {BB_DOMAIN_SYSCALL, "EventSource", sys_trigger},
    {BB_DOMAIN_SYSCALL, "LifecyclePhase", sys_trigger},
    {BB_DOMAIN_SYSCALL, "Gate", sys_gate},
    {BB_DOMAIN_SYSCALL, "Any", sys_any},
};
const size_t rt_syscalls_structure_count = sizeof rt_syscalls_structure / sizeof *rt_syscalls_structure;
