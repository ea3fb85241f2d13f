/* Join tokens for tests: made here with libsodium's Ed25519 signing, byte by byte as
 * bb/join_token.h lays them out, and the test vector of docs/SECURITY.md (made by the npm
 * package with WebCrypto). */
#ifndef BB_TEST_JOIN_TOKENS_H
#define BB_TEST_JOIN_TOKENS_H

#include <sodium/crypto_sign_ed25519.h>
#include <stdio.h>
#include <string.h>

#include "bb/join_token.h"
#include "bb/bytes.h"

/* An operator (or peer) key pair from a 32-byte seed. */
typedef struct bbt_keys {
  uint8_t pk[32], sk[64];
} bbt_keys;

static inline bbt_keys bbt_keys_from_seed(const uint8_t seed[32]) {
  bbt_keys k;
  crypto_sign_ed25519_seed_keypair(k.pk, k.sk, seed);
  return k;
}

/* A seed whose 32 bytes count up from `first` (the vector's seeds are 00..1f and 20..3f). */
static inline bbt_keys bbt_keys_counting(uint8_t first) {
  uint8_t seed[32];
  for (int i = 0; i < 32; i++) seed[i] = (uint8_t)(first + i);
  return bbt_keys_from_seed(seed);
}

/* Writes a token's fields, up to its signature, into out; returns their length. */
static inline size_t bbt_token_body(const uint8_t operator_pk[32], int role, uint64_t expiry, const bb_peer_id *peer,
                                    const char *room, uint8_t *out) {
  const size_t r = strlen(room);
  memcpy(out, "BBJT", 4);
  out[4] = 1;
  out[5] = (uint8_t)role;
  bb_le_put_u64(out + 6, expiry);
  memcpy(out + 14, operator_pk, 32);
  out[46] = peer->len;
  memcpy(out + 47, peer->bytes, peer->len);
  out[47 + peer->len] = (uint8_t)r;
  memcpy(out + 48 + peer->len, room, r);
  return 48 + peer->len + r;
}

/* Writes a signed token into out (BB_JOIN_TOKEN_MAX_BYTES suffice); returns its length. */
static inline size_t bbt_make_token(const bbt_keys *op, int role, uint64_t expiry, const bb_peer_id *peer,
                                    const char *room, uint8_t *out) {
  const size_t body = bbt_token_body(op->pk, role, expiry, peer, room, out);
  uint8_t msg[29 + BB_JOIN_TOKEN_MAX_BYTES];
  memcpy(msg, BB_JOIN_TOKEN_DOMAIN, 28);
  msg[28] = 0;
  memcpy(msg + 29, out, body);
  crypto_sign_ed25519_detached(out + body, NULL, msg, 29 + body, op->sk);
  return body + 64;
}

/* The key-bound peer id of a public key: identity multihash of the protobuf-encoded
 * Ed25519 key (00 24 08 01 12 20 ‖ key). */
static inline bb_peer_id bbt_peer_of_key(const uint8_t pk[32]) {
  bb_peer_id p;
  memset(&p, 0, sizeof p);
  static const uint8_t PREFIX[6] = {0x00, 0x24, 0x08, 0x01, 0x12, 0x20};
  memcpy(p.bytes, PREFIX, 6);
  memcpy(p.bytes + 6, pk, 32);
  p.len = 38;
  return p;
}

/* docs/SECURITY.md, "Test vector". */
#define BBT_VECTOR_OPERATOR_PK "03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8"
#define BBT_VECTOR_PEER "12D3KooWCd3eX8r5ihRvzK7P1yPq5aakaBJhG5GNj18YTztPhoCa"
#define BBT_VECTOR_ROOM "federation-1"
#define BBT_VECTOR_EXPIRY 2000000000ull
#define BBT_VECTOR_TOKEN                                                                                         \
  "42424a540101009435770000000003a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b82600240801122029" \
  "acbae141bccaf0b22e1a94d34d0bc7361e526d0bfe12c89794bc9322966dd70c66656465726174696f6e2d310a2c00df8f7ee83ede16" \
  "299ad084445fb43b2ed09eb96b882f2cb3385825c228c26cd20aa1c889db541f32bb97faa0220d4d61c03336d02d37749453dd395505"

static inline size_t bbt_unhex(const char *hex, uint8_t *out, size_t cap) {
  size_t n = strlen(hex) / 2;
  if (n > cap) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned v;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1) return 0;
    out[i] = (uint8_t)v;
  }
  return n;
}

#endif /* BB_TEST_JOIN_TOKENS_H */
