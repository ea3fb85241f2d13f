/* The CPU backend's elementwise math past the conformance tests (src/cpu/elementwise_math.c):
 * the trigonometric and hyperbolic functions, ThresholdedRelu, Celu, PRelu's broadcast
 * slope, IsNaN and IsInf, checked against the C library and references written here. */
#include <math.h>
#include <stdlib.h>

#include "bb/cpu.h"
#include "harness.h"
#include "optest.h"

static bb_model *model;

static void test_trigonometric(void) {
  const char *ops[] = {"Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"};
  double (*ref[])(double) = {sin, cos, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh};
  int64_t d[] = {33};
  for (int k = 0; k < 11; k++) {
    bool unit = k == 3 || k == 4 || k == 10; /* asin, acos, atanh: inside (-1, 1); acosh: from 1 */
    double lo = k == 9 ? 1 : unit ? -0.99 : -3, hi = k == 9 ? 5 : unit ? 0.99 : 3;
    bb_tensor *x = optest_rand(BB_DTYPE_FLOAT, 1, d, lo, hi), *out[1];
    bb_error err;
    CHECK_EQ_INT(bb_cpu_run_node(optest_node(model, ops[k], 1, 1), 13, &x, 1, out, 1, NULL, &err), 0);
    double want[33];
    for (int i = 0; i < 33; i++) want[i] = ref[k](tensor_real(x, i));
    CHECK_MSG(optest_max_err(out[0], want) < 1e-6, "%s error %g", ops[k], optest_max_err(out[0], want));
    bb_tensor_release(out[0]);
    bb_tensor_release(x);
  }
}

static void test_activations_and_nan_inf_checks(void) {
  int64_t d[] = {33};
  /* ThresholdedRelu(alpha 0.5) and Celu(alpha 2) */
  bb_tensor *x = optest_rand(BB_DTYPE_FLOAT, 1, d, -3, 3), *out[1];
  bb_error err;
  bb_ir_node *n = optest_node(model, "ThresholdedRelu", 1, 1);
  bb_attr_set_float(model, &n->attrs, "alpha", 0.5f);
  CHECK_EQ_INT(bb_cpu_run_node(n, 10, &x, 1, out, 1, NULL, &err), 0);
  double want[33];
  for (int i = 0; i < 33; i++) want[i] = tensor_real(x, i) > 0.5 ? tensor_real(x, i) : 0;
  CHECK(optest_max_err(out[0], want) == 0);
  bb_tensor_release(out[0]);
  n = optest_node(model, "Celu", 1, 1);
  bb_attr_set_float(model, &n->attrs, "alpha", 2.0f);
  CHECK_EQ_INT(bb_cpu_run_node(n, 12, &x, 1, out, 1, NULL, &err), 0);
  for (int i = 0; i < 33; i++) {
    double v = tensor_real(x, i);
    want[i] = (v > 0 ? v : 0) + fmin(0, 2 * (exp(v / 2) - 1));
  }
  CHECK_MSG(optest_max_err(out[0], want) < 1e-6, "Celu error %g", optest_max_err(out[0], want));
  bb_tensor_release(out[0]);
  /* IsNaN, IsInf(detect_negative = 0), IsInf(detect_positive = 0) */
  float *xv = bb_tensor_data(x);
  xv[1] = NAN, xv[2] = INFINITY, xv[3] = -INFINITY;
  CHECK_EQ_INT(bb_cpu_run_node(optest_node(model, "IsNaN", 1, 1), 13, &x, 1, out, 1, NULL, &err), 0);
  CHECK(out[0]->dtype == BB_DTYPE_BOOL);
  for (int i = 0; i < 33; i++) CHECK_EQ_INT(tensor_int(out[0], i), i == 1);
  bb_tensor_release(out[0]);
  n = optest_node(model, "IsInf", 1, 1);
  bb_attr_set_int(model, &n->attrs, "detect_negative", 0);
  CHECK_EQ_INT(bb_cpu_run_node(n, 10, &x, 1, out, 1, NULL, &err), 0);
  for (int i = 0; i < 33; i++) CHECK_EQ_INT(tensor_int(out[0], i), i == 2);
  bb_tensor_release(out[0]);
  n = optest_node(model, "IsInf", 1, 1);
  bb_attr_set_int(model, &n->attrs, "detect_positive", 0);
  CHECK_EQ_INT(bb_cpu_run_node(n, 10, &x, 1, out, 1, NULL, &err), 0);
  for (int i = 0; i < 33; i++) CHECK_EQ_INT(tensor_int(out[0], i), i == 3);
  bb_tensor_release(out[0]);
  bb_tensor_release(x);
}


/* PRelu's slope [3, 1] broadcast against x [2, 3, 7]: one slope per channel; a slope that
 * does not broadcast is refused. */
static void test_prelu(void) {
  int64_t xd[] = {2, 3, 7}, sd[] = {3, 1}, bad[] = {2};
  bb_tensor *in[2] = {optest_rand(BB_DTYPE_DOUBLE, 3, xd, -3, 3), optest_rand(BB_DTYPE_DOUBLE, 2, sd, 0.1, 0.9)};
  bb_tensor *out[1];
  bb_error err;
  CHECK_EQ_INT(bb_cpu_run_node(optest_node(model, "PRelu", 2, 1), 16, in, 2, out, 1, NULL, &err), 0);
  double y[42];
  for (int i = 0; i < 42; i++) {
    double v = tensor_real(in[0], i);
    y[i] = v >= 0 ? v : v * tensor_real(in[1], (i / 7) % 3);
  }
  CHECK(optest_max_err(out[0], y) == 0);
  bb_tensor_release(out[0]);
  bb_tensor_release(in[1]);
  in[1] = optest_rand(BB_DTYPE_DOUBLE, 1, bad, 0, 1); /* 2 does not broadcast to 7 */
  CHECK(bb_cpu_run_node(optest_node(model, "PRelu", 2, 1), 16, in, 2, out, 1, NULL, &err) != 0);
  bb_tensor_release(in[1]);
  bb_tensor_release(in[0]);
}

int main(void) {
  model = bb_model_new(NULL);
  RUN(test_trigonometric);
  RUN(test_activations_and_nan_inf_checks);
  RUN(test_prelu);
  bb_model_free(model);
  return bb_test_finish();
}
