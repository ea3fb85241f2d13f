/* bytesandbrains — who may take part: join tokens (docs/SECURITY.md, "Join tokens").
 *
 * A join token admits one peer id to one room in one role until an expiry. The room's
 * operator signs it with an Ed25519 key; any verifier that trusts that key can check it
 * without asking anyone. The signalling server checks a token when a peer joins; the
 * engine checks it again (bb_node_admit_token in bb/runtime.h), so a signalling server
 * cannot admit a peer into a federation by itself.
 *
 * Layout (all integers little-endian), then base64url as text:
 *
 *   0  4  magic "BBJT"            14 32  operator public key
 *   4  1  version 1               46  1  P, peer id length (1..76)
 *   5  1  role: 1 client,         47  P  peer id (multihash bytes)
 *         2 server, 3 watcher     47+P 1 R, room length (1..128)
 *   6  8  expiry, Unix seconds    48+P R room ([A-Za-z0-9_-])
 *   48+P+R 64  Ed25519 signature over "bytesandbrains join token v1" ‖ 00 ‖ bytes [0, 48+P+R)
 *
 * Verification uses libsodium (crypto_sign_ed25519_verify_detached): nothing here is
 * hand-written cryptography. */
#ifndef BB_JOIN_TOKEN_H
#define BB_JOIN_TOKEN_H

#include "bb/common.h"
#include "bb/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a token lets its holder be. */
typedef enum bb_join_role {
  BB_JOIN_NONE = 0,    /* no valid token (never inside a token) */
  BB_JOIN_CLIENT = 1,  /* a data peer that trains and contributes */
  BB_JOIN_SERVER = 2,  /* a data peer that aggregates */
  BB_JOIN_WATCHER = 3  /* sees presence only: never a member of a round */
} bb_join_role;

/* "none", "client", "server" or "watcher". */
BB_API const char *bb_join_role_name(bb_join_role role);

#define BB_JOIN_KEY_BYTES 32
#define BB_JOIN_SIGNATURE_BYTES 64
#define BB_JOIN_ROOM_MAX 128
/* The longest token: the fixed fields, the longest peer id and room, the signature. */
#define BB_JOIN_TOKEN_MAX_BYTES (48 + BB_PEER_ID_MAX + BB_JOIN_ROOM_MAX + BB_JOIN_SIGNATURE_BYTES)
/* The signed message starts with this domain and a zero byte: no other signed message
 * of the project starts this way. */
#define BB_JOIN_TOKEN_DOMAIN "bytesandbrains join token v1"

/* Who a room admits: its name and the operator keys whose tokens it trusts. */
typedef struct bb_join_policy {
  const char *room;              /* 1..128 of [A-Za-z0-9_-] */
  const uint8_t *operator_keys;  /* n_operator_keys × BB_JOIN_KEY_BYTES */
  size_t n_operator_keys;        /* >= 1 */
} bb_join_policy;

/* Why a token was refused, in the order the checks run. */
typedef enum bb_join_refusal {
  BB_JOIN_ADMITTED = 0,
  BB_JOIN_BAD_LENGTH,    /* P or R out of range, truncated, or bytes after the signature */
  BB_JOIN_BAD_MAGIC,
  BB_JOIN_BAD_VERSION,
  BB_JOIN_BAD_ROLE,
  BB_JOIN_BAD_PEER,      /* the peer id is not exactly one multihash */
  BB_JOIN_OTHER_PEER,    /* a token for another peer than the one presenting it */
  BB_JOIN_BAD_ROOM,      /* a room name outside [A-Za-z0-9_-] */
  BB_JOIN_OTHER_ROOM,    /* a token for another room */
  BB_JOIN_EXPIRED,       /* now is at or after the expiry */
  BB_JOIN_UNTRUSTED,     /* signed by a key the policy does not name */
  BB_JOIN_BAD_SIGNATURE
} bb_join_refusal;

/* A stable token for a refusal ("admitted", "bad_length", ..., "bad_signature"): counter
 * names and logs use it. */
BB_API const char *bb_join_refusal_name(bb_join_refusal refusal);

/* What a verification found. */
typedef struct bb_join_grant {
  bb_join_refusal refusal; /* BB_JOIN_ADMITTED, or the first check that failed */
  bb_join_role role;       /* admitted: the token's role */
  uint64_t expiry_unix_s;  /* admitted: the token's expiry (Unix seconds) */
} bb_join_grant;

/* Checks that `token` (binary, len bytes) admits `peer` under `policy` at now_unix_s (the
 * caller's clock: nothing here reads one): in this order the length, magic, version and
 * role, that the peer id is one multihash equal to `peer`, that the room is well formed
 * and the policy's, now_unix_s < expiry, that the operator key is one the policy trusts,
 * and the signature. Returns 0 with out->role and out->expiry_unix_s; BB_ERR_MALFORMED
 * (a token that is not well formed) or BB_ERR_DENIED (well formed, but not for this
 * peer, room, time or operator, or not signed by it) with out->refusal and err naming the
 * check; BB_ERR_INVALID_ARGUMENT for a missing argument or a policy without a valid room
 * or keys. out may be NULL. */
BB_API int bb_join_token_verify(const bb_join_policy *policy, const bb_peer_id *peer, const uint8_t *token,
                                size_t len, uint64_t now_unix_s, bb_join_grant *out, bb_error *err);

/* Whether a policy is usable: a room of 1..128 of [A-Za-z0-9_-] and at least one key
 * (BB_ERR_INVALID_ARGUMENT naming what is wrong otherwise). */
BB_API int bb_join_policy_check(const bb_join_policy *policy, bb_error *err);

#ifdef __cplusplus
}
#endif
#endif /* BB_JOIN_TOKEN_H */
