/* bytesandbrains — nodes through bb.wasm's ABI: install an artifact as a peer, then
 * deliver, poll into the step layout, expiry, invoke, bind inputs, complete asynchronous
 * ops, counters, snapshot and restore. */
#include <stdlib.h>
#include <string.h>

#include "abi_internal.h"
#include "bb_wasm.h"

typedef struct node_object {
  bb_node *node;
  int32_t handle; /* its handle (what bb_host_sign names it by) */
  bbw_shared_dataset **datasets; /* the data sets its slots read, one reference each */
  size_t n_datasets;
} node_object;

static node_object *node_object_of(int32_t handle) {
  bbw_slot *s = bbw_handle_slot(handle, SLOT_NODE);
  return s ? s->object : NULL;
}

static bb_node *node_of(int32_t handle) {
  node_object *n = node_object_of(handle);
  return n ? n->node : NULL;
}

static void node_object_free(node_object *n) {
  if (n == NULL) return;
  bb_node_free(n->node);
  for (size_t i = 0; i < n->n_datasets; i++) bbw_dataset_release(n->datasets[i]);
  free(n->datasets);
  free(n);
}

static void free_model_bytes(bb_bytes *b, size_t n) {
  for (size_t i = 0; i < n; i++) bb_buffer_free(NULL, b[i].data);
}

/* The node's signer: the host signs asynchronously and answers with bb_wasm_node_signed. */
static int host_sign(void *user, const char *slot, const uint8_t *msg, size_t len, uint8_t signature[64],
                     bb_error *err) {
  (void)signature;
  const node_object *obj = user;
  if (bb_host_sign(obj->handle, slot, msg, len) < 0)
    return bb_error_set(err, BB_ERR_UNSUPPORTED, "the host holds no identity that signs for this node");
  return BB_LATER;
}

#define INSTALL_MAX_TARGETS 64
#define INSTALL_MAX_SLOTS 64

int32_t bb_wasm_node_install(const uint8_t *artifact, size_t artifact_len, const char *self, const char *targets,
                             size_t targets_len, const char *slots, size_t slots_len, const int32_t *datasets,
                             uint64_t seed, const char *room, const uint8_t *operator_keys, size_t n_operator_keys,
                             int32_t signs) {
  bbw_error_clear();
  if (artifact == NULL && artifact_len > 0)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "install: NULL artifact of %zu bytes", artifact_len);
  if (operator_keys == NULL && n_operator_keys > 0)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "install: NULL operator keys, %zu of them", n_operator_keys);
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  if (bbw_peer_parse(self, "install: my peer id", &a.self) < 0) return bbw_last();
  int32_t n_targets = bbw_count_strings(targets, targets_len, INSTALL_MAX_TARGETS, "install: targets");
  if (n_targets < 0) return n_targets;
  int32_t n_slot_strings = bbw_count_strings(slots, slots_len, 2 * INSTALL_MAX_SLOTS, "install: slots");
  if (n_slot_strings < 0) return n_slot_strings;
  if (n_slot_strings % 2 != 0)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "install: slots are (slot, config) pairs; %d names given", (int)n_slot_strings);
  bb_registry *registry = bbw_registry();
  if (registry == NULL) return bbw_last();

  const char *target_names[INSTALL_MAX_TARGETS];
  const char *at = targets;
  for (int32_t i = 0; i < n_targets; i++, at += strlen(at) + 1) target_names[i] = at;
  size_t n_slots = (size_t)n_slot_strings / 2;
  bb_slot_config slot_configs[INSTALL_MAX_SLOTS];
  bb_bytes model_bytes[INSTALL_MAX_SLOTS];
  size_t n_models = 0;
  node_object *obj = calloc(1, sizeof *obj);
  if (obj == NULL || (n_slots && (obj->datasets = calloc(n_slots, sizeof *obj->datasets)) == NULL)) {
    free(obj);
    return bbw_fail(BB_ERR_NOMEM, "install: out of memory");
  }
  at = slots;
  for (size_t i = 0; i < n_slots; i++) {
    const char *slot = at;
    const char *config = slot + strlen(slot) + 1;
    at = config + strlen(config) + 1;
    slot_configs[i] = (bb_slot_config){slot, config[0] ? config : NULL, NULL};
    if (datasets && datasets[i] != 0 && bbw_handle_kind(datasets[i]) == SLOT_MODEL) {
      /* an OnnxModel's host data: the model's bytes, read (and copied) at creation */
      bb_error err;
      const bbw_shared_model *m = bbw_model_of(datasets[i]);
      if (bb_model_encode(m->model, &model_bytes[n_models].data, &model_bytes[n_models].len, &err) < 0) {
        free_model_bytes(model_bytes, n_models);
        node_object_free(obj);
        return bbw_fail_from(err.code, &err, "install: a slot's model");
      }
      slot_configs[i].host_data = &model_bytes[n_models++];
    } else if (datasets && datasets[i] != 0) {
      bbw_shared_dataset *d = bbw_dataset_of(datasets[i]);
      if (d == NULL) {
        free_model_bytes(model_bytes, n_models);
        node_object_free(obj);
        return bbw_fail(BB_ERR_INVALID_ARGUMENT, "install: slot `%s`: host data handle %d is neither a data set nor a model",
                        slot, (int)datasets[i]);
      }
      d->users++;
      obj->datasets[obj->n_datasets++] = d;
      slot_configs[i].host_data = &d->data;
    }
  }
  bb_address address = bb_address_p2p(&a.self);
  bb_node_config config = {0};
  config.struct_size = sizeof config;
  config.seed = seed;
  a.addresses = &address;
  a.n_addresses = 1;
  a.artifact = artifact;
  a.artifact_len = artifact_len;
  a.targets = target_names;
  a.n_targets = (size_t)n_targets;
  a.registry = registry;
  a.slots = n_slots ? slot_configs : NULL;
  a.n_slots = n_slots;
  a.config = &config;
  const bb_join_policy policy = {room, operator_keys, n_operator_keys};
  a.admission = room && room[0] ? &policy : NULL;
  if (signs) {
    a.sign = host_sign;
    a.sign_user = obj;
  }
  bb_install_error_kind kind = BB_INSTALL_OK;
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_install(&a, &obj->node, &kind, &err);
  free_model_bytes(model_bytes, n_models);
  if (rc < 0) {
    node_object_free(obj);
    return bbw_fail(rc, "install failed (%s): %s", bb_install_error_name(kind),
                    err.message[0] ? err.message : bb_strerror(rc));
  }
  int32_t handle = bbw_handle_issue(SLOT_NODE, obj);
  if (handle < 0) node_object_free(obj);
  else obj->handle = handle;
  return handle;
}

