/* bytesandbrains — shared vocabulary of every layer: error codes, the error record,
 * the allocator and byte spans. */
#ifndef BB_COMMON_H
#define BB_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BB_VERSION_STRING "0.1.0"

/* Marks the library's interface: every function (and data object) a public header
 * declares. The libraries are compiled with hidden visibility, so a shared object made
 * from them exports these names and nothing else. Compilers without the attribute get
 * nothing (a Windows DLL build would define it as __declspec(dllexport/dllimport)). */
#if defined(__GNUC__) || defined(__clang__)
#define BB_API __attribute__((visibility("default")))
#else
#define BB_API
#endif

/* Error codes. 0 is success; every failure is negative. Codes at or below
 * BB_ERR_FATAL leave the object they came from unusable (see bb_err_is_fatal). */
enum {
  BB_OK = 0,
  BB_ERR_INVALID_ARGUMENT = -1, /* the caller broke a documented precondition */
  BB_ERR_MALFORMED = -2,        /* input bytes are not what they claim to be */
  BB_ERR_UNSUPPORTED = -3,      /* well-formed, but not something this build handles */
  BB_ERR_NOT_FOUND = -4,        /* a named thing does not exist */
  BB_ERR_EXISTS = -5,           /* a named thing already exists */
  BB_ERR_LIMIT = -6,            /* a size, depth or count cap was exceeded */
  BB_ERR_IO = -7,               /* reading or writing a file failed */
  BB_ERR_TYPE = -8,             /* a value has the wrong type or shape */
  BB_ERR_DENIED = -9,           /* well formed, but its holder is not admitted (a join token
                                   for another peer, room or operator, expired, or forged) */
  BB_ERR_FATAL = -500,
  BB_ERR_NOMEM = -501 /* the allocator returned NULL */
};

/* Human-readable name of an error code ("malformed input", ...). Never NULL. */
BB_API const char *bb_strerror(int code);

/* Nonzero when the code leaves the object that returned it unusable. */
BB_API int bb_err_is_fatal(int code);

/* Where a failing call explains itself. Callers own it (usually on the stack);
 * functions that take a `bb_error *` accept NULL when the caller only wants the code. */
#define BB_ERROR_MESSAGE_MAX 512
typedef struct bb_error {
  int code;
  char message[BB_ERROR_MESSAGE_MAX];
} bb_error;

/* Clears an error record to BB_OK with an empty message. */
BB_API void bb_error_clear(bb_error *err);

/* printf-style checking of a function's format argument, where the compiler has it. */
#if defined(__GNUC__) || defined(__clang__)
#define BB_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define BB_PRINTF(fmt, args)
#endif

/* Records code and a printf-style message in err (when err is not NULL; a message longer
 * than BB_ERROR_MESSAGE_MAX - 1 bytes is cut); returns code, so a failing function (a
 * component's callback too) can write `return bb_error_set(err, BB_ERR_X, "...")`. */
BB_API int bb_error_set(bb_error *err, int code, const char *fmt, ...) BB_PRINTF(3, 4);

/* Prefixes err's message with printf-style context ("while decoding X: ", cut to fit)
 * and returns its code; BB_ERR_INVALID_ARGUMENT for a NULL err. */
BB_API int bb_error_prefix(bb_error *err, const char *fmt, ...) BB_PRINTF(2, 3);

/* Memory comes from here. Every object that allocates takes one at creation;
 * NULL means the C library's malloc/realloc/free. */
typedef struct bb_allocator {
  void *(*malloc)(size_t size, void *user_data);
  void *(*realloc)(void *ptr, size_t size, void *user_data);
  void (*free)(void *ptr, void *user_data);
  void *user_data;
} bb_allocator;

/* The allocator that wraps malloc/realloc/free. */
BB_API const bb_allocator *bb_default_allocator(void);

/* A span of bytes. Who owns `data` is stated where a bb_bytes is handed out. */
typedef struct bb_bytes {
  uint8_t *data;
  size_t len;
} bb_bytes;

/* Frees a buffer that a bb_* function returned to the caller, with the same
 * allocator it was made with (NULL for the default one). */
BB_API void bb_buffer_free(const bb_allocator *alloc, void *data);

#ifdef __cplusplus
}
#endif
#endif /* BB_COMMON_H */
