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

/* Below this, bbi_f32x4_exp_shifted leaves its fast path (see there). */
#define BBI_EXP_SHIFTED_FAST (-86.5f)

/* Every vector constant of this file. The functions read them through a pointer to a copy
 * the caller makes in a local before its loop (`const bbi_vmath_consts k = bbi_vmath_k;`),
 * so that they are wasm locals, loaded once, whatever the loop's shape: written as
 * literals, each use compiles to a v128.const, and V8 materialises a v128.const anew (a few
 * instructions) at each use in a loop whose body branches, as softmax's does, which made
 * that loop 1.7-1.8 times slower. (In a branch-free loop, such as unary.c's, V8 keeps them
 * in registers either way.) The compiler drops the fields a loop does not read. The results
 * are the same bits as with the literals. */
typedef struct bbi_vmath_consts {
  /* exp: clamp, reduction, polynomial (highest degree first) */
  bbi_f32x4 exp_hi, exp_lo, log2e, round_magic, ln2_hi, ln2_lo;
  bbi_f32x4 exp_c4, exp_c3, exp_c2, exp_c1, exp_c0;
  bbi_i32x4 exp_bias;
  /* exp_shifted: rounding sum with the bias in it, polynomial in f for 2^f, fast-path bound */
  bbi_f32x4 shifted_magic, shifted_c4, shifted_c3, shifted_c2, shifted_c1, shifted_c0, shifted_fast;
  /* log */
  bbi_i32x4 log_exponent_mask, log_mantissa_mask, log_bias, log_subnormal_bias;
  bbi_f32x4 log_sqrt2, log_min_normal, log_subnormal_scale;
  bbi_f32x4 log_c7, log_c6, log_c5, log_c4, log_c3, log_c2, log_c1, log_c0;
  /* tanh: polynomial in x^2, and the bound of the polynomial's range */
  bbi_f32x4 tanh_c4, tanh_c3, tanh_c2, tanh_c1, tanh_c0, tanh_small;
  /* shared */
  bbi_f32x4 zero, half, one, two, inf, nan;
  bbi_i32x4 sign;
} bbi_vmath_consts;

/* The constants (vmath.c); never written (not const, so that the compiler cannot fold them
 * back into literals). */
extern bbi_vmath_consts bbi_vmath_k;

BBI_INLINE bbi_f32x4 bbi_f32x4_exp(bbi_f32x4 x, const bbi_vmath_consts *k) {
  /* Adding 1.5 * 2^23 (round_magic) rounds x*log2(e) to an integer n and leaves n in the
   * low bits. */
  /* Clamped to [-104, 88.8] so that n stays within [-150, 128]: beyond it the result is
   * 0 or inf anyway. min/max keep a NaN x as it is. */
  x = bbi_f32x4_min(x, k->exp_hi);
  x = bbi_f32x4_max(x, k->exp_lo);
  const bbi_f32x4 t = x * k->log2e + k->round_magic;
  const bbi_f32x4 n = t - k->round_magic;
  const bbi_i32x4 ni = bbi_f32x4_as_i32(t) - bbi_f32x4_as_i32(k->round_magic);
  /* r = x - n ln2 in two steps (Cody and Waite); the first one is exact. */
  bbi_f32x4 r = x - n * k->ln2_hi;
  r = r - n * k->ln2_lo;
  bbi_f32x4 q = k->exp_c4;
  q = q * r + k->exp_c3;
  q = q * r + k->exp_c2;
  q = q * r + k->exp_c1;
  q = q * r + k->exp_c0;
  const bbi_f32x4 p = ((r * r) * q + r) + k->one;
  /* 2^n as two factors 2^n1 * 2^n2, each a normal float even when 2^n is not, so that
   * results in the subnormal range are rounded once, correctly. */
  const bbi_i32x4 n1 = ni >> 1;
  const bbi_i32x4 n2 = ni - n1;
  const bbi_f32x4 s1 = (bbi_f32x4)((bbi_u32x4)(n1 + k->exp_bias) << 23);
  const bbi_f32x4 s2 = (bbi_f32x4)((bbi_u32x4)(n2 + k->exp_bias) << 23);
  return (p * s1) * s2;
}

