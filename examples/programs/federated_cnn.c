/* federated_cnn: one server and eight clients train a convolutional network exported from
 * PyTorch (examples/models/digits_cnn.onnx) with federated averaging, over a simulated
 * network, each client holding a label-skewed (non-IID) shard of scikit-learn's digits as
 * 1×8×8 images: C digits of the ten (--classes, default 5). The network is an ONNX model handed to every peer; OnnxModel trains it
 * through its gradient and optimizer graphs, and the server exports the global model as plain
 * ONNX every round.
 *
 *   federated_cnn [--rounds N] [--clients K] [--classes C] [--loss P] [--seed S] [--data CSV]
 *                 [--model FILE] [--model-config TEXT] [--target ACC] [--export FILE] [--test-set CSV]
 *                 [--quiet]
 *
 * Prints the held-out accuracy of the global model after every round and exits 0 when the
 * last round reaches --target (default 0.97). --model-config gives OnnxModel another config
 * than the example's binding (optimizer, lr, fit_steps...). --export FILE writes the
 * server's last export (onnxruntime runs it), --test-set CSV the held-out images the
 * accuracy is measured on (64 pixels and the digit per row), so another runtime can score
 * the export on the same rows. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "federation.h"
#include "options.h"
#include "programs/examples.h"

typedef struct options {
  int rounds, clients, classes, quiet;
  double loss, target;
  uint64_t seed;
  const char *data, *model, *model_config, *export_path, *test_set, *scenario;
} options;

static int usage(void) {
  fprintf(stderr, "usage: federated_cnn [--rounds N] [--clients K] [--loss P] [--seed S] [--data CSV] [--model FILE] "
                  "[--classes C] [--model-config TEXT] [--target ACC] [--export FILE] [--test-set CSV] [--scenario FILE] [--quiet]\n");
  return 2;
}

static int parse(int argc, char **argv, options *o) {
  *o = (options){40, 8, 5, 0, 0.0, 0.97, 1, NULL, BB_EXAMPLE_MODELS "/digits_cnn.onnx", NULL, NULL, NULL, NULL};
  const bb_option table[] = {
      {"--rounds", BB_OPTION_INT, &o->rounds},         {"--clients", BB_OPTION_INT, &o->clients},
      {"--classes", BB_OPTION_INT, &o->classes},       {"--loss", BB_OPTION_DOUBLE, &o->loss},
      {"--seed", BB_OPTION_U64, &o->seed},             {"--data", BB_OPTION_STRING, &o->data},
      {"--model", BB_OPTION_STRING, &o->model},        {"--model-config", BB_OPTION_STRING, &o->model_config},
      {"--target", BB_OPTION_DOUBLE, &o->target},      {"--export", BB_OPTION_STRING, &o->export_path},
      {"--test-set", BB_OPTION_STRING, &o->test_set}, {"--scenario", BB_OPTION_STRING, &o->scenario}};
  if (bb_options_parse(argc, argv, table, sizeof table / sizeof *table, &o->quiet) || o->rounds < 1 ||
      o->clients < 2 || o->clients > 64 || o->classes < 1 || o->classes > 10 || o->loss < 0 || o->loss >= 1)
    return usage();
  return 0;
}

/* The held-out rows as CSV: 64 pixel values, then the digit. */
static bool write_test_set(const bb_dataset *test, const char *path) {
  FILE *f = fopen(path, "w");
  for (size_t i = 0; f && i < test->n; i++) {
    for (size_t k = 0; k < test->dim; k++) fprintf(f, "%g,", (double)test->features[i * test->dim + k]);
    fprintf(f, "%g\n", (double)test->labels[i]);
  }
  bool ok = f && !ferror(f);
  if (f && fclose(f)) ok = false;
  if (!ok) fprintf(stderr, "federated_cnn: cannot write the test set to %s\n", path);
  return ok;
}

int main(int argc, char **argv) {
  options o;
  if (parse(argc, argv, &o)) return 2;
  bb_error err;
  bb_digits_split d;
  if (bb_digits_split_load(o.data, (size_t)o.clients, (size_t)o.classes, o.seed, &d, &err))
    return fprintf(stderr, "federated_cnn: %s\n", err.message), 1;
  bb_bytes model = {NULL, 0};
  if (bb_read_whole_file(o.model, &model, &err))
    return fprintf(stderr, "federated_cnn: cannot read the model %s\n", o.model), 1;
  uint8_t *artifact;
  size_t artifact_len;
  if (bb_example_compile(&BB_EXAMPLE_FEDERATED_CNN, 0, &artifact, &artifact_len, &err))
    return fprintf(stderr, "federated_cnn: %s\n", err.message), 1;
  if (!o.quiet)
    printf("federated_cnn: %d clients, %zu training and %zu held-out images, non-IID shards (%d digits each), "
           "loss %.0f%%, model %s (%zu bytes)\n",
           o.clients, d.train.n, d.test.n, o.classes, o.loss * 100, o.model, model.len);

  bb_sim_scenario scenario;
  if (o.scenario && bb_fed_scenario_load(o.scenario, &scenario, &err))
    return fprintf(stderr, "federated_cnn: %s\n", err.message), 1;
  bb_fed_setup setup = {artifact, artifact_len, "FedCnn", "FedCnn_server", "FedCnn_clients", o.clients, o.loss, o.seed,
                        o.quiet, &d, &model, o.model_config, o.scenario ? &scenario : NULL, false};
  bb_federation f;
  if (bb_federation_start(&f, &setup, &err)) return fprintf(stderr, "federated_cnn: %s\n", err.message), 1;
  while (f.progress.round < o.rounds) {
    if (bb_sim_step(f.sim, &err)) return fprintf(stderr, "federated_cnn: %s\n", err.message), 1;
    if (bb_sim_now(f.sim) > bb_fed_time_limit(setup.scenario, o.rounds)) {
      fprintf(stderr, "federated_cnn: rounds stopped closing (at round %d)\n", f.progress.round);
      break;
    }
  }
  bb_sim_stats st;
  bb_sim_get_stats(f.sim, &st);
  int ok = f.progress.accuracy >= (float)o.target;
  printf("federated_cnn: %d rounds, final held-out accuracy %.3f (%s %.2f); %llu messages sent, %llu lost\n", f.progress.round,
         (double)f.progress.accuracy, ok ? ">=" : "below", o.target, (unsigned long long)st.sent, (unsigned long long)st.lost);
  if (o.export_path) {
    FILE *out = f.progress.onnx ? fopen(o.export_path, "wb") : NULL;
    bool written = out && fwrite(bb_val_as_bytes(f.progress.onnx), 1, bb_val_count(f.progress.onnx), out) == bb_val_count(f.progress.onnx);
    if (out && fclose(out)) written = false;
    if (!written) fprintf(stderr, "federated_cnn: cannot write the exported model to %s\n", o.export_path), ok = 0;
    else if (!o.quiet) printf("federated_cnn: wrote %s (%zu bytes)\n", o.export_path, bb_val_count(f.progress.onnx));
  }
  if (o.test_set && !write_test_set(&d.test, o.test_set)) ok = 0;
  bb_federation_free(&f);
  bb_digits_split_free(&d);
  bb_buffer_free(NULL, artifact);
  free(model.data);
  return ok ? 0 : 1;
}
