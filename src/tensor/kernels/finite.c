/* The first float of an array that is not finite (NaN or ±Inf): the check a trainer makes
 * on its gradients and new parameters, and the components on every update they receive. */
#include <math.h>

#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"

/* Floats checked together before one test of the accumulated bits; only a block that
 * holds a non-finite float is scanned again, one float at a time, for its index. */
enum { BLOCK = 256 };

/* A float is not finite iff its exponent bits are all ones, i.e. iff adding one to the
 * exponent of its magnitude carries into bit 31; OR-ing these sums over many floats keeps
 * bit 31 set in a lane once any of them carried. */
BBI_INLINE bbi_u32x4 exponent_carry(const float *p) {
  const uint32_t magnitude = 0x7fffffffu, exponent_one = 0x00800000u;
  const bbi_u32x4 bits = (bbi_u32x4)bbi_f32x4_load(p);
  return (bits & (bbi_u32x4){magnitude, magnitude, magnitude, magnitude}) +
         (bbi_u32x4){exponent_one, exponent_one, exponent_one, exponent_one};
}

/* Nonzero when one of the n floats at x (n a multiple of 4) is not finite. */
BBI_INLINE int any_nonfinite(const float *x, size_t n) {
  bbi_u32x4 acc = {0, 0, 0, 0};
  for (size_t i = 0; i < n; i += 4) acc |= exponent_carry(x + i);
  return bbi_i32x4_any((bbi_i32x4)acc < 0);
}

size_t bbi_f32_first_nonfinite(const float *x, size_t n) {
  for (size_t i = 0; i < n; i += BLOCK) {
    const size_t len = n - i < BLOCK ? n - i : BLOCK, whole = len - len % 4;
    if (any_nonfinite(x + i, whole)) return i + bbi_f32_first_nonfinite_scalar(x + i, whole);
    const size_t tail = bbi_f32_first_nonfinite_scalar(x + i + whole, len - whole);
    if (tail < len - whole) return i + whole + tail;
  }
  return n;
}

size_t bbi_f32_first_nonfinite_scalar(const float *x, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(x[i])) return i;
  return n;
}
