/* Helpers shared by the compiler tests: compiling recorded or hand-built models,
 * expecting a failure of one kind, finding partitions and nodes, and onnx.checker. */
#ifndef BB_TESTS_COMPILER_CCTEST_H
#define BB_TESTS_COMPILER_CCTEST_H

#include "../dsl/dsltest.h"
#include "bb/compiler.h"

#define F32 BB_TYPE_TENSOR_F32
#define F64 BB_TYPE_TENSOR_F64
#define U8 BB_TYPE_TENSOR_U8

/* Declares a component type whose storage ports all hold `type`. */
static inline void ct_declare(bb_compiler *c, const char *name, const char *type) {
  bb_component_port ports[] = {{"tensor", type}, {"vector", type}, {"element", type},
                               {"sample", type}, {"in", type},     {"out", type}};
  bb_component_decl d = {sizeof d, name, ports, 6, NULL, 0};
  bb_error err;
  CHECK_MSG(bb_compiler_declare_component(c, &d, &err) == 0, "declare %s: %s", name, err.message);
}

static inline void ct_bind(bb_compiler *c, bb_role role, const char *slot, const char *type) {
  bb_error err;
  CHECK_MSG(bb_compiler_bind(c, role, slot, type, NULL, &err) == 0, "bind %s: %s", slot, err.message);
}

/* Compiles through the bytes API; NULL (with a failed check) on failure. */
static inline bb_model *ct_compile(bb_compiler *c, const bb_model *in) {
  uint8_t *bytes, *out;
  size_t len, out_len;
  if (dt_encode(in, &bytes, &len)) return NULL;
  bb_error err;
  int rc = bb_compiler_compile(c, bytes, len, &out, &out_len, &err);
  bb_buffer_free(NULL, bytes);
  CHECK_MSG(rc == 0, "compile failed: %s", rc ? err.message : "");
  if (rc) return NULL;
  bb_model *m = NULL;
  rc = bb_model_decode(out, out_len, NULL, NULL, &m, &err);
  CHECK_MSG(rc == 0, "artifact does not decode: %s", rc ? err.message : "");
  bb_buffer_free(NULL, out);
  return m;
}

/* Compiles and expects `kind` with every fragment in the message. */
static inline void ct_compile_fails(bb_compiler *c, const bb_model *in, bb_compile_error kind,
                                    const char *const *fragments) {
  bb_model *out = NULL;
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_compiler_compile_model(c, in, &out, &err);
  CHECK_MSG(rc != 0, "compile succeeded, wanted %s", bb_compile_error_name(kind));
  CHECK_MSG(bb_compiler_error_kind(c) == kind, "got %s (%s), wanted %s", bb_compile_error_name(bb_compiler_error_kind(c)),
            err.message, bb_compile_error_name(kind));
  CHECK(out == NULL);
  CHECK_EQ_INT(err.code, rc);
  for (size_t i = 0; fragments && fragments[i]; i++)
    CHECK_MSG(strstr(err.message, fragments[i]) != NULL, "message \"%s\" lacks \"%s\"", err.message, fragments[i]);
  bb_model_free(out);
}

/* The function whose name is base#<16 hex>. */
static inline const bb_function *ct_partition(const bb_model *m, const char *base) {
  size_t n = strlen(base);
  for (size_t i = 0; i < m->functions.len; i++) {
    const char *name = m->functions.items[i]->name;
    if (name && strncmp(name, base, n) == 0 && name[n] == '#' && strlen(name + n + 1) == 16) {
      bool hex = true;
      for (const char *p = name + n + 1; *p; p++) hex &= (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f');
      if (hex) return m->functions.items[i];
    }
  }
  return NULL;
}

/* The i-th node of f with that op type (0-based), or NULL. */
static inline const bb_ir_node *ct_op(const bb_function *f, const char *op, size_t nth) {
  for (size_t i = 0; f && i < f->nodes.len; i++)
    if (strcmp(f->nodes.items[i]->op_type, op) == 0 && nth-- == 0) return f->nodes.items[i];
  return NULL;
}

static inline size_t ct_count(const bb_function *f, const char *op) {
  size_t n = 0;
  for (size_t i = 0; f && i < f->nodes.len; i++) n += strcmp(f->nodes.items[i]->op_type, op) == 0;
  return n;
}

static inline const char *ct_meta(const bb_ir_node *n, const char *key) { return n ? bb_kv_get(&n->metadata, key) : NULL; }

/* The binding value for partition function f and slot. */
static inline const char *ct_binding(const bb_model *m, const bb_function *f, const char *slot) {
  char key[512];
  snprintf(key, sizeof key, BB_KEY_BINDING_PREFIX "%s.%s", f ? f->name : "?", slot);
  return bb_kv_get(&m->metadata, key);
}

/* A value's denotation in f ("" when untyped). */
static inline const char *cc_type_or_empty(const bb_function *f, const char *value) {
  const bb_value_info *vi = bb_vilist_find(&f->value_infos, value);
  return vi && vi->type && vi->type->denotation ? vi->type->denotation : "";
}

/* A hand-built one-function model: functions[0] named name (domain module). */
static inline bb_model *ct_model(const char *name, bb_function **root) {
  bb_model *m = bb_model_new(NULL);
  *root = bb_function_new(m, name, BB_DOMAIN_MODULE);
  bb_model_add_function(m, *root);
  return m;
}

static inline bb_ir_node *ct_node(bb_model *m, bb_function *f, const char *op, const char *domain,
                               const char *const *ins, const char *const *outs) {
  bb_ir_node *n = bb_ir_node_new(m, op, domain, NULL);
  for (size_t i = 0; ins[i]; i++) bb_strlist_append(m, &n->inputs, ins[i]);
  for (size_t i = 0; outs[i]; i++) {
    bb_strlist_append(m, &n->outputs, outs[i]);
    if (!bb_vilist_find(&f->value_infos, outs[i])) bb_vilist_add(m, &f->value_infos, outs[i], bb_value_type_new(m, BB_TYPE_BYTES));
  }
  bb_nodelist_append(m, &f->nodes, n);
  return n;
}

static inline void ct_input(bb_model *m, bb_function *f, const char *name, const char *type) {
  bb_strlist_append(m, &f->inputs, name);
  bb_vilist_add(m, &f->value_infos, name, bb_value_type_new(m, type));
}

#endif
