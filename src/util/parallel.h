/* The work pool: threads that run the tasks of one job at a time for the CPU backend.
 *
 * A job is n tasks, numbered 0..n-1, and a function that runs one of them. Whoever cuts an
 * operation into tasks (the GEMM driver, tensor/kernels/split.c) keeps one rule: what a
 * task computes, and in what order, depends only on the operation and the task's number,
 * never on which thread runs it or how many threads there are. Then an operation gives
 * the same bits on one thread as on eight.
 *
 * One pool per process. Natively its workers are threads it starts (bbi_parallel_set_threads).
 * In a WebAssembly build with shared memory (compiled with -matomics) the host starts
 * them: each Web Worker instantiates the same module on the same memory and calls
 * bbi_parallel_worker_main, which returns only when the pool stops. In a WebAssembly build
 * without threads every job runs on its caller.
 *
 * The caller of a job always takes part, so a job finishes even when no worker has come
 * (yet). A job started while another is running (another thread's session, or a task
 * that splits its own work) runs on its caller alone. */
#ifndef BBI_UTIL_PARALLEL_H
#define BBI_UTIL_PARALLEL_H

#include <stddef.h>
#include <stdint.h>

/* Most threads a pool runs on (the caller included), and most tasks in one job. */
#define BBI_PARALLEL_MAX_THREADS 64
#define BBI_PARALLEL_MAX_TASKS 4095

/* Runs task `task` of a job. `slot` (< the job's width) says which participant runs it,
 * 0 being the caller: an index into per-participant scratch, never an input to what the
 * task computes. */
typedef void (*bbi_parallel_task_fn)(void *ctx, size_t task, size_t slot);

/* 1 when this build can run threads (natively, or WebAssembly with shared memory). */
int bbi_parallel_supported(void);

/* How many threads jobs may use now (the caller included): what bbi_parallel_set_threads
 * set, 1 at first. Size per-participant scratch by it. */
size_t bbi_parallel_width(void);

/* Runs tasks 0..n_tasks-1 of fn, each exactly once, on at most `width` participants (slots
 * 0..width-1), and returns when all have finished. n_tasks over BBI_PARALLEL_MAX_TASKS
 * runs them all on the caller. */
void bbi_parallel_run(size_t n_tasks, size_t width, bbi_parallel_task_fn fn, void *ctx);

/* Runs fn over items [0, n) cut into pieces of `grain` items (the last one shorter; grain
 * doubles until the pieces fit BBI_PARALLEL_MAX_TASKS), on the pool when there are two
 * pieces or more, else as one call over [0, n). The cut depends on n and grain alone, and
 * fn over a piece must compute what it computes over the whole range restricted to that
 * piece (true of elementwise work on pieces that start at multiples of its vector block,
 * and of rows computed one by one). */
typedef void (*bbi_parallel_range_fn)(void *ctx, size_t begin, size_t end);
void bbi_parallel_for(size_t n, size_t grain, bbi_parallel_range_fn fn, void *ctx);

/* Sets how many threads jobs use (1 to BBI_PARALLEL_MAX_THREADS, the caller included).
 * Natively it stops the pool's threads and starts n - 1 new ones; in WebAssembly it only
 * records n, and the host starts the workers. Not to be called while a job runs on
 * another thread. Returns 0, BB_ERR_INVALID_ARGUMENT for n out of range, BB_ERR_UNSUPPORTED
 * for n > 1 in a build without threads, BB_ERR_NOMEM when a thread cannot be started (the
 * pool then keeps the threads that did start). */
int bbi_parallel_set_threads(size_t n);

/* WebAssembly with shared memory: the loop of the worker in slot `slot` (1 to
 * BBI_PARALLEL_MAX_THREADS - 1), run on the worker's own instance and stack. It waits for
 * jobs and runs their tasks until bbi_parallel_stop_workers. */
void bbi_parallel_worker_main(size_t slot);

/* Makes every worker loop return (natively: joins the threads); the pool then runs jobs
 * on their callers until bbi_parallel_set_threads starts it again. */
void bbi_parallel_stop_workers(void);

/* Counters since the process started, for tests and benchmarks. */
typedef struct bbi_parallel_stats {
  uint64_t jobs;             /* jobs that went to the pool (not run on the caller alone) */
  uint64_t tasks;            /* tasks of those jobs */
  uint64_t tasks_on_workers; /* of which a worker ran */
  uint32_t workers_live;     /* workers in their loop now */
} bbi_parallel_stats;

void bbi_parallel_get_stats(bbi_parallel_stats *out);

/* The pool's trace, for finding where a job's time goes (a debugging aid: it reads a clock
 * several times a job). Off at first; turning it on or off zeroes it. Times in nanoseconds
 * of the monotonic clock (in WebAssembly, each thread's host clock on the main thread's
 * origin). */
typedef struct bbi_parallel_trace {
  uint64_t jobs;         /* jobs that went to the pool while tracing */
  uint64_t job_ns;       /* the callers' time from publishing a job to its end */
  uint64_t caller_ns;    /* the callers' time in their own tasks */
  uint64_t caller_tasks; /* tasks the callers ran */
  uint64_t wait_ns;      /* the callers' time after their last task until the workers' ended */
  uint64_t worker_ns;    /* the workers' time in tasks */
  uint64_t worker_tasks; /* tasks the workers ran */
  uint64_t wakes;        /* times a worker saw a new job */
  uint64_t wake_ns;      /* their time from the job's publication to a worker seeing it */
  uint64_t late;         /* of those, jobs whose tasks were all handed out when the worker came */
  uint64_t sleeps;       /* times a worker went to sleep (stopped spinning) between jobs */
  uint64_t notify_ns;    /* the callers' time waking the workers (publishing a job) */
} bbi_parallel_trace;

void bbi_parallel_trace_set(int on);
void bbi_parallel_trace_get(bbi_parallel_trace *out);

#endif
