/* bytesandbrains — the wire: peer ids, addresses and the envelope that carries values
 * between peers (proto/bb_core.proto; docs/WIRE.md).
 *
 * Example:
 *
 *   uint8_t bytes[3] = {1, 2, 3}, suffix[8] = "model.in";
 *   bb_slot_fill fill = {.dest_suffix = {suffix, sizeof suffix}, .payload = {bytes, sizeof bytes},
 *                        .type_hash = bb_type_hash("my.Bytes")};
 *   bb_envelope env = {.fills = &fill, .n_fills = 1, .schema_version = BB_ENVELOPE_SCHEMA_VERSION};
 *   uint8_t *out;
 *   size_t len;
 *   bb_error err;
 *   if (bb_envelope_encode(&env, NULL, &out, &len, &err)) return 1;
 *   bb_envelope *got = NULL;  // decoding points into `out`: keep it until the envelope is freed
 *   int rc = bb_envelope_decode(out, len, NULL, NULL, &got, &err);  // NULL caps: the defaults
 *   bool same = !rc && got->n_fills == 1 && got->fills[0].payload.len == 3 && got->fills[0].payload.data[2] == 3;
 *   bb_envelope_free(got, NULL);
 *   bb_buffer_free(NULL, out);
 *   if (!same) return 1;
 *
 * Decoding treats every byte as hostile: caps are enforced while parsing, nothing is
 * trusted before it is checked, and a decoded envelope points into the caller's buffer
 * (payloads are never copied), so that buffer must outlive the envelope. */
#ifndef BB_WIRE_H
#define BB_WIRE_H

#include <stdbool.h>

#include "bb/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- peer ids ---------------------------------------------------------------------- */

/* A libp2p-style multihash: varint(code) ‖ varint(digest length) ‖ digest (≤ 64 bytes). */
#define BB_PEER_ID_MAX 76
typedef struct bb_peer_id {
  uint8_t len;
  uint8_t bytes[BB_PEER_ID_MAX];
} bb_peer_id;

/* The test/simulation identity: an identity multihash (code 0) of the big-endian u64. */
BB_API bb_peer_id bb_peer_id_from_u64(uint64_t id);
/* Parses the canonical bytes; BB_ERR_MALFORMED unless they are exactly one multihash. */
BB_API int bb_peer_id_from_bytes(const uint8_t *data, size_t len, bb_peer_id *out, bb_error *err);
/* The u64 of an identity multihash with an 8-byte digest; false for any other peer id. */
/* A key-bound peer id (libp2p's form): the identity multihash of the protobuf PublicKey
 * {Type = Ed25519, Data = key}, 00 24 08 01 12 20 ‖ the 32-byte key. Whoever signs with
 * the key's secret speaks for the id. */
BB_API bb_peer_id bb_peer_id_from_ed25519(const uint8_t public_key[32]);
/* The Ed25519 public key a key-bound peer id holds: true with it in public_key, false for
 * any other id (a test id of bb_peer_id_from_u64, a hashed id). */
BB_API bool bb_peer_id_ed25519(const bb_peer_id *p, uint8_t public_key[32]);
BB_API bool bb_peer_id_as_u64(const bb_peer_id *p, uint64_t *out);
BB_API bool bb_peer_id_equal(const bb_peer_id *a, const bb_peer_id *b);
/* Base58btc text (as libp2p prints peer ids), NUL-terminated; returns its length, or 0
 * when size is too small (104 bytes always suffice). */
BB_API size_t bb_peer_id_to_text(const bb_peer_id *p, char *out, size_t size);
BB_API int bb_peer_id_from_text(const char *text, bb_peer_id *out, bb_error *err);

/* ---- addresses ----------------------------------------------------------------------- */

typedef enum bb_addr_kind {
  BB_ADDR_P2P = 421,      /* a peer id */
  BB_ADDR_SITE = 0xE2,    /* the wire a data-plane value travels on (u64 wire id) */
  BB_ADDR_COMPONENT = 0xE3, /* a component of a node (u32) */
  BB_ADDR_OP = 0xE4       /* an op name of that component (UTF-8) */
} bb_addr_kind;

#define BB_ADDR_MAX_SEGMENTS 8
#define BB_ADDR_OP_MAX 255

typedef struct bb_addr_segment {
  bb_addr_kind kind;
  bb_peer_id peer;   /* P2P */
  uint64_t value;    /* SITE, COMPONENT */
  char op[BB_ADDR_OP_MAX + 1]; /* OP, NUL-terminated */
} bb_addr_segment;

/* An ordered list of segments (a subset of multiaddr). */
typedef struct bb_address {
  size_t n;
  bb_addr_segment seg[BB_ADDR_MAX_SEGMENTS];
} bb_address;

/* Byte form: the segments' (varint code ‖ payload) concatenated. to_bytes returns the
 * length written (0 with too small a buffer; 128 + 16·255 bytes always suffice). */
