#include "federation.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/privacy.h"
#include "bb/roles.h"
#include "options.h"

static int fail(bb_error *err, int code, const char *what) {
  err->code = code;
  snprintf(err->message, sizeof err->message, "%s", what);
  return code;
}

void bb_fed_observe(void *progress, const bb_peer_id *peer, const bb_step *s) {
  bb_fed_progress *p = progress;
  uint64_t id = 0;
  bb_peer_id_as_u64(peer, &id);
  const bool server = p->server ? bb_peer_id_equal(peer, p->server) : id == 1;
  if (s->kind == BB_STEP_APP_EVENT && server && s->value) {
    if (strcmp(s->topic, "round") == 0 && bb_val_is_u64(s->value)) p->round = (int)bb_val_as_u64(s->value);
    if (strcmp(s->topic, "model") == 0 && bb_val_kind_of(s->value) == BB_VAL_TENSOR) {
      bb_tensor_release(p->global);
      p->global = bb_tensor_retain(bb_val_as_tensor(s->value));
    }
    if (strcmp(s->topic, "onnx") == 0 && bb_val_kind_of(s->value) == BB_VAL_BYTES) {
      bb_val_release(p->onnx);
      p->onnx = bb_val_retain((bb_val *)s->value);
    }
    if (strcmp(s->topic, "ready") == 0 && bb_val_kind_of(s->value) == BB_VAL_PEER) {
      const bb_peer_id *who = bb_val_as_peers(s->value);
      bool queued = false;
      for (size_t i = 0; i < p->n_ready && !queued; i++) queued = bb_peer_id_equal(&p->ready[i], who);
      if (!queued && p->n_ready < BB_FED_READY_MAX) p->ready[p->n_ready++] = *who;
    }
    if (strcmp(s->topic, "accuracy") == 0 && bb_val_kind_of(s->value) == BB_VAL_TENSOR) {
      p->accuracy = *(const float *)bb_tensor_data(bb_val_as_tensor(s->value));
      if (!p->quiet && p->printed != p->round + 1)
        printf("round %3d  held-out accuracy %.3f\n", p->round, (double)p->accuracy);
      p->printed = p->round + 1;
      fflush(stdout);
    }
  }
  if (s->kind == BB_STEP_OP_FAILED || s->kind == BB_STEP_WIRE_RECEIVE_FAILED) {
    p->failures++;
    if (!p->quiet && p->failures <= 5)
      fprintf(stderr, "peer %llu: %s %s: %s\n", (unsigned long long)id, bb_step_kind_name(s->kind), s->op ? s->op : "",
              s->detail ? s->detail : "");
  }
}

void bb_fed_progress_free(bb_fed_progress *p) {
  bb_tensor_release(p->global);
  bb_val_release(p->onnx);
  p->global = NULL;
  p->onnx = NULL;
}

int bb_fed_sim_new(uint64_t seed, double loss, bb_sim **out, bb_error *err) {
  bb_sim_config sc = {0};
  sc.struct_size = sizeof sc;
  sc.seed = seed;
  sc.latency_ns = 5000000;
  sc.jitter_ns = 2000000;
  sc.loss = loss;
  return bb_sim_new(&sc, out, err);
}

int bb_fed_sim_for(const bb_sim_scenario *scenario, uint64_t seed, double loss, bb_sim **out, bb_error *err) {
  if (!scenario) return bb_fed_sim_new(seed, loss, out, err);
  bb_sim_config sc = {0};
  sc.struct_size = sizeof sc;
  bb_sim_scenario_network(scenario, &sc);
  return bb_sim_new(&sc, out, err);
}

int bb_fed_scenario_load(const char *path, bb_sim_scenario *out, bb_error *err) {
  bb_bytes text = {NULL, 0};
  int rc = bb_read_whole_file(path, &text, err);
  if (!rc && (rc = bb_sim_scenario_parse((const char *)text.data, text.len, out, err))) {
    char what[BB_ERROR_MESSAGE_MAX];
    memcpy(what, err->message, sizeof what);
    snprintf(err->message, sizeof err->message, "%s: %.400s", path, what);
  }
  free(text.data);
  return rc;
}

uint64_t bb_fed_time_limit(const bb_sim_scenario *scenario, int rounds) {
  return (uint64_t)rounds * (scenario ? 60000000000ull : 4000000000ull);
}

