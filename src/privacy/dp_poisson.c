/* Poisson sampling of a round's participants. Each participant's draw is the keyed
 * BLAKE2b of its id under the round's secret key: independent across participants (the
 * hash is a PRF of the id) and across rounds (a fresh key each), fixed within a round, so
 * asking again — a client resending its update — never draws again. */
#include <math.h>
#include <string.h>

#include <sodium/crypto_generichash_blake2b.h>

#include "bb/bytes.h"
#include "bb/privacy.h"
#include "privacy/random.h"

int bb_dp_sample_key(const bb_random_source *random, uint8_t key[BB_DP_SAMPLE_KEY_BYTES], bb_error *err) {
  if (!key) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "dp sample: no key buffer");
  return bbi_random_fill(random, key, BB_DP_SAMPLE_KEY_BYTES, err);
}

bool bb_dp_sampled(const uint8_t key[BB_DP_SAMPLE_KEY_BYTES], const uint8_t *id, size_t len, double rate) {
  if (!(rate > 0)) return false;
  if (rate >= 1) return true;
  uint8_t h[8];
  crypto_generichash_blake2b(h, sizeof h, id, (unsigned long long)len, key, BB_DP_SAMPLE_KEY_BYTES);
  /* u < rate × 2^64: probability rate, to the precision of the double */
  const uint64_t threshold = (uint64_t)ldexp(rate, 64);
  return bb_le_get_u64(h) < threshold;
}
