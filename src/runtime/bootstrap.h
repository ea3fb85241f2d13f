/* Bootstraps (bootstrap.c): which run, and their progress at each poll. */
#ifndef BBI_RUNTIME_BOOTSTRAP_H
#define BBI_RUNTIME_BOOTSTRAP_H

#include "runtime/node.h"

/* A finished bootstrap is reported (once) and the next chosen one starts; one that
 * cannot start yet keeps body work held back and is retried by the next poll. */
void rt_bootstrap_progress(bb_node *n);
/* Whether this queued event waits for the running bootstrap (envelopes and invokes do). */
bool rt_bootstrap_holds_back(const bb_node *n, const rt_event *ev);

#endif /* BBI_RUNTIME_BOOTSTRAP_H */
