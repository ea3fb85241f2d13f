#include "util/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void bbi_strbuf_init(bbi_strbuf *b, const bb_allocator *alloc) {
  memset(b, 0, sizeof *b);
  b->alloc = alloc ? alloc : bb_default_allocator();
}

static bool reserve(bbi_strbuf *b, size_t extra) {
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

void bbi_strbuf_append(bbi_strbuf *b, const char *s, size_t n) {
  if (!reserve(b, n)) return;
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void bbi_strbuf_puts(bbi_strbuf *b, const char *s) { bbi_strbuf_append(b, s, strlen(s)); }

void bbi_strbuf_printf(bbi_strbuf *b, const char *fmt, ...) {
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
    bbi_strbuf_append(b, small, (size_t)n);
    return;
  }
  if (!reserve(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void bbi_strbuf_json_string(bbi_strbuf *b, const char *s) {
  if (!s) {
    bbi_strbuf_puts(b, "null");
    return;
  }
  bbi_strbuf_append(b, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
    case '"': bbi_strbuf_puts(b, "\\\""); break;
    case '\\': bbi_strbuf_puts(b, "\\\\"); break;
    case '\n': bbi_strbuf_puts(b, "\\n"); break;
    case '\r': bbi_strbuf_puts(b, "\\r"); break;
    case '\t': bbi_strbuf_puts(b, "\\t"); break;
    default:
      if (*p < 0x20) bbi_strbuf_printf(b, "\\u%04x", *p);
      else bbi_strbuf_append(b, (const char *)p, 1);
    }
  }
  bbi_strbuf_append(b, "\"", 1);
}

int bbi_strbuf_finish(bbi_strbuf *b, char **out, size_t *len) {
  if (!reserve(b, 0)) {
    bbi_strbuf_release(b);
    return BB_ERR_NOMEM;
  }
  b->data[b->len] = '\0';
  *out = b->data;
  if (len) *len = b->len;
  b->data = NULL;
  b->len = b->cap = 0;
  return 0;
}

void bbi_strbuf_release(bbi_strbuf *b) {
  if (b->data) b->alloc->free(b->data, b->alloc->user_data);
  b->data = NULL;
  b->len = b->cap = 0;
}
