#include "bb/dataset.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bb/common.h"

/* ---- memory ------------------------------------------------------------------------- */

/* count * elem bytes (at least one, so a zero-row dataset still has arrays), or NULL on
 * overflow or when the allocator fails. */
static void *alloc_array(const bb_allocator *a, size_t count, size_t elem) {
  if (count && elem > SIZE_MAX / count) return NULL;
  size_t bytes = count * elem;
  return a->malloc(bytes ? bytes : 1, a->user_data);
}

static void release(const bb_allocator *a, void *p) {
  if (p) a->free(p, a->user_data);
}

static bb_allocator allocator_or_default(const bb_allocator *alloc) {
  return *(alloc ? alloc : bb_default_allocator());
}

int bb_dataset_init(bb_dataset *ds, size_t n, size_t dim, int with_labels,
                    const bb_allocator *alloc, bb_error *err) {
  memset(ds, 0, sizeof *ds);
  ds->alloc = allocator_or_default(alloc);
  if (dim && n > SIZE_MAX / dim)
    return bb_error_set(err, BB_ERR_LIMIT, "dataset of %zu rows of %zu features is too large", n, dim);
  ds->features = alloc_array(&ds->alloc, n * dim, sizeof(float));
  ds->labels = with_labels ? alloc_array(&ds->alloc, n, sizeof(float)) : NULL;
  if (!ds->features || (with_labels && !ds->labels)) {
    bb_dataset_free(ds);
    return bb_error_set(err, BB_ERR_NOMEM, "out of memory for a dataset of %zu rows of %zu features", n, dim);
  }
  memset(ds->features, 0, n * dim * sizeof(float));
  if (ds->labels) memset(ds->labels, 0, n * sizeof(float));
  ds->n = n;
  ds->dim = dim;
  return BB_OK;
}

void bb_dataset_free(bb_dataset *ds) {
  if (!ds || !ds->alloc.free) return;
  release(&ds->alloc, ds->features);
  release(&ds->alloc, ds->labels);
  memset(ds, 0, sizeof *ds);
}

/* ---- CSV ---------------------------------------------------------------------------- */

/* Longest field the parser converts; decimal text for any float fits with room to spare. */
#define CSV_FIELD_MAX 128

typedef struct csv_parser {
  const uint8_t *data;
  size_t len;
  int32_t label_column; /* as given in the options */
  size_t columns;       /* fields per row, fixed by the first data row (0 before it) */
  size_t label_index;   /* resolved label column, or SIZE_MAX for none */
  size_t first_row_line;
  size_t cap; /* rows the arrays have room for */
  bb_dataset *out;
  bb_error *err;
} csv_parser;

static int is_blank(uint8_t c) { return c == ' ' || c == '\t'; }

/* field[0..n) quoted for a message: at most 32 bytes, anything unprintable as '?'. */
static void quote_field(const uint8_t *field, size_t n, char *buf, size_t size) {
  size_t shown = n < 32 ? n : 32, k = 0;
  for (size_t i = 0; i < shown && k + 1 < size; i++)
    buf[k++] = field[i] >= 0x20 && field[i] < 0x7f ? (char)field[i] : '?';
  if (shown < n && k + 4 < size) {
    memcpy(buf + k, "...", 3);
    k += 3;
  }
  buf[k] = '\0';
}

/* Whether s[0..n) reads as [+-]digits[.digits][(e|E)[+-]digits] with at least one mantissa
 * digit: what strtof would take, minus NaN, infinities and hex floats. */
static int is_decimal(const uint8_t *s, size_t n) {
  size_t i = 0, digits = 0;
  if (i < n && (s[i] == '+' || s[i] == '-')) i++;
  for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) digits++;
  if (i < n && s[i] == '.')
    for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++) digits++;
  if (!digits) return 0;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    size_t exp_digits = 0;
    i++;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) exp_digits++;
    if (!exp_digits) return 0;
  }
  return i == n;
}

