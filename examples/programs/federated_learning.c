/* federated_learning: three Modules compiled apart federate over named wires.
 *
 *   federated_learning [--rounds N] [--clients N] [--seed S] [--quiet]
 *
 * STEP 1-3  records and compiles the example's three Modules (ClientLogic, ServerLogic,
 *           ServerReduce; src/programs/federated_learning.c), one artifact each, and
 *           checks their function and role-op counts by counting the nodes of the
 *           compiled artifacts.
 * STEP 4    asks the artifacts' wire tables whether they can talk, pair by pair, before
 *           anything is installed: every pair shares exactly the wire one sends and the
 *           other receives, with types that agree.
 * STEP 5    installs them on separate peers over the simulated network — ClientLogic on
 *           clients 101.., ServerLogic and ServerReduce side by side on one node of the
 *           server, peer 100 — and runs the rounds: each client's bootstrap pins the
 *           server's address and Announces to the GlobalRegistry; ServerReduce's FedAvg
 *           closes a round on an Interval tick and sends the global model to ServerLogic
 *           (on the same peer), which loads it, samples 2 clients from the registry's
 *           live view and sends them [params, round]; each client trains on a batch of
 *           its own data (Fit) and sends [params, samples, round] back to ServerReduce,
 *           which Contributes. Every aggregate is checked against the mean of the
 *           updates the clients sent in that round, weighted by their sample counts each
 *           cut to the round's median count (FedAvg's default cap), computed here.
 *
 * Exits 0 only when every count matches, every pair of artifacts can talk, every client
 * joined the registry, and N rounds closed with aggregates that match, without a single
 * refused fill or failed op. The Modules bind StubModel/StubLoader; this program
 * installs them as the shipped CpuMlp/ArraySource (registry aliases). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/dataset.h"
#include "bb/roles.h"
#include "bb/sim.h"
#include "programs/examples.h"

#define MAX_CLIENTS 16
#define PER_ROUND 2
#define FEATURES 4
#define MS 1000000ull
#define MODEL_CONFIG "inputs=4,hidden=8,outputs=2,lr=0.2,momentum=0,fit_steps=1"

static int quiet;
#define SAY(...) (quiet ? (void)0 : (void)printf(__VA_ARGS__))

static int fail(const char *what, const bb_error *err) {
  fprintf(stderr, "federated_learning: %s: %s\n", what, err ? err->message : "");
  return 1;
}

/* ---- STEP 1-3: the three programs and their role-op counts ------------------------------------ */

typedef struct op_count {
  const char *name; /* "role.model.Params" */
  int count;
} op_count;

typedef struct counted_op {
  char name[96];
  int count;
} counted_op;

/* Per module: the role ops of its body. */
static const op_count EXPECTED[3][3] = {
    {{"role.model.Fit", 1}},
    {{"role.model.LoadParameters", 1}, {"role.peer_selector.Sample", 1}, {"role.model.Params", 1}},
    {{"role.aggregator.Contribute", 1}, {"role.aggregator.Aggregate", 1}},
};
static const char *const MODULE_NAMES[3] = {"ClientLogic", "ServerLogic", "ServerReduce"};

#define ROLE_PREFIX BB_DOMAIN_FRAMEWORK "."

/* Counts the role ops of every partition function (not the bootstrap) into out; returns
 * how many distinct ones. */
static size_t count_role_ops(const bb_model *m, counted_op *out, size_t cap) {
  size_t n = 0;
  for (size_t f = 0; f < m->functions.len; f++) {
    const bb_function *fn = m->functions.items[f];
    if (!fn->name || strstr(fn->name, BB_BOOTSTRAP_SUFFIX)) continue;
    for (size_t i = 0; i < fn->nodes.len; i++) {
      const bb_ir_node *nd = fn->nodes.items[i];
      if (!nd->domain || strncmp(nd->domain, ROLE_PREFIX "role.", strlen(ROLE_PREFIX "role.")) != 0) continue;
      char name[96];
      snprintf(name, sizeof name, "%s.%s", nd->domain + strlen(ROLE_PREFIX), nd->op_type);
      size_t k = 0;
      while (k < n && strcmp(out[k].name, name) != 0) k++;
      if (k == n) {
        if (n == cap) continue;
        memcpy(out[n].name, name, sizeof name);
        out[n++].count = 0;
      }
      out[k].count++;
    }
  }
  return n;
}

