/* federated_digits: federated averaging over handwritten digits, one server and any
 * number of clients. Module `FedDigits`:
 *
 *   server (@self):  every round_period: (global, round) = aggregator.Aggregate(tick)
 *                    model.LoadParameters(global); accuracy = model.Evaluate(test set)
 *                    send [global, round] to `clients`
 *   clients:         (trained, samples) = model.Fit(global)   (local SGD on its shard)
 *                    send [trained, samples, round] to `server`
 *   server (server): aggregator.Contribute(update)
 *
 * FedAvg (quorum, round deadline) decides when a round closes, so clients that drop or
 * lose messages do not stall the federation; its first Aggregate sends the server
 * model's initial parameters (init=model). Outputs "accuracy", "round" and the global
 * "model" each round.
 * The host gives the server `clients`, `test_x` and `test_y` when it invokes it, and binds
 * `server` on every client. Default bindings: CpuMlp (64 → 32 → 10), ArraySource
 * (batches of the client's shard), FedAvg. */
#include "fedavg_round.h"
#include "programs/examples.h"

static void fed_digits(bb_rec *g, void *user) {
  (void)user;
  bbi_fedavg_record(g, false);
}

static const bb_module FED_DIGITS = {sizeof(bb_module), "FedDigits", fed_digits, NULL, NULL, NULL, 0};
static const bb_module *const MODULES[] = {&FED_DIGITS};

static int configure(bb_compiler *c, size_t module, bb_error *err) {
  (void)module;
  return bbi_fedavg_configure(c, "CpuMlp", BB_FEDERATED_DIGITS_MLP_CONFIG, err);
}

const bb_example BB_EXAMPLE_FEDERATED_DIGITS = {
    "federated_digits", "FedDigits: FedAvg over handwritten digits, a server and its clients in one artifact",
    MODULES, 1, configure};
