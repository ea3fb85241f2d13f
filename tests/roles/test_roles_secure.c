/* FedAvg with secure=1 in a federation, through the engine and the simulator: each round's
 * updates reach the server only as a SecAgg+ sum, driven by the nodes' timers and
 * control messages.
 *
 * The Module: server (@self): (global, round) = aggregator.Aggregate(tick); output both;
 * send [global, round] to `clients`; a client: (trained, samples) = model.Fit(global),
 * aggregator.Contribute([trained, samples, round, global]) on itself (it masks the step
 * for the server). A stub Model's Fit adds a per-client step (delta, -delta), so the
 * mean every round should give is known exactly.
 *
 * As an attacker or a confused user: 3 of 10 clients crash after masking (the round
 * still closes, their steps in it); 6 crash (below the threshold: the round aborts, the
 * model does not move); a client sends garbage SecAgg+ messages (expelled, the round
 * closes with the others); a client sends its update in the clear (refused); settings
 * that need single updates are refused by name; a server that substitutes a client's
 * advertised keys with its own, validly signed by an identity of its own, makes the
 * neighbours refuse (bad_signature); a client without a key-bound identity cannot join. */
#include <math.h>
#include <stdio.h>

#include "../runtime/rttest.h"
#include <sodium/crypto_scalarmult_curve25519.h>
#include <sodium/crypto_sign_ed25519.h>

#include "bb/privacy.h"
#include "bb/sim.h"
#include "components/shipped.h"
#include "privacy/secagg_codec.h"
#include "privacy/secagg_crypto.h"
#include "step_model_fixture.h"
#include "programs/fedavg_round.h"

#define MS 1000000ull
#define MAX_PEERS 12
/* the ring's step with the default range 8 and 2^22 quantisation levels */
#define STEP (16.0 / 4194304.0)

static void secure_body(bb_rec *g, void *user) {
  const bool plain = user != NULL;
  bb_value clients = bb_rec_input(g, "clients", BB_TYPE_PEER_ID_VEC);
  bb_value tick = bb_rec_input(g, "tick", NULL);
  bb_value global, round;
  bb_rec_aggregator_aggregate(g, &BBI_FEDAVG_AGGREGATOR, tick, &global, &round);
  bb_rec_output(g, "global", global);
  bb_rec_output(g, "round", round);
  bb_value out[2] = {global, round};
  bb_rec_net_out(g, "global_port", clients, bb_rec_bundle(g, out, 2));
  if (!plain) {
    bbi_fedavg_contribute_secure(g, "global_port");
    return;
  }
  /* the confused client: its update in the clear, to the server */
  bb_value server = bb_rec_input(g, "server", BB_TYPE_PEER_ID_VEC);
  bb_rec_net_out(g, "update", server, bbi_fedavg_fit(g, "global_port"));
  bbi_fedavg_take_in(g, &BBI_FEDAVG_AGGREGATOR, "update");
}

/* ---- a client that sends garbage: FedAvg, but every SecAgg+ message from the server is
 * answered first with random bytes under the round's id ------------------------------------ */

static int garbage_on_message(void *self, bb_ctx *ctx, const char *op, const bb_peer_id *from,
                              const uint8_t *payload, size_t len, bb_error *err) {
  if (strcmp(op, "SecAggServer") == 0 && len >= 8) {
    uint8_t junk[200];
    memcpy(junk, payload, 8);
    for (size_t i = 8; i < sizeof junk; i++) junk[i] = (uint8_t)bb_ctx_random(ctx);
    bb_ctx_send_message(ctx, from, "SecAggClient", junk, sizeof junk, err);
  }
  return BBI_FEDAVG.on_message(self, ctx, op, from, payload, len, err);
}

/* ---- a lying server: every client but the victim gets the keys message with the victim's
 * keys replaced by the server's own X25519 pair, signed by an Ed25519 identity of the
 * server's own (a key-substituting man in the middle of the pairwise masks and shares).
 * The bytes are rewritten as they arrive, exactly as that server would send them. ---- */

