/* bytesandbrains — the engine half of bb.wasm's ABI: the compiler and the examples'
 * Modules, data sets, nodes (install, deliver, poll, ...) and components whose methods
 * run in the host (JavaScript). See bb_wasm.h for the contract and the byte layouts. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bb/compiler.h"
#include "bb/graph.h"
#include "bb/roles.h"
#include "bb/runtime.h"
#include "bb/value.h"
#include "bb/wire.h"
#include "bb_wasm.h"
#include "bb_wasm_internal.h"
#include "programs/examples.h"
#include "programs/fixtures.h"
#include "components/data/dataset.h"
#include "util/error.h"

/* Longest type or slot name this file copies, with its NUL. */
#define NAME_MAX_BYTES 128

/* ---- little-endian byte writing and reading -------------------------------------- */

typedef struct out_buf {
  uint8_t *data;
  size_t len, cap;
  bool failed; /* out of memory (or past SIZE_MAX) at some point */
} out_buf;

static bool out_reserve(out_buf *b, size_t more) {
  if (b->failed) return false;
  if (more > SIZE_MAX - b->len) return !(b->failed = true);
  if (b->len + more <= b->cap) return true;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + more) cap = cap > SIZE_MAX / 2 ? b->len + more : cap * 2;
  uint8_t *grown = realloc(b->data, cap);
  if (grown == NULL) return !(b->failed = true);
  b->data = grown;
  b->cap = cap;
  return true;
}

static void out_bytes(out_buf *b, const void *data, size_t len) {
  if (!out_reserve(b, len)) return;
  if (len) memcpy(b->data + b->len, data, len);
  b->len += len;
}

static void out_u32(out_buf *b, uint32_t v) {
  uint8_t le[4];
  for (int i = 0; i < 4; i++) le[i] = (uint8_t)(v >> (8 * i));
  out_bytes(b, le, 4);
}

static void out_u64(out_buf *b, uint64_t v) {
  uint8_t le[8];
  for (int i = 0; i < 8; i++) le[i] = (uint8_t)(v >> (8 * i));
  out_bytes(b, le, 8);
}

/* A u32 length, then the bytes (a NULL string is empty). */
static void out_field(out_buf *b, const void *data, size_t len) {
  if (len > UINT32_MAX) {
    b->failed = true;
    return;
  }
  out_u32(b, (uint32_t)len);
  out_bytes(b, data, len);
}

static void out_text(out_buf *b, const char *text) { out_field(b, text, text ? strlen(text) : 0); }

/* Hands the buffer to the result (or records out of memory and frees it). */
static int32_t out_finish(out_buf *b, const char *what) {
  if (b->failed) {
    free(b->data);
    return bbw_fail(BB_ERR_NOMEM, "%s: out of memory", what);
  }
  if (b->data == NULL && !out_reserve(b, 1)) return bbw_fail(BB_ERR_NOMEM, "%s: out of memory", what);
  bbw_result_take(b->data, b->len);
  return BB_OK;
}

static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* ---- value lists ------------------------------------------------------------------- */

/* Most values one list may carry: more than any op has inputs or outputs. */
#define VALUE_LIST_MAX 4096

typedef struct value_list {
  bb_val **items; /* NULL entries: absent */
  size_t n;
} value_list;

static void value_list_free(value_list *l) {
  for (size_t i = 0; i < l->n; i++) bb_val_release(l->items[i]);
  free(l->items);
  *l = (value_list){0};
}

/* Decodes a value list (bb_wasm.h, "Value lists"); every failure is recorded, naming the
 * item. */
