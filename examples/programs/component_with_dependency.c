/* component_with_dependency: an Index that depends on a Backend.
 *
 *   component_with_dependency [--quiet]
 *
 * CountingIndex declares a dependency on a Backend at slot "compute"; its search adds two
 * constants (the query's first element repeated, and its bias repeated) on that Backend
 * through bb_ctx_call. The program shows the declared dependency, that compiling without
 * "compute" bound fails with UnboundDependency, that install fills both slots, and that a
 * query reaches search, which runs the Backend's Add and completes with an empty result.
 * Exits 0 only when all of that held. */
#include <stdio.h>
#include <string.h>

#include "bb/roles.h"
#include "programs/examples.h"
#include "programs/fixtures.h"

static int quiet;

static int check(int cond, const char *what) {
  printf("  [%s] %s\n", cond ? "ok" : "FAILED", what);
  return cond ? 0 : 1;
}

/* The CountingApp Module compiled with "primary_index" bound and, if bind_compute,
 * "compute" too; returns the compile's result and error kind. */
static int compile(bool bind_compute, uint8_t **out, size_t *out_len, bb_compile_error *kind, bb_error *err) {
  bb_model *recorded = NULL;
  uint8_t *bytes = NULL;
  size_t len = 0;
  int rc = bb_module_build(BB_EXAMPLE_COMPONENT_WITH_DEPENDENCY.modules[0], NULL, &recorded, err);
  if (!rc) rc = bb_model_encode(recorded, &bytes, &len, err);
  bb_model_free(recorded);
  if (rc) return rc;
  bb_compiler *c = bb_compiler_new(NULL);
  if (!c) return BB_ERR_NOMEM;
  const bb_component_type *ci = &BB_FIXTURE_COUNTING_INDEX;
  rc = bb_example_declare(c, ci->type_name, ci->deps, ci->n_deps, err);
  if (!rc) rc = bb_compiler_bind_index(c, "primary_index", ci->type_name, NULL, err);
  if (!rc && bind_compute) rc = bb_example_declare(c, "CpuBackend", NULL, 0, err);
  if (!rc && bind_compute) rc = bb_compiler_bind_backend(c, "compute", "CpuBackend", NULL, err);
  if (!rc) rc = bb_compiler_compile(c, bytes, len, out, out_len, err);
  *kind = bb_compiler_error_kind(c);
  bb_compiler_free(c);
  bb_buffer_free(NULL, bytes);
  return rc;
}

