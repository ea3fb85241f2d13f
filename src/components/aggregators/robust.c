/* Coordinate-wise median and trimmed mean, norm bounding and Krum (see robust.h). */
#include "components/aggregators/robust.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "bb/common.h"
#include "tensor/kernels/kernels.h"

/* Insertion sort for the small cohorts typical of a round, heap sort beyond; both give
 * the same order for finite values, so the result never depends on which ran. */
static void sift_down(float *x, size_t root, size_t n) {
  for (;;) {
    size_t child = 2 * root + 1;
    if (child >= n) return;
    if (child + 1 < n && x[child] < x[child + 1]) child++;
    if (!(x[root] < x[child])) return;
    const float t = x[root];
    x[root] = x[child];
    x[child] = t;
    root = child;
  }
}

static void sort_floats(float *x, size_t n) {
  if (n <= 32) {
    for (size_t i = 1; i < n; i++) {
      const float v = x[i];
      size_t j = i;
      for (; j > 0 && v < x[j - 1]; j--) x[j] = x[j - 1];
      x[j] = v;
    }
    return;
  }
  for (size_t i = n / 2; i-- > 0;) sift_down(x, i, n);
  for (size_t end = n - 1; end > 0; end--) {
    const float t = x[0];
    x[0] = x[end];
    x[end] = t;
    sift_down(x, 0, end);
  }
}

static int check_inputs(const float *const *vecs, size_t k, size_t d, const float *out,
                        const float *scratch, const char *who, bb_error *err) {
  if (k == 0) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: no vectors", who);
  if (!vecs || (d && (!out || !scratch)))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: NULL argument", who);
  for (size_t i = 0; i < k; i++) {
    if (!vecs[i] && d) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: vector %zu is NULL", who, i);
    const size_t j = bbi_f32_first_nonfinite(vecs[i], d);
    if (j < d)
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: vector %zu has a non-finite value (%g) at coordinate %zu",
                          who, i, (double)vecs[i][j], j);
  }
  return 0;
}

/* Sorted values of coordinate j in scratch. */
static void gather_sorted(const float *const *vecs, size_t k, size_t j, float *scratch) {
  for (size_t i = 0; i < k; i++) scratch[i] = vecs[i][j];
  sort_floats(scratch, k);
}

int bbi_robust_median(const float *const *vecs, size_t k, size_t d, float *out, float *scratch,
                     bb_error *err) {
  const int rc = check_inputs(vecs, k, d, out, scratch, "median", err);
  if (rc) return rc;
  for (size_t j = 0; j < d; j++) {
    gather_sorted(vecs, k, j, scratch);
    out[j] = k % 2 ? scratch[k / 2]
                   : (float)(((double)scratch[k / 2 - 1] + (double)scratch[k / 2]) / 2.0);
  }
  return 0;
}

size_t bbi_robust_trim_count(size_t k, double beta) {
  /* The epsilon keeps products like 0.3·10 = 3.0000000000000004 or 0.29·100 =
   * 28.999999999999996 on the integer they mean. */
  return (size_t)floor(beta * (double)k + 1e-9);
}

int bbi_robust_trimmed_mean(const float *const *vecs, size_t k, size_t d, double beta,
                           float *out, float *scratch, bb_error *err) {
  if (!(beta >= 0.0 && beta < 0.5))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "trimmed mean: beta %g is outside [0, 0.5)", beta);
  const int rc = check_inputs(vecs, k, d, out, scratch, "trimmed mean", err);
  if (rc) return rc;
  const size_t trim = bbi_robust_trim_count(k, beta);
  if (2 * trim >= k)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "trimmed mean: trimming %zu from each end of %zu leaves nothing", trim, k);
  for (size_t j = 0; j < d; j++) {
    gather_sorted(vecs, k, j, scratch);
    double sum = 0.0;
    for (size_t i = trim; i < k - trim; i++) sum += (double)scratch[i];
    out[j] = (float)(sum / (double)(k - 2 * trim));
  }
  return 0;
}

static int by_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double bbi_robust_median_f64(double *x, size_t n) {
  qsort(x, n, sizeof *x, by_double);
  return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2.0;
}

