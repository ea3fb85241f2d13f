/* The trainer the native benches time (bench_train, bench_models): the model's training
 * graph with softmax cross-entropy against int64 class indices fed as "labels", then Adam
 * with its defaults. */
#ifndef BENCH_TRAINER_H
#define BENCH_TRAINER_H

#include <string.h>

#include "bb/grad.h"

/* The graph and optimizer come back in *g and *opt (the trainer reads them: free them
 * after it). */
static int bench_adam_trainer(const bb_model *m, bb_grad_graph **g, bb_grad_optimizer **opt, bb_grad_trainer **out,
                              bb_error *err) {
  bb_grad_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.loss = BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY;
  o.target = "labels";
  bb_optimizer_config cfg = bb_optimizer_defaults(BB_OPTIMIZER_ADAM);
  *g = NULL, *opt = NULL;
  int rc = bb_grad_build(m, &o, NULL, g, err);
  if (!rc) rc = bb_grad_optimizer_build(*g, &cfg, opt, err);
  if (!rc) rc = bb_grad_trainer_new(*g, *opt, 0, NULL, out, err);
  return rc;
}

#endif