BB_API int bb_address_from_bytes(const uint8_t *data, size_t len, bb_address *out, bb_error *err);
BB_API size_t bb_address_to_bytes(const bb_address *a, uint8_t *out, size_t size);
/* Text form: /p2p/<base58>/site/<u64>/component/<u32>/op/<text>. */
BB_API int bb_address_from_text(const char *text, bb_address *out, bb_error *err);
BB_API size_t bb_address_to_text(const bb_address *a, char *out, size_t size);
/* The address /p2p/<peer>: how a peer is reached when nothing more is known. */
BB_API bb_address bb_address_p2p(const bb_peer_id *peer);

/* The first segment of a kind, or NULL. */
BB_API const bb_addr_segment *bb_address_find(const bb_address *a, bb_addr_kind kind);

/* ---- the envelope --------------------------------------------------------------------- */

typedef enum bb_correlation_kind { BB_CORR_NONE = 0, BB_CORR_REQUEST = 1, BB_CORR_RESPONSE = 2 } bb_correlation_kind;

typedef struct bb_slot_fill {
  bb_bytes dest_suffix;
  bb_bytes payload;
  bool trigger_only;
  uint64_t type_hash;
  /* Encoding only, optional: writes the payload (exactly payload.len bytes) straight into
   * the envelope, so a value is copied once rather than encoded and then copied. When set,
   * payload.data is not read. */
  size_t (*write_payload)(const void *ctx, uint8_t *out);
  const void *payload_ctx;
} bb_slot_fill;

typedef struct bb_rtt_report {
  uint64_t next_hop_site_id, chain_id;
  uint32_t hop_index;
  uint64_t srtt_ns, rttvar_ns, sample_count;
} bb_rtt_report;

/* A WireEnvelope. Byte fields point into the decoded buffer (or, for one you build, to
 * memory you own). */
typedef struct bb_envelope {
  bb_bytes *dest_peer_addresses;
  size_t n_dest_peer_addresses;
  bb_slot_fill *fills;
  size_t n_fills;
  bool has_correlation;
  int32_t correlation_kind; /* bb_correlation_kind (other values are kept as received) */
  uint64_t wire_req_id;
  uint64_t remaining_deadline_ns;
  bb_rtt_report *rtt_reports;
  size_t n_rtt_reports;
  bb_bytes src_peer_bytes;
  uint32_t schema_version;
  bb_bytes *src_peer_addresses;
  size_t n_src_peer_addresses;
} bb_envelope;

/* The schema_version this library writes. 2: a data-plane fill's /site/<id> is the id of
 * the wire it travels on (bb_wire_id of the wire's name, bb/artifact.h). 1 (and 0, the
 * field left out) numbered sites by their position in the sender's artifact: the codec
 * still reads those envelopes, nodes refuse them. */
#define BB_ENVELOPE_SCHEMA_VERSION 2
/* The oldest schema_version whose data-plane sites are wire ids. */
#define BB_ENVELOPE_SCHEMA_WIRE_IDS 2

/* Caps on what a peer may send. Versioned by struct_size, which the caller sets to
 * sizeof(bb_envelope_caps): fields its struct_size does not cover (a caller built against
 * an older header) take the defaults; 0 or a struct_size larger than this library knows
 * is BB_ERR_INVALID_ARGUMENT. Zero fields take the defaults in brackets. */
typedef struct bb_envelope_caps {
  size_t struct_size;                /* sizeof(bb_envelope_caps) */
  size_t max_total_bytes;            /* [16 MiB] */
  size_t max_fills;                  /* [64] */
  size_t max_fill_payload_bytes;     /* [16 MiB] */
  size_t max_dest_suffix_bytes;      /* [256] */
  size_t max_addresses;              /* [16]: dest and src peer address lists each */
  size_t max_address_bytes;          /* [512] */
  size_t max_rtt_reports;            /* [64] */
} bb_envelope_caps;

/* Decodes one envelope within caps (NULL: the defaults). On success *out (free with
 * bb_envelope_free) points into data. Every rejection names the field, the cap or the
 * byte offset. */
BB_API int bb_envelope_decode(const uint8_t *data, size_t len, const bb_envelope_caps *caps, const bb_allocator *alloc,
                              bb_envelope **out, bb_error *err);
BB_API void bb_envelope_free(bb_envelope *env, const bb_allocator *alloc);

/* Encodes an envelope (fields in number order, proto3 defaults omitted, the correlation
 * message written when has_correlation). *out is freed with bb_buffer_free(alloc, ...). */
BB_API int bb_envelope_encode(const bb_envelope *env, const bb_allocator *alloc, uint8_t **out, size_t *out_len,
                              bb_error *err);

/* FNV-1a-64 of a carrier's stable type name: SlotFill.type_hash. */
BB_API uint64_t bb_type_hash(const char *type_name);
/* The name of a known carrier type with that hash, or NULL. */
BB_API const char *bb_wire_type_name(uint64_t type_hash);

#ifdef __cplusplus
}
#endif
#endif /* BB_WIRE_H */
