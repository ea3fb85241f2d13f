/* Join tokens: parsing the BBJT v1 layout (bb/join_token.h) and checking one against a
 * room's policy. The checks run in a fixed order so that every verifier (this one, the
 * signalling server's) refuses the same token for the same reason; the signature comes
 * last, so a token for the wrong peer or room costs no curve arithmetic. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* libsodium: the native library, or for bb.wasm the subset of its sources that Ed25519
 * verification needs. Verification has one implementation (ref10, no CPU dispatch) and
 * uses no randomness, so it needs no sodium_init(). */
#include <sodium/crypto_sign_ed25519.h>

#include "bb/join_token.h"
#include "bb/bytes.h"
#include "bb/common.h"

#define MAGIC "BBJT"
#define VERSION 1
#define AT_VERSION 4
#define AT_ROLE 5
#define AT_EXPIRY 6
#define AT_KEY 14
#define AT_PEER_LEN 46
#define FIXED_BYTES 47 /* up to and with the peer id length */
#define DOMAIN_BYTES (sizeof BB_JOIN_TOKEN_DOMAIN - 1)

const char *bb_join_role_name(bb_join_role role) {
  switch (role) {
  case BB_JOIN_CLIENT: return "client";
  case BB_JOIN_SERVER: return "server";
  case BB_JOIN_WATCHER: return "watcher";
  default: return "none";
  }
}

const char *bb_join_refusal_name(bb_join_refusal refusal) {
  static const char *const NAMES[] = {"admitted",  "bad_length", "bad_magic",  "bad_version",
                                      "bad_role",  "bad_peer",   "other_peer", "bad_room",
                                      "other_room", "expired",   "untrusted",  "bad_signature"};
  return (size_t)refusal < sizeof NAMES / sizeof NAMES[0] ? NAMES[refusal] : "unknown";
}

static bool room_char(uint8_t c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

static bool room_name(const uint8_t *s, size_t len) {
  if (len < 1 || len > BB_JOIN_ROOM_MAX) return false;
  for (size_t i = 0; i < len; i++)
    if (!room_char(s[i])) return false;
  return true;
}

int bb_join_policy_check(const bb_join_policy *policy, bb_error *err) {
  if (!policy || !policy->room)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "join policy: a room is required");
  if (!room_name((const uint8_t *)policy->room, strlen(policy->room)))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "join policy: room `%.*s` is not 1..%d of [A-Za-z0-9_-]",
                        BB_JOIN_ROOM_MAX + 1, policy->room, BB_JOIN_ROOM_MAX);
  if (!policy->operator_keys || !policy->n_operator_keys)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "join policy: room %s trusts no operator key", policy->room);
  return 0;
}

static int refuse(bb_join_grant *out, bb_join_refusal why, bb_error *err, const char *fmt, ...) BB_PRINTF(4, 5);

static int refuse(bb_join_grant *out, bb_join_refusal why, bb_error *err, const char *fmt, ...) {
  out->refusal = why;
  /* a token that is not well formed is malformed; a well-formed one for someone else,
   * another room, past its time or from an unknown or forged signer is denied */
  const bool malformed = why == BB_JOIN_BAD_LENGTH || why == BB_JOIN_BAD_MAGIC || why == BB_JOIN_BAD_VERSION ||
                         why == BB_JOIN_BAD_ROLE || why == BB_JOIN_BAD_PEER || why == BB_JOIN_BAD_ROOM;
  const int code = malformed ? BB_ERR_MALFORMED : BB_ERR_DENIED;
  if (!err) return code;
  va_list ap;
  va_start(ap, fmt);
  char msg[BB_ERROR_MESSAGE_MAX];
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return bb_error_set(err, code, "join token refused (%s): %s", bb_join_refusal_name(why), msg);
}

