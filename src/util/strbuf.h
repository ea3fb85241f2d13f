/* A growable, NUL-terminated text buffer for writers of reports and JSON. Allocation
 * failure is sticky: later appends do nothing and bb_strbuf_finish reports it. */
#ifndef BB_UTIL_STRBUF_H
#define BB_UTIL_STRBUF_H

#include <stdbool.h>

#include "bb/common.h"

typedef struct bb_strbuf {
  const bb_allocator *alloc;
  char *data;
  size_t len, cap;
  bool failed;
} bb_strbuf;

void bb_strbuf_init(bb_strbuf *b, const bb_allocator *alloc);
void bb_strbuf_append(bb_strbuf *b, const char *s, size_t n);
void bb_strbuf_puts(bb_strbuf *b, const char *s);
void bb_strbuf_printf(bb_strbuf *b, const char *fmt, ...) BB_PRINTF(2, 3);
/* Appends s as a JSON string literal (quotes included); NULL appends null. */
void bb_strbuf_json_string(bb_strbuf *b, const char *s);
/* Hands the text to the caller (*out, *len); returns BB_ERR_NOMEM when an append failed,
 * in which case nothing is handed out. */
int bb_strbuf_finish(bb_strbuf *b, char **out, size_t *len);
void bb_strbuf_release(bb_strbuf *b);

#endif
