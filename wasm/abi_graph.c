/* bytesandbrains — the DSL through bb.wasm's ABI: Modules whose body and bootstrap the host
 * records (the module's callbacks call the host's bb_host_module_record, which records
 * through the bb_wasm_rec_* functions), built into ONNX ModelProto bytes by the same
 * recorder a C program uses (bb_module_build), so a Module recorded from JavaScript is
 * byte for byte the Module recorded in C, and fails with the recorder's messages.
 *
 * Values and calls cross as numbers: an index into the tables of the build in progress,
 * tagged with the build's generation, so that a number kept from another build never
 * names a value of this one. */
#include <stdlib.h>
#include <string.h>

#include "abi_internal.h"
#include "bb_wasm.h"

/* ---- modules -------------------------------------------------------------------------- */

/* A Module the host records. Reference counted: its handle holds one reference and each
 * module that lists it as a submodule one more, so handles may be freed in any order. */
typedef struct host_module {
  bb_module module; /* first: the recorder hands the callbacks &module */
  uint32_t refs;
  int32_t host_id;
  char *name;
  const bb_module **subs;
  size_t n_subs, cap_subs;
} host_module;

/* Most submodules one module lists. */
#define BBW_SUBMODULES_MAX 1024

static void module_release(host_module *m) {
  if (m == NULL || --m->refs > 0) return;
  for (size_t i = 0; i < m->n_subs; i++) module_release((host_module *)m->subs[i]);
  free(m->subs);
  free(m->name);
  free(m);
}

static host_module *module_of(int32_t handle) {
  bbw_slot *s = bbw_handle_slot(handle, SLOT_MODULE);
  return s ? s->object : NULL;
}

/* ---- the build in progress ---------------------------------------------------------------- */

/* Value and call numbers: (generation << BBW_REC_INDEX_BITS) | index. The numbers below
 * 1 << BBW_REC_INDEX_BITS name no entry: BB_WASM_VALUE_EMPTY, BB_WASM_VALUE_OMITTED and
 * BB_WASM_VALUE_FOREIGN (bb_wasm.h). */
#define BBW_REC_INDEX_BITS 21
#define BBW_REC_ENTRIES_MAX (1u << 20)
#define BBW_REC_GENERATIONS ((1u << (31 - BBW_REC_INDEX_BITS)) - 1u)

typedef struct build {
  uint32_t generation;
  bb_rec *rec; /* the recorder of the callback running now */
  struct { bb_value *items; size_t len, cap; } values;
  struct { bb_call *items; size_t len, cap; } calls;
} build;

static build *current;
static uint32_t last_generation;

/* A value the recorder must refuse as "not a value of this recording": its recorder is
 * this address, which no recorder has. */
static const char FOREIGN_RECORDER;

static bool grow(void **items, size_t *cap, size_t len, size_t size) {
  if (len < *cap) return true;
  size_t want = *cap ? *cap * 2 : 64;
  void *p = realloc(*items, want * size);
  if (p == NULL) return false;
  *items = p;
  *cap = want;
  return true;
}

/* The recording callback in progress, or NULL with the reason recorded. */
static build *recording(const char *what) {
  if (current == NULL || current->rec == NULL) {
    bbw_fail(BB_ERR_INVALID_ARGUMENT, "%s: only while a module's body or bootstrap is being recorded (in its callback)",
             what);
    return NULL;
  }
  return current;
}

static int32_t number_of(size_t index) { return (int32_t)((current->generation << BBW_REC_INDEX_BITS) | index); }

/* The number of a value the recorder returned; a table that is full fails the recording
 * (the recorder then refuses everything after). */