static int32_t value_list_decode(const uint8_t *data, size_t len, const char *what, value_list *out) {
  *out = (value_list){0};
  if (data == NULL && len > 0) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "%s: NULL value list of %zu bytes", what, len);
  if (len < 8) return bbw_fail(BB_ERR_MALFORMED, "%s: a value list starts with a u64 count (%zu bytes given)", what, len);
  uint64_t n = get_u64(data);
  if (n > VALUE_LIST_MAX || n > (len - 8) / 16)
    return bbw_fail(BB_ERR_MALFORMED, "%s: %llu values do not fit in a %zu-byte list (at most %d)", what,
                    (unsigned long long)n, len, VALUE_LIST_MAX);
  out->items = calloc(n ? (size_t)n : 1, sizeof *out->items);
  if (out->items == NULL) return bbw_fail(BB_ERR_NOMEM, "%s: out of memory", what);
  size_t at = 8;
  for (size_t i = 0; i < (size_t)n; i++) {
    if (len - at < 16) {
      value_list_free(out);
      return bbw_fail(BB_ERR_MALFORMED, "%s: value %zu is cut short", what, i);
    }
    uint64_t hash = get_u64(data + at), size = get_u64(data + at + 8);
    at += 16;
    if (size > len - at) {
      value_list_free(out);
      return bbw_fail(BB_ERR_MALFORMED, "%s: value %zu claims %llu bytes, %zu are left", what, i,
                      (unsigned long long)size, len - at);
    }
    out->n = i + 1;
    if (hash != 0) {
      bb_error err;
      bb_error_clear(&err);
      int rc = bb_val_decode(hash, data + at, (size_t)size, NULL, &out->items[i], &err);
      if (rc < 0) {
        value_list_free(out);
        return bbw_fail(rc, "%s: value %zu: %s", what, i, err.message[0] ? err.message : bb_strerror(rc));
      }
    } else if (size != 0) {
      value_list_free(out);
      return bbw_fail(BB_ERR_MALFORMED, "%s: value %zu is absent (type hash 0) but has %llu bytes", what, i,
                      (unsigned long long)size);
    }
    at += (size_t)size;
  }
  if (at != len) {
    size_t extra = len - at;
    value_list_free(out);
    return bbw_fail(BB_ERR_MALFORMED, "%s: %zu bytes after the last value", what, extra);
  }
  return BB_OK;
}

/* Appends one value (its hash, length and payload; NULL: absent). */
static void out_value(out_buf *b, const bb_val *v) {
  if (v == NULL) {
    out_u64(b, 0);
    out_u64(b, 0);
    return;
  }
  size_t size = bb_val_encoded_size(v);
  out_u64(b, bb_val_kind_hash((int)v->kind));
  out_u64(b, size);
  if (!out_reserve(b, size)) return;
  b->len += bb_val_encode_into(v, b->data + b->len);
}

/* ---- peer ids ----------------------------------------------------------------------- */

static int32_t peer_parse(const char *text, const char *what, bb_peer_id *out) {
  if (text == NULL) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "%s: no peer id", what);
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_peer_id_from_text(text, out, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, what) : BB_OK;
}

/* NUL-terminated strings back to back in packed[0..len): how many, or a recorded failure
 * when the last one is not terminated or there are more than max. */
static int32_t count_strings(const char *packed, size_t len, size_t max, const char *what) {
  if (len == 0) return 0;
  if (packed == NULL) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "%s: NULL list of %zu bytes", what, len);
  if (packed[len - 1] != '\0') return bbw_fail(BB_ERR_INVALID_ARGUMENT, "%s: the last name is not NUL-terminated", what);
  size_t n = 0;
  for (size_t i = 0; i < len; i++) n += packed[i] == '\0';
  if (n > max) return bbw_fail(BB_ERR_LIMIT, "%s: %zu names, at most %zu", what, n, max);
  return (int32_t)n;
}

/* ---- examples and the compiler --------------------------------------------------------- */

static const bb_example *example_at(int32_t i) {
  size_t count = 0;
  const bb_example *const *all = bb_examples(&count);
  if (i < 0 || (size_t)i >= count) {
    bbw_fail(BB_ERR_INVALID_ARGUMENT, "example %d does not exist (there are %zu)", (int)i, count);
    return NULL;
  }
  return all[i];
}

