/* The engine: function calls, fire-once, asynchronous
 * completions and failures, every cap and budget, peers that cannot be reached or are
 * blocked, deadlines, determinism, and memory that stays flat under load. Artifacts are
 * built as IR (tests/runtime/rtir.h). */
#include "failalloc.h"
#include "rtir.h"
#include "rttest.h"

/* the node tables below leave the optional fields out */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define DEST(value, site) "ai.bytesandbrains.dest_site_name." value, site

/* ---- an asynchronous model: Forward answers later ------------------------------------- */

static uint64_t parked[8];
static size_t n_parked;

static int async_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  (void)self;
  parked[n_parked++ % 8] = bb_ctx_defer(ctx); /* the last 8 */
  (void)call;
  return BB_LATER;
}

static const bb_component_type ASYNC_MODEL = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "AsyncModel",
    .roles = 1u << BB_ROLE_MODEL,
    .create = stub_create,
    .destroy = stub_destroy,
    .invoke = async_invoke,
};

/* ---- the artifact ----------------------------------------------------------------------- */

static const ir_node_spec SUB[] = {{BB_DOMAIN_ROLE_MODEL "::Forward", {"a"}, {"b"}, "model"}};
/* y = Sub(Sub(x)), m = Sub(x) */
static const ir_node_spec CALLS[] = {{BB_DOMAIN_MODULE "::Sub", {"x"}, {"m"}}, {BB_DOMAIN_MODULE "::Sub", {"m"}, {"y"}}};
static const ir_node_spec PAIR[] = {{"Tee", {"x"}, {"a"}},
                                    {"Tee", {"x"}, {"b"}},
                                    {BB_DOMAIN_ROLE_AGGREGATOR "::Contribute", {"a", "b"}, {"done"}, "agg"}};
static const ir_node_spec ASYNC[] = {{BB_DOMAIN_ROLE_MODEL "::Forward", {"x"}, {"y"}, "amodel"},
                                     {"DeadlineCheck", {"y"}, {"ok"}, NULL, "deadline_ns", 100}};
static const ir_node_spec CHAIN[] = {{"Tee", {"x"}, {"a"}}, {"Tee", {"a"}, {"b"}}, {"Tee", {"b"}, {"c"}},
                                     {"Tee", {"c"}, {"d"}}, {"Tee", {"d"}, {"e"}}};
static const ir_node_spec TICK[] = {{"Interval", {"go"}, {"t"}, NULL, "period_ns", 100},
                                    {"Tee", {"t"}, {"a"}},
                                    {"Tee", {"a"}, {"b"}},
                                    {"Tee", {"b"}, {"o"}}};
static const ir_node_spec SEND[] = {
    {BB_DOMAIN_WIRE "::Send", {"v", "w", "peers"}, {"sent"}, .meta = {DEST("v", "r1"), DEST("w", "r2")}}};
static const ir_node_spec SEND_DEADLINE[] = {{BB_DOMAIN_WIRE "::Send", {"v", "w", "peers"}, {"sent"}, NULL,
                                              "deadline_ns", 100, .meta = {DEST("v", "r1"), DEST("w", "r2")}}};
static const ir_node_spec SEND_NO_OUTPUT[] = {{BB_DOMAIN_WIRE "::Send", {"v", "peers"}, {NULL}, .meta = {DEST("v", "r1")}}};
static const ir_node_spec RECV[] = {{BB_DOMAIN_WIRE "::Recv", {NULL}, {"r1", "from1"}},
                                    {BB_DOMAIN_WIRE "::Recv", {NULL}, {"r2", "from2"}},
                                    {BB_DOMAIN_ROLE_AGGREGATOR "::Contribute", {"r1", "r2"}, {"o"}, "agg"}};

/* Gossip: publish `msg` to `peers`, and relay what arrives to the same peers; arrivals
 * pass the dedup gate. */
static const ir_node_spec GOSSIP[] = {
    {BB_DOMAIN_WIRE "::Send", {"msg", "peers"}, {"published"}, .meta = {DEST("msg", "g")}},
    {BB_DOMAIN_WIRE "::Recv", {NULL}, {"g", "g_from"}},
    {"DedupGateRx", {"g"}, {"fresh"}},
    {"Tee", {"fresh"}, {"heard"}},
    {BB_DOMAIN_WIRE "::Send", {"fresh", "peers"}, {"relayed"}, .meta = {DEST("fresh", "g")}}};

static uint8_t *art;
static size_t art_len;

static void build_artifact(void) {
  bb_model *m = ir_model(BB_COMPILED_VERSION);
  ir_add_fn(m, &(ir_fn_spec){.name = "Sub", .in = {"a"}, .out = {"b"}, IR_NODES(SUB)});
  ir_add_fn(m, &(ir_fn_spec){.name = "Calls#1", .in = {"x"}, .out = {"y", "m"}, IR_NODES(CALLS)});
  ir_add_fn(m, &(ir_fn_spec){.name = "Pair#1", .in = {"x"}, .out = {"done"}, IR_NODES(PAIR)});
  ir_add_fn(m, &(ir_fn_spec){.name = "Async#1", .in = {"x"}, .out = {"ok"}, IR_NODES(ASYNC)});
  ir_add_fn(m, &(ir_fn_spec){.name = "Chain#1", .in = {"x"}, .out = {"e"}, IR_NODES(CHAIN)});
  ir_add_fn(m, &(ir_fn_spec){.name = "Tick#1", .in = {"go"}, .out = {"o"}, IR_NODES(TICK)});
  ir_add_fn(m, &(ir_fn_spec){.name = "Send#1", .in = {"v", "w", "peers"}, .out = {"sent"}, IR_NODES(SEND)});
  ir_add_fn(m, &(ir_fn_spec){.name = "SendD#1", .in = {"v", "w", "peers"}, IR_NODES(SEND_DEADLINE)});
  ir_add_fn(m, &(ir_fn_spec){.name = "Bare#1", .in = {"v", "peers"}, IR_NODES(SEND_NO_OUTPUT)});
  ir_add_fn(m, &(ir_fn_spec){.name = "Recv#1", .out = {"o"}, IR_NODES(RECV)});
  ir_add_fn(m, &(ir_fn_spec){.name = "Gossip#1", .in = {"msg", "peers"}, .out = {"heard"}, IR_NODES(GOSSIP)});
  ir_bind(m, "Calls#1", "model", "Model|StubModel|-1");
  ir_bind(m, "Pair#1", "agg", "Aggregator|StubAggregator|-1");
  ir_bind(m, "Recv#1", "agg", "Aggregator|StubAggregator|-1");
  ir_bind(m, "Async#1", "amodel", "Model|AsyncModel|-1");
  ir_declare_wires(m);
  art = ir_encode(m, &art_len);
}

