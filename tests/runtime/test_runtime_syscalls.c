/* Framework ops one by one through a real node: each test installs
 * a tiny artifact built as IR (a passport and one function per target), invokes it and
 * reads what the node reports — app events for the targets' outputs, OP_FAILED steps with
 * their stable reasons, counters, timers and parked commands. */
#include "rttest.h"
#include "runtime/node.h"

/* the node tables below leave the attribute fields out where a node has none */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef struct op_spec {
  const char *op, *in[3], *out[3];
  const char *sattr, *sval; /* a STRING attribute */
  const char *iattr;        /* an INT attribute */
  int64_t ival;
} op_spec;

typedef struct fn_spec {
  const char *name;
  const char *in[4], *out[4];
  const op_spec *ops;
  size_t n_ops;
} fn_spec;

#define OPS(array) .ops = (array), .n_ops = sizeof(array) / sizeof *(array)

/* An artifact with one target per function (ops in the syscall domain unless the op
 * name has a "<domain>::" prefix). */
static uint8_t *artifact(const fn_spec *fns, size_t n_fns, size_t *len) {
  bb_model *m = bb_model_new(NULL);
  m->has_ir_version = true;
  m->ir_version = BB_ONNX_IR_VERSION;
  bb_kv_upsert(m, &m->metadata, BB_KEY_COMPILED, BB_COMPILED_VERSION);
  bb_opset_set(m, &m->opsets, "", BB_ONNX_OPSET_VERSION);
  for (size_t f = 0; f < n_fns; f++) {
    bb_function *fn = bb_function_new(m, fns[f].name, BB_DOMAIN_MODULE);
    for (int i = 0; i < 4 && fns[f].in[i]; i++) bb_strlist_append(m, &fn->inputs, fns[f].in[i]);
    for (int i = 0; i < 4 && fns[f].out[i]; i++) bb_strlist_append(m, &fn->outputs, fns[f].out[i]);
    for (size_t k = 0; k < fns[f].n_ops; k++) {
      const op_spec *o = &fns[f].ops[k];
      const char *sep = strstr(o->op, "::");
      char domain[64] = BB_DOMAIN_SYSCALL;
      const char *op = o->op;
      if (sep) {
        snprintf(domain, sizeof domain, "%.*s", (int)(sep - op), op);
        op = sep + 2;
      }
      bb_ir_node *nd = bb_ir_node_new(m, op, domain, NULL);
      for (int i = 0; i < 3 && o->in[i]; i++) bb_strlist_append(m, &nd->inputs, o->in[i]);
      for (int i = 0; i < 3 && o->out[i]; i++) bb_strlist_append(m, &nd->outputs, o->out[i]);
      if (o->sattr) bb_attr_set_string(m, &nd->attrs, o->sattr, o->sval);
      if (o->iattr) bb_attr_set_int(m, &nd->attrs, o->iattr, o->ival);
      bb_nodelist_append(m, &fn->nodes, nd);
    }
    bb_model_add_function(m, fn);
  }
  uint8_t *bytes = NULL;
  CHECK(bb_model_encode(m, &bytes, len, NULL) == 0);
  bb_model_free(m);
  return bytes;
}

/* A node running every function of `fns` as a target (seed 7 unless given). */
static bb_node *node_for(const fn_spec *fns, size_t n_fns, uint64_t seed) {
  size_t len;
  uint8_t *art = artifact(fns, n_fns, &len);
  const char *targets[8];
  for (size_t i = 0; i < n_fns && i < 8; i++) targets[i] = fns[i].name;
  bb_node_config cfg = {.struct_size = sizeof cfg, .seed = seed};
  bb_node *n = install_peer(art, len, 1, targets, n_fns, NULL, &cfg);
  free(art);
  return n;
}

/* Steps of one invoke: the target runs with input `input` = v (both NULL: a trigger on
 * "go"), and the node is polled at `now`. */
typedef struct run {
  const bb_step *s;
  size_t n;
} run;

static run invoke(bb_node *n, const char *target, const char *input, bb_val *v, uint64_t now) {
  bb_val *own = v ? NULL : bb_val_trigger(NULL);
  bb_named_value iv = {input ? input : "go", v ? v : own};
  bb_error err;
  CHECK_MSG(bb_node_invoke(n, target, &iv, 1, now, &err) == 0, "invoke %s: %s", target,
            err.message);
  bb_val_release(own);
  run r;
  CHECK(bb_node_poll(n, now, &r.s, &r.n, NULL) == 0);
  return r;
}

