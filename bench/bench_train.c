/* Training-step speed on the CPU executor: for the models the examples train
 * (examples/models: the CNN of federated_cnn, the MLP equivalent to CpuMlp and the
 * next-character LSTM of federated_text, batch 32)
 * and the PyTorch-exported models of tests/data/grad with a symbolic batch (LeNet-style
 * CNN on 8×8 images, transformer block, MLP), the time of one training step (training
 * graph + optimizer graph: Adam, or --optimizer's with its defaults), the steps and samples it trains per second (best of several runs),
 * the size of the training graph, and the memory of a step: what the two graphs' runs held
 * at their peak plus the parameters and optimizer state, against the parameters plus every
 * activation of the forward pass. Native and, built with Emscripten, under Node
 * (`node build-wasm/bench/bench_train.js`).
 *
 *   bench_train [--threads N] [--only SUBSTRING] [--optimizer sgd|momentum|nesterov|adam|adamw]
 *
 * Natively a step is timed by the process's CPU time, or with --threads N by the wall clock
 * on the work pool's N threads (bb_cpu_set_threads, the caller included; N may be 1, for
 * the speed-up from 1 to N). --only keeps the models whose path contains SUBSTRING. */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bb/cpu.h"
#include "bb/grad.h"
#include "bench_native.h"

static bb_model *load(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.onnx", BB_SOURCE_DIR, name);
  return bench_load_model(path);
}

typedef struct bench_case {
  const char *model, *input;
  int32_t dtype;
  int rank;
  int64_t dims[4];
  int64_t classes, vocab; /* labels in [0, classes); token ids in [0, vocab) (float ids when dtype is float) */
} bench_case;

static bb_tensor *fill(const bench_case *c, uint32_t *seed) {
  bb_tensor *t = bb_tensor_new_empty(NULL, c->dtype, c->rank, c->dims);
  for (int64_t i = 0; i < t->numel; i++) {
    *seed = *seed * 1664525u + 1013904223u;
    if (c->dtype == BB_DTYPE_FLOAT && c->vocab) ((float *)bb_tensor_data(t))[i] = (float)((*seed >> 8) % c->vocab);
    else if (c->dtype == BB_DTYPE_FLOAT) ((float *)bb_tensor_data(t))[i] = (float)(*seed >> 8) / 16777216.0f - 0.5f;
    else ((int64_t *)bb_tensor_data(t))[i] = (int64_t)(*seed >> 8) % c->vocab;
  }
  return t;
}

/* The wall clock, for runs on several threads (CPU time would add the threads up). */
static double wall_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double best_of(int runs, int reps, bool wall, int (*fn)(void *), void *arg) {
  double best = 1e30;
  for (int r = 0; r < runs; r++) {
    double t0 = wall ? wall_seconds() : bench_now_seconds();
    for (int i = 0; i < reps; i++)
      if (fn(arg)) return -1;
    double t = ((wall ? wall_seconds() : bench_now_seconds()) - t0) / reps;
    if (t < best) best = t;
  }
  return best;
}

typedef struct ctx {
  bb_grad_trainer *trainer;
  const char *names[2];
  bb_tensor *inputs[2];
} ctx;

static int run_step(void *arg) {
  ctx *c = arg;
  bb_grad_step s;
  bb_error err;
  int rc = bb_grad_trainer_step(c->trainer, c->names, c->inputs, 2, &s, &err);
  if (rc) fprintf(stderr, "step: %s\n", err.message);
  return rc;
}

int main(int argc, char **argv) {
  long threads = 1;
  bool wall = false;
  const char *only = NULL, *optimizer = "adam";
  bb_optimizer_config cfg;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = strtol(argv[++i], NULL, 10), wall = true;
    else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
    else if (strcmp(argv[i], "--optimizer") == 0 && i + 1 < argc) optimizer = argv[++i];
    else threads = 0;
  }
  if (threads < 1 || !bench_optimizer_named(optimizer, &cfg)) {
    fprintf(stderr, "usage: bench_train [--threads N] [--only SUBSTRING] [--optimizer sgd|momentum|nesterov|adam|adamw]\n");
    return 2;
  }
  bb_error terr;
  if (threads > 1 && bb_cpu_set_threads((size_t)threads, &terr)) {
    fprintf(stderr, "bench_train: %s\n", terr.message);
    return 1;
  }
#ifdef __EMSCRIPTEN__
  wall = true;
