/* bytesandbrains — the flat C ABI of bb.wasm: a handle table, the last-error record and
 * the result buffer around the public library API. See bb_wasm.h for the contract. */
#include "bb_wasm.h"
#include "bb_wasm_internal.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/common.h"
#include "bb/cpu.h"
#include "bb/ir.h"
#include "bb/tensor.h"

/* ---- the last error ------------------------------------------------------------ */

static int32_t last_error_code;
static char last_error_message[BB_ERROR_MESSAGE_MAX];

int32_t bbw_last(void) { return last_error_code; }

void bbw_error_clear(void) {
  last_error_code = BB_OK;
  last_error_message[0] = '\0';
}

int32_t bbw_fail(int32_t code, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(last_error_message, sizeof last_error_message, format, args);
  va_end(args);
  last_error_code = code;
  return code;
}

int32_t bbw_fail_from(int code, const bb_error *err, const char *what) {
  const char *detail = err->message[0] != '\0' ? err->message : bb_strerror(code);
  return bbw_fail(code, "%s: %s", what, detail);
}

/* ---- handles ------------------------------------------------------------------- */

/* A handle is (generation << BB_WASM_SLOT_BITS) | slot index. Generations start at 1,
 * so every handle is positive, and they fit in the 31 bits left of a positive int32. */
#define BB_WASM_SLOT_BITS 10
#define BB_WASM_SLOT_MASK ((1u << BB_WASM_SLOT_BITS) - 1u)
#define BB_WASM_GENERATION_MAX ((1u << (31 - BB_WASM_SLOT_BITS)) - 1u)
_Static_assert(BB_WASM_MAX_HANDLES == 1 << BB_WASM_SLOT_BITS,
               "the slot index must cover the whole table");

static const char *slot_kind_name(bbw_slot_kind kind) {
  switch (kind) {
  case SLOT_FREE: return "nothing";
  case SLOT_MODEL: return "model";
  case SLOT_TENSOR: return "tensor";
  case SLOT_SESSION: return "session";
  case SLOT_COMPILER: return "compiler";
  case SLOT_DATASET: return "dataset";
  case SLOT_NODE: return "node";
  }
  return "unknown";
}

static bbw_slot slots[BB_WASM_MAX_HANDLES];

/* Stores object in the first free slot and returns its new handle, or BB_ERR_LIMIT. */
int32_t bbw_handle_issue(bbw_slot_kind kind, void *object) {
  for (uint32_t index = 0; index < BB_WASM_MAX_HANDLES; index++) {
    bbw_slot *s = &slots[index];
    if (s->kind != SLOT_FREE) continue;
    /* After GENERATION_MAX reuses of one slot the count wraps; a handle kept that long
     * could alias again, a bound accepted for a 31-bit handle. */
    s->generation = s->generation % BB_WASM_GENERATION_MAX + 1;
    s->kind = kind;
    s->object = object;
    return (int32_t)((s->generation << BB_WASM_SLOT_BITS) | index);
  }
  return bbw_fail(BB_ERR_LIMIT, "all %d handles are in use: free objects that are done with",
              BB_WASM_MAX_HANDLES);
}

/* The live slot a handle of the given kind names, or NULL with the reason recorded. */
bbw_slot *bbw_handle_slot(int32_t handle, bbw_slot_kind kind) {
  if (handle <= 0) {
    bbw_fail(BB_ERR_INVALID_ARGUMENT, "%s handle %d is invalid (handles are positive)",
         slot_kind_name(kind), (int)handle);
    return NULL;
  }
  bbw_slot *s = &slots[(uint32_t)handle & BB_WASM_SLOT_MASK];
  uint32_t generation = (uint32_t)handle >> BB_WASM_SLOT_BITS;
  if (s->kind == SLOT_FREE || s->generation != generation) {
    bbw_fail(BB_ERR_INVALID_ARGUMENT,
         "%s handle %d is stale or unknown: its object was freed, or it was never issued",
         slot_kind_name(kind), (int)handle);
    return NULL;
  }
  if (s->kind != kind) {
    bbw_fail(BB_ERR_INVALID_ARGUMENT, "handle %d names a %s, not a %s", (int)handle,
         slot_kind_name(s->kind), slot_kind_name(kind));
    return NULL;
  }
  return s;
}

void bbw_slot_release(bbw_slot *s) {
  s->kind = SLOT_FREE;
  s->object = NULL;
}

