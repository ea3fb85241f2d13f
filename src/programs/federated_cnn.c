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
#include "fedavg_round.h"
#include "programs/examples.h"

static void fed_cnn(bb_rec *g, void *user) {
  (void)user;
  bbi_fedavg_record(g, true);
}

static const bb_module FED_CNN = {sizeof(bb_module), "FedCnn", fed_cnn, NULL, NULL, NULL, 0};
static const bb_module *const MODULES[] = {&FED_CNN};

static int configure(bb_compiler *c, size_t module, bb_error *err) {
  (void)module;
  return bbi_fedavg_configure(c, "OnnxModel", BB_FEDERATED_CNN_MODEL_CONFIG, err);
}

const bb_example BB_EXAMPLE_FEDERATED_CNN = {
    "federated_cnn", "FedCnn: FedAvg of an ONNX CNN (OnnxModel) over handwritten digits, a server and its clients",
    MODULES, 1, configure};
