/* Differential privacy over float vectors: L2 clipping, Gaussian noise sampled exactly on
 * a power-of-two grid, DP-FedAvg's client step and adaptive clipping.
 *
 * Noise is added in integers: the input is rounded to the grid, an integer discrete
 * Gaussian of scale stddev / grid is added, and the result scaled back. Adding
 * floating-point Gaussian samples to floats instead would let the output's low bits depend
 * on the input's (the floating-point attacks on DP); here every output is a multiple of the
 * grid whatever the input. Clipping before rounding leaves room for the rounding, so the
 * rounded vector's norm is within the clip too (checked exactly on the integers). */
#include <math.h>
#include <string.h>

#include "bb/privacy.h"
#include "privacy/dp.h"
#include "privacy/dp_sample.h"
#include "privacy/random.h"

/* The automatic grid puts stddev between 2^16 and 2^17 grid steps. */
#define AUTO_GRID_STEPS 16

double bb_dp_clip(float *x, size_t n, double clip) {
  double sq = 0;
  for (size_t i = 0; i < n; i++) sq += (double)x[i] * x[i];
  const double norm = sqrt(sq);
  if (clip > 0 && norm > clip) {
    const double scale = clip / norm;
    for (size_t i = 0; i < n; i++) x[i] = (float)(x[i] * scale);
    /* float rounding may leave the norm a hair above the clip: shrink until it is not */
    for (double s2 = 0;; s2 = 0) {
      for (size_t i = 0; i < n; i++) s2 += (double)x[i] * x[i];
      if (sqrt(s2) <= clip) break;
      for (size_t i = 0; i < n; i++) x[i] = nextafterf(x[i], 0.0f);
    }
  }
  return norm;
}

static bool power_of_two(double g) {
  int e;
  return g > 0 && isfinite(g) && frexp(g, &e) == 0.5;
}

static int resolve_grid(double stddev, double grid, double *out, bb_error *err) {
  if (!(stddev > 0) || !isfinite(stddev))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "dp: noise stddev %g (finite, > 0)", stddev);
  if (grid == 0) grid = ldexp(1.0, ilogb(stddev) - AUTO_GRID_STEPS);
  if (!power_of_two(grid))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "dp: grid %g is not a power of two", grid);
  const double steps = stddev / grid;
  if (steps < 1 || steps > BBI_DGAUSS_SCALE_MAX)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "dp: stddev %g is %g grid steps of %g (1..%g)", stddev, steps, grid,
                        BBI_DGAUSS_SCALE_MAX);
  *out = grid;
  return 0;
}

/* x rounded to the grid, plus grid × N_Z(0, (stddev/grid)^2), elementwise. */
static int noise_on_grid(float *x, size_t n, double stddev, double grid, const bb_random_source *random,
                         bb_error *err) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(x[i]) || fabs((double)x[i] / grid) > 0x1p62)
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "dp: element %zu (%g) is not finite or too far from 0 for grid %g",
                          i, (double)x[i], grid);
  bbi_prng prng;
  int rc = bbi_prng_init(&prng, random, err);
  if (rc) return rc;
  bbi_dgauss g;
  bbi_dgauss_init(&g, stddev / grid);
  for (size_t i = 0; i < n; i++) {
    const int64_t k = (int64_t)llround((double)x[i] / grid) + bbi_dgauss_sample(&g, &prng);
    x[i] = (float)ldexp((double)k, ilogb(grid));
  }
  bbi_prng_wipe(&prng);
  return 0;
}

int bb_dp_add_gaussian(float *x, size_t n, double stddev, double grid, const bb_random_source *random, bb_error *err) {
  if (!x && n) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "dp: no vector");
  int rc = resolve_grid(stddev, grid, &grid, err);
  return rc ? rc : noise_on_grid(x, n, stddev, grid, random, err);
}

/* Squared norm of x rounded to the grid, in grid steps: exact in 128 bits. */
static unsigned __int128 grid_norm_sq(const float *x, size_t n, double grid) {
  unsigned __int128 s = 0;
  for (size_t i = 0; i < n; i++) {
    const long long k = llround((double)x[i] / grid);
    const unsigned long long a = (unsigned long long)(k < 0 ? -k : k);
    s += (unsigned __int128)a * a;
  }
  return s;
}

int bbi_dp_clip_to_grid(float *x, size_t n, double clip, double grid, double *scale, bb_error *err) {
  const double room = clip - sqrt((double)n) * grid / 2;
  if (room < clip / 2)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "dp: %zu elements on a grid of %g take more than half the clip %g in rounding: use a finer grid",
                        n, grid, clip);
  const double before = bb_dp_clip(x, n, room);
  *scale = before > room ? room / before : 1;
  const double bound = clip / grid; /* in grid steps; compare squares below it with margin */
  const unsigned __int128 limit = (unsigned __int128)(bound * bound * (1 - 0x1p-40));
  while (grid_norm_sq(x, n, grid) > limit)
    for (size_t i = 0; i < n; i++) x[i] = nextafterf(x[i], 0.0f);
  return 0;
}

