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
  double loss;               /* probability in [0, 1] a message is lost */
  double duplicate;          /* probability in [0, 1] a message arrives twice */
  double reorder;            /* probability in [0, 1] a message is held back by an extra
                                delay, so later messages on its link overtake it */
  uint64_t reorder_delay_ns; /* that extra delay, uniform in [0, this]
                                ([0]: 10 × latency, or 10 ms without latency) */
  uint64_t bandwidth_bytes_per_s; /* per sender: a message occupies the sender's link for
                                     len / bandwidth seconds, one after the other
                                     (0: unlimited, no serialisation delay) */
  size_t max_in_flight;      /* messages in the network at once; more are dropped and
                                counted as overflow ([0]: 1,000,000) */
} bb_sim_config;

typedef struct bb_sim_stats {
  uint64_t sent;            /* SEND steps taken into the network */
  uint64_t delivered;       /* handed to bb_node_deliver and accepted */
  uint64_t refused;         /* handed over and refused by the node */
  uint64_t lost;            /* lost by the loss probability */
  uint64_t duplicated;      /* extra copies made */
  uint64_t partitioned;     /* dropped by a partition (when sent or when due) */
  uint64_t crashed;         /* dropped because an end crashed or was detached */
  uint64_t unknown;         /* addressed to a peer that is not (or no longer) attached */
  uint64_t overflow;        /* dropped by max_in_flight */
  uint64_t bytes;           /* bytes of the messages sent */
  uint64_t bytes_delivered; /* bytes of the messages delivered and accepted */
  uint64_t polls;           /* bb_node_poll calls */
} bb_sim_stats;

/* A device: a peer as a phone is one — slow or fast, on an uplink of its own, there for
 * sessions that start and end (fewer at night), and apt to drop out mid-round. Every draw
 * a device makes comes from its own generator (seeded by `seed`), so the network's draws,
 * and the course of a run without devices, are unchanged. */
typedef struct bb_sim_device {
  size_t struct_size;            /* sizeof(bb_sim_device) */
  uint64_t step_ns;              /* compute: a poll that ran s training steps (the node's
                                    train.steps counter) keeps the device busy s × step_ns;
                                    what the poll sent leaves then, and the device is not
                                    polled before (0: computing takes no time) */
  uint64_t upload_bytes_per_s;   /* its uplink (0: the config's bandwidth) */
  double dropout;                /* probability in [0, 1] that a poll that trained ends in a
                                    drop-out: what it computed never leaves, and the device
                                    is away for a gap */
  uint64_t session_mean_ns;      /* online sessions last Exp(this) (0: always online) */
  uint64_t gap_mean_ns;          /* offline gaps last Exp(this / d(t)), d the diurnal factor
                                    (needed with sessions or drop-outs) */
  double diurnal;                /* a in [0, 1): d(t) = 1 + a·cos(2π (t − peak) / day), so gaps
                                    are shorter (more devices online) around the peak */
  uint64_t diurnal_peak_ns;      /* the time of day (t mod day) of the peak */
  uint64_t day_ns;               /* the length of a day (0: 24 h; shorter to fit a day in a run) */
  uint64_t seed;                 /* the device's own draws */
} bb_sim_device;

/* What a device did so far. */
typedef struct bb_sim_device_stats {
  uint64_t sessions;      /* times it came online (the first session counts when it starts online) */
  uint64_t dropouts;      /* trained polls that ended in a drop-out */
  uint64_t trained_polls; /* polls that ran training steps */
  uint64_t steps;         /* training steps its polls ran */
  uint64_t busy_ns;       /* compute time */
  uint64_t online_ns;     /* time online so far */
  uint64_t sends_lost;    /* sends of polls that ended in a drop-out */
} bb_sim_device_stats;

/* What the observer sees: every step of every node, with the node's peer id (the step's
 * pointers are valid only during the call). */
typedef void (*bb_sim_observer)(void *user, const bb_peer_id *peer, const bb_step *step);

