/* The SecAgg+ messages (docs/WIRE.md, "Secure aggregation messages"): a 26-byte header
 * and a body per type, all integers little-endian. Decoding checks every length against
 * the bytes and the caps before anything is read, and points into the caller's buffer. */
#ifndef BBI_PRIVACY_SECAGG_CODEC_H
#define BBI_PRIVACY_SECAGG_CODEC_H

#include <stdbool.h>
#include <stdint.h>

#include "bb/bytes.h"
#include "bb/privacy.h"

#define SA_MAGIC "BBSA"
#define SA_ROUND_BYTES 16
#define SA_HEADER_BYTES 26
#define SA_PARAMS_BYTES 40
#define SA_SHARE_BYTES 33        /* a 32-byte secret's Shamir share: 32 y bytes, then x */
#define SA_PLAIN_BYTES 74        /* a share pair in transport: owner, holder, two shares */
#define SA_CIPHER_BYTES 90       /* that, sealed with ChaCha20-Poly1305 */
#define SA_KEY_ENTRY_BYTES 132   /* index, c_pk, s_pk, signature */
#define SA_CIPHER_ENTRY_BYTES 94 /* index, ciphertext */
#define SA_UNMASK_ENTRY_BYTES 38 /* owner, kind, share */

typedef enum sa_type {
  SA_SETUP = 1,
  SA_ADVERTISE = 2,
  SA_KEYS = 3,
  SA_SHARES = 4,
  SA_CIPHERTEXTS = 5,
  SA_MASKED = 6,
  SA_UNMASK_REQUEST = 7,
  SA_UNMASK = 8,
  SA_ABORT = 9
} sa_type;

/* The two kinds of share a client may be asked for. */
enum { SA_KIND_SELF_MASK = 1, SA_KIND_MASK_KEY = 2 };

const char *sa_type_name(uint8_t type);

/* A decoded message; pointers and lists point into the decoded bytes. Lists are of fixed
 * entries: KEYS (SA_KEY_ENTRY_BYTES), SHARES and CIPHERTEXTS (SA_CIPHER_ENTRY_BYTES),
 * UNMASK (SA_UNMASK_ENTRY_BYTES), each led by a u32 index, strictly ascending. */
typedef struct sa_msg {
  uint8_t type;
  const uint8_t *round; /* SA_ROUND_BYTES */
  uint32_t index;
  union {
    struct {
      bb_secagg_params params;
      const uint8_t *identities; /* n_clients × 32 */
    } setup;
    struct {
      const uint8_t *c_pk, *s_pk, *sig;
    } advertise;
    struct {
      uint32_t count;
      const uint8_t *entries;
    } list; /* KEYS, CIPHERTEXTS, UNMASK */
    struct {
      const uint8_t *commit; /* 32: BLAKE2b of the self-mask seed */
      uint32_t count;
      const uint8_t *entries;
    } shares;
    struct {
      uint32_t len;
      const uint8_t *data; /* len elements of sa_width(modulus_bits) bytes */
    } masked;
    struct {
      uint32_t n_survivors, n_dropped;
      const uint8_t *survivors, *dropped; /* u32 each */
    } request;
    uint8_t abort_reason;
  } u;
} sa_msg;

/* Bytes per ring element on the wire: ceil(modulus_bits / 8). */
static inline uint32_t sa_width(uint32_t modulus_bits) { return (modulus_bits + 7) / 8; }

/* Caps with the defaults filled in. */
bb_secagg_caps sa_caps_resolve(const bb_secagg_caps *caps);

/* Decodes data[0..len). modulus_bits (0 when unknown) sizes a MASKED message's elements.
 * On failure *reason names the check, err says where. */
int sa_decode(const uint8_t *data, size_t len, const bb_secagg_caps *caps, uint32_t modulus_bits, sa_msg *out,
              bb_secagg_reason *reason, bb_error *err);

/* Encoders append to w. */
void sa_put_header(bb_le_writer *w, uint8_t type, const uint8_t *round, uint32_t index);
void sa_put_params(bb_le_writer *w, const bb_secagg_params *p);
/* A ring element of width bytes. */
void sa_put_element(uint8_t *p, uint64_t v, uint32_t width);
uint64_t sa_get_element(const uint8_t *p, uint32_t width);

#endif
