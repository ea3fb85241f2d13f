/* Host components at parity with C components, through bb.wasm's ABI: a host Protocol
 * type (HostPing, domain ai.bytesandbrains.protocol.ping) runs the slotless op a Module
 * recorded in its domain, and from its callbacks reaches what a C component reaches
 * through bb_ctx — its peer id and the source of the work, the seeded generator, a
 * dependency's op (CpuMlp's Params), application events, counters, control-plane messages
 * to the same slot on another peer (answered there from on_message), timers (on_timer),
 * and its state in snapshots (save, then load into a fresh node). Calls made outside the
 * callback that allows them are refused. */
#include <stdio.h>

#include "abitest.h"
#include "bb/compiler.h"
#include "bb/graph.h"
#include "bb/roles.h"
#include "bb/wire.h"

#define PING_DOMAIN BB_DOMAIN_PROTOCOL_PREFIX "ping"

/* ---- the host ------------------------------------------------------------------------------ */

static int32_t ping_type;
static int next_instance = 1;
static char loaded_state[64];
static int timers_fired, pings_seen;

static const char *result_text(char *out, size_t size) {
  size_t len = bb_wasm_result_len(), keep = len < size - 1 ? len : size - 1;
  if (keep) memcpy(out, bb_wasm_result_ptr(), keep); /* an empty result has no buffer */
  out[keep] = '\0';
  return out;
}

static void emit_bytes(const char *topic, const char *text) {
  bb_val *v = bb_val_bytes(NULL, text, strlen(text));
  buf b = value_list(&v, 1);
  CHECK_MSG(bb_wasm_call_emit(topic, b.data, b.len) == 0, "%s", bb_wasm_last_error());
  free(b.data);
}

int32_t bb_host_create(int32_t type_id, const char *slot, const char *config, size_t config_len, uint64_t seed) {
  (void)config, (void)config_len, (void)seed;
  CHECK_EQ_INT(type_id, ping_type);
  CHECK_STR(slot, "ping");
  /* nothing of a node is reachable while it is being built */
  CHECK(bb_wasm_call_self() == BB_ERR_INVALID_ARGUMENT);
  return next_instance++;
}

void bb_host_destroy(int32_t id) { (void)id; }

int32_t bb_host_invoke(int32_t id, const char *op_type, int32_t n_inputs, int32_t n_outputs) {
  (void)id;
  CHECK_STR(op_type, "Ping");
  CHECK(n_inputs == 1 && n_outputs == 1);
  char self[128], source[128];
  CHECK_EQ_INT(bb_wasm_call_self(), 0);
  result_text(self, sizeof self);
  CHECK_EQ_INT(bb_wasm_call_source(), 0);
  CHECK_STR(result_text(source, sizeof source), ""); /* the host invoked it: local work */
  CHECK(bb_wasm_call_random() != 0 || bb_wasm_last_error_code() == 0);
  /* the peer to ping is the op's input */
  CHECK_EQ_INT(bb_wasm_call_inputs(), 0);
  const uint8_t *in = bb_wasm_result_ptr();
  CHECK(bb_le_get_u64(in) == 1 && bb_le_get_u64(in + 8) == bb_val_kind_hash(BB_VAL_PEER));
  bb_val *to = NULL;
  bb_error err;
  CHECK(bb_val_decode(bb_le_get_u64(in + 8), in + 24, (size_t)bb_le_get_u64(in + 16), NULL, &to, &err) == 0);
  char to_text[128] = "";
  if (to) bb_peer_id_to_text(&bb_val_as_peers(to)[0], to_text, sizeof to_text);
  bb_val_release(to);
  /* the op's attributes: greeting (STRING) "hello", times (INT) 3 */
  CHECK_EQ_INT(bb_wasm_call_attributes(), 0);
  const uint8_t *a = bb_wasm_result_ptr();
  CHECK(bb_wasm_result_len() == 4 + 4 + 8 + 4 + 4 + 5 + 4 + 5 + 4 + 8);
  CHECK(bb_le_get_u32(a) == 2 && bb_le_get_u32(a + 4) == 8 && memcmp(a + 8, "greeting", 8) == 0);
  CHECK(bb_le_get_u32(a + 16) == BB_ATTR_STRING && bb_le_get_u32(a + 20) == 5 && memcmp(a + 24, "hello", 5) == 0);
  CHECK(bb_le_get_u32(a + 38) == BB_ATTR_INT && bb_le_get_u64(a + 42) == 3);
  CHECK_MSG(bb_wasm_call_send_message(to_text, "ping", (const uint8_t *)"hello", 5) == 0, "%s", bb_wasm_last_error());
  CHECK(bb_wasm_call_send_message("not a peer 0OIl", "ping", NULL, 0) < 0);
  CHECK_EQ_INT(bb_wasm_call_set_timer(bb_wasm_call_now() + 100, 42), 0);
  /* a dependency's op, synchronously */
  buf none = value_list(NULL, 0);
  CHECK_MSG(bb_wasm_call_dependency("model", "Params", none.data, none.len, 1) == 0, "%s", bb_wasm_last_error());
  const uint8_t *params = bb_wasm_result_ptr();
  CHECK(bb_le_get_u64(params) == 1 && bb_le_get_u64(params + 8) == bb_val_kind_hash(BB_VAL_TENSOR));
  CHECK(bb_wasm_call_dependency("nope", "Params", none.data, none.len, 1) == BB_ERR_NOT_FOUND);
  free(none.data);
  emit_bytes("pinged_from", self);
  CHECK_EQ_INT(bb_wasm_call_count("ping.sent", 1), 0);
  bb_val *sent = bb_val_u64(NULL, BB_VAL_U64, 7);
  buf b = value_list(&sent, 1);
  int32_t rc = bb_wasm_call_set_outputs(b.data, b.len);
  free(b.data);
  return rc;
}