/* Runs a target that takes no inputs. */
static run start(bb_node *n, const char *target, uint64_t now) {
  CHECK(bb_node_invoke(n, target, NULL, 0, now, NULL) == 0);
  run r;
  CHECK(bb_node_poll(n, now, &r.s, &r.n, NULL) == 0);
  return r;
}

static run poll_at(bb_node *n, uint64_t now) {
  run r;
  CHECK(bb_node_poll(n, now, &r.s, &r.n, NULL) == 0);
  return r;
}

/* The value of app event `topic`, or NULL. */
static const bb_val *event(run r, const char *topic) {
  for (size_t i = 0; i < r.n; i++)
    if (r.s[i].kind == BB_STEP_APP_EVENT && strcmp(r.s[i].topic, topic) == 0) return r.s[i].value;
  return NULL;
}

static size_t events(run r, const char *topic) {
  size_t k = 0;
  for (size_t i = 0; i < r.n; i++) k += r.s[i].kind == BB_STEP_APP_EVENT && strcmp(r.s[i].topic, topic) == 0;
  return k;
}

/* The reason of the (only) OP_FAILED step, or "" when no op failed. */
static const char *failure(run r) {
  for (size_t i = 0; i < r.n; i++)
    if (r.s[i].kind == BB_STEP_OP_FAILED) return r.s[i].reason;
  return "";
}

static const char *failure_detail(run r) {
  for (size_t i = 0; i < r.n; i++)
    if (r.s[i].kind == BB_STEP_OP_FAILED) return r.s[i].detail;
  return "";
}

static void expect_drained(bb_node *n) {
  bb_node_stats st;
  bb_node_stats_get(n, &st);
  CHECK_EQ_INT(st.executions, 0);
  CHECK_EQ_INT(st.pending_async, 0);
}

static bb_val *bytes(const char *s) { return bb_val_bytes(NULL, s, strlen(s)); }

static bool is_bytes(const bb_val *v, const char *s) {
  return bb_val_as_bytes(v) && bb_val_count(v) == strlen(s) && memcmp(bb_val_as_bytes(v), s, bb_val_count(v)) == 0;
}

/* ---- time ------------------------------------------------------------------------------- */

static void test_clock_and_rng(void) {
  static const op_spec ops[] = {{"Clock", {"go"}, {"now"}}, {"RngU64", {"go"}, {"r"}}, {"Clock", {"go"}}};
  fn_spec fn = {"T", {"go"}, {"now", "r"}, OPS(ops)};
  uint64_t first[2];
  for (int k = 0; k < 3; k++) {
    bb_node *n = node_for(&fn, 1, k < 2 ? 99 : 100);
    if (!n) return;
    run r = invoke(n, "T", NULL, NULL, 12345);
    const bb_val *now = event(r, "now"), *rng = event(r, "r");
    CHECK(now && bb_val_kind_of(now) == BB_VAL_TIMESTAMP && bb_val_as_u64(now) == 12345);
    CHECK(rng && bb_val_kind_of(rng) == BB_VAL_U64);
    if (rng && k < 2) first[k] = bb_val_as_u64(rng);
    if (rng && k == 2) CHECK(bb_val_as_u64(rng) != first[0]); /* another seed, another draw */
    expect_drained(n);
    bb_node_free(n);
  }
  CHECK(first[0] == first[1]); /* the same seed, the same draw */
}

static void test_after_and_sleep_park_until_due(void) {
  static const op_spec ops[] = {{"After", {"go"}, {"a"}, NULL, NULL, "delay_ns", 50},
                                {"Sleep", {"go"}, {"s"}, NULL, NULL, "duration_ns", 80},
                                {"Clock", {"a"}, {"at_a"}},
                                {"Clock", {"s"}, {"at_s"}}};
  fn_spec fn = {"T", {"go"}, {"at_a", "at_s"}, OPS(ops)};
  bb_node *n = node_for(&fn, 1, 7);
  if (!n) return;
  run r = invoke(n, "T", NULL, NULL, 100);
  CHECK(!event(r, "at_a") && !event(r, "at_s"));
  CHECK_EQ_INT(bb_node_expiry(n), 150);
  bb_node_stats st;
  bb_node_stats_get(n, &st);
  CHECK_EQ_INT(st.pending_async, 2);
  r = poll_at(n, 149);
  CHECK(!event(r, "at_a"));
  r = poll_at(n, 150);
  CHECK(event(r, "at_a") && bb_val_as_u64(event(r, "at_a")) == 150 && !event(r, "at_s"));
  CHECK_EQ_INT(bb_node_expiry(n), 180);
  r = poll_at(n, 180);
  CHECK(event(r, "at_s") && bb_val_as_u64(event(r, "at_s")) == 180);
  CHECK_EQ_INT(bb_node_expiry(n), UINT64_MAX);
  expect_drained(n);
  bb_node_free(n);
}