int32_t bb_wasm_node_free(int32_t node) {
  bbw_error_clear();
  bbw_slot *s = bbw_handle_slot(node, SLOT_NODE);
  if (s == NULL) return bbw_last();
  node_object_free(s->object);
  bbw_slot_release(s);
  return BB_OK;
}

int32_t bb_wasm_node_info(int32_t node) {
  bbw_error_clear();
  bbw_result_clear();
  const bb_node *n = node_of(node);
  if (n == NULL) return bbw_last();
  char self[128];
  bb_peer_id_to_text(bb_node_self(n), self, sizeof self);
  bb_le_writer w = bbw_writer();
  bbw_write_text(&w, self);
  bb_le_write_u32(&w, (uint32_t)bb_node_target_count(n));
  for (size_t i = 0; i < bb_node_target_count(n); i++) bbw_write_text(&w, bb_node_target(n, i));
  bb_node_stats st;
  bb_node_stats_get(n, &st);
  const size_t fields[] = {st.executions, st.frontier, st.pending_async, st.timers, st.ingress, st.outbound,
                           st.ingress_bytes};
  for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) bb_le_write_u64(&w, fields[i]);
  return bbw_result_from(&w, "node info");
}

static int32_t node_peer_call(int32_t node, const char *peer, const char *what, bb_node **n, bb_peer_id *id) {
  bbw_error_clear();
  *n = node_of(node);
  if (*n == NULL) return bbw_last();
  return bbw_peer_parse(peer, what, id);
}

int32_t bb_wasm_node_add_peer(int32_t node, const char *peer) {
  bb_node *n;
  bb_peer_id id;
  if (node_peer_call(node, peer, "add peer", &n, &id) < 0) return bbw_last();
  bb_address address = bb_address_p2p(&id);
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_node_add_peer(n, &id, &address, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "add peer") : BB_OK;
}

int32_t bb_wasm_node_forget_peer(int32_t node, const char *peer) {
  bb_node *n;
  bb_peer_id id;
  if (node_peer_call(node, peer, "forget peer", &n, &id) < 0) return bbw_last();
  bb_node_forget_peer(n, &id);
  return BB_OK;
}

int32_t bb_wasm_node_block_peer(int32_t node, const char *peer, int32_t blocked) {
  bb_node *n;
  bb_peer_id id;
  if (node_peer_call(node, peer, "block peer", &n, &id) < 0) return bbw_last();
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_node_block_peer(n, &id, blocked != 0, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "block peer") : BB_OK;
}

