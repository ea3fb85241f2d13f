/* The work pool (see parallel.h).
 *
 * A job is published in one 64-bit claim word: the job's generation, its width, its task
 * count and the next task to hand out. A participant claims a task by a compare-and-swap
 * that advances `next`; the swap fails once the word has changed (the job moved on), so a
 * participant that woke late can never run a task of a job it did not see start. The job's
 * function and context are read only after a successful claim, and the caller rewrites them
 * only after every claimed task has counted itself done, so they are never read while they
 * change. Workers wait for a new job on `wake_seq`: spinning a little (jobs come in quick
 * succession while a graph runs), then asleep (a condition variable natively, memory.atomic.wait
 * in WebAssembly). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, for the trace */

#include "util/parallel.h"

#include <time.h>

#include "bb/common.h"

#if defined(__wasm__) && !defined(__wasm_atomics__)
#define POOL_THREADS 0
#else
#define POOL_THREADS 1
#include <stdatomic.h>
#endif

#if POOL_THREADS && !defined(__wasm__)
#define POOL_PTHREADS 1
#include <pthread.h>
#else
#define POOL_PTHREADS 0
#endif

int bbi_parallel_supported(void) { return POOL_THREADS; }

static void run_inline(size_t n_tasks, bbi_parallel_task_fn fn, void *ctx) {
  for (size_t t = 0; t < n_tasks; t++) fn(ctx, t, 0);
}

typedef struct range_job {
  bbi_parallel_range_fn fn;
  void *ctx;
  size_t n, grain;
} range_job;

static void range_task(void *ctx, size_t task, size_t slot) {
  (void)slot;
  const range_job *job = ctx;
  const size_t begin = task * job->grain, left = job->n - begin;
  job->fn(job->ctx, begin, begin + (left < job->grain ? left : job->grain));
}

void bbi_parallel_for(size_t n, size_t grain, bbi_parallel_range_fn fn, void *ctx) {
  if (n == 0) return;
  if (grain == 0) grain = 1;
  while ((n - 1) / grain + 1 > BBI_PARALLEL_MAX_TASKS) grain *= 2;
  const size_t tasks = (n - 1) / grain + 1, width = bbi_parallel_width();
  if (tasks < 2 || width < 2) {
    fn(ctx, 0, n);
    return;
  }
  range_job job = {fn, ctx, n, grain};
  bbi_parallel_run(tasks, width, range_task, &job);
}

#if !POOL_THREADS

size_t bbi_parallel_width(void) { return 1; }

void bbi_parallel_run(size_t n_tasks, size_t width, bbi_parallel_task_fn fn, void *ctx) {
  (void)width;
  run_inline(n_tasks, fn, ctx);
}

int bbi_parallel_set_threads(size_t n) {
  if (n < 1 || n > BBI_PARALLEL_MAX_THREADS) return BB_ERR_INVALID_ARGUMENT;
  return n == 1 ? BB_OK : BB_ERR_UNSUPPORTED;
}

void bbi_parallel_worker_main(size_t slot) { (void)slot; }
void bbi_parallel_stop_workers(void) {}

void bbi_parallel_get_stats(bbi_parallel_stats *out) {
  out->jobs = out->tasks = out->tasks_on_workers = 0;
  out->workers_live = 0;
}

void bbi_parallel_trace_set(int on) { (void)on; }
void bbi_parallel_trace_get(bbi_parallel_trace *out) { *out = (bbi_parallel_trace){0}; }

#else

/* ---- the claim word: generation 32 bits | width 8 | tasks 12 | next 12 ------------------ */

#define NEXT_BITS 12
#define TASK_MASK ((1u << NEXT_BITS) - 1)