/* Whether s[0..n) spells NaN or an infinity (after an optional sign), any case. */
static int is_nonfinite_word(const uint8_t *s, size_t n) {
  if (n && (s[0] == '+' || s[0] == '-')) s++, n--;
  if (n < 3) return 0;
  char w[3];
  for (int i = 0; i < 3; i++) w[i] = (char)(s[i] | 0x20);
  return memcmp(w, "nan", 3) == 0 || memcmp(w, "inf", 3) == 0;
}

/* Converts one field (blanks around it allowed) at line/column into *value. */
static int parse_field(csv_parser *cp, const uint8_t *field, size_t n, size_t line, size_t column,
                       float *value) {
  size_t offset = (size_t)(field - cp->data);
  while (n && is_blank(field[0])) field++, n--;
  while (n && is_blank(field[n - 1])) n--;
  char shown[40];
  quote_field(field, n, shown, sizeof shown);
  if (!n)
    return bb_error_set(cp->err, BB_ERR_MALFORMED, "line %zu, column %zu (byte %zu): empty field",
                        line, column, offset);
  if (is_nonfinite_word(field, n))
    return bb_error_set(cp->err, BB_ERR_MALFORMED,
                        "line %zu, column %zu (byte %zu): \"%s\": NaN and infinity are not accepted",
                        line, column, offset, shown);
  if (n >= CSV_FIELD_MAX || !is_decimal(field, n))
    return bb_error_set(cp->err, BB_ERR_MALFORMED,
                        "line %zu, column %zu (byte %zu): \"%s\" is not a decimal number", line,
                        column, offset, shown);
  char text[CSV_FIELD_MAX];
  memcpy(text, field, n);
  text[n] = '\0';
  char *end;
  float v = strtof(text, &end);
  /* a locale with a decimal comma would stop strtof at the '.' */
  if (end != text + n)
    return bb_error_set(cp->err, BB_ERR_MALFORMED,
                        "line %zu, column %zu (byte %zu): \"%s\" is not a decimal number", line,
                        column, offset, shown);
  if (!isfinite(v))
    return bb_error_set(cp->err, BB_ERR_MALFORMED,
                        "line %zu, column %zu (byte %zu): \"%s\" is outside float range", line,
                        column, offset, shown);
  *value = v;
  return BB_OK;
}

/* Fixes the row width from the first data row and resolves the label column against it. */
static int csv_first_row(csv_parser *cp, size_t fields, size_t line) {
  cp->columns = fields;
  cp->first_row_line = line;
  cp->label_index = SIZE_MAX;
  if (cp->label_column != BB_DATASET_NO_LABEL) {
    int64_t at = cp->label_column < 0 ? (int64_t)fields + cp->label_column : cp->label_column;
    if (at < 0 || (uint64_t)at >= fields)
      return bb_error_set(cp->err, BB_ERR_INVALID_ARGUMENT,
                          "label column %d is outside the %zu columns of line %zu",
                          (int)cp->label_column, fields, line);
    cp->label_index = (size_t)at;
  }
  cp->out->dim = fields - (cp->label_index != SIZE_MAX);
  if (!cp->out->dim)
    return bb_error_set(cp->err, BB_ERR_MALFORMED, "line %zu: no feature columns besides the label",
                        line);
  return BB_OK;
}

/* Makes room for one more row, doubling. */
static int csv_reserve_row(csv_parser *cp, size_t line) {
  bb_dataset *ds = cp->out;
  if (ds->n < cp->cap) return BB_OK;
  size_t cap = cp->cap ? cp->cap * 2 : 64;
  if (cap < cp->cap || cap > SIZE_MAX / sizeof(float) / ds->dim)
    return bb_error_set(cp->err, BB_ERR_LIMIT, "line %zu: too many rows", line);
  float *features = ds->alloc.realloc(ds->features, cap * ds->dim * sizeof(float), ds->alloc.user_data);
  if (!features) return bb_error_set(cp->err, BB_ERR_NOMEM, "line %zu: out of memory", line);
  ds->features = features;
  if (cp->label_index != SIZE_MAX) {
    float *labels = ds->alloc.realloc(ds->labels, cap * sizeof(float), ds->alloc.user_data);
    if (!labels) return bb_error_set(cp->err, BB_ERR_NOMEM, "line %zu: out of memory", line);
    ds->labels = labels;
  }
  cp->cap = cap;
  return BB_OK;
}

