/* Hierarchical FedAvg on the simulator: the hierarchical_digits example's Module (a root,
 * two edge aggregators, four clients behind each) trains on synthetic shards of unequal
 * sizes, and every round the root's global model is compared with flat FedAvg — one
 * rounds engine taking all eight client updates of that round directly.
 *
 * Why they agree: an edge's result is m_e = fl(Σ_{i∈e} n_i·x_i / S_e) with S_e = Σ_{i∈e} n_i
 * (sums in double, one rounding to float at the end), and the root computes
 * fl(Σ_e S_e·m_e / N) in double; flat FedAvg computes fl(Σ_i n_i·x_i / N). The exact sums
 * are equal, so the only difference is the rounding of each m_e to float (at most 2^-24
 * of |m_e|) carried through the root's weights, plus one final rounding on each side:
 *   |root − flat| ≤ 2^-24 · Σ_e (S_e/N)·|m_e| + ulp(max(|root|, |flat|)).
 * The test allows twice the first term for the double-precision sums (error ~2^-52 each).
 * It also checks the weights the edges carried: the root's round result weighs N. */
#include <math.h>

#include "../runtime/rttest.h"
#include "bb/dataset.h"
#include "bb/sim.h"
#include "components/aggregators/rounds.h"
#include "programs/examples.h"

#define EDGES 2
#define PER_EDGE 4
#define CLIENTS (EDGES * PER_EDGE)
#define N_PEERS (1 + EDGES + CLIENTS)
#define FEATURES 64
#define ROUNDS 6
#define MAX_PARAMS 4096

typedef struct client_update {
  float params[MAX_PARAMS];
  uint64_t samples;
  bool seen;
} client_update;

typedef struct observed {
  size_t param_len;
  client_update updates[ROUNDS + 2][CLIENTS]; /* [root round][client] */
  float models[ROUNDS + 2][MAX_PARAMS];       /* models[k]: the global given out with round id k */
  uint64_t round;                              /* the last round id the root gave out */
  bool have_model[ROUNDS + 2];
  bool round_pending;                          /* a round id not yet filed with its model */
  size_t failures;
} observed;

static observed obs;

static uint64_t as_u64(const bb_peer_id *p) {
  uint64_t v = 0;
  bb_peer_id_as_u64(p, &v);
  return v;
}

/* Peer ids: 1 root, 2..1+EDGES edges, then the clients. */
static void observe(void *user, const bb_peer_id *peer, const bb_step *s) {
  (void)user;
  const uint64_t id = as_u64(peer);
  if (s->kind == BB_STEP_OP_FAILED || s->kind == BB_STEP_WIRE_RECEIVE_FAILED) {
    obs.failures++;
    fprintf(stderr, "peer %llu: %s %s: %s\n", (unsigned long long)id, bb_step_kind_name(s->kind), s->op ? s->op : "",
            s->detail ? s->detail : "");
  }
  if (s->kind != BB_STEP_APP_EVENT || !s->value) return;
  if (id == 1 && strcmp(s->topic, "round") == 0 && bb_val_is_u64(s->value)) {
    obs.round = bb_val_as_u64(s->value);
    obs.round_pending = true;
  }
  if (id == 1 && strcmp(s->topic, "model") == 0 && bb_val_kind_of(s->value) == BB_VAL_TENSOR) {
    /* the model and its round id come from one Aggregate, in either order: the model
     * is filed once both are in (file_model) */
    const bb_tensor *t = bb_val_as_tensor(s->value);
    obs.param_len = (size_t)t->numel;
    if (obs.param_len <= MAX_PARAMS) memcpy(obs.models[ROUNDS + 1], bb_tensor_data(t), obs.param_len * sizeof(float));
    obs.have_model[ROUNDS + 1] = true;
  }
  if (id > 1 + EDGES && strcmp(s->topic, "client_update") == 0 && bb_val_kind_of(s->value) == BB_VAL_COMPOSITE &&
      bb_val_count(s->value) == 3) {
    const bb_val *trained = bb_val_child(s->value, 0);
    const uint64_t round = bb_val_as_u64(bb_val_child(s->value, 2)), client = id - 2 - EDGES;
    if (bb_val_kind_of(trained) != BB_VAL_TENSOR || round > ROUNDS || client >= CLIENTS) return;
    client_update *u = &obs.updates[round][client];
    const bb_tensor *t = bb_val_as_tensor(trained);
    if ((size_t)t->numel > MAX_PARAMS) return;
    memcpy(u->params, bb_tensor_data(t), (size_t)t->numel * sizeof(float));
    u->samples = bb_val_as_u64(bb_val_child(s->value, 1));
    u->seen = true;
  }
}

