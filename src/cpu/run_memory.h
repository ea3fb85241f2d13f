/* The memory a session's runs allocate from: a recycling allocator (what one run frees,
 * the next reuses) and the nodes' scratch workspace. Sessions that run one after the
 * other (a trainer's training and optimizer graphs) can share one, so the second reuses
 * what the first freed instead of holding memory of its own. Reference counted: every
 * session holds one reference. */
#ifndef BB_CPU_RUN_MEMORY_H
#define BB_CPU_RUN_MEMORY_H

#include "bb/cpu.h"
#include "cpu/cpu_op.h"
#include "util/mem_pool.h"

typedef struct bb_cpu_run_memory {
  uint32_t refcount;
  const bb_allocator *alloc; /* the caller's */
  bb_mem_pool *pool;
  bb_cpu_workspace workspace; /* allocated from the pool */
} bb_cpu_run_memory;

/* A new run memory over alloc (NULL: the default), or NULL when out of memory. */
bb_cpu_run_memory *bb_cpu_run_memory_new(const bb_allocator *alloc);
bb_cpu_run_memory *bb_cpu_run_memory_retain(bb_cpu_run_memory *m);
void bb_cpu_run_memory_release(bb_cpu_run_memory *m); /* NULL is a no-op */

/* bb_cpu_session_new, with the runs allocating from `memory` (retained) rather than a run
 * memory of the session's own. */
int bb_cpu_session_new_shared(const bb_model *model, const bb_allocator *alloc, bb_cpu_run_memory *memory,
                              bb_cpu_session **out, bb_error *err);

#endif
