/* What peers, hosts and time can do wrong, and how a node reports it —
 * asynchronous completions and failures, caps on every queue, deadlines, unknown peers,
 * blocked peers, install errors, bootstrap gating — plus determinism and flat memory. */
#include "programs/examples.h"
#include "rttest.h"

/* ---- an asynchronous model: Forward and Params answer later --------------------------- */

static uint64_t parked[16];
static size_t n_parked;

static int defer_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  if (strcmp(call->op_type, "Forward") == 0 || strcmp(call->op_type, "Params") == 0) {
    if (n_parked == 16) return bb_error_set(err, BB_ERR_LIMIT, "too many parked");
    parked[n_parked++] = bb_ctx_defer(ctx);
    return BB_LATER;
  }
  return stub_invoke(self, ctx, call, err);
}

static const bb_component_type DEFER_MODEL = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "StubModel",
    .roles = 1u << BB_ROLE_MODEL,
    .create = stub_create,
    .destroy = stub_destroy,
    .invoke = defer_invoke,
};

static int failing_create(const bb_component_init *init, void **self, bb_error *err) {
  (void)init;
  (void)self;
  return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "this aggregator refuses to exist");
}

static const bb_component_type FAILING_AGGREGATOR = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "StubAggregator",
    .roles = 1u << BB_ROLE_AGGREGATOR,
    .create = failing_create,
    .destroy = stub_destroy,
    .invoke = stub_invoke,
};

static bb_registry *registry_with(const bb_component_type *model, const bb_component_type *aggregator) {
  bb_registry *r = bb_registry_new(NULL);
  CHECK(!bb_registry_add(r, &STUB_LOADER, NULL) && !bb_registry_add(r, model, NULL));
  if (aggregator) CHECK(!bb_registry_add(r, aggregator, NULL));
  return r;
}

/* ---- helpers ----------------------------------------------------------------------------- */

static uint8_t *fednet;
static size_t fednet_len;

static const char *const SENDER[] = {"FedNetwork"};
static const char *const SINK[] = {"FedNetwork_sink_peers"};

static void add_p2p(bb_node *n, uint64_t id) {
  bb_peer_id p = bb_peer_id_from_u64(id);
  bb_address a = p2p_address(&p);
  CHECK(bb_node_add_peer(n, &p, &a, NULL) == 0);
}

/* Invokes the sender with these sink peers. */
static void invoke_sender(bb_node *a, const uint64_t *ids, size_t n, uint64_t now) {
  bb_peer_id peers[8];
  for (size_t i = 0; i < n; i++) peers[i] = bb_peer_id_from_u64(ids[i]);
  bb_val *v = bb_val_peers(NULL, peers, n);
  bb_named_value in = {"sink_peers", v};
  bb_error err;
  CHECK_MSG(bb_node_invoke(a, "FedNetwork", &in, 1, now, &err) == 0, "%s", err.message);
  bb_val_release(v);
}

static const bb_step *poll_at(bb_node *n, uint64_t now, size_t *count) {
  const bb_step *steps;
  bb_error err;
  CHECK_MSG(bb_node_poll(n, now, &steps, count, &err) == 0, "%s", err.message);
  return steps;
}

static const bb_step *find_step(const bb_step *s, size_t n, bb_step_kind kind) {
  for (size_t i = 0; i < n; i++)
    if (s[i].kind == kind) return &s[i];
  return NULL;
}

/* One envelope from a fresh sender run (copied out). */
static uint8_t *one_envelope(bb_node *a, uint64_t to, uint64_t now, size_t *len) {
  invoke_sender(a, &to, 1, now);
  size_t n;
  const bb_step *s = poll_at(a, now, &n);
  const bb_step *send = find_step(s, n, BB_STEP_SEND);
  CHECK(send != NULL);
  if (!send) return NULL;
  uint8_t *copy = malloc(send->len);
  memcpy(copy, send->bytes, send->len);
  *len = send->len;
  return copy;
}

/* ---- asynchronous completions --------------------------------------------------------------- */

