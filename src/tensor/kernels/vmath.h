/* Vectorised exp, log, sigmoid and tanh on four lanes, within 2 ulp of the correctly
 * rounded result over the whole float range, with IEEE behaviour at the edges: NaN in
 * gives NaN out, overflow gives inf, underflow goes through the subnormals to 0. Checked
 * once against libm on all 2^32 inputs: exp, log and tanh within 1 ulp, sigmoid within 2;
 * tests/tensor/test_kernels.c repeats the check on a million of them.
 *
 * The polynomial coefficients were fitted for this file: a weighted least-squares fit on
 * 3000 Chebyshev nodes, iteratively reweighted towards the minimax error (Lawson), in
 * extended precision, then rounded to float. The fitted part of each function and its
 * relative error before rounding:
 *   exp:  (e^r - 1 - r)/r^2 on |r| <= ln2/2, degree 4, 3.1e-9
 *   log:  (log1p(f) - f + f^2/2)/f^3 on [sqrt(1/2)-1, sqrt(2)-1], degree 7, 5.8e-9
 *   tanh: (tanh(x) - x)/x^3 as a polynomial in u = x^2 on |x| <= 0.625, degree 4, 4.4e-9 */
#ifndef BB_TENSOR_KERNELS_VMATH_H
#define BB_TENSOR_KERNELS_VMATH_H

#include "tensor/kernels/vec.h"

/* ln 2 split so that n * BB_LN2_HI is exact for |n| < 2^15 (BB_LN2_HI has 9 significant
 * bits) and BB_LN2_HI + BB_LN2_LO is ln 2 to about 2^-36. */
#define BB_LN2_HI 0.693359375f
#define BB_LN2_LO (-2.12194440e-4f)

BB_INLINE bb_f32x4 bb_f32x4_exp(bb_f32x4 x) {
  /* Adding 1.5 * 2^23 rounds x*log2(e) to an integer n and leaves n in the low bits. */
  const bb_f32x4 round_magic = bb_f32x4_splat(12582912.0f);
  /* Clamped so that n stays within [-150, 128]: beyond it the result is 0 or inf
   * anyway. min/max keep a NaN x as it is. */
  x = bb_f32x4_min(x, bb_f32x4_splat(88.8f));
  x = bb_f32x4_max(x, bb_f32x4_splat(-104.0f));
  const bb_f32x4 t = x * bb_f32x4_splat(1.44269504f) + round_magic;
  const bb_f32x4 n = t - round_magic;
  const bb_i32x4 ni = bb_f32x4_as_i32(t) - bb_f32x4_as_i32(round_magic);
  /* r = x - n ln2 in two steps (Cody and Waite); the first one is exact. */
  bb_f32x4 r = x - n * bb_f32x4_splat(BB_LN2_HI);
  r = r - n * bb_f32x4_splat(BB_LN2_LO);
  bb_f32x4 q = bb_f32x4_splat(0.0013814608f);
  q = q * r + bb_f32x4_splat(0.00836871f);
  q = q * r + bb_f32x4_splat(0.04166839f);
  q = q * r + bb_f32x4_splat(0.16666521f);
  q = q * r + bb_f32x4_splat(0.49999994f);
  const bb_f32x4 p = ((r * r) * q + r) + bb_f32x4_splat(1.0f);
  /* 2^n as two factors 2^n1 * 2^n2, each a normal float even when 2^n is not, so that
   * results in the subnormal range are rounded once, correctly. */
  const bb_i32x4 n1 = ni >> 1;
  const bb_i32x4 n2 = ni - n1;
  const bb_i32x4 bias = {127, 127, 127, 127};
  const bb_f32x4 s1 = (bb_f32x4)((bb_u32x4)(n1 + bias) << 23);
  const bb_f32x4 s2 = (bb_f32x4)((bb_u32x4)(n2 + bias) << 23);
  return (p * s1) * s2;
}

/* log of x = 2^e * (bits of x's mantissa), for x positive and finite once the exponent
 * bias is taken out of e. */
