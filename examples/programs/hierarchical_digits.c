/* hierarchical_digits: federated averaging in two aggregator tiers over a simulated
 * network — a root, E edge aggregators and four clients behind each edge, every client
 * holding a label-skewed (non-IID) shard of scikit-learn's digits.
 *
 *   hierarchical_digits [--rounds N] [--edges E] [--seed S] [--data CSV] [--scenario FILE] [--quiet]
 *
 * Clients report to their edge, each edge reports the sample-weighted mean of its
 * clients with their summed sample count to the root, and the root's weighted mean of
 * those is the flat FedAvg of every client's update (src/programs/hierarchical_digits.c).
 * Prints the held-out accuracy of the global model after every round and exits 0 when the
 * last round reaches 90 %, as federated_digits does with the same eight clients. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/roles.h"
#include "federation.h"
#include "options.h"
#include "programs/examples.h"

/* The artifact's edge aggregator closes a round at four contributions (its target). */
#define CLIENTS_PER_EDGE 4

typedef struct options {
  int rounds, edges, quiet;
  uint64_t seed;
  const char *data; /* the digits CSV (NULL: Debian's gzipped copy) */
  const char *scenario; /* a population of phones: every client one of its devices */
} options;

static int usage(void) {
  fprintf(stderr, "usage: hierarchical_digits [--rounds N] [--edges E] [--seed S] [--data CSV] [--scenario FILE] [--quiet]\n");
  return 2;
}

static int parse(int argc, char **argv, options *o) {
  *o = (options){40, 2, 0, 1, NULL, NULL};
  const bb_option table[] = {{"--rounds", BB_OPTION_INT, &o->rounds},
                             {"--edges", BB_OPTION_INT, &o->edges},
                             {"--seed", BB_OPTION_U64, &o->seed},
                             {"--data", BB_OPTION_STRING, &o->data},
                             {"--scenario", BB_OPTION_STRING, &o->scenario}};
  if (bb_options_parse(argc, argv, table, sizeof table / sizeof *table, &o->quiet) || o->rounds < 1 ||
      o->edges < 1 || o->edges > 16)
    return usage();
  return 0;
}

/* The partitions each tier runs: peer 0 is the root, then the edges, then the clients. */
static void targets_of(int i, int edges, const char *const **targets, size_t *n) {
  static const char *const ROOT[] = {"HierDigits", "HierDigits_root"};
  static const char *const EDGE[] = {"HierDigits_edges", "HierDigits_edge"};
  static const char *const CLIENT[] = {"HierDigits_clients"};
  if (i == 0) *targets = ROOT, *n = 2;
  else if (i <= edges) *targets = EDGE, *n = 2;
  else *targets = CLIENT, *n = 1;
}

static int install_node(const bb_fed_peers *net, const bb_registry *reg, int edges, int i, const bb_dataset *data_set,
                        bb_node **out, bb_error *err) {
  const char *const *targets;
  size_t n_targets;
  targets_of(i, edges, &targets, &n_targets);
  bb_slot_config data = {"data", NULL, data_set};
  return bb_fed_install_peer(net, (size_t)i, reg, targets, n_targets, &data, 1, out, err);
}