static void test_async_complete_and_fail(void) {
  bb_registry *reg = registry_with(&DEFER_MODEL, &STUB_AGGREGATOR);
  bb_node_config cfg = {.struct_size = sizeof cfg};
  cfg.trace_ops = true;
  bb_node *a = install_peer(fednet, fednet_len, 1, SENDER, 1, reg, &cfg);
  if (!a) return bb_registry_free(reg);
  add_p2p(a, 2);
  n_parked = 0;
  uint64_t two = 2;
  invoke_sender(a, &two, 1, 0);
  size_t n;
  const bb_step *s = poll_at(a, 0, &n);
  CHECK(find_step(s, n, BB_STEP_ASYNC_SUSPENDED) != NULL);
  CHECK(!find_step(s, n, BB_STEP_SEND));
  CHECK_EQ_INT(n_parked, 1);
  /* an unknown command is ignored (and counted) */
  bb_error err;
  CHECK(bb_node_complete(a, 999999, NULL, 0, &err) == 0);
  s = poll_at(a, 1, &n);
  CHECK(!find_step(s, n, BB_STEP_OP_FAILED));
  CHECK(bb_node_counter(a, "completions.unknown") == 1);
  /* completing it runs what waited: the Send goes out */
  static const float y[3] = {5, 6, 7};
  bb_val *out = f32_val(y, 3);
  CHECK(bb_node_complete(a, parked[0], &out, 1, &err) == 0);
  bb_val_release(out);
  s = poll_at(a, 2, &n);
  CHECK(find_step(s, n, BB_STEP_SEND) != NULL);
  /* a failed completion fails the op, its detail cut to 4 KiB */
  invoke_sender(a, &two, 1, 3);
  poll_at(a, 3, &n);
  CHECK_EQ_INT(n_parked, 2);
  char detail[5000];
  memset(detail, 'x', sizeof detail - 1);
  detail[sizeof detail - 1] = 0;
  CHECK(bb_node_fail(a, parked[1], detail, &err) == 0);
  s = poll_at(a, 4, &n);
  const bb_step *f = find_step(s, n, BB_STEP_OP_FAILED);
  CHECK(f && strcmp(f->reason, "completion_failed") == 0 && strlen(f->detail) == 4096);
  CHECK(!find_step(s, n, BB_STEP_SEND));
  bb_node_stats st;
  bb_node_stats_get(a, &st);
  CHECK_EQ_INT(st.executions, 0);
  CHECK_EQ_INT(st.pending_async, 0);
  bb_node_free(a);
  bb_registry_free(reg);
}

static void test_pending_async_cap(void) {
  bb_registry *reg = registry_with(&DEFER_MODEL, &STUB_AGGREGATOR);
  bb_node_config cfg = {.struct_size = sizeof cfg};
  cfg.max_pending_async = 1;
  bb_node *a = install_peer(fednet, fednet_len, 1, SENDER, 1, reg, &cfg);
  if (!a) return bb_registry_free(reg);
  n_parked = 0;
  uint64_t two = 2;
  invoke_sender(a, &two, 1, 0);
  invoke_sender(a, &two, 1, 0);
  size_t n;
  const bb_step *s = poll_at(a, 0, &n);
  const bb_step *f = find_step(s, n, BB_STEP_OP_FAILED);
  CHECK(f && strcmp(f->reason, "pending_async_limit") == 0);
  CHECK_EQ_INT(n_parked, 1);
  bb_node_free(a); /* a parked op at teardown is released, not leaked */
  bb_registry_free(reg);
}

/* ---- deadlines ------------------------------------------------------------------------------- */

static void test_deadline_check_is_relative(void) {
  bb_registry *reg = registry_with(&DEFER_MODEL, &STUB_AGGREGATOR);
  bb_node *a = install_peer(fednet, fednet_len, 1, SENDER, 1, reg, NULL);
  if (!a) return bb_registry_free(reg);
  add_p2p(a, 2);
  n_parked = 0;
  uint64_t two = 2;
  /* started late on the clock: the 100 ms budget counts from the run's start */
  invoke_sender(a, &two, 1, 5000000000ull);
  size_t n;
  poll_at(a, 5000000000ull, &n);
  bb_val *out = f32_val((const float[]){1}, 1);
  bb_node_complete(a, parked[0], &out, 1, NULL);
  const bb_step *s = poll_at(a, 5000000000ull + 50000000, &n); /* 50 ms later: in time */
  CHECK(find_step(s, n, BB_STEP_SEND) != NULL);
  invoke_sender(a, &two, 1, 6000000000ull);
  poll_at(a, 6000000000ull, &n);
  bb_node_complete(a, parked[1], &out, 1, NULL);
  bb_val_release(out);
  s = poll_at(a, 6000000000ull + 150000000, &n); /* 150 ms later: too late */
  const bb_step *f = find_step(s, n, BB_STEP_OP_FAILED);
  CHECK(f && strcmp(f->reason, "deadline_exceeded") == 0);
  CHECK(!find_step(s, n, BB_STEP_SEND));
  bb_node_free(a);
  bb_registry_free(reg);
}

