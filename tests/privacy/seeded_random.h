/* A seeded random source for the privacy tests: reproducible secrets and noise. */
#ifndef BB_TESTS_PRIVACY_SEEDED_RANDOM_H
#define BB_TESTS_PRIVACY_SEEDED_RANDOM_H

#include <string.h>

#include <sodium/crypto_stream_chacha20.h>

#include "bb/bytes.h"
#include "bb/privacy.h"

/* A seeded random source: a ChaCha20 stream under a key made from the seed. */
typedef struct sr_rng {
  uint8_t key[32];
  uint64_t block;
} sr_rng;

static inline int sr_rng_fill(void *user, uint8_t *out, size_t len) {
  sr_rng *r = user;
  uint8_t nonce[12] = {0};
  bb_le_put_u64(nonce, r->block++);
  crypto_stream_chacha20_ietf(out, len, nonce, r->key);
  return 0;
}

static inline void sr_rng_seed(sr_rng *r, uint64_t seed) {
  memset(r, 0, sizeof *r);
  bb_le_put_u64(r->key, seed);
  bb_le_put_u64(r->key + 8, 0x5ecda99ull);
}

static inline bb_random_source sr_source(sr_rng *r) { return (bb_random_source){sr_rng_fill, r}; }

#endif
