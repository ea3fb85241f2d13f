#include "options.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const bb_option *find(const bb_option *table, size_t n, const char *name) {
  for (size_t k = 0; k < n; k++)
    if (strcmp(table[k].name, name) == 0) return &table[k];
  return NULL;
}

int bb_options_parse(int argc, char **argv, const bb_option *table, size_t n, int *quiet) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--quiet") == 0) {
      *quiet = 1;
      continue;
    }
    const bb_option *opt = find(table, n, a);
    if (opt && opt->kind == BB_OPTION_FLAG) {
      *(int *)opt->out = 1;
      continue;
    }
    if (!opt || !v) return -1;
    switch (opt->kind) {
    case BB_OPTION_FLAG: break;
    case BB_OPTION_INT: *(int *)opt->out = atoi(v); break;
    case BB_OPTION_DOUBLE: *(double *)opt->out = atof(v); break;
    case BB_OPTION_U64: *(uint64_t *)opt->out = strtoull(v, NULL, 10); break;
    case BB_OPTION_STRING: *(const char **)opt->out = v; break;
    }
    i++;
  }
  return 0;
}

static int io_error(bb_error *err, const char *what, const char *path) {
  err->code = BB_ERR_IO;
  snprintf(err->message, sizeof err->message, "%s%s", what, path);
  return BB_ERR_IO;
}

int bb_read_whole_file(const char *path, bb_bytes *out, bb_error *err) {
  FILE *f = fopen(path, "rb");
  out->data = NULL;
  out->len = 0;
  if (!f) return io_error(err, "cannot open ", path);
  size_t cap = 0;
  for (;;) {
    if (out->len == cap) {
      uint8_t *grown = realloc(out->data, cap = cap ? 2 * cap : 65536);
      if (!grown) break;
      out->data = grown;
    }
    size_t got = fread(out->data + out->len, 1, cap - out->len, f);
    out->len += got;
    if (!got) break;
  }
  int bad = ferror(f) || !out->data;
  fclose(f);
  if (bad) {
    free(out->data);
    out->data = NULL;
    out->len = 0;
    return io_error(err, "cannot read ", path);
  }
  return 0;
}