static int compile_and_count(uint8_t *art[3], size_t len[3], bb_model *models[3]) {
  const bb_example *ex = &BB_EXAMPLE_FEDERATED_LEARNING;
  bb_error err;
  int ok = 1;
  for (size_t i = 0; i < ex->n_modules; i++) {
    const bb_module *mod = ex->modules[i];
    bb_model *rec = NULL;
    if (bb_module_build(mod, NULL, &rec, &err)) return fail(mod->name, &err);
    size_t recorded = rec->functions.len;
    bb_model_free(rec);
    SAY("STEP 1  %-12s recorded: body 1 + bootstrap %zu\n", mod->name, recorded - 1);
    if (recorded != (i == 0 ? 2u : 1u)) ok = 0;
    if (bb_example_compile(ex, i, &art[i], &len[i], &err)) return fail(mod->name, &err);
    if (bb_model_decode(art[i], len[i], NULL, NULL, &models[i], &err)) return fail(mod->name, &err);
    SAY("STEP 2  %-12s compiled: %zu function(s), %zu bytes\n", mod->name, models[i]->functions.len, len[i]);
    counted_op got[16];
    size_t n = count_role_ops(models[i], got, 16);
    SAY("STEP 3  %-12s role ops:", mod->name);
    for (size_t k = 0; k < n; k++) SAY(" %s x%d", got[k].name, got[k].count);
    SAY("\n");
    size_t expected = 0;
    for (size_t e = 0; e < 3 && EXPECTED[i][e].name; e++, expected++) {
      int seen = 0;
      for (size_t k = 0; k < n; k++)
        if (strcmp(got[k].name, EXPECTED[i][e].name) == 0) seen = got[k].count;
      if (seen != EXPECTED[i][e].count) {
        fprintf(stderr, "federated_learning: %s has %s x%d, expected x%d\n", mod->name, EXPECTED[i][e].name, seen,
                EXPECTED[i][e].count);
        ok = 0;
      }
    }
    if (n != expected) {
      fprintf(stderr, "federated_learning: %s has %zu kinds of role op, expected %zu\n", mod->name, n, expected);
      ok = 0;
    }
  }
  return ok ? 0 : 1;
}

/* ---- STEP 4: can they talk? -------------------------------------------------------------------- */

static int check_wires(bb_model *models[3]) {
  /* (sender, receiver, the one wire between them) */
  static const struct {
    int from, to;
    const char *wire;
  } PAIRS[] = {{1, 0, BB_FL_WIRE_SERVER_PARAMS}, {0, 2, BB_FL_WIRE_UPDATED_PARAMS}, {2, 1, BB_FL_WIRE_GLOBAL}};
  int rc = 0;
  for (size_t p = 0; p < 3; p++) {
    char *text = NULL, want[160];
    bool talk = false;
    bb_error err;
    int a = PAIRS[p].from, b = PAIRS[p].to;
    if (bb_artifact_wires_compare(models[a], MODULE_NAMES[a], models[b], MODULE_NAMES[b], BB_ARTIFACT_TEXT, &text,
                                  NULL, &talk, &err))
      return fail("wires", &err);
    snprintf(want, sizeof want, "  pairs      %s  %s -> %s  Composite", PAIRS[p].wire, MODULE_NAMES[a],
             MODULE_NAMES[b]);
    bool ok = talk && strstr(text, "1 pair, 0 disagree") && strstr(text, want);
    SAY("STEP 4  %s and %s %s over %s\n", MODULE_NAMES[a], MODULE_NAMES[b], ok ? "can talk" : "CANNOT TALK",
        PAIRS[p].wire);
    if (!ok) {
      fprintf(stderr, "federated_learning: STEP 4:\n%s", text);
      rc = 1;
    }
    bb_buffer_free(NULL, text);
  }
  return rc;
}

/* ---- installing -------------------------------------------------------------------------------- */

/* The shipped registry plus StubModel = CpuMlp and StubLoader = ArraySource. */
static bb_component_type stub_model, stub_loader;

static bb_registry *make_registry(bb_error *err) {
  bb_registry *r = bb_registry_new(NULL);
  if (!r || bb_registry_add_shipped(r, err)) return bb_registry_free(r), NULL;
  stub_model = *bb_registry_find(r, "CpuMlp");
  stub_model.type_name = "StubModel";
  stub_loader = *bb_registry_find(r, "ArraySource");
  stub_loader.type_name = "StubLoader";
  if (bb_registry_add(r, &stub_model, err) || bb_registry_add(r, &stub_loader, err)) return bb_registry_free(r), NULL;
  return r;
}

