/* A growable, NUL-terminated text buffer for writers of reports and JSON. Allocation
 * failure is sticky: later appends do nothing and bbi_strbuf_finish reports it. */
#ifndef BBI_UTIL_STRBUF_H
#define BBI_UTIL_STRBUF_H

#include <stdbool.h>

#include "bb/common.h"

typedef struct bbi_strbuf {
  const bb_allocator *alloc;
  char *data;
  size_t len, cap;
  bool failed;
} bbi_strbuf;

void bbi_strbuf_init(bbi_strbuf *b, const bb_allocator *alloc);
void bbi_strbuf_append(bbi_strbuf *b, const char *s, size_t n);
void bbi_strbuf_puts(bbi_strbuf *b, const char *s);
void bbi_strbuf_printf(bbi_strbuf *b, const char *fmt, ...) BB_PRINTF(2, 3);
/* Appends s as a JSON string literal (quotes included); NULL appends null. */
void bbi_strbuf_json_string(bbi_strbuf *b, const char *s);
/* Hands the text to the caller (*out, *len); returns BB_ERR_NOMEM when an append failed,
 * in which case nothing is handed out. */
int bbi_strbuf_finish(bbi_strbuf *b, char **out, size_t *len);
void bbi_strbuf_release(bbi_strbuf *b);

#endif