static const bb_example *example_named(const char *name, int32_t module) {
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
  const bb_example *ex = example_named(name, module);
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

static bb_compiler *compiler_of(int32_t handle) {
  bbw_slot *s = bbw_handle_slot(handle, SLOT_COMPILER);
  return s ? s->object : NULL;
}

int32_t bb_wasm_compiler_new(void) {
  bbw_error_clear();
  bb_compiler *c = bb_compiler_new(NULL);
  if (c == NULL) return bbw_fail(BB_ERR_NOMEM, "compiler: out of memory");
  int32_t handle = bbw_handle_issue(SLOT_COMPILER, c);
  if (handle < 0) bb_compiler_free(c);
  return handle;
}

int32_t bb_wasm_compiler_configure_example(int32_t compiler, const char *name, int32_t module) {
  bbw_error_clear();
  bb_compiler *c = compiler_of(compiler);
  if (c == NULL) return bbw_last();
  const bb_example *ex = example_named(name, module);
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
  for (int r = 1; r < 32; r++) {
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
  char names[DECLARE_MAX_DEPS][NAME_MAX_BYTES];
  size_t n_deps = 0;
  for (const char *at = deps ? deps : ""; *at;) {
    const char *end = strchr(at, ',');
    size_t len = end ? (size_t)(end - at) : strlen(at);
    const char *colon = memchr(at, ':', len);
    bb_role role = colon ? role_named(at, (size_t)(colon - at)) : (bb_role)0;
    size_t slot_len = colon ? len - (size_t)(colon - at) - 1 : 0;
    if (role == 0 || slot_len == 0 || slot_len >= NAME_MAX_BYTES)
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

/* ---- data sets ----------------------------------------------------------------------- */

/* A data set shared by its handle and the nodes that read it (an ArraySource's host_data
 * must outlive the node), freed with its last user. */
typedef struct shared_dataset {
  bb_dataset data;
  uint32_t users;
} shared_dataset;

static void dataset_release(shared_dataset *d) {
  if (d == NULL || --d->users > 0) return;
  bb_dataset_free(&d->data);
  free(d);
}

static shared_dataset *dataset_of(int32_t handle) {
  bbw_slot *s = bbw_handle_slot(handle, SLOT_DATASET);
  return s ? s->object : NULL;
}

/* Issues a handle for a filled data set (freeing it on failure). */
static int32_t dataset_issue(bb_dataset *data) {
  shared_dataset *d = malloc(sizeof *d);
  if (d == NULL) {
    bb_dataset_free(data);
    return bbw_fail(BB_ERR_NOMEM, "dataset: out of memory");
  }
  *d = (shared_dataset){*data, 1};
  int32_t handle = bbw_handle_issue(SLOT_DATASET, d);
  if (handle < 0) dataset_release(d);
  return handle;
}

int32_t bb_wasm_dataset_from_csv(const uint8_t *csv, size_t len, int32_t label_column, int32_t has_header) {
  bbw_error_clear();
  if (csv == NULL && len > 0) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "dataset csv: NULL data of %zu bytes", len);
  bb_csv_options opt = {label_column, has_header != 0};
  bb_dataset data = {0};
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_dataset_from_csv(csv, len, &opt, NULL, &data, &err);
  if (rc < 0) return bbw_fail_from(rc, &err, "dataset csv");
  return dataset_issue(&data);
}

int32_t bb_wasm_dataset_from_tensors(int32_t features, int32_t labels) {
  bbw_error_clear();
  const bb_tensor *x = bbw_tensor_of(features);
  if (x == NULL) return bbw_last();
  const bb_tensor *y = labels ? bbw_tensor_of(labels) : NULL;
  if (labels && y == NULL) return bbw_last();
  if (x->dtype != BB_DTYPE_FLOAT || x->rank != 2 || x->dims[0] < 1 || x->dims[1] < 1)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "dataset: features must be a float32 [rows, dim] tensor with rows, dim >= 1");
  if (y && (y->dtype != BB_DTYPE_FLOAT || y->rank != 1 || y->dims[0] != x->dims[0]))
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "dataset: labels must be a float32 [rows] tensor (%lld rows)",
                    (long long)x->dims[0]);
  bb_dataset data = {0};
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_dataset_init(&data, (size_t)x->dims[0], (size_t)x->dims[1], y != NULL, NULL, &err);
  if (rc < 0) return bbw_fail_from(rc, &err, "dataset");
  memcpy(data.features, bb_tensor_data(x), (size_t)x->numel * sizeof(float));
  if (y) memcpy(data.labels, bb_tensor_data(y), (size_t)y->numel * sizeof(float));
  return dataset_issue(&data);
}

int32_t bb_wasm_dataset_subset(int32_t dataset, const uint32_t *rows, size_t n) {
  bbw_error_clear();
  const shared_dataset *d = dataset_of(dataset);
  if (d == NULL) return bbw_last();
  if (rows == NULL && n > 0) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "dataset subset: NULL rows");
  size_t *indices = malloc((n ? n : 1) * sizeof *indices);
  if (indices == NULL) return bbw_fail(BB_ERR_NOMEM, "dataset subset: out of memory");
  for (size_t i = 0; i < n; i++) indices[i] = rows[i];
  bb_dataset data = {0};
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_dataset_subset(&d->data, indices, n, NULL, &data, &err);
  free(indices);
  if (rc < 0) return bbw_fail_from(rc, &err, "dataset subset");
  return dataset_issue(&data);
}

/* The shape as the result: u64 rows, u64 dim, u64 1 when labelled (else 0). */
int32_t bb_wasm_dataset_shape(int32_t dataset) {
  bbw_error_clear();
  bbw_result_clear();
  const shared_dataset *d = dataset_of(dataset);
  if (d == NULL) return bbw_last();
  out_buf b = {0};
  out_u64(&b, d->data.n);
  out_u64(&b, d->data.dim);
  out_u64(&b, d->data.labels != NULL);
  return out_finish(&b, "dataset shape");
}