/* A node of peer `id` running `n_art` artifacts, each with its own Module as target. */
static bb_node *install(const bb_registry *reg, uint64_t id, uint8_t *const *art, const size_t *len,
                        const int *modules, size_t n_art, const bb_slot_config *slots, size_t n_slots, uint64_t seed,
                        bb_error *err) {
  bb_node_config nc = {0};
  nc.struct_size = sizeof nc;
  nc.seed = seed;
  bb_install_artifact more[2];
  for (size_t k = 1; k < n_art; k++)
    more[k - 1] = (bb_install_artifact){art[modules[k]], len[modules[k]], &MODULE_NAMES[modules[k]], 1};
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = bb_peer_id_from_u64(id);
  bb_address me = bb_address_p2p(&a.self);
  a.addresses = &me;
  a.n_addresses = 1;
  a.artifact = art[modules[0]];
  a.artifact_len = len[modules[0]];
  a.targets = &MODULE_NAMES[modules[0]];
  a.n_targets = 1;
  a.more = more;
  a.n_more = n_art - 1;
  a.registry = reg;
  a.slots = slots;
  a.n_slots = n_slots;
  a.config = &nc;
  bb_node *n = NULL;
  bb_install_error_kind kind;
  if (bb_install(&a, &n, &kind, err)) return NULL;
  return n;
}

/* A small two-class problem (the class is the sign of a fixed linear score), n rows. */
static int make_data(bb_dataset *ds, size_t n, uint64_t seed, bb_error *err) {
  if (bb_dataset_init(ds, n, FEATURES, 1, NULL, err)) return 1;
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    float score = 0;
    for (size_t d = 0; d < FEATURES; d++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      float x = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
      ds->features[i * FEATURES + d] = x;
      score += x * (float)(d % 2 ? -1 : 1) * (float)(d + 1);
    }
    ds->labels[i] = score > 0 ? 1.0f : 0.0f;
  }
  return 0;
}

/* ---- STEP 5: the rounds ------------------------------------------------------------------------ */

/* What the clients sent, per round, and what the server aggregated. The values of one
 * run arrive as separate APP_EVENTs; a run's parts are collected until all are in. */
#define MAX_ROUNDS 64
#define MAX_PARAMS 512
typedef struct pending {
  float params[MAX_PARAMS];
  uint64_t samples, round;
  unsigned have; /* bits: 1 params, 2 samples, 4 round */
} pending;

typedef struct round_log {
  uint64_t failures;
  size_t param_len;
  float update[MAX_ROUNDS][PER_ROUND][MAX_PARAMS]; /* the updates sent for each round */
  uint64_t samples[MAX_ROUNDS][PER_ROUND];
  uint64_t senders[MAX_ROUNDS];
  pending client[MAX_CLIENTS], server;
  int checked, mismatched, last_round;
} round_log;

static void take(pending *p, const bb_step *s, const char *params, const char *samples, const char *round,
                 size_t *param_len) {
  if (strcmp(s->topic, params) == 0 && bb_val_kind_of(s->value) == BB_VAL_TENSOR) {
    const bb_tensor *t = bb_val_as_tensor(s->value);
    *param_len = (size_t)t->numel < MAX_PARAMS ? (size_t)t->numel : MAX_PARAMS;
    memcpy(p->params, bb_tensor_data(t), *param_len * sizeof(float));
    p->have |= 1;
  } else if (samples && strcmp(s->topic, samples) == 0 && bb_val_is_u64(s->value)) {
    p->samples = bb_val_as_u64(s->value);
    p->have |= 2;
  } else if (strcmp(s->topic, round) == 0 && bb_val_is_u64(s->value)) {
    p->round = bb_val_as_u64(s->value);
    p->have |= 4;
  }
}

/* A round closed: the server's new global model must be the mean of the updates sent for
 * the round before, each weighing its sample count cut to the round's median count (of
 * PER_ROUND = 2 counts: their mean). */
static void check_round(round_log *r, uint64_t open, const float *global) {
  if (open == 0 || open > MAX_ROUNDS) return; /* round 0's global is the initial model */
  uint64_t closed = open - 1;
  const bool complete = r->senders[closed] == PER_ROUND;
  const uint64_t *n = r->samples[closed];
  const double cap = complete ? ((double)n[0] + (double)n[1]) / 2 : 0;
  const double w[PER_ROUND] = {fmin((double)n[0], cap), fmin((double)n[1], cap)};
  double worst = 0;
  for (size_t k = 0; k < r->param_len && complete; k++) {
    double want = (w[0] * r->update[closed][0][k] + w[1] * r->update[closed][1][k]) / (w[0] + w[1]);
    double diff = fabs(want - global[k]) / (1e-6 + fabs(want));
    if (diff > worst) worst = diff;
  }
  bool ok = complete && worst < 1e-5;
  r->checked++;
  r->mismatched += !ok;
  r->last_round = (int)open;
  SAY("round %llu closed: %llu updates, weights %g and %g; aggregate vs weighted mean: max rel. error %.1e %s\n",
      (unsigned long long)closed, (unsigned long long)r->senders[closed], w[0], w[1], worst, ok ? "ok" : "MISMATCH");
}