/* One non-blank line data[start..end) as a row. */
static int csv_row(csv_parser *cp, size_t start, size_t end, size_t line) {
  const uint8_t *p = cp->data + start;
  size_t n = end - start, fields = 1;
  for (size_t i = 0; i < n; i++) fields += p[i] == ',';
  int rc;
  if (!cp->columns && (rc = csv_first_row(cp, fields, line)) != 0) return rc;
  if (fields != cp->columns)
    return bb_error_set(cp->err, BB_ERR_MALFORMED, "line %zu: %zu fields, expected %zu as on line %zu",
                        line, fields, cp->columns, cp->first_row_line);
  if ((rc = csv_reserve_row(cp, line)) != 0) return rc;
  bb_dataset *ds = cp->out;
  float *row = ds->features + ds->n * ds->dim;
  size_t column = 0, field_start = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i < n && p[i] != ',') continue;
    float *slot = column == cp->label_index ? &ds->labels[ds->n] : row++;
    if ((rc = parse_field(cp, p + field_start, i - field_start, line, column + 1, slot)) != 0) return rc;
    column++;
    field_start = i + 1;
  }
  ds->n++;
  return BB_OK;
}

/* End of the line that starts at pos: the index of its CR or LF, or len. */
static size_t line_end(const uint8_t *data, size_t len, size_t pos) {
  while (pos < len && data[pos] != '\n' && data[pos] != '\r') pos++;
  return pos;
}

/* Start of the line after the one ending at end (CRLF is one break). */
static size_t next_line(const uint8_t *data, size_t len, size_t end) {
  if (end < len && data[end] == '\r' && end + 1 < len && data[end + 1] == '\n') return end + 2;
  return end < len ? end + 1 : end;
}

static int csv_parse(csv_parser *cp, int has_header) {
  const uint8_t *data = cp->data;
  size_t len = cp->len, pos = 0, line = 1;
  if (len >= 3 && data[0] == 0xef && data[1] == 0xbb && data[2] == 0xbf) pos = 3;
  if (has_header && pos < len) {
    pos = next_line(data, len, line_end(data, len, pos));
    line++;
  }
  for (; pos < len; line++) {
    size_t end = line_end(data, len, pos);
    size_t first = pos;
    while (first < end && is_blank(data[first])) first++;
    if (first < end) {
      int rc = csv_row(cp, pos, end, line);
      if (rc) return rc;
    }
    pos = next_line(data, len, end);
  }
  if (!cp->out->n) return bb_error_set(cp->err, BB_ERR_MALFORMED, "no data rows in %zu bytes", len);
  return BB_OK;
}

int bb_dataset_from_csv(const uint8_t *data, size_t len, const bb_csv_options *opt,
                        const bb_allocator *alloc, bb_dataset *out, bb_error *err) {
  memset(out, 0, sizeof *out);
  out->alloc = allocator_or_default(alloc);
  if (!data && len) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "CSV data is NULL");
  if (opt && (opt->struct_size < sizeof opt->struct_size || opt->struct_size > sizeof *opt))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "CSV options: struct_size %zu (this library knows %zu)", opt->struct_size,
                        sizeof *opt);
  csv_parser cp = {.data = data,
                   .len = len,
                   .label_column = opt ? opt->label_column : -1,
                   .out = out,
                   .err = err};
  int rc = csv_parse(&cp, opt && opt->has_header);
  if (rc) bb_dataset_free(out);
  return rc;
}

