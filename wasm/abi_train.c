/* bytesandbrains — training any ONNX model through bb.wasm's ABI: a trainer is the
 * OnnxModel engine (bb/onnx_model.h) behind a handle; batches, predictions and parameters
 * cross as tensor handles. */
#include <math.h>
#include <stdlib.h>

#include "abi_internal.h"
#include "bb/onnx_model.h"
#include "bb_wasm.h"

typedef struct trainer_object {
  bb_onnx_model *model;
  float last_loss;
} trainer_object;

static trainer_object *trainer_of(int32_t handle) {
  const bbw_slot *s = bbw_handle_slot(handle, SLOT_TRAINER);
  return s != NULL ? s->object : NULL;
}

int32_t bb_wasm_trainer_new(const uint8_t *onnx, size_t len, const char *config, uint64_t seed) {
  bbw_error_clear();
  if (onnx == NULL && len > 0) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "trainer new: NULL model of %zu bytes", len);
  bb_error err;
  bb_error_clear(&err);
  bb_onnx_model_config c;
  int rc = bb_onnx_model_config_parse(config, NULL, seed, &c, &err);
  if (rc < 0) return bbw_fail_from(rc, &err, "trainer new: config");
  trainer_object *t = calloc(1, sizeof *t);
  if (t == NULL) return bbw_fail(BB_ERR_NOMEM, "trainer new: out of memory");
  t->last_loss = NAN;
  if ((rc = bb_onnx_model_new(onnx, len, &c, NULL, &t->model, &err)) < 0) {
    free(t);
    return bbw_fail_from(rc, &err, "trainer new");
  }
  int32_t handle = bbw_handle_issue(SLOT_TRAINER, t);
  if (handle < 0) {
    bb_onnx_model_free(t->model);
    free(t);
  }
  return handle;
}

int32_t bb_wasm_trainer_free(int32_t trainer) {
  bbw_error_clear();
  bbw_slot *s = bbw_handle_slot(trainer, SLOT_TRAINER);
  if (s == NULL) return bbw_last();
  trainer_object *t = s->object;
  bb_onnx_model_free(t->model);
  free(t);
  bbw_slot_release(s);
  return BB_OK;
}

int32_t bb_wasm_trainer_param_count(int32_t trainer) {
  bbw_error_clear();
  const trainer_object *t = trainer_of(trainer);
  if (t == NULL) return bbw_last();
  size_t n = bb_onnx_model_param_count(t->model);
  return n <= INT32_MAX ? (int32_t)n : bbw_fail(BB_ERR_LIMIT, "trainer: %zu parameters do not fit an int32", n);
}

int32_t bb_wasm_trainer_step(int32_t trainer, int32_t x, int32_t labels) {
  bbw_error_clear();
  trainer_object *t = trainer_of(trainer);
  const bb_tensor *tx = t ? bbw_tensor_of(x) : NULL, *ty = tx ? bbw_tensor_of(labels) : NULL;
  if (ty == NULL) return bbw_last();
  bb_grad_step st;
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_onnx_model_step(t->model, tx, ty, &st, &err);
  if (rc < 0) return bbw_fail_from(rc, &err, "trainer step");
  t->last_loss = st.loss;
  return st.applied ? 1 : 0;
}

float bb_wasm_trainer_last_loss(int32_t trainer) {
  bbw_error_clear();
  const trainer_object *t = trainer_of(trainer);
  return t != NULL ? t->last_loss : NAN;
}

int32_t bb_wasm_trainer_predict(int32_t trainer, int32_t x) {
  bbw_error_clear();
  trainer_object *t = trainer_of(trainer);
  const bb_tensor *tx = t ? bbw_tensor_of(x) : NULL;
  if (tx == NULL) return bbw_last();
  bb_tensor *y = NULL;
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_onnx_model_predict(t->model, tx, &y, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "trainer predict") : bbw_tensor_issue(y);
}

