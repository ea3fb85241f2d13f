/* Poisoning: federated_digits under attack, over the simulator.
 *
 *   poisoning [--rounds N] [--seeds K] [--attack NAME] [--attackers 2,3] [--aggregator TYPE] [--config TEXT]
 *             [--check]
 *
 * The federation is the federated_digits example's (its compiled Module, its simulated
 * network: 5 ms latency, 2 ms jitter): one server and ten clients, each holding a
 * label-skewed shard of scikit-learn's digits (three digits per shard). Each run plays one
 * attack for N rounds (default 30) and reports the global model's held-out accuracy
 * after the last round, averaged over seeds 1..K (default 3), once for each count of
 * attackers (default 2 and 3 of the ten clients):
 *
 *   clean      ten honest clients
 *   silent     one client never answers (a phone gone quiet)
 *   nan        one client sends a NaN in its update
 *   scale      the attackers send their trained parameters times 100
 *   signflip   they send their trained parameters negated (-u)
 *   reverse    they send the global model minus their step (g - (u - g)): their training
 *              undone, exactly as far from the global model as an honest update
 *   huge       they send 3e38 in every parameter (finite: every check for NaN passes)
 *   samples    they send honest parameters but claim 10^12 samples
 *   revsamples they send the reversed step and claim 10^12 samples
 *   labelflip  they train on their shard with every label y replaced by 9 - y (shown, not
 *              checked)
 *   sybil      ten honest clients, and as many more ids as attackers, which the server
 *              never selected, answer the broadcast they overheard with 100 x their
 *              trained parameters
 *
 * The attackers are the last clients; they run the same artifact with their own data,
 * their Model the shipped CpuMlp wrapped so that Fit's outputs are altered as above. The
 * Sybils are full nodes too: every broadcast the server sends to its first client is also
 * handed to them.
 *
 * --aggregator runs the server with another aggregator type than the artifact's FedAvg
 * (installed under the bound name, as a registry alias) and --config gives its config;
 * --check exits 1 unless the clean run reaches 90 % and every checked attack ends within
 * 3 points of it. The one unchecked is the liar within every bound: updates that are
 * descent steps on wrong labels look like an honest client's with other data
 * (docs/SECURITY.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/roles.h"
#include "bb/runtime.h"
#include "bb/sim.h"
#include "federation.h"
#include "programs/examples.h"

#define N_CLIENTS 10
#define MAX_ATTACKERS 5
#define MAX_COUNTS 4       /* attacker counts one run compares */
#define CHECK_POINTS 0.03 /* --check: the most an attack may cost against the clean run */
#define CLEAN_FLOOR 0.90  /* --check: what the clean run must reach */

typedef enum attack {
  CLEAN,
  SILENT,
  NAN_UPDATE,
  SCALE,
  SIGNFLIP,
  REVERSE,
  HUGE,
  SAMPLES,
  REVERSE_SAMPLES,
  LABEL_FLIP,
  SYBIL,
  N_ATTACKS
} attack;

static const char *const ATTACK_NAMES[N_ATTACKS] = {"clean",   "silent",  "nan",        "scale",     "signflip", "reverse",
                                                    "huge",    "samples", "revsamples", "labelflip", "sybil"};
static const char *const ATTACK_TEXT[N_ATTACKS] = {
    "ten honest clients",
    "one client never answers",
    "one client sends a NaN",
    "send 100 x their parameters",
    "send their parameters negated",
    "send g - (u - g)",
    "send 3e38 everywhere",
    "claim 10^12 samples",
    "send g - (u - g), claim 10^12 samples",
    "train on labels 9 - y",
    "unselected ids answer with 100 x",
};

/* Attacks played by one client whatever the attacker count. */
static bool one_client(attack a) { return a == SILENT || a == NAN_UPDATE; }

/* Attacks --check holds to 3 points: all but the liar within every bound. */
static bool checked(attack a) { return a != LABEL_FLIP; }

typedef struct options {
  int rounds, seeds, check;
  int only; /* an attack, or -1 for all */
  int counts[MAX_COUNTS], n_counts;
  const char *aggregator, *config;
} options;

static int usage(void) {
  fprintf(stderr, "usage: poisoning [--rounds N] [--seeds K] [--attack NAME] [--attackers N[,N...]] "
                  "[--aggregator TYPE] [--config TEXT] [--check]\n");
  return 2;
}