/* One message handed to a node: who sent it when, and when it arrived. */
typedef struct bb_sim_delivery {
  const bb_peer_id *from, *to;
  uint64_t sent_ns, arrived_ns;
  const uint8_t *bytes; /* valid only during the call */
  size_t len;
  bool accepted;        /* bb_node_deliver returned 0 */
} bb_sim_delivery;
typedef void (*bb_sim_tracer)(void *user, const bb_sim_delivery *delivery);

/* A simulator at time 0 with no peers. BB_ERR_INVALID_ARGUMENT for a missing config, a
 * struct_size larger than this library knows, or a probability outside [0, 1]. A smaller
 * struct_size (an older caller) leaves the fields it does not cover at their defaults. */
BB_API int bb_sim_new(const bb_sim_config *config, bb_sim **out, bb_error *err);
/* Frees the simulator and the messages in flight; the nodes stay the caller's. */
BB_API void bb_sim_free(bb_sim *sim);
/* Sees every step of every node (NULL: none). */
BB_API void bb_sim_set_observer(bb_sim *sim, bb_sim_observer fn, void *user);
/* Sees every message handed to a node (NULL: none). */
BB_API void bb_sim_set_tracer(bb_sim *sim, bb_sim_tracer fn, void *user);

/* Connects a node under its peer id (a detached id may be attached again).
 * BB_ERR_EXISTS if the id is attached already. */
BB_API int bb_sim_attach(bb_sim *sim, bb_node *node, const bb_peer_id *peer, bb_error *err);
/* Disconnects a peer (its messages in flight are dropped, later ones to it count as
 * unknown); returns its node, NULL if the peer was not attached. */
BB_API bb_node *bb_sim_detach(bb_sim *sim, const bb_peer_id *peer);
/* The peer stops: it is not polled, and messages to or from it are dropped, in flight or
 * later. Its node stays attached (and the caller's) until a restart. Returns 0, or
 * BB_ERR_NOT_FOUND if the peer is not attached. */
BB_API int bb_sim_crash(bb_sim *sim, const bb_peer_id *peer);
/* A crashed peer comes back with a node (a fresh one, or a restored snapshot) and is
 * polled again; returns the node it had before (NULL if it had none: a peer never
 * attached stays unknown, a detached one is attached again). On a peer that is alive it
 * swaps the node in place, messages in flight to the peer arriving at the new one: an
 * upgrade (see bb_node_take_over). */
BB_API bb_node *bb_sim_restart(bb_sim *sim, const bb_peer_id *peer, bb_node *node);
/* Whether the peer takes part now: attached, not crashed, and (a device) not away. */
BB_API bool bb_sim_alive(const bb_sim *sim, const bb_peer_id *peer);

/* Makes an attached peer a device (again: its settings are replaced and its draws start
 * over from device->seed). It starts online with probability session / (session + gap),
 * for a time drawn as the rest of a session (or away for the rest of a gap).
 * BB_ERR_NOT_FOUND for a peer not attached; BB_ERR_INVALID_ARGUMENT for a struct_size this
 * library does not know, a probability outside [0, 1], a diurnal amplitude outside
 * [0, 1), or sessions or drop-outs without a gap. */
BB_API int bb_sim_set_device(bb_sim *sim, const bb_peer_id *peer, const bb_sim_device *device, bb_error *err);
/* What a device did so far; BB_ERR_NOT_FOUND when the peer is not a device. */
BB_API int bb_sim_get_device_stats(const bb_sim *sim, const bb_peer_id *peer, bb_sim_device_stats *out);

/* Messages between a peer of `a` and a peer of `b` are dropped (when sent, and when due
 * for those already in flight) until bb_sim_heal. Peers in neither set reach both. A peer
 * named again moves to the side named last. BB_ERR_NOT_FOUND for a peer not attached. */
BB_API int bb_sim_partition(bb_sim *sim, const bb_peer_id *a, size_t n_a, const bb_peer_id *b, size_t n_b,
                            bb_error *err);
BB_API void bb_sim_heal(bb_sim *sim);

