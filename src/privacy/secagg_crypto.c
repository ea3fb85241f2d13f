/* SecAgg+ cryptography from libsodium. Derived keys go through BLAKE2b with both parties'
 * indices, so the key of a pair is the same from either end and differs for every pair,
 * purpose and round. */
#include "privacy/secagg_crypto.h"

#include <string.h>

#include <sodium/crypto_aead_chacha20poly1305.h>
#include <sodium/crypto_generichash_blake2b.h>
#include <sodium/crypto_kdf_blake2b.h>
#include <sodium/crypto_scalarmult_curve25519.h>
#include <sodium/crypto_sign_ed25519.h>
#include <sodium/crypto_stream_chacha20.h>
#include <sodium/utils.h>

#include "bb/bytes.h"
#include "privacy/random.h"
#include "privacy/secagg_codec.h"
#include "privacy/secagg_params.h"

#define SETUP_DOMAIN "bytesandbrains secagg setup v1"
#define COMMIT_DOMAIN "bytesandbrains secagg commit v1"

void sa_setup_hash(const uint8_t round[16], const bb_secagg_params *p, const uint8_t *identities, uint8_t out[32]) {
  uint8_t params[SA_PARAMS_BYTES];
  bb_le_writer w = bb_le_writer_fixed(params, sizeof params);
  sa_put_params(&w, p);
  crypto_generichash_blake2b_state st;
  crypto_generichash_blake2b_init(&st, NULL, 0, 32);
  crypto_generichash_blake2b_update(&st, (const uint8_t *)SETUP_DOMAIN, sizeof SETUP_DOMAIN);
  crypto_generichash_blake2b_update(&st, round, SA_ROUND_BYTES);
  crypto_generichash_blake2b_update(&st, params, sizeof params);
  crypto_generichash_blake2b_update(&st, identities, (unsigned long long)p->n_clients * BB_SECAGG_KEY_BYTES);
  crypto_generichash_blake2b_final(&st, out, 32);
}

void sa_sign_payload(const uint8_t setup_hash[32], uint32_t index, const uint8_t c_pk[32], const uint8_t s_pk[32],
                     uint8_t out[SA_SIGN_PAYLOAD_BYTES]) {
  memcpy(out, SA_SIGN_DOMAIN, sizeof SA_SIGN_DOMAIN); /* with its zero byte */
  uint8_t *p = out + sizeof SA_SIGN_DOMAIN;
  memcpy(p, setup_hash, 32);
  bb_le_put_u32(p + 32, index);
  memcpy(p + 36, c_pk, 32);
  memcpy(p + 68, s_pk, 32);
}

bool sa_signature_ok(const uint8_t identity[32], const uint8_t setup_hash[32], uint32_t index, const uint8_t c_pk[32],
                     const uint8_t s_pk[32], const uint8_t sig[64]) {
  uint8_t payload[SA_SIGN_PAYLOAD_BYTES];
  sa_sign_payload(setup_hash, index, c_pk, s_pk, payload);
  return crypto_sign_ed25519_verify_detached(sig, payload, sizeof payload, identity) == 0;
}

int sa_keypair(const bb_random_source *random, uint8_t sk[32], uint8_t pk[32], bb_error *err) {
  int rc = bbi_random_fill(random, sk, 32, err);
  if (rc) return rc;
  crypto_scalarmult_curve25519_base(pk, sk);
  return 0;
}

bool sa_pair_key(const uint8_t my_sk[32], const uint8_t their_pk[32], const uint8_t setup_hash[32], uint32_t a,
                 uint32_t b, uint64_t purpose, uint8_t out[32]) {
  uint8_t shared[32], master[32], ids[8];
  if (crypto_scalarmult_curve25519(shared, my_sk, their_pk) != 0) return false; /* low order: all zero */
  bb_le_put_u32(ids, a < b ? a : b);
  bb_le_put_u32(ids + 4, a < b ? b : a);
  crypto_generichash_blake2b_state st;
  crypto_generichash_blake2b_init(&st, NULL, 0, 32);
  crypto_generichash_blake2b_update(&st, shared, 32);
  crypto_generichash_blake2b_update(&st, setup_hash, 32);
  crypto_generichash_blake2b_update(&st, ids, 8);
  crypto_generichash_blake2b_final(&st, master, 32);
  crypto_kdf_blake2b_derive_from_key(out, 32, purpose, SA_KDF_CONTEXT, master);
  sodium_memzero(shared, sizeof shared);
  sodium_memzero(master, sizeof master);
  return true;
}

