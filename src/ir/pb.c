#include "ir/pb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/common.h"

/* ---- wire primitives ------------------------------------------------------------- */

/* Reads a varint at *pos (< end). Returns 0, or 1 when truncated, 2 when over 10 bytes. */
static int read_varint(const uint8_t *d, size_t *pos, size_t end, uint64_t *out) {
  uint64_t v = 0;
  for (unsigned i = 0; i < 10; i++) {
    if (*pos >= end) return 1;
    uint8_t b = d[(*pos)++];
    v |= (uint64_t)(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      *out = v;
      return 0;
    }
  }
  return 2;
}

static bool valid_utf8_no_nul(const uint8_t *s, size_t n, size_t *bad) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    size_t extra;
    uint32_t cp;
    if (c == 0) { *bad = i; return false; }
    if (c < 0x80) { i++; continue; }
    if ((c & 0xe0) == 0xc0) { extra = 1; cp = c & 0x1f; }
    else if ((c & 0xf0) == 0xe0) { extra = 2; cp = c & 0x0f; }
    else if ((c & 0xf8) == 0xf0) { extra = 3; cp = c & 0x07; }
    else { *bad = i; return false; }
    if (n - i <= extra) { *bad = i; return false; }
    for (size_t k = 1; k <= extra; k++) {
      if ((s[i + k] & 0xc0) != 0x80) { *bad = i; return false; }
      cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    /* reject overlong forms, surrogates and values past U+10FFFF */
    if ((extra == 1 && cp < 0x80) || (extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000) ||
        cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      *bad = i;
      return false;
    }
    i += extra + 1;
  }
  return true;
}

/* ---- structural scan -------------------------------------------------------------- */

#define BBI_PB_PATH_MAX 384

typedef struct scan_ctx {
  const uint8_t *data;
  uint32_t max_depth;
  bb_error *err;
  char path[BBI_PB_PATH_MAX];
} scan_ctx;

static const char *short_name(const ProtobufCMessageDescriptor *d) {
  return d->short_name ? d->short_name : d->name;
}

static const char *wire_type_name(unsigned wt) {
  static const char *names[] = {"varint", "64-bit", "length-delimited", "start-group",
                                "end-group", "32-bit", "invalid(6)", "invalid(7)"};
  return names[wt & 7];
}

/* The wire type a field of this type must use (packed repeated scalars use 2 too). */
static unsigned expected_wire_type(ProtobufCType type) {
  switch (type) {
  case PROTOBUF_C_TYPE_SFIXED64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE: return 1;
  case PROTOBUF_C_TYPE_SFIXED32: case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_FLOAT: return 5;
  case PROTOBUF_C_TYPE_STRING: case PROTOBUF_C_TYPE_BYTES: case PROTOBUF_C_TYPE_MESSAGE: return 2;
  default: return 0;
  }
}

static int scan_fail(scan_ctx *c, size_t offset, const char *fmt, const char *detail) {
  char what[256];
  snprintf(what, sizeof what, fmt, detail);
  return bb_error_set(c->err, BB_ERR_MALFORMED, "%s at byte %zu: %s", c->path, offset, what);
}

/* A packed repeated scalar payload must be a whole number of elements. */
static int scan_packed(scan_ctx *c, const ProtobufCFieldDescriptor *f, size_t pos, size_t end) {
  unsigned wt = expected_wire_type(f->type);
  size_t n = end - pos;
  if (wt == 1 && n % 8) return scan_fail(c, pos, "packed %s is not a multiple of 8 bytes", f->name);
  if (wt == 5 && n % 4) return scan_fail(c, pos, "packed %s is not a multiple of 4 bytes", f->name);
  if (wt == 0) {
    while (pos < end) {
      uint64_t v;
      size_t at = pos;
      int rc = read_varint(c->data, &pos, end, &v);
      if (rc) return scan_fail(c, at, rc == 1 ? "truncated varint in packed %s" : "varint longer than 10 bytes in packed %s", f->name);
    }
  }
  return 0;
}

static int scan_message(scan_ctx *c, const ProtobufCMessageDescriptor *d, size_t start, size_t end,
                        uint32_t depth);

static int scan_length_delimited(scan_ctx *c, const ProtobufCFieldDescriptor *f, size_t pos,
                                 size_t end, uint32_t depth) {
  if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
    if (depth + 1 > c->max_depth)
      return bb_error_set(c->err, BB_ERR_LIMIT, "%s at byte %zu: messages nest deeper than %u levels",
                          c->path, pos, c->max_depth);
    return scan_message(c, f->descriptor, pos, end, depth + 1);
  }
  if (f->type == PROTOBUF_C_TYPE_STRING) {
    size_t bad = 0;
    if (!valid_utf8_no_nul(c->data + pos, end - pos, &bad))
      return scan_fail(c, pos + bad, "%s is not UTF-8 text, or holds a NUL byte", "string");
    return 0;
  }
  if (f->type == PROTOBUF_C_TYPE_BYTES) return 0;
  if (f->label == PROTOBUF_C_LABEL_REPEATED) return scan_packed(c, f, pos, end);
  return scan_fail(c, pos, "field %s is a scalar but arrived length-delimited", f->name);
}