int32_t bb_host_on_message(int32_t id, const char *op, const char *from, const uint8_t *payload, size_t len) {
  (void)id;
  CHECK(bb_wasm_call_defer() == 0); /* only an invoke answers later */
  CHECK(bb_wasm_call_attributes() == BB_ERR_INVALID_ARGUMENT);
  CHECK(bb_wasm_call_inputs() == BB_ERR_INVALID_ARGUMENT);
  if (strcmp(op, "ping") == 0) {
    pings_seen++;
    CHECK(len == 5 && memcmp(payload, "hello", 5) == 0);
    CHECK_EQ_INT(bb_wasm_call_count("ping.seen", 1), 0);
    return bb_wasm_call_send_message(from, "pong", (const uint8_t *)"hello back", 10);
  }
  if (strcmp(op, "pong") == 0) {
    char text[32];
    snprintf(text, sizeof text, "%.*s", (int)len, (const char *)payload);
    emit_bytes("pong", text);
    return 0;
  }
  bb_wasm_call_fail(BB_ERR_UNSUPPORTED, "HostPing: no such message");
  return BB_ERR_UNSUPPORTED;
}

int32_t bb_host_on_timer(int32_t id, uint64_t token) {
  (void)id;
  CHECK(token == 42);
  timers_fired++;
  emit_bytes("timer", "42");
  return 0;
}

int32_t bb_host_save(int32_t id) {
  char state[32];
  snprintf(state, sizeof state, "state of %d", (int)id);
  CHECK(bb_wasm_call_now() == 0 && bb_wasm_last_error_code() == BB_ERR_INVALID_ARGUMENT); /* no node here */
  return bb_wasm_call_set_state((const uint8_t *)state, strlen(state));
}

int32_t bb_host_load(int32_t id, const uint8_t *state, size_t len) {
  (void)id;
  CHECK(bb_wasm_call_set_state(state, len) == BB_ERR_INVALID_ARGUMENT); /* only a save sets state */
  snprintf(loaded_state, sizeof loaded_state, "%.*s", (int)len, (const char *)state);
  return 0;
}

/* No node of this test signs (installed with signs = 0). */
int32_t bb_host_sign(int32_t node, const char *slot, const uint8_t *message, size_t len) {
  (void)node, (void)slot, (void)message, (void)len;
  return -1;
}

void bb_host_module_record(int32_t host_id, int32_t bootstrap) {
  (void)host_id, (void)bootstrap;
  CHECK_MSG(false, "no Module is recorded by the host here");
}

