/* The DataSource's data: CSV bytes in (good, hostile, cut at every allocation), and the
 * seeded ways to cut a dataset up: shuffles, batch streams, train/test splits and client
 * shards, each checked to cover every sample exactly once. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bb/dataset.h"
#include "failalloc.h"
#include "harness.h"

/* Parses text from a heap copy of exactly its length (no NUL after it), so a read past
 * the end is caught by the sanitizers. */
static int parse(const char *text, size_t len, const bb_csv_options *opt, bb_dataset *ds,
                 bb_error *err) {
  uint8_t *copy = malloc(len ? len : 1);
  memcpy(copy, text, len);
  bb_error_clear(err);
  int rc = bb_dataset_from_csv(copy, len, opt, NULL, ds, err);
  free(copy);
  return rc;
}

static int parse_str(const char *text, const bb_csv_options *opt, bb_dataset *ds, bb_error *err) {
  return parse(text, strlen(text), opt, ds, err);
}

/* Options without their struct_size, or from a newer header, are refused by name. */
static void test_csv_options_are_versioned(void) {
  bb_dataset ds;
  bb_error err;
  bb_csv_options unsized = {.label_column = -1};
  CHECK_EQ_INT(parse_str("1,2\n", &unsized, &ds, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "struct_size 0"));
  bb_csv_options newer = {.struct_size = sizeof newer + 8, .label_column = -1};
  CHECK_EQ_INT(parse_str("1,2\n", &newer, &ds, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "this library knows"));
}

static void test_csv_good(void) {
  bb_dataset ds;
  bb_error err;
  bb_csv_options header = {.struct_size = sizeof header, .label_column = -1, .has_header = 1};
  CHECK_EQ_INT(parse_str("x,y,label\n1,2,0\r\n3.5, -4e1 ,1\r\n\n\t \n5,+6.25E-1,2", &header, &ds, &err), 0);
  CHECK_EQ_INT(ds.n, 3);
  CHECK_EQ_INT(ds.dim, 2);
  const float want_x[] = {1, 2, 3.5f, -40, 5, 0.625f}, want_y[] = {0, 1, 2};
  CHECK(ds.labels && memcmp(ds.labels, want_y, sizeof want_y) == 0);
  CHECK(memcmp(ds.features, want_x, sizeof want_x) == 0);
  bb_dataset_free(&ds);
  CHECK(ds.features == NULL && ds.labels == NULL && ds.n == 0);
  bb_dataset_free(&ds); /* a freed dataset frees again as a no-op */

  /* label first, CR-only line ends, a UTF-8 byte order mark, trailing blank lines */
  bb_csv_options first = {.struct_size = sizeof first, .label_column = 0};
  CHECK_EQ_INT(parse_str("\xef\xbb\xbf" "7,1,2,3\r8,4,5,6\r\r  \r\n", &first, &ds, &err), 0);
  CHECK(ds.n == 2 && ds.dim == 3);
  CHECK(ds.labels[0] == 7 && ds.labels[1] == 8 && ds.features[0] == 1 && ds.features[5] == 6);
  bb_dataset_free(&ds);

  /* a negative index from the right, and no labels at all */
  bb_csv_options middle = {.struct_size = sizeof middle, .label_column = -2};
  CHECK_EQ_INT(parse_str("1,9,2\n3,8,4\n", &middle, &ds, &err), 0);
  CHECK(ds.dim == 2 && ds.labels[0] == 9 && ds.labels[1] == 8 && ds.features[1] == 2 && ds.features[2] == 3);
  bb_dataset_free(&ds);
  bb_csv_options none = {.struct_size = sizeof none, .label_column = BB_DATASET_NO_LABEL};
  CHECK_EQ_INT(parse_str("1,2\n3,4", &none, &ds, &err), 0);
  CHECK(ds.n == 2 && ds.dim == 2 && ds.labels == NULL && ds.features[3] == 4);
  bb_dataset_free(&ds);

  /* default options: label last, no header; values that only just fit in a float */
  CHECK_EQ_INT(parse_str("3.4e38,1e-40,.5,-0.,1", NULL, &ds, &err), 0);
  CHECK(ds.dim == 4 && ds.features[0] == 3.4e38f && ds.features[1] > 0 && ds.features[2] == 0.5f);
  bb_dataset_free(&ds);

  /* many rows, past every growth of the arrays */
  char big[8000];
  size_t len = 0;
  for (int i = 0; i < 700; i++) len += (size_t)snprintf(big + len, sizeof big - len, "%d,%d\n", i, i % 3);
  CHECK_EQ_INT(parse(big, len, NULL, &ds, &err), 0);
  CHECK(ds.n == 700 && ds.features[699] == 699 && ds.labels[699] == 699 % 3);
  bb_dataset_free(&ds);
}