static int scan_message(scan_ctx *c, const ProtobufCMessageDescriptor *d, size_t start, size_t end,
                        uint32_t depth) {
  size_t path_len = strlen(c->path);
  uint32_t counts[64] = {0}; /* occurrences per field index, for [i] in paths */
  size_t pos = start;
  while (pos < end) {
    size_t tag_at = pos;
    uint64_t key;
    int rc = read_varint(c->data, &pos, end, &key);
    if (rc) return scan_fail(c, tag_at, "%s field tag", rc == 1 ? "truncated" : "overlong");
    uint64_t number = key >> 3;
    unsigned wt = (unsigned)(key & 7);
    if (number == 0 || number > 536870911u) return scan_fail(c, tag_at, "invalid field number in %s", "tag");
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(d, (unsigned)number);
    if (f) {
      unsigned want = expected_wire_type(f->type);
      bool packed_ok = f->label == PROTOBUF_C_LABEL_REPEATED && wt == 2 && want != 2;
      if (wt != want && !packed_ok) {
        char detail[160];
        snprintf(detail, sizeof detail, "field %s (%u) arrived as %s, the schema says %s", f->name,
                 (unsigned)number, wire_type_name(wt), wire_type_name(want));
        return scan_fail(c, tag_at, "%s", detail);
      }
    }
    size_t value_at = pos;
    switch (wt) {
    case 0: {
      uint64_t v;
      rc = read_varint(c->data, &pos, end, &v);
      if (rc) return scan_fail(c, value_at, "%s varint", rc == 1 ? "truncated" : "over 10-byte");
      break;
    }
    case 1:
      if (end - pos < 8) return scan_fail(c, value_at, "truncated %s value", "64-bit");
      pos += 8;
      break;
    case 5:
      if (end - pos < 4) return scan_fail(c, value_at, "truncated %s value", "32-bit");
      pos += 4;
      break;
    case 2: {
      uint64_t n;
      rc = read_varint(c->data, &pos, end, &n);
      if (rc) return scan_fail(c, value_at, "%s length prefix", rc == 1 ? "truncated" : "overlong");
      if (n > end - pos) {
        char detail[160];
        snprintf(detail, sizeof detail, "length %llu runs past the end of its message (%zu bytes left)",
                 (unsigned long long)n, end - pos);
        return scan_fail(c, value_at, "%s", detail);
      }
      if (f) {
        unsigned idx = (unsigned)(f - d->fields);
        char seg[96];
        if (f->label == PROTOBUF_C_LABEL_REPEATED && f->type == PROTOBUF_C_TYPE_MESSAGE)
          snprintf(seg, sizeof seg, ".%s[%u]", f->name, idx < 64 ? counts[idx] : 0);
        else
          snprintf(seg, sizeof seg, ".%s", f->name);
        if (idx < 64) counts[idx]++;
        if (path_len + strlen(seg) < sizeof c->path) memcpy(c->path + path_len, seg, strlen(seg) + 1);
        rc = scan_length_delimited(c, f, pos, pos + (size_t)n, depth);
        c->path[path_len] = '\0';
        if (rc) return rc;
      }
      pos += (size_t)n;
      break;
    }
    case 3:
    case 4: return scan_fail(c, tag_at, "group wire type (%s) is not used by ONNX", wire_type_name(wt));
    default: return scan_fail(c, tag_at, "invalid wire type %s", wire_type_name(wt));
    }
  }
  return 0;
}

int bbi_pb_scan(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
               uint32_t max_depth, bb_error *err) {
  scan_ctx c;
  c.data = data;
  c.max_depth = max_depth;
  c.err = err;
  snprintf(c.path, sizeof c.path, "%s", short_name(desc));
  return scan_message(&c, desc, 0, len, 1);
}

/* ---- unmodelled fields ------------------------------------------------------------- */

static bool in_keep(uint32_t id, const uint32_t *keep, size_t n_keep) {
  for (size_t i = 0; i < n_keep; i++)
    if (keep[i] == id) return true;
  return false;
}

static bool field_present(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f) {
  const char *base = (const char *)m;
  if (f->label == PROTOBUF_C_LABEL_REPEATED) return *(const size_t *)(base + f->quantifier_offset) != 0;
  if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
    return *(const uint32_t *)(base + f->quantifier_offset) == f->id;
  if (f->type == PROTOBUF_C_TYPE_MESSAGE || f->type == PROTOBUF_C_TYPE_STRING)
    return *(void *const *)(base + f->offset) != NULL;
  if (f->quantifier_offset) return *(const protobuf_c_boolean *)(base + f->quantifier_offset) != 0;
  return true;
}

