/* FedAvg and RobustAvg in a federation, through the engine and the simulator: who may
 * contribute (only the peers the server addressed since the round opened), the round
 * rules RobustAvg now shares with FedAvg (a deadline, so a NaN sender cannot stall a
 * round that waits for everyone), and what survives a snapshot.
 *
 * The Module is federated_digits' round with a stub Model whose Fit adds a per-node step
 * to the global model (or sends NaN), so every aggregate is known exactly:
 *   server (@self): (global, round) = aggregator.Aggregate(tick); output both;
 *                   send [global, round] to `clients`
 *   clients:        (trained, samples) = model.Fit(global); send [trained, samples, round]
 *                   to `server`
 *   server:         aggregator.Contribute(update)
 * The host invokes the server once per round with the clients it selects. With join tokens,
 * every node checks them and the server's host admits each client's token. */
#include <math.h>
#include <stdio.h>

#include "../runtime/rttest.h"
#include "bb/sim.h"
#include "programs/fedavg_round.h"
#include "wire/join_tokens.h"

#define MS 1000000ull

/* The clients' half and the server's intake are federated_digits' own (programs/fedavg_round.h). */
static void round_body(bb_rec *g, void *user) {
  (void)user;
  bb_value clients = bb_rec_input(g, "clients", BB_TYPE_PEER_ID_VEC);
  bb_value server = bb_rec_input(g, "server", BB_TYPE_PEER_ID_VEC);
  bb_value tick = bb_rec_input(g, "tick", NULL);
  bb_value global, round;
  bb_rec_aggregator_aggregate(g, &BBI_FEDAVG_AGGREGATOR, tick, &global, &round);
  bb_rec_output(g, "global", global);
  bb_rec_output(g, "round", round);
  bb_value out[2] = {global, round};
  bb_rec_net_out(g, "global_port", clients, bb_rec_bundle(g, out, 2));
  bb_rec_net_out(g, "update", server, bbi_fedavg_fit(g, "global_port"));
  bbi_fedavg_take_in(g, &BBI_FEDAVG_AGGREGATOR, "update");
}

static const bb_module ROUND = {sizeof(bb_module), "Round", round_body, NULL, NULL, NULL, 0};

/* ---- StepModel: Params is [0, 0]; Fit(g) is g + delta (or NaN), with `samples` -------- */

typedef struct step_model {
  float delta;
  bool nan;
  uint64_t samples;
} step_model;

static int step_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const KEYS[] = {"delta", "nan", "samples", NULL};
  step_model m = {1, false, 4};
  uint64_t nan;
  int rc;
  if ((rc = bb_config_check(init->config, KEYS, err)) ||
      (rc = bb_config_f32(init->config, "delta", 1, &m.delta, err)) ||
      (rc = bb_config_u64(init->config, "nan", 0, &nan, err)) ||
      (rc = bb_config_u64(init->config, "samples", 4, &m.samples, err)))
    return rc;
  m.nan = nan != 0;
  step_model *p = malloc(sizeof *p);
  if (!p) return BB_ERR_NOMEM;
  *p = m;
  *self = p;
  return 0;
}

static void step_destroy(void *self) { free(self); }

static int step_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  (void)ctx;
  const step_model *m = self;
  if (strcmp(call->op_type, "Params") == 0) {
    call->outputs[0] = f32_val((const float[]){0, 0}, 2);
    return 0;
  }
  if (strcmp(call->op_type, "Fit") != 0)
    return bb_error_set(err, BB_ERR_UNSUPPORTED, "StepModel: no %s", call->op_type);
  const bb_val *g = call->inputs[0];
  if (!g || bb_val_kind_of(g) != BB_VAL_TENSOR || bb_val_as_tensor(g)->numel != 2)
    return bb_error_set(err, BB_ERR_TYPE, "StepModel: Fit takes float32 [2]");
  const float *x = bb_tensor_data(bb_val_as_tensor(g));
  float y[2] = {m->nan ? NAN : x[0] + m->delta, m->nan ? NAN : x[1] - m->delta};
  call->outputs[0] = f32_val(y, 2);
  call->outputs[1] = bb_val_u64(NULL, BB_VAL_U64, m->samples);
  return 0;
}

