/* Helpers shared by the DSL tests: exact comparisons of recorded functions and nodes
 * against lists written out by hand, building a module, the encode/decode round trip and
 * onnx.checker. Lists are NULL-terminated; metadata lists alternate key, value. */
#ifndef BB_TESTS_DSL_DSLTEST_H
#define BB_TESTS_DSL_DSLTEST_H

#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bb/graph.h"
#include "harness.h"

#define STRS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NONE ((const char *const[]){NULL})

static inline bool dt_strs_equal(const bb_strlist *l, const char *const *want) {
  size_t n = 0;
  while (want[n]) n++;
  if (l->len != n) return false;
  for (size_t i = 0; i < n; i++)
    if (strcmp(l->items[i], want[i]) != 0) return false;
  return true;
}

static inline void dt_print_strs(const char *what, const bb_strlist *l) {
  fprintf(stderr, "    %s = [", what);
  for (size_t i = 0; i < l->len; i++) fprintf(stderr, "%s\"%s\"", i ? ", " : "", l->items[i]);
  fprintf(stderr, "]\n");
}

#define CHECK_STRS(list_, want_)                                                 \
  do {                                                                           \
    bool dt_ok_ = dt_strs_equal((list_), (want_));                               \
    CHECK_MSG(dt_ok_, "%s differs", #list_);                                     \
    if (!dt_ok_) dt_print_strs(#list_, (list_));                                 \
  } while (0)

static inline bool dt_kvs_equal(const bb_kvlist *l, const char *const *want) {
  size_t n = 0;
  while (want[n]) n++;
  if (n % 2 || l->len != n / 2) return false;
  for (size_t i = 0; i < l->len; i++)
    if (strcmp(l->items[i].key, want[2 * i]) != 0 || strcmp(l->items[i].value, want[2 * i + 1]) != 0) return false;
  return true;
}

#define CHECK_KVS(list_, want_)                                                  \
  do {                                                                           \
    bool dt_ok_ = dt_kvs_equal((list_), (want_));                                \
    CHECK_MSG(dt_ok_, "%s differs", #list_);                                     \
    if (!dt_ok_)                                                                 \
      for (size_t dt_i_ = 0; dt_i_ < (list_)->len; dt_i_++)                      \
        fprintf(stderr, "    %s = %s\n", (list_)->items[dt_i_].key, (list_)->items[dt_i_].value); \
  } while (0)

/* The node's op type, domain, inputs, outputs and metadata, all exactly. */
#define CHECK_NODE(node_, op_, domain_, ins_, outs_, meta_)                      \
  do {                                                                           \
    const bb_ir_node *dt_n_ = (node_);                                              \
    CHECK(dt_n_ != NULL);                                                        \
    if (dt_n_) {                                                                 \
      CHECK_STR(dt_n_->op_type, (op_));                                          \
      CHECK_STR(dt_n_->domain ? dt_n_->domain : "", (domain_));                  \
      CHECK(dt_n_->name == NULL);                                                \
      CHECK_STRS(&dt_n_->inputs, (ins_));                                        \
      CHECK_STRS(&dt_n_->outputs, (outs_));                                      \
      CHECK_KVS(&dt_n_->metadata, (meta_));                                      \
    }                                                                            \
  } while (0)

/* The recorded type of a value of function f: its denotation ("" when absent) and how
 * it is encoded (tensor elem type, or opaque name). */
static inline const bb_type *dt_type(const bb_function *f, const char *value) {
  const bb_value_info *vi = bb_vilist_find(&f->value_infos, value);
  return vi ? vi->type : NULL;
}

#define CHECK_OPAQUE(f_, value_, denotation_)                                      \
  do {                                                                             \
    const bb_type *dt_t_ = dt_type((f_), (value_));                                \
    CHECK_MSG(dt_t_ != NULL, "no value info for %s", (value_));                    \
    if (dt_t_) {                                                                   \
      CHECK_EQ_INT(dt_t_->kind, BB_TYPE_OPAQUE);                                   \
      CHECK_STR(dt_t_->opaque_domain, BB_DOMAIN_FRAMEWORK);                        \
      CHECK_STR(dt_t_->opaque_name ? dt_t_->opaque_name : "", (denotation_));      \
      CHECK_STR(dt_t_->denotation ? dt_t_->denotation : "", (denotation_));        \
    }                                                                              \
  } while (0)

#define CHECK_TENSOR(f_, value_, denotation_, elem_)                               \
  do {                                                                             \
    const bb_type *dt_t_ = dt_type((f_), (value_));                                \
    CHECK_MSG(dt_t_ != NULL, "no value info for %s", (value_));                    \
    if (dt_t_) {                                                                   \
      CHECK_EQ_INT(dt_t_->kind, BB_TYPE_TENSOR);                                   \
      CHECK_EQ_INT(dt_t_->elem_type, (elem_));                                     \
      CHECK(dt_t_->shape == NULL);                                                 \
      CHECK_STR(dt_t_->denotation, (denotation_));                                 \
    }                                                                              \
  } while (0)

static inline bb_function *dt_fn(const bb_model *m, const char *name) {
  return bb_model_find_function(m, BB_DOMAIN_MODULE, name);
}

static inline const bb_ir_node *dt_node(const bb_function *f, size_t i) {
  return f && i < f->nodes.len ? f->nodes.items[i] : NULL;
}

/* Builds a module that must build; NULL (with a failed check) otherwise. */
static inline bb_model *dt_build(const bb_module *m) {
  bb_model *out = NULL;
  bb_error err;
  int rc = bb_module_build(m, NULL, &out, &err);
  CHECK_MSG(rc == 0, "building %s failed: %s", m->name, rc ? err.message : "");
  return out;
}

/* Builds a module that must fail with `code` and a message containing every fragment. */
static inline void dt_build_fails(const bb_module *m, int code, const char *const *fragments) {
  bb_model *out = (bb_model *)1;
  bb_error err;
  int rc = bb_module_build(m, NULL, &out, &err);
  CHECK_MSG(rc == code, "building %s: got %d (%s), want %d", m->name, rc, err.message, code);
  CHECK_EQ_INT(err.code, rc);
  CHECK(out == NULL);
  for (size_t i = 0; fragments[i]; i++)
    CHECK_MSG(strstr(err.message, fragments[i]) != NULL, "message \"%s\" lacks \"%s\"", err.message, fragments[i]);
  if (rc == 0) bb_model_free(out);
}

/* Encodes m; the caller frees *bytes with bb_buffer_free(NULL, ...). */
static inline int dt_encode(const bb_model *m, uint8_t **bytes, size_t *len) {
  bb_error err;
  int rc = bb_model_encode(m, bytes, len, &err);
  CHECK_MSG(rc == 0, "encode failed: %s", err.message);
  return rc;
}

/* Encode, decode, and the decoded model equals the original. */
static inline void dt_check_roundtrip(const bb_model *m) {
  uint8_t *bytes;
  size_t len;
  if (dt_encode(m, &bytes, &len)) return;
  bb_model *back = NULL;
  bb_error err;
  int rc = bb_model_decode(bytes, len, NULL, NULL, &back, &err);
  CHECK_MSG(rc == 0, "decode failed: %s", err.message);
  if (back) CHECK_MSG(bb_model_equal(m, back), "decoded model differs from the recorded one");
  bb_model_free(back);
  bb_buffer_free(NULL, bytes);
}

/* Runs the real onnx.checker on m; returns its exit status (0 = accepted). */
static inline int dt_onnx_check(const bb_model *m, const char *tag) {
  uint8_t *bytes;
  size_t len;
  if (dt_encode(m, &bytes, &len)) return -1;
  char path[256], errpath[300], cmd[1024];
  snprintf(path, sizeof path, "%s/bb-dsl-%s-%ld.onnx", BB_TEST_BINARY_DIR, tag, (long)getpid());
  snprintf(errpath, sizeof errpath, "%s.err", path);
  FILE *f = fopen(path, "wb");
  size_t wrote = f ? fwrite(bytes, 1, len, f) : 0;
  int rc = f && fclose(f) == 0 && wrote == len ? 0 : -1;
  bb_buffer_free(NULL, bytes);
  if (rc) return -1;
  snprintf(cmd, sizeof cmd,
           "%s -c 'import onnx,sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)' '%s' 2>'%s'",
           BB_TEST_PYTHON, path, errpath);
  rc = system(cmd);
  if (rc) {
    FILE *e = fopen(errpath, "r");
    char line[400], last[400] = "";
    while (e && fgets(line, sizeof line, e)) memcpy(last, line, sizeof last);
    if (e) fclose(e);
    printf("    onnx.checker said: %s", last);
  }
  remove(path);
  remove(errpath);
  return rc;
}

#endif
