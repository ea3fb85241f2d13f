#include "split_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/roles.h"
#include "federation.h"

static int fail(bb_error *err, int code, const char *what) {
  err->code = code;
  snprintf(err->message, sizeof err->message, "%s", what);
  return code;
}

/* Peer ids are 1 (the server) and 2.. (the clients). */
static int index_of(const bb_peer_id *peer) {
  uint64_t id = 0;
  bb_peer_id_as_u64(peer, &id);
  return (int)id - 1;
}

static void observe(void *user, const bb_peer_id *peer, const bb_step *s) {
  bb_split_run *r = user;
  int i = index_of(peer);
  if (s->kind == BB_STEP_APP_EVENT && s->value && i >= 1 && i < r->n_peers && strcmp(s->topic, "accuracy") == 0 &&
      bb_val_kind_of(s->value) == BB_VAL_TENSOR) {
    r->accuracy[i - 1] = *(const float *)bb_tensor_data(bb_val_as_tensor(s->value));
    r->evaluations++;
    if (!r->setup.quiet && i == 1)
      printf("t=%5.1f s  client 1: held-out accuracy %.3f  (%llu steps by all clients)\n", (double)bb_sim_now(r->sim) / 1e9,
             (double)r->accuracy[0], (unsigned long long)bb_split_run_client_steps(r));
  }
  if (s->kind == BB_STEP_OP_FAILED || s->kind == BB_STEP_WIRE_RECEIVE_FAILED) {
    r->failures++;
    if (!r->setup.quiet && r->failures <= 5)
      fprintf(stderr, "peer %d: %s %s: %s\n", i + 1, bb_step_kind_name(s->kind), s->op ? s->op : "", s->detail ? s->detail : "");
  }
}

static void trace(void *user, const bb_sim_delivery *d) {
  bb_split_run *r = user;
  int i = index_of(d->from);
  if (i >= 0 && i < r->n_peers) r->bytes_sent[i] += d->len;
}

static int install(bb_split_run *r, int i, bb_error *err) {
  const bb_split_setup *s = &r->setup;
  char server[64], clients[64], averager[96];
  snprintf(server, sizeof server, "%s_server", s->module);
  snprintf(clients, sizeof clients, "%s_clients", s->module);
  const char *client_targets[] = {s->module, clients}, *server_target = server;
  /* the averager closes a round with every client's part (past 3 s, with three quarters) */
  snprintf(averager, sizeof averager, "quorum=%d,target=%d,deadline_ms=3000,no_quorum=extend",
           s->clients - s->clients / 4, s->clients);
  /* each side is given what its own part needs: the server the model, a client the model
   * and its shard (the compiler binds a split's part only where it runs) */
  bb_slot_config server_slots[] = {{"server_model", NULL, s->model}, {"averager", averager, NULL}};
  bb_slot_config client_slots[] = {{"client_model", NULL, s->model}, {"data", NULL, i ? &s->data->shards[i - 1] : NULL}};
  bb_fed_peers net = {s->artifact, s->artifact_len, r->peers, (size_t)r->n_peers, s->seed, NULL};
  int rc = bb_fed_install_peer(&net, (size_t)i, r->registry, i ? client_targets : &server_target,
                               i && s->averaged ? 2 : 1, i ? client_slots : server_slots, 2, &r->nodes[i], err);
  /* the server sends the average to every client */
  if (!rc && !i && s->averaged) rc = bb_fed_bind_peers(r->nodes[0], server, "clients", r->peers + 1, (size_t)s->clients, err);
  return rc;
}

/* A client's inputs, bound for every run (its steps, and what arrives for it), then its
 * module started. */
static int start_client(bb_split_run *r, int i, bb_error *err) {
  const bb_dataset *test = &r->setup.data->test;
  const char *module = r->setup.module;
  int64_t xd[2] = {(int64_t)test->n, (int64_t)test->dim}, yd[1] = {(int64_t)test->n};
  bb_val *tx = bb_fed_tensor(test->features, 2, xd), *ty = bb_fed_tensor(test->labels, 1, yd);
  int rc = tx && ty ? bb_fed_bind_peers(r->nodes[i], module, "server", &r->peers[0], 1, err) : fail(err, BB_ERR_NOMEM, "out of memory");
  if (!rc && !r->setup.no_held_out) rc = bb_node_bind_input(r->nodes[i], module, "test_x", tx, err);
  if (!rc && !r->setup.no_held_out) rc = bb_node_bind_input(r->nodes[i], module, "test_y", ty, err);
  if (!rc) rc = bb_node_invoke(r->nodes[i], module, NULL, 0, bb_sim_now(r->sim), err);
  bb_val_release(tx);
  bb_val_release(ty);
  return rc;
}

int bb_split_run_start(bb_split_run *r, const bb_split_setup *setup, bb_error *err) {
  memset(r, 0, sizeof *r);
  r->setup = *setup;
  if (setup->clients < 1 || setup->clients > BB_SPLIT_RUN_MAX_CLIENTS) return fail(err, BB_ERR_INVALID_ARGUMENT, "1 to 64 clients");
  r->n_peers = setup->clients + 1;
  for (int i = 0; i < setup->clients; i++) r->accuracy[i] = -1;
  r->registry = bb_registry_new(NULL);
  if (!r->registry) return fail(err, BB_ERR_NOMEM, "out of memory");
  int rc = bb_registry_add_shipped(r->registry, err);
  if (!rc) rc = bb_fed_sim_new(setup->seed, setup->loss, &r->sim, err);
  if (rc) return rc;
  bb_sim_set_observer(r->sim, observe, r);
  bb_sim_set_tracer(r->sim, trace, r);
  r->nodes = calloc((size_t)r->n_peers, sizeof *r->nodes);
  r->peers = calloc((size_t)r->n_peers, sizeof *r->peers);
  if (!r->nodes || !r->peers) return fail(err, BB_ERR_NOMEM, "out of memory");
  for (int i = 0; i < r->n_peers; i++) r->peers[i] = bb_peer_id_from_u64((uint64_t)i + 1);
  for (int i = 0; i < r->n_peers && !rc; i++) {
    rc = install(r, i, err);
    if (!rc) rc = bb_sim_attach(r->sim, r->nodes[i], &r->peers[i], err);
    if (rc) {
      char what[BB_ERROR_MESSAGE_MAX];
      memcpy(what, err->message, sizeof what);
      snprintf(err->message, sizeof err->message, "peer %d: %.400s", i + 1, what);
    }
  }
  for (int i = 1; i < r->n_peers && !rc; i++) rc = start_client(r, i, err);
  return rc;
}

void bb_split_run_free(bb_split_run *r) {
  bb_sim_free(r->sim);
  for (int i = 0; r->nodes && i < r->n_peers; i++) bb_node_free(r->nodes[i]);
  bb_registry_free(r->registry);
  free(r->nodes);
  free(r->peers);
  memset(r, 0, sizeof *r);
}

float bb_split_run_min_accuracy(const bb_split_run *r) {
  float low = 2;
  for (int i = 0; i < r->setup.clients; i++) low = r->accuracy[i] < low ? r->accuracy[i] : low;
  return r->setup.clients ? low : -1;
}

uint64_t bb_split_run_client_steps(const bb_split_run *r) {
  uint64_t n = 0;
  for (int i = 1; i < r->n_peers; i++) n += r->nodes[i] ? bb_node_counter(r->nodes[i], "split.steps") : 0;
  return n;
}
