/* Bootstraps: bb_node_run_bootstrap runs each target's
 * "<Module>__bootstrap" once; body invokes and deliveries wait until it completes, also
 * when it parks on an asynchronous component op; a second call does nothing; a node
 * without bootstraps runs its body at once; bb_node_run_bootstraps chooses all of them,
 * those of named Modules, or those that reach named slots. Artifacts are built as IR. */
#include "failalloc.h"
#include "rtir.h"
#include "rttest.h"

/* the node tables below leave the optional fields out */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

static uint64_t parked[4];
static size_t n_parked;

static int async_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  (void)self;
  (void)call;
  if (n_parked == 4) return bb_error_set(err, BB_ERR_LIMIT, "too many parked");
  parked[n_parked++] = bb_ctx_defer(ctx);
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

/* T: a synchronous bootstrap (a loader's first batch). A: a bootstrap parked on an
 * asynchronous model; its body also receives what S sends. N: no bootstrap. I: a
 * bootstrap whose only op waits for an input nobody gives. */
static const ir_node_spec N_BODY[] = {{"Tee", {"x"}, {"y"}}};
static const ir_node_spec A_BODY[] = {{"Tee", {"x"}, {"y"}},
                                    {BB_DOMAIN_WIRE "::Recv", {NULL}, {"r", "r_from"}},
                                    {"Tee", {"r"}, {"got"}}};
static const ir_node_spec T_BOOT[] = {{"Pulse", {NULL}, {"p"}},
                                      {BB_DOMAIN_ROLE_DATA_SOURCE "::NextBatch", {"p"}, {"b", "l"}, "loader"}};
static const ir_node_spec A_BOOT[] = {{"Pulse", {NULL}, {"p"}},
                                      {BB_DOMAIN_ROLE_MODEL "::Forward", {"p"}, {"q"}, "amodel"}};
static const ir_node_spec U_BOOT[] = {{"Pulse", {NULL}, {"p"}}, {"Tee", {"p"}, {"u"}}};
static const ir_node_spec I_BOOT[] = {{"Tee", {"seed"}, {"s"}}};
static const ir_node_spec SEND[] = {
    {BB_DOMAIN_WIRE "::Send", {"v", "peers"}, {"sent"}, .meta = {"ai.bytesandbrains.dest_site_name.v", "r"}}};

static uint8_t *art;
static size_t art_len;
static bb_registry *reg;

static void build_artifact(void) {
  bb_model *m = ir_model(BB_COMPILED_VERSION);
  ir_add_fn(m, &(ir_fn_spec){.name = "T#1", .in = {"x"}, .out = {"y"}, IR_NODES(N_BODY)});
  ir_add_fn(m, &(ir_fn_spec){.name = "T__bootstrap", .out = {"b"}, .bootstrap = true, IR_NODES(T_BOOT)});
  ir_add_fn(m, &(ir_fn_spec){.name = "A#1", .in = {"x"}, .out = {"y", "got"}, IR_NODES(A_BODY)});
  ir_add_fn(m, &(ir_fn_spec){.name = "A__bootstrap", .out = {"q"}, .bootstrap = true, IR_NODES(A_BOOT)});
  ir_add_fn(m, &(ir_fn_spec){.name = "I#1", .in = {"x"}, .out = {"y"}, IR_NODES(N_BODY)});
  ir_add_fn(m, &(ir_fn_spec){.name = "I__bootstrap", .in = {"seed"}, .out = {"s"}, .bootstrap = true,
                             IR_NODES(I_BOOT)});
  ir_add_fn(m, &(ir_fn_spec){.name = "U#1", .in = {"x"}, .out = {"y"}, IR_NODES(N_BODY)});
  ir_add_fn(m, &(ir_fn_spec){.name = "U__bootstrap", .out = {"u"}, .bootstrap = true, IR_NODES(U_BOOT)});
  ir_add_fn(m, &(ir_fn_spec){.name = "N#1", .in = {"x"}, .out = {"y"}, IR_NODES(N_BODY)});
  ir_add_fn(m, &(ir_fn_spec){.name = "S#1", .in = {"v", "peers"}, IR_NODES(SEND)});
  ir_bind(m, "T#1", "loader", "DataSource|StubLoader|-1");
  ir_bind(m, "A#1", "amodel", "Model|AsyncModel|-1");
  ir_declare_wires(m);
  art = ir_encode(m, &art_len);
}