int main(int argc, char **argv) {
  quiet = argc > 1 && strcmp(argv[1], "--quiet") == 0;
  int failures = 0;
  bb_error err = {0};

  /* 1. the dependency the type declares */
  const bb_component_type *ci = &BB_FIXTURE_COUNTING_INDEX;
  printf("%s declared %zu dependency:\n", ci->type_name, ci->n_deps);
  for (size_t i = 0; i < ci->n_deps; i++)
    printf("  needs role `%s` at slot `%s`\n", bb_role_name(ci->deps[i].role), ci->deps[i].slot);
  failures += check(ci->n_deps == 1 && ci->deps[0].role == BB_ROLE_BACKEND && strcmp(ci->deps[0].slot, "compute") == 0,
                    "CountingIndex depends on a Backend at \"compute\"");

  /* 2. without "compute" bound, the compile refuses */
  uint8_t *artifact = NULL;
  size_t artifact_len = 0;
  bb_compile_error kind = BB_COMPILE_OK;
  bb_error unbound = {0};
  int rc = compile(false, &artifact, &artifact_len, &kind, &unbound);
  printf("compile without \"compute\": %s (%s)\n", bb_compile_error_name(kind), rc ? unbound.message : "compiled");
  failures += check(rc != 0 && kind == BB_COMPILE_UNBOUND_DEPENDENCY && strstr(unbound.message, "compute"),
                    "unbound dependency refused with UnboundDependency naming \"compute\"");
  bb_buffer_free(NULL, artifact);
  artifact = NULL;

  /* 3. bound, compiled and installed on peer 42: both slots hold a component */
  if (compile(true, &artifact, &artifact_len, &kind, &err)) {
    fprintf(stderr, "component_with_dependency: compile: %s\n", err.message);
    return 1;
  }
  printf("bindings: primary_index -> CountingIndex, compute -> CpuBackend\n");
  bb_registry *reg = bb_registry_new(NULL);
  if (!reg || bb_registry_add_shipped(reg, &err) || bb_fixtures_register(reg, &err)) {
    fprintf(stderr, "component_with_dependency: registry: %s\n", err.message);
    return 1;
  }
  bb_peer_id self = bb_peer_id_from_u64(42);
  bb_address addr = bb_address_p2p(&self);
  const char *targets[] = {"CountingApp"};
  bb_node_config nc = {0};
  nc.struct_size = sizeof nc;
  nc.trace_ops = true;
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = self;
  a.addresses = &addr;
  a.n_addresses = 1;
  a.artifact = artifact;
  a.artifact_len = artifact_len;
  a.targets = targets;
  a.n_targets = 1;
  a.registry = reg;
  a.config = &nc;
  bb_node *node = NULL;
  if (bb_install(&a, &node, NULL, &err) || bb_node_run_bootstrap(node, 0, &err)) {
    fprintf(stderr, "component_with_dependency: install: %s\n", err.message);
    return 1;
  }
  const bb_component_type *index_type = NULL, *backend_type = NULL;
  bb_fixture_counting_index *index = bb_node_component(node, "primary_index", &index_type);
  void *backend = bb_node_component(node, "compute", &backend_type);
  printf("Engine slots: primary_index=%s, compute=%s\n", index ? "true" : "false", backend ? "true" : "false");
  failures += check(index && index_type == ci && backend && backend_type &&
                        strcmp(backend_type->type_name, "CpuBackend") == 0,
                    "install built CountingIndex at primary_index and CpuBackend at compute");
  if (!index || !backend) return 1;

  /* 4. a query reaches search, which runs the Backend's Add */
  static const float QUERY[] = {1.0f, 2.0f, 3.0f, 4.0f};
  int64_t dim = 4;
  bb_tensor *q = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 1, &dim);
  memcpy(bb_tensor_data(q), QUERY, sizeof QUERY);
  bb_named_value in = {"query", bb_val_tensor(NULL, q)};
  bb_tensor_release(q);
  if (bb_node_invoke(node, "CountingApp", &in, 1, 0, &err)) {
    fprintf(stderr, "component_with_dependency: invoke: %s\n", err.message);
    return 1;
  }
  bb_val_release(in.value);
  size_t total = 0, search_completed = 0, failed = 0;
  int64_t neighbors = -1;
  for (int round = 0; round < 40 && bb_node_has_work(node); round++) {
    const bb_step *steps;
    size_t n;
    if (bb_node_poll(node, 0, &steps, &n, &err)) {
      fprintf(stderr, "component_with_dependency: poll: %s\n", err.message);
      return 1;
    }
    for (size_t i = 0; i < n; i++) {
      const bb_step *s = &steps[i];
      total++;
      if (!quiet) printf("  step %-16s %s%s%s\n", bb_step_kind_name(s->kind), s->op ? s->op : "",
                         s->topic ? s->topic : "", s->detail ? s->detail : "");
      failed += s->kind == BB_STEP_OP_FAILED;
      search_completed += s->kind == BB_STEP_OP_COMPLETED && s->op && strstr(s->op, "role.index::Search");
      if (s->kind == BB_STEP_APP_EVENT && strcmp(s->topic, "neighbors") == 0 && s->value &&
          bb_val_kind_of(s->value) == BB_VAL_TENSOR)
        neighbors = bb_val_as_tensor(s->value)->numel;
    }
  }
  printf("drained %zu step(s); CountingIndex: %llu search(es), CpuBackend Add fired %llu time(s), sum = [",
         total, (unsigned long long)index->searches, (unsigned long long)index->backend_adds);
  for (size_t i = 0; i < index->last_len && i < 16; i++) printf(i ? ", %g" : "%g", (double)index->last_sum[i]);
  printf("]\n");
  float want = QUERY[0] + (float)index->bias;
  int sum_ok = index->last_len == 4;
  for (size_t i = 0; i < 4 && sum_ok; i++) sum_ok = index->last_sum[i] == want;
  failures += check(total >= 1 && failed == 0, "the run produced steps and no op failed");
  failures += check(index->searches == 1 && search_completed == 1, "the query reached search (OpCompleted)");
  failures += check(index->backend_adds >= 1 && sum_ok, "search ran the Backend's Add: query[0] + bias, 4 times");
  failures += check(neighbors == 0, "search completed with an empty result");
  if (!failures) printf("Dependency-declared component installed and driven end to end.\n");

  bb_node_free(node);
  bb_registry_free(reg);
  bb_buffer_free(NULL, artifact);
  return failures ? 1 : 0;
}