static void test_interval_reruns_dependents(void) {
  static const op_spec ops[] = {{"Interval", {NULL}, {"tick"}, NULL, NULL, "period_ns", 10},
                                {"Clock", {"tick"}, {"t"}}};
  fn_spec fn = {"T", {NULL}, {"t"}, OPS(ops)};
  bb_node *n = node_for(&fn, 1, 7);
  if (!n) return;
  run r = start(n, "T", 0);
  CHECK(event(r, "t") && bb_val_as_u64(event(r, "t")) == 0);
  CHECK_EQ_INT(bb_node_expiry(n), 10);
  for (uint64_t at = 10; at <= 30; at += 10) {
    r = poll_at(n, at);
    CHECK_MSG(events(r, "t") == 1 && bb_val_as_u64(event(r, "t")) == at, "tick at %llu", (unsigned long long)at);
    CHECK_EQ_INT(bb_node_expiry(n), at + 10);
  }
  bb_node_free(n); /* the interval holds its execution until the node goes */
}

/* The first firing in an execution wins; an Interval re-arming it in the same execution
 * does not fire it again, while an op beside it does run again. */
static void test_deadline_match_latches_per_execution(void) {
  static const op_spec ops[] = {{"Interval", {NULL}, {"tick"}, NULL, NULL, "period_ns", 10},
                                {"DeadlineMatch", {"tick"}, {"w"}},
                                {"Clock", {"tick"}, {"t"}}};
  static const op_spec none[] = {{"DeadlineMatch", {""}, {"w"}}};
  fn_spec fns[] = {{"T", {NULL}, {"w", "t"}, OPS(ops)}, {"E", {"go"}, {"w"}, OPS(none)}};
  bb_node *n = node_for(fns, 2, 7);
  if (!n) return;
  run r = start(n, "T", 0);
  CHECK(events(r, "w") == 1 && events(r, "t") == 1);
  for (uint64_t at = 10; at <= 50; at += 10) {
    r = poll_at(n, at);
    CHECK(events(r, "w") == 0 && events(r, "t") == 1);
  }
  /* a second execution races on its own */
  r = start(n, "T", 55);
  CHECK(events(r, "w") == 1);
  /* many at once: the latch table fills and prunes, yet keeps every execution an
   * Interval still re-arms */
  size_t won = 0;
  for (int k = 0; k < 40; k++) won += events(start(n, "T", 60), "w");
  CHECK_EQ_INT(won, 40);
  r = poll_at(n, 70);
  CHECK_EQ_INT(events(r, "t"), 42);
  CHECK_EQ_INT(events(r, "w"), 0);
  r = invoke(n, "E", NULL, NULL, 56);
  CHECK(strcmp(failure(r), "missing_input") == 0 && strstr(failure_detail(r), "at least one"));
  bb_node_free(n);
}

/* Executions that come and go leave nothing behind: the latch table stays small. */
static void test_deadline_match_memory_stays_flat(void) {
  static const op_spec ops[] = {{"DeadlineMatch", {"go"}, {"w"}}};
  fn_spec fn = {"T", {"go"}, {"w"}, OPS(ops)};
  bb_node *n = node_for(&fn, 1, 7);
  if (!n) return;
  size_t fired = 0;
  for (uint64_t k = 0; k < 5000; k++) fired += events(invoke(n, "T", NULL, NULL, k), "w");
  CHECK_EQ_INT(fired, 5000);
  CHECK_MSG(n->cap_latches <= 64, "latch table grew to %zu", n->cap_latches);
  expect_drained(n);
  bb_node_free(n);
}

/* ---- coordination ------------------------------------------------------------------------ */