void sa_commit(const uint8_t seed[32], uint8_t out[32]) {
  crypto_generichash_blake2b(out, 32, seed, 32, (const uint8_t *)COMMIT_DOMAIN, sizeof COMMIT_DOMAIN - 1);
}

void sa_self_mask_key(const uint8_t seed[32], uint8_t out[32]) {
  crypto_kdf_blake2b_derive_from_key(out, 32, SA_KDF_SELF_MASK, SA_KDF_CONTEXT, seed);
}

/* nonce: owner ‖ holder ‖ 0000, so the two directions of a pair never share one; the
 * associated data binds the setup and both indices */
static void seal_nonce_ad(const uint8_t setup_hash[32], uint32_t owner, uint32_t holder, uint8_t nonce[12],
                          uint8_t ad[40]) {
  memset(nonce, 0, 12);
  bb_le_put_u32(nonce, owner);
  bb_le_put_u32(nonce + 4, holder);
  memcpy(ad, setup_hash, 32);
  memcpy(ad + 32, nonce, 8);
}

void sa_seal(const uint8_t key[32], const uint8_t setup_hash[32], uint32_t owner, uint32_t holder,
             const uint8_t *plain, size_t len, uint8_t *out) {
  uint8_t nonce[12], ad[40];
  seal_nonce_ad(setup_hash, owner, holder, nonce, ad);
  crypto_aead_chacha20poly1305_ietf_encrypt(out, NULL, plain, len, ad, sizeof ad, NULL, nonce, key);
}

bool sa_open(const uint8_t key[32], const uint8_t setup_hash[32], uint32_t owner, uint32_t holder,
             const uint8_t *sealed, size_t len, uint8_t *plain) {
  uint8_t nonce[12], ad[40];
  seal_nonce_ad(setup_hash, owner, holder, nonce, ad);
  return crypto_aead_chacha20poly1305_ietf_decrypt(plain, NULL, NULL, sealed, len, ad, sizeof ad, nonce, key) == 0;
}

#define MASK_CHUNK 512 /* elements per stretch of keystream */

void sa_mask_apply(uint64_t *acc, uint32_t len, uint32_t bits, const uint8_t key[32], bool subtract) {
  static const uint8_t zeros[MASK_CHUNK * 8];
  uint8_t stream[MASK_CHUNK * 8];
  const uint8_t nonce[12] = {0};
  const uint32_t width = sa_width(bits);
  const uint64_t mask = sa_ring_mask(bits);
  uint32_t block = 0;
  for (uint32_t at = 0; at < len; at += MASK_CHUNK) {
    const uint32_t n = len - at < MASK_CHUNK ? len - at : MASK_CHUNK;
    /* a full chunk is MASK_CHUNK × width bytes = 8 × width ChaCha20 blocks */
    crypto_stream_chacha20_ietf_xor_ic(stream, zeros, (unsigned long long)n * width, nonce, block, key);
    block += 8 * width;
    uint64_t *a = acc + at;
    if (width == 4) {
      for (uint32_t e = 0; e < n; e++) {
        const uint64_t v = bb_le_get_u32(stream + 4 * e);
        a[e] = (subtract ? a[e] - v : a[e] + v) & mask;
      }
    } else {
      for (uint32_t e = 0; e < n; e++) {
        const uint64_t v = sa_get_element(stream + (size_t)e * width, width) & mask;
        a[e] = (subtract ? a[e] - v : a[e] + v) & mask;
      }
    }
  }
  sodium_memzero(stream, sizeof stream);
}
