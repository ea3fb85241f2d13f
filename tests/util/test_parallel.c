/* The work pool (util/parallel.h): every task of a job runs exactly once, on a slot
 * within the job's width; tasks really run side by side on several threads; a job inside
 * a task, and jobs from two threads at once, run on their callers; the thread count is
 * bounded. In a WebAssembly build without threads only the first and the bounds apply. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, sched_yield under -std=c11 */

#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "bb/cpu.h"
#include "harness.h"
#include "util/parallel.h"

#if !defined(__wasm__)
#define HAVE_TEST_THREADS 1
#include <pthread.h>
#include <sched.h>
#endif

#define MAX_COUNTED 5000

typedef struct counted {
  _Atomic int runs[MAX_COUNTED];
  _Atomic int bad_slot;
  size_t width;
} counted;

static void count_task(void *ctx, size_t task, size_t slot) {
  counted *c = ctx;
  atomic_fetch_add(&c->runs[task], 1);
  if (slot >= c->width) atomic_fetch_add(&c->bad_slot, 1);
}

/* Runs n tasks on `width` and checks each ran once on a slot inside the width. */
static int every_task_once(size_t n, size_t width) {
  static counted c;
  for (size_t i = 0; i < MAX_COUNTED; i++) atomic_store(&c.runs[i], 0);
  atomic_store(&c.bad_slot, 0);
  c.width = width;
  bbi_parallel_run(n, width, count_task, &c);
  int ok = atomic_load(&c.bad_slot) == 0;
  for (size_t i = 0; i < MAX_COUNTED; i++) ok = ok && atomic_load(&c.runs[i]) == (i < n ? 1 : 0);
  return ok;
}

static void test_every_task_runs_once(void) {
  const size_t counts[] = {0, 1, 2, 3, 7, 64, 1000, BBI_PARALLEL_MAX_TASKS, BBI_PARALLEL_MAX_TASKS + 1};
  const size_t most = bbi_parallel_supported() ? 4 : 1;
  for (size_t threads = 1; threads <= most; threads++) {
    CHECK_EQ_INT(bbi_parallel_set_threads(threads), 0);
    CHECK_EQ_INT(bbi_parallel_width(), threads);
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
      for (size_t width = 1; width <= threads + 1; width++)
        CHECK_MSG(every_task_once(counts[i], width), "%zu tasks, %zu threads, width %zu", counts[i], threads, width);
  }
  CHECK_EQ_INT(bbi_parallel_set_threads(1), 0);
}

/* Pieces of bbi_parallel_for: [0, n) covered once, cut at multiples of the grain. */
typedef struct pieces {
  _Atomic int covered[MAX_COUNTED];
  _Atomic int misaligned;
  size_t grain;
} pieces;

static void mark_piece(void *ctx, size_t begin, size_t end) {
  pieces *p = ctx;
  if (begin % p->grain) atomic_fetch_add(&p->misaligned, 1);
  for (size_t i = begin; i < end; i++) atomic_fetch_add(&p->covered[i], 1);
}

static void test_ranges_are_cut_by_the_grain(void) {
  static pieces p;
  const size_t most = bbi_parallel_supported() ? 3 : 1;
  for (size_t threads = 1; threads <= most; threads++) {
    CHECK_EQ_INT(bbi_parallel_set_threads(threads), 0);
    const size_t sizes[] = {1, 63, 64, 65, 4999}, grains[] = {1, 64, 1000};
    for (size_t s = 0; s < 5; s++)
      for (size_t g = 0; g < 3; g++) {
        for (size_t i = 0; i < MAX_COUNTED; i++) atomic_store(&p.covered[i], 0);
        atomic_store(&p.misaligned, 0);
        p.grain = grains[g];
        bbi_parallel_for(sizes[s], grains[g], mark_piece, &p);
        int ok = atomic_load(&p.misaligned) == 0;
        for (size_t i = 0; i < MAX_COUNTED; i++) ok = ok && atomic_load(&p.covered[i]) == (i < sizes[s] ? 1 : 0);
        CHECK_MSG(ok, "n %zu, grain %zu, %zu threads", sizes[s], grains[g], threads);
      }
  }
  CHECK_EQ_INT(bbi_parallel_set_threads(1), 0);
}

