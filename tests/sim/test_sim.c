/* The network simulator (bb/sim.h) driving real nodes: one sender of the multi_target_network
 * example's FedNetwork and four sinks (stub components), through loss, duplication,
 * partitions, crashes, latency, bandwidth and reordering; same seed, same course. */
#include <math.h>

#include "../runtime/rttest.h"
#include "bb/sim.h"
#include "programs/examples.h"
#include "util/hash.h"

static uint8_t *artifact;
static size_t artifact_len;

static const char *const SENDER[] = {"FedNetwork"};
static const char *const SINK[] = {"FedNetwork_sink_peers"};

#define N_SINKS 4
#define MAX_TRACE 4096
#define MS 1000000ull

typedef struct trace_entry {
  uint64_t from, to, sent, arrived, len;
} trace_entry;

/* 1 sender (peer 1) and N_SINKS sinks (peers 2..), what the observer and tracer saw. */
typedef struct net {
  bb_registry *reg;
  bb_sim *sim;
  bb_node *node[1 + N_SINKS];
  bb_peer_id peer[1 + N_SINKS];
  size_t duplicates_reported; /* OP_FAILED "duplicate" on any sink */
  size_t other_failures;      /* any other failure step */
  size_t sends_seen;
  uint64_t hash;              /* FNV-1a over every delivery, as the tracer saw it */
  trace_entry trace[MAX_TRACE];
  size_t n_trace;
} net;

static uint64_t as_u64(const bb_peer_id *p) {
  uint64_t v = 0;
  CHECK(bb_peer_id_as_u64(p, &v));
  return v;
}

static void observe(void *user, const bb_peer_id *peer, const bb_step *step) {
  net *t = user;
  (void)peer;
  if (step->kind == BB_STEP_SEND) t->sends_seen++;
  else if (step->kind == BB_STEP_OP_FAILED && step->reason && strcmp(step->reason, "duplicate") == 0)
    t->duplicates_reported++;
  else if (step->kind != BB_STEP_APP_EVENT && step->kind != BB_STEP_BOOTSTRAP_COMPLETE) {
    t->other_failures++;
    print_steps("observer", step, 1);
  }
}

static void hash_bytes(uint64_t *h, const void *data, size_t len) { *h = bbi_fnv1a64_update(*h, data, len); }

static void trace(void *user, const bb_sim_delivery *d) {
  net *t = user;
  trace_entry e = {as_u64(d->from), as_u64(d->to), d->sent_ns, d->arrived_ns, d->len};
  hash_bytes(&t->hash, &e, sizeof e);
  hash_bytes(&t->hash, d->bytes, d->len);
  if (t->n_trace < MAX_TRACE) t->trace[t->n_trace++] = e;
}

static bb_node *install_sink(net *t, size_t i) {
  return install_peer(artifact, artifact_len, i + 1, SINK, 1, t->reg, NULL);
}

/* Opens the network; false (with the reason printed) if anything failed. */
static bool net_open(net *t, const bb_sim_config *cfg) {
  memset(t, 0, sizeof *t);
  t->hash = BBI_FNV1A64_INIT;
  t->reg = stub_registry();
  bb_error err;
  CHECK_MSG(bb_sim_new(cfg, &t->sim, &err) == 0, "%s", err.message);
  if (!t->sim) return false;
  bb_sim_set_observer(t->sim, observe, t);
  bb_sim_set_tracer(t->sim, trace, t);
  for (size_t i = 0; i <= N_SINKS; i++) {
    t->peer[i] = bb_peer_id_from_u64(i + 1);
    t->node[i] = i ? install_sink(t, i) : install_peer(artifact, artifact_len, 1, SENDER, 1, t->reg, NULL);
    if (!t->node[i]) return false;
    CHECK_MSG(bb_sim_attach(t->sim, t->node[i], &t->peer[i], &err) == 0, "%s", err.message);
    if (i) {
      bb_address a = p2p_address(&t->peer[i]);
      CHECK(bb_node_add_peer(t->node[0], &t->peer[i], &a, NULL) == 0);
    }
  }
  return true;
}

