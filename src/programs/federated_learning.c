/* federated_learning (roles.md §6.5): three Modules, each compiled separately with its
 * own bindings, as the reference does (one artifact per module):
 *   ClientLogic   body: server_params = input; model.load_parameters(server_params);
 *                 (batch, _) = data.next_batch(); model.forward(batch);
 *                 updated = model.params(); server_peer = input;
 *                 net_out("updated_params", server_peer, updated).
 *                 bootstrap: server_peer_const = constant(peer id 100),
 *                 server_addrs_const = constant(the server's address bytes),
 *                 address_book.insert_many(peer, addrs); announce(peer).
 *                 Bindings: protocol "discovery" = GlobalRegistryClient, model "model" =
 *                 StubModel, data_source "data" = StubLoader.
 *   ServerLogic   peers = view.sample(2) (a PeerSelector picking class "clients");
 *                 params = model.params(); net_out("server_params", peers, params).
 *                 Bindings: GlobalRegistryServer as peer_selector "view" and as protocol
 *                 "discovery", model "model" = StubModel.
 *   ServerReduce  aggregator.contribute(input "received_params", input "received_meta").
 *                 Bindings: aggregator "aggregator" = FedAvg (depends on Backend slot
 *                 "backend"), backend "backend" = CpuBackend.
 * Why three compiles and not one Module: the client's NextBatch and Params take no
 * inputs, so in a single recorded round they would be homed with the sender (@self)
 * rather than on the clients; the reference keeps the three programs apart, each
 * installed on its own node, and the role-op counts per program match it exactly
 * (ClientLogic NextBatch/Forward/LoadParameters/Params x1, ServerLogic Params/Sample x1,
 * ServerReduce Contribute x1). */
#include <string.h>

#include "programs/examples.h"

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot DATA = {BB_ROLE_DATA_SOURCE, "data", NULL};
static const bb_slot VIEW = {BB_ROLE_PEER_SELECTOR, "view", "clients"};
static const bb_slot AGGREGATOR = {BB_ROLE_AGGREGATOR, "aggregator", NULL};

static void client_body(bb_rec *g, void *user) {
  (void)user;
  bb_value server_params = bb_rec_input(g, "server_params", BB_TYPE_TENSOR_F32);
  bb_rec_model_load_parameters(g, &MODEL, server_params);
  bb_value batch, labels;
  bb_rec_data_source_next_batch(g, &DATA, &batch, &labels);
  (void)labels;
  bb_rec_model_forward(g, &MODEL, batch);
  bb_value updated = bb_rec_model_params(g, &MODEL);
  bb_value server_peer = bb_rec_input(g, "server_peer", BB_TYPE_PEER_ID);
  bb_rec_net_out(g, "updated_params", server_peer, updated);
}

/* The server's peer id and its address (a multiaddress, as bytes). */
static const int64_t SERVER_PEER_ID[] = {100};
static const char SERVER_ADDRESS[] = "/p2p/100/site/11";

static void client_bootstrap(bb_rec *g, void *user) {
  (void)user;
  static const int64_t one[] = {1};
  int64_t addr_dims[] = {(int64_t)strlen(SERVER_ADDRESS)};
  bb_literal peer_lit = {BB_DTYPE_INT64, one, 1, SERVER_PEER_ID, sizeof SERVER_PEER_ID};
  bb_literal addr_lit = {BB_DTYPE_UINT8, addr_dims, 1, SERVER_ADDRESS, strlen(SERVER_ADDRESS)};
  bb_value peer = bb_rec_constant(g, "server_peer_const", BB_TYPE_PEER_ID, &peer_lit);
  bb_value addrs = bb_rec_constant(g, "server_addrs_const", BB_TYPE_ADDRESS_VEC, &addr_lit);
  bb_rec_address_book_insert_many(g, peer, addrs);
  bb_rec_announce(g, peer);
}

static void server_logic_body(bb_rec *g, void *user) {
  (void)user;
  bb_value peers = bb_rec_peer_selector_sample(g, &VIEW, 2);
  bb_value params = bb_rec_model_params(g, &MODEL);
  bb_rec_net_out(g, "server_params", peers, params);
}

static void server_reduce_body(bb_rec *g, void *user) {
  (void)user;
  bb_value params = bb_rec_input(g, "received_params", BB_TYPE_TENSOR_F32);
  bb_value meta = bb_rec_input(g, "received_meta", BB_TYPE_TENSOR_F32);
  bb_rec_aggregator_contribute(g, &AGGREGATOR, params, meta);
}

static const bb_module CLIENT_LOGIC = {sizeof(bb_module), "ClientLogic", client_body, client_bootstrap, NULL, NULL, 0};
static const bb_module SERVER_LOGIC = {sizeof(bb_module), "ServerLogic", server_logic_body, NULL, NULL, NULL, 0};
static const bb_module SERVER_REDUCE = {sizeof(bb_module), "ServerReduce", server_reduce_body, NULL, NULL, NULL, 0};
static const bb_module *const MODULES[] = {&CLIENT_LOGIC, &SERVER_LOGIC, &SERVER_REDUCE};

static const bb_component_dep FEDAVG_DEPS[] = {{BB_ROLE_BACKEND, "backend"}};

static int configure(bb_compiler *c, size_t module, bb_error *err) {
  int rc = 0;
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
         bb_compiler_bind_aggregator(c, "aggregator", "FedAvg", NULL, err) ||
         bb_compiler_bind_backend(c, "backend", "CpuBackend", NULL, err);
    break;
  }
  return rc ? (err ? err->code : BB_ERR_INVALID_ARGUMENT) : 0;
}

const bb_example BB_EXAMPLE_FEDERATED_LEARNING = {
    "federated_learning",
    "ClientLogic (with GlobalRegistry bootstrap), ServerLogic and ServerReduce, one artifact each", MODULES, 3,
    configure};
