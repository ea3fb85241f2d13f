/* Operations waiting for completions: an open-addressing table by command id. */
#ifndef BBI_RUNTIME_PENDING_H
#define BBI_RUNTIME_PENDING_H

#include "runtime/node.h"

/* Parks op of e until `command` completes (e gains a reference); BB_ERR_NOMEM. */
int rt_pending_add(bb_node *n, uint64_t command, rt_exec *e, uint32_t op);
/* The op waiting for `command`, or NULL. */
rt_pending *rt_pending_find(bb_node *n, uint64_t command);
/* Removes an entry rt_pending_find returned and drops its reference to the execution. */
void rt_pending_remove(bb_node *n, rt_pending *p);

#endif /* BBI_RUNTIME_PENDING_H */