/* |a - b|² (b NULL: the origin), summed in double. */
static double squared_distance(const float *a, const float *b, size_t d) {
  double sum = 0.0;
  for (size_t j = 0; j < d; j++) {
    const double diff = (double)a[j] - (b ? (double)b[j] : 0.0);
    sum += diff * diff;
  }
  return sum;
}

size_t bbi_robust_norm_scales(const float *const *vecs, size_t k, size_t d, const float *ref, double max_norm,
                             double factor, double *scale, double *norms, double *median) {
  for (size_t i = 0; i < k; i++) scale[i] = 1.0;
  if (median) *median = 0.0;
  if (k == 0) return 0;
  for (size_t i = 0; i < k; i++) norms[i] = sqrt(squared_distance(vecs[i], ref, d));
  /* the median sorts its input: scale is the scratch copy until set below */
  for (size_t i = 0; i < k; i++) scale[i] = norms[i];
  const double middle = bbi_robust_median_f64(scale, k);
  if (median) *median = middle;
  double bound = max_norm > 0 ? max_norm : INFINITY;
  if (factor > 0 && factor * middle < bound) bound = factor * middle;
  size_t pulled = 0;
  for (size_t i = 0; i < k; i++) {
    scale[i] = norms[i] > bound ? bound / norms[i] : 1.0;
    pulled += norms[i] > bound;
  }
  return pulled;
}

/* x held to the range of finite floats. */
static double to_float_range(double x) { return x > FLT_MAX ? FLT_MAX : x < -FLT_MAX ? -FLT_MAX : x; }

size_t bbi_robust_centered_clip(const float *const *vecs, const double *weights, size_t k, size_t d,
                               const float *ref, const float *step, double factor, float *out, double *dev,
                               double *center) {
  for (size_t j = 0; j < d; j++)
    center[j] = to_float_range((ref ? (double)ref[j] : 0.0) + (step ? (double)step[j] : 0.0));
  double total = 0.0;
  for (size_t i = 0; i < k; i++) {
    double sum = 0.0;
    for (size_t j = 0; j < d; j++) {
      const double diff = (double)vecs[i][j] - center[j];
      sum += diff * diff;
    }
    dev[i] = dev[k + i] = sqrt(sum);
    total += weights ? weights[i] : 1.0;
  }
  const double tau = k ? factor * bbi_robust_median_f64(dev + k, k) : 0.0;
  size_t clipped = 0;
  for (size_t i = 0; i < k; i++) { /* dev[i] becomes the share of vector i in out */
    const double keep = dev[i] > tau ? tau / dev[i] : 1.0;
    clipped += dev[i] > tau;
    dev[i] = keep * (weights ? weights[i] : 1.0) / total;
  }
  for (size_t j = 0; j < d; j++) {
    double moved = 0.0;
    for (size_t i = 0; i < k; i++) moved += dev[i] * ((double)vecs[i][j] - center[j]);
    out[j] = (float)(center[j] + moved);
  }
  return clipped;
}

int bbi_robust_krum_scores(const float *const *vecs, size_t k, size_t d, size_t f, double *scores, double *dist,
                          bb_error *err) {
  if (k == 0) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "krum: no vectors");
  for (size_t i = 0; i < k; i++) {
    const size_t j = bbi_f32_first_nonfinite(vecs[i], d);
    if (j < d)
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                          "krum: vector %zu has a non-finite value (%g) at coordinate %zu", i, (double)vecs[i][j], j);
  }
  size_t near = k > f + 2 ? k - f - 2 : 1;
  if (near > k - 1) near = k - 1;
  for (size_t i = 0; i < k; i++) {
    size_t m = 0;
    for (size_t j = 0; j < k; j++)
      if (j != i) dist[m++] = squared_distance(vecs[i], vecs[j], d);
    qsort(dist, m, sizeof *dist, by_double);
    double sum = 0.0;
    for (size_t t = 0; t < near; t++) sum += dist[t];
    scores[i] = sum;
  }
  return 0;
}

void bbi_robust_lowest(const double *scores, size_t k, size_t *order) {
  /* insertion sort of the indexes: stable, so equal scores keep the lower index first */
  for (size_t i = 0; i < k; i++) {
    size_t j = i;
    for (; j > 0 && scores[order[j - 1]] > scores[i]; j--) order[j] = order[j - 1];
    order[j] = i;
  }
}
