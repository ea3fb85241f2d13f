/* Elementwise unary operations; the transcendental ones come from vmath.h. */
#include <math.h>

#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"
#include "tensor/kernels/vmath.h"

BBI_INLINE bbi_f32x4 vop(bbi_unary_op op, bbi_f32x4 x, const bbi_vmath_consts *k) {
  switch (op) {
  case BBI_UNARY_NEG: return bbi_f32x4_neg(x);
  case BBI_UNARY_ABS: return bbi_f32x4_abs(x);
  case BBI_UNARY_SQRT: return bbi_f32x4_sqrt(x);
  case BBI_UNARY_EXP: return bbi_f32x4_exp(x, k);
  case BBI_UNARY_LOG: return bbi_f32x4_log(x, k);
  case BBI_UNARY_RELU: {
    const bbi_f32x4 zero = bbi_f32x4_splat(0.0f);
    return bbi_f32x4_select(x < zero, zero, x) + zero;
  }
  case BBI_UNARY_SIGMOID: return bbi_f32x4_sigmoid(x, k);
  default: return bbi_f32x4_tanh(x, k);
  }
}

BBI_INLINE void unary_loop(bbi_unary_op op, size_t n, const float *x, float *y) {
  const bbi_vmath_consts k = bbi_vmath_k;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const bbi_f32x4 r0 = vop(op, bbi_f32x4_load(x + i), &k);
    const bbi_f32x4 r1 = vop(op, bbi_f32x4_load(x + i + 4), &k);
    bbi_f32x4_store(y + i, r0);
    bbi_f32x4_store(y + i + 4, r1);
  }
  for (; i + 4 <= n; i += 4) bbi_f32x4_store(y + i, vop(op, bbi_f32x4_load(x + i), &k));
  if (i < n) bbi_f32x4_store_tail(y + i, vop(op, bbi_f32x4_load_tail(x + i, n - i), &k), n - i);
}

/* Sigmoid sixteen floats at a time (then eight): the four vectors' fast paths are computed
 * and stored with no branch between them, then one range test for the four; only when
 * some lane needs the full exp (|x| above about 86) is each vector that does computed
 * again and stored over, as bbi_f32x4_sigmoid chooses, so every float gets the same bits as
 * there. Written so, the common path is straight-line code under V8: with the choice made
 * before the computation, LLVM and V8 turned it into a branch per vector with spills around
 * each, and sixteen floats a step then ran slower than eight; now it runs 5-15 % faster. */
static void sigmoid_loop(size_t n, const float *x, float *y) {
  const bbi_vmath_consts k = bbi_vmath_k;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const bbi_f32x4 a = bbi_f32x4_load(x + i), b = bbi_f32x4_load(x + i + 4);
    const bbi_f32x4 c = bbi_f32x4_load(x + i + 8), d = bbi_f32x4_load(x + i + 12);
    bbi_f32x4_store(y + i, bbi_f32x4_sigmoid_fast(a, &k));
    bbi_f32x4_store(y + i + 4, bbi_f32x4_sigmoid_fast(b, &k));
    bbi_f32x4_store(y + i + 8, bbi_f32x4_sigmoid_fast(c, &k));
    bbi_f32x4_store(y + i + 12, bbi_f32x4_sigmoid_fast(d, &k));
    const bbi_i32x4 sa = bbi_f32x4_sigmoid_slow_lanes(a, &k), sb = bbi_f32x4_sigmoid_slow_lanes(b, &k);
    const bbi_i32x4 sc = bbi_f32x4_sigmoid_slow_lanes(c, &k), sd = bbi_f32x4_sigmoid_slow_lanes(d, &k);
    if (bbi_i32x4_any((sa | sb) | (sc | sd))) {
      if (bbi_i32x4_any(sa)) bbi_f32x4_store(y + i, bbi_f32x4_sigmoid(a, &k));
      if (bbi_i32x4_any(sb)) bbi_f32x4_store(y + i + 4, bbi_f32x4_sigmoid(b, &k));
      if (bbi_i32x4_any(sc)) bbi_f32x4_store(y + i + 8, bbi_f32x4_sigmoid(c, &k));
      if (bbi_i32x4_any(sd)) bbi_f32x4_store(y + i + 12, bbi_f32x4_sigmoid(d, &k));
    }
  }
  for (; i + 8 <= n; i += 8) {
    const bbi_f32x4 a = bbi_f32x4_load(x + i), b = bbi_f32x4_load(x + i + 4);
    bbi_f32x4_store(y + i, bbi_f32x4_sigmoid_fast(a, &k));
    bbi_f32x4_store(y + i + 4, bbi_f32x4_sigmoid_fast(b, &k));
    const bbi_i32x4 slow_a = bbi_f32x4_sigmoid_slow_lanes(a, &k), slow_b = bbi_f32x4_sigmoid_slow_lanes(b, &k);
    if (bbi_i32x4_any(slow_a | slow_b)) {
      if (bbi_i32x4_any(slow_a)) bbi_f32x4_store(y + i, bbi_f32x4_sigmoid(a, &k));
      if (bbi_i32x4_any(slow_b)) bbi_f32x4_store(y + i + 4, bbi_f32x4_sigmoid(b, &k));
    }
  }
  if (i < n) unary_loop(BBI_UNARY_SIGMOID, n - i, x + i, y + i);
}

void bbi_f32_vunary(bbi_unary_op op, size_t n, const float *x, float *y) {
  switch (op) {
  case BBI_UNARY_NEG: unary_loop(BBI_UNARY_NEG, n, x, y); break;
  case BBI_UNARY_ABS: unary_loop(BBI_UNARY_ABS, n, x, y); break;
  case BBI_UNARY_SQRT: unary_loop(BBI_UNARY_SQRT, n, x, y); break;
  case BBI_UNARY_EXP: unary_loop(BBI_UNARY_EXP, n, x, y); break;
  case BBI_UNARY_LOG: unary_loop(BBI_UNARY_LOG, n, x, y); break;
  case BBI_UNARY_RELU: unary_loop(BBI_UNARY_RELU, n, x, y); break;
  case BBI_UNARY_SIGMOID: sigmoid_loop(n, x, y); break;
  case BBI_UNARY_TANH: unary_loop(BBI_UNARY_TANH, n, x, y); break;
  default: break;
  }
}

static float op_scalar(bbi_unary_op op, float x) {
  switch (op) {
  case BBI_UNARY_NEG: return -x;
  case BBI_UNARY_ABS: return fabsf(x);
  case BBI_UNARY_SQRT: return sqrtf(x);
  case BBI_UNARY_EXP: return expf(x);
  case BBI_UNARY_LOG: return logf(x);
  case BBI_UNARY_RELU: return bbi_f32_relu_scalar(x);
  case BBI_UNARY_SIGMOID: return (float)(1.0 / (1.0 + exp(-(double)x)));
  default: return (float)tanh((double)x);
  }
}

void bbi_f32_vunary_scalar(bbi_unary_op op, size_t n, const float *x, float *y) {
  for (size_t i = 0; i < n; i++) y[i] = op_scalar(op, x[i]);
}