static bb_registry *reg;

static bb_node *node(uint64_t id, const char *target, const bb_node_config *cfg) {
  const char *t[] = {target};
  return install_peer(art, art_len, id, t, 1, reg, cfg);
}

/* ---- helpers ----------------------------------------------------------------------------- */

static const bb_step *poll_at(bb_node *n, uint64_t now, size_t *count) {
  const bb_step *steps = NULL;
  bb_error err;
  *count = 0;
  CHECK_MSG(bb_node_poll(n, now, &steps, count, &err) == 0, "%s", err.message);
  return steps;
}

static const bb_step *find_step(const bb_step *s, size_t n, bb_step_kind kind) {
  for (size_t i = 0; i < n; i++)
    if (s[i].kind == kind) return &s[i];
  return NULL;
}

static const bb_val *event(const bb_step *s, size_t n, const char *topic) {
  for (size_t i = 0; i < n; i++)
    if (s[i].kind == BB_STEP_APP_EVENT && strcmp(s[i].topic, topic) == 0) return s[i].value;
  return NULL;
}

static bool tensor_is(const bb_val *v, const float *want, int64_t n) {
  if (!v || bb_val_kind_of(v) != BB_VAL_TENSOR || bb_val_as_tensor(v)->numel != n) return false;
  return memcmp(bb_tensor_data(bb_val_as_tensor(v)), want, (size_t)n * sizeof(float)) == 0;
}

static void invoke_x(bb_node *n, const char *module, uint64_t now) {
  bb_val *x = f32_val((const float[]){1, 2, 3}, 3);
  bb_named_value in = {"x", x};
  bb_error err;
  CHECK_MSG(bb_node_invoke(n, module, &in, 1, now, &err) == 0, "%s", err.message);
  bb_val_release(x);
}

static void add_peer(bb_node *n, uint64_t id) {
  bb_peer_id p = bb_peer_id_from_u64(id);
  bb_address a = p2p_address(&p);
  CHECK(bb_node_add_peer(n, &p, &a, NULL) == 0);
}

/* Runs `module` (a Send) on `a` with v, w and these peers. */
static void send_to(bb_node *a, const char *module, const uint64_t *ids, size_t n_ids, uint64_t now) {
  bb_peer_id peers[8];
  for (size_t i = 0; i < n_ids; i++) peers[i] = bb_peer_id_from_u64(ids[i]);
  bb_named_value in[3] = {{"v", f32_val((const float[]){1, 2}, 2)},
                          {"w", f32_val((const float[]){3}, 1)},
                          {"peers", bb_val_peers(NULL, peers, n_ids)}};
  bb_error err;
  CHECK_MSG(bb_node_invoke(a, module, in, 3, now, &err) == 0, "%s", err.message);
  for (int i = 0; i < 3; i++) bb_val_release(in[i].value);
}

/* One envelope from a fresh run of `module` on sender 1 to peer 2 (malloc'd copy). */
static uint8_t *envelope(const char *module, size_t *len) {
  bb_node *a = node(1, module, NULL);
  uint8_t *copy = NULL;
  *len = 0;
  if (!a) return NULL;
  add_peer(a, 2);
  send_to(a, module, (const uint64_t[]){2}, 1, 0);
  size_t count;
  const bb_step *s = poll_at(a, 0, &count);
  const bb_step *send = find_step(s, count, BB_STEP_SEND);
  CHECK(send != NULL);
  if (send) {
    copy = malloc(send->len);
    memcpy(copy, send->bytes, send->len);
    *len = send->len;
  }
  bb_node_free(a);
  return copy;
}

static void expect_idle(bb_node *n) {
  bb_node_stats st;
  bb_node_stats_get(n, &st);
  CHECK_EQ_INT(st.executions, 0);
  CHECK_EQ_INT(st.frontier, 0);
  CHECK_EQ_INT(st.ingress, 0);
  CHECK_EQ_INT(st.ingress_bytes, 0);
}

/* ---- function calls, fire-once ------------------------------------------------------------ */

static void test_function_call_splicing(void) {
  bb_node *n = node(1, "Calls", NULL);
  if (!n) return;
  invoke_x(n, "Calls", 0);
  size_t count;
  const bb_step *s = poll_at(n, 0, &count);
  CHECK_MSG(tensor_is(event(s, count, "m"), (const float[]){2, 4, 6}, 3), "the first call's output");
  CHECK_MSG(tensor_is(event(s, count, "y"), (const float[]){4, 8, 12}, 3), "the second call's output");
  CHECK_EQ_INT(count_steps(s, count, BB_STEP_APP_EVENT), 2);
  CHECK_EQ_INT(count_steps(s, count, BB_STEP_OP_FAILED), 0);
  stub_state *model = bb_node_component(n, "model", NULL);
  CHECK(model && model->calls == 2);
  expect_idle(n);
  bb_node_free(n);
}

static void test_fire_once(void) {
  bb_node *n = node(1, "Pair", NULL);
  if (!n) return;
  invoke_x(n, "Pair", 0);
  size_t count;
  const bb_step *s = poll_at(n, 0, &count);
  stub_state *agg = bb_node_component(n, "agg", NULL);
  CHECK(agg && agg->contributions == 1); /* two inputs, one firing */
  CHECK_EQ_INT(count_steps(s, count, BB_STEP_APP_EVENT), 1);
  expect_idle(n);
  bb_node_free(n);
}

/* ---- asynchronous operations --------------------------------------------------------------- */

