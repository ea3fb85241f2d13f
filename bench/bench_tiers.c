/* Aggregation past one server: FedAvg rounds for 1k, 10k and 100k clients, flat and in
 * tiers, on the rounds engine every FedAvg node runs (src/components/aggregators/rounds.c).
 *
 *   bench_tiers [--clients 1000,10000,100000] [--params 2410] [--rounds 3] [--fanout 100]
 *
 * Each round every client contributes a vector of P floats (P = 2410, the digits MLP of the
 * examples) with its sample count; in the 2-tier plan clients report to ⌈N/F⌉ edges, the
 * edges to the root; in the 3-tier plan edges report to regions of F edges, the regions to
 * the root (rounds=follow below the root, weights carried upward). Reported per plan:
 *   * aggregation CPU per round, all tiers together (the work one machine would do alone);
 *   * the critical path: the slowest aggregator of each tier, summed — the round time when
 *     each aggregator is a machine of its own (network time excluded);
 *   * rounds/s on that critical path;
 *   * the largest memory one aggregator holds in a round (each contribution it holds is
 *     P floats and about 96 bytes of bookkeeping);
 *   * the largest difference from flat FedAvg (float rounding of each tier's mean).
 * One round of one aggregator holds at most BBI_FEDROUND_MAX_ENTRIES (65,536) contributions:
 * flat FedAvg over 100k clients cannot run in one round, and its row says so.
 * Training time is not included: clients train in parallel on their own devices. */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "components/aggregators/rounds.h"

/* CPU time of this thread: on a shared machine wall time measures the neighbours too */
static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct tier_stats {
  double cpu_s;      /* all aggregators of the tier, every round */
  double slowest_s;  /* the slowest one of the round under way */
  double path_s;     /* the slowest one of each round, summed over the rounds */
  size_t most_bytes; /* the most one held */
} tier_stats;

/* One aggregator: takes `n` inputs (vectors of p floats with weights), closes, returns
 * its mean and weight; adds its time and memory to `t`. */
static int aggregate(size_t n, size_t p, uint64_t round, const float *const *in, const uint64_t *w, float *out,
                     uint64_t *weight, tier_stats *t) {
  bbi_fedround_config c;
  memset(&c, 0, sizeof c);
  c.param_len = p;
  c.quorum = (uint32_t)n;
  c.target = (uint32_t)n;
  c.first_round = round;
  bbi_fedround *fr = NULL;
  bb_error err;
  const double start = now_s();
  if (bbi_fedround_new(NULL, &c, 0, &fr, &err)) return fprintf(stderr, "bench_tiers: %s\n", err.message), 1;
  for (size_t i = 0; i < n; i++) {
    uint8_t key[8];
    const size_t kl = bbi_fedround_key_from_u64(i + 1, key);
    if (bbi_fedround_contribute(fr, round, key, kl, in[i], w[i], 0, NULL, &err))
      return fprintf(stderr, "bench_tiers: %s\n", err.message), 1;
  }
  bbi_fedround_result r;
  if (bbi_fedround_poll(fr, 0, NULL, &r, &err) || r.event != BBI_FEDROUND_CLOSED)
    return fprintf(stderr, "bench_tiers: the round did not close\n"), 1;
  memcpy(out, r.params, p * sizeof(float));
  *weight = r.weight;
  bb_buffer_free(bbi_fedround_allocator(fr), r.params);
  bbi_fedround_free(fr);
  const double took = now_s() - start;
  t->cpu_s += took;
  if (took > t->slowest_s) t->slowest_s = took;
  /* what it held: every contribution's copy, and its bookkeeping */
  const size_t bytes = n * (p * sizeof(float) + 96);
  if (bytes > t->most_bytes) t->most_bytes = bytes;
  return 0;
}

/* One tier: `n` inputs grouped `fanout` to an aggregator; outputs the ⌈n/fanout⌉ means. */
static int tier(size_t n, size_t fanout, size_t p, uint64_t round, const float *const *in, const uint64_t *w,
                float *out, uint64_t *out_w, tier_stats *t) {
  for (size_t g = 0; g * fanout < n; g++) {
    const size_t from = g * fanout, k = n - from < fanout ? n - from : fanout;
    if (aggregate(k, p, round, in + from, w + from, out + g * p, &out_w[g], t)) return 1;
  }
  return 0;
}

/* Flat FedAvg's mean, as the rounds engine computes it (weights n_i / N, summed in double
 * in client order, stored as float): what every plan is compared with. */
static void reference_mean(size_t n, size_t p, const float *x, const uint64_t *samples, float *out) {
  double total = 0;
  for (size_t i = 0; i < n; i++) total += (double)samples[i];
  double *acc = calloc(p, sizeof *acc);
  for (size_t i = 0; i < n && acc; i++) {
    const double w = (double)samples[i] / total;
    for (size_t j = 0; j < p; j++) acc[j] += w * (double)x[i * p + j];
  }
  for (size_t j = 0; j < p; j++) out[j] = acc ? (float)acc[j] : NAN;
  free(acc);
}

