/* Shared by the FedAvg-family round tests: StepModel, a Model whose Params are [0, 0] and
 * whose Fit(g) is g + (delta, -delta) (or NaN with nan=1), reporting `samples` samples, so
 * that every aggregate a round should give is known exactly. Configuration: delta (1),
 * nan (0), samples (4). */
#ifndef BB_TESTS_STEP_MODEL_FIXTURE_H
#define BB_TESTS_STEP_MODEL_FIXTURE_H

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/rttest.h"


typedef struct step_model {
  float delta;
  bool nan;
  uint64_t samples;
} step_model;

static int step_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const KEYS[] = {"delta", "nan", "samples", NULL};
  step_model m = {1, false, 4};
  uint64_t nan;
  int rc;
  if ((rc = bb_config_check(init->config, KEYS, err)) ||
      (rc = bb_config_f32(init->config, "delta", 1, &m.delta, err)) ||
      (rc = bb_config_u64(init->config, "nan", 0, &nan, err)) ||
      (rc = bb_config_u64(init->config, "samples", 4, &m.samples, err)))
    return rc;
  m.nan = nan != 0;
  step_model *p = malloc(sizeof *p);
  if (!p) return BB_ERR_NOMEM;
  *p = m;
  *self = p;
  return 0;
}

static void step_destroy(void *self) { free(self); }

static int step_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  (void)ctx;
  const step_model *m = self;
  if (strcmp(call->op_type, "Params") == 0) {
    call->outputs[0] = f32_val((const float[]){0, 0}, 2);
    return 0;
  }
  if (strcmp(call->op_type, "Fit") != 0)
    return bb_error_set(err, BB_ERR_UNSUPPORTED, "StepModel: no %s", call->op_type);
  const bb_val *g = call->inputs[0];
  if (!g || bb_val_kind_of(g) != BB_VAL_TENSOR || bb_val_as_tensor(g)->numel != 2)
    return bb_error_set(err, BB_ERR_TYPE, "StepModel: Fit takes float32 [2]");
  const float *x = bb_tensor_data(bb_val_as_tensor(g));
  float y[2] = {m->nan ? NAN : x[0] + m->delta, m->nan ? NAN : x[1] - m->delta};
  call->outputs[0] = f32_val(y, 2);
  call->outputs[1] = bb_val_u64(NULL, BB_VAL_U64, m->samples);
  return 0;
}

static const bb_component_type STEP_MODEL = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "StepModel",
    .roles = 1u << BB_ROLE_MODEL,
    .create = step_create,
    .destroy = step_destroy,
    .invoke = step_invoke,
};

#endif
