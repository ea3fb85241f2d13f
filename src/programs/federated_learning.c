/* federated_learning: three Modules, each compiled into its own artifact with its own
 * bindings, that federate over named wires — clients on their own peers, the two server
 * Modules side by side on the server's peer:
 *   ClientLogic   body: [params, round] = net_in("ServerLogic.server_params");
 *                 (trained, samples) = model.fit(params) (load, train on a batch of its
 *                 own data, give the parameters back with the samples it saw);
 *                 server_peer = input;
 *                 net_out("updated_params", server_peer, [trained, samples, round]).
 *                 bootstrap: server_peer_const = constant(peer id 100),
 *                 server_addrs_const = constant("/p2p/<peer 100>"),
 *                 address_book.insert_many(peer, addrs); announce(peer).
 *                 Bindings: protocol "discovery" = GlobalRegistryClient, model "model" =
 *                 StubModel, data_source "data" = StubLoader.
 *   ServerLogic   [global, round] = net_in("ServerReduce.global");
 *                 model.load_parameters(global); peers = view.sample(2) once loaded (a
 *                 PeerSelector picking class "clients" from the registry's members);
 *                 params = model.params() once sampled;
 *                 net_out("server_params", peers, [params, round]).
 *                 Bindings: GlobalRegistryServer as peer_selector "view" and as protocol
 *                 "discovery", model "model" = StubModel.
 *   ServerReduce  [params, samples, round] = net_in("ClientLogic.updated_params");
 *                 aggregator.contribute(params, [samples, round]); and every ROUND_NS
 *                 (global, round) = aggregator.aggregate() (outputs global_model and
 *                 global_round), sent to input "server_peers" (the server itself, where
 *                 ServerLogic listens) as net_out("global").
 *                 Bindings: aggregator "aggregator" = FedAvg (quorum and cohort 2, round
 *                 0 from the "model" slot; declares the Backend slot "backend"), backend
 *                 "backend" = CpuBackend.
 * Why three compiles: each Module is the program of one kind of peer, and each names
 * the wires it sends on and listens to, so they agree without seeing each other. Kept
 * in one Module, the client's ops that take no inputs would be placed with the sender.
 * Round ids and sample counts stay untyped: the Modules compile with permissive types. */
#include "bb/wire.h"
#include "programs/examples.h"

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot VIEW = {BB_ROLE_PEER_SELECTOR, "view", "clients"};
static const bb_slot AGGREGATOR = {BB_ROLE_AGGREGATOR, "aggregator", NULL};

static void client_body(bb_rec *g, void *user) {
  (void)user;
  static const char *const FROM_SERVER[] = {BB_TYPE_TENSOR_F32, BB_TYPE_ABSTRACT};
  bb_value got[2], trained, samples;
  bb_rec_unbundle(g, bb_rec_net_in(g, BB_FL_WIRE_SERVER_PARAMS, BB_TYPE_COMPOSITE, NULL), FROM_SERVER, got, 2);
  bb_rec_model_fit(g, &MODEL, got[0], &trained, &samples);
  bb_rec_output(g, "update", trained);
  bb_rec_output(g, "update_samples", samples);
  bb_rec_output(g, "update_round", got[1]);
  bb_value server_peer = bb_rec_input(g, "server_peer", BB_TYPE_PEER_ID);
  bb_value update[3] = {trained, samples, got[1]};
  bb_rec_net_out(g, "updated_params", server_peer, bb_rec_bundle(g, update, 3));
}

/* The server's peer id and its address, as text (the peer id in base58, as addresses
 * are written). */
static void client_bootstrap(bb_rec *g, void *user) {
  (void)user;
  static const int64_t one[] = {1};
  static const int64_t server_id[] = {BB_FL_SERVER_PEER};
  bb_peer_id server = bb_peer_id_from_u64(BB_FL_SERVER_PEER);
  bb_address address = bb_address_p2p(&server);
  char text[128];
  size_t len = bb_address_to_text(&address, text, sizeof text);
  int64_t addr_dims[] = {(int64_t)len};
  bb_literal peer_lit = {BB_DTYPE_INT64, one, 1, server_id, sizeof server_id};
  bb_literal addr_lit = {BB_DTYPE_UINT8, addr_dims, 1, text, len};
  bb_value peer = bb_rec_constant(g, "server_peer_const", BB_TYPE_PEER_ID, &peer_lit);
  bb_value addrs = bb_rec_constant(g, "server_addrs_const", BB_TYPE_ADDRESS_VEC, &addr_lit);
  bb_rec_address_book_insert_many(g, peer, addrs);
  bb_rec_announce(g, peer);
}