int32_t bb_wasm_node_admit_token(int32_t node, const char *peer, const uint8_t *token, size_t len,
                                 uint64_t now_unix_s, uint64_t now_ns) {
  bb_node *n;
  bb_peer_id id;
  if (node_peer_call(node, peer, "admit token: the peer", &n, &id) < 0) return bbw_last();
  if (token == NULL && len > 0) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "admit token: NULL token of %zu bytes", len);
  bb_error err;
  bb_error_clear(&err);
  bb_join_role role;
  int rc = bb_node_admit_token(n, &id, token, len, now_unix_s, now_ns, &role, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "admit token") : (int32_t)role;
}

int32_t bb_wasm_node_peer_role(int32_t node, const char *peer) {
  bb_node *n;
  bb_peer_id id;
  if (node_peer_call(node, peer, "peer role", &n, &id) < 0) return bbw_last();
  return (int32_t)bb_node_peer_role(n, &id);
}

int32_t bb_wasm_node_run_bootstrap(int32_t node, uint64_t now_ns) {
  bbw_error_clear();
  bb_node *n = node_of(node);
  if (n == NULL) return bbw_last();
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_node_run_bootstrap(n, now_ns, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "bootstrap") : BB_OK;
}

int32_t bb_wasm_node_deliver(int32_t node, const char *from, const uint8_t *bytes, size_t len, uint64_t now_ns) {
  bb_node *n;
  bb_peer_id id;
  if (node_peer_call(node, from, "deliver: the sender", &n, &id) < 0) return bbw_last();
  if (bytes == NULL && len > 0) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "deliver: NULL bytes of length %zu", len);
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_node_deliver(n, &id, bytes, len, now_ns, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "deliver") : BB_OK;
}

/* One step in the layout of bb_wasm.h ("Steps"). */
static void write_step(bb_le_writer *w, const bb_step *s) {
  bb_le_write_u32(w, (uint32_t)s->kind);
  bb_le_write_u32(w, (uint32_t)s->fill_index);
  bb_le_write_u64(w, s->exec_id);
  bb_le_write_u64(w, s->command);
  bb_le_write_u64(w, s->count);
  bool app_value = s->kind == BB_STEP_APP_EVENT && s->value;
  bb_le_write_u64(w, app_value ? bb_val_kind_hash((int)bb_val_kind_of(s->value)) : s->type_hash);
  char peer[128] = "";
  if (s->has_peer) bb_peer_id_to_text(&s->peer, peer, sizeof peer);
  bbw_write_text(w, peer);
  if (s->kind == BB_STEP_APP_EVENT && s->value) bbw_write_value_field(w, s->value);
  else bbw_write_field(w, s->bytes, s->bytes ? s->len : 0);
  bbw_write_text(w, s->module);
  bbw_write_text(w, s->topic);
  bbw_write_text(w, s->op);
  bbw_write_text(w, s->reason);
  bbw_write_text(w, s->detail);
}

int32_t bb_wasm_node_poll(int32_t node, uint64_t now_ns) {
  bbw_error_clear();
  bbw_result_clear();
  bb_node *n = node_of(node);
  if (n == NULL) return bbw_last();
  const bb_step *steps = NULL;
  size_t n_steps = 0;
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_node_poll(n, now_ns, &steps, &n_steps, &err);
  if (rc < 0) return bbw_fail_from(rc, &err, "poll");
  if (n_steps > INT32_MAX) return bbw_fail(BB_ERR_LIMIT, "poll: %zu steps", n_steps);
  bb_le_writer w = bbw_writer();
  bb_le_write_u32(&w, (uint32_t)n_steps);
  for (size_t i = 0; i < n_steps; i++) write_step(&w, &steps[i]);
  if (bbw_result_from(&w, "poll") < 0) return bbw_last();
  return (int32_t)n_steps;
}

uint64_t bb_wasm_node_expiry(int32_t node) {
  bbw_error_clear();
  const bb_node *n = node_of(node);
  return n ? bb_node_expiry(n) : UINT64_MAX;
}

int32_t bb_wasm_node_has_work(int32_t node) {
  bbw_error_clear();
  const bb_node *n = node_of(node);
  return n ? (int32_t)bb_node_has_work(n) : bbw_last();
}