int bb_dataset_subset(const bb_dataset *src, const size_t *indices, size_t n,
                      const bb_allocator *alloc, bb_dataset *out, bb_error *err) {
  for (size_t i = 0; i < n; i++)
    if (indices[i] >= src->n) {
      memset(out, 0, sizeof *out);
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "index %zu (entry %zu) is past the %zu rows",
                          indices[i], i, src->n);
    }
  int rc = bb_dataset_init(out, n, src->dim, src->labels != NULL, alloc, err);
  if (rc) return rc;
  for (size_t i = 0; i < n; i++) {
    memcpy(out->features + i * src->dim, src->features + indices[i] * src->dim, src->dim * sizeof(float));
    if (src->labels) out->labels[i] = src->labels[indices[i]];
  }
  return BB_OK;
}

/* ---- seeded randomness -------------------------------------------------------------- */

/* splitmix64 (Steele, Lea, Flood 2014): tiny, fast, and the same on every host. */
static uint64_t rng_next(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

/* Uniform in [0, n), n > 0, without modulo bias. */
static uint64_t rng_below(uint64_t *state, uint64_t n) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % n, x;
  do x = rng_next(state);
  while (x >= limit);
  return x % n;
}

/* Independent streams from one seed: the epochs of a batcher, the deal of shards. */
static uint64_t derive_seed(uint64_t seed, uint64_t stream) {
  uint64_t state = seed ^ (stream * 0xd1b54a32d192ed03u);
  return rng_next(&state);
}

enum { STREAM_SPLIT_ORDER = 1, STREAM_SHARD_DEAL, STREAM_EPOCH_BASE = 1u << 20 };

/* Fisher-Yates over v[0..n). */
static void shuffle_indices(size_t *v, size_t n, uint64_t seed) {
  uint64_t state = seed;
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)rng_below(&state, i), t = v[i - 1];
    v[i - 1] = v[j];
    v[j] = t;
  }
}

void bb_dataset_permutation(size_t *order, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) order[i] = i;
  shuffle_indices(order, n, seed);
}

static void swap_rows(bb_dataset *ds, size_t a, size_t b) {
  float *x = ds->features + a * ds->dim, *y = ds->features + b * ds->dim;
  for (size_t k = 0; k < ds->dim; k++) {
    float t = x[k];
    x[k] = y[k];
    y[k] = t;
  }
  if (ds->labels) {
    float t = ds->labels[a];
    ds->labels[a] = ds->labels[b];
    ds->labels[b] = t;
  }
}

void bb_dataset_shuffle(bb_dataset *ds, uint64_t seed) {
  /* the same swaps as shuffle_indices, applied to rows */
  uint64_t state = seed;
  for (size_t i = ds->n; i > 1; i--) {
    size_t j = (size_t)rng_below(&state, i);
    if (j != i - 1) swap_rows(ds, i - 1, j);
  }
}

/* ---- statistics --------------------------------------------------------------------- */

void bb_dataset_feature_stats(const bb_dataset *ds, float *mean, float *std, float *min,
                              float *max) {
  for (size_t k = 0; k < ds->dim; k++) {
    double sum = 0, lo = 0, hi = 0;
    for (size_t i = 0; i < ds->n; i++) {
      double x = ds->features[i * ds->dim + k];
      sum += x;
      if (i == 0 || x < lo) lo = x;
      if (i == 0 || x > hi) hi = x;
    }
    double mu = ds->n ? sum / (double)ds->n : 0, squares = 0;
    /* two passes: the deviations, not x*x - mu*mu, so large offsets do not cancel */
    for (size_t i = 0; i < ds->n; i++) {
      double d = ds->features[i * ds->dim + k] - mu;
      squares += d * d;
    }
    if (mean) mean[k] = (float)mu;
    if (std) std[k] = ds->n ? (float)sqrt(squares / (double)ds->n) : 0.0f;
    if (min) min[k] = (float)lo;
    if (max) max[k] = (float)hi;
  }
}

/* ---- partitions --------------------------------------------------------------------- */