static void server_logic_body(bb_rec *g, void *user) {
  (void)user;
  static const char *const FROM_REDUCE[] = {BB_TYPE_TENSOR_F32, BB_TYPE_ABSTRACT};
  bb_value got[2];
  bb_rec_unbundle(g, bb_rec_net_in(g, BB_FL_WIRE_GLOBAL, BB_TYPE_COMPOSITE, NULL), FROM_REDUCE, got, 2);
  bb_value loaded = bb_rec_model_load_parameters(g, &MODEL, got[0]);
  bb_value peers = bb_rec_peer_selector_sample_after(g, &VIEW, 2, loaded);
  bb_value params = bb_rec_model_params_after(g, &MODEL, peers);
  bb_value to_clients[2] = {params, got[1]};
  bb_rec_net_out(g, "server_params", peers, bb_rec_bundle(g, to_clients, 2));
}

static void server_reduce_body(bb_rec *g, void *user) {
  (void)user;
  static const char *const FROM_CLIENT[] = {BB_TYPE_TENSOR_F32, BB_TYPE_ABSTRACT, BB_TYPE_ABSTRACT};
  bb_value got[3];
  bb_rec_unbundle(g, bb_rec_net_in(g, BB_FL_WIRE_UPDATED_PARAMS, BB_TYPE_COMPOSITE, NULL), FROM_CLIENT, got, 3);
  bb_value meta[2] = {got[1], got[2]};
  bb_rec_aggregator_contribute(g, &AGGREGATOR, got[0], bb_rec_bundle(g, meta, 2));
  bb_value global, round;
  bb_rec_aggregator_aggregate(g, &AGGREGATOR, bb_rec_interval(g, BB_FL_ROUND_NS), &global, &round);
  bb_rec_output(g, "global_model", global);
  bb_rec_output(g, "global_round", round);
  /* one recorder call per statement: the order of a call's arguments is unspecified,
   * and the order of recording decides the artifact's bytes */
  bb_value server_peers = bb_rec_input(g, "server_peers", BB_TYPE_PEER_ID_VEC);
  bb_value closed[2] = {global, round};
  bb_value bundle = bb_rec_bundle(g, closed, 2);
  bb_rec_net_out(g, "global", server_peers, bundle);
}

static const bb_module CLIENT_LOGIC = {sizeof(bb_module), "ClientLogic", client_body, client_bootstrap, NULL, NULL, 0};
static const bb_module SERVER_LOGIC = {sizeof(bb_module), "ServerLogic", server_logic_body, NULL, NULL, NULL, 0};
static const bb_module SERVER_REDUCE = {sizeof(bb_module), "ServerReduce", server_reduce_body, NULL, NULL, NULL, 0};
static const bb_module *const MODULES[] = {&CLIENT_LOGIC, &SERVER_LOGIC, &SERVER_REDUCE};

static const bb_component_dep FEDAVG_DEPS[] = {{BB_ROLE_BACKEND, "backend"}};

static int configure(bb_compiler *c, size_t module, bb_error *err) {
  int rc = 0;
  bb_compiler_set_permissive_types(c, true);
  switch (module) {
  case 0:
    rc = bb_example_declare(c, "StubModel", NULL, 0, err) || bb_example_declare(c, "StubLoader", NULL, 0, err) ||
         bb_compiler_bind_protocol(c, "discovery", "GlobalRegistryClient", NULL, err) ||
         bb_compiler_bind_model(c, "model", "StubModel", NULL, err) ||
         bb_compiler_bind_data_source(c, "data", "StubLoader", NULL, err);
    break;
  case 1:
    rc = bb_example_declare(c, "StubModel", NULL, 0, err) ||
         bb_compiler_bind_peer_selector(c, "view", "GlobalRegistryServer", NULL, err) ||
         bb_compiler_bind_protocol(c, "discovery", "GlobalRegistryServer", NULL, err) ||
         bb_compiler_bind_model(c, "model", "StubModel", NULL, err);
    break;
  default:
    rc = bb_example_declare(c, "FedAvg", FEDAVG_DEPS, 1, err) || bb_example_declare_cpu_backend(c, err) ||
         bb_compiler_bind_aggregator(c, "aggregator", "FedAvg", "quorum=2,target=2,init=model", err) ||
         bb_compiler_bind_backend(c, "backend", "CpuBackend", NULL, err);
    break;
  }
  return rc ? (err ? err->code : BB_ERR_INVALID_ARGUMENT) : 0;
}

const bb_example BB_EXAMPLE_FEDERATED_LEARNING = {
    "federated_learning",
    "ClientLogic (with GlobalRegistry bootstrap), ServerLogic and ServerReduce, one artifact each, federating over "
    "named wires",
    MODULES, 3, configure};
