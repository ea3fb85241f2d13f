/* Framework ops driven by the host's clock and the node's seed: Clock,
 * RngU64, After, Sleep, Interval, plus the structural and telemetry ops around them —
 * Tee, Bundle/Unbundle, AppEmit/AppNotify, IncrMetric, Any, OnTrigger. Artifacts are built
 * directly as IR (a passport and one function), the way a non-C frontend would. */
#include "rttest.h"

/* the node tables below leave the attribute fields out where a node has none */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef struct spec {
  const char *op, *in[3], *out[3];
  const char *sattr, *sval; /* a STRING attribute */
  const char *iattr;        /* an INT attribute */
  int64_t ival;
} spec;

/* An artifact with one target "T" whose nodes are `nodes` (domain syscall unless the op
 * name has a "::" prefix), inputs `inputs`, outputs `outputs`. */
static uint8_t *artifact(const spec *nodes, size_t n, const char *const *inputs, size_t n_in,
                         const char *const *outputs, size_t n_out, size_t *len) {
  bb_model *m = bb_model_new(NULL);
  m->has_ir_version = true;
  m->ir_version = BB_ONNX_IR_VERSION;
  bb_kv_upsert(m, &m->metadata, BB_KEY_COMPILED, BB_COMPILED_VERSION);
  bb_opset_set(m, &m->opsets, "", BB_ONNX_OPSET_VERSION);
  bb_function *f = bb_function_new(m, "T", BB_DOMAIN_MODULE);
  for (size_t i = 0; i < n_in; i++) bb_strlist_append(m, &f->inputs, inputs[i]);
  for (size_t i = 0; i < n_out; i++) bb_strlist_append(m, &f->outputs, outputs[i]);
  for (size_t k = 0; k < n; k++) {
    const char *sep = strstr(nodes[k].op, "::");
    char domain[64] = BB_DOMAIN_SYSCALL;
    const char *op = nodes[k].op;
    if (sep) {
      snprintf(domain, sizeof domain, "%.*s", (int)(sep - op), op);
      op = sep + 2;
    }
    bb_ir_node *nd = bb_ir_node_new(m, op, domain, NULL);
    for (int i = 0; i < 3 && nodes[k].in[i]; i++) bb_strlist_append(m, &nd->inputs, nodes[k].in[i]);
    for (int i = 0; i < 3 && nodes[k].out[i]; i++) bb_strlist_append(m, &nd->outputs, nodes[k].out[i]);
    if (nodes[k].sattr) bb_attr_set_string(m, &nd->attrs, nodes[k].sattr, nodes[k].sval);
    if (nodes[k].iattr) bb_attr_set_int(m, &nd->attrs, nodes[k].iattr, nodes[k].ival);
    bb_nodelist_append(m, &f->nodes, nd);
  }
  bb_model_add_function(m, f);
  uint8_t *bytes = NULL;
  CHECK(bb_model_encode(m, &bytes, len, NULL) == 0);
  bb_model_free(m);
  return bytes;
}

static bb_node *node_of(const uint8_t *art, size_t len, uint64_t seed) {
  bb_node_config cfg = {.struct_size = sizeof cfg, .seed = seed};
  const char *t[] = {"T"};
  return install_peer(art, len, 1, t, 1, NULL, &cfg);
}

/* The value of app event `topic` among the steps, or NULL. */
static const bb_val *event(const bb_step *s, size_t n, const char *topic) {
  for (size_t i = 0; i < n; i++)
    if (s[i].kind == BB_STEP_APP_EVENT && strcmp(s[i].topic, topic) == 0) return s[i].value;
  return NULL;
}

