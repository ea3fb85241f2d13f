/* Top-k sparsification of float32 vectors for the Codec role: of a vector of n values only
 * the k of largest magnitude travel, each as its index and its value. Encoding writes into
 * a caller's buffer and decoding into one, so nothing here allocates.
 *
 * Byte layout (all integers and floats little-endian):
 *
 *   offset 0  u32  n, the length of the dense vector
 *   offset 4  u32  k, the entries that follow (k <= n)
 *   offset 8  u8   how values are stored: 1 float32, 2 float16 (IEEE binary16)
 *   offset 9  k × u32 indices, strictly increasing, each below n
 *   then      k values, 4 or 2 bytes each, in the order of the indices
 *   total     9 + k × (4 + 4) or 9 + k × (4 + 2) bytes
 *
 * Every other coordinate decodes to 0. The decoder takes any bytes: a length that is not
 * exactly the one the header implies, k above n, n above the caller's bound (or unequal to
 * the length the caller expects), an unknown value type, an index at or past n or not above
 * the one before it (so no coordinate is written twice), or a non-finite value: each is
 * refused with BB_ERR_MALFORMED and the byte offset, and a reason the caller can count. */
#ifndef BBI_OPS_CODECS_SPARSE_H
#define BBI_OPS_CODECS_SPARSE_H

#include <stddef.h>
#include <stdint.h>

#include "bb/common.h"

#define BBI_SPARSE_HEADER 9
/* Vectors longer than this do not fit the u32 length. */
#define BBI_SPARSE_MAX_LEN UINT32_MAX

typedef enum bbi_sparse_values {
  BBI_SPARSE_F32 = 1,
  BBI_SPARSE_F16 = 2
} bbi_sparse_values;

/* Why a decoder refused its bytes. */
typedef enum bbi_sparse_fault {
  BBI_SPARSE_OK = 0,
  BBI_SPARSE_BAD_LENGTH,   /* the bytes end early, run on, or the value type is unknown */
  BBI_SPARSE_BAD_COUNT,    /* k above n, or n above the bound */
  BBI_SPARSE_BAD_EXPECTED, /* n unequal to the length the caller expects */
  BBI_SPARSE_BAD_INDEX,    /* an index at or past n, or not above the one before it */
  BBI_SPARSE_BAD_VALUE     /* a NaN or an infinity */
} bbi_sparse_fault;

/* Bytes k entries take, or 0 when that does not fit a size_t or k is above the u32 count. */
size_t bbi_sparse_encoded_size(size_t k, bbi_sparse_values values);

/* The number of entries a share `fraction` (in (0, 1]) of n keeps: round(fraction × n),
 * at least 1 when n > 0, at most n. */
size_t bbi_sparse_keep(size_t n, double fraction);

/* The indices of the k values of x[0..n) of largest magnitude, in increasing order, into
 * idx[0..k) (k <= n), in O(n log k). Ties are broken by the lower index, so the choice is
 * deterministic. BB_ERR_INVALID_ARGUMENT for a non-finite value (naming its index), k > n,
 * or n above BBI_SPARSE_MAX_LEN. */
int bbi_sparse_select(const float *x, size_t n, size_t k, uint32_t *idx, bb_error *err);

/* Encodes the entries idx[0..k) of x (a vector of n) into out (cap bytes, at least
 * bbi_sparse_encoded_size); *written (may be NULL) gets the size. BB_ERR_INVALID_ARGUMENT
 * for indices that are not increasing below n, a small buffer, or n above
 * BBI_SPARSE_MAX_LEN. */
int bbi_sparse_encode(const float *x, size_t n, const uint32_t *idx, size_t k, bbi_sparse_values values,
                      uint8_t *out, size_t cap, size_t *written, bb_error *err);

/* v as a receiver decodes it when it travels as `values` (float16 rounds it): what a
 * sender that keeps the error it made (error feedback) subtracts. */
float bbi_sparse_stored(float v, bbi_sparse_values values);

/* Checks the header and the length of an encoding and gives its dense length n: n must be
 * at most max_n, and equal to `expect` when expect is not 0. *fault (may be NULL) says why
 * when refused (BB_ERR_MALFORMED). */
int bbi_sparse_count(const uint8_t *in, size_t len, size_t max_n, size_t expect, size_t *n, bbi_sparse_fault *fault,
                     bb_error *err);

/* Decodes in[0..len) into out, a dense vector of exactly n floats (bbi_sparse_count's n):
 * zeros, and the entries. BB_ERR_MALFORMED with *fault set for bad bytes; out may then be
 * partly written. */
int bbi_sparse_decode(const uint8_t *in, size_t len, float *out, size_t n, bbi_sparse_fault *fault, bb_error *err);

#endif
