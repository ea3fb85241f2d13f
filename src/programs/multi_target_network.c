/* multi_target_network: Module `FedNetwork`
 * with leaves
 *   LoaderLeaf   next_batch -> output "batch"
 *   TrainerLeaf  input "batch" -> forward -> output "prediction"
 *   SinkLeaf     inputs "contribution", "metadata" -> aggregator.contribute
 * and body: sink_peers = input; loader -> trainer locally; net_out("prediction_port",
 * sink_peers, prediction); the sink is called with contribution = metadata = the
 * received port value (deliberately the same value, as the reference).
 * Default bindings: data_source "loader" = StubLoader, model "model" = StubModel,
 * aggregator "aggregator" = StubAggregator. Compiles into two partitions:
 * FedNetwork#<hash> (@self: NextBatch, Forward, Send) and FedNetwork_sink_peers#<hash>
 * (Recv, Contribute). */
#include "programs/examples.h"

static const bb_slot LOADER = {BB_ROLE_DATA_SOURCE, "loader", NULL};
static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot AGGREGATOR = {BB_ROLE_AGGREGATOR, "aggregator", NULL};

static void loader_leaf(bb_rec *g, void *user) {
  (void)user;
  bb_value batch, labels;
  bb_rec_data_source_next_batch(g, &LOADER, &batch, &labels);
  (void)labels;
  bb_rec_output(g, "batch", batch);
}

static void trainer_leaf(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "prediction", bb_rec_model_forward(g, &MODEL, bb_rec_input(g, "batch", NULL)));
}

static void sink_leaf(bb_rec *g, void *user) {
  (void)user;
  bb_value contribution = bb_rec_input(g, "contribution", NULL);
  bb_value metadata = bb_rec_input(g, "metadata", NULL);
  bb_rec_aggregator_contribute(g, &AGGREGATOR, contribution, metadata);
}

static const bb_module LOADER_LEAF = {sizeof(bb_module), "LoaderLeaf", loader_leaf, NULL, NULL, NULL, 0};
static const bb_module TRAINER_LEAF = {sizeof(bb_module), "TrainerLeaf", trainer_leaf, NULL, NULL, NULL, 0};
static const bb_module SINK_LEAF = {sizeof(bb_module), "SinkLeaf", sink_leaf, NULL, NULL, NULL, 0};

static void fed_network(bb_rec *g, void *user) {
  (void)user;
  bb_value sink_peers = bb_rec_input(g, "sink_peers", NULL);
  bb_call loader = bb_rec_call(g, &LOADER_LEAF, NULL, 0);
  bb_binding to_trainer[] = {{"batch", bb_rec_call_output(g, loader, "batch")}};
  bb_call trainer = bb_rec_call(g, &TRAINER_LEAF, to_trainer, 1);
  bb_rec_net_out(g, "prediction_port", sink_peers, bb_rec_call_output(g, trainer, "prediction"));
  bb_value received = bb_rec_lookup_output(g, "prediction_port");
  bb_binding to_sink[] = {{"contribution", received}, {"metadata", received}};
  bb_rec_call(g, &SINK_LEAF, to_sink, 2);
}

static const bb_module *const LEAVES[] = {&LOADER_LEAF, &TRAINER_LEAF, &SINK_LEAF};
static const bb_module FED_NETWORK = {sizeof(bb_module), "FedNetwork", fed_network, NULL, NULL, LEAVES, 3};
static const bb_module *const MODULES[] = {&FED_NETWORK};

static int configure(bb_compiler *c, size_t module, bb_error *err) {
  (void)module;
  if (bb_example_declare(c, "StubLoader", NULL, 0, err) || bb_example_declare(c, "StubModel", NULL, 0, err) ||
      bb_example_declare(c, "StubAggregator", NULL, 0, err) ||
      bb_compiler_bind_data_source(c, "loader", "StubLoader", NULL, err) ||
      bb_compiler_bind_model(c, "model", "StubModel", NULL, err) ||
      bb_compiler_bind_aggregator(c, "aggregator", "StubAggregator", NULL, err))
    return err ? err->code : BB_ERR_INVALID_ARGUMENT;
  return 0;
}

const bb_example BB_EXAMPLE_MULTI_TARGET_NETWORK = {
    "multi_target_network", "FedNetwork: loader -> trainer on one peer, net_out to the sink peers' aggregator",
    MODULES, 1, configure};