static bb_node *node(uint64_t id, const char *target) {
  const char *t[] = {target};
  return install_peer(art, art_len, id, t, 1, reg, NULL);
}

static const bb_step *poll_at(bb_node *n, uint64_t now, size_t *count) {
  const bb_step *steps = NULL;
  bb_error err;
  *count = 0;
  CHECK_MSG(bb_node_poll(n, now, &steps, count, &err) == 0, "%s", err.message);
  return steps;
}

/* The index of the first step of `kind` (with `topic`, for app events), or -1. */
static long step_index(const bb_step *s, size_t n, bb_step_kind kind, const char *topic) {
  for (size_t i = 0; i < n; i++)
    if (s[i].kind == kind && (!topic || (s[i].topic && strcmp(s[i].topic, topic) == 0))) return (long)i;
  return -1;
}

static void invoke_x(bb_node *n, const char *module, uint64_t now) {
  bb_val *x = f32_val((const float[]){7}, 1);
  bb_named_value in = {"x", x};
  bb_error err;
  CHECK_MSG(bb_node_invoke(n, module, &in, 1, now, &err) == 0, "%s", err.message);
  bb_val_release(x);
}

static void test_bootstrap_runs_once(void) {
  bb_node *n = node(1, "T");
  if (!n) return;
  bb_error err;
  CHECK(bb_node_run_bootstrap(n, 0, &err) == 0);
  CHECK(bb_node_has_work(n));
  size_t count;
  const bb_step *s = poll_at(n, 0, &count);
  long batch = step_index(s, count, BB_STEP_APP_EVENT, "b"), done = step_index(s, count, BB_STEP_BOOTSTRAP_COMPLETE, NULL);
  CHECK(batch >= 0 && done > batch);
  if (done >= 0) CHECK_STR(s[done].module, "T#1");
  if (batch >= 0) CHECK_STR(s[batch].module, "T#1");
  CHECK(step_index(s, count, BB_STEP_WAITING_ON_BOOTSTRAP, NULL) < 0);
  stub_state *loader = bb_node_component(n, "loader", NULL);
  CHECK(loader && loader->calls == 1);
  /* a second call does nothing */
  CHECK(bb_node_run_bootstrap(n, 1, &err) == 0);
  CHECK(!bb_node_has_work(n));
  poll_at(n, 1, &count);
  CHECK_EQ_INT(count, 0);
  CHECK(loader && loader->calls == 1);
  invoke_x(n, "T", 2);
  s = poll_at(n, 2, &count);
  CHECK(step_index(s, count, BB_STEP_APP_EVENT, "y") >= 0);
  bb_node_stats st;
  bb_node_stats_get(n, &st);
  CHECK_EQ_INT(st.executions, 0);
  bb_node_free(n);
}

/* One envelope from S (peer 1) to peer 2's Recv (malloc'd copy). */
static uint8_t *envelope(size_t *len) {
  bb_node *a = node(1, "S");
  uint8_t *copy = NULL;
  *len = 0;
  if (!a) return NULL;
  bb_peer_id two = bb_peer_id_from_u64(2);
  bb_address addr = p2p_address(&two);
  CHECK(bb_node_add_peer(a, &two, &addr, NULL) == 0);
  bb_named_value in[2] = {{"v", f32_val((const float[]){5}, 1)}, {"peers", bb_val_peers(NULL, &two, 1)}};
  CHECK(bb_node_invoke(a, "S", in, 2, 0, NULL) == 0);
  size_t count;
  const bb_step *s = poll_at(a, 0, &count);
  long k = step_index(s, count, BB_STEP_SEND, NULL);
  CHECK(k >= 0);
  if (k >= 0) {
    copy = malloc(s[k].len);
    memcpy(copy, s[k].bytes, s[k].len);
    *len = s[k].len;
  }
  for (int i = 0; i < 2; i++) bb_val_release(in[i].value);
  bb_node_free(a);
  return copy;
}

