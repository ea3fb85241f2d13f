/* Elementwise unary operations; the transcendental ones come from vmath.h. */
#include <math.h>

#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"
#include "tensor/kernels/vmath.h"

BB_INLINE bb_f32x4 vop(bb_unary_op op, bb_f32x4 x) {
  switch (op) {
  case BB_UNARY_NEG: return bb_f32x4_neg(x);
  case BB_UNARY_ABS: return bb_f32x4_abs(x);
  case BB_UNARY_SQRT: return bb_f32x4_sqrt(x);
  case BB_UNARY_EXP: return bb_f32x4_exp(x);
  case BB_UNARY_LOG: return bb_f32x4_log(x);
  case BB_UNARY_RELU: {
    const bb_f32x4 zero = bb_f32x4_splat(0.0f);
    return bb_f32x4_select(x < zero, zero, x) + zero;
  }
  case BB_UNARY_SIGMOID: return bb_f32x4_sigmoid(x);
  default: return bb_f32x4_tanh(x);
  }
}

BB_INLINE void unary_loop(bb_unary_op op, size_t n, const float *x, float *y) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const bb_f32x4 r0 = vop(op, bb_f32x4_load(x + i));
    const bb_f32x4 r1 = vop(op, bb_f32x4_load(x + i + 4));
    bb_f32x4_store(y + i, r0);
    bb_f32x4_store(y + i + 4, r1);
  }
  for (; i + 4 <= n; i += 4) bb_f32x4_store(y + i, vop(op, bb_f32x4_load(x + i)));
  if (i < n) bb_f32x4_store_tail(y + i, vop(op, bb_f32x4_load_tail(x + i, n - i)), n - i);
}

void bb_f32_vunary(bb_unary_op op, size_t n, const float *x, float *y) {
  switch (op) {
  case BB_UNARY_NEG: unary_loop(BB_UNARY_NEG, n, x, y); break;
  case BB_UNARY_ABS: unary_loop(BB_UNARY_ABS, n, x, y); break;
  case BB_UNARY_SQRT: unary_loop(BB_UNARY_SQRT, n, x, y); break;
  case BB_UNARY_EXP: unary_loop(BB_UNARY_EXP, n, x, y); break;
  case BB_UNARY_LOG: unary_loop(BB_UNARY_LOG, n, x, y); break;
  case BB_UNARY_RELU: unary_loop(BB_UNARY_RELU, n, x, y); break;
  case BB_UNARY_SIGMOID: unary_loop(BB_UNARY_SIGMOID, n, x, y); break;
  case BB_UNARY_TANH: unary_loop(BB_UNARY_TANH, n, x, y); break;
  default: break;
  }
}

static float op_scalar(bb_unary_op op, float x) {
  switch (op) {
  case BB_UNARY_NEG: return -x;
  case BB_UNARY_ABS: return fabsf(x);
  case BB_UNARY_SQRT: return sqrtf(x);
  case BB_UNARY_EXP: return expf(x);
  case BB_UNARY_LOG: return logf(x);
  case BB_UNARY_RELU: return (x < 0.0f ? 0.0f : x) + 0.0f;
  case BB_UNARY_SIGMOID: return (float)(1.0 / (1.0 + exp(-(double)x)));
  default: return (float)tanh((double)x);
  }
}

void bb_f32_vunary_scalar(bb_unary_op op, size_t n, const float *x, float *y) {
  for (size_t i = 0; i < n; i++) y[i] = op_scalar(op, x[i]);
}