static void net_close(net *t) {
  bb_sim_free(t->sim);
  for (size_t i = 0; i <= N_SINKS; i++) bb_node_free(t->node[i]);
  bb_registry_free(t->reg);
}

/* The sender runs once at the simulator's current time, addressed to these peers. */
static void fire_at(net *t, const bb_peer_id *to, size_t n) {
  bb_val *v = bb_val_peers(NULL, to, n);
  bb_named_value in = {"sink_peers", v};
  bb_error err;
  CHECK_MSG(bb_node_invoke(t->node[0], "FedNetwork", &in, 1, bb_sim_now(t->sim), &err) == 0, "%s", err.message);
  bb_val_release(v);
}

static void fire(net *t) { fire_at(t, &t->peer[1], N_SINKS); }

static void settle(net *t) {
  bb_error err;
  CHECK_MSG(bb_sim_run_until_idle(t->sim, bb_sim_now(t->sim) + 60000 * MS, &err) == 0, "%s", err.message);
}

static int contributions(const net *t, size_t i) {
  stub_state *agg = bb_node_component(t->node[i], "aggregator", NULL);
  CHECK(agg != NULL);
  return agg ? agg->contributions : -1;
}

static int total_contributions(const net *t) {
  int sum = 0;
  for (size_t i = 1; i <= N_SINKS; i++) sum += contributions(t, i);
  return sum;
}

static bb_sim_stats stats_of(const net *t) {
  bb_sim_stats st;
  bb_sim_get_stats(t->sim, &st);
  return st;
}