/* After each step: a model and its round id, both in, are filed under that id. */
static void file_model(void) {
  if (!obs.have_model[ROUNDS + 1] || !obs.round_pending) return;
  obs.have_model[ROUNDS + 1] = obs.round_pending = false;
  if (obs.round > ROUNDS) return;
  memcpy(obs.models[obs.round], obs.models[ROUNDS + 1], obs.param_len * sizeof(float));
  obs.have_model[obs.round] = true;
}

/* A synthetic shard: n images of FEATURES pixel values in [0, 16] and labels 0..9. */
static void make_shard(bb_dataset *d, size_t n, uint64_t seed) {
  memset(d, 0, sizeof *d);
  d->features = malloc(n * FEATURES * sizeof(float));
  d->labels = malloc(n * sizeof(float));
  d->n = n;
  d->dim = FEATURES;
  d->alloc = *bb_default_allocator();
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    const int label = (int)((i + seed) % 10);
    d->labels[i] = (float)label;
    for (size_t j = 0; j < FEATURES; j++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      d->features[i * FEATURES + j] = (float)((x >> 40) % 9) + (j % 10 == (size_t)label ? 7.0f : 0.0f);
    }
  }
}

static void free_shard(bb_dataset *d) {
  free(d->features);
  free(d->labels);
}

static bb_node *install(bb_registry *reg, const uint8_t *art, size_t len, const bb_peer_id *peers, int i,
                        const bb_dataset *data) {
  static const char *const ROOT[] = {"HierDigits", "HierDigits_root"};
  static const char *const EDGE[] = {"HierDigits_edges", "HierDigits_edge"};
  static const char *const CLIENT[] = {"HierDigits_clients"};
  bb_address self = bb_address_p2p(&peers[i]);
  bb_slot_config slot = {"data", NULL, data};
  bb_node_config nc = {0};
  nc.struct_size = sizeof nc;
  nc.seed = 7000 + (uint64_t)i;
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = peers[i];
  a.addresses = &self;
  a.n_addresses = 1;
  a.artifact = art;
  a.artifact_len = len;
  a.targets = i == 0 ? ROOT : i <= EDGES ? EDGE : CLIENT;
  a.n_targets = i == 0 || i <= EDGES ? 2 : 1;
  a.registry = reg;
  a.slots = data ? &slot : NULL;
  a.n_slots = data ? 1 : 0;
  a.config = &nc;
  bb_node *node = NULL;
  bb_error err;
  int rc = bb_install(&a, &node, NULL, &err);
  CHECK_MSG(rc == 0, "install peer %d: %s", i, rc ? err.message : "");
  for (int j = 0; j < N_PEERS && !rc; j++) {
    bb_address other = bb_address_p2p(&peers[j]);
    if (j != i) rc = bb_node_add_peer(node, &peers[j], &other, &err);
  }
  return node;
}

static void bind_peers(bb_node *node, const char *target, const char *input, const bb_peer_id *peers, size_t n) {
  bb_val *v = bb_val_peers(NULL, peers, n);
  bb_error err;
  int rc = bb_node_bind_input(node, target, input, v, &err);
  CHECK_MSG(rc == 0, "bind %s.%s: %s", target, input, rc ? err.message : "");
  bb_val_release(v);
}

/* Flat FedAvg of round r's eight client updates: one engine, the same closing rules as
 * the tiers (sample-weighted mean, no weight bounds). */
static void flat_mean(uint64_t r, float *out) {
  bbi_fedround_config cfg = {0};
  cfg.param_len = obs.param_len;
  cfg.quorum = CLIENTS;
  bbi_fedround *fr = NULL;
  bb_error err;
  CHECK(bbi_fedround_new(NULL, &cfg, 0, &fr, &err) == 0);
  for (int c = 0; c < CLIENTS; c++) {
    uint8_t key[8];
    const size_t n = bbi_fedround_key_from_u64((uint64_t)c + 100, key);
    CHECK(bbi_fedround_contribute(fr, 0, key, n, obs.updates[r][c].params, obs.updates[r][c].samples, 0, NULL, &err) ==
          0);
  }
  bbi_fedround_result res;
  CHECK(bbi_fedround_poll(fr, 0, NULL, &res, &err) == 0 && res.event == BBI_FEDROUND_CLOSED);
  if (res.params) memcpy(out, res.params, obs.param_len * sizeof(float));
  bb_buffer_free(bbi_fedround_allocator(fr), res.params);
  bbi_fedround_free(fr);
}