int32_t bb_wasm_trainer_evaluate(int32_t trainer, int32_t x, int32_t labels) {
  bbw_error_clear();
  bbw_result_clear();
  trainer_object *t = trainer_of(trainer);
  const bb_tensor *tx = t ? bbw_tensor_of(x) : NULL, *ty = tx ? bbw_tensor_of(labels) : NULL;
  if (ty == NULL) return bbw_last();
  bb_tensor *y = NULL;
  float score = 0, loss = 0;
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_onnx_model_predict(t->model, tx, &y, &err);
  if (!rc) rc = bb_onnx_model_loss(t->model, y, ty, &loss, &err);
  bb_tensor_release(y);
  if (!rc) rc = bb_onnx_model_evaluate(t->model, tx, ty, &score, &err);
  if (rc < 0) return bbw_fail_from(rc, &err, "trainer evaluate");
  bb_le_writer w = bbw_writer();
  bb_le_write_f32(&w, score);
  bb_le_write_f32(&w, loss);
  return bbw_result_from(&w, "trainer evaluate");
}

int32_t bb_wasm_trainer_params(int32_t trainer) {
  bbw_error_clear();
  const trainer_object *t = trainer_of(trainer);
  if (t == NULL) return bbw_last();
  int64_t n = (int64_t)bb_onnx_model_param_count(t->model);
  bb_tensor *p = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 1, &n);
  if (p == NULL) return bbw_fail(BB_ERR_NOMEM, "trainer params: out of memory");
  bb_onnx_model_get_params(t->model, bb_tensor_data(p), (size_t)n, NULL);
  return bbw_tensor_issue(p);
}

int32_t bb_wasm_trainer_load_params(int32_t trainer, int32_t params) {
  bbw_error_clear();
  trainer_object *t = trainer_of(trainer);
  const bb_tensor *p = t ? bbw_tensor_of(params) : NULL;
  if (p == NULL) return bbw_last();
  if (p->dtype != BB_DTYPE_FLOAT)
    return bbw_fail(BB_ERR_TYPE, "trainer load params: parameters are float32, got %s", bb_dtype_name(p->dtype));
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_onnx_model_set_params(t->model, bb_tensor_data(p), (size_t)p->numel, false, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "trainer load params") : BB_OK;
}

int32_t bb_wasm_trainer_export(int32_t trainer) {
  bbw_error_clear();
  bbw_result_clear();
  trainer_object *t = trainer_of(trainer);
  if (t == NULL) return bbw_last();
  uint8_t *bytes = NULL;
  size_t len = 0;
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_onnx_model_export(t->model, &bytes, &len, &err);
  if (rc < 0) return bbw_fail_from(rc, &err, "trainer export");
  bbw_result_take(bytes, len);
  return BB_OK;
}

int32_t bb_wasm_trainer_save(int32_t trainer) {
  bbw_error_clear();
  bbw_result_clear();
  const trainer_object *t = trainer_of(trainer);
  if (t == NULL) return bbw_last();
  uint8_t *bytes = NULL;
  size_t len = 0;
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_onnx_model_save(t->model, NULL, &bytes, &len, &err);
  if (rc < 0) return bbw_fail_from(rc, &err, "trainer save");
  bbw_result_take(bytes, len);
  return BB_OK;
}

int32_t bb_wasm_trainer_restore(int32_t trainer, const uint8_t *data, size_t len) {
  bbw_error_clear();
  trainer_object *t = trainer_of(trainer);
  if (t == NULL) return bbw_last();
  if (data == NULL && len > 0) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "trainer restore: NULL data of %zu bytes", len);
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_onnx_model_restore(t->model, data, len, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "trainer restore") : BB_OK;
}

int32_t bb_wasm_trainer_stats(int32_t trainer) {
  bbw_error_clear();
  bbw_result_clear();
  const trainer_object *t = trainer_of(trainer);
  if (t == NULL) return bbw_last();
  const bb_grad_trainer *g = bb_onnx_model_trainer(t->model);
  bb_grad_trainer_memory_stats m;
  bb_grad_trainer_memory(g, &m);
  bb_le_writer w = bbw_writer();
  bb_le_write_u64(&w, bb_grad_trainer_steps(g));
  bb_le_write_u64(&w, bb_grad_trainer_refused(g));
  bb_le_write_u64(&w, m.held_bytes);
  bb_le_write_u64(&w, m.step_in_use_high_water);
  bb_le_write_u64(&w, m.step_high_water);
  bb_le_write_u64(&w, m.allocations);
  return bbw_result_from(&w, "trainer stats");
}