static const bb_component_type STEP_MODEL = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "StepModel",
    .roles = 1u << BB_ROLE_MODEL,
    .create = step_create,
    .destroy = step_destroy,
    .invoke = step_invoke,
};

/* ---- a federation: server 1, clients 2..N ----------------------------------------------- */

#define MAX_PEERS 8

typedef struct aggregator_binding {
  const char *type, *config;
} aggregator_binding;

static int bind_round(bb_compiler *c, const void *user, bb_error *err) {
  const aggregator_binding *b = user;
  static const bb_component_port tensor[] = {{"tensor", "ai.bytesandbrains.tensor.f32"}};
  static const bb_component_port element[] = {{"element", "ai.bytesandbrains.tensor.f32"}};
  bb_component_decl model = {sizeof model, "StepModel", tensor, 1, NULL, 0};
  bb_component_decl agg = {sizeof agg, b->type, element, 1, NULL, 0};
  return bb_compiler_declare_component(c, &model, err) || bb_compiler_declare_component(c, &agg, err) ||
                 bb_compiler_bind_model(c, "model", "StepModel", NULL, err) ||
                 bb_compiler_bind_aggregator(c, "aggregator", b->type, b->config, err)
             ? err->code
             : 0;
}

typedef struct federation {
  bb_sim *sim;
  bb_registry *reg;
  const bb_join_policy *policy; /* every node checks join tokens under it (NULL: none) */
  uint8_t *artifact;
  size_t len;
  size_t n;
  bb_node *node[MAX_PEERS];
  bb_peer_id peer[MAX_PEERS];
  bool overhears[MAX_PEERS]; /* gets a copy of every broadcast the server sends to peer 2 */
  float global[2];
  int64_t round; /* the last round id the server gave out (-1: none) */
  size_t globals_given;
  size_t told[MAX_PEERS];  /* refusal notices each peer raised (app event `refused`) */
  char last_told[MAX_PEERS][256];
} federation;

static void observe(void *user, const bb_peer_id *peer, const bb_step *s) {
  federation *f = user;
  if (s->kind == BB_STEP_APP_EVENT && s->topic && strcmp(s->topic, "refused") == 0) {
    for (size_t i = 0; i < f->n; i++) {
      if (!bb_peer_id_equal(peer, &f->peer[i])) continue;
      f->told[i]++;
      snprintf(f->last_told[i], sizeof f->last_told[i], "%.*s", (int)s->len, (const char *)s->bytes);
    }
  }
  if (s->kind != BB_STEP_APP_EVENT || !bb_peer_id_equal(peer, &f->peer[0]) || !s->value) return;
  if (strcmp(s->topic, "global") == 0 && bb_val_kind_of(s->value) == BB_VAL_TENSOR) {
    memcpy(f->global, bb_tensor_data(bb_val_as_tensor(s->value)), sizeof f->global);
    f->globals_given++;
  }
  if (strcmp(s->topic, "round") == 0 && bb_val_is_u64(s->value)) f->round = (int64_t)bb_val_as_u64(s->value);
}

static void overhear(void *user, const bb_sim_delivery *d) {
  federation *f = user;
  if (!d->accepted || !bb_peer_id_equal(d->from, &f->peer[0]) || !bb_peer_id_equal(d->to, &f->peer[1])) return;
  for (size_t i = 2; i < f->n; i++)
    if (f->overhears[i]) bb_node_deliver(f->node[i], &f->peer[0], d->bytes, d->len, d->arrived_ns, NULL);
}

