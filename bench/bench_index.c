/* Flat-index search throughput (queries/s), SIMD distance kernels against their scalar
 * twins: N = 10,000 stored vectors, k = 10, D = 64 / 128 / 784, both metrics. Native and,
 * built with Emscripten, under Node (`node build-wasm/bench/bench_index.js`). */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "components/index/flat_index.h"

enum { N = 10000, K = 10, QUERIES = 64 };

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *random_floats(size_t n, uint32_t seed) {
  float *x = malloc(n * sizeof *x);
  if (!x) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
  }
  return x;
}

typedef int (*search_fn)(const bbi_flat_index *, const float *, size_t, uint64_t *, float *,
                         size_t *, bb_error *);

/* Keeps the optimiser from dropping searches whose results nobody reads. */
static volatile uint64_t sink;

/* Queries per second: the best of 3 passes over the query set, each at least 0.2 s. */
static double queries_per_second(const bbi_flat_index *idx, search_fn search,
                                 const float *queries, size_t dim) {
  uint64_t ids[K];
  float dists[K];
  size_t found;
  double best = 0;
  for (int pass = 0; pass < 3; pass++) {
    size_t done = 0;
    const double t0 = now_seconds();
    double t;
    do {
      for (size_t q = 0; q < QUERIES; q++) {
        search(idx, queries + q * dim, K, ids, dists, &found, NULL);
        sink += ids[0];
      }
      done += QUERIES;
      t = now_seconds() - t0;
    } while (t < 0.2);
    if ((double)done / t > best) best = (double)done / t;
  }
  return best;
}

int main(void) {
  static const size_t dims[] = {64, 128, 784};
  static const char *metric_names[] = {"l2sq", "ip"};
  printf("flat index search, N=%d, k=%d\n", N, K);
  printf("%-6s %5s %14s %14s %7s\n", "metric", "D", "simd q/s", "scalar q/s", "ratio");
  for (int m = 0; m < 2; m++) {
    for (size_t di = 0; di < sizeof dims / sizeof *dims; di++) {
      const size_t dim = dims[di];
      bbi_flat_index *idx;
      bb_error err;
      if (bbi_flat_index_new(NULL, dim, (bbi_flat_index_metric)m, &idx, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
      }
      float *data = random_floats((size_t)N * dim, (uint32_t)(dim * 7 + (size_t)m));
      for (size_t i = 0; i < N; i++) {
        if (bbi_flat_index_add(idx, data + i * dim, NULL, &err)) {
          fprintf(stderr, "%s\n", err.message);
          return 1;
        }
      }
      float *queries = random_floats(QUERIES * dim, 12345u);
      const double simd = queries_per_second(idx, bbi_flat_index_search, queries, dim);
      const double scalar = queries_per_second(idx, bbi_flat_index_search_scalar, queries, dim);
      printf("%-6s %5zu %14.0f %14.0f %6.2fx\n", metric_names[m], dim, simd, scalar,
             simd / scalar);
      free(queries);
      free(data);
      bbi_flat_index_free(idx);
    }
  }
  return 0;
}
