/* RNN, GRU, LSTM and their gradient operators on input a confused user or a hostile model
 * gives them: each is refused with an error naming what was wrong, never a crash or an
 * allocation sized by the attacker. What they compute is checked elsewhere: ONNX's node
 * tests (test_onnx_conformance), onnxruntime on random nodes (recurrent_onnxruntime) and
 * PyTorch's autograd (test_grad_torch). */
#include <stdio.h>
#include <string.h>

#include "bb/cpu.h"
#include "harness.h"
#include "optest.h"

static bb_model *model;

static bb_ir_node *node(const char *op, const char *domain, const char *const *ins, int n_in, int n_out) {
  bb_ir_node *n = bb_ir_node_new(model, op, domain, "under_test");
  char name[16];
  for (int i = 0; i < n_in; i++) bb_strlist_append(model, &n->inputs, ins ? ins[i] : "x");
  for (int i = 0; i < n_out; i++) snprintf(name, sizeof name, "out%d", i), bb_strlist_append(model, &n->outputs, name);
  return n;
}

static bb_tensor *filled(int32_t dtype, int rank, const int64_t *dims, double v) {
  bb_tensor *t = bb_tensor_new_zeros(NULL, dtype, rank, dims);
  for (int64_t i = 0; t && i < t->numel; i++) {
    if (dtype == BB_DTYPE_FLOAT) ((float *)bb_tensor_data(t))[i] = (float)v;
    else if (dtype == BB_DTYPE_INT32) ((int32_t *)bb_tensor_data(t))[i] = (int32_t)v;
  }
  return t;
}

/* Runs an LSTM of seq 3, batch 2, input 2, hidden 2 with the given inputs replaced, and
 * checks the code and that the message holds `want`. */
static void expect_lstm(const char *what, int replace, bb_tensor *with, const char *attr, const char *value, int code,
                        const char *want) {
  int64_t xd[3] = {3, 2, 2}, wd[3] = {1, 8, 2}, rd[3] = {1, 8, 2};
  bb_tensor *in[8] = {filled(BB_DTYPE_FLOAT, 3, xd, 0.5), filled(BB_DTYPE_FLOAT, 3, wd, 0.1),
                      filled(BB_DTYPE_FLOAT, 3, rd, 0.1)};
  if (replace >= 0) {
    bb_tensor_release(in[replace]);
    in[replace] = with;
  }
  static const char *const NAMES[8] = {"x", "w", "r", "b", "lens", "h0", "c0", "p"};
  int n_in = replace >= 3 ? replace + 1 : 3;
  bb_ir_node *n = node("LSTM", NULL, NAMES, n_in, 3);
  if (attr && strcmp(attr, "activations") == 0)
    bb_attr_set_strings(model, &n->attrs, attr, (const char *[]){value, "Tanh", "Tanh"}, 3);
  else if (attr)
    bb_attr_set_string(model, &n->attrs, attr, value);
  bb_tensor *out[3];
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_cpu_run_node(n, 14, in, (size_t)n_in, out, 3, NULL, &err);
  CHECK_MSG(rc == code, "%s: rc %d (%s), expected %d", what, rc, err.message, code);
  CHECK_MSG(strstr(err.message, want), "%s: \"%s\" lacks \"%s\"", what, err.message, want);
  for (int i = 0; i < 8; i++) bb_tensor_release(in[i]);
}

static void test_malformed_inputs_are_named(void) {
  expect_lstm("W of the wrong shape", 1, filled(BB_DTYPE_FLOAT, 3, (int64_t[]){1, 6, 2}, 0), NULL, NULL, BB_ERR_TYPE,
              "W must be [1, 8, 2]");
  expect_lstm("B of the wrong width", 3, filled(BB_DTYPE_FLOAT, 2, (int64_t[]){1, 8}, 0), NULL, NULL, BB_ERR_TYPE,
              "B must be [1, 16]");
  expect_lstm("a length past the sequence", 4, filled(BB_DTYPE_INT32, 1, (int64_t[]){2}, 4), NULL, NULL,
              BB_ERR_INVALID_ARGUMENT, "sequence_lens[0] is 4, outside [0, 3]");
  expect_lstm("a negative length", 4, filled(BB_DTYPE_INT32, 1, (int64_t[]){2}, -1), NULL, NULL,
              BB_ERR_INVALID_ARGUMENT, "sequence_lens[0] is -1");
  expect_lstm("lengths of another batch", 4, filled(BB_DTYPE_INT32, 1, (int64_t[]){3}, 1), NULL, NULL, BB_ERR_TYPE,
              "sequence_lens must be int32 [2]");
  expect_lstm("initial_h of another batch", 5, filled(BB_DTYPE_FLOAT, 3, (int64_t[]){1, 3, 2}, 0), NULL, NULL,
              BB_ERR_TYPE, "initial_h must be [1, 2, 2]");
  expect_lstm("peepholes too short", 7, filled(BB_DTYPE_FLOAT, 2, (int64_t[]){1, 4}, 0), NULL, NULL, BB_ERR_TYPE,
              "P must be [1, 6]");
  expect_lstm("float64 X", 0, filled(BB_DTYPE_DOUBLE, 3, (int64_t[]){3, 2, 2}, 0), NULL, NULL, BB_ERR_TYPE, "element type double");
  expect_lstm("an unknown activation", -1, NULL, "activations", "Swish", BB_ERR_UNSUPPORTED, "activation Swish");
  expect_lstm("an unknown direction", -1, NULL, "direction", "sideways", BB_ERR_INVALID_ARGUMENT, "direction sideways");
}