static void test_async_complete_and_fail(void) {
  bb_node *n = node(1, "Async", NULL);
  if (!n) return;
  n_parked = 0;
  invoke_x(n, "Async", 1000);
  size_t count;
  const bb_step *s = poll_at(n, 1000, &count);
  CHECK_EQ_INT(count, 0);
  CHECK_EQ_INT(n_parked, 1);
  bb_node_stats st;
  bb_node_stats_get(n, &st);
  CHECK_EQ_INT(st.pending_async, 1);
  CHECK_EQ_INT(st.executions, 1);
  bb_val *y = f32_val((const float[]){9}, 1);
  bb_error err;
  CHECK(bb_node_complete(n, parked[0], &y, 1, &err) == 0);
  s = poll_at(n, 1050, &count);
  CHECK(event(s, count, "ok") != NULL); /* the consumer ran */
  expect_idle(n);
  /* completing it again is a completion for an unknown command: ignored */
  CHECK(bb_node_complete(n, parked[0], &y, 1, &err) == 0);
  CHECK(bb_node_complete(n, 999, &y, 1, &err) == 0);
  CHECK(bb_node_fail(n, 998, "nobody waits", &err) == 0);
  s = poll_at(n, 1060, &count);
  CHECK_EQ_INT(count, 0);
  CHECK_EQ_INT(bb_node_counter(n, "completions.unknown"), 3);
  bb_val_release(y);

  /* a failure: its detail is cut to 4096 bytes */
  invoke_x(n, "Async", 2000);
  poll_at(n, 2000, &count);
  CHECK_EQ_INT(n_parked, 2);
  char *detail = malloc(5001);
  memset(detail, 'x', 5000);
  detail[5000] = 0;
  CHECK(bb_node_fail(n, parked[1], detail, &err) == 0);
  s = poll_at(n, 2010, &count);
  const bb_step *f = find_step(s, count, BB_STEP_OP_FAILED);
  CHECK(f && strcmp(f->reason, "completion_failed") == 0 && strlen(f->detail) == 4096);
  CHECK(f && strstr(f->op, "Forward") != NULL);
  CHECK(!event(s, count, "ok"));
  expect_idle(n);
  /* ... at a UTF-8 boundary: a 2-byte character straddling the cut goes whole */
  invoke_x(n, "Async", 3000);
  poll_at(n, 3000, &count);
  memcpy(detail + 4095, "\xc3\xa9", 2);
  CHECK(bb_node_fail(n, parked[2], detail, &err) == 0);
  s = poll_at(n, 3010, &count);
  f = find_step(s, count, BB_STEP_OP_FAILED);
  CHECK(f && strlen(f->detail) == 4095);
  free(detail);
  bb_node_free(n);
}

/* Many operations parked and completed one after another, then a completion for a
 * command nobody waits for: the lookup must end (the table once filled up with removed
 * entries and probed forever). */
static void test_many_completions(void) {
  bb_node *n = node(1, "Async", NULL);
  if (!n) return;
  n_parked = 0;
  bb_val *y = f32_val((const float[]){1}, 1);
  size_t count;
  for (uint64_t k = 0; k < 2000; k++) {
    invoke_x(n, "Async", k);
    poll_at(n, k, &count);
    CHECK(bb_node_complete(n, parked[(n_parked - 1) % 8], &y, 1, NULL) == 0);
    const bb_step *s = poll_at(n, k, &count);
    CHECK(event(s, count, "ok") != NULL);
  }
  CHECK(bb_node_complete(n, 1u << 30, &y, 1, NULL) == 0);
  CHECK(bb_node_fail(n, (1u << 30) + 1, "late", NULL) == 0);
  poll_at(n, 3000, &count);
  CHECK_EQ_INT(count, 0);
  CHECK_EQ_INT(bb_node_counter(n, "completions.unknown"), 2);
  /* several parked at once, completed out of order */
  for (int k = 0; k < 6; k++) invoke_x(n, "Async", 4000);
  poll_at(n, 4000, &count);
  bb_node_stats st;
  bb_node_stats_get(n, &st);
  CHECK_EQ_INT(st.pending_async, 6);
  static const int order[] = {3, 0, 5, 1, 4, 2};
  for (int k = 0; k < 6; k++) CHECK(bb_node_complete(n, parked[(n_parked - 6 + (size_t)order[k]) % 8], &y, 1, NULL) == 0);
  const bb_step *s = poll_at(n, 4010, &count);
  CHECK_EQ_INT(count_steps(s, count, BB_STEP_APP_EVENT), 6);
  CHECK_EQ_INT(bb_node_counter(n, "completions.unknown"), 2);
  bb_val_release(y);
  expect_idle(n);
  bb_node_free(n);
}

static void test_pending_async_cap(void) {
  bb_node_config cfg = {.struct_size = sizeof cfg, .max_pending_async = 1};
  bb_node *n = node(1, "Async", &cfg);
  if (!n) return;
  n_parked = 0;
  invoke_x(n, "Async", 0);
  invoke_x(n, "Async", 0);
  size_t count;
  const bb_step *s = poll_at(n, 0, &count);
  CHECK_EQ_INT(n_parked, 1); /* the second never reached the component */
  const bb_step *f = find_step(s, count, BB_STEP_OP_FAILED);
  CHECK(f && strcmp(f->reason, "pending_async_limit") == 0);
  bb_val *y = f32_val((const float[]){1}, 1);
  CHECK(bb_node_complete(n, parked[0], &y, 1, NULL) == 0);
  bb_val_release(y);
  s = poll_at(n, 10, &count);
  CHECK(event(s, count, "ok") != NULL);
  expect_idle(n);
  bb_node_free(n);
}

static void test_deadline_check(void) {
  bb_node *n = node(1, "Async", NULL);
  if (!n) return;
  n_parked = 0;
  bb_val *y = f32_val((const float[]){1}, 1);
  /* the deadline counts from the execution's start, not from the clock's zero */
  invoke_x(n, "Async", 1000000);
  size_t count;
  poll_at(n, 1000000, &count);
  CHECK(bb_node_complete(n, parked[0], &y, 1, NULL) == 0);
  const bb_step *s = poll_at(n, 1000099, &count);
  CHECK(event(s, count, "ok") != NULL);
  CHECK(!find_step(s, count, BB_STEP_OP_FAILED));
  invoke_x(n, "Async", 2000000);
  poll_at(n, 2000000, &count);
  CHECK(bb_node_complete(n, parked[1], &y, 1, NULL) == 0);
  s = poll_at(n, 2000100, &count);
  const bb_step *f = find_step(s, count, BB_STEP_OP_FAILED);
  CHECK(f && strcmp(f->reason, "deadline_exceeded") == 0 && strstr(f->op, "DeadlineCheck"));
  CHECK(!event(s, count, "ok"));
  bb_val_release(y);
  expect_idle(n);
  bb_node_free(n);
}

/* ---- budgets and caps ------------------------------------------------------------------- */

static void test_cycle_budget(void) {
  bb_node_config cfg = {.struct_size = sizeof cfg, .cycle_op_budget = 2};
  bb_node *n = node(1, "Chain", &cfg);
  if (!n) return;
  invoke_x(n, "Chain", 0);
  size_t count;
  for (int round = 0; round < 2; round++) {
    const bb_step *s = poll_at(n, 0, &count);
    const bb_step *b = find_step(s, count, BB_STEP_CYCLE_BUDGET_EXCEEDED);
    CHECK(b && b->count == 2);
    CHECK(!event(s, count, "e"));
    CHECK(bb_node_has_work(n));
    CHECK(bb_node_expiry(n) == 0);
  }
  const bb_step *s = poll_at(n, 0, &count);
  CHECK(tensor_is(event(s, count, "e"), (const float[]){1, 2, 3}, 3)); /* the fifth op ran */
  CHECK(!find_step(s, count, BB_STEP_CYCLE_BUDGET_EXCEEDED));
  CHECK(!bb_node_has_work(n));
  expect_idle(n);
  bb_node_free(n);
}

