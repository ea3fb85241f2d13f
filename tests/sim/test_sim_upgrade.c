/* A rolling upgrade over the simulator. A federation (a server and four clients) runs
 * FedAvg rounds with artifact v1 of Module Fleet; the server, then half the clients move
 * to v2 (one op and one metric output more on either side, the same wires), each new node
 * taking over from the one it replaces; the rounds go on without a gap and every
 * aggregate is the weighted mean of what was contributed. Then one client moves to v3,
 * which sends its update on the same wire as another type: the v2 server refuses every
 * such fill with a counted, named reason, and the others carry the federation on. */
#include <inttypes.h>
#include <math.h>

#include "bb/dataset.h"
#include "bb/sim.h"
#include "runtime/rttest.h"

#define N_CLIENTS 4
#define SERVER 10
#define MS 1000000ull
#define ROUND_NS (100 * MS)
#define MAX_ROUNDS 64
#define N_PARAMS 58 /* 4 inputs, 8 hidden, 2 outputs: 4*8+8 + 8*2+2 */

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot DATA = {BB_ROLE_DATA_SOURCE, "data", NULL};
static const bb_slot AGGREGATOR = {BB_ROLE_AGGREGATOR, "aggregator", NULL};

/* Fleet, version *(int *)user. v2 adds a metric on each side; v3 sends a client's update
 * as the bare parameters (a tensor) where v1 and v2 send a bundle. */
static void fleet(bb_rec *g, void *user) {
  int version = *(const int *)user;
  bb_value clients = bb_rec_input(g, "clients", BB_TYPE_PEER_ID_VEC);
  bb_value server = bb_rec_input(g, "server", BB_TYPE_PEER_ID_VEC);
  /* the server's round loop */
  bb_value global, round;
  bb_rec_aggregator_aggregate(g, &AGGREGATOR, bb_rec_interval(g, ROUND_NS), &global, &round);
  bb_rec_output(g, "round", round);
  bb_rec_output(g, "model", global);
  if (version >= 2) bb_rec_output(g, "closed_round", bb_rec_pass_through(g, round));
  bb_value to_clients[2] = {global, round};
  bb_rec_net_out(g, "global", clients, bb_rec_bundle(g, to_clients, 2));
  /* a client's round */
  static const char *const PARTS[] = {BB_TYPE_TENSOR_F32, BB_TYPE_ABSTRACT};
  bb_value got[2], trained, samples;
  bb_rec_unbundle(g, bb_rec_lookup_output(g, "global"), PARTS, got, 2);
  bb_rec_model_fit(g, &MODEL, got[0], &trained, &samples);
  bb_rec_output(g, "trained", trained);
  bb_rec_output(g, "trained_samples", samples);
  bb_rec_output(g, "trained_round", got[1]);
  if (version >= 2) {
    bb_value x, labels;
    bb_rec_data_source_next_batch_after(g, &DATA, trained, &x, &labels);
    bb_rec_output(g, "accuracy", bb_rec_model_evaluate(g, &MODEL, x, labels));
  }
  if (version == 3) {
    bb_rec_net_out(g, "update", server, trained);
  } else {
    bb_value update[3] = {trained, samples, got[1]};
    bb_rec_net_out(g, "update", server, bb_rec_bundle(g, update, 3));
  }
  /* the server takes it in (a bundle: FedAvg reads [update, samples, round] from it) */
  bb_value received = bb_rec_lookup_output(g, "update");
  bb_rec_aggregator_contribute(g, &AGGREGATOR, received, received);
}

static const int V1 = 1, V2 = 2, V3 = 3;

/* The parameters are float32 tensors: what the model, the data and FedAvg store. */
static int declare(bb_compiler *c, const char *type, const char *port, bb_error *err) {
  bb_component_port storage = {port, BB_TYPE_TENSOR_F32};
  bb_component_decl d = {sizeof d, type, &storage, 1, NULL, 0};
  return bb_compiler_declare_component(c, &d, err);
}