static void test_body_waits_for_a_parked_bootstrap(void) {
  size_t len;
  uint8_t *env = envelope(&len);
  bb_node *n = env ? node(2, "A") : NULL;
  if (!n) return free(env);
  n_parked = 0;
  bb_error err;
  CHECK(bb_node_run_bootstrap(n, 0, &err) == 0);
  size_t count;
  const bb_step *s = poll_at(n, 0, &count);
  long waiting = step_index(s, count, BB_STEP_WAITING_ON_BOOTSTRAP, NULL);
  CHECK(waiting >= 0);
  if (waiting >= 0) CHECK_STR(s[waiting].module, "A#1");
  CHECK_EQ_INT(n_parked, 1);
  /* an invoke and a delivery arrive: both wait */
  invoke_x(n, "A", 1);
  bb_peer_id from = bb_peer_id_from_u64(1);
  CHECK(bb_node_deliver(n, &from, env, len, 1, &err) == 0);
  CHECK(!bb_node_has_work(n)); /* nothing to do until the completion */
  CHECK(bb_node_expiry(n) == UINT64_MAX);
  s = poll_at(n, 1, &count);
  CHECK(step_index(s, count, BB_STEP_WAITING_ON_BOOTSTRAP, NULL) >= 0);
  CHECK(step_index(s, count, BB_STEP_APP_EVENT, NULL) < 0);
  bb_node_stats st;
  bb_node_stats_get(n, &st);
  CHECK_EQ_INT(st.ingress, 2);
  /* asking again while it waits starts nothing new */
  CHECK(bb_node_run_bootstrap(n, 2, &err) == 0);
  poll_at(n, 2, &count);
  CHECK_EQ_INT(n_parked, 1);
  /* the completion finishes the bootstrap; the held work runs in the same poll, after */
  bb_val *q = f32_val((const float[]){1}, 1);
  CHECK(bb_node_complete(n, parked[0], &q, 1, &err) == 0);
  bb_val_release(q);
  CHECK(bb_node_has_work(n));
  s = poll_at(n, 3, &count);
  long done = step_index(s, count, BB_STEP_BOOTSTRAP_COMPLETE, NULL);
  long q_ev = step_index(s, count, BB_STEP_APP_EVENT, "q");
  long y_ev = step_index(s, count, BB_STEP_APP_EVENT, "y"), got = step_index(s, count, BB_STEP_APP_EVENT, "got");
  CHECK(q_ev >= 0 && done > q_ev && y_ev > done && got > done);
  CHECK(step_index(s, count, BB_STEP_WAITING_ON_BOOTSTRAP, NULL) < 0);
  bb_node_stats_get(n, &st);
  CHECK_EQ_INT(st.ingress, 0);
  CHECK_EQ_INT(st.executions, 0);
  CHECK_EQ_INT(st.ingress_bytes, 0);
  /* done for good */
  CHECK(bb_node_run_bootstrap(n, 4, &err) == 0);
  poll_at(n, 4, &count);
  CHECK_EQ_INT(count, 0);
  CHECK_EQ_INT(n_parked, 1);
  bb_node_free(n);
  free(env);
}

static void test_no_bootstrap(void) {
  bb_node *n = node(1, "N");
  if (!n) return;
  bb_error err;
  CHECK(bb_node_run_bootstrap(n, 0, &err) == 0);
  CHECK(!bb_node_has_work(n));
  size_t count;
  poll_at(n, 0, &count);
  CHECK_EQ_INT(count, 0);
  invoke_x(n, "N", 1);
  const bb_step *s = poll_at(n, 1, &count);
  CHECK_EQ_INT(count, 1);
  CHECK(step_index(s, count, BB_STEP_APP_EVENT, "y") == 0);
  bb_node_free(n);
}

/* A bootstrap with nothing it can run finishes at once — and the node must say so, or a
 * host that polls when bb_node_has_work / bb_node_expiry ask it to never hears of it and
 * its body work waits forever. */