/* Checks that text fails with code and a message holding every one of the fragments. */
static void expect_csv_error(const char *text, size_t len, const bb_csv_options *opt, int code,
                             const char *fragment1, const char *fragment2) {
  bb_dataset ds;
  bb_error err;
  int rc = parse(text, len, opt, &ds, &err);
  CHECK_MSG(rc == code, "%d != %d for %s", rc, code, text);
  CHECK_MSG(err.code == code, "err.code %d for %s", err.code, text);
  CHECK_MSG(strstr(err.message, fragment1) != NULL, "\"%s\" lacks \"%s\"", err.message, fragment1);
  if (fragment2)
    CHECK_MSG(strstr(err.message, fragment2) != NULL, "\"%s\" lacks \"%s\"", err.message, fragment2);
  CHECK(ds.features == NULL && ds.labels == NULL && ds.n == 0);
}

#define EXPECT_ERROR(text, opt, code, f1, f2) expect_csv_error(text, sizeof text - 1, opt, code, f1, f2)

static void test_csv_bad(void) {
  bb_csv_options header = {.struct_size = sizeof header, .label_column = -1, .has_header = 1};
  EXPECT_ERROR("1,2,3\n4,5\n", NULL, BB_ERR_MALFORMED, "line 2: 2 fields, expected 3 as on line 1", NULL);
  EXPECT_ERROR("a,b\r\n1,2\r\n\r\n3,4,5\r\n", &header, BB_ERR_MALFORMED, "line 4: 3 fields, expected 2 as on line 2", NULL);
  EXPECT_ERROR("1,2\n3,abc\n", NULL, BB_ERR_MALFORMED, "line 2, column 2 (byte 6)", "\"abc\" is not a decimal number");
  EXPECT_ERROR("h\r\n1,2\r\n3,x\r\n", &header, BB_ERR_MALFORMED, "line 3, column 2", "\"x\"");
  EXPECT_ERROR("1,nan\n", NULL, BB_ERR_MALFORMED, "line 1, column 2", "NaN and infinity are not accepted");
  EXPECT_ERROR("0,1\n-Infinity,1\n", NULL, BB_ERR_MALFORMED, "line 2, column 1", "\"-Infinity\"");
  EXPECT_ERROR("1,NaN(123)\n", NULL, BB_ERR_MALFORMED, "line 1, column 2", "NaN");
  EXPECT_ERROR("1,,2\n", NULL, BB_ERR_MALFORMED, "line 1, column 2 (byte 2): empty field", NULL);
  EXPECT_ERROR("1,2,\n", NULL, BB_ERR_MALFORMED, "line 1, column 3", "empty field");
  EXPECT_ERROR("1, \t,2\n", NULL, BB_ERR_MALFORMED, "line 1, column 2", "empty field");
  EXPECT_ERROR("0x10,1\n", NULL, BB_ERR_MALFORMED, "line 1, column 1", "\"0x10\" is not a decimal number");
  EXPECT_ERROR("1.2.3,1\n", NULL, BB_ERR_MALFORMED, "line 1, column 1", "not a decimal number");
  EXPECT_ERROR("e5,1\n", NULL, BB_ERR_MALFORMED, "line 1, column 1", "not a decimal number");
  EXPECT_ERROR("1e,1\n", NULL, BB_ERR_MALFORMED, "line 1, column 1", "not a decimal number");
  EXPECT_ERROR("1,-\n", NULL, BB_ERR_MALFORMED, "line 1, column 2", "\"-\" is not a decimal number");
  EXPECT_ERROR("1,.\n", NULL, BB_ERR_MALFORMED, "line 1, column 2", "not a decimal number");
  EXPECT_ERROR("1 2,1\n", NULL, BB_ERR_MALFORMED, "line 1, column 1", "\"1 2\"");
  EXPECT_ERROR("\"1\",1\n", NULL, BB_ERR_MALFORMED, "line 1, column 1", "not a decimal number");
  EXPECT_ERROR("1e39,1\n", NULL, BB_ERR_MALFORMED, "line 1, column 1", "\"1e39\" is outside float range");
  EXPECT_ERROR("1,-3.5e38\n", NULL, BB_ERR_MALFORMED, "line 1, column 2", "outside float range");
  EXPECT_ERROR("1,\0,2\n", NULL, BB_ERR_MALFORMED, "line 1, column 2", "\"?\" is not a decimal number");
  EXPECT_ERROR("", NULL, BB_ERR_MALFORMED, "no data rows", NULL);
  EXPECT_ERROR("\n\r\n  \n", NULL, BB_ERR_MALFORMED, "no data rows", NULL);
  EXPECT_ERROR("a,b,label\n", &header, BB_ERR_MALFORMED, "no data rows", NULL);
  EXPECT_ERROR("5\n6\n", NULL, BB_ERR_MALFORMED, "line 1: no feature columns", NULL);
  bb_csv_options far = {.struct_size = sizeof far, .label_column = 5};
  EXPECT_ERROR("1,2,3\n", &far, BB_ERR_INVALID_ARGUMENT, "label column 5 is outside the 3 columns of line 1", NULL);
  bb_csv_options far_left = {.struct_size = sizeof far_left, .label_column = -4};
  EXPECT_ERROR("\n1,2,3\n", &far_left, BB_ERR_INVALID_ARGUMENT, "label column -4 is outside the 3 columns of line 2", NULL);

  /* a field longer than any number is cut short in the message */
  char longer[400];
  memset(longer, '1', 300);
  memcpy(longer + 300, "x,1\n", 4);
  expect_csv_error(longer, 304, NULL, BB_ERR_MALFORMED, "line 1, column 1", "...\" is not a decimal number");
  /* a bad field in the last line, which has no line end, is still found */
  EXPECT_ERROR("1,2\n3,4\n5,z", NULL, BB_ERR_MALFORMED, "line 3, column 2 (byte 10)", "\"z\"");
}