static void test_limit_acquire_release(void) {
  static const op_spec acq[] = {{"Limit.Acquire", {"go"}, {"ok"}, "name", "uploads", "n", 2}};
  static const op_spec rel[] = {{"Limit.Release", {"go"}, {"done"}, "name", "uploads"}};
  static const op_spec other[] = {{"Limit.Acquire", {"go"}, {"ok"}, "name", "downloads"}};
  static const op_spec unnamed[] = {{"Limit.Acquire", {"go"}, {"ok"}}};
  fn_spec fns[] = {{"A", {"go"}, {"ok"}, OPS(acq)},
                   {"R", {"go"}, {"done"}, OPS(rel)},
                   {"O", {"go"}, {"ok"}, OPS(other)},
                   {"U", {"go"}, {"ok"}, OPS(unnamed)}};
  bb_node *n = node_for(fns, 4, 7);
  if (!n) return;
  CHECK(event(invoke(n, "A", NULL, NULL, 1), "ok"));
  CHECK(event(invoke(n, "A", NULL, NULL, 2), "ok"));
  run r = invoke(n, "A", NULL, NULL, 3);
  CHECK(!event(r, "ok") && !*failure(r)); /* gated: absorbed, not failed */
  CHECK(event(invoke(n, "O", NULL, NULL, 4), "ok")); /* names count apart */
  CHECK(event(invoke(n, "R", NULL, NULL, 5), "done"));
  CHECK(event(invoke(n, "A", NULL, NULL, 6), "ok")); /* re-acquired */
  CHECK(!event(invoke(n, "A", NULL, NULL, 7), "ok"));
  for (int k = 0; k < 5; k++) invoke(n, "R", NULL, NULL, 8); /* floored at 0 */
  CHECK(event(invoke(n, "A", NULL, NULL, 9), "ok"));
  CHECK(event(invoke(n, "A", NULL, NULL, 9), "ok"));
  CHECK(!event(invoke(n, "A", NULL, NULL, 9), "ok"));
  r = invoke(n, "U", NULL, NULL, 10);
  CHECK(strcmp(failure(r), "missing_attribute") == 0 && strstr(failure_detail(r), "`name`"));
  expect_drained(n);
  bb_node_free(n);
}

static void test_serialize_round_trip(void) {
  static const op_spec enq[] = {{"Serialize.Enqueue", {"x"}, {"queued"}, "queue", "q"}};
  static const op_spec deq[] = {{"Serialize.Dequeue", {"go"}, {"v"}, "queue", "q"}};
  static const op_spec empty[] = {{"Serialize.Enqueue", {""}, {"queued"}, "queue", "q"}};
  fn_spec fns[] = {{"E", {"x"}, {"queued"}, OPS(enq)}, {"D", {"go"}, {"v"}, OPS(deq)}, {"Z", {"go"}, {"queued"}, OPS(empty)}};
  bb_node *n = node_for(fns, 3, 7);
  if (!n) return;
  const char *words[] = {"first", "second", "third"};
  for (int i = 0; i < 3; i++) {
    bb_val *v = bytes(words[i]);
    CHECK(event(invoke(n, "E", "x", v, 1), "queued"));
    bb_val_release(v);
  }
  CHECK(event(invoke(n, "Z", NULL, NULL, 1), "queued")); /* absent input: an empty value */
  for (int i = 0; i < 3; i++) CHECK(is_bytes(event(invoke(n, "D", NULL, NULL, 2), "v"), words[i]));
  CHECK(is_bytes(event(invoke(n, "D", NULL, NULL, 2), "v"), ""));
  run r = invoke(n, "D", NULL, NULL, 3);
  CHECK(!event(r, "v") && !*failure(r)); /* empty queue: absorb */
  bb_val *u = bb_val_u64(NULL, BB_VAL_U64, 5);
  r = invoke(n, "E", "x", u, 4);
  CHECK(strcmp(failure(r), "expected_bytes") == 0 && strstr(failure_detail(r), "not Bytes") && !event(r, "queued"));
  bb_val_release(u);
  CHECK_EQ_INT(n->named_bytes, 0);
  expect_drained(n);
  bb_node_free(n);
}

/* The queue keeps the newest 4096 values. */
static void test_serialize_evicts_the_oldest(void) {
  static const op_spec enq[] = {{"Serialize.Enqueue", {"x"}, {"queued"}, "queue", "q"}};
  static const op_spec deq[] = {{"Serialize.Dequeue", {"go"}, {"v"}, "queue", "q"}};
  fn_spec fns[] = {{"E", {"x"}, {"queued"}, OPS(enq)}, {"D", {"go"}, {"v"}, OPS(deq)}};
  bb_node *n = node_for(fns, 2, 7);
  if (!n) return;
  for (int i = 0; i < 4100; i++) {
    char text[16];
    snprintf(text, sizeof text, "%05d", i);
    bb_val *v = bytes(text);
    invoke(n, "E", "x", v, 1);
    bb_val_release(v);
  }
  CHECK_EQ_INT(n->named_bytes, 4096 * 5);
  CHECK(is_bytes(event(invoke(n, "D", NULL, NULL, 2), "v"), "00004"));
  bb_node_free(n);
}

