/* Shared by the runtime tests: stub components (mocks are fine inside unit tests), a
 * compile helper and step helpers. */
#ifndef BB_TESTS_RTTEST_H
#define BB_TESTS_RTTEST_H

#include <stdlib.h>
#include <string.h>

#include "bb/compiler.h"
#include "bb/roles.h"
#include "bb/runtime.h"
#include "harness.h"
#include "bb/common.h"

/* ---- stub components ---------------------------------------------------------------------
 * StubLoader.NextBatch → (float32 [1,2,3], empty labels); StubModel.Forward → x·2;
 * StubAggregator.Contribute records what arrived and from whom, Aggregate returns the
 * sum of what it has. */

typedef struct stub_state {
  int calls;
  int contributions;
  float last[8];
  size_t last_len;
  bb_peer_id last_source;
  bool had_source;
} stub_state;

static int stub_create(const bb_component_init *init, void **self, bb_error *err) {
  (void)init;
  (void)err;
  *self = calloc(1, sizeof(stub_state));
  return *self ? 0 : BB_ERR_NOMEM;
}

static void stub_destroy(void *self) { free(self); }

static bb_val *f32_val(const float *x, int64_t n) {
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 1, &n);
  if (!t) return NULL;
  if (n && x) memcpy(bb_tensor_data(t), x, (size_t)n * sizeof(float));
  bb_val *v = bb_val_tensor(NULL, t);
  bb_tensor_release(t);
  return v;
}

static int stub_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  stub_state *s = self;
  s->calls++;
  if (strcmp(call->op_type, "NextBatch") == 0) {
    static const float batch[3] = {1, 2, 3};
    call->outputs[0] = f32_val(batch, 3);
    if (call->n_outputs > 1) call->outputs[1] = f32_val(NULL, 0);
    return 0;
  }
  if (strcmp(call->op_type, "Forward") == 0) {
    const bb_val *x = call->inputs[0];
    if (!x || bb_val_kind_of(x) != BB_VAL_TENSOR) return bb_error_set(err, BB_ERR_TYPE, "Forward wants a tensor");
    const float *in = bb_tensor_data(bb_val_as_tensor(x));
    float out[8];
    int64_t n = bb_val_as_tensor(x)->numel < 8 ? bb_val_as_tensor(x)->numel : 8;
    for (int64_t i = 0; i < n; i++) out[i] = in[i] * 2;
    call->outputs[0] = f32_val(out, n);
    return 0;
  }
  if (strcmp(call->op_type, "Contribute") == 0) {
    const bb_val *x = call->inputs[0];
    if (!x || bb_val_kind_of(x) != BB_VAL_TENSOR) return bb_error_set(err, BB_ERR_TYPE, "Contribute wants a tensor");
    s->contributions++;
    s->last_len = (size_t)bb_val_as_tensor(x)->numel < 8 ? (size_t)bb_val_as_tensor(x)->numel : 8;
    memcpy(s->last, bb_tensor_data(bb_val_as_tensor(x)), s->last_len * sizeof(float));
    s->had_source = bb_ctx_source(ctx) != NULL;
    if (s->had_source) s->last_source = *bb_ctx_source(ctx);
    if (call->n_outputs) call->outputs[0] = bb_val_trigger(NULL);
    return 0;
  }
  return bb_error_set(err, BB_ERR_UNSUPPORTED, "stub: no %s", call->op_type);
}

#define STUB_TYPE(NAME, ROLE)                                                                              \
  {.struct_size = sizeof(bb_component_type), .type_name = NAME, .roles = 1u << (ROLE),                   \
   .create = stub_create, .destroy = stub_destroy, .invoke = stub_invoke}

static const bb_component_type STUB_LOADER = STUB_TYPE("StubLoader", BB_ROLE_DATA_SOURCE);
static const bb_component_type STUB_MODEL = STUB_TYPE("StubModel", BB_ROLE_MODEL);
static const bb_component_type STUB_AGGREGATOR = STUB_TYPE("StubAggregator", BB_ROLE_AGGREGATOR);

__attribute__((unused)) static bb_registry *stub_registry(void) {
  bb_registry *r = bb_registry_new(NULL);
  CHECK(r && !bb_registry_add(r, &STUB_LOADER, NULL) && !bb_registry_add(r, &STUB_MODEL, NULL) &&
        !bb_registry_add(r, &STUB_AGGREGATOR, NULL));
  return r;
}

