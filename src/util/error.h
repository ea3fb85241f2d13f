/* Filling bb_error records. */
#ifndef BB_UTIL_ERROR_H
#define BB_UTIL_ERROR_H

#include "bb/common.h"

#if defined(__GNUC__) || defined(__clang__)
#define BB_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define BB_PRINTF(fmt, args)
#endif

/* Records code and a printf-style message in err (when err is not NULL); returns code so
 * callers can write `return bb_error_set(err, BB_ERR_X, "...")`. */
int bb_error_set(bb_error *err, int code, const char *fmt, ...) BB_PRINTF(3, 4);

/* Prefixes err's message with printf-style context ("while decoding X: ") and returns
 * its code. */
int bb_error_prefix(bb_error *err, const char *fmt, ...) BB_PRINTF(2, 3);

#endif
