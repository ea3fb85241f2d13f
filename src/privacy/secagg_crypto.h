/* The cryptography of a SecAgg+ round, all of it libsodium's: BLAKE2b for the setup hash,
 * commitments and key derivation, X25519 for the pairwise keys, Ed25519 for the keys'
 * signatures, ChaCha20-Poly1305 for the shares in transit and ChaCha20 for the masks. */
#ifndef BBI_PRIVACY_SECAGG_CRYPTO_H
#define BBI_PRIVACY_SECAGG_CRYPTO_H

#include <stdbool.h>
#include <stdint.h>

#include "bb/privacy.h"

/* crypto_kdf context and subkey ids: one per use of a derived key. */
#define SA_KDF_CONTEXT "bbsecagg"
enum { SA_KDF_GRAPH = 1, SA_KDF_MASK = 2, SA_KDF_TRANSPORT = 3, SA_KDF_SELF_MASK = 4 };

/* The signed message is this domain, a zero byte, the setup hash, the signer's index
 * and its two public keys. */
#define SA_SIGN_DOMAIN "bytesandbrains secagg keys v1"
#define SA_SIGN_PAYLOAD_BYTES (sizeof SA_SIGN_DOMAIN + 32 + 4 + 64)

/* BLAKE2b-256 of the round: its id, parameters and the clients' identity keys. Every key,
 * signature and ciphertext of the round is bound to it. */
void sa_setup_hash(const uint8_t round[16], const bb_secagg_params *p, const uint8_t *identities, uint8_t out[32]);

void sa_sign_payload(const uint8_t setup_hash[32], uint32_t index, const uint8_t c_pk[32], const uint8_t s_pk[32],
                     uint8_t out[SA_SIGN_PAYLOAD_BYTES]);
bool sa_signature_ok(const uint8_t identity[32], const uint8_t setup_hash[32], uint32_t index, const uint8_t c_pk[32],
                     const uint8_t s_pk[32], const uint8_t sig[64]);

/* A fresh X25519 key pair from the random source. */
int sa_keypair(const bb_random_source *random, uint8_t sk[32], uint8_t pk[32], bb_error *err);

/* The key clients a and b share for a purpose (SA_KDF_MASK, SA_KDF_TRANSPORT), from one's
 * secret and the other's public key. False when the public key is of low order. */
bool sa_pair_key(const uint8_t my_sk[32], const uint8_t their_pk[32], const uint8_t setup_hash[32], uint32_t a,
                 uint32_t b, uint64_t purpose, uint8_t out[32]);

/* The commitment to a self-mask seed, and the key its mask expands from. */
void sa_commit(const uint8_t seed[32], uint8_t out[32]);
void sa_self_mask_key(const uint8_t seed[32], uint8_t out[32]);

/* Seals and opens the share pair owner → holder under their transport key. */
#define SA_SEAL_OVERHEAD 16
void sa_seal(const uint8_t key[32], const uint8_t setup_hash[32], uint32_t owner, uint32_t holder,
             const uint8_t *plain, size_t len, uint8_t *out);
bool sa_open(const uint8_t key[32], const uint8_t setup_hash[32], uint32_t owner, uint32_t holder,
             const uint8_t *sealed, size_t len, uint8_t *plain);

/* acc[e] ± (element e of the ChaCha20 stream under key) mod 2^bits, for e in [0, len):
 * each element takes ceil(bits / 8) bytes of the stream. */
void sa_mask_apply(uint64_t *acc, uint32_t len, uint32_t bits, const uint8_t key[32], bool subtract);

#endif