/* ---- the shipped concretes ------------------------------------------------------------------ */

static bb_registry *rt_shipped;

static void free_shipped_registry(void) { bb_registry_free(rt_shipped); }

/* A registry of every shipped concrete (CpuMlp, FedAvg, ...), made once per test program
 * and freed at exit: what a test installs with when its artifact binds shipped types. */
__attribute__((unused)) static const bb_registry *shipped_registry(void) {
  if (!rt_shipped) {
    rt_shipped = bb_registry_new(NULL);
    CHECK(rt_shipped && bb_registry_add_shipped(rt_shipped, NULL) == 0);
    atexit(free_shipped_registry);
  }
  return rt_shipped;
}

/* ---- nodes ------------------------------------------------------------------------------- */

#define p2p_address bb_address_p2p

/* ---- compiling a test Module ------------------------------------------------------------ */

/* Binds and declares what a test's Module needs on a fresh compiler. */
typedef int (*rt_configure_fn)(bb_compiler *c, const void *user, bb_error *err);

/* Records `module`, runs `configure` on a compiler with permissive types and compiles:
 * the artifact (free() it), or NULL with the failing step CHECKed. */
__attribute__((unused)) static uint8_t *compile_test_module(const bb_module *module, rt_configure_fn configure,
                                                            const void *user, size_t *len) {
  bb_error err;
  bb_model *m = NULL;
  uint8_t *bytes = NULL, *out = NULL;
  size_t blen = 0;
  CHECK_MSG(bb_module_build(module, NULL, &m, &err) == 0, "%s", err.message);
  if (!m) return NULL;
  CHECK(bb_model_encode(m, &bytes, &blen, &err) == 0);
  bb_compiler *c = bb_compiler_new(NULL);
  bb_compiler_set_permissive_types(c, true);
  int rc = configure(c, user, &err);
  CHECK_MSG(rc == 0, "%s", err.message);
  if (!rc) CHECK_MSG(bb_compiler_compile(c, bytes, blen, &out, len, &err) == 0, "%s", err.message);
  bb_compiler_free(c);
  free(bytes);
  bb_model_free(m);
  return out;
}

/* The install arguments for peer `id` running `targets` of `artifact` with `reg`: what a
 * test then adds to (addresses, slots, admission...) before bb_install. */
__attribute__((unused)) static bb_install_args install_args(const uint8_t *artifact, size_t len, uint64_t id,
                                                            const char *const *targets, size_t n_targets,
                                                            const bb_registry *reg) {
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = bb_peer_id_from_u64(id);
  a.artifact = artifact;
  a.artifact_len = len;
  a.targets = targets;
  a.n_targets = n_targets;
  a.registry = reg;
  return a;
}

/* Installs `artifact` as peer `id` for the given targets; NULL (and a printed reason) on
 * failure. */
__attribute__((unused)) static bb_node *install_peer(const uint8_t *artifact, size_t len, uint64_t id, const char *const *targets,
                             size_t n_targets, const bb_registry *reg, const bb_node_config *cfg) {
  bb_install_args a = install_args(artifact, len, id, targets, n_targets, reg);
  bb_address addr = p2p_address(&a.self);
  a.addresses = &addr;
  a.n_addresses = 1;
  a.config = cfg;
  bb_node *n = NULL;
  bb_error err;
  bb_install_error_kind kind;
  int rc = bb_install(&a, &n, &kind, &err);
  CHECK_MSG(rc == 0, "install as %llu: %s (%s)", (unsigned long long)id, err.message, bb_install_error_name(kind));
  return n;
}

/* Counts steps of a kind. */
__attribute__((unused)) static size_t count_steps(const bb_step *s, size_t n, bb_step_kind kind) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++) c += s[i].kind == kind;
  return c;
}

__attribute__((unused)) static void print_steps(const char *who, const bb_step *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    fprintf(stderr, "  %s step %zu: %s %s %s %s\n", who, i, bb_step_kind_name(s[i].kind), s[i].op ? s[i].op : "",
            s[i].reason ? s[i].reason : "", s[i].detail ? s[i].detail : "");
}

#endif