/* "2,3": attacker counts, each 1..MAX_ATTACKERS. */
static int parse_counts(const char *v, options *o) {
  o->n_counts = 0;
  for (const char *p = v; *p;) {
    char *end;
    long n = strtol(p, &end, 10);
    if (end == p || n < 1 || n > MAX_ATTACKERS || o->n_counts == MAX_COUNTS) return -1;
    o->counts[o->n_counts++] = (int)n;
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return -1;
  }
  return o->n_counts ? 0 : -1;
}

static int parse(int argc, char **argv, options *o) {
  *o = (options){30, 3, 0, -1, {2, 3}, 2, NULL, NULL};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--check") == 0) {
      o->check = 1;
      continue;
    }
    if (!v) return usage();
    i++;
    if (strcmp(a, "--rounds") == 0) o->rounds = atoi(v);
    else if (strcmp(a, "--seeds") == 0) o->seeds = atoi(v);
    else if (strcmp(a, "--aggregator") == 0) o->aggregator = v;
    else if (strcmp(a, "--config") == 0) o->config = v;
    else if (strcmp(a, "--attackers") == 0) {
      if (parse_counts(v, o)) return usage();
    } else if (strcmp(a, "--attack") == 0) {
      for (int k = 0; k < N_ATTACKS; k++)
        if (strcmp(v, ATTACK_NAMES[k]) == 0) o->only = k;
      if (o->only < 0) return usage();
    } else return usage();
  }
  return o->rounds < 1 || o->seeds < 1 ? usage() : 0;
}

/* ---- the malicious Model: the shipped CpuMlp with Fit's outputs altered ------------------ */

static int out_of_memory(bb_error *err) {
  if (err) {
    err->code = BB_ERR_NOMEM;
    snprintf(err->message, sizeof err->message, "liar: out of memory");
  }
  return BB_ERR_NOMEM;
}

static const bb_component_type *honest_model; /* the shipped CpuMlp */

typedef struct liar {
  void *inner;
  attack mode;
} liar;

static attack creating_mode; /* what the next liar created does (set before each install) */

static int liar_create(const bb_component_init *init, void **self, bb_error *err) {
  liar *l = calloc(1, sizeof *l);
  if (!l) return out_of_memory(err);
  l->mode = creating_mode;
  int rc = honest_model->create(init, &l->inner, err);
  if (rc) free(l);
  else *self = l;
  return rc;
}

static void liar_destroy(void *self) {
  liar *l = self;
  honest_model->destroy(l->inner);
  free(l);
}

/* The update u the client trained, rewritten from the global model g it started from. */
static void rewrite(attack mode, const float *g, float *u, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (mode == SCALE || mode == SYBIL) u[i] *= 100.0f;
    else if (mode == SIGNFLIP) u[i] = -u[i];
    else if (mode == REVERSE || mode == REVERSE_SAMPLES) u[i] = g[i] - (u[i] - g[i]);
    else if (mode == HUGE) u[i] = 3e38f;
  }
  if (mode == NAN_UPDATE) u[n / 2] = NAN;
}

static int liar_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  liar *l = self;
  int rc = honest_model->invoke(l->inner, ctx, call, err);
  if (rc || strcmp(call->op_type, "Fit") != 0 || call->n_outputs < 2 || !call->outputs[0] || l->mode == LABEL_FLIP)
    return rc;
  const bb_tensor *trained = bb_val_as_tensor(call->outputs[0]);
  const bb_tensor *global = bb_val_as_tensor(call->inputs[0]);
  bb_tensor *u = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, trained->rank, trained->dims);
  if (!u) return out_of_memory(err);
  memcpy(bb_tensor_data(u), bb_tensor_data(trained), (size_t)trained->numel * sizeof(float));
  rewrite(l->mode, bb_tensor_data(global), bb_tensor_data(u), (size_t)trained->numel);
  bb_val *v = bb_val_tensor(bb_ctx_allocator(ctx), u);
  bb_tensor_release(u);
  if (!v) return out_of_memory(err);
  bb_val_release(call->outputs[0]);
  call->outputs[0] = v;
  if (l->mode == SAMPLES || l->mode == REVERSE_SAMPLES) {
    bb_val *claim = bb_val_u64(bb_ctx_allocator(ctx), BB_VAL_U64, 1000000000000ull);
    if (!claim) return out_of_memory(err);
    bb_val_release(call->outputs[1]);
    call->outputs[1] = claim;
  }
  return 0;
}