static void test_hold_round_trip(void) {
  static const op_spec stash[] = {{"Hold.Stash", {"x"}, {NULL}, "slot", "s"}};
  static const op_spec flush[] = {{"Hold.Flush", {"go"}, {"v"}, "slot", "s"}};
  fn_spec fns[] = {{"S", {"x"}, {NULL}, OPS(stash)}, {"F", {"go"}, {"v"}, OPS(flush)}};
  bb_node *n = node_for(fns, 2, 7);
  if (!n) return;
  CHECK(!event(invoke(n, "F", NULL, NULL, 1), "v")); /* nothing held yet */
  bb_val *a = bytes("old"), *b = bytes("new"), *t = bb_val_trigger(NULL);
  invoke(n, "S", "x", a, 2);
  invoke(n, "S", "x", b, 3); /* overwrites */
  CHECK_EQ_INT(n->named_bytes, 3);
  CHECK(is_bytes(event(invoke(n, "F", NULL, NULL, 4), "v"), "new"));
  CHECK(!event(invoke(n, "F", NULL, NULL, 5), "v")); /* taken */
  run r = invoke(n, "S", "x", t, 6);
  CHECK(strcmp(failure(r), "expected_bytes") == 0);
  bb_val_release(a);
  bb_val_release(b);
  bb_val_release(t);
  expect_drained(n);
  bb_node_free(n);
}

static void test_record_ring(void) {
  static const op_spec rec[] = {{"Record", {"x"}, {NULL}, "name", "log"}};
  fn_spec fn = {"R", {"x"}, {NULL}, OPS(rec)};
  bb_node *n = node_for(&fn, 1, 7);
  if (!n) return;
  bb_val *v = bytes("abc");
  for (int i = 0; i < 1030; i++) CHECK(!*failure(invoke(n, "R", "x", v, 1)));
  CHECK_EQ_INT(n->named_bytes, 1024 * 3); /* 1024 kept per name, the oldest evicted */
  bb_val_release(v);
  bb_val *p = bb_val_u64(NULL, BB_VAL_CORRELATION, 1);
  run r = invoke(n, "R", "x", p, 2);
  CHECK(strcmp(failure(r), "expected_bytes") == 0 && strstr(failure_detail(r), "Correlation"));
  bb_val_release(p);
  expect_drained(n);
  bb_node_free(n);
}

/* A peer's values count against the node's byte budget while a store holds them. */
static void test_stores_keep_to_the_byte_budget(void) {
  static const op_spec enq[] = {{"Serialize.Enqueue", {"x"}, {"queued"}, "queue", "q"}};
  fn_spec fn = {"E", {"x"}, {"queued"}, OPS(enq)};
  size_t len;
  uint8_t *art = artifact(&fn, 1, &len);
  const char *targets[] = {"E"};
  bb_node_config cfg = {.struct_size = sizeof cfg, .ingress_byte_budget = 1000};
  bb_node *n = install_peer(art, len, 1, targets, 1, NULL, &cfg);
  free(art);
  if (!n) return;
  char block[300] = {0};
  bb_val *v = bb_val_bytes(NULL, block, sizeof block);
  for (int i = 0; i < 3; i++) CHECK(event(invoke(n, "E", "x", v, 1), "queued"));
  run r = invoke(n, "E", "x", v, 2);
  CHECK(strcmp(failure(r), "store_byte_limit") == 0);
  CHECK_EQ_INT(n->named_bytes, 900);
  bb_val_release(v);
  bb_node_free(n);
}

static void test_any_latches_per_group(void) {
  static const op_spec ops[] = {{"Any", {"go"}, {"g1"}, "group", "one"},
                                {"Any", {"go"}, {"g2"}, "group", "two"},
                                {"Any", {"go"}, {"free"}}};
  fn_spec fn = {"T", {"go"}, {"g1", "g2", "free"}, OPS(ops)};
  bb_node *n = node_for(&fn, 1, 7);
  if (!n) return;
  run r = invoke(n, "T", NULL, NULL, 1);
  CHECK(event(r, "g1") && event(r, "g2") && event(r, "free"));
  r = invoke(n, "T", NULL, NULL, 2);
  CHECK(!event(r, "g1") && !event(r, "g2") && event(r, "free"));
  expect_drained(n);
  bb_node_free(n);
}

