/* What the framework-op families share: the table entry each family lists its ops in, and
 * the small readers and writers of an op's inputs, outputs and attributes. Every op
 * takes its inputs and writes its outputs by position; a failing op sets c->reason to a
 * stable token and fills err. */
#ifndef BBI_RUNTIME_SYSCALLS_SYSCALL_H
#define BBI_RUNTIME_SYSCALLS_SYSCALL_H

#include "runtime/node.h"
#include "bb/common.h"

typedef struct rt_syscall {
  const char *domain, *op_type;
  rt_syscall_fn fn;
} rt_syscall;

/* One family's ops (syscalls/<family>.c); syscalls/table.c looks them up. */
#define RT_SYSCALL_FAMILY(name)           \
  extern const rt_syscall name[];         \
  extern const size_t name##_count

RT_SYSCALL_FAMILY(rt_syscalls_structure);
RT_SYSCALL_FAMILY(rt_syscalls_time);
RT_SYSCALL_FAMILY(rt_syscalls_deadlines);
RT_SYSCALL_FAMILY(rt_syscalls_named);
RT_SYSCALL_FAMILY(rt_syscalls_tokens);
RT_SYSCALL_FAMILY(rt_syscalls_gates);
RT_SYSCALL_FAMILY(rt_syscalls_telemetry);
RT_SYSCALL_FAMILY(rt_syscalls_bundles);
RT_SYSCALL_FAMILY(rt_syscalls_address_book);

/* The state two families keep in the node, freed by rt_syscalls_free. */
void rt_syscalls_free_latches(bb_node *n);
void rt_syscalls_free_named(bb_node *n);

/* ---- inputs, outputs, attributes ------------------------------------------------------ */

/* The first input that holds a value, or NULL. */
static inline bb_val *first_input(const rt_call *c) {
  for (size_t i = 0; i < c->n_in; i++)
    if (c->in[i]) return c->in[i];
  return NULL;
}

static inline int need_input(rt_call *c, bb_error *err) {
  c->reason = "missing_input";
  return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s requires an input", c->op->ir->op_type);
}

static inline int nomem(bb_error *err) { return bb_error_set(err, BB_ERR_NOMEM, "out of memory"); }

/* Sets output 0 to v (a new reference; NULL: out of memory). A node recorded without
 * outputs still runs: the value is dropped. */
static inline int put_output(rt_call *c, bb_val *v, bb_error *err) {
  if (!v) return nomem(err);
  if (c->n_out) c->out[0] = v;
  else bb_val_release(v);
  return 0;
}

static inline int emit_trigger(rt_call *c, bb_error *err) {
  return put_output(c, bb_val_trigger(c->node->alloc), err);
}

static inline int64_t attr_int(const rt_call *c, const char *name, int64_t dflt) {
  return bb_attr_get_int(&c->op->ir->attrs, name, dflt);
}

static inline const char *attr_string(const rt_call *c, const char *name) {
  return bb_attr_get_string(&c->op->ir->attrs, name, NULL);
}

#endif /* BBI_RUNTIME_SYSCALLS_SYSCALL_H */