/* ---- objects behind the handles ------------------------------------------------ */

/* A decoded model, shared by its handle and the sessions made from it: a session reads
 * the model's graph for its whole life, so the model goes when its last user does. */
typedef struct shared_model {
  bb_model *model;
  uint32_t users;
} shared_model;

typedef struct session_object {
  bb_cpu_session *session;
  shared_model *model;
} session_object;

static void shared_model_release(shared_model *shared) {
  if (--shared->users > 0) return;
  bb_model_free(shared->model);
  free(shared);
}

/* The model a model handle names, or NULL with the reason recorded. */
static shared_model *model_of(int32_t handle) {
  const bbw_slot *s = bbw_handle_slot(handle, SLOT_MODEL);
  return s != NULL ? s->object : NULL;
}

bb_tensor *bbw_tensor_of(int32_t handle) {
  const bbw_slot *s = bbw_handle_slot(handle, SLOT_TENSOR);
  return s != NULL ? s->object : NULL;
}

static bb_cpu_session *session_of(int32_t handle) {
  const bbw_slot *s = bbw_handle_slot(handle, SLOT_SESSION);
  return s != NULL ? ((session_object *)s->object)->session : NULL;
}

/* Stores a tensor reference under a new handle; on failure the reference is dropped. */
int32_t bbw_tensor_issue(bb_tensor *tensor) {
  int32_t handle = bbw_handle_issue(SLOT_TENSOR, tensor);
  if (handle < 0) bb_tensor_release(tensor);
  return handle;
}

/* ---- the result buffer --------------------------------------------------------- */

static uint8_t *result_data;
static size_t result_len;

void bbw_result_clear(void) {
  if (result_data != NULL) bb_buffer_free(NULL, result_data);
  result_data = NULL;
  result_len = 0;
}

/* Takes ownership of a buffer made with the default allocator. */
void bbw_result_take(uint8_t *data, size_t len) {
  bbw_result_clear();
  result_data = data;
  result_len = len;
}

/* ---- the ABI ------------------------------------------------------------------- */

uint32_t bb_wasm_abi_version(void) { return BB_WASM_ABI_VERSION; }

const char *bb_wasm_version(void) { return BB_VERSION_STRING; }

void *bb_wasm_alloc(size_t size) {
  bbw_error_clear();
  void *ptr = malloc(size > 0 ? size : 1);
  if (ptr == NULL) bbw_fail(BB_ERR_NOMEM, "out of memory allocating %zu bytes", size);
  return ptr;
}

void bb_wasm_free(void *ptr) { free(ptr); }

int32_t bb_wasm_last_error_code(void) { return last_error_code; }

const char *bb_wasm_last_error(void) { return last_error_message; }

const uint8_t *bb_wasm_result_ptr(void) { return result_data; }

size_t bb_wasm_result_len(void) { return result_len; }

int32_t bb_wasm_model_decode(const uint8_t *data, size_t len) {
  bbw_error_clear();
  if (data == NULL && len > 0)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "model decode: NULL data with length %zu", len);
  bb_model *model = NULL;
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_model_decode(data, len, NULL, NULL, &model, &err);
  if (rc < 0) return bbw_fail_from(rc, &err, "model decode");
  shared_model *shared = malloc(sizeof *shared);
  if (shared == NULL) {
    bb_model_free(model);
    return bbw_fail(BB_ERR_NOMEM, "model decode: out of memory");
  }
  *shared = (shared_model){.model = model, .users = 1};
  int32_t handle = bbw_handle_issue(SLOT_MODEL, shared);
  if (handle < 0) shared_model_release(shared);
  return handle;
}

int32_t bb_wasm_model_encode(int32_t model) {
  bbw_error_clear();
  bbw_result_clear();
  const shared_model *shared = model_of(model);
  if (shared == NULL) return last_error_code;
  uint8_t *bytes = NULL;
  size_t len = 0;
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_model_encode(shared->model, &bytes, &len, &err);
  if (rc < 0) return bbw_fail_from(rc, &err, "model encode");
  bbw_result_take(bytes, len);
  return BB_OK;
}

