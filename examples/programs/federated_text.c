/* federated_text: one server and eight clients train a next-character LSTM exported from
 * PyTorch (examples/models/text_lstm.onnx: an embedding, one LSTM layer and a linear
 * head) with federated averaging, over a simulated network. Each client holds a different
 * real text, one of the licences Debian ships in /usr/share/common-licenses (the first 90%
 * of it, as windows of 16 characters labelled with the next one); the server holds windows
 * from the last 10% of every text, on which it measures next-character accuracy every
 * round. The round is federated_cnn's Module (FedCnn: FedAvg of an ONNX model that
 * OnnxModel trains through its gradient and optimizer graphs); only the model, the data
 * and the model's config differ.
 *
 *   federated_text [--rounds N] [--clients K] [--loss P] [--seed S] [--texts DIR]
 *                  [--held-out N] [--model FILE] [--model-config TEXT] [--target ACC] [--quiet]
 *
 * Prints the held-out accuracy of the global model (on --held-out windows, default 2000)
 * after every round and exits 0 when the
 * last round reaches --target (default 0.4; predicting the commonest class, a space, scores
 * about 0.17). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "federation.h"
#include "options.h"
#include "programs/examples.h"
#include "text.h"

#define CONTEXT 16
#define MODEL_CONFIG "loss=xent,optimizer=adam,lr=0.01,fit_steps=10,data=data"

/* Eight licences, each its own kind of English; a client per text. */
static const char *const TEXTS[] = {"Apache-2.0", "Artistic", "CC0-1.0", "GFDL-1.3",
                                    "GPL-2",      "GPL-3",    "LGPL-2.1", "MPL-2.0"};
#define N_TEXTS (sizeof TEXTS / sizeof TEXTS[0])

typedef struct options {
  int rounds, clients, held_out, quiet;
  double loss, target;
  uint64_t seed;
  const char *texts, *model, *model_config, *scenario;
} options;

static int usage(void) {
  fprintf(stderr, "usage: federated_text [--rounds N] [--clients K] [--loss P] [--seed S] [--texts DIR] [--held-out N] "
                  "[--model FILE] [--model-config TEXT] [--target ACC] [--scenario FILE] [--quiet]\n");
  return 2;
}

static int parse(int argc, char **argv, options *o) {
  *o = (options){30, 8, 2000, 0, 0.0, 0.4, 1, "/usr/share/common-licenses", BB_EXAMPLE_MODELS "/text_lstm.onnx", MODEL_CONFIG, NULL};
  const bb_option table[] = {
      {"--rounds", BB_OPTION_INT, &o->rounds},   {"--clients", BB_OPTION_INT, &o->clients},
      {"--loss", BB_OPTION_DOUBLE, &o->loss},    {"--seed", BB_OPTION_U64, &o->seed},
      {"--texts", BB_OPTION_STRING, &o->texts},  {"--model", BB_OPTION_STRING, &o->model},
      {"--held-out", BB_OPTION_INT, &o->held_out},
      {"--model-config", BB_OPTION_STRING, &o->model_config}, {"--target", BB_OPTION_DOUBLE, &o->target},
      {"--scenario", BB_OPTION_STRING, &o->scenario}};
  if (bb_options_parse(argc, argv, table, sizeof table / sizeof *table, &o->quiet) || o->rounds < 1 ||
      o->clients < 2 || o->clients > (int)N_TEXTS || o->held_out < 1 || o->loss < 0 || o->loss >= 1)
    return usage();
  return 0;
}

int main(int argc, char **argv) {
  options o;
  if (parse(argc, argv, &o)) return 2;
  bb_error err;
  char paths[N_TEXTS][1024];
  const char *names[N_TEXTS];
  for (int i = 0; i < o.clients; i++) {
    snprintf(paths[i], sizeof paths[i], "%s/%s", o.texts, TEXTS[i]);
    names[i] = paths[i];
  }
  bb_digits_split d;
  if (bb_text_split_load(names, (size_t)o.clients, CONTEXT, (size_t)o.held_out, &d, &err))
    return fprintf(stderr, "federated_text: %s\n", err.message), 1;
  bb_bytes model = {NULL, 0};
  if (bb_read_whole_file(o.model, &model, &err))
    return fprintf(stderr, "federated_text: cannot read the model %s\n", o.model), 1;
  uint8_t *artifact;
  size_t artifact_len;
  if (bb_example_compile(&BB_EXAMPLE_FEDERATED_CNN, 0, &artifact, &artifact_len, &err))
    return fprintf(stderr, "federated_text: %s\n", err.message), 1;
  if (!o.quiet)
    printf("federated_text: %d clients, one licence text each (%zu training windows), %zu held-out windows, "
           "loss %.0f%%, model %s (%zu bytes)\n",
           o.clients, d.train.n, d.test.n, o.loss * 100, o.model, model.len);

  bb_sim_scenario scenario;
  if (o.scenario && bb_fed_scenario_load(o.scenario, &scenario, &err))
    return fprintf(stderr, "federated_text: %s\n", err.message), 1;
  bb_fed_setup setup = {artifact, artifact_len, "FedCnn", "FedCnn_server", "FedCnn_clients", o.clients, o.loss, o.seed,
                        o.quiet, &d, &model, o.model_config, o.scenario ? &scenario : NULL, false};
  bb_federation f;
  int rc = bb_federation_start(&f, &setup, &err);
  while (!rc && f.progress.round < o.rounds) {
    rc = bb_sim_step(f.sim, &err);
    if (!rc && bb_sim_now(f.sim) > bb_fed_time_limit(setup.scenario, o.rounds)) {
      fprintf(stderr, "federated_text: rounds stopped closing (at round %d)\n", f.progress.round);
      break;
    }
  }
  if (rc) fprintf(stderr, "federated_text: %s\n", err.message);
  int ok = !rc && f.progress.accuracy >= (float)o.target;
  if (!rc)
    printf("federated_text: %d rounds, final held-out next-character accuracy %.3f (%s %.2f)\n", f.progress.round,
           (double)f.progress.accuracy, ok ? ">=" : "below", o.target);
  bb_federation_free(&f);
  bb_digits_split_free(&d);
  bb_buffer_free(NULL, artifact);
  free(model.data);
  return ok ? 0 : 1;
}
