/* The backend's threads (bb_cpu_set_threads): the process-wide work pool of
 * util/parallel.c, sized by the caller. */
#include "bb/cpu.h"
#include "util/parallel.h"

#if !defined(__wasm__)
#include <unistd.h>
#endif

/* One thread per processor the system has online. */
static size_t processor_count(void) {
#if defined(__wasm__)
  return 1;
#else
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) return 1;
  return n > BB_CPU_MAX_THREADS ? BB_CPU_MAX_THREADS : (size_t)n;
#endif
}

int bb_cpu_set_threads(size_t n, bb_error *err) {
  if (n == 0) n = processor_count();
  if (n > BB_CPU_MAX_THREADS)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "bb_cpu_set_threads: %zu threads, over the %d this backend runs on", n,
                        BB_CPU_MAX_THREADS);
  const int rc = bbi_parallel_set_threads(n);
  if (rc == BB_ERR_UNSUPPORTED)
    return bb_error_set(err, rc, "bb_cpu_set_threads: this build has no threads (a WebAssembly module without shared memory)");
  if (rc)
    return bb_error_set(err, rc, "bb_cpu_set_threads: could not start %zu threads; running on %zu", n, bbi_parallel_width());
  return BB_OK;
}

size_t bb_cpu_threads(void) { return bbi_parallel_width(); }

int bb_cpu_worker_main(size_t slot) {
#if defined(__wasm__)
  if (!bbi_parallel_supported()) return BB_ERR_UNSUPPORTED;
  if (slot == 0 || slot >= BB_CPU_MAX_THREADS) return BB_ERR_INVALID_ARGUMENT;
  bbi_parallel_worker_main(slot);
  return BB_OK;
#else
  (void)slot;
  return BB_ERR_UNSUPPORTED;
#endif
}

void bb_cpu_stop_workers(void) { bbi_parallel_stop_workers(); }

void bb_cpu_thread_stats_get(bb_cpu_thread_stats *out) {
  bbi_parallel_stats s;
  bbi_parallel_get_stats(&s);
  out->jobs = s.jobs;
  out->tasks = s.tasks;
  out->tasks_on_workers = s.tasks_on_workers;
  out->workers_live = s.workers_live;
}

void bb_cpu_thread_trace_set(bool on) { bbi_parallel_trace_set(on); }

void bb_cpu_thread_trace_get(bb_cpu_thread_trace *out) {
  bbi_parallel_trace t;
  bbi_parallel_trace_get(&t);
  *out = (bb_cpu_thread_trace){t.jobs,      t.job_ns,       t.caller_ns, t.caller_tasks, t.wait_ns, t.worker_ns,
                               t.worker_tasks, t.wakes, t.wake_ns,   t.late,         t.sleeps, t.notify_ns};
}

_Static_assert(BB_CPU_MAX_THREADS == BBI_PARALLEL_MAX_THREADS, "one limit");