static uint8_t tamper_setup_hash[32];
static uint32_t tamper_victim_index = UINT32_MAX;
static const bb_peer_id *tamper_victim;

static int tamper_on_message(void *self, bb_ctx *ctx, const char *op, const bb_peer_id *from, const uint8_t *payload,
                             size_t len, bb_error *err) {
  uint8_t msg[8192];
  if (strcmp(op, "SecAggServer") == 0 && len > 8 + SA_HEADER_BYTES && len <= sizeof msg) {
    memcpy(msg, payload, len);
    bb_secagg_caps caps = sa_caps_resolve(NULL);
    sa_msg m;
    bb_secagg_reason why;
    bb_error ignored;
    if (msg[8 + 5] == SA_SETUP && sa_decode(msg + 8, len - 8, &caps, 0, &m, &why, &ignored) == 0) {
      uint8_t victim_key[32];
      CHECK(bb_peer_id_ed25519(tamper_victim, victim_key));
      sa_setup_hash(m.round, &m.u.setup.params, m.u.setup.identities, tamper_setup_hash);
      for (uint32_t i = 0; i < m.u.setup.params.n_clients; i++)
        if (memcmp(m.u.setup.identities + 32 * i, victim_key, 32) == 0) tamper_victim_index = i;
    }
    if (msg[8 + 5] == SA_KEYS && !bb_peer_id_equal(bb_ctx_self(ctx), tamper_victim)) {
      const uint32_t count = bb_le_get_u32(msg + 8 + SA_HEADER_BYTES);
      for (uint32_t k = 0; k < count; k++) {
        uint8_t *e = msg + 8 + SA_HEADER_BYTES + 4 + (size_t)k * SA_KEY_ENTRY_BYTES;
        if (bb_le_get_u32(e) != tamper_victim_index) continue;
        uint8_t id_pk[32], id_sk[64], c_sk[32], s_sk[32], payload_to_sign[SA_SIGN_PAYLOAD_BYTES];
        CHECK(bb_secagg_identity_new(id_pk, id_sk, NULL, NULL) == 0); /* the server's own identity */
        for (size_t b = 0; b < 32; b++) { /* its X25519 secrets: any bytes */
          c_sk[b] = (uint8_t)bb_ctx_random(ctx);
          s_sk[b] = (uint8_t)bb_ctx_random(ctx);
        }
        crypto_scalarmult_curve25519_base(e + 4, c_sk);
        crypto_scalarmult_curve25519_base(e + 36, s_sk);
        sa_sign_payload(tamper_setup_hash, tamper_victim_index, e + 4, e + 36, payload_to_sign);
        crypto_sign_ed25519_detached(e + 68, NULL, payload_to_sign, sizeof payload_to_sign, id_sk);
        CHECK(sa_signature_ok(id_pk, tamper_setup_hash, tamper_victim_index, e + 4, e + 36, e + 68));
      }
      payload = msg;
    }
  }
  return BBI_FEDAVG.on_message(self, ctx, op, from, payload, len, err);
}

/* ---- a host that signs later: it records what to sign, and run() hands the signature over
 * with bb_node_signed after the step ---------------------------------------------------------- */

static struct federation *deferring; /* the federation whose signers defer */

static int deferred_sign(void *user, const char *slot, const uint8_t *msg, size_t len, uint8_t signature[64],
                         bb_error *err);

/* ---- a federation: server 1, clients 2..n --------------------------------------------------- */

typedef struct federation {
  bb_sim *sim;
  bb_registry *reg, *garbage_reg, *tamper_reg;
  bb_component_type garbage_type, tamper_type;
  uint8_t sk[MAX_PEERS][64];  /* each peer's identity (its peer id holds the public key) */
  bool unbound;               /* test ids (bb_peer_id_from_u64), no signers */
  bool deferred;              /* the signers answer later (BB_LATER), as a browser's does */
  bool stale_first;           /* deferred: each answer comes after a stale one (another payload's) */
  struct {
    size_t peer;
    char slot[32];
    uint8_t msg[256];
    size_t len;
  } asked[MAX_PEERS];         /* deferred: signatures asked for, not yet given */
  size_t n_asked;
  size_t signer_of[MAX_PEERS]; /* the user pointer each peer's signer gets */
  size_t bad_signature;       /* clients that refused a message for a bad signature */
  uint8_t *artifact;
  size_t len;
  size_t n;
  bb_node *node[MAX_PEERS];
  bb_peer_id peer[MAX_PEERS];
  float global[2];
  int64_t round;
  size_t to_server[MAX_PEERS]; /* messages each client delivered to the server */
  size_t crash_after[MAX_PEERS]; /* crash a client once it delivered this many (0: never) */
  bool crashed[MAX_PEERS];
} federation;