static void test_clock_and_rng(void) {
  spec nodes[] = {{"Clock", {"go"}, {"now"}}, {"RngU64", {"go"}, {"r"}}};
  const char *in[] = {"go"}, *out[] = {"now", "r"};
  size_t len;
  uint8_t *art = artifact(nodes, 2, in, 1, out, 2, &len);
  uint64_t draws[2][2];
  for (int run = 0; run < 2; run++) {
    bb_node *n = node_of(art, len, 5);
    if (!n) break;
    for (int k = 0; k < 2; k++) {
      bb_val *go = bb_val_trigger(NULL);
      bb_named_value iv = {"go", go};
      CHECK(bb_node_invoke(n, "T", &iv, 1, 12345 + (uint64_t)k, NULL) == 0);
      bb_val_release(go);
      const bb_step *s;
      size_t c;
      bb_node_poll(n, 12345 + (uint64_t)k, &s, &c, NULL);
      const bb_val *now = event(s, c, "now"), *r = event(s, c, "r");
      CHECK(now && bb_val_kind_of(now) == BB_VAL_TIMESTAMP && bb_val_as_u64(now) == 12345 + (uint64_t)k);
      CHECK(r && bb_val_kind_of(r) == BB_VAL_U64);
      draws[run][k] = r ? bb_val_as_u64(r) : 0;
    }
    bb_node_free(n);
  }
  CHECK(draws[0][0] == draws[1][0] && draws[0][1] == draws[1][1]); /* same seed, same draws */
  CHECK(draws[0][0] != draws[0][1]);
  bb_node *other = node_of(art, len, 6);
  bb_val *go = bb_val_trigger(NULL);
  bb_named_value iv = {"go", go};
  bb_node_invoke(other, "T", &iv, 1, 0, NULL);
  const bb_step *s;
  size_t c;
  bb_node_poll(other, 0, &s, &c, NULL);
  const bb_val *r = event(s, c, "r");
  CHECK(r && bb_val_as_u64(r) != draws[0][0]); /* another seed, another draw */
  bb_val_release(go);
  bb_node_free(other);
  free(art);
}

static void test_after_and_sleep(void) {
  spec nodes[] = {{"After", {"go"}, {"a"}, NULL, NULL, "delay_ns", 100},
                  {"Sleep", {"go"}, {"s"}, NULL, NULL, "duration_ns", 250},
                  {"Clock", {"a"}, {"at_a"}},
                  {"Clock", {"s"}, {"at_s"}}};
  const char *in[] = {"go"}, *out[] = {"at_a", "at_s"};
  size_t len;
  uint8_t *art = artifact(nodes, 4, in, 1, out, 2, &len);
  bb_node *n = node_of(art, len, 1);
  if (n) {
    bb_val *go = bb_val_trigger(NULL);
    bb_named_value iv = {"go", go};
    CHECK(bb_node_invoke(n, "T", &iv, 1, 1000, NULL) == 0);
    bb_val_release(go);
    const bb_step *s;
    size_t c;
    bb_node_poll(n, 1000, &s, &c, NULL);
    CHECK(!event(s, c, "at_a") && !event(s, c, "at_s"));
    CHECK_EQ_INT(bb_node_expiry(n), 1100);
    bb_node_poll(n, 1099, &s, &c, NULL);
    CHECK_EQ_INT(c, 0); /* not yet */
    bb_node_poll(n, 1100, &s, &c, NULL);
    const bb_val *a = event(s, c, "at_a");
    CHECK(a && bb_val_as_u64(a) == 1100 && !event(s, c, "at_s"));
    CHECK_EQ_INT(bb_node_expiry(n), 1250);
    bb_node_poll(n, 5000, &s, &c, NULL); /* a late poll: the timer fires with the late clock */
    const bb_val *sl = event(s, c, "at_s");
    CHECK(sl && bb_val_as_u64(sl) == 5000);
    CHECK_EQ_INT(bb_node_expiry(n), UINT64_MAX);
    bb_node_stats st;
    bb_node_stats_get(n, &st);
    CHECK_EQ_INT(st.executions, 0);
    bb_node_free(n);
  }
  free(art);
}

static void test_interval_reruns_its_loop(void) {
  spec nodes[] = {{"Interval", {NULL}, {"tick"}, NULL, NULL, "period_ns", 50},
                  {"Clock", {"tick"}, {"at"}},
                  {"IncrMetric", {"tick"}, {NULL}, "name", "ticks"}};
  const char *out[] = {"at"};
  size_t len;
  uint8_t *art = artifact(nodes, 3, NULL, 0, out, 1, &len);
  bb_node *n = node_of(art, len, 1);
  if (n) {
    CHECK(bb_node_invoke(n, "T", NULL, 0, 100, NULL) == 0);
    uint64_t seen[8];
    int k = 0;
    for (uint64_t t = 100; t <= 300 && k < 8; t += 25) {
      const bb_step *s;
      size_t c;
      bb_node_poll(n, t, &s, &c, NULL);
      const bb_val *at = event(s, c, "at");
      if (at) seen[k++] = bb_val_as_u64(at);
    }
    CHECK_EQ_INT(k, 5);
    for (int i = 0; i < k; i++) CHECK_EQ_INT(seen[i], 100 + 50 * (uint64_t)i);
    CHECK_EQ_INT(bb_node_counter(n, "ticks"), 5);
    bb_node_stats st;
    bb_node_stats_get(n, &st);
    CHECK_EQ_INT(st.executions, 1); /* one loop, its values reused every tick */
    CHECK_EQ_INT(st.timers, 1);
    bb_node_free(n); /* a running loop is released at teardown */
  }
  free(art);
}