int bb_join_token_verify(const bb_join_policy *policy, const bb_peer_id *peer, const uint8_t *token, size_t len,
                         uint64_t now_unix_s, bb_join_grant *out, bb_error *err) {
  bb_join_grant scratch;
  if (!out) out = &scratch;
  memset(out, 0, sizeof *out);
  int rc = bb_join_policy_check(policy, err);
  if (rc) return rc;
  if (!peer || (!token && len))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "join token: a peer and the token's bytes are required");

  /* the length: exactly the fields P and R announce, and the signature */
  if (len < FIXED_BYTES)
    return refuse(out, BB_JOIN_BAD_LENGTH, err, "%zu bytes, shorter than the %d fixed ones", len, FIXED_BYTES);
  const size_t p_len = token[AT_PEER_LEN];
  if (p_len < 1 || p_len > BB_PEER_ID_MAX)
    return refuse(out, BB_JOIN_BAD_LENGTH, err, "a peer id of %zu bytes (1..%d)", p_len, BB_PEER_ID_MAX);
  const size_t at_room_len = FIXED_BYTES + p_len;
  if (len <= at_room_len)
    return refuse(out, BB_JOIN_BAD_LENGTH, err, "%zu bytes end before the room length at byte %zu", len, at_room_len);
  const size_t r_len = token[at_room_len], at_room = at_room_len + 1, body = at_room + r_len;
  if (r_len < 1 || r_len > BB_JOIN_ROOM_MAX)
    return refuse(out, BB_JOIN_BAD_LENGTH, err, "a room of %zu bytes (1..%d)", r_len, BB_JOIN_ROOM_MAX);
  if (len != body + BB_JOIN_SIGNATURE_BYTES)
    return refuse(out, BB_JOIN_BAD_LENGTH, err, "%zu bytes where a %zu-byte peer id and a %zu-byte room make %zu", len,
                  p_len, r_len, body + BB_JOIN_SIGNATURE_BYTES);

  /* the fixed fields */
  if (memcmp(token, MAGIC, 4) != 0) return refuse(out, BB_JOIN_BAD_MAGIC, err, "the first 4 bytes are not \"BBJT\"");
  if (token[AT_VERSION] != VERSION)
    return refuse(out, BB_JOIN_BAD_VERSION, err, "version %u (this verifier reads %d)", token[AT_VERSION], VERSION);
  const uint8_t role = token[AT_ROLE];
  if (role < BB_JOIN_CLIENT || role > BB_JOIN_WATCHER)
    return refuse(out, BB_JOIN_BAD_ROLE, err, "role %u (1 client, 2 server, 3 watcher)", role);

  /* who and where */
  bb_peer_id holder;
  char want[128], got[128];
  if (bb_peer_id_from_bytes(token + FIXED_BYTES, p_len, &holder, NULL))
    return refuse(out, BB_JOIN_BAD_PEER, err, "its %zu peer id bytes are not one multihash", p_len);
  if (!bb_peer_id_equal(&holder, peer)) {
    bb_peer_id_to_text(&holder, got, sizeof got);
    bb_peer_id_to_text(peer, want, sizeof want);
    return refuse(out, BB_JOIN_OTHER_PEER, err, "it is for peer %s, not %s", got, want);
  }
  const uint8_t *room = token + at_room;
  if (!room_name(room, r_len)) return refuse(out, BB_JOIN_BAD_ROOM, err, "its room is not of [A-Za-z0-9_-]");
  if (r_len != strlen(policy->room) || memcmp(room, policy->room, r_len) != 0)
    return refuse(out, BB_JOIN_OTHER_ROOM, err, "it is for room %.*s, not %s", (int)r_len, (const char *)room,
                  policy->room);

  /* when, and by whom */
  const uint64_t expiry = bb_le_get_u64(token + AT_EXPIRY);
  if (now_unix_s >= expiry)
    return refuse(out, BB_JOIN_EXPIRED, err, "it expired at Unix second %llu (now %llu)", (unsigned long long)expiry,
                  (unsigned long long)now_unix_s);
  const uint8_t *key = token + AT_KEY;
  size_t k = 0;
  while (k < policy->n_operator_keys && memcmp(policy->operator_keys + k * BB_JOIN_KEY_BYTES, key, BB_JOIN_KEY_BYTES))
    k++;
  if (k == policy->n_operator_keys)
    return refuse(out, BB_JOIN_UNTRUSTED, err, "it is signed by a key that is not an operator of room %s",
                  policy->room);

  /* the signature: over the domain, a zero byte and the token up to the signature */
  uint8_t msg[DOMAIN_BYTES + 1 + BB_JOIN_TOKEN_MAX_BYTES];
  memcpy(msg, BB_JOIN_TOKEN_DOMAIN, DOMAIN_BYTES);
  msg[DOMAIN_BYTES] = 0;
  memcpy(msg + DOMAIN_BYTES + 1, token, body);
  if (crypto_sign_ed25519_verify_detached(token + body, msg, DOMAIN_BYTES + 1 + body, key) != 0)
    return refuse(out, BB_JOIN_BAD_SIGNATURE, err, "the operator's Ed25519 signature does not verify");

  out->role = (bb_join_role)role;
  out->expiry_unix_s = expiry;
  return 0;
}