static int deferred_sign(void *user, const char *slot, const uint8_t *msg, size_t len, uint8_t signature[64],
                         bb_error *err) {
  (void)signature;
  federation *f = deferring;
  const size_t peer = *(const size_t *)user;
  if (f->n_asked == MAX_PEERS || len > sizeof f->asked[0].msg || strlen(slot) >= sizeof f->asked[0].slot)
    return bb_error_set(err, BB_ERR_LIMIT, "test signer: too much asked");
  f->asked[f->n_asked].peer = peer;
  snprintf(f->asked[f->n_asked].slot, sizeof f->asked[0].slot, "%s", slot);
  memcpy(f->asked[f->n_asked].msg, msg, len);
  f->asked[f->n_asked++].len = len;
  return BB_LATER;
}

static void observe(void *user, const bb_peer_id *peer, const bb_step *s) {
  federation *f = user;
  if (s->kind == BB_STEP_OP_FAILED && s->detail && strstr(s->detail, "not signed by its identity key")) f->bad_signature++;
  if (s->kind != BB_STEP_APP_EVENT || !bb_peer_id_equal(peer, &f->peer[0]) || !s->value) return;
  if (strcmp(s->topic, "global") == 0 && bb_val_kind_of(s->value) == BB_VAL_TENSOR)
    memcpy(f->global, bb_tensor_data(bb_val_as_tensor(s->value)), sizeof f->global);
  if (strcmp(s->topic, "round") == 0 && bb_val_is_u64(s->value)) f->round = (int64_t)bb_val_as_u64(s->value);
}

static void trace(void *user, const bb_sim_delivery *d) {
  federation *f = user;
  if (!d->accepted || !bb_peer_id_equal(d->to, &f->peer[0])) return;
  for (size_t i = 1; i < f->n; i++)
    if (bb_peer_id_equal(d->from, &f->peer[i])) f->to_server[i]++;
}

static int bind_round(bb_compiler *c, const void *user, bb_error *err) {
  static const bb_component_port tensor[] = {{"tensor", "ai.bytesandbrains.tensor.f32"}};
  static const bb_component_port element[] = {{"element", "ai.bytesandbrains.tensor.f32"}};
  bb_component_decl model = {sizeof model, "StepModel", tensor, 1, NULL, 0};
  bb_component_decl agg = {sizeof agg, "FedAvg", element, 1, NULL, 0};
  return bb_compiler_declare_component(c, &model, err) || bb_compiler_declare_component(c, &agg, err) ||
                 bb_compiler_bind_model(c, "model", "StepModel", NULL, err) ||
                 bb_compiler_bind_aggregator(c, "aggregator", "FedAvg", user, err)
             ? err->code
             : 0;
}

static bb_node *install_as(federation *f, size_t i, const char *model_config, bool garbage, bool tamper, bool plain) {
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
  a.n_targets = i || !plain ? 1 : 2; /* the plain plan's intake is a partition of its own */
  a.registry = garbage ? f->garbage_reg : tamper ? f->tamper_reg : f->reg;
  if (!f->unbound) {
    f->signer_of[i] = i;
    a.sign = f->deferred ? deferred_sign : bb_identity_sign;
    a.sign_user = f->deferred ? (void *)&f->signer_of[i] : (void *)f->sk[i];
  }
  bb_slot_config slot = {"model", model_config, NULL};
  a.slots = &slot;
  a.n_slots = model_config ? 1 : 0;
  bb_node_config nc = {.struct_size = sizeof nc, .seed = 100 + i};
  a.config = &nc;
  bb_node *n = NULL;
  bb_error err;
  CHECK_MSG(bb_install(&a, &n, NULL, &err) == 0, "peer %zu: %s", i + 1, err.message);
  for (size_t j = 0; n && j < f->n; j++) {
    bb_address other = p2p_address(&f->peer[j]);
    if (j != i) CHECK(bb_node_add_peer(n, &f->peer[j], &other, NULL) == 0);
  }
  return n;
}

