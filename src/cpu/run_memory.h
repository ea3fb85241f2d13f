/* The memory a session's runs allocate from: a recycling allocator (what one run frees,
 * the next reuses) and the nodes' scratch workspace. Sessions that run one after the
 * other (a trainer's training and optimizer graphs) can share one, so the second reuses
 * what the first freed instead of holding memory of its own. Reference counted: every
 * session holds one reference. */
#ifndef BBI_CPU_RUN_MEMORY_H
#define BBI_CPU_RUN_MEMORY_H

#include "bb/cpu.h"
#include "cpu/cpu_op.h"
#include "util/mem_pool.h"

typedef struct bbi_cpu_run_memory {
  uint32_t refcount;
  const bb_allocator *alloc; /* the caller's */
  bbi_mem_pool *pool;
  bbi_cpu_workspace workspace; /* allocated from the pool */
} bbi_cpu_run_memory;

/* A new run memory over alloc (NULL: the default), or NULL when out of memory. */
bbi_cpu_run_memory *bbi_cpu_run_memory_new(const bb_allocator *alloc);
bbi_cpu_run_memory *bbi_cpu_run_memory_retain(bbi_cpu_run_memory *m);
void bbi_cpu_run_memory_release(bbi_cpu_run_memory *m); /* NULL is a no-op */

/* bb_cpu_session_new_with_options, with the runs allocating from `memory` (retained) rather
 * than a run memory of the session's own. */
int bbi_cpu_session_new_shared(const bb_model *model, const bb_allocator *alloc, bbi_cpu_run_memory *memory,
                              const bb_cpu_session_options *options, bb_cpu_session **out, bb_error *err);

#endif
