/* Next-character windows over real texts (text.h). */
#include "text.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

int bb_text_class(unsigned char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return c - 'A';
  return isspace(c) ? BB_TEXT_SPACE : BB_TEXT_CLASSES - 1;
}

/* The text's classes with white-space runs folded to one; returns the count. */
static size_t fold(const bb_bytes *text, uint8_t *classes) {
  size_t n = 0;
  for (size_t i = 0; i < text->len; i++) {
    int c = bb_text_class(text->data[i]);
    if (c == BB_TEXT_SPACE && (n == 0 || classes[n - 1] == BB_TEXT_SPACE)) continue;
    classes[n++] = (uint8_t)c;
  }
  return n;
}

/* Windows starting at first, first + stride, ... (count of them) into rows at..at+count. */
static void windows(const uint8_t *classes, size_t first, size_t stride, size_t count, size_t context, bb_dataset *ds,
                    size_t at) {
  for (size_t w = 0; w < count; w++) {
    size_t start = first + w * stride;
    for (size_t k = 0; k < context; k++) ds->features[(at + w) * context + k] = (float)classes[start + k];
    ds->labels[at + w] = (float)classes[start + context];
  }
}

typedef struct folded {
  uint8_t *classes;
  size_t n, cut; /* training windows end before cut; test windows start there */
} folded;

static int read_texts(const char *const *paths, size_t n_paths, size_t context, folded *t, bb_error *err) {
  for (size_t i = 0; i < n_paths; i++) {
    bb_bytes text = {NULL, 0};
    int rc = bb_read_whole_file(paths[i], &text, err);
    if (rc) return rc;
    t[i].classes = malloc(text.len ? text.len : 1);
    if (!t[i].classes) {
      free(text.data);
      return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
    }
    t[i].n = fold(&text, t[i].classes);
    free(text.data);
    t[i].cut = t[i].n - t[i].n / 10;
    if (t[i].n / 10 < context + 1 || t[i].cut < context + 1)
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s is too short for windows of %zu characters", paths[i], context);
  }
  return 0;
}

static int fill(const folded *t, size_t n_paths, size_t context, size_t max_test, bb_digits_split *out, bb_error *err) {
  size_t n_train = 0, n_test = 0;
  for (size_t i = 0; i < n_paths; i++) n_train += t[i].cut - context, n_test += t[i].n - t[i].cut - context;
  size_t per_text = max_test / n_paths ? max_test / n_paths : 1;
  int rc = 0;
  if (!(out->shards = calloc(n_paths, sizeof *out->shards))) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  out->n_shards = n_paths;
  size_t test_rows = 0;
  for (size_t i = 0; i < n_paths; i++) {
    size_t avail = t[i].n - t[i].cut - context;
    test_rows += avail < per_text ? avail : per_text;
  }
  if ((rc = bb_dataset_init(&out->train, n_train, context, 1, NULL, err)) ||
      (rc = bb_dataset_init(&out->test, test_rows, context, 1, NULL, err)))
    return rc;
  size_t train_at = 0, test_at = 0;
  for (size_t i = 0; i < n_paths && !rc; i++) {
    size_t rows = t[i].cut - context, avail = t[i].n - t[i].cut - context;
    size_t take = avail < per_text ? avail : per_text;
    if ((rc = bb_dataset_init(&out->shards[i], rows, context, 1, NULL, err))) break;
    windows(t[i].classes, 0, 1, rows, context, &out->shards[i], 0);
    windows(t[i].classes, 0, 1, rows, context, &out->train, train_at);
    windows(t[i].classes, t[i].cut, avail / take, take, context, &out->test, test_at);
    train_at += rows;
    test_at += take;
  }
  return rc;
}

int bb_text_split_load(const char *const *paths, size_t n_paths, size_t context, size_t max_test,
                       bb_digits_split *out, bb_error *err) {
  memset(out, 0, sizeof *out);
  if (!n_paths || !context) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "no texts, or windows of no characters");
  folded *t = calloc(n_paths, sizeof *t);
  if (!t) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  int rc = read_texts(paths, n_paths, context, t, err);
  if (!rc) rc = fill(t, n_paths, context, max_test, out, err);
  for (size_t i = 0; i < n_paths; i++) free(t[i].classes);
  free(t);
  if (rc) bb_digits_split_free(out);
  return rc;
}