static int32_t issue_value(bb_value v) {
  if (v.name == NULL) return BB_WASM_VALUE_EMPTY;
  build *b = current;
  if (b->values.len == BBW_REC_ENTRIES_MAX ||
      !grow((void **)&b->values.items, &b->values.cap, b->values.len, sizeof *b->values.items)) {
    bb_rec_fail(b->rec, b->values.len == BBW_REC_ENTRIES_MAX ? BB_ERR_LIMIT : BB_ERR_NOMEM,
                "more than %u values in one build, or out of memory", BBW_REC_ENTRIES_MAX);
    return BB_WASM_VALUE_EMPTY;
  }
  b->values.items[b->values.len] = v;
  return number_of(b->values.len++);
}

/* The bb_value a number names: empty, omitted, a value of this build, or (a number of
 * another build, or none at all) a value the recorder refuses as foreign. */
static bb_value value_of(int32_t number) {
  bb_value empty = {0};
  bb_value foreign = {"", BB_TYPE_ABSTRACT, (const bb_rec *)(const void *)&FOREIGN_RECORDER, 0};
  if (number == BB_WASM_VALUE_EMPTY) return empty;
  if (number == BB_WASM_VALUE_OMITTED) return BB_VALUE_OMITTED;
  uint32_t n = (uint32_t)number, index = n & ((1u << BBW_REC_INDEX_BITS) - 1u);
  if (number < 0 || (n >> BBW_REC_INDEX_BITS) != current->generation || index >= current->values.len) return foreign;
  return current->values.items[index];
}

/* The values of an array of numbers, in s. */
static bb_value *values_of(const int32_t *numbers, size_t n, const char *what, bbw_scratch *s) {
  if (n > BBW_VALUE_LIST_MAX) {
    bbw_fail(BB_ERR_LIMIT, "%s: %zu values, at most %d", what, n, BBW_VALUE_LIST_MAX);
    return NULL;
  }
  if (n && numbers == NULL) {
    bbw_fail(BB_ERR_INVALID_ARGUMENT, "%s: NULL array of %zu values", what, n);
    return NULL;
  }
  bb_value *v = bbw_scratch_alloc(s, n * sizeof *v, what);
  for (size_t i = 0; v != NULL && i < n; i++) v[i] = value_of(numbers[i]);
  return v;
}

/* Writes the recorder's outputs as numbers. */
static void issue_values(const bb_value *v, int32_t *numbers, size_t n) {
  for (size_t i = 0; i < n; i++) numbers[i] = issue_value(v[i]);
}

/* ---- the module callbacks ------------------------------------------------------------------- */

static void record(bb_rec *rec, void *user, bool bootstrap) {
  const host_module *m = user;
  bb_rec *outer = current->rec;
  current->rec = rec;
  bb_host_module_record(m->host_id, bootstrap ? 1 : 0);
  current->rec = outer;
}

static void record_body(bb_rec *rec, void *user) { record(rec, user, false); }
static void record_bootstrap(bb_rec *rec, void *user) { record(rec, user, true); }

/* ---- modules through the ABI ---------------------------------------------------------------- */

int32_t bb_wasm_module_new(const char *name, int32_t host_id, int32_t has_bootstrap) {
  bbw_error_clear();
  if (name == NULL) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "module new: no name");
  size_t len = strlen(name);
  if (len > 4096) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "module new: a name of %zu bytes", len);
  host_module *m = calloc(1, sizeof *m);
  char *copy = malloc(len + 1);
  if (m == NULL || copy == NULL) {
    free(m);
    free(copy);
    return bbw_fail(BB_ERR_NOMEM, "module new: out of memory");
  }
  memcpy(copy, name, len + 1);
  m->refs = 1;
  m->host_id = host_id;
  m->name = copy;
  m->module = (bb_module){sizeof(bb_module), copy, record_body, has_bootstrap ? record_bootstrap : NULL, m, NULL, 0};
  int32_t handle = bbw_handle_issue(SLOT_MODULE, m);
  if (handle < 0) module_release(m);
  return handle;
}

