#include "util/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void bb_strbuf_init(bb_strbuf *b, const bb_allocator *alloc) {
  memset(b, 0, sizeof *b);
  b->alloc = alloc ? alloc : bb_default_allocator();
}

static bool reserve(bb_strbuf *b, size_t extra) {
  if (b->failed) return false;
  if (b->len + extra + 1 <= b->cap) return true;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra + 1) {
    if (cap > SIZE_MAX / 2) {
      b->failed = true;
      return false;
    }
    cap *= 2;
  }
  char *p = b->alloc->realloc(b->data, cap, b->alloc->user_data);
  if (!p) {
    b->failed = true;
    return false;
  }
  b->data = p;
  b->cap = cap;
  return true;
}

void bb_strbuf_append(bb_strbuf *b, const char *s, size_t n) {
  if (!reserve(b, n)) return;
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void bb_strbuf_puts(bb_strbuf *b, const char *s) { bb_strbuf_append(b, s, strlen(s)); }

void bb_strbuf_printf(bb_strbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char small[256];
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->failed = true;
    return;
  }
  if ((size_t)n < sizeof small) {
    bb_strbuf_append(b, small, (size_t)n);
    return;
  }
  if (!reserve(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void bb_strbuf_json_string(bb_strbuf *b, const char *s) {
  if (!s) {
    bb_strbuf_puts(b, "null");
    return;
  }
  bb_strbuf_append(b, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
    case '"': bb_strbuf_puts(b, "\\\""); break;
    case '\\': bb_strbuf_puts(b, "\\\\"); break;
    case '\n': bb_strbuf_puts(b, "\\n"); break;
    case '\r': bb_strbuf_puts(b, "\\r"); break;
    case '\t': bb_strbuf_puts(b, "\\t"); break;
    default:
      if (*p < 0x20) bb_strbuf_printf(b, "\\u%04x", *p);
      else bb_strbuf_append(b, (const char *)p, 1);
    }
  }
  bb_strbuf_append(b, "\"", 1);
}

int bb_strbuf_finish(bb_strbuf *b, char **out, size_t *len) {
  if (!reserve(b, 0)) {
    bb_strbuf_release(b);
    return BB_ERR_NOMEM;
  }
  b->data[b->len] = '\0';
  *out = b->data;
  if (len) *len = b->len;
  b->data = NULL;
  b->len = b->cap = 0;
  return 0;
}

void bb_strbuf_release(bb_strbuf *b) {
  if (b->data) b->alloc->free(b->data, b->alloc->user_data);
  b->data = NULL;
  b->len = b->cap = 0;
}
