/* The framework ops by (domain, op_type), and the state they keep in a node. */
#ifndef BBI_RUNTIME_SYSCALLS_TABLE_H
#define BBI_RUNTIME_SYSCALLS_TABLE_H

#include "runtime/node.h"

/* The function that runs (domain, op_type), or NULL when it is not a framework op. */
rt_syscall_fn rt_syscall_find(const char *domain, const char *op_type);
/* Frees the state framework ops keep in the node (DeadlineMatch latches, Limit counters,
 * Serialize queues, Hold slots, Record histories). */
void rt_syscalls_free(bb_node *n);

#endif /* BBI_RUNTIME_SYSCALLS_TABLE_H */
