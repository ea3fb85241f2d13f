/* split_cnn: split learning of the CNN federated_cnn trains (examples/models/digits_cnn.onnx,
 * exported from PyTorch) over a simulated network: the clients hold the convolutions (and,
 * U-shaped, the last layer with the loss), a server the rest; only activations and their
 * gradients cross the network. Each client holds an IID shard of scikit-learn's digits
 * and the held-out set, and scores its model (its part and the server's) on it every
 * second of simulated time.
 *
 *   split_cnn [--shape vanilla|u|fed] [--clients K] [--seconds S] [--loss P] [--seed S]
 *             [--data CSV] [--model FILE] [--target ACC] [--quiet]
 *
 * --shape fed runs SplitFed (SplitFedCnn): the vanilla split, and the clients' parts
 * averaged with FedAvg every 10 steps.
 *
 * Stops once every client's held-out accuracy reaches --target (default 0.97), or after
 * --seconds of simulated time (default 60; --target 0 runs them all); exits 0 when the
 * target was reached. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "programs/examples.h"
#include "split_run.h"

typedef struct options {
  int clients, quiet;
  double seconds, loss, target;
  uint64_t seed;
  const char *shape, *data, *model;
} options;

static int usage(void) {
  fprintf(stderr, "usage: split_cnn [--shape vanilla|u|fed] [--clients K] [--seconds S] [--loss P] [--seed S] "
                  "[--data CSV] [--model FILE] [--target ACC] [--quiet]\n");
  return 2;
}

static int parse(int argc, char **argv, options *o) {
  *o = (options){1, 0, 60, 0.0, 0.97, 1, "vanilla", NULL, BB_EXAMPLE_MODELS "/digits_cnn.onnx"};
  const bb_option table[] = {
      {"--shape", BB_OPTION_STRING, &o->shape},   {"--clients", BB_OPTION_INT, &o->clients},
      {"--seconds", BB_OPTION_DOUBLE, &o->seconds}, {"--loss", BB_OPTION_DOUBLE, &o->loss},
      {"--seed", BB_OPTION_U64, &o->seed},        {"--data", BB_OPTION_STRING, &o->data},
      {"--model", BB_OPTION_STRING, &o->model},   {"--target", BB_OPTION_DOUBLE, &o->target}};
  if (bb_options_parse(argc, argv, table, sizeof table / sizeof *table, &o->quiet) || o->clients < 1 ||
      o->clients > BB_SPLIT_RUN_MAX_CLIENTS || o->seconds <= 0 || o->loss < 0 || o->loss >= 1 ||
      (strcmp(o->shape, "vanilla") != 0 && strcmp(o->shape, "u") != 0 && strcmp(o->shape, "fed") != 0))
    return usage();
  return 0;
}

int main(int argc, char **argv) {
  options o;
  if (parse(argc, argv, &o)) return 2;
  bool u = strcmp(o.shape, "u") == 0, fed = strcmp(o.shape, "fed") == 0;
  bb_error err;
  bb_digits_split d;
  if (bb_digits_split_load(o.data, (size_t)o.clients, 0, o.seed, &d, &err)) return fprintf(stderr, "split_cnn: %s\n", err.message), 1;
  bb_bytes model = {NULL, 0};
  if (bb_read_whole_file(o.model, &model, &err)) return fprintf(stderr, "split_cnn: cannot read the model %s\n", o.model), 1;
  uint8_t *artifact;
  size_t artifact_len;
  size_t module = fed ? 2 : u ? 1 : 0;
  if (bb_example_compile(&BB_EXAMPLE_SPLIT_CNN, module, &artifact, &artifact_len, &err))
    return fprintf(stderr, "split_cnn: %s\n", err.message), 1;
  if (!o.quiet)
    printf("split_cnn: %s split, %d client%s, %zu training and %zu held-out images, loss %.0f%%, model %s (%zu bytes)\n",
           fed ? "SplitFed (vanilla, averaged)" : u ? "U-shaped" : "vanilla", o.clients, o.clients == 1 ? "" : "s", d.train.n, d.test.n, o.loss * 100, o.model,
           model.len);
  static const char *const MODULE_NAMES[] = {"SplitCnn", "SplitCnnU", "SplitFedCnn"};
  bb_split_setup setup = {artifact, artifact_len, MODULE_NAMES[module], fed, false, o.clients, o.loss, o.seed,
                          o.quiet != 0, &d, &model};
  bb_split_run r;
  int rc = bb_split_run_start(&r, &setup, &err);
  /* --target 0 runs the whole --seconds (what a lean run under the sanitizers wants) */
  while (!rc && (o.target <= 0 || bb_split_run_min_accuracy(&r) < (float)o.target) &&
         bb_sim_now(r.sim) < (uint64_t)(o.seconds * 1e9))
    rc = bb_sim_step(r.sim, &err);
  if (rc) fprintf(stderr, "split_cnn: %s\n", err.message);
  float acc = bb_split_run_min_accuracy(&r);
  bool ok = !rc && acc >= (float)o.target;
  uint64_t client_bytes = 0;
  for (int i = 1; i < r.n_peers; i++) client_bytes += r.bytes_sent[i];
  printf("split_cnn: %s, %d client%s: held-out accuracy %.3f (lowest client; %s %.2f) after %.1f s, %llu steps; the "
         "clients sent %llu bytes, the server %llu; %llu failures\n",
         fed ? "SplitFed" : u ? "U-shaped" : "vanilla", o.clients, o.clients == 1 ? "" : "s", (double)acc, ok ? ">=" : "below", o.target,
         (double)bb_sim_now(r.sim) / 1e9, (unsigned long long)bb_split_run_client_steps(&r), (unsigned long long)client_bytes,
         (unsigned long long)r.bytes_sent[0], (unsigned long long)r.failures);
  bb_split_run_free(&r);
  bb_digits_split_free(&d);
  bb_buffer_free(NULL, artifact);
  free(model.data);
  return ok ? 0 : 1;
}
