/* The worked example of compiler.md §2.6: FedNetwork with LoaderLeaf, TrainerLeaf and
 * SinkLeaf (from the reference's multi_target_network example), recorded by the DSL
 * tests and compiled by the compiler tests. */
#ifndef BB_TESTS_DSL_FEDNETWORK_H
#define BB_TESTS_DSL_FEDNETWORK_H

#include "bb/graph.h"

static const bb_slot LOADER = {BB_ROLE_DATA_SOURCE, "loader", NULL};
static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot AGGREGATOR = {BB_ROLE_AGGREGATOR, "aggregator", NULL};

static void loader_body(bb_rec *g, void *user) {
  (void)user;
  bb_value batch, labels;
  bb_rec_data_source_next_batch(g, &LOADER, &batch, &labels);
  bb_rec_output(g, "batch", batch);
}

static void trainer_body(bb_rec *g, void *user) {
  (void)user;
  bb_value batch = bb_rec_input(g, "batch", NULL);
  bb_rec_output(g, "prediction", bb_rec_model_forward(g, &MODEL, batch));
}

static void sink_body(bb_rec *g, void *user) {
  (void)user;
  bb_value contribution = bb_rec_input(g, "contribution", NULL);
  bb_value metadata = bb_rec_input(g, "metadata", NULL);
  bb_rec_aggregator_contribute(g, &AGGREGATOR, contribution, metadata);
}

static const bb_module LOADER_LEAF = {sizeof(bb_module), "LoaderLeaf", loader_body, NULL, NULL, NULL, 0};
static const bb_module TRAINER_LEAF = {sizeof(bb_module), "TrainerLeaf", trainer_body, NULL, NULL, NULL, 0};
static const bb_module SINK_LEAF = {sizeof(bb_module), "SinkLeaf", sink_body, NULL, NULL, NULL, 0};

static void fed_body(bb_rec *g, void *user) {
  (void)user;
  bb_value sink_peers = bb_rec_input(g, "sink_peers", NULL);
  bb_call loader = bb_rec_call(g, &LOADER_LEAF, NULL, 0);
  bb_binding to_trainer[] = {{"batch", bb_rec_call_output(g, loader, "batch")}};
  bb_call trainer = bb_rec_call(g, &TRAINER_LEAF, to_trainer, 1);
  bb_rec_net_out(g, "prediction_port", sink_peers, bb_rec_call_output(g, trainer, "prediction"));
  bb_value port = bb_rec_lookup_output(g, "prediction_port");
  /* bound in the opposite order to the declaration: CALL inputs follow the callee */
  bb_binding to_sink[] = {{"metadata", port}, {"contribution", port}};
  bb_rec_call(g, &SINK_LEAF, to_sink, 2);
}

static const bb_module *const FED_SUBMODULES[] = {&LOADER_LEAF, &TRAINER_LEAF, &SINK_LEAF};
static const bb_module FED_NETWORK = {sizeof(bb_module), "FedNetwork", fed_body, NULL, NULL, FED_SUBMODULES, 3};

#endif