int32_t bb_wasm_module_add_submodule(int32_t module, int32_t submodule) {
  bbw_error_clear();
  host_module *m = module_of(module);
  if (m == NULL) return bbw_last();
  host_module *sub = module_of(submodule);
  if (sub == NULL) return bbw_last();
  if (m->n_subs == BBW_SUBMODULES_MAX)
    return bbw_fail(BB_ERR_LIMIT, "module %s: more than %d submodules", m->name, BBW_SUBMODULES_MAX);
  if (!grow((void **)&m->subs, &m->cap_subs, m->n_subs, sizeof *m->subs))
    return bbw_fail(BB_ERR_NOMEM, "module %s: out of memory", m->name);
  sub->refs++;
  m->subs[m->n_subs++] = &sub->module;
  m->module.submodules = m->subs;
  m->module.n_submodules = m->n_subs;
  return BB_OK;
}

int32_t bb_wasm_module_build(int32_t module) {
  bbw_error_clear();
  bbw_result_clear();
  if (current != NULL) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "module build: a build is in progress already");
  host_module *m = module_of(module);
  if (m == NULL) return bbw_last();
  build b = {0};
  last_generation = last_generation % BBW_REC_GENERATIONS + 1;
  b.generation = last_generation;
  m->refs++; /* alive through the build, whatever its callbacks free */
  current = &b;
  bb_model *model = NULL;
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_module_build(&m->module, NULL, &model, &err);
  current = NULL;
  module_release(m);
  free(b.values.items);
  free(b.calls.items);
  uint8_t *bytes = NULL;
  size_t len = 0;
  if (rc == 0) rc = bb_model_encode(model, &bytes, &len, &err);
  bb_model_free(model);
  if (rc < 0) return bbw_fail(rc, "%s", err.message[0] ? err.message : bb_strerror(rc));
  bbw_result_take(bytes, len);
  return BB_OK;
}

int32_t bb_wasm_module_free(int32_t module) {
  bbw_error_clear();
  bbw_slot *s = bbw_handle_slot(module, SLOT_MODULE);
  if (s == NULL) return bbw_last();
  module_release(s->object);
  bbw_slot_release(s);
  return BB_OK;
}

/* ---- recording ---------------------------------------------------------------------------- */

int32_t bb_wasm_rec_input(const char *name, const char *type) {
  bbw_error_clear();
  build *b = recording("rec input");
  return b ? issue_value(bb_rec_input(b->rec, name, type)) : bbw_last();
}

int32_t bb_wasm_rec_output(const char *name, int32_t value) {
  bbw_error_clear();
  build *b = recording("rec output");
  return b ? issue_value(bb_rec_output(b->rec, name, value_of(value))) : bbw_last();
}

int32_t bb_wasm_rec_net_out(const char *port, int32_t peers, int32_t value) {
  bbw_error_clear();
  build *b = recording("rec net_out");
  return b ? issue_value(bb_rec_net_out(b->rec, port, value_of(peers), value_of(value))) : bbw_last();
}

int32_t bb_wasm_rec_lookup_output(const char *port) {
  bbw_error_clear();
  build *b = recording("rec lookup_output");
  return b ? issue_value(bb_rec_lookup_output(b->rec, port)) : bbw_last();
}

int32_t bb_wasm_rec_lookup_sender(const char *port) {
  bbw_error_clear();
  build *b = recording("rec lookup_sender");
  return b ? issue_value(bb_rec_lookup_sender(b->rec, port)) : bbw_last();
}

