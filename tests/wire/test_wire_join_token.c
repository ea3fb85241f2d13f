/* Join tokens (bb/join_token.h): the test vector of docs/SECURITY.md, made by the npm
 * package with WebCrypto, verified here with libsodium; tokens this test signs itself
 * reproduce it byte for byte; and every refusal, in the order the checks run. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bb/join_token.h"
#include "harness.h"
#include "wire/join_tokens.h"
#include "wire/small_order_keys.h"

#define NOW 1700000000ull

static uint8_t vector[BB_JOIN_TOKEN_MAX_BYTES];
static size_t vector_len;
static uint8_t operator_pk[32];
static bb_peer_id vector_peer;

static bb_join_policy vector_policy(void) {
  return (bb_join_policy){.room = BBT_VECTOR_ROOM, .operator_keys = operator_pk, .n_operator_keys = 1};
}

/* Verifies a token of the vector's peer under the vector's policy; returns the code and
 * the refusal. */
static int check(const uint8_t *token, size_t len, uint64_t now, bb_join_refusal *why, bb_error *err) {
  bb_join_policy policy = vector_policy();
  bb_join_grant grant;
  int rc = bb_join_token_verify(&policy, &vector_peer, token, len, now, &grant, err);
  *why = grant.refusal;
  return rc;
}

static void test_vector_verifies(void) {
  bb_join_policy policy = vector_policy();
  bb_join_grant grant;
  bb_error err = {0};
  CHECK_EQ_INT(bb_join_token_verify(&policy, &vector_peer, vector, vector_len, NOW, &grant, &err), 0);
  CHECK_EQ_INT(grant.refusal, BB_JOIN_ADMITTED);
  CHECK_EQ_INT(grant.role, BB_JOIN_CLIENT);
  CHECK(grant.expiry_unix_s == BBT_VECTOR_EXPIRY);
  /* the last second before the expiry still admits; out may be NULL */
  CHECK_EQ_INT(bb_join_token_verify(&policy, &vector_peer, vector, vector_len, BBT_VECTOR_EXPIRY - 1, NULL, &err), 0);
  CHECK_STR(bb_join_role_name(grant.role), "client");
}

/* libsodium from the vector's seeds gives WebCrypto's keys, the same peer id, and,
 * Ed25519 being deterministic, the same signature. */
static void test_vector_reproduced(void) {
  bbt_keys op = bbt_keys_counting(0x00), peer = bbt_keys_counting(0x20);
  CHECK(memcmp(op.pk, operator_pk, 32) == 0);
  bb_peer_id id = bbt_peer_of_key(peer.pk);
  CHECK(bb_peer_id_equal(&id, &vector_peer));
  uint8_t token[BB_JOIN_TOKEN_MAX_BYTES];
  size_t len = bbt_make_token(&op, BB_JOIN_CLIENT, BBT_VECTOR_EXPIRY, &id, BBT_VECTOR_ROOM, token);
  CHECK_EQ_INT(len, vector_len);
  CHECK(len == vector_len && memcmp(token, vector, len) == 0);
}

static void test_roles(void) {
  bbt_keys op = bbt_keys_counting(0x00);
  const int roles[] = {BB_JOIN_CLIENT, BB_JOIN_SERVER, BB_JOIN_WATCHER};
  const char *names[] = {"client", "server", "watcher"};
  for (int i = 0; i < 3; i++) {
    uint8_t token[BB_JOIN_TOKEN_MAX_BYTES];
    size_t len = bbt_make_token(&op, roles[i], NOW + 60, &vector_peer, BBT_VECTOR_ROOM, token);
    bb_join_policy policy = vector_policy();
    bb_join_grant grant;
    CHECK_EQ_INT(bb_join_token_verify(&policy, &vector_peer, token, len, NOW, &grant, NULL), 0);
    CHECK_EQ_INT(grant.role, roles[i]);
    CHECK_STR(bb_join_role_name(grant.role), names[i]);
  }
  CHECK_STR(bb_join_role_name(BB_JOIN_NONE), "none");
}

