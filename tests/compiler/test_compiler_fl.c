/* A federated-learning Module with a server and clients: the server sends the global
 * parameters to class `clients`; each client loads them, trains on a batch and sends
 * its update to class `server`, where the aggregator takes it in. Compiled, it must
 * split into the sending server side, the clients and the aggregating server, with every
 * Send paired to a Recv whose destination site resolves in the partition of the
 * receiving class, and pass onnx.checker. */
#include "cctest.h"

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot LOADER = {BB_ROLE_DATA_SOURCE, "loader", NULL};
static const bb_slot AGGREGATOR = {BB_ROLE_AGGREGATOR, "fedavg", NULL};

static void client_body(bb_rec *g, void *user) {
  (void)user;
  bb_value global = bb_rec_input(g, "global", NULL);
  bb_value server = bb_rec_input(g, "server", NULL);
  bb_rec_model_load_parameters(g, &MODEL, global);
  /* everything the client computes derives from what it received: an op with no
   * inputs (NextBatch, Params) is a source and runs on the sending side (@self) */
  bb_value prediction = bb_rec_model_forward(g, &MODEL, global);
  bb_value loss = bb_rec_model_compute_loss(g, &MODEL, prediction, prediction);
  bb_value grad = bb_rec_model_backward(g, &MODEL, loss);
  bb_rec_net_out(g, "update", server, grad);
}
static const bb_module CLIENT = {sizeof(bb_module), "Client", client_body, NULL, NULL, NULL, 0};

static void fl_body(bb_rec *g, void *user) {
  (void)user;
  bb_value clients = bb_rec_input(g, "clients", NULL);
  bb_value server = bb_rec_input(g, "server", NULL);
  bb_rec_net_out(g, "global", clients, bb_rec_model_params(g, &MODEL));
  bb_binding to_client[] = {{"global", bb_rec_lookup_output(g, "global")}, {"server", server}};
  bb_call client = bb_rec_call(g, &CLIENT, to_client, 2);
  (void)client;
}
static const bb_module *const FL_SUBMODULES[] = {&CLIENT};
static const bb_module FEDERATED = {sizeof(bb_module), "FedLearning", fl_body, NULL, NULL, FL_SUBMODULES, 1};

static void test_partitions(void) {
  bb_model *rec = dt_build(&FEDERATED);
  bb_compiler *c = bb_compiler_new(NULL);
  ct_declare(c, "Mlp", F32);
  ct_declare(c, "Mnist", F32);
  ct_declare(c, "FedAvg", F32);
  ct_bind(c, BB_ROLE_MODEL, "model", "Mlp");
  ct_bind(c, BB_ROLE_AGGREGATOR, "fedavg", "FedAvg");
  bb_model *m = rec ? ct_compile(c, rec) : NULL;
  if (m) {
    const bb_function *server = ct_partition(m, "FedLearning");
    const bb_function *clients = ct_partition(m, "FedLearning_clients");
    CHECK(server && clients);
    /* the server sends the global parameters; the clients receive them */
    CHECK_EQ_INT(ct_count(server, "Params"), 1);
    CHECK_EQ_INT(ct_count(server, "Send"), 1);
    CHECK_EQ_INT(ct_count(clients, "Recv"), 1);
    CHECK_EQ_INT(ct_count(clients, "LoadParameters"), 1);
    CHECK_EQ_INT(ct_count(clients, "Backward"), 1);
    CHECK_EQ_INT(ct_count(clients, "Send"), 1); /* the update, fire and forget here */
    const bb_ir_node *send = ct_op(server, "Send", 0), *recv = ct_op(clients, "Recv", 0);
    char key[256];
    snprintf(key, sizeof key, "ai.bytesandbrains.dest_site_name.%s", send ? send->inputs.items[0] : "?");
    /* the server's Send names the wire the clients' Recv listens to */
    const char *wire = ct_meta(send, key);
    CHECK_STR(wire, "FedLearning.global");
    if (recv) CHECK_STR(ct_meta(recv, BB_KEY_WIRE_ID), wire);
    const bb_ir_node *load = ct_op(clients, "LoadParameters", 0);
    if (load && recv) {
      char want[256];
      snprintf(want, sizeof want, "%s#backoff_rx_out", recv->outputs.items[0]);
      CHECK_STR(load->inputs.items[0], want);
    }
    CHECK_STR(ct_binding(m, server, "model"), "Model|Mlp|0");
    CHECK_STR(ct_binding(m, clients, "model"), "Model|Mlp|0");
    CHECK_STR(ct_binding(m, clients, "fedavg"), "Aggregator|FedAvg|-1");
#ifndef __EMSCRIPTEN__
    CHECK_MSG(dt_onnx_check(m, "compiled-fl") == 0, "onnx.checker rejected the compiled FL module");
#endif
  }
  bb_model_free(m);
  bb_compiler_free(c);
  bb_model_free(rec);
}