static int liar_save(const void *self, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  return honest_model->save(((const liar *)self)->inner, alloc, out, len, err);
}

static int liar_load(void *self, const uint8_t *data, size_t len, bb_error *err) {
  return honest_model->load(((liar *)self)->inner, data, len, err);
}

/* ---- one run ------------------------------------------------------------------------------ */

typedef struct run {
  bb_sim *sim;
  bb_node **sybils;
  size_t n_sybils;
  bb_peer_id server, first_client;
  int round;
  float accuracy;
} run;

static void observe(void *user, const bb_peer_id *peer, const bb_step *s) {
  run *r = user;
  if (s->kind != BB_STEP_APP_EVENT || !s->value || !bb_peer_id_equal(peer, &r->server)) return;
  if (strcmp(s->topic, "round") == 0 && bb_val_is_u64(s->value)) r->round = (int)bb_val_as_u64(s->value);
  if (strcmp(s->topic, "accuracy") == 0 && bb_val_kind_of(s->value) == BB_VAL_TENSOR)
    r->accuracy = *(const float *)bb_tensor_data(bb_val_as_tensor(s->value));
}

/* The Sybils overhear the broadcast: what reaches the first client reaches them too. */
static void overhear(void *user, const bb_sim_delivery *d) {
  run *r = user;
  if (!d->accepted || !bb_peer_id_equal(d->from, &r->server) || !bb_peer_id_equal(d->to, &r->first_client)) return;
  for (size_t i = 0; i < r->n_sybils; i++)
    bb_node_deliver(r->sybils[i], &r->server, d->bytes, d->len, d->arrived_ns, NULL);
}

typedef struct world {
  const uint8_t *artifact;
  size_t artifact_len;
  const bb_registry *honest, *malicious, *server;
  const char *server_config; /* the aggregator slot's config on the server, or NULL */
  const bb_peer_id *peers;
  size_t n_peers;
} world;

/* Peer i of the world (0: the server), knowing every other peer's address. */
static int install(const world *w, size_t i, const bb_registry *reg, const bb_dataset *data, uint64_t seed,
                   bb_node **out, bb_error *err) {
  static const char *const SERVER_TARGETS[] = {"FedDigits", "FedDigits_server"};
  static const char *const CLIENT_TARGETS[] = {"FedDigits_clients"};
  bb_slot_config slots[2] = {{"data", NULL, data}, {"aggregator", w->server_config, NULL}};
  bb_fed_peers net = {w->artifact, w->artifact_len, w->peers, w->n_peers, seed, NULL};
  return bb_fed_install_peer(&net, i, reg, i ? CLIENT_TARGETS : SERVER_TARGETS, i ? 1 : 2, slots,
                             i == 0 && w->server_config ? 2 : 1, out, err);
}

/* A copy of `shard` whose every label y is 9 - y, or NULL when out of memory. */
static bool flipped_copy(const bb_dataset *shard, bb_dataset *out) {
  *out = *shard;
  out->features = malloc(shard->n * shard->dim * sizeof(float));
  out->labels = malloc(shard->n * sizeof(float));
  if (!out->features || !out->labels) {
    free(out->features);
    free(out->labels);
    return false;
  }
  memcpy(out->features, shard->features, shard->n * shard->dim * sizeof(float));
  for (size_t r = 0; r < shard->n; r++) out->labels[r] = 9.0f - shard->labels[r];
  return true;
}

/* Final held-out accuracy of one attack by `attackers` clients for one seed; NAN when the
 * rounds stopped closing, a negative value on failure. */