/* Server 1 with FedAvg under `config`, n_clients clients with StepModel deltas 0.1 × k
 * (k = 1..n_clients); client `garbage` (0: none) sends garbage; with `victim` (0: none)
 * the server substitutes that client's keys. Each peer's id is its Ed25519 identity's,
 * and it signs with that identity, unless `unbound` (test ids, no signers). */
/* How the peers' signers answer. */
typedef enum { SIGN_NOW, SIGN_LATER, SIGN_LATER_AFTER_STALE } signing;

static bool federation_open_as(federation *f, const char *config, size_t n_clients, size_t garbage, size_t victim,
                               bool unbound, signing how, bool plain) {
  const bool deferred = how != SIGN_NOW, stale_first = how == SIGN_LATER_AFTER_STALE;
  memset(f, 0, sizeof *f);
  f->unbound = unbound;
  f->deferred = deferred;
  f->stale_first = stale_first;
  deferring = f;
  f->round = -1;
  f->n = n_clients + 1;
  const bb_module module = {sizeof(bb_module), "Round", secure_body, NULL, plain ? (void *)"plain" : NULL, NULL, 0};
  f->artifact = compile_test_module(&module, bind_round, config, &f->len);
  f->reg = bb_registry_new(NULL);
  f->garbage_reg = bb_registry_new(NULL);
  f->garbage_type = BBI_FEDAVG;
  f->garbage_type.on_message = garbage_on_message;
  CHECK(f->reg && bb_registry_add_shipped(f->reg, NULL) == 0 && bb_registry_add(f->reg, &STEP_MODEL, NULL) == 0);
  CHECK(f->garbage_reg && bb_registry_add(f->garbage_reg, &f->garbage_type, NULL) == 0 &&
        bb_registry_add(f->garbage_reg, &STEP_MODEL, NULL) == 0);
  f->tamper_reg = bb_registry_new(NULL);
  f->tamper_type = BBI_FEDAVG;
  f->tamper_type.on_message = tamper_on_message;
  CHECK(f->tamper_reg && bb_registry_add(f->tamper_reg, &f->tamper_type, NULL) == 0 &&
        bb_registry_add(f->tamper_reg, &STEP_MODEL, NULL) == 0);
  bb_sim_config sc = {.struct_size = sizeof sc, .seed = 1, .latency_ns = MS};
  CHECK(bb_sim_new(&sc, &f->sim, NULL) == 0);
  if (!f->artifact || !f->sim) return false;
  for (size_t i = 0; i < f->n; i++) {
    uint8_t pk[32];
    CHECK(bb_secagg_identity_new(pk, f->sk[i], NULL, NULL) == 0);
    f->peer[i] = unbound ? bb_peer_id_from_u64(i + 1) : bb_peer_id_from_ed25519(pk);
  }
  tamper_victim = &f->peer[victim];
  tamper_victim_index = UINT32_MAX;
  bb_val *server = bb_val_peers(NULL, &f->peer[0], 1);
  for (size_t i = 0; i < f->n; i++) {
    char model[32];
    snprintf(model, sizeof model, "delta=%.9g", 0.1 * (double)i);
    if (!(f->node[i] = install_as(f, i, i ? model : NULL, i && i == garbage, victim && i, plain))) return false;
    CHECK(bb_sim_attach(f->sim, f->node[i], &f->peer[i], NULL) == 0);
    if (i && plain) CHECK(bb_node_bind_input(f->node[i], "Round_clients", "server", server, NULL) == 0);
  }
  bb_val_release(server);
  bb_sim_set_observer(f->sim, observe, f);
  bb_sim_set_tracer(f->sim, trace, f);
  return true;
}

