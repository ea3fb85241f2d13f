/* Differential privacy over float vectors (bb/privacy.h): the discrete Gaussian sampler
 * against its exact probabilities, noise on the grid whatever the input's low bits, the
 * clip that holds after rounding, DP-FedAvg's client step, adaptive clipping. Seeded, so
 * every statistic is the same on every run; the thresholds are chi-square's at p = 1e-6. */
#include <math.h>
#include <string.h>

#include "bb/privacy.h"
#include "harness.h"
#include "privacy/dp.h"
#include "privacy/dp_sample.h"
#include "privacy/seeded_random.h"

/* N samples at sigma against P(y) = exp(-y²/2σ²) / Σ_z exp(-z²/2σ²), the tails beyond
 * ±4σ in one bin each. */
static void pmf_test(double sigma, int n, double threshold) {
  sr_rng rng;
  sr_rng_seed(&rng, (uint64_t)(sigma * 1000));
  bb_random_source src = sr_source(&rng);
  bbi_prng prng;
  CHECK_EQ_INT(bbi_prng_init(&prng, &src, NULL), 0);
  bbi_dgauss g;
  bbi_dgauss_init(&g, sigma);
  const int half = (int)ceil(4 * sigma), bins = 2 * half + 3;
  static long counts[64];
  memset(counts, 0, sizeof counts);
  double mean = 0;
  for (int i = 0; i < n; i++) {
    const int64_t y = bbi_dgauss_sample(&g, &prng);
    mean += (double)y;
    counts[y < -half ? 0 : y > half ? bins - 1 : y + half + 1]++;
  }
  bbi_prng_wipe(&prng);
  double norm = 0;
  for (int z = -200; z <= 200; z++) norm += exp(-z * z / (2 * sigma * sigma));
  double chi2 = 0;
  for (int b = 0; b < bins; b++) {
    double p = 0;
    if (b == 0 || b == bins - 1)
      for (int z = half + 1; z <= 200; z++) p += exp(-z * z / (2 * sigma * sigma)) / norm;
    else
      p = exp(-(double)(b - half - 1) * (b - half - 1) / (2 * sigma * sigma)) / norm;
    const double expect = p * n;
    if (expect > 0) chi2 += (counts[b] - expect) * (counts[b] - expect) / expect;
  }
  printf("  sigma %g: %d samples, chi2 %.1f over %d bins, mean %.4f\n", sigma, n, chi2, bins, mean / n);
  CHECK(chi2 < threshold);
  CHECK(fabs(mean / n) < 5 * sigma / sqrt(n));
}

static void test_discrete_gaussian_pmf(void) {
  pmf_test(3.0, 200000, 72.2);  /* 27 bins, 26 degrees of freedom: p = 1e-6 is at 74.5 */
  pmf_test(1.5, 200000, 50.8);  /* 15 bins */
}

/* At the scales the grid uses (2^16 steps a stddev), the moments. */
static void test_discrete_gaussian_large(void) {
  sr_rng rng;
  sr_rng_seed(&rng, 5);
  bb_random_source src = sr_source(&rng);
  bbi_prng prng;
  CHECK_EQ_INT(bbi_prng_init(&prng, &src, NULL), 0);
  const double sigma = 65536.3;
  bbi_dgauss g;
  bbi_dgauss_init(&g, sigma);
  const int n = 100000;
  double s1 = 0, s2 = 0, s4 = 0;
  for (int i = 0; i < n; i++) {
    const double y = (double)bbi_dgauss_sample(&g, &prng);
    s1 += y, s2 += y * y, s4 += y * y * y * y;
  }
  bbi_prng_wipe(&prng);
  const double var = s2 / n, kurt = s4 / n / (var * var);
  printf("  sigma %g: mean %.1f, stddev %.1f, kurtosis %.3f\n", sigma, s1 / n, sqrt(var), kurt);
  CHECK(fabs(s1 / n) < 5 * sigma / sqrt(n));
  CHECK(fabs(var / (sigma * sigma) - 1) < 5 * sqrt(2.0 / n));
  CHECK(fabs(kurt - 3) < 0.1);
}

static bool on_grid(const float *x, size_t n, double grid) {
  for (size_t i = 0; i < n; i++) {
    const double k = x[i] / grid;
    if (k != floor(k)) return false;
  }
  return true;
}

/* The output is grid multiples; two inputs that round alike give the same output under
 * the same randomness, so no low bit of the input shows through. */
