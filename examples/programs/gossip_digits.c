/* gossip_digits: sixteen peers and no server learn to read handwritten digits by gossip:
 * every period each peer trains on its own shard, sends its parameters to one peer its
 * gossip view samples, and mixes whatever it receives into its own model.
 *
 *   gossip_digits [--peers N] [--time SECONDS] [--loss P] [--non-iid] [--seed S] [--data CSV] [--scenario FILE] [--quiet]
 *
 * Shards are IID by default; --non-iid gives each peer three digits, which gossip
 * averaging handles more slowly (the mean passes 90 %, the weakest peers lag). Views
 * start as a ring (each peer knows the next two) and spread by exchange. Exits 0 when
 * every peer's model reaches 85 % on the held-out images. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/roles.h"
#include "bb/runtime.h"
#include "bb/sim.h"
#include "digits.h"
#include "federation.h"
#include "programs/examples.h"

typedef struct options {
  int peers, seconds, iid, quiet;
  double loss;
  uint64_t seed;
  const char *data; /* the digits CSV (NULL: Debian's gzipped copy) */
  const char *scenario; /* a population of phones: every peer one of its devices */
} options;

static int parse(int argc, char **argv, options *o) {
  *o = (options){16, 15, 1, 0, 0.0, 1, NULL, NULL};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--quiet") == 0) o->quiet = 1;
    else if (strcmp(a, "--non-iid") == 0) o->iid = 0;
    else if (!v) goto usage;
    else if (strcmp(a, "--peers") == 0) o->peers = atoi(v), i++;
    else if (strcmp(a, "--time") == 0) o->seconds = atoi(v), i++;
    else if (strcmp(a, "--loss") == 0) o->loss = atof(v), i++;
    else if (strcmp(a, "--seed") == 0) o->seed = strtoull(v, NULL, 10), i++;
    else if (strcmp(a, "--data") == 0) o->data = v, i++;
    else if (strcmp(a, "--scenario") == 0) o->scenario = v, i++;
    else goto usage;
  }
  if (o->peers >= 3 && o->peers <= 128 && o->seconds > 0 && o->loss >= 0 && o->loss < 1) return 0;
usage:
  fprintf(stderr, "usage: gossip_digits [--peers N] [--time SECONDS] [--loss P] [--non-iid] [--seed S] [--data CSV] "
                  "[--scenario FILE] [--quiet]\n");
  return 2;
}

typedef struct run {
  const options *o;
  float *accuracy; /* per peer, the latest */
  uint64_t failures;
  char first_failure[256]; /* the first failed op or receive, for the summary */
} run;

static void observe(void *user, const bb_peer_id *peer, const bb_step *s) {
  run *r = user;
  uint64_t id = 0;
  bb_peer_id_as_u64(peer, &id);
  if (s->kind == BB_STEP_APP_EVENT && strcmp(s->topic, "accuracy") == 0 && s->value &&
      bb_val_kind_of(s->value) == BB_VAL_TENSOR && id >= 1 && id <= (uint64_t)r->o->peers)
    r->accuracy[id - 1] = *(const float *)bb_tensor_data(bb_val_as_tensor(s->value));
  /* A merge refused because its sender has left the receiver's view is the rule working
   * (counted as gossip.refused_non_member); the summary sets those apart from the rest. */
  if (s->kind == BB_STEP_OP_FAILED || s->kind == BB_STEP_WIRE_RECEIVE_FAILED) {
    if (!r->failures)
      snprintf(r->first_failure, sizeof r->first_failure, "peer %llu: %s %s: %s", (unsigned long long)id,
               bb_step_kind_name(s->kind), s->op ? s->op : "", s->detail ? s->detail : "");
    r->failures++;
  }
}

static void summary(const run *r, int second, float *lo, float *mean) {
  *lo = 1;
  *mean = 0;
  for (int i = 0; i < r->o->peers; i++) {
    if (r->accuracy[i] < *lo) *lo = r->accuracy[i];
    *mean += r->accuracy[i] / (float)r->o->peers;
  }
  if (!r->o->quiet) printf("t=%2ds  accuracy: worst peer %.3f, mean %.3f\n", second, (double)*lo, (double)*mean);
  fflush(stdout);
}