static bb_node *install_as(federation *f, size_t i, const char *config) {
  static const char *const SERVER[] = {"Round", "Round_server"}, *const CLIENT[] = {"Round_clients"};
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = f->peer[i];
  bb_address self = p2p_address(&f->peer[i]);
  a.addresses = &self;
  a.n_addresses = 1;
  a.artifact = f->artifact;
  a.artifact_len = f->len;
  a.targets = i ? CLIENT : SERVER;
  a.n_targets = i ? 1 : 2;
  a.registry = f->reg;
  bb_slot_config slot = {"model", config, NULL};
  a.slots = &slot;
  a.n_slots = config ? 1 : 0;
  a.admission = f->policy;
  bb_node *n = NULL;
  bb_error err;
  CHECK_MSG(bb_install(&a, &n, NULL, &err) == 0, "peer %zu: %s", i + 1, err.message);
  for (size_t j = 0; n && j < f->n; j++) {
    bb_address other = p2p_address(&f->peer[j]);
    if (j != i) CHECK(bb_node_add_peer(n, &f->peer[j], &other, NULL) == 0);
  }
  return n;
}

/* Server 1 with the aggregator, clients 2..n_peers with these StepModel configs; every
 * node checks join tokens under `policy` unless it is NULL. */
static bool federation_open_admitting(federation *f, const bb_join_policy *policy, const char *type,
                                      const char *config, size_t n_peers, const char *const *client_configs) {
  memset(f, 0, sizeof *f);
  f->policy = policy;
  f->round = -1;
  f->n = n_peers;
  aggregator_binding b = {type, config};
  f->artifact = compile_test_module(&ROUND, bind_round, &b, &f->len);
  f->reg = bb_registry_new(NULL);
  CHECK(f->reg && bb_registry_add_shipped(f->reg, NULL) == 0 && bb_registry_add(f->reg, &STEP_MODEL, NULL) == 0);
  bb_sim_config sc = {.struct_size = sizeof sc, .seed = 1, .latency_ns = MS};
  CHECK(bb_sim_new(&sc, &f->sim, NULL) == 0);
  if (!f->artifact || !f->sim) return false;
  for (size_t i = 0; i < n_peers; i++) f->peer[i] = bb_peer_id_from_u64(i + 1);
  bb_val *server = bb_val_peers(NULL, &f->peer[0], 1);
  for (size_t i = 0; i < n_peers; i++) {
    if (!(f->node[i] = install_as(f, i, i ? client_configs[i - 1] : NULL))) return false;
    CHECK(bb_sim_attach(f->sim, f->node[i], &f->peer[i], NULL) == 0);
    if (i) CHECK(bb_node_bind_input(f->node[i], "Round_clients", "server", server, NULL) == 0);
  }
  bb_val_release(server);
  bb_sim_set_observer(f->sim, observe, f);
  bb_sim_set_tracer(f->sim, overhear, f);
  return true;
}

static bool federation_open(federation *f, const char *type, const char *config, size_t n_peers,
                            const char *const *client_configs) {
  return federation_open_admitting(f, NULL, type, config, n_peers, client_configs);
}

static void federation_close(federation *f) {
  bb_sim_free(f->sim);
  for (size_t i = 0; i < f->n; i++) bb_node_free(f->node[i]);
  bb_registry_free(f->reg);
  free(f->artifact);
}

/* One Aggregate on the server at `at`, sending what it gives to these clients (by peer
 * number), then everything that follows until the network is quiet. */
static void server_round(federation *f, uint64_t at, const uint64_t *clients, size_t n) {
  bb_peer_id to[MAX_PEERS];
  for (size_t i = 0; i < n; i++) to[i] = bb_peer_id_from_u64(clients[i]);
  bb_val *peers = bb_val_peers(NULL, to, n), *tick = f32_val((const float[]){1}, 1);
  bb_named_value in[] = {{"clients", peers}, {"tick", tick}};
  CHECK(bb_sim_run_until(f->sim, at, NULL) == 0);
  bb_error err;
  CHECK_MSG(bb_node_invoke(f->node[0], "Round", in, 2, at, &err) == 0, "%s", err.message);
  bb_val_release(peers);
  bb_val_release(tick);
  CHECK(bb_sim_run_until_idle(f->sim, at + 1000 * MS, NULL) == 0);
}