static bb_sim_config config(uint64_t seed) {
  bb_sim_config c = {0};
  c.struct_size = sizeof c;
  c.seed = seed;
  c.latency_ns = 5 * MS;
  return c;
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_all_receive(void) {
  bb_sim_config c = config(1);
  net t;
  if (net_open(&t, &c)) {
    fire(&t);
    settle(&t);
    for (size_t i = 1; i <= N_SINKS; i++) CHECK_EQ_INT(contributions(&t, i), 1);
    bb_sim_stats st = stats_of(&t);
    CHECK_EQ_INT(st.sent, N_SINKS);
    CHECK_EQ_INT(st.delivered, N_SINKS);
    CHECK_EQ_INT(st.lost + st.duplicated + st.partitioned + st.crashed + st.unknown + st.overflow + st.refused, 0);
    CHECK(st.bytes > 0 && st.bytes == st.bytes_delivered);
    CHECK_EQ_INT(t.sends_seen, N_SINKS);
    CHECK_EQ_INT(t.other_failures, 0);
    CHECK(bb_sim_now(t.sim) == 5 * MS); /* the one event after the send: its arrival */
    CHECK(bb_sim_next_event(t.sim) == UINT64_MAX);
    CHECK(bb_sim_step(t.sim, NULL) == 1);
  }
  net_close(&t);
}

static void test_loss_fraction(void) {
  enum { ROUNDS = 250 };
  const double p = 0.3, n = ROUNDS * N_SINKS;
  bb_sim_config c = config(7);
  c.loss = p;
  net t;
  if (net_open(&t, &c)) {
    for (int r = 0; r < ROUNDS; r++) {
      fire(&t);
      settle(&t);
    }
    bb_sim_stats st = stats_of(&t);
    double expected = n * (1 - p), sigma = sqrt(n * p * (1 - p));
    int got = total_contributions(&t);
    CHECK_MSG(fabs(got - expected) <= 4 * sigma, "%d arrived, expected %.0f ± %.0f", got, expected, 4 * sigma);
    CHECK_EQ_INT(st.sent, (uint64_t)n);
    CHECK_EQ_INT(st.delivered + st.lost, st.sent);
    CHECK_EQ_INT(st.delivered, (uint64_t)got);
    CHECK_EQ_INT(t.other_failures, 0);
  }
  net_close(&t);

  /* total loss: nothing arrives */
  c.loss = 1;
  if (net_open(&t, &c)) {
    fire(&t);
    settle(&t);
    CHECK_EQ_INT(total_contributions(&t), 0);
    CHECK_EQ_INT(stats_of(&t).lost, N_SINKS);
  }
  net_close(&t);
}

static void test_duplication_is_deduplicated(void) {
  enum { ROUNDS = 50 };
  bb_sim_config c = config(3);
  c.duplicate = 0.5;
  c.jitter_ns = 2 * MS;
  net t;
  if (net_open(&t, &c)) {
    for (int r = 0; r < ROUNDS; r++) {
      fire(&t);
      settle(&t);
    }
    bb_sim_stats st = stats_of(&t);
    CHECK(st.duplicated > 0);
    CHECK_EQ_INT(st.delivered, st.sent + st.duplicated);
    /* every copy is stopped by the dedup gate, and said so; one contribution per envelope */
    CHECK_EQ_INT(t.duplicates_reported, st.duplicated);
    for (size_t i = 1; i <= N_SINKS; i++) CHECK_EQ_INT(contributions(&t, i), ROUNDS);
    uint64_t counted = 0;
    for (size_t i = 1; i <= N_SINKS; i++) counted += bb_node_counter(t.node[i], "wire.duplicates");
    CHECK_EQ_INT(counted, st.duplicated);
    CHECK_EQ_INT(t.other_failures, 0);
  }
  net_close(&t);
}

static void test_partition_and_heal(void) {
  bb_sim_config c = config(4);
  net t;
  if (net_open(&t, &c)) {
    bb_error err;
    CHECK(bb_sim_partition(t.sim, &t.peer[0], 1, &t.peer[1], 2, &err) == 0);
    fire(&t);
    settle(&t);
    CHECK(contributions(&t, 1) == 0 && contributions(&t, 2) == 0);
    CHECK(contributions(&t, 3) == 1 && contributions(&t, 4) == 1);
    CHECK_EQ_INT(stats_of(&t).partitioned, 2);

    bb_sim_heal(t.sim);
    fire(&t);
    settle(&t);
    CHECK(contributions(&t, 1) == 1 && contributions(&t, 2) == 1);
    CHECK(contributions(&t, 3) == 2 && contributions(&t, 4) == 2);

    /* a partition also stops what is already in flight */
    fire(&t);
    CHECK(bb_sim_step(t.sim, &err) == 0); /* the sender ran: 4 messages on the way */
    CHECK(bb_sim_now(t.sim) < bb_sim_next_event(t.sim));
    CHECK(bb_sim_partition(t.sim, &t.peer[3], 1, &t.peer[0], 1, &err) == 0);
    settle(&t);
    CHECK_EQ_INT(contributions(&t, 3), 2);
    CHECK_EQ_INT(contributions(&t, 1), 2);
    CHECK_EQ_INT(stats_of(&t).partitioned, 3);

    bb_peer_id stranger = bb_peer_id_from_u64(99);
    CHECK(bb_sim_partition(t.sim, &stranger, 1, &t.peer[0], 1, &err) == BB_ERR_NOT_FOUND);
    CHECK(t.other_failures == 0);
  }
  net_close(&t);
}

static void test_crash_and_restart(void) {
  bb_sim_config c = config(5);
  net t;
  if (net_open(&t, &c)) {
    bb_error err;
    fire(&t);
    CHECK(bb_sim_step(t.sim, &err) == 0); /* in flight */
    CHECK(bb_sim_crash(t.sim, &t.peer[1]) == 0);
    CHECK(!bb_sim_alive(t.sim, &t.peer[1]) && bb_sim_alive(t.sim, &t.peer[2]));
    settle(&t);
    CHECK_EQ_INT(contributions(&t, 1), 0);
    for (size_t i = 2; i <= N_SINKS; i++) CHECK_EQ_INT(contributions(&t, i), 1);
    CHECK_EQ_INT(stats_of(&t).crashed, 1);

    /* while down, what is sent to it is dropped too */
    fire(&t);
    settle(&t);
    CHECK_EQ_INT(contributions(&t, 1), 0);
    CHECK_EQ_INT(stats_of(&t).crashed, 2);

    /* back with a fresh node: it receives again */
    bb_node *fresh = install_sink(&t, 1);
    if (fresh) {
      bb_node *old = bb_sim_restart(t.sim, &t.peer[1], fresh);
      CHECK(old == t.node[1]);
      bb_node_free(old);
      t.node[1] = fresh;
      CHECK(bb_sim_alive(t.sim, &t.peer[1]));
      fire(&t);
      settle(&t);
      CHECK_EQ_INT(contributions(&t, 1), 1);
      CHECK_EQ_INT(contributions(&t, 2), 3);
    }
    /* a crashed sender's messages in flight are dropped as well */
    fire(&t);
    CHECK(bb_sim_step(t.sim, &err) == 0);
    CHECK(bb_sim_crash(t.sim, &t.peer[0]) == 0);
    settle(&t);
    CHECK_EQ_INT(contributions(&t, 2), 3);
    CHECK_EQ_INT(stats_of(&t).crashed, 2 + N_SINKS);

    bb_peer_id stranger = bb_peer_id_from_u64(99);
    CHECK(bb_sim_crash(t.sim, &stranger) == BB_ERR_NOT_FOUND);
    CHECK(bb_sim_restart(t.sim, &stranger, NULL) == NULL);
    CHECK_EQ_INT(t.other_failures, 0);
  }
  net_close(&t);
}

/* A restart without a crash keeps what is in flight to the peer, and a fresh node has no
 * memory: the copy of an envelope the old node took is new to it. */
static void test_restart_keeps_in_flight(void) {
  bb_sim_config c = config(14);
  c.duplicate = 1;
  c.reorder = 1; /* the copy arrives at an independent time */
  c.reorder_delay_ns = 50 * MS;
  net t;
  if (net_open(&t, &c)) {
    bb_error err;
    fire_at(&t, &t.peer[1], 1);
    while (contributions(&t, 1) == 0) CHECK(bb_sim_step(t.sim, &err) == 0);
    CHECK_EQ_INT(stats_of(&t).delivered, 1); /* the copy is still in flight */
    bb_node *fresh = install_sink(&t, 1);
    if (fresh) {
      bb_node_free(bb_sim_restart(t.sim, &t.peer[1], fresh));
      t.node[1] = fresh;
      settle(&t);
      CHECK_EQ_INT(stats_of(&t).delivered, 2);
      CHECK_EQ_INT(contributions(&t, 1), 1);
      CHECK_EQ_INT(t.duplicates_reported, 0);
    }
    CHECK_EQ_INT(t.other_failures, 0);
  }
  net_close(&t);
}

static void test_unknown_and_detached(void) {
  bb_sim_config c = config(6);
  net t;
  if (net_open(&t, &c)) {
    bb_error err;
    bb_peer_id stranger = bb_peer_id_from_u64(99);
    bb_address a = p2p_address(&stranger);
    CHECK(bb_node_add_peer(t.node[0], &stranger, &a, NULL) == 0);
    fire_at(&t, &stranger, 1);
    settle(&t);
    CHECK_EQ_INT(stats_of(&t).unknown, 1);

    bb_node *gone = bb_sim_detach(t.sim, &t.peer[4]);
    CHECK(gone == t.node[4]);
    CHECK(bb_sim_detach(t.sim, &t.peer[4]) == NULL);
    fire(&t);
    settle(&t);
    CHECK_EQ_INT(stats_of(&t).unknown, 2);
    CHECK_EQ_INT(contributions(&t, 4), 0);
    CHECK_EQ_INT(contributions(&t, 3), 1);

    CHECK(bb_sim_attach(t.sim, gone, &t.peer[4], &err) == 0);
    CHECK(bb_sim_attach(t.sim, gone, &t.peer[4], &err) == BB_ERR_EXISTS);
    fire(&t);
    settle(&t);
    CHECK_EQ_INT(contributions(&t, 4), 1);
    CHECK_EQ_INT(t.other_failures, 0);
  }
  net_close(&t);
}

/* Everything random at once, for the determinism test. */
static uint64_t chaotic_run(uint64_t seed, uint64_t *digest, bb_sim_stats *st) {
  bb_sim_config c = config(seed);
  c.jitter_ns = 3 * MS;
  c.loss = 0.2;
  c.duplicate = 0.2;
  c.reorder = 0.3;
  net t;
  uint64_t hash = 0;
  if (net_open(&t, &c)) {
    for (int r = 0; r < 40; r++) {
      fire(&t);
      CHECK(bb_sim_run_until(t.sim, bb_sim_now(t.sim) + 2 * MS, NULL) == 0); /* rounds overlap */
    }
    settle(&t);
    hash = t.hash;
    *digest = bb_sim_digest(t.sim);
    *st = stats_of(&t);
    CHECK(t.n_trace > 50);
  }
  net_close(&t);
  return hash;
}

static void test_determinism(void) {
  uint64_t d1 = 0, d2 = 0, d3 = 0;
  bb_sim_stats s1, s2, s3;
  uint64_t h1 = chaotic_run(11, &d1, &s1), h2 = chaotic_run(11, &d2, &s2), h3 = chaotic_run(12, &d3, &s3);
  CHECK(h1 == h2);
  CHECK(d1 == d2);
  CHECK(memcmp(&s1, &s2, sizeof s1) == 0);
  CHECK(h1 != h3);
  CHECK(d1 != d3);
  /* pinned: the digest folds in every delivered envelope, so the envelope bytes, the
   * generator's decisions and the order of deliveries all stay as they were */
  CHECK_MSG(d1 == 0xb2d16a90d80ea40cull, "digest 0x%016" PRIx64, d1);
  CHECK_MSG(h1 == 0xf181fb330c2ba545ull, "tracer hash 0x%016" PRIx64, h1);
}

static void test_latency_and_jitter(void) {
  bb_sim_config c = config(8);
  net t;
  if (net_open(&t, &c)) {
    for (int r = 0; r < 5; r++) {
      fire(&t);
      settle(&t);
    }
    CHECK_EQ_INT(t.n_trace, 5 * N_SINKS);
    for (size_t i = 0; i < t.n_trace; i++) CHECK(t.trace[i].arrived - t.trace[i].sent == 5 * MS);
  }
  net_close(&t);

  c.jitter_ns = 2 * MS;
  if (net_open(&t, &c)) {
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int r = 0; r < 50; r++) {
      fire(&t);
      CHECK(bb_sim_run_until(t.sim, bb_sim_now(t.sim) + MS / 2, NULL) == 0);
    }
    settle(&t);
    CHECK_EQ_INT(t.n_trace, 50 * N_SINKS);
    for (size_t i = 0; i < t.n_trace; i++) {
      uint64_t d = t.trace[i].arrived - t.trace[i].sent;
      lo = d < lo ? d : lo;
      hi = d > hi ? d : hi;
      /* per-link FIFO: a later message waits for an earlier one's jitter, never passes it */
      for (size_t k = 0; k < i; k++)
        if (t.trace[k].to == t.trace[i].to) CHECK(t.trace[k].sent <= t.trace[i].sent);
    }
    CHECK_MSG(lo >= 5 * MS && lo < 6 * MS, "shortest delay %llu ns", (unsigned long long)lo);
    CHECK_MSG(hi > 6 * MS, "longest delay %llu ns", (unsigned long long)hi);
    /* a message can only be later than latency + jitter when it queued behind another */
    for (size_t i = 0; i < t.n_trace; i++)
      if (t.trace[i].arrived - t.trace[i].sent > 7 * MS) {
        bool queued = false;
        for (size_t k = 0; k < i; k++) queued |= t.trace[k].to == t.trace[i].to && t.trace[k].arrived == t.trace[i].arrived;
        CHECK(queued);
      }
  }
  net_close(&t);
}