int32_t bb_wasm_dataset_tensor(int32_t dataset, int32_t labels) {
  bbw_error_clear();
  const shared_dataset *d = dataset_of(dataset);
  if (d == NULL) return bbw_last();
  if (labels && d->data.labels == NULL) return bbw_fail(BB_ERR_NOT_FOUND, "dataset: it has no labels");
  int64_t dims[2] = {(int64_t)d->data.n, (int64_t)d->data.dim};
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, labels ? 1 : 2, dims);
  if (t == NULL) return bbw_fail(BB_ERR_NOMEM, "dataset tensor: out of memory");
  memcpy(bb_tensor_data(t), labels ? d->data.labels : d->data.features, (size_t)t->numel * sizeof(float));
  return bbw_tensor_issue(t);
}

int32_t bb_wasm_dataset_free(int32_t dataset) {
  bbw_error_clear();
  bbw_slot *s = bbw_handle_slot(dataset, SLOT_DATASET);
  if (s == NULL) return bbw_last();
  dataset_release(s->object);
  bbw_slot_release(s);
  return BB_OK;
}

/* ---- components in the host -------------------------------------------------------------- */

/* One type whose methods run in the host. The runtime's create callback is told nothing
 * of the type it creates, so each type gets its own create trampoline. */
typedef struct host_type {
  bb_component_type type;
  char name[NAME_MAX_BYTES];
} host_type;

typedef struct host_instance {
  int32_t id; /* the host's instance id */
} host_instance;

static host_type host_types[BB_WASM_MAX_HOST_TYPES];
static int32_t n_host_types;
/* The shipped types, the examples' fixtures (so that every example installs) and the
 * host's; made on first use. */
static bb_registry *registry;

/* The callback in progress (callbacks nest when one component calls another). */
typedef struct host_call {
  bb_ctx *ctx;
  const bb_op_call *call;
  uint64_t deferred; /* the command, once deferred */
  int32_t error_code;
  char error[BB_ERROR_MESSAGE_MAX];
} host_call;

static host_call *current_call;

static int host_create(int32_t type_id, const bb_component_init *init, void **self, bb_error *err) {
  host_instance *inst = malloc(sizeof *inst);
  if (inst == NULL) return bb_error_set(err, BB_ERR_NOMEM, "%s: out of memory", host_types[type_id - 1].name);
  host_call frame = {0};
  host_call *outer = current_call;
  current_call = &frame;
  int32_t id = bb_host_create(type_id, init->slot, init->config ? init->config : "", init->config_len, init->seed);
  current_call = outer;
  if (id <= 0) {
    free(inst);
    int code = id < 0 ? id : BB_ERR_INVALID_ARGUMENT;
    return bb_error_set(err, code, "%s for slot `%s`: %s", host_types[type_id - 1].name, init->slot,
                        frame.error[0] ? frame.error : "the host's create failed");
  }
  inst->id = id;
  *self = inst;
  return 0;
}

#define HOST_CREATE(n)                                                                    \
  static int host_create_##n(const bb_component_init *init, void **self, bb_error *err) { \
    return host_create(n + 1, init, self, err);                                           \
  }
HOST_CREATE(0) HOST_CREATE(1) HOST_CREATE(2) HOST_CREATE(3) HOST_CREATE(4) HOST_CREATE(5) HOST_CREATE(6)
HOST_CREATE(7) HOST_CREATE(8) HOST_CREATE(9) HOST_CREATE(10) HOST_CREATE(11) HOST_CREATE(12) HOST_CREATE(13)
HOST_CREATE(14) HOST_CREATE(15)
_Static_assert(BB_WASM_MAX_HOST_TYPES == 16, "one create trampoline per host type");

static int (*const HOST_CREATES[BB_WASM_MAX_HOST_TYPES])(const bb_component_init *, void **, bb_error *) = {
    host_create_0, host_create_1, host_create_2,  host_create_3,  host_create_4,  host_create_5,
    host_create_6, host_create_7, host_create_8,  host_create_9,  host_create_10, host_create_11,
    host_create_12, host_create_13, host_create_14, host_create_15};

static void host_destroy(void *self) {
  host_instance *inst = self;
  if (inst == NULL) return;
  bb_host_destroy(inst->id);
  free(inst);
}

static int host_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  const host_instance *inst = self;
  host_call frame = {ctx, call, 0, 0, {0}};
  host_call *outer = current_call;
  current_call = &frame;
  int32_t rc = bb_host_invoke(inst->id, call->op_type, (int32_t)call->n_inputs, (int32_t)call->n_outputs);
  current_call = outer;
  if (rc < 0) {
    for (size_t i = 0; i < call->n_outputs; i++) {
      bb_val_release(call->outputs[i]);
      call->outputs[i] = NULL;
    }
    return bb_error_set(err, rc, "%s", frame.error[0] ? frame.error : "the host's method failed");
  }
  if (rc == BB_LATER && frame.deferred == 0)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: the host answered later without deferring the call", call->op_type);
  return rc == BB_LATER ? BB_LATER : 0;
}