static uint64_t counter(const federation *f, const char *name) { return bb_node_counter(f->node[0], name); }

/* ---- membership --------------------------------------------------------------------------- */

/* The finding: ids the server never selected sent updates and they counted. Peer 4
 * overhears the broadcast to peer 2 and answers: refused, counted, left out of the mean. */
static void test_unselected_peer_is_refused(void) {
  federation f;
  const char *const clients[] = {"delta=1", "delta=3", "delta=1000"};
  if (federation_open(&f, "FedAvg", "quorum=2,init=model", 4, clients)) {
    f.overhears[3] = true;
    server_round(&f, 0, (const uint64_t[]){2, 3}, 2); /* round 0: the init model to 2 and 3 */
    CHECK_EQ_INT(f.round, 0);
    CHECK_EQ_INT(counter(&f, "fedavg.refused_non_member"), 1);
    server_round(&f, 10 * MS, (const uint64_t[]){2, 3}, 2); /* closes round 0 */
    CHECK_EQ_INT(f.round, 1);
    CHECK_MSG(f.global[0] == 2 && f.global[1] == -2, "%g %g", (double)f.global[0], (double)f.global[1]);
    CHECK_EQ_INT(counter(&f, "fedavg.refused_non_member"), 2);
    CHECK_EQ_INT(counter(&f, "fedavg.rounds_closed"), 1);
  }
  federation_close(&f);
}

/* Membership is per round: peer 3, addressed in round 0 only, cannot answer round 1's
 * broadcast it overheard; with members=any it can. */
static void test_membership_is_per_round(void) {
  for (int any = 0; any < 2; any++) {
    federation f;
    const char *const clients[] = {"delta=1", "delta=3"};
    if (federation_open(&f, "FedAvg", any ? "quorum=1,init=model,members=any" : "quorum=1,init=model", 3, clients)) {
      server_round(&f, 0, (const uint64_t[]){2, 3}, 2);      /* round 0 to 2 and 3 */
      f.overhears[2] = true;                                   /* from now on 3 listens in */
      server_round(&f, 10 * MS, (const uint64_t[]){2}, 1);   /* round 0 closes (mean of 1 and 3); round 1 to 2 */
      CHECK(f.global[0] == 2);
      server_round(&f, 20 * MS, (const uint64_t[]){2}, 1);   /* round 1 closes */
      CHECK_EQ_INT(f.round, 2);
      if (any) {
        CHECK_EQ_INT(counter(&f, "fedavg.refused_non_member"), 0);
        CHECK_MSG(f.global[0] == 2 + 2, "%g", (double)f.global[0]); /* (2+1 + 2+3) / 2 */
      } else {
        /* 3 answered rounds 1 and 2 (overheard), both refused */
        CHECK_EQ_INT(counter(&f, "fedavg.refused_non_member"), 2);
        CHECK_MSG(f.global[0] == 2 + 1, "%g", (double)f.global[0]); /* peer 2 alone */
      }
    }
    federation_close(&f);
  }
}

/* The server's record of whom it addressed is part of its snapshot: a server moved
 * between round 1's broadcast and the answers still takes its members' updates. */