/* |root − flat| within the bound in the file comment, for every coordinate. */
static void compare(uint64_t r, const float *root, const float *flat) {
  uint64_t total = 0, edge_samples[EDGES] = {0};
  for (int c = 0; c < CLIENTS; c++) total += obs.updates[r][c].samples, edge_samples[c / PER_EDGE] += obs.updates[r][c].samples;
  size_t worst_at = 0;
  double worst = 0, differing = 0;
  for (size_t j = 0; j < obs.param_len; j++) {
    double weighted_edge_mags = 0;
    for (int e = 0; e < EDGES; e++) {
      double m = 0; /* the edge's mean, as the edge computed it */
      for (int k = 0; k < PER_EDGE; k++) {
        const client_update *u = &obs.updates[r][e * PER_EDGE + k];
        m += (double)u->samples / (double)edge_samples[e] * (double)u->params[j];
      }
      weighted_edge_mags += (double)edge_samples[e] / (double)total * fabs((double)(float)m);
    }
    const float big = fabsf(root[j]) > fabsf(flat[j]) ? fabsf(root[j]) : fabsf(flat[j]);
    const double bound = 2 * ldexp(weighted_edge_mags, -24) + (double)(nextafterf(big, INFINITY) - big);
    const double diff = fabs((double)root[j] - (double)flat[j]);
    differing += root[j] != flat[j];
    if (diff > bound && diff - bound > worst) worst = diff - bound, worst_at = j;
  }
  CHECK_MSG(worst == 0, "round %llu: coordinate %zu: root %.9g, flat %.9g, beyond the rounding bound by %g",
            (unsigned long long)r, worst_at, (double)root[worst_at], (double)flat[worst_at], worst);
  printf("  round %llu: %zu parameters within rounding of flat FedAvg (%g differ in the last bits)\n",
         (unsigned long long)r, obs.param_len, differing);
}

/* A federation of the example on the simulator: the root (peer 1), EDGES edges and their
 * clients, installed, bound and invoked at time 0 (the root's first round). */
typedef struct tiers {
  uint8_t *art;
  bb_registry *reg;
  bb_sim *sim;
  bb_peer_id peers[N_PEERS];
  bb_dataset test, shards[CLIENTS];
  bb_node *nodes[N_PEERS];
} tiers;

static void tiers_open(tiers *t, uint64_t jitter_ns) {
  memset(t, 0, sizeof *t);
  memset(&obs, 0, sizeof obs);
  size_t len = 0;
  bb_error err;
  CHECK(bb_example_compile(&BB_EXAMPLE_HIERARCHICAL_DIGITS, 0, &t->art, &len, &err) == 0);
  t->reg = bb_registry_new(NULL);
  CHECK(t->reg && bb_registry_add_shipped(t->reg, &err) == 0);
  bb_sim_config sc = {0};
  sc.struct_size = sizeof sc;
  sc.seed = 3;
  sc.latency_ns = 5000000;
  sc.jitter_ns = jitter_ns;
  CHECK(bb_sim_new(&sc, &t->sim, &err) == 0);
  bb_sim_set_observer(t->sim, observe, NULL);

  bb_peer_id *peers = t->peers;
  for (int i = 0; i < N_PEERS; i++) peers[i] = bb_peer_id_from_u64((uint64_t)i + 1);
  make_shard(&t->test, 50, 99);
  for (int c = 0; c < CLIENTS; c++) make_shard(&t->shards[c], 20 + 9 * (size_t)c, (uint64_t)c + 1); /* unequal */
  for (int i = 0; i < N_PEERS; i++) {
    /* every node constructs every slot: an edge's model never runs, so it holds the test set */
    t->nodes[i] = install(t->reg, t->art, len, peers, i, i > EDGES ? &t->shards[i - 1 - EDGES] : &t->test);
    CHECK(t->nodes[i] && bb_sim_attach(t->sim, t->nodes[i], &peers[i], &err) == 0);
  }
  for (int e = 0; e < EDGES; e++) {
    bind_peers(t->nodes[1 + e], "HierDigits_edges", "clients", &peers[1 + EDGES + e * PER_EDGE], PER_EDGE);
    bind_peers(t->nodes[1 + e], "HierDigits_edge", "root", &peers[0], 1);
    for (int k = 0; k < PER_EDGE; k++)
      bind_peers(t->nodes[1 + EDGES + e * PER_EDGE + k], "HierDigits_clients", "edge", &peers[1 + e], 1);
  }
}