/* ---- the Module: ping a peer ---------------------------------------------------------------- */

static void pinger(bb_rec *g, void *user) {
  (void)user;
  bb_value peer = bb_rec_input(g, "peer", BB_TYPE_PEER_ID);
  bb_value sent;
  bb_op_attr attrs[] = {BB_OP_ATTR_STRING("greeting", "hello"), BB_OP_ATTR_INT("times", 3)};
  bb_rec_protocol_call(g, PING_DOMAIN, "Ping", &peer, 1, attrs, 2, &sent, 1);
  bb_rec_output(g, "sent", sent);
}

static buf compile_pinger(void) {
  static const bb_module PINGER = {sizeof(bb_module), "Pinger", pinger, NULL, NULL, NULL, 0};
  bb_model *m = NULL;
  bb_error err;
  uint8_t *bytes = NULL;
  size_t len = 0;
  CHECK(bb_module_build(&PINGER, NULL, &m, &err) == 0 && bb_model_encode(m, &bytes, &len, &err) == 0);
  bb_model_free(m);
  int32_t c = bb_wasm_compiler_new();
  bb_wasm_compiler_set_permissive(c, 1);
  CHECK_EQ_INT(bb_wasm_compiler_bind(c, BB_ROLE_PROTOCOL, "ping", "HostPing", NULL), 0);
  CHECK_EQ_INT(bb_wasm_compiler_bind(c, BB_ROLE_MODEL, "model", "CpuMlp", "inputs=2,outputs=2"), 0);
  CHECK_EQ_INT(bb_wasm_compiler_declare(c, "HostPing", NULL, "Model:model"), 0);
  CHECK_MSG(bb_wasm_compiler_compile(c, bytes, len) == 0, "%s", bb_wasm_last_error());
  bb_buffer_free(NULL, bytes);
  buf artifact = {malloc(bb_wasm_result_len()), bb_wasm_result_len()};
  memcpy(artifact.data, bb_wasm_result_ptr(), artifact.len);
  bb_wasm_compiler_free(c);
  return artifact;
}

/* ---- two nodes ping each other -------------------------------------------------------------- */

typedef struct seen {
  int sends;
  char topics[8][64];
  char payloads[8][64];
  int n_events;
} seen;

/* Polls node i; delivers its sends to the other node; records its events. */
static void poll_node(int32_t *nodes, char ids[2][128], int i, uint64_t now, seen *s) {
  int32_t n = bb_wasm_node_poll(nodes[i], now);
  CHECK_MSG(n >= 0, "%s", bb_wasm_last_error());
  size_t len = bb_wasm_result_len();
  uint8_t *copy = malloc(len ? len : 1);
  memcpy(copy, bb_wasm_result_ptr(), len);
  const uint8_t *p = copy + 4;
  for (int32_t k = 0; k < n; k++) {
    step st;
    next_step(&p, &st);
    if (st.kind == BB_STEP_SEND) {
      s->sends++;
      CHECK_EQ_INT(bb_wasm_node_deliver(nodes[1 - i], ids[i], st.bytes, st.len, now), 0);
    } else if (st.kind == BB_STEP_APP_EVENT && s->n_events < 8) {
      snprintf(s->topics[s->n_events], sizeof s->topics[0], "%s", st.topic);
      /* a Bytes payload: u64 length, then the bytes */
      if (st.len >= 8)
        snprintf(s->payloads[s->n_events], sizeof s->payloads[0], "%.*s", (int)st.len - 8, (const char *)st.bytes + 8);
      s->n_events++;
    } else if (st.kind == BB_STEP_OP_FAILED) {
      CHECK_MSG(false, "op failed: %s %s", st.op, st.detail);
    }
  }
  free(copy);
}

static bool has_event(const seen *s, const char *topic, const char *payload) {
  for (int i = 0; i < s->n_events; i++)
    if (strcmp(s->topics[i], topic) == 0 && (!payload || strcmp(s->payloads[i], payload) == 0)) return true;
  return false;
}