static void test_membership_survives_a_snapshot(void) {
  federation f;
  const char *const clients[] = {"delta=1", "delta=3"};
  if (federation_open(&f, "FedAvg", "quorum=2,init=model", 3, clients)) {
    server_round(&f, 0, (const uint64_t[]){2, 3}, 2);
    bb_val *peers = bb_val_peers(NULL, &f.peer[1], 2), *tick = f32_val((const float[]){1}, 1);
    bb_named_value in[] = {{"clients", peers}, {"tick", tick}};
    CHECK(bb_sim_run_until(f.sim, 10 * MS, NULL) == 0);
    CHECK(bb_node_invoke(f.node[0], "Round", in, 2, 10 * MS, NULL) == 0);
    bb_val_release(peers);
    bb_val_release(tick);
    CHECK(bb_sim_step(f.sim, NULL) == 0); /* round 0 closes, round 1 goes out */
    CHECK_EQ_INT(f.round, 1);
    uint8_t *snap = NULL;
    size_t len = 0;
    bb_error err;
    CHECK_MSG(bb_node_snapshot(f.node[0], &snap, &len, &err) == 0, "%s", err.message);
    bb_node *moved = install_as(&f, 0, NULL);
    CHECK_MSG(moved && bb_node_restore(moved, snap, len, &err) == 0, "%s", err.message);
    bb_buffer_free(NULL, snap);
    bb_node_free(bb_sim_restart(f.sim, &f.peer[0], moved));
    f.node[0] = moved;
    CHECK(bb_sim_run_until_idle(f.sim, 100 * MS, NULL) == 0); /* the answers reach the moved server */
    server_round(&f, 200 * MS, (const uint64_t[]){2, 3}, 2); /* closes round 1 */
    CHECK_EQ_INT(counter(&f, "fedavg.refused_non_member"), 0);
    CHECK_EQ_INT(f.round, 2);
    CHECK_MSG(f.global[0] == 4, "%g", (double)f.global[0]);
  }
  federation_close(&f);
}

/* ---- join tokens ----------------------------------------------------------------------- */

#define UNIX_AT_START 1700000000ull /* the hosts' wall clock when the simulation starts */

/* peer's token, signed by `op`, handed to `node`'s engine at simulated time at_ns;
 * returns what bb_node_admit_token does */
static int admit(bb_node *node, const bbt_keys *op, bb_join_role role, uint64_t expiry, const bb_peer_id *peer,
                 const char *room, uint64_t at_ns) {
  uint8_t token[BB_JOIN_TOKEN_MAX_BYTES];
  size_t len = bbt_make_token(op, (int)role, expiry, peer, room, token);
  bb_error err = {0};
  bb_join_role granted;
  int rc = bb_node_admit_token(node, peer, token, len, UNIX_AT_START + at_ns / 1000000000ull, at_ns, &granted, &err);
  CHECK(rc ? err.message[0] != 0 && granted == BB_JOIN_NONE : granted == role);
  return rc;
}

/* A federation whose server takes updates only from peers whose join token the operator
 * signed for this room and the client role. Clients 2 and 3 hold one and train; peer 4
 * holds none, 5 an expired one, 6 a watcher's, 7 one for another room and 8 one signed
 * by a key the room does not trust: every one of them answers each broadcast (the server
 * addresses them all) and is refused and counted. A token that expires mid-run stops
 * admitting its holder at its expiry, on the node's clock, until the host hands the
 * engine a fresh one. */