/* An Interval tick while ops downstream of it still wait in the frontier (the cycle
 * budget ran out): the tick re-runs them once each, with the new values — a waiting
 * entry must neither fire with the inputs the tick cleared nor fire a second time. */
static void test_interval_tick_with_a_backlog(void) {
  bb_node_config cfg = {.struct_size = sizeof cfg, .cycle_op_budget = 1, .trace_ops = true};
  bb_node *n = node(1, "Tick", &cfg);
  if (!n) return;
  bb_val *go = bb_val_trigger(NULL);
  bb_named_value in = {"go", go};
  CHECK(bb_node_invoke(n, "Tick", &in, 1, 0, NULL) == 0);
  bb_val_release(go);
  size_t count, events = 0;
  /* one poll per period: one op per poll, so every tick finds the chain mid-way */
  for (uint64_t now = 0; now <= 1000; now += 100) {
    const bb_step *s = poll_at(n, now, &count);
    if (find_step(s, count, BB_STEP_OP_FAILED)) print_steps("tick", s, count);
    CHECK_EQ_INT(count_steps(s, count, BB_STEP_OP_FAILED), 0);
    events += count_steps(s, count, BB_STEP_APP_EVENT);
  }
  CHECK_EQ_INT(events, 0); /* each tick restarts the chain before it ends */
  /* polled often enough (four polls per period), each tick yields its output once */
  size_t ticks = 0;
  for (uint64_t now = 1100; now <= 2000; now += 25) {
    const bb_step *s = poll_at(n, now, &count);
    CHECK_EQ_INT(count_steps(s, count, BB_STEP_OP_FAILED), 0);
    events += count_steps(s, count, BB_STEP_APP_EVENT);
    for (size_t i = 0; i < count; i++) ticks += s[i].kind == BB_STEP_OP_COMPLETED && strstr(s[i].op, "Interval");
  }
  CHECK_MSG(ticks >= 8 && (events == ticks || events + 1 == ticks), "%zu ticks, %zu outputs", ticks, events);
  bb_node_free(n);
}

/* max_executions: an invoke that would start one more is dropped and reported, a function
 * call that would is an OpFailed; nothing stays charged. */
static void test_execution_cap(void) {
  bb_node_config cfg = {.struct_size = sizeof cfg, .max_executions = 1};
  bb_node *n = node(1, "Async", &cfg);
  if (n) {
    n_parked = 0;
    invoke_x(n, "Async", 0);
    invoke_x(n, "Async", 0);
    size_t count;
    const bb_step *s = poll_at(n, 0, &count);
    const bb_step *d = find_step(s, count, BB_STEP_INGRESS_DROPPED);
    CHECK(d && strcmp(d->reason, "execution_limit") == 0);
    CHECK_EQ_INT(n_parked, 1);
    bb_node_stats st;
    bb_node_stats_get(n, &st);
    CHECK_EQ_INT(st.executions, 1);
    CHECK(st.ingress_bytes > 0); /* the parked run's input */
    bb_val *y = f32_val((const float[]){1}, 1);
    CHECK(bb_node_complete(n, parked[0], &y, 1, NULL) == 0);
    bb_val_release(y);
    poll_at(n, 1, &count);
    expect_idle(n);
    bb_node_free(n);
  }
  n = node(1, "Calls", &cfg);
  if (n) {
    invoke_x(n, "Calls", 0);
    size_t count;
    const bb_step *s = poll_at(n, 0, &count);
    const bb_step *f = find_step(s, count, BB_STEP_OP_FAILED);
    CHECK(f && strcmp(f->reason, "execution_limit") == 0 && strstr(f->op, "Sub"));
    CHECK(!event(s, count, "y"));
    expect_idle(n);
    bb_node_free(n);
  }
}

/* The outbound queue drops its oldest envelopes to take new ones (each drop reported),
 * but never a part of one Send: a Send to more peers than the queue holds fails whole. */
static void test_outbound_cap(void) {
  bb_node_config cfg = {.struct_size = sizeof cfg, .max_outbound = 2};
  bb_node *a = node(1, "Send", &cfg);
  if (!a) return;
  for (uint64_t p = 2; p <= 4; p++) add_peer(a, p);
  send_to(a, "Send", (const uint64_t[]){2, 3, 4}, 3, 0);
  size_t count;
  const bb_step *s = poll_at(a, 0, &count);
  CHECK_EQ_INT(count_steps(s, count, BB_STEP_SEND), 0);
  const bb_step *f = find_step(s, count, BB_STEP_OP_FAILED);
  CHECK(f && strcmp(f->reason, "outbound_limit") == 0);
  CHECK_MSG(f && strstr(f->detail, "wire.Send to 3 peers") && strstr(f->detail, "max_outbound 2"), "%s",
            f ? f->detail : "");
  CHECK_EQ_INT(bb_node_counter(a, "send.refused_fanout"), 1);

  /* two Sends of two in one poll: the second pushes the first one's envelopes out */
  send_to(a, "Send", (const uint64_t[]){2, 3}, 2, 0);
  send_to(a, "Send", (const uint64_t[]){3, 4}, 2, 0);
  s = poll_at(a, 0, &count);
  CHECK_EQ_INT(count_steps(s, count, BB_STEP_SEND), 2);
  const bb_step *send = find_step(s, count, BB_STEP_SEND);
  bb_peer_id third = bb_peer_id_from_u64(3);
  CHECK(send && bb_peer_id_equal(&send->peer, &third)); /* the oldest are dropped */
  const bb_step *d = find_step(s, count, BB_STEP_OUTBOUND_DROPPED);
  CHECK(d && d->count == 2);
  CHECK_EQ_INT(bb_node_counter(a, "outbound.dropped"), 2);
  bb_node_free(a);
}

/* By default a broadcast to as many peers as the address book holds fits the outbound
 * queue: 16,000 clients get one envelope each from one Send in one poll. */
