/* Names of SecAgg+ stages and reasons, and the one way a refusal is reported. */
#include "privacy/secagg_reason.h"

#include <stdarg.h>
#include <stdio.h>

const char *bb_secagg_stage_name(bb_secagg_stage stage) {
  static const char *const NAMES[] = {"setup", "advertise_keys", "share_keys", "masked_input",
                                      "unmask", "done",           "aborted"};
  return (size_t)stage < sizeof NAMES / sizeof NAMES[0] ? NAMES[stage] : "unknown";
}

const char *bb_secagg_reason_name(bb_secagg_reason reason) {
  static const char *const NAMES[] = {
      "ok",           "truncated",        "bad_magic",          "bad_version",     "bad_type",
      "bad_length",   "over_cap",         "bad_value",          "bad_params",      "weak_params",
      "other_round",  "wrong_stage",      "wrong_sender",       "not_participant", "bad_signature",
      "bad_key",      "not_neighbour",    "bad_ciphertext",     "too_few_neighbours", "both_shares",
      "too_few_clients", "below_threshold", "bad_shares",       "deadline",        "server_abort"};
  return (size_t)reason < sizeof NAMES / sizeof NAMES[0] ? NAMES[reason] : "unknown";
}

int sa_reason_code(bb_secagg_reason reason) {
  switch (reason) {
  case BB_SECAGG_OK: return BB_OK;
  case BB_SECAGG_TRUNCATED:
  case BB_SECAGG_BAD_MAGIC:
  case BB_SECAGG_BAD_VERSION:
  case BB_SECAGG_BAD_TYPE:
  case BB_SECAGG_BAD_LENGTH:
  case BB_SECAGG_BAD_VALUE:
  case BB_SECAGG_BAD_PARAMS: return BB_ERR_MALFORMED;
  case BB_SECAGG_OVER_CAP:
  case BB_SECAGG_TOO_FEW_CLIENTS:
  case BB_SECAGG_BELOW_THRESHOLD:
  case BB_SECAGG_DEADLINE:
  case BB_SECAGG_SERVER_ABORT: return BB_ERR_LIMIT;
  default: return BB_ERR_DENIED;
  }
}

int sa_fail(bb_error *err, bb_secagg_reason *reason, bb_secagg_reason why, const char *fmt, ...) {
  if (reason) *reason = why;
  const int code = sa_reason_code(why);
  if (!err) return code;
  char detail[BB_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  return bb_error_set(err, code, "(%s) %s", bb_secagg_reason_name(why), detail);
}
