/* Robust aggregators: exact small cases, a Byzantine client against FedAvg, and the
 * trimmed mean checked against a sort-everything reference on random data. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "components/aggregators/robust.h"
#include "cpu/optest.h"

static void test_median_small(void) {
  const float a[3] = {1, 10, -2}, b[3] = {3, -5, -2}, c[3] = {2, 0, 7}, d[3] = {100, 1, 0};
  const float *odd[3] = {a, b, c}, *even[4] = {a, b, c, d};
  float out[3], scratch[4];
  CHECK_EQ_INT(bbi_robust_median(odd, 3, 3, out, scratch, NULL), 0);
  CHECK(out[0] == 2 && out[1] == 0 && out[2] == -2);
  CHECK_EQ_INT(bbi_robust_median(even, 4, 3, out, scratch, NULL), 0);
  CHECK(out[0] == 2.5f && out[1] == 0.5f && out[2] == -1.0f);
  /* the inputs are not reordered */
  CHECK(a[0] == 1 && a[1] == 10 && a[2] == -2);
}

static void test_trimmed_small(void) {
  const float v[5][1] = {{1}, {2}, {3}, {4}, {1000}};
  const float *vecs[5] = {v[0], v[1], v[2], v[3], v[4]};
  float out[1], scratch[5];
  CHECK_EQ_INT(bbi_robust_trim_count(5, 0.2), 1);
  CHECK_EQ_INT(bbi_robust_trim_count(10, 0.3), 3);
  CHECK_EQ_INT(bbi_robust_trim_count(100, 0.29), 29);
  CHECK_EQ_INT(bbi_robust_trim_count(5, 0.19), 0);
  CHECK_EQ_INT(bbi_robust_trimmed_mean(vecs, 5, 1, 0.2, out, scratch, NULL), 0);
  CHECK(out[0] == 3.0f);
  CHECK_EQ_INT(bbi_robust_trimmed_mean(vecs, 5, 1, 0.0, out, scratch, NULL), 0);
  CHECK(out[0] == 202.0f);
}

static void test_rejects(void) {
  const float ok[2] = {1, 2}, bad[2] = {0, NAN};
  const float *vecs[2] = {ok, bad};
  float out[2], scratch[2];
  bb_error err;
  CHECK_EQ_INT(bbi_robust_median(vecs, 2, 2, out, scratch, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(err.message, "vector 1") && strstr(err.message, "coordinate 1"), "%s",
            err.message);
  CHECK_EQ_INT(bbi_robust_median(vecs, 0, 2, out, scratch, &err), BB_ERR_INVALID_ARGUMENT);
  vecs[1] = ok;
  CHECK_EQ_INT(bbi_robust_trimmed_mean(vecs, 2, 2, 0.5, out, scratch, &err),
               BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bbi_robust_trimmed_mean(vecs, 2, 2, -0.1, out, scratch, &err),
               BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bbi_robust_trimmed_mean(vecs, 2, 2, 0.49, out, scratch, &err), 0);
}

/* Nine honest clients near 1.0 and one sending 1e30: FedAvg (equal weights) lands near
 * 1e29, while the median and the 10%-trimmed mean stay within the honest spread. */
static void test_byzantine_client(void) {
  enum { K = 10, D = 33 };
  static float v[K][D];
  const float *vecs[K];
  for (int i = 0; i < K; i++) {
    for (int j = 0; j < D; j++)
      v[i][j] = i == K - 1 ? 1e30f : 1.0f + 0.01f * (float)rng_real(-1, 1);
    vecs[i] = v[i];
  }
  float med[D], trim[D], avg[D], scratch[K];
  CHECK_EQ_INT(bbi_robust_median(vecs, K, D, med, scratch, NULL), 0);
  CHECK_EQ_INT(bbi_robust_trimmed_mean(vecs, K, D, 0.1, trim, scratch, NULL), 0);
  CHECK_EQ_INT(bbi_robust_trimmed_mean(vecs, K, D, 0.0, avg, scratch, NULL), 0);
  for (int j = 0; j < D; j++) {
    CHECK_MSG(fabsf(med[j] - 1.0f) <= 0.01f, "median[%d] = %g", j, (double)med[j]);
    CHECK_MSG(fabsf(trim[j] - 1.0f) <= 0.01f, "trimmed[%d] = %g", j, (double)trim[j]);
    CHECK_MSG(avg[j] > 1e28f, "mean[%d] = %g", j, (double)avg[j]);
  }
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void test_random_against_reference(void) {
  for (int trial = 0; trial < 200; trial++) {
    const size_t k = (size_t)rng_int(1, 70), d = (size_t)rng_int(1, 9);
    const double beta = rng_real(0, 0.49);
    const size_t t = bbi_robust_trim_count(k, beta);
    if (2 * t >= k) continue;
    float *data = malloc(k * d * sizeof *data), *out = malloc(d * sizeof *out),
          *med = malloc(d * sizeof *med), *scratch = malloc(k * sizeof *scratch);
    const float **vecs = malloc(k * sizeof *vecs);
    double *col = malloc(k * sizeof *col);
    for (size_t i = 0; i < k; i++) {
      vecs[i] = data + i * d;
      /* few distinct values, so ties are common */
      for (size_t j = 0; j < d; j++) data[i * d + j] = (float)rng_int(-5, 5) * 0.5f;
    }
    CHECK_EQ_INT(bbi_robust_trimmed_mean(vecs, k, d, beta, out, scratch, NULL), 0);
    CHECK_EQ_INT(bbi_robust_median(vecs, k, d, med, scratch, NULL), 0);
    for (size_t j = 0; j < d; j++) {
      for (size_t i = 0; i < k; i++) col[i] = data[i * d + j];
      qsort(col, k, sizeof *col, cmp_double);
      double s = 0;
      for (size_t i = t; i < k - t; i++) s += col[i];
      CHECK_MSG(out[j] == (float)(s / (double)(k - 2 * t)), "k=%zu beta=%g j=%zu", k, beta, j);
      const double m = k % 2 ? col[k / 2] : (col[k / 2 - 1] + col[k / 2]) / 2;
      CHECK_MSG(med[j] == (float)m, "k=%zu j=%zu: %g != %g", k, j, (double)med[j], m);
    }
    free(data), free(out), free(med), free(scratch), free(vecs), free(col);
  }
}

int main(void) {
  RUN(test_median_small);
  RUN(test_trimmed_small);
  RUN(test_rejects);
  RUN(test_byzantine_client);
  RUN(test_random_against_reference);
  return bb_test_finish();
}