static void observe(void *user, const bb_peer_id *peer, const bb_step *s) {
  round_log *r = user;
  uint64_t id = 0;
  bb_peer_id_as_u64(peer, &id);
  if (s->kind == BB_STEP_OP_FAILED || s->kind == BB_STEP_WIRE_RECEIVE_FAILED ||
      s->kind == BB_STEP_PEER_RESOLVE_FAILED) {
    if (r->failures++ < 5)
      fprintf(stderr, "  peer %llu: %s %s %s\n", (unsigned long long)id, bb_step_kind_name(s->kind),
              s->op ? s->op : s->reason ? s->reason : "", s->detail ? s->detail : "");
    return;
  }
  if (s->kind != BB_STEP_APP_EVENT || !s->value) return;
  if (id == BB_FL_SERVER_PEER) {
    take(&r->server, s, "global_model", NULL, "global_round", &r->param_len);
    if (r->server.have == (1 | 4)) {
      check_round(r, r->server.round, r->server.params);
      r->server.have = 0;
    }
    return;
  }
  if (id <= BB_FL_SERVER_PEER || id > BB_FL_SERVER_PEER + MAX_CLIENTS) return;
  pending *p = &r->client[id - BB_FL_SERVER_PEER - 1];
  take(p, s, "update", "update_samples", "update_round", &r->param_len);
  if (p->have == 7) {
    if (p->round < MAX_ROUNDS && r->senders[p->round] < PER_ROUND) {
      const uint64_t at = r->senders[p->round]++;
      memcpy(r->update[p->round][at], p->params, r->param_len * sizeof(float));
      r->samples[p->round][at] = p->samples;
    } else if (p->round < MAX_ROUNDS) {
      r->senders[p->round]++; /* more senders than a round takes: the check fails */
    }
    p->have = 0;
  }
}

