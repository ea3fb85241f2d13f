#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_read_file(const char *path, uint8_t **data, size_t *len) {
  *data = NULL;
  *len = 0;
  FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "bb: %s: %s\n", path, strerror(errno));
    return 1;
  }
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap);
  for (;;) {
    if (!buf) {
      fprintf(stderr, "bb: %s: out of memory\n", path);
      break;
    }
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    uint8_t *grown = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
    if (!grown) free(buf);
    buf = grown;
    cap *= 2;
  }
  int failed = !buf || ferror(f);
  if (buf && ferror(f)) fprintf(stderr, "bb: %s: read error\n", path);
  if (f != stdin) fclose(f);
  if (failed) {
    free(buf);
    return 1;
  }
  *data = buf;
  *len = n;
  return 0;
}

int cli_write_file(const char *path, const void *data, size_t len) {
  if (strcmp(path, "-") == 0) return fwrite(data, 1, len, stdout) == len ? 0 : 1;
  size_t plen = strlen(path);
  char *tmp = malloc(plen + 8);
  if (!tmp) return 1;
  snprintf(tmp, plen + 8, "%s.tmp~", path);
  FILE *f = fopen(tmp, "wb");
  int rc = 1;
  if (!f) {
    fprintf(stderr, "bb: %s: %s\n", tmp, strerror(errno));
  } else {
    int ok = fwrite(data, 1, len, f) == len;
    ok = (fclose(f) == 0) && ok;
    if (!ok) fprintf(stderr, "bb: %s: write failed\n", path);
    else if (rename(tmp, path) != 0) fprintf(stderr, "bb: %s: %s\n", path, strerror(errno));
    else rc = 0;
    if (rc) remove(tmp);
  }
  free(tmp);
  return rc;
}

int cli_load_model(const char *path, bb_model **out) {
  uint8_t *data;
  size_t len;
  if (cli_read_file(path, &data, &len)) return 1;
  bb_error err;
  int rc = bb_model_decode(data, len, NULL, NULL, out, &err);
  free(data);
  if (rc) {
    fprintf(stderr, "bb: %s: not a valid ONNX model: %s\n", path, err.message);
    return 1;
  }
  return 0;
}
