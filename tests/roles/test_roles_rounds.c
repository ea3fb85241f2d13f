/* FedAvg, RobustAvg and FedBuff in a federation, through the engine and the simulator: who may
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
#include "components/shipped.h"
#include "programs/fedavg_round.h"
#include "step_model_fixture.h"
#include "wire/join_tokens.h"

#define MS 1000000ull

/* The server aggregates on each `tick`, broadcasts the global model to the clients and takes
 * their updates in; the clients' half and the server's intake are federated_digits' own
 * (programs/fedavg_round.h). */
static void record_round(bb_rec *g, bb_value clients, bb_value server, bb_value tick) {
  bb_value global, round;
  bb_rec_aggregator_aggregate(g, &BBI_FEDAVG_AGGREGATOR, tick, &global, &round);
  bb_rec_output(g, "global", global);
  bb_rec_output(g, "round", round);
  bb_value out[2] = {global, round};
  bb_rec_net_out(g, "global_port", clients, bb_rec_bundle(g, out, 2));
  bb_rec_net_out(g, "update", server, bbi_fedavg_fit(g, "global_port"));
  bbi_fedavg_take_in(g, &BBI_FEDAVG_AGGREGATOR, "update");
}

/* A round the host ticks by invoking the server with a "tick" input. */
static void round_body(bb_rec *g, void *user) {
  (void)user;
  bb_value clients = bb_rec_input(g, "clients", BB_TYPE_PEER_ID_VEC);
  bb_value server = bb_rec_input(g, "server", BB_TYPE_PEER_ID_VEC);
  record_round(g, clients, server, bb_rec_input(g, "tick", NULL));
}

static const bb_module ROUND = {sizeof(bb_module), "Round", round_body, NULL, NULL, NULL, 0};

/* The same round driven by the server's own round timer, as federated_digits is: an
 * Interval of 10 s ticks Aggregate; the host invokes the server once. */
#define LOOP_PERIOD_NS (10000 * MS)
static void looped_body(bb_rec *g, void *user) {
  (void)user;
  bb_value clients = bb_rec_input(g, "clients", BB_TYPE_PEER_ID_VEC);
  bb_value server = bb_rec_input(g, "server", BB_TYPE_PEER_ID_VEC);
  record_round(g, clients, server, bb_rec_interval(g, (int64_t)LOOP_PERIOD_NS));
}

static const bb_module LOOPED = {sizeof(bb_module), "Round", looped_body, NULL, NULL, NULL, 0};
static const bb_module *module_under_test = &ROUND; /* what federation_open compiles */

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
  size_t keep_from;        /* a client (index) whose last envelope to the server is kept; 0: none */
  uint8_t kept[4096];
  size_t kept_len;
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
  if (f->keep_from && d->accepted && bb_peer_id_equal(d->from, &f->peer[f->keep_from]) &&
      bb_peer_id_equal(d->to, &f->peer[0]) && d->len <= sizeof f->kept) {
    memcpy(f->kept, d->bytes, d->len);
    f->kept_len = d->len;
  }
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
  f->artifact = compile_test_module(module_under_test, bind_round, &b, &f->len);
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
 * once per refused update (the rounds a second apart, as notices to a peer are); the
 * honest clients and the server raise none. */