static int configure(bb_compiler *c, const void *user, bb_error *err) {
  (void)user;
  return declare(c, "CpuMlp", "tensor", err) || declare(c, "ArraySource", "sample", err) ||
                 declare(c, "FedAvg", "element", err) ||
                 bb_compiler_bind_model(c, "model", "CpuMlp",
                                        "inputs=4,hidden=8,outputs=2,lr=0.2,momentum=0,fit_steps=1", err) ||
                 bb_compiler_bind_data_source(c, "data", "ArraySource", NULL, err) ||
                 /* the check below is the exact weighted mean: the ascent screen, which may
                  * cut an honest update of four single noisy SGD steps for a round, is off */
                 bb_compiler_bind_aggregator(c, "aggregator", "FedAvg",
                                             "quorum=2,target=4,deadline_ms=150,no_quorum=abandon,init=model,ascent_screen=0",
                                             err)
             ? err->code
             : 0;
}

/* ---- the federation ------------------------------------------------------------------------- */

typedef struct client_run {
  float params[N_PARAMS];
  uint64_t samples, round;
  unsigned have;
} client_run;

typedef struct fleet_log {
  double sum[MAX_ROUNDS][N_PARAMS];
  uint64_t weight[MAX_ROUNDS], senders[MAX_ROUNDS];
  client_run client[N_CLIENTS];
  bool v3[N_CLIENTS]; /* its updates are refused: not counted */
  uint64_t closed_at[MAX_ROUNDS]; /* when the round was closed (0: not yet) */
  float global[N_PARAMS];
  bool have_global;
  int last_open, checked, mismatched;
  size_t accuracy[N_CLIENTS], closed_round_metric, failed_ops, type_refusals, other_refusals;
  char refusal[512];
  uint64_t now;
} fleet_log;

static void check_round(fleet_log *f, uint64_t open) {
  if (!open || open > MAX_ROUNDS) return;
  uint64_t closed = open - 1;
  f->closed_at[closed] = f->now;
  double worst = 0;
  for (size_t k = 0; k < N_PARAMS && f->weight[closed]; k++) {
    double want = f->sum[closed][k] / (double)f->weight[closed];
    double d = fabs(want - f->global[k]) / (1e-6 + fabs(want));
    if (d > worst) worst = d;
  }
  f->checked++;
  f->mismatched += !(f->weight[closed] && worst < 1e-5);
  CHECK_MSG(f->weight[closed] && worst < 1e-5, "round %" PRIu64 ": aggregate off the weighted mean by %.1e", closed,
            worst);
}

static void observe(void *user, const bb_peer_id *peer, const bb_step *s) {
  fleet_log *f = user;
  uint64_t id = 0;
  bb_peer_id_as_u64(peer, &id);
  if (s->kind == BB_STEP_OP_FAILED) {
    f->failed_ops++;
    fprintf(stderr, "  peer %" PRIu64 ": %s %s\n", id, s->op ? s->op : "", s->detail ? s->detail : "");
  }
  if (s->kind == BB_STEP_WIRE_RECEIVE_FAILED) {
    if (id == SERVER && strcmp(s->reason, "type_mismatch") == 0) {
      f->type_refusals++;
      snprintf(f->refusal, sizeof f->refusal, "%s", s->detail);
    } else {
      f->other_refusals++;
    }
  }
  if (s->kind != BB_STEP_APP_EVENT || !s->value) return;
  if (id == SERVER) {
    if (strcmp(s->topic, "model") == 0 && bb_val_kind_of(s->value) == BB_VAL_TENSOR && bb_val_as_tensor(s->value)->numel == N_PARAMS) {
      memcpy(f->global, bb_tensor_data(bb_val_as_tensor(s->value)), sizeof f->global);
      f->have_global = true;
    } else if (strcmp(s->topic, "round") == 0 && bb_val_is_u64(s->value) && f->have_global) {
      f->last_open = (int)bb_val_as_u64(s->value);
      check_round(f, bb_val_as_u64(s->value));
      f->have_global = false;
    } else if (strcmp(s->topic, "closed_round") == 0) {
      f->closed_round_metric++;
    }
    return;
  }
  if (id < 1 || id > N_CLIENTS) return;
  client_run *c = &f->client[id - 1];
  if (strcmp(s->topic, "accuracy") == 0) f->accuracy[id - 1]++;
  else if (strcmp(s->topic, "trained") == 0 && bb_val_kind_of(s->value) == BB_VAL_TENSOR) {
    memcpy(c->params, bb_tensor_data(bb_val_as_tensor(s->value)), sizeof c->params);
    c->have |= 1;
  } else if (strcmp(s->topic, "trained_samples") == 0 && bb_val_is_u64(s->value)) {
    c->samples = bb_val_as_u64(s->value);
    c->have |= 2;
  } else if (strcmp(s->topic, "trained_round") == 0 && bb_val_is_u64(s->value)) {
    c->round = bb_val_as_u64(s->value);
    c->have |= 4;
  }
  if (c->have == 7) {
    if (!f->v3[id - 1] && c->round < MAX_ROUNDS) {
      for (size_t k = 0; k < N_PARAMS; k++) f->sum[c->round][k] += (double)c->samples * c->params[k];
      f->weight[c->round] += c->samples;
      f->senders[c->round]++;
    }
    c->have = 0;
  }
}