static int32_t registry_ready(void) {
  if (registry != NULL) return BB_OK;
  bb_error err;
  bb_error_clear(&err);
  bb_registry *r = bb_registry_new(NULL);
  if (r == NULL) return bbw_fail(BB_ERR_NOMEM, "registry: out of memory");
  int rc = bb_registry_add_shipped(r, &err);
  if (rc == 0) rc = bb_fixtures_register(r, &err);
  if (rc < 0) {
    bb_registry_free(r);
    return bbw_fail_from(rc, &err, "registry");
  }
  registry = r;
  return BB_OK;
}

int32_t bb_wasm_host_type_add(const char *name, uint32_t roles) {
  bbw_error_clear();
  if (name == NULL || name[0] == '\0' || strlen(name) >= NAME_MAX_BYTES)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "host type: a name of 1 to %d bytes is needed", NAME_MAX_BYTES - 1);
  if (roles == 0 || (roles & ~((1u << (BB_ROLE_PROTOCOL + 1)) - 2u)) != 0)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "host type %s: roles 0x%x are not a set of (1 << bb_role) bits", name,
                    (unsigned)roles);
  if (registry_ready() < 0) return bbw_last();
  if (bb_registry_find(registry, name) != NULL)
    return bbw_fail(BB_ERR_EXISTS, "host type %s: a type of that name is already registered", name);
  if (n_host_types == BB_WASM_MAX_HOST_TYPES)
    return bbw_fail(BB_ERR_LIMIT, "host type %s: at most %d host types", name, BB_WASM_MAX_HOST_TYPES);
  host_type *t = &host_types[n_host_types];
  memcpy(t->name, name, strlen(name) + 1);
  t->type = (bb_component_type){.struct_size = sizeof t->type,
                                .type_name = t->name,
                                .roles = roles,
                                .create = HOST_CREATES[n_host_types],
                                .destroy = host_destroy,
                                .invoke = host_invoke};
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_registry_add(registry, &t->type, &err);
  if (rc < 0) return bbw_fail_from(rc, &err, "host type");
  return ++n_host_types;
}

static host_call *call_now(const char *what, bool needs_op) {
  if (current_call == NULL || (needs_op && current_call->call == NULL)) {
    bbw_fail(BB_ERR_INVALID_ARGUMENT, "%s: only while a host component's %s runs", what,
             needs_op ? "method" : "create or method");
    return NULL;
  }
  return current_call;
}

int32_t bb_wasm_call_inputs(void) {
  bbw_error_clear();
  bbw_result_clear();
  host_call *c = call_now("call inputs", true);
  if (c == NULL) return bbw_last();
  out_buf b = {0};
  out_u64(&b, c->call->n_inputs);
  for (size_t i = 0; i < c->call->n_inputs; i++) out_value(&b, c->call->inputs[i]);
  return out_finish(&b, "call inputs");
}

int32_t bb_wasm_call_set_outputs(const uint8_t *list, size_t len) {
  bbw_error_clear();
  host_call *c = call_now("call outputs", true);
  if (c == NULL) return bbw_last();
  value_list values;
  if (value_list_decode(list, len, "call outputs", &values) < 0) return bbw_last();
  if (values.n > c->call->n_outputs) {
    size_t n = values.n;
    value_list_free(&values);
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "call outputs: %zu values for %s's %zu outputs", n, c->call->op_type,
                    c->call->n_outputs);
  }
  for (size_t i = 0; i < values.n; i++) {
    bb_val_release(c->call->outputs[i]);
    c->call->outputs[i] = values.items[i];
    values.items[i] = NULL;
  }
  value_list_free(&values);
  return BB_OK;
}

uint64_t bb_wasm_call_defer(void) {
  bbw_error_clear();
  host_call *c = call_now("call defer", true);
  if (c == NULL) return 0;
  if (c->deferred == 0) c->deferred = bb_ctx_defer(c->ctx);
  return c->deferred;
}

uint64_t bb_wasm_call_now(void) {
  bbw_error_clear();
  host_call *c = call_now("call now", true);
  return c ? bb_ctx_now(c->ctx) : 0;
}

int32_t bb_wasm_call_fail(int32_t code, const char *message) {
  bbw_error_clear();
  host_call *c = call_now("call fail", false);
  if (c == NULL) return bbw_last();
  c->error_code = code < 0 ? code : BB_ERR_INVALID_ARGUMENT;
  size_t len = message ? strlen(message) : 0;
  if (len >= sizeof c->error) len = sizeof c->error - 1;
  if (len) memcpy(c->error, message, len);
  c->error[len] = '\0';
  return BB_OK;
}

/* ---- nodes ---------------------------------------------------------------------------- */