static int partition_init(bb_dataset_partition *p, size_t n, size_t k, const bb_allocator *alloc,
                          bb_error *err) {
  memset(p, 0, sizeof *p);
  p->alloc = allocator_or_default(alloc);
  p->indices = alloc_array(&p->alloc, n, sizeof(size_t));
  p->offsets = k < SIZE_MAX ? alloc_array(&p->alloc, k + 1, sizeof(size_t)) : NULL;
  if (!p->indices || !p->offsets) {
    bb_dataset_partition_free(p);
    return bb_error_set(err, BB_ERR_NOMEM, "out of memory for %zu indices in %zu parts", n, k);
  }
  memset(p->offsets, 0, (k + 1) * sizeof(size_t));
  p->k = k;
  return BB_OK;
}

void bb_dataset_partition_free(bb_dataset_partition *p) {
  if (!p || !p->alloc.free) return;
  release(&p->alloc, p->indices);
  release(&p->alloc, p->offsets);
  memset(p, 0, sizeof *p);
}

int bb_dataset_partition_take(const bb_dataset *src, const bb_dataset_partition *p, size_t i,
                              const bb_allocator *alloc, bb_dataset *out, bb_error *err) {
  if (i >= p->k) {
    memset(out, 0, sizeof *out);
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "part %zu of a %zu-part partition", i, p->k);
  }
  return bb_dataset_subset(src, p->indices + p->offsets[i], bb_dataset_partition_size(p, i), alloc,
                           out, err);
}

/* A sample's place when grouping by label: the label, then its rank in a seeded
 * permutation, so equal labels come in seeded random order and the order is total. */
typedef struct labelled_index {
  float label;
  size_t rank;
  size_t index;
} labelled_index;

static int compare_labelled(const void *a, const void *b) {
  const labelled_index *x = a, *y = b;
  if (x->label != y->label) return x->label < y->label ? -1 : 1;
  return (x->rank > y->rank) - (x->rank < y->rank);
}

static int check_labels(const bb_dataset *ds, const char *what, bb_error *err) {
  if (!ds->labels)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s needs labels; the dataset has none", what);
  for (size_t i = 0; i < ds->n; i++)
    if (isnan(ds->labels[i]))
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: the label of row %zu is NaN", what, i);
  return BB_OK;
}

/* All rows of ds sorted by label, seeded order within a label (alloc'd; NULL when out of
 * memory). */
static labelled_index *sort_by_label(const bb_dataset *ds, uint64_t seed, const bb_allocator *a) {
  labelled_index *v = alloc_array(a, ds->n, sizeof *v);
  size_t *order = alloc_array(a, ds->n, sizeof *order);
  if (!v || !order) {
    release(a, v);
    release(a, order);
    return NULL;
  }
  bb_dataset_permutation(order, ds->n, seed);
  for (size_t r = 0; r < ds->n; r++) v[r] = (labelled_index){ds->labels[order[r]], r, order[r]};
  release(a, order);
  qsort(v, ds->n, sizeof *v, compare_labelled);
  return v;
}

/* One class's claim on the leftover test samples of a stratified split. */
typedef struct class_share {
  size_t start, count, take;
  uint64_t remainder;
  size_t class_id;
} class_share;

static int compare_remainder(const void *a, const void *b) {
  const class_share *x = a, *y = b;
  if (x->remainder != y->remainder) return x->remainder > y->remainder ? -1 : 1;
  return (x->class_id > y->class_id) - (x->class_id < y->class_id);
}

static int compare_class_id(const void *a, const void *b) {
  const class_share *x = a, *y = b;
  return (x->class_id > y->class_id) - (x->class_id < y->class_id);
}