static void test_bootstrap_with_nothing_ready(void) {
  bb_node *n = node(1, "I");
  if (!n) return;
  bb_error err;
  CHECK(bb_node_run_bootstrap(n, 0, &err) == 0);
  CHECK(bb_node_has_work(n));
  CHECK(bb_node_expiry(n) == 0);
  size_t count;
  const bb_step *s = poll_at(n, 0, &count);
  CHECK(step_index(s, count, BB_STEP_BOOTSTRAP_COMPLETE, NULL) >= 0);
  invoke_x(n, "I", 1);
  CHECK(bb_node_has_work(n));
  s = poll_at(n, 1, &count);
  CHECK(step_index(s, count, BB_STEP_APP_EVENT, "y") >= 0);
  bb_node_free(n);
}

static size_t completes_of(bb_node *n, uint64_t now, const char **first) {
  size_t count, done = 0;
  const bb_step *s = poll_at(n, now, &count);
  *first = NULL;
  for (size_t i = 0; i < count; i++)
    if (s[i].kind == BB_STEP_BOOTSTRAP_COMPLETE && !done++) *first = s[i].module;
  return done;
}

static bb_bootstrap_targets choose(bb_bootstrap_scope scope, const char *const *names, size_t n) {
  return (bb_bootstrap_targets){sizeof(bb_bootstrap_targets), scope, names, n};
}

/* T's bootstrap reaches slot "loader", U's no slot at all. */
static void test_bootstrap_targets(void) {
  const char *targets[] = {"T", "U"};
  bb_node *n = install_peer(art, art_len, 1, targets, 2, reg, NULL);
  if (!n) return;
  bb_error err;
  const char *first;
  stub_state *loader = bb_node_component(n, "loader", NULL);
  /* Modules by name: only U's */
  const char *u[] = {"U"};
  bb_bootstrap_targets w = choose(BB_BOOTSTRAP_MODULES, u, 1);
  CHECK_MSG(bb_node_run_bootstraps(n, &w, 0, &err) == 0, "%s", err.message);
  CHECK_EQ_INT(completes_of(n, 0, &first), 1);
  CHECK(first && strcmp(first, "U#1") == 0);
  CHECK(loader && loader->calls == 0);
  /* the body of T runs: no bootstrap of its was chosen */
  invoke_x(n, "T", 1);
  size_t count;
  const bb_step *s = poll_at(n, 1, &count);
  CHECK(step_index(s, count, BB_STEP_APP_EVENT, "y") >= 0);
  /* by slot: the bootstrap that needs the loader */
  const char *slot[] = {"loader"};
  w = choose(BB_BOOTSTRAP_SLOTS, slot, 1);
  CHECK(bb_node_run_bootstraps(n, &w, 2, &err) == 0);
  CHECK_EQ_INT(completes_of(n, 2, &first), 1);
  CHECK(first && strcmp(first, "T#1") == 0);
  CHECK(loader && loader->calls == 1);
  /* all of them: none is left */
  CHECK(bb_node_run_bootstrap(n, 3, &err) == 0);
  CHECK_EQ_INT(completes_of(n, 3, &first), 0);
  CHECK(loader && loader->calls == 1);
  /* names that choose nothing, and a scope that is none */
  const char *nope[] = {"Nope"};
  w = choose(BB_BOOTSTRAP_MODULES, nope, 1);
  CHECK(bb_node_run_bootstraps(n, &w, 4, &err) == BB_ERR_NOT_FOUND);
  CHECK_MSG(strstr(err.message, "Module `Nope` has no bootstrap among my targets (there are: [T__bootstrap, "
                                "U__bootstrap])"),
            "%s", err.message);
  const char *amodel[] = {"amodel"};
  w = choose(BB_BOOTSTRAP_SLOTS, amodel, 1);
  CHECK(bb_node_run_bootstraps(n, &w, 4, &err) == BB_ERR_NOT_FOUND);
  CHECK_MSG(strstr(err.message, "slot `amodel` has no component on this node (there are: [loader])"), "%s",
            err.message);
  w = choose((bb_bootstrap_scope)7, NULL, 0);
  CHECK(bb_node_run_bootstraps(n, &w, 4, &err) == BB_ERR_INVALID_ARGUMENT);
  bb_node_free(n);

  /* several Modules run in target order, whatever order they are named in */
  n = install_peer(art, art_len, 1, targets, 2, reg, NULL);
  if (!n) return;
  const char *ut[] = {"U", "T"};
  w = choose(BB_BOOTSTRAP_MODULES, ut, 2);
  CHECK(bb_node_run_bootstraps(n, &w, 0, &err) == 0);
  CHECK_EQ_INT(completes_of(n, 0, &first), 1); /* the next one starts, and finishes in the next poll */
  CHECK(first && strcmp(first, "T#1") == 0);
  CHECK_EQ_INT(completes_of(n, 1, &first), 1);
  CHECK(first && strcmp(first, "U#1") == 0);
  bb_node_free(n);
}

