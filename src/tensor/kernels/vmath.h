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
#ifndef BBI_TENSOR_KERNELS_VMATH_H
#define BBI_TENSOR_KERNELS_VMATH_H

#include "tensor/kernels/vec.h"

/* ln 2 split so that n * BBI_LN2_HI is exact for |n| < 2^15 (BBI_LN2_HI has 9 significant
 * bits) and BBI_LN2_HI + BBI_LN2_LO is ln 2 to about 2^-36. */
#define BBI_LN2_HI 0.693359375f
#define BBI_LN2_LO (-2.12194440e-4f)

BBI_INLINE bbi_f32x4 bbi_f32x4_exp(bbi_f32x4 x) {
  /* Adding 1.5 * 2^23 rounds x*log2(e) to an integer n and leaves n in the low bits. */
  const bbi_f32x4 round_magic = bbi_f32x4_splat(12582912.0f);
  /* Clamped so that n stays within [-150, 128]: beyond it the result is 0 or inf
   * anyway. min/max keep a NaN x as it is. */
  x = bbi_f32x4_min(x, bbi_f32x4_splat(88.8f));
  x = bbi_f32x4_max(x, bbi_f32x4_splat(-104.0f));
  const bbi_f32x4 t = x * bbi_f32x4_splat(1.44269504f) + round_magic;
  const bbi_f32x4 n = t - round_magic;
  const bbi_i32x4 ni = bbi_f32x4_as_i32(t) - bbi_f32x4_as_i32(round_magic);
  /* r = x - n ln2 in two steps (Cody and Waite); the first one is exact. */
  bbi_f32x4 r = x - n * bbi_f32x4_splat(BBI_LN2_HI);
  r = r - n * bbi_f32x4_splat(BBI_LN2_LO);
  bbi_f32x4 q = bbi_f32x4_splat(0.0013814608f);
  q = q * r + bbi_f32x4_splat(0.00836871f);
  q = q * r + bbi_f32x4_splat(0.04166839f);
  q = q * r + bbi_f32x4_splat(0.16666521f);
  q = q * r + bbi_f32x4_splat(0.49999994f);
  const bbi_f32x4 p = ((r * r) * q + r) + bbi_f32x4_splat(1.0f);
  /* 2^n as two factors 2^n1 * 2^n2, each a normal float even when 2^n is not, so that
   * results in the subnormal range are rounded once, correctly. */
  const bbi_i32x4 n1 = ni >> 1;
  const bbi_i32x4 n2 = ni - n1;
  const bbi_i32x4 bias = {127, 127, 127, 127};
  const bbi_f32x4 s1 = (bbi_f32x4)((bbi_u32x4)(n1 + bias) << 23);
  const bbi_f32x4 s2 = (bbi_f32x4)((bbi_u32x4)(n2 + bias) << 23);
  return (p * s1) * s2;
}

/* exp(x) for x <= 0, -inf or NaN: the shifted values x - max(row) of softmax. The same
 * reduction as bbi_f32x4_exp with a polynomial of one degree less and none of the work
 * only other inputs need. Within 2 ulp of the correctly rounded result (checked once
 * against libm on every float in [-104, 0], where 5% of the results are 1 or 2 ulp off;
 * tests/tensor/test_kernels.c repeats the check on a million of them):
 *   (e^r - 1 - r)/r^2 on |r| <= ln2/2, degree 3, relative error 1.1e-7 before rounding,
 * fitted as bbi_f32x4_exp's. When every lane is at least BBI_EXP_SHIFTED_FAST,
 * n = round(x / ln 2) >= -125, so 2^n is one normal float built straight from the rounding
 * sum (its low bits are n + 127), and p * 2^n is rounded once even where it is subnormal;
 * a lane below that (a result near or in the subnormals, or -inf) sends the vector to
 * bbi_f32x4_exp.
 *
 * The constants come from memory (bbi_exp_shifted_k, copied into a local before a loop):
 * written as literals, each use compiles to a v128.const that V8 materialises anew, with
 * several instructions, every time round the loop, which made this function twice as
 * slow. */
#define BBI_EXP_SHIFTED_FAST (-86.5f)

typedef struct bbi_exp_shifted_consts {
  bbi_f32x4 log2e, magic, ln2_hi, ln2_lo, q0, q1, q2, q3, one, fast;
} bbi_exp_shifted_consts;

/* The constants; never written (not const, so that the compiler cannot fold them back
 * into literals). */
extern bbi_exp_shifted_consts bbi_exp_shifted_k;

/* The fast path alone: every lane at least BBI_EXP_SHIFTED_FAST, or NaN. */
BBI_INLINE bbi_f32x4 bbi_f32x4_exp_shifted_fast(bbi_f32x4 x, const bbi_exp_shifted_consts *k) {
  /* magic is 1.5 * 2^23 + 127: the sum is an integer whose low bits are n + 127 */
  const bbi_f32x4 t = x * k->log2e + k->magic;
  const bbi_f32x4 n = t - k->magic;
  const bbi_f32x4 s = (bbi_f32x4)((bbi_u32x4)bbi_f32x4_as_i32(t) << 23);
  bbi_f32x4 r = x - n * k->ln2_hi;
  r = r - n * k->ln2_lo;
  bbi_f32x4 q = k->q0;
  q = q * r + k->q1;
  q = q * r + k->q2;
  q = q * r + k->q3;
  const bbi_f32x4 p = ((r * r) * q + r) + k->one;
  return p * s;
}

BBI_INLINE bbi_f32x4 bbi_f32x4_exp_shifted(bbi_f32x4 x, const bbi_exp_shifted_consts *k) {
  if (bbi_i32x4_any(x < k->fast)) return bbi_f32x4_exp(x);
  return bbi_f32x4_exp_shifted_fast(x, k);
}