static bool federation_open(federation *f, const char *config, size_t n_clients, size_t garbage, bool plain) {
  return federation_open_as(f, config, n_clients, garbage, 0, false, SIGN_NOW, plain);
}

static void federation_close(federation *f) {
  bb_sim_free(f->sim);
  for (size_t i = 0; i < f->n; i++) bb_node_free(f->node[i]);
  bb_registry_free(f->reg);
  bb_registry_free(f->garbage_reg);
  bb_registry_free(f->tamper_reg);
  free(f->artifact);
}

/* Runs the network until `until`, crashing each client as soon as it has delivered its
 * crash_after-th message to the server. */
static void run(federation *f, uint64_t until) {
  bb_error err;
  while (bb_sim_next_event(f->sim) <= until) {
    CHECK_MSG(bb_sim_step(f->sim, &err) == 0, "%s", err.message);
    for (size_t k = 0; k < f->n_asked; k++) { /* the signatures asked for during the step */
      uint8_t sig[64];
      if (f->stale_first) { /* what a host still signing for an earlier round hands over */
        crypto_sign_ed25519_detached(sig, NULL, (const uint8_t *)"an earlier round", 16, f->sk[f->asked[k].peer]);
        CHECK(bb_node_signed(f->node[f->asked[k].peer], f->asked[k].slot, sig, bb_sim_now(f->sim), &err) == 0);
      }
      crypto_sign_ed25519_detached(sig, NULL, f->asked[k].msg, f->asked[k].len, f->sk[f->asked[k].peer]);
      CHECK_MSG(bb_node_signed(f->node[f->asked[k].peer], f->asked[k].slot, sig, bb_sim_now(f->sim), &err) == 0, "%s",
                err.message);
    }
    f->n_asked = 0;
    for (size_t i = 1; i < f->n; i++)
      if (f->crash_after[i] && !f->crashed[i] && f->to_server[i] >= f->crash_after[i]) {
        CHECK(bb_sim_crash(f->sim, &f->peer[i]) == 0);
        f->crashed[i] = true;

      }
  }
  CHECK(bb_sim_run_until(f->sim, until, NULL) == 0);
}

/* One Aggregate on the server at `at` to every client, then the network for `span`. */
static void server_round(federation *f, uint64_t at, uint64_t span) {
  bb_val *peers = bb_val_peers(NULL, f->peer + 1, f->n - 1), *tick = f32_val((const float[]){1}, 1);
  bb_named_value in[] = {{"clients", peers}, {"tick", tick}};
  run(f, at);
  bb_error err;
  CHECK_MSG(bb_node_invoke(f->node[0], "Round", in, 2, at, &err) == 0, "%s", err.message);
  bb_val_release(peers);
  bb_val_release(tick);
  run(f, at + span);
}

static uint64_t counter(const federation *f, const char *name) { return bb_node_counter(f->node[0], name); }

/* The mean step of clients 1..10 (0.1 k each): 0.55, within a quantisation step per
 * summed client (divided by the 10 weights) and float rounding. */
static void check_mean(const federation *f, double want, uint32_t summed) {
  const double bound = summed * STEP / summed + 1e-6;
  CHECK_MSG(fabs(f->global[0] - want) <= bound && fabs(f->global[1] + want) <= bound, "global %.9g %.9g, want ±%.9g",
            (double)f->global[0], (double)f->global[1], want);
}

#define CONFIG "init=model,secure=1,target=10,deadline_ms=5000,no_quorum=abandon,secure_timeout_ms=1000"

/* 3 of 10 crash after their masked vectors reached the server (join, keys, shares, masked
 * input: their 4th message of the round): their self-masks are rebuilt from their
 * neighbours' shares at the unmask stage's deadline, and the mean is still everyone's. */