static double play(const world *w0, attack mode, int attackers, int rounds, uint64_t seed) {
  bb_error err;
  bb_digits_split d;
  if (bb_digits_split_load(NULL, N_CLIENTS, 3, seed, &d, &err)) {
    fprintf(stderr, "poisoning: %s\n", err.message);
    return -1;
  }
  const size_t liars = mode == CLEAN || mode == SYBIL ? 0 : one_client(mode) ? 1 : (size_t)attackers;
  const size_t n_sybils = mode == SYBIL ? (size_t)attackers : 0, n_peers = 1 + N_CLIENTS + n_sybils;
  bb_peer_id peers[1 + N_CLIENTS + MAX_ATTACKERS];
  for (size_t i = 0; i < n_peers; i++) peers[i] = bb_peer_id_from_u64(i + 1);
  world w = *w0;
  w.peers = peers;
  w.n_peers = n_peers;
  bb_node *nodes[1 + N_CLIENTS + MAX_ATTACKERS] = {0};
  bb_dataset flipped[MAX_ATTACKERS] = {{0}};
  run r = {0};
  r.server = peers[0];
  r.first_client = peers[1];
  r.sybils = nodes + 1 + N_CLIENTS;
  r.n_sybils = n_sybils;
  double result = -1;
  int rc = bb_fed_sim_new(seed, 0, &r.sim, &err);
  /* the last `liars` clients lie; the Sybils train on the first shard and scale what they
   * send */
  for (size_t i = 0; i < n_peers && !rc; i++) {
    const bool lies = (i > N_CLIENTS - liars && i <= N_CLIENTS) || i > N_CLIENTS;
    creating_mode = mode;
    const bb_registry *reg = i == 0 ? w.server : lies && mode != LABEL_FLIP && mode != SILENT ? w.malicious : w.honest;
    const bb_dataset *data = i == 0 ? &d.test : &d.shards[i <= N_CLIENTS ? i - 1 : 0];
    if (lies && mode == LABEL_FLIP) {
      bb_dataset *f = &flipped[i - (N_CLIENTS - liars) - 1];
      if (!flipped_copy(data, f)) rc = out_of_memory(&err);
      data = f;
    }
    if (!rc) rc = install(&w, i, reg, data, seed, &nodes[i], &err);
    if (!rc) rc = bb_sim_attach(r.sim, nodes[i], &peers[i], &err);
    if (!rc && lies && mode == SILENT) rc = bb_sim_crash(r.sim, &peers[i]);
  }
  for (size_t i = 1; i < n_peers && !rc; i++)
    rc = bb_fed_bind_peers(nodes[i], "FedDigits_clients", "server", &peers[0], 1, &err);
  if (!rc) {
    bb_sim_set_observer(r.sim, observe, &r);
    bb_sim_set_tracer(r.sim, overhear, &r);
    rc = bb_fed_start_rounds(nodes[0], "FedDigits", "clients", peers + 1, N_CLIENTS, &d.test, &err);
  }
  while (!rc && r.round < rounds) {
    rc = bb_sim_step(r.sim, &err);
    if (bb_sim_now(r.sim) > (uint64_t)rounds * 4000000000ull) {
      r.accuracy = NAN;
      break;
    }
  }
  if (rc < 0) fprintf(stderr, "poisoning: %s: %s\n", ATTACK_NAMES[mode], err.message);
  else result = r.accuracy;
  bb_sim_free(r.sim);
  for (size_t i = 0; i < n_peers; i++) bb_node_free(nodes[i]);
  for (size_t i = 0; i < MAX_ATTACKERS; i++) {
    free(flipped[i].features);
    free(flipped[i].labels);
  }
  bb_digits_split_free(&d);
  return result;
}

/* A registry of the shipped types with `type` standing in for `under` (NULL: as shipped). */
static bb_registry *registry_with(const char *under, const bb_component_type *type, bb_component_type *alias) {
  bb_registry *shipped = bb_registry_new(NULL), *reg = bb_registry_new(NULL);
  bb_error err;
  if (!shipped || !reg || bb_registry_add_shipped(shipped, &err)) {
    bb_registry_free(shipped);
    bb_registry_free(reg);
    return NULL;
  }
  if (type) {
    *alias = *type;
    alias->type_name = under;
  }
  for (size_t i = 0; i < bb_registry_count(shipped); i++) {
    const bb_component_type *t = bb_registry_at(shipped, i);
    if (type && strcmp(t->type_name, under) == 0) t = alias;
    if (bb_registry_add(reg, t, &err)) {
      bb_registry_free(shipped);
      bb_registry_free(reg);
      return NULL;
    }
  }
  bb_registry_free(shipped);
  return reg;
}

