/* bytesandbrains — the compiler through bb.wasm's ABI: bindings, declarations of the
 * host's concrete types, compiling recorded Modules into artifacts, and describing an
 * artifact. */
#include <stdlib.h>
#include <string.h>

#include "abi_internal.h"
#include "bb/compiler.h"
#include "bb/roles.h"
#include "bb_wasm.h"

static bb_compiler *compiler_of(int32_t handle) {
  bbw_slot *s = bbw_handle_slot(handle, SLOT_COMPILER);
  return s ? s->object : NULL;
}

int32_t bb_wasm_compiler_new(void) {
  bbw_error_clear();
  bb_compiler *c = bb_compiler_new(NULL);
  if (c == NULL) return bbw_fail(BB_ERR_NOMEM, "compiler: out of memory");
  /* Backend ops are checked against CpuBackend's op set, as `bb compile` checks them */
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_cpu_backend_declare_op_set(c, &err);
  if (rc < 0) {
    bb_compiler_free(c);
    return bbw_fail_from(rc, &err, "compiler");
  }
  int32_t handle = bbw_handle_issue(SLOT_COMPILER, c);
  if (handle < 0) bb_compiler_free(c);
  return handle;
}

int32_t bb_wasm_compiler_configure_example(int32_t compiler, const char *name, int32_t module) {
  bbw_error_clear();
  bb_compiler *c = compiler_of(compiler);
  if (c == NULL) return bbw_last();
  const bb_example *ex = bbw_example_named(name, module);
  if (ex == NULL) return bbw_last();
  bb_error err;
  bb_error_clear(&err);
  int rc = ex->configure(c, (size_t)module, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "configure example") : BB_OK;
}

int32_t bb_wasm_compiler_bind(int32_t compiler, int32_t role, const char *slot, const char *type,
                              const char *config) {
  bbw_error_clear();
  bb_compiler *c = compiler_of(compiler);
  if (c == NULL) return bbw_last();
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_compiler_bind(c, (bb_role)role, slot, type, config, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "compiler bind") : BB_OK;
}

int32_t bb_wasm_compiler_unbind(int32_t compiler, const char *slot) {
  bbw_error_clear();
  bb_compiler *c = compiler_of(compiler);
  if (c == NULL) return bbw_last();
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_compiler_unbind(c, slot, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "compiler unbind") : BB_OK;
}

/* The role a name ("Model", "DataSource", ...) stands for; 0 when none. */
static bb_role role_named(const char *name, size_t len) {
  for (int r = BB_ROLE_FIRST; r <= BB_ROLE_LAST; r++) {
    const char *known = bb_role_name((bb_role)r);
    if (known && strlen(known) == len && memcmp(known, name, len) == 0) return (bb_role)r;
  }
  return (bb_role)0;
}

#define DECLARE_MAX_DEPS 16

int32_t bb_wasm_compiler_declare(int32_t compiler, const char *type, const char *storage, const char *deps) {
  bbw_error_clear();
  bb_compiler *c = compiler_of(compiler);
  if (c == NULL) return bbw_last();
  if (type == NULL) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "compiler declare: no type name");
  /* deps: "Role:slot,Role:slot" */
  bb_component_dep parsed[DECLARE_MAX_DEPS];
  char names[DECLARE_MAX_DEPS][BBW_NAME_MAX];
  size_t n_deps = 0;
  for (const char *at = deps ? deps : ""; *at;) {
    const char *end = strchr(at, ',');
    size_t len = end ? (size_t)(end - at) : strlen(at);
    const char *colon = memchr(at, ':', len);
    bb_role role = colon ? role_named(at, (size_t)(colon - at)) : (bb_role)0;
    size_t slot_len = colon ? len - (size_t)(colon - at) - 1 : 0;
    if (role == 0 || slot_len == 0 || slot_len >= BBW_NAME_MAX)
      return bbw_fail(BB_ERR_INVALID_ARGUMENT,
                      "compiler declare %s: dependency \"%.*s\" is not Role:slot (a role name such as Model, then a slot)",
                      type, (int)len, at);
    if (n_deps == DECLARE_MAX_DEPS)
      return bbw_fail(BB_ERR_LIMIT, "compiler declare %s: more than %d dependencies", type, DECLARE_MAX_DEPS);
    memcpy(names[n_deps], colon + 1, slot_len);
    names[n_deps][slot_len] = '\0';
    parsed[n_deps] = (bb_component_dep){role, names[n_deps]};
    n_deps++;
    at += len + (end != NULL);
  }
  bb_component_port ports[] = {{"tensor", storage}, {"vector", storage}, {"element", storage},
                               {"sample", storage}, {"in", storage},     {"out", storage}};
  bool stores = storage != NULL && storage[0] != '\0';
  bb_component_decl d = {sizeof d, type, stores ? ports : NULL, stores ? sizeof ports / sizeof *ports : 0,
                         n_deps ? parsed : NULL, n_deps};
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_compiler_declare_component(c, &d, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "compiler declare") : BB_OK;
}

