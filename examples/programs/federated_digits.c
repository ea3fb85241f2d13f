/* federated_digits: one server and eight clients learn to read handwritten digits with
 * federated averaging, over a simulated network, each client holding a label-skewed
 * (non-IID) shard of scikit-learn's digits.
 *
 *   federated_digits [--rounds N] [--clients K] [--loss P] [--drop D] [--snapshot-at R] [--seed S] [--data CSV]
 *                    [--export FILE] [--quiet]
 *
 * Prints the held-out accuracy of the global model after every round and exits 0 when
 * the last round reaches 90 %. --drop D crashes D clients halfway; --loss P loses each
 * message with probability P. --snapshot-at R moves the server at round R into a fresh node
 * through a snapshot (the run continues exactly as without). --export FILE writes the final global model as a standard
 * ONNX model (bb run and onnxruntime execute it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/roles.h"
#include "bb/runtime.h"
#include "bb/sim.h"
#include "digits.h"
#include "programs/examples.h"
#include "export_mlp.h"

typedef struct options {
  int rounds, clients, drop, quiet, snapshot_at;
  double loss;
  uint64_t seed;
  const char *data; /* the digits CSV (NULL: Debian's gzipped copy) */
  const char *export_path;
} options;

static int usage(void) {
  fprintf(stderr, "usage: federated_digits [--rounds N] [--clients K] [--loss P] [--drop D] [--snapshot-at R] [--seed S] [--data CSV] "
                  "[--export FILE] [--quiet]\n");
  return 2;
}

static int parse(int argc, char **argv, options *o) {
  *o = (options){40, 8, 0, 0, 0, 0.0, 1, NULL, NULL};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--quiet") == 0) o->quiet = 1;
    else if (!v) return usage();
    else if (strcmp(a, "--rounds") == 0) o->rounds = atoi(v), i++;
    else if (strcmp(a, "--clients") == 0) o->clients = atoi(v), i++;
    else if (strcmp(a, "--drop") == 0) o->drop = atoi(v), i++;
    else if (strcmp(a, "--snapshot-at") == 0) o->snapshot_at = atoi(v), i++;
    else if (strcmp(a, "--loss") == 0) o->loss = atof(v), i++;
    else if (strcmp(a, "--seed") == 0) o->seed = strtoull(v, NULL, 10), i++;
    else if (strcmp(a, "--data") == 0) o->data = v, i++;
    else if (strcmp(a, "--export") == 0) o->export_path = v, i++;
    else return usage();
  }
  if (o->rounds < 1 || o->clients < 2 || o->clients > 64 || o->drop < 0 || o->drop >= o->clients || o->loss < 0 ||
      o->loss >= 1)
    return usage();
  return 0;
}

static bb_val *tensor_of(const float *data, int rank, const int64_t *dims) {
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, rank, dims);
  if (!t) return NULL;
  memcpy(bb_tensor_data(t), data, (size_t)t->numel * sizeof(float));
  bb_val *v = bb_val_tensor(NULL, t);
  bb_tensor_release(t);
  return v;
}

typedef struct run {
  const options *o;
  int round;
  float accuracy;
  bb_tensor *global; /* the last global model the server announced */
  uint64_t failures;
} run;

static void observe(void *user, const bb_peer_id *peer, const bb_step *s) {
  run *r = user;
  uint64_t id = 0;
  bb_peer_id_as_u64(peer, &id);
  if (s->kind == BB_STEP_APP_EVENT && id == 1 && s->value) {
    if (strcmp(s->topic, "round") == 0 && bb_val_is_u64(s->value)) r->round = (int)bb_val_as_u64(s->value);
    if (strcmp(s->topic, "model") == 0 && bb_val_kind_of(s->value) == BB_VAL_TENSOR) {
      bb_tensor_release(r->global);
      r->global = bb_tensor_retain(bb_val_as_tensor(s->value));
    }
    if (strcmp(s->topic, "accuracy") == 0 && bb_val_kind_of(s->value) == BB_VAL_TENSOR) {
      r->accuracy = *(const float *)bb_tensor_data(bb_val_as_tensor(s->value));
      if (!r->o->quiet) printf("round %3d  held-out accuracy %.3f\n", r->round, (double)r->accuracy);
      fflush(stdout);
    }
  }
  if (s->kind == BB_STEP_OP_FAILED || s->kind == BB_STEP_WIRE_RECEIVE_FAILED) {
    r->failures++;
    if (!r->o->quiet && r->failures <= 5)
      fprintf(stderr, "peer %llu: %s %s: %s\n", (unsigned long long)id, bb_step_kind_name(s->kind),
              s->op ? s->op : "", s->detail ? s->detail : "");
  }
}

