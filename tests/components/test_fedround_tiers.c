/* The rounds engine as one tier of several: following the tier above's round ids
 * (bbi_fedround_follow), the weight a closed round carries upward, and two tiers of means
 * equal to one flat mean — bit for bit when every quotient is exact, within the rounding
 * of the tier below otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "components/aggregators/rounds.h"

static bbi_fedround *make(size_t len, uint32_t quorum, bbi_fedround_method method, double samples_factor) {
  bbi_fedround_config c;
  memset(&c, 0, sizeof c);
  c.param_len = len;
  c.quorum = quorum;
  c.method = method;
  c.samples_factor = samples_factor;
  bbi_fedround *fr = NULL;
  bb_error err;
  const int rc = bbi_fedround_new(NULL, &c, 0, &fr, &err);
  CHECK_MSG(rc == 0, "%s", rc ? err.message : "");
  return fr;
}

static int give(bbi_fedround *fr, uint64_t round, uint64_t peer, const float *x, uint64_t n) {
  uint8_t key[8];
  const size_t kl = bbi_fedround_key_from_u64(peer, key);
  bb_error err;
  return bbi_fedround_contribute(fr, round, key, kl, x, n, 0, NULL, &err);
}

/* Closes the open round; *out gets its params (caller frees) and the result is returned. */
static bbi_fedround_result close_now(bbi_fedround *fr, uint64_t now) {
  bbi_fedround_result res;
  bb_error err;
  CHECK_EQ_INT(bbi_fedround_poll(fr, now, NULL, &res, &err), 0);
  CHECK_EQ_INT(res.event, BBI_FEDROUND_CLOSED);
  return res;
}

static void test_follow(void) {
  bbi_fedround_config c;
  memset(&c, 0, sizeof c);
  c.param_len = 2;
  c.quorum = 2;
  c.target = 2;
  c.first_round = 10;
  c.deadline_ns = 1000;
  bbi_fedround *fr = NULL;
  bb_error err;
  CHECK_EQ_INT(bbi_fedround_new(NULL, &c, 0, &fr, &err), 0);
  const float x[2] = {1, 2};
  /* from the first round, whose window is "ever" */
  CHECK_EQ_INT(give(fr, 10, 1, x, 3), 0);
  CHECK_EQ_INT(bbi_fedround_follow(fr, 11, 50, &err), 0);
  CHECK_EQ_INT(bbi_fedround_pending(fr), 0); /* what round 10 held is dropped */
  CHECK_EQ_INT(bbi_fedround_get_counters(fr).rounds_abandoned, 1);
  CHECK_EQ_INT(bbi_fedround_window_start(fr, 11), 0);
  /* a round that closes opens the next at its close; following on keeps that window */
  CHECK_EQ_INT(give(fr, 11, 1, x, 1), 0);
  CHECK_EQ_INT(give(fr, 11, 2, x, 1), 0);
  bbi_fedround_result res = close_now(fr, 100);
  bb_buffer_free(bbi_fedround_allocator(fr), res.params);
  CHECK_EQ_INT(bbi_fedround_window_start(fr, 12), 100);
  CHECK_EQ_INT(bbi_fedround_follow(fr, 15, 500, &err), 0);
  CHECK_EQ_INT(bbi_fedround_round_id(fr), 15);
  CHECK_EQ_INT(bbi_fedround_get_counters(fr).rounds_abandoned, 1); /* round 12 held nothing */
  /* prompts for round 15 went out after round 12 opened, before the first of them arrived */
  CHECK_EQ_INT(bbi_fedround_window_start(fr, 15), 100);
  CHECK_EQ_INT(bbi_fedround_window_start(fr, 13), 100); /* skipped over */
  /* the deadline counts from the move */
  CHECK_EQ_INT(give(fr, 15, 1, x, 1), 0);
  CHECK_EQ_INT(bbi_fedround_poll(fr, 1400, NULL, &res, &err), 0);
  CHECK_EQ_INT(res.event, BBI_FEDROUND_IDLE);
  CHECK_EQ_INT(bbi_fedround_poll(fr, 1500, NULL, &res, &err), 0);
  CHECK_EQ_INT(res.event, BBI_FEDROUND_OVERDUE);
  /* never backwards, nor to the open round */
  CHECK_EQ_INT(bbi_fedround_follow(fr, 15, 600, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "round 15 is open") != NULL);
  CHECK_EQ_INT(bbi_fedround_follow(fr, 11, 600, &err), BB_ERR_INVALID_ARGUMENT);
  /* a far jump keeps a window for what it can remember only, and closes as usual */
  CHECK_EQ_INT(bbi_fedround_follow(fr, 1000000, 800, &err), 0);
  CHECK_EQ_INT(bbi_fedround_window_start(fr, 1000000), 100);
  CHECK_EQ_INT(give(fr, 1000000, 1, x, 1), 0);
  CHECK_EQ_INT(give(fr, 1000000, 2, x, 1), 0);
  res = close_now(fr, 900);
  CHECK_EQ_INT(res.round_id, 1000000);
  CHECK_EQ_INT(bbi_fedround_round_id(fr), 1000001);
  bb_buffer_free(bbi_fedround_allocator(fr), res.params);
  CHECK_EQ_INT(bbi_fedround_follow(NULL, 1, 0, &err), BB_ERR_INVALID_ARGUMENT);
  bbi_fedround_free(fr);
}

