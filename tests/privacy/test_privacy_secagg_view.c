/* What the SecAgg+ server sees does not depend on any one client's vector beyond the sum.
 *
 * Two worlds run with the same randomness: in A clients 1 and 2 hold x1 and x2, in B they
 * hold x1 + d and x2 - d (the same sum), with d as large as the ring allows, while client 4
 * drops after sharing so unmasking also rebuilds a mask key. Then:
 *  - every byte the server receives is the same in both worlds, except the masked vectors
 *    of clients 1 and 2, and the sum it unmasks is the same;
 *  - those masked vectors are uniform over the ring in both worlds (a chi-square test of
 *    their top and bottom bits against the uniform distribution), and alike between the
 *    worlds run with independent randomness (a chi-square test of homogeneity): over many
 *    rounds the server's view is distributed the same whichever world it is in.
 * The thresholds are chi-square's at p = 1e-6 with 15 degrees of freedom; the runs are
 * seeded, so the statistics are the same on every run. */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "privacy/secagg_round.h"

#define LEN 256
#define ROUNDS 48
#define N 5
#define BUCKETS 16
#define CHI2_P1E6_DF15 56.49

/* What the server received in one run: each message's bytes, in order. */
typedef struct view {
  uint8_t *msgs[64];
  size_t lens[64];
  uint32_t from[64];
  int n;
} view;

static view *recording;
static bool record_hook(void *user, uint32_t client, bool to_server, const uint8_t **data, size_t *len) {
  (void)user;
  if (to_server && recording->n < 64) {
    recording->msgs[recording->n] = malloc(*len);
    memcpy(recording->msgs[recording->n], *data, *len);
    recording->lens[recording->n] = *len;
    recording->from[recording->n++] = client;
  }
  return true;
}

static void view_free(view *v) {
  for (int i = 0; i < v->n; i++) free(v->msgs[i]);
  v->n = 0;
}

static uint64_t world_inputs[N][LEN];

/* One round of world A (shift 0) or B (shift d) with seed `seed`; returns the ring sum. */
static void run_world(uint64_t seed, uint64_t shift, view *v, uint64_t sum[LEN]) {
  static sr_round r;
  bb_secagg_server_config c = {.struct_size = sizeof c, .n_clients = N, .vector_len = LEN};
  CHECK_EQ_INT(sr_init(&r, &c, seed), 0);
  bb_error err = {0};
  for (uint32_t i = 0; i < N; i++) {
    uint64_t q[LEN];
    for (int e = 0; e < LEN; e++) {
      q[e] = world_inputs[i][e];
      if (i == 1) q[e] += shift;
      if (i == 2) q[e] -= shift;
    }
    CHECK_EQ_INT(bb_secagg_client_set_input_ring(r.clients[i], q, LEN, &err), 0);
  }
  r.drop_at[4] = BB_SECAGG_MASKED_INPUT;
  recording = v;
  r.hook = record_hook;
  sr_start_and_run(&r);
  CHECK_EQ_INT(bb_secagg_server_stage(r.server), BB_SECAGG_DONE);
  CHECK_EQ_INT(bb_secagg_server_result_ring(r.server, sum, LEN, &err), 0);
  sr_free(&r);
}

static double chi2_uniform(const uint64_t *counts, uint64_t total) {
  const double expect = (double)total / BUCKETS;
  double x = 0;
  for (int b = 0; b < BUCKETS; b++) x += (counts[b] - expect) * (counts[b] - expect) / expect;
  return x;
}

/* two samples of equal size */
static double chi2_homogeneity(const uint64_t *a, const uint64_t *b) {
  double x = 0;
  for (int k = 0; k < BUCKETS; k++) {
    const double expect = (a[k] + b[k]) / 2.0;
    if (expect > 0) x += (a[k] - expect) * (a[k] - expect) / expect + (b[k] - expect) * (b[k] - expect) / expect;
  }
  return x;
}