static int step5(const bb_registry *reg, uint8_t *art[3], size_t len[3], const bb_dataset *data, int n_clients,
                 int rounds, uint64_t seed) {
  bb_error err;
  round_log *log = calloc(1, sizeof *log);
  bb_sim *sim = NULL;
  bb_sim_config sc = {sizeof sc, seed, 5 * MS, 2 * MS, 0, 0, 0, 0, 0, 0};
  bb_node *nodes[MAX_CLIENTS + 1] = {0};
  int rc = log ? 0 : fail("out of memory", NULL);
  if (!rc && bb_sim_new(&sc, &sim, &err)) rc = fail("simulator", &err);
  if (!rc) bb_sim_set_observer(sim, observe, log);
  /* the server: ServerLogic and ServerReduce on one node, sharing the "model" slot
   * (ServerLogic loads each global model into it; FedAvg's round 0 is its parameters) */
  static const int SERVER_MODULES[] = {1, 2};
  bb_slot_config server_slots[] = {{"model", MODEL_CONFIG, NULL}};
  bb_peer_id server = bb_peer_id_from_u64(BB_FL_SERVER_PEER);
  if (!rc && (!(nodes[0] = install(reg, BB_FL_SERVER_PEER, art, len, SERVER_MODULES, 2, server_slots, 1, seed, &err)) ||
              bb_sim_attach(sim, nodes[0], &server, &err)))
    rc = fail("install the server", &err);
  bb_val *server_peer = bb_val_peers(NULL, &server, 1);
  if (!rc && bb_node_bind_input(nodes[0], "ServerReduce", "server_peers", server_peer, &err))
    rc = fail("bind the server's own peer", &err);
  for (int i = 0; !rc && i < n_clients; i++) {
    uint64_t id = BB_FL_SERVER_PEER + 1 + (uint64_t)i;
    bb_peer_id p = bb_peer_id_from_u64(id);
    /* batches of 4, 8, 12, ... rows: the clients' FedAvg weights differ */
    char batch[16];
    snprintf(batch, sizeof batch, "batch=%d", 4 * (i % 3 + 1));
    bb_slot_config slots[2] = {{"model", MODEL_CONFIG, NULL}, {"data", batch, &data[i]}};
    static const int CLIENT_MODULE[] = {0};
    if (!(nodes[1 + i] = install(reg, id, art, len, CLIENT_MODULE, 1, slots, 2, seed + 1 + (uint64_t)i, &err)) ||
        bb_sim_attach(sim, nodes[1 + i], &p, &err) ||
        bb_node_bind_input(nodes[1 + i], "ClientLogic", "server_peer", server_peer, &err))
      rc = fail("install a client", &err);
  }
  bb_val_release(server_peer);
  for (int i = 0; !rc && i <= n_clients; i++)
    if (bb_node_run_bootstrap(nodes[i], 0, &err)) rc = fail("bootstrap", &err);
  /* the clients' bootstraps announce; the server starts its rounds once they joined */
  if (!rc && bb_sim_run_until(sim, 100 * MS, &err) < 0) rc = fail("simulate", &err);
  uint64_t joined = rc ? 0 : bb_node_counter(nodes[0], "global_registry.joined");
  SAY("STEP 5  server on peer %d (ServerLogic + ServerReduce), ClientLogic on %d..%d; registry: %llu joined\n",
      BB_FL_SERVER_PEER, BB_FL_SERVER_PEER + 1, BB_FL_SERVER_PEER + n_clients, (unsigned long long)joined);
  if (!rc && joined != (uint64_t)n_clients) rc = fail("the clients did not all join the registry", NULL);
  if (!rc && bb_node_invoke(nodes[0], "ServerReduce", NULL, 0, bb_sim_now(sim), &err))
    rc = fail("start the rounds", &err);
  uint64_t limit = (uint64_t)(rounds + 5) * 4 * (uint64_t)BB_FL_ROUND_NS;
  while (!rc && log->last_round <= rounds && bb_sim_now(sim) < limit) {
    int s = bb_sim_step(sim, &err);
    if (s < 0) rc = fail("simulate", &err);
    if (s == 1) break;
  }
  if (!rc) {
    uint64_t wires = 0;
    for (int i = 0; i <= n_clients; i++) wires += bb_node_counter(nodes[i], "wire.fills_delivered");
    SAY("%llu fills delivered over the three wires, %llu failures\n", (unsigned long long)wires,
        (unsigned long long)log->failures);
    if (log->checked < rounds || log->mismatched || log->failures) {
      fprintf(stderr, "federated_learning: %d round(s) checked (%d wanted), %d mismatched, %llu failures\n",
              log->checked, rounds, log->mismatched, (unsigned long long)log->failures);
      rc = 1;
    }
  }
  if (sim) bb_sim_free(sim);
  for (int i = 0; i <= n_clients; i++) bb_node_free(nodes[i]);
  free(log);
  return rc;
}

int main(int argc, char **argv) {
  int rounds = 5, n_clients = 3;
  uint64_t seed = 1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quiet") == 0) quiet = 1;
    else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (strcmp(argv[i], "--clients") == 0 && i + 1 < argc) n_clients = atoi(argv[++i]);
    else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
    else return fprintf(stderr, "usage: federated_learning [--rounds N] [--clients N] [--seed S] [--quiet]\n"), 2;
  }
  if (rounds < 1 || rounds >= MAX_ROUNDS - 1) return fprintf(stderr, "federated_learning: --rounds 1..%d\n", MAX_ROUNDS - 2), 2;
  if (n_clients < PER_ROUND || n_clients > MAX_CLIENTS)
    return fprintf(stderr, "federated_learning: --clients %d..%d\n", PER_ROUND, MAX_CLIENTS), 2;
  bb_error err;
  uint8_t *art[3] = {0};
  size_t len[3] = {0};
  bb_model *models[3] = {0};
  bb_dataset data[MAX_CLIENTS] = {{0}};
  bb_registry *reg = make_registry(&err);
  int rc = reg ? 0 : fail("registry", &err);
  for (int i = 0; !rc && i < n_clients; i++) /* shards of different sizes: FedAvg's weights differ */
    if (make_data(&data[i], 24 + 16 * (size_t)(i % 3), seed * 10 + (uint64_t)i, &err)) rc = fail("data", &err);
  if (!rc) rc = compile_and_count(art, len, models);
  if (!rc) rc = check_wires(models);
  if (!rc) rc = step5(reg, art, len, data, n_clients, rounds, seed);
  for (int i = 0; i < 3; i++) bb_buffer_free(NULL, art[i]), bb_model_free(models[i]);
  for (int i = 0; i < n_clients; i++) bb_dataset_free(&data[i]);
  bb_registry_free(reg);
  printf("federated_learning: %s\n", rc ? "FAILED" : "ok");
  return rc;
}