int32_t bb_wasm_rec_split(int32_t shape, const char *cuts, size_t cuts_len, const char *client_slot, const char *server_slot,
                          const char *averager_slot, const int32_t *values, size_t n_values) {
  bbw_error_clear();
  build *b = recording("rec split");
  if (b == NULL) return bbw_last();
  int32_t count = bbw_count_strings(cuts, cuts_len, 2, "rec split");
  if (count < 0) return count;
  if (n_values != 6 || values == NULL)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT,
                    "rec split: 6 values (server peers, tick, test_x, test_y, eval tick, clients), got %zu", n_values);
  const char *list[2] = {cuts, count > 1 ? cuts + strlen(cuts) + 1 : NULL};
  bb_slot client = {BB_ROLE_MODEL, client_slot, NULL}, server = {BB_ROLE_MODEL, server_slot, NULL};
  bb_slot averager = {BB_ROLE_AGGREGATOR, averager_slot, NULL};
  bb_split s = {sizeof s,
                (bb_split_shape)shape,
                list,
                (size_t)count,
                &client,
                &server,
                value_of(values[0]),
                value_of(values[1]),
                value_of(values[2]),
                value_of(values[3]),
                value_of(values[4]),
                averager_slot ? &averager : NULL,
                value_of(values[5])};
  int rc = bb_rec_split(b->rec, &s);
  return rc ? bbw_fail(rc, "rec split: the recording failed") : BB_OK;
}

int32_t bb_wasm_rec_bundle(const int32_t *parts, size_t n) {
  bbw_error_clear();
  build *b = recording("rec bundle");
  if (b == NULL) return bbw_last();
  bbw_scratch s = {0};
  bb_value *v = values_of(parts, n, "rec bundle", &s);
  int32_t rc = v ? issue_value(bb_rec_bundle(b->rec, v, n)) : bbw_last();
  bbw_scratch_free(&s);
  return rc;
}

int32_t bb_wasm_rec_unbundle(int32_t composite, const char *types, size_t types_len, int32_t *parts, size_t n) {
  bbw_error_clear();
  build *b = recording("rec unbundle");
  if (b == NULL) return bbw_last();
  int32_t count = bbw_count_strings(types, types_len, BBW_VALUE_LIST_MAX, "rec unbundle");
  if (count < 0) return count;
  if ((size_t)count != n || (n && parts == NULL))
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "rec unbundle: %d types for %zu parts", (int)count, n);
  bbw_scratch s = {0};
  const char **list = bbw_scratch_alloc(&s, n * sizeof *list, "rec unbundle");
  bb_value *out = bbw_scratch_alloc(&s, n * sizeof *out, "rec unbundle");
  int32_t rc = bbw_last();
  if (list != NULL && out != NULL) {
    for (size_t i = 0, at = 0; i < n; at += strlen(types + at) + 1, i++) list[i] = types + at;
    bb_rec_unbundle(b->rec, value_of(composite), list, out, n);
    issue_values(out, parts, n);
    rc = BB_OK;
  }
  bbw_scratch_free(&s);
  return rc;
}

int32_t bb_wasm_rec_call(int32_t module, int32_t bootstrap, const char *inputs, size_t inputs_len,
                         const int32_t *values, size_t n) {
  bbw_error_clear();
  build *b = recording("rec call");
  if (b == NULL) return bbw_last();
  host_module *callee = module_of(module);
  if (callee == NULL) return bbw_last();
  int32_t count = bbw_count_strings(inputs, inputs_len, BBW_VALUE_LIST_MAX, "rec call");
  if (count < 0) return count;
  if ((size_t)count != n) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "rec call: %d input names for %zu values", (int)count, n);
  bbw_scratch s = {0};
  bb_value *v = values_of(values, n, "rec call", &s);
  bb_binding *bindings = v ? bbw_scratch_alloc(&s, n * sizeof *bindings, "rec call") : NULL;
  if (bindings == NULL) {
    bbw_scratch_free(&s);
    return bbw_last();
  }
  for (size_t i = 0, at = 0; i < n; at += strlen(inputs + at) + 1, i++) bindings[i] = (bb_binding){inputs + at, v[i]};
  bb_call call = bootstrap ? bb_rec_call_bootstrap(b->rec, &callee->module, bindings, n)
                           : bb_rec_call(b->rec, &callee->module, bindings, n);
  bbw_scratch_free(&s);
  if (call.rec == NULL) return BB_WASM_VALUE_EMPTY;
  if (b->calls.len == BBW_REC_ENTRIES_MAX ||
      !grow((void **)&b->calls.items, &b->calls.cap, b->calls.len, sizeof *b->calls.items)) {
    bb_rec_fail(b->rec, BB_ERR_LIMIT, "more than %u calls in one build, or out of memory", BBW_REC_ENTRIES_MAX);
    return BB_WASM_VALUE_EMPTY;
  }
  b->calls.items[b->calls.len] = call;
  return number_of(b->calls.len++);
}