/* The mean accuracy of one attack over the seeds: NAN when a run stalled, negative on
 * failure. */
static double mean_over_seeds(const world *w, const options *o, attack a, int attackers) {
  double sum = 0;
  for (int s = 1; s <= o->seeds; s++) {
    const double acc = play(w, a, attackers, o->rounds, (uint64_t)s);
    if (acc < 0) return -1;
    sum += acc;
  }
  return sum / o->seeds;
}

int main(int argc, char **argv) {
  options o;
  if (parse(argc, argv, &o)) return 2;
  bb_error err;
  world w = {0};
  uint8_t *artifact = NULL;
  if (bb_example_compile(&BB_EXAMPLE_FEDERATED_DIGITS, 0, &artifact, &w.artifact_len, &err))
    return fprintf(stderr, "poisoning: %s\n", err.message), 1;
  w.artifact = artifact;
  w.server_config = o.config;

  bb_registry *shipped = registry_with(NULL, NULL, NULL);
  if (!shipped) return fprintf(stderr, "poisoning: cannot make a registry\n"), 1;
  honest_model = bb_registry_find(shipped, "CpuMlp");
  static const bb_component_type LIAR = {
      .struct_size = sizeof(bb_component_type),
      .type_name = "CpuMlp",
      .roles = 1u << BB_ROLE_MODEL,
      .create = liar_create,
      .destroy = liar_destroy,
      .invoke = liar_invoke,
      .save = liar_save,
      .load = liar_load,
  };
  bb_component_type liar_alias, aggregator_alias;
  bb_registry *malicious = registry_with("CpuMlp", &LIAR, &liar_alias);
  const bb_component_type *aggregator = o.aggregator ? bb_registry_find(shipped, o.aggregator) : NULL;
  if (o.aggregator && !aggregator) return fprintf(stderr, "poisoning: no shipped type %s\n", o.aggregator), 2;
  bb_registry *server = aggregator ? registry_with("FedAvg", aggregator, &aggregator_alias) : shipped;
  if (!malicious || !server) return fprintf(stderr, "poisoning: cannot make a registry\n"), 1;
  w.honest = shipped;
  w.malicious = malicious;
  w.server = server;

  printf("poisoning: federated_digits, %d clients (label-skewed), %d rounds, mean of seeds 1..%d; aggregator %s%s%s\n",
         N_CLIENTS, o.rounds, o.seeds, o.aggregator ? o.aggregator : "FedAvg (the artifact's)", o.config ? " " : "",
         o.config ? o.config : "");
  printf("%-10s %-40s", "attack", "the attackers...");
  for (int c = 0; c < o.n_counts; c++) printf("   %d of %d  vs clean", o.counts[c], N_CLIENTS);
  printf("\n");
  fflush(stdout);
  double clean = NAN;
  int failed = 0;
  for (int a = 0; a < N_ATTACKS; a++) {
    if (o.only >= 0 && a != o.only && a != CLEAN) continue;
    printf("%-10s %-40s", ATTACK_NAMES[a], ATTACK_TEXT[a]);
    const int columns = a == CLEAN || one_client((attack)a) ? 1 : o.n_counts;
    for (int c = 0; c < columns; c++) {
      const double mean = mean_over_seeds(&w, &o, (attack)a, o.counts[c]);
      if (mean < 0) {
        failed = 1;
        printf(" %17s", "failed");
        continue;
      }
      if (a == CLEAN) clean = mean;
      const double delta = mean - clean;
      const bool bad = a == CLEAN ? !(mean >= CLEAN_FLOOR) : checked((attack)a) && !(delta >= -CHECK_POINTS);
      if (isnan(mean)) printf(" %17s", "stalled");
      else printf("   %6.3f  %+7.3f%s", mean, delta, o.check && bad ? "!" : "");
      failed |= o.check && bad;
    }
    printf("%s\n", checked((attack)a) ? "" : "   (not checked)");
    fflush(stdout);
  }
  if (o.check && failed)
    printf("failed: %s\n", !(clean >= CLEAN_FLOOR) ? "the clean run is below 0.90"
                                                   : "an attack (!) costs more than 3 points");
  if (server != shipped) bb_registry_free(server);
  bb_registry_free(malicious);
  bb_registry_free(shipped);
  bb_buffer_free(NULL, artifact);
  return failed;
}
