/* Shared by the GossipAvg tests: the slots a gossip Module uses, and the bindings that put
 * a CpuMlp (2 -> 2), a ConstantView holding peer 1 and a GossipAvg (`config`) at them. */
#ifndef BB_TESTS_GOSSIP_AVG_FIXTURE_H
#define BB_TESTS_GOSSIP_AVG_FIXTURE_H

#include "../runtime/rttest.h"

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot VIEW = {BB_ROLE_PEER_SELECTOR, "view", NULL};
static const bb_slot AGGREGATOR = {BB_ROLE_AGGREGATOR, "aggregator", NULL};

/* The bindings with the CpuMlp's own configuration (`model`) and the GossipAvg's (`avg`). */
static int bind_gossip_avg_model(bb_compiler *c, const char *model, const char *avg_config, bb_error *err) {
  static const bb_component_port tensor[] = {{"tensor", BB_TYPE_TENSOR_F32}};
  static const bb_component_port element[] = {{"element", BB_TYPE_TENSOR_F32}};
  static const bb_component_dep model_dep[] = {{BB_ROLE_MODEL, "model"}};
  bb_component_decl mlp = {sizeof mlp, "CpuMlp", tensor, 1, NULL, 0};
  bb_component_decl avg = {sizeof avg, "GossipAvg", element, 1, model_dep, 1};
  return bb_compiler_declare_component(c, &mlp, err) || bb_compiler_declare_component(c, &avg, err) ||
                 bb_compiler_bind_model(c, "model", "CpuMlp", model, err) ||
                 bb_compiler_bind_peer_selector(c, "view", "ConstantView", "peers=1", err) ||
                 bb_compiler_bind_aggregator(c, "aggregator", "GossipAvg", avg_config, err)
             ? err->code
             : 0;
}

static int bind_gossip_avg(bb_compiler *c, const void *config, bb_error *err) {
  return bind_gossip_avg_model(c, "inputs=2,outputs=2", config, err);
}

#endif