static void test_gate_and_on_trigger(void) {
  static const op_spec gate[] = {{"Gate", {"x", "go"}, {"y"}}};
  static const op_spec on[] = {{"OnTrigger", {""}, {"t"}}};
  static const op_spec ok[] = {{"OnTrigger", {"go"}, {"t"}}};
  fn_spec fns[] = {{"G", {"x", "go"}, {"y"}, OPS(gate)}, {"O", {"go"}, {"t"}, OPS(on)}, {"K", {"go"}, {"t"}, OPS(ok)}};
  bb_node *n = node_for(fns, 3, 7);
  if (!n) return;
  bb_val *x = bytes("payload"), *go = bb_val_trigger(NULL);
  bb_named_value iv[2] = {{"x", x}, {"go", go}};
  CHECK(bb_node_invoke(n, "G", iv, 1, 1, NULL) == 0); /* the value alone waits for the trigger */
  run r = poll_at(n, 1);
  CHECK(!event(r, "y"));
  CHECK(bb_node_invoke(n, "G", iv, 2, 2, NULL) == 0);
  r = poll_at(n, 2);
  CHECK(is_bytes(event(r, "y"), "payload"));
  r = invoke(n, "O", NULL, NULL, 3);
  CHECK(strcmp(failure(r), "missing_input") == 0 && !event(r, "t"));
  r = invoke(n, "K", NULL, NULL, 4);
  CHECK(event(r, "t") && bb_val_kind_of(event(r, "t")) == BB_VAL_TRIGGER);
  bb_val_release(x);
  bb_val_release(go);
  expect_drained(n);
  bb_node_free(n);
}

static void test_event_source_lifecycle_and_correlate(void) {
  static const op_spec ops[] = {{"EventSource", {NULL}, {"ev"}, "kind", "data_loaded"},
                                {"LifecyclePhase", {NULL}, {"ph"}, "phase", "start"},
                                {"CorrelateTag", {"go"}, {"c1"}},
                                {"CorrelateTag", {"go"}, {"c2"}}};
  fn_spec fn = {"T", {"go"}, {"ev", "ph", "c1", "c2"}, OPS(ops)};
  bb_node *n = node_for(&fn, 1, 7);
  if (!n) return;
  uint64_t next = n->next_wire_req;
  run r = invoke(n, "T", NULL, NULL, 1);
  CHECK(events(r, "ev") == 1 && bb_val_kind_of(event(r, "ev")) == BB_VAL_TRIGGER);
  CHECK(events(r, "ph") == 1 && bb_val_kind_of(event(r, "ph")) == BB_VAL_TRIGGER);
  const bb_val *c1 = event(r, "c1"), *c2 = event(r, "c2");
  CHECK(c1 && c2 && bb_val_kind_of(c1) == BB_VAL_CORRELATION && bb_val_kind_of(c2) == BB_VAL_CORRELATION);
  if (c1 && c2) CHECK(bb_val_as_u64(c1) != bb_val_as_u64(c2) && bb_val_as_u64(c1) >= next && bb_val_as_u64(c2) >= next);
  CHECK_EQ_INT(n->next_wire_req, next + 2); /* minted from the wire's request counter */
  expect_drained(n);
  bb_node_free(n);
}

/* ---- telemetry ----------------------------------------------------------------------------- */

static void test_app_events_and_metrics(void) {
  static const op_spec notify[] = {{"AppNotify", {"go"}, {NULL}, "name", "round.done"}};
  static const op_spec emit[] = {{"AppEmit", {"x"}, {NULL}, "name", "progress"}};
  static const op_spec bad1[] = {{"AppEmit", {"x"}, {NULL}, "name", "bb.internal"}};
  static const op_spec bad2[] = {{"AppNotify", {"go"}, {NULL}, "name", "ai.bytesandbrains.x"}};
  static const op_spec metric[] = {{"IncrMetric", {"go"}, {NULL}, "name", "rounds", "delta", 5},
                                   {"IncrMetric", {"go"}, {NULL}, "name", "ticks"}};
  fn_spec fns[] = {{"N", {"go"}, {NULL}, OPS(notify)}, {"E", {"x"}, {NULL}, OPS(emit)}, {"B1", {"x"}, {NULL}, OPS(bad1)},
                   {"B2", {"go"}, {NULL}, OPS(bad2)},  {"M", {"go"}, {NULL}, OPS(metric)}};
  bb_node *n = node_for(fns, 5, 7);
  if (!n) return;
  run r = invoke(n, "N", NULL, NULL, 1);
  const bb_val *marker = event(r, "round.done");
  CHECK(marker && bb_val_kind_of(marker) == BB_VAL_BYTES && bb_val_count(marker) == 0);
  bb_val *x = bytes("42%");
  r = invoke(n, "E", "x", x, 2);
  CHECK(is_bytes(event(r, "progress"), "42%"));
  r = invoke(n, "B1", "x", x, 3);
  CHECK(strcmp(failure(r), "reserved_topic_prefix") == 0 && !event(r, "bb.internal"));
  r = invoke(n, "B2", NULL, NULL, 4);
  CHECK(strcmp(failure(r), "reserved_topic_prefix") == 0);
  invoke(n, "M", NULL, NULL, 5);
  invoke(n, "M", NULL, NULL, 6);
  CHECK_EQ_INT(bb_node_counter(n, "rounds"), 10);
  CHECK_EQ_INT(bb_node_counter(n, "ticks"), 2);
  bb_val_release(x);
  expect_drained(n);
  bb_node_free(n);
}

