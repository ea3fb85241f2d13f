/* Steps handed to the host, the memory they point to, and named counters. An allocation
 * that fails here sets node->failed_nomem, which the next poll reports. */
#ifndef BBI_RUNTIME_STEPS_H
#define BBI_RUNTIME_STEPS_H

#include "runtime/node.h"
#include "bb/common.h"

/* A new zeroed step of this kind at the end of the accumulating list, or NULL. */
bb_step *rt_step(bb_node *n, bb_step_kind kind);
/* A copy of s owned by the step list ("" out of memory; NULL for NULL). */
const char *rt_step_str(bb_node *n, const char *s);
/* Frees what a list owns and empties it (its arrays are kept). */
void rt_steps_release(bb_node *n, rt_steps *s);
/* The step list takes a reference to v (or, out of memory, does not: then drop the step). */
int rt_step_hold(bb_node *n, bb_val *v);
/* Takes ownership of p (freed when the steps are released, or now if that fails). */
int rt_step_own(bb_node *n, void *p);
/* Drops the step rt_step just made (one that could not be completed). */
void rt_step_cancel(bb_node *n);
/* Adds delta to the counter `name`, creating it. */
void rt_count(bb_node *n, const char *name, uint64_t delta);
/* A step with a peer, a stable reason and a formatted detail. */
void rt_report(bb_node *n, bb_step_kind kind, const bb_peer_id *peer, const char *reason, const char *fmt, ...)
    BB_PRINTF(5, 6);

#endif /* BBI_RUNTIME_STEPS_H */