static void test_thread_count_is_bounded(void) {
  bb_error err;
  CHECK_EQ_INT(bb_cpu_set_threads(BB_CPU_MAX_THREADS + 1, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "65 threads") != NULL);
  CHECK_EQ_INT(bb_cpu_threads(), 1);
  CHECK_EQ_INT(bbi_parallel_set_threads(0), BB_ERR_INVALID_ARGUMENT);
  if (!bbi_parallel_supported()) {
    CHECK_EQ_INT(bb_cpu_set_threads(2, &err), BB_ERR_UNSUPPORTED);
    CHECK(strstr(err.message, "no threads") != NULL);
    CHECK_EQ_INT(bb_cpu_set_threads(1, &err), 0);
    return;
  }
  CHECK_EQ_INT(bb_cpu_set_threads(0, &err), 0); /* one per processor */
  CHECK(bb_cpu_threads() >= 1);
  CHECK_EQ_INT(bb_cpu_set_threads(1, &err), 0);
  CHECK_EQ_INT(bb_cpu_threads(), 1);
}

#if HAVE_TEST_THREADS

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Each task waits until every task of the job has started: only possible when they run
 * at the same time. The wait gives up after a minute (the test then fails, never hangs). */
typedef struct rendezvous {
  size_t n;
  _Atomic size_t started;
  _Atomic int slots_seen; /* bit per slot */
  _Atomic int gave_up;
} rendezvous;

static void meet_task(void *ctx, size_t task, size_t slot) {
  (void)task;
  rendezvous *r = ctx;
  atomic_fetch_or(&r->slots_seen, 1 << slot);
  atomic_fetch_add(&r->started, 1);
  const double give_up = seconds() + 60;
  while (atomic_load(&r->started) < r->n) {
    if (seconds() > give_up) {
      atomic_store(&r->gave_up, 1);
      return;
    }
    sched_yield();
  }
}

static void test_tasks_run_side_by_side(void) {
  for (size_t threads = 2; threads <= 4; threads++) {
    CHECK_EQ_INT(bbi_parallel_set_threads(threads), 0);
    rendezvous r = {threads, 0, 0, 0};
    bbi_parallel_stats before, after;
    bbi_parallel_get_stats(&before);
    bbi_parallel_run(threads, threads, meet_task, &r);
    bbi_parallel_get_stats(&after);
    CHECK_MSG(!atomic_load(&r.gave_up), "%zu tasks never ran at once on %zu threads", threads, threads);
    CHECK_EQ_INT(atomic_load(&r.slots_seen), (1 << threads) - 1);
    CHECK_EQ_INT(after.jobs - before.jobs, 1);
    CHECK_EQ_INT(after.tasks_on_workers - before.tasks_on_workers, threads - 1);
    CHECK_EQ_INT(after.workers_live, threads - 1);
    /* the same counters through the public interface */
    bb_cpu_thread_stats pub;
    bb_cpu_thread_stats_get(&pub);
    CHECK(pub.jobs == after.jobs && pub.tasks == after.tasks && pub.tasks_on_workers == after.tasks_on_workers);
    CHECK_EQ_INT(pub.workers_live, threads - 1);
  }
  /* natively the backend runs its own threads: no host-driven worker loop */
  CHECK_EQ_INT(bb_cpu_worker_main(1), BB_ERR_UNSUPPORTED);
  bb_cpu_stop_workers(); /* joins them: one thread again */
  CHECK_EQ_INT(bb_cpu_threads(), 1);
  bbi_parallel_stats s;
  bbi_parallel_get_stats(&s);
  CHECK_EQ_INT(s.workers_live, 0);
}

/* A task that starts a job of its own: that job runs on the task's thread, to the end. */
typedef struct nested {
  _Atomic int inner_runs;
  _Atomic int inner_off_slot0;
} nested;

static void inner_task(void *ctx, size_t task, size_t slot) {
  (void)task;
  nested *n = ctx;
  atomic_fetch_add(&n->inner_runs, 1);
  if (slot != 0) atomic_fetch_add(&n->inner_off_slot0, 1);
}

static void outer_task(void *ctx, size_t task, size_t slot) {
  (void)task, (void)slot;
  bbi_parallel_run(10, 4, inner_task, ctx);
}

static void test_a_job_inside_a_task_runs_on_its_caller(void) {
  CHECK_EQ_INT(bbi_parallel_set_threads(3), 0);
  nested n = {0, 0};
  bbi_parallel_run(20, 3, outer_task, &n);
  CHECK_EQ_INT(atomic_load(&n.inner_runs), 200);
  CHECK_EQ_INT(atomic_load(&n.inner_off_slot0), 0);
  CHECK_EQ_INT(bbi_parallel_set_threads(1), 0);
}

