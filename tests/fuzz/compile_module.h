/* Shared by the node fuzz targets: a Module compiled once into an artifact (types
 * permissive, as the targets feed values of every kind). Aborts on failure: a target
 * without its artifact fuzzes nothing. */
#ifndef BB_TESTS_FUZZ_COMPILE_MODULE_H
#define BB_TESTS_FUZZ_COMPILE_MODULE_H

#include <stdlib.h>

#include "bb/compiler.h"

static inline void fuzz_compile(const bb_module *module, uint8_t **artifact, size_t *artifact_len) {
  bb_model *m = NULL;
  uint8_t *bytes = NULL;
  size_t len = 0;
  bb_error err;
  if (bb_module_build(module, NULL, &m, &err) || bb_model_encode(m, &bytes, &len, &err)) abort();
  bb_compiler *c = bb_compiler_new(NULL);
  bb_compiler_set_permissive_types(c, true);
  if (bb_compiler_compile(c, bytes, len, artifact, artifact_len, &err)) abort();
  bb_compiler_free(c);
  bb_buffer_free(NULL, bytes);
  bb_model_free(m);
}

#endif /* BB_TESTS_FUZZ_COMPILE_MODULE_H */