static void test_noise_on_grid(void) {
  enum { N = 20000 };
  static float a[N], b[N];
  const double stddev = 0.05, grid = 0x1p-18;
  for (int i = 0; i < N; i++) {
    const double k = (double)(i % 97) * 2000 - 50000;
    a[i] = (float)((k + 0.1) * grid);
    b[i] = (float)((k - 0.3 + 0.1 * (i % 5)) * grid); /* rounds to the same step */
  }
  sr_rng ra, rb;
  sr_rng_seed(&ra, 9);
  sr_rng_seed(&rb, 9);
  bb_random_source sa = sr_source(&ra), sb = sr_source(&rb);
  static float before[N];
  memcpy(before, a, sizeof before);
  bb_error err = {0};
  CHECK_EQ_INT(bb_dp_add_gaussian(a, N, stddev, grid, &sa, &err), 0);
  CHECK_EQ_INT(bb_dp_add_gaussian(b, N, stddev, grid, &sb, &err), 0);
  CHECK(on_grid(a, N, grid));
  CHECK(memcmp(a, b, sizeof a) == 0);
  double s2 = 0;
  for (int i = 0; i < N; i++) s2 += ((double)a[i] - before[i]) * ((double)a[i] - before[i]);
  const double sd = sqrt(s2 / N);
  printf("  stddev asked %g, measured %.5f\n", stddev, sd);
  CHECK(fabs(sd / stddev - 1) < 5 * sqrt(0.5 / N));
  /* the automatic grid is a power of two with 2^16 to 2^17 steps a stddev */
  float one = 0.25f;
  CHECK_EQ_INT(bb_dp_add_gaussian(&one, 1, 0.3, 0, NULL, &err), 0);
  CHECK(on_grid(&one, 1, 0x1p-18));
  /* refusals */
  CHECK_EQ_INT(bb_dp_add_gaussian(a, N, 0, 0, NULL, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_dp_add_gaussian(a, N, 0.1, 0.3, NULL, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "power of two") != NULL);
  CHECK_EQ_INT(bb_dp_add_gaussian(a, N, 0.1, 1.0, NULL, &err), BB_ERR_INVALID_ARGUMENT);
  float nan = NAN;
  CHECK_EQ_INT(bb_dp_add_gaussian(&nan, 1, 0.1, 0, NULL, &err), BB_ERR_INVALID_ARGUMENT);
}

/* Clipped to C, then rounded to the grid, a vector's norm may grow by up to
 * sqrt(n) grid / 2: the clip leaves that room, so the rounded vector is within C. The
 * worst case: every element just past a half step, rounding outward. */
static void test_clip_holds_after_rounding(void) {
  enum { N = 4096 };
  static float x[N];
  /* 4096 elements of 15.51 steps: norm 64 × 15.51 steps; rounded, 64 × 16 */
  const double grid = 0x1p-10, clip = 64 * 15.51 * 0x1p-10;
  for (int i = 0; i < N; i++) x[i] = (float)(15.51 * grid * (i % 2 ? -1 : 1));
  double scale;
  bb_error err = {0};
  CHECK_EQ_INT(bbi_dp_clip_to_grid(x, N, clip, grid, &scale, &err), 0);
  unsigned __int128 ksq = 0;
  for (int i = 0; i < N; i++) {
    const long long k = llround(x[i] / grid);
    ksq += (unsigned __int128)(k * k);
  }
  const double rounded_norm = sqrt((double)ksq) * grid;
  printf("  rounded norm %.9f, clip %g\n", rounded_norm, clip);
  CHECK(rounded_norm <= clip);
  /* a grid too coarse for the vector is refused rather than clipping to almost nothing */
  CHECK_EQ_INT(bbi_dp_clip_to_grid(x, N, clip, 0x1p-4, &scale, &err), BB_ERR_INVALID_ARGUMENT);
}

static void test_client_privatize(void) {
  enum { N = 5000 };
  static float x[N];
  for (int i = 0; i < N; i++) x[i] = 0.1f;
  sr_rng rng;
  sr_rng_seed(&rng, 11);
  bb_dp_client_options o = {.struct_size = sizeof o, .clip = 1.0, .noise_multiplier = 1.1, .clients = 10};
  o.random = sr_source(&rng);
  bb_dp_report rep;
  bb_error err = {0};
  CHECK_EQ_INT(bb_dp_client_privatize(x, N, &o, &rep, &err), 0);
  CHECK(fabs(rep.norm - 0.1 * sqrt(N)) < 1e-3);
  CHECK(rep.scale < 1.0 / (0.1 * sqrt(N)) + 1e-9 && rep.scale > 0.99 / (0.1 * sqrt(N)));
  CHECK(fabs(rep.stddev - 1.1 / sqrt(10.0)) < 1e-12);
  int e;
  CHECK(frexp(rep.grid, &e) == 0.5 && rep.stddev / rep.grid >= 65536 && rep.stddev / rep.grid < 131072);
  CHECK(on_grid(x, N, rep.grid));
  /* the noise dominates a clipped update of norm 1 spread over 5000 elements */
  double s2 = 0;
  for (int i = 0; i < N; i++) s2 += (double)x[i] * x[i];
  CHECK(fabs(sqrt(s2 / N) / rep.stddev - 1) < 0.05);
  /* without noise: clipping alone */
  for (int i = 0; i < N; i++) x[i] = 0.1f;
  bb_dp_client_options clip_only = {.struct_size = sizeof clip_only, .clip = 2.0};
  CHECK_EQ_INT(bb_dp_client_privatize(x, N, &clip_only, &rep, &err), 0);
  s2 = 0;
  for (int i = 0; i < N; i++) s2 += (double)x[i] * x[i];
  CHECK(sqrt(s2) <= 2.0 && sqrt(s2) > 1.9999);
  CHECK(rep.stddev == 0 && rep.grid == 0);
  /* refusals */
  bb_dp_client_options bad = o;
  bad.struct_size = sizeof bad + 8;
  CHECK_EQ_INT(bb_dp_client_privatize(x, N, &bad, &rep, &err), BB_ERR_INVALID_ARGUMENT);
  bad = o, bad.clip = 0;
  CHECK_EQ_INT(bb_dp_client_privatize(x, N, &bad, &rep, &err), BB_ERR_INVALID_ARGUMENT);
  bad = o, bad.noise_multiplier = -1;
  CHECK_EQ_INT(bb_dp_client_privatize(x, N, &bad, &rep, &err), BB_ERR_INVALID_ARGUMENT);
  x[7] = INFINITY;
  CHECK_EQ_INT(bb_dp_client_privatize(x, N, &o, &rep, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "element 7") != NULL);
}

static void test_clip(void) {
  float v[3] = {3, 4, 0};
  CHECK(bb_dp_clip(v, 3, 10) == 5.0);
  CHECK(v[0] == 3 && v[1] == 4);
  CHECK(bb_dp_clip(v, 3, 1) == 5.0);
  CHECK(sqrtf(v[0] * v[0] + v[1] * v[1]) <= 1.0f);
  CHECK(fabsf(v[0] - 0.6f) < 1e-6f && fabsf(v[1] - 0.8f) < 1e-6f);
}

/* Andrew et al.'s update: all updates within the clip (and a negligible count noise)
 * shrink it by exp(-rate (1 - quantile)); none within grow it by exp(rate quantile). */
static void test_adaptive_clip(void) {
  bb_dp_adaptive_clip st = {.struct_size = sizeof st, .clip = 1.0, .count_stddev = 1e-6};
  double b;
  bb_error err = {0};
  CHECK_EQ_INT(bb_dp_adaptive_clip_update(&st, 10, 10, NULL, &b, &err), 0);
  CHECK(fabs(b - 1) < 1e-5);
  CHECK(fabs(st.clip - exp(-0.2 * 0.5)) < 1e-6);
  st.clip = 1.0;
  CHECK_EQ_INT(bb_dp_adaptive_clip_update(&st, 0, 10, NULL, &b, &err), 0);
  CHECK(fabs(st.clip - exp(0.2 * 0.5)) < 1e-6);
  /* with the default count noise (clients / 20) the fraction is noised around the truth */
  bb_dp_adaptive_clip noisy = {.struct_size = sizeof noisy, .clip = 1.0};
  sr_rng rng;
  sr_rng_seed(&rng, 12);
  bb_random_source src = sr_source(&rng);
  double mean = 0;
  for (int i = 0; i < 400; i++) {
    noisy.clip = 1.0;
    CHECK_EQ_INT(bb_dp_adaptive_clip_update(&noisy, 30, 100, &src, &b, &err), 0);
    mean += b / 400;
  }
  CHECK(fabs(mean - 0.3) < 5 * (5.0 / 100) / 20);
  CHECK_EQ_INT(bb_dp_adaptive_clip_update(&st, 11, 10, NULL, &b, &err), BB_ERR_INVALID_ARGUMENT);
  bb_dp_adaptive_clip unsized = {.clip = 1.0};
  CHECK_EQ_INT(bb_dp_adaptive_clip_update(&unsized, 1, 10, NULL, &b, &err), BB_ERR_INVALID_ARGUMENT);
  /* the update's multiplier: (z^-2 - (2 σ_b)^-2)^-1/2 */
  double z;
  CHECK_EQ_INT(bb_dp_adaptive_noise_multiplier(1.0, 5.0, &z, &err), 0);
  CHECK(fabs(z - 1 / sqrt(1 - 0.01)) < 1e-12);
  CHECK_EQ_INT(bb_dp_adaptive_noise_multiplier(1.0, 0.5, &z, &err), BB_ERR_INVALID_ARGUMENT);
}

/* Whatever the noise draws, one update moves the clip by a factor within
 * [exp(-η(1 - γ)), exp(η γ)]: the noised fraction is held to [0, 1]. A count noise of
 * 1000 on 3 clients draws fractions far outside it nearly every time. */
static void test_adaptive_clip_step_is_bounded(void) {
  sr_rng rng;
  sr_rng_seed(&rng, 5);
  bb_random_source src = sr_source(&rng);
  bb_error err = {0};
  int at_bound = 0;
  for (int i = 0; i < 200; i++) {
    bb_dp_adaptive_clip st = {.struct_size = sizeof st, .clip = 1.0, .target_quantile = 0.3, .count_stddev = 1000};
    double b;
    CHECK_EQ_INT(bb_dp_adaptive_clip_update(&st, (uint32_t)(i % 4), 3, &src, &b, &err), 0);
    CHECK_MSG(b >= 0 && b <= 1, "fraction %g", b);
    CHECK_MSG(st.clip >= exp(-0.2 * 0.7) * (1 - 1e-12) && st.clip <= exp(0.2 * 0.3) * (1 + 1e-12), "clip %g",
              st.clip);
    at_bound += b == 0 || b == 1;
  }
  CHECK(at_bound > 190);
  /* under Poisson sampling the fraction divides by the expected count, not the count */
  bb_dp_adaptive_clip st = {.struct_size = sizeof st, .clip = 1.0, .count_stddev = 1e-9, .expected_clients = 20};
  double b;
  CHECK_EQ_INT(bb_dp_adaptive_clip_update(&st, 7, 8, &src, &b, &err), 0);
  CHECK_MSG(fabs(b - ((7 - 4) / 20.0 + 0.5)) < 1e-6, "fraction %g", b);
  CHECK_EQ_INT(bb_dp_adaptive_clip_update(&st, 0, 0, &src, &b, &err), 0); /* nobody sampled */
  CHECK_MSG(fabs(b - 0.5) < 1e-6, "fraction %g", b);
}

/* Poisson sampling: over 400 round keys and 50 ids, the sampled fraction is within 6
 * binomial standard deviations of the rate; an id asking again in a round gets the same
 * answer; rounds draw independently (an id is in about rate² of pairs of rounds). */
static void test_poisson_sample(void) {
  sr_rng rng;
  sr_rng_seed(&rng, 77);
  bb_random_source src = sr_source(&rng);
  enum { ROUNDS = 400, IDS = 50 };
  const double q = 0.1;
  static bool in[ROUNDS][IDS];
  long sampled = 0, both = 0;
  for (int r = 0; r < ROUNDS; r++) {
    uint8_t key[BB_DP_SAMPLE_KEY_BYTES];
    CHECK_EQ_INT(bb_dp_sample_key(&src, key, NULL), 0);
    for (int i = 0; i < IDS; i++) {
      const uint8_t id[4] = {(uint8_t)i, 1, 2, 3};
      in[r][i] = bb_dp_sampled(key, id, sizeof id, q);
      CHECK(bb_dp_sampled(key, id, sizeof id, q) == in[r][i]);
      CHECK(bb_dp_sampled(key, id, sizeof id, 1.0) && !bb_dp_sampled(key, id, sizeof id, 0.0));
      sampled += in[r][i];
      if (r) both += in[r][i] && in[r - 1][i];
    }
  }
  const double n = ROUNDS * IDS, sd = sqrt(n * q * (1 - q));
  CHECK_MSG(fabs(sampled - n * q) < 6 * sd, "%ld of %g sampled at rate %g", sampled, n, q);
  const double pairs = (ROUNDS - 1) * IDS;
  CHECK_MSG(fabs(both - pairs * q * q) < 6 * sqrt(pairs * q * q), "%ld of %g pairs", both, pairs);
  /* the system CSPRNG gives keys too */
  uint8_t k1[BB_DP_SAMPLE_KEY_BYTES], k2[BB_DP_SAMPLE_KEY_BYTES];
  CHECK_EQ_INT(bb_dp_sample_key(NULL, k1, NULL), 0);
  CHECK_EQ_INT(bb_dp_sample_key(NULL, k2, NULL), 0);
  CHECK(memcmp(k1, k2, sizeof k1) != 0);
}

int main(void) {
  RUN(test_discrete_gaussian_pmf);
  RUN(test_discrete_gaussian_large);
  RUN(test_noise_on_grid);
  RUN(test_clip_holds_after_rounding);
  RUN(test_client_privatize);
  RUN(test_clip);
  RUN(test_adaptive_clip);
  RUN(test_adaptive_clip_step_is_bounded);
  RUN(test_poisson_sample);
  return bb_test_finish();
}
