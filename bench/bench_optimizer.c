/* The optimizer step alone: the graph bb_grad_optimizer_build writes over a model's float
 * initializers of rank 1 and more (each taken as a parameter, its gradient random), run
 * with each parameter's update as one pass (BB_CPU_REWRITE_FUSE_OPTIMIZER, the default)
 * and as the graph's nodes (that rewrite off), alternated, best of 7 rounds:
 *
 *   bench_optimizer MODEL.onnx [--threads N] [--optimizer sgd|momentum|nesterov|adam|adamw] [--clip]
 *
 * --clip adds global gradient-norm clipping (max norm 1) and L2 weight decay 1e-4 (AdamW
 * keeps its decoupled decay of 0.01). Natively a run is timed by the process's CPU time,
 * with --threads N by the wall clock on the work pool's N threads; under Node
 * (`node build-wasm/bench/bench_optimizer.js`) by the wall clock. */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bb/cpu.h"
#include "bb/grad.h"
#include "bench_native.h"

#define MAX_PARAMS 4096

static double wall_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const bb_tensor_proto *initializer(const bb_model *m, const char *name) {
  for (size_t i = 0; i < m->graph->initializers.len; i++)
    if (strcmp(m->graph->initializers.items[i]->name, name) == 0) return m->graph->initializers.items[i];
  return NULL;
}

/* A tensor shaped like `like`, uniform in [lo, hi) (the step count 3 for an int64 one). */
static bb_tensor *random_like(const bb_tensor_proto *like, float lo, float hi, uint32_t *seed) {
  bb_tensor *t = bb_tensor_new_empty(NULL, like->data_type, like->n_dims, like->dims);
  if (t && like->data_type == BB_DTYPE_INT64) *(int64_t *)bb_tensor_data(t) = 3;
  for (int64_t i = 0; t && like->data_type == BB_DTYPE_FLOAT && i < t->numel; i++) {
    *seed = *seed * 1664525u + 1013904223u;
    ((float *)bb_tensor_data(t))[i] = lo + (hi - lo) * (float)(*seed >> 8) / 16777216.0f;
  }
  return t;
}

typedef struct run {
  bb_cpu_session *session;
  const char **names;
  bb_tensor **inputs, **outputs;
  size_t n_inputs;
} run;

static int run_once(const run *r, bb_error *err) {
  int rc = bb_cpu_session_run(r->session, r->names, r->inputs, r->n_inputs, r->outputs, err);
  for (size_t i = 0; !rc && i < bb_cpu_session_output_count(r->session); i++) bb_tensor_release(r->outputs[i]);
  return rc;
}

int main(int argc, char **argv) {
  const char *path = NULL, *optimizer = "momentum";
  long threads = 1;
  bool wall = false, clip = false;
  bb_optimizer_config cfg;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = strtol(argv[++i], NULL, 10), wall = true;
    else if (strcmp(argv[i], "--optimizer") == 0 && i + 1 < argc) optimizer = argv[++i];
    else if (strcmp(argv[i], "--clip") == 0) clip = true;
    else if (!path) path = argv[i];
    else threads = 0;
  }
  if (!path || threads < 1 || !bench_optimizer_named(optimizer, &cfg)) {
    fprintf(stderr, "usage: bench_optimizer MODEL.onnx [--threads N] [--optimizer sgd|momentum|nesterov|adam|adamw] [--clip]\n");
    return 2;
  }
#ifdef __EMSCRIPTEN__
  wall = true; /* Emscripten has no CPU clock of the process */