static void test_envelope_deadline_expires_in_the_queue(void) {
  bb_registry *reg = stub_registry();
  bb_node *a = install_peer(fednet, fednet_len, 1, SENDER, 1, reg, NULL);
  bb_node *b = install_peer(fednet, fednet_len, 2, SINK, 1, reg, NULL);
  if (a && b) {
    add_p2p(a, 2);
    size_t len = 0, n;
    uint8_t *env = one_envelope(a, 2, 0, &len);
    bb_peer_id pa = bb_peer_id_from_u64(1);
    CHECK(bb_node_deliver(b, &pa, env, len, 1000, NULL) == 0);
    const bb_step *s = poll_at(b, 1000 + 200000000, &n); /* held 200 ms, the budget was 100 */
    const bb_step *d = find_step(s, n, BB_STEP_INGRESS_DROPPED);
    CHECK(d && strcmp(d->reason, "deadline_expired") == 0);
    stub_state *agg = bb_node_component(b, "aggregator", NULL);
    CHECK(agg && agg->contributions == 0);
    free(env);
  }
  bb_node_free(a);
  bb_node_free(b);
  bb_registry_free(reg);
}

/* ---- peers ------------------------------------------------------------------------------------ */

static void test_unknown_peer_and_fan_out(void) {
  bb_registry *reg = stub_registry();
  bb_node *a = install_peer(fednet, fednet_len, 1, SENDER, 1, reg, NULL);
  if (!a) return bb_registry_free(reg);
  add_p2p(a, 2);
  add_p2p(a, 4);
  uint64_t ids[] = {2, 3, 4};
  invoke_sender(a, ids, 3, 0);
  size_t n;
  const bb_step *s = poll_at(a, 0, &n);
  CHECK_EQ_INT(count_steps(s, n, BB_STEP_SEND), 2);
  const bb_step *f = find_step(s, n, BB_STEP_PEER_RESOLVE_FAILED);
  uint64_t who = 0;
  CHECK(f && f->has_peer && bb_peer_id_as_u64(&f->peer, &who) && who == 3);
  /* an empty peer list sends nothing and is not a failure */
  invoke_sender(a, NULL, 0, 1);
  s = poll_at(a, 1, &n);
  CHECK_EQ_INT(n, 0);
  bb_node_free(a);
  bb_registry_free(reg);
}

static void test_blocked_peer(void) {
  bb_registry *reg = stub_registry();
  bb_node *a = install_peer(fednet, fednet_len, 1, SENDER, 1, reg, NULL);
  bb_node *b = install_peer(fednet, fednet_len, 2, SINK, 1, reg, NULL);
  if (a && b) {
    add_p2p(a, 2);
    size_t len = 0, n;
    uint8_t *env = one_envelope(a, 2, 0, &len);
    bb_peer_id pa = bb_peer_id_from_u64(1);
    CHECK(bb_node_block_peer(b, &pa, true, NULL) == 0);
    CHECK(bb_node_deliver(b, &pa, env, len, 10, NULL) == 0);
    const bb_step *s = poll_at(b, 10, &n);
    const bb_step *d = find_step(s, n, BB_STEP_INGRESS_DROPPED);
    CHECK(d && strcmp(d->reason, "blocklisted") == 0);
    CHECK(bb_node_block_peer(b, &pa, false, NULL) == 0);
    CHECK(bb_node_deliver(b, &pa, env, len, 20, NULL) == 0);
    s = poll_at(b, 20, &n);
    stub_state *agg = bb_node_component(b, "aggregator", NULL);
    CHECK(agg && agg->contributions == 1);
    free(env);
  }
  bb_node_free(a);
  bb_node_free(b);
  bb_registry_free(reg);
}

