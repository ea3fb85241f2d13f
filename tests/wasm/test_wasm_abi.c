/* bb.wasm's engine ABI (wasm/bb_wasm.h, version 6) driven the way js/src drives it —
 * handles, packed strings, value lists, the step layout and the host's component
 * callbacks — but natively (and again under Node in the wasm build), so its every path
 * runs under the sanitizers:
 *   - the compiler: an example recorded, configured, one slot rebound to a host type, compiled
 *     and described; its errors;
 *   - a federation of one server and three clients whose DataSource is a host component,
 *     envelopes carried between nodes by parsing the steps, reaching 90 % on separable data;
 *   - an asynchronous host op completed and failed later; snapshot and restore; misuse;
 *   - forty host types, the last of them installed and invoked, and the cap on host types;
 *   - a node that checks join tokens: tokens admitted and refused, roles read back;
 *   - a trainer: the digits CNN (examples/models) learns separable data in batches, its
 *     export runs in a CPU session to the trainer's own predictions, a snapshot resumes, a
 *     warm step allocates nothing, bad batches and configs are refused; a model handle as
 *     an OnnxModel slot's host data at install. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/runtime.h"
#include "bb/value.h"
#include "bb/wire.h"
#include "abitest.h"
#include "wire/join_tokens.h"

/* ---- data: ten well separated classes in 64 features of 0..16, as CSV ----------------- */