static void tiers_start(tiers *t) {
  const bb_dataset *test = &t->test;
  int64_t xd[2] = {(int64_t)test->n, FEATURES}, yd[1] = {(int64_t)test->n};
  bb_tensor *tx = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 2, xd), *ty = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 1, yd);
  memcpy(bb_tensor_data(tx), test->features, test->n * FEATURES * sizeof(float));
  memcpy(bb_tensor_data(ty), test->labels, test->n * sizeof(float));
  bb_val *vx = bb_val_tensor(NULL, tx), *vy = bb_val_tensor(NULL, ty), *edges = bb_val_peers(NULL, &t->peers[1], EDGES);
  bb_named_value in[] = {{"edges", edges}, {"test_x", vx}, {"test_y", vy}};
  bb_error err;
  CHECK(bb_node_invoke(t->nodes[0], "HierDigits", in, 3, 0, &err) == 0);
  bb_val_release(vx), bb_val_release(vy), bb_val_release(edges);
  bb_tensor_release(tx), bb_tensor_release(ty);
}

static void tiers_close(tiers *t) {
  bb_sim_free(t->sim);
  for (int i = 0; i < N_PEERS; i++) bb_node_free(t->nodes[i]);
  for (int c = 0; c < CLIENTS; c++) free_shard(&t->shards[c]);
  free_shard(&t->test);
  bb_registry_free(t->reg);
  bb_buffer_free(NULL, t->art);
}

static void test_tiers_equal_flat_fedavg(void) {
  tiers t;
  tiers_open(&t, 2000000);
  tiers_start(&t);
  bb_error err;
  while (obs.round < ROUNDS && bb_sim_now(t.sim) < 60000000000ull) {
    if (bb_sim_step(t.sim, &err)) break;
    file_model();
  }
  CHECK_EQ_INT(obs.failures, 0);
  CHECK_MSG(obs.round >= ROUNDS, "the root reached round %llu of %d", (unsigned long long)obs.round, ROUNDS);
  /* models[r + 1] is the mean of round r's updates */
  size_t compared = 0;
  float *flat = malloc(MAX_PARAMS * sizeof(float));
  for (uint64_t r = 0; r + 1 <= ROUNDS && obs.param_len <= MAX_PARAMS; r++) {
    bool all = obs.have_model[r + 1];
    for (int c = 0; c < CLIENTS; c++) all = all && obs.updates[r][c].seen;
    CHECK_MSG(all, "round %llu: not every client's update and the root's result were seen", (unsigned long long)r);
    if (!all) continue;
    flat_mean(r, flat);
    compare(r, obs.models[r + 1], flat);
    compared++;
  }
  CHECK_EQ_INT(compared, ROUNDS);
  free(flat);
  tiers_close(&t);
}

/* When the first tier's update arrived at edge 1 from its slow client, and when the root
 * gave out round 1. */
typedef struct slow_watch {
  bb_peer_id slow, edge;
  uint64_t slow_arrived_ns;
} slow_watch;

static void watch_slow(void *user, const bb_sim_delivery *d) {
  slow_watch *w = user;
  if (!w->slow_arrived_ns && d->accepted && bb_peer_id_equal(d->from, &w->slow) && bb_peer_id_equal(d->to, &w->edge))
    w->slow_arrived_ns = d->arrived_ns;
}

/* The root abandons a round an edge still holds open: one of edge 1's clients is so slow
 * in round 0 that the root's deadline passes without edge 1's report, and the root gives
 * out round 1 — which edge 1 passes on to its clients — before that client's round-0
 * update lets edge 1 close round 0. Edge 1's other clients then answer round 1, to which
 * edge 1 did send the model: they are members of round 1, their updates are taken, and no
 * operation fails anywhere. */
