/* The GF(2^8) arithmetic of the Shamir sharing (shamir.c), for the tests and the server's
 * reconstruction. Constant-time: no branch or table lookup depends on the operands. */
#ifndef BBI_PRIVACY_SHAMIR_H
#define BBI_PRIVACY_SHAMIR_H

#include <stdint.h>

#include "bb/common.h"

uint8_t bbi_gf256_mul(uint8_t a, uint8_t b);
/* The inverse of a (0 for 0). */
uint8_t bbi_gf256_inv(uint8_t a);
/* weights[i]: the Lagrange basis polynomial of xs[i] among xs[0..n), at 0. The x
 * coordinates must be distinct and nonzero (BB_ERR_MALFORMED naming the pair otherwise). */
int bbi_shamir_lagrange_at_zero(const uint8_t *xs, uint32_t n, uint8_t *weights, bb_error *err);

#endif