static void test_join_tokens_decide_who_contributes(void) {
  const bbt_keys op = bbt_keys_counting(0x00), rogue = bbt_keys_counting(0x40);
  const bb_join_policy policy = {.room = "fed-1", .operator_keys = op.pk, .n_operator_keys = 1};
  const char *const clients[] = {"delta=1", "delta=3", "delta=1000", "delta=1000",
                                 "delta=1000", "delta=1000", "delta=1000"};
  const uint64_t hour = UNIX_AT_START + 3600, everyone[] = {2, 3, 4, 5, 6, 7, 8};
  federation f;
  if (federation_open_admitting(&f, &policy, "FedAvg", "quorum=1,init=model", 8, clients)) {
    bb_node *server = f.node[0];
    CHECK_EQ_INT(admit(server, &op, BB_JOIN_CLIENT, hour, &f.peer[1], "fed-1", 0), 0);
    CHECK_EQ_INT(admit(server, &op, BB_JOIN_CLIENT, UNIX_AT_START + 1, &f.peer[2], "fed-1", 0), 0);
    CHECK_EQ_INT(admit(server, &op, BB_JOIN_CLIENT, UNIX_AT_START, &f.peer[4], "fed-1", 0), BB_ERR_DENIED);
    CHECK_EQ_INT(admit(server, &op, BB_JOIN_WATCHER, hour, &f.peer[5], "fed-1", 0), 0);
    CHECK_EQ_INT(admit(server, &op, BB_JOIN_CLIENT, hour, &f.peer[6], "fed-2", 0), BB_ERR_DENIED);
    CHECK_EQ_INT(admit(server, &rogue, BB_JOIN_CLIENT, hour, &f.peer[7], "fed-1", 0), BB_ERR_DENIED);
    CHECK_EQ_INT(counter(&f, "admission.admitted"), 3);
    CHECK_EQ_INT(counter(&f, "admission.refused_expired"), 1);
    CHECK_EQ_INT(counter(&f, "admission.refused_other_room"), 1);
    CHECK_EQ_INT(counter(&f, "admission.refused_untrusted"), 1);
    CHECK_EQ_INT(bb_node_peer_role(server, &f.peer[1]), BB_JOIN_CLIENT);
    CHECK_EQ_INT(bb_node_peer_role(server, &f.peer[3]), BB_JOIN_NONE);
    CHECK_EQ_INT(bb_node_peer_role(server, &f.peer[5]), BB_JOIN_WATCHER);
    for (size_t i = 1; i < f.n; i++) /* each client checks the server's token in turn */
      CHECK_EQ_INT(admit(f.node[i], &op, BB_JOIN_SERVER, hour, &f.peer[0], "fed-1", 0), 0);

    server_round(&f, 0, everyone, 7);       /* round 0 to all seven */
    server_round(&f, 10 * MS, everyone, 7); /* closes round 0: the mean of 2 and 3 alone */
    CHECK_EQ_INT(f.round, 1);
    CHECK_MSG(f.global[0] == 2 && f.global[1] == -2, "%g %g", (double)f.global[0], (double)f.global[1]);
    CHECK_EQ_INT(counter(&f, "fedavg.rounds_closed"), 1);
    CHECK_EQ_INT(counter(&f, "fedavg.refused_unadmitted"), 2 * 4); /* 4, 5, 7, 8 in rounds 0 and 1 */
    CHECK_EQ_INT(counter(&f, "fedavg.refused_role"), 2); /* the watcher, 6 */
    CHECK_EQ_INT(counter(&f, "fedavg.refused_non_member"), 0);

    /* peer 3's token ran out at second 1: its round 2 update is refused too */
    server_round(&f, 1500 * MS, everyone, 7); /* closes round 1 (2 and 3), round 2 out */
    CHECK_MSG(f.global[0] == 4, "%g", (double)f.global[0]);
    CHECK_EQ_INT(bb_node_peer_role(server, &f.peer[2]), BB_JOIN_NONE);
    CHECK_EQ_INT(counter(&f, "fedavg.refused_unadmitted"), 3 * 4 + 1);
    /* a fresh token admits it again */
    CHECK_EQ_INT(admit(server, &op, BB_JOIN_CLIENT, hour, &f.peer[2], "fed-1", 2000 * MS), 0);
    server_round(&f, 2000 * MS, everyone, 7); /* closes round 2 (peer 2 alone), round 3 out */
    server_round(&f, 2010 * MS, everyone, 7); /* closes round 3: 2 and 3 again */
    CHECK_MSG(f.global[0] == 4 + 1 + 2, "%g", (double)f.global[0]);
    CHECK_EQ_INT(counter(&f, "fedavg.refused_unadmitted"), 5 * 4 + 1); /* rounds 0..4, and 3 in round 2 */
    CHECK_EQ_INT(counter(&f, "fedavg.rounds_closed"), 4);
  }
  federation_close(&f);
}

/* ---- RobustAvg's rounds ------------------------------------------------------------------ */