typedef struct federation {
  bb_sim *sim;
  bb_registry *reg;
  bb_dataset data[N_CLIENTS];
  uint8_t *art[4];
  size_t len[4];
  bb_node *server, *clients[N_CLIENTS];
  fleet_log log;
} federation;

static const char *const SERVER_TARGETS[] = {"Fleet", "Fleet_server"};
static const char *const CLIENT_TARGETS[] = {"Fleet_clients"};

static bb_val *peers_of(const uint64_t *ids, size_t n) {
  bb_peer_id p[N_CLIENTS];
  for (size_t i = 0; i < n; i++) p[i] = bb_peer_id_from_u64(ids[i]);
  return bb_val_peers(NULL, p, n);
}

static bb_node *install_version(federation *fd, int version, uint64_t id) {
  bool server = id == SERVER;
  bb_node_config nc = {0};
  nc.struct_size = sizeof nc;
  nc.seed = id;
  /* every node builds every bound slot: the server's data source holds data it never reads */
  bb_slot_config data = {"data", "batch=8", &fd->data[server ? 0 : id - 1]};
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = bb_peer_id_from_u64(id);
  bb_address me = bb_address_p2p(&a.self);
  a.addresses = &me;
  a.n_addresses = 1;
  a.artifact = fd->art[version];
  a.artifact_len = fd->len[version];
  a.targets = server ? SERVER_TARGETS : CLIENT_TARGETS;
  a.n_targets = server ? 2 : 1;
  a.registry = fd->reg;
  a.slots = &data;
  a.n_slots = 1;
  a.config = &nc;
  bb_node *n = NULL;
  bb_error err;
  CHECK_MSG(bb_install(&a, &n, NULL, &err) == 0, "install v%d as %" PRIu64 ": %s", version, id, err.message);
  if (!n) return NULL;
  /* who it talks to: the server its clients, each client the server */
  uint64_t ids[N_CLIENTS] = {1, 2, 3, 4}, server_id = SERVER;
  bb_val *v = server ? peers_of(ids, N_CLIENTS) : peers_of(&server_id, 1);
  CHECK(bb_node_bind_input(n, server ? "Fleet" : "Fleet_clients", server ? "clients" : "server", v, NULL) == 0);
  bb_val_release(v);
  return n;
}

/* A peer moves to another version: the new node takes over from the old one and
 * replaces it in the simulator, messages in flight included. */
static bb_node *upgrade(federation *fd, bb_node *old, int version, uint64_t id) {
  bb_node *fresh = install_version(fd, version, id);
  bb_error err;
  CHECK_MSG(fresh && bb_node_take_over(fresh, old, &err) == 0, "take over %" PRIu64 ": %s", id,
            fresh ? err.message : "");
  bb_peer_id p = bb_peer_id_from_u64(id);
  CHECK(bb_sim_restart(fd->sim, &p, fresh) == old);
  bb_node_free(old);
  if (id == SERVER) CHECK(bb_node_invoke(fresh, "Fleet", NULL, 0, bb_sim_now(fd->sim), NULL) == 0);
  return fresh;
}