/* Peer i (0: the server) of the federation, knowing every other peer's address. */
static int install_node(const options *o, const bb_registry *reg, const uint8_t *artifact, size_t artifact_len,
                        const bb_peer_id *peers, int n_peers, int i, const bb_dataset *data_set, bb_node **out,
                        bb_error *err) {
  bb_address self = bb_address_p2p(&peers[i]);
  const char *server_targets[] = {"FedDigits", "FedDigits_server"};
  const char *client_targets[] = {"FedDigits_clients"};
  bb_slot_config data = {"data", NULL, data_set};
  bb_node_config nc = {0};
  nc.struct_size = sizeof nc;
  nc.seed = o->seed * 1000 + (uint64_t)i;
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = peers[i];
  a.addresses = &self;
  a.n_addresses = 1;
  a.artifact = artifact;
  a.artifact_len = artifact_len;
  a.targets = i ? client_targets : server_targets;
  a.n_targets = i ? 1 : 2;
  a.registry = reg;
  a.slots = &data;
  a.n_slots = 1;
  a.config = &nc;
  int rc = bb_install(&a, out, NULL, err);
  for (int j = 0; j < n_peers && !rc; j++) { /* everybody knows everybody's address */
    bb_address other = bb_address_p2p(&peers[j]);
    if (j != i) rc = bb_node_add_peer(*out, &peers[j], &other, err);
  }
  return rc;
}

/* The server, snapshotted between two events and restored into a freshly installed node
 * that takes its place in the network: the run must go on exactly as before. */
static int move_server(const options *o, const bb_registry *reg, bb_sim *sim, const uint8_t *artifact,
                       size_t artifact_len, const bb_peer_id *peers, int n_peers, const bb_dataset *test,
                       bb_node **server, bb_error *err) {
  uint8_t *snap = NULL;
  size_t len = 0;
  bb_node *fresh = NULL;
  int rc = bb_node_snapshot(*server, &snap, &len, err);
  if (!rc) rc = install_node(o, reg, artifact, artifact_len, peers, n_peers, 0, test, &fresh, err);
  if (!rc) rc = bb_node_restore(fresh, snap, len, err);
  if (!rc) {
    bb_sim_restart(sim, &peers[0], fresh);
    bb_node_free(*server);
    *server = fresh;
    if (!o->quiet) printf("-- server snapshotted (%zu bytes) and restored into a fresh node\n", len);
  } else {
    bb_node_free(fresh);
  }
  bb_buffer_free(NULL, snap);
  return rc;
}

