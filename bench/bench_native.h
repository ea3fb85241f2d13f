/* What the native model benches (bench_train, bench_models, bench_optimizer) share: the
 * clock they time with, loading an ONNX file, the optimizers by name and the trainer they
 * time. */
#ifndef BENCH_NATIVE_H
#define BENCH_NATIVE_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bb/grad.h"

/* CPU time of the process natively (the benches run one thread): on a shared machine the
 * wall clock measures the share of the processor this process got, not how fast a step is.
 * Under Node the wall clock (Emscripten has no CPU clock of the process). */
static double bench_now_seconds(void) {
  struct timespec ts;
#ifdef __EMSCRIPTEN__
  clock_gettime(CLOCK_MONOTONIC, &ts);
#else
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
#endif
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The model in the ONNX file at path, or NULL. */
static bb_model *bench_load_model(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = n > 0 ? malloc((size_t)n) : NULL;
  size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
  fclose(f);
  bb_model *m = NULL;
  bb_error err;
  if (!buf || got != (size_t)n || bb_model_decode(buf, got, NULL, NULL, &m, &err)) m = NULL;
  free(buf);
  return m;
}

/* The optimizer named sgd, momentum, nesterov, adam or adamw with torch.optim's defaults
 * (bb_optimizer_defaults), or false. */
static inline bool bench_optimizer_named(const char *name, bb_optimizer_config *out) {
  static const char *const NAMES[] = {"sgd", "momentum", "nesterov", "adam", "adamw"};
  static const bb_optimizer_kind KINDS[] = {BB_OPTIMIZER_SGD, BB_OPTIMIZER_MOMENTUM, BB_OPTIMIZER_MOMENTUM, BB_OPTIMIZER_ADAM,
                                            BB_OPTIMIZER_ADAMW};
  for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++)
    if (strcmp(name, NAMES[i]) == 0) {
      *out = bb_optimizer_defaults(KINDS[i]);
      out->nesterov = i == 2;
      return true;
    }
  return false;
}

/* The trainer: the model's training graph with softmax cross-entropy against int64 class
 * indices fed as "labels", then the optimizer of `cfg` (NULL: Adam with its defaults).
 * The graph and optimizer come back in *g and *opt (the trainer reads them: free them
 * after it). */
static inline int bench_trainer(const bb_model *m, const bb_optimizer_config *cfg, bb_grad_graph **g,
                                bb_grad_optimizer **opt, bb_grad_trainer **out, bb_error *err) {
  bb_grad_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.loss = BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY;
  o.target = "labels";
  const bb_optimizer_config adam = bb_optimizer_defaults(BB_OPTIMIZER_ADAM);
  *g = NULL, *opt = NULL;
  int rc = bb_grad_build(m, &o, NULL, g, err);
  if (!rc) rc = bb_grad_optimizer_build(*g, cfg ? cfg : &adam, opt, err);
  if (!rc) rc = bb_grad_trainer_new(*g, *opt, 0, NULL, out, err);
  return rc;
}

#endif
