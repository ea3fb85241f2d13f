/* The split examples' run: one server and n clients installed from one of split_cnn's
 * artifacts (SplitCnn, SplitCnnU or SplitFedCnn) in the simulator, each client holding a
 * shard of the digits and
 * the held-out set, every SplitModel given the same ONNX model. The clients step as fast
 * as the network returns their gradients and score themselves every second of the
 * simulated clock ("accuracy"); the run keeps each client's last score, the bytes each
 * peer sent and the steps taken. */
#ifndef BB_EXAMPLES_SPLIT_RUN_H
#define BB_EXAMPLES_SPLIT_RUN_H

#include <stdbool.h>

#include "bb/runtime.h"
#include "bb/sim.h"
#include "digits.h"

#define BB_SPLIT_RUN_MAX_CLIENTS 64

typedef struct bb_split_setup {
  const uint8_t *artifact;
  size_t artifact_len;
  const char *module; /* the Module: the clients' target, and the server's with "_server" */
  bool averaged;      /* SplitFed: the clients also run "<module>_clients", the server averages */
  bool no_held_out;   /* the Module takes no held-out set (its clients score nothing) */
  int clients;
  double loss; /* each message is lost with this probability */
  uint64_t seed;
  bool quiet;
  const bb_digits_split *data; /* shards[i] is client i's */
  const bb_bytes *model;       /* the whole model, every SplitModel's host data */
} bb_split_setup;

typedef struct bb_split_run {
  bb_split_setup setup;
  bb_registry *registry;
  bb_sim *sim;
  int n_peers; /* the server is peer 0 */
  bb_node **nodes;
  bb_peer_id *peers;
  float accuracy[BB_SPLIT_RUN_MAX_CLIENTS]; /* each client's last score (-1: none yet) */
  int evaluations;                           /* scores received, all clients */
  uint64_t bytes_sent[BB_SPLIT_RUN_MAX_CLIENTS + 1]; /* per peer, the server first */
  uint64_t failures;                         /* failed ops and refused fills, every peer */
} bb_split_run;

/* Installs the peers, binds the clients' inputs and starts their steps. */
int bb_split_run_start(bb_split_run *r, const bb_split_setup *setup, bb_error *err);
void bb_split_run_free(bb_split_run *r);

/* The lowest last score of the clients (-1 until every client has one). */
float bb_split_run_min_accuracy(const bb_split_run *r);
/* Optimizer steps taken by the clients' parts, summed (node counter split.steps). */
uint64_t bb_split_run_client_steps(const bb_split_run *r);

#endif
