#include "digits.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef BB_HAVE_ZLIB
#include <zlib.h>
#endif

#include "bb/common.h"

static bool gzipped(const char *path) {
  size_t n = strlen(path);
  return n > 3 && strcmp(path + n - 3, ".gz") == 0;
}

static int open_error(const char *path, bb_error *err) {
  int e = errno;
  if (e == ENOENT)
    return bb_error_set(err, BB_ERR_IO,
                        "%s: no such file; the digits data comes with Debian's python3-sklearn "
                        "package (apt-get install python3-sklearn)",
                        path);
  return bb_error_set(err, BB_ERR_IO, "%s: %s", path, strerror(e));
}

/* A plain file into a buffer from a (freed by the caller with a). */
static int read_plain(const char *path, const bb_allocator *a, uint8_t **data, size_t *len, bb_error *err) {
  FILE *f = fopen(path, "rb");
  if (!f) return open_error(path, err);
  size_t cap = 1 << 18;
  uint8_t *buf = a->malloc(cap, a->user_data);
  int rc = buf ? BB_OK : bb_error_set(err, BB_ERR_NOMEM, "%s: out of memory", path);
  *len = 0;
  while (rc == BB_OK) {
    if (*len == cap) {
      uint8_t *bigger = a->realloc(buf, cap * 2, a->user_data);
      if (!bigger) {
        rc = bb_error_set(err, BB_ERR_NOMEM, "%s: out of memory after %zu bytes", path, *len);
        break;
      }
      buf = bigger;
      cap *= 2;
    }
    size_t got = fread(buf + *len, 1, cap - *len, f);
    if (!got) {
      if (ferror(f)) rc = bb_error_set(err, BB_ERR_IO, "%s: read failed after %zu bytes", path, *len);
      break;
    }
    *len += got;
  }
  fclose(f);
  if (rc && buf) a->free(buf, a->user_data);
  if (!rc) *data = buf;
  return rc;
}

#ifdef BB_HAVE_ZLIB
/* The whole decompressed file into a buffer from a (freed by the caller with a). */
static int gunzip_file(const char *path, const bb_allocator *a, uint8_t **data, size_t *len,
                       bb_error *err) {
  *data = NULL;
  *len = 0;
  FILE *probe = fopen(path, "rb");
  if (!probe) return open_error(path, err);
  fclose(probe);
  gzFile gz = gzopen(path, "rb");
  if (!gz) return bb_error_set(err, BB_ERR_IO, "%s: zlib cannot open it", path);
  size_t cap = 1 << 18;
  uint8_t *buf = a->malloc(cap, a->user_data);
  int rc = buf ? BB_OK : bb_error_set(err, BB_ERR_NOMEM, "%s: out of memory", path);
  while (rc == BB_OK) {
    if (*len == cap) {
      uint8_t *bigger = cap <= SIZE_MAX / 2 ? a->realloc(buf, cap * 2, a->user_data) : NULL;
      if (!bigger) {
        rc = bb_error_set(err, BB_ERR_NOMEM, "%s: out of memory after %zu bytes", path, *len);
        break;
      }
      buf = bigger;
      cap *= 2;
    }
    size_t room = cap - *len, chunk = (size_t)1 << 30; /* gzread counts in int */
    int got = gzread(gz, buf + *len, (unsigned)(room < chunk ? room : chunk));
    if (got < 0) {
      int zerr;
      const char *why = gzerror(gz, &zerr);
      rc = bb_error_set(err, BB_ERR_IO, "%s: gunzip failed after %zu bytes: %s", path, *len, why);
    } else if (got == 0) {
      break;
    } else {
      *len += (size_t)got;
    }
  }
  gzclose(gz);
  if (rc) {
    if (buf) a->free(buf, a->user_data);
    *len = 0;
    return rc;
  }
  *data = buf;
  return BB_OK;
}
#endif

int bb_digits_load(const char *path, const bb_allocator *alloc, bb_dataset *out, bb_error *err) {
  memset(out, 0, sizeof *out);
  if (!path) path = BB_DIGITS_DEFAULT_PATH;
  if (!alloc) alloc = bb_default_allocator();
  uint8_t *csv;
  size_t len;
  int rc;
#ifdef BB_HAVE_ZLIB
  rc = gzipped(path) ? gunzip_file(path, alloc, &csv, &len, err) : read_plain(path, alloc, &csv, &len, err);
#else
  if (gzipped(path))
    return bb_error_set(err, BB_ERR_UNSUPPORTED, "%s: this build reads plain CSV only; decompress it first (gzip -dk)",
                        path);
  rc = read_plain(path, alloc, &csv, &len, err);
#endif
  if (rc) return rc;
  bb_csv_options opt = {.struct_size = sizeof opt, .label_column = -1, .has_header = 0};
  rc = bb_dataset_from_csv(csv, len, &opt, alloc, out, err);
  alloc->free(csv, alloc->user_data);
  if (rc) return bb_error_prefix(err, "%s: ", path);
  if (out->dim != BB_DIGITS_FEATURES) {
    size_t dim = out->dim;
    bb_dataset_free(out);
    return bb_error_set(err, BB_ERR_MALFORMED, "%s: %zu features per row, not the %d pixels of an 8x8 digit",
                        path, dim, BB_DIGITS_FEATURES);
  }
  for (size_t i = 0; i < out->n; i++) {
    float y = out->labels[i];
    if (!(y >= 0 && y < BB_DIGITS_CLASSES && y == floorf(y))) {
      bb_dataset_free(out);
      return bb_error_set(err, BB_ERR_MALFORMED, "%s: row %zu has label %g, not a digit", path, i + 1,
                          (double)y);
    }
  }
  return BB_OK;
}

void bb_digits_split_free(bb_digits_split *s) {
  for (size_t i = 0; s->shards && i < s->n_shards; i++) bb_dataset_free(&s->shards[i]);
  free(s->shards);
  bb_dataset_free(&s->train);
  bb_dataset_free(&s->test);
  bb_dataset_free(&s->all);
  memset(s, 0, sizeof *s);
}

int bb_digits_split_load(const char *path, size_t n_shards, size_t classes_per_shard, uint64_t seed,
                         bb_digits_split *out, bb_error *err) {
  memset(out, 0, sizeof *out);
  bb_dataset_partition split = {0}, shards = {0};
  int rc = bb_digits_load(path, NULL, &out->all, err);
  if (!rc) rc = bb_dataset_split(&out->all, 0.25, 1, seed, NULL, &split, err);
  if (!rc) rc = bb_dataset_partition_take(&out->all, &split, 0, NULL, &out->train, err);
  if (!rc) rc = bb_dataset_partition_take(&out->all, &split, 1, NULL, &out->test, err);
  if (!rc)
    rc = classes_per_shard ? bb_dataset_shards_by_label(&out->train, n_shards, classes_per_shard, seed, NULL, &shards, err)
                           : bb_dataset_shards_iid(&out->train, n_shards, seed, NULL, &shards, err);
  if (!rc && !(out->shards = calloc(n_shards, sizeof *out->shards)))
    rc = bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  for (size_t i = 0; !rc && i < n_shards; i++, out->n_shards++)
    rc = bb_dataset_partition_take(&out->train, &shards, i, NULL, &out->shards[i], err);
  bb_dataset_partition_free(&shards);
  bb_dataset_partition_free(&split);
  if (rc) bb_digits_split_free(out);
  return rc;
}
