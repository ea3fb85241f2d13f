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
  const char *server_target; /* the server's other partition (it takes the updates); NULL when
                                the module has none (the clients then bind no "server") */
  const char *client_target;
  int clients;
  double loss; /* each message is lost with this probability */
  uint64_t seed;
  bool quiet;
  const bb_digits_split *data;
  const bb_bytes *model;    /* host data of the slot "model" on every peer (an ONNX model), or NULL */
  const char *model_config; /* the slot "model"'s config on every peer instead of the artifact's, or NULL */
  const bb_sim_scenario *scenario; /* a population (--scenario FILE): its network, and each client
                                      one of its devices; NULL: the examples' network */
  bool identities; /* each peer an Ed25519 identity: its peer id the key's, a signer
                      (bb_identity_sign); what FedAvg's secure=1 needs. Otherwise test ids. */
} bb_fed_setup;

/* Most clients waiting for an answer at once (the examples run at most 64; the benches
 * answer their own). */
#define BB_FED_READY_MAX 1024

/* What the server (peer 1) reported last, kept by bb_fed_observe (a bb_sim observer whose
 * user pointer is the progress); failed steps of any peer are counted and, unless quiet,
 * the first five printed. */
typedef struct bb_fed_progress {
  bool quiet;
  int round;
  float accuracy;
  bb_tensor *global;
  bb_val *onnx;
  uint64_t failures;
  int printed; /* 1 + the round whose accuracy was printed last (0: none): each round's once */
  /* asynchronous rounds: the clients the server said are "ready" (their update arrived)
     and not answered yet, each once */
  bb_peer_id ready[BB_FED_READY_MAX];
  size_t n_ready;
  const bb_peer_id *server; /* the server's id when it is not the test id 1 (NULL: 1) */
} bb_fed_progress;

void bb_fed_observe(void *progress, const bb_peer_id *peer, const bb_step *s);
void bb_fed_progress_free(bb_fed_progress *p);

/* A simulator with the examples' network: 5 ms latency, 2 ms jitter, each message lost
 * with probability loss; or, with a scenario, the scenario's network. */
int bb_fed_sim_new(uint64_t seed, double loss, bb_sim **out, bb_error *err);
int bb_fed_sim_for(const bb_sim_scenario *scenario, uint64_t seed, double loss, bb_sim **out, bb_error *err);

/* Reads and parses a scenario file (docs/SIMULATOR.md, "Scenario files"); the error names
 * the file. */
int bb_fed_scenario_load(const char *path, bb_sim_scenario *out, bb_error *err);

/* How long (simulated) a run of `rounds` rounds may take before the example gives up: 4 s a
 * round on the examples' network, a minute a round with a population of devices. */
uint64_t bb_fed_time_limit(const bb_sim_scenario *scenario, int rounds);

/* The peers of one simulated federation, all installed from one artifact. */
typedef struct bb_fed_peers {
  const uint8_t *artifact;
  size_t artifact_len;
  const bb_peer_id *peers;
  size_t n_peers;
  uint64_t seed; /* peer i's node seed is seed * 1000 + i */
  uint8_t (*secret_keys)[64]; /* peer i signs with secret_keys[i] (NULL: no signers) */
} bb_fed_peers;

/* Peer i installed with reg, running `targets`, with these slot configs, and knowing every
 * other peer's address. */
int bb_fed_install_peer(const bb_fed_peers *net, size_t i, const bb_registry *reg, const char *const *targets,
                        size_t n_targets, const bb_slot_config *slots, size_t n_slots, bb_node **out, bb_error *err);

/* Binds the peer-set input `input` of partition `target` of node to these peers. */
int bb_fed_bind_peers(bb_node *node, const char *target, const char *input, const bb_peer_id *peers, size_t n,
                      bb_error *err);

/* A float tensor value holding a copy of data in the shape dims, or NULL when out of memory. */
bb_val *bb_fed_tensor(const float *data, int rank, const int64_t *dims);

/* Starts the server's rounds: invokes `module` on node with the peer set `peers_input`
 * (the peers it sends the global model to) and the held-out set as "test_x" and "test_y". */
int bb_fed_start_rounds(bb_node *node, const char *module, const char *peers_input, const bb_peer_id *peers,
                        size_t n, const bb_dataset *test, bb_error *err);

typedef struct bb_federation {
  bb_fed_setup setup;
  bb_registry *registry;
  bb_sim *sim;
  int n_peers; /* the server is peer 0 */
  bb_node **nodes;
  bb_peer_id *peers;
  bb_fed_progress progress; /* what the server reported last */
  uint64_t *served_at;      /* asynchronous rounds: when each peer was last sent the model */
  uint8_t (*secret_keys)[64]; /* setup.identities: each peer's Ed25519 secret key */
} bb_federation;
/* Installs every peer in a new simulator and starts the server's rounds; the caller then
 * steps f->sim (bb_sim_step) while f->round grows. */
int bb_federation_start(bb_federation *f, const bb_fed_setup *setup, bb_error *err);

/* Peer i installed afresh (for a restore from a snapshot), knowing everybody's address. */
int bb_federation_install(const bb_federation *f, int i, bb_node **out, bb_error *err);

/* Asynchronous rounds (a module recorded by bbi_fedbuff_record): invokes the server's
 * module again with the clients that are ready, so each gets the current model, and with
 * those it served more than patience_ns ago and has heard nothing from since (a phone
 * that dropped out or was away when its model came); nothing when there are none. Call
 * it after every bb_sim_step. */
int bb_federation_answer_ready(bb_federation *f, uint64_t patience_ns, bb_error *err);

/* bb_sim_step for asynchronous rounds: when nothing is left to happen (every client
 * silent), the clock moves on by patience_ns instead, so the silent ones are served
 * again. */
int bb_federation_step_async(bb_federation *f, uint64_t patience_ns, bb_error *err);

void bb_federation_free(bb_federation *f);

#endif