/* n rows whose features are (i, -i) and label i % classes. */
static void make_rows(bb_dataset *ds, size_t n, size_t classes) {
  CHECK_EQ_INT(bb_dataset_init(ds, n, 2, 1, NULL, NULL), 0);
  for (size_t i = 0; i < n; i++) {
    ds->features[2 * i] = (float)i;
    ds->features[2 * i + 1] = -(float)i;
    ds->labels[i] = (float)(i % classes);
  }
}

static void test_shuffle(void) {
  bb_dataset a, b;
  make_rows(&a, 50, 7);
  make_rows(&b, 50, 7);
  bb_dataset_shuffle(&a, 1);
  bb_dataset_shuffle(&b, 1);
  CHECK(memcmp(a.features, b.features, 100 * sizeof(float)) == 0);
  CHECK(memcmp(a.labels, b.labels, 50 * sizeof(float)) == 0);
  /* rows move whole, and where the permutation says */
  size_t order[50];
  bb_dataset_permutation(order, 50, 1);
  int moved = 0, whole = 1, as_said = 1;
  for (size_t i = 0; i < 50; i++) {
    size_t from = (size_t)a.features[2 * i];
    moved += from != i;
    whole &= a.features[2 * i + 1] == -(float)from && a.labels[i] == (float)(from % 7);
    as_said &= from == order[i];
  }
  CHECK(moved > 40 && whole && as_said);
  /* another seed, another order */
  bb_dataset_free(&b);
  make_rows(&b, 50, 7);
  bb_dataset_shuffle(&b, 2);
  CHECK(memcmp(a.features, b.features, 100 * sizeof(float)) != 0);
  bb_dataset_free(&a);
  bb_dataset_free(&b);

  /* pinned, so every host (native, wasm) and every later version deals the same */
  size_t small[10];
  bb_dataset_permutation(small, 10, 42);
  const size_t want[10] = {0, 9, 5, 8, 6, 4, 7, 2, 1, 3};
  CHECK(memcmp(small, want, sizeof want) == 0);
}

/* Every index below n appears exactly once in p, and the parts are in order. */
static void check_partition(const bb_dataset_partition *p, size_t n) {
  CHECK(p->offsets[0] == 0 && p->offsets[p->k] == n);
  int ordered = 1;
  for (size_t i = 0; i < p->k; i++) ordered &= p->offsets[i] <= p->offsets[i + 1];
  CHECK(ordered);
  unsigned char *seen = calloc(n ? n : 1, 1);
  int once = 1;
  for (size_t i = 0; i < n; i++) {
    if (p->indices[i] >= n || seen[p->indices[i]]) once = 0;
    else seen[p->indices[i]] = 1;
  }
  CHECK(once);
  free(seen);
}

