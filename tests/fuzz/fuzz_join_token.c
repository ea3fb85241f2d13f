/* libFuzzer target: arbitrary bytes as a join token, presented by the peer it names and
 * checked against a room that trusts the key it names, so that inputs reach every check
 * up to the signature. The first 8 bytes are the verifier's clock. Whatever is admitted
 * grants a role for a time after now, and stops verifying once its signature changes. */
#include <stdlib.h>
#include <string.h>

#include "bb/join_token.h"
#include "bb/bytes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 8) return 0;
  const uint64_t now = bb_le_get_u64(data);
  const uint8_t *token = data + 8;
  const size_t len = size - 8;
  /* the peer the token names, when it names one; else some other peer */
  bb_peer_id peer = bb_peer_id_from_u64(1);
  if (len > 47 && len >= 47 + (size_t)token[46]) bb_peer_id_from_bytes(token + 47, token[46], &peer, NULL);
  uint8_t key[BB_JOIN_KEY_BYTES] = {0};
  if (len >= 46) memcpy(key, token + 14, sizeof key);
  const bb_join_policy policy = {.room = "federation-1", .operator_keys = key, .n_operator_keys = 1};
  bb_join_grant grant;
  bb_error err;
  int rc = bb_join_token_verify(&policy, &peer, token, len, now, &grant, &err);
  if (rc) {
    if (!err.message[0] || grant.refusal == BB_JOIN_ADMITTED || (rc != BB_ERR_MALFORMED && rc != BB_ERR_DENIED))
      abort();
    return 0;
  }
  if (grant.refusal != BB_JOIN_ADMITTED || grant.role < BB_JOIN_CLIENT || grant.role > BB_JOIN_WATCHER ||
      grant.expiry_unix_s <= now || len > BB_JOIN_TOKEN_MAX_BYTES)
    abort();
  uint8_t forged[BB_JOIN_TOKEN_MAX_BYTES];
  memcpy(forged, token, len);
  forged[len - 1] ^= 0x80;
  if (bb_join_token_verify(&policy, &peer, forged, len, now, &grant, &err) != BB_ERR_DENIED ||
      grant.refusal != BB_JOIN_BAD_SIGNATURE)
    abort();
  return 0;
}