/* ---- caps --------------------------------------------------------------------------------------- */

static void test_caps(void) {
  bb_registry *reg = stub_registry();
  bb_node_config small = {.struct_size = sizeof small};
  small.max_outbound = 1;
  small.cycle_op_budget = 2;
  bb_node *a = install_peer(fednet, fednet_len, 1, SENDER, 1, reg, &small);
  bb_node_config tiny = {.struct_size = sizeof tiny};
  tiny.max_ingress_events = 2;
  tiny.ingress_byte_budget = 10;
  bb_envelope_caps caps = {.struct_size = sizeof caps, .max_total_bytes = 4096};
  tiny.envelope_caps = &caps;
  bb_node *b = install_peer(fednet, fednet_len, 2, SINK, 1, reg, &tiny);
  caps.max_total_bytes = 0; /* install copied the caps: the caller's struct is its own again */
  if (a && b) {
    add_p2p(a, 2);
    add_p2p(a, 3);
    uint64_t ids[] = {2, 3};
    invoke_sender(a, ids, 2, 0);
    size_t n, polls = 0, sends = 0, dropped = 0, budget = 0, refused = 0;
    const bb_step *s;
    do { /* a budget of 2 ops per poll: the work spreads over several polls */
      s = poll_at(a, 0, &n);
      sends += count_steps(s, n, BB_STEP_SEND);
      budget += count_steps(s, n, BB_STEP_CYCLE_BUDGET_EXCEEDED);
      const bb_step *d = find_step(s, n, BB_STEP_OUTBOUND_DROPPED);
      if (d) dropped += d->count;
      const bb_step *f = find_step(s, n, BB_STEP_OP_FAILED);
      refused += f && strcmp(f->reason, "outbound_limit") == 0;
    } while (n && ++polls < 20);
    CHECK(budget >= 1);
    /* two destinations, room for one: the Send fails whole rather than lose one */
    CHECK_EQ_INT(sends, 0);
    CHECK_EQ_INT(dropped, 0);
    CHECK_EQ_INT(refused, 1);

    bb_node_config loose = {.struct_size = sizeof loose};
    bb_node *a2 = install_peer(fednet, fednet_len, 1, SENDER, 1, reg, &loose);
    add_p2p(a2, 2);
    size_t len = 0;
    uint8_t *env = one_envelope(a2, 2, 0, &len);
    bb_peer_id pa = bb_peer_id_from_u64(1);
    bb_error err;
    /* over the byte budget: refused per fill, reported, nothing held */
    CHECK(bb_node_deliver(b, &pa, env, len, 1, &err) == 0);
    CHECK(bb_node_deliver(b, &pa, env, len, 1, &err) == 0);
    /* the ingress queue holds 2 events */
    CHECK(bb_node_deliver(b, &pa, env, len, 1, &err) == BB_ERR_LIMIT);
    CHECK(strstr(err.message, "ingress queue is full") != NULL);
    s = poll_at(b, 1, &n);
    const bb_step *w = find_step(s, n, BB_STEP_WIRE_RECEIVE_FAILED);
    CHECK(w && strcmp(w->reason, "budget_exceeded") == 0);
    bb_node_stats st;
    bb_node_stats_get(b, &st);
    CHECK_EQ_INT(st.ingress_bytes, 0);
    CHECK_EQ_INT(st.executions, 0);
    /* an envelope over the size cap is refused before parsing */
    uint8_t *big = calloc(1, 5000);
    CHECK(bb_node_deliver(b, &pa, big, 5000, 2, &err) == BB_ERR_LIMIT);
    CHECK(strstr(err.message, "too large") != NULL);
    free(big);
    free(env);
    bb_node_free(a2);
  }
  bb_node_free(a);
  bb_node_free(b);
  bb_registry_free(reg);
}

/* A config's envelope caps whose struct_size this library cannot read (left 0 by a caller
 * who zeroed the struct and set one cap, or from a newer header) stop install with a
 * reason, before the caps could be misread. */