static void test_batches(void) {
  bb_dataset ds;
  make_rows(&ds, 10, 3);
  bb_dataset_batcher b, same, other;
  bb_error err;
  CHECK_EQ_INT(bb_dataset_batcher_init(&b, &ds, 3, 1, 7, NULL, &err), 0);
  CHECK_EQ_INT(bb_dataset_batcher_init(&same, &ds, 3, 1, 7, NULL, &err), 0);
  CHECK_EQ_INT(bb_dataset_batcher_init(&other, &ds, 3, 1, 8, NULL, &err), 0);
  size_t stream[30], again[30], elsewise[30], epochs = 0;
  float x[6], y[3];
  int rows_match = 1;
  for (size_t k = 0; k < 10; k++) {
    epochs += bb_dataset_batcher_next(&b, stream + 3 * k, x, y);
    bb_dataset_batcher_next(&same, again + 3 * k, NULL, NULL);
    bb_dataset_batcher_next(&other, elsewise + 3 * k, NULL, NULL);
    for (size_t i = 0; i < 3; i++) {
      size_t row = stream[3 * k + i];
      rows_match &= x[2 * i] == (float)row && x[2 * i + 1] == -(float)row && y[i] == (float)(row % 3);
    }
  }
  CHECK(rows_match);
  CHECK_EQ_INT(epochs, 3);
  CHECK_EQ_INT(b.epoch, 3);
  CHECK_EQ_INT(b.pos, 0);
  /* every epoch visits each row once, in an order of its own */
  for (size_t e = 0; e < 3; e++) {
    bb_dataset_partition one = {.indices = stream + 10 * e, .offsets = (size_t[]){0, 10}, .k = 1};
    check_partition(&one, 10);
  }
  CHECK(memcmp(stream, stream + 10, 10 * sizeof(size_t)) != 0);
  CHECK(memcmp(stream, again, sizeof stream) == 0);
  CHECK(memcmp(stream, elsewise, sizeof stream) != 0);
  bb_dataset_batcher_free(&b);
  bb_dataset_batcher_free(&same);
  bb_dataset_batcher_free(&other);

  /* unshuffled: row order, wrapping; a batch bigger than the data spans epochs */
  CHECK_EQ_INT(bb_dataset_batcher_init(&b, &ds, 25, 0, 0, NULL, &err), 0);
  size_t wide[25];
  CHECK_EQ_INT(bb_dataset_batcher_next(&b, wide, NULL, NULL), 2);
  int in_order = 1;
  for (size_t i = 0; i < 25; i++) in_order &= wide[i] == i % 10;
  CHECK(in_order && b.epoch == 2 && b.pos == 5);
  bb_dataset_batcher_free(&b);

  CHECK_EQ_INT(bb_dataset_batcher_init(&b, &ds, 0, 1, 0, NULL, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "batches of 0 from 10 rows") != NULL);
  bb_dataset_free(&ds);
}