#endif
  bb_error err;
  bb_model *m = bench_load_model(path);
  if (!m || (threads > 1 && bb_cpu_set_threads((size_t)threads, &err))) {
    fprintf(stderr, "bench_optimizer: %s\n", m ? err.message : "cannot load the model");
    return 1;
  }
  if (clip) cfg.max_grad_norm = 1.0f, cfg.weight_decay = cfg.kind == BB_OPTIMIZER_ADAMW ? cfg.weight_decay : 1e-4f;
  static const char *params[MAX_PARAMS], *grads[MAX_PARAMS];
  static char grad_names[MAX_PARAMS][128];
  size_t n = 0, floats = 0;
  for (size_t i = 0; i < m->graph->initializers.len && n < MAX_PARAMS; i++) {
    const bb_tensor_proto *p = m->graph->initializers.items[i];
    if (p->data_type != BB_DTYPE_FLOAT || p->n_dims < 1) continue;
    snprintf(grad_names[n], sizeof grad_names[n], "%s.grad", p->name);
    params[n] = p->name, grads[n] = grad_names[n];
    n++;
    floats += (size_t)bb_tensor_proto_numel(p);
  }
  bb_grad_graph tg;
  memset(&tg, 0, sizeof tg);
  tg.model = m, tg.n_params = n, tg.params = params, tg.grads = grads;
  bb_grad_optimizer *opt = NULL;
  const bb_cpu_session_options options[2] = {{sizeof options[0], 0}, {sizeof options[0], BB_CPU_REWRITE_FUSE_OPTIMIZER}};
  run runs[2];
  memset(runs, 0, sizeof runs);
  int rc = bb_grad_optimizer_build(&tg, &cfg, &opt, &err);
  for (int i = 0; i < 2 && !rc; i++) rc = bb_cpu_session_new_with_options(opt->model, NULL, &options[i], &runs[i].session, &err);
  if (rc) {
    fprintf(stderr, "bench_optimizer: %s\n", err.message);
    return 1;
  }
  /* the inputs: each parameter and its gradient, then the optimizer's state */
  const size_t n_inputs = 2 * n + opt->n_state, n_outputs = bb_cpu_session_output_count(runs[0].session);
  const char **names = calloc(n_inputs, sizeof *names);
  bb_tensor **inputs = calloc(n_inputs, sizeof *inputs), **outputs = calloc(n_outputs + 1, sizeof *outputs);
  uint32_t seed = 1;
  for (size_t i = 0; i < n; i++) {
    const bb_tensor_proto *like = initializer(m, params[i]);
    names[2 * i] = params[i], inputs[2 * i] = random_like(like, -1, 1, &seed);
    names[2 * i + 1] = grads[i], inputs[2 * i + 1] = random_like(like, -1e-2f, 1e-2f, &seed);
  }
  for (size_t i = 0; i < opt->n_state; i++)
    names[2 * n + i] = opt->state[i], inputs[2 * n + i] = random_like(initializer(opt->model, opt->state[i]), 0, 1e-3f, &seed);
  for (int i = 0; i < 2; i++) runs[i].names = names, runs[i].inputs = inputs, runs[i].outputs = outputs, runs[i].n_inputs = n_inputs;
  const int reps = floats > 1000000 ? 5 : 200;
  double best[2] = {1e30, 1e30};
  for (int round = 0; round < 7; round++)
    for (int i = 0; i < 2; i++) {
      const double t0 = wall ? wall_seconds() : bench_now_seconds();
      for (int k = 0; k < reps; k++)
        if (run_once(&runs[i], &err)) {
          fprintf(stderr, "bench_optimizer: %s\n", err.message);
          return 1;
        }
      const double t = ((wall ? wall_seconds() : bench_now_seconds()) - t0) / reps;
      if (t < best[i]) best[i] = t;
    }
  bb_cpu_session_rewrites made;
  bb_cpu_session_rewrites_made(runs[0].session, true, &made);
  printf("%s: %s%s, %ld thread%s (%s): %zu parameters, %zu floats, %zu updates fused: one pass %.1f us, nodes %.1f us, "
         "%.2fx\n",
         path, optimizer, clip ? " with clipping and weight decay" : "", threads, threads > 1 ? "s" : "",
         wall ? "wall clock" : "CPU time", n, floats, made.fused_updates, best[0] * 1e6, best[1] * 1e6, best[1] / best[0]);
  for (size_t i = 0; i < n_inputs; i++) bb_tensor_release(inputs[i]);
  free(names), free(inputs), free(outputs);
  for (int i = 0; i < 2; i++) bb_cpu_session_free(runs[i].session);
  bb_grad_optimizer_free(opt);
  bb_model_free(m);
  return 0;
}