static void test_three_drop_after_masking(void) {
  federation f;
  if (federation_open(&f, CONFIG, 10, 0, false)) {
    server_round(&f, 0, 100 * MS); /* round 0 (the init model) runs with everyone */
    f.crash_after[2] = f.to_server[2] + 4;
    f.crash_after[5] = f.to_server[5] + 4;
    f.crash_after[9] = f.to_server[9] + 4;
    server_round(&f, 200 * MS, 5000 * MS); /* round 0 closes; round 1 runs with the crashes */
    CHECK_EQ_INT(f.round, 1);
    check_mean(&f, 0.55, 10);
    server_round(&f, 5400 * MS, 100 * MS); /* round 1 closes */
    CHECK(f.crashed[2] && f.crashed[5] && f.crashed[9]);
    CHECK_EQ_INT(f.round, 2);
    check_mean(&f, 2 * 0.55, 10);
    CHECK_EQ_INT(counter(&f, "fedavg.secagg_rounds"), 2);
    CHECK_EQ_INT(counter(&f, "fedavg.secagg_summed"), 20);
    CHECK_EQ_INT(counter(&f, "fedavg.rounds_abandoned"), 0);
    /* the answers that come after a sum is complete are expected: counted, not failures */
    CHECK(counter(&f, "fedavg.secagg_late") > 0);
    CHECK_EQ_INT(counter(&f, "messages.failed"), 0);
  }
  federation_close(&f);
}

/* 6 of 10 crash after masking: 4 answer the unmask request, below the threshold (5): the
 * SecAgg+ round aborts, nothing is unmasked, the FedAvg round is abandoned and the model
 * given out again unmoved. */
static void test_below_threshold_aborts(void) {
  federation f;
  if (federation_open(&f, CONFIG, 10, 0, false)) {
    server_round(&f, 0, 100 * MS);
    for (size_t i = 1; i <= 6; i++) f.crash_after[i] = f.to_server[i] + 4;
    server_round(&f, 200 * MS, 5000 * MS);
    const float before[2] = {f.global[0], f.global[1]};
    check_mean(&f, 0.55, 10);
    server_round(&f, 5400 * MS, 100 * MS);
    CHECK_EQ_INT(counter(&f, "fedavg.secagg_aborted"), 1);
    CHECK_EQ_INT(counter(&f, "fedavg.secagg_rounds"), 1);
    CHECK_EQ_INT(counter(&f, "fedavg.rounds_abandoned"), 1);
    CHECK_EQ_INT(f.round, 2); /* round 1 abandoned: round 2 opens with round 1's model */
    CHECK(f.global[0] == before[0] && f.global[1] == before[1]);
    CHECK_EQ_INT(counter(&f, "fedavg.secagg_summed"), 10); /* round 0's only */
  }
  federation_close(&f);
}

/* Client 4 answers every SecAgg+ message of the server with garbage first: the server
 * expels it, and each round closes with the other 9 (mean of 0.1 k, k = 1..10 but 4). */
static void test_garbage_client_is_expelled(void) {
  federation f;
  if (federation_open(&f, CONFIG, 10, 4, false)) {
    server_round(&f, 0, 100 * MS);
    server_round(&f, 200 * MS, 100 * MS);
    CHECK_EQ_INT(f.round, 1);
    check_mean(&f, (5.5 - 0.4) / 9, 9);
    const uint64_t rounds = counter(&f, "fedavg.secagg_rounds");
    CHECK(rounds >= 1);
    CHECK_EQ_INT(counter(&f, "fedavg.secagg_summed"), 9 * rounds);
    CHECK(counter(&f, "fedavg.secagg_refused") >= rounds);
    /* round 1 ran within the last 100 ms, its stages' deadlines are still ahead: one
       pending timer serves them all, timers do not pile up with the messages */
    bb_node_stats st;
    bb_node_stats_get(f.node[0], &st);
    CHECK_MSG(st.timers <= 2, "%zu timers pending on the server", st.timers);
  }
  federation_close(&f);
}

/* dp_clip under secure=1 is applied by each client before masking: steps 0.8, 0.9 and
 * 1.0 per coordinate (L2 norm above 1) count as 1/√2 each, and each round that closed is
 * a round of the accountant. */