static void test_split(void) {
  bb_dataset ds;
  bb_error err;
  bb_dataset_partition p, q;
  /* 100 rows: class 0 has 50, class 1 has 30, class 2 has 20 */
  make_rows(&ds, 100, 1);
  for (size_t i = 0; i < 100; i++) ds.labels[i] = i < 50 ? 0.0f : i < 80 ? 1.0f : 2.0f;
  CHECK_EQ_INT(bb_dataset_split(&ds, 0.2, 0, 3, NULL, &p, &err), 0);
  CHECK(p.k == 2 && bb_dataset_partition_size(&p, 0) == 80 && bb_dataset_partition_size(&p, 1) == 20);
  check_partition(&p, 100);
  CHECK_EQ_INT(bb_dataset_split(&ds, 0.2, 0, 3, NULL, &q, &err), 0);
  CHECK(memcmp(p.indices, q.indices, 100 * sizeof(size_t)) == 0);
  bb_dataset_partition_free(&q);
  CHECK_EQ_INT(bb_dataset_split(&ds, 0.2, 0, 4, NULL, &q, &err), 0);
  CHECK(memcmp(p.indices, q.indices, 100 * sizeof(size_t)) != 0);
  bb_dataset_partition_free(&q);

  /* stratified: the same sizes, each class in proportion */
  CHECK_EQ_INT(bb_dataset_split(&ds, 0.2, 1, 3, NULL, &q, &err), 0);
  check_partition(&q, 100);
  CHECK(bb_dataset_partition_size(&q, 1) == 20);
  bb_dataset test;
  CHECK_EQ_INT(bb_dataset_partition_take(&ds, &q, 1, NULL, &test, &err), 0);
  size_t per_class[3] = {0};
  for (size_t i = 0; i < test.n; i++) per_class[(size_t)test.labels[i]]++;
  CHECK(per_class[0] == 10 && per_class[1] == 6 && per_class[2] == 4);
  bb_dataset_free(&test);
  bb_dataset_partition_free(&q);
  /* uneven quotas: 0.25 of 50/30/20 is 12.5/7.5/5, 25 in all; the halves go to the
   * smaller labels */
  CHECK_EQ_INT(bb_dataset_split(&ds, 0.25, 1, 3, NULL, &q, &err), 0);
  CHECK(bb_dataset_partition_size(&q, 1) == 25);
  memset(per_class, 0, sizeof per_class);
  for (size_t i = q.offsets[1]; i < q.offsets[2]; i++) per_class[(size_t)ds.labels[q.indices[i]]]++;
  CHECK(per_class[0] == 13 && per_class[1] == 7 && per_class[2] == 5);
  check_partition(&q, 100);
  bb_dataset_partition_free(&q);

  /* the edges */
  CHECK_EQ_INT(bb_dataset_split(&ds, 0, 1, 3, NULL, &q, &err), 0);
  CHECK(bb_dataset_partition_size(&q, 0) == 100);
  bb_dataset_partition_free(&q);
  CHECK_EQ_INT(bb_dataset_split(&ds, 1, 0, 3, NULL, &q, &err), 0);
  CHECK(bb_dataset_partition_size(&q, 1) == 100);
  bb_dataset_partition_free(&q);
  CHECK_EQ_INT(bb_dataset_split(&ds, 1.5, 0, 3, NULL, &q, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "test fraction 1.5 is not in [0, 1]") != NULL);
  CHECK_EQ_INT(bb_dataset_split(&ds, NAN, 0, 3, NULL, &q, &err), BB_ERR_INVALID_ARGUMENT);
  ds.labels[7] = NAN;
  CHECK_EQ_INT(bb_dataset_split(&ds, 0.5, 1, 3, NULL, &q, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "the label of row 7 is NaN") != NULL);
  bb_dataset_partition_free(&p);
  bb_dataset_free(&ds);

  bb_dataset unlabelled;
  CHECK_EQ_INT(bb_dataset_init(&unlabelled, 4, 1, 0, NULL, &err), 0);
  CHECK_EQ_INT(bb_dataset_split(&unlabelled, 0.5, 1, 3, NULL, &q, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "a stratified split needs labels") != NULL);
  CHECK_EQ_INT(bb_dataset_split(&unlabelled, 0.5, 0, 3, NULL, &q, &err), 0);
  CHECK(bb_dataset_partition_size(&q, 1) == 2);
  bb_dataset_partition_free(&q);
  bb_dataset_free(&unlabelled);
}

/* Share of part i's samples that its `top` most frequent classes (ids below 10) hold. */
static double dominant_share(const bb_dataset *ds, const bb_dataset_partition *p, size_t i, size_t top) {
  size_t count[10] = {0}, total = bb_dataset_partition_size(p, i), held = 0;
  for (size_t s = p->offsets[i]; s < p->offsets[i + 1]; s++) count[(size_t)ds->labels[p->indices[s]]]++;
  for (size_t t = 0; t < top; t++) {
    size_t best = 0;
    for (size_t c = 1; c < 10; c++)
      if (count[c] > count[best]) best = c;
    held += count[best];
    count[best] = 0;
  }
  return total ? (double)held / (double)total : 0;
}