typedef struct node_object {
  bb_node *node;
  shared_dataset **datasets; /* the data sets its slots read, one reference each */
  size_t n_datasets;
} node_object;

static node_object *node_object_of(int32_t handle) {
  bbw_slot *s = bbw_handle_slot(handle, SLOT_NODE);
  return s ? s->object : NULL;
}

static bb_node *node_of(int32_t handle) {
  node_object *n = node_object_of(handle);
  return n ? n->node : NULL;
}

static void node_object_free(node_object *n) {
  if (n == NULL) return;
  bb_node_free(n->node);
  for (size_t i = 0; i < n->n_datasets; i++) dataset_release(n->datasets[i]);
  free(n->datasets);
  free(n);
}

#define INSTALL_MAX_TARGETS 64
#define INSTALL_MAX_SLOTS 64

int32_t bb_wasm_node_install(const uint8_t *artifact, size_t artifact_len, const char *self, const char *targets,
                             size_t targets_len, const char *slots, size_t slots_len, const int32_t *datasets,
                             uint64_t seed) {
  bbw_error_clear();
  if (artifact == NULL && artifact_len > 0)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "install: NULL artifact of %zu bytes", artifact_len);
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  if (peer_parse(self, "install: my peer id", &a.self) < 0) return bbw_last();
  int32_t n_targets = count_strings(targets, targets_len, INSTALL_MAX_TARGETS, "install: targets");
  if (n_targets < 0) return n_targets;
  int32_t n_slot_strings = count_strings(slots, slots_len, 2 * INSTALL_MAX_SLOTS, "install: slots");
  if (n_slot_strings < 0) return n_slot_strings;
  if (n_slot_strings % 2 != 0)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "install: slots are (slot, config) pairs; %d names given", (int)n_slot_strings);
  if (registry_ready() < 0) return bbw_last();

  const char *target_names[INSTALL_MAX_TARGETS];
  const char *at = targets;
  for (int32_t i = 0; i < n_targets; i++, at += strlen(at) + 1) target_names[i] = at;
  size_t n_slots = (size_t)n_slot_strings / 2;
  bb_slot_config slot_configs[INSTALL_MAX_SLOTS];
  node_object *obj = calloc(1, sizeof *obj);
  if (obj == NULL || (n_slots && (obj->datasets = calloc(n_slots, sizeof *obj->datasets)) == NULL)) {
    free(obj);
    return bbw_fail(BB_ERR_NOMEM, "install: out of memory");
  }
  at = slots;
  for (size_t i = 0; i < n_slots; i++) {
    const char *slot = at;
    const char *config = slot + strlen(slot) + 1;
    at = config + strlen(config) + 1;
    slot_configs[i] = (bb_slot_config){slot, config[0] ? config : NULL, NULL};
    if (datasets && datasets[i] != 0) {
      shared_dataset *d = dataset_of(datasets[i]);
      if (d == NULL) {
        node_object_free(obj);
        return bbw_fail(BB_ERR_INVALID_ARGUMENT, "install: slot `%s`: dataset handle %d is stale or unknown", slot,
                        (int)datasets[i]);
      }
      d->users++;
      obj->datasets[obj->n_datasets++] = d;
      slot_configs[i].host_data = &d->data;
    }
  }
  bb_address address = bb_address_p2p(&a.self);
  bb_node_config config = {0};
  config.struct_size = sizeof config;
  config.seed = seed;
  a.addresses = &address;
  a.n_addresses = 1;
  a.artifact = artifact;
  a.artifact_len = artifact_len;
  a.targets = target_names;
  a.n_targets = (size_t)n_targets;
  a.registry = registry;
  a.slots = n_slots ? slot_configs : NULL;
  a.n_slots = n_slots;
  a.config = &config;
  bb_install_error_kind kind = BB_INSTALL_OK;
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_install(&a, &obj->node, &kind, &err);
  if (rc < 0) {
    node_object_free(obj);
    return bbw_fail(rc, "install failed (%s): %s", bb_install_error_name(kind),
                    err.message[0] ? err.message : bb_strerror(rc));
  }
  int32_t handle = bbw_handle_issue(SLOT_NODE, obj);
  if (handle < 0) node_object_free(obj);
  return handle;
}

int32_t bb_wasm_node_free(int32_t node) {
  bbw_error_clear();
  bbw_slot *s = bbw_handle_slot(node, SLOT_NODE);
  if (s == NULL) return bbw_last();
  node_object_free(s->object);
  bbw_slot_release(s);
  return BB_OK;
}