static void test_broadcast_to_16000_peers(void) {
  bb_node *a = node(1, "Send", NULL);
  if (!a) return;
  enum { N = 16000 };
  bb_peer_id *peers = malloc(N * sizeof *peers);
  for (uint64_t i = 0; i < N; i++) {
    peers[i] = bb_peer_id_from_u64(i + 2);
    bb_address addr = p2p_address(&peers[i]);
    CHECK(bb_node_add_peer(a, &peers[i], &addr, NULL) == 0);
  }
  bb_named_value in[3] = {{"v", f32_val((const float[]){1, 2}, 2)},
                          {"w", f32_val((const float[]){3}, 1)},
                          {"peers", bb_val_peers(NULL, peers, N)}};
  bb_error err;
  CHECK_MSG(bb_node_invoke(a, "Send", in, 3, 0, &err) == 0, "%s", err.message);
  for (int i = 0; i < 3; i++) bb_val_release(in[i].value);
  size_t count;
  const bb_step *s = poll_at(a, 0, &count);
  CHECK_EQ_INT(count_steps(s, count, BB_STEP_SEND), N);
  CHECK(!find_step(s, count, BB_STEP_OUTBOUND_DROPPED) && !find_step(s, count, BB_STEP_OP_FAILED));
  CHECK_EQ_INT(bb_node_counter(a, "outbound.dropped"), 0);
  free(peers);
  bb_node_free(a);
}

static void test_ingress_caps(void) {
  size_t len;
  uint8_t *env = envelope("Send", &len);
  if (!env) return;
  bb_peer_id from = bb_peer_id_from_u64(1);
  bb_node_config cfg = {.struct_size = sizeof cfg, .max_ingress_events = 2};
  bb_node *b = node(2, "Recv", &cfg);
  bb_error err;
  if (b) {
    CHECK(bb_node_deliver(b, &from, env, len, 0, &err) == 0);
    CHECK(bb_node_deliver(b, &from, env, len, 0, &err) == 0);
    CHECK(bb_node_deliver(b, &from, env, len, 0, &err) == BB_ERR_LIMIT);
    size_t count;
    poll_at(b, 0, &count);
    stub_state *agg = bb_node_component(b, "agg", NULL);
    CHECK(agg && agg->contributions == 2);
    CHECK(bb_node_deliver(b, &from, env, len, 0, &err) == 0); /* room again */
    poll_at(b, 0, &count);
    expect_idle(b);
    bb_node_free(b);
  }
  /* a budget smaller than one payload: each data fill is refused */
  cfg = (bb_node_config){.struct_size = sizeof cfg, .ingress_byte_budget = 8};
  b = node(2, "Recv", &cfg);
  if (b) {
    CHECK(bb_node_deliver(b, &from, env, len, 0, &err) == 0);
    size_t count;
    const bb_step *s = poll_at(b, 0, &count);
    CHECK_EQ_INT(count_steps(s, count, BB_STEP_WIRE_RECEIVE_FAILED), 2);
    const bb_step *f = find_step(s, count, BB_STEP_WIRE_RECEIVE_FAILED);
    CHECK(f && strcmp(f->reason, "budget_exceeded") == 0 && f->fill_index == 0 && f->has_peer);
    stub_state *agg = bb_node_component(b, "agg", NULL);
    CHECK(agg && agg->contributions == 0);
    expect_idle(b);
    bb_node_free(b);
  }
  free(env);
}

/* Two fills of one envelope landing in one graph share one execution, so an op reading
 * both fires (once), and knows its source. */
static void test_fills_share_an_execution(void) {
  size_t len;
  uint8_t *env = envelope("Send", &len);
  bb_node *b = env ? node(2, "Recv", NULL) : NULL;
  if (b) {
    bb_peer_id from = bb_peer_id_from_u64(1);
    CHECK(bb_node_deliver(b, &from, env, len, 0, NULL) == 0);
    size_t count;
    const bb_step *s = poll_at(b, 0, &count);
    CHECK(event(s, count, "o") != NULL);
    stub_state *agg = bb_node_component(b, "agg", NULL);
    CHECK(agg && agg->contributions == 1 && agg->had_source && bb_peer_id_equal(&agg->last_source, &from));
    CHECK(agg && agg->last_len == 2 && agg->last[0] == 1 && agg->last[1] == 2);
    expect_idle(b);
    bb_node_free(b);
  }
  free(env);
}

/* The host API refuses what it must, with nothing queued: unknown modules and inputs,
 * too many inputs, an oversize input, an exhausted byte budget. A bound input starts every
 * run; a value given to the invoke takes precedence. */
static void test_host_api(void) {
  bb_node_config cfg = {.struct_size = sizeof cfg, .max_app_event_bytes = 64, .ingress_byte_budget = 100};
  bb_node *n = node(1, "Chain", &cfg);
  if (!n) return;
  bb_val *x = f32_val((const float[]){1}, 1);
  bb_named_value in = {"x", x}, other = {"nope", x};
  CHECK(bb_node_invoke(n, "Nope", &in, 1, 0, NULL) == BB_ERR_NOT_FOUND);
  CHECK(bb_node_invoke(n, "Chain", &other, 1, 0, NULL) == BB_ERR_NOT_FOUND);
  bb_named_value many[101];
  for (int i = 0; i < 101; i++) many[i] = in;
  CHECK(bb_node_invoke(n, "Chain", many, 101, 0, NULL) == BB_ERR_LIMIT);
  uint8_t big[65] = {0};
  CHECK(bb_node_deliver_event(n, "Chain", "x", big, sizeof big, 0, NULL) == BB_ERR_LIMIT);
  CHECK(bb_node_deliver_event(n, "Chain", "x", big, 40, 0, NULL) == 0);
  CHECK(bb_node_deliver_event(n, "Chain", "x", big, 40, 0, NULL) == 0);
  CHECK(bb_node_deliver_event(n, "Chain", "x", big, 40, 0, NULL) == BB_ERR_LIMIT); /* 120 > 100 bytes */
  bb_node_stats st;
  bb_node_stats_get(n, &st);
  CHECK_EQ_INT(st.ingress, 2);
  size_t count;
  const bb_step *s = poll_at(n, 0, &count);
  CHECK_EQ_INT(count_steps(s, count, BB_STEP_APP_EVENT), 2);
  expect_idle(n);
  /* bound inputs */
  CHECK(bb_node_bind_input(n, "Chain", "nope", x, NULL) == BB_ERR_NOT_FOUND);
  CHECK(bb_node_bind_input(n, "Nope", "x", x, NULL) == BB_ERR_NOT_FOUND);
  CHECK(bb_node_bind_input(n, "Chain", "x", x, NULL) == 0);
  CHECK(bb_node_invoke(n, "Chain", NULL, 0, 1, NULL) == 0);
  bb_val *y = f32_val((const float[]){5, 6}, 2);
  bb_named_value iy = {"x", y};
  CHECK(bb_node_invoke(n, "Chain", &iy, 1, 1, NULL) == 0);
  s = poll_at(n, 1, &count);
  CHECK_EQ_INT(count_steps(s, count, BB_STEP_APP_EVENT), 2);
  if (count == 2) {
    CHECK(tensor_is(s[0].value, (const float[]){1}, 1));
    CHECK(tensor_is(s[1].value, (const float[]){5, 6}, 2));
  }
  CHECK(bb_node_bind_input(n, "Chain", "x", NULL, NULL) == 0); /* unbound again */
  CHECK(bb_node_invoke(n, "Chain", NULL, 0, 2, NULL) == 0);
  s = poll_at(n, 2, &count);
  CHECK_EQ_INT(count, 0);
  bb_val_release(x);
  bb_val_release(y);
  expect_idle(n);
  bb_node_free(n);
}

