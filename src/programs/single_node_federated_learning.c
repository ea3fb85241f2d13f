/* single_node_federated_learning: Module `FederatedRound` with
 *   ClientLogic  (batch, _) = data.next_batch(); model.forward(batch);
 *                output "updated_params" = model.params()
 *   ServerLogic  aggregator.contribute(input "params", input "metadata")
 * and body: server_peers = input; call ClientLogic; net_out("params_port",
 * server_peers, updated_params); call ServerLogic with params = metadata = the received
 * value. Default bindings: model "model" = MyModel, data_source "data" = MyData,
 * aggregator "aggregator" = FedAvg (depends on Backend slot "backend"), backend
 * "backend" = CpuBackend. Compiles into two targets meant for one node:
 * FederatedRound#<hash> (the client side) and FederatedRound_server_peers#<hash> (the
 * server side); both binding tables name the same slots with the same types, so
 * install shares one instance per slot (the aggregator's id is -1 on the client side and
 * real on the server side: the slot ids to merge). */
#include "programs/examples.h"

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot DATA = {BB_ROLE_DATA_SOURCE, "data", NULL};
static const bb_slot AGGREGATOR = {BB_ROLE_AGGREGATOR, "aggregator", NULL};

static void client_logic(bb_rec *g, void *user) {
  (void)user;
  bb_value batch, labels;
  bb_rec_data_source_next_batch(g, &DATA, &batch, &labels);
  (void)labels;
  bb_rec_model_forward(g, &MODEL, batch);
  bb_rec_output(g, "updated_params", bb_rec_model_params(g, &MODEL));
}

static void server_logic(bb_rec *g, void *user) {
  (void)user;
  bb_value params = bb_rec_input(g, "params", NULL);
  bb_value metadata = bb_rec_input(g, "metadata", NULL);
  bb_rec_aggregator_contribute(g, &AGGREGATOR, params, metadata);
}

static const bb_module CLIENT_LOGIC = {sizeof(bb_module), "ClientLogic", client_logic, NULL, NULL, NULL, 0};
static const bb_module SERVER_LOGIC = {sizeof(bb_module), "ServerLogic", server_logic, NULL, NULL, NULL, 0};

static void federated_round(bb_rec *g, void *user) {
  (void)user;
  bb_value server_peers = bb_rec_input(g, "server_peers", NULL);
  bb_call client = bb_rec_call(g, &CLIENT_LOGIC, NULL, 0);
  bb_rec_net_out(g, "params_port", server_peers, bb_rec_call_output(g, client, "updated_params"));
  bb_value received = bb_rec_lookup_output(g, "params_port");
  bb_binding to_server[] = {{"params", received}, {"metadata", received}};
  bb_rec_call(g, &SERVER_LOGIC, to_server, 2);
}

static const bb_module *const SUBMODULES[] = {&CLIENT_LOGIC, &SERVER_LOGIC};
static const bb_module FEDERATED_ROUND = {sizeof(bb_module), "FederatedRound", federated_round, NULL, NULL, SUBMODULES,
                                          2};
static const bb_module *const MODULES[] = {&FEDERATED_ROUND};

static const bb_component_dep FEDAVG_DEPS[] = {{BB_ROLE_BACKEND, "backend"}};

static int configure(bb_compiler *c, size_t module, bb_error *err) {
  (void)module;
  if (bb_example_declare(c, "MyModel", NULL, 0, err) || bb_example_declare(c, "MyData", NULL, 0, err) ||
      bb_example_declare(c, "FedAvg", FEDAVG_DEPS, 1, err) || bb_example_declare_cpu_backend(c, err) ||
      bb_compiler_bind_model(c, "model", "MyModel", NULL, err) ||
      bb_compiler_bind_data_source(c, "data", "MyData", NULL, err) ||
      bb_compiler_bind_aggregator(c, "aggregator", "FedAvg", NULL, err) ||
      bb_compiler_bind_backend(c, "backend", "CpuBackend", NULL, err))
    return err ? err->code : BB_ERR_INVALID_ARGUMENT;
  return 0;
}

const bb_example BB_EXAMPLE_SINGLE_NODE_FEDERATED_LEARNING = {
    "single_node_federated_learning",
    "FederatedRound: client and server targets for one node, sharing the model and FedAvg slots", MODULES, 1,
    configure};