/* Two bootstraps (T's, then U's) with an allocation failure at every allocation from
 * run_bootstrap on: a bootstrap that cannot start is retried (run_bootstrap says
 * BB_ERR_NOMEM and can be called again; a poll retries the next one), each completes
 * exactly once, the body waits for both, and nothing leaks. */
static void test_allocation_failures(void) {
  bool clean = false;
  for (long budget = 0; budget < 200 && !clean; budget++) {
    failing f = {-1, 0};
    bb_allocator alloc = failing_allocator(&f);
    bb_peer_id self = bb_peer_id_from_u64(1);
    const char *targets[] = {"T", "U"};
    bb_install_args a = {.struct_size = sizeof a, .self = self, .artifact = art, .artifact_len = art_len,
                         .targets = targets, .n_targets = 2, .registry = reg, .alloc = &alloc};
    bb_node *n = NULL;
    CHECK(bb_install(&a, &n, NULL, NULL) == 0);
    if (!n) break;
    invoke_x(n, "U", 0);
    f.budget = budget;
    int rc = bb_node_run_bootstrap(n, 0, NULL);
    CHECK(rc == 0 || rc == BB_ERR_NOMEM);
    size_t completes = 0, count;
    bool body_ran = false, saw_u = false, work_lost = false; /* a poll may lose work it says it lost */
    for (int k = 0; k < 8; k++) {
      const bb_step *s = NULL;
      count = 0;
      if (k == 4) f.budget = -1; /* memory comes back */
      if (rc == BB_ERR_NOMEM) rc = bb_node_run_bootstrap(n, (uint64_t)k, NULL);
      int prc = bb_node_poll(n, (uint64_t)k, &s, &count, NULL);
      CHECK(prc == 0 || prc == BB_ERR_NOMEM);
      work_lost |= prc == BB_ERR_NOMEM;
      for (size_t i = 0; i < count; i++) {
        completes += s[i].kind == BB_STEP_BOOTSTRAP_COMPLETE;
        saw_u |= s[i].kind == BB_STEP_APP_EVENT && strcmp(s[i].topic, "u") == 0;
        if (s[i].kind == BB_STEP_APP_EVENT && strcmp(s[i].topic, "y") == 0) {
          stub_state *loader = bb_node_component(n, "loader", NULL);
          CHECK_MSG(work_lost || (completes == 2 && saw_u && loader && loader->calls == 1),
                    "budget %ld: the body ran before both bootstraps", budget);
          body_ran = true;
        }
      }
    }
    /* a report may be lost with the memory (the poll said so), never doubled */
    CHECK_MSG(completes == 2 || (work_lost && completes < 2), "budget %ld: %zu BootstrapComplete steps", budget,
              completes);
    stub_state *loader = bb_node_component(n, "loader", NULL);
    int calls = loader ? loader->calls : -1;
    CHECK_MSG(calls == 1 || (work_lost && calls == 0), "budget %ld: the loader ran %d times", budget, calls);
    clean = !work_lost && completes == 2 && body_ran && calls == 1;
    bb_node_free(n);
    CHECK_MSG(f.live == 0, "budget %ld: %ld blocks leaked", budget, f.live);
  }
  CHECK(clean); /* ... up to a budget with no failure at all */
}

int main(void) {
  build_artifact();
  reg = stub_registry();
  CHECK(bb_registry_add(reg, &ASYNC_MODEL, NULL) == 0);
  RUN(test_bootstrap_runs_once);
  RUN(test_body_waits_for_a_parked_bootstrap);
  RUN(test_no_bootstrap);
  RUN(test_bootstrap_with_nothing_ready);
  RUN(test_bootstrap_targets);
  RUN(test_allocation_failures);
  bb_registry_free(reg);
  free(art);
  return bb_test_finish();
}