int32_t bb_wasm_rec_call_output(int32_t call, const char *port) {
  bbw_error_clear();
  build *b = recording("rec call_output");
  if (b == NULL) return bbw_last();
  bb_call c = {(const bb_rec *)(const void *)&FOREIGN_RECORDER, 0}; /* an empty or stale call: refused */
  uint32_t n = (uint32_t)call, index = n & ((1u << BBW_REC_INDEX_BITS) - 1u);
  if (call > 0 && (n >> BBW_REC_INDEX_BITS) == b->generation && index < b->calls.len) c = b->calls.items[index];
  return issue_value(bb_rec_call_output(b->rec, c, port));
}

/* The shared part of the three op recorders: inputs and attributes in, outputs out. */
typedef struct op_args {
  bbw_scratch scratch;
  bb_value *inputs, *outputs;
  bb_op_attr *attrs;
  size_t n_attrs;
} op_args;

static int32_t op_args_decode(op_args *a, const char *what, const int32_t *inputs, size_t n_inputs,
                              const uint8_t *attrs, size_t attrs_len, const int32_t *outputs, size_t n_outputs) {
  *a = (op_args){0};
  if (n_outputs > BBW_VALUE_LIST_MAX || (n_outputs && outputs == NULL))
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "%s: room for %zu outputs is needed (at most %d)", what, n_outputs,
                    BBW_VALUE_LIST_MAX);
  if ((a->inputs = values_of(inputs, n_inputs, what, &a->scratch)) == NULL ||
      (a->outputs = bbw_scratch_alloc(&a->scratch, n_outputs * sizeof *a->outputs, what)) == NULL ||
      bbw_attrs_decode(attrs, attrs_len, what, &a->scratch, &a->attrs, &a->n_attrs) < 0) {
    bbw_scratch_free(&a->scratch);
    return bbw_last();
  }
  return BB_OK;
}

static int32_t op_args_finish(op_args *a, int32_t *outputs, size_t n_outputs) {
  issue_values(a->outputs, outputs, n_outputs);
  bbw_scratch_free(&a->scratch);
  return BB_OK;
}

int32_t bb_wasm_rec_role_call(int32_t role, const char *slot, const char *peer_class, const char *method,
                              const int32_t *inputs, size_t n_inputs, const uint8_t *attrs, size_t attrs_len,
                              int32_t *outputs, size_t n_outputs) {
  bbw_error_clear();
  build *b = recording("rec role call");
  op_args a;
  if (b == NULL || op_args_decode(&a, "rec role call", inputs, n_inputs, attrs, attrs_len, outputs, n_outputs) < 0)
    return bbw_last();
  bb_slot s = {(bb_role)role, slot, peer_class};
  bb_rec_role_call(b->rec, &s, method, a.inputs, n_inputs, a.attrs, a.n_attrs, a.outputs, n_outputs);
  return op_args_finish(&a, outputs, n_outputs);
}

int32_t bb_wasm_rec_syscall(const char *op, const int32_t *inputs, size_t n_inputs, const uint8_t *attrs,
                            size_t attrs_len, int32_t *outputs, size_t n_outputs) {
  bbw_error_clear();
  build *b = recording("rec syscall");
  op_args a;
  if (b == NULL || op_args_decode(&a, "rec syscall", inputs, n_inputs, attrs, attrs_len, outputs, n_outputs) < 0)
    return bbw_last();
  bb_rec_syscall(b->rec, op, a.inputs, n_inputs, a.attrs, a.n_attrs, a.outputs, n_outputs);
  return op_args_finish(&a, outputs, n_outputs);
}

