/* Vector distances for the indexes: squared Euclidean distance and dot product of two
 * f32 vectors of length n. The plain names are the vec.h kernels (four accumulators of
 * four lanes, SIMD128 in wasm, SSE2 on x86-64); the `_scalar` twins are the sequential
 * loops the tests hold them to. The two sum in different orders, so they agree to
 * rounding, not bit for bit. */
#ifndef BBI_OPS_INDEX_DISTANCE_H
#define BBI_OPS_INDEX_DISTANCE_H

#include <stddef.h>

float bbi_f32_l2sq(const float *a, const float *b, size_t n);
float bbi_f32_dot(const float *a, const float *b, size_t n);

float bbi_f32_l2sq_scalar(const float *a, const float *b, size_t n);
float bbi_f32_dot_scalar(const float *a, const float *b, size_t n);

#endif