#define FEATURES 64
#define CLASSES 10
#define ROWS 600

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double uniform(void) {
  rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

static char *make_csv(size_t *len) {
  size_t cap = (size_t)ROWS * (FEATURES + 1) * 8 + 1;
  char *csv = malloc(cap);
  size_t at = 0;
  for (int r = 0; r < ROWS; r++) {
    int label = r % CLASSES;
    for (int j = 0; j < FEATURES; j++) {
      double centre = (j * 7 + label * 13) % 10 < 5 ? 12.0 : 4.0;
      at += (size_t)snprintf(csv + at, cap - at, "%.2f,", centre + (uniform() - 0.5) * 6.0);
    }
    at += (size_t)snprintf(csv + at, cap - at, "%d\n", label);
  }
  *len = at;
  return csv;
}

/* ---- the host's components -------------------------------------------------------------- */

/* HostBatches: NextBatch serves batches of the rows given to the instance (the shard its
 * node was installed for); HostAsync answers NextBatch later. */
#define MAX_INSTANCES 16
typedef struct instance {
  int32_t type_id;
  const float *x, *y;
  size_t rows, next;
  bool live;
} instance;
static instance instances[MAX_INSTANCES + 1];
static const float *pending_x, *pending_y; /* the shard of the node being installed */
static size_t pending_rows;
static int32_t batches_type, async_type, failing_type;
static uint64_t deferred_command;
static int creates, destroys;

int32_t bb_host_create(int32_t type_id, const char *slot, const char *config, size_t config_len, uint64_t seed) {
  (void)seed;
  CHECK(slot != NULL && config != NULL && strlen(config) == config_len);
  if (type_id == failing_type) {
    bb_wasm_call_fail(BB_ERR_INVALID_ARGUMENT, "no camera here");
    return BB_ERR_INVALID_ARGUMENT;
  }
  for (int32_t id = 1; id <= MAX_INSTANCES; id++) {
    if (instances[id].live) continue;
    instances[id] = (instance){type_id, pending_x, pending_y, pending_rows, 0, true};
    creates++;
    return id;
  }
  return BB_ERR_LIMIT;
}

void bb_host_destroy(int32_t id) {
  CHECK(id >= 1 && id <= MAX_INSTANCES && instances[id].live);
  instances[id].live = false;
  destroys++;
}

int32_t bb_host_invoke(int32_t id, const char *op_type, int32_t n_inputs, int32_t n_outputs) {
  instance *inst = &instances[id];
  CHECK_STR(op_type, "NextBatch");
  CHECK_EQ_INT(bb_wasm_call_inputs(), 0);
  size_t len;
  const uint8_t *inputs = result(&len);
  CHECK(len >= 8 && bb_le_get_u64(inputs) == (uint64_t)n_inputs);
  if (n_outputs != 2) {
    bb_wasm_call_fail(BB_ERR_INVALID_ARGUMENT, "NextBatch has two outputs");
    return BB_ERR_INVALID_ARGUMENT;
  }
  if (inst->type_id == async_type) {
    deferred_command = bb_wasm_call_defer();
    CHECK(deferred_command != 0 && bb_wasm_call_defer() == deferred_command);
    return 1;
  }
  enum { BATCH = 16 };
  float x[BATCH * FEATURES], y[BATCH];
  for (int i = 0; i < BATCH; i++) {
    size_t row = inst->next++ % inst->rows;
    memcpy(x + i * FEATURES, inst->x + row * FEATURES, sizeof(float) * FEATURES);
    y[i] = inst->y[row];
  }
  int64_t xd[2] = {BATCH, FEATURES}, yd[1] = {BATCH};
  bb_val *out[2] = {tensor_value(x, 2, xd), tensor_value(y, 1, yd)};
  buf b = value_list(out, 2);
  int32_t rc = bb_wasm_call_set_outputs(b.data, b.len);
  free(b.data);
  return rc;
}

/* The imports this program's host components do not use: control-plane callbacks and
 * state (tests/wasm/test_wasm_control.c drives those) and Module recording
 * (tests/wasm/test_wasm_graph.c). */
int32_t bb_host_on_message(int32_t id, const char *op, const char *from, const uint8_t *payload, size_t len) {
  (void)id, (void)op, (void)from, (void)payload, (void)len;
  return BB_ERR_UNSUPPORTED;
}
int32_t bb_host_on_timer(int32_t id, uint64_t token) {
  (void)id, (void)token;
  return BB_ERR_UNSUPPORTED;
}
int32_t bb_host_save(int32_t id) {
  (void)id;
  return 0; /* no state: an empty one */
}
int32_t bb_host_load(int32_t id, const uint8_t *state, size_t len) {
  (void)id, (void)state;
  return len == 0 ? 0 : BB_ERR_MALFORMED;
}
/* No node of this test signs (installed with signs = 0). */
int32_t bb_host_sign(int32_t node, const char *slot, const uint8_t *message, size_t len) {
  (void)node, (void)slot, (void)message, (void)len;
  return -1;
}

void bb_host_module_record(int32_t host_id, int32_t bootstrap) {
  (void)host_id, (void)bootstrap;
  CHECK_MSG(false, "no Module is recorded here");
}

/* ---- the compiler --------------------------------------------------------------------------- */

static buf compile_federated_digits(void) {
  int32_t fd = -1;
  for (int32_t i = 0; i < bb_wasm_example_count(); i++)
    if (strcmp(bb_wasm_example_name(i), "federated_digits") == 0) fd = i;
  CHECK(fd >= 0 && bb_wasm_example_module_count(fd) == 2 && strlen(bb_wasm_example_description(fd)) > 0);
  CHECK(bb_wasm_example_name(999) == NULL && bb_wasm_last_error_code() == BB_ERR_INVALID_ARGUMENT);

  CHECK_EQ_INT(bb_wasm_example_record("federated_digits", 0), 0);
  size_t len;
  const uint8_t *r = result(&len);
  buf model = {malloc(len), len};
  memcpy(model.data, r, len);
  CHECK(bb_wasm_example_record("nope", 0) == BB_ERR_NOT_FOUND);
  CHECK(bb_wasm_example_record("federated_digits", 2) == BB_ERR_INVALID_ARGUMENT); /* FedDigits, FedBuffDigits */

  int32_t c = bb_wasm_compiler_new();
  CHECK(c > 0);
  CHECK_EQ_INT(bb_wasm_compiler_configure_example(c, "federated_digits", 0), 0);
  /* swap the clients' ArraySource for a host component */
  CHECK_EQ_INT(bb_wasm_compiler_unbind(c, "data"), 0);
  CHECK_EQ_INT(bb_wasm_compiler_unbind(c, "data"), BB_ERR_NOT_FOUND);
  CHECK_EQ_INT(bb_wasm_compiler_bind(c, BB_ROLE_DATA_SOURCE, "data", "HostBatches", "rows=all"), 0);
  CHECK_EQ_INT(bb_wasm_compiler_bind(c, BB_ROLE_DATA_SOURCE, "data", "HostBatches", NULL), BB_ERR_EXISTS);
  CHECK_EQ_INT(bb_wasm_compiler_declare(c, "HostBatches", "ai.bytesandbrains.tensor.f32", ""), 0);
  /* three clients: the example's quorum of six would abandon every round */
  CHECK_EQ_INT(bb_wasm_compiler_unbind(c, "aggregator"), 0);
  CHECK_EQ_INT(bb_wasm_compiler_bind(c, BB_ROLE_AGGREGATOR, "aggregator", "FedAvg",
                                     "quorum=3,target=3,deadline_ms=1000,no_quorum=abandon,init=model"),
               0);
  CHECK_EQ_INT(bb_wasm_compiler_declare(c, "Bad", NULL, "Model"), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(bb_wasm_last_error(), "Role:slot") != NULL);
  CHECK_EQ_INT(bb_wasm_compiler_declare(c, "Bad", NULL, "Modle:model"), BB_ERR_INVALID_ARGUMENT);

  static const uint8_t junk[] = {0xff, 0xff, 0xff};
  CHECK(bb_wasm_compiler_compile(c, junk, sizeof junk) < 0);
  CHECK(strncmp(bb_wasm_last_error(), "compile failed", 14) == 0);
  CHECK(bb_wasm_result_len() == 0);

  CHECK_EQ_INT(bb_wasm_compiler_compile(c, model.data, model.len), 0);
  CHECK_EQ_INT(bb_wasm_compiler_error_kind(c), 0);
  r = result(&len);
  buf artifact = {malloc(len), len};
  memcpy(artifact.data, r, len);
  CHECK_EQ_INT(bb_wasm_compiler_free(c), 0);
  CHECK_EQ_INT(bb_wasm_compiler_free(c), BB_ERR_INVALID_ARGUMENT); /* stale */
  free(model.data);

  CHECK_EQ_INT(bb_wasm_artifact_describe(artifact.data, artifact.len, 2), 0);
  const char *json = (const char *)bb_wasm_result_ptr();
  CHECK(strstr(json, "\"partitions\"") && strstr(json, "FedDigits_clients") && strstr(json, "HostBatches"));
  CHECK(bb_wasm_artifact_describe(artifact.data, artifact.len, 7) == BB_ERR_INVALID_ARGUMENT);
  CHECK(bb_wasm_artifact_describe(junk, sizeof junk, 0) < 0);
  return artifact;
}

/* ---- a federation over the ABI ------------------------------------------------------------------ */

#define PEERS 4 /* the server and three clients */

static void peer_text(int i, char *out, size_t size) {
  bb_peer_id id = bb_peer_id_from_u64((uint64_t)i + 1);
  bb_peer_id_to_text(&id, out, size);
}

static float tensor_scalar(const uint8_t *payload, size_t len) {
  /* u32 dtype, u32 rank, rank × u64 dims, the data */
  if (len < 8) return NAN;
  uint32_t rank = bb_le_get_u32(payload + 4);
  size_t at = 8 + 8 * (size_t)rank;
  if (bb_le_get_u32(payload) != 1 || at + 4 > len) return NAN;
  float f;
  memcpy(&f, payload + at, sizeof f);
  return f;
}

static void test_federation(const buf *artifact) {
  batches_type = bb_wasm_host_type_add("HostBatches", 1u << BB_ROLE_DATA_SOURCE, NULL);
  CHECK(batches_type > 0);
  CHECK_EQ_INT(bb_wasm_host_type_add("HostBatches", 1u << BB_ROLE_DATA_SOURCE, NULL), BB_ERR_EXISTS);
  CHECK_EQ_INT(bb_wasm_host_type_add("ArraySource", 1u << BB_ROLE_DATA_SOURCE, NULL), BB_ERR_EXISTS);
  CHECK_EQ_INT(bb_wasm_host_type_add("NoRoles", 0, NULL), BB_ERR_INVALID_ARGUMENT);

  size_t csv_len;
  char *csv = make_csv(&csv_len);
  int32_t all = bb_wasm_dataset_from_csv((const uint8_t *)csv, csv_len, -1, 0);
  free(csv);
  CHECK(all > 0);
  CHECK_EQ_INT(bb_wasm_dataset_shape(all), 0);
  CHECK(bb_le_get_u64(bb_wasm_result_ptr()) == ROWS && bb_le_get_u64(bb_wasm_result_ptr() + 8) == FEATURES);
  CHECK(bb_wasm_dataset_from_csv((const uint8_t *)"1,2\n3\n", 6, -1, 0) == BB_ERR_MALFORMED);
  CHECK(strstr(bb_wasm_last_error(), "line 2") != NULL);
  int32_t xt = bb_wasm_dataset_tensor(all, 0), yt = bb_wasm_dataset_tensor(all, 1);
  CHECK(xt > 0 && yt > 0);
  const float *x = bb_wasm_tensor_data(xt), *y = bb_wasm_tensor_data(yt);
  /* a round trip through tensors, and a subset: the last 100 rows are the test set */
  int32_t again = bb_wasm_dataset_from_tensors(xt, yt);
  CHECK(again > 0 && bb_wasm_dataset_free(again) == 0);
  CHECK(bb_wasm_dataset_from_tensors(yt, 0) == BB_ERR_INVALID_ARGUMENT);
  uint32_t test_rows[100];
  for (uint32_t i = 0; i < 100; i++) test_rows[i] = ROWS - 100 + i;
  int32_t test = bb_wasm_dataset_subset(all, test_rows, 100);
  int32_t test_x = bb_wasm_dataset_tensor(test, 0), test_y = bb_wasm_dataset_tensor(test, 1);
  CHECK(test > 0 && test_x > 0 && test_y > 0);
  uint32_t beyond = ROWS;
  CHECK(bb_wasm_dataset_subset(all, &beyond, 1) == BB_ERR_INVALID_ARGUMENT);

  int creates_before = creates, destroys_before = destroys;
  char ids[PEERS][128];
  for (int i = 0; i < PEERS; i++) peer_text(i, ids[i], sizeof ids[i]);
  int32_t nodes[PEERS];
  static const char server_targets[] = "FedDigits\0FedDigits_server";
  static const char client_targets[] = "FedDigits_clients";
  static const char slots[] = "data\0";
  for (int i = 0; i < PEERS; i++) {
    /* the server's data slot gets the test rows; client k the k-th third of the first 500,
     * each a label-skewed shard: rows are dealt by label */
    pending_x = x, pending_y = y, pending_rows = 500;
    if (i == 0) pending_x = x + (size_t)(ROWS - 100) * FEATURES, pending_y = y + ROWS - 100, pending_rows = 100;
    nodes[i] = bb_wasm_node_install(artifact->data, artifact->len, ids[i], i ? client_targets : server_targets,
                                    i ? sizeof client_targets : sizeof server_targets, slots, sizeof slots, NULL,
                                    (uint64_t)i + 7, NULL, NULL, 0, 0);
    CHECK_MSG(nodes[i] > 0, "install %d: %s", i, bb_wasm_last_error());
    for (int j = 0; j < PEERS; j++)
      if (j != i) CHECK_EQ_INT(bb_wasm_node_add_peer(nodes[i], ids[j]), 0);
  }
  CHECK_EQ_INT(creates - creates_before, PEERS);
  CHECK(bb_wasm_node_install(artifact->data, artifact->len, ids[0], "Nope", 5, NULL, 0, NULL, 0, NULL, NULL, 0, 0) < 0);
  CHECK(strncmp(bb_wasm_last_error(), "install failed (", 16) == 0);
  CHECK(bb_wasm_node_install(artifact->data, artifact->len, "not base58 0OIl", server_targets,
                             sizeof server_targets, NULL, 0, NULL, 0, NULL, NULL, 0, 0) < 0);
  CHECK(bb_wasm_node_install(artifact->data, artifact->len, ids[0], "FedDigits", 9, NULL, 0, NULL, 0, NULL, NULL,
                             0, 0) == BB_ERR_INVALID_ARGUMENT); /* not NUL-terminated */

  CHECK_EQ_INT(bb_wasm_node_info(nodes[1]), 0);
  size_t info_len;
  const uint8_t *info = result(&info_len);
  CHECK(bb_le_get_u32(info) == strlen(ids[1]) && memcmp(info + 4, ids[1], strlen(ids[1])) == 0);
  CHECK(bb_le_get_u32(info + 4 + strlen(ids[1])) == 1);

  /* the clients know their server; the server its clients and the test set */
  bb_peer_id server_id = bb_peer_id_from_u64(1), client_ids[PEERS - 1];
  for (int i = 1; i < PEERS; i++) client_ids[i - 1] = bb_peer_id_from_u64((uint64_t)i + 1);
  for (int i = 1; i < PEERS; i++) {
    bb_val *v = bb_val_peers(NULL, &server_id, 1);
    buf b = value_list(&v, 1);
    CHECK_EQ_INT(bb_wasm_node_bind_input(nodes[i], "FedDigits_clients", "server", b.data, b.len), 0);
    free(b.data);
  }
  int64_t xd[2] = {100, FEATURES}, yd[1] = {100};
  bb_val *in[3] = {bb_val_peers(NULL, client_ids, PEERS - 1), tensor_value(bb_wasm_tensor_data(test_x), 2, xd),
                   tensor_value(bb_wasm_tensor_data(test_y), 1, yd)};
  buf inputs = value_list(in, 3);
  static const char names[] = "clients\0test_x\0test_y";
  CHECK(bb_wasm_node_invoke(nodes[0], "FedDigits", names, sizeof names - 7, inputs.data, inputs.len, 0) ==
        BB_ERR_INVALID_ARGUMENT); /* two names for three values */
  CHECK_EQ_INT(bb_wasm_node_invoke(nodes[0], "FedDigits", names, sizeof names, inputs.data, inputs.len, 0), 0);
  free(inputs.data);

  /* the network: every envelope is delivered at the next tick */
  float accuracy = 0;
  uint64_t last_round = 0, sends = 0, failures = 0;
  for (uint64_t now = 1000000; now < 60ull * 1000000000 && last_round < 12; now += 5000000) {
    for (int i = 0; i < PEERS; i++) {
      int32_t n = bb_wasm_node_poll(nodes[i], now);
      CHECK(n >= 0);
      size_t len;
      const uint8_t *r = result(&len);
      uint8_t *copy = malloc(len ? len : 1); /* delivering reuses the result buffer */
      memcpy(copy, r, len);
      const uint8_t *p = copy + 4;
      for (int32_t k = 0; k < n; k++) {
        step s;
        next_step(&p, &s);
        if (s.kind == BB_STEP_SEND) {
          sends++;
          int to = -1;
          for (int j = 0; j < PEERS; j++)
            if (strlen(ids[j]) == s.peer_len && memcmp(ids[j], s.peer_text, s.peer_len) == 0) to = j;
          CHECK(to >= 0);
          if (to >= 0) CHECK_EQ_INT(bb_wasm_node_deliver(nodes[to], ids[i], s.bytes, s.len, now), 0);
        } else if (s.kind == BB_STEP_APP_EVENT && i == 0) {
          if (strcmp(s.topic, "accuracy") == 0) {
            CHECK(s.type_hash == bb_val_kind_hash(BB_VAL_TENSOR));
            accuracy = tensor_scalar(s.bytes, s.len);
          }
          if (strcmp(s.topic, "round") == 0 && s.len == 8) last_round = bb_le_get_u64(s.bytes);
        } else if (s.kind == BB_STEP_OP_FAILED || s.kind == BB_STEP_WIRE_RECEIVE_FAILED) {
          if (failures++ < 3) fprintf(stderr, "peer %d: %s %s\n", i, s.op, s.detail);
        }
      }
      CHECK(p == copy + len);
      free(copy);
    }
  }
  printf("federation over the ABI: %llu rounds, %llu envelopes, accuracy %.3f\n", (unsigned long long)last_round,
         (unsigned long long)sends, (double)accuracy);
  CHECK(last_round >= 12);
  CHECK_MSG(accuracy >= 0.9f, "accuracy %.3f", (double)accuracy);
  CHECK_EQ_INT(failures, 0);
  CHECK(bb_wasm_node_counter(nodes[0], "wire.rejected") == 0);
  CHECK(bb_wasm_node_expiry(nodes[0]) != UINT64_MAX); /* the round timer */
  CHECK(bb_wasm_node_deliver(nodes[0], ids[1], (const uint8_t *)"\xff\xff", 2, 0) == BB_ERR_MALFORMED);
  CHECK(bb_wasm_node_deliver(nodes[0], "???", (const uint8_t *)"", 0, 0) < 0);

  for (int i = 0; i < PEERS; i++) CHECK_EQ_INT(bb_wasm_node_free(nodes[i]), 0);
  CHECK_EQ_INT(destroys - destroys_before, PEERS);
  CHECK(bb_wasm_node_poll(nodes[0], 0) == BB_ERR_INVALID_ARGUMENT);
  bb_wasm_tensor_free(xt), bb_wasm_tensor_free(yt), bb_wasm_tensor_free(test_x), bb_wasm_tensor_free(test_y);
  bb_wasm_dataset_free(all), bb_wasm_dataset_free(test);
}

/* ---- an asynchronous host op ------------------------------------------------------------------- */

/* Polls a node and returns the first step of the kind (copied), or kind 0. */
static step poll_for(int32_t node, uint64_t now, uint32_t kind) {
  step found = {0};
  int32_t n = bb_wasm_node_poll(node, now);
  CHECK(n >= 0);
  const uint8_t *p = bb_wasm_result_ptr() + 4;
  for (int32_t k = 0; k < n; k++) {
    step s;
    next_step(&p, &s);
    if (s.kind == kind && found.kind == 0) found = s;
  }
  return found;
}

/* Quickstart with its data source bound to `type`, compiled. */
static buf quickstart_with_source(const char *type) {
  CHECK_EQ_INT(bb_wasm_example_record("quickstart", 0), 0);
  size_t len;
  const uint8_t *r = result(&len);
  buf model = {malloc(len), len};
  memcpy(model.data, r, len);
  int32_t c = bb_wasm_compiler_new();
  CHECK_EQ_INT(bb_wasm_compiler_configure_example(c, "quickstart", 0), 0);
  CHECK_EQ_INT(bb_wasm_compiler_unbind(c, "data_source"), 0);
  CHECK_EQ_INT(bb_wasm_compiler_bind(c, 0, "data_source", type, NULL), 0); /* the role the model records */
  CHECK_EQ_INT(bb_wasm_compiler_declare(c, type, "ai.bytesandbrains.tensor.f32", NULL), 0);
  CHECK_MSG(bb_wasm_compiler_compile(c, model.data, model.len) == 0, "%s", bb_wasm_last_error());
  r = result(&len);
  buf artifact = {malloc(len), len};
  memcpy(artifact.data, r, len);
  bb_wasm_compiler_free(c);
  free(model.data);
  return artifact;
}

static void test_async_host_op(void) {
  async_type = bb_wasm_host_type_add("HostAsync", 1u << BB_ROLE_DATA_SOURCE, NULL);
  failing_type = bb_wasm_host_type_add("HostCamera", 1u << BB_ROLE_DATA_SOURCE, NULL);
  CHECK(async_type > 0 && failing_type > 0);

  buf artifacts[2] = {quickstart_with_source("HostAsync"), quickstart_with_source("HostCamera")};

  char self[128];
  peer_text(41, self, sizeof self);
  static const char targets[] = "Quickstart";
  /* a host create that fails names the type, the slot and the host's reason */
  CHECK(bb_wasm_node_install(artifacts[1].data, artifacts[1].len, self, targets, sizeof targets, NULL, 0, NULL, 0,
                             NULL, NULL, 0, 0) < 0);
  CHECK_MSG(strstr(bb_wasm_last_error(), "HostCamera") && strstr(bb_wasm_last_error(), "no camera here"), "%s",
            bb_wasm_last_error());

  int32_t node = bb_wasm_node_install(artifacts[0].data, artifacts[0].len, self, targets, sizeof targets, NULL, 0,
                                      NULL, 0, NULL, NULL, 0, 0);
  CHECK_MSG(node > 0, "%s", bb_wasm_last_error());
  buf none = value_list(NULL, 0);
  CHECK_EQ_INT(bb_wasm_node_invoke(node, "Quickstart", NULL, 0, none.data, none.len, 10), 0);
  deferred_command = 0;
  CHECK(poll_for(node, 20, BB_STEP_APP_EVENT).kind == 0);
  CHECK(deferred_command != 0);
  CHECK_EQ_INT(bb_wasm_node_has_work(node), 0);

  /* the node moves, with its pending command, into a fresh one */
  CHECK_MSG(bb_wasm_node_snapshot(node) == 0, "%s", bb_wasm_last_error());
  size_t snap_len;
  const uint8_t *snap_r = result(&snap_len);
  uint8_t *snap = malloc(snap_len);
  memcpy(snap, snap_r, snap_len);
  int32_t moved = bb_wasm_node_install(artifacts[0].data, artifacts[0].len, self, targets, sizeof targets, NULL, 0,
                                       NULL, 0, NULL, NULL, 0, 0);
  CHECK_MSG(bb_wasm_node_restore(moved, snap, snap_len) == 0, "%s", bb_wasm_last_error());
  CHECK(bb_wasm_node_restore(moved, snap, snap_len / 2) < 0);
  free(snap);
  CHECK_EQ_INT(bb_wasm_node_free(node), 0);

  int64_t xd[2] = {2, 3}, yd[1] = {2};
  float xs[6] = {1, 2, 3, 4, 5, 6}, ys[2] = {0, 1};
  bb_val *outs[2] = {tensor_value(xs, 2, xd), tensor_value(ys, 1, yd)};
  buf outputs = value_list(outs, 2);
  CHECK_MSG(bb_wasm_node_complete(moved, deferred_command, outputs.data, outputs.len) == 0, "%s",
            bb_wasm_last_error());
  free(outputs.data);
  step s = poll_for(moved, 30, BB_STEP_APP_EVENT);
  CHECK_EQ_INT(s.kind, BB_STEP_APP_EVENT);
  CHECK_STR(s.topic, "prediction");

  /* a later failure reaches the steps with the host's words */
  CHECK_EQ_INT(bb_wasm_node_invoke(moved, "Quickstart", NULL, 0, none.data, none.len, 40), 0);
  deferred_command = 0;
  poll_for(moved, 50, BB_STEP_APP_EVENT);
  CHECK(deferred_command != 0);
  CHECK_EQ_INT(bb_wasm_node_fail(moved, deferred_command, "camera unplugged"), 0);
  s = poll_for(moved, 60, BB_STEP_OP_FAILED);
  CHECK_EQ_INT(s.kind, BB_STEP_OP_FAILED);
  CHECK_MSG(strstr(s.detail, "camera unplugged") != NULL, "%s", s.detail);
  free(none.data);

  /* outside a callback the call functions refuse */
  CHECK_EQ_INT(bb_wasm_call_inputs(), BB_ERR_INVALID_ARGUMENT);
  CHECK(bb_wasm_call_defer() == 0 && bb_wasm_last_error_code() == BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_wasm_call_fail(-1, "x"), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_wasm_node_free(moved), 0);
  free(artifacts[0].data);
  free(artifacts[1].data);
}

/* ---- many host types ---------------------------------------------------------------------------- */

/* Every host type is told apart by the id its create and methods are called with, however
 * many there are: the fortieth installs and answers as itself. Past the documented cap a
 * registration is refused. */
static void test_many_host_types(void) {
  enum { MANY = 40 };
  int32_t ids[MANY];
  char name[32];
  for (int i = 0; i < MANY; i++) {
    snprintf(name, sizeof name, "HostMany%d", i);
    ids[i] = bb_wasm_host_type_add(name, 1u << BB_ROLE_DATA_SOURCE, NULL);
    CHECK_MSG(ids[i] > 0, "%s: %s", name, bb_wasm_last_error());
    if (i > 0) CHECK_EQ_INT(ids[i], ids[i - 1] + 1);
  }
  buf artifact = quickstart_with_source("HostMany39");
  static float row[FEATURES], label;
  pending_x = row, pending_y = &label, pending_rows = 1;
  char self[128];
  peer_text(90, self, sizeof self);
  int creates_before = creates;
  int32_t node = bb_wasm_node_install(artifact.data, artifact.len, self, "Quickstart", sizeof "Quickstart", NULL, 0,
                                      NULL, 0, NULL, NULL, 0, 0);
  CHECK_MSG(node > 0, "%s", bb_wasm_last_error());
  CHECK_EQ_INT(creates - creates_before, 1);
  int32_t made_as = 0;
  for (int32_t id = 1; id <= MAX_INSTANCES; id++)
    if (instances[id].live) made_as = instances[id].type_id;
  CHECK_EQ_INT(made_as, ids[MANY - 1]);
  buf none = value_list(NULL, 0);
  CHECK_EQ_INT(bb_wasm_node_invoke(node, "Quickstart", NULL, 0, none.data, none.len, 10), 0);
  free(none.data);
  step s = poll_for(node, 20, BB_STEP_APP_EVENT);
  CHECK_EQ_INT(s.kind, BB_STEP_APP_EVENT);
  CHECK_STR(s.topic, "prediction");
  CHECK_EQ_INT(bb_wasm_node_free(node), 0);
  free(artifact.data);

  /* fill up to the cap (the types registered so far count), then one more is refused */
  int32_t last = ids[MANY - 1];
  for (int i = MANY; last < BB_WASM_MAX_HOST_TYPES; i++) {
    snprintf(name, sizeof name, "HostMany%d", i);
    last = bb_wasm_host_type_add(name, 1u << BB_ROLE_DATA_SOURCE, NULL);
    CHECK_MSG(last > 0, "%s: %s", name, bb_wasm_last_error());
    if (last <= 0) return;
  }
  CHECK_EQ_INT(bb_wasm_host_type_add("OneTooMany", 1u << BB_ROLE_DATA_SOURCE, NULL), BB_ERR_LIMIT);
  snprintf(name, sizeof name, "at most %d host types", BB_WASM_MAX_HOST_TYPES);
  CHECK_MSG(strstr(bb_wasm_last_error(), name) != NULL, "%s", bb_wasm_last_error());
}

/* ---- value lists from a hostile host ---------------------------------------------------------- */

/* The quickstart example compiled through the ABI (malloc'd). */
static uint8_t *quickstart_artifact(size_t *len) {
  int32_t c = bb_wasm_compiler_new();
  CHECK_EQ_INT(bb_wasm_compiler_configure_example(c, "quickstart", 0), 0);
  CHECK_EQ_INT(bb_wasm_example_record("quickstart", 0), 0);
  const uint8_t *r = result(len);
  uint8_t *model = malloc(*len);
  memcpy(model, r, *len);
  CHECK_EQ_INT(bb_wasm_compiler_compile(c, model, *len), 0);
  r = result(len);
  uint8_t *artifact = malloc(*len);
  memcpy(artifact, r, *len);
  free(model);
  bb_wasm_compiler_free(c);
  return artifact;
}

static void test_bad_value_lists(void) {
  size_t len;
  uint8_t *artifact = quickstart_artifact(&len);
  char self[128];
  peer_text(77, self, sizeof self);
  int32_t node =
      bb_wasm_node_install(artifact, len, self, "Quickstart", sizeof "Quickstart", NULL, 0, NULL, 0, NULL, NULL, 0, 0);
  CHECK_MSG(node > 0, "%s", bb_wasm_last_error());
  uint8_t list[64] = {0};
  /* too short, a count beyond the bytes, a value past the end, bytes after the last, a bad payload */
  CHECK_EQ_INT(bb_wasm_node_complete(node, 1, list, 4), BB_ERR_MALFORMED);
  bb_le_put_u64(list, 1000000);
  CHECK_EQ_INT(bb_wasm_node_complete(node, 1, list, 24), BB_ERR_MALFORMED);
  bb_le_put_u64(list, 1), bb_le_put_u64(list + 8, bb_val_kind_hash(BB_VAL_U64)), bb_le_put_u64(list + 16, 100);
  CHECK_EQ_INT(bb_wasm_node_complete(node, 1, list, 32), BB_ERR_MALFORMED);
  bb_le_put_u64(list + 16, 8);
  CHECK_EQ_INT(bb_wasm_node_complete(node, 1, list, 40), BB_ERR_MALFORMED);
  bb_le_put_u64(list + 16, 3);
  CHECK_EQ_INT(bb_wasm_node_complete(node, 1, list, 27), BB_ERR_MALFORMED);
  bb_le_put_u64(list + 8, 0); /* absent, yet with bytes */
  CHECK_EQ_INT(bb_wasm_node_complete(node, 1, list, 27), BB_ERR_MALFORMED);
  bb_le_put_u64(list + 8, 12345), bb_le_put_u64(list + 16, 0); /* an unknown carrier */
  CHECK(bb_wasm_node_complete(node, 1, list, 24) < 0);
  CHECK(strstr(bb_wasm_last_error(), "value 0") != NULL);
  bb_wasm_node_free(node);
  free(artifact);
}

/* ---- join tokens ------------------------------------------------------------------------------ */

static void test_join_tokens(void) {
  size_t len;
  uint8_t *artifact = quickstart_artifact(&len);
  const bbt_keys op = bbt_keys_counting(0x00);
  char self[128], client[128], watcher[128];
  peer_text(70, self, sizeof self);
  peer_text(71, client, sizeof client);
  peer_text(72, watcher, sizeof watcher);
  static const char targets[] = "Quickstart";
  /* a room without keys, keys without bytes */
  CHECK(bb_wasm_node_install(artifact, len, self, targets, sizeof targets, NULL, 0, NULL, 0, "room-1", op.pk, 0, 0) ==
        BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(bb_wasm_last_error(), "trusts no operator key") != NULL);
  CHECK(bb_wasm_node_install(artifact, len, self, targets, sizeof targets, NULL, 0, NULL, 0, "room-1", NULL, 1, 0) ==
        BB_ERR_INVALID_ARGUMENT);
  int32_t node =
      bb_wasm_node_install(artifact, len, self, targets, sizeof targets, NULL, 0, NULL, 0, "room-1", op.pk, 1, 0);
  CHECK_MSG(node > 0, "%s", bb_wasm_last_error());
  bb_peer_id c = bb_peer_id_from_u64(72), w = bb_peer_id_from_u64(73); /* peer_text counts from 0 */
  uint8_t token[BB_JOIN_TOKEN_MAX_BYTES];
  size_t n = bbt_make_token(&op, BB_JOIN_CLIENT, 1700000060, &c, "room-1", token);
  CHECK_EQ_INT(bb_wasm_node_admit_token(node, client, token, n, 1700000000, 0), BB_JOIN_CLIENT);
  CHECK_EQ_INT(bb_wasm_node_peer_role(node, client), BB_JOIN_CLIENT);
  /* presented by another peer; past its expiry; NULL bytes; a bad peer id */
  CHECK_EQ_INT(bb_wasm_node_admit_token(node, watcher, token, n, 1700000000, 0), BB_ERR_DENIED);
  CHECK_MSG(strstr(bb_wasm_last_error(), "other_peer") != NULL, "%s", bb_wasm_last_error());
  CHECK_EQ_INT(bb_wasm_node_admit_token(node, client, token, n, 1700000060, 0), BB_ERR_DENIED);
  CHECK_EQ_INT(bb_wasm_node_admit_token(node, client, NULL, n, 1700000000, 0), BB_ERR_INVALID_ARGUMENT);
  CHECK(bb_wasm_node_admit_token(node, "0OIl", token, n, 1700000000, 0) < 0);
  n = bbt_make_token(&op, BB_JOIN_WATCHER, 1700000060, &w, "room-1", token);
  CHECK_EQ_INT(bb_wasm_node_admit_token(node, watcher, token, n, 1700000000, 0), BB_JOIN_WATCHER);
  CHECK_EQ_INT(bb_wasm_node_peer_role(node, watcher), BB_JOIN_WATCHER);
  CHECK_EQ_INT(bb_wasm_node_peer_role(node, self), BB_JOIN_NONE);
  CHECK_EQ_INT(bb_wasm_node_counter(node, "admission.admitted"), 2);
  CHECK_EQ_INT(bb_wasm_node_counter(node, "admission.refused_expired"), 1);
  CHECK_EQ_INT(bb_wasm_node_free(node), 0);
  /* a node without a room checks no tokens */
  node = bb_wasm_node_install(artifact, len, self, targets, sizeof targets, NULL, 0, NULL, 0, "", NULL, 0, 0);
  CHECK_MSG(node > 0, "%s", bb_wasm_last_error());
  CHECK_EQ_INT(bb_wasm_node_admit_token(node, watcher, token, n, 1700000000, 0), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_wasm_node_peer_role(node, watcher), BB_JOIN_NONE);
  CHECK_EQ_INT(bb_wasm_node_free(node), 0);
  CHECK(bb_wasm_node_peer_role(node, watcher) < 0); /* a stale handle */
  free(artifact);
}

/* ---- training ------------------------------------------------------------------------------ */

#define CNN BB_TEST_SOURCE_DIR "/examples/models/digits_cnn.onnx"

static buf read_file(const char *path) {
  buf b = {NULL, 0};
  FILE *f = fopen(path, "rb");
  if (!f) return b;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  b.data = malloc((size_t)n);
  b.len = fread(b.data, 1, (size_t)n, f);
  fclose(f);
  return b;
}

/* A new tensor handle holding rows [first, first + n) of a [rows, width] float tensor. */
static int32_t rows_of(int32_t t, int64_t first, int64_t n, int64_t width) {
  int64_t dims[2] = {n, width};
  int32_t h = bb_wasm_tensor_new(BB_DTYPE_FLOAT, width ? 2 : 1, dims);
  memcpy(bb_wasm_tensor_data(h), (const float *)bb_wasm_tensor_data(t) + first * (width ? width : 1),
         (size_t)(n * (width ? width : 1)) * sizeof(float));
  return h;
}

static void test_trainer(void) {
  buf model = read_file(CNN);
  CHECK_MSG(model.len > 0, "cannot read %s", CNN);
  size_t csv_len;
  char *csv = make_csv(&csv_len);
  int32_t all = bb_wasm_dataset_from_csv((const uint8_t *)csv, csv_len, -1, 0);
  free(csv);
  int32_t xt = bb_wasm_dataset_tensor(all, 0), yt = bb_wasm_dataset_tensor(all, 1);
  CHECK(bb_wasm_trainer_new(model.data, model.len, "optimizer=rmsprop", 0) == BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(bb_wasm_last_error(), "rmsprop") != NULL);
  CHECK(bb_wasm_trainer_new((const uint8_t *)"junk", 4, NULL, 0) < 0);
  int32_t t = bb_wasm_trainer_new(model.data, model.len, "optimizer=adam,lr=0.005", 7);
  CHECK_MSG(t > 0, "%s", bb_wasm_last_error());
  CHECK(isnan(bb_wasm_trainer_last_loss(t)));
  int32_t count = bb_wasm_trainer_param_count(t);
  CHECK_EQ_INT(count, 16 * 9 + 16 + 32 * 16 * 9 + 32 + 128 * 64 + 64 + 64 * 10 + 10);
  /* three epochs over the first 500 rows in batches of 50 */
  float first = NAN;
  for (int epoch = 0; epoch < 3; epoch++)
    for (int64_t r = 0; r < 500; r += 50) {
      int32_t bx = rows_of(xt, r, 50, FEATURES), by = rows_of(yt, r, 50, 0);
      CHECK_EQ_INT(bb_wasm_trainer_step(t, bx, by), 1);
      if (isnan(first)) first = bb_wasm_trainer_last_loss(t);
      bb_wasm_tensor_free(bx), bb_wasm_tensor_free(by);
    }
  CHECK_EQ_INT(bb_wasm_trainer_stats(t), 0);
  const uint8_t *st = bb_wasm_result_ptr();
  uint64_t allocations = bb_le_get_u64(st + 40);
  CHECK(bb_le_get_u64(st) == 30 && bb_le_get_u64(st + 8) == 0 && bb_le_get_u64(st + 16) > (uint64_t)count * 4);
  CHECK(bb_le_get_u64(st + 24) > 0 && bb_le_get_u64(st + 32) >= bb_le_get_u64(st + 24));
  CHECK_MSG(bb_wasm_trainer_last_loss(t) < first / 4, "loss %g -> %g", first, bb_wasm_trainer_last_loss(t));
  /* the held-out rows */
  int32_t hx = rows_of(xt, 500, ROWS - 500, FEATURES), hy = rows_of(yt, 500, ROWS - 500, 0);
  CHECK_EQ_INT(bb_wasm_trainer_evaluate(t, hx, hy), 0);
  float accuracy = bb_le_get_f32(bb_wasm_result_ptr()), loss = bb_le_get_f32(bb_wasm_result_ptr() + 4);
  CHECK_MSG(accuracy > 0.95f && loss < 0.5f, "accuracy %g loss %g", accuracy, loss);
  /* a warm step of the same shape takes nothing from the allocator */
  int32_t bx = rows_of(xt, 0, 50, FEATURES), by = rows_of(yt, 0, 50, 0);
  CHECK_EQ_INT(bb_wasm_trainer_step(t, bx, by), 1);
  CHECK_EQ_INT(bb_wasm_trainer_stats(t), 0);
  CHECK_EQ_INT(bb_le_get_u64(bb_wasm_result_ptr() + 40), allocations);
  /* bad batches: labels of another length, an integer batch */
  int32_t short_y = rows_of(yt, 0, 49, 0);
  CHECK(bb_wasm_trainer_step(t, bx, short_y) == BB_ERR_TYPE && strstr(bb_wasm_last_error(), "labels") != NULL);
  int64_t d2[2] = {50, FEATURES};
  int32_t ints = bb_wasm_tensor_new(BB_DTYPE_INT32, 2, d2);
  CHECK(bb_wasm_trainer_step(t, ints, by) == BB_ERR_TYPE);
  CHECK(bb_wasm_trainer_step(t, by, bx) < 0); /* rows that do not fit the input */
  CHECK(bb_wasm_trainer_step(t, 12345, by) == BB_ERR_INVALID_ARGUMENT);
  /* the export: plain ONNX whose CPU session predicts what the trainer predicts */
  int32_t pred = bb_wasm_trainer_predict(t, hx);
  CHECK(pred > 0 && bb_wasm_tensor_rank(pred) == 2 && bb_wasm_tensor_dims(pred)[1] == CLASSES);
  CHECK_EQ_INT(bb_wasm_trainer_export(t), 0);
  int32_t exported = bb_wasm_model_decode(bb_wasm_result_ptr(), bb_wasm_result_len());
  int32_t session = exported > 0 ? bb_wasm_session_new(exported) : -1;
  CHECK_MSG(session > 0, "%s", bb_wasm_last_error());
  int64_t d4[4] = {ROWS - 500, 1, 8, 8};
  int32_t image = bb_wasm_tensor_new(BB_DTYPE_FLOAT, 4, d4), out = 0;
  memcpy(bb_wasm_tensor_data(image), bb_wasm_tensor_data(hx), (size_t)(ROWS - 500) * FEATURES * sizeof(float));
  CHECK_EQ_INT(bb_wasm_session_run(session, 1, "pixels", 7, &image, &out), 0);
  /* (the session runs the 16-channel 3×3 convolution by Winograd, the trainer directly:
   * within that bound, docs/DEVIATIONS.md, not the same bits) */
  CHECK(out > 0 && bb_wasm_tensor_nbytes(out) == bb_wasm_tensor_nbytes(pred));
  for (int64_t i = 0; out > 0 && i < bb_wasm_tensor_nbytes(pred) / 4; i++) {
    const float a = ((const float *)bb_wasm_tensor_data(out))[i], b = ((const float *)bb_wasm_tensor_data(pred))[i];
    CHECK_MSG(fabsf(a - b) <= 1e-5f * (1 + fabsf(b)), "prediction %lld: session %g, trainer %g", (long long)i, a, b);
  }
  /* parameters out and in, and a snapshot another trainer resumes from */
  int32_t params = bb_wasm_trainer_params(t);
  CHECK(params > 0 && bb_wasm_tensor_nbytes(params) == count * 4);
  int32_t u = bb_wasm_trainer_new(model.data, model.len, "optimizer=adam,lr=0.005", 7);
  CHECK_EQ_INT(bb_wasm_trainer_save(t), 0);
  size_t saved_len = bb_wasm_result_len();
  uint8_t *saved = malloc(saved_len);
  memcpy(saved, bb_wasm_result_ptr(), saved_len);
  CHECK_EQ_INT(bb_wasm_trainer_restore(u, saved, saved_len), 0);
  CHECK(bb_wasm_trainer_step(t, bx, by) == 1 && bb_wasm_trainer_step(u, bx, by) == 1);
  CHECK(bb_wasm_trainer_last_loss(t) == bb_wasm_trainer_last_loss(u));
  CHECK_EQ_INT(bb_wasm_trainer_load_params(u, params), 0);
  CHECK_EQ_INT(bb_wasm_trainer_load_params(u, hy), BB_ERR_TYPE);
  CHECK_EQ_INT(bb_wasm_trainer_restore(u, (const uint8_t *)"junk", 4), BB_ERR_MALFORMED);
  free(saved);
  int32_t tensors[] = {hx, hy, bx, by, short_y, ints, pred, image, out, params, xt, yt};
  for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) bb_wasm_tensor_free(tensors[i]);
  CHECK_EQ_INT(bb_wasm_session_free(session), 0);
  CHECK_EQ_INT(bb_wasm_trainer_free(t), 0);
  CHECK_EQ_INT(bb_wasm_trainer_free(t), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_wasm_trainer_free(u), 0);

  /* an OnnxModel slot takes a model handle as its host data (a client of federated_cnn) */
  int32_t c = bb_wasm_compiler_new();
  CHECK_EQ_INT(bb_wasm_compiler_configure_example(c, "federated_cnn", 0), 0);
  CHECK_EQ_INT(bb_wasm_example_record("federated_cnn", 0), 0);
  size_t recorded_len = bb_wasm_result_len();
  uint8_t *recorded = malloc(recorded_len); /* the compile empties the result buffer first */
  memcpy(recorded, bb_wasm_result_ptr(), recorded_len);
  CHECK_EQ_INT(bb_wasm_compiler_compile(c, recorded, recorded_len), 0);
  free(recorded);
  size_t art_len = bb_wasm_result_len();
  uint8_t *art = malloc(art_len);
  memcpy(art, bb_wasm_result_ptr(), art_len);
  char self[128];
  bb_peer_id id = bb_peer_id_from_u64(2);
  bb_peer_id_to_text(&id, self, sizeof self);
  const char slots[] = "data\0\0model\0"; /* two (slot, empty config) pairs with the final NUL */
  int32_t host[2] = {all, exported};
  int32_t node =
      bb_wasm_node_install(art, art_len, self, "FedCnn_clients", 15, slots, sizeof slots, host, 1, NULL, NULL, 0, 0);
  CHECK_MSG(node > 0, "%s", bb_wasm_last_error());
  CHECK_EQ_INT(bb_wasm_node_free(node), 0);
  host[1] = 0; /* no model: OnnxModel has nothing to train */
  CHECK(bb_wasm_node_install(art, art_len, self, "FedCnn_clients", 15, slots, sizeof slots, host, 1, NULL, NULL, 0, 0) <
        0);
  CHECK(strstr(bb_wasm_last_error(), "OnnxModel") != NULL);
  free(art);
  bb_wasm_compiler_free(c);
  bb_wasm_model_free(exported);
  bb_wasm_dataset_free(all);
  free(model.data);
}

