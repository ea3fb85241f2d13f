/* bytesandbrains — ONNX models through bb.wasm's ABI: decode, encode, summary, free. A
 * model is shared with the sessions made from it (bbw_shared_model). */
#include <stdlib.h>

#include "abi_internal.h"
#include "bb_wasm.h"

bbw_shared_model *bbw_model_of(int32_t handle) {
  const bbw_slot *s = bbw_handle_slot(handle, SLOT_MODEL);
  return s != NULL ? s->object : NULL;
}

void bbw_model_release(bbw_shared_model *shared) {
  if (--shared->users > 0) return;
  bb_model_free(shared->model);
  free(shared);
}

int32_t bb_wasm_model_decode(const uint8_t *data, size_t len) {
  bbw_error_clear();
  if (data == NULL && len > 0)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "model decode: NULL data with length %zu", len);
  bb_model *model = NULL;
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_model_decode(data, len, NULL, NULL, &model, &err);
  if (rc < 0) return bbw_fail_from(rc, &err, "model decode");
  bbw_shared_model *shared = malloc(sizeof *shared);
  if (shared == NULL) {
    bb_model_free(model);
    return bbw_fail(BB_ERR_NOMEM, "model decode: out of memory");
  }
  *shared = (bbw_shared_model){.model = model, .users = 1};
  int32_t handle = bbw_handle_issue(SLOT_MODEL, shared);
  if (handle < 0) bbw_model_release(shared);
  return handle;
}

int32_t bb_wasm_model_encode(int32_t model) {
  bbw_error_clear();
  bbw_result_clear();
  const bbw_shared_model *shared = bbw_model_of(model);
  if (shared == NULL) return bbw_last();
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
  const bbw_shared_model *shared = bbw_model_of(model);
  if (shared == NULL) return bbw_last();
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
  if (s == NULL) return bbw_last();
  bbw_model_release(s->object);
  bbw_slot_release(s);
  return BB_OK;
}