static uint64_t pack(uint32_t gen, size_t width, size_t n_tasks, size_t next) {
  return (uint64_t)gen << 32 | (uint64_t)width << 24 | (uint64_t)n_tasks << NEXT_BITS | (uint64_t)next;
}
static uint32_t gen_of(uint64_t c) { return (uint32_t)(c >> 32); }
static size_t width_of(uint64_t c) { return (size_t)(c >> 24) & 0xff; }
static size_t tasks_of(uint64_t c) { return (size_t)(c >> NEXT_BITS) & TASK_MASK; }
static size_t next_of(uint64_t c) { return (size_t)c & TASK_MASK; }

_Static_assert(BBI_PARALLEL_MAX_TASKS <= TASK_MASK, "task numbers fit the claim word");
_Static_assert(BBI_PARALLEL_MAX_THREADS <= 0xff, "widths fit the claim word");

static _Atomic uint64_t claim_word;
static _Atomic uint32_t done_count;
static _Atomic uint32_t wake_seq;
static _Atomic int busy;     /* a job (or a change of threads) is in progress */
static _Atomic int stopping; /* workers leave their loop */
static _Atomic uint32_t threads_setting = 1;
static _Atomic uint32_t workers_live;
static _Atomic uint64_t stat_jobs, stat_tasks, stat_worker_tasks;

/* ---- the trace (bbi_parallel_trace): counters, read with the clock only while on -------- */

static _Atomic int tracing;
static _Atomic uint64_t tr_jobs, tr_job_ns, tr_caller_ns, tr_caller_tasks, tr_wait_ns, tr_worker_ns, tr_worker_tasks,
    tr_wakes, tr_wake_ns, tr_late, tr_sleeps, tr_notify_ns;
/* when the last traced job was published; 0 from bbi_parallel_trace_set until one is */
static _Atomic uint64_t tr_published;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void tr_add(_Atomic uint64_t *counter, uint64_t v) { atomic_fetch_add_explicit(counter, v, memory_order_relaxed); }

/* The job's function; written only by the caller holding `busy`, before it publishes the
 * claim word, and read only by participants that claimed one of its tasks. */
static bbi_parallel_task_fn job_fn;
static void *job_ctx;