/* Round trip: server → clients → server. The server side aggregates what the clients
 * send back to class `server`. */
static void round_body(bb_rec *g, void *user) {
  (void)user;
  bb_value clients = bb_rec_input(g, "clients", NULL);
  bb_value server = bb_rec_input(g, "server", NULL);
  bb_rec_net_out(g, "global", clients, bb_rec_model_params(g, &MODEL));
  bb_value global = bb_rec_lookup_output(g, "global");
  bb_rec_model_load_parameters(g, &MODEL, global);
  bb_value batch, labels;
  bb_rec_data_source_next_batch(g, &LOADER, &batch, &labels);
  (void)labels;
  bb_value y = bb_rec_model_forward(g, &MODEL, global);
  (void)batch;
  bb_rec_net_out(g, "update", server, y);
  bb_value update = bb_rec_lookup_output(g, "update");
  bb_rec_aggregator_contribute(g, &AGGREGATOR, update, update);
}
static const bb_module ROUND = {sizeof(bb_module), "Round", round_body, NULL, NULL, NULL, 0};

static void test_round_trip(void) {
  bb_model *rec = dt_build(&ROUND);
  bb_compiler *c = bb_compiler_new(NULL);
  ct_declare(c, "Mlp", F32);
  ct_declare(c, "Mnist", F32);
  ct_declare(c, "FedAvg", F32);
  ct_bind(c, BB_ROLE_MODEL, "model", "Mlp");
  ct_bind(c, BB_ROLE_DATA_SOURCE, "loader", "Mnist");
  ct_bind(c, BB_ROLE_AGGREGATOR, "fedavg", "FedAvg");
  bb_model *m = rec ? ct_compile(c, rec) : NULL;
  if (m) {
    const bb_function *start = ct_partition(m, "Round");
    const bb_function *clients = ct_partition(m, "Round_clients");
    const bb_function *server = ct_partition(m, "Round_server");
    CHECK(start && clients && server);
    CHECK_EQ_INT(m->functions.len, 3);
    CHECK_EQ_INT(ct_count(clients, "Forward"), 1);
    CHECK_EQ_INT(ct_count(server, "Contribute"), 1);
    /* both sends pair with a Recv in the receiving class */
    const bb_ir_node *s1 = ct_op(start, "Send", 0), *s2 = ct_op(clients, "Send", 0);
    const bb_ir_node *r1 = ct_op(clients, "Recv", 0), *r2 = ct_op(server, "Recv", 0);
    CHECK(s1 && s2 && r1 && r2);
    if (s1 && s2 && r1 && r2) {
      char key[256];
      snprintf(key, sizeof key, "ai.bytesandbrains.dest_site_name.%s", s1->inputs.items[0]);
      CHECK_STR(ct_meta(s1, key), "Round.global");
      CHECK_STR(ct_meta(r1, BB_KEY_WIRE_ID), "Round.global");
      snprintf(key, sizeof key, "ai.bytesandbrains.dest_site_name.%s", s2->inputs.items[0]);
      CHECK_STR(ct_meta(s2, key), "Round.update");
      CHECK_STR(ct_meta(r2, BB_KEY_WIRE_ID), "Round.update");
      CHECK(strcmp(ct_meta(s1, "ai.bytesandbrains.batch_group_id"), ct_meta(s2, "ai.bytesandbrains.batch_group_id")) != 0);
    }
    /* the describe view lists both edges */
    char *json = NULL;
    bb_error err;
    CHECK(bb_artifact_describe(m, BB_ARTIFACT_JSON, &json, NULL, &err) == 0);
    if (json && start && clients && server) {
      char want[512];
      snprintf(want, sizeof want, "{\"from\":\"%s\",\"to\":\"%s\"", start->name, clients->name);
      CHECK_MSG(strstr(json, want) != NULL, "no edge %s", want);
      snprintf(want, sizeof want, "{\"from\":\"%s\",\"to\":\"%s\"", clients->name, server->name);
      CHECK_MSG(strstr(json, want) != NULL, "no edge %s", want);
    }
    bb_buffer_free(NULL, json);
#ifndef __EMSCRIPTEN__
    CHECK_MSG(dt_onnx_check(m, "compiled-round") == 0, "onnx.checker rejected the compiled round");
#endif
  }
  bb_model_free(m);
  bb_compiler_free(c);
  bb_model_free(rec);
}

int main(void) {
  RUN(test_partitions);
  RUN(test_round_trip);
  return bb_test_finish();
}
