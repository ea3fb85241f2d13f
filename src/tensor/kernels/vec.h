/* The 128-bit vector layer every portable kernel is written against: four f32 lanes in
 * GCC/Clang vector extensions, which lower to SIMD128 under Emscripten (-msimd128) and to
 * SSE2 on x86-64 (other targets get the generic fallbacks below, so far untested).
 * Arithmetic uses the plain operators; the few operations C has no operator for are
 * defined here once, per target, with the exact semantics the scalar twins copy, so a
 * SIMD kernel and its twin agree bit for bit wherever IEEE rounding allows. */
#ifndef BBI_TENSOR_KERNELS_VEC_H
#define BBI_TENSOR_KERNELS_VEC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

#if defined(__clang__)
#define BBI_UNROLL _Pragma("clang loop unroll(full)")
#elif defined(__GNUC__)
#define BBI_UNROLL _Pragma("GCC unroll 16")
#else
#define BBI_UNROLL
#endif

#define BBI_INLINE static inline __attribute__((always_inline))

typedef float bbi_f32x4 __attribute__((vector_size(16)));
typedef int32_t bbi_i32x4 __attribute__((vector_size(16)));
typedef uint32_t bbi_u32x4 __attribute__((vector_size(16)));

/* Unaligned loads and stores; memcpy keeps them free of alignment and aliasing
 * assumptions and compiles to one movups / v128.load. */
BBI_INLINE bbi_f32x4 bbi_f32x4_load(const float *p) {
  bbi_f32x4 v;
  memcpy(&v, p, sizeof v);
  return v;
}

BBI_INLINE void bbi_f32x4_store(float *p, bbi_f32x4 v) { memcpy(p, &v, sizeof v); }

BBI_INLINE bbi_f32x4 bbi_f32x4_splat(float x) { return (bbi_f32x4){x, x, x, x}; }

/* Loads the first n (< 4) floats of p, zero in the other lanes; reads nothing past p+n. */
BBI_INLINE bbi_f32x4 bbi_f32x4_load_tail(const float *p, size_t n) {
  bbi_f32x4 v = bbi_f32x4_splat(0.0f);
  for (size_t i = 0; i < n; i++) v[i] = p[i];
  return v;
}

/* Stores the first n (< 4) lanes of v to p. */
BBI_INLINE void bbi_f32x4_store_tail(float *p, bbi_f32x4 v, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = v[i];
}

BBI_INLINE bbi_i32x4 bbi_f32x4_as_i32(bbi_f32x4 v) { return (bbi_i32x4)v; }
BBI_INLINE bbi_f32x4 bbi_i32x4_as_f32(bbi_i32x4 v) { return (bbi_f32x4)v; }

/* mask ? a : b, lane by lane; mask lanes are all ones or all zeros (a comparison). */
BBI_INLINE bbi_f32x4 bbi_f32x4_select(bbi_i32x4 mask, bbi_f32x4 a, bbi_f32x4 b) {
#if defined(__wasm_simd128__)
  return (bbi_f32x4)wasm_v128_bitselect((v128_t)a, (v128_t)b, (v128_t)mask);
#else
  return (bbi_f32x4)((mask & (bbi_i32x4)a) | (~mask & (bbi_i32x4)b));
#endif
}

/* a < b ? b : a — what maxps(b, a) and wasm's pmax compute: a NaN in a comes
 * through, a NaN in b does not. bbi_f32_max_scalar is the same rule. */
BBI_INLINE bbi_f32x4 bbi_f32x4_max(bbi_f32x4 a, bbi_f32x4 b) {
#if defined(__wasm_simd128__)
  return (bbi_f32x4)wasm_f32x4_pmax((v128_t)a, (v128_t)b);
#elif defined(__SSE2__)
  return (bbi_f32x4)_mm_max_ps((__m128)b, (__m128)a);
#else
  return bbi_f32x4_select(a < b, b, a);
#endif
}

/* b < a ? b : a (minps(b, a), wasm pmin); the mirror of bbi_f32x4_max. */
BBI_INLINE bbi_f32x4 bbi_f32x4_min(bbi_f32x4 a, bbi_f32x4 b) {
#if defined(__wasm_simd128__)
  return (bbi_f32x4)wasm_f32x4_pmin((v128_t)a, (v128_t)b);
#elif defined(__SSE2__)
  return (bbi_f32x4)_mm_min_ps((__m128)b, (__m128)a);
#else
  return bbi_f32x4_select(b < a, b, a);
#endif
}

