/* GlobalRegistry's byte layouts (docs/WIRE.md, "GlobalRegistry messages"): the field
 * reader and writer every payload and saved state of the protocol is built from — a
 * version byte first, little-endian integers, peer ids as u8 length + bytes, address lists
 * as u8 count + (u16 length + bytes) each — and the two messages, Announce and Handshake.
 * Every refusal names the message or state, the field and the byte offset. */
#ifndef BBI_COMPONENTS_PROTOCOLS_REGISTRY_CODEC_H
#define BBI_COMPONENTS_PROTOCOLS_REGISTRY_CODEC_H

#include <stdbool.h>

#include "bb/wire.h"
#include "bb/bytes.h"

#define BBI_REGISTRY_VERSION 1
#define BBI_REGISTRY_MAX_ADDRS 8        /* addresses one message carries */
#define BBI_REGISTRY_MAX_ADDRESS_BYTES 512 /* the binary form of one address */
/* The longest message either side sends. */
#define BBI_REGISTRY_MESSAGE_MAX \
  (2 + 16 + BB_PEER_ID_MAX + 1 + BBI_REGISTRY_MAX_ADDRS * (2 + BBI_REGISTRY_MAX_ADDRESS_BYTES))

/* ---- fields -------------------------------------------------------------------------- */

/* Reads the fields of one payload or state; `what` names it in errors. */
typedef struct bbi_registry_reader {
  bb_le_reader in;
  const char *what;
  bb_error *err;
} bbi_registry_reader;

static inline bbi_registry_reader bbi_registry_reader_of(const uint8_t *p, size_t len, const char *what, bb_error *err) {
  return (bbi_registry_reader){bb_le_reader_of(p, len), what, err};
}

/* The version byte at byte 0; BB_ERR_MALFORMED unless it is BBI_REGISTRY_VERSION. */
int bbi_registry_read_header(bbi_registry_reader *r);
int bbi_registry_read_u8(bbi_registry_reader *r, const char *field, uint8_t *out);
int bbi_registry_read_u64(bbi_registry_reader *r, const char *field, uint64_t *out);
int bbi_registry_read_peer(bbi_registry_reader *r, bb_peer_id *out);
/* An address list into out (room for BBI_REGISTRY_MAX_ADDRS); need_one refuses an empty one. */
int bbi_registry_read_addresses(bbi_registry_reader *r, bb_address *out, size_t *n, bool need_one);
/* BB_ERR_MALFORMED when bytes are left. */
int bbi_registry_read_end(bbi_registry_reader *r);

void bbi_registry_write_peer(bb_le_writer *w, const bb_peer_id *p);
void bbi_registry_write_addresses(bb_le_writer *w, const bb_address *a, size_t n);

/* ---- messages ------------------------------------------------------------------------ */

/* Announce, client → server: the announcing peer and 1..8 of its addresses. */
typedef struct bbi_registry_announce {
  bb_peer_id peer;
  bb_address addrs[BBI_REGISTRY_MAX_ADDRS];
  size_t n_addrs;
} bbi_registry_announce;

/* Handshake, server → client: the registration's lifetime, how often to heartbeat
 * (0 < heartbeat <= ttl) and 0..8 of the server's addresses. */
typedef struct bbi_registry_handshake {
  uint64_t ttl_ns, heartbeat_ns;
  bb_address addrs[BBI_REGISTRY_MAX_ADDRS];
  size_t n_addrs;
} bbi_registry_handshake;

/* Each encoder writes into out[0..cap) and returns the message's length, which is over cap
 * when it did not fit. */
size_t bbi_registry_announce_encode(const bbi_registry_announce *m, uint8_t *out, size_t cap);
size_t bbi_registry_handshake_encode(const bbi_registry_handshake *m, uint8_t *out, size_t cap);

/* Each decoder refuses a wrong version, a short read, an address count out of range, a bad
 * peer id or address, and trailing bytes (BB_ERR_MALFORMED, naming the byte). The
 * handshake's heartbeat range is the client's to check. */
int bbi_registry_announce_decode(const uint8_t *p, size_t len, bbi_registry_announce *out, bb_error *err);
int bbi_registry_handshake_decode(const uint8_t *p, size_t len, bbi_registry_handshake *out, bb_error *err);

#endif
