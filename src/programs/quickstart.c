/* quickstart: Module `Quickstart` —
 *   (batch, _) = data_source.next_batch(); prediction = model.forward(batch);
 *   output "prediction".
 * Default bindings: data_source "data_source" = NoopDataLoader, model "model" = NoopModel.
 * Compiles into one partition, Quickstart#<hash> (class @self). */
#include "programs/examples.h"

static const bb_slot DATA_SOURCE = {BB_ROLE_DATA_SOURCE, "data_source", NULL};
static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};

static void quickstart_body(bb_rec *g, void *user) {
  (void)user;
  bb_value batch, labels;
  bb_rec_data_source_next_batch(g, &DATA_SOURCE, &batch, &labels);
  (void)labels;
  bb_rec_output(g, "prediction", bb_rec_model_forward(g, &MODEL, batch));
}

static const bb_module QUICKSTART = {sizeof(bb_module), "Quickstart", quickstart_body, NULL, NULL, NULL, 0};
static const bb_module *const MODULES[] = {&QUICKSTART};

static int configure(bb_compiler *c, size_t module, bb_error *err) {
  (void)module;
  if (bb_example_declare(c, "NoopDataLoader", NULL, 0, err) || bb_example_declare(c, "NoopModel", NULL, 0, err) ||
      bb_compiler_bind_data_source(c, "data_source", "NoopDataLoader", NULL, err) ||
      bb_compiler_bind_model(c, "model", "NoopModel", NULL, err))
    return err ? err->code : BB_ERR_INVALID_ARGUMENT;
  return 0;
}

const bb_example BB_EXAMPLE_QUICKSTART = {
    "quickstart", "DataSource.next_batch -> Model.forward -> output \"prediction\" (1 node)", MODULES, 1,
    configure};