/* Checks a shared word this many times before sleeping on it. */
#define SPIN_CHECKS 20000

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* Claims the next task of the current job for participant `self`; 0 when there is none
 * (no job, all handed out, or self is outside the job's width). */
static int claim(size_t self, size_t *task) {
  uint64_t c = atomic_load(&claim_word);
  for (;;) {
    if (self >= width_of(c) || next_of(c) >= tasks_of(c)) return 0;
    if (atomic_compare_exchange_weak(&claim_word, &c, c + 1)) {
      *task = next_of(c);
      return 1;
    }
  }
}

/* Runs claimed tasks of the current job until none is left; returns how many. A worker's
 * task is traced and counted before it counts itself done, so that a caller that saw the
 * job end reads it. */
static uint32_t run_claimed(size_t self) {
  uint32_t ran = 0;
  size_t task;
  const int traced = atomic_load_explicit(&tracing, memory_order_relaxed);
  while (claim(self, &task)) {
    const uint64_t start = traced ? now_ns() : 0;
    job_fn(job_ctx, task, self);
    ran++;
    if (traced) {
      tr_add(self ? &tr_worker_ns : &tr_caller_ns, now_ns() - start);
      tr_add(self ? &tr_worker_tasks : &tr_caller_tasks, 1);
    }
    if (self != 0) {
      atomic_fetch_add_explicit(&stat_worker_tasks, 1, memory_order_relaxed);
      atomic_fetch_add(&done_count, 1);
    }
  }
  return ran;
}

#if POOL_PTHREADS
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sleep_cond = PTHREAD_COND_INITIALIZER;
static _Atomic uint32_t sleepers;
#endif

/* Returns once wake_seq differs from `seen` (or the pool stops). */
static void wait_for_wake(uint32_t seen) {
  for (int i = 0; i < SPIN_CHECKS; i++) {
    if (atomic_load(&wake_seq) != seen) return;
    cpu_relax();
  }
  if (atomic_load_explicit(&tracing, memory_order_relaxed)) tr_add(&tr_sleeps, 1);
#if POOL_PTHREADS
  pthread_mutex_lock(&sleep_lock);
  atomic_fetch_add(&sleepers, 1);
  while (atomic_load(&wake_seq) == seen) pthread_cond_wait(&sleep_cond, &sleep_lock);
  atomic_fetch_sub(&sleepers, 1);
  pthread_mutex_unlock(&sleep_lock);
#else
  while (atomic_load(&wake_seq) == seen)
    __builtin_wasm_memory_atomic_wait32((int32_t *)&wake_seq, (int32_t)seen, -1);
#endif
}

static void wake_workers(void) {
  atomic_fetch_add(&wake_seq, 1);
#if POOL_PTHREADS
  if (atomic_load(&sleepers) > 0) {
    pthread_mutex_lock(&sleep_lock);
    pthread_cond_broadcast(&sleep_cond);
    pthread_mutex_unlock(&sleep_lock);
  }
#else
  __builtin_wasm_memory_atomic_notify((int32_t *)&wake_seq, UINT32_MAX);
#endif
}

/* Traces a worker's coming to the job now published: how long after its publication, and
 * whether any task was left for it. */
static void trace_wake(size_t self) {
  const uint64_t published = atomic_load(&tr_published);
  if (!published) return;
  const uint64_t c = atomic_load(&claim_word);
  tr_add(&tr_wakes, 1);
  const uint64_t now = now_ns();
  tr_add(&tr_wake_ns, now > published ? now - published : 0);
  if (self < width_of(c) && next_of(c) >= tasks_of(c)) tr_add(&tr_late, 1);
}

static void worker_loop(size_t self) {
  atomic_fetch_add(&workers_live, 1);
  for (;;) {
    const uint32_t seen = atomic_load(&wake_seq);
    if (atomic_load(&stopping)) break;
    if (atomic_load_explicit(&tracing, memory_order_relaxed)) trace_wake(self);
    run_claimed(self);
    wait_for_wake(seen);
  }
  atomic_fetch_sub(&workers_live, 1);
}

size_t bbi_parallel_width(void) { return atomic_load(&threads_setting); }

void bbi_parallel_run(size_t n_tasks, size_t width, bbi_parallel_task_fn fn, void *ctx) {
  const size_t setting = atomic_load(&threads_setting);
  if (width > setting) width = setting;
  int idle = 0;
  if (n_tasks <= 1 || width <= 1 || n_tasks > BBI_PARALLEL_MAX_TASKS ||
      !atomic_compare_exchange_strong(&busy, &idle, 1)) {
    run_inline(n_tasks, fn, ctx);
    return;
  }
  job_fn = fn;
  job_ctx = ctx;
  atomic_store(&done_count, 0);
  const int traced = atomic_load_explicit(&tracing, memory_order_relaxed);
  const uint64_t published = traced ? now_ns() : 0;
  if (traced) atomic_store(&tr_published, published);
  const uint32_t gen = gen_of(atomic_load(&claim_word)) + 1;
  atomic_store(&claim_word, pack(gen, width, n_tasks, 0));
  wake_workers();
  if (traced) tr_add(&tr_notify_ns, now_ns() - published);
  const uint32_t mine = run_claimed(0);
  atomic_fetch_add(&done_count, mine);
  const uint64_t own_end = traced ? now_ns() : 0;
  while (atomic_load(&done_count) < n_tasks) cpu_relax();
  if (traced) {
    const uint64_t end = now_ns();
    tr_add(&tr_jobs, 1);
    tr_add(&tr_job_ns, end - published);
    tr_add(&tr_wait_ns, end - own_end);
  }
  atomic_fetch_add_explicit(&stat_jobs, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&stat_tasks, n_tasks, memory_order_relaxed);
  atomic_store(&busy, 0);
}

/* Waits until no job runs and takes the pool for a change of its threads. */
static void acquire_pool(void) {
  int idle = 0;
  while (!atomic_compare_exchange_weak(&busy, &idle, 1)) {
    idle = 0;
    cpu_relax();
  }
}

#if POOL_PTHREADS
static pthread_t threads[BBI_PARALLEL_MAX_THREADS];
static size_t n_threads; /* started and not yet joined */

static void *thread_main(void *arg) {
  worker_loop((size_t)(uintptr_t)arg);
  return NULL;
}

static void join_threads(void) {
  atomic_store(&stopping, 1);
  wake_workers();
  pthread_mutex_lock(&sleep_lock);
  pthread_cond_broadcast(&sleep_cond);
  pthread_mutex_unlock(&sleep_lock);
  for (size_t i = 0; i < n_threads; i++) pthread_join(threads[i], NULL);
  n_threads = 0;
  atomic_store(&stopping, 0);
}
#endif

int bbi_parallel_set_threads(size_t n) {
  if (n < 1 || n > BBI_PARALLEL_MAX_THREADS) return BB_ERR_INVALID_ARGUMENT;
  acquire_pool();
  int rc = BB_OK;
#if POOL_PTHREADS
  join_threads();
  while (n_threads + 1 < n) {
    if (pthread_create(&threads[n_threads], NULL, thread_main, (void *)(uintptr_t)(n_threads + 1))) {
      rc = BB_ERR_NOMEM;
      break;
    }
    n_threads++;
  }
  atomic_store(&threads_setting, (uint32_t)(n_threads + 1));
#else
  atomic_store(&stopping, 0);
  atomic_store(&threads_setting, (uint32_t)n);
#endif
  atomic_store(&busy, 0);
  return rc;
}

void bbi_parallel_worker_main(size_t slot) {
  if (slot == 0 || slot >= BBI_PARALLEL_MAX_THREADS) return;
  worker_loop(slot);
}

void bbi_parallel_stop_workers(void) {
  acquire_pool();
#if POOL_PTHREADS
  join_threads();
#else
  atomic_store(&stopping, 1);
  wake_workers();
#endif
  atomic_store(&threads_setting, 1);
  atomic_store(&busy, 0);
}

void bbi_parallel_trace_set(int on) {
  _Atomic uint64_t *const counters[] = {&tr_jobs,         &tr_job_ns, &tr_caller_ns, &tr_caller_tasks,
                                        &tr_wait_ns,      &tr_worker_ns, &tr_worker_tasks, &tr_wakes,
                                        &tr_wake_ns,      &tr_late,   &tr_sleeps, &tr_notify_ns};
  atomic_store(&tracing, 0);
  for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++) atomic_store(counters[i], 0);
  atomic_store(&tr_published, 0); /* written by traced jobs only */
  atomic_store(&tracing, on != 0);
}

void bbi_parallel_trace_get(bbi_parallel_trace *out) {
  out->jobs = atomic_load(&tr_jobs);
  out->job_ns = atomic_load(&tr_job_ns);
  out->caller_ns = atomic_load(&tr_caller_ns);
  out->caller_tasks = atomic_load(&tr_caller_tasks);
  out->wait_ns = atomic_load(&tr_wait_ns);
  out->worker_ns = atomic_load(&tr_worker_ns);
  out->worker_tasks = atomic_load(&tr_worker_tasks);
  out->late = atomic_load(&tr_late); /* before wakes, which a worker counts first: late <= wakes */
  out->wakes = atomic_load(&tr_wakes);
  out->wake_ns = atomic_load(&tr_wake_ns);
  out->sleeps = atomic_load(&tr_sleeps);
  out->notify_ns = atomic_load(&tr_notify_ns);
}

void bbi_parallel_get_stats(bbi_parallel_stats *out) {
  out->jobs = atomic_load(&stat_jobs);
  out->tasks = atomic_load(&stat_tasks);
  out->tasks_on_workers = atomic_load(&stat_worker_tasks);
  out->workers_live = atomic_load(&workers_live);
}

#endif