static void test_protocol_over_messages(void) {
  ping_type = bb_wasm_host_type_add("HostPing", 1u << BB_ROLE_PROTOCOL, PING_DOMAIN);
  CHECK_MSG(ping_type > 0, "%s", bb_wasm_last_error());
  CHECK_EQ_INT(bb_wasm_host_type_add("HostBadDomain", 1u << BB_ROLE_PROTOCOL, "ai.bytesandbrains.role.model"),
               BB_ERR_INVALID_ARGUMENT);
  buf artifact = compile_pinger();
  char ids[2][128];
  int32_t nodes[2];
  for (int i = 0; i < 2; i++) {
    bb_peer_id id = bb_peer_id_from_u64((uint64_t)i + 1);
    bb_peer_id_to_text(&id, ids[i], sizeof ids[i]);
    nodes[i] = bb_wasm_node_install(artifact.data, artifact.len, ids[i], "Pinger", sizeof "Pinger", NULL, 0, NULL, 3,
                                    NULL, NULL, 0, 0);
    CHECK_MSG(nodes[i] > 0, "%s", bb_wasm_last_error());
  }
  for (int i = 0; i < 2; i++) CHECK_EQ_INT(bb_wasm_node_add_peer(nodes[i], ids[1 - i]), 0);
  bb_peer_id b_id = bb_peer_id_from_u64(2);
  bb_val *peer = bb_val_peer(NULL, &b_id);
  buf in = value_list(&peer, 1);
  CHECK_MSG(bb_wasm_node_invoke(nodes[0], "Pinger", "peer", sizeof "peer", in.data, in.len, 1000) == 0, "%s",
            bb_wasm_last_error());
  free(in.data);
  seen a = {0}, b = {0};
  poll_node(nodes, ids, 0, 1000, &a); /* A pings: a message to B, its events */
  poll_node(nodes, ids, 1, 1010, &b); /* B answers from on_message */
  poll_node(nodes, ids, 0, 1020, &a); /* A gets the pong */
  CHECK(has_event(&a, "pinged_from", ids[0]));
  CHECK(has_event(&a, "sent", NULL));
  CHECK(has_event(&a, "pong", "hello back"));
  CHECK_EQ_INT(pings_seen, 1);
  CHECK_EQ_INT(a.sends, 1);
  CHECK_EQ_INT(b.sends, 1);
  CHECK(bb_wasm_node_counter(nodes[0], "ping.sent") == 1 && bb_wasm_node_counter(nodes[1], "ping.seen") == 1);
  CHECK(bb_wasm_node_expiry(nodes[0]) == 1100);
  poll_node(nodes, ids, 0, 1100, &a);
  CHECK_EQ_INT(timers_fired, 1);
  CHECK(has_event(&a, "timer", "42"));

  /* state: saved from A, loaded into a fresh node */
  CHECK_MSG(bb_wasm_node_snapshot(nodes[0]) == 0, "%s", bb_wasm_last_error());
  size_t len = bb_wasm_result_len();
  uint8_t *snap = malloc(len);
  memcpy(snap, bb_wasm_result_ptr(), len);
  int32_t fresh = bb_wasm_node_install(artifact.data, artifact.len, ids[0], "Pinger", sizeof "Pinger", NULL, 0, NULL, 3,
                                       NULL, NULL, 0, 0);
  CHECK_MSG(bb_wasm_node_restore(fresh, snap, len) == 0, "%s", bb_wasm_last_error());
  CHECK_STR(loaded_state, "state of 1");
  free(snap);

  /* outside the callbacks that allow them */
  CHECK(bb_wasm_call_send_message(ids[1], "ping", NULL, 0) == BB_ERR_INVALID_ARGUMENT);
  CHECK(bb_wasm_call_set_timer(0, 1) == BB_ERR_INVALID_ARGUMENT);
  CHECK(bb_wasm_call_emit("x", NULL, 0) == BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(bb_wasm_last_error(), "only while a host component's invoke, on_message or on_timer runs") != NULL);
  CHECK(bb_wasm_call_set_state(NULL, 0) == BB_ERR_INVALID_ARGUMENT);
  for (int i = 0; i < 2; i++) bb_wasm_node_free(nodes[i]);
  bb_wasm_node_free(fresh);
  free(artifact.data);
}

int main(void) {
  RUN(test_protocol_over_messages);
  return bb_test_finish();
}
