/* The privacy layer's randomness. Natively the system CSPRNG is libsodium's randombytes;
 * bb.wasm has no libsodium randombytes (its Emscripten build calls into JavaScript), so
 * there libc's getentropy, which bb.wasm imports from its host (crypto.getRandomValues). */
#ifdef __EMSCRIPTEN__
#define _DEFAULT_SOURCE /* getentropy, outside strict C11 */
#endif
#include "privacy/random.h"

#include <string.h>

#include <sodium/crypto_stream_chacha20.h>
#include <sodium/utils.h>

#ifdef __EMSCRIPTEN__
#include <unistd.h>
#else
#include <sodium/core.h>
#include <sodium/randombytes.h>
#endif

#include "bb/bytes.h"

static int system_fill(uint8_t *out, size_t len, bb_error *err) {
#ifdef __EMSCRIPTEN__
  /* getentropy gives at most 256 bytes a call */
  for (size_t at = 0; at < len; at += 256) {
    const size_t n = len - at < 256 ? len - at : 256;
    if (getentropy(out + at, n) != 0)
      return bb_error_set(err, BB_ERR_IO, "the host's getentropy failed after %zu of %zu random bytes", at, len);
  }
#else
  if (sodium_init() < 0) return bb_error_set(err, BB_ERR_IO, "libsodium failed to initialise its random source");
  randombytes_buf(out, len);
#endif
  return 0;
}

int bbi_random_fill(const bb_random_source *src, void *out, size_t len, bb_error *err) {
  if (!src || !src->fill) return system_fill(out, len, err);
  int rc = src->fill(src->user_data, out, len);
  if (rc < 0) return bb_error_set(err, rc, "the caller's random source failed (%s)", bb_strerror(rc));
  return 0;
}

int bbi_prng_init(bbi_prng *r, const bb_random_source *src, bb_error *err) {
  memset(r, 0, sizeof *r);
  r->at = sizeof r->buf;
  return bbi_random_fill(src, r->key, sizeof r->key, err);
}

static void refill(bbi_prng *r) {
  uint8_t nonce[crypto_stream_chacha20_IETF_NONCEBYTES] = {0};
  bb_le_put_u64(nonce, r->block++);
  crypto_stream_chacha20_ietf(r->buf, sizeof r->buf, nonce, r->key);
  r->at = 0;
}

void bbi_prng_bytes(bbi_prng *r, void *out, size_t len) {
  uint8_t *o = out;
  while (len) {
    if (r->at == sizeof r->buf) refill(r);
    size_t n = sizeof r->buf - r->at;
    if (n > len) n = len;
    memcpy(o, r->buf + r->at, n);
    sodium_memzero(r->buf + r->at, n); /* a byte handed out is not kept */
    r->at += n;
    o += n;
    len -= n;
  }
}

uint64_t bbi_prng_u64(bbi_prng *r) {
  uint8_t b[8];
  bbi_prng_bytes(r, b, 8);
  return bb_le_get_u64(b);
}

uint64_t bbi_prng_below(bbi_prng *r, uint64_t bound) {
  if (bound <= 1) return 0;
  /* the smallest all-ones mask covering bound - 1; a draw is kept with probability > 1/2 */
  uint64_t mask = bound - 1;
  mask |= mask >> 1, mask |= mask >> 2, mask |= mask >> 4, mask |= mask >> 8, mask |= mask >> 16, mask |= mask >> 32;
  for (;;) {
    const uint64_t v = bbi_prng_u64(r) & mask;
    if (v < bound) return v;
  }
}

double bbi_prng_unit(bbi_prng *r) { return (double)(bbi_prng_u64(r) >> 11) * 0x1.0p-53; }

void bbi_prng_wipe(bbi_prng *r) { sodium_memzero(r, sizeof *r); }