#endif
  const bench_case cases[] = {
      {"examples/models/digits_cnn", "pixels", BB_DTYPE_FLOAT, 4, {32, 1, 8, 8}, 10, 0},
      {"examples/models/digits_mlp", "pixels", BB_DTYPE_FLOAT, 2, {32, 64}, 10, 0},
      {"examples/models/text_lstm", "chars", BB_DTYPE_FLOAT, 2, {32, 16}, 28, 28},
      {"tests/data/grad/mlp", "x", BB_DTYPE_FLOAT, 2, {5, 6}, 4, 0},
      {"tests/data/grad/lenet_dynamic", "x", BB_DTYPE_FLOAT, 4, {64, 1, 8, 8}, 10, 0},
      {"tests/data/grad/transformer_dynamic", "tokens", BB_DTYPE_INT64, 2, {64, 5}, 3, 11},
  };
  printf("bench_train: %ld thread%s, %s, %s\n", threads, threads > 1 ? "s" : "", wall ? "wall clock" : "CPU time", optimizer);
  printf("%-36s %6s %6s %9s %9s %11s %10s %10s %10s %6s %6s\n", "model", "nodes", "batch", "step ms", "steps/s",
         "samples/s", "in use KiB", "held KiB", "model KiB", "in use", "held");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const bench_case *bc = &cases[i];
    if (only && !strstr(bc->model, only)) continue;
    bb_model *m = load(bc->model);
    if (!m) {
      fprintf(stderr, "%s: cannot load (run from a source tree)\n", bc->model);
      return 1;
    }
    bb_grad_graph *g;
    bb_grad_optimizer *opt;
    ctx c;
    memset(&c, 0, sizeof c);
    bb_error err;
    if (bench_trainer(m, &cfg, &g, &opt, &c.trainer, &err)) {
      fprintf(stderr, "%s: %s\n", bc->model, err.message);
      return 1;
    }
    uint32_t seed = 12345;
    bench_case labels = {NULL, NULL, BB_DTYPE_INT64, 1, {bc->dims[0]}, 0, bc->classes};
    c.names[0] = bc->input, c.names[1] = "labels";
    c.inputs[0] = fill(bc, &seed);
    c.inputs[1] = fill(&labels, &seed);
    double step = best_of(5, 20, wall, run_step, &c);
    if (step < 0) {
      fprintf(stderr, "%s: a run failed\n", bc->model);
      return 1;
    }
    /* memory: a step's peak (both runs' buffers, parameters, optimizer state) against the
     * parameters and the forward pass's activations (every tensor the inference graph makes) */
    bb_grad_trainer_memory_stats tm;
    bb_grad_trainer_memory(c.trainer, &tm);
    size_t forward = 0, params = 0;
    for (size_t p = 0; p < g->n_params; p++) params += bb_tensor_nbytes(bb_grad_trainer_value(c.trainer, g->params[p]));
    bb_model *inference = NULL;
    bb_cpu_session *s = NULL;
    bb_tensor *out[16] = {0};
    if (bb_grad_inference_model(m, NULL, &inference, &err) || bb_cpu_session_new(inference, NULL, &s, &err) ||
        bb_cpu_session_output_count(s) > 16 || bb_cpu_session_run(s, c.names, c.inputs, 1, out, &err)) {
      fprintf(stderr, "%s: inference: %s\n", bc->model, err.message);
      return 1;
    }
    for (size_t k = 0; k < bb_cpu_session_output_count(s); k++) bb_tensor_release(out[k]);
    bb_cpu_session_memory_stats sm;
    bb_cpu_session_memory(s, &sm);
    forward = sm.produced_bytes;
    bb_cpu_session_free(s);
    bb_model_free(inference);
    double in_use_kib = (double)(tm.step_in_use_high_water + tm.held_bytes) / 1024;
    double held_kib = (double)(tm.step_high_water + tm.held_bytes) / 1024, model_kib = (double)(params + forward) / 1024;
    printf("%-36s %6zu %6lld %9.3f %9.0f %11.0f %10.1f %10.1f %10.1f %5.2fx %5.2fx\n", bc->model,
           g->model->graph->nodes.len, (long long)bc->dims[0], step * 1e3, 1 / step, (double)bc->dims[0] / step,
           in_use_kib, held_kib, model_kib, in_use_kib / model_kib, held_kib / model_kib);
    bb_tensor_release(c.inputs[0]);
    bb_tensor_release(c.inputs[1]);
    bb_grad_trainer_free(c.trainer);
    bb_grad_optimizer_free(opt);
    bb_grad_graph_free(g);
    bb_model_free(m);
  }
  return 0;
}
