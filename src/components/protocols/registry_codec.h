/* GlobalRegistry's byte layouts (docs/WIRE.md, "GlobalRegistry messages"): the field
 * reader and writer every payload and saved state of the protocol is built from — a
 * version byte first, little-endian integers, peer ids as u8 length + bytes, address lists
 * as u8 count + (u16 length + bytes) each — and the two messages, Announce and Handshake.
 * Every refusal names the message or state, the field and the byte offset. */
#ifndef BB_COMPONENTS_PROTOCOLS_REGISTRY_CODEC_H
#define BB_COMPONENTS_PROTOCOLS_REGISTRY_CODEC_H

#include <stdbool.h>

#include "bb/wire.h"
#include "bb/bytes.h"

#define BB_REGISTRY_VERSION 1
#define BB_REGISTRY_MAX_ADDRS 8        /* addresses one message carries */
#define BB_REGISTRY_MAX_ADDRESS_BYTES 512 /* the binary form of one address */
/* The longest message either side sends. */
#define BB_REGISTRY_MESSAGE_MAX \
  (2 + 16 + BB_PEER_ID_MAX + 1 + BB_REGISTRY_MAX_ADDRS * (2 + BB_REGISTRY_MAX_ADDRESS_BYTES))

/* ---- fields -------------------------------------------------------------------------- */

/* Reads the fields of one payload or state; `what` names it in errors. */
typedef struct bb_registry_reader {
  bb_le_reader in;
  const char *what;
  bb_error *err;
} bb_registry_reader;

static inline bb_registry_reader bb_registry_reader_of(const uint8_t *p, size_t len, const char *what, bb_error *err) {
  return (bb_registry_reader){bb_le_reader_of(p, len), what, err};
}

/* The version byte at byte 0; BB_ERR_MALFORMED unless it is BB_REGISTRY_VERSION. */
int bb_registry_read_header(bb_registry_reader *r);
int bb_registry_read_u8(bb_registry_reader *r, const char *field, uint8_t *out);
int bb_registry_read_u64(bb_registry_reader *r, const char *field, uint64_t *out);
int bb_registry_read_peer(bb_registry_reader *r, bb_peer_id *out);
/* An address list into out (room for BB_REGISTRY_MAX_ADDRS); need_one refuses an empty one. */
int bb_registry_read_addresses(bb_registry_reader *r, bb_address *out, size_t *n, bool need_one);
/* BB_ERR_MALFORMED when bytes are left. */
int bb_registry_read_end(bb_registry_reader *r);

void bb_registry_write_peer(bb_le_writer *w, const bb_peer_id *p);
void bb_registry_write_addresses(bb_le_writer *w, const bb_address *a, size_t n);

/* ---- messages ------------------------------------------------------------------------ */

/* Announce, client → server: the announcing peer and 1..8 of its addresses. */
typedef struct bb_registry_announce {
  bb_peer_id peer;
  bb_address addrs[BB_REGISTRY_MAX_ADDRS];
  size_t n_addrs;
} bb_registry_announce;

/* Handshake, server → client: the registration's lifetime, how often to heartbeat
 * (0 < heartbeat <= ttl) and 0..8 of the server's addresses. */
typedef struct bb_registry_handshake {
  uint64_t ttl_ns, heartbeat_ns;
  bb_address addrs[BB_REGISTRY_MAX_ADDRS];
  size_t n_addrs;
} bb_registry_handshake;

/* Each encoder writes into out[0..cap) and returns the message's length, which is over cap
 * when it did not fit. */
size_t bb_registry_announce_encode(const bb_registry_announce *m, uint8_t *out, size_t cap);
size_t bb_registry_handshake_encode(const bb_registry_handshake *m, uint8_t *out, size_t cap);

/* Each decoder refuses a wrong version, a short read, an address count out of range, a bad
 * peer id or address, and trailing bytes (BB_ERR_MALFORMED, naming the byte). The
 * handshake's heartbeat range is the client's to check. */
int bb_registry_announce_decode(const uint8_t *p, size_t len, bb_registry_announce *out, bb_error *err);
int bb_registry_handshake_decode(const uint8_t *p, size_t len, bb_registry_handshake *out, bb_error *err);

#endif
