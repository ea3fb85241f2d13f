/* The Rényi-DP accountant for the sampled Gaussian mechanism (Mironov, Talwar and Zhang
 * 2019, "Rényi Differential Privacy of the Sampled Gaussian Mechanism").
 *
 * With μ0 = N(0, σ²), μ1 = N(1, σ²) and μ = (1 - q) μ0 + q μ1, one step has
 * RDP(α) = log(A_α) / (α - 1), A_α = E_{z~μ0}[(μ(z)/μ0(z))^α].
 * Integer α: the binomial expansion of ((1 - q) + q μ1/μ0)^α integrates term by term:
 *   A_α = Σ_{k=0..α} C(α,k) (1-q)^(α-k) q^k exp((k² - k) / (2σ²)).
 * Fractional α: the binomial series converges only where q μ1/μ0 < 1 - q, i.e. below
 * z0 = σ² log(1/q - 1) + 1/2; above it the series in the other term converges. Splitting
 * the integral at z0, each term integrates to a Gaussian tail:
 *   A_α = Σ_k C(α,k) [ (1-q)^(α-k) q^k e^{(k²-k)/(2σ²)} ½ erfc((k - z0) / (√2 σ))
 *                    + q^(α-k) (1-q)^k e^{((α-k)²-(α-k))/(2σ²)} ½ erfc((z0 - (α-k)) / (√2 σ)) ],
 * summed until the terms are negligible. Everything runs in logarithms with signs, as the
 * binomial coefficients of a fractional α alternate. */
#include <math.h>
#include <string.h>

#include "bb/privacy.h"

/* 1.1 to 10.9 by 0.1, 11 to 64, then 80, 96, 128, 192, 256, 512 and 1024 */
static const double ORDERS[BB_RDP_ORDERS] = {
    1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0, 2.1, 2.2, 2.3, 2.4, 2.5, 2.6, 2.7, 2.8, 2.9, 3.0, 3.1,
    3.2, 3.3, 3.4, 3.5, 3.6, 3.7, 3.8, 3.9, 4.0, 4.1, 4.2, 4.3, 4.4, 4.5, 4.6, 4.7, 4.8, 4.9, 5.0, 5.1, 5.2,
    5.3, 5.4, 5.5, 5.6, 5.7, 5.8, 5.9, 6.0, 6.1, 6.2, 6.3, 6.4, 6.5, 6.6, 6.7, 6.8, 6.9, 7.0, 7.1, 7.2, 7.3,
    7.4, 7.5, 7.6, 7.7, 7.8, 7.9, 8.0, 8.1, 8.2, 8.3, 8.4, 8.5, 8.6, 8.7, 8.8, 8.9, 9.0, 9.1, 9.2, 9.3, 9.4,
    9.5, 9.6, 9.7, 9.8, 9.9, 10.0, 10.1, 10.2, 10.3, 10.4, 10.5, 10.6, 10.7, 10.8, 10.9, 11, 12, 13, 14, 15,
    16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41,
    42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 80, 96, 128,
    192, 256, 512, 1024};

const double *bb_rdp_orders(void) { return ORDERS; }

#define LOG_SQRT_PI 0.57236494292470008707 /* log(√π) */

/* log(e^a + e^b) */
static double log_add(double a, double b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  const double m = a > b ? a : b;
  return m + log1p(exp(-fabs(a - b)));
}

/* log(e^a - e^b), a >= b */
static double log_sub(double a, double b) {
  if (b == -INFINITY) return a;
  if (a <= b) return -INFINITY;
  return a + log1p(-exp(b - a));
}

/* log(erfc(x)); past x = 25 erfc nears the end of double range, so there its asymptotic
 * expansion, erfc(x) = e^{-x²} / (x √π) (1 - 1/(2x²) + 3/(4x⁴) - 15/(8x⁶) + 105/(16x⁸)),
 * good to 1e-11 there. */
static double log_erfc(double x) {
  if (x < 25) return log(erfc(x));
  const double r = 1 / (x * x);
  const double series = 1 - r / 2 + 3 * r * r / 4 - 15 * r * r * r / 8 + 105 * r * r * r * r / 16;
  return -x * x - log(x) - LOG_SQRT_PI + log(series);
}

