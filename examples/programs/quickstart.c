/* quickstart: one node runs DataSource.next_batch → Model.forward and
 * reports the prediction.
 *
 *   quickstart [--quiet]
 *
 * Compiles the Quickstart Module with NoopDataLoader (next_batch → ([1.0], [1.0])) and
 * NoopModel (identity), installs it on peer 0 (/p2p/0), runs the bootstrap, invokes the
 * target once and polls until the node is idle. Exits 0 only when the node produced
 * steps and an app event Quickstart/"prediction" holding the tensor [1.0]. */
#include <stdio.h>
#include <string.h>

#include "bb/roles.h"
#include "programs/examples.h"
#include "programs/fixtures.h"

static int die(const char *what, const bb_error *err) {
  fprintf(stderr, "quickstart: %s: %s\n", what, err->message);
  return 1;
}

int main(int argc, char **argv) {
  int quiet = argc > 1 && strcmp(argv[1], "--quiet") == 0;
  bb_error err = {0};
  uint8_t *artifact = NULL;
  size_t artifact_len = 0;
  if (bb_example_compile(&BB_EXAMPLE_QUICKSTART, 0, &artifact, &artifact_len, &err)) return die("compile", &err);

  bb_registry *reg = bb_registry_new(NULL);
  if (!reg || bb_registry_add_shipped(reg, &err) || bb_fixtures_register(reg, &err)) return die("registry", &err);
  bb_peer_id self = bb_peer_id_from_u64(0);
  bb_address addr = bb_address_p2p(&self);
  const char *targets[] = {"Quickstart"};
  bb_node_config nc = {0};
  nc.struct_size = sizeof nc;
  nc.trace_ops = true; /* report every op, so the step count shows the pipeline ran */
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = self;
  a.addresses = &addr;
  a.n_addresses = 1;
  a.artifact = artifact;
  a.artifact_len = artifact_len;
  a.targets = targets;
  a.n_targets = 1;
  a.registry = reg;
  a.config = &nc;
  bb_node *node = NULL;
  if (bb_install(&a, &node, NULL, &err)) return die("install", &err);
  if (!quiet) printf("installed %s on peer 0 (/p2p/0)\n", bb_node_target(node, 0));

  if (bb_node_run_bootstrap(node, 0, &err) || bb_node_invoke(node, "Quickstart", NULL, 0, 0, &err))
    return die("start", &err);
  size_t total = 0, completed = 0, failed = 0;
  float prediction = -1.0f;
  int64_t prediction_len = -1;
  for (int round = 0; round < 16 && bb_node_has_work(node); round++) {
    const bb_step *steps;
    size_t n;
    if (bb_node_poll(node, 0, &steps, &n, &err)) return die("poll", &err);
    for (size_t i = 0; i < n; i++) {
      const bb_step *s = &steps[i];
      total++;
      completed += s->kind == BB_STEP_OP_COMPLETED;
      failed += s->kind == BB_STEP_OP_FAILED;
      if (!quiet) printf("  step %-16s %s%s%s\n", bb_step_kind_name(s->kind), s->op ? s->op : "",
                         s->topic ? s->topic : "", s->detail ? s->detail : "");
      if (s->kind == BB_STEP_APP_EVENT && strncmp(s->module, "Quickstart#", 11) == 0 &&
          strcmp(s->topic, "prediction") == 0 && s->value && bb_val_kind_of(s->value) == BB_VAL_TENSOR &&
          bb_val_as_tensor(s->value)->dtype == BB_DTYPE_FLOAT) {
        prediction_len = bb_val_as_tensor(s->value)->numel;
        if (prediction_len == 1) prediction = *(const float *)bb_tensor_data(bb_val_as_tensor(s->value));
      }
    }
  }
  printf("Quickstart drained %zu EngineStep(s) (%zu ops completed, %zu failed); prediction = ", total, completed,
         failed);
  if (prediction_len == 1) printf("[%.1f]\n", (double)prediction);
  else printf("(none)\n");

  int ok = total > 0 && completed >= 2 && failed == 0 && prediction_len == 1 && prediction == 1.0f;
  if (!ok) fprintf(stderr, "quickstart: expected steps and prediction [1.0] from Quickstart\n");
  bb_node_free(node);
  bb_registry_free(reg);
  bb_buffer_free(NULL, artifact);
  return ok ? 0 : 1;
}