static void test_shards(void) {
  bb_dataset ds;
  bb_error err;
  bb_dataset_partition p, q;
  /* 1003 rows over 10 classes of uneven size, so runs straddle class boundaries */
  make_rows(&ds, 1003, 1);
  uint64_t h = 99;
  for (size_t i = 0; i < ds.n; i++) {
    h = h * 6364136223846793005u + 1442695040888963407u;
    ds.labels[i] = (float)((h >> 33) % 10);
  }

  CHECK_EQ_INT(bb_dataset_shards_iid(&ds, 10, 5, NULL, &p, &err), 0);
  check_partition(&p, ds.n);
  int sizes = 1;
  for (size_t i = 0; i < 10; i++) sizes &= bb_dataset_partition_size(&p, i) == (i < 3 ? 101u : 100u);
  CHECK(sizes);
  double iid_worst = 0;
  for (size_t i = 0; i < 10; i++) {
    double share = dominant_share(&ds, &p, i, 2);
    if (share > iid_worst) iid_worst = share;
  }
  CHECK_MSG(iid_worst < 0.5, "an IID client's two biggest classes hold %.2f", iid_worst);
  CHECK_EQ_INT(bb_dataset_shards_iid(&ds, 10, 5, NULL, &q, &err), 0);
  CHECK(memcmp(p.indices, q.indices, ds.n * sizeof(size_t)) == 0);
  bb_dataset_partition_free(&q);
  bb_dataset_partition_free(&p);

  CHECK_EQ_INT(bb_dataset_shards_by_label(&ds, 10, 2, 5, NULL, &p, &err), 0);
  check_partition(&p, ds.n);
  double skew_worst = 1;
  size_t smallest = ds.n, largest = 0;
  for (size_t i = 0; i < 10; i++) {
    double share = dominant_share(&ds, &p, i, 2);
    if (share < skew_worst) skew_worst = share;
    size_t size = bb_dataset_partition_size(&p, i);
    smallest = size < smallest ? size : smallest;
    largest = size > largest ? size : largest;
  }
  CHECK_MSG(skew_worst >= 0.8, "a label-skewed client's two biggest classes hold only %.2f", skew_worst);
  CHECK(largest - smallest <= 2); /* two runs of 50 or 51 each */
  CHECK_EQ_INT(bb_dataset_shards_by_label(&ds, 10, 2, 5, NULL, &q, &err), 0);
  CHECK(memcmp(p.indices, q.indices, ds.n * sizeof(size_t)) == 0);
  bb_dataset_partition_free(&q);
  CHECK_EQ_INT(bb_dataset_shards_by_label(&ds, 10, 2, 6, NULL, &q, &err), 0);
  CHECK(memcmp(p.indices, q.indices, ds.n * sizeof(size_t)) != 0);
  bb_dataset_partition_free(&q);

  /* a client's shard as a dataset of its own */
  bb_dataset client;
  CHECK_EQ_INT(bb_dataset_partition_take(&ds, &p, 4, NULL, &client, &err), 0);
  CHECK(client.n == bb_dataset_partition_size(&p, 4) && client.dim == 2);
  size_t first = p.indices[p.offsets[4]];
  CHECK(client.features[0] == (float)first && client.labels[0] == ds.labels[first]);
  bb_dataset_free(&client);
  CHECK_EQ_INT(bb_dataset_partition_take(&ds, &p, 10, NULL, &client, &err), BB_ERR_INVALID_ARGUMENT);
  bb_dataset_partition_free(&p);

  /* one class per client, as many clients as rows */
  CHECK_EQ_INT(bb_dataset_shards_by_label(&ds, ds.n, 1, 1, NULL, &p, &err), 0);
  check_partition(&p, ds.n);
  bb_dataset_partition_free(&p);
  CHECK_EQ_INT(bb_dataset_shards_by_label(&ds, 600, 2, 1, NULL, &p, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "1003 rows cannot fill 1200 non-empty pieces for 600 clients") != NULL);
  CHECK_EQ_INT(bb_dataset_shards_iid(&ds, 0, 1, NULL, &p, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "zero clients") != NULL);
  CHECK_EQ_INT(bb_dataset_shards_iid(&ds, 1004, 1, NULL, &p, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_dataset_shards_by_label(&ds, 3, 0, 1, NULL, &p, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(p.indices == NULL && p.offsets == NULL);
  bb_dataset_free(&ds);
}

static void test_stats_and_subset(void) {
  bb_dataset ds;
  bb_error err;
  CHECK_EQ_INT(parse_str("1,10,0\n2,10,1\n3,10,0\n6,10,1\n", NULL, &ds, &err), 0);
  float mean[2], std[2], lo[2], hi[2];
  bb_dataset_feature_stats(&ds, mean, std, lo, hi);
  CHECK(mean[0] == 3 && mean[1] == 10);
  CHECK(fabsf(std[0] - sqrtf(3.5f)) < 1e-6f && std[1] == 0);
  CHECK(lo[0] == 1 && hi[0] == 6 && lo[1] == 10 && hi[1] == 10);
  bb_dataset_feature_stats(&ds, NULL, std, NULL, NULL); /* any output may be left out */

  /* a large offset does not drown the spread */
  bb_dataset offset;
  CHECK_EQ_INT(parse_str("1000000000,0\n1000000128,0\n", NULL, &offset, &err), 0);
  bb_dataset_feature_stats(&offset, mean, std, NULL, NULL);
  CHECK(mean[0] == 1000000064.0f && std[0] == 64.0f);
  bb_dataset_free(&offset);

  bb_dataset sub;
  const size_t pick[] = {3, 0, 3};
  CHECK_EQ_INT(bb_dataset_subset(&ds, pick, 3, NULL, &sub, &err), 0);
  CHECK(sub.n == 3 && sub.features[0] == 6 && sub.features[2] == 1 && sub.features[4] == 6);
  CHECK(sub.labels[0] == 1 && sub.labels[1] == 0);
  bb_dataset_free(&sub);
  const size_t past[] = {1, 4};
  CHECK_EQ_INT(bb_dataset_subset(&ds, past, 2, NULL, &sub, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "index 4 (entry 1) is past the 4 rows") != NULL);
  bb_dataset_free(&ds);
}

/* Each operation with every allocation in turn failing: a clean BB_ERR_NOMEM and nothing
 * leaked, until the budget is enough to succeed. */
static void test_allocation_failures(void) {
  char text[4000];
  size_t len = 0;
  for (int i = 0; i < 300; i++) len += (size_t)snprintf(text + len, sizeof text - len, "%d,%d,%d\n", i, -i, i % 4);
  for (int op = 0; op < 6; op++) {
    int succeeded = 0;
    for (long budget = 0; budget < 64 && !succeeded; budget++) {
      failing f = {budget, 0};
      bb_allocator a = failing_allocator(&f);
      bb_error err;
      bb_error_clear(&err);
      bb_dataset ds = {0}, sub = {0};
      bb_dataset_partition p = {0};
      bb_dataset_batcher b = {0};
      int rc;
      if (op == 0) {
        rc = bb_dataset_from_csv((const uint8_t *)text, len, NULL, &a, &ds, &err);
      } else {
        f.budget = -1;
        CHECK_EQ_INT(bb_dataset_from_csv((const uint8_t *)text, len, NULL, &a, &ds, &err), 0);
        f.budget = budget;
        if (op == 1) rc = bb_dataset_split(&ds, 0.3, 1, 9, &a, &p, &err);
        else if (op == 2) rc = bb_dataset_shards_by_label(&ds, 5, 2, 9, &a, &p, &err);
        else if (op == 3) rc = bb_dataset_shards_iid(&ds, 5, 9, &a, &p, &err);
        else if (op == 4) rc = bb_dataset_batcher_init(&b, &ds, 32, 1, 9, &a, &err);
        else rc = bb_dataset_subset(&ds, (const size_t[]){1, 2}, 2, &a, &sub, &err);
      }
      if (rc == 0) {
        succeeded = 1;
        CHECK(budget > 0);
      } else {
        CHECK_MSG(rc == BB_ERR_NOMEM, "op %d budget %ld: %d %s", op, budget, rc, err.message);
        CHECK_MSG(strstr(err.message, "out of memory") != NULL, "op %d: %s", op, err.message);
      }
      bb_dataset_batcher_free(&b);
      bb_dataset_partition_free(&p);
      bb_dataset_free(&sub);
      bb_dataset_free(&ds);
      CHECK_MSG(f.live == 0, "op %d budget %ld leaked %ld blocks", op, budget, f.live);
    }
    CHECK_MSG(succeeded, "op %d never succeeded", op);
  }
}

int main(void) {
  RUN(test_csv_good);
  RUN(test_csv_options_are_versioned);
  RUN(test_csv_bad);
  RUN(test_shuffle);
  RUN(test_batches);
  RUN(test_split);
  RUN(test_shards);
  RUN(test_stats_and_subset);
  RUN(test_allocation_failures);
  return bb_test_finish();
}