int main(int argc, char **argv) {
  options o;
  if (parse(argc, argv, &o)) return 2;
  bb_error err;
  bb_digits_split d;
  if (bb_digits_split_load(o.data, (size_t)o.peers, o.iid ? 0 : 3, o.seed, &d, &err))
    return fprintf(stderr, "gossip_digits: %s\n", err.message), 1;
  const bb_dataset *test = &d.test;
  uint8_t *artifact;
  size_t artifact_len;
  if (bb_example_compile(&BB_EXAMPLE_GOSSIP_DIGITS, 0, &artifact, &artifact_len, &err))
    return fprintf(stderr, "gossip_digits: %s\n", err.message), 1;
  bb_registry *reg = bb_registry_new(NULL); /* the module binds shipped concretes only */
  if (!reg || bb_registry_add_shipped(reg, &err))
    return fprintf(stderr, "gossip_digits: registry: %s\n", reg ? err.message : "out of memory"), 1;
  if (!o.quiet)
    printf("gossip_digits: %d peers, no server, %s shards of %zu training images, %zu held out, loss %.0f%%\n", o.peers,
           o.iid ? "IID" : "label-skewed (3 digits each)", d.train.n, test->n, o.loss * 100);

  run r = {.o = &o, .accuracy = calloc((size_t)o.peers, sizeof(float))};
  bb_sim_config sc = {0};
  sc.struct_size = sizeof sc;
  sc.seed = o.seed;
  sc.latency_ns = 5000000;
  sc.jitter_ns = 3000000;
  sc.loss = o.loss;
  bb_sim_scenario scenario;
  if (o.scenario && bb_fed_scenario_load(o.scenario, &scenario, &err))
    return fprintf(stderr, "gossip_digits: %s\n", err.message), 1;
  if (o.scenario) bb_sim_scenario_network(&scenario, &sc);
  bb_sim *sim;
  if (bb_sim_new(&sc, &sim, &err)) return fprintf(stderr, "gossip_digits: %s\n", err.message), 1;
  bb_sim_set_observer(sim, observe, &r);
  bb_node **nodes = calloc((size_t)o.peers, sizeof *nodes);
  int64_t xd[2] = {(int64_t)test->n, BB_DIGITS_FEATURES}, yd[1] = {(int64_t)test->n};
  bb_val *tx = bb_fed_tensor(test->features, 2, xd), *ty = bb_fed_tensor(test->labels, 1, yd);
  for (int i = 0; i < o.peers; i++) {
    bb_peer_id me = bb_peer_id_from_u64((uint64_t)i + 1);
    bb_address self = bb_address_p2p(&me);
    char view[64];
    snprintf(view, sizeof view, "seeds=%d;%d,view=6,shuffle=3", (i + 1) % o.peers + 1, (i + 2) % o.peers + 1);
    bb_slot_config slots[] = {{"data", NULL, &d.shards[i]}, {"view", view, NULL}};
    bb_node_config nc = {0};
    nc.struct_size = sizeof nc;
    nc.seed = o.seed * 1000 + (uint64_t)i;
    bb_install_args a = {0};
    a.struct_size = sizeof a;
    a.self = me;
    a.addresses = &self;
    a.n_addresses = 1;
    a.artifact = artifact;
    a.artifact_len = artifact_len;
    const char *targets[] = {"GossipDigits"};
    a.targets = targets;
    a.n_targets = 1;
    a.registry = reg;
    a.slots = slots;
    a.n_slots = 2;
    a.config = &nc;
    bb_named_value in[] = {{"test_x", tx}, {"test_y", ty}};
    if (bb_install(&a, &nodes[i], NULL, &err) || bb_sim_attach(sim, nodes[i], &me, &err) ||
        bb_node_invoke(nodes[i], "GossipDigits", in, 2, 0, &err))
      return fprintf(stderr, "gossip_digits: peer %d: %s\n", i + 1, err.message), 1;
  }
  bb_val_release(tx);
  bb_val_release(ty);
  for (int i = 0; o.scenario && i < o.peers; i++) {
    bb_peer_id me = bb_peer_id_from_u64((uint64_t)i + 1);
    bb_sim_device device;
    bb_sim_scenario_device(&scenario, (uint64_t)i, &device);
    if (bb_sim_set_device(sim, &me, &device, &err)) return fprintf(stderr, "gossip_digits: %s\n", err.message), 1;
  }

  float lo = 0, mean = 0;
  for (int second = 1; second <= o.seconds; second++) {
    if (bb_sim_run_until(sim, (uint64_t)second * 1000000000ull, &err))
      return fprintf(stderr, "gossip_digits: %s\n", err.message), 1;
    summary(&r, second, &lo, &mean);
  }
  bb_sim_stats st;
  bb_sim_get_stats(sim, &st);
  uint64_t merged = 0, refused = 0;
  for (int i = 0; i < o.peers; i++) {
    merged += bb_node_counter(nodes[i], "gossip.merged");
    refused += bb_node_counter(nodes[i], "gossip.refused_non_member");
  }
  int ok = lo >= 0.85f;
  printf("gossip_digits: worst peer %.3f, mean %.3f (%s 0.85 for every peer); %llu models exchanged, %llu merged, "
         "%llu refused (their sender had left the receiver's view), %llu lost\n",
         (double)lo, (double)mean, ok ? ">=" : "below", (unsigned long long)st.sent, (unsigned long long)merged,
         (unsigned long long)refused, (unsigned long long)st.lost);
  if (!o.quiet && r.failures > refused)
    fprintf(stderr, "gossip_digits: %llu other failed operations; the first: %s\n",
            (unsigned long long)(r.failures - refused), r.first_failure);
  bb_sim_free(sim);
  for (int i = 0; i < o.peers; i++) bb_node_free(nodes[i]);
  bb_registry_free(reg);
  free(nodes);
  free(r.accuracy);
  bb_digits_split_free(&d);
  bb_buffer_free(NULL, artifact);
  return ok ? 0 : 1;
}