/* The same two rules on scalars; every scalar twin uses these. */
static inline float bbi_f32_max_scalar(float a, float b) { return a < b ? b : a; }
static inline float bbi_f32_min_scalar(float a, float b) { return b < a ? b : a; }
/* Relu's rule: x < 0 ? 0 : x, then + 0 (NaN stays NaN, -0 becomes +0). */
static inline float bbi_f32_relu_scalar(float x) { return (x < 0.0f ? 0.0f : x) + 0.0f; }

BBI_INLINE bbi_f32x4 bbi_f32x4_sqrt(bbi_f32x4 v) {
#if defined(__wasm_simd128__)
  return (bbi_f32x4)wasm_f32x4_sqrt((v128_t)v);
#elif defined(__SSE2__)
  return (bbi_f32x4)_mm_sqrt_ps((__m128)v);
#else
  return (bbi_f32x4){__builtin_sqrtf(v[0]), __builtin_sqrtf(v[1]), __builtin_sqrtf(v[2]),
                    __builtin_sqrtf(v[3])};
#endif
}

BBI_INLINE bbi_f32x4 bbi_f32x4_abs(bbi_f32x4 v) {
  return bbi_i32x4_as_f32(bbi_f32x4_as_i32(v) & (bbi_i32x4){0x7fffffff, 0x7fffffff,
                                                          0x7fffffff, 0x7fffffff});
}

BBI_INLINE bbi_f32x4 bbi_f32x4_neg(bbi_f32x4 v) {
  const int32_t s = INT32_MIN;
  return bbi_i32x4_as_f32(bbi_f32x4_as_i32(v) ^ (bbi_i32x4){s, s, s, s});
}

/* Nonzero when every lane of a comparison mask is set. */
BBI_INLINE int bbi_i32x4_all(bbi_i32x4 mask) {
#if defined(__wasm_simd128__)
  return wasm_i32x4_all_true((v128_t)mask);
#elif defined(__SSE2__)
  return _mm_movemask_ps((__m128)mask) == 0xf;
#else
  return (mask[0] & mask[1] & mask[2] & mask[3]) != 0;
#endif
}

/* Nonzero when some lane of a comparison mask is set. */
BBI_INLINE int bbi_i32x4_any(bbi_i32x4 mask) {
#if defined(__wasm_simd128__)
  return wasm_v128_any_true((v128_t)mask);
#elif defined(__SSE2__)
  return _mm_movemask_ps((__m128)mask) != 0;
#else
  return (mask[0] | mask[1] | mask[2] | mask[3]) != 0;
#endif
}

/* Lanes of a and b picked by index (0-3 from a, 4-7 from b). */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define BBI_F32X4_SHUFFLE(a, b, i0, i1, i2, i3) __builtin_shufflevector(a, b, i0, i1, i2, i3)
#else
#define BBI_F32X4_SHUFFLE(a, b, i0, i1, i2, i3) __builtin_shuffle(a, b, (bbi_i32x4){i0, i1, i2, i3})
#endif

/* Transposes the 4×4 matrix whose rows are r[0..3], in place. */
BBI_INLINE void bbi_f32x4_transpose(bbi_f32x4 r[4]) {
  const bbi_f32x4 t0 = BBI_F32X4_SHUFFLE(r[0], r[1], 0, 4, 1, 5);
  const bbi_f32x4 t1 = BBI_F32X4_SHUFFLE(r[0], r[1], 2, 6, 3, 7);
  const bbi_f32x4 t2 = BBI_F32X4_SHUFFLE(r[2], r[3], 0, 4, 1, 5);
  const bbi_f32x4 t3 = BBI_F32X4_SHUFFLE(r[2], r[3], 2, 6, 3, 7);
  r[0] = BBI_F32X4_SHUFFLE(t0, t2, 0, 1, 4, 5);
  r[1] = BBI_F32X4_SHUFFLE(t0, t2, 2, 3, 6, 7);
  r[2] = BBI_F32X4_SHUFFLE(t1, t3, 0, 1, 4, 5);
  r[3] = BBI_F32X4_SHUFFLE(t1, t3, 2, 3, 6, 7);
}