int bb_fed_install_peer(const bb_fed_peers *net, size_t i, const bb_registry *reg, const char *const *targets,
                        size_t n_targets, const bb_slot_config *slots, size_t n_slots, bb_node **out, bb_error *err) {
  bb_address self = bb_address_p2p(&net->peers[i]);
  bb_node_config nc = {0};
  nc.struct_size = sizeof nc;
  nc.seed = net->seed * 1000 + (uint64_t)i;
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = net->peers[i];
  a.addresses = &self;
  a.n_addresses = 1;
  a.artifact = net->artifact;
  a.artifact_len = net->artifact_len;
  a.targets = targets;
  a.n_targets = n_targets;
  a.registry = reg;
  a.slots = slots;
  a.n_slots = n_slots;
  a.config = &nc;
  if (net->secret_keys) {
    a.sign = bb_identity_sign;
    a.sign_user = net->secret_keys[i];
  }
  int rc = bb_install(&a, out, NULL, err);
  for (size_t j = 0; j < net->n_peers && !rc; j++) { /* everybody knows everybody's address */
    bb_address other = bb_address_p2p(&net->peers[j]);
    if (j != i) rc = bb_node_add_peer(*out, &net->peers[j], &other, err);
  }
  return rc;
}

int bb_fed_bind_peers(bb_node *node, const char *target, const char *input, const bb_peer_id *peers, size_t n,
                      bb_error *err) {
  bb_val *v = bb_val_peers(NULL, peers, n);
  if (!v) return fail(err, BB_ERR_NOMEM, "out of memory");
  int rc = bb_node_bind_input(node, target, input, v, err);
  bb_val_release(v);
  return rc;
}

bb_val *bb_fed_tensor(const float *data, int rank, const int64_t *dims) {
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, rank, dims);
  if (!t) return NULL;
  memcpy(bb_tensor_data(t), data, (size_t)t->numel * sizeof(float));
  bb_val *v = bb_val_tensor(NULL, t);
  bb_tensor_release(t);
  return v;
}

int bb_fed_start_rounds(bb_node *node, const char *module, const char *peers_input, const bb_peer_id *peers,
                        size_t n, const bb_dataset *test, bb_error *err) {
  int64_t xd[2] = {(int64_t)test->n, (int64_t)test->dim}, yd[1] = {(int64_t)test->n};
  bb_val *tx = bb_fed_tensor(test->features, 2, xd), *ty = bb_fed_tensor(test->labels, 1, yd);
  bb_val *to = bb_val_peers(NULL, peers, n);
  bb_named_value in[] = {{peers_input, to}, {"test_x", tx}, {"test_y", ty}};
  int rc = tx && ty && to ? bb_node_invoke(node, module, in, 3, 0, err) : fail(err, BB_ERR_NOMEM, "out of memory");
  bb_val_release(to);
  bb_val_release(tx);
  bb_val_release(ty);
  return rc;
}

int bb_federation_install(const bb_federation *f, int i, bb_node **out, bb_error *err) {
  const bb_fed_setup *s = &f->setup;
  const char *server_targets[] = {s->module, s->server_target};
  bb_slot_config slots[2] = {{"data", NULL, i ? &s->data->shards[i - 1] : &s->data->test}, {"model", s->model_config, s->model}};
  bb_fed_peers net = {s->artifact, s->artifact_len, f->peers, (size_t)f->n_peers, s->seed, f->secret_keys};
  return bb_fed_install_peer(&net, (size_t)i, f->registry, i ? &s->client_target : server_targets,
                             i || !s->server_target ? 1 : 2, slots,
                             s->model || s->model_config ? 2 : 1, out, err);
}

/* splitmix64 bytes from *user: a simulation's reproducible identities. */
static int seeded_fill(void *user, uint8_t *out, size_t len) {
  uint64_t *state = user;
  for (size_t i = 0; i < len; i++) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    out[i] = (uint8_t)(z ^ (z >> 31));
  }
  return 0;
}

