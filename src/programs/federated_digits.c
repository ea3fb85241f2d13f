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
 * (batches of the client's shard), FedAvg.
 *
 * Module `FedBuffDigits`, the same federation without a round barrier (FedBuff): each
 * invocation gives the current model to `clients`; a client that finishes sends its
 * update, which the server's FedBuff folds into its buffer, and the server outputs
 * "ready" with the client's id, for the host to invoke it again with that client
 * (bbi_fedbuff_record). "round" is the model's version. Bindings as FedDigits' with
 * FedBuff (BB_FEDERATED_DIGITS_FEDBUFF_CONFIG) in FedAvg's place. */
#include "fedavg_round.h"
#include "programs/examples.h"

static void fed_digits(bb_rec *g, void *user) {
  (void)user;
  bbi_fedavg_record(g, false);
}

static void fedbuff_digits(bb_rec *g, void *user) {
  (void)user;
  bbi_fedbuff_record(g, false);
}

static void secure_fed_digits(bb_rec *g, void *user) {
  (void)user;
  bb_value clients = bb_rec_input(g, "clients", BB_TYPE_PEER_ID_VEC);
  bb_value test_x = bb_rec_input(g, "test_x", bb_tensor_type(BB_DTYPE_FLOAT));
  bb_value test_y = bb_rec_input(g, "test_y", bb_tensor_type(BB_DTYPE_FLOAT));
  bbi_fedavg_serve(g, test_x, test_y, false, clients);
  bbi_fedavg_contribute_secure(g, "global");
}

const bb_module BB_FEDERATED_DIGITS_SECURE = {sizeof(bb_module), "SecureFedDigits", secure_fed_digits, NULL, NULL, NULL, 0};

static const bb_module FED_DIGITS = {sizeof(bb_module), "FedDigits", fed_digits, NULL, NULL, NULL, 0};
static const bb_module FEDBUFF_DIGITS = {sizeof(bb_module), "FedBuffDigits", fedbuff_digits, NULL, NULL, NULL, 0};
static const bb_module *const MODULES[] = {&FED_DIGITS, &FEDBUFF_DIGITS};

static int configure(bb_compiler *c, size_t module, bb_error *err) {
  if (module == 1)
    return bbi_fedbuff_configure(c, "CpuMlp", BB_FEDERATED_DIGITS_MLP_CONFIG, BB_FEDERATED_DIGITS_FEDBUFF_CONFIG, NULL, err);
  return bbi_fedavg_configure(c, "CpuMlp", BB_FEDERATED_DIGITS_MLP_CONFIG, err);
}

const bb_example BB_EXAMPLE_FEDERATED_DIGITS = {
    "federated_digits", "FedDigits: FedAvg over handwritten digits, a server and its clients in one artifact; FedBuffDigits: the "
    "same, asynchronous (FedBuff)",
    MODULES, 2, configure};
