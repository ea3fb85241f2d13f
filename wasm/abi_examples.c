/* bytesandbrains — the reference examples linked into bb.wasm (src/programs): their names
 * and descriptions, and their Modules recorded as ONNX ModelProto bytes. */
#include "abi_internal.h"
#include "bb/graph.h"
#include "bb_wasm.h"

static const bb_example *example_at(int32_t i) {
  size_t count = 0;
  const bb_example *const *all = bb_examples(&count);
  if (i < 0 || (size_t)i >= count) {
    bbw_fail(BB_ERR_INVALID_ARGUMENT, "example %d does not exist (there are %zu)", (int)i, count);
    return NULL;
  }
  return all[i];
}

const bb_example *bbw_example_named(const char *name, int32_t module) {
  const bb_example *ex = name ? bb_example_find(name) : NULL;
  if (ex == NULL) {
    bbw_fail(BB_ERR_NOT_FOUND, "no example is named \"%s\"", name ? name : "(null)");
    return NULL;
  }
  if (module < 0 || (size_t)module >= ex->n_modules) {
    bbw_fail(BB_ERR_INVALID_ARGUMENT, "example %s has %zu module(s); %d is not one", name, ex->n_modules, (int)module);
    return NULL;
  }
  return ex;
}

int32_t bb_wasm_example_count(void) {
  size_t count = 0;
  bb_examples(&count);
  return (int32_t)count;
}

const char *bb_wasm_example_name(int32_t i) {
  bbw_error_clear();
  const bb_example *ex = example_at(i);
  return ex ? ex->name : NULL;
}

const char *bb_wasm_example_description(int32_t i) {
  bbw_error_clear();
  const bb_example *ex = example_at(i);
  return ex ? ex->description : NULL;
}

int32_t bb_wasm_example_module_count(int32_t i) {
  bbw_error_clear();
  const bb_example *ex = example_at(i);
  return ex ? (int32_t)ex->n_modules : bbw_last();
}

int32_t bb_wasm_example_record(const char *name, int32_t module) {
  bbw_error_clear();
  bbw_result_clear();
  const bb_example *ex = bbw_example_named(name, module);
  if (ex == NULL) return bbw_last();
  bb_error err;
  bb_error_clear(&err);
  bb_model *recorded = NULL;
  int rc = bb_module_build(ex->modules[module], NULL, &recorded, &err);
  uint8_t *bytes = NULL;
  size_t len = 0;
  if (rc == 0) rc = bb_model_encode(recorded, &bytes, &len, &err);
  bb_model_free(recorded);
  if (rc < 0) return bbw_fail_from(rc, &err, "example record");
  bbw_result_take(bytes, len);
  return BB_OK;
}