int main(int argc, char **argv) {
  options o;
  if (parse(argc, argv, &o)) return 2;
  bb_error err;
  bb_digits_split d;
  if (bb_digits_split_load(o.data, (size_t)o.clients, 3, o.seed, &d, &err))
    return fprintf(stderr, "federated_digits: %s\n", err.message), 1;
  const bb_dataset *test = &d.test;

  uint8_t *artifact;
  size_t artifact_len;
  if (bb_example_compile(&BB_EXAMPLE_FEDERATED_DIGITS, 0, &artifact, &artifact_len, &err))
    return fprintf(stderr, "federated_digits: %s\n", err.message), 1;
  bb_registry *reg = bb_registry_new(NULL); /* the module binds CpuMlp, ArraySource and FedAvg */
  if (!reg || bb_registry_add_shipped(reg, &err))
    return fprintf(stderr, "federated_digits: registry: %s\n", reg ? err.message : "out of memory"), 1;
  if (!o.quiet)
    printf("federated_digits: %d clients, %zu training and %zu held-out images, non-IID shards (3 digits each), "
           "loss %.0f%%, %d clients dropping\n",
           o.clients, d.train.n, test->n, o.loss * 100, o.drop);

  run r = {&o, 0, 0, NULL, 0};
  bb_sim_config sc = {0};
  sc.struct_size = sizeof sc;
  sc.seed = o.seed;
  sc.latency_ns = 5000000;
  sc.jitter_ns = 2000000;
  sc.loss = o.loss;
  bb_sim *sim = NULL;
  if (bb_sim_new(&sc, &sim, &err)) return fprintf(stderr, "federated_digits: %s\n", err.message), 1;
  bb_sim_set_observer(sim, observe, &r);

  /* the server: the round loop and the aggregator's partition */
  int n_peers = o.clients + 1;
  bb_node **nodes = calloc((size_t)n_peers, sizeof *nodes);
  bb_peer_id *peers = calloc((size_t)n_peers, sizeof *peers);
  for (int i = 0; i < n_peers; i++) peers[i] = bb_peer_id_from_u64((uint64_t)i + 1);
  for (int i = 0; i < n_peers; i++)
    if (install_node(&o, reg, artifact, artifact_len, peers, n_peers, i, i ? &d.shards[i - 1] : test, &nodes[i],
                     &err) ||
        bb_sim_attach(sim, nodes[i], &peers[i], &err))
      return fprintf(stderr, "federated_digits: peer %d: %s\n", i + 1, err.message), 1;
  bb_val *server = bb_val_peers(NULL, &peers[0], 1);
  for (int i = 1; i < n_peers; i++)
    if (bb_node_bind_input(nodes[i], "FedDigits_clients", "server", server, &err))
      return fprintf(stderr, "federated_digits: %s\n", err.message), 1;
  bb_val_release(server);

  /* start the server's round loop */
  int64_t xd[2] = {(int64_t)test->n, BB_DIGITS_FEATURES}, yd[1] = {(int64_t)test->n};
  bb_val *tx = tensor_of(test->features, 2, xd), *ty = tensor_of(test->labels, 1, yd);
  bb_val *clients = bb_val_peers(NULL, peers + 1, (size_t)o.clients);
  bb_named_value in[] = {{"clients", clients}, {"test_x", tx}, {"test_y", ty}};
  if (bb_node_invoke(nodes[0], "FedDigits", in, 3, 0, &err))
    return fprintf(stderr, "federated_digits: %s\n", err.message), 1;
  bb_val_release(clients);
  bb_val_release(tx);
  bb_val_release(ty);

  int dropped = 0, moved = 0;
  while (r.round < o.rounds) {
    if (bb_sim_step(sim, &err)) return fprintf(stderr, "federated_digits: %s\n", err.message), 1;
    if (o.snapshot_at && !moved && r.round >= o.snapshot_at && !bb_node_has_work(nodes[0])) {
      if (move_server(&o, reg, sim, artifact, artifact_len, peers, n_peers, test, &nodes[0], &err))
        return fprintf(stderr, "federated_digits: snapshot: %s\n", err.message), 1;
      moved = 1;
    }
    if (o.drop && !dropped && r.round >= o.rounds / 2) {
      for (int k = 0; k < o.drop; k++) bb_sim_crash(sim, &peers[n_peers - 1 - k]);
      dropped = 1;
      if (!o.quiet) printf("-- %d clients dropped out\n", o.drop);
    }
    if (bb_sim_now(sim) > (uint64_t)o.rounds * 4000000000ull) {
      fprintf(stderr, "federated_digits: rounds stopped closing (at round %d)\n", r.round);
      break;
    }
  }
  bb_sim_stats st;
  bb_sim_get_stats(sim, &st);
  int ok = r.accuracy >= 0.90f;
  printf("federated_digits: %d rounds, final held-out accuracy %.3f (%s 0.90); %llu messages sent, %llu lost\n",
         r.round, (double)r.accuracy, ok ? ">=" : "below", (unsigned long long)st.sent, (unsigned long long)st.lost);
  if (o.export_path) {
    static const size_t sizes[] = {BB_DIGITS_FEATURES, 32, BB_DIGITS_CLASSES}; /* the module's CpuMlp config */
    if (!r.global || bb_export_mlp(bb_tensor_data(r.global), (size_t)r.global->numel, sizes, 3, 1.0f / 16,
                                   o.export_path, &err)) {
      fprintf(stderr, "federated_digits: export: %s\n", err.message);
      ok = 0;
    } else if (!o.quiet) {
      printf("federated_digits: wrote %s\n", o.export_path);
    }
  }
  bb_tensor_release(r.global);
  bb_sim_free(sim);
  for (int i = 0; i < n_peers; i++) bb_node_free(nodes[i]);
  bb_registry_free(reg);
  free(nodes);
  free(peers);
  bb_digits_split_free(&d);
  bb_buffer_free(NULL, artifact);
  return ok ? 0 : 1;
}