static void field_clear(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f) {
  char *base = (char *)m;
  if (f->label == PROTOBUF_C_LABEL_REPEATED) {
    *(size_t *)(base + f->quantifier_offset) = 0;
    return;
  }
  if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
    if (*(uint32_t *)(base + f->quantifier_offset) == f->id) *(uint32_t *)(base + f->quantifier_offset) = 0;
    return;
  }
  if (f->type == PROTOBUF_C_TYPE_MESSAGE || f->type == PROTOBUF_C_TYPE_STRING) {
    *(void **)(base + f->offset) = NULL;
    return;
  }
  if (f->quantifier_offset) *(protobuf_c_boolean *)(base + f->quantifier_offset) = 0;
}

int bbi_pb_capture_extra(const ProtobufCMessage *msg, const uint32_t *keep, size_t n_keep,
                        bb_arena *arena, bb_bytes *out) {
  const ProtobufCMessageDescriptor *d = msg->descriptor;
  out->data = NULL;
  out->len = 0;
  bool any = msg->n_unknown_fields > 0;
  for (unsigned i = 0; i < d->n_fields && !any; i++)
    any = in_keep(d->fields[i].id, keep, n_keep) && field_present(msg, &d->fields[i]);
  if (!any) return 0; /* the common case: everything in this message is modelled */

  /* A shallow copy with the modelled fields cleared packs to exactly the rest. */
  ProtobufCMessage *copy = malloc(d->sizeof_message);
  if (!copy) return BB_ERR_NOMEM;
  memcpy(copy, msg, d->sizeof_message);
  for (unsigned i = 0; i < d->n_fields; i++)
    if (!in_keep(d->fields[i].id, keep, n_keep)) field_clear(copy, &d->fields[i]);
  size_t n = protobuf_c_message_get_packed_size(copy);
  uint8_t *buf = n ? bbi_arena_alloc(arena, n) : NULL;
  if (n && !buf) {
    free(copy);
    return BB_ERR_NOMEM;
  }
  if (n) protobuf_c_message_pack(copy, buf);
  free(copy);
  out->data = buf;
  out->len = n;
  return 0;
}

int bbi_pb_restore_extra(ProtobufCMessage *msg, bb_bytes extra, bb_arena *arena, bb_error *err) {
  if (!extra.len) return 0;
  size_t count = 0, pos = 0;
  /* Two passes: count, then fill. Each unknown field's data is everything after its tag. */
  for (int pass = 0; pass < 2; pass++) {
    ProtobufCMessageUnknownField *fields = NULL;
    if (pass == 1) {
      fields = bbi_arena_alloc(arena, count * sizeof *fields);
      if (!fields) return bb_error_set(err, BB_ERR_NOMEM, "out of memory restoring preserved fields");
      msg->unknown_fields = fields;
      msg->n_unknown_fields = (unsigned)count;
    }
    size_t k = 0;
    pos = 0;
    while (pos < extra.len) {
      uint64_t key, v;
      if (read_varint(extra.data, &pos, extra.len, &key) || (key >> 3) == 0 || (key >> 3) > 536870911u)
        goto bad;
      size_t value_at = pos;
      switch (key & 7) {
      case 0: if (read_varint(extra.data, &pos, extra.len, &v)) goto bad; break;
      case 1: if (extra.len - pos < 8) goto bad; pos += 8; break;
      case 5: if (extra.len - pos < 4) goto bad; pos += 4; break;
      case 2:
        if (read_varint(extra.data, &pos, extra.len, &v) || v > extra.len - pos) goto bad;
        pos += (size_t)v;
        break;
      default: goto bad;
      }
      if (pass == 1) {
        fields[k].tag = (uint32_t)(key >> 3);
        fields[k].wire_type = (ProtobufCWireType)(key & 7);
        fields[k].len = pos - value_at;
        fields[k].data = extra.data + value_at;
      }
      k++;
    }
    count = k;
  }
  return 0;
bad:
  return bb_error_set(err, BB_ERR_MALFORMED, "%s: preserved extra bytes are not a valid field list at byte %zu",
                      msg->descriptor->short_name, pos);
}

/* ---- allocator bridge --------------------------------------------------------------- */

static void *pbc_alloc(void *ud, size_t size) {
  const bb_allocator *a = ud;
  return a->malloc(size, a->user_data);
}

static void pbc_free(void *ud, void *p) {
  const bb_allocator *a = ud;
  if (p) a->free(p, a->user_data);
}

ProtobufCAllocator bbi_pb_allocator(const bb_allocator *alloc) {
  ProtobufCAllocator a;
  a.alloc = pbc_alloc;
  a.free = pbc_free;
  a.allocator_data = (void *)(alloc ? alloc : bb_default_allocator());
  return a;
}