int32_t bb_wasm_node_info(int32_t node) {
  bbw_error_clear();
  bbw_result_clear();
  const bb_node *n = node_of(node);
  if (n == NULL) return bbw_last();
  char self[128];
  bb_peer_id_to_text(bb_node_self(n), self, sizeof self);
  out_buf b = {0};
  out_text(&b, self);
  out_u32(&b, (uint32_t)bb_node_target_count(n));
  for (size_t i = 0; i < bb_node_target_count(n); i++) out_text(&b, bb_node_target(n, i));
  bb_node_stats st;
  bb_node_stats_get(n, &st);
  const size_t fields[] = {st.executions, st.frontier, st.pending_async, st.timers, st.ingress, st.outbound,
                           st.ingress_bytes};
  for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) out_u64(&b, fields[i]);
  return out_finish(&b, "node info");
}

static int32_t node_peer_call(int32_t node, const char *peer, const char *what, bb_node **n, bb_peer_id *id) {
  bbw_error_clear();
  *n = node_of(node);
  if (*n == NULL) return bbw_last();
  return peer_parse(peer, what, id);
}

int32_t bb_wasm_node_add_peer(int32_t node, const char *peer) {
  bb_node *n;
  bb_peer_id id;
  if (node_peer_call(node, peer, "add peer", &n, &id) < 0) return bbw_last();
  bb_address address = bb_address_p2p(&id);
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_node_add_peer(n, &id, &address, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "add peer") : BB_OK;
}

int32_t bb_wasm_node_forget_peer(int32_t node, const char *peer) {
  bb_node *n;
  bb_peer_id id;
  if (node_peer_call(node, peer, "forget peer", &n, &id) < 0) return bbw_last();
  bb_node_forget_peer(n, &id);
  return BB_OK;
}

int32_t bb_wasm_node_block_peer(int32_t node, const char *peer, int32_t blocked) {
  bb_node *n;
  bb_peer_id id;
  if (node_peer_call(node, peer, "block peer", &n, &id) < 0) return bbw_last();
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_node_block_peer(n, &id, blocked != 0, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "block peer") : BB_OK;
}

int32_t bb_wasm_node_run_bootstrap(int32_t node, uint64_t now_ns) {
  bbw_error_clear();
  bb_node *n = node_of(node);
  if (n == NULL) return bbw_last();
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_node_run_bootstrap(n, now_ns, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "bootstrap") : BB_OK;
}

int32_t bb_wasm_node_deliver(int32_t node, const char *from, const uint8_t *bytes, size_t len, uint64_t now_ns) {
  bb_node *n;
  bb_peer_id id;
  if (node_peer_call(node, from, "deliver: the sender", &n, &id) < 0) return bbw_last();
  if (bytes == NULL && len > 0) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "deliver: NULL bytes of length %zu", len);
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_node_deliver(n, &id, bytes, len, now_ns, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "deliver") : BB_OK;
}

static void out_step(out_buf *b, const bb_step *s) {
  out_u32(b, (uint32_t)s->kind);
  out_u32(b, (uint32_t)s->fill_index);
  out_u64(b, s->exec_id);
  out_u64(b, s->command);
  out_u64(b, s->count);
  out_u64(b, s->kind == BB_STEP_APP_EVENT && s->value ? bb_val_kind_hash((int)s->value->kind) : s->type_hash);
  char peer[128] = "";
  if (s->has_peer) bb_peer_id_to_text(&s->peer, peer, sizeof peer);
  out_text(b, peer);
  if (s->kind == BB_STEP_APP_EVENT && s->value) {
    size_t size = bb_val_encoded_size(s->value);
    out_u32(b, (uint32_t)size);
    if (out_reserve(b, size)) b->len += bb_val_encode_into(s->value, b->data + b->len);
  } else {
    out_field(b, s->bytes, s->bytes ? s->len : 0);
  }
  out_text(b, s->module);
  out_text(b, s->topic);
  out_text(b, s->op);
  out_text(b, s->reason);
  out_text(b, s->detail);
}

int32_t bb_wasm_node_poll(int32_t node, uint64_t now_ns) {
  bbw_error_clear();
  bbw_result_clear();
  bb_node *n = node_of(node);
  if (n == NULL) return bbw_last();
  const bb_step *steps = NULL;
  size_t n_steps = 0;
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_node_poll(n, now_ns, &steps, &n_steps, &err);
  if (rc < 0) return bbw_fail_from(rc, &err, "poll");
  if (n_steps > INT32_MAX) return bbw_fail(BB_ERR_LIMIT, "poll: %zu steps", n_steps);
  out_buf b = {0};
  out_u32(&b, (uint32_t)n_steps);
  for (size_t i = 0; i < n_steps; i++) out_step(&b, &steps[i]);
  if (out_finish(&b, "poll") < 0) return bbw_last();
  return (int32_t)n_steps;
}

