/* bytesandbrains — the work pool through the ABI (bb_wasm.h): how many threads jobs use,
 * the loop a worker's instance runs, and the pool's counters. In bb.wasm (no shared
 * memory) only one thread exists: asking for more fails with BB_ERR_UNSUPPORTED. */
#include "abi_internal.h"
#include "bb/cpu.h"
#include "bb_wasm.h"

/* The least stack a worker's instance is given: what the deepest task (a kernel's frames and
 * the C library's) needs, with room to spare. */
#define BBW_WORKER_STACK_MIN (64u * 1024u)

#if defined(__EMSCRIPTEN_PTHREADS__)
#include "threads_emscripten.h"
#endif

/* bb-mt.wasm is the build compiled with atomics (shared memory). */
int32_t bb_wasm_threads_supported(void) {
#if defined(__wasm__) && defined(__wasm_atomics__)
  return 1;
#else
  return 0;
#endif
}

int32_t bb_wasm_set_threads(uint32_t n) {
  bbw_error_clear();
  if (n == 0) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "bb_wasm_set_threads: 0 threads (the caller is one)");
  bb_error err = {0};
  const int rc = bb_cpu_set_threads(n, &err);
  return rc ? bbw_fail_from(rc, &err, "bb_wasm_set_threads") : BB_OK;
}

uint32_t bb_wasm_threads(void) { return (uint32_t)bb_cpu_threads(); }

int32_t bb_wasm_worker_main(uint32_t slot) {
  bbw_error_clear();
  if (!bb_wasm_threads_supported())
    return bbw_fail(BB_ERR_UNSUPPORTED, "bb_wasm_worker_main: this module has no shared memory (load bb-mt.wasm)");
  if (slot == 0 || slot >= BB_CPU_MAX_THREADS)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "bb_wasm_worker_main: slot %u is not 1 to %d", (unsigned)slot, BB_CPU_MAX_THREADS - 1);
#if defined(__EMSCRIPTEN_PTHREADS__)
  if (bbw_thread_enter(slot)) return bbw_fail(BB_ERR_NOMEM, "bb_wasm_worker_main: no memory for the thread-local block of slot %u", (unsigned)slot);
  const int rc = bb_cpu_worker_main(slot);
  bbw_thread_leave(slot);
  return rc ? bbw_fail(rc, "bb_wasm_worker_main: %s", bb_strerror(rc)) : BB_OK;
#else
  return bbw_fail(BB_ERR_UNSUPPORTED, "bb_wasm_worker_main: this build has no thread runtime");
#endif
}

void bb_wasm_stop_workers(void) { bb_cpu_stop_workers(); }

uint32_t bb_wasm_worker_stack(uint32_t slot, uint32_t bytes) {
  bbw_error_clear();
  if (!bb_wasm_threads_supported()) {
    bbw_fail(BB_ERR_UNSUPPORTED, "bb_wasm_worker_stack: this module has no shared memory (load bb-mt.wasm)");
    return 0;
  }
  if (slot == 0 || slot >= BB_CPU_MAX_THREADS) {
    bbw_fail(BB_ERR_INVALID_ARGUMENT, "bb_wasm_worker_stack: slot %u is not 1 to %d", (unsigned)slot, BB_CPU_MAX_THREADS - 1);
    return 0;
  }
  if (bytes < BBW_WORKER_STACK_MIN) {
    bbw_fail(BB_ERR_INVALID_ARGUMENT, "bb_wasm_worker_stack: %u bytes is less than the %u a worker needs", (unsigned)bytes,
             (unsigned)BBW_WORKER_STACK_MIN);
    return 0;
  }
#if defined(__EMSCRIPTEN_PTHREADS__)
  const uintptr_t top = bbw_stack_alloc(slot, bytes);
  if (!top) {
    bbw_fail(BB_ERR_NOMEM, "bb_wasm_worker_stack: no memory for %u bytes of stack for slot %u, or the slot holds a stack already",
             (unsigned)bytes, (unsigned)slot);
  }
  return (uint32_t)top;
#else
  bbw_fail(BB_ERR_UNSUPPORTED, "bb_wasm_worker_stack: this build has no thread runtime");
  return 0;
#endif
}

int32_t bb_wasm_worker_stack_free(uint32_t slot) {
  bbw_error_clear();
  if (!bb_wasm_threads_supported())
    return bbw_fail(BB_ERR_UNSUPPORTED, "bb_wasm_worker_stack_free: this module has no shared memory (load bb-mt.wasm)");
  if (slot == 0 || slot >= BB_CPU_MAX_THREADS)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "bb_wasm_worker_stack_free: slot %u is not 1 to %d", (unsigned)slot, BB_CPU_MAX_THREADS - 1);
#if defined(__EMSCRIPTEN_PTHREADS__)
  switch (bbw_stack_free(slot)) {
  case 0: return BB_OK;
  case 1:
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "bb_wasm_worker_stack_free: the worker of slot %u still runs on its stack (in bb_wasm_worker_main)",
                    (unsigned)slot);
  default: return bbw_fail(BB_ERR_NOT_FOUND, "bb_wasm_worker_stack_free: slot %u holds no stack", (unsigned)slot);
  }
#else
  return bbw_fail(BB_ERR_UNSUPPORTED, "bb_wasm_worker_stack_free: this build has no thread runtime");
#endif
}

double bb_wasm_pool_stat(uint32_t which) {
  bb_cpu_thread_stats s;
  bb_cpu_thread_stats_get(&s);
  switch (which) {
  case 0: return (double)s.jobs;
  case 1: return (double)s.tasks;
  case 2: return (double)s.tasks_on_workers;
  case 3: return (double)s.workers_live;
#if defined(__EMSCRIPTEN_PTHREADS__)
  case 4: return (double)bbw_stacks_held();
#else
  case 4: return 0;
#endif
  default: return -1;
  }
}

void bb_wasm_pool_trace_set(uint32_t on) { bb_cpu_thread_trace_set(on != 0); }

double bb_wasm_pool_trace_stat(uint32_t which) {
  bb_cpu_thread_trace t;
  bb_cpu_thread_trace_get(&t);
  const uint64_t fields[] = {t.jobs,         t.job_ns, t.caller_ns, t.caller_tasks, t.wait_ns, t.worker_ns,
                             t.worker_tasks, t.wakes,  t.wake_ns,   t.late,         t.sleeps, t.notify_ns};
  return which < sizeof fields / sizeof fields[0] ? (double)fields[which] : -1;
}