/* Steps the simulator until `rounds` more rounds closed (or a time limit passed). */
static void run_rounds(federation *fd, int rounds) {
  int target = fd->log.last_open + rounds;
  uint64_t limit = bb_sim_now(fd->sim) + (uint64_t)(rounds + 4) * 3 * ROUND_NS;
  bb_error err;
  while (fd->log.last_open < target && bb_sim_now(fd->sim) < limit) {
    int rc = bb_sim_step(fd->sim, &err);
    fd->log.now = bb_sim_now(fd->sim);
    CHECK_MSG(rc >= 0, "%s", err.message);
    if (rc) break;
  }
  CHECK_MSG(fd->log.last_open >= target, "stalled at round %d, wanted %d", fd->log.last_open, target);
}

/* No round took longer than `within` to close after the one before, from round `from` on. */
static void check_no_gap(const fleet_log *f, int from, uint64_t within) {
  for (int r = from + 1; r < f->last_open; r++) {
    CHECK_MSG(f->closed_at[r] && f->closed_at[r - 1], "round %d or %d never closed", r - 1, r);
    if (f->closed_at[r] && f->closed_at[r - 1])
      CHECK_MSG(f->closed_at[r] - f->closed_at[r - 1] <= within, "round %d closed %" PRIu64 " ms after round %d", r,
                (uint64_t)((f->closed_at[r] - f->closed_at[r - 1]) / MS), r - 1);
  }
}

static void make_data(bb_dataset *ds, size_t n, uint64_t seed) {
  CHECK(bb_dataset_init(ds, n, 4, 1, NULL, NULL) == 0);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    float score = 0;
    for (size_t d = 0; d < 4; d++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      float x = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
      ds->features[i * 4 + d] = x;
      score += x * (d % 2 ? -1.0f : 1.0f);
    }
    ds->labels[i] = score > 0;
  }
}