static bool room_char(uint8_t c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* Flipping any one byte refuses the token, for the reason of the field it falls in. */
static void test_every_byte_corrupted(void) {
  const size_t p = vector_peer.len, r = strlen(BBT_VECTOR_ROOM), body = 48 + p + r;
  CHECK_EQ_INT(body + 64, vector_len);
  for (size_t at = 0; at < vector_len; at++) {
    uint8_t t[BB_JOIN_TOKEN_MAX_BYTES];
    memcpy(t, vector, vector_len);
    t[at] ^= 0x01;
    bb_join_refusal why;
    bb_error err = {0};
    int rc = check(t, vector_len, NOW, &why, &err);
    bb_join_refusal want;
    if (at < 4) want = BB_JOIN_BAD_MAGIC;
    else if (at == 4) want = BB_JOIN_BAD_VERSION;
    else if (at == 5) want = BB_JOIN_BAD_ROLE; /* 1 → 0 */
    else if (at < 14) want = BB_JOIN_BAD_SIGNATURE; /* a later expiry, unsigned */
    else if (at < 46) want = BB_JOIN_UNTRUSTED;
    else if (at == 46 || at == 47 + p) want = BB_JOIN_BAD_LENGTH;
    /* the multihash's digest length no longer matches; any other flip (its code, the
     * key) names another peer */
    else if (at < 47 + p) want = at == 48 ? BB_JOIN_BAD_PEER : BB_JOIN_OTHER_PEER;
    else if (at < body) want = room_char(t[at]) ? BB_JOIN_OTHER_ROOM : BB_JOIN_BAD_ROOM;
    else want = BB_JOIN_BAD_SIGNATURE;
    CHECK_MSG(rc < 0 && why == want, "byte %zu: rc %d, refusal %s, want %s (%s)", at, rc, bb_join_refusal_name(why),
              bb_join_refusal_name(want), err.message);
    CHECK(err.message[0] != 0);
  }
}

static void test_fields_refused(void) {
  bb_join_refusal why;
  bb_error err = {0};
  uint8_t t[BB_JOIN_TOKEN_MAX_BYTES + 1];
  /* role out of range both ways */
  memcpy(t, vector, vector_len);
  t[5] = 4;
  CHECK_EQ_INT(check(t, vector_len, NOW, &why, &err), BB_ERR_MALFORMED);
  CHECK_EQ_INT(why, BB_JOIN_BAD_ROLE);
  CHECK(strstr(err.message, "bad_role") != NULL);
  /* a room character outside [A-Za-z0-9_-] */
  memcpy(t, vector, vector_len);
  t[48 + vector_peer.len] = '/';
  CHECK_EQ_INT(check(t, vector_len, NOW, &why, &err), BB_ERR_MALFORMED);
  CHECK_EQ_INT(why, BB_JOIN_BAD_ROOM);
  /* P of 0 and of 77 */
  memcpy(t, vector, vector_len);
  t[46] = 0;
  CHECK_EQ_INT(check(t, vector_len, NOW, &why, &err), BB_ERR_MALFORMED);
  CHECK_EQ_INT(why, BB_JOIN_BAD_LENGTH);
  t[46] = 77;
  CHECK_EQ_INT(check(t, vector_len, NOW, &why, &err), BB_ERR_MALFORMED);
  CHECK_EQ_INT(why, BB_JOIN_BAD_LENGTH);
  /* R of 0 */
  memcpy(t, vector, vector_len);
  t[47 + vector_peer.len] = 0;
  CHECK_EQ_INT(check(t, vector_len, NOW, &why, &err), BB_ERR_MALFORMED);
  CHECK_EQ_INT(why, BB_JOIN_BAD_LENGTH);
}

static void test_truncated_and_extended(void) {
  for (size_t len = 0; len < vector_len; len++) {
    bb_join_refusal why;
    bb_error err = {0};
    CHECK_EQ_INT(check(vector, len, NOW, &why, &err), BB_ERR_MALFORMED);
    CHECK_MSG(why == BB_JOIN_BAD_LENGTH, "%zu bytes: %s", len, bb_join_refusal_name(why));
  }
  uint8_t t[BB_JOIN_TOKEN_MAX_BYTES + 1];
  memcpy(t, vector, vector_len);
  t[vector_len] = 0;
  bb_join_refusal why;
  CHECK_EQ_INT(check(t, vector_len + 1, NOW, &why, NULL), BB_ERR_MALFORMED);
  CHECK_EQ_INT(why, BB_JOIN_BAD_LENGTH);
}

static void test_denials(void) {
  bb_join_grant grant;
  bb_error err = {0};
  bb_join_policy policy = vector_policy();
  /* presented by another peer */
  bb_peer_id other = bb_peer_id_from_u64(7);
  CHECK_EQ_INT(bb_join_token_verify(&policy, &other, vector, vector_len, NOW, &grant, &err), BB_ERR_DENIED);
  CHECK_EQ_INT(grant.refusal, BB_JOIN_OTHER_PEER);
  CHECK(strstr(err.message, BBT_VECTOR_PEER) != NULL);
  /* joining another room; a peer check comes first */
  policy.room = "federation-2";
  CHECK_EQ_INT(bb_join_token_verify(&policy, &vector_peer, vector, vector_len, NOW, &grant, &err), BB_ERR_DENIED);
  CHECK_EQ_INT(grant.refusal, BB_JOIN_OTHER_ROOM);
  CHECK_EQ_INT(bb_join_token_verify(&policy, &other, vector, vector_len, NOW, &grant, &err), BB_ERR_DENIED);
  CHECK_EQ_INT(grant.refusal, BB_JOIN_OTHER_PEER);
  /* a room that is a prefix of the token's */
  policy.room = "federation";
  CHECK_EQ_INT(bb_join_token_verify(&policy, &vector_peer, vector, vector_len, NOW, &grant, &err), BB_ERR_DENIED);
  CHECK_EQ_INT(grant.refusal, BB_JOIN_OTHER_ROOM);
  /* at and after the expiry */
  policy = vector_policy();
  CHECK_EQ_INT(bb_join_token_verify(&policy, &vector_peer, vector, vector_len, BBT_VECTOR_EXPIRY, &grant, &err),
               BB_ERR_DENIED);
  CHECK_EQ_INT(grant.refusal, BB_JOIN_EXPIRED);
  CHECK_EQ_INT(bb_join_token_verify(&policy, &vector_peer, vector, vector_len, UINT64_MAX, &grant, &err),
               BB_ERR_DENIED);
  CHECK_EQ_INT(grant.refusal, BB_JOIN_EXPIRED);
  /* a room that trusts other operators only, then one of several */
  bbt_keys a = bbt_keys_counting(0x40), b = bbt_keys_counting(0x60);
  uint8_t keys[3 * 32];
  memcpy(keys, a.pk, 32);
  memcpy(keys + 32, b.pk, 32);
  policy.operator_keys = keys;
  policy.n_operator_keys = 2;
  CHECK_EQ_INT(bb_join_token_verify(&policy, &vector_peer, vector, vector_len, NOW, &grant, &err), BB_ERR_DENIED);
  CHECK_EQ_INT(grant.refusal, BB_JOIN_UNTRUSTED);
  memcpy(keys + 64, operator_pk, 32);
  policy.n_operator_keys = 3;
  CHECK_EQ_INT(bb_join_token_verify(&policy, &vector_peer, vector, vector_len, NOW, &grant, &err), 0);
  /* a token naming a trusted key but signed by another: the signature refuses it */
  uint8_t t[BB_JOIN_TOKEN_MAX_BYTES];
  size_t len = bbt_make_token(&a, BB_JOIN_CLIENT, BBT_VECTOR_EXPIRY, &vector_peer, BBT_VECTOR_ROOM, t);
  memcpy(t + 14, operator_pk, 32);
  policy = vector_policy();
  CHECK_EQ_INT(bb_join_token_verify(&policy, &vector_peer, t, len, NOW, &grant, &err), BB_ERR_DENIED);
  CHECK_EQ_INT(grant.refusal, BB_JOIN_BAD_SIGNATURE);
  /* a token signed over the body without the domain (a signature from another protocol) */
  crypto_sign_ed25519_detached(t + len - 64, NULL, vector, len - 64, bbt_keys_counting(0x00).sk);
  memcpy(t, vector, len - 64);
  CHECK_EQ_INT(bb_join_token_verify(&policy, &vector_peer, t, len, NOW, &grant, &err), BB_ERR_DENIED);
  CHECK_EQ_INT(grant.refusal, BB_JOIN_BAD_SIGNATURE);
}

static void test_bad_arguments(void) {
  bb_error err = {0};
  bb_join_policy policy = vector_policy();
  CHECK_EQ_INT(bb_join_token_verify(NULL, &vector_peer, vector, vector_len, NOW, NULL, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_join_token_verify(&policy, NULL, vector, vector_len, NOW, NULL, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_join_token_verify(&policy, &vector_peer, NULL, 5, NOW, NULL, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_join_token_verify(&policy, &vector_peer, NULL, 0, NOW, NULL, &err), BB_ERR_MALFORMED);
  const char *bad_rooms[] = {"", "a b", "room/1", "é"};
  for (size_t i = 0; i < 4; i++) {
    policy.room = bad_rooms[i];
    CHECK_EQ_INT(bb_join_policy_check(&policy, &err), BB_ERR_INVALID_ARGUMENT);
  }
  char long_room[130];
  memset(long_room, 'r', 129);
  long_room[129] = 0;
  policy.room = long_room;
  CHECK_EQ_INT(bb_join_policy_check(&policy, &err), BB_ERR_INVALID_ARGUMENT);
  long_room[128] = 0;
  CHECK_EQ_INT(bb_join_policy_check(&policy, &err), 0);
  policy = vector_policy();
  policy.n_operator_keys = 0;
  CHECK_EQ_INT(bb_join_policy_check(&policy, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "no operator key") != NULL);
  CHECK_STR(bb_join_refusal_name(BB_JOIN_BAD_SIGNATURE), "bad_signature");
  CHECK_STR(bb_join_refusal_name((bb_join_refusal)99), "unknown");
  CHECK_STR(bb_strerror(BB_ERR_DENIED), "not admitted");
}

/* A long token: a SHA-512 multihash peer id (66 bytes) and the longest room. */
static void test_long(void) {
  bbt_keys op = bbt_keys_counting(0x00);
  bb_peer_id p;
  uint8_t mh[66] = {0x13, 64};
  for (int i = 2; i < 66; i++) mh[i] = (uint8_t)i;
  CHECK_EQ_INT(bb_peer_id_from_bytes(mh, 66, &p, NULL), 0);
  char room[129];
  memset(room, 'z', 128);
  room[128] = 0;
  uint8_t t[BB_JOIN_TOKEN_MAX_BYTES];
  size_t len = bbt_make_token(&op, BB_JOIN_SERVER, NOW + 1, &p, room, t);
  CHECK_EQ_INT(len, 48 + 66 + 128 + 64);
  bb_join_policy policy = {.room = room, .operator_keys = op.pk, .n_operator_keys = 1};
  bb_join_grant grant;
  CHECK_EQ_INT(bb_join_token_verify(&policy, &p, t, len, NOW, &grant, NULL), 0);
  CHECK_EQ_INT(grant.role, BB_JOIN_SERVER);
}

/* An operator key of small order (or a non-canonical encoding of one) admits nobody: its
 * token's signature satisfies the cofactorless equation (a forgery WebCrypto accepts), and
 * libsodium still refuses it, under a policy that trusts that very key. */
static void test_small_order_operator_keys(void) {
  for (int i = 0; i < BBT_SMALL_ORDER_COUNT; i++) {
    uint8_t key[32], token[BB_JOIN_TOKEN_MAX_BYTES];
    CHECK(bbt_unhex(BBT_SMALL_ORDER[i].key, key, sizeof key) == 32);
    const size_t body = bbt_token_body(key, BB_JOIN_CLIENT, BBT_VECTOR_EXPIRY, &vector_peer, BBT_VECTOR_ROOM, token);
    CHECK(bbt_unhex(BBT_SMALL_ORDER[i].forged_signature, token + body, 64) == 64);
    bb_join_policy policy = {.room = BBT_VECTOR_ROOM, .operator_keys = key, .n_operator_keys = 1};
    bb_join_grant grant;
    bb_error err = {0};
    CHECK_EQ_INT(bb_join_token_verify(&policy, &vector_peer, token, body + 64, NOW, &grant, &err), BB_ERR_DENIED);
    CHECK_EQ_INT(grant.refusal, BB_JOIN_BAD_SIGNATURE);
    CHECK(strstr(err.message, "bad_signature") != NULL);
  }
  /* the control: the same layout signed by a real operator key verifies */
  bbt_keys op = bbt_keys_counting(0x00);
  uint8_t token[BB_JOIN_TOKEN_MAX_BYTES];
  const size_t len = bbt_make_token(&op, BB_JOIN_CLIENT, BBT_VECTOR_EXPIRY, &vector_peer, BBT_VECTOR_ROOM, token);
  bb_join_policy policy = {.room = BBT_VECTOR_ROOM, .operator_keys = op.pk, .n_operator_keys = 1};
  CHECK_EQ_INT(bb_join_token_verify(&policy, &vector_peer, token, len, NOW, NULL, NULL), 0);
}

int main(void) {
  vector_len = bbt_unhex(BBT_VECTOR_TOKEN, vector, sizeof vector);
  CHECK(bbt_unhex(BBT_VECTOR_OPERATOR_PK, operator_pk, 32) == 32);
  CHECK_EQ_INT(bb_peer_id_from_text(BBT_VECTOR_PEER, &vector_peer, NULL), 0);
  RUN(test_vector_verifies);
  RUN(test_vector_reproduced);
  RUN(test_roles);
  RUN(test_every_byte_corrupted);
  RUN(test_fields_refused);
  RUN(test_truncated_and_extended);
  RUN(test_denials);
  RUN(test_bad_arguments);
  RUN(test_long);
  RUN(test_small_order_operator_keys);
  return bb_test_finish();
}