/* X [2^20, 2^20, 0] holds no element, yet its steps times its batch ask for a projection
 * of 2^42 floats: the op refuses it by the cap before allocating anything. */
static void test_empty_input_with_huge_dims_is_capped(void) {
  int64_t xd[3] = {(int64_t)1 << 20, (int64_t)1 << 20, 0}, wd[3] = {1, 4, 0}, rd[3] = {1, 4, 1};
  bb_tensor *in[3] = {bb_tensor_new_zeros(NULL, BB_DTYPE_FLOAT, 3, xd), bb_tensor_new_zeros(NULL, BB_DTYPE_FLOAT, 3, wd),
                      bb_tensor_new_zeros(NULL, BB_DTYPE_FLOAT, 3, rd)};
  CHECK(in[0] && in[1] && in[2]);
  bb_ir_node *n = node("LSTM", NULL, NULL, 3, 2);
  bb_tensor *out[2];
  bb_error err;
  int rc = bb_cpu_run_node(n, 14, in, 3, out, 2, NULL, &err);
  CHECK_MSG(rc == BB_ERR_LIMIT, "rc %d (%s)", rc, err.message);
  CHECK_MSG(strstr(err.message, "the gates of every step"), "%s", err.message);
  for (int i = 0; i < 3; i++) bb_tensor_release(in[i]);
}

/* A row of length 0 never steps: its Y is 0 and its Y_h is its initial state. */
static void test_zero_length_row_keeps_its_state(void) {
  int64_t xd[3] = {2, 2, 1}, wd[3] = {1, 1, 1}, hd[3] = {1, 2, 1};
  bb_tensor *in[6] = {filled(BB_DTYPE_FLOAT, 3, xd, 1.0), filled(BB_DTYPE_FLOAT, 3, wd, 0.5),
                      filled(BB_DTYPE_FLOAT, 3, wd, 0.5), NULL,
                      bb_tensor_new_zeros(NULL, BB_DTYPE_INT32, 1, (int64_t[]){2}), filled(BB_DTYPE_FLOAT, 3, hd, 0.25)};
  ((int32_t *)bb_tensor_data(in[4]))[1] = 2; /* row 0: length 0; row 1: the whole sequence */
  static const char *const NAMES[6] = {"x", "w", "r", "", "lens", "h0"};
  bb_ir_node *n = node("RNN", NULL, NAMES, 6, 2);
  bb_tensor *out[2];
  bb_error err;
  CHECK_EQ_INT(bb_cpu_run_node(n, 14, in, 6, out, 2, NULL, &err), 0);
  const float *y = bb_tensor_data(out[0]), *yh = bb_tensor_data(out[1]);
  CHECK(y[0] == 0.0f && y[2] == 0.0f); /* Y[t, 0, 0] for both steps */
  CHECK(yh[0] == 0.25f);
  CHECK(yh[1] != 0.25f && y[3] == yh[1]); /* row 1 stepped; its last Y is its Y_h */
  for (int i = 0; i < 2; i++) bb_tensor_release(out[i]);
  for (int i = 0; i < 6; i++) bb_tensor_release(in[i]);
}

/* The gradient operator checks the gradients it is handed against the forward's shapes. */
static void test_grad_op_checks_output_gradients(void) {
  int64_t xd[3] = {3, 2, 2}, wd[3] = {1, 6, 2}, rd[3] = {1, 6, 2}, yd[4] = {3, 1, 2, 3};
  bb_tensor *in[8] = {filled(BB_DTYPE_FLOAT, 3, xd, 0.5), filled(BB_DTYPE_FLOAT, 3, wd, 0.1),
                      filled(BB_DTYPE_FLOAT, 3, rd, 0.1), NULL, NULL, NULL, filled(BB_DTYPE_FLOAT, 4, yd, 1.0)};
  static const char *const NAMES[8] = {"x", "w", "r", "", "", "", "dy", ""};
  bb_ir_node *n = node("GRUGrad", "ai.bytesandbrains.grad", NAMES, 7, 5);
  bb_attr_set_int(model, &n->attrs, "hidden_size", 2);
  bb_tensor *out[5];
  bb_error err;
  int rc = bb_cpu_run_node(n, 17, in, 7, out, 5, NULL, &err);
  CHECK_MSG(rc == BB_ERR_TYPE && strstr(err.message, "dY must be float32 shaped like the forward output"), "rc %d (%s)",
            rc, err.message);
  for (int i = 0; i < 8; i++) bb_tensor_release(in[i]);
}

int main(void) {
  model = bb_model_new(NULL);
  RUN(test_malformed_inputs_are_named);
  RUN(test_empty_input_with_huge_dims_is_capped);
  RUN(test_zero_length_row_keeps_its_state);
  RUN(test_grad_op_checks_output_gradients);
  bb_model_free(model);
  return bb_test_finish();
}
