/* Steps and named counters: two small parts of their own, neither of which sees a node.
 *
 * A step list holds the steps the node hands to its host and the memory they point to
 * (strings, envelope bytes, value references), owned by the list until it is released.
 * A counter table holds named uint64 counters. An allocation that fails in either sets
 * its `nomem` flag rather than failing its caller, and the next poll reports it. */
#ifndef BBI_RUNTIME_STEPS_H
#define BBI_RUNTIME_STEPS_H

#include <stdbool.h>

#include "runtime/snapshot_io.h"
#include "bb/runtime.h"

typedef struct rt_steps {
  const bb_allocator *alloc;
  bb_step *items;
  size_t len, cap;
  void **owned; /* freed on release */
  size_t n_owned, cap_owned;
  bb_val **held; /* released on release */
  size_t n_held, cap_held;
  bool nomem; /* a step or what it points to was lost */
} rt_steps;

void rt_steps_init(rt_steps *s, const bb_allocator *alloc);
/* A new zeroed step of this kind at the end of the list, or NULL. */
bb_step *rt_step(rt_steps *s, bb_step_kind kind);
/* A copy of str owned by the list ("" out of memory; NULL for NULL). */
const char *rt_step_str(rt_steps *s, const char *str);
/* The list takes ownership of p (freed when the list is released, or now if that fails). */
int rt_step_own(rt_steps *s, void *p);
/* The list takes a reference to v (or, out of memory, does not: then drop the step). */
int rt_step_hold(rt_steps *s, bb_val *v);
/* Drops the step rt_step just made (one that could not be completed). */
void rt_step_cancel(rt_steps *s);
/* A step with a peer, a stable reason and a formatted detail. */
void rt_report(rt_steps *s, bb_step_kind kind, const bb_peer_id *peer, const char *reason, const char *fmt, ...)
    BB_PRINTF(5, 6);
/* Frees what the list owns and empties it (its arrays are kept). */
void rt_steps_release(rt_steps *s);
/* Hands out what accumulated: *batch (released already) takes acc's steps, and acc
 * starts empty over batch's old arrays. */
void rt_steps_hand_out(rt_steps *acc, rt_steps *batch);
/* Releases the list and frees its arrays. */
void rt_steps_free(rt_steps *s);

typedef struct rt_counter {
  char *name;
  uint64_t value;
} rt_counter;

/* Named counters, in the order they were first counted; names are unique. */
typedef struct rt_counters {
  const bb_allocator *alloc;
  rt_counter *items;
  size_t len, cap;
  bool nomem; /* a new counter could not be made */
} rt_counters;

void rt_counters_init(rt_counters *c, const bb_allocator *alloc);
/* Adds delta to the counter `name`, creating it (c may be NULL: nothing is counted). */
void rt_count(rt_counters *c, const char *name, uint64_t delta);
/* The counter's value (0 when it was never counted). */
uint64_t rt_counter_value(const rt_counters *c, const char *name);
void rt_counters_free(rt_counters *c);
/* Section: u64 count, then per counter its name (u64 length, bytes) and u64 value. */
void rt_counters_save(const rt_counters *c, bb_le_writer *w);
/* Reads a section into an empty table; names must be non-empty, without NUL, unique. */
int rt_counters_load(rt_counters *c, rt_reader *r);

#endif /* BBI_RUNTIME_STEPS_H */
