/* federated_cnn: federated averaging of a convolutional network any framework exported to
 * ONNX, one server and any number of clients. Module `FedCnn`:
 *
 *   server (@self):  every round_period: (global, round) = aggregator.Aggregate(tick)
 *                    model.LoadParameters(global); accuracy = model.Evaluate(test set)
 *                    onnx = model.Export()     (the global model as plain ONNX)
 *                    send [global, round] to `clients`
 *   clients:         (trained, samples) = model.Fit(global)   (local SGD steps on its shard)
 *                    send [trained, samples, round] to `server`
 *   server (server): aggregator.Contribute(update)
 *
 * The model slot binds OnnxModel: the network is an ONNX model handed to every peer by its
 * host (the slot's host data: the model's bytes; the examples use examples/models/
 * digits_cnn.onnx, a small CNN exported from PyTorch), trained through its gradient and
 * optimizer graphs. Outputs "accuracy", "round", "model" (the flat parameter vector) and
 * "onnx" each round. The host gives the server `clients`, `test_x` and `test_y` when it
 * invokes it, and binds `server` on every client. Default bindings: OnnxModel (softmax
 * cross-entropy, SGD with Nesterov momentum), ArraySource (batches of the client's shard), FedAvg. */
#include "programs/examples.h"

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot AGGREGATOR = {BB_ROLE_AGGREGATOR, "aggregator", NULL};

/* One round every 200 ms of the host's clock. */
#define ROUND_PERIOD_NS 200000000

static void fed_cnn(bb_rec *g, void *user) {
  (void)user;
  bb_value clients = bb_rec_input(g, "clients", BB_TYPE_PEER_ID_VEC);
  bb_value server = bb_rec_input(g, "server", BB_TYPE_PEER_ID_VEC);
  bb_value test_x = bb_rec_input(g, "test_x", bb_tensor_type(BB_DTYPE_FLOAT));
  bb_value test_y = bb_rec_input(g, "test_y", bb_tensor_type(BB_DTYPE_FLOAT));

  /* the server's round loop */
  bb_value tick = bb_rec_interval(g, ROUND_PERIOD_NS);
  bb_value global, round;
  bb_rec_aggregator_aggregate(g, &AGGREGATOR, tick, &global, &round);
  bb_value loaded = bb_rec_model_load_parameters(g, &MODEL, global);
  bb_value eval_in[3] = {test_x, test_y, loaded};
  bb_value accuracy;
  bb_rec_role_call(g, &MODEL, "Evaluate", eval_in, 3, NULL, 0, &accuracy, 1);
  bb_rec_output(g, "accuracy", accuracy);
  bb_rec_output(g, "round", round);
  bb_rec_output(g, "model", global);
  bb_rec_output(g, "onnx", bb_rec_model_export_after(g, &MODEL, loaded));
  bb_value to_clients[2] = {global, round};
  bb_rec_net_out(g, "global", clients, bb_rec_bundle(g, to_clients, 2));

  /* a client's round */
  static const char *const GLOBAL_PARTS[] = {BB_TYPE_TENSOR_F32, BB_TYPE_ABSTRACT};
  bb_value parts[2];
  bb_rec_unbundle(g, bb_rec_lookup_output(g, "global"), GLOBAL_PARTS, parts, 2);
  bb_value trained, samples;
  bb_rec_model_fit(g, &MODEL, parts[0], &trained, &samples);
  bb_value update[3] = {trained, samples, parts[1]};
  bb_rec_net_out(g, "update", server, bb_rec_bundle(g, update, 3));

  /* the server takes it in */
  bb_value received = bb_rec_lookup_output(g, "update");
  bb_rec_aggregator_contribute(g, &AGGREGATOR, received, received);
}

static const bb_module FED_CNN = {sizeof(bb_module), "FedCnn", fed_cnn, NULL, NULL, NULL, 0};
static const bb_module *const MODULES[] = {&FED_CNN};

static int configure(bb_compiler *c, size_t module, bb_error *err) {
  (void)module;
  static const bb_component_dep fedavg_deps[] = {{BB_ROLE_MODEL, "model"}};
  /* round ids and sample counts are metadata values without a storage type */
  bb_compiler_set_permissive_types(c, true);
  if (bb_example_declare(c, "OnnxModel", NULL, 0, err) || bb_example_declare(c, "ArraySource", NULL, 0, err) ||
      bb_example_declare(c, "FedAvg", fedavg_deps, 1, err) ||
      bb_compiler_bind_model(c, "model", "OnnxModel", BB_FEDERATED_CNN_MODEL_CONFIG, err) ||
      bb_compiler_bind_data_source(c, "data", "ArraySource", "batch=32", err) ||
      bb_compiler_bind_aggregator(c, "aggregator", "FedAvg", "quorum=6,target=8,deadline_ms=1000,no_quorum=abandon,init=model", err))
    return err ? err->code : BB_ERR_INVALID_ARGUMENT;
  return 0;
}

const bb_example BB_EXAMPLE_FEDERATED_CNN = {
    "federated_cnn", "FedCnn: FedAvg of an ONNX CNN (OnnxModel) over handwritten digits, a server and its clients",
    MODULES, 1, configure};