int32_t bb_wasm_model_summary(int32_t model, int32_t json) {
  bbw_error_clear();
  bbw_result_clear();
  const shared_model *shared = model_of(model);
  if (shared == NULL) return last_error_code;
  char *text = NULL;
  size_t len = 0;
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_model_summary(shared->model, json != 0, &text, &len, &err);
  if (rc < 0) return bbw_fail_from(rc, &err, "model summary");
  bbw_result_take((uint8_t *)text, len);
  return BB_OK;
}

int32_t bb_wasm_model_free(int32_t model) {
  bbw_error_clear();
  bbw_slot *s = bbw_handle_slot(model, SLOT_MODEL);
  if (s == NULL) return last_error_code;
  shared_model_release(s->object);
  bbw_slot_release(s);
  return BB_OK;
}

/* ---- tensors ------------------------------------------------------------------- */

/* The byte sizes the ABI reports are int32: larger tensors are refused at creation (the
 * module's memory cannot hold one anyway). */
#define TENSOR_BYTES_MAX ((uint64_t)INT32_MAX)

int32_t bb_wasm_tensor_new(int32_t dtype, int32_t rank, const int64_t *dims) {
  bbw_error_clear();
  const char *type_name = bb_dtype_name(dtype);
  size_t element_size = bb_dtype_size(dtype);
  if (type_name == NULL) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "tensor new: %d is not a data type", (int)dtype);
  if (element_size == 0)
    return bbw_fail(BB_ERR_UNSUPPORTED, "tensor new: %s tensors are not supported", type_name);
  if (rank < 0 || rank > BB_MAX_RANK)
    return bbw_fail(BB_ERR_LIMIT, "tensor new: rank %d is outside 0..%d", (int)rank, BB_MAX_RANK);
  if (dims == NULL && rank > 0) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "tensor new: NULL dims with rank %d", (int)rank);
  int64_t shape[BB_MAX_RANK];
  if (rank > 0) memcpy(shape, dims, (size_t)rank * sizeof shape[0]);
  uint64_t bytes = element_size;
  for (int32_t i = 0; i < rank; i++) {
    if (shape[i] < 0)
      return bbw_fail(BB_ERR_INVALID_ARGUMENT, "tensor new: dim %d is %lld, dims must not be negative", (int)i,
                  (long long)shape[i]);
    /* Once a dim is zero the tensor is empty, whatever the other dims are. */
    if (bytes != 0 && (uint64_t)shape[i] > TENSOR_BYTES_MAX / bytes) bytes = TENSOR_BYTES_MAX + 1;
    else bytes *= (uint64_t)shape[i];
  }
  if (bytes > TENSOR_BYTES_MAX)
    return bbw_fail(BB_ERR_LIMIT, "tensor new: a %s tensor of that shape exceeds %llu bytes", type_name,
                (unsigned long long)TENSOR_BYTES_MAX);
  bb_tensor *tensor = bb_tensor_new_zeros(NULL, dtype, rank, shape);
  if (tensor == NULL)
    return bbw_fail(BB_ERR_NOMEM, "tensor new: out of memory allocating %llu bytes", (unsigned long long)bytes);
  return bbw_tensor_issue(tensor);
}

int32_t bb_wasm_tensor_dtype(int32_t tensor) {
  bbw_error_clear();
  const bb_tensor *t = bbw_tensor_of(tensor);
  return t != NULL ? t->dtype : last_error_code;
}

int32_t bb_wasm_tensor_rank(int32_t tensor) {
  bbw_error_clear();
  const bb_tensor *t = bbw_tensor_of(tensor);
  return t != NULL ? t->rank : last_error_code;
}

const int64_t *bb_wasm_tensor_dims(int32_t tensor) {
  bbw_error_clear();
  const bb_tensor *t = bbw_tensor_of(tensor);
  return t != NULL ? t->dims : NULL;
}

void *bb_wasm_tensor_data(int32_t tensor) {
  bbw_error_clear();
  const bb_tensor *t = bbw_tensor_of(tensor);
  return t != NULL ? bb_tensor_data(t) : NULL;
}

int32_t bb_wasm_tensor_nbytes(int32_t tensor) {
  bbw_error_clear();
  const bb_tensor *t = bbw_tensor_of(tensor);
  if (t == NULL) return last_error_code;
  size_t bytes = bb_tensor_nbytes(t);
  if (bytes > TENSOR_BYTES_MAX)
    return bbw_fail(BB_ERR_LIMIT, "tensor nbytes: %zu bytes do not fit the ABI's int32", bytes);
  return (int32_t)bytes;
}