static void test_reordering(void) {
  bb_sim_config c = config(9);
  c.reorder = 0.3;
  c.reorder_delay_ns = 20 * MS;
  net t;
  if (net_open(&t, &c)) {
    for (int r = 0; r < 30; r++) {
      fire(&t);
      CHECK(bb_sim_run_until(t.sim, bb_sim_now(t.sim) + MS, NULL) == 0);
    }
    settle(&t);
    /* messages that were not held back (they took the latency exactly) pass held-back ones */
    size_t overtaken = 0;
    for (size_t i = 0; i < t.n_trace; i++) {
      bool passed = false;
      for (size_t k = i + 1; k < t.n_trace; k++)
        passed |= t.trace[k].to == t.trace[i].to && t.trace[k].sent < t.trace[i].sent;
      overtaken += passed && t.trace[i].arrived - t.trace[i].sent == 5 * MS;
    }
    CHECK(overtaken > 0);
    for (size_t i = 1; i <= N_SINKS; i++) CHECK_EQ_INT(contributions(&t, i), 30);
  }
  net_close(&t);
}

static void test_bandwidth(void) {
  bb_sim_config c = config(10);
  c.bandwidth_bytes_per_s = 1000; /* 1 ms per byte */
  net t;
  if (net_open(&t, &c)) {
    fire(&t);
    settle(&t);
    CHECK_EQ_INT(t.n_trace, N_SINKS);
    uint64_t busy = 0;
    /* the sender's link sends the four one after the other */
    for (size_t i = 0; i < t.n_trace; i++) {
      busy += t.trace[i].len * MS;
      CHECK(t.trace[i].arrived - t.trace[i].sent == 5 * MS + busy);
    }
  }
  net_close(&t);
}

