/* Timers, a part of its own: a min-heap by (time, insertion order), so timers due at the
 * same instant fire in the order they were set. An INTERVAL timer holds an execution,
 * but the heap never touches its references: the engine hands the hold over when it sets
 * the timer and takes it back when the timer fires. */
#ifndef BBI_RUNTIME_TIMERS_H
#define BBI_RUNTIME_TIMERS_H

#include "runtime/exec.h"
#include "runtime/snapshot_io.h"
#include "runtime/steps.h"

typedef enum rt_timer_kind {
  RT_TIMER_COMPLETE,  /* complete command `id` with a trigger */
  RT_TIMER_INTERVAL,  /* run op `op` of execution `exec` again, with what depends on it */
  RT_TIMER_COMPONENT  /* on_timer(token = id) of component `component` */
} rt_timer_kind;

typedef struct rt_timer {
  uint64_t at, seq;
  rt_timer_kind kind;
  uint64_t id;
  uint32_t op, component;
  rt_exec *exec; /* INTERVAL only */
} rt_timer;

/* Invariants: items[0..len) is a heap by (at, seq); every seq is below `seq`, each once;
 * at most `max` timers. */
typedef struct rt_timers {
  const bb_allocator *alloc;
  rt_timer *items;
  size_t len, cap;
  uint64_t seq; /* the next timer's place among equals */
  size_t max;
  rt_counters *counters; /* timers.dropped (NULL: not counted) */
} rt_timers;

void rt_timers_init(rt_timers *t, const bb_allocator *alloc, size_t max, rt_counters *counters);
/* Sets a timer: BB_ERR_LIMIT at `max` (counted as timers.dropped), BB_ERR_NOMEM. */
int rt_timers_add(rt_timers *t, uint64_t at, rt_timer_kind kind, uint64_t id, rt_exec *exec, uint32_t op,
                  uint32_t component);
/* Takes the earliest timer due at `now` into *out; false when none is. */
bool rt_timers_pop_due(rt_timers *t, uint64_t now, rt_timer *out);
/* Makes every INTERVAL timer for which hit(timer, user) holds due at `now` at the latest
 * (one due earlier keeps its time); returns how many were brought forward. */
size_t rt_timers_bring_forward(rt_timers *t, uint64_t now, bool (*hit)(const rt_timer *, void *), void *user);
/* When the earliest timer is due (UINT64_MAX: none). */
uint64_t rt_timers_next(const rt_timers *t);
/* Frees the heap (an INTERVAL timer's hold must have been taken back first). */
void rt_timers_free(rt_timers *t);
/* Section: u64 count, then per timer (in heap order) its time, seq, kind, id, op,
 * component and the id of its execution (0: none). The heap's `seq` is not in it: the
 * node saves it among its id counters. */
void rt_timers_save(const rt_timers *t, bb_le_writer *w);
/* Reads a section into an empty heap. An INTERVAL timer's execution must be known to
 * `execs`, a COMPONENT timer's component below n_components; at most `max` timers. */
int rt_timers_load(rt_timers *t, rt_reader *r, const rt_exec_lookup *execs, size_t n_components);

#endif /* BBI_RUNTIME_TIMERS_H */
