/* split_cnn: split learning of the CNN federated_cnn trains (examples/models/digits_cnn.onnx,
 * exported from PyTorch), one Module per shape:
 *
 *   SplitCnn     (vanilla)   clients: the convolutions (input → /MaxPool_1_output_0);
 *                            server:  the dense layers and the loss (the labels travel)
 *   SplitCnnU    (U-shaped)  clients: the convolutions, and the last layer with the loss
 *                            (/Relu_2_output_0 → logits); server: fc1 and its ReLU
 *   SplitFedCnn  (SplitFed)  SplitCnn, and the clients' parts averaged: every round of 10
 *                            steps a client shares its part, FedAvg on the server
 *                            averages them (slot "averager"; each weighs 1) and sends the
 *                            average to "clients", and the client loads it before its
 *                            next step
 *
 * Each client steps whenever its last step's gradients are back (a tick every millisecond
 * of the host's clock asks), on batches of its shard, and scores its model on the held-out
 * set every EVAL_PERIOD: output "accuracy" on the client, "split_loss" on the side with
 * the loss. Inputs: "server" (the server's peer), "test_x", "test_y". Default bindings:
 * SplitModel on "client_model" and "server_model" (the model's bytes are each slot's host
 * data; the compiler adds the cuts and sides), ArraySource "data" (batches of 32). */
#include <stdbool.h>

#include "programs/examples.h"

static const bb_slot CLIENT = {BB_ROLE_MODEL, "client_model", NULL};
static const bb_slot SERVER = {BB_ROLE_MODEL, "server_model", NULL};

#define STEP_PERIOD_NS 1000000
#define EVAL_PERIOD_NS 1000000000

static const char *const VANILLA_CUTS[] = {BB_SPLIT_CNN_CUT};
static const char *const U_CUTS[] = {BB_SPLIT_CNN_CUT, BB_SPLIT_CNN_HEAD_CUT};

static const bb_slot AVERAGER = {BB_ROLE_AGGREGATOR, "averager", NULL};

static void record(bb_rec *g, bb_split_shape shape, bool averaged) {
  bb_value server = bb_rec_input(g, "server", BB_TYPE_PEER_ID_VEC);
  bb_value test_x = bb_rec_input(g, "test_x", BB_TYPE_TENSOR_F32);
  bb_value test_y = bb_rec_input(g, "test_y", BB_TYPE_TENSOR_F32);
  bb_value tick = bb_rec_interval(g, STEP_PERIOD_NS);
  bb_value eval = bb_rec_interval(g, EVAL_PERIOD_NS);
  bool u = shape == BB_SPLIT_U;
  bb_value clients = averaged ? bb_rec_input(g, "clients", BB_TYPE_PEER_ID_VEC) : (bb_value){0};
  bb_split s = {sizeof s, shape,  u ? U_CUTS : VANILLA_CUTS, u ? 2 : 1, &CLIENT, &SERVER, server, tick, test_x,
                test_y,   eval,   averaged ? &AVERAGER : NULL,            clients};
  bb_rec_split(g, &s);
}

static void vanilla(bb_rec *g, void *user) {
  (void)user;
  record(g, BB_SPLIT_VANILLA, false);
}

static void u_shaped(bb_rec *g, void *user) {
  (void)user;
  record(g, BB_SPLIT_U, false);
}

static void split_fed(bb_rec *g, void *user) {
  (void)user;
  record(g, BB_SPLIT_VANILLA, true);
}

static const bb_module SPLIT_CNN = {sizeof(bb_module), "SplitCnn", vanilla, NULL, NULL, NULL, 0};
static const bb_module SPLIT_CNN_U = {sizeof(bb_module), "SplitCnnU", u_shaped, NULL, NULL, NULL, 0};
static const bb_module SPLIT_FED_CNN = {sizeof(bb_module), "SplitFedCnn", split_fed, NULL, NULL, NULL, 0};
static const bb_module *const MODULES[] = {&SPLIT_CNN, &SPLIT_CNN_U, &SPLIT_FED_CNN};

static int configure(bb_compiler *c, size_t module, bb_error *err) {
  static const bb_component_dep split_deps[] = {{BB_ROLE_DATA_SOURCE, "data"}};
  if (bb_example_declare(c, "SplitModel", split_deps, 1, err) || bb_example_declare(c, "ArraySource", NULL, 0, err) ||
      bb_compiler_bind_model(c, "client_model", "SplitModel", BB_SPLIT_CNN_MODEL_CONFIG, err) ||
      bb_compiler_bind_model(c, "server_model", "SplitModel", BB_SPLIT_CNN_MODEL_CONFIG, err) ||
      bb_compiler_bind_data_source(c, "data", "ArraySource", "batch=32", err) ||
      (module == 2 && (bb_example_declare(c, "FedAvg", NULL, 0, err) ||
                       bb_compiler_bind_aggregator(c, "averager", "FedAvg", BB_SPLIT_FED_CNN_AVERAGER_CONFIG, err))))
    return err ? err->code : BB_ERR_INVALID_ARGUMENT;
  return 0;
}

const bb_example BB_EXAMPLE_SPLIT_CNN = {
    "split_cnn",
    "SplitCnn / SplitCnnU / SplitFedCnn: split learning of an ONNX CNN (SplitModel), vanilla, U-shaped and with the "
    "clients' parts averaged",
    MODULES, 3, configure};