int32_t bb_wasm_tensor_free(int32_t tensor) {
  bbw_error_clear();
  bbw_slot *s = bbw_handle_slot(tensor, SLOT_TENSOR);
  if (s == NULL) return last_error_code;
  bb_tensor_release(s->object);
  bbw_slot_release(s);
  return BB_OK;
}

/* ---- CPU sessions -------------------------------------------------------------- */

int32_t bb_wasm_session_new(int32_t model) {
  bbw_error_clear();
  shared_model *shared = model_of(model);
  if (shared == NULL) return last_error_code;
  session_object *object = malloc(sizeof *object);
  if (object == NULL) return bbw_fail(BB_ERR_NOMEM, "session new: out of memory");
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_cpu_session_new(shared->model, NULL, &object->session, &err);
  if (rc < 0) {
    free(object);
    return bbw_fail_from(rc, &err, "session new");
  }
  object->model = shared;
  shared->users++;
  int32_t handle = bbw_handle_issue(SLOT_SESSION, object);
  if (handle < 0) {
    bb_cpu_session_free(object->session);
    shared_model_release(shared);
    free(object);
  }
  return handle;
}

int32_t bb_wasm_session_input_count(int32_t session) {
  bbw_error_clear();
  const bb_cpu_session *s = session_of(session);
  return s != NULL ? (int32_t)bb_cpu_session_input_count(s) : last_error_code;
}

int32_t bb_wasm_session_output_count(int32_t session) {
  bbw_error_clear();
  const bb_cpu_session *s = session_of(session);
  return s != NULL ? (int32_t)bb_cpu_session_output_count(s) : last_error_code;
}

/* Name i of a list of count names, or NULL with the reason recorded. */
static const char *list_entry(const char *what, int32_t i, size_t count,
                              const char *(*name)(const bb_cpu_session *, size_t), const bb_cpu_session *s) {
  if (i < 0 || (size_t)i >= count) {
    bbw_fail(BB_ERR_INVALID_ARGUMENT, "%s %d does not exist: the session has %zu", what, (int)i, count);
    return NULL;
  }
  return name(s, (size_t)i);
}

const char *bb_wasm_session_input_name(int32_t session, int32_t i) {
  bbw_error_clear();
  const bb_cpu_session *s = session_of(session);
  if (s == NULL) return NULL;
  return list_entry("input", i, bb_cpu_session_input_count(s), bb_cpu_session_input_name, s);
}

const char *bb_wasm_session_output_name(int32_t session, int32_t i) {
  bbw_error_clear();
  const bb_cpu_session *s = session_of(session);
  if (s == NULL) return NULL;
  return list_entry("output", i, bb_cpu_session_output_count(s), bb_cpu_session_output_name, s);
}

/* Splits the packed input names into names[0..n); fails unless there are exactly n
 * NUL-terminated names in len bytes. */
static int32_t unpack_names(const char *packed, size_t len, int32_t n, const char **names) {
  size_t at = 0;
  for (int32_t i = 0; i < n; i++) {
    const char *end = at < len ? memchr(packed + at, '\0', len - at) : NULL;
    if (end == NULL)
      return bbw_fail(BB_ERR_INVALID_ARGUMENT, "session run: the %zu bytes of input names hold %d names, not %d", len,
                  (int)i, (int)n);
    names[i] = packed + at;
    at = (size_t)(end - packed) + 1;
  }
  if (at != len)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "session run: %zu bytes follow the %d input names", len - at, (int)n);
  return BB_OK;
}

/* Looks up the tensors of the input handles; a bad one fails naming the input. */
static int32_t resolve_inputs(const int32_t *handles, int32_t n, const char *const *names, bb_tensor **tensors) {
  for (int32_t i = 0; i < n; i++) {
    tensors[i] = bbw_tensor_of(handles[i]);
    if (tensors[i] == NULL) {
      char reason[BB_ERROR_MESSAGE_MAX];
      memcpy(reason, last_error_message, sizeof reason);
      return bbw_fail(last_error_code, "session run: input %s: %s", names[i], reason);
    }
  }
  return BB_OK;
}

/* Issues a handle for each of the n output tensors (taking their references); on failure
 * retires the handles already issued and drops every reference, keeping the error. */
