/* Robust aggregators: exact small cases, a Byzantine client against FedAvg, the trimmed
 * mean checked against a sort-everything reference on random data, the distance bound
 * and Krum's scores. */
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

/* The distance bound: a fixed one, factor × the median distance, the smaller of both;
 * 3e38 everywhere is a finite distance. */
static void test_norm_scales(void) {
  const float ref[2] = {1, 1};
  const float a[2] = {4, 5}, b[2] = {1, 2}, c[2] = {2, 1}, huge[2] = {3e38f, 3e38f};
  const float *vecs[4] = {a, b, c, huge};
  double scale[4], norms[4], median;
  /* distances 5, 1, 1, ~4.2e38 (the median, (1 + 5) / 2, is reported even without a bound) */
  CHECK_EQ_INT(bbi_robust_norm_scales(vecs, 4, 2, ref, 0, 0, scale, norms, &median), 0);
  CHECK(scale[0] == 1 && scale[3] == 1 && median == 3 && norms[0] == 5 && norms[1] == 1);
  CHECK_EQ_INT(bbi_robust_norm_scales(vecs, 4, 2, ref, 2.5, 0, scale, norms, NULL), 2);
  CHECK(fabs(scale[0] - 0.5) < 1e-12 && scale[1] == 1 && scale[2] == 1 && scale[3] > 0 && scale[3] < 1e-37);
  /* the median distance is (1 + 5) / 2 = 3: a factor of 1 bounds at 3 */
  CHECK_EQ_INT(bbi_robust_norm_scales(vecs, 4, 2, ref, 0, 1, scale, norms, &median), 2);
  CHECK(fabs(scale[0] - 0.6) < 1e-12 && scale[1] == 1);
  CHECK_EQ_INT(bbi_robust_norm_scales(vecs, 4, 2, ref, 2, 1, scale, norms, NULL), 2); /* the fixed 2 is smaller */
  CHECK(fabs(scale[0] - 0.4) < 1e-12);
  /* from the origin */
  CHECK_EQ_INT(bbi_robust_norm_scales(vecs, 2, 2, NULL, 1, 0, scale, norms, NULL), 2);
  CHECK(fabs(scale[1] - 1 / sqrt(5.0)) < 1e-12);
  double x[5] = {5, 1, 4, 2, 3};
  CHECK(bbi_robust_median_f64(x, 5) == 3 && bbi_robust_median_f64(x, 4) == 2.5);
}

/* Centered clipping, worked by hand: the center is ref + step = (1, 0); the deviations
 * are 1, 1, 3 and 0, their median 1; the far one is pulled back to 1, and the result is
 * the center plus the mean of the clipped deviations. */
static void test_centered_clip(void) {
  const float ref[2] = {0, 0}, step[2] = {1, 0};
  const float a[2] = {1, 1}, b[2] = {1, -1}, c[2] = {4, 0}, d[2] = {1, 0};
  const float *vecs[4] = {a, b, c, d};
  float out[2];
  double dev[8], center[2];
  /* clipped deviations (0, 1), (0, -1), (1, 0), (0, 0): mean (0.25, 0) */
  CHECK_EQ_INT(bbi_robust_centered_clip(vecs, NULL, 4, 2, ref, step, 1, out, dev, center), 1);
  CHECK(out[0] == 1.25f && out[1] == 0);
  /* weights 1, 1, 2, 0: (2·(1, 0)) / 4 */
  const double w[4] = {1, 1, 2, 0};
  CHECK_EQ_INT(bbi_robust_centered_clip(vecs, w, 4, 2, ref, step, 1, out, dev, center), 1);
  CHECK(out[0] == 1.5f && out[1] == 0);
  /* a factor of 3 clips nothing: the plain mean (7/4, 0) */
  CHECK_EQ_INT(bbi_robust_centered_clip(vecs, NULL, 4, 2, ref, step, 3, out, dev, center), 0);
  CHECK(out[0] == 1.75f && out[1] == 0);
  /* no step: the center is ref itself; no vectors: the center is the result */
  CHECK_EQ_INT(bbi_robust_centered_clip(vecs, NULL, 0, 2, ref, step, 1, out, dev, center), 0);
  CHECK(out[0] == 1 && out[1] == 0);
  CHECK_EQ_INT(bbi_robust_centered_clip(vecs, NULL, 0, 2, ref, NULL, 1, out, dev, center), 0);
  CHECK(out[0] == 0 && out[1] == 0);
  /* a center past the float range is held to it, so the result stays finite */
  const float top[1] = {3e38f}, low[1] = {-3e38f};
  const float *one[1] = {low};
  CHECK_EQ_INT(bbi_robust_centered_clip(one, NULL, 1, 1, top, top, 1, out, dev, center), 0);
  CHECK(isfinite(out[0]) && out[0] == -3e38f);
}

/* Krum: five points in a cluster and two far away; the best score is the cluster's
 * centre, the far ones score worst. */
static void test_krum(void) {
  const float p[7][2] = {{0, 0}, {1, 0}, {0, 1}, {-1, 0}, {0, -1}, {50, 50}, {51, 50}};
  const float *vecs[7] = {p[0], p[1], p[2], p[3], p[4], p[5], p[6]};
  double scores[7], dist[7];
  size_t order[7];
  CHECK_EQ_INT(bbi_robust_krum_scores(vecs, 7, 2, 2, scores, dist, NULL), 0);
  /* k - f - 2 = 3 nearest: the centre's are at squared distance 1, 1, 1 */
  CHECK(scores[0] == 3);
  CHECK(scores[1] == 1 + 2 + 2); /* (1,0): (0,0) at 1, (0,1) and (0,-1) at 2 */
  bbi_robust_lowest(scores, 7, order);
  CHECK(order[0] == 0 && (order[5] == 5 || order[5] == 6) && (order[6] == 5 || order[6] == 6));
  /* equal scores keep the lower index first */
  CHECK(order[1] == 1 && order[2] == 2 && order[3] == 3 && order[4] == 4);
  /* one vector scores 0; a NaN is refused naming where */
  CHECK_EQ_INT(bbi_robust_krum_scores(vecs, 1, 2, 0, scores, dist, NULL), 0);
  CHECK(scores[0] == 0);
  const float bad[2] = {0, NAN};
  const float *with_nan[2] = {p[0], bad};
  bb_error err;
  CHECK_EQ_INT(bbi_robust_krum_scores(with_nan, 2, 2, 0, scores, dist, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(err.message, "vector 1") && strstr(err.message, "coordinate 1"), "%s", err.message);
}

int main(void) {
  RUN(test_median_small);
  RUN(test_norm_scales);
  RUN(test_centered_clip);
  RUN(test_krum);
  RUN(test_trimmed_small);
  RUN(test_rejects);
  RUN(test_byzantine_client);
  RUN(test_random_against_reference);
  return bb_test_finish();
}