/* exp(x) for x <= 0, -inf or NaN: the shifted values x - max(row) of softmax. When every
 * lane is at least BBI_EXP_SHIFTED_FAST, it is 2^z with z = x log2(e) rounded to a float,
 * z = n + f with n = round(z) and f exact, and 2^f a polynomial in f:
 *   (2^f - 1)/f on |f| <= 1/2, degree 4, relative error 9.2e-8 before rounding,
 * fitted as above (on 600 nodes). 2^n is one normal float built straight from the rounding
 * sum (n >= -125 there; its low bits are n + 127), and the result is a normal float. n and
 * f take four operations a vector where bbi_f32x4_exp's n and two-step reduction
 * r = x - n ln2 take seven, at a price: the rounding of z, at most half an ulp of
 * |x| log2(e), puts a relative error of up to |x| 2^-24 into the result, as large as the one
 * the subtraction x - max already makes. Within 1.4 (2 + |x|) 2^-24 of exp(x), relative
 * (checked once on every float in [-86.5, 0]: 3.5 2^-24 for |x| < 1, 65 2^-24 near -80;
 * tests/tensor/test_kernels.c repeats the check on a million of them), so that a softmax
 * term's error relative to the row's largest term, 1, is at most 2.8 2^-24. A vector with a
 * lane below BBI_EXP_SHIFTED_FAST (a result near or in the subnormals, or -inf) goes to
 * bbi_f32x4_exp, within 1 ulp. Its multiply-adds are BBI_F32X4_MADD: in bb-relaxed.wasm
 * they may run fused, six operations a vector fewer, which leaves z unrounded (the bound
 * above holds then too: 1.23 (2 + |x|) 2^-24 on four floats in every 64 of [-86.5, 0]);
 * elsewhere they are the same bits as a multiply then an add. */

/* The fast path alone: every lane at least BBI_EXP_SHIFTED_FAST, or NaN. */
BBI_INLINE bbi_f32x4 bbi_f32x4_exp_shifted_fast(bbi_f32x4 x, const bbi_vmath_consts *k) {
  /* shifted_magic is 1.5 * 2^23 + 127: the sum is an integer whose low bits are n + 127 */
  const bbi_f32x4 t = BBI_F32X4_MADD(x, k->log2e, k->shifted_magic);
  const bbi_f32x4 minus_n = k->shifted_magic - t;
  /* f = z - n, exact (|f| <= 1/2 and n is z's nearest integer); fused, z is not rounded */
  const bbi_f32x4 f = BBI_F32X4_MADD(x, k->log2e, minus_n);
  const bbi_f32x4 s = (bbi_f32x4)((bbi_u32x4)bbi_f32x4_as_i32(t) << 23);
  bbi_f32x4 p = k->shifted_c4;
  p = BBI_F32X4_MADD(p, f, k->shifted_c3);
  p = BBI_F32X4_MADD(p, f, k->shifted_c2);
  p = BBI_F32X4_MADD(p, f, k->shifted_c1);
  p = BBI_F32X4_MADD(p, f, k->shifted_c0);
  /* s f is exact where it is normal, and off by at most 2^-150 (a quarter ulp of s at
   * most) where it is not */
  return BBI_F32X4_MADD(s * f, p, s);
}

BBI_INLINE bbi_f32x4 bbi_f32x4_exp_shifted(bbi_f32x4 x, const bbi_vmath_consts *k) {
  if (bbi_i32x4_any(x < k->shifted_fast)) return bbi_f32x4_exp(x, k);
  return bbi_f32x4_exp_shifted_fast(x, k);
}

