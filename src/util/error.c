#include "bb/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *bb_strerror(int code) {
  switch (code) {
  case BB_OK: return "success";
  case BB_ERR_INVALID_ARGUMENT: return "invalid argument";
  case BB_ERR_MALFORMED: return "malformed input";
  case BB_ERR_UNSUPPORTED: return "unsupported";
  case BB_ERR_NOT_FOUND: return "not found";
  case BB_ERR_EXISTS: return "already exists";
  case BB_ERR_LIMIT: return "limit exceeded";
  case BB_ERR_IO: return "input/output error";
  case BB_ERR_TYPE: return "type mismatch";
  case BB_ERR_DENIED: return "not admitted";
  case BB_ERR_NOMEM: return "out of memory";
  default: return code < 0 ? "unknown error" : "not an error code";
  }
}

int bb_err_is_fatal(int code) { return code <= BB_ERR_FATAL; }

void bb_error_clear(bb_error *err) {
  if (!err) return;
  err->code = BB_OK;
  err->message[0] = '\0';
}

int bb_error_set(bb_error *err, int code, const char *fmt, ...) {
  if (!err) return code;
  err->code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
  return code;
}

int bb_error_prefix(bb_error *err, const char *fmt, ...) {
  if (!err) return BB_ERR_INVALID_ARGUMENT;
  char prefix[BB_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  if (n < 0) return err->code;
  /* prefix + message, cut to fit */
  size_t plen = strlen(prefix), mlen = strlen(err->message);
  if (plen > BB_ERROR_MESSAGE_MAX - 1) plen = BB_ERROR_MESSAGE_MAX - 1;
  if (mlen > BB_ERROR_MESSAGE_MAX - 1 - plen) mlen = BB_ERROR_MESSAGE_MAX - 1 - plen;
  memmove(err->message + plen, err->message, mlen);
  memcpy(err->message, prefix, plen);
  err->message[plen + mlen] = '\0';
  return err->code;
}

static void *std_malloc(size_t size, void *ud) { (void)ud; return malloc(size); }
static void *std_realloc(void *p, size_t size, void *ud) { (void)ud; return realloc(p, size); }
static void std_free(void *p, void *ud) { (void)ud; free(p); }

static const bb_allocator default_allocator = {std_malloc, std_realloc, std_free, NULL};

const bb_allocator *bb_default_allocator(void) { return &default_allocator; }

void bb_buffer_free(const bb_allocator *alloc, void *data) {
  if (!data) return;
  if (!alloc) alloc = &default_allocator;
  alloc->free(data, alloc->user_data);
}