int32_t bb_wasm_rec_protocol_call(const char *domain, const char *op, const int32_t *inputs, size_t n_inputs,
                                  const uint8_t *attrs, size_t attrs_len, int32_t *outputs, size_t n_outputs) {
  bbw_error_clear();
  build *b = recording("rec protocol call");
  op_args a;
  if (b == NULL || op_args_decode(&a, "rec protocol call", inputs, n_inputs, attrs, attrs_len, outputs, n_outputs) < 0)
    return bbw_last();
  bb_rec_protocol_call(b->rec, domain, op, a.inputs, n_inputs, a.attrs, a.n_attrs, a.outputs, n_outputs);
  return op_args_finish(&a, outputs, n_outputs);
}

int32_t bb_wasm_rec_constant(const char *label, const char *type, const uint8_t *literal, size_t len) {
  bbw_error_clear();
  build *b = recording("rec constant");
  if (b == NULL) return bbw_last();
  if (literal == NULL && len > 0) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "rec constant: NULL literal of %zu bytes", len);
  bbw_scratch s = {0};
  bb_literal lit;
  bb_le_reader r = bb_le_reader_of(literal, len);
  int32_t rc = bbw_literal_decode(&r, "rec constant", &s, &lit);
  if (rc == 0 && bb_le_left(&r) != 0)
    rc = bbw_fail(BB_ERR_MALFORMED, "rec constant: %zu bytes after the literal", bb_le_left(&r));
  if (rc == 0) rc = issue_value(bb_rec_constant(b->rec, label, type, &lit));
  bbw_scratch_free(&s);
  return rc;
}

int32_t bb_wasm_rec_address_book_insert(int32_t peer, int32_t addresses, int32_t many) {
  bbw_error_clear();
  build *b = recording("rec address book insert");
  if (b == NULL) return bbw_last();
  return issue_value(many ? bb_rec_address_book_insert_many(b->rec, value_of(peer), value_of(addresses))
                          : bb_rec_address_book_insert(b->rec, value_of(peer), value_of(addresses)));
}

int32_t bb_wasm_rec_address_book_lookup(int32_t peer) {
  bbw_error_clear();
  build *b = recording("rec address book lookup");
  return b ? issue_value(bb_rec_address_book_lookup(b->rec, value_of(peer))) : bbw_last();
}

int32_t bb_wasm_rec_announce(int32_t server_peer) {
  bbw_error_clear();
  build *b = recording("rec announce");
  return b ? issue_value(bb_rec_announce(b->rec, value_of(server_peer))) : bbw_last();
}

int32_t bb_wasm_rec_fail(int32_t code, const char *message) {
  bbw_error_clear();
  build *b = recording("rec fail");
  if (b == NULL) return bbw_last();
  bb_rec_fail(b->rec, code, "%s", message ? message : "failed");
  return BB_OK;
}

int32_t bb_wasm_rec_failed(void) {
  bbw_error_clear();
  build *b = recording("rec failed");
  return b ? (bb_rec_failed(b->rec) ? 1 : 0) : bbw_last();
}

/* A value of this build by number, or NULL with the reason recorded. */
static const bb_value *known_value(int32_t number, const char *what) {
  if (recording(what) == NULL) return NULL;
  uint32_t n = (uint32_t)number, index = n & ((1u << BBW_REC_INDEX_BITS) - 1u);
  if (number <= 0 || (n >> BBW_REC_INDEX_BITS) != current->generation || index >= current->values.len) {
    bbw_fail(BB_ERR_INVALID_ARGUMENT, "%s: %d is not a value of this build", what, (int)number);
    return NULL;
  }
  return &current->values.items[index];
}

const char *bb_wasm_rec_value_name(int32_t value) {
  bbw_error_clear();
  const bb_value *v = known_value(value, "rec value name");
  return v ? v->name : NULL;
}

const char *bb_wasm_rec_value_type(int32_t value) {
  bbw_error_clear();
  const bb_value *v = known_value(value, "rec value type");
  return v ? v->type : NULL;
}