static void test_envelope_caps_version(void) {
  bb_registry *reg = stub_registry();
  bb_envelope_caps unset, newer;
  memset(&unset, 0, sizeof unset);
  unset.max_total_bytes = 4096;
  newer = (bb_envelope_caps){.struct_size = sizeof newer + 8};
  const bb_envelope_caps *bad[] = {&unset, &newer};
  for (size_t i = 0; i < 2; i++) {
    bb_node_config cfg = {.struct_size = sizeof cfg, .envelope_caps = bad[i]};
    bb_install_args a = install_args(fednet, fednet_len, 2, SINK, 1, reg);
    a.config = &cfg;
    bb_node *n = NULL;
    bb_error err;
    bb_install_error_kind kind;
    CHECK_EQ_INT(bb_install(&a, &n, &kind, &err), BB_ERR_INVALID_ARGUMENT);
    CHECK(n == NULL && kind == BB_INSTALL_INVALID_ARGUMENT);
    CHECK(strstr(err.message, "config.envelope_caps has struct_size") != NULL);
  }
  bb_registry_free(reg);
}

/* ---- determinism and flat memory ------------------------------------------------------------------ */

static void test_determinism(void) {
  uint8_t *first = NULL;
  size_t first_len = 0;
  for (int run = 0; run < 2; run++) {
    bb_registry *reg = stub_registry();
    bb_node *a = install_peer(fednet, fednet_len, 1, SENDER, 1, reg, NULL);
    if (!a) return bb_registry_free(reg);
    add_p2p(a, 2);
    size_t len = 0;
    uint8_t *env = NULL;
    for (int i = 0; i < 3; i++) {
      free(env);
      env = one_envelope(a, 2, (uint64_t)i * 7, &len);
    }
    if (!run) {
      first = env;
      first_len = len;
    } else {
      CHECK(env && len == first_len && memcmp(env, first, len) == 0);
      free(env);
    }
    bb_node_free(a);
    bb_registry_free(reg);
  }
  free(first);
}

static void test_memory_stays_flat(void) {
  bb_registry *reg = stub_registry();
  bb_node *a = install_peer(fednet, fednet_len, 1, SENDER, 1, reg, NULL);
  bb_node *b = install_peer(fednet, fednet_len, 2, SINK, 1, reg, NULL);
  if (a && b) {
    add_p2p(a, 2);
    bb_peer_id pa = bb_peer_id_from_u64(1);
    size_t worst_execs = 0;
    for (int i = 0; i < 10000; i++) {
      size_t len = 0, n;
      uint64_t now = (uint64_t)i * 1000;
      uint8_t *env = one_envelope(a, 2, now, &len);
      if (!env) break;
      CHECK(bb_node_deliver(b, &pa, env, len, now, NULL) == 0);
      poll_at(b, now, &n);
      free(env);
      bb_node_stats sa, sb;
      bb_node_stats_get(a, &sa);
      bb_node_stats_get(b, &sb);
      if (sa.executions + sb.executions > worst_execs) worst_execs = sa.executions + sb.executions;
      if (sb.ingress_bytes) {
        CHECK_EQ_INT(sb.ingress_bytes, 0);
        break;
      }
    }
    CHECK_EQ_INT(worst_execs, 0);
    stub_state *agg = bb_node_component(b, "aggregator", NULL);
    CHECK(agg && agg->contributions == 10000);
  }
  bb_node_free(a);
  bb_node_free(b);
  bb_registry_free(reg);
}

/* ---- install errors -------------------------------------------------------------------------------- */

static bb_install_error_kind try_install(const uint8_t *art, size_t len, const char *const *targets, size_t n,
                                         const bb_registry *reg, char *msg, size_t msg_size) {
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = bb_peer_id_from_u64(9);
  a.artifact = art;
  a.artifact_len = len;
  a.targets = targets;
  a.n_targets = n;
  a.registry = reg;
  bb_node *node = NULL;
  bb_install_error_kind kind = BB_INSTALL_OK;
  bb_error err;
  bb_error_clear(&err);
  if (bb_install(&a, &node, &kind, &err) == 0) bb_node_free(node);
  CHECK(kind == BB_INSTALL_OK || node == NULL);
  snprintf(msg, msg_size, "%s", err.message);
  return kind;
}