/* Sixteen comparison masks (four vectors, lanes all ones or all zeros) as sixteen bools
 * (bytes 0 or 1), in lane order. */
BBI_INLINE void bbi_i32x4_store_bools(bbi_i32x4 m0, bbi_i32x4 m1, bbi_i32x4 m2, bbi_i32x4 m3, uint8_t *out) {
#if defined(__wasm_simd128__)
  const v128_t lo = wasm_i16x8_narrow_i32x4((v128_t)m0, (v128_t)m1), hi = wasm_i16x8_narrow_i32x4((v128_t)m2, (v128_t)m3);
  wasm_v128_store(out, wasm_v128_and(wasm_i8x16_narrow_i16x8(lo, hi), wasm_i8x16_splat(1)));
#elif defined(__SSE2__)
  const __m128i lo = _mm_packs_epi32((__m128i)m0, (__m128i)m1), hi = _mm_packs_epi32((__m128i)m2, (__m128i)m3);
  _mm_storeu_si128((__m128i *)out, _mm_and_si128(_mm_packs_epi16(lo, hi), _mm_set1_epi8(1)));
#else
  const bbi_i32x4 m[4] = {m0, m1, m2, m3};
  for (int i = 0; i < 16; i++) out[i] = m[i / 4][i % 4] != 0;
#endif
}

/* The inverse: sixteen bools (any nonzero byte is true) as four lane masks. */
BBI_INLINE void bbi_i32x4_load_bools(const uint8_t *in, bbi_i32x4 m[4]) {
#if defined(__wasm_simd128__)
  const v128_t t = wasm_i8x16_ne(wasm_v128_load(in), wasm_i8x16_splat(0));
  const v128_t lo = wasm_i16x8_extend_low_i8x16(t), hi = wasm_i16x8_extend_high_i8x16(t);
  m[0] = (bbi_i32x4)wasm_i32x4_extend_low_i16x8(lo), m[1] = (bbi_i32x4)wasm_i32x4_extend_high_i16x8(lo);
  m[2] = (bbi_i32x4)wasm_i32x4_extend_low_i16x8(hi), m[3] = (bbi_i32x4)wasm_i32x4_extend_high_i16x8(hi);
#elif defined(__SSE2__)
  const __m128i zero = _mm_setzero_si128();
  const __m128i t = _mm_andnot_si128(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)in), zero), _mm_set1_epi8(-1));
  const __m128i lo = _mm_unpacklo_epi8(t, t), hi = _mm_unpackhi_epi8(t, t);
  m[0] = (bbi_i32x4)_mm_unpacklo_epi16(lo, lo), m[1] = (bbi_i32x4)_mm_unpackhi_epi16(lo, lo);
  m[2] = (bbi_i32x4)_mm_unpacklo_epi16(hi, hi), m[3] = (bbi_i32x4)_mm_unpackhi_epi16(hi, hi);
#else
  for (int i = 0; i < 16; i++) m[i / 4][i % 4] = in[i] ? -1 : 0;
#endif
}

/* c + a * b, lane by lane. Built with relaxed SIMD (-mrelaxed-simd, bb-relaxed.wasm) it is
 * f32x4.relaxed_madd, which the engine may run fused (one rounding, an FMA) or as a
 * multiply then an add (two roundings), depending on the machine; every other build
 * multiplies then adds, as the scalar twins do, so those agree bit for bit. The kernels'
 * dot products and multiply-accumulate loops go through it, and softmax's exp
 * (bbi_f32x4_exp_shifted_fast, held to a bound rather than to a scalar twin's bits). */
#if defined(__wasm_relaxed_simd__)
#define BBI_F32X4_MADD(a, b, c) ((bbi_f32x4)wasm_f32x4_relaxed_madd((v128_t)(a), (v128_t)(b), (v128_t)(c)))
#define BBI_KERNELS_RELAXED 1
#else
#define BBI_F32X4_MADD(a, b, c) ((c) + (a) * (b))
#define BBI_KERNELS_RELAXED 0
#endif

/* Sum of the four lanes, in a fixed pairwise order. */
BBI_INLINE float bbi_f32x4_hsum(bbi_f32x4 v) { return (v[0] + v[2]) + (v[1] + v[3]); }

#endif