static void test_refused_contributors_are_told_why(void) {
  const char *const clients[] = {"delta=1", "delta=2", "nan=1", "samples=0"};
  federation f;
  if (federation_open(&f, "FedAvg", "quorum=2,target=4,deadline_ms=50,no_quorum=abandon,init=model", 5, clients)) {
    for (uint64_t r = 0; r < 4; r++) server_round(&f, r * 1000 * MS, (const uint64_t[]){2, 3, 4, 5}, 4);
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

/* A client whose updates are refused, in rounds faster than one a second, is told once a
 * second; peers the server never addressed pushing updates at it, at most 16 a second in
 * all. Every update is still refused and counted. */
static void test_refusal_notices_are_bounded(void) {
  const char *const clients[] = {"nan=1"};
  federation f;
  if (federation_open(&f, "FedAvg", "quorum=1,deadline_ms=5,no_quorum=abandon,init=model", 2, clients)) {
    f.keep_from = 1;
    for (uint64_t r = 0; r < 50; r++) server_round(&f, r * 10 * MS, (const uint64_t[]){2}, 1);
    CHECK_EQ_INT(counter(&f, "fedavg.refused_nonfinite"), 50);
    CHECK_EQ_INT(f.told[1], 1);
    CHECK_EQ_INT(counter(&f, "refusal_notice.held"), 49);
    server_round(&f, 1000 * MS, (const uint64_t[]){2}, 1); /* a second after the first notice */
    CHECK_EQ_INT(f.told[1], 2);
    CHECK(f.kept_len > 0);
    /* 40 peers the server never addressed sending it an update within one instant: 16 told */
    const bb_step *s;
    size_t k, notices = 0;
    for (uint64_t p = 0; p < 40; p++) {
      bb_peer_id from = bb_peer_id_from_u64(100 + p);
      bb_address a = p2p_address(&from);
      CHECK(bb_node_add_peer(f.node[0], &from, &a, NULL) == 0);
      CHECK(bb_node_deliver(f.node[0], &from, f.kept, f.kept_len, 3000 * MS, NULL) == 0);
      CHECK(bb_node_poll(f.node[0], 3000 * MS, &s, &k, NULL) == 0);
      notices += count_steps(s, k, BB_STEP_SEND);
    }
    CHECK_EQ_INT(notices, 16);
    CHECK_EQ_INT(counter(&f, "fedavg.refused_non_member"), 40);
    CHECK_EQ_INT(counter(&f, "refusal_notice.held"), 49 + 24);
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

/* An update past three times the median distance but within four times it — an honest
 * client whose data differs the most, in a small federation — is pulled back onto the
 * bound by default, and left out with beyond_norm=drop (which starved such federations of
 * that client's classes). */
static void test_far_update_is_pulled_back(void) {
  const char *const clients[] = {"delta=1", "delta=2", "delta=3", "delta=9"};
  federation f;
  /* distances √2·(1, 2, 3, 9), median √2·2.5: the bound √2·7.5, the drop bound √2·10 */
  if (federation_open(&f, "FedAvg", "quorum=4,init=model", 5, clients)) {
    server_round(&f, 0, (const uint64_t[]){2, 3, 4, 5}, 4);
    server_round(&f, 10 * MS, (const uint64_t[]){2, 3, 4, 5}, 4);
    CHECK_MSG(fabsf(f.global[0] - (1 + 2 + 3 + 7.5f) / 4.0f) < 1e-5f, "%g", (double)f.global[0]);
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

/* FedBuff keeps FedAvg's membership: peer 4, never sent the model, answers the broadcast
 * it overheard and is refused; peer 3, sent version 0 only, cannot answer version 1. */
static void test_fedbuff_membership(void) {
  federation f;
  const char *const clients[] = {"delta=1", "delta=3", "delta=1000"};
  if (!federation_open(&f, "FedBuff", "buffer=2,init=model", 4, clients)) {
    federation_close(&f);
    return;
  }
  f.overhears[3] = true;
  server_round(&f, 0, (const uint64_t[]){2, 3}, 2); /* version 0 to 2 and 3; 4 overhears */
  CHECK_EQ_INT(f.round, 0);
  CHECK_EQ_INT(counter(&f, "fedbuff.refused_non_member"), 1);
  CHECK_EQ_INT(counter(&f, "fedbuff.accepted"), 2);
  f.overhears[2] = true;                               /* 3 listens in from now on */
  server_round(&f, 10 * MS, (const uint64_t[]){2}, 1); /* version 1: the mean of 2's and 3's; to 2 */
  CHECK_EQ_INT(f.round, 1);
  CHECK_MSG(f.global[0] == 2 && f.global[1] == -2, "%g %g", (double)f.global[0], (double)f.global[1]);
  CHECK_EQ_INT(counter(&f, "fedbuff.steps"), 1);
  CHECK_EQ_INT(counter(&f, "fedbuff.refused_non_member"), 3); /* 3 and 4 answered version 1 */
  CHECK_EQ_INT(counter(&f, "fedbuff.accepted"), 3);
  federation_close(&f);
}

/* ---- differential privacy (dp_clip, dp_noise) ------------------------------------------ */

/* DP-FedAvg clips each update's distance from the global model to dp_clip and weighs
 * every update 1: a client sending (1000, -1000) moves the mean as far as one at distance
 * 1 would, where the plain FedAvg leaves it out by the median rule (so its result is
 * 0.1). */
static void test_dp_clips_each_update(void) {
  const char *const clients[] = {"delta=0.1,samples=1", "delta=0.1,samples=50", "delta=1000"};
  federation f;
  if (federation_open(&f, "FedAvg", "quorum=3,init=model,dp_clip=1", 4, clients)) {
    server_round(&f, 0, (const uint64_t[]){2, 3, 4}, 3);
    server_round(&f, 10 * MS, (const uint64_t[]){2, 3, 4}, 3);
    const double want = (0.1 + 0.1 + sqrt(0.5)) / 3;
    CHECK_MSG(fabs(f.global[0] - want) < 1e-6 && fabs(f.global[1] + want) < 1e-6, "%g %g, want %g",
              (double)f.global[0], (double)f.global[1], want);
    CHECK_EQ_INT(counter(&f, "fedavg.norm_clipped"), 1);
    CHECK_EQ_INT(counter(&f, "fedavg.dp_rounds"), 1);
  }
  federation_close(&f);
}

/* The noise: with every client sending the global model back, each round moves it by the
 * noise alone, dp_noise × dp_clip / m per coordinate for m updates (0.5 × 2 / 3 here).
 * 40 rounds give 80 draws: their spread within a factor of 1.5 of that (a failure is a
 * more than 4-sigma event), their mean near 0, and no two rounds alike. */
static void test_dp_noise_has_its_scale(void) {
  const char *const clients[] = {"delta=0", "delta=0", "delta=0"};
  enum { ROUNDS = 40 };
  federation f;
  if (federation_open(&f, "FedAvg", "quorum=3,init=model,dp_clip=2,dp_noise=0.5", 4, clients)) {
    double sum = 0, sum2 = 0, last[2] = {0, 0};
    int repeated = 0;
    server_round(&f, 0, (const uint64_t[]){2, 3, 4}, 3);
    for (int r = 1; r <= ROUNDS; r++) {
      server_round(&f, (uint64_t)r * 10 * MS, (const uint64_t[]){2, 3, 4}, 3);
      for (int j = 0; j < 2; j++) {
        const double step = (double)f.global[j] - last[j];
        repeated += step == 0;
        sum += step;
        sum2 += step * step;
        last[j] = f.global[j];
      }
    }
    const double n = 2 * ROUNDS, sd = 0.5 * 2 / 3.0, var = sum2 / n - (sum / n) * (sum / n);
    CHECK_MSG(var > sd * sd / 2.25 && var < sd * sd * 2.25, "noise variance %g, want %g", var, sd * sd);
    CHECK_MSG(fabs(sum / n) < 4 * sd / sqrt(n), "noise mean %g", sum / n);
    CHECK_EQ_INT(repeated, 0);
    CHECK_EQ_INT(counter(&f, "fedavg.dp_rounds"), ROUNDS);
  }
  federation_close(&f);
}

/* With no noise and a clip nothing reaches, DP-FedAvg is the plain FedAvg. */
static void test_dp_without_noise_is_fedavg(void) {
  const char *const clients[] = {"delta=1", "delta=3"};
  float plain[3][2], dp[3][2];
  for (int with = 0; with < 2; with++) {
    federation f;
    if (federation_open(&f, "FedAvg", with ? "quorum=2,init=model,dp_clip=1000" : "quorum=2,init=model", 3, clients)) {
      for (int r = 0; r < 4; r++) {
        server_round(&f, (uint64_t)r * 10 * MS, (const uint64_t[]){2, 3}, 2);
        if (r) memcpy(with ? dp[r - 1] : plain[r - 1], f.global, sizeof f.global);
      }
      CHECK_EQ_INT(counter(&f, "fedavg.dp_rounds"), with ? 3 : 0);
    }
    federation_close(&f);
  }
  for (int r = 0; r < 3; r++)
    CHECK_MSG(dp[r][0] == plain[r][0] && dp[r][1] == plain[r][1] && plain[r][0] == 2.0f * (float)(r + 1),
              "round %d: %g %g against %g %g", r, (double)dp[r][0], (double)dp[r][1], (double)plain[r][0],
              (double)plain[r][1]);
}

/* A DP configuration that would not be private is refused, naming the key. */
static void test_dp_config_refused(void) {
  static const char *const BAD[][2] = {
      {"dp_clip=-1", "dp_clip"},
      {"dp_clip=1x", "dp_clip"},
      {"dp_noise=1", "dp_noise"},
      {"dp_clip=1,dp_noise=-0.5", "dp_noise"},
      {"dp_clip=1,norm_factor=3", "norm_factor"},
      {"dp_clip=1,max_norm=2", "max_norm"},
      {"dp_clip=1,ascent_screen=0.1", "ascent_screen"},
      {"dp_clip=1,center_clip=1.25", "center_clip"},
      {"dp_clip=1,samples_factor=1", "samples_factor"},
      {"dp_clip=1,weighting=samples", "weighting"},
      {"dp_clip=1,beyond_norm=drop", "beyond_norm"},
      {"dp_clip=1,rounds=follow", "rounds=follow"},
  };
  for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
    bb_component_init init = {"aggregator", BAD[i][0], 0, 7, bb_default_allocator(), NULL, NULL};
    void *self = NULL;
    bb_error err = {0};
    const int rc = BBI_FEDAVG.create(&init, &self, &err);
    CHECK_MSG(rc == BB_ERR_INVALID_ARGUMENT && strstr(err.message, BAD[i][1]), "`%s`: %d %s", BAD[i][0], rc,
              err.message);
    if (!rc) BBI_FEDAVG.destroy(self);
  }
  bb_component_init init = {"aggregator", "dp_clip=1,dp_noise=1.1,weighting=uniform,beyond_norm=clip", 0, 7,
                            bb_default_allocator(), NULL, NULL};
  void *self = NULL;
  bb_error err;
  CHECK_MSG(BBI_FEDAVG.create(&init, &self, &err) == 0, "%s", err.message);
  if (self) BBI_FEDAVG.destroy(self);
  /* RobustAvg's median has another sensitivity: it takes no dp_* */
  init.config = "dp_clip=1";
  CHECK(BBI_ROBUST_AVG.create(&init, &self, &err) == BB_ERR_INVALID_ARGUMENT);
}

/* ---- adaptive clipping and Poisson sampling -------------------------------------------- */

/* What a round of clients stepping by deltas[i] (each update at distance δ√2 along
 * (1, -1)) moves the mean's first coordinate by, without noise, under clip C. */
static double clipped_step(const double *deltas, size_t n, double clip) {
  double sum = 0;
  for (size_t i = 0; i < n; i++) sum += fmin(deltas[i], clip / sqrt(2));
  return sum / (double)n;
}

/* The clip a round used, read back from its step (bisection: the step grows with the clip). */
static double clip_of_step(const double *deltas, size_t n, double step) {
  double lo = 0, hi = 100;
  for (int i = 0; i < 200; i++) {
    const double mid = (lo + hi) / 2;
    if (clipped_step(deltas, n, mid) < step) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/* Runs `rounds` rounds of DP-FedAvg with `config` for clients stepping by deltas (up to
 * 7) and gives the clip each round after the first used (clips[rounds - 1]). */
static bool run_adaptive(const char *config, const double *deltas, size_t n, int rounds, double *clips) {
  char models[7][32];
  const char *clients[7];
  for (size_t i = 0; i < n; i++) {
    snprintf(models[i], sizeof models[i], "delta=%g", deltas[i]);
    clients[i] = models[i];
  }
  const uint64_t to[7] = {2, 3, 4, 5, 6, 7, 8};
  federation f;
  bool ok = federation_open(&f, "FedAvg", config, n + 1, clients);
  if (ok) {
    server_round(&f, 0, to, n);
    for (int r = 1; r <= rounds; r++) {
      const float before = f.global[0];
      server_round(&f, (uint64_t)r * 10 * MS, to, n);
      clips[r - 1] = clip_of_step(deltas, n, (double)f.global[0] - before);
    }
    CHECK_EQ_INT(counter(&f, "fedavg.dp_rounds"), rounds);
  }
  federation_close(&f);
  return ok;
}

/* Adaptive clipping moves the clip to the median of the update norms (γ = 0.5): from 2,
 * above every norm, to within one step (exp(±η/14)) of the 4th of 7, 0.4√2. A client
 * sending an update a thousand times too long counts as one norm beyond the clip, no
 * more: with it in place of 0.7 the clip goes to the same median. */
static void test_dp_adaptive_clip_finds_quantile(void) {
  const double honest[7] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7}, attacked[7] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 1000};
  const char *config = "quorum=7,init=model,dp_clip=2,dp_clip_quantile=0.5,dp_count_noise=0.01";
  enum { ROUNDS = 45 };
  double clips[ROUNDS];
  for (int attack = 0; attack < 2; attack++) {
    if (!run_adaptive(config, attack ? attacked : honest, 7, ROUNDS, clips)) return;
    CHECK_MSG(clips[0] > 1.4, "round 1's clip %g (all norms within 2)", clips[0]);
    for (int r = ROUNDS - 10; r < ROUNDS; r++)
      CHECK_MSG(fabs(log(clips[r] / (0.4 * sqrt(2)))) < 0.2 / 14 + 1e-3, "%s: round %d's clip %g, want %g",
                attack ? "attacked" : "honest", r + 1, clips[r], 0.4 * sqrt(2));
  }
}

/* One round moves the clip by a factor within [exp(-η(1-γ)), exp(ηγ)] whatever the clients
 * send and the count's noise draws: three clients sending huge updates (all beyond, so
 * each round's step reads the clip exactly) under a count noise of 100 (which draws
 * fractions far outside [0, 1]). */
static void test_dp_adaptive_clip_step_is_bounded(void) {
  const double huge[3] = {1000, 1000, 1000};
  enum { ROUNDS = 12 };
  double clips[ROUNDS];
  if (!run_adaptive("quorum=3,init=model,dp_clip=1,dp_clip_quantile=0.5,dp_count_noise=100", huge, 3, ROUNDS, clips))
    return;
  CHECK_MSG(fabs(clips[0] - 1) < 1e-5, "%g", clips[0]);
  for (int r = 1; r < ROUNDS; r++) {
    const double moved = log(clips[r] / clips[r - 1]);
    CHECK_MSG(moved > -0.1 - 1e-5 && moved < 0.1 + 1e-5, "round %d: the clip moved by exp(%g)", r + 1, moved);
  }
}

/* Under adaptive clipping the sum's noise is drawn with the multiplier that leaves room
 * for the count's (z = 1, σ_b = 0.6: (1 - 1/1.44)^(-1/2) = 1.809), so the pair spends what
 * z alone would and the accountant's ε is z's. The clip barely moves (η = 1e-9); 40
 * rounds of 2 coordinates; z's own scale would fall far below the band. */
static void test_dp_adaptive_noise_multiplier(void) {
  const char *const clients[] = {"delta=0", "delta=0", "delta=0"};
  enum { ROUNDS = 40 };
  federation f;
  if (federation_open(&f, "FedAvg",
                      "quorum=3,init=model,dp_clip=2,dp_noise=1,dp_clip_quantile=0.5,dp_clip_rate=1e-9,"
                      "dp_count_noise=0.6",
                      4, clients)) {
    double sum2 = 0, last[2] = {0, 0};
    server_round(&f, 0, (const uint64_t[]){2, 3, 4}, 3);
    for (int r = 1; r <= ROUNDS; r++) {
      server_round(&f, (uint64_t)r * 10 * MS, (const uint64_t[]){2, 3, 4}, 3);
      for (int j = 0; j < 2; j++) {
        sum2 += ((double)f.global[j] - last[j]) * ((double)f.global[j] - last[j]);
        last[j] = f.global[j];
      }
    }
    const double sd = 2 / 3.0 / sqrt(1 - 1 / 1.44), var = sum2 / (2 * ROUNDS);
    CHECK_MSG(var > sd * sd / 2.25 && var < sd * sd * 2.25, "noise variance %g, want %g", var, sd * sd);
    CHECK_EQ_INT(counter(&f, "fedavg.dp_rounds"), ROUNDS);
  }
  federation_close(&f);
}

/* Poisson sampling at q = 0.5 over 7 clients that all answer every round: each round
 * takes the updates its coins sample and refuses the others (told, counted); the mean
 * divides by q × N = 3.5 whatever number came, so each round's step is m / 3.5 for its m
 * sampled clients; a round with none still spends (the noise on an empty sum); and the
 * fraction sampled over 60 rounds is within 6 binomial standard deviations of q. */
static void test_dp_sampling_is_poisson(void) {
  const char *const clients[] = {"delta=1", "delta=1", "delta=1", "delta=1", "delta=1", "delta=1", "delta=1"};
  const uint64_t to[7] = {2, 3, 4, 5, 6, 7, 8};
  enum { ROUNDS = 60 };
  federation f;
  if (federation_open(&f, "FedAvg",
                      "quorum=1,target=0,deadline_ms=5,no_quorum=abandon,init=model,dp_clip=10,dp_sample_rate=0.5,"
                      "dp_clients=7",
                      8, clients)) {
    server_round(&f, 0, to, 7);
    long taken = 0;
    for (int r = 1; r <= ROUNDS; r++) {
      const float before = f.global[0];
      server_round(&f, (uint64_t)r * 10 * MS, to, 7);
      const double m = ((double)f.global[0] - before) * 3.5;
      CHECK_MSG(fabs(m - round(m)) < 1e-4 && m > -0.5 && m < 7.5, "round %d's step %g is not m / 3.5", r,
                (double)f.global[0] - before);
      taken += lround(m);
    }
    const uint64_t refused = counter(&f, "fedavg.refused_unsampled");
    /* the last round's updates are still open: every offer is either taken or refused */
    const uint64_t offered = (uint64_t)(ROUNDS + 1) * 7;
    CHECK_MSG(refused + (uint64_t)taken <= offered && refused + (uint64_t)taken + 7 >= offered, "%llu + %ld of %llu",
              (unsigned long long)refused, taken, (unsigned long long)offered);
    const double n = ROUNDS * 7.0, sd = sqrt(n * 0.25);
    CHECK_MSG(fabs((double)taken - n / 2) < 6 * sd, "%ld of %g sampled", taken, n);
    CHECK_EQ_INT(counter(&f, "fedavg.dp_rounds"), ROUNDS);
    /* refused clients are told, once a second each: the 60 rounds take 0.6 s */
    for (size_t i = 1; i < 8; i++) CHECK_EQ_INT(f.told[i], 1);
  }
  federation_close(&f);
}

/* next=close: the update that completes a round wakes the server's round timer, so the next
 * round starts in the same poll; with next=tick (the default) the round waits for the
 * timer's next tick. On the simulator's clock (1 ms a hop), so in virtual time: rounds run
 * back to back, each closing on its second update, long before the 10 s timer ticks. */
static void test_next_round_starts_on_close(void) {
  module_under_test = &LOOPED;
  for (int close = 0; close < 2; close++) {
    federation f;
    const char *const clients[] = {"delta=1", "delta=3"};
    if (federation_open(&f, "FedAvg", close ? "quorum=2,target=2,init=model,next=close" : "quorum=2,target=2,init=model", 3,
                        clients)) {
      bb_val *peers = bb_val_peers(NULL, &f.peer[1], 2);
      bb_named_value in[] = {{"clients", peers}};
      bb_error err;
      CHECK_MSG(bb_node_invoke(f.node[0], "Round", in, 1, 0, &err) == 0, "%s", err.message);
      bb_val_release(peers);
      CHECK(bb_sim_run_until(f.sim, 100 * MS, NULL) == 0);
      const uint64_t closed = counter(&f, "fedavg.rounds_closed");
      if (close) {
        /* a round is a broadcast hop and an update hop: about 2 ms each */
        CHECK_MSG(closed >= 40, "%llu rounds closed in 100 ms", (unsigned long long)closed);
        CHECK_EQ_INT(counter(&f, "loops.woken"), closed);
      } else {
        CHECK_EQ_INT(closed, 0);
        CHECK_EQ_INT(counter(&f, "loops.woken"), 0);
      }
      CHECK_EQ_INT(f.round, (int64_t)closed);
      /* every closed round moved the model by the mean of the steps, (1 + 3) / 2 */
      CHECK_MSG(f.global[0] == 2.0f * (float)closed && f.global[1] == -2.0f * (float)closed, "%g %g after %llu",
                (double)f.global[0], (double)f.global[1], (unsigned long long)closed);
      /* the timer still ticks: with next=tick its first tick closes round 0 */
      if (!close) {
        CHECK(bb_sim_run_until(f.sim, LOOP_PERIOD_NS + 10 * MS, NULL) == 0);
        CHECK_EQ_INT(counter(&f, "fedavg.rounds_closed"), 1);
        CHECK_EQ_INT(f.round, 1);
      }
    }
    federation_close(&f);
  }
  module_under_test = &ROUND;
}

/* Sampling that would not be Poisson, or adaptive keys that mean nothing, are refused. */
static void test_dp_sampling_config_refused(void) {
  static const char *const BAD[][2] = {
      {"dp_clip=1,dp_sample_rate=0.5,dp_clients=10,quorum=1,deadline_ms=5,no_quorum=abandon,target=3", "target=0"},
      {"dp_clip=1,dp_sample_rate=0.5,dp_clients=10,quorum=2,deadline_ms=5,no_quorum=abandon", "quorum=1"},
      {"dp_clip=1,dp_sample_rate=0.5,dp_clients=10,quorum=1,no_quorum=abandon", "deadline_ms"},
      {"dp_clip=1,dp_sample_rate=0.5,dp_clients=10,quorum=1,deadline_ms=5", "no_quorum=abandon"},
      {"dp_clip=1,dp_sample_rate=0.5,dp_clients=10,quorum=1,deadline_ms=5,no_quorum=abandon,late=count", "late=drop"},
      {"dp_clip=1,dp_sample_rate=0.5,quorum=1,deadline_ms=5,no_quorum=abandon", "dp_clients"},
      {"dp_clip=1,dp_sample_rate=1.5,dp_clients=10", "dp_sample_rate"},
      {"dp_sample_rate=0.5,dp_clients=10", "dp_clip"},
      {"dp_clip_quantile=0.5", "dp_clip"},
      {"dp_clip=1,dp_clip_quantile=1", "dp_clip_quantile"},
      {"dp_clip=1,dp_clip_rate=0.1", "dp_clip_quantile"},
      {"dp_clip=1,dp_noise=1,dp_clip_quantile=0.5,dp_count_noise=0.4", "dp_count_noise"},
      {"next=soon", "tick|close"},
  };
  for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
    bb_component_init init = {"aggregator", BAD[i][0], 0, 7, bb_default_allocator(), NULL, NULL};
    void *self = NULL;
    bb_error err = {0};
    const int rc = BBI_FEDAVG.create(&init, &self, &err);
    CHECK_MSG(rc == BB_ERR_INVALID_ARGUMENT && strstr(err.message, BAD[i][1]), "`%s`: %d %s", BAD[i][0], rc,
              err.message);
    if (!rc) BBI_FEDAVG.destroy(self);
  }
}

int main(void) {
  RUN(test_unselected_peer_is_refused);
  RUN(test_fedbuff_membership);
  RUN(test_refused_contributors_are_told_why);
  RUN(test_refusal_notices_are_bounded);
  RUN(test_membership_is_per_round);
  RUN(test_membership_survives_a_snapshot);
  RUN(test_join_tokens_decide_who_contributes);
  RUN(test_robust_avg_nan_sender_cannot_stall);
  RUN(test_refusals_are_counted_by_reason);
  RUN(test_huge_values_are_left_out);
  RUN(test_far_update_is_pulled_back);
  RUN(test_dp_clips_each_update);
  RUN(test_dp_noise_has_its_scale);
  RUN(test_dp_without_noise_is_fedavg);
  RUN(test_dp_config_refused);
  RUN(test_dp_adaptive_clip_finds_quantile);
  RUN(test_dp_adaptive_clip_step_is_bounded);
  RUN(test_dp_adaptive_noise_multiplier);
  RUN(test_dp_sampling_is_poisson);
  RUN(test_dp_sampling_config_refused);
  RUN(test_next_round_starts_on_close);
  return bb_test_finish();
}
