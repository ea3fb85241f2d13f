/* Helpers shared by the IR tests: file reading, directory walks and a schema-driven deep
 * comparison of two protobuf-c messages (every known and unknown field). */
#ifndef BB_TESTS_IR_TESTUTIL_H
#define BB_TESTS_IR_TESTUTIL_H

#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline uint8_t *tu_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
  if (buf && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *len = n > 0 ? (size_t)n : 0;
  return buf;
}

static inline int tu_cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of the entries of a directory (without . and ..); NULL when it cannot be
 * opened. Free each name and the array. */
static inline char **tu_list_dir(const char *path, size_t *n) {
  *n = 0;
  DIR *d = opendir(path);
  if (!d) return NULL;
  size_t cap = 64;
  char **names = malloc(cap * sizeof *names);
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    if (*n == cap) names = realloc(names, (cap *= 2) * sizeof *names);
    names[(*n)++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, *n, sizeof *names, tu_cmp_str);
  return names;
}

static inline void tu_free_list(char **names, size_t n) {
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
}

static size_t tu_scalar_size(ProtobufCType t) {
  switch (t) {
  case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
  case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_FLOAT:
  case PROTOBUF_C_TYPE_ENUM: return 4;
  case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
  case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
  case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
  case PROTOBUF_C_TYPE_MESSAGE: return sizeof(void *);
  default: return 8;
  }
}

static bool tu_pb_equal(const ProtobufCMessage *a, const ProtobufCMessage *b);

static bool tu_value_equal(const ProtobufCFieldDescriptor *f, const void *x, const void *y) {
  switch (f->type) {
  case PROTOBUF_C_TYPE_STRING: {
    const char *s = *(char *const *)x, *t = *(char *const *)y;
    if (!s || !t) return s == t;
    return strcmp(s, t) == 0;
  }
  case PROTOBUF_C_TYPE_BYTES: {
    const ProtobufCBinaryData *s = x, *t = y;
    return s->len == t->len && (s->len == 0 || memcmp(s->data, t->data, s->len) == 0);
  }
  case PROTOBUF_C_TYPE_MESSAGE: {
    const ProtobufCMessage *s = *(ProtobufCMessage *const *)x, *t = *(ProtobufCMessage *const *)y;
    if (!s || !t) return s == t;
    return tu_pb_equal(s, t);
  }
  default: return memcmp(x, y, tu_scalar_size(f->type)) == 0;
  }
}

/* True when both messages hold the same fields with the same values (floats by bits). */
static bool tu_pb_equal(const ProtobufCMessage *a, const ProtobufCMessage *b) {
  const ProtobufCMessageDescriptor *d = a->descriptor;
  if (d != b->descriptor) return false;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    const char *pa = (const char *)a, *pb = (const char *)b;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      size_t na = *(const size_t *)(pa + f->quantifier_offset), nb = *(const size_t *)(pb + f->quantifier_offset);
      if (na != nb) return false;
      const char *ea = *(char *const *)(pa + f->offset), *eb = *(char *const *)(pb + f->offset);
      size_t sz = tu_scalar_size(f->type);
      for (size_t k = 0; k < na; k++)
        if (!tu_value_equal(f, ea + k * sz, eb + k * sz)) return false;
      continue;
    }
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
      uint32_t ca = *(const uint32_t *)(pa + f->quantifier_offset), cb = *(const uint32_t *)(pb + f->quantifier_offset);
      if ((ca == f->id) != (cb == f->id)) return false;
      if (ca != f->id) continue;
    } else if (f->quantifier_offset && f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE) {
      protobuf_c_boolean ha = *(const protobuf_c_boolean *)(pa + f->quantifier_offset);
      protobuf_c_boolean hb = *(const protobuf_c_boolean *)(pb + f->quantifier_offset);
      if (ha != hb) return false;
      if (!ha) continue;
    }
    if (!tu_value_equal(f, pa + f->offset, pb + f->offset)) return false;
  }
  if (a->n_unknown_fields != b->n_unknown_fields) return false;
  for (unsigned i = 0; i < a->n_unknown_fields; i++) {
    const ProtobufCMessageUnknownField *x = &a->unknown_fields[i], *y = &b->unknown_fields[i];
    if (x->tag != y->tag || x->wire_type != y->wire_type || x->len != y->len ||
        (x->len && memcmp(x->data, y->data, x->len) != 0))
      return false;
  }
  return true;
}

#endif
