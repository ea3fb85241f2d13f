/* FedAvg under secure aggregation (secure=1): each round's updates reach the server only
 * as a SecAgg+ sum (bb/privacy.h), driven by the node's timers and control messages.
 *
 * A client's update is its step from the round's global model, weighed: the vector
 * [w × (trained − global), w], with w = 1 (weighting=uniform) or min(samples, M) / M
 * (weighting=samples with max_samples=M), so the server divides the first part of the sum
 * by its last element and adds that to the global model it gave out. With dp_clip the
 * step is clipped on the client, and with dp_noise each client adds its share of the
 * noise (bb_dp_client_privatize, distributed DP) before masking.
 *
 * Messages (bb_ctx_send_message between the aggregator slots of client and server; every
 * payload starts with the round id, u64 little-endian):
 *   SecAggJoin    client → server  round ‖ u32 vector length ‖ the client's identity: the
 *                                  Ed25519 key its peer id holds, 32 bytes (the server
 *                                  refuses any other: the setup lists peers by their ids)
 * A client signs its SecAgg+ keys with its own identity through the node's signer
 * (bb_ctx_sign; a host that signs later answers with bb_node_signed), so a neighbour
 * checks them against the key its peer id holds: a client needs a key-bound peer id and
 * a signer.
 *   SecAggServer  server → client  round ‖ a SecAgg+ server message
 *   SecAggClient  client → server  round ‖ a SecAgg+ client message
 * The server starts the SecAgg+ round with the clients that joined once `target` joined,
 * or at the round's deadline with at least max(quorum, 3); an aborted SecAgg+ round is an
 * abandoned FedAvg round (the last model is given out again, nothing is revealed). */
#ifndef BBI_AGGREGATORS_SECURE_ROUNDS_H
#define BBI_AGGREGATORS_SECURE_ROUNDS_H

#include <stdbool.h>
#include <stdint.h>

#include "bb/runtime.h"

typedef struct bbi_secure_config {
  uint32_t threshold;        /* shares that rebuild a secret [0: SecAgg+'s default] */
  uint32_t shares;           /* neighbours each client shares with (the degree) [0: default] */
  double range;              /* each element of the vector is clipped to [-range, range] [8] */
  uint64_t stage_timeout_ns; /* each SecAgg+ stage's deadline [30 s] */
  uint64_t max_samples;      /* weighting=samples: w = min(samples, M) / M; 0: uniform */
  double dp_clip, dp_noise;  /* client-side DP-FedAvg (0: off) */
  uint32_t quorum, target;   /* the FedAvg round's */
  uint64_t deadline_ns;
  bool abandon;              /* no_quorum=abandon */
  bool members_only;
} bbi_secure_config;

typedef struct bbi_secure bbi_secure;

/* The fewest clients a secure round sums: max(quorum, 3). */
uint32_t bbi_secure_min_clients(const bbi_secure_config *cfg);

int bbi_secure_new(const bb_allocator *alloc, const bbi_secure_config *cfg, bbi_secure **out, bb_error *err);
void bbi_secure_free(bbi_secure *s);

/* Server: round `round` opened at now with `global` (len floats) as its model; forgets
 * the previous round's joins and sum. */
int bbi_secure_open(bbi_secure *s, uint64_t round, const float *global, size_t len, uint64_t now_ns, bb_error *err);

/* Server: the open round's new global model once its sum is in (len floats into out):
 * 1 when there is one (then consumed), 0 otherwise. *abandoned is set when the round
 * ended without a sum (too few joined by the deadline, or the SecAgg+ round aborted). */
int bbi_secure_take(bbi_secure *s, float *out, size_t len, bool *abandoned);

/* Client: this node's update for the round its server prompted: starts the client's part
 * (the join) toward `server`. */
int bbi_secure_contribute(bbi_secure *s, bb_ctx *ctx, const bb_peer_id *server, uint64_t round, const float *trained,
                          const float *global, size_t len, uint64_t samples, bb_error *err);

/* Both: a SecAgg message (on_message); BB_ERR_UNSUPPORTED for an op that is not one. */
int bbi_secure_message(bbi_secure *s, bb_ctx *ctx, const char *op, const bb_peer_id *from, const uint8_t *payload,
                       size_t len, bb_error *err);
/* Both: a timer (on_timer). */
int bbi_secure_timer(bbi_secure *s, bb_ctx *ctx, bb_error *err);

#endif