/* ---- peers ------------------------------------------------------------------------------- */

static void test_unknown_peer_and_fan_out(void) {
  bb_node *a = node(1, "Send", NULL);
  if (!a) return;
  add_peer(a, 2);
  add_peer(a, 4);
  send_to(a, "Send", (const uint64_t[]){2, 9, 4}, 3, 0);
  size_t count;
  const bb_step *s = poll_at(a, 0, &count);
  CHECK_EQ_INT(count_steps(s, count, BB_STEP_SEND), 2);
  CHECK_EQ_INT(count_steps(s, count, BB_STEP_PEER_RESOLVE_FAILED), 1);
  const bb_step *f = find_step(s, count, BB_STEP_PEER_RESOLVE_FAILED);
  bb_peer_id nine = bb_peer_id_from_u64(9);
  CHECK(f && f->has_peer && bb_peer_id_equal(&f->peer, &nine) && strstr(f->op, "Send"));
  CHECK(event(s, count, "sent") != NULL); /* the Send itself completed */
  /* a forgotten peer is an unknown one */
  bb_peer_id four = bb_peer_id_from_u64(4);
  bb_node_forget_peer(a, &four);
  send_to(a, "Send", (const uint64_t[]){2, 9, 4}, 3, 10);
  s = poll_at(a, 10, &count);
  CHECK_EQ_INT(count_steps(s, count, BB_STEP_SEND), 1);
  CHECK_EQ_INT(count_steps(s, count, BB_STEP_PEER_RESOLVE_FAILED), 2);
  /* nobody to send to: no envelope, no failure */
  send_to(a, "Send", NULL, 0, 20);
  s = poll_at(a, 20, &count);
  CHECK_EQ_INT(count_steps(s, count, BB_STEP_SEND), 0);
  CHECK_EQ_INT(count_steps(s, count, BB_STEP_PEER_RESOLVE_FAILED), 0);
  CHECK_EQ_INT(count_steps(s, count, BB_STEP_OP_FAILED), 0);
  CHECK(event(s, count, "sent") != NULL);
  expect_idle(a);
  bb_node_free(a);
}

static void test_send_without_outputs(void) {
  bb_node *a = node(1, "Bare", NULL);
  if (!a) return;
  add_peer(a, 2);
  bb_peer_id two = bb_peer_id_from_u64(2);
  bb_named_value in[2] = {{"v", f32_val((const float[]){5}, 1)}, {"peers", bb_val_peers(NULL, &two, 1)}};
  CHECK(bb_node_invoke(a, "Bare", in, 2, 0, NULL) == 0);
  size_t count;
  const bb_step *s = poll_at(a, 0, &count);
  CHECK_EQ_INT(count_steps(s, count, BB_STEP_SEND), 1);
  CHECK_EQ_INT(count_steps(s, count, BB_STEP_OP_FAILED), 0);
  for (int i = 0; i < 2; i++) bb_val_release(in[i].value);
  expect_idle(a);
  bb_node_free(a); /* (the leak checker sees any value the Send left behind) */
}

static void test_envelope_deadline_in_the_queue(void) {
  size_t len;
  uint8_t *env = envelope("SendD", &len);
  bb_node *b = env ? node(2, "Recv", NULL) : NULL;
  if (b) {
    bb_peer_id from = bb_peer_id_from_u64(1);
    stub_state *agg = bb_node_component(b, "agg", NULL);
    /* held 500 ns of its remaining 100 */
    CHECK(bb_node_deliver(b, &from, env, len, 1000, NULL) == 0);
    size_t count;
    const bb_step *s = poll_at(b, 1500, &count);
    const bb_step *d = find_step(s, count, BB_STEP_INGRESS_DROPPED);
    CHECK(d && strcmp(d->reason, "deadline_expired") == 0 && d->has_peer && bb_peer_id_equal(&d->peer, &from));
    CHECK(agg && agg->contributions == 0);
    CHECK_EQ_INT(bb_node_counter(b, "wire.expired"), 1);
    expect_idle(b);
    /* in time */
    CHECK(bb_node_deliver(b, &from, env, len, 2000, NULL) == 0);
    s = poll_at(b, 2100, &count);
    CHECK(!find_step(s, count, BB_STEP_INGRESS_DROPPED));
    CHECK(agg && agg->contributions == 1);
    expect_idle(b);
    bb_node_free(b);
  }
  free(env);
}

static void test_blocked_peer(void) {
  size_t len;
  uint8_t *env = envelope("Send", &len);
  bb_node *b = env ? node(2, "Recv", NULL) : NULL;
  if (b) {
    bb_peer_id from = bb_peer_id_from_u64(1);
    stub_state *agg = bb_node_component(b, "agg", NULL);
    CHECK(bb_node_block_peer(b, &from, true, NULL) == 0);
    CHECK(bb_node_deliver(b, &from, env, len, 0, NULL) == 0);
    size_t count;
    const bb_step *s = poll_at(b, 0, &count);
    const bb_step *d = find_step(s, count, BB_STEP_INGRESS_DROPPED);
    CHECK(d && strcmp(d->reason, "blocklisted") == 0 && bb_peer_id_equal(&d->peer, &from));
    CHECK(agg && agg->contributions == 0);
    expect_idle(b);
    CHECK(bb_node_block_peer(b, &from, false, NULL) == 0);
    CHECK(bb_node_deliver(b, &from, env, len, 0, NULL) == 0);
    poll_at(b, 0, &count);
    CHECK(agg && agg->contributions == 1);
    bb_node_free(b);
  }
  free(env);
}

/* The only SEND of a poll (copied), or NULL. */
static uint8_t *only_send(bb_node *n, uint64_t now, size_t *len) {
  size_t count;
  const bb_step *s = poll_at(n, now, &count);
  CHECK_EQ_INT(count_steps(s, count, BB_STEP_SEND), 1);
  const bb_step *send = find_step(s, count, BB_STEP_SEND);
  if (!send) return NULL;
  uint8_t *copy = malloc(send->len);
  memcpy(copy, send->bytes, send->len);
  *len = send->len;
  return copy;
}

