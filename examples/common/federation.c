#include "federation.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/roles.h"

static void observe(void *user, const bb_peer_id *peer, const bb_step *s) {
  bb_federation *f = user;
  uint64_t id = 0;
  bb_peer_id_as_u64(peer, &id);
  if (s->kind == BB_STEP_APP_EVENT && id == 1 && s->value) {
    if (strcmp(s->topic, "round") == 0 && bb_val_is_u64(s->value)) f->round = (int)bb_val_as_u64(s->value);
    if (strcmp(s->topic, "model") == 0 && bb_val_kind_of(s->value) == BB_VAL_TENSOR) {
      bb_tensor_release(f->global);
      f->global = bb_tensor_retain(bb_val_as_tensor(s->value));
    }
    if (strcmp(s->topic, "onnx") == 0 && bb_val_kind_of(s->value) == BB_VAL_BYTES) {
      bb_val_release(f->onnx);
      f->onnx = bb_val_retain((bb_val *)s->value);
    }
    if (strcmp(s->topic, "accuracy") == 0 && bb_val_kind_of(s->value) == BB_VAL_TENSOR) {
      f->accuracy = *(const float *)bb_tensor_data(bb_val_as_tensor(s->value));
      if (!f->setup.quiet) printf("round %3d  held-out accuracy %.3f\n", f->round, (double)f->accuracy);
      fflush(stdout);
    }
  }
  if (s->kind == BB_STEP_OP_FAILED || s->kind == BB_STEP_WIRE_RECEIVE_FAILED) {
    f->failures++;
    if (!f->setup.quiet && f->failures <= 5)
      fprintf(stderr, "peer %llu: %s %s: %s\n", (unsigned long long)id, bb_step_kind_name(s->kind), s->op ? s->op : "",
              s->detail ? s->detail : "");
  }
}

int bb_federation_install(const bb_federation *f, int i, bb_node **out, bb_error *err) {
  const bb_fed_setup *s = &f->setup;
  bb_address self = bb_address_p2p(&f->peers[i]);
  const char *server_targets[] = {s->module, s->server_target};
  bb_slot_config slots[2] = {{"data", NULL, i ? &s->data->shards[i - 1] : &s->data->test}, {"model", s->model_config, s->model}};
  bb_node_config nc = {0};
  nc.struct_size = sizeof nc;
  nc.seed = s->seed * 1000 + (uint64_t)i;
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = f->peers[i];
  a.addresses = &self;
  a.n_addresses = 1;
  a.artifact = s->artifact;
  a.artifact_len = s->artifact_len;
  a.targets = i ? &s->client_target : server_targets;
  a.n_targets = i ? 1 : 2;
  a.registry = f->registry;
  a.slots = slots;
  a.n_slots = s->model || s->model_config ? 2 : 1;
  a.config = &nc;
  int rc = bb_install(&a, out, NULL, err);
  for (int j = 0; j < f->n_peers && !rc; j++) { /* everybody knows everybody's address */
    bb_address other = bb_address_p2p(&f->peers[j]);
    if (j != i) rc = bb_node_add_peer(*out, &f->peers[j], &other, err);
  }
  return rc;
}

static bb_val *tensor_of(const float *data, int rank, const int64_t *dims) {
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, rank, dims);
  if (!t) return NULL;
  memcpy(bb_tensor_data(t), data, (size_t)t->numel * sizeof(float));
  bb_val *v = bb_val_tensor(NULL, t);
  bb_tensor_release(t);
  return v;
}

static int fail(bb_error *err, int code, const char *what) {
  err->code = code;
  snprintf(err->message, sizeof err->message, "%s", what);
  return code;
}

int bb_federation_start(bb_federation *f, const bb_fed_setup *setup, bb_error *err) {
  memset(f, 0, sizeof *f);
  f->setup = *setup;
  f->n_peers = setup->clients + 1;
  f->registry = bb_registry_new(NULL);
  if (!f->registry) return fail(err, BB_ERR_NOMEM, "out of memory");
  int rc = bb_registry_add_shipped(f->registry, err);
  if (rc) return rc;
  bb_sim_config sc = {0};
  sc.struct_size = sizeof sc;
  sc.seed = setup->seed;
  sc.latency_ns = 5000000;
  sc.jitter_ns = 2000000;
  sc.loss = setup->loss;
  if ((rc = bb_sim_new(&sc, &f->sim, err))) return rc;
  bb_sim_set_observer(f->sim, observe, f);
  f->nodes = calloc((size_t)f->n_peers, sizeof *f->nodes);
  f->peers = calloc((size_t)f->n_peers, sizeof *f->peers);
  if (!f->nodes || !f->peers) return fail(err, BB_ERR_NOMEM, "out of memory");
  for (int i = 0; i < f->n_peers; i++) f->peers[i] = bb_peer_id_from_u64((uint64_t)i + 1);
  for (int i = 0; i < f->n_peers && !rc; i++) {
    rc = bb_federation_install(f, i, &f->nodes[i], err);
    if (!rc) rc = bb_sim_attach(f->sim, f->nodes[i], &f->peers[i], err);
    if (rc) {
      char what[BB_ERROR_MESSAGE_MAX];
      memcpy(what, err->message, sizeof what);
      snprintf(err->message, sizeof err->message, "peer %d: %.400s", i + 1, what);
    }
  }
  bb_val *server = rc ? NULL : bb_val_peers(NULL, &f->peers[0], 1);
  for (int i = 1; i < f->n_peers && !rc; i++) rc = bb_node_bind_input(f->nodes[i], setup->client_target, "server", server, err);
  bb_val_release(server);
  if (rc) return rc;
  /* the server's rounds, evaluated on the held-out set */
  const bb_dataset *test = &setup->data->test;
  int64_t xd[2] = {(int64_t)test->n, (int64_t)test->dim}, yd[1] = {(int64_t)test->n};
  bb_val *tx = tensor_of(test->features, 2, xd), *ty = tensor_of(test->labels, 1, yd);
  bb_val *clients = bb_val_peers(NULL, f->peers + 1, (size_t)setup->clients);
  bb_named_value in[] = {{"clients", clients}, {"test_x", tx}, {"test_y", ty}};
  rc = tx && ty && clients ? bb_node_invoke(f->nodes[0], setup->module, in, 3, 0, err) : fail(err, BB_ERR_NOMEM, "out of memory");
  bb_val_release(clients);
  bb_val_release(tx);
  bb_val_release(ty);
  return rc;
}

void bb_federation_free(bb_federation *f) {
  bb_tensor_release(f->global);
  bb_val_release(f->onnx);
  bb_sim_free(f->sim);
  for (int i = 0; f->nodes && i < f->n_peers; i++) bb_node_free(f->nodes[i]);
  bb_registry_free(f->registry);
  free(f->nodes);
  free(f->peers);
  memset(f, 0, sizeof *f);
}
