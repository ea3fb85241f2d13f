/* Timers: a min-heap by (time, insertion order). */
#ifndef BBI_RUNTIME_TIMERS_H
#define BBI_RUNTIME_TIMERS_H

#include "runtime/node.h"

/* Sets a timer (an INTERVAL timer holds a reference to exec until it fires); BB_ERR_LIMIT
 * at max_timers (counted as timers.dropped), BB_ERR_NOMEM. */
int rt_timer_add(bb_node *n, uint64_t at, rt_timer_kind kind, uint64_t id, rt_exec *exec, uint32_t op,
                 uint32_t component);
/* Takes the earliest timer due at the node's clock into *out; false when none is. */
bool rt_timer_pop_due(bb_node *n, rt_timer *out);

#endif /* BBI_RUNTIME_TIMERS_H */