static void test_dp_clips_on_the_clients(void) {
  federation f;
  if (federation_open(&f, CONFIG ",dp_clip=1", 10, 0, false)) {
    server_round(&f, 0, 100 * MS);
    server_round(&f, 200 * MS, 100 * MS);
    check_mean(&f, (2.8 + 3 * sqrt(0.5)) / 10, 10);
    CHECK_EQ_INT(counter(&f, "fedavg.dp_rounds"), 1);
  }
  federation_close(&f);
}

/* secure_shares=3 with 4 clients is every other client; when one has left, the round of
 * the other 3 shares with every other client (2) rather than being refused. */
static void test_shares_follow_the_clients_that_joined(void) {
  federation f;
  if (federation_open(&f, "init=model,secure=1,target=4,deadline_ms=1000,no_quorum=abandon,secure_shares=3", 4, 0,
                      false)) {
    server_round(&f, 0, 100 * MS);
    CHECK(bb_sim_crash(f.sim, &f.peer[4]) == 0);
    server_round(&f, 200 * MS, 2000 * MS); /* round 0 closes; round 1 starts at its deadline with 3 */
    server_round(&f, 2400 * MS, 100 * MS);
    CHECK_EQ_INT(f.round, 2);
    CHECK_EQ_INT(counter(&f, "fedavg.secagg_refused_setup"), 0);
    CHECK_EQ_INT(counter(&f, "fedavg.secagg_summed"), 4 + 3);
    check_mean(&f, 0.25 + 0.2, 4);
  }
  federation_close(&f);
}

/* A client whose plan sends its update in the clear is refused: secure=1 takes none. */
static void test_plain_update_refused(void) {
  federation f;
  if (federation_open(&f, CONFIG, 3, 0, true)) {
    server_round(&f, 0, 100 * MS);
    server_round(&f, 200 * MS, 100 * MS);
    CHECK_EQ_INT(counter(&f, "fedavg.refused_plain"), 3);
    CHECK(f.global[0] == 0 && f.global[1] == 0);
  }
  federation_close(&f);
}

