/* How SecAgg+ refusals are reported: each reason maps to one error code, and its name
 * leads the message ("(bad_signature) ..."), so a caller can tell every refusal apart. */
#ifndef BBI_PRIVACY_SECAGG_REASON_H
#define BBI_PRIVACY_SECAGG_REASON_H

#include "bb/privacy.h"

/* BB_ERR_MALFORMED for bytes that are not a message, BB_ERR_LIMIT for caps and for a round
 * that ends without a sum, BB_ERR_DENIED for a well-formed message that breaks the protocol. */
int sa_reason_code(bb_secagg_reason reason);

/* Sets *reason and err ("(name) " and the printf-style detail); returns the code. */
int sa_fail(bb_error *err, bb_secagg_reason *reason, bb_secagg_reason why, const char *fmt, ...) BB_PRINTF(4, 5);

#endif
