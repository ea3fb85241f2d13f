/* federated_learning (roles.md §6.5), run for real.
 *
 *   federated_learning [--rounds N] [--seed S] [--quiet]
 *
 * STEP 1-3  compiles the example's three Modules (ClientLogic, ServerLogic, ServerReduce),
 *           one artifact each, prints their function and role-op counts and checks the
 *           role-op counts §6.5 lists, by counting the nodes of the compiled artifacts.
 * STEP 4    installs them where §6.5 puts them — ClientLogic on peers 101..103
 *           (addresses /p2p/10x/site/1..3), ServerLogic and ServerReduce on peer 100
 *           (/p2p/100/site/11, 12) — and runs the bootstraps over the simulated network:
 *           each client's bootstrap pins the server's address and Announces to the
 *           GlobalRegistry, and the server's Handshakes come back.
 * STEP 5    the rounds. Three separately compiled artifacts cannot carry data to each
 *           other (a Send reaches a wire.Recv of its own artifact), and §6.5 records no
 *           Aggregate; so the same round is recorded as one Module (FederatedRound,
 *           below): the server's FedAvg closes a round on an Interval tick, the server
 *           loads the new global model, samples 2 clients from the GlobalRegistry's live
 *           view and sends them the parameters; each client loads them, trains one SGD
 *           step on a batch of its own data and sends back [params, samples, round]; the
 *           server Contributes. The registry announce/handshake is what fills the view.
 *           Every aggregate is checked against the sample-weighted mean of the updates
 *           the clients actually sent in that round, computed here independently.
 *
 * Exits 0 only when every count matches, every client joined the registry, and N rounds
 * closed with aggregates that match. The Modules bind StubModel/StubLoader; this program
 * installs them as the shipped CpuMlp/ArraySource (a registry alias, docs/DEVIATIONS.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/dataset.h"
#include "bb/roles.h"
#include "bb/sim.h"
#include "programs/examples.h"

#define SERVER 100
#define N_CLIENTS 3
#define PER_ROUND 2
#define FEATURES 4
#define MS 1000000ull
#define ROUND_NS (200 * MS)

static int quiet;
#define SAY(...) (quiet ? (void)0 : (void)printf(__VA_ARGS__))

static int fail(const char *what, const bb_error *err) {
  fprintf(stderr, "federated_learning: %s: %s\n", what, err ? err->message : "");
  return 1;
}

/* ---- STEP 1-3: the three §6.5 programs and their role-op counts ----------------------------- */

typedef struct op_count {
  const char *name; /* "role.model.Params" */
  int count;
} op_count;

typedef struct counted_op {
  char name[96];
  int count;
} counted_op;

/* §6.5 STEP 3, per module. */
static const op_count EXPECTED[3][4] = {
    {{"role.data_source.NextBatch", 1}, {"role.model.Forward", 1}, {"role.model.LoadParameters", 1},
     {"role.model.Params", 1}},
    {{"role.model.Params", 1}, {"role.peer_selector.Sample", 1}},
    {{"role.aggregator.Contribute", 1}},
};

#define ROLE_PREFIX BB_DOMAIN_FRAMEWORK "."

/* Counts the role ops of every partition function (not the bootstrap) into out; returns
 * how many distinct ones. */