/* Most ops one declared op set lists. */
#define OP_SET_MAX 4096

int32_t bb_wasm_compiler_declare_op_set(int32_t compiler, const char *type, const char *ops, size_t ops_len) {
  bbw_error_clear();
  bb_compiler *c = compiler_of(compiler);
  if (c == NULL) return bbw_last();
  int32_t n = bbw_count_strings(ops, ops_len, 2 * OP_SET_MAX, "compiler declare_op_set");
  if (n < 0) return n;
  if (n % 2 != 0)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "compiler declare_op_set: %d strings do not pair into (domain, op_type)",
                    (int)n);
  bb_component_op *list = malloc(((size_t)n / 2 + 1) * sizeof *list);
  if (list == NULL) return bbw_fail(BB_ERR_NOMEM, "compiler declare_op_set: out of memory");
  const char *at = ops;
  for (int32_t i = 0; i < n / 2; i++) {
    list[i].domain = at;
    at += strlen(at) + 1;
    list[i].op_type = at;
    at += strlen(at) + 1;
  }
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_compiler_declare_op_set(c, type, list, (size_t)n / 2, &err);
  free(list);
  return rc < 0 ? bbw_fail_from(rc, &err, "compiler declare_op_set") : BB_OK;
}

int32_t bb_wasm_compiler_set_permissive(int32_t compiler, int32_t permissive) {
  bbw_error_clear();
  bb_compiler *c = compiler_of(compiler);
  if (c == NULL) return bbw_last();
  bb_compiler_set_permissive_types(c, permissive != 0);
  return BB_OK;
}

int32_t bb_wasm_compiler_compile(int32_t compiler, const uint8_t *model, size_t len) {
  bbw_error_clear();
  bbw_result_clear();
  bb_compiler *c = compiler_of(compiler);
  if (c == NULL) return bbw_last();
  if (model == NULL && len > 0) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "compile: NULL model of %zu bytes", len);
  uint8_t *out = NULL;
  size_t out_len = 0;
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_compiler_compile(c, model, len, &out, &out_len, &err);
  if (rc < 0) {
    /* the message names the kind first ("UnresolvedType: ..."), unless it is not a compile
     * error but, e.g., a model that does not decode */
    const char *kind = bb_compile_error_name(bb_compiler_error_kind(c));
    const char *detail = err.message[0] ? err.message : bb_strerror(rc);
    if (strncmp(detail, kind, strlen(kind)) == 0) return bbw_fail(rc, "compile failed: %s", detail);
    return bbw_fail(rc, "compile failed (%s): %s", kind, detail);
  }
  bbw_result_take(out, out_len);
  return BB_OK;
}

int32_t bb_wasm_compiler_error_kind(int32_t compiler) {
  bbw_error_clear();
  bb_compiler *c = compiler_of(compiler);
  return c ? (int32_t)bb_compiler_error_kind(c) : bbw_last();
}

const char *bb_wasm_compile_error_name(int32_t kind) { return bb_compile_error_name((bb_compile_error)kind); }

int32_t bb_wasm_compiler_free(int32_t compiler) {
  bbw_error_clear();
  bbw_slot *s = bbw_handle_slot(compiler, SLOT_COMPILER);
  if (s == NULL) return bbw_last();
  bb_compiler_free(s->object);
  bbw_slot_release(s);
  return BB_OK;
}

int32_t bb_wasm_artifact_describe(const uint8_t *artifact, size_t len, int32_t format) {
  bbw_error_clear();
  bbw_result_clear();
  if (format < BB_ARTIFACT_TEXT || format > BB_ARTIFACT_JSON)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "describe: format %d is not 0 (text), 1 (dot) or 2 (json)", (int)format);
  if (artifact == NULL && len > 0) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "describe: NULL artifact of %zu bytes", len);
  bb_error err;
  bb_error_clear(&err);
  bb_model *model = NULL;
  int rc = bb_model_decode(artifact, len, NULL, NULL, &model, &err);
  if (rc < 0) return bbw_fail_from(rc, &err, "describe");
  char *text = NULL;
  size_t text_len = 0;
  rc = bb_artifact_describe(model, (bb_artifact_format)format, &text, &text_len, &err);
  bb_model_free(model);
  if (rc < 0) return bbw_fail_from(rc, &err, "describe");
  bbw_result_take((uint8_t *)text, text_len);
  return BB_OK;
}