static void test_view_independent_of_one_client(void) {
  /* client 1 holds 0 in world A and 2^22 in world B: the widest gap the inputs allow */
  for (uint32_t i = 0; i < N; i++)
    for (int e = 0; e < LEN; e++) world_inputs[i][e] = i == 2 ? (1u << 22) : (uint64_t)(e * 977 + i * 131) % (1u << 22);
  for (int e = 0; e < LEN; e++) world_inputs[1][e] = 0;
  const uint64_t d = 1u << 22;
  uint64_t top[2][BUCKETS] = {{0}}, low[2][BUCKETS] = {{0}};
  int mismatched = 0, differing_sums = 0;
  static view va, vb;
  for (int round = 0; round < ROUNDS; round++) {
    uint64_t sum_a[LEN], sum_b[LEN];
    /* the same randomness in both worlds: only the two shifted clients' vectors differ */
    run_world(1000 + round, 0, &va, sum_a);
    run_world(1000 + round, d, &vb, sum_b);
    differing_sums += memcmp(sum_a, sum_b, sizeof sum_a) != 0;
    CHECK_EQ_INT(va.n, vb.n);
    for (int m = 0; m < va.n && m < vb.n; m++) {
      const bool masked_of_shifted = va.msgs[m][5] == 6 && (va.from[m] == 1 || va.from[m] == 2);
      if (!masked_of_shifted)
        mismatched += va.from[m] != vb.from[m] || va.lens[m] != vb.lens[m] ||
                      memcmp(va.msgs[m], vb.msgs[m], va.lens[m]) != 0;
    }
    view_free(&vb);
    /* world B again with its own randomness, for the distributions */
    run_world(900000 + round, d, &vb, sum_b);
    for (int w = 0; w < 2; w++) {
      const view *v = w ? &vb : &va;
      for (int m = 0; m < v->n; m++) {
        if (v->msgs[m][5] != 6 || (v->from[m] != 1 && v->from[m] != 2)) continue;
        /* the masked elements, 4 bytes each after the header and count */
        for (int e = 0; e < LEN; e++) {
          const uint32_t y = bb_le_get_u32(v->msgs[m] + 30 + 4 * e);
          top[w][y >> 28]++;
          low[w][y & 15]++;
        }
      }
    }
    view_free(&va);
    view_free(&vb);
  }
  CHECK_EQ_INT(differing_sums, 0);
  CHECK_EQ_INT(mismatched, 0);
  const uint64_t samples = (uint64_t)ROUNDS * 2 * LEN;
  for (int w = 0; w < 2; w++) {
    const double t = chi2_uniform(top[w], samples), l = chi2_uniform(low[w], samples);
    printf("  world %c: chi2 against uniform %.1f (top bits), %.1f (low bits)\n", 'A' + w, t, l);
    CHECK(t < CHI2_P1E6_DF15);
    CHECK(l < CHI2_P1E6_DF15);
  }
  const double h = chi2_homogeneity(top[0], top[1]);
  printf("  A against B: chi2 %.1f\n", h);
  CHECK(h < CHI2_P1E6_DF15);
}

/* With float inputs on the quantisation grid (so rounding is exact), the unmasked sums of
 * the two worlds are equal to the bit. */
static void test_float_sums_equal(void) {
  float sums[2][4];
  for (int w = 0; w < 2; w++) {
    sr_round r;
    bb_secagg_server_config c = {.struct_size = sizeof c, .n_clients = 4, .vector_len = 4};
    CHECK_EQ_INT(sr_init(&r, &c, 5000 + w), 0);
    const float a[4][4] = {{0.5f, -1, 2, 0}, {-0.25f, 3, 0.125f, 1}, {1, 1, 1, 1}, {0, 0, 0, 0}};
    for (uint32_t i = 0; i < 4; i++) {
      float x[4];
      memcpy(x, a[i], sizeof x);
      if (w && i == 0) x[0] -= 0.75f, x[1] += 2;
      if (w && i == 1) x[0] += 0.75f, x[1] -= 2;
      CHECK_EQ_INT(bb_secagg_client_set_input(r.clients[i], x, 4, NULL), 0);
    }
    sr_start_and_run(&r);
    uint32_t summed;
    CHECK_EQ_INT(bb_secagg_server_result(r.server, sums[w], 4, &summed, NULL), 0);
    sr_free(&r);
  }
  CHECK(memcmp(sums[0], sums[1], sizeof sums[0]) == 0);
  CHECK(sums[0][0] == 1.25f && sums[0][1] == 3.0f);
}

int main(void) {
  RUN(test_view_independent_of_one_client);
  RUN(test_float_sums_equal);
  return bb_test_finish();
}