/* The finding: RobustAvg had no deadline, so a round waiting for every client never
 * closed when one of them sent NaN (refused). Now it closes at its deadline with the
 * quorum, or is abandoned, and the federation goes on. */
static void test_robust_avg_nan_sender_cannot_stall(void) {
  const char *const clients[] = {"delta=1", "delta=2", "delta=4", "nan=1"};
  struct {
    const char *config;
    bool closes;
  } cases[] = {{"method=median,quorum=3,target=4,deadline_ms=50,init=model", true},
               {"method=median,quorum=4,deadline_ms=50,no_quorum=abandon,init=model", false}};
  for (size_t t = 0; t < 2; t++) {
    federation f;
    if (!federation_open(&f, "RobustAvg", cases[t].config, 5, clients)) {
      federation_close(&f);
      continue;
    }
    for (uint64_t r = 0; r < 4; r++) server_round(&f, r * 100 * MS, (const uint64_t[]){2, 3, 4, 5}, 4);
    CHECK_MSG(f.round == 3, "case %zu: round %lld", t, (long long)f.round);
    CHECK(counter(&f, "robustavg.refused_nonfinite") >= 3);
    if (cases[t].closes) { /* median of 1, 2, 4 each round */
      CHECK_EQ_INT(counter(&f, "robustavg.rounds_closed"), 3);
      CHECK_MSG(f.global[0] == 3 * 2, "%g", (double)f.global[0]);
    } else { /* every round abandoned: the init model again, with the next round's id */
      CHECK_EQ_INT(counter(&f, "robustavg.rounds_abandoned"), 3);
      CHECK(f.global[0] == 0 && f.globals_given == 4);
    }
    federation_close(&f);
  }
}

/* A round waiting for five clients, one sending NaN and one claiming zero samples: each
 * is refused alone and counted by its reason, and every round closes at its deadline with
 * the three others (a quorum of three). */
static void test_refusals_are_counted_by_reason(void) {
  const char *const clients[] = {"delta=1", "delta=2", "delta=3", "nan=1", "samples=0"};
  federation f;
  if (federation_open(&f, "FedAvg", "quorum=3,target=5,deadline_ms=50,no_quorum=abandon,init=model", 6, clients)) {
    for (uint64_t r = 0; r < 4; r++) server_round(&f, r * 100 * MS, (const uint64_t[]){2, 3, 4, 5, 6}, 5);
    CHECK_EQ_INT(f.round, 3);
    CHECK_EQ_INT(counter(&f, "fedavg.rounds_closed"), 3);
    CHECK_EQ_INT(counter(&f, "fedavg.rounds_abandoned"), 0);
    CHECK_MSG(f.global[0] == 3 * 2, "%g", (double)f.global[0]);
    CHECK(counter(&f, "fedavg.refused_nonfinite") >= 3 && counter(&f, "fedavg.refused_samples") >= 3);
    CHECK_EQ_INT(counter(&f, "fedavg.refused_nonfinite"), counter(&f, "fedavg.refused_samples"));
  }
  federation_close(&f);
}

/* A refused contribution is told back: the client whose update held a NaN, and the one
 * claiming zero samples, each raise the app event `refused` with the aggregator's reason
 * once per refused update; the honest clients and the server raise none. */
static void test_refused_contributors_are_told_why(void) {
  const char *const clients[] = {"delta=1", "delta=2", "nan=1", "samples=0"};
  federation f;
  if (federation_open(&f, "FedAvg", "quorum=2,target=4,deadline_ms=50,no_quorum=abandon,init=model", 5, clients)) {
    for (uint64_t r = 0; r < 4; r++) server_round(&f, r * 100 * MS, (const uint64_t[]){2, 3, 4, 5}, 4);
    CHECK_EQ_INT(f.told[0] + f.told[1] + f.told[2], 0);
    CHECK_EQ_INT(f.told[3], counter(&f, "fedavg.refused_nonfinite"));
    CHECK_EQ_INT(f.told[4], counter(&f, "fedavg.refused_samples"));
    CHECK(f.told[3] >= 3 && f.told[4] >= 3);
    CHECK_MSG(strstr(f.last_told[3], "non-finite") || strstr(f.last_told[3], "NaN") || strstr(f.last_told[3], "finite"), "%s",
              f.last_told[3]);
    CHECK_MSG(strstr(f.last_told[4], "num_samples = 0") != NULL, "%s", f.last_told[4]);
    CHECK_EQ_INT(bb_node_counter(f.node[3], "refusal_notice.received"), f.told[3]);
    CHECK_EQ_INT(counter(&f, "refusal_notice.unsent"), 0);
  }
  federation_close(&f);
}