int bb_dp_client_privatize(float *x, size_t n, const bb_dp_client_options *options, bb_dp_report *report,
                           bb_error *err) {
  bb_dp_client_options o;
  memset(&o, 0, sizeof o);
  if (!options || options->struct_size < sizeof options->struct_size || options->struct_size > sizeof o)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "dp: options struct_size %zu (this library knows %zu)",
                        options ? options->struct_size : 0, sizeof o);
  memcpy(&o, options, options->struct_size);
  if (!x && n) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "dp: no vector");
  if (!(o.clip > 0) || !isfinite(o.clip)) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "dp: clip %g (finite, > 0)", o.clip);
  if (o.noise_multiplier < 0 || !isfinite(o.noise_multiplier))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "dp: noise multiplier %g (finite, >= 0)", o.noise_multiplier);
  for (size_t i = 0; i < n; i++)
    if (!isfinite(x[i])) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "dp: element %zu is not finite", i);
  const uint32_t clients = o.clients ? o.clients : 1;
  bb_dp_report r = {0};
  r.scale = 1;
  if (o.noise_multiplier == 0) {
    r.norm = bb_dp_clip(x, n, o.clip);
    if (r.norm > o.clip) r.scale = o.clip / r.norm;
  } else {
    r.stddev = o.noise_multiplier * o.clip / sqrt((double)clients);
    int rc = resolve_grid(r.stddev, o.grid, &r.grid, err);
    if (!rc) {
      double sq = 0;
      for (size_t i = 0; i < n; i++) sq += (double)x[i] * x[i];
      r.norm = sqrt(sq);
      rc = bbi_dp_clip_to_grid(x, n, o.clip, r.grid, &r.scale, err);
    }
    if (!rc) rc = noise_on_grid(x, n, r.stddev, r.grid, &o.random, err);
    if (rc) return rc;
  }
  if (report) *report = r;
  return 0;
}

int bb_dp_adaptive_clip_update(bb_dp_adaptive_clip *state, uint32_t unclipped, uint32_t clients,
                               const bb_random_source *random, double *fraction, bb_error *err) {
  if (!state || state->struct_size < sizeof *state)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "dp adaptive clip: struct_size %zu (set it to %zu)",
                        state ? state->struct_size : 0, sizeof *state);
  const double expected = state->expected_clients;
  if (!(state->clip > 0) || !isfinite(state->clip) || unclipped > clients || !(expected >= 0 && expected < 1e300) ||
      (clients == 0 && expected == 0))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "dp adaptive clip: clip %g, %u of %u updates within it, %g expected", state->clip, unclipped,
                        clients, expected);
  const double n = expected > 0 ? expected : clients;
  const double quantile = state->target_quantile > 0 ? state->target_quantile : 0.5;
  const double rate = state->learning_rate > 0 ? state->learning_rate : 0.2;
  const double stddev = state->count_stddev > 0 ? state->count_stddev : n / 20.0;
  if (quantile >= 1) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "dp adaptive clip: target quantile %g (0..1)", quantile);
  /* the centred count Σ (b_i - 1/2) has sensitivity 1/2 */
  float count = (float)((double)unclipped - clients / 2.0);
  int rc = bb_dp_add_gaussian(&count, 1, stddev, 0, random, err);
  if (rc) return rc;
  /* held to [0, 1] (post-processing): no draw of the noise moves the clip further than a
     fraction of 0 or 1 would */
  const double b = fmin(1.0, fmax(0.0, (double)count / n + 0.5));
  state->clip *= exp(-rate * (b - quantile));
  if (fraction) *fraction = b;
  return 0;
}

int bb_dp_adaptive_noise_multiplier(double noise_multiplier, double count_stddev, double *update_multiplier,
                                    bb_error *err) {
  if (!(noise_multiplier > 0) || !(count_stddev > 0) || !update_multiplier)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "dp: noise multiplier %g and count stddev %g (both > 0)",
                        noise_multiplier, count_stddev);
  const double rest = pow(noise_multiplier, -2) - pow(2 * count_stddev, -2);
  if (!(rest > 0))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "dp: a count noised with stddev %g spends more than noise multiplier %g allows (2 × stddev must exceed it)",
                        count_stddev, noise_multiplier);
  *update_multiplier = pow(rest, -0.5);
  return 0;
}