/* X publishes its own message to B, then relays A's: the relay carries A's request id
 * forward, X's own message a request id X minted — both 1. B's dedup gate (keyed by
 * sender, request id and site) must still tell them apart; a replay of the relay is
 * still caught. */
static void test_relay_and_own_message_are_distinct(void) {
  bb_node *a = node(1, "Gossip", NULL), *x = node(2, "Gossip", NULL), *b = node(3, "Gossip", NULL);
  bb_peer_id pa = bb_peer_id_from_u64(1), px = bb_peer_id_from_u64(2), pb = bb_peer_id_from_u64(3);
  if (a && x && b) {
    add_peer(a, 2);
    add_peer(x, 3);
    bb_val *to_x = bb_val_peers(NULL, &px, 1), *to_b = bb_val_peers(NULL, &pb, 1);
    CHECK(bb_node_bind_input(x, "Gossip", "peers", to_b, NULL) == 0); /* X relays to B */
    bb_val *m1 = bb_val_bytes(NULL, (const uint8_t *)"from A", 6), *m2 = bb_val_bytes(NULL, (const uint8_t *)"from X", 6);
    bb_named_value in_a[2] = {{"msg", m1}, {"peers", to_x}}, in_x[1] = {{"msg", m2}};
    CHECK(bb_node_invoke(a, "Gossip", in_a, 2, 0, NULL) == 0);
    CHECK(bb_node_invoke(x, "Gossip", in_x, 1, 0, NULL) == 0);
    size_t len_a = 0, len_x = 0, len_relay = 0;
    uint8_t *env_a = only_send(a, 0, &len_a), *env_x = only_send(x, 0, &len_x), *relay = NULL;
    if (env_a) {
      CHECK(bb_node_deliver(x, &pa, env_a, len_a, 1, NULL) == 0);
      relay = only_send(x, 1, &len_relay);
    }
    size_t count;
    if (env_x && relay) {
      CHECK(bb_node_deliver(b, &px, env_x, len_x, 2, NULL) == 0);
      CHECK(bb_node_deliver(b, &px, relay, len_relay, 2, NULL) == 0);
      const bb_step *s = poll_at(b, 2, &count);
      if (find_step(s, count, BB_STEP_OP_FAILED)) print_steps("B", s, count);
      CHECK_EQ_INT(count_steps(s, count, BB_STEP_OP_FAILED), 0);
      CHECK_EQ_INT(count_steps(s, count, BB_STEP_APP_EVENT), 2); /* both heard */
      CHECK(bb_node_deliver(b, &px, relay, len_relay, 3, NULL) == 0); /* a replay */
      s = poll_at(b, 3, &count);
      const bb_step *f = find_step(s, count, BB_STEP_OP_FAILED);
      CHECK(f && strcmp(f->reason, "duplicate") == 0);
      CHECK_EQ_INT(count_steps(s, count, BB_STEP_APP_EVENT), 0);
    }
    free(env_a);
    free(env_x);
    free(relay);
    bb_val_release(to_x);
    bb_val_release(to_b);
    bb_val_release(m1);
    bb_val_release(m2);
  }
  bb_node_free(a);
  bb_node_free(x);
  bb_node_free(b);
}

/* A Send with 20 values, each to its own Recv: every one arrives (past 16 they were
 * silently left out of the envelope). */
static void test_send_with_many_fills(void) {
  bb_model *m = ir_model(BB_COMPILED_VERSION);
  bb_function *tx = bb_function_new(m, "Wide#1", BB_DOMAIN_MODULE);
  bb_function *rx = bb_function_new(m, "WideRx#1", BB_DOMAIN_MODULE);
  bb_ir_node *send = bb_ir_node_new(m, "Send", BB_DOMAIN_WIRE, "send");
  for (int i = 0; i < 20; i++) {
    char v[16], r[16], key[64];
    snprintf(v, sizeof v, "v%d", i);
    snprintf(r, sizeof r, "r%d", i);
    snprintf(key, sizeof key, "ai.bytesandbrains.dest_site_name.%s", v);
    bb_strlist_append(m, &tx->inputs, v);
    bb_strlist_append(m, &send->inputs, v);
    bb_kv_upsert(m, &send->metadata, key, r);
    bb_ir_node *recv = bb_ir_node_new(m, "Recv", BB_DOMAIN_WIRE, r);
    bb_strlist_append(m, &recv->outputs, r);
    bb_nodelist_append(m, &rx->nodes, recv);
    bb_strlist_append(m, &rx->outputs, r);
  }
  bb_strlist_append(m, &tx->inputs, "peers");
  bb_strlist_append(m, &send->inputs, "peers");
  bb_strlist_append(m, &send->outputs, "sent");
  bb_nodelist_append(m, &tx->nodes, send);
  bb_model_add_function(m, tx);
  bb_model_add_function(m, rx);
  size_t len;
  ir_declare_wires(m);
  uint8_t *wide = ir_encode(m, &len);
  const char *ta[] = {"Wide"}, *tb[] = {"WideRx"};
  bb_node *a = install_peer(wide, len, 1, ta, 1, reg, NULL), *b = install_peer(wide, len, 2, tb, 1, reg, NULL);
  if (a && b) {
    add_peer(a, 2);
    bb_peer_id two = bb_peer_id_from_u64(2), one = bb_peer_id_from_u64(1);
    bb_named_value in[21];
    char names[20][8];
    for (int i = 0; i < 20; i++) {
      snprintf(names[i], sizeof names[i], "v%d", i);
      in[i] = (bb_named_value){names[i], f32_val((const float[]){(float)i}, 1)};
    }
    in[20] = (bb_named_value){"peers", bb_val_peers(NULL, &two, 1)};
    CHECK(bb_node_invoke(a, "Wide", in, 21, 0, NULL) == 0);
    for (int i = 0; i < 21; i++) bb_val_release(in[i].value);
    size_t env_len = 0;
    uint8_t *env = only_send(a, 0, &env_len);
    if (env) {
      CHECK(bb_node_deliver(b, &one, env, env_len, 1, NULL) == 0);
      size_t count;
      const bb_step *s = poll_at(b, 1, &count);
      CHECK_EQ_INT(count_steps(s, count, BB_STEP_APP_EVENT), 20);
      CHECK(tensor_is(event(s, count, "r19"), (const float[]){19}, 1));
    }
    free(env);
  }
  bb_node_free(a);
  bb_node_free(b);
  free(wide);
}

/* ---- determinism, memory ---------------------------------------------------------------- */