static void test_structure_and_telemetry(void) {
  spec nodes[] = {{"Tee", {"x"}, {"t0", "t1"}},
                  {"ai.bytesandbrains.composite::Bundle", {"t0", "go"}, {"b"}},
                  {"ai.bytesandbrains.composite::Unbundle", {"b"}, {"u0", "u1"}, NULL, NULL,
                   "ai.bytesandbrains.composite.child_count", 2},
                  {"AppEmit", {"t1"}, {NULL}, "name", "emitted"},
                  {"AppNotify", {"go"}, {NULL}, "name", "notified"},
                  {"AppEmit", {"t1"}, {NULL}, "name", "bb.reserved"},
                  {"Any", {"x"}, {"first"}, "group", "g"},
                  {"OnTrigger", {"go"}, {"on"}}};
  const char *in[] = {"x", "go"}, *out[] = {"u0", "first", "on"};
  size_t len;
  uint8_t *art = artifact(nodes, 8, in, 2, out, 3, &len);
  bb_node *n = node_of(art, len, 1);
  if (n) {
    for (int run = 0; run < 2; run++) {
      bb_val *x = bb_val_bytes(NULL, "hi", 2), *go = bb_val_trigger(NULL);
      bb_named_value iv[] = {{"x", x}, {"go", go}};
      CHECK(bb_node_invoke(n, "T", iv, 2, 0, NULL) == 0);
      bb_val_release(x);
      bb_val_release(go);
      const bb_step *s;
      size_t c;
      bb_node_poll(n, 0, &s, &c, NULL);
      const bb_val *u0 = event(s, c, "u0"), *em = event(s, c, "emitted"), *no = event(s, c, "notified");
      CHECK(bb_val_as_bytes(u0) && bb_val_count(u0) == 2 && memcmp(bb_val_as_bytes(u0), "hi", 2) == 0);
      CHECK(em && bb_val_count(em) == 2 && no && bb_val_count(no) == 0 && event(s, c, "on"));
      bool reserved = false;
      for (size_t i = 0; i < c; i++)
        if (s[i].kind == BB_STEP_OP_FAILED && strcmp(s[i].reason, "reserved_topic_prefix") == 0) reserved = true;
      CHECK(reserved);
      CHECK((event(s, c, "first") != NULL) == (run == 0)); /* Any latches its group once */
    }
    bb_node_free(n);
  }
  free(art);
  /* Unbundle with the wrong child count, OnTrigger without input */
  spec bad[] = {{"ai.bytesandbrains.composite::Bundle", {"x"}, {"b"}},
                {"ai.bytesandbrains.composite::Unbundle", {"b"}, {"u0"}, NULL, NULL,
                 "ai.bytesandbrains.composite.child_count", 3}};
  const char *in2[] = {"x"}, *out2[] = {"u0"};
  art = artifact(bad, 2, in2, 1, out2, 1, &len);
  n = node_of(art, len, 1);
  if (n) {
    bb_val *x = bb_val_bytes(NULL, "a", 1);
    bb_named_value iv = {"x", x};
    bb_node_invoke(n, "T", &iv, 1, 0, NULL);
    bb_val_release(x);
    const bb_step *s;
    size_t c;
    bb_node_poll(n, 0, &s, &c, NULL);
    CHECK(c == 1 && s[0].kind == BB_STEP_OP_FAILED && strcmp(s[0].reason, "unbundle_child_count_mismatch") == 0);
    bb_node_free(n);
  }
  free(art);
}

int main(void) {
  RUN(test_clock_and_rng);
  RUN(test_after_and_sleep);
  RUN(test_interval_reruns_its_loop);
  RUN(test_structure_and_telemetry);
  return bb_test_finish();
}