static void test_install_errors(void) {
  bb_registry *reg = stub_registry();
  char msg[BB_ERROR_MESSAGE_MAX];
  CHECK_EQ_INT(try_install(fednet, fednet_len, SENDER, 0, reg, msg, sizeof msg), BB_INSTALL_EMPTY_TARGETS);
  static const uint8_t junk[] = {0x0a, 0xff};
  CHECK_EQ_INT(try_install(junk, sizeof junk, SENDER, 1, reg, msg, sizeof msg), BB_INSTALL_BAD_ARTIFACT);
  const char *nope[] = {"Nope"};
  CHECK_EQ_INT(try_install(fednet, fednet_len, nope, 1, reg, msg, sizeof msg), BB_INSTALL_UNKNOWN_TARGET);
  CHECK(strstr(msg, "FedNetwork_sink_peers#") != NULL); /* the message lists what exists */
  bb_registry *partial = registry_with(&STUB_MODEL, NULL);
  CHECK_EQ_INT(try_install(fednet, fednet_len, SINK, 1, partial, msg, sizeof msg), BB_INSTALL_UNREGISTERED_CONCRETE);
  CHECK(strstr(msg, "StubAggregator") != NULL);
  bb_registry *failing = registry_with(&STUB_MODEL, &FAILING_AGGREGATOR);
  CHECK_EQ_INT(try_install(fednet, fednet_len, SINK, 1, failing, msg, sizeof msg), BB_INSTALL_CONSTRUCTION_FAILED);
  CHECK(strstr(msg, "refuses to exist") != NULL && strstr(msg, "aggregator") != NULL);

  /* edit the artifact: no passport; another passport; a conflicting binding */
  bb_model *m = NULL;
  CHECK(bb_model_decode(fednet, fednet_len, NULL, NULL, &m, NULL) == 0);
  if (m) {
    uint8_t *bytes;
    size_t len;
    bb_kv_remove(&m->metadata, "ai.bytesandbrains.compiled");
    CHECK(bb_model_encode(m, &bytes, &len, NULL) == 0);
    CHECK_EQ_INT(try_install(bytes, len, SENDER, 1, reg, msg, sizeof msg), BB_INSTALL_NOT_COMPILED);
    bb_buffer_free(NULL, bytes);
    CHECK(bb_kv_upsert(m, &m->metadata, "ai.bytesandbrains.compiled", "v1") == 0);
    CHECK(bb_model_encode(m, &bytes, &len, NULL) == 0);
    CHECK_EQ_INT(try_install(bytes, len, SENDER, 1, reg, msg, sizeof msg), BB_INSTALL_INCOMPATIBLE_VERSION);
    bb_buffer_free(NULL, bytes);
    CHECK(bb_kv_upsert(m, &m->metadata, BB_KEY_COMPILED, BB_COMPILED_VERSION) == 0);
    for (size_t i = 0; i < m->metadata.len; i++) {
      bb_kv *kv = &m->metadata.items[i];
      if (strstr(kv->key, "ai.bytesandbrains.binding.FedNetwork_sink_peers#") && strstr(kv->key, ".model"))
        kv->value = "Model|StubLoader|-1"; /* (arena strings: a literal is fine to point at) */
    }
    CHECK(bb_model_encode(m, &bytes, &len, NULL) == 0);
    const char *both[] = {"FedNetwork", "FedNetwork_sink_peers"};
    CHECK_EQ_INT(try_install(bytes, len, both, 2, reg, msg, sizeof msg), BB_INSTALL_SLOT_BINDING_CONFLICT);
    CHECK(strstr(msg, "slot `model`") != NULL);
    bb_buffer_free(NULL, bytes);
    bb_model_free(m);
  }
  /* two targets share one component per slot */
  const char *both[] = {"FedNetwork", "FedNetwork_sink_peers"};
  bb_node *one = install_peer(fednet, fednet_len, 5, both, 2, reg, NULL);
  if (one) {
    CHECK_EQ_INT(bb_node_target_count(one), 2);
    CHECK(bb_node_component(one, "model", NULL) != NULL);
    bb_node_free(one);
  }
  bb_registry_free(partial);
  bb_registry_free(failing);
  bb_registry_free(reg);
}

