/* gossip_digits: decentralised learning over handwritten digits — no server. Module
 * `GossipDigits`, one partition every peer runs:
 *
 *   every period: accuracy = model.Evaluate(test set)      → output "accuracy"
 *                 trained = model.Fit(model.Params())      (local SGD on its shard)
 *                 send trained to one peer sampled by the gossip view
 *   on receipt:   aggregator.Contribute(update)            (GossipAvg mixes it in)
 *
 * The host invokes each peer once with `test_x` and `test_y`. Default bindings: CpuMlp,
 * ArraySource (the peer's shard), GossipView (peer sampling), GossipAvg. */
#include "programs/examples.h"

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot AGGREGATOR = {BB_ROLE_AGGREGATOR, "aggregator", NULL};
static const bb_slot VIEW = {BB_ROLE_PEER_SELECTOR, "view", NULL};

#define GOSSIP_PERIOD_NS 100000000

static void gossip_digits(bb_rec *g, void *user) {
  (void)user;
  bb_value test_x = bb_rec_input(g, "test_x", bb_tensor_type(BB_DTYPE_FLOAT));
  bb_value test_y = bb_rec_input(g, "test_y", bb_tensor_type(BB_DTYPE_FLOAT));
  bb_value tick = bb_rec_interval(g, GOSSIP_PERIOD_NS);
  bb_value params = bb_rec_model_params_after(g, &MODEL, tick);
  /* the model as gossip left it is what the peer has learnt: score it before training */
  bb_value eval_in[3] = {test_x, test_y, params};
  bb_value accuracy;
  bb_rec_role_call(g, &MODEL, "Evaluate", eval_in, 3, NULL, 0, &accuracy, 1);
  bb_rec_output(g, "accuracy", accuracy);
  bb_value fit_in[2] = {params, accuracy}, fit_out[2];
  bb_rec_role_call(g, &MODEL, "Fit", fit_in, 2, NULL, 0, fit_out, 2);
  bb_value peer = bb_rec_peer_selector_sample_after(g, &VIEW, 1, tick);
  bb_rec_net_out(g, "share", peer, fit_out[0]);
  bb_value received = bb_rec_lookup_output(g, "share");
  bb_rec_aggregator_contribute(g, &AGGREGATOR, received, received);
}

static const bb_module GOSSIP_DIGITS = {sizeof(bb_module), "GossipDigits", gossip_digits, NULL, NULL, NULL, 0};
static const bb_module *const MODULES[] = {&GOSSIP_DIGITS};

static int configure(bb_compiler *c, size_t module, bb_error *err) {
  (void)module;
  static const bb_component_dep avg_deps[] = {{BB_ROLE_MODEL, "model"}};
  bb_compiler_set_permissive_types(c, true); /* sample counts and peer lists have no storage type */
  if (bb_example_declare(c, "CpuMlp", NULL, 0, err) || bb_example_declare(c, "ArraySource", NULL, 0, err) ||
      bb_example_declare(c, "GossipAvg", avg_deps, 1, err) ||
      bb_compiler_bind_model(c, "model", "CpuMlp",
                             "inputs=64,hidden=32,outputs=10,activation=relu,lr=0.05,momentum=0.9,input_scale=0.0625,"
                             "fit_steps=4,data=data",
                             err) ||
      bb_compiler_bind_data_source(c, "data", "ArraySource", "batch=32", err) ||
      bb_compiler_bind_peer_selector(c, "view", "GossipView", "view=6,shuffle=3", err) ||
      bb_compiler_bind_aggregator(c, "aggregator", "GossipAvg", "model=model,weight=0.5", err))
    return err ? err->code : BB_ERR_INVALID_ARGUMENT;
  return 0;
}

const bb_example BB_EXAMPLE_GOSSIP_DIGITS = {
    "gossip_digits", "GossipDigits: decentralised averaging over a gossip peer-sampling view, no server", MODULES, 1,
    configure};