int32_t bb_wasm_node_invoke(int32_t node, const char *module, const char *names, size_t names_len,
                            const uint8_t *values, size_t values_len, uint64_t now_ns) {
  bbw_error_clear();
  bb_node *n = node_of(node);
  if (n == NULL) return bbw_last();
  if (module == NULL) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "invoke: no module");
  int32_t n_names = bbw_count_strings(names, names_len, BBW_VALUE_LIST_MAX, "invoke: input names");
  if (n_names < 0) return n_names;
  bbw_value_list list;
  if (bbw_value_list_decode(values, values_len, "invoke: inputs", &list) < 0) return bbw_last();
  if (list.n != (size_t)n_names) {
    size_t got = list.n;
    bbw_value_list_free(&list);
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "invoke %s: %d input names but %zu values", module, (int)n_names, got);
  }
  bb_named_value *inputs = calloc(list.n ? list.n : 1, sizeof *inputs);
  if (inputs == NULL) {
    bbw_value_list_free(&list);
    return bbw_fail(BB_ERR_NOMEM, "invoke: out of memory");
  }
  const char *at = names;
  int32_t rc = BB_OK;
  for (size_t i = 0; i < list.n; i++, at += strlen(at) + 1) {
    inputs[i] = (bb_named_value){at, list.items[i]};
    if (list.items[i] == NULL) rc = bbw_fail(BB_ERR_INVALID_ARGUMENT, "invoke %s: input `%s` has no value", module, at);
  }
  if (rc == BB_OK) {
    bb_error err;
    bb_error_clear(&err);
    int r = bb_node_invoke(n, module, inputs, list.n, now_ns, &err);
    if (r < 0) rc = bbw_fail_from(r, &err, "invoke");
  }
  free(inputs);
  bbw_value_list_free(&list);
  return rc;
}

int32_t bb_wasm_node_bind_input(int32_t node, const char *module, const char *input, const uint8_t *values,
                                size_t values_len) {
  bbw_error_clear();
  bb_node *n = node_of(node);
  if (n == NULL) return bbw_last();
  bbw_value_list list;
  if (bbw_value_list_decode(values, values_len, "bind input", &list) < 0) return bbw_last();
  if (list.n != 1) {
    size_t got = list.n;
    bbw_value_list_free(&list);
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "bind input: one value (or one absent value to unbind), not %zu", got);
  }
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_node_bind_input(n, module, input, list.items[0], &err);
  bbw_value_list_free(&list);
  return rc < 0 ? bbw_fail_from(rc, &err, "bind input") : BB_OK;
}

int32_t bb_wasm_node_complete(int32_t node, uint64_t command, const uint8_t *values, size_t values_len) {
  bbw_error_clear();
  bb_node *n = node_of(node);
  if (n == NULL) return bbw_last();
  bbw_value_list list;
  if (bbw_value_list_decode(values, values_len, "complete", &list) < 0) return bbw_last();
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_node_complete(n, command, list.items, list.n, &err);
  bbw_value_list_free(&list);
  return rc < 0 ? bbw_fail_from(rc, &err, "complete") : BB_OK;
}

int32_t bb_wasm_node_fail(int32_t node, uint64_t command, const char *detail) {
  bbw_error_clear();
  bb_node *n = node_of(node);
  if (n == NULL) return bbw_last();
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_node_fail(n, command, detail ? detail : "", &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "fail") : BB_OK;
}

int32_t bb_wasm_node_signed(int32_t node, const char *slot, const uint8_t *signature) {
  bbw_error_clear();
  bb_node *n = node_of(node);
  if (n == NULL) return bbw_last();
  if (slot == NULL || signature == NULL) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "signed: NULL slot or signature");
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_node_signed(n, slot, signature, 0, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "signed") : BB_OK;
}

uint64_t bb_wasm_node_counter(int32_t node, const char *name) {
  bbw_error_clear();
  const bb_node *n = node_of(node);
  return n && name ? bb_node_counter(n, name) : 0;
}

int32_t bb_wasm_node_snapshot(int32_t node) {
  bbw_error_clear();
  bbw_result_clear();
  const bb_node *n = node_of(node);
  if (n == NULL) return bbw_last();
  uint8_t *bytes = NULL;
  size_t len = 0;
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_node_snapshot(n, &bytes, &len, &err);
  if (rc < 0) return bbw_fail_from(rc, &err, "snapshot");
  bbw_result_take(bytes, len);
  return BB_OK;
}

int32_t bb_wasm_node_restore(int32_t node, const uint8_t *bytes, size_t len) {
  bbw_error_clear();
  bb_node *n = node_of(node);
  if (n == NULL) return bbw_last();
  if (bytes == NULL && len > 0) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "restore: NULL bytes of length %zu", len);
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_node_restore(n, bytes, len, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "restore") : BB_OK;
}