/* ---- bootstrap ------------------------------------------------------------------------------------ */

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};

static void boot_body(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "y", bb_rec_pass_through(g, bb_rec_input(g, "x", bb_tensor_type(BB_DTYPE_FLOAT))));
}
static void boot_bootstrap(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "ready", bb_rec_model_params(g, &MODEL));
}
static const bb_module BOOT = {sizeof(bb_module), "Boot", boot_body, boot_bootstrap, NULL, NULL, 0};

static void test_bootstrap_gates_the_body(void) {
  bb_model *m = NULL;
  bb_error err;
  uint8_t *bytes = NULL, *art = NULL;
  size_t blen = 0, alen = 0;
  CHECK_MSG(bb_module_build(&BOOT, NULL, &m, &err) == 0, "%s", err.message);
  if (!m) return;
  CHECK(bb_model_encode(m, &bytes, &blen, NULL) == 0);
  bb_compiler *c = bb_compiler_new(NULL);
  bb_compiler_set_permissive_types(c, true);
  CHECK(bb_compiler_bind_model(c, "model", "StubModel", NULL, &err) == 0);
  CHECK_MSG(bb_compiler_compile(c, bytes, blen, &art, &alen, &err) == 0, "%s", err.message);
  bb_compiler_free(c);
  bb_registry *reg = registry_with(&DEFER_MODEL, NULL);
  const char *targets[] = {"Boot"};
  bb_node *n = art ? install_peer(art, alen, 1, targets, 1, reg, NULL) : NULL;
  if (n) {
    n_parked = 0;
    CHECK(bb_node_run_bootstrap(n, 0, &err) == 0);
    size_t count;
    const bb_step *s = poll_at(n, 0, &count);
    CHECK(find_step(s, count, BB_STEP_WAITING_ON_BOOTSTRAP) != NULL);
    CHECK_EQ_INT(n_parked, 1);
    /* body work waits for the bootstrap */
    bb_val *x = f32_val((const float[]){4}, 1);
    bb_named_value in = {"x", x};
    CHECK(bb_node_invoke(n, "Boot", &in, 1, 1, &err) == 0);
    s = poll_at(n, 1, &count);
    CHECK(!find_step(s, count, BB_STEP_APP_EVENT));
    CHECK(bb_node_has_work(n) == false);
    bb_val *p = f32_val((const float[]){0}, 1);
    CHECK(bb_node_complete(n, parked[0], &p, 1, &err) == 0);
    bb_val_release(p);
    s = poll_at(n, 2, &count);
    const bb_step *done = find_step(s, count, BB_STEP_BOOTSTRAP_COMPLETE);
    CHECK(done && strncmp(done->module, "Boot#", 5) == 0);
    bool body_ran = false;
    for (size_t i = 0; i < count; i++)
      if (s[i].kind == BB_STEP_APP_EVENT && strcmp(s[i].topic, "y") == 0) body_ran = true;
    CHECK(body_ran); /* the held invoke ran in the same poll */
    CHECK(bb_node_run_bootstrap(n, 3, &err) == 0); /* a second call does nothing */
    s = poll_at(n, 3, &count);
    CHECK_EQ_INT(count, 0);
    bb_val_release(x);
    bb_node_free(n);
  }
  bb_registry_free(reg);
  free(bytes);
  bb_buffer_free(NULL, art);
  bb_model_free(m);
}

int main(void) {
  bb_error err;
  CHECK_MSG(bb_example_compile(&BB_EXAMPLE_MULTI_TARGET_NETWORK, 0, &fednet, &fednet_len, &err) == 0, "%s",
            err.message);
  if (!fednet) return bb_test_finish();
  RUN(test_async_complete_and_fail);
  RUN(test_pending_async_cap);
  RUN(test_deadline_check_is_relative);
  RUN(test_envelope_deadline_expires_in_the_queue);
  RUN(test_unknown_peer_and_fan_out);
  RUN(test_blocked_peer);
  RUN(test_caps);
  RUN(test_envelope_caps_version);
  RUN(test_determinism);
  RUN(test_memory_stays_flat);
  RUN(test_install_errors);
  RUN(test_bootstrap_gates_the_body);
  bb_buffer_free(NULL, fednet);
  return bb_test_finish();
}