BB_INLINE bb_f32x4 log_core(bb_f32x4 x, bb_i32x4 e) {
  const bb_i32x4 bits = bb_f32x4_as_i32(x);
  e = e + ((bits >> 23) & (bb_i32x4){0xff, 0xff, 0xff, 0xff});
  /* x = 2^e * m with m in [sqrt(1/2), sqrt(2)), so f = m - 1 is small and exact. */
  bb_f32x4 m = bb_i32x4_as_f32((bits & (bb_i32x4){0x007fffff, 0x007fffff, 0x007fffff,
                                                   0x007fffff}) |
                               bb_f32x4_as_i32(bb_f32x4_splat(1.0f)));
  const bb_i32x4 above = m > bb_f32x4_splat(1.41421356f);
  m = bb_f32x4_select(above, m * bb_f32x4_splat(0.5f), m);
  e = e - above; /* above is -1 where true */
  const bb_f32x4 f = m - bb_f32x4_splat(1.0f);
  const bb_f32x4 ef = __builtin_convertvector(e, bb_f32x4);
  bb_f32x4 p = bb_f32x4_splat(-0.07634344f);
  p = p * f + bb_f32x4_splat(0.12761515f);
  p = p * f + bb_f32x4_splat(-0.13160211f);
  p = p * f + bb_f32x4_splat(0.14201768f);
  p = p * f + bb_f32x4_splat(-0.16623355f);
  p = p * f + bb_f32x4_splat(0.20001227f);
  p = p * f + bb_f32x4_splat(-0.25000823f);
  p = p * f + bb_f32x4_splat(0.3333333f);
  const bb_f32x4 z = f * f;
  /* log1p(f) = f - f^2/2 + f^3 p(f), summed smallest first, with e ln2 added in its two
   * parts around it. */
  bb_f32x4 y = (f * z) * p + ef * bb_f32x4_splat(BB_LN2_LO);
  y = y - bb_f32x4_splat(0.5f) * z;
  return (f + y) + ef * bb_f32x4_splat(BB_LN2_HI);
}

BB_INLINE bb_f32x4 bb_f32x4_log(bb_f32x4 x) {
  const bb_f32x4 inf = bb_f32x4_splat(__builtin_inff());
  const bb_i32x4 bias = {-127, -127, -127, -127};
  const bb_i32x4 normal = (x >= bb_f32x4_splat(1.17549435e-38f)) & (x < inf);
  if (bb_i32x4_all(normal)) return log_core(x, bias);
  /* Some lane is 0, negative, subnormal, inf or NaN: scale subnormals into the normal
   * range, then give the edges their IEEE results. */
  const bb_i32x4 subnormal = x < bb_f32x4_splat(1.17549435e-38f);
  const bb_f32x4 xs = bb_f32x4_select(subnormal, x * bb_f32x4_splat(8388608.0f), x);
  bb_f32x4 r = log_core(xs, bias + (subnormal & (bb_i32x4){-23, -23, -23, -23}));
  r = bb_f32x4_select(x == bb_f32x4_splat(0.0f), -inf, r);
  r = bb_f32x4_select(x == inf, x, r);
  return bb_f32x4_select((x < bb_f32x4_splat(0.0f)) | (x != x),
                         bb_f32x4_splat(__builtin_nanf("")), r);
}

/* 1 / (1 + e^-x), as e/(1+e) with e = exp(-|x|) for x < 0 so that the left tail keeps
 * its relative accuracy. */
BB_INLINE bb_f32x4 bb_f32x4_sigmoid(bb_f32x4 x) {
  const bb_f32x4 one = bb_f32x4_splat(1.0f);
  const bb_f32x4 e = bb_f32x4_exp(bb_f32x4_neg(bb_f32x4_abs(x)));
  const bb_f32x4 num = bb_f32x4_select(x < bb_f32x4_splat(0.0f), e, one);
  return num / (one + e);
}

/* An odd polynomial near 0, where 1 - 2/(e^2|x| + 1) would cancel, and that formula
 * beyond; both on |x|, with the sign of x put back last (so tanh(-0) is -0). */
BB_INLINE bb_f32x4 bb_f32x4_tanh(bb_f32x4 x) {
  const bb_f32x4 one = bb_f32x4_splat(1.0f);
  const bb_f32x4 ax = bb_f32x4_abs(x);
  const bb_f32x4 u = x * x;
  bb_f32x4 p = bb_f32x4_splat(-0.005704969f);
  p = p * u + bb_f32x4_splat(0.02063907f);
  p = p * u + bb_f32x4_splat(-0.053739708f);
  p = p * u + bb_f32x4_splat(0.13331442f);
  p = p * u + bb_f32x4_splat(-0.3333328f);
  const bb_f32x4 small = ax + ax * (u * p);
  const bb_f32x4 t = bb_f32x4_exp(ax + ax);
  const bb_f32x4 large = one - bb_f32x4_splat(2.0f) / (t + one);
  const bb_f32x4 r = bb_f32x4_select(ax < bb_f32x4_splat(0.625f), small, large);
  const int32_t sign_bit = INT32_MIN;
  return bb_i32x4_as_f32(bb_f32x4_as_i32(r) |
                         (bb_f32x4_as_i32(x) & (bb_i32x4){sign_bit, sign_bit, sign_bit, sign_bit}));
}

#endif