/* log of x = 2^e * (bits of x's mantissa), for x positive and finite once the exponent
 * bias is taken out of e. */
BBI_INLINE bbi_f32x4 log_core(bbi_f32x4 x, bbi_i32x4 e) {
  const bbi_i32x4 bits = bbi_f32x4_as_i32(x);
  e = e + ((bits >> 23) & (bbi_i32x4){0xff, 0xff, 0xff, 0xff});
  /* x = 2^e * m with m in [sqrt(1/2), sqrt(2)), so f = m - 1 is small and exact. */
  bbi_f32x4 m = bbi_i32x4_as_f32((bits & (bbi_i32x4){0x007fffff, 0x007fffff, 0x007fffff,
                                                   0x007fffff}) |
                               bbi_f32x4_as_i32(bbi_f32x4_splat(1.0f)));
  const bbi_i32x4 above = m > bbi_f32x4_splat(1.41421356f);
  m = bbi_f32x4_select(above, m * bbi_f32x4_splat(0.5f), m);
  e = e - above; /* above is -1 where true */
  const bbi_f32x4 f = m - bbi_f32x4_splat(1.0f);
  const bbi_f32x4 ef = __builtin_convertvector(e, bbi_f32x4);
  bbi_f32x4 p = bbi_f32x4_splat(-0.07634344f);
  p = p * f + bbi_f32x4_splat(0.12761515f);
  p = p * f + bbi_f32x4_splat(-0.13160211f);
  p = p * f + bbi_f32x4_splat(0.14201768f);
  p = p * f + bbi_f32x4_splat(-0.16623355f);
  p = p * f + bbi_f32x4_splat(0.20001227f);
  p = p * f + bbi_f32x4_splat(-0.25000823f);
  p = p * f + bbi_f32x4_splat(0.3333333f);
  const bbi_f32x4 z = f * f;
  /* log1p(f) = f - f^2/2 + f^3 p(f), summed smallest first, with e ln2 added in its two
   * parts around it. */
  bbi_f32x4 y = (f * z) * p + ef * bbi_f32x4_splat(BBI_LN2_LO);
  y = y - bbi_f32x4_splat(0.5f) * z;
  return (f + y) + ef * bbi_f32x4_splat(BBI_LN2_HI);
}

BBI_INLINE bbi_f32x4 bbi_f32x4_log(bbi_f32x4 x) {
  const bbi_f32x4 inf = bbi_f32x4_splat(__builtin_inff());
  const bbi_i32x4 bias = {-127, -127, -127, -127};
  const bbi_i32x4 normal = (x >= bbi_f32x4_splat(1.17549435e-38f)) & (x < inf);
  if (bbi_i32x4_all(normal)) return log_core(x, bias);
  /* Some lane is 0, negative, subnormal, inf or NaN: scale subnormals into the normal
   * range, then give the edges their IEEE results. */
  const bbi_i32x4 subnormal = x < bbi_f32x4_splat(1.17549435e-38f);
  const bbi_f32x4 xs = bbi_f32x4_select(subnormal, x * bbi_f32x4_splat(8388608.0f), x);
  bbi_f32x4 r = log_core(xs, bias + (subnormal & (bbi_i32x4){-23, -23, -23, -23}));
  r = bbi_f32x4_select(x == bbi_f32x4_splat(0.0f), -inf, r);
  r = bbi_f32x4_select(x == inf, x, r);
  return bbi_f32x4_select((x < bbi_f32x4_splat(0.0f)) | (x != x),
                         bbi_f32x4_splat(__builtin_nanf("")), r);
}

/* 1 / (1 + e^-x), as e/(1+e) with e = exp(-|x|) for x < 0 so that the left tail keeps
 * its relative accuracy. */
BBI_INLINE bbi_f32x4 bbi_f32x4_sigmoid(bbi_f32x4 x) {
  const bbi_f32x4 one = bbi_f32x4_splat(1.0f);
  const bbi_f32x4 e = bbi_f32x4_exp(bbi_f32x4_neg(bbi_f32x4_abs(x)));
  const bbi_f32x4 num = bbi_f32x4_select(x < bbi_f32x4_splat(0.0f), e, one);
  return num / (one + e);
}

/* An odd polynomial near 0, where 1 - 2/(e^2|x| + 1) would cancel, and that formula
 * beyond; both on |x|, with the sign of x put back last (so tanh(-0) is -0). */
BBI_INLINE bbi_f32x4 bbi_f32x4_tanh(bbi_f32x4 x) {
  const bbi_f32x4 one = bbi_f32x4_splat(1.0f);
  const bbi_f32x4 ax = bbi_f32x4_abs(x);
  const bbi_f32x4 u = x * x;
  bbi_f32x4 p = bbi_f32x4_splat(-0.005704969f);
  p = p * u + bbi_f32x4_splat(0.02063907f);
  p = p * u + bbi_f32x4_splat(-0.053739708f);
  p = p * u + bbi_f32x4_splat(0.13331442f);
  p = p * u + bbi_f32x4_splat(-0.3333328f);
  const bbi_f32x4 small = ax + ax * (u * p);
  const bbi_f32x4 t = bbi_f32x4_exp(ax + ax);
  const bbi_f32x4 large = one - bbi_f32x4_splat(2.0f) / (t + one);
  const bbi_f32x4 r = bbi_f32x4_select(ax < bbi_f32x4_splat(0.625f), small, large);
  const int32_t sign_bit = INT32_MIN;
  return bbi_i32x4_as_f32(bbi_f32x4_as_i32(r) |
                         (bbi_f32x4_as_i32(x) & (bbi_i32x4){sign_bit, sign_bit, sign_bit, sign_bit}));
}

#endif