/* ---- bundles and the address book ------------------------------------------------------------ */

static void test_bundle_unbundle(void) {
  static const op_spec ok[] = {{BB_DOMAIN_COMPOSITE "::Bundle", {"x", "go"}, {"b"}},
                               {BB_DOMAIN_COMPOSITE "::Unbundle", {"b"}, {"c0", "c1"}, NULL, NULL,
                                BB_ATTR_CHILD_COUNT, 2}};
  static const op_spec wrong[] = {{BB_DOMAIN_COMPOSITE "::Bundle", {"x", "go"}, {"b"}},
                                  {BB_DOMAIN_COMPOSITE "::Unbundle", {"b"}, {"c0"}, NULL, NULL, BB_ATTR_CHILD_COUNT, 3}};
  static const op_spec flat[] = {{BB_DOMAIN_COMPOSITE "::Unbundle", {"x"}, {"c0"}}};
  fn_spec fns[] = {{"OK", {"x", "go"}, {"c0", "c1"}, OPS(ok)},
                   {"W", {"x", "go"}, {"c0"}, OPS(wrong)},
                   {"F", {"x"}, {"c0"}, OPS(flat)}};
  bb_node *n = node_for(fns, 3, 7);
  if (!n) return;
  bb_val *x = bytes("child"), *go = bb_val_trigger(NULL);
  bb_named_value iv[2] = {{"x", x}, {"go", go}};
  CHECK(bb_node_invoke(n, "OK", iv, 2, 1, NULL) == 0);
  run r = poll_at(n, 1);
  CHECK(is_bytes(event(r, "c0"), "child") && event(r, "c1") && bb_val_kind_of(event(r, "c1")) == BB_VAL_TRIGGER);
  CHECK(bb_node_invoke(n, "W", iv, 2, 2, NULL) == 0);
  r = poll_at(n, 2);
  CHECK(strcmp(failure(r), "unbundle_child_count_mismatch") == 0 && !event(r, "c0"));
  r = invoke(n, "F", "x", x, 3);
  CHECK(strcmp(failure(r), "expected_composite") == 0);
  bb_val_release(x);
  bb_val_release(go);
  expect_drained(n);
  bb_node_free(n);
}

static void test_address_book_insert_lookup_miss(void) {
  static const op_spec ins[] = {{BB_DOMAIN_ADDRESS_BOOK "::Insert", {"peer", "addr"}}};
  static const op_spec look[] = {{BB_DOMAIN_ADDRESS_BOOK "::Lookup", {"peer"}, {"addrs"}}};
  fn_spec fns[] = {{"I", {"peer", "addr"}, {NULL}, OPS(ins)}, {"L", {"peer"}, {"addrs"}, OPS(look)}};
  bb_node *n = node_for(fns, 2, 7);
  if (!n) return;
  bb_peer_id p = bb_peer_id_from_u64(9), q = bb_peer_id_from_u64(10);
  bb_address a = bb_address_p2p(&p);
  bb_val *pv = bb_val_peer(NULL, &p), *qv = bb_val_peer(NULL, &q), *av = bb_val_address(NULL, &a);
  run r = invoke(n, "L", "peer", pv, 1);
  CHECK(strcmp(failure(r), "address_book_lookup_miss") == 0);
  bb_named_value iv[2] = {{"peer", pv}, {"addr", av}};
  CHECK(bb_node_invoke(n, "I", iv, 2, 2, NULL) == 0);
  r = poll_at(n, 2);
  CHECK(!*failure(r));
  r = invoke(n, "L", "peer", pv, 3);
  const bb_val *got = event(r, "addrs");
  CHECK(got && bb_val_kind_of(got) == BB_VAL_ADDRESSES && bb_val_count(got) == 1);
  r = invoke(n, "L", "peer", qv, 4);
  CHECK(strcmp(failure(r), "address_book_lookup_miss") == 0);
  r = invoke(n, "L", "peer", av, 5); /* an address where a peer id belongs */
  CHECK(strcmp(failure(r), "expected_peer_id") == 0);
  bb_val_release(pv);
  bb_val_release(qv);
  bb_val_release(av);
  expect_drained(n);
  bb_node_free(n);
}