int bb_federation_start(bb_federation *f, const bb_fed_setup *setup, bb_error *err) {
  memset(f, 0, sizeof *f);
  f->setup = *setup;
  f->progress.quiet = setup->quiet;
  f->n_peers = setup->clients + 1;
  f->registry = bb_registry_new(NULL);
  if (!f->registry) return fail(err, BB_ERR_NOMEM, "out of memory");
  int rc = bb_registry_add_shipped(f->registry, err);
  if (rc) return rc;
  if ((rc = bb_fed_sim_for(setup->scenario, setup->seed, setup->loss, &f->sim, err))) return rc;
  bb_sim_set_observer(f->sim, bb_fed_observe, &f->progress);
  f->nodes = calloc((size_t)f->n_peers, sizeof *f->nodes);
  f->peers = calloc((size_t)f->n_peers, sizeof *f->peers);
  if (!f->nodes || !f->peers) return fail(err, BB_ERR_NOMEM, "out of memory");
  for (int i = 0; i < f->n_peers; i++) f->peers[i] = bb_peer_id_from_u64((uint64_t)i + 1);
  if (setup->identities) {
    /* identities from the seed, so a run is reproducible (a simulation's, never a real node's) */
    if (!(f->secret_keys = calloc((size_t)f->n_peers, sizeof *f->secret_keys))) return fail(err, BB_ERR_NOMEM, "out of memory");
    for (int i = 0; i < f->n_peers && !rc; i++) {
      uint64_t state = setup->seed * 1000 + (uint64_t)i;
      bb_random_source from_seed = {seeded_fill, &state};
      uint8_t pk[32];
      if (!(rc = bb_secagg_identity_new(pk, f->secret_keys[i], &from_seed, err))) f->peers[i] = bb_peer_id_from_ed25519(pk);
    }
    f->progress.server = &f->peers[0];
  }
  for (int i = 0; i < f->n_peers && !rc; i++) {
    rc = bb_federation_install(f, i, &f->nodes[i], err);
    if (!rc) rc = bb_sim_attach(f->sim, f->nodes[i], &f->peers[i], err);
    if (rc) {
      char what[BB_ERROR_MESSAGE_MAX];
      memcpy(what, err->message, sizeof what);
      snprintf(err->message, sizeof err->message, "peer %d: %.400s", i + 1, what);
    }
  }
  for (int i = 1; i < f->n_peers && !rc && setup->server_target; i++) rc = bb_fed_bind_peers(f->nodes[i], setup->client_target, "server", &f->peers[0], 1, err);
  /* the clients are the population's devices; the server is not a phone */
  if (!rc && setup->scenario) rc = bb_sim_scenario_apply(f->sim, setup->scenario, f->peers + 1, (size_t)setup->clients, err);
  if (rc) return rc;
  /* the server's rounds, evaluated on the held-out set */
  return bb_fed_start_rounds(f->nodes[0], setup->module, "clients", f->peers + 1, (size_t)setup->clients,
                             &setup->data->test, err);
}

int bb_federation_answer_ready(bb_federation *f, uint64_t patience_ns, bb_error *err) {
  bb_fed_progress *p = &f->progress;
  const uint64_t now = bb_sim_now(f->sim);
  if (!f->served_at && !(f->served_at = calloc((size_t)f->n_peers, sizeof *f->served_at)))
    return fail(err, BB_ERR_NOMEM, "out of memory");
  /* the ready ones are no longer silent; a peer that is not one of the clients is never
     answered (sending the model would make it a member) */
  size_t kept = 0;
  for (size_t k = 0; k < p->n_ready; k++) {
    uint64_t id = 0;
    if (!bb_peer_id_as_u64(&p->ready[k], &id) || id < 2 || id > (uint64_t)f->n_peers) continue;
    f->served_at[id - 1] = now;
    p->ready[kept++] = p->ready[k];
  }
  p->n_ready = kept;
  for (int i = 1; i < f->n_peers && p->n_ready < BB_FED_READY_MAX; i++)
    if (now - f->served_at[i] >= patience_ns && now >= patience_ns) {
      p->ready[p->n_ready++] = f->peers[i];
      f->served_at[i] = now;
    }
  if (!p->n_ready) return 0;
  size_t n = p->n_ready;
  p->n_ready = 0;
  return bb_fed_start_rounds(f->nodes[0], f->setup.module, "clients", p->ready, n, &f->setup.data->test, err);
}

int bb_federation_step_async(bb_federation *f, uint64_t patience_ns, bb_error *err) {
  int rc = bb_sim_step(f->sim, err);
  if (rc == 1) rc = bb_sim_run_until(f->sim, bb_sim_now(f->sim) + patience_ns, err);
  return rc ? rc : bb_federation_answer_ready(f, patience_ns, err);
}

void bb_federation_free(bb_federation *f) {
  bb_fed_progress_free(&f->progress);
  bb_sim_free(f->sim);
  for (int i = 0; f->nodes && i < f->n_peers; i++) bb_node_free(f->nodes[i]);
  bb_registry_free(f->registry);
  free(f->nodes);
  free(f->peers);
  free(f->served_at);
  free(f->secret_keys);
  memset(f, 0, sizeof *f);
}