static int32_t issue_outputs(bb_tensor **outputs, size_t n, int32_t *handles) {
  for (size_t i = 0; i < n; i++) {
    int32_t handle = outputs[i] != NULL ? bbw_tensor_issue(outputs[i])
                                         : bbw_fail(BB_ERR_INVALID_ARGUMENT, "session run: output %zu has no value", i);
    if (handle >= 0) {
      handles[i] = handle;
      continue;
    }
    for (size_t k = 0; k < i; k++) {
      bbw_slot *issued = &slots[(uint32_t)handles[k] & BB_WASM_SLOT_MASK];
      bb_tensor_release(issued->object);
      bbw_slot_release(issued);
    }
    for (size_t k = i + 1; k < n; k++) bb_tensor_release(outputs[k]);
    return handle;
  }
  return BB_OK;
}

int32_t bb_wasm_session_run(int32_t session, int32_t n_inputs, const char *input_names, size_t names_len,
                            const int32_t *input_tensors, int32_t *output_tensors) {
  bbw_error_clear();
  bb_cpu_session *s = session_of(session);
  if (s == NULL) return last_error_code;
  if (n_inputs < 0 || n_inputs > BB_WASM_MAX_HANDLES)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "session run: %d inputs (at most %d tensors exist)", (int)n_inputs,
                BB_WASM_MAX_HANDLES);
  size_t n_outputs = bb_cpu_session_output_count(s);
  if ((n_inputs > 0 && (input_names == NULL || input_tensors == NULL)) || (n_outputs > 0 && output_tensors == NULL))
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "session run: NULL input names, input tensors or output array");
  /* One block for the names, the input tensors and the outputs. */
  size_t slots_needed = (size_t)n_inputs * 2 + n_outputs;
  void **scratch = malloc((slots_needed > 0 ? slots_needed : 1) * sizeof *scratch);
  if (scratch == NULL) return bbw_fail(BB_ERR_NOMEM, "session run: out of memory");
  const char **names = (const char **)scratch;
  bb_tensor **inputs = (bb_tensor **)(scratch + n_inputs);
  bb_tensor **outputs = (bb_tensor **)(scratch + 2 * (size_t)n_inputs);
  int32_t rc = unpack_names(input_names, names_len, n_inputs, names);
  if (rc == BB_OK) rc = resolve_inputs(input_tensors, n_inputs, names, inputs);
  if (rc == BB_OK) {
    bb_error err;
    bb_error_clear(&err);
    int run = bb_cpu_session_run(s, names, inputs, (size_t)n_inputs, outputs, &err);
    rc = run < 0 ? bbw_fail_from(run, &err, "session run") : issue_outputs(outputs, n_outputs, output_tensors);
  }
  free(scratch);
  return rc;
}

int32_t bb_wasm_session_peak_bytes(int32_t session) {
  bbw_error_clear();
  const bb_cpu_session *s = session_of(session);
  if (s == NULL) return last_error_code;
  size_t peak = bb_cpu_session_peak_bytes(s);
  return peak > (size_t)INT32_MAX ? bbw_fail(BB_ERR_LIMIT, "session peak bytes: %zu do not fit the ABI's int32", peak)
                                  : (int32_t)peak;
}

int32_t bb_wasm_session_free(int32_t session) {
  bbw_error_clear();
  bbw_slot *s = bbw_handle_slot(session, SLOT_SESSION);
  if (s == NULL) return last_error_code;
  session_object *object = s->object;
  bb_cpu_session_free(object->session);
  shared_model_release(object->model);
  free(object);
  bbw_slot_release(s);
  return BB_OK;
}

/* ---- the CPU backend's operators ----------------------------------------------- */

int32_t bb_wasm_cpu_op_count(void) { return (int32_t)bb_cpu_op_count(); }

/* Checks an operator index, recording why it is out of range. */
static bool op_index_ok(int32_t i) {
  size_t count = bb_cpu_op_count();
  if (i >= 0 && (size_t)i < count) return true;
  bbw_fail(BB_ERR_INVALID_ARGUMENT, "operator %d does not exist: the CPU backend has %zu", (int)i, count);
  return false;
}

const char *bb_wasm_cpu_op_name(int32_t i) {
  bbw_error_clear();
  return op_index_ok(i) ? bb_cpu_op_name((size_t)i) : NULL;
}

const char *bb_wasm_cpu_op_types(int32_t i) {
  bbw_error_clear();
  return op_index_ok(i) ? bb_cpu_op_types((size_t)i) : NULL;
}