int main(int argc, char **argv) {
  options o;
  if (parse(argc, argv, &o)) return 2;
  const int clients = o.edges * CLIENTS_PER_EDGE;
  bb_error err;
  bb_digits_split d;
  if (bb_digits_split_load(o.data, (size_t)clients, 3, o.seed, &d, &err))
    return fprintf(stderr, "hierarchical_digits: %s\n", err.message), 1;
  const bb_dataset *test = &d.test;

  uint8_t *artifact;
  size_t artifact_len;
  if (bb_example_compile(&BB_EXAMPLE_HIERARCHICAL_DIGITS, 0, &artifact, &artifact_len, &err))
    return fprintf(stderr, "hierarchical_digits: %s\n", err.message), 1;
  bb_registry *reg = bb_registry_new(NULL);
  if (!reg || bb_registry_add_shipped(reg, &err))
    return fprintf(stderr, "hierarchical_digits: registry: %s\n", reg ? err.message : "out of memory"), 1;
  if (!o.quiet)
    printf("hierarchical_digits: a root, %d edge aggregators, %d clients (%d per edge), %zu training and %zu "
           "held-out images, non-IID shards (3 digits each)\n",
           o.edges, clients, CLIENTS_PER_EDGE, d.train.n, test->n);

  bb_fed_progress progress = {0};
  progress.quiet = o.quiet;
  bb_sim_scenario scenario;
  const bb_sim_scenario *population = o.scenario ? &scenario : NULL;
  if (o.scenario && bb_fed_scenario_load(o.scenario, &scenario, &err))
    return fprintf(stderr, "hierarchical_digits: %s\n", err.message), 1;
  bb_sim *sim = NULL;
  if (bb_fed_sim_for(population, o.seed, 0, &sim, &err)) return fprintf(stderr, "hierarchical_digits: %s\n", err.message), 1;
  bb_sim_set_observer(sim, bb_fed_observe, &progress);

  const int n_peers = 1 + o.edges + clients;
  bb_node **nodes = calloc((size_t)n_peers, sizeof *nodes);
  bb_peer_id *peers = calloc((size_t)n_peers, sizeof *peers);
  for (int i = 0; i < n_peers; i++) peers[i] = bb_peer_id_from_u64((uint64_t)i + 1);
  const bb_peer_id *edge_ids = peers + 1, *client_ids = peers + 1 + o.edges;
  bb_fed_peers net = {artifact, artifact_len, peers, (size_t)n_peers, o.seed, NULL};
  for (int i = 0; i < n_peers; i++) {
    /* every node constructs every slot: an edge's model never runs, so it holds the test set */
    const bb_dataset *data = i > o.edges ? &d.shards[i - 1 - o.edges] : test;
    if (install_node(&net, reg, o.edges, i, data, &nodes[i], &err) ||
        bb_sim_attach(sim, nodes[i], &peers[i], &err))
      return fprintf(stderr, "hierarchical_digits: peer %d: %s\n", i + 1, err.message), 1;
  }
  /* edge e serves clients [4e, 4e + 4) and reports to the root; each client knows its edge */
  for (int e = 0; e < o.edges; e++) {
    bb_node *edge = nodes[1 + e];
    if (bb_fed_bind_peers(edge, "HierDigits_edges", "clients", client_ids + e * CLIENTS_PER_EDGE, CLIENTS_PER_EDGE, &err) ||
        bb_fed_bind_peers(edge, "HierDigits_edge", "root", &peers[0], 1, &err))
      return fprintf(stderr, "hierarchical_digits: edge %d: %s\n", e, err.message), 1;
    for (int k = 0; k < CLIENTS_PER_EDGE; k++)
      if (bb_fed_bind_peers(nodes[1 + o.edges + e * CLIENTS_PER_EDGE + k], "HierDigits_clients", "edge", &edge_ids[e], 1,
                     &err))
        return fprintf(stderr, "hierarchical_digits: client: %s\n", err.message), 1;
  }

  if (population && bb_sim_scenario_apply(sim, population, client_ids, (size_t)clients, &err))
    return fprintf(stderr, "hierarchical_digits: %s\n", err.message), 1;

  /* start the root's round loop */
  if (bb_fed_start_rounds(nodes[0], "HierDigits", "edges", edge_ids, (size_t)o.edges, test, &err))
    return fprintf(stderr, "hierarchical_digits: %s\n", err.message), 1;

  while (progress.round < o.rounds) {
    if (bb_sim_step(sim, &err)) return fprintf(stderr, "hierarchical_digits: %s\n", err.message), 1;
    if (bb_sim_now(sim) > bb_fed_time_limit(population, o.rounds)) {
      fprintf(stderr, "hierarchical_digits: rounds stopped closing (at round %d)\n", progress.round);
      break;
    }
  }
  bb_sim_stats st;
  bb_sim_get_stats(sim, &st);
  const int ok = progress.accuracy >= 0.90f && progress.round >= o.rounds;
  printf("hierarchical_digits: %d rounds, final held-out accuracy %.3f (%s 0.90); %llu messages sent, %llu failed "
         "steps\n",
         progress.round, (double)progress.accuracy, ok ? ">=" : "below", (unsigned long long)st.sent,
         (unsigned long long)progress.failures);
  bb_fed_progress_free(&progress);
  bb_sim_free(sim);
  for (int i = 0; i < n_peers; i++) bb_node_free(nodes[i]);
  bb_registry_free(reg);
  free(nodes);
  free(peers);
  bb_digits_split_free(&d);
  bb_buffer_free(NULL, artifact);
  return ok ? 0 : 1;
}