/* The weight a round carries: the weights its mean used, not the counts reported. */
static void test_weight(void) {
  const float x[1] = {1};
  bbi_fedround *fr = make(1, 3, BBI_FEDROUND_MEAN, 2); /* counts above 2 × the median weigh that */
  give(fr, 0, 1, x, 1), give(fr, 0, 2, x, 1), give(fr, 0, 3, x, 10);
  bbi_fedround_result res = close_now(fr, 1);
  CHECK_EQ_INT(res.total_samples, 12);
  CHECK_EQ_INT(res.weight, 4); /* 1 + 1 + min(10, 2 × 1) */
  CHECK_EQ_INT(res.samples_clipped, 1);
  bb_buffer_free(bbi_fedround_allocator(fr), res.params);
  bbi_fedround_free(fr);

  fr = make(1, 3, BBI_FEDROUND_MEDIAN, 0); /* a robust method weighs each kept update 1 */
  give(fr, 0, 1, x, 5), give(fr, 0, 2, x, 6), give(fr, 0, 3, x, 7);
  res = close_now(fr, 1);
  CHECK_EQ_INT(res.weight, 3);
  bb_buffer_free(bbi_fedround_allocator(fr), res.params);
  bbi_fedround_free(fr);
}

/* Clients behind edges: the root's mean of edge means, weighted by what each edge
 * carried, against one flat mean of all the clients. */
static void tiered_vs_flat(size_t edges, size_t per_edge, size_t d, const float *x, const uint64_t *n, float *tiered,
                           float *flat) {
  bbi_fedround *root = make(d, (uint32_t)edges, BBI_FEDROUND_MEAN, 0);
  bbi_fedround *all = make(d, (uint32_t)(edges * per_edge), BBI_FEDROUND_MEAN, 0);
  for (size_t e = 0; e < edges; e++) {
    bbi_fedround *edge = make(d, (uint32_t)per_edge, BBI_FEDROUND_MEAN, 0);
    for (size_t k = 0; k < per_edge; k++) {
      const size_t c = e * per_edge + k;
      CHECK_EQ_INT(give(edge, 0, c + 1, x + c * d, n[c]), 0);
      CHECK_EQ_INT(give(all, 0, c + 1, x + c * d, n[c]), 0);
    }
    bbi_fedround_result r = close_now(edge, 1);
    CHECK_EQ_INT(give(root, r.round_id, e + 1, r.params, r.weight), 0);
    bb_buffer_free(bbi_fedround_allocator(edge), r.params);
    bbi_fedround_free(edge);
  }
  bbi_fedround_result r = close_now(root, 1), f = close_now(all, 1);
  uint64_t total = 0;
  for (size_t c = 0; c < edges * per_edge; c++) total += n[c];
  CHECK_EQ_INT(r.weight, total);
  memcpy(tiered, r.params, d * sizeof(float));
  memcpy(flat, f.params, d * sizeof(float));
  bb_buffer_free(bbi_fedround_allocator(root), r.params);
  bb_buffer_free(bbi_fedround_allocator(all), f.params);
  bbi_fedround_free(root);
  bbi_fedround_free(all);
}

static void test_exact_when_quotients_are(void) {
  /* two edges of two clients weighing 1: every weight is 1/2 or 1/4, every value a small
   * integer, so every product and sum is exact and the tiers agree bit for bit */
  enum { D = 5 };
  float x[4 * D], tiered[D], flat[D];
  const uint64_t n[4] = {1, 1, 1, 1};
  for (int i = 0; i < 4 * D; i++) x[i] = (float)((i * 7) % 11) - 5.0f;
  tiered_vs_flat(2, 2, D, x, n, tiered, flat);
  CHECK(memcmp(tiered, flat, sizeof tiered) == 0);
}

static void test_within_rounding(void) {
  /* uneven counts and random values: the tiers differ from flat only by the rounding of
   * each edge's mean to float (bounded in tests/sim/test_hierarchical.c) */
  enum { EDGES = 4, PER = 5, D = 257 };
  float *x = malloc(EDGES * PER * D * sizeof(float)), tiered[D], flat[D];
  uint64_t n[EDGES * PER];
  uint64_t s = 12345;
  for (size_t i = 0; i < EDGES * PER * D; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
  for (size_t c = 0; c < EDGES * PER; c++) n[c] = 3 + (c * 37) % 50;
  tiered_vs_flat(EDGES, PER, D, x, n, tiered, flat);
  size_t beyond = 0;
  for (size_t j = 0; j < D; j++) {
    const float big = fmaxf(fabsf(tiered[j]), fabsf(flat[j]));
    /* every |x| < 1, so every edge mean is too: 2^-23 covers the edges' rounding */
    beyond += fabs((double)tiered[j] - (double)flat[j]) > ldexp(1.0, -23) + (double)(nextafterf(big, INFINITY) - big);
  }
  CHECK_EQ_INT(beyond, 0);
  free(x);
}

int main(void) {
  RUN(test_follow);
  RUN(test_weight);
  RUN(test_exact_when_quotients_are);
  RUN(test_within_rounding);
  return bb_test_finish();
}