/* Runs `rounds` rounds of a plan with `tiers` aggregator tiers (1: flat) and prints it. */
static int plan(const char *name, size_t clients, size_t p, size_t fanout, int tiers, int rounds, const float *x,
                const uint64_t *samples, const float *flat, double *max_diff) {
  tier_stats per[3];
  memset(per, 0, sizeof per);
  const float **in = malloc(clients * sizeof *in);
  uint64_t *w = malloc(clients * sizeof *w);
  const size_t most_out = (clients + fanout - 1) / fanout; /* the first tier's outputs, at most */
  float *level = malloc(most_out * p * sizeof(float)), *next = malloc(most_out * p * sizeof(float));
  if (!in || !w || !level || !next) return fprintf(stderr, "bench_tiers: out of memory\n"), 1;
  *max_diff = 0;
  for (int r = 0; r < rounds; r++) {
    size_t n = clients;
    for (size_t i = 0; i < n; i++) in[i] = x + i * p, w[i] = samples[i];
    for (int t = 0; t < tiers; t++) {
      const size_t group = t == tiers - 1 ? n : fanout; /* the last tier is the root: one aggregator */
      uint64_t *out_w = malloc(((n + group - 1) / group) * sizeof *out_w);
      per[t].slowest_s = 0;
      if (!out_w || tier(n, group, p, (uint64_t)r, in, w, next, out_w, &per[t])) return 1;
      per[t].path_s += per[t].slowest_s;
      n = (n + group - 1) / group;
      memcpy(level, next, n * p * sizeof(float));
      for (size_t i = 0; i < n; i++) in[i] = level + i * p, w[i] = out_w[i];
      free(out_w);
    }
    for (size_t j = 0; j < p; j++) {
      const double d = fabs((double)level[j] - (double)flat[j]);
      if (d > *max_diff) *max_diff = d;
    }
  }
  double cpu = 0, path = 0;
  size_t most = 0;
  for (int t = 0; t < tiers; t++) {
    cpu += per[t].cpu_s / rounds;
    path += per[t].path_s / rounds;
    if (per[t].most_bytes > most) most = per[t].most_bytes;
  }
  printf("| %7zu | %-6s | %9.1f | %9.1f | %8.1f | %9.1f | %.1e |\n", clients, name, cpu * 1e3, path * 1e3, 1 / path,
         (double)most / (1 << 20), *max_diff);
  free(in);
  free(w);
  free(level);
  free(next);
  return 0;
}

int main(int argc, char **argv) {
  size_t p = 2410, fanout = 100;
  int rounds = 3;
  char sizes[128] = "1000,10000,100000";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--clients") == 0) snprintf(sizes, sizeof sizes, "%s", argv[i + 1]);
    else if (strcmp(argv[i], "--params") == 0) p = (size_t)strtoul(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "--rounds") == 0) rounds = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--fanout") == 0) fanout = (size_t)strtoul(argv[i + 1], NULL, 10);
    else return fprintf(stderr, "usage: bench_tiers [--clients N,N...] [--params P] [--rounds R] [--fanout F]\n"), 2;
  }
  if (!p || rounds < 1 || fanout < 2) return fprintf(stderr, "bench_tiers: need params >= 1, rounds >= 1, fanout >= 2\n"), 2;
  printf("FedAvg rounds on the rounds engine: %zu floats per update, fan-out %zu, %d rounds each\n\n", p, fanout, rounds);
  printf("| clients | plan | CPU ms/round | critical path ms | rounds/s | MiB at the busiest aggregator | max diff. from flat |\n");
  printf("|---|---|---|---|---|---|---|\n");
  for (char *s = strtok(sizes, ","); s; s = strtok(NULL, ",")) {
    const size_t n = (size_t)strtoul(s, NULL, 10);
    float *x = malloc(n * p * sizeof(float)), *flat = malloc(p * sizeof(float));
    uint64_t *samples = malloc(n * sizeof *samples);
    if (!x || !flat || !samples) return fprintf(stderr, "bench_tiers: out of memory for %zu clients\n", n), 1;
    uint64_t state = 88172645463325252ull;
    for (size_t i = 0; i < n * p; i++) {
      state ^= state << 13, state ^= state >> 7, state ^= state << 17;
      x[i] = (float)((double)(state >> 11) / 9007199254740992.0 - 0.5);
    }
    for (size_t i = 0; i < n; i++) samples[i] = 20 + (i * 7919) % 180;
    reference_mean(n, p, x, samples, flat);
    double diff;
    if (n > BBI_FEDROUND_MAX_ENTRIES)
      printf("| %7zu | flat   | (a round holds at most %d contributions) | | | | |\n", n, BBI_FEDROUND_MAX_ENTRIES);
    else if (plan("flat", n, p, fanout, 1, rounds, x, samples, flat, &diff))
      return 1;
    if (plan("2-tier", n, p, fanout, 2, rounds, x, samples, flat, &diff) ||
        plan("3-tier", n, p, fanout, 3, rounds, x, samples, flat, &diff))
      return 1;
    free(x);
    free(flat);
    free(samples);
  }
  return 0;
}