/* The threads exports as the single-threaded module has them: a worker's loop and a
 * worker's stack are refused with the reason (no shared memory here), as are 0 threads and
 * an unknown statistic; no stack is held; a count the build can run is taken, and the pool
 * counts the jobs it ran. */
static void test_threads_exports(void) {
  CHECK_EQ_INT(bb_wasm_set_threads(0), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_wasm_threads(), 1);
  CHECK(bb_wasm_pool_stat(5) == -1);
  CHECK(bb_wasm_pool_stat(0) >= 0 && bb_wasm_pool_stat(3) >= 0);
  CHECK(bb_wasm_pool_stat(4) == 0);
  if (!bb_wasm_threads_supported()) {
    CHECK(bb_wasm_worker_main(1) != 0);
    CHECK_MSG(strstr(bb_wasm_last_error(), "bb-mt.wasm") != NULL || strstr(bb_wasm_last_error(), "thread") != NULL,
              "%s", bb_wasm_last_error());
    CHECK(bb_wasm_worker_stack(1, 1u << 20) == 0);
    CHECK_EQ_INT(bb_wasm_last_error_code(), BB_ERR_UNSUPPORTED);
    CHECK_EQ_INT(bb_wasm_worker_stack_free(1), BB_ERR_UNSUPPORTED);
  }
  CHECK_EQ_INT(bb_wasm_set_threads(1), 0);
  CHECK_EQ_INT(bb_wasm_threads(), 1);
}

int main(void) {
  CHECK_EQ_INT(bb_wasm_abi_version(), 10);
  buf artifact = compile_federated_digits();
  RUN(test_async_host_op);
  RUN(test_threads_exports);
  test_federation(&artifact);
  printf("%s test_federation\n", bb_test_failures ? "FAIL" : "ok  ");
  RUN(test_bad_value_lists);
  RUN(test_join_tokens);
  RUN(test_many_host_types);
  RUN(test_trainer);
  free(artifact.data);
  return bb_test_finish();
}