/* Stratified test set: p->indices gets train then test, class by class. */
static int split_stratified(const bb_dataset *ds, size_t n_test, uint64_t seed,
                            bb_dataset_partition *p, bb_error *err) {
  const bb_allocator *a = &p->alloc;
  size_t n = ds->n, classes = 0;
  labelled_index *sorted = sort_by_label(ds, seed, a);
  class_share *share = sorted ? alloc_array(a, n, sizeof *share) : NULL;
  if (!share) {
    release(a, sorted);
    return bb_error_set(err, BB_ERR_NOMEM, "out of memory grouping %zu rows by label", n);
  }
  for (size_t i = 0; i < n; i++) {
    if (i == 0 || sorted[i].label != sorted[i - 1].label) {
      share[classes] = (class_share){.start = i, .class_id = classes};
      classes++;
    }
    share[classes - 1].count++;
  }
  /* largest remainder: floor of each class's exact quota, the rest to the biggest
   * fractions (ties to the smaller label) */
  size_t given = 0;
  for (size_t c = 0; c < classes; c++) {
    uint64_t quota = (uint64_t)share[c].count * n_test;
    share[c].take = (size_t)(quota / n);
    share[c].remainder = quota % n;
    given += share[c].take;
  }
  qsort(share, classes, sizeof *share, compare_remainder);
  for (size_t c = 0; given < n_test; c++, given++) share[c].take++;
  qsort(share, classes, sizeof *share, compare_class_id);
  size_t train = 0, test = n - n_test;
  for (size_t c = 0; c < classes; c++)
    for (size_t j = 0; j < share[c].count; j++)
      p->indices[j < share[c].take ? test++ : train++] = sorted[share[c].start + j].index;
  release(a, share);
  release(a, sorted);
  return BB_OK;
}

int bb_dataset_split(const bb_dataset *ds, double test_fraction, int stratified, uint64_t seed,
                     const bb_allocator *alloc, bb_dataset_partition *out, bb_error *err) {
  memset(out, 0, sizeof *out);
  if (!(test_fraction >= 0 && test_fraction <= 1))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "test fraction %g is not in [0, 1]", test_fraction);
  if (ds->n > UINT32_MAX)
    return bb_error_set(err, BB_ERR_LIMIT, "%zu rows are more than a split handles", ds->n);
  int rc;
  if (stratified && (rc = check_labels(ds, "a stratified split", err)) != 0) return rc;
  size_t n = ds->n, n_test = (size_t)floor((double)n * test_fraction + 0.5);
  if (n_test > n) n_test = n;
  if ((rc = partition_init(out, n, 2, alloc, err)) != 0) return rc;
  out->offsets[1] = n - n_test;
  out->offsets[2] = n;
  if (!stratified) {
    bb_dataset_permutation(out->indices, n, seed);
    return BB_OK;
  }
  if ((rc = split_stratified(ds, n_test, seed, out, err)) != 0) {
    bb_dataset_partition_free(out);
    return rc;
  }
  /* class by class is no order to train in */
  uint64_t order_seed = derive_seed(seed, STREAM_SPLIT_ORDER);
  shuffle_indices(out->indices, n - n_test, order_seed);
  shuffle_indices(out->indices + n - n_test, n_test, derive_seed(order_seed, 1));
  return BB_OK;
}

/* Every client must get at least one of the `pieces` cut from the rows, none empty. */
static int check_clients(const bb_dataset *ds, size_t k, size_t pieces, bb_error *err) {
  if (k == 0) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "zero clients");
  if (pieces > ds->n)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "%zu rows cannot fill %zu non-empty pieces for %zu clients", ds->n, pieces, k);
  return BB_OK;
}

int bb_dataset_shards_iid(const bb_dataset *ds, size_t k, uint64_t seed,
                          const bb_allocator *alloc, bb_dataset_partition *out, bb_error *err) {
  memset(out, 0, sizeof *out);
  int rc = check_clients(ds, k, k, err);
  if (rc || (rc = partition_init(out, ds->n, k, alloc, err)) != 0) return rc;
  bb_dataset_permutation(out->indices, ds->n, seed);
  size_t base = ds->n / k, extra = ds->n % k;
  for (size_t i = 0; i < k; i++) out->offsets[i + 1] = out->offsets[i] + base + (i < extra);
  return BB_OK;
}

