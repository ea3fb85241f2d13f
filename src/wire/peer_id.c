/* Peer ids: multihash bytes, the u64 identity form, and base58btc text. */
#include <string.h>

#include "bb/wire.h"
#include "bb/common.h"
#include "wire/varint.h"

static const char B58[] = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

bb_peer_id bb_peer_id_from_u64(uint64_t id) {
  bb_peer_id p;
  memset(&p, 0, sizeof p);
  p.bytes[0] = 0x00; /* identity */
  p.bytes[1] = 0x08; /* digest length */
  for (int i = 0; i < 8; i++) p.bytes[2 + i] = (uint8_t)(id >> (56 - 8 * i));
  p.len = 10;
  return p;
}

static const uint8_t ED25519_PREFIX[6] = {0x00, 0x24, 0x08, 0x01, 0x12, 0x20};

bb_peer_id bb_peer_id_from_ed25519(const uint8_t public_key[32]) {
  bb_peer_id p;
  memset(&p, 0, sizeof p);
  memcpy(p.bytes, ED25519_PREFIX, sizeof ED25519_PREFIX);
  memcpy(p.bytes + sizeof ED25519_PREFIX, public_key, 32);
  p.len = sizeof ED25519_PREFIX + 32;
  return p;
}

bool bb_peer_id_ed25519(const bb_peer_id *p, uint8_t public_key[32]) {
  if (!p || p->len != sizeof ED25519_PREFIX + 32 || memcmp(p->bytes, ED25519_PREFIX, sizeof ED25519_PREFIX) != 0)
    return false;
  memcpy(public_key, p->bytes + sizeof ED25519_PREFIX, 32);
  return true;
}

int bb_peer_id_from_bytes(const uint8_t *data, size_t len, bb_peer_id *out, bb_error *err) {
  size_t pos = 0;
  uint64_t code, digest;
  if (bbi_varint_read(data, len, &pos, &code, 1) || bbi_varint_read(data, len, &pos, &digest, 1))
    return bb_error_set(err, BB_ERR_MALFORMED, "peer id: malformed multihash (%zu bytes): bad varint", len);
  if (digest > 64) return bb_error_set(err, BB_ERR_MALFORMED, "peer id: digest of %llu bytes is over 64",
                                       (unsigned long long)digest);
  if (len - pos != digest)
    return bb_error_set(err, BB_ERR_MALFORMED, "peer id: malformed multihash (%zu bytes): digest says %llu, %zu follow",
                        len, (unsigned long long)digest, len - pos);
  if (len > BB_PEER_ID_MAX) return bb_error_set(err, BB_ERR_MALFORMED, "peer id: %zu bytes is too long", len);
  memset(out, 0, sizeof *out);
  memcpy(out->bytes, data, len);
  out->len = (uint8_t)len;
  return 0;
}

bool bb_peer_id_as_u64(const bb_peer_id *p, uint64_t *out) {
  if (p->len != 10 || p->bytes[0] != 0 || p->bytes[1] != 8) return false;
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = v << 8 | p->bytes[2 + i];
  *out = v;
  return true;
}

bool bb_peer_id_equal(const bb_peer_id *a, const bb_peer_id *b) {
  return a->len == b->len && memcmp(a->bytes, b->bytes, a->len) == 0;
}

size_t bb_peer_id_to_text(const bb_peer_id *p, char *out, size_t size) {
  /* base58: repeated division of the big-endian number by 58 */
  uint8_t digits[2 * BB_PEER_ID_MAX];
  size_t n = 0, zeros = 0;
  while (zeros < p->len && p->bytes[zeros] == 0) zeros++;
  for (size_t i = zeros; i < p->len; i++) {
    unsigned carry = p->bytes[i];
    for (size_t k = 0; k < n; k++) {
      carry += (unsigned)digits[k] << 8;
      digits[k] = (uint8_t)(carry % 58);
      carry /= 58;
    }
    while (carry) digits[n++] = (uint8_t)(carry % 58), carry /= 58;
  }
  size_t total = zeros + n;
  if (size < total + 1) return 0;
  for (size_t i = 0; i < zeros; i++) out[i] = '1';
  for (size_t i = 0; i < n; i++) out[zeros + i] = B58[digits[n - 1 - i]];
  out[total] = '\0';
  return total;
}

int bb_peer_id_from_text(const char *text, bb_peer_id *out, bb_error *err) {
  uint8_t bytes[BB_PEER_ID_MAX + 1];
  size_t n = 0, zeros = 0, len = strlen(text);
  while (zeros < len && text[zeros] == '1') zeros++;
  for (size_t i = zeros; i < len; i++) {
    const char *at = memchr(B58, text[i], sizeof B58 - 1);
    if (!at || !text[i]) return bb_error_set(err, BB_ERR_MALFORMED, "peer id: '%c' is not a base58 digit", text[i]);
    unsigned carry = (unsigned)(at - B58);
    for (size_t k = 0; k < n; k++) {
      carry += (unsigned)bytes[k] * 58;
      bytes[k] = (uint8_t)carry;
      carry >>= 8;
    }
    while (carry) {
      if (n == sizeof bytes) return bb_error_set(err, BB_ERR_MALFORMED, "peer id: text is too long");
      bytes[n++] = (uint8_t)carry, carry >>= 8;
    }
  }
  if (zeros + n > BB_PEER_ID_MAX) return bb_error_set(err, BB_ERR_MALFORMED, "peer id: text is too long");
  uint8_t be[BB_PEER_ID_MAX];
  memset(be, 0, zeros);
  for (size_t i = 0; i < n; i++) be[zeros + i] = bytes[n - 1 - i];
  return bb_peer_id_from_bytes(be, zeros + n, out, err);
}