static void test_in_flight_cap(void) {
  bb_sim_config c = config(12);
  c.max_in_flight = 2;
  net t;
  if (net_open(&t, &c)) {
    fire(&t);
    settle(&t);
    bb_sim_stats st = stats_of(&t);
    CHECK_EQ_INT(st.overflow, N_SINKS - 2);
    CHECK_EQ_INT(st.delivered, 2);
    CHECK_EQ_INT(total_contributions(&t), 2);
  }
  net_close(&t);
}

static void test_run_until_limits(void) {
  bb_sim_config c = config(13);
  net t;
  if (net_open(&t, &c)) {
    bb_error err;
    fire(&t);
    CHECK(bb_sim_run_until_idle(t.sim, MS, &err) == BB_ERR_LIMIT);
    CHECK(bb_sim_now(t.sim) == 0);
    CHECK(bb_sim_run_until(t.sim, 3 * MS, &err) == 0);
    CHECK(bb_sim_now(t.sim) == 3 * MS && total_contributions(&t) == 0);
    CHECK(bb_sim_run_until(t.sim, 100 * MS, &err) == 0);
    CHECK(bb_sim_now(t.sim) == 100 * MS && total_contributions(&t) == N_SINKS);
  }
  net_close(&t);
}

static void test_bad_config(void) {
  bb_sim *s = NULL;
  bb_error err;
  CHECK(bb_sim_new(NULL, &s, &err) == BB_ERR_INVALID_ARGUMENT && !s);
  bb_sim_config c = config(1);
  c.struct_size = sizeof c + 8;
  CHECK(bb_sim_new(&c, &s, &err) == BB_ERR_INVALID_ARGUMENT && !s);
  c = config(1);
  c.loss = 1.5;
  CHECK(bb_sim_new(&c, &s, &err) == BB_ERR_INVALID_ARGUMENT && !s);
  CHECK(strstr(err.message, "1.5") != NULL);
  c = config(1);
  c.duplicate = -0.1;
  CHECK(bb_sim_new(&c, &s, &err) == BB_ERR_INVALID_ARGUMENT && !s);
  /* an older, shorter config: what it leaves out takes the defaults */
  c = config(1);
  c.struct_size = offsetof(bb_sim_config, loss);
  c.loss = 0.9; /* beyond struct_size: ignored */
  CHECK(bb_sim_new(&c, &s, &err) == 0 && s);
  bb_sim_free(s);
}

int main(void) {
  bb_error err;
  CHECK_MSG(bb_example_compile(&BB_EXAMPLE_MULTI_TARGET_NETWORK, 0, &artifact, &artifact_len, &err) == 0, "%s",
            err.message);
  if (!artifact) return bb_test_finish();
  RUN(test_all_receive);
  RUN(test_loss_fraction);
  RUN(test_duplication_is_deduplicated);
  RUN(test_partition_and_heal);
  RUN(test_crash_and_restart);
  RUN(test_restart_keeps_in_flight);
  RUN(test_unknown_and_detached);
  RUN(test_determinism);
  RUN(test_latency_and_jitter);
  RUN(test_reordering);
  RUN(test_bandwidth);
  RUN(test_in_flight_cap);
  RUN(test_run_until_limits);
  RUN(test_bad_config);
  bb_buffer_free(NULL, artifact);
  return bb_test_finish();
}
