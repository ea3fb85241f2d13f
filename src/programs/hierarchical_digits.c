/* hierarchical_digits: federated averaging in tiers over handwritten digits — clients
 * report to edge aggregators, the edge aggregators to a root. Module `HierDigits`:
 *
 *   root (@self):    every round_period: (global, round) = aggregator.Aggregate(tick)
 *                    model.LoadParameters(global); accuracy = model.Evaluate(test set)
 *                    send [global, round] to `edges`
 *   edges:           pass [global, round] on to `clients` (each edge its own clients)
 *   clients:         (trained, samples) = model.Fit(global)   (local SGD on its shard)
 *                    send [trained, samples, round] to `edge`
 *   edge:            edge_aggregator.Contribute(update); then
 *                    (mean, [weight, round]) = edge_aggregator.Aggregate(contributed)
 *                    send [mean, [weight, round]] to `root`
 *   root (root):     aggregator.Contribute(report)
 *
 * The edge aggregator is FedAvg with rounds=follow: its rounds are the root's, carried by
 * the clients' updates, and its report weighs the sum of the sample counts it averaged.
 * The root's sample-weighted mean of the edge means is then the flat mean of every
 * client's update: Σ_e S_e·(Σ_{i∈e} n_i·x_i / S_e) / Σ_e S_e = Σ_i n_i·x_i / Σ_i n_i,
 * up to the rounding of each edge mean to float (tests/sim/test_hierarchical.c bounds
 * it). The weight bounds of FedAvg (samples_factor, norm_factor, ascent_screen) are off at
 * both tiers: each tier would bound a different population (the root sees edges, not
 * clients), and the result would no longer be the flat mean. An edge closes a round when a contribution
 * finds its target met (or its quorum met past its deadline): it has no clock of its own.
 *
 * Outputs "accuracy", "round" and the global "model" on the root each round, and
 * "client_update" ([trained, samples, round]) on every client. The host gives the root
 * `edges`, `test_x` and `test_y` when it invokes it; binds `clients` (HierDigits_edges)
 * and `root` (HierDigits_edge) on every edge, and `edge` (HierDigits_clients) on every
 * client. Default bindings: CpuMlp (64 → 32 → 10), ArraySource, FedAvg at both tiers.
 * Every node constructs every bound slot, so an edge is given a data set too (the
 * examples give it the held-out set), though its model never runs. */
#include "fedavg_round.h"
#include "programs/examples.h"

static const bb_slot EDGE_AGGREGATOR = {BB_ROLE_AGGREGATOR, "edge_aggregator", NULL};

static void hier_digits(bb_rec *g, void *user) {
  (void)user;
  bb_value edges = bb_rec_input(g, "edges", BB_TYPE_PEER_ID_VEC);
  bb_value clients = bb_rec_input(g, "clients", BB_TYPE_PEER_ID_VEC);
  bb_value edge = bb_rec_input(g, "edge", BB_TYPE_PEER_ID_VEC);
  bb_value root = bb_rec_input(g, "root", BB_TYPE_PEER_ID_VEC);
  bb_value test_x = bb_rec_input(g, "test_x", bb_tensor_type(BB_DTYPE_FLOAT));
  bb_value test_y = bb_rec_input(g, "test_y", bb_tensor_type(BB_DTYPE_FLOAT));

  /* the root's round loop, as federated_digits' server's, sending to the edges */
  bbi_fedavg_serve(g, test_x, test_y, false, edges);

  /* an edge passes the global model on to its clients (as a bundle of its own: a Send
   * takes a value its partition made, not the received one) */
  bb_value relayed[2];
  bbi_fedavg_receive(g, "global", relayed);
  bb_rec_net_out(g, "relay", clients, bb_rec_bundle(g, relayed, 2));

  /* a client's round */
  bb_value update = bbi_fedavg_fit(g, "relay");
  bb_rec_output(g, "client_update", update);
  bb_rec_net_out(g, "update", edge, update);

  /* an edge averages its clients' updates and reports the mean with its weight */
  bb_value contributed = bbi_fedavg_take_in(g, &EDGE_AGGREGATOR, "update");
  bb_value mean, report;
  bb_rec_aggregator_aggregate(g, &EDGE_AGGREGATOR, contributed, &mean, &report);
  bb_value to_root[2] = {mean, report};
  bb_rec_net_out(g, "report", root, bb_rec_bundle(g, to_root, 2));

  /* the root takes the reports in */
  bbi_fedavg_take_in(g, &BBI_FEDAVG_AGGREGATOR, "report");
}

static const bb_module HIER_DIGITS = {sizeof(bb_module), "HierDigits", hier_digits, NULL, NULL, NULL, 0};
static const bb_module *const MODULES[] = {&HIER_DIGITS};

static int configure(bb_compiler *c, size_t module, bb_error *err) {
  (void)module;
  static const bb_component_dep fedavg_deps[] = {{BB_ROLE_MODEL, "model"}};
  /* round ids, sample counts and reports are metadata values without a storage type */
  bb_compiler_set_permissive_types(c, true);
  if (bb_example_declare(c, "CpuMlp", NULL, 0, err) || bb_example_declare(c, "ArraySource", NULL, 0, err) ||
      bb_example_declare(c, "FedAvg", fedavg_deps, 1, err) ||
      bb_compiler_bind_model(c, "model", "CpuMlp",
                             "inputs=64,hidden=32,outputs=10,activation=relu,lr=0.05,momentum=0.9,input_scale=0.0625,"
                             "fit_steps=12,data=data",
                             err) ||
      bb_compiler_bind_data_source(c, "data", "ArraySource", "batch=32", err) ||
      bb_compiler_bind_aggregator(c, "aggregator", "FedAvg",
                                  "quorum=2,target=2,deadline_ms=1000,no_quorum=abandon,init=model,samples_factor=0,"
                                  "norm_factor=0,ascent_screen=0",
                                  err) ||
      bb_compiler_bind_aggregator(c, "edge_aggregator", "FedAvg",
                                  "quorum=3,target=4,deadline_ms=500,rounds=follow,samples_factor=0,norm_factor=0,"
                                  "ascent_screen=0",
                                  err))
    return err ? err->code : BB_ERR_INVALID_ARGUMENT;
  return 0;
}

const bb_example BB_EXAMPLE_HIERARCHICAL_DIGITS = {
    "hierarchical_digits",
    "HierDigits: FedAvg in tiers over handwritten digits, a root, edge aggregators and their clients in one artifact",
    MODULES, 1, configure};