static double log_a_integer(double q, double sigma, int alpha) {
  double acc = -INFINITY;
  for (int k = 0; k <= alpha; k++) {
    const double log_binom = lgamma(alpha + 1.0) - lgamma(k + 1.0) - lgamma(alpha - k + 1.0);
    const double term = log_binom + (alpha - k) * log1p(-q) + k * log(q) + (double)k * (k - 1) / (2 * sigma * sigma);
    acc = log_add(acc, term);
  }
  return acc;
}

static double log_a_fractional(double q, double sigma, double alpha) {
  const double z0 = sigma * sigma * log(1 / q - 1) + 0.5;
  const double root2_sigma = sqrt(2.0) * sigma;
  double pos = -INFINITY, neg = -INFINITY; /* the positive and negative terms, apart */
  double log_binom = 0;                   /* log |C(α, k)| */
  int sign = 1;                           /* of C(α, k) */
  for (int k = 0; k < 100000; k++) {
    if (k > 0) {
      const double f = alpha - k + 1;
      log_binom += log(fabs(f)) - log((double)k);
      if (f < 0) sign = -sign;
    }
    const double j = alpha - k;
    const double t0 = log_binom + k * log(q) + j * log1p(-q) + (k * (double)k - k) / (2 * sigma * sigma) +
                      log(0.5) + log_erfc((k - z0) / root2_sigma);
    const double t1 = log_binom + j * log(q) + k * log1p(-q) + (j * j - j) / (2 * sigma * sigma) + log(0.5) +
                      log_erfc((z0 - j) / root2_sigma);
    const double t = log_add(t0, t1);
    if (sign > 0) pos = log_add(pos, t);
    else neg = log_add(neg, t);
    if (k > alpha && t < -40) break;
  }
  return log_sub(pos, neg);
}

int bb_rdp_sampled_gaussian(double q, double sigma, double alpha, double *rdp, bb_error *err) {
  if (!rdp) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "rdp: no output");
  if (!(q >= 0 && q <= 1)) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "rdp: sampling rate %g (0..1)", q);
  if (!(sigma > 0) || !isfinite(sigma))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "rdp: noise multiplier %g (finite, > 0)", sigma);
  if (!(alpha > 1) || !isfinite(alpha)) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "rdp: order %g (> 1)", alpha);
  if (q == 0) {
    *rdp = 0;
    return 0;
  }
  if (q == 1) {
    *rdp = alpha / (2 * sigma * sigma);
    return 0;
  }
  const double log_a = alpha == floor(alpha) && alpha <= 1e6 ? log_a_integer(q, sigma, (int)alpha)
                                                            : log_a_fractional(q, sigma, alpha);
  *rdp = log_a / (alpha - 1);
  if (!(*rdp >= 0)) *rdp = 0; /* A_α >= 1 always; rounding may dip a hair below */
  return 0;
}

int bb_rdp_accountant_add(bb_rdp_accountant *acc, double q, double sigma, uint64_t steps, bb_error *err) {
  if (!acc) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "rdp: no accountant");
  const double *orders = ORDERS;
  double step[BB_RDP_ORDERS];
  for (size_t i = 0; i < BB_RDP_ORDERS; i++) {
    int rc = bb_rdp_sampled_gaussian(q, sigma, orders[i], &step[i], err);
    if (rc) return rc;
  }
  for (size_t i = 0; i < BB_RDP_ORDERS; i++) acc->rdp[i] += step[i] * (double)steps;
  acc->steps += steps;
  return 0;
}

int bb_rdp_accountant_epsilon(const bb_rdp_accountant *acc, double delta, double *epsilon, double *order,
                              bb_error *err) {
  if (!acc || !epsilon) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "rdp: no accountant or output");
  if (!(delta > 0 && delta < 1)) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "rdp: delta %g (0 < delta < 1)", delta);
  const double *orders = ORDERS;
  double best = INFINITY, best_order = orders[0];
  for (size_t i = 0; i < BB_RDP_ORDERS; i++) {
    const double eps = acc->rdp[i] + log(1 / delta) / (orders[i] - 1);
    if (eps < best) {
      best = eps;
      best_order = orders[i];
    }
  }
  *epsilon = best;
  if (order) *order = best_order;
  return 0;
}

int bb_dp_epsilon(double q, double sigma, uint64_t steps, double delta, double *epsilon, double *order, bb_error *err) {
  bb_rdp_accountant acc;
  memset(&acc, 0, sizeof acc);
  int rc = bb_rdp_accountant_add(&acc, q, sigma, steps, err);
  return rc ? rc : bb_rdp_accountant_epsilon(&acc, delta, epsilon, order, err);
}
