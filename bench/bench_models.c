/* One ONNX model on the CPU executor: the CPU time of an inference run, or of a training
 * step (the training graph with softmax cross-entropy against random labels, then Adam),
 * on a random input of the given shape. It prints the median and the best of the timed
 * runs; bench/vision_vs_peers.py runs it beside onnxruntime and PyTorch.
 *
 *   bench_models MODEL.onnx INPUT N,C,H,W [--runs R] [--no-rewrites] [--no-winograd] [--train CLASSES]
 *                [--threads N]
 *
 * Natively the time is the process's CPU time (on a shared machine the wall clock measures
 * the share of the processor the process got), or with --threads N the wall-clock time on
 * the work pool's N threads (bb_cpu_set_threads, the caller included; N may be 1, for the
 * speed-up); under Node, wall time. */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bb/cpu.h"
#include "bb/grad.h"
#include "bench_native.h"

#ifdef __EMSCRIPTEN__
#define BENCH_CLOCK_IS_WALL 1
#else
#define BENCH_CLOCK_IS_WALL 0
#endif

/* The wall clock, for runs on several threads (CPU time would add the threads up). */
static double wall_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct job {
  bb_cpu_session *session;
  bb_grad_trainer *trainer;
  const char *names[2];
  bb_tensor *inputs[2];
  bb_tensor *outputs[16];
} job;

static int run_once(job *j, bb_error *err) {
  if (j->trainer) {
    bb_grad_step s;
    return bb_grad_trainer_step(j->trainer, j->names, j->inputs, 2, &s, err);
  }
  int rc = bb_cpu_session_run(j->session, j->names, j->inputs, 1, j->outputs, err);
  for (size_t k = 0; !rc && k < bb_cpu_session_output_count(j->session); k++) bb_tensor_release(j->outputs[k]);
  return rc;
}

static int parse_dims(const char *text, int64_t *dims) {
  int rank = 0;
  for (const char *p = text; *p && rank < 8;) {
    char *end;
    dims[rank++] = strtoll(p, &end, 10);
    if (end == p || dims[rank - 1] <= 0) return -1;
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return -1;
  }
  return rank;
}

static int prepare(job *j, bb_model *m, const bb_cpu_session_options *options, long classes, const int64_t *dims,
                   bb_error *err) {
  if (!classes) return bb_cpu_session_new_with_options(m, NULL, options, &j->session, err);
  bb_grad_graph *g;
  bb_grad_optimizer *opt;
  int rc = bench_trainer(m, NULL, &g, &opt, &j->trainer, err);
  if (rc) return rc;
  j->names[1] = "labels";
  j->inputs[1] = bb_tensor_new_empty(NULL, BB_DTYPE_INT64, 1, dims);
  for (int64_t i = 0; i < dims[0]; i++) ((int64_t *)bb_tensor_data(j->inputs[1]))[i] = (i * 7) % classes;
  return 0; /* the graph and optimizer live as long as the process */
}

int main(int argc, char **argv) {
  const char *path = NULL, *input = NULL, *shape = NULL;
  long runs = 30, classes = 0, threads = 1;
  bool wall = BENCH_CLOCK_IS_WALL;
  bb_cpu_session_options options = {sizeof options, 0};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = strtol(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--train") == 0 && i + 1 < argc) classes = strtol(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = strtol(argv[++i], NULL, 10), wall = true;
    else if (strcmp(argv[i], "--no-rewrites") == 0) options.rewrites_off = BB_CPU_REWRITE_ALL;
    else if (strcmp(argv[i], "--no-winograd") == 0) options.rewrites_off |= BB_CPU_REWRITE_WINOGRAD;
    else if (!path) path = argv[i];
    else if (!input) input = argv[i];
    else shape = argv[i];
  }
  int64_t dims[8];
  int rank = shape ? parse_dims(shape, dims) : -1;
  if (!path || !input || rank < 1 || runs < 1 || classes < 0 || threads < 1) {
    fprintf(stderr,
            "usage: bench_models MODEL.onnx INPUT N,C,H,W [--runs R] [--no-rewrites] [--train CLASSES] [--threads N]\n");
    return 2;
  }
  bb_error err;
  if (threads > 1 && bb_cpu_set_threads((size_t)threads, &err)) {
    fprintf(stderr, "bench_models: %s\n", err.message);
    return 1;
  }
  bb_model *m = bench_load_model(path);
  if (!m) {
    fprintf(stderr, "bench_models: cannot load %s\n", path);
    return 1;
  }
  job j;
  memset(&j, 0, sizeof j);
  if (prepare(&j, m, &options, classes, dims, &err)) {
    fprintf(stderr, "bench_models: %s: %s\n", path, err.message);
    return 1;
  }
  j.names[0] = input;
  j.inputs[0] = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, rank, dims);
  uint32_t seed = 12345;
  for (int64_t i = 0; i < j.inputs[0]->numel; i++) {
    seed = seed * 1664525u + 1013904223u;
    ((float *)bb_tensor_data(j.inputs[0]))[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
  }
  double *times = calloc((size_t)runs, sizeof *times);
  for (int w = 0; w < 3; w++) /* warm: packed weights, the recycling allocator */
    if (run_once(&j, &err)) {
      fprintf(stderr, "bench_models: %s: %s\n", path, err.message);
      return 1;
    }
  for (long r = 0; r < runs; r++) {
    double t0 = wall ? wall_seconds() : bench_now_seconds();
    if (run_once(&j, &err)) {
      fprintf(stderr, "bench_models: %s: %s\n", path, err.message);
      return 1;
    }
    times[r] = ((wall ? wall_seconds() : bench_now_seconds()) - t0) * 1e3;
  }
  qsort(times, (size_t)runs, sizeof *times, cmp_double);
  bb_cpu_session_rewrites rw = {0};
  if (j.session) bb_cpu_session_rewrites_made(j.session, false, &rw);
  printf("bench_models: %s %s median %.3f ms, best %.3f ms over %ld runs (%ld thread%s, %s); %zu nodes as %zu steps "
         "(folded %zu constants, %zu BatchNormalizations; fused %zu activations, %zu Adds; %zu Identity elided)\n",
         path, classes ? "train-step" : "inference", times[runs / 2], times[0], runs, threads, threads > 1 ? "s" : "",
         wall ? "wall clock" : "CPU time", rw.nodes, rw.steps,
         rw.folded_constants, rw.folded_batchnorms, rw.fused_activations, rw.fused_adds, rw.elided_identities);
  free(times);
  bb_tensor_release(j.inputs[0]);
  bb_tensor_release(j.inputs[1]);
  bb_cpu_session_free(j.session);
  bb_grad_trainer_free(j.trainer);
  bb_model_free(m);
  return 0;
}
