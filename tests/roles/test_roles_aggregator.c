/* The Aggregator concretes' dependencies: FedAvg's init=<slot> is named by its config, so
 * the compiler cannot check it; the first Aggregate does (bound, and a Model) and says
 * which slot was wrong. Every shipped type's dependency table agrees with its count. */
#include <stdlib.h>

#include "../runtime/rttest.h"
#include "bb/roles.h"

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot PEERS = {BB_ROLE_PEER_SELECTOR, "peers", NULL};
static const bb_slot AGGREGATOR = {BB_ROLE_AGGREGATOR, "aggregator", NULL};

/* Each run: the aggregator's Aggregate, with the model and the peer list in the graph so
 * that both slots are bound on the node. */
static void aggregate_body(bb_rec *g, void *user) {
  (void)user;
  bb_value tick = bb_rec_input(g, "tick", "ai.bytesandbrains.tensor.f32");
  bb_value params;
  bb_rec_aggregator_aggregate(g, &AGGREGATOR, tick, &params, NULL);
  bb_rec_output(g, "params", params);
  bb_rec_output(g, "model", bb_rec_model_params_after(g, &MODEL, tick));
  bb_rec_output(g, "peers", bb_rec_peer_selector_current_view(g, &PEERS));
}

static const bb_module AGGREGATE = {sizeof(bb_module), "Aggregate", aggregate_body, NULL, NULL, NULL, 0};

static int bind_aggregate(bb_compiler *c, const void *fedavg_config, bb_error *err) {
  static const bb_component_port tensor[] = {{"tensor", "ai.bytesandbrains.tensor.f32"}};
  static const bb_component_port element[] = {{"element", "ai.bytesandbrains.tensor.f32"}};
  bb_component_decl mlp = {sizeof mlp, "CpuMlp", tensor, 1, NULL, 0};
  bb_component_decl avg = {sizeof avg, "FedAvg", element, 1, NULL, 0};
  return bb_compiler_declare_component(c, &mlp, err) || bb_compiler_declare_component(c, &avg, err) ||
                 bb_compiler_bind_model(c, "model", "CpuMlp", "inputs=2,outputs=2", err) ||
                 bb_compiler_bind_peer_selector(c, "peers", "ConstantView", "peers=2;3", err) ||
                 bb_compiler_bind_aggregator(c, "aggregator", "FedAvg", fedavg_config, err)
             ? err->code
             : 0;
}

static uint8_t *compile_with(const char *fedavg_config, size_t *len) {
  return compile_test_module(&AGGREGATE, bind_aggregate, fedavg_config, len);
}

/* Runs Aggregate once. Returns the first failure's detail in `detail` ("" if none) and
 * the length of the params given (-1 if none). */
static int64_t aggregate_once(const char *fedavg_config, char *detail, size_t size) {
  int64_t given = -1;
  detail[0] = 0;
  size_t len = 0;
  uint8_t *art = compile_with(fedavg_config, &len);
  if (!art) return given;
  const char *targets[] = {"Aggregate"};
  bb_node *node = install_peer(art, len, 1, targets, 1, shipped_registry(), NULL);
  if (!node) return free(art), given;
  static const float one = 1;
  bb_val *tick = f32_val(&one, 1);
  bb_named_value in[] = {{"tick", tick}};
  bb_error err;
  CHECK_MSG(bb_node_invoke(node, "Aggregate", in, 1, 0, &err) == 0, "%s", err.message);
  const bb_step *steps;
  size_t ns;
  CHECK(bb_node_poll(node, 0, &steps, &ns, &err) == 0);
  for (size_t i = 0; i < ns; i++) {
    if (steps[i].kind == BB_STEP_OP_FAILED && !detail[0]) snprintf(detail, size, "%s", steps[i].detail);
    if (steps[i].kind == BB_STEP_APP_EVENT && strcmp(steps[i].topic, "params") == 0 &&
        bb_val_kind_of(steps[i].value) == BB_VAL_TENSOR)
      given = bb_val_as_tensor(steps[i].value)->numel;
  }
  bb_val_release(tick);
  bb_node_free(node);
  free(art);
  return given;
}

static void test_fedavg_init_slot_is_checked(void) {
  char detail[512];
  /* a Model: round 0's global model is its parameters (2x2 weights and 2 biases) */
  CHECK_EQ_INT(aggregate_once("init=model", detail, sizeof detail), 6);
  CHECK_MSG(!detail[0], "%s", detail);
  /* a slot of another role: it used to be sent a Params it does not have */
  CHECK_EQ_INT(aggregate_once("init=peers", detail, sizeof detail), -1);
  CHECK_MSG(strstr(detail, "FedAvg: init slot `peers` holds a ConstantView, not a Model") != NULL, "%s", detail);
  /* an unbound slot */
  CHECK_EQ_INT(aggregate_once("init=modle", detail, sizeof detail), -1);
  CHECK_MSG(strstr(detail, "FedAvg: init slot `modle` has no component on this node") != NULL, "%s", detail);
}

/* A dependency table with a zero count (FedAvg's used to name a Model it never declared)
 * says one thing and means another: either it is counted or it is absent. */
static void test_declared_dependencies_are_counted(void) {
  bb_registry *r = bb_registry_new(NULL);
  CHECK(r && bb_registry_add_shipped(r, NULL) == 0);
  for (size_t i = 0; i < bb_registry_count(r); i++) {
    const bb_component_type *t = bb_registry_at(r, i);
    CHECK_MSG((t->deps == NULL) == (t->n_deps == 0), "%s: deps table and n_deps=%zu disagree", t->type_name,
              t->n_deps);
  }
  const bb_component_type *fedavg = bb_registry_find(r, "FedAvg"), *gossip = bb_registry_find(r, "GossipAvg");
  CHECK(fedavg && fedavg->n_deps == 0);
  CHECK(gossip && gossip->n_deps == 1 && gossip->deps[0].role == BB_ROLE_MODEL &&
        strcmp(gossip->deps[0].slot, "model") == 0);
  bb_registry_free(r);
}

int main(void) {
  RUN(test_fedavg_init_slot_is_checked);
  RUN(test_declared_dependencies_are_counted);
  return bb_test_finish();
}