/* ---- bootstrap commands --------------------------------------------------------------------- */

static void test_bootstrap_output_parks_until_completed(void) {
  static const op_spec ops[] = {{"BootstrapDispatch", {"go"}, {"cmd"}},
                                {"BootstrapOutput", {"cmd"}, {"done"}},
                                {"Clock", {"done"}, {"at"}}};
  static const op_spec given[] = {{"BootstrapOutput", {"c"}, {"done"}}};
  static const op_spec missing[] = {{"BootstrapOutput", {""}, {"done"}}};
  fn_spec fns[] = {{"T", {"go"}, {"cmd", "at"}, OPS(ops)},
                   {"G", {"c"}, {"done"}, OPS(given)},
                   {"M", {"go"}, {"done"}, OPS(missing)}};
  bb_node *n = node_for(fns, 3, 7);
  if (!n) return;
  run r = invoke(n, "T", NULL, NULL, 10);
  const bb_val *cmd = event(r, "cmd");
  CHECK(cmd && bb_val_kind_of(cmd) == BB_VAL_COMMAND_ID && !event(r, "at"));
  uint64_t id = cmd ? bb_val_as_u64(cmd) : 0;
  bb_node_stats st;
  bb_node_stats_get(n, &st);
  CHECK_EQ_INT(st.pending_async, 1);
  /* the same command cannot be awaited twice, nor one never minted, nor another kind */
  bb_val *again = bb_val_u64(NULL, BB_VAL_COMMAND_ID, id), *unminted = bb_val_u64(NULL, BB_VAL_COMMAND_ID, id + 1000),
         *wrong = bb_val_u64(NULL, BB_VAL_U64, id);
  CHECK(strcmp(failure(invoke(n, "G", "c", again, 11)), "command_in_use") == 0);
  CHECK(strcmp(failure(invoke(n, "G", "c", unminted, 12)), "unknown_command") == 0);
  r = invoke(n, "G", "c", wrong, 13);
  CHECK(strcmp(failure(r), "expected_command_id") == 0 && strstr(failure_detail(r), "BootstrapOutput"));
  r = invoke(n, "M", NULL, NULL, 14);
  CHECK(strcmp(failure(r), "missing_input") == 0 && strstr(failure_detail(r), "missing `cmd`"));
  r = poll_at(n, 20);
  CHECK(!event(r, "at")); /* still parked */
  bb_val *t = bb_val_trigger(NULL);
  CHECK(bb_node_complete(n, id, &t, 1, NULL) == 0); /* the node takes its own reference */
  bb_val_release(t);
  r = poll_at(n, 30);
  CHECK(event(r, "at") && bb_val_as_u64(event(r, "at")) == 30);
  bb_val_release(again);
  bb_val_release(unminted);
  bb_val_release(wrong);
  expect_drained(n);
  bb_node_free(n);
}

int main(void) {
  RUN(test_clock_and_rng);
  RUN(test_after_and_sleep_park_until_due);
  RUN(test_interval_reruns_dependents);
  RUN(test_deadline_match_latches_per_execution);
  RUN(test_deadline_match_memory_stays_flat);
  RUN(test_limit_acquire_release);
  RUN(test_serialize_round_trip);
  RUN(test_serialize_evicts_the_oldest);
  RUN(test_hold_round_trip);
  RUN(test_record_ring);
  RUN(test_stores_keep_to_the_byte_budget);
  RUN(test_any_latches_per_group);
  RUN(test_gate_and_on_trigger);
  RUN(test_event_source_lifecycle_and_correlate);
  RUN(test_app_events_and_metrics);
  RUN(test_bundle_unbundle);
  RUN(test_address_book_insert_lookup_miss);
  RUN(test_bootstrap_output_parks_until_completed);
  return bb_test_finish();
}