/* log of x = 2^e * (bits of x's mantissa), for x positive and finite once the exponent
 * bias is taken out of e. */
BBI_INLINE bbi_f32x4 log_core(bbi_f32x4 x, bbi_i32x4 e, const bbi_vmath_consts *k) {
  const bbi_i32x4 bits = bbi_f32x4_as_i32(x);
  e = e + ((bits >> 23) & k->log_exponent_mask);
  /* x = 2^e * m with m in [sqrt(1/2), sqrt(2)), so f = m - 1 is small and exact. */
  bbi_f32x4 m = bbi_i32x4_as_f32((bits & k->log_mantissa_mask) | bbi_f32x4_as_i32(k->one));
  const bbi_i32x4 above = m > k->log_sqrt2;
  m = bbi_f32x4_select(above, m * k->half, m);
  e = e - above; /* above is -1 where true */
  const bbi_f32x4 f = m - k->one;
  const bbi_f32x4 ef = __builtin_convertvector(e, bbi_f32x4);
  bbi_f32x4 p = k->log_c7;
  p = p * f + k->log_c6;
  p = p * f + k->log_c5;
  p = p * f + k->log_c4;
  p = p * f + k->log_c3;
  p = p * f + k->log_c2;
  p = p * f + k->log_c1;
  p = p * f + k->log_c0;
  const bbi_f32x4 z = f * f;
  /* log1p(f) = f - f^2/2 + f^3 p(f), summed smallest first, with e ln2 added in its two
   * parts around it. */
  bbi_f32x4 y = (f * z) * p + ef * k->ln2_lo;
  y = y - k->half * z;
  return (f + y) + ef * k->ln2_hi;
}

BBI_INLINE bbi_f32x4 bbi_f32x4_log(bbi_f32x4 x, const bbi_vmath_consts *k) {
  const bbi_i32x4 normal = (x >= k->log_min_normal) & (x < k->inf);
  if (bbi_i32x4_all(normal)) return log_core(x, k->log_bias, k);
  /* Some lane is 0, negative, subnormal, inf or NaN: scale subnormals into the normal
   * range, then give the edges their IEEE results. */
  const bbi_i32x4 subnormal = x < k->log_min_normal;
  const bbi_f32x4 xs = bbi_f32x4_select(subnormal, x * k->log_subnormal_scale, x);
  bbi_f32x4 r = log_core(xs, k->log_bias + (subnormal & k->log_subnormal_bias), k);
  r = bbi_f32x4_select(x == k->zero, -k->inf, r);
  r = bbi_f32x4_select(x == k->inf, x, r);
  return bbi_f32x4_select((x < k->zero) | (x != x), k->nan, r);
}

/* sigmoid(x) from e = exp(-|x|): e / (1 + e) below 0, 1 / (1 + e) from 0 on. */
BBI_INLINE bbi_f32x4 sigmoid_of_exp(bbi_f32x4 x, bbi_f32x4 e, const bbi_vmath_consts *k) {
  const bbi_f32x4 num = bbi_f32x4_select(x < k->zero, e, k->one);
  return num / (k->one + e);
}

/* -|x|: the sign bit set */
BBI_INLINE bbi_f32x4 sigmoid_arg(bbi_f32x4 x, const bbi_vmath_consts *k) {
  return bbi_i32x4_as_f32(bbi_f32x4_as_i32(x) | k->sign);
}

/* Whether bbi_f32x4_sigmoid takes the full exp for x: some lane's -|x| is below
 * BBI_EXP_SHIFTED_FAST. */
BBI_INLINE bbi_i32x4 bbi_f32x4_sigmoid_slow_lanes(bbi_f32x4 x, const bbi_vmath_consts *k) {
  return sigmoid_arg(x, k) < k->shifted_fast;
}

