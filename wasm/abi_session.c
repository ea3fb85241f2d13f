/* bytesandbrains — the CPU backend through bb.wasm's ABI: sessions that run a model's main
 * graph on tensor handles, and the listing of the operators the backend implements. */
#include <stdlib.h>
#include <string.h>

#include "abi_internal.h"
#include "bb/cpu.h"
#include "bb_wasm.h"

/* A session keeps its model alive: it reads the graph for its whole life. */
typedef struct session_object {
  bb_cpu_session *session;
  bbw_shared_model *model;
} session_object;

static bb_cpu_session *session_of(int32_t handle) {
  const bbw_slot *s = bbw_handle_slot(handle, SLOT_SESSION);
  return s != NULL ? ((session_object *)s->object)->session : NULL;
}

int32_t bb_wasm_session_new(int32_t model) {
  bbw_error_clear();
  bbw_shared_model *shared = bbw_model_of(model);
  if (shared == NULL) return bbw_last();
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
    bbw_model_release(shared);
    free(object);
  }
  return handle;
}

int32_t bb_wasm_session_input_count(int32_t session) {
  bbw_error_clear();
  const bb_cpu_session *s = session_of(session);
  return s != NULL ? (int32_t)bb_cpu_session_input_count(s) : bbw_last();
}

int32_t bb_wasm_session_output_count(int32_t session) {
  bbw_error_clear();
  const bb_cpu_session *s = session_of(session);
  return s != NULL ? (int32_t)bb_cpu_session_output_count(s) : bbw_last();
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
      memcpy(reason, bb_wasm_last_error(), sizeof reason);
      return bbw_fail(bbw_last(), "session run: input %s: %s", names[i], reason);
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
    for (size_t k = 0; k < i; k++) bbw_tensor_retire(handles[k]);
    for (size_t k = i + 1; k < n; k++) bb_tensor_release(outputs[k]);
    return handle;
  }
  return BB_OK;
}

/* Slots of a run's names, inputs and outputs that bb_wasm_session_run keeps on its stack. */
#define RUN_SLOTS_ON_STACK 48

int32_t bb_wasm_session_run(int32_t session, int32_t n_inputs, const char *input_names, size_t names_len,
                            const int32_t *input_tensors, int32_t *output_tensors) {
  bbw_error_clear();
  bb_cpu_session *s = session_of(session);
  if (s == NULL) return bbw_last();
  if (n_inputs < 0 || n_inputs > BB_WASM_MAX_HANDLES)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "session run: %d inputs (at most %d tensors exist)", (int)n_inputs,
                    BB_WASM_MAX_HANDLES);
  size_t n_outputs = bb_cpu_session_output_count(s);
  if ((n_inputs > 0 && (input_names == NULL || input_tensors == NULL)) || (n_outputs > 0 && output_tensors == NULL))
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "session run: NULL input names, input tensors or output array");
  /* One block for the names, the input tensors and the outputs: on the stack for the
   * graphs most runs have, so that a steady run allocates nothing here. */
  size_t slots_needed = (size_t)n_inputs * 2 + n_outputs;
  void *on_stack[RUN_SLOTS_ON_STACK];
  void **scratch = slots_needed <= RUN_SLOTS_ON_STACK ? on_stack : malloc(slots_needed * sizeof *scratch);
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
  if (scratch != on_stack) free(scratch);
  return rc;
}

int32_t bb_wasm_session_peak_bytes(int32_t session) {
  bbw_error_clear();
  const bb_cpu_session *s = session_of(session);
  if (s == NULL) return bbw_last();
  size_t peak = bb_cpu_session_peak_bytes(s);
  return peak > (size_t)INT32_MAX ? bbw_fail(BB_ERR_LIMIT, "session peak bytes: %zu do not fit the ABI's int32", peak)
                                  : (int32_t)peak;
}

int32_t bb_wasm_session_free(int32_t session) {
  bbw_error_clear();
  bbw_slot *s = bbw_handle_slot(session, SLOT_SESSION);
  if (s == NULL) return bbw_last();
  session_object *object = s->object;
  bb_cpu_session_free(object->session);
  bbw_model_release(object->model);
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
