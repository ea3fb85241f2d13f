/* bytesandbrains — a seeded network simulator: many nodes in one process, connected by a
 * network with latency, jitter, loss, duplication, reordering, limited bandwidth,
 * partitions and crashes, on a virtual clock. Tests and examples use it to run
 * multi-peer programs deterministically: the same seed and the same calls give the same
 * deliveries in the same order, byte for byte.
 *
 *   bb_sim_new(&cfg, &sim, &err);
 *   bb_sim_attach(sim, node, &peer, &err);   (for every node; the caller installs them)
 *   while (!done) bb_sim_step(sim, &err);    (advance to the next event and handle it)
 *
 * A step delivers the messages due by then (bb_node_deliver) and polls every node that
 * has work (bb_node_poll); each SEND step a node produces goes into the network, where the
 * config decides if and when it arrives. Every step is shown to the observer. */
#ifndef BB_SIM_H
#define BB_SIM_H

#include "bb/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bb_sim bb_sim;

typedef struct bb_sim_config {
  size_t struct_size;        /* sizeof(bb_sim_config) */
  uint64_t seed;             /* every random decision comes from it */
  uint64_t latency_ns;       /* one-way delay of every message */
  uint64_t jitter_ns;        /* plus a uniform extra delay in [0, jitter_ns] */
  double loss;               /* probability a message is lost */
  double duplicate;          /* probability a message arrives twice */
  double reorder;            /* probability a message may overtake others on its link */
  uint64_t reorder_delay_ns; /* extra delay of a reordered message, uniform up to this
                                ([0]: 10 × latency) */
  uint64_t bandwidth_bps;    /* per sender, bits per second (0: unlimited) */
  size_t max_in_flight;      /* messages in the network at once ([0]: 1,000,000) */
} bb_sim_config;

typedef struct bb_sim_stats {
  uint64_t sent;         /* SEND steps taken into the network */
  uint64_t delivered;    /* handed to bb_node_deliver and accepted */
  uint64_t refused;      /* handed over and refused by the node */
  uint64_t lost;         /* lost by the loss probability */
  uint64_t duplicated;   /* extra copies made */
  uint64_t partitioned;  /* dropped by a partition */
  uint64_t crashed;      /* dropped because an end crashed */
  uint64_t unknown;      /* addressed to a peer that is not attached */
  uint64_t overflow;     /* dropped by max_in_flight */
  uint64_t bytes;        /* bytes of the messages sent */
  uint64_t polls;        /* bb_node_poll calls */
} bb_sim_stats;

/* What the observer sees: every step of every node, with the node's peer id. */
typedef void (*bb_sim_observer)(void *user, const bb_peer_id *peer, const bb_step *step);

int bb_sim_new(const bb_sim_config *config, bb_sim **out, bb_error *err);
/* Frees the simulator and the messages in flight; the nodes stay the caller's. */
void bb_sim_free(bb_sim *sim);
void bb_sim_set_observer(bb_sim *sim, bb_sim_observer fn, void *user);

/* Connects a node under its peer id. BB_ERR_EXISTS if the id is attached already. */
int bb_sim_attach(bb_sim *sim, bb_node *node, const bb_peer_id *peer, bb_error *err);
/* Disconnects a peer (its messages in flight are dropped); returns its node. */
bb_node *bb_sim_detach(bb_sim *sim, const bb_peer_id *peer);
/* The peer stops: it is not polled, and messages to or from it are dropped, in flight or
 * later. Its node stays attached (and the caller's) until a restart. */
void bb_sim_crash(bb_sim *sim, const bb_peer_id *peer);
/* A crashed peer comes back with a node (a fresh one, or a restored snapshot); returns the
 * node it had before (NULL if the peer was not attached). */
bb_node *bb_sim_restart(bb_sim *sim, const bb_peer_id *peer, bb_node *node);
bool bb_sim_alive(const bb_sim *sim, const bb_peer_id *peer);

/* Messages between a peer of `a` and a peer of `b` are dropped until bb_sim_heal. */
int bb_sim_partition(bb_sim *sim, const bb_peer_id *a, size_t n_a, const bb_peer_id *b, size_t n_b, bb_error *err);
void bb_sim_heal(bb_sim *sim);

uint64_t bb_sim_now(const bb_sim *sim);
/* The time of the next event (a message arrival or a node's expiry); UINT64_MAX if none. */
uint64_t bb_sim_next_event(const bb_sim *sim);

/* Advances the clock to the next event, delivers what is due and polls the nodes with
 * work. Returns 0, or 1 when nothing will ever happen again (no message in flight, no
 * timer), or a negative error (a node's poll failed). */
int bb_sim_step(bb_sim *sim, bb_error *err);
/* Steps until the clock would pass `until` (it ends at `until`) or nothing is left. */
int bb_sim_run_until(bb_sim *sim, uint64_t until, bb_error *err);

void bb_sim_get_stats(const bb_sim *sim, bb_sim_stats *out);
/* FNV-1a-64 over every delivery so far (time, sender, receiver, bytes): two runs took the
 * same course exactly when their digests agree. */
uint64_t bb_sim_digest(const bb_sim *sim);

#ifdef __cplusplus
}
#endif
#endif /* BB_SIM_H */