/* bbi_f32x4_sigmoid for a vector whose lanes all have |x| <= -BBI_EXP_SHIFTED_FAST (or
 * NaN): 1 / (1 + e) with e = exp(-x) from bbi_f32x4_exp's reduction and polynomial, 2^n
 * one normal float built from the rounding sum as in bbi_f32x4_exp_shifted_fast (|n| <= 125
 * here) rather than its two factors, and without its clamps. For x < 0, e > 1 and 1/(1 + e)
 * keeps its relative accuracy (e is within 1 ulp, so the quotient is within 2 of the
 * correctly rounded sigmoid; checked once on every float with |x| <= 86.5), so no
 * e/(1 + e) on exp(-|x|) and no select of the numerator by sign are needed, five
 * operations fewer a vector. The polynomial is summed in Estrin's order (two halves in
 * parallel), which shortens the chain of dependent operations each vector waits on. */
BBI_INLINE bbi_f32x4 bbi_f32x4_sigmoid_fast(bbi_f32x4 x, const bbi_vmath_consts *k) {
  const bbi_f32x4 z = bbi_i32x4_as_f32(bbi_f32x4_as_i32(x) ^ k->sign);
  const bbi_f32x4 t = z * k->log2e + k->shifted_magic;
  const bbi_f32x4 n = t - k->shifted_magic;
  const bbi_f32x4 s = (bbi_f32x4)((bbi_u32x4)bbi_f32x4_as_i32(t) << 23);
  bbi_f32x4 r = z - n * k->ln2_hi;
  r = r - n * k->ln2_lo;
  const bbi_f32x4 r2 = r * r;
  const bbi_f32x4 low = k->exp_c1 * r + k->exp_c0;
  const bbi_f32x4 high = k->exp_c4 * r2 + (k->exp_c3 * r + k->exp_c2);
  const bbi_f32x4 e = ((r2 * (high * r2 + low) + r) + k->one) * s;
  return k->one / (k->one + e);
}

/* 1 / (1 + e^-x): bbi_f32x4_sigmoid_fast when every lane has |x| <= 86.5, else e/(1+e)
 * with e = exp(-|x|) for x < 0 (results near and below the normal range, correctly
 * scaled by bbi_f32x4_exp) and 1/(1+e) from 0 on. The choice of path is made per vector of
 * four lanes, so a lane's result depends only on its own vector: callers that test several
 * vectors at once (bbi_f32_vunary) must give the same bits. */
BBI_INLINE bbi_f32x4 bbi_f32x4_sigmoid(bbi_f32x4 x, const bbi_vmath_consts *k) {
  if (bbi_i32x4_any(bbi_f32x4_sigmoid_slow_lanes(x, k))) return sigmoid_of_exp(x, bbi_f32x4_exp(sigmoid_arg(x, k), k), k);
  return bbi_f32x4_sigmoid_fast(x, k);
}

/* An odd polynomial near 0, where 1 - 2/(e^2|x| + 1) would cancel, and that formula
 * beyond; both on |x|, with the sign of x put back last (so tanh(-0) is -0). */
BBI_INLINE bbi_f32x4 bbi_f32x4_tanh(bbi_f32x4 x, const bbi_vmath_consts *k) {
  const bbi_f32x4 ax = bbi_i32x4_as_f32(bbi_f32x4_as_i32(x) & ~k->sign);
  const bbi_f32x4 u = x * x;
  bbi_f32x4 p = k->tanh_c4;
  p = p * u + k->tanh_c3;
  p = p * u + k->tanh_c2;
  p = p * u + k->tanh_c1;
  p = p * u + k->tanh_c0;
  const bbi_f32x4 small = ax + ax * (u * p);
  const bbi_f32x4 t = bbi_f32x4_exp(ax + ax, k);
  const bbi_f32x4 large = k->one - k->two / (t + k->one);
  const bbi_f32x4 r = bbi_f32x4_select(ax < k->tanh_small, small, large);
  return bbi_i32x4_as_f32(bbi_f32x4_as_i32(r) | (bbi_f32x4_as_i32(x) & k->sign));
}

#endif