/* Settings that need the single updates, or that cannot be kept, are refused by name. */
static void test_secure_config_refused(void) {
  static const char *const BAD[][2] = {
      {"secure=1", "init="},
      {"secure=1,init=model,norm_factor=3", "norm_factor"},
      {"secure=1,init=model,max_norm=1", "max_norm"},
      {"secure=1,init=model,ascent_screen=0.1", "ascent_screen"},
      {"secure=1,init=model,center_clip=1", "center_clip"},
      {"secure=1,init=model,samples_factor=1", "samples_factor"},
      {"secure=1,init=model,drop_factor=2", "drop_factor"},
      {"secure=1,init=model,beyond_norm=drop", "beyond_norm"},
      {"secure=1,init=model,weighting=samples", "max_samples"},
      {"secure=1,rounds=follow", "rounds=follow"},
      {"secure=2,init=model", "secure"},
      {"secure_threshold=3,init=model", "secure=1"},
      {"secure=1,init=model,secure_shares=300", "secure_shares"},
      {"secure=1,init=model,dp_clip=1,dp_clip_quantile=0.5", "dp_clip_quantile with secure=1"},
      {"secure=1,init=model,dp_clip=1,dp_sample_rate=0.5,dp_clients=10,quorum=1,target=0,deadline_ms=1000,"
       "no_quorum=abandon,late=drop",
       "dp_sample_rate with secure=1"},
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
  static const char *const GOOD[] = {"secure=1,init=model", "secure=1,init=model,weighting=samples,max_samples=64",
                                     "secure=1,init=model,dp_clip=1,dp_noise=1.1,secure_threshold=4,secure_shares=6"};
  for (size_t i = 0; i < sizeof GOOD / sizeof *GOOD; i++) {
    bb_component_init init = {"aggregator", GOOD[i], 0, 7, bb_default_allocator(), NULL, NULL};
    void *self = NULL;
    bb_error err = {0};
    CHECK_MSG(BBI_FEDAVG.create(&init, &self, &err) == 0, "`%s`: %s", GOOD[i], err.message);
    if (self) BBI_FEDAVG.destroy(self);
  }
}

/* The server substitutes client 3's advertised keys, for every other client, with an X25519
 * pair of its own signed by an Ed25519 identity of its own: each neighbour checks a key
 * against the identity its peer id holds, listed in the setup, so each refuses
 * (bad_signature) and aborts; no sum comes in and the model does not move. */
static void test_substituted_keys_refused(void) {
  federation f;
  if (federation_open_as(&f, CONFIG, 10, 0, 3, false, SIGN_NOW, false)) {
    server_round(&f, 0, 100 * MS);
    server_round(&f, 200 * MS, 5000 * MS);
    CHECK(tamper_victim_index != UINT32_MAX);
    CHECK_MSG(f.bad_signature >= 1, "%zu clients refused the substituted keys", f.bad_signature);
    size_t aborted = 0;
    for (size_t i = 1; i < f.n; i++) aborted += bb_node_counter(f.node[i], "fedavg.secagg_client_aborted");
    CHECK_MSG(aborted == f.bad_signature, "%zu aborted, %zu refused", aborted, f.bad_signature);
    CHECK_EQ_INT(counter(&f, "fedavg.secagg_rounds"), 0);
    CHECK_EQ_INT(counter(&f, "fedavg.secagg_summed"), 0);
  }
  federation_close(&f);
}

/* Signers that answer later (as WebCrypto does in a browser): each client's signature comes
 * through bb_node_signed after the step that asked for it — each after a stale one, over
 * another payload, which is dropped — and the rounds sum everyone. A signature for a slot
 * no component is bound at is refused by name. */
static void test_deferred_signer(void) {
  federation f;
  if (federation_open_as(&f, "init=model,secure=1,target=4,deadline_ms=5000,secure_timeout_ms=1000", 4, 0, 0, false,
                         SIGN_LATER_AFTER_STALE, false)) {
    server_round(&f, 0, 100 * MS);
    server_round(&f, 200 * MS, 5000 * MS);
    CHECK_EQ_INT(f.round, 1);
    check_mean(&f, 0.25, 4);
    /* every sum (round 1's may be in, to be taken when the server aggregates next) holds all 4 */
    CHECK(counter(&f, "fedavg.secagg_rounds") >= 1);
    CHECK_EQ_INT(counter(&f, "fedavg.secagg_summed"), 4 * counter(&f, "fedavg.secagg_rounds"));
    CHECK_EQ_INT(counter(&f, "messages.failed"), 0);
    for (size_t i = 1; i < f.n; i++) CHECK(bb_node_counter(f.node[i], "fedavg.secagg_late") >= 1);
    uint8_t sig[64] = {0};
    bb_error err;
    CHECK_EQ_INT(bb_node_signed(f.node[1], "nowhere", sig, 0, &err), BB_ERR_NOT_FOUND);
    CHECK(strstr(err.message, "nowhere") != NULL);
  }
  federation_close(&f);
}

/* Clients whose peer ids hold no key (test ids) and have no signer cannot join: each
 * contribution is refused by name and the server never starts a round. */
static void test_unbound_clients_cannot_join(void) {
  federation f;
  if (federation_open_as(&f, CONFIG, 4, 0, 0, true, SIGN_NOW, false)) {
    server_round(&f, 0, 100 * MS);
    server_round(&f, 200 * MS, 100 * MS);
    for (size_t i = 1; i < f.n; i++) CHECK(bb_node_counter(f.node[i], "fedavg.secagg_no_identity") >= 1);
    CHECK_EQ_INT(counter(&f, "fedavg.secagg_started"), 0);
  }
  federation_close(&f);
}

int main(void) {
  RUN(test_substituted_keys_refused);
  RUN(test_unbound_clients_cannot_join);
  RUN(test_deferred_signer);
  RUN(test_secure_config_refused);
  RUN(test_three_drop_after_masking);
  RUN(test_below_threshold_aborts);
  RUN(test_garbage_client_is_expelled);
  RUN(test_dp_clips_on_the_clients);
  RUN(test_shares_follow_the_clients_that_joined);
  RUN(test_plain_update_refused);
  return bb_test_finish();
}
