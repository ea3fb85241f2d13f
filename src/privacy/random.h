/* Randomness for the privacy layer: a caller's bb_random_source or the system CSPRNG, and a
 * ChaCha20 generator keyed from it for the many small draws of samplers and rounding. */
#ifndef BBI_PRIVACY_RANDOM_H
#define BBI_PRIVACY_RANDOM_H

#include <stdint.h>

#include "bb/privacy.h"

/* Fills out[0..len) from src (NULL or src->fill NULL: the system CSPRNG). */
int bbi_random_fill(const bb_random_source *src, void *out, size_t len, bb_error *err);

/* A ChaCha20 keystream under a 32-byte key from the source, read in order. The key and
 * the buffered stream are wiped by bbi_prng_wipe. */
typedef struct bbi_prng {
  uint8_t key[32];
  uint64_t block;  /* the next 256-byte block's number, the keystream's nonce */
  uint8_t buf[256];
  size_t at;       /* bytes of buf used */
} bbi_prng;

int bbi_prng_init(bbi_prng *r, const bb_random_source *src, bb_error *err);
void bbi_prng_bytes(bbi_prng *r, void *out, size_t len);
uint64_t bbi_prng_u64(bbi_prng *r);
/* Uniform in [0, bound) (bound >= 1), by rejection: no modulo bias. */
uint64_t bbi_prng_below(bbi_prng *r, uint64_t bound);
/* Uniform in [0, 1) with 53 random bits. */
double bbi_prng_unit(bbi_prng *r);
void bbi_prng_wipe(bbi_prng *r);

#endif