/* Two threads of the caller's own start jobs at once, many times: every job completes
 * with each task once (one of them runs on the pool, the other on its caller). */
static void *caller_thread(void *arg) {
  _Atomic int *failures = arg;
  static _Thread_local counted c;
  for (int round = 0; round < 200; round++) {
    for (size_t i = 0; i < 300; i++) atomic_store(&c.runs[i], 0);
    atomic_store(&c.bad_slot, 0);
    c.width = 3;
    bbi_parallel_run(300, 3, count_task, &c);
    int ok = atomic_load(&c.bad_slot) == 0;
    for (size_t i = 0; i < 300; i++) ok = ok && atomic_load(&c.runs[i]) == 1;
    if (!ok) atomic_fetch_add(failures, 1);
  }
  return NULL;
}

static void test_jobs_from_two_threads_at_once(void) {
  CHECK_EQ_INT(bbi_parallel_set_threads(3), 0);
  _Atomic int failures = 0;
  pthread_t a, b;
  CHECK(!pthread_create(&a, NULL, caller_thread, &failures));
  CHECK(!pthread_create(&b, NULL, caller_thread, &failures));
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  CHECK_EQ_INT(atomic_load(&failures), 0);
  CHECK_EQ_INT(bbi_parallel_set_threads(1), 0);
}

#endif

/* The trace (a debugging aid) accounts for every job and task the pool ran while on, and
 * turning it off zeroes it. */
static void trace_task(void *ctx, size_t task, size_t slot) {
  (void)task;
  (void)slot;
  volatile float *sink = ctx;
  float x = 1.0f;
  for (int i = 0; i < 20000; i++) x = x * 1.0000001f + 1e-7f;
  *sink = x;
}

static void test_the_trace_accounts_for_every_job(void) {
  const size_t most = bbi_parallel_supported() ? 3 : 1;
  for (size_t threads = 1; threads <= most; threads++) {
    CHECK_EQ_INT(bbi_parallel_set_threads(threads), 0);
    bbi_parallel_trace_set(1);
    bbi_parallel_stats before, after;
    bbi_parallel_get_stats(&before);
    volatile float sink = 0;
    for (int job = 0; job < 20; job++) bbi_parallel_run(16, threads, trace_task, (void *)&sink);
    bbi_parallel_get_stats(&after);
    bbi_parallel_trace t;
    bbi_parallel_trace_get(&t);
    CHECK_EQ_INT(t.jobs, after.jobs - before.jobs);
    CHECK_EQ_INT(t.jobs, threads > 1 ? 20 : 0);
    CHECK_EQ_INT(t.caller_tasks + t.worker_tasks, after.tasks - before.tasks);
    CHECK_EQ_INT(t.worker_tasks, after.tasks_on_workers - before.tasks_on_workers);
    CHECK(t.caller_ns <= t.job_ns && t.wait_ns <= t.job_ns && t.notify_ns <= t.job_ns);
    CHECK(t.late <= t.wakes);
    CHECK(t.worker_tasks == 0 || t.worker_ns > 0);
    CHECK(t.caller_tasks == 0 || t.caller_ns > 0);
    bbi_parallel_trace_set(0);
    bbi_parallel_trace_get(&t);
    CHECK(t.jobs == 0 && t.job_ns == 0 && t.caller_tasks == 0 && t.worker_tasks == 0);
    bbi_parallel_run(16, threads, trace_task, (void *)&sink);
    bbi_parallel_trace_get(&t);
    CHECK_EQ_INT(t.jobs, 0); /* off: nothing recorded */
  }
  CHECK_EQ_INT(bbi_parallel_set_threads(1), 0);
}

int main(void) {
  RUN(test_every_task_runs_once);
  RUN(test_ranges_are_cut_by_the_grain);
  RUN(test_thread_count_is_bounded);
  RUN(test_the_trace_accounts_for_every_job);
#if HAVE_TEST_THREADS
  RUN(test_tasks_run_side_by_side);
  RUN(test_a_job_inside_a_task_runs_on_its_caller);
  RUN(test_jobs_from_two_threads_at_once);
#endif
  return bb_test_finish();
}