static void test_edge_behind_an_abandoned_round(void) {
  tiers t;
  tiers_open(&t, 0);
  bb_error err;
  /* every client trains 12 steps of 10 ms a round; client 4 of edge 1 takes 12 × 87 ms in
     round 0, so its update reaches edge 1 about 60 ms after the root's round 1 */
  const int slow = 1 + EDGES + PER_EDGE - 1;
  bb_sim_device fast = {0};
  fast.struct_size = sizeof fast;
  fast.step_ns = 10000000;
  bb_sim_device slowest = fast;
  slowest.step_ns = 87000000;
  for (int c = 0; c < CLIENTS; c++)
    CHECK(bb_sim_set_device(t.sim, &t.peers[1 + EDGES + c], 1 + EDGES + c == slow ? &slowest : &fast, &err) == 0);
  slow_watch w = {t.peers[slow], t.peers[1], 0};
  bb_sim_set_tracer(t.sim, watch_slow, &w);
  tiers_start(&t);
  uint64_t round1_at = 0;
  bool sped_up = false;
  while (obs.round < 4 && bb_sim_now(t.sim) < 60000000000ull) {
    if (bb_sim_step(t.sim, &err)) break;
    if (!round1_at && obs.round == 1) round1_at = bb_sim_now(t.sim);
    if (!sped_up && obs.updates[0][slow - 1 - EDGES].seen) {
      CHECK(bb_sim_set_device(t.sim, &t.peers[slow], &fast, &err) == 0);
      sped_up = true;
    }
  }
  const uint64_t edge_rounds = bb_node_counter(t.nodes[1], "fedavg.rounds_closed");
  printf("  root gave round 1 at %.0f ms, the slow client's round-0 update reached edge 1 at %.0f ms; root abandoned %llu, "
         "edge 1 closed %llu rounds\n",
         (double)round1_at / 1e6, (double)w.slow_arrived_ns / 1e6,
         (unsigned long long)bb_node_counter(t.nodes[0], "fedavg.rounds_abandoned"), (unsigned long long)edge_rounds);
  /* the case itself: round 0 abandoned at the root, and the slow update reaching edge 1
     after the root's round 1 had (latency 5 ms) reached edge 1 */
  CHECK(bb_node_counter(t.nodes[0], "fedavg.rounds_abandoned") >= 1);
  CHECK_MSG(round1_at && w.slow_arrived_ns > round1_at + 5000000, "round 1 at %llu, the slow update at %llu",
            (unsigned long long)round1_at, (unsigned long long)w.slow_arrived_ns);
  CHECK_EQ_INT(bb_node_counter(t.nodes[1], "fedavg.refused_non_member"), 0);
  CHECK_EQ_INT(obs.failures, 0);
  CHECK_MSG(obs.round >= 4, "the root reached round %llu of 4", (unsigned long long)obs.round);
  tiers_close(&t);
}

/* An edge still refuses a peer it never sent anything: a client of edge 2 that sends its
 * updates to edge 1 instead is refused there, every round, and counted. */
static void test_edge_refuses_a_stranger(void) {
  tiers t;
  tiers_open(&t, 0);
  const int stranger = 1 + EDGES + PER_EDGE; /* edge 2's first client */
  bind_peers(t.nodes[stranger], "HierDigits_clients", "edge", &t.peers[1], 1);
  tiers_start(&t);
  bb_error err;
  while (obs.round < 3 && bb_sim_now(t.sim) < 60000000000ull)
    if (bb_sim_step(t.sim, &err)) break;
  CHECK_MSG(obs.round >= 3, "the root reached round %llu of 3", (unsigned long long)obs.round);
  CHECK(bb_node_counter(t.nodes[1], "fedavg.refused_non_member") >= 2);
  CHECK_EQ_INT(bb_node_counter(t.nodes[2], "fedavg.refused_non_member"), 0);
  CHECK(obs.failures >= 2); /* each refusal is an operation that failed on edge 1 */
  tiers_close(&t);
}

int main(void) {
  RUN(test_tiers_equal_flat_fedavg);
  RUN(test_edge_behind_an_abandoned_round);
  RUN(test_edge_refuses_a_stranger);
  return bb_test_finish();
}
