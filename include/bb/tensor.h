/* bytesandbrains — dense tensors: a data type, a shape and a reference-counted buffer.
 *
 * Example:
 *
 *   int64_t dims[2] = {2, 3};
 *   bb_tensor *t = bb_tensor_new_zeros(NULL, BB_DTYPE_FLOAT, 2, dims);
 *   if (!t) return 1;
 *   float *x = bb_tensor_data(t);
 *   for (int64_t i = 0; i < t->numel; i++) x[i] = (float)i;
 *   int64_t flat[1] = {6};
 *   bb_tensor *v = bb_tensor_view(t, 1, flat);  // shares t's buffer: no copy
 *   char text[64];
 *   printf("%s\n", bb_tensor_describe(v, text, sizeof text));  // float32[6]
 *   bool shared = v && bb_tensor_data(v) == bb_tensor_data(t);
 *   bb_tensor_release(v);
 *   bb_tensor_release(t);  // the buffer goes with the last tensor that holds it
 *   if (!shared) return 1;
 *
 * Tensors are contiguous and row-major. A tensor header and its buffer are both reference
 * counted: views that only change the shape (Reshape, Squeeze, Identity, ...) share the
 * buffer and cost no copy. Element types are the ONNX data types (bb_dtype in ir.h);
 * STRING tensors are not supported. */
#ifndef BB_TENSOR_H
#define BB_TENSOR_H

#include <stdbool.h>

#include "bb/common.h"
#include "bb/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BB_MAX_RANK 8

/* Storage shared by tensors. `data` is aligned to 64 bytes. */
typedef struct bb_buffer {
  uint32_t refcount;
  size_t size;
  void *data;
  const bb_allocator *alloc;
  /* set when data points into memory the buffer does not own (bb_tensor_wrap) */
  void (*release)(void *user_data);
  void *release_data;
} bb_buffer;

typedef struct bb_tensor {
  uint32_t refcount;
  int32_t dtype; /* bb_dtype */
  int rank;
  int64_t dims[BB_MAX_RANK];
  int64_t numel;
  bb_buffer *buffer;
  size_t offset; /* byte offset of element 0 in the buffer */
} bb_tensor;

/* A new tensor with uninitialised (new_empty) or zeroed (new_zeros) storage. NULL when
 * out of memory, when the dtype has no fixed element size, or when rank > BB_MAX_RANK,
 * a dim is negative or the byte size overflows. alloc NULL means the default. */
BB_API bb_tensor *bb_tensor_new_empty(const bb_allocator *alloc, int32_t dtype, int rank, const int64_t *dims);
BB_API bb_tensor *bb_tensor_new_zeros(const bb_allocator *alloc, int32_t dtype, int rank, const int64_t *dims);

/* A tensor over caller-owned memory; release(user_data) runs when the last reference is
 * dropped (release may be NULL). data must be aligned for the element type. */
BB_API bb_tensor *bb_tensor_wrap(const bb_allocator *alloc, int32_t dtype, int rank, const int64_t *dims, void *data,
                                 void (*release)(void *user_data), void *user_data);

/* A new header with another shape over the same buffer (numel must match); NULL when it
 * does not or when out of memory. */
BB_API bb_tensor *bb_tensor_view(const bb_tensor *t, int rank, const int64_t *dims);

BB_API bb_tensor *bb_tensor_retain(bb_tensor *t);
BB_API void bb_tensor_release(bb_tensor *t);

/* Pointer to element 0. */
static inline void *bb_tensor_data(const bb_tensor *t) { return (char *)t->buffer->data + t->offset; }

/* Bytes of the elements (numel × element size). */
BB_API size_t bb_tensor_nbytes(const bb_tensor *t);

/* True when both shapes are equal. */
BB_API bool bb_tensor_same_shape(const bb_tensor *a, const bb_tensor *b);

/* Writes "float32[2,3]"-style text into buf (always NUL-terminated). */
BB_API const char *bb_tensor_describe(const bb_tensor *t, char *buf, size_t size);

/* ONNX multidirectional broadcasting of two shapes into out (rank = max of both).
 * BB_ERR_TYPE with a message naming both shapes when they do not broadcast. */
BB_API int bb_broadcast_shapes(int rank_a, const int64_t *a, int rank_b, const int64_t *b, int *rank_out,
                               int64_t *out, bb_error *err);

/* ---- half precision ------------------------------------------------------------------ */

/* The float a float16 (IEEE 754 binary16) bit pattern stands for; exact for every
 * pattern: subnormals, signed zeros, ±inf, and NaN (the payload kept in the high bits). */
BB_API float bb_f16_to_f32(uint16_t h);

/* The float16 nearest f, ties to the even pattern: magnitudes that round past the largest
 * finite float16 (65504) are ±inf, those up to half the smallest subnormal (2^-25) are ±0
 * keeping the sign, and NaN stays a quiet NaN. */
BB_API uint16_t bb_f32_to_f16(float f);

/* The float a bfloat16 bit pattern stands for (its 16 bits are the float's high half). */
BB_API float bb_bf16_to_f32(uint16_t h);

/* The bfloat16 nearest f, ties to the even pattern; NaN stays a quiet NaN. */
BB_API uint16_t bb_f32_to_bf16(float f);

/* ---- ONNX TensorProto ---------------------------------------------------------------- */

/* A tensor from a TensorProto (raw_data or the typed field, little-endian). External
 * data, segments and STRING tensors are rejected with BB_ERR_UNSUPPORTED; data whose
 * length does not match the dims with BB_ERR_MALFORMED. */
BB_API int bb_tensor_from_proto(const bb_tensor_proto *p, const bb_allocator *alloc, bb_tensor **out, bb_error *err);

/* A TensorProto in m's arena holding a copy of t's data in raw_data. */
BB_API int bb_tensor_to_proto(bb_model *m, const bb_tensor *t, const char *name, bb_tensor_proto **out, bb_error *err);

#ifdef __cplusplus
}
#endif
#endif /* BB_TENSOR_H */