static void test_rolling_upgrade(void) {
  federation *fd = calloc(1, sizeof *fd);
  if (!fd) return;
  const int *versions[] = {NULL, &V1, &V2, &V3};
  for (int v = 1; v <= 3; v++) {
    const bb_module m = {sizeof(bb_module), "Fleet", fleet, NULL, (void *)versions[v], NULL, 0};
    fd->art[v] = compile_test_module(&m, configure, NULL, &fd->len[v]);
  }
  bb_sim_config sc = {sizeof sc, 42, 5 * MS, 2 * MS, 0, 0, 0, 0, 0, 0};
  bb_error err;
  fd->reg = bb_registry_new(NULL);
  CHECK(fd->reg && bb_registry_add_shipped(fd->reg, NULL) == 0);
  CHECK(bb_sim_new(&sc, &fd->sim, &err) == 0);
  if (!fd->art[1] || !fd->art[2] || !fd->art[3] || !fd->sim) goto out;
  bb_sim_set_observer(fd->sim, observe, &fd->log);
  for (int i = 0; i < N_CLIENTS; i++) make_data(&fd->data[i], 16 + 8 * (size_t)i, (uint64_t)i + 7);

  /* before anything is installed: v1 and v2 can talk, v2 and v3 cannot */
  bb_model *m[4] = {0};
  for (int v = 1; v <= 3; v++) CHECK(bb_model_decode(fd->art[v], fd->len[v], NULL, NULL, &m[v], NULL) == 0);
  char *text = NULL;
  bool talk = false;
  CHECK(bb_artifact_wires_compare(m[1], "v1", m[2], "v2", BB_ARTIFACT_TEXT, &text, NULL, &talk, &err) == 0 && talk);
  bb_buffer_free(NULL, text);
  CHECK(bb_artifact_wires_compare(m[2], "v2", m[3], "v3", BB_ARTIFACT_TEXT, &text, NULL, &talk, &err) == 0 && !talk);
  CHECK_MSG(text && strstr(text, "disagrees  Fleet.update  v2 sends ai.bytesandbrains.composite, v3 expects "
                                 "ai.bytesandbrains.tensor.f32"),
            "%s", text ? text : "");
  bb_buffer_free(NULL, text);
  for (int v = 1; v <= 3; v++) bb_model_free(m[v]);

  /* v1 everywhere */
  bb_peer_id sp = bb_peer_id_from_u64(SERVER);
  fd->server = install_version(fd, 1, SERVER);
  CHECK(fd->server && bb_sim_attach(fd->sim, fd->server, &sp, &err) == 0);
  for (uint64_t i = 1; i <= N_CLIENTS; i++) {
    bb_peer_id p = bb_peer_id_from_u64(i);
    bb_address at = bb_address_p2p(&p);
    fd->clients[i - 1] = install_version(fd, 1, i);
    CHECK(fd->clients[i - 1] && bb_sim_attach(fd->sim, fd->clients[i - 1], &p, &err) == 0);
    if (fd->server) CHECK(bb_node_add_peer(fd->server, &p, &at, NULL) == 0);
    bb_address sat = bb_address_p2p(&sp);
    if (fd->clients[i - 1]) CHECK(bb_node_add_peer(fd->clients[i - 1], &sp, &sat, NULL) == 0);
  }
  if (!fd->server) goto out;
  CHECK(bb_node_invoke(fd->server, "Fleet", NULL, 0, 0, NULL) == 0);
  run_rounds(fd, 3);
  int v1_rounds = fd->log.last_open;

  /* the server moves to v2 right after a round closed; its rounds go on from where they were */
  fd->server = upgrade(fd, fd->server, 2, SERVER);
  run_rounds(fd, 3);
  CHECK(fd->log.closed_round_metric >= 3);
  /* then half the clients */
  for (int i = 0; i < N_CLIENTS / 2; i++) fd->clients[i] = upgrade(fd, fd->clients[i], 2, (uint64_t)i + 1);
  int mixed_from = fd->log.last_open;
  run_rounds(fd, 3);
  check_no_gap(&fd->log, 1, ROUND_NS + 20 * MS);
  CHECK_MSG(fd->log.mismatched == 0 && fd->log.checked >= 9, "%d checked, %d mismatched", fd->log.checked,
            fd->log.mismatched);
  for (int r = v1_rounds; r < fd->log.last_open - 1; r++)
    CHECK_MSG(fd->log.senders[r] == N_CLIENTS, "round %d: %" PRIu64 " updates", r, fd->log.senders[r]);
  for (int i = 0; i < N_CLIENTS; i++) /* the v2 clients report their metric, the v1 ones have none */
    CHECK_MSG(i < N_CLIENTS / 2 ? fd->log.accuracy[i] >= 3 : fd->log.accuracy[i] == 0, "client %d: %zu", i + 1,
              fd->log.accuracy[i]);
  CHECK(fd->log.senders[mixed_from] == N_CLIENTS);
  CHECK_EQ_INT(fd->log.failed_ops + fd->log.type_refusals + fd->log.other_refusals, 0);

  /* v3 changes the update's type: the v2 server refuses each, names the wire, counts it */
  fd->log.v3[N_CLIENTS - 1] = true;
  fd->clients[N_CLIENTS - 1] = upgrade(fd, fd->clients[N_CLIENTS - 1], 3, N_CLIENTS);
  int v3_from = fd->log.last_open;
  run_rounds(fd, 3);
  CHECK(fd->log.type_refusals >= 3);
  CHECK_EQ_INT(bb_node_counter(fd->server, "wire.type_mismatch"), fd->log.type_refusals);
  CHECK_MSG(strstr(fd->log.refusal, "wire `Fleet.update` carries ai.bytesandbrains.composite (Composite), the fill "
                                    "holds Tensor float32"),
            "%s", fd->log.refusal);
  for (int r = v3_from; r < fd->log.last_open - 1; r++) CHECK_EQ_INT(fd->log.senders[r], N_CLIENTS - 1);
  CHECK_EQ_INT(fd->log.mismatched, 0);
  CHECK_EQ_INT(fd->log.failed_ops + fd->log.other_refusals, 0);
out:
  if (fd->sim) bb_sim_free(fd->sim);
  bb_node_free(fd->server);
  for (int i = 0; i < N_CLIENTS; i++) bb_node_free(fd->clients[i]), bb_dataset_free(&fd->data[i]);
  for (int v = 1; v <= 3; v++) free(fd->art[v]);
  bb_registry_free(fd->reg);
  free(fd);
}

int main(void) {
  RUN(test_rolling_upgrade);
  return bb_test_finish();
}
