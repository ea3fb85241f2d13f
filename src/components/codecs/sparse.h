/* Top-k sparsification of float32 vectors for the Codec role: of a vector of n values only
 * the k of largest magnitude travel — which ones, as a list of indices or a bitmap,
 * whichever is shorter, and their values, as float32, float16 or 8-bit codes. Encoding
 * writes into a caller's buffer and decoding into one, so nothing here allocates.
 *
 * Byte layout (all integers and floats little-endian):
 *
 *   offset 0   u32  n, the length of the dense vector
 *   offset 4   u32  k, the entries kept (k <= n)
 *   offset 8   u8   how the indices travel: 1 a list of k u32, strictly increasing, each
 *                   below n; 2 a bitmap of n bits (⌈n/8⌉ bytes, bit i of byte i/8, least
 *                   significant first, set for each kept index; exactly k set, none past n)
 *   offset 9   u8   how the values travel: 1 k float32; 2 the float16 codec's encoding of
 *                   the k values (4 + 2k bytes); 3 the uint8 codec's (9 + k bytes: a scale
 *                   and zero point for the k values, one code each; quant.h)
 *   offset 10  the index block, then the value block, in the order of the indices
 *   total      10 + (4k or ⌈n/8⌉) + (4k, 4 + 2k or 9 + k) bytes
 *
 * Every other coordinate decodes to 0. The decoder takes any bytes: a length that is not
 * exactly the one the header implies, an unknown index or value form, k above n, n above
 * the caller's bound or unequal to the length it expects, an index at or past n or not
 * above the one before it, a bitmap whose set bits are not k or reach past n, a NaN, an
 * infinity or a bad scale: each is refused with BB_ERR_MALFORMED and the byte offset, and a
 * reason the caller can count. */
#ifndef BBI_OPS_CODECS_SPARSE_H
#define BBI_OPS_CODECS_SPARSE_H

#include <stddef.h>
#include <stdint.h>

#include "bb/common.h"

#define BBI_SPARSE_HEADER 10
/* Vectors longer than this do not fit the u32 length. */
#define BBI_SPARSE_MAX_LEN UINT32_MAX

typedef enum bbi_sparse_indices {
  BBI_SPARSE_LIST = 1,
  BBI_SPARSE_BITMAP = 2
} bbi_sparse_indices;

typedef enum bbi_sparse_values {
  BBI_SPARSE_F32 = 1,
  BBI_SPARSE_F16 = 2,
  BBI_SPARSE_U8 = 3
} bbi_sparse_values;

/* Why a decoder refused its bytes. */
typedef enum bbi_sparse_fault {
  BBI_SPARSE_OK = 0,
  BBI_SPARSE_BAD_LENGTH,   /* the bytes end early, run on, or a form is unknown */
  BBI_SPARSE_BAD_COUNT,    /* k above n, or n above the bound */
  BBI_SPARSE_BAD_EXPECTED, /* n unequal to the length the caller expects */
  BBI_SPARSE_BAD_INDEX,    /* an index at or past n, or not above the one before it; a
                              bitmap with other than k bits set, or one past n */
  BBI_SPARSE_BAD_VALUE     /* a NaN, an infinity, or a uint8 scale that is not finite >= 0 */
} bbi_sparse_fault;

/* The shorter index form for k of n (the list on a tie). */
bbi_sparse_indices bbi_sparse_index_form(size_t n, size_t k);

/* Bytes the encoding of k entries of n takes with the shorter index form, or 0 when that
 * does not fit a size_t or n is above BBI_SPARSE_MAX_LEN. */
size_t bbi_sparse_encoded_size(size_t n, size_t k, bbi_sparse_values values);

/* The number of entries a share `fraction` (in (0, 1]) of n keeps: round(fraction × n),
 * at least 1 when n > 0, at most n. */
size_t bbi_sparse_keep(size_t n, double fraction);

/* The indices of the k values of x[0..n) of largest magnitude, in increasing order, into
 * idx[0..k) (k <= n), in O(n log k). Ties are broken by the lower index, so the choice is
 * deterministic. BB_ERR_INVALID_ARGUMENT for a non-finite value (naming its index), k > n,
 * or n above BBI_SPARSE_MAX_LEN. */
int bbi_sparse_select(const float *x, size_t n, size_t k, uint32_t *idx, bb_error *err);

/* Encodes the entries idx[0..k) of x (a vector of n) into out (cap bytes, at least
 * bbi_sparse_encoded_size), with the shorter index form; *written (may be NULL) gets the
 * size. kept (k floats) gets each kept value as the receiver will decode it, so a sender
 * can keep what the encoding lost (error feedback). BB_ERR_INVALID_ARGUMENT for indices
 * that are not increasing below n, a non-finite value, a small buffer, or n above
 * BBI_SPARSE_MAX_LEN. */
int bbi_sparse_encode(const float *x, size_t n, const uint32_t *idx, size_t k, bbi_sparse_values values,
                      uint8_t *out, size_t cap, size_t *written, float *kept, bb_error *err);

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
