/* The examples' digits loader against the real file from python3-sklearn: its shape,
 * labels and pixel range, what a missing or misshapen file says, and every allocation
 * failing in turn. Native only: the wasm build has no zlib and no such file. */
#include "harness.h"

#ifdef __EMSCRIPTEN__
int main(void) {
  printf("skipped: the digits loader is native only\n");
  return 0;
}
#else
#include <stdlib.h>
#include <zlib.h>

#include "digits.h"
#include "failalloc.h"

static void test_real_file(void) {
  bb_dataset ds;
  bb_error err;
  int rc = bb_digits_load(NULL, NULL, &ds, &err);
  CHECK_MSG(rc == 0, "%s", err.message);
  if (rc) return;
  CHECK_EQ_INT(ds.n, 1797);
  CHECK_EQ_INT(ds.dim, 64);
  size_t per_class[BB_DIGITS_CLASSES] = {0};
  for (size_t i = 0; i < ds.n; i++) per_class[(size_t)ds.labels[i]]++;
  for (size_t c = 0; c < BB_DIGITS_CLASSES; c++) CHECK_MSG(per_class[c] >= 170, "class %zu: %zu", c, per_class[c]);
  float lo[64], hi[64];
  bb_dataset_feature_stats(&ds, NULL, NULL, lo, hi);
  float least = lo[0], most = hi[0];
  for (size_t k = 1; k < 64; k++) {
    least = lo[k] < least ? lo[k] : least;
    most = hi[k] > most ? hi[k] : most;
  }
  CHECK(least == 0 && most == 16);
  /* the first image, as the file has it */
  const float first[8] = {0, 0, 5, 13, 9, 1, 0, 0};
  CHECK(memcmp(ds.features, first, sizeof first) == 0 && ds.labels[0] == 0);
  CHECK(ds.labels[ds.n - 1] == 8);
  bb_dataset_free(&ds);
}

/* Writes text gzipped to a file in the build tree; returns its path. */
static const char *write_gz(const char *name, const char *text) {
  static char path[1024];
  snprintf(path, sizeof path, "%s/%s", BB_TEST_BINARY_DIR, name);
  gzFile gz = gzopen(path, "wb");
  CHECK(gz != NULL);
  if (gz) {
    CHECK(gzputs(gz, text) == (int)strlen(text));
    gzclose(gz);
  }
  return path;
}

static void test_bad_files(void) {
  bb_dataset ds;
  bb_error err;
  CHECK_EQ_INT(bb_digits_load("/nonexistent/digits.csv.gz", NULL, &ds, &err), BB_ERR_IO);
  CHECK(strstr(err.message, "/nonexistent/digits.csv.gz: no such file") != NULL);
  CHECK(strstr(err.message, "python3-sklearn") != NULL);
  const char *narrow = write_gz("test_digits_narrow.csv.gz", "1,2,3,4\n5,6,7,8\n");
  CHECK_EQ_INT(bb_digits_load(narrow, NULL, &ds, &err), BB_ERR_MALFORMED);
  CHECK(strstr(err.message, "3 features per row, not the 64 pixels") != NULL);
  CHECK(ds.features == NULL);
  char row[400];
  size_t len = 0;
  for (int k = 0; k < 64; k++) len += (size_t)snprintf(row + len, sizeof row - len, "%d,", k % 17);
  snprintf(row + len, sizeof row - len, "12\n");
  const char *label = write_gz("test_digits_label.csv.gz", row);
  CHECK_EQ_INT(bb_digits_load(label, NULL, &ds, &err), BB_ERR_MALFORMED);
  CHECK(strstr(err.message, "row 1 has label 12, not a digit") != NULL);
  const char *broken = write_gz("test_digits_broken.csv.gz", "1,2\n3,x\n");
  CHECK_EQ_INT(bb_digits_load(broken, NULL, &ds, &err), BB_ERR_MALFORMED);
  CHECK(strstr(err.message, "test_digits_broken.csv.gz: line 2, column 2") != NULL);
}

static void test_allocation_failures(void) {
  int succeeded = 0;
  for (long budget = 0; budget < 64 && !succeeded; budget++) {
    failing f = {budget, 0};
    bb_allocator a = failing_allocator(&f);
    bb_dataset ds;
    bb_error err;
    int rc = bb_digits_load(NULL, &a, &ds, &err);
    if (rc == 0) succeeded = 1;
    else CHECK_MSG(rc == BB_ERR_NOMEM && strstr(err.message, "out of memory"), "budget %ld: %s", budget, err.message);
    bb_dataset_free(&ds);
    CHECK_MSG(f.live == 0, "budget %ld leaked %ld blocks", budget, f.live);
  }
  CHECK(succeeded);
}

int main(void) {
  RUN(test_real_file);
  RUN(test_bad_files);
  RUN(test_allocation_failures);
  return bb_test_finish();
}
#endif
