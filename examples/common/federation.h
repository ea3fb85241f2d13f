/* The federated examples' run: one server and n clients installed from one artifact in
 * the simulator, each client on its label-skewed shard of the digits, the server holding
 * the held-out set; every peer knows every other's address. The server reports "round",
 * "accuracy", "model" (the global parameters) and, where the module exports it, "onnx". */
#ifndef BB_EXAMPLES_FEDERATION_H
#define BB_EXAMPLES_FEDERATION_H

#include <stdbool.h>

#include "bb/runtime.h"
#include "bb/sim.h"
#include "digits.h"

typedef struct bb_fed_setup {
  const uint8_t *artifact;
  size_t artifact_len;
  const char *module;        /* the server's round loop, invoked with clients and the test set */
  const char *server_target; /* the server's other partition (it takes the updates) */
  const char *client_target;
  int clients;
  double loss; /* each message is lost with this probability */
  uint64_t seed;
  bool quiet;
  const bb_digits_split *data;
  const bb_bytes *model;    /* host data of the slot "model" on every peer (an ONNX model), or NULL */
  const char *model_config; /* the slot "model"'s config on every peer instead of the artifact's, or NULL */
} bb_fed_setup;

typedef struct bb_federation {
  bb_fed_setup setup;
  bb_registry *registry;
  bb_sim *sim;
  int n_peers; /* the server is peer 0 */
  bb_node **nodes;
  bb_peer_id *peers;
  /* what the server reported last */
  int round;
  float accuracy;
  bb_tensor *global;
  bb_val *onnx;
  uint64_t failures;
} bb_federation;

/* Installs every peer in a new simulator and starts the server's rounds; the caller then
 * steps f->sim (bb_sim_step) while f->round grows. */
int bb_federation_start(bb_federation *f, const bb_fed_setup *setup, bb_error *err);

/* Peer i installed afresh (for a restore from a snapshot), knowing everybody's address. */
int bb_federation_install(const bb_federation *f, int i, bb_node **out, bb_error *err);

void bb_federation_free(bb_federation *f);

#endif
