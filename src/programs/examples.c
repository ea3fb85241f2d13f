/* The example registry and the record → configure → compile helper. */
#include "programs/examples.h"

#include <stdio.h>
#include <string.h>

#include "bb/roles.h"

static const bb_example *const TABLE[] = {
    &BB_EXAMPLE_QUICKSTART,           &BB_EXAMPLE_COMPONENT_WITH_DEPENDENCY,
    &BB_EXAMPLE_CUSTOM_INDEX,         &BB_EXAMPLE_MULTI_TARGET_NETWORK,
    &BB_EXAMPLE_FEDERATED_LEARNING,   &BB_EXAMPLE_SINGLE_NODE_FEDERATED_LEARNING,
    &BB_EXAMPLE_CUSTOM_COMPILER_PASS, &BB_EXAMPLE_POLYMORPHIC_TYPES, &BB_EXAMPLE_FEDERATED_DIGITS, &BB_EXAMPLE_GOSSIP_DIGITS,
    &BB_EXAMPLE_HIERARCHICAL_DIGITS,
    &BB_EXAMPLE_FEDERATED_CNN,
    &BB_EXAMPLE_SPLIT_CNN,
};
#define N_EXAMPLES (sizeof TABLE / sizeof TABLE[0])

const bb_example *const *bb_examples(size_t *count) {
  if (count) *count = N_EXAMPLES;
  return TABLE;
}

const bb_example *bb_example_find(const char *name) {
  for (size_t i = 0; name && i < N_EXAMPLES; i++)
    if (strcmp(TABLE[i]->name, name) == 0) return TABLE[i];
  return NULL;
}

int bb_example_declare(bb_compiler *c, const char *type, const bb_component_dep *deps, size_t n_deps,
                       bb_error *err) {
  static const bb_component_port PORTS[] = {
      {"tensor", BB_TYPE_TENSOR_F32},  {"vector", BB_TYPE_TENSOR_F32}, {"element", BB_TYPE_TENSOR_F32},
      {"sample", BB_TYPE_TENSOR_F32}, {"in", BB_TYPE_TENSOR_F32},     {"out", BB_TYPE_TENSOR_F32},
  };
  bb_component_decl d = {sizeof d, type, PORTS, sizeof PORTS / sizeof PORTS[0], deps, n_deps};
  return bb_compiler_declare_component(c, &d, err);
}

int bb_example_declare_cpu_backend(bb_compiler *c, bb_error *err) {
  int rc = bb_example_declare(c, "CpuBackend", NULL, 0, err);
  return rc ? rc : bb_cpu_backend_declare_op_set(c, err);
}

static int fail(bb_error *err, int code, const char *what) {
  if (err) {
    err->code = code;
    snprintf(err->message, sizeof err->message, "%s", what);
  }
  return code;
}

int bb_example_compile(const bb_example *ex, size_t module, uint8_t **out, size_t *out_len, bb_error *err) {
  *out = NULL;
  *out_len = 0;
  if (!ex || module >= ex->n_modules) return fail(err, BB_ERR_INVALID_ARGUMENT, "no such example module");
  bb_model *recorded = NULL;
  int rc = bb_module_build(ex->modules[module], NULL, &recorded, err);
  if (rc) return rc;
  uint8_t *bytes = NULL;
  size_t len = 0;
  rc = bb_model_encode(recorded, &bytes, &len, err);
  bb_model_free(recorded);
  if (rc) return rc;
  bb_compiler *c = bb_compiler_new(NULL);
  if (!c) rc = fail(err, BB_ERR_NOMEM, "out of memory");
  if (!rc) rc = ex->configure(c, module, err);
  if (!rc) rc = bb_compiler_compile(c, bytes, len, out, out_len, err);
  bb_compiler_free(c);
  bb_buffer_free(NULL, bytes);
  return rc;
}