BB_API uint64_t bb_sim_now(const bb_sim *sim);
/* The time of the next event (a message arrival or a node's expiry); UINT64_MAX if none. */
BB_API uint64_t bb_sim_next_event(const bb_sim *sim);

/* Advances the clock to the next event, delivers what is due and polls the nodes with
 * work. Returns 0, or 1 when nothing will ever happen again (no message in flight, no
 * timer), or a negative error (a node's poll failed). */
BB_API int bb_sim_step(bb_sim *sim, bb_error *err);
/* Steps until the clock would pass `until` (it ends at `until`) or nothing is left. */
BB_API int bb_sim_run_until(bb_sim *sim, uint64_t until, bb_error *err);
/* Steps until nothing will ever happen again (returns 0) or the next event lies after
 * `max_time` (returns BB_ERR_LIMIT; the clock stays at the last event). */
BB_API int bb_sim_run_until_idle(bb_sim *sim, uint64_t max_time, bb_error *err);

/* ---- scenarios: a population of devices from a file -------------------------------------
 * A scenario says how the network behaves and how the devices on it are spread; each
 * device draws its own settings from it, deterministically from the scenario's seed and
 * the device's index (docs/SIMULATOR.md, "Scenario files"):
 *
 *   bb_sim_scenario sc;
 *   bb_sim_scenario_parse(text, len, &sc, &err);      (err names the line at fault)
 *   bb_sim_scenario_network(&sc, &cfg);               (seed, latency, jitter, loss, bandwidth)
 *   bb_sim_new(&cfg, &sim, &err); ... attach the peers ...
 *   bb_sim_scenario_apply(sim, &sc, clients, n, &err); (client i becomes device i) */
typedef struct bb_sim_scenario {
  size_t struct_size;          /* sizeof(bb_sim_scenario) */
  uint64_t seed;
  uint64_t latency_ns, jitter_ns;
  double loss;
  uint64_t bandwidth_bytes_per_s; /* every peer's link unless a device has its own */
  uint64_t step_ns;            /* the median device's compute time per training step (0: none) */
  double step_sigma;           /* ln of the step time is normal with this σ around ln(step_ns) */
  uint64_t upload_bytes_per_s; /* the median device's uplink (0: the network's) */
  double upload_sigma;         /* likewise for ln of the uplink */
  double dropout;
  uint64_t session_mean_ns, gap_mean_ns;
  double diurnal;
  uint64_t diurnal_peak_ns;
  uint64_t day_ns;             /* 0: 24 h */
} bb_sim_scenario;

/* Reads a scenario file (text[0..len), `key = value` lines, # comments): the keys and units
 * are in docs/SIMULATOR.md. An unknown or repeated key, a value that does not parse or is
 * out of range gives BB_ERR_INVALID_ARGUMENT naming the line and the key. */
BB_API int bb_sim_scenario_parse(const char *text, size_t len, bb_sim_scenario *out, bb_error *err);
/* The scenario's network into a simulator config (its other fields are left as they are). */
BB_API void bb_sim_scenario_network(const bb_sim_scenario *sc, bb_sim_config *cfg);
/* Device `index`'s draw: log-normal step time and uplink, the shared drop-out and sessions,
 * and a seed of its own; the same scenario and index give the same device. */
BB_API void bb_sim_scenario_device(const bb_sim_scenario *sc, uint64_t index, bb_sim_device *out);
/* Makes peers[i] device i of the scenario, for each of the n attached peers. */
BB_API int bb_sim_scenario_apply(bb_sim *sim, const bb_sim_scenario *sc, const bb_peer_id *peers, size_t n,
                                 bb_error *err);

BB_API void bb_sim_get_stats(const bb_sim *sim, bb_sim_stats *out);
/* FNV-1a-64 over every delivery so far (time, sender, receiver, bytes): two runs took the
 * same course exactly when their digests agree. */
BB_API uint64_t bb_sim_digest(const bb_sim *sim);

#ifdef __cplusplus
}
#endif
#endif /* BB_SIM_H */