uint64_t bb_wasm_node_expiry(int32_t node) {
  bbw_error_clear();
  const bb_node *n = node_of(node);
  return n ? bb_node_expiry(n) : UINT64_MAX;
}

int32_t bb_wasm_node_has_work(int32_t node) {
  bbw_error_clear();
  const bb_node *n = node_of(node);
  return n ? (int32_t)bb_node_has_work(n) : bbw_last();
}

int32_t bb_wasm_node_invoke(int32_t node, const char *module, const char *names, size_t names_len,
                            const uint8_t *values, size_t values_len, uint64_t now_ns) {
  bbw_error_clear();
  bb_node *n = node_of(node);
  if (n == NULL) return bbw_last();
  if (module == NULL) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "invoke: no module");
  int32_t n_names = count_strings(names, names_len, VALUE_LIST_MAX, "invoke: input names");
  if (n_names < 0) return n_names;
  value_list list;
  if (value_list_decode(values, values_len, "invoke: inputs", &list) < 0) return bbw_last();
  if (list.n != (size_t)n_names) {
    size_t got = list.n;
    value_list_free(&list);
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "invoke %s: %d input names but %zu values", module, (int)n_names, got);
  }
  bb_named_value *inputs = calloc(list.n ? list.n : 1, sizeof *inputs);
  if (inputs == NULL) {
    value_list_free(&list);
    return bbw_fail(BB_ERR_NOMEM, "invoke: out of memory");
  }
  const char *at = names;
  int32_t rc = BB_OK;
  for (size_t i = 0; i < list.n; i++, at += strlen(at) + 1) {
    inputs[i] = (bb_named_value){at, list.items[i]};
    if (list.items[i] == NULL) rc = bbw_fail(BB_ERR_INVALID_ARGUMENT, "invoke %s: input `%s` has no value", module, at);
  }
  if (rc == BB_OK) {
    bb_error err;
    bb_error_clear(&err);
    int r = bb_node_invoke(n, module, inputs, list.n, now_ns, &err);
    if (r < 0) rc = bbw_fail_from(r, &err, "invoke");
  }
  free(inputs);
  value_list_free(&list);
  return rc;
}

int32_t bb_wasm_node_bind_input(int32_t node, const char *module, const char *input, const uint8_t *values,
                                size_t values_len) {
  bbw_error_clear();
  bb_node *n = node_of(node);
  if (n == NULL) return bbw_last();
  value_list list;
  if (value_list_decode(values, values_len, "bind input", &list) < 0) return bbw_last();
  if (list.n != 1) {
    size_t got = list.n;
    value_list_free(&list);
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "bind input: one value (or one absent value to unbind), not %zu", got);
  }
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_node_bind_input(n, module, input, list.items[0], &err);
  value_list_free(&list);
  return rc < 0 ? bbw_fail_from(rc, &err, "bind input") : BB_OK;
}

int32_t bb_wasm_node_complete(int32_t node, uint64_t command, const uint8_t *values, size_t values_len) {
  bbw_error_clear();
  bb_node *n = node_of(node);
  if (n == NULL) return bbw_last();
  value_list list;
  if (value_list_decode(values, values_len, "complete", &list) < 0) return bbw_last();
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_node_complete(n, command, list.items, list.n, &err);
  value_list_free(&list);
  return rc < 0 ? bbw_fail_from(rc, &err, "complete") : BB_OK;
}

int32_t bb_wasm_node_fail(int32_t node, uint64_t command, const char *detail) {
  bbw_error_clear();
  bb_node *n = node_of(node);
  if (n == NULL) return bbw_last();
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_node_fail(n, command, detail ? detail : "", &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "fail") : BB_OK;
}

uint64_t bb_wasm_node_counter(int32_t node, const char *name) {
  bbw_error_clear();
  const bb_node *n = node_of(node);
  return n && name ? bb_node_counter(n, name) : 0;
}

int32_t bb_wasm_node_snapshot(int32_t node) {
  bbw_error_clear();
  bbw_result_clear();
  const bb_node *n = node_of(node);
  if (n == NULL) return bbw_last();
  uint8_t *bytes = NULL;
  size_t len = 0;
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_node_snapshot(n, &bytes, &len, &err);
  if (rc < 0) return bbw_fail_from(rc, &err, "snapshot");
  bbw_result_take(bytes, len);
  return BB_OK;
}

int32_t bb_wasm_node_restore(int32_t node, const uint8_t *bytes, size_t len) {
  bbw_error_clear();
  bb_node *n = node_of(node);
  if (n == NULL) return bbw_last();
  if (bytes == NULL && len > 0) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "restore: NULL bytes of length %zu", len);
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_node_restore(n, bytes, len, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "restore") : BB_OK;
}