static void test_determinism(void) {
  uint8_t *runs[2] = {NULL, NULL};
  size_t lens[2] = {0, 0};
  for (int r = 0; r < 2; r++) {
    bb_node_config cfg = {.struct_size = sizeof cfg, .seed = 42};
    bb_node *a = node(1, "Send", &cfg);
    if (!a) return;
    add_peer(a, 2);
    add_peer(a, 3);
    size_t total = 0;
    runs[r] = malloc(1 << 16);
    for (int k = 0; k < 3; k++) {
      send_to(a, "Send", (const uint64_t[]){3, 2}, 2, 100 * (uint64_t)k);
      size_t count;
      const bb_step *s = poll_at(a, 100 * (uint64_t)k, &count);
      for (size_t i = 0; i < count; i++)
        if (s[i].kind == BB_STEP_SEND && total + s[i].len + s[i].peer.len < (1 << 16)) {
          memcpy(runs[r] + total, s[i].peer.bytes, s[i].peer.len);
          total += s[i].peer.len;
          memcpy(runs[r] + total, s[i].bytes, s[i].len);
          total += s[i].len;
        }
    }
    lens[r] = total;
    bb_node_free(a);
  }
  CHECK(lens[0] > 0 && lens[0] == lens[1] && memcmp(runs[0], runs[1], lens[0]) == 0);
  free(runs[0]);
  free(runs[1]);
}

static void test_memory_stays_flat(void) {
  size_t len;
  uint8_t *env = envelope("Send", &len);
  bb_node *b = env ? node(2, "Recv", NULL) : NULL;
  if (b) {
    bb_peer_id from = bb_peer_id_from_u64(1);
    for (int i = 0; i < 10000; i++) {
      CHECK(bb_node_deliver(b, &from, env, len, (uint64_t)i, NULL) == 0);
      size_t count;
      const bb_step *s = poll_at(b, (uint64_t)i, &count);
      if (count_steps(s, count, BB_STEP_OP_FAILED) || count_steps(s, count, BB_STEP_WIRE_RECEIVE_FAILED))
        CHECK_MSG(false, "delivery %d failed", i);
    }
    stub_state *agg = bb_node_component(b, "agg", NULL);
    CHECK(agg && agg->contributions == 10000);
    expect_idle(b);
    bb_node_stats st;
    bb_node_stats_get(b, &st);
    CHECK_EQ_INT(st.pending_async, 0);
    CHECK_EQ_INT(st.timers, 0);
    CHECK_EQ_INT(st.outbound, 0);
    bb_node_free(b);
  }
  free(env);
}

/* An allocation failure at every allocation of a sending poll and of a receiving
 * delivery + poll: poll may say BB_ERR_NOMEM, but every step it hands out is whole (a
 * SEND has its peer and bytes) and nothing leaks. */
static void test_allocation_failures(void) {
  size_t env_len;
  uint8_t *env = envelope("Send", &env_len);
  if (!env) return;
  bool sender_done = false, receiver_done = false;
  for (long budget = 0; budget < 400 && !(sender_done && receiver_done); budget++) {
    failing f = {-1, 0};
    bb_allocator alloc = failing_allocator(&f);
    bb_peer_id self = bb_peer_id_from_u64(1), two = bb_peer_id_from_u64(2);
    bb_address addr = p2p_address(&self);
    const char *targets[] = {"Send", "Recv"};
    bb_install_args a = {.struct_size = sizeof a, .self = self, .addresses = &addr, .n_addresses = 1,
                         .artifact = art, .artifact_len = art_len, .targets = targets, .n_targets = 2,
                         .registry = reg, .alloc = &alloc};
    bb_node *n = NULL;
    CHECK(bb_install(&a, &n, NULL, NULL) == 0);
    if (!n) break;
    add_peer(n, 2);
    add_peer(n, 3);
    send_to(n, "Send", (const uint64_t[]){2, 3}, 2, 0);
    f.budget = budget;
    size_t count = 0;
    const bb_step *s = NULL;
    int rc = bb_node_poll(n, 0, &s, &count, NULL);
    CHECK(rc == 0 || rc == BB_ERR_NOMEM);
    for (size_t i = 0; i < count; i++)
      if (s[i].kind == BB_STEP_SEND) CHECK_MSG(s[i].bytes && s[i].len && s[i].has_peer, "budget %ld", budget);
    if (rc == 0 && count_steps(s, count, BB_STEP_SEND) == 2) sender_done = true;
    /* the receiving side */
    f.budget = -1;
    poll_at(n, 1, &count);
    f.budget = budget;
    rc = bb_node_deliver(n, &two, env, env_len, 2, NULL);
    CHECK(rc == 0 || rc == BB_ERR_NOMEM);
    rc = bb_node_poll(n, 2, &s, &count, NULL);
    CHECK(rc == 0 || rc == BB_ERR_NOMEM);
    stub_state *agg = bb_node_component(n, "agg", NULL);
    if (rc == 0 && agg && agg->contributions == 1) receiver_done = true;
    f.budget = -1;
    poll_at(n, 3, &count);
    bb_node_stats st;
    bb_node_stats_get(n, &st);
    CHECK_MSG(st.ingress_bytes == 0 && st.executions == 0, "budget %ld: %zu bytes, %zu executions held", budget,
              st.ingress_bytes, st.executions);
    bb_node_free(n);
    CHECK_MSG(f.live == 0, "budget %ld: %ld blocks leaked", budget, f.live);
  }
  CHECK(sender_done && receiver_done);
  free(env);
}

int main(void) {
  build_artifact();
  reg = stub_registry();
  CHECK(bb_registry_add(reg, &ASYNC_MODEL, NULL) == 0);
  RUN(test_function_call_splicing);
  RUN(test_fire_once);
  RUN(test_async_complete_and_fail);
  RUN(test_many_completions);
  RUN(test_pending_async_cap);
  RUN(test_deadline_check);
  RUN(test_cycle_budget);
  RUN(test_interval_tick_with_a_backlog);
  RUN(test_execution_cap);
  RUN(test_outbound_cap);
  RUN(test_broadcast_to_16000_peers);
  RUN(test_ingress_caps);
  RUN(test_fills_share_an_execution);
  RUN(test_host_api);
  RUN(test_unknown_peer_and_fan_out);
  RUN(test_send_without_outputs);
  RUN(test_envelope_deadline_in_the_queue);
  RUN(test_blocked_peer);
  RUN(test_relay_and_own_message_are_distinct);
  RUN(test_send_with_many_fills);
  RUN(test_determinism);
  RUN(test_memory_stays_flat);
  RUN(test_allocation_failures);
  bb_registry_free(reg);
  free(art);
  return bb_test_finish();
}