static size_t count_role_ops(const bb_model *m, counted_op *out, size_t cap) {
  size_t n = 0;
  for (size_t f = 0; f < m->functions.len; f++) {
    const bb_function *fn = m->functions.items[f];
    if (!fn->name || strstr(fn->name, "__bootstrap")) continue;
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

static int compile_and_count(uint8_t *art[3], size_t len[3]) {
  const bb_example *ex = &BB_EXAMPLE_FEDERATED_LEARNING;
  bb_error err;
  int ok = 1;
  for (size_t i = 0; i < ex->n_modules; i++) {
    const bb_module *mod = ex->modules[i];
    bb_model *rec = NULL, *m = NULL;
    if (bb_module_build(mod, NULL, &rec, &err)) return fail(mod->name, &err);
    size_t recorded = rec->functions.len;
    bb_model_free(rec);
    SAY("STEP 1  %-12s recorded: body 1 + bootstrap %zu\n", mod->name, recorded - 1);
    if (recorded != (i == 0 ? 2u : 1u)) ok = 0;
    if (bb_example_compile(ex, i, &art[i], &len[i], &err)) return fail(mod->name, &err);
    if (bb_model_decode(art[i], len[i], NULL, NULL, &m, &err)) return fail(mod->name, &err);
    SAY("STEP 2  %-12s compiled: %zu function(s), %zu bytes\n", mod->name, m->functions.len, len[i]);
    counted_op got[16];
    size_t n = count_role_ops(m, got, 16);
    SAY("STEP 3  %-12s role ops:", mod->name);
    for (size_t k = 0; k < n; k++) SAY(" %s x%d", got[k].name, got[k].count);
    SAY("\n");
    size_t expected = 0;
    for (size_t e = 0; e < 4 && EXPECTED[i][e].name; e++, expected++) {
      int seen = 0;
      for (size_t k = 0; k < n; k++)
        if (strcmp(got[k].name, EXPECTED[i][e].name) == 0) seen = got[k].count;
      if (seen != EXPECTED[i][e].count) {
        fprintf(stderr, "federated_learning: %s has %s x%d, §6.5 says x%d\n", mod->name, EXPECTED[i][e].name, seen,
                EXPECTED[i][e].count);
        ok = 0;
      }
    }
    if (n != expected) {
      fprintf(stderr, "federated_learning: %s has %zu kinds of role op, §6.5 lists %zu\n", mod->name, n, expected);
      ok = 0;
    }
    bb_model_free(m);
  }
  return ok ? 0 : 1;
}

/* ---- installing -------------------------------------------------------------------------- */

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

typedef struct install_spec {
  uint64_t peer;
  const bb_address *addrs;
  size_t n_addrs;
  const uint8_t *art;
  size_t len;
  const char *const *targets;
  size_t n_targets;
  const bb_slot_config *slots;
  size_t n_slots;
  uint64_t seed;
} install_spec;

static bb_node *install(const bb_registry *reg, const install_spec *s, bb_install_error_kind *kind, bb_error *err) {
  bb_node_config nc = {0};
  nc.struct_size = sizeof nc;
  nc.seed = s->seed;
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = bb_peer_id_from_u64(s->peer);
  a.addresses = s->addrs;
  a.n_addresses = s->n_addrs;
  a.artifact = s->art;
  a.artifact_len = s->len;
  a.targets = s->targets;
  a.n_targets = s->n_targets;
  a.registry = reg;
  a.slots = s->slots;
  a.n_slots = s->n_slots;
  a.config = &nc;
  bb_node *n = NULL;
  if (bb_install(&a, &n, kind, err)) return NULL;
  return n;
}

/* /p2p/<peer>/site/<site>, e.g. the §6.5 addresses /p2p/101/site/1 and /p2p/100/site/11
 * (peer ids are test identities, bb_peer_id_from_u64). */
static bb_address site_address(uint64_t peer, uint64_t site) {
  bb_address a = {.n = 2};
  a.seg[0].kind = BB_ADDR_P2P;
  a.seg[0].peer = bb_peer_id_from_u64(peer);
  a.seg[1].kind = BB_ADDR_SITE;
  a.seg[1].value = site;
  return a;
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

typedef struct observed {
  uint64_t failures;
} observed;

static void observe_failures(void *user, const bb_peer_id *peer, const bb_step *s) {
  observed *o = user;
  if (s->kind != BB_STEP_OP_FAILED && s->kind != BB_STEP_WIRE_RECEIVE_FAILED && s->kind != BB_STEP_PEER_RESOLVE_FAILED)
    return;
  uint64_t id = 0;
  bb_peer_id_as_u64(peer, &id);
  o->failures++;
  if (o->failures <= 5)
    fprintf(stderr, "  peer %llu: %s %s %s\n", (unsigned long long)id, bb_step_kind_name(s->kind), s->op ? s->op : "",
            s->detail ? s->detail : "");
}

/* STEP 4: each §6.5 artifact installed alone where §6.5 puts it. ServerReduce installs
 * and bootstraps; ClientLogic and ServerLogic each send to a value that only another
 * artifact receives, which no artifact can name (its Send finds no wire.Recv), so install
 * refuses them with UNRESOLVED_DESTINATION: checked here, and the reason STEP 5 runs the
 * same programs as one artifact. */
static int step4(const bb_registry *reg, uint8_t *art[3], size_t len[3], const bb_dataset *data, uint64_t seed) {
  static const char *const names[3] = {"ClientLogic", "ServerLogic", "ServerReduce"};
  static const bb_install_error_kind want[3] = {BB_INSTALL_UNRESOLVED_DESTINATION, BB_INSTALL_UNRESOLVED_DESTINATION,
                                                BB_INSTALL_OK};
  bb_address client_addrs[3] = {site_address(101, 1), site_address(101, 2), site_address(101, 3)};
  bb_address server_addrs[2] = {site_address(SERVER, 11), site_address(SERVER, 12)};
  bb_slot_config client_slots[2] = {{"model", "inputs=4,hidden=8,outputs=2", NULL}, {"data", "batch=8", &data[0]}};
  int rc = 0;
  for (int i = 0; i < 3; i++) {
    const char *target[] = {names[i]};
    install_spec spec = {i ? SERVER : 101, i ? server_addrs : client_addrs, i ? 2 : 3, art[i], len[i], target, 1,
                         client_slots, i == 0 ? 2 : i == 1 ? 1 : 0, seed}; /* ServerLogic: the model's */
    bb_error err;
    bb_install_error_kind kind = BB_INSTALL_OK;
    bb_node *node = install(reg, &spec, &kind, &err);
    bool installed = node != NULL, booted = false;
    size_t failed = 0;
    if (node) {
      const bb_step *steps;
      size_t n = 0;
      booted = bb_node_run_bootstrap(node, 0, &err) == 0 && bb_node_poll(node, 0, &steps, &n, &err) == 0;
      for (size_t k = 0; booted && k < n; k++) failed += steps[k].kind == BB_STEP_OP_FAILED;
      bb_node_free(node);
    }
    SAY("STEP 4  %-12s on peer %d: %s%s%s\n", names[i], i ? SERVER : 101,
        installed ? "installed, bootstrap ran" : bb_install_error_name(kind), installed ? "" : " — ",
        installed ? "" : err.message);
    if (kind != want[i] || (installed && (!booted || failed))) {
      fprintf(stderr, "federated_learning: STEP 4 %s: %s, expected %s\n", names[i], bb_install_error_name(kind),
              bb_install_error_name(want[i]));
      rc = 1;
    }
  }
  return rc;
}

/* ---- STEP 5: the round, recorded as one Module ------------------------------------------ */

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot VIEW = {BB_ROLE_PEER_SELECTOR, "view", "clients"};
static const bb_slot AGGREGATOR = {BB_ROLE_AGGREGATOR, "aggregator", NULL};

static void round_body(bb_rec *g, void *user) {
  (void)user;
  bb_value server = bb_rec_input(g, "server_peer", BB_TYPE_PEER_ID_VEC);

  /* ServerLogic, with the round loop §6.5 narrates: aggregate, load, sample, broadcast */
  bb_value global, round;
  bb_rec_aggregator_aggregate(g, &AGGREGATOR, bb_rec_interval(g, ROUND_NS), &global, &round);
  bb_value loaded = bb_rec_model_load_parameters(g, &MODEL, global);
  bb_value peers = bb_rec_peer_selector_sample_after(g, &VIEW, PER_ROUND, loaded);
  bb_rec_output(g, "global", global);
  bb_rec_output(g, "round", round);
  bb_value to_clients[2] = {global, round};
  bb_rec_net_out(g, "server_params", peers, bb_rec_bundle(g, to_clients, 2));

  /* ClientLogic: load the parameters and train on a batch of its own data (Fit: load,
   * NextBatch, one SGD step), then send [params, samples, round] back */
  static const char *const PARTS[] = {BB_TYPE_TENSOR_F32, BB_TYPE_ABSTRACT};
  bb_value got[2], trained, samples;
  bb_rec_unbundle(g, bb_rec_lookup_output(g, "server_params"), PARTS, got, 2);
  bb_rec_model_fit(g, &MODEL, got[0], &trained, &samples);
  bb_rec_output(g, "update", trained);
  bb_rec_output(g, "update_samples", samples);
  bb_rec_output(g, "update_round", got[1]);
  bb_value update[3] = {trained, samples, got[1]};
  bb_rec_net_out(g, "updated_params", server, bb_rec_bundle(g, update, 3));

  /* ServerReduce */
  bb_value received = bb_rec_lookup_output(g, "updated_params");
  bb_rec_aggregator_contribute(g, &AGGREGATOR, received, received);
}

/* ClientLogic's bootstrap: pin the server's address, announce. The address constant is
 * its text form, with the peer id in base58 as addresses are written. */
static const int64_t SERVER_ID[] = {SERVER};

static void round_bootstrap(bb_rec *g, void *user) {
  (void)user;
  static const int64_t one[] = {1};
  char text[256];
  bb_address server = site_address(SERVER, 11);
  size_t len = bb_address_to_text(&server, text, sizeof text);
  int64_t addr_dims[] = {(int64_t)len};
  bb_literal peer_lit = {BB_DTYPE_INT64, one, 1, SERVER_ID, sizeof SERVER_ID};
  bb_literal addr_lit = {BB_DTYPE_UINT8, addr_dims, 1, text, len};
  bb_value peer = bb_rec_constant(g, "server_peer_const", BB_TYPE_PEER_ID, &peer_lit);
  bb_rec_address_book_insert_many(g, peer, bb_rec_constant(g, "server_addrs_const", BB_TYPE_ADDRESS_VEC, &addr_lit));
  bb_rec_announce(g, peer);
}

static const bb_module ROUND = {sizeof(bb_module), "FederatedRound", round_body, round_bootstrap, NULL, NULL, 0};

static int compile_round(uint8_t **out, size_t *len, bb_error *err) {
  bb_model *m = NULL;
  uint8_t *bytes = NULL;
  size_t blen = 0;
  if (bb_module_build(&ROUND, NULL, &m, err) || bb_model_encode(m, &bytes, &blen, err)) return bb_model_free(m), 1;
  bb_model_free(m);
  bb_compiler *c = bb_compiler_new(NULL);
  static const bb_component_dep fedavg_deps[] = {{BB_ROLE_MODEL, "model"}};
  bb_compiler_set_permissive_types(c, true); /* round ids and sample counts are untyped */
  /* one artifact binds a slot to one type everywhere: "discovery" is the client half on
   * every peer, and hands the Announces that reach the server to its GlobalRegistryServer
   * (the PeerSelector "view") */
  int rc = bb_example_declare(c, "CpuMlp", NULL, 0, err) || bb_example_declare(c, "ArraySource", NULL, 0, err) ||
           bb_example_declare(c, "FedAvg", fedavg_deps, 1, err) ||
           bb_compiler_bind_model(c, "model", "CpuMlp", "inputs=4,hidden=8,outputs=2,lr=0.2,momentum=0,fit_steps=1,data=data", err) ||
           bb_compiler_bind_data_source(c, "data", "ArraySource", "batch=8", err) ||
           bb_compiler_bind_peer_selector(c, "view", "GlobalRegistryServer", "ttl_ms=3000", err) ||
           bb_compiler_bind_protocol(c, "discovery", "GlobalRegistryClient", "registry=view", err) ||
           bb_compiler_bind_aggregator(c, "aggregator", "FedAvg", "quorum=2,target=2,init=model", err) ||
           bb_compiler_compile(c, bytes, blen, out, len, err);
  bb_compiler_free(c);
  free(bytes);
  return rc;
}

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
  observed obs;
  size_t param_len;
  double sum[MAX_ROUNDS][MAX_PARAMS]; /* Σ samples · update, per round */
  uint64_t weight[MAX_ROUNDS], senders[MAX_ROUNDS];
  pending client[N_CLIENTS], server;
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

/* A round closed: the server's new global model must be the sample-weighted mean of the
 * updates sent for the round before. */
static void check_round(round_log *r, uint64_t open, const float *global) {
  if (open == 0 || open > MAX_ROUNDS) return; /* round 0's global is the initial model */
  uint64_t closed = open - 1;
  double worst = 0;
  for (size_t k = 0; k < r->param_len && r->weight[closed]; k++) {
    double want = r->sum[closed][k] / (double)r->weight[closed];
    double diff = fabs(want - global[k]) / (1e-6 + fabs(want));
    if (diff > worst) worst = diff;
  }
  bool ok = r->weight[closed] && r->senders[closed] == PER_ROUND && worst < 1e-5;
  r->checked++;
  r->mismatched += !ok;
  r->last_round = (int)open;
  SAY("round %llu closed: %llu updates, weights sum %llu; aggregate vs weighted mean: max rel. error %.1e %s\n",
      (unsigned long long)closed, (unsigned long long)r->senders[closed], (unsigned long long)r->weight[closed],
      worst, ok ? "ok" : "MISMATCH");
}

static void observe_round(void *user, const bb_peer_id *peer, const bb_step *s) {
  round_log *r = user;
  observe_failures(&r->obs, peer, s);
  if (s->kind != BB_STEP_APP_EVENT || !s->value) return;
  uint64_t id = 0;
  bb_peer_id_as_u64(peer, &id);
  if (id == SERVER) {
    take(&r->server, s, "global", NULL, "round", &r->param_len);
    if (r->server.have == (1 | 4)) {
      check_round(r, r->server.round, r->server.params);
      r->server.have = 0;
    }
    return;
  }
  if (id < 101 || id >= 101 + N_CLIENTS) return;
  pending *p = &r->client[id - 101];
  take(p, s, "update", "update_samples", "update_round", &r->param_len);
  if (p->have == 7) {
    if (p->round < MAX_ROUNDS) {
      for (size_t k = 0; k < r->param_len; k++) r->sum[p->round][k] += (double)p->samples * p->params[k];
      r->weight[p->round] += p->samples;
      r->senders[p->round]++;
    }
    p->have = 0;
  }
}

static int step5(const bb_registry *reg, const bb_dataset *data, int rounds, uint64_t seed) {
  bb_error err;
  uint8_t *art = NULL;
  size_t len = 0;
  if (compile_round(&art, &len, &err)) return fail("compile FederatedRound", &err);
  bb_model *m = NULL;
  if (bb_model_decode(art, len, NULL, NULL, &m, &err)) return free(art), fail("decode FederatedRound", &err);
  /* the partitions: the clients' one, and the server's (all the others) */
  const char *server_targets[8];
  const char *client_target = NULL;
  size_t n_server = 0;
  for (size_t f = 0; f < m->functions.len; f++) {
    const char *name = m->functions.items[f]->name;
    if (!name || !strchr(name, '#')) continue;
    if (strstr(name, "_clients#")) client_target = name;
    else if (n_server < 8) server_targets[n_server++] = name;
  }
  round_log *log = calloc(1, sizeof *log);
  bb_sim *sim = NULL;
  bb_sim_config sc = {sizeof sc, seed, 5 * MS, 2 * MS, 0, 0, 0, 0, 0, 0};
  bb_node *nodes[N_CLIENTS + 1] = {0};
  int rc = 0;
  if (!log || !client_target || !n_server) rc = fail("FederatedRound has no clients and server partitions", NULL);
  if (!rc && bb_sim_new(&sc, &sim, &err)) rc = fail("simulator", &err);
  if (!rc) bb_sim_set_observer(sim, observe_round, log);
  bb_address server_addrs[2] = {site_address(SERVER, 11), site_address(SERVER, 12)};
  /* every node builds every bound slot: the server's DataSource gets data it never reads */
  bb_slot_config server_data = {"data", NULL, &data[0]};
  install_spec ss = {SERVER, server_addrs, 2, art, len, server_targets, n_server, &server_data, 1, seed};
  bb_peer_id server = bb_peer_id_from_u64(SERVER);
  if (!rc && (!(nodes[0] = install(reg, &ss, NULL, &err)) || bb_sim_attach(sim, nodes[0], &server, &err)))
    rc = fail("install server", &err);
  bb_val *server_peer = bb_val_peers(NULL, &server, 1);
  for (int i = 0; !rc && i < N_CLIENTS; i++) {
    bb_peer_id p = bb_peer_id_from_u64(101 + (uint64_t)i);
    uint64_t id = 101 + (uint64_t)i;
    bb_address addrs[3] = {site_address(id, 1), site_address(id, 2), site_address(id, 3)};
    /* batches of 4, 8, 12 rows: the clients' FedAvg weights differ */
    char batch[16];
    snprintf(batch, sizeof batch, "batch=%d", 4 * (i + 1));
    bb_slot_config slots[1] = {{"data", batch, &data[i]}};
    const char *ct[] = {client_target};
    install_spec cs = {101 + (uint64_t)i, addrs, 3, art, len, ct, 1, slots, 1, seed + 1 + (uint64_t)i};
    if (!(nodes[1 + i] = install(reg, &cs, NULL, &err)) || bb_sim_attach(sim, nodes[1 + i], &p, &err) ||
        bb_node_bind_input(nodes[1 + i], client_target, "server_peer", server_peer, &err))
      rc = fail("install client", &err);
  }
  bb_val_release(server_peer);
  for (int i = 0; !rc && i <= N_CLIENTS; i++)
    if (bb_node_run_bootstrap(nodes[i], 0, &err)) rc = fail("bootstrap", &err);
  /* the clients' bootstraps announce; the server starts its rounds once they joined */
  if (!rc && bb_sim_run_until(sim, 100 * MS, &err) < 0) rc = fail("simulate", &err);
  uint64_t joined = rc ? 0 : bb_node_counter(nodes[0], "global_registry.joined");
  SAY("STEP 5  FederatedRound: %zu server partition(s) on 100, `%s` on 101..103; bootstraps ran; registry: %llu "
      "joined\n", n_server, client_target, (unsigned long long)joined);
  if (!rc && joined != N_CLIENTS) rc = fail("the clients did not all join the registry", NULL);
  if (!rc && bb_node_invoke(nodes[0], server_targets[0], NULL, 0, bb_sim_now(sim), &err)) rc = fail("start the server", &err);
  while (!rc && log->last_round <= rounds && bb_sim_now(sim) < (uint64_t)(rounds + 5) * 4 * ROUND_NS) {
    int s = bb_sim_step(sim, &err);
    if (s < 0) rc = fail("simulate", &err);
    if (s == 1) break;
  }
  if (!rc) {
    joined = bb_node_counter(nodes[0], "global_registry.joined");
    if (joined != N_CLIENTS || log->checked < rounds || log->mismatched || log->obs.failures) {
      fprintf(stderr, "federated_learning: %d round(s) checked (%d wanted), %d mismatched, %llu failures, %llu joined\n",
              log->checked, rounds, log->mismatched, (unsigned long long)log->obs.failures,
              (unsigned long long)joined);
      rc = 1;
    }
  }
  if (sim) bb_sim_free(sim);
  for (int i = 0; i <= N_CLIENTS; i++) bb_node_free(nodes[i]);
  free(log);
  bb_model_free(m);
  free(art);
  return rc;
}

int main(int argc, char **argv) {
  int rounds = 5;
  uint64_t seed = 1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quiet") == 0) quiet = 1;
    else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
    else return fprintf(stderr, "usage: federated_learning [--rounds N] [--seed S] [--quiet]\n"), 2;
  }
  if (rounds < 1 || rounds >= MAX_ROUNDS - 1) return fprintf(stderr, "federated_learning: --rounds 1..%d\n", MAX_ROUNDS - 2), 2;
  bb_error err;
  uint8_t *art[3] = {0};
  size_t len[3] = {0};
  bb_dataset data[N_CLIENTS] = {{0}};
  bb_registry *reg = make_registry(&err);
  int rc = reg ? 0 : fail("registry", &err);
  for (int i = 0; !rc && i < N_CLIENTS; i++) /* shards of different sizes: FedAvg's weights differ */
    if (make_data(&data[i], 24 + 16 * (size_t)i, seed * 10 + (uint64_t)i, &err)) rc = fail("data", &err);
  if (!rc) rc = compile_and_count(art, len);
  if (!rc) rc = step4(reg, art, len, data, seed);
  if (!rc) rc = step5(reg, data, rounds, seed);
  for (int i = 0; i < 3; i++) bb_buffer_free(NULL, art[i]);
  for (int i = 0; i < N_CLIENTS; i++) bb_dataset_free(&data[i]);
  bb_registry_free(reg);
  printf("federated_learning: %s\n", rc ? "FAILED" : "ok");
  return rc;
}