/* ---- values that would poison later rounds ----------------------------------------------- */

/* The finding: one client sending 3e38 everywhere (finite) made the global model huge,
 * and every later honest update NaN. Its update is farther from the global model than
 * three times the median distance: it is left out, and the global model stays the honest
 * mean. */
static void test_huge_values_are_left_out(void) {
  const char *const clients[] = {"delta=1", "delta=2", "delta=3", "delta=3e38"};
  federation f;
  if (federation_open(&f, "FedAvg", "quorum=4,init=model", 5, clients)) {
    for (uint64_t r = 0; r < 4; r++) server_round(&f, r * 10 * MS, (const uint64_t[]){2, 3, 4, 5}, 4);
    CHECK_EQ_INT(f.round, 3);
    CHECK_MSG(f.global[0] == 3 * 2 && f.global[1] == -3 * 2, "%g %g", (double)f.global[0], (double)f.global[1]);
    CHECK_EQ_INT(counter(&f, "fedavg.norm_dropped"), 3);
  }
  federation_close(&f);
}

/* An update past twice the median distance but within three times it — an honest client
 * whose data differs the most, in a small federation — is pulled back onto the bound by
 * default, and left out with beyond_norm=drop (which starved such federations of that
 * client's classes). */
static void test_far_update_is_pulled_back(void) {
  const char *const clients[] = {"delta=1", "delta=2", "delta=3", "delta=7"};
  federation f;
  /* distances √2·(1, 2, 3, 7), median √2·2.5: the bound √2·5, the drop bound √2·7.5 */
  if (federation_open(&f, "FedAvg", "quorum=4,init=model", 5, clients)) {
    server_round(&f, 0, (const uint64_t[]){2, 3, 4, 5}, 4);
    server_round(&f, 10 * MS, (const uint64_t[]){2, 3, 4, 5}, 4);
    CHECK_MSG(fabsf(f.global[0] - (1 + 2 + 3 + 5) / 4.0f) < 1e-5f, "%g", (double)f.global[0]);
    CHECK(counter(&f, "fedavg.norm_clipped") == 1 && counter(&f, "fedavg.norm_dropped") == 0);
  }
  federation_close(&f);
  if (federation_open(&f, "FedAvg", "quorum=4,init=model,beyond_norm=drop", 5, clients)) {
    server_round(&f, 0, (const uint64_t[]){2, 3, 4, 5}, 4);
    server_round(&f, 10 * MS, (const uint64_t[]){2, 3, 4, 5}, 4);
    CHECK_MSG(f.global[0] == 2, "%g", (double)f.global[0]);
    CHECK(counter(&f, "fedavg.norm_clipped") == 0 && counter(&f, "fedavg.norm_dropped") == 1);
  }
  federation_close(&f);
}

int main(void) {
  RUN(test_unselected_peer_is_refused);
  RUN(test_refused_contributors_are_told_why);
  RUN(test_membership_is_per_round);
  RUN(test_membership_survives_a_snapshot);
  RUN(test_join_tokens_decide_who_contributes);
  RUN(test_robust_avg_nan_sender_cannot_stall);
  RUN(test_refusals_are_counted_by_reason);
  RUN(test_huge_values_are_left_out);
  RUN(test_far_update_is_pulled_back);
  return bb_test_finish();
}