int bb_dataset_shards_by_label(const bb_dataset *ds, size_t k, size_t classes_per_client,
                               uint64_t seed, const bb_allocator *alloc,
                               bb_dataset_partition *out, bb_error *err) {
  memset(out, 0, sizeof *out);
  if (classes_per_client == 0)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "zero classes per client");
  if (k > SIZE_MAX / classes_per_client || ds->n > UINT32_MAX)
    return bb_error_set(err, BB_ERR_LIMIT, "%zu clients of %zu classes over %zu rows", k,
                        classes_per_client, ds->n);
  size_t runs = k * classes_per_client, n = ds->n;
  int rc = check_clients(ds, k, runs, err);
  if (rc || (rc = check_labels(ds, "label-skewed shards", err)) != 0) return rc;
  if ((rc = partition_init(out, n, k, alloc, err)) != 0) return rc;
  labelled_index *sorted = sort_by_label(ds, seed, &out->alloc);
  size_t *deal = sorted ? alloc_array(&out->alloc, runs, sizeof *deal) : NULL;
  if (!deal) {
    release(&out->alloc, sorted);
    bb_dataset_partition_free(out);
    return bb_error_set(err, BB_ERR_NOMEM, "out of memory dealing %zu rows to %zu clients", n, k);
  }
  bb_dataset_permutation(deal, runs, derive_seed(seed, STREAM_SHARD_DEAL));
  size_t at = 0;
  for (size_t i = 0; i < k; i++) {
    for (size_t j = 0; j < classes_per_client; j++) {
      size_t r = deal[i * classes_per_client + j];
      size_t begin = (size_t)((uint64_t)r * n / runs), end = (size_t)((uint64_t)(r + 1) * n / runs);
      for (size_t s = begin; s < end; s++) out->indices[at++] = sorted[s].index;
    }
    out->offsets[i + 1] = at;
  }
  release(&out->alloc, deal);
  release(&out->alloc, sorted);
  return BB_OK;
}

/* ---- batches ------------------------------------------------------------------------ */

static void batcher_order(bb_dataset_batcher *b) {
  if (b->shuffle)
    bb_dataset_permutation(b->order, b->ds->n, derive_seed(b->seed, STREAM_EPOCH_BASE + b->epoch));
  else
    for (size_t i = 0; i < b->ds->n; i++) b->order[i] = i;
}

int bb_dataset_batcher_init(bb_dataset_batcher *b, const bb_dataset *ds, size_t batch_size,
                            int shuffle, uint64_t seed, const bb_allocator *alloc, bb_error *err) {
  memset(b, 0, sizeof *b);
  b->alloc = allocator_or_default(alloc);
  if (!ds->n || !batch_size)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "batches of %zu from %zu rows", batch_size, ds->n);
  b->order = alloc_array(&b->alloc, ds->n, sizeof *b->order);
  if (!b->order)
    return bb_error_set(err, BB_ERR_NOMEM, "out of memory for the order of %zu rows", ds->n);
  b->ds = ds;
  b->batch_size = batch_size;
  b->shuffle = shuffle;
  b->seed = seed;
  batcher_order(b);
  return BB_OK;
}

void bb_dataset_batcher_free(bb_dataset_batcher *b) {
  if (!b || !b->alloc.free) return;
  release(&b->alloc, b->order);
  memset(b, 0, sizeof *b);
}

int bb_dataset_batcher_seek(bb_dataset_batcher *b, uint64_t epoch, size_t pos, bb_error *err) {
  if (pos >= b->ds->n)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "batcher: row %zu of an epoch of %zu rows", pos, b->ds->n);
  if (epoch != b->epoch) {
    b->epoch = epoch;
    batcher_order(b);
  }
  b->pos = pos;
  return BB_OK;
}

size_t bb_dataset_batcher_next(bb_dataset_batcher *b, size_t *indices, float *features,
                               float *labels) {
  const bb_dataset *ds = b->ds;
  size_t completed = 0;
  for (size_t i = 0; i < b->batch_size; i++) {
    size_t row = b->order[b->pos++];
    if (indices) indices[i] = row;
    if (features) memcpy(features + i * ds->dim, ds->features + row * ds->dim, ds->dim * sizeof(float));
    if (labels && ds->labels) labels[i] = ds->labels[row];
    if (b->pos == ds->n) {
      b->epoch++;
      b->pos = 0;
      completed++;
      batcher_order(b);
    }
  }
  return completed;
}
