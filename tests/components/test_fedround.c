/* Federated-averaging rounds: the reference vector, closing rules, late and duplicate
 * contributions, invalid input, snapshots and allocation failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failalloc.h"
#include "harness.h"
#include "bb/bytes.h"
#include "components/aggregators/rounds.h"
#include "util/hash.h"

#define MS 1000000ull

static bbi_fedround_config config(size_t len) {
  bbi_fedround_config c;
  memset(&c, 0, sizeof c);
  c.param_len = len;
  c.quorum = 1;
  return c;
}

static bbi_fedround *make(const bbi_fedround_config *c, uint64_t now) {
  bbi_fedround *fr = NULL;
  bb_error err;
  const int rc = bbi_fedround_new(NULL, c, now, &fr, &err);
  CHECK_MSG(rc == 0, "%s", err.message);
  return fr;
}

/* Contributes from numeric peer `peer` and returns the status (the code goes to *rc). */
static bbi_fedround_status give(bbi_fedround *fr, uint64_t round, uint64_t peer, const float *x,
                               uint64_t n, uint64_t now, int *rc) {
  uint8_t key[8];
  const size_t kl = bbi_fedround_key_from_u64(peer, key);
  bbi_fedround_status st = BBI_FEDROUND_ACCEPTED;
  bb_error err;
  const int r = bbi_fedround_contribute(fr, round, key, kl, x, n, now, &st, &err);
  if (rc) *rc = r;
  return st;
}

static void test_reference_vector(void) {
  bbi_fedround_config c = config(2);
  c.quorum = 2;
  bbi_fedround *fr = make(&c, 0);
  const float a[2] = {1, 2}, b[2] = {3, 4};
  int rc;
  CHECK_EQ_INT(give(fr, 0, 2, a, 1, 0, &rc), BBI_FEDROUND_ACCEPTED);
  CHECK_EQ_INT(rc, 0);
  bbi_fedround_result res;
  CHECK_EQ_INT(bbi_fedround_poll(fr, 1, NULL, &res, NULL), 0);
  CHECK_EQ_INT(res.event, BBI_FEDROUND_IDLE); /* one of two */
  CHECK_EQ_INT(bbi_fedround_next_deadline(fr, 1), UINT64_MAX);
  CHECK_EQ_INT(give(fr, 0, 1, b, 3, 2, &rc), BBI_FEDROUND_ACCEPTED);
  CHECK_EQ_INT(bbi_fedround_next_deadline(fr, 2), 2);
  CHECK_EQ_INT(bbi_fedround_poll(fr, 2, NULL, &res, NULL), 0);
  CHECK_EQ_INT(res.event, BBI_FEDROUND_CLOSED);
  CHECK_EQ_INT(res.round_id, 0);
  CHECK_EQ_INT(res.total_samples, 4);
  CHECK_EQ_INT(res.contributors, 2);
  CHECK(res.params && res.params[0] == 2.5f && res.params[1] == 3.5f);
  bb_buffer_free(bbi_fedround_allocator(fr), res.params);
  CHECK_EQ_INT(bbi_fedround_round_id(fr), 1);
  CHECK_EQ_INT(bbi_fedround_pending(fr), 0);
  CHECK_EQ_INT(bbi_fedround_get_counters(fr).rounds_closed, 1);
  bbi_fedround_free(fr);
}

/* Arrival order does not change a single bit of the result. */
static void test_order_independent(void) {
  enum { D = 7, K = 5 };
  float x[K][D];
  for (int i = 0; i < K; i++)
    for (int j = 0; j < D; j++) x[i][j] = (float)(0.1 * (i + 1) * (j - 3) + 1e-3 * i);
  float first[D];
  const int orders[2][K] = {{0, 1, 2, 3, 4}, {4, 2, 0, 3, 1}};
  for (int o = 0; o < 2; o++) {
    bbi_fedround_config c = config(D);
    c.quorum = K;
    bbi_fedround *fr = make(&c, 0);
    for (int i = 0; i < K; i++) give(fr, 0, (uint64_t)orders[o][i] + 10, x[orders[o][i]],
                                     (uint64_t)orders[o][i] + 1, 0, NULL);
    bbi_fedround_result res;
    bbi_fedround_poll(fr, 0, NULL, &res, NULL);
    CHECK_EQ_INT(res.event, BBI_FEDROUND_CLOSED);
    if (o == 0) memcpy(first, res.params, sizeof first);
    else CHECK(memcmp(first, res.params, sizeof first) == 0);
    bb_buffer_free(NULL, res.params);
    bbi_fedround_free(fr);
  }
}

static void test_deadline_and_target(void) {
  bbi_fedround_config c = config(1);
  c.quorum = 2;
  c.target = 3;
  c.deadline_ns = 100 * MS;
  bbi_fedround *fr = make(&c, 1000);
  const float v[1] = {1};
  bbi_fedround_result res;
  CHECK_EQ_INT(bbi_fedround_next_deadline(fr, 1000), 1000 + 100 * MS);
  give(fr, 0, 1, v, 1, 1000, NULL);
  give(fr, 0, 2, v, 1, 1001, NULL);
  /* quorum met but the deadline has not passed: the round waits for more */
  bbi_fedround_poll(fr, 1000 + 50 * MS, NULL, &res, NULL);
  CHECK_EQ_INT(res.event, BBI_FEDROUND_IDLE);
  CHECK_EQ_INT(bbi_fedround_next_deadline(fr, 1000 + 50 * MS), 1000 + 100 * MS);
  bbi_fedround_poll(fr, 1000 + 100 * MS, NULL, &res, NULL);
  CHECK_EQ_INT(res.event, BBI_FEDROUND_CLOSED);
  CHECK_EQ_INT(res.contributors, 2);
  bb_buffer_free(NULL, res.params);
  /* the next round opened at the close; the target closes it before its deadline */
  const uint64_t t1 = 1000 + 100 * MS;
  CHECK_EQ_INT(bbi_fedround_next_deadline(fr, t1), t1 + 100 * MS);
  for (uint64_t p = 1; p <= 3; p++) give(fr, 1, p, v, 1, t1 + p, NULL);
  CHECK_EQ_INT(bbi_fedround_next_deadline(fr, t1 + 5), t1 + 5);
  bbi_fedround_poll(fr, t1 + 5, NULL, &res, NULL);
  CHECK_EQ_INT(res.event, BBI_FEDROUND_CLOSED);
  CHECK_EQ_INT(res.round_id, 1);
  CHECK_EQ_INT(res.contributors, 3);
  bb_buffer_free(NULL, res.params);
  bbi_fedround_free(fr);
}

static void test_extend_policy(void) {
  bbi_fedround_config c = config(1);
  c.quorum = 2;
  c.deadline_ns = 10;
  c.on_no_quorum = BBI_FEDROUND_EXTEND;
  bbi_fedround *fr = make(&c, 0);
  const float v[1] = {4};
  give(fr, 0, 1, v, 1, 0, NULL);
  bbi_fedround_result res;
  CHECK_EQ_INT(bbi_fedround_next_deadline(fr, 0), 10);
  bbi_fedround_poll(fr, 10, NULL, &res, NULL);
  CHECK_EQ_INT(res.event, BBI_FEDROUND_OVERDUE);
  CHECK_EQ_INT(res.contributors, 1);
  /* reported once; then only a contribution can move things */
  CHECK_EQ_INT(bbi_fedround_next_deadline(fr, 11), UINT64_MAX);
  bbi_fedround_poll(fr, 20, NULL, &res, NULL);
  CHECK_EQ_INT(res.event, BBI_FEDROUND_IDLE);
  CHECK_EQ_INT(bbi_fedround_pending(fr), 1); /* nothing cleared */
  give(fr, 0, 2, v, 1, 30, NULL);
  CHECK_EQ_INT(bbi_fedround_next_deadline(fr, 30), 30);
  bbi_fedround_poll(fr, 30, NULL, &res, NULL);
  CHECK_EQ_INT(res.event, BBI_FEDROUND_CLOSED);
  CHECK(res.params && res.params[0] == 4.0f);
  bb_buffer_free(NULL, res.params);
  CHECK_EQ_INT(bbi_fedround_get_counters(fr).rounds_abandoned, 0);
  bbi_fedround_free(fr);
}

static void test_abandon_policy(void) {
  bbi_fedround_config c = config(1);
  c.quorum = 3;
  c.deadline_ns = 10;
  c.on_no_quorum = BBI_FEDROUND_ABANDON;
  bbi_fedround *fr = make(&c, 0);
  const float v[1] = {4};
  give(fr, 0, 1, v, 1, 0, NULL);
  give(fr, 0, 2, v, 1, 0, NULL);
  bbi_fedround_result res;
  bbi_fedround_poll(fr, 9, NULL, &res, NULL);
  CHECK_EQ_INT(res.event, BBI_FEDROUND_IDLE);
  bbi_fedround_poll(fr, 10, NULL, &res, NULL);
  CHECK_EQ_INT(res.event, BBI_FEDROUND_ABANDONED);
  CHECK_EQ_INT(res.round_id, 0);
  CHECK_EQ_INT(res.contributors, 2);
  CHECK(res.params == NULL);
  CHECK_EQ_INT(bbi_fedround_round_id(fr), 1);
  CHECK_EQ_INT(bbi_fedround_pending(fr), 0);
  CHECK_EQ_INT(bbi_fedround_get_counters(fr).rounds_abandoned, 1);
  CHECK_EQ_INT(bbi_fedround_next_deadline(fr, 10), 20); /* the new round's own deadline */
  bbi_fedround_free(fr);
}

static void test_duplicate_replaces(void) {
  bbi_fedround_config c = config(2);
  c.quorum = 2;
  bbi_fedround *fr = make(&c, 0);
  const float a[2] = {100, 100}, a2[2] = {1, 2}, b[2] = {3, 4};
  CHECK_EQ_INT(give(fr, 0, 2, a, 50, 0, NULL), BBI_FEDROUND_ACCEPTED);
  CHECK_EQ_INT(give(fr, 0, 2, a2, 1, 0, NULL), BBI_FEDROUND_REPLACED);
  CHECK_EQ_INT(bbi_fedround_pending(fr), 1);
  give(fr, 0, 1, b, 3, 0, NULL);
  bbi_fedround_result res;
  bbi_fedround_poll(fr, 0, NULL, &res, NULL);
  CHECK_EQ_INT(res.event, BBI_FEDROUND_CLOSED);
  CHECK_EQ_INT(res.total_samples, 4); /* 50 is gone with the vector it came with */
  CHECK(res.params && res.params[0] == 2.5f && res.params[1] == 3.5f);
  bb_buffer_free(NULL, res.params);
  CHECK_EQ_INT(bbi_fedround_get_counters(fr).replaced, 1);
  bbi_fedround_free(fr);
}

static void test_invalid_rejected(void) {
  bbi_fedround_config c = config(3);
  bbi_fedround *fr = make(&c, 0);
  const float nan3[3] = {1, NAN, 2}, inf3[3] = {INFINITY, 0, 0}, ok[3] = {1, 1, 1};
  uint8_t key[8];
  const size_t kl = bbi_fedround_key_from_u64(7, key);
  bbi_fedround_status st;
  bb_error err;
  int rc = bbi_fedround_contribute(fr, 0, key, kl, nan3, 1, 0, &st, &err);
  CHECK_EQ_INT(rc, BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(st, BBI_FEDROUND_REJECTED_NONFINITE);
  CHECK_MSG(strstr(err.message, "index 1") && strstr(err.message, "0000000000000007"), "%s",
            err.message);
  CHECK_EQ_INT(give(fr, 0, 7, inf3, 1, 0, &rc), BBI_FEDROUND_REJECTED_NONFINITE);
  CHECK_EQ_INT(give(fr, 0, 7, ok, 0, 0, &rc), BBI_FEDROUND_REJECTED_SAMPLES);
  CHECK_EQ_INT(rc, BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(give(fr, 1, 7, ok, 1, 0, &rc), BBI_FEDROUND_REJECTED_FUTURE);
  rc = bbi_fedround_contribute(fr, 0, key, 0, ok, 1, 0, &st, &err);
  CHECK_EQ_INT(st, BBI_FEDROUND_REJECTED_KEY);
  CHECK_EQ_INT(bbi_fedround_pending(fr), 0);
  CHECK_EQ_INT(bbi_fedround_get_counters(fr).rejected, 5);
  /* a rejected vector never reaches the mean: one good client closes the round alone */
  give(fr, 0, 8, ok, 1, 0, NULL);
  CHECK_EQ_INT(give(fr, 0, 7, nan3, 1, 0, &rc), BBI_FEDROUND_REJECTED_NONFINITE);
  bbi_fedround_result res;
  bbi_fedround_poll(fr, 0, NULL, &res, NULL);
  CHECK(res.params && res.params[0] == 1.0f && res.params[1] == 1.0f);
  bb_buffer_free(NULL, res.params);
  bbi_fedround_free(fr);
}

/* A self-reported count of 2^64 - 1 arriving first used to make every later update
 * refused ("total samples would overflow"). Counts are only weights now: every update is
 * taken, and the huge one weighs at most samples_factor × the round's median count. */
static void test_huge_sample_count_shuts_nobody_out(void) {
  bbi_fedround_config c = config(1);
  c.quorum = 3;
  c.samples_factor = 2;
  bbi_fedround *fr = make(&c, 0);
  const float liar[1] = {100}, a[1] = {1}, b[1] = {3};
  int rc;
  CHECK_EQ_INT(give(fr, 0, 1, liar, UINT64_MAX, 0, &rc), BBI_FEDROUND_ACCEPTED);
  CHECK_EQ_INT(give(fr, 0, 2, a, 2, 0, &rc), BBI_FEDROUND_ACCEPTED);
  CHECK_EQ_INT(rc, 0);
  CHECK_EQ_INT(give(fr, 0, 3, b, 2, 0, &rc), BBI_FEDROUND_ACCEPTED);
  bbi_fedround_result res;
  CHECK_EQ_INT(bbi_fedround_poll(fr, 0, NULL, &res, NULL), 0);
  CHECK_EQ_INT(res.event, BBI_FEDROUND_CLOSED);
  /* weights 4 (2 × the median count 2), 2 and 2 */
  CHECK_MSG(res.params && fabsf(res.params[0] - (4 * 100.0f + 2 * 1 + 2 * 3) / 8) < 1e-4f, "%g",
            res.params ? (double)res.params[0] : -1.0);
  CHECK_EQ_INT(res.samples_clipped, 1);
  CHECK(res.total_samples == UINT64_MAX); /* the reported total saturates */
  bb_buffer_free(NULL, res.params);
  CHECK_EQ_INT(bbi_fedround_get_counters(fr).samples_clipped, 1);
  bbi_fedround_free(fr);
}

/* Sample counts as weights: a fixed cap, the adaptive cap, and no trust at all. */
static void test_sample_weighting(void) {
  const float x[3][1] = {{0}, {10}, {20}};
  const uint64_t n[3] = {1, 1000, 3};
  struct {
    bbi_fedround_weighting weighting;
    uint64_t max_samples;
    double factor, want;
  } cases[] = {
      {BBI_FEDROUND_BY_SAMPLES, 0, 0, (0 * 1 + 10 * 1000 + 20 * 3) / 1004.0}, /* as reported */
      {BBI_FEDROUND_BY_SAMPLES, 5, 0, (0 * 1 + 10 * 5 + 20 * 3) / 9.0},       /* cut to 5 */
      {BBI_FEDROUND_BY_SAMPLES, 0, 2, (0 * 1 + 10 * 6 + 20 * 3) / 10.0},      /* 2 × median 3 */
      {BBI_FEDROUND_BY_SAMPLES, 4, 2, (0 * 1 + 10 * 4 + 20 * 3) / 8.0},       /* the smaller cap */
      {BBI_FEDROUND_UNIFORM, 0, 0, 10.0},                                     /* counts ignored */
  };
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    bbi_fedround_config c = config(1);
    c.quorum = 3;
    c.weighting = cases[t].weighting;
    c.max_samples = cases[t].max_samples;
    c.samples_factor = cases[t].factor;
    bbi_fedround *fr = make(&c, 0);
    for (int i = 0; i < 3; i++) give(fr, 0, (uint64_t)i + 1, x[i], n[i], 0, NULL);
    bbi_fedround_result res;
    bbi_fedround_poll(fr, 0, NULL, &res, NULL);
    CHECK_MSG(res.params && fabs(res.params[0] - cases[t].want) < 1e-4, "case %zu: %g, want %g", t,
              res.params ? (double)res.params[0] : -1.0, cases[t].want);
    bb_buffer_free(NULL, res.params);
    bbi_fedround_free(fr);
  }
}

/* Updates are pulled back to a bounded distance from the reference before any method
 * sees them: 3e38 in every coordinate (finite, so it passes the NaN check) cannot
 * carry the global model off, and what comes out is finite. */
static void test_norm_bound(void) {
  const float ref[2] = {1, 1};
  const float honest[3][2] = {{1, 2}, {2, 1}, {1, 0}}, huge[2] = {3e38f, 3e38f};
  for (int fixed = 0; fixed < 2; fixed++) {
    bbi_fedround_config c = config(2);
    c.quorum = 4;
    c.max_norm = fixed ? 0.5 : 0;
    c.norm_factor = fixed ? 0 : 2;
    bbi_fedround *fr = make(&c, 0);
    for (int i = 0; i < 3; i++) give(fr, 0, (uint64_t)i + 1, honest[i], 1, 0, NULL);
    give(fr, 0, 9, huge, 1, 0, NULL);
    bbi_fedround_result res;
    CHECK_EQ_INT(bbi_fedround_poll(fr, 0, ref, &res, NULL), 0);
    CHECK(res.params && isfinite(res.params[0]) && isfinite(res.params[1]));
    if (fixed) { /* every update is 1 from the reference, the huge one far more: all pulled to 0.5 */
      CHECK_EQ_INT(res.norm_clipped, 4);
      const double h = 0.5 * 3e38 / hypot(3e38 - 1, 3e38 - 1);
      CHECK_MSG(res.params && fabs(res.params[0] - (1 + (0 + 0.5 + 0 + h) / 4)) < 1e-4, "%g",
                (double)res.params[0]);
    } else { /* the median distance is 1: the huge update is pulled back to 2 */
      CHECK_EQ_INT(res.norm_clipped, 1);
      const double h = 2 / sqrt(2.0);
      CHECK_MSG(res.params && fabs(res.params[0] - (1 + (0 + 1 + 0 + h) / 4)) < 1e-4 &&
                    fabs(res.params[1] - (1 + (1 + 0 - 1 + h) / 4)) < 1e-4,
                "%g %g", (double)res.params[0], (double)res.params[1]);
    }
    bb_buffer_free(NULL, res.params);
    CHECK_EQ_INT(bbi_fedround_get_counters(fr).norm_clipped, fixed ? 4 : 1);
    bbi_fedround_free(fr);
  }
}

/* The robust methods through the rounds: nine updates near 1 and two at 50. */
static void test_methods(void) {
  const struct {
    bbi_fedround_method method;
    uint32_t byzantine, select;
  } cases[] = {{BBI_FEDROUND_MEDIAN, 0, 0}, {BBI_FEDROUND_TRIMMED, 0, 0}, {BBI_FEDROUND_KRUM, 2, 0},
               {BBI_FEDROUND_MULTI_KRUM, 2, 0}, {BBI_FEDROUND_MULTI_KRUM, 0, 3}};
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    bbi_fedround_config c = config(2);
    c.quorum = 11;
    c.method = cases[t].method;
    c.trim = 0.2;
    c.byzantine = cases[t].byzantine;
    c.select = cases[t].select;
    bbi_fedround *fr = make(&c, 0);
    for (int i = 0; i < 9; i++) {
      const float v[2] = {1 + 0.01f * (float)(i - 4), 1 - 0.01f * (float)(i - 4)};
      give(fr, 0, (uint64_t)i + 1, v, 1, 0, NULL);
    }
    const float bad[2] = {50, -50};
    give(fr, 0, 20, bad, 1, 0, NULL);
    give(fr, 0, 21, bad, 1, 0, NULL);
    bbi_fedround_result res;
    CHECK_EQ_INT(bbi_fedround_poll(fr, 0, NULL, &res, NULL), 0);
    CHECK_MSG(res.params && fabsf(res.params[0] - 1) < 0.02f && fabsf(res.params[1] - 1) < 0.02f, "case %zu: %g %g",
              t, res.params ? (double)res.params[0] : -1.0, res.params ? (double)res.params[1] : -1.0);
    if (cases[t].method == BBI_FEDROUND_KRUM) /* Krum gives one of the updates (an honest one) */
      CHECK(res.params && fabsf(res.params[0] + res.params[1] - 2) < 1e-6f);
    bb_buffer_free(NULL, res.params);
    bbi_fedround_free(fr);
  }
}

/* When each round could first be prompted, for membership checks. */
static void test_window_start(void) {
  bbi_fedround_config c = config(1);
  c.first_round = 5;
  bbi_fedround *fr = make(&c, 100);
  const float v[1] = {1};
  CHECK_EQ_INT(bbi_fedround_window_start(fr, 5), 0); /* the first round: any earlier prompt */
  for (uint64_t r = 5; r < 5 + 70; r++) {
    give(fr, r, 1, v, 1, 0, NULL);
    bbi_fedround_result res;
    bbi_fedround_poll(fr, 1000 * (r + 1), NULL, &res, NULL);
    bb_buffer_free(NULL, res.params);
  }
  CHECK_EQ_INT(bbi_fedround_round_id(fr), 75);
  CHECK_EQ_INT(bbi_fedround_window_start(fr, 75), 75000);
  CHECK_EQ_INT(bbi_fedround_window_start(fr, 74), 74000);
  CHECK_EQ_INT(bbi_fedround_window_start(fr, 12), 12000);
  CHECK_EQ_INT(bbi_fedround_window_start(fr, 11), 12000); /* past the 64 remembered: the strict side */
  CHECK_EQ_INT(bbi_fedround_window_start(fr, 5), 0);
  CHECK_EQ_INT(bbi_fedround_window_start(fr, 99), 75000);
  bbi_fedround_free(fr);
}

/* A round holds at most BBI_FEDROUND_MAX_KRUM contributions under Krum (its cost is
 * quadratic), BBI_FEDROUND_MAX_ENTRIES otherwise. */
static void test_round_capacity(void) {
  bbi_fedround_config c = config(1);
  c.quorum = 1;
  c.method = BBI_FEDROUND_KRUM;
  bbi_fedround *fr = make(&c, 0);
  const float v[1] = {1};
  int rc = 0;
  for (uint64_t i = 0; i < BBI_FEDROUND_MAX_KRUM && !rc; i++) give(fr, 0, i + 1, v, 1, 0, &rc);
  CHECK_EQ_INT(rc, 0);
  CHECK_EQ_INT(give(fr, 0, 5000, v, 1, 0, &rc), BBI_FEDROUND_REJECTED_FULL);
  CHECK_EQ_INT(rc, BB_ERR_LIMIT);
  CHECK_EQ_INT(give(fr, 0, 7, v, 1, 0, &rc), BBI_FEDROUND_REPLACED); /* a member's replacement still fits */
  bbi_fedround_free(fr);
}

/* Closes round 0 with peers 1 and 2 (values 1 and 2), leaving round 1 open. */
static bbi_fedround *after_one_round(bbi_fedround_late late, uint64_t max_staleness) {
  bbi_fedround_config c = config(1);
  c.quorum = 2;
  c.late = late;
  c.max_staleness = max_staleness;
  bbi_fedround *fr = make(&c, 0);
  const float one[1] = {1}, two[1] = {2};
  give(fr, 0, 1, one, 1, 0, NULL);
  give(fr, 0, 2, two, 1, 0, NULL);
  bbi_fedround_result res;
  bbi_fedround_poll(fr, 0, NULL, &res, NULL);
  CHECK_EQ_INT(res.event, BBI_FEDROUND_CLOSED);
  bb_buffer_free(NULL, res.params);
  return fr;
}

static void test_late_drop(void) {
  bbi_fedround *fr = after_one_round(BBI_FEDROUND_LATE_DROP, 5);
  const float v[1] = {9};
  CHECK_EQ_INT(give(fr, 0, 3, v, 1, 0, NULL), BBI_FEDROUND_LATE_DROPPED);
  CHECK_EQ_INT(bbi_fedround_pending(fr), 0);
  CHECK_EQ_INT(bbi_fedround_get_counters(fr).late_dropped, 1);
  bbi_fedround_free(fr);
}

static void test_late_count(void) {
  bbi_fedround *fr = after_one_round(BBI_FEDROUND_LATE_COUNT, 1);
  const float late[1] = {9}, fresh[1] = {5};
  /* peer 3 missed round 0: counted into round 1 */
  CHECK_EQ_INT(give(fr, 0, 3, late, 1, 0, NULL), BBI_FEDROUND_LATE_COUNTED);
  /* peer 1 was in round 0: a retransmission must not be applied a second time */
  CHECK_EQ_INT(give(fr, 0, 1, late, 1, 0, NULL), BBI_FEDROUND_LATE_DROPPED);
  /* peer 4 sends fresh, then a late copy: the older one never wins */
  CHECK_EQ_INT(give(fr, 1, 4, fresh, 1, 0, NULL), BBI_FEDROUND_ACCEPTED);
  CHECK_EQ_INT(give(fr, 0, 4, late, 1, 0, NULL), BBI_FEDROUND_LATE_DROPPED);
  /* peer 3's fresh vector replaces its late one */
  CHECK_EQ_INT(give(fr, 1, 3, fresh, 1, 0, NULL), BBI_FEDROUND_REPLACED);
  bbi_fedround_result res;
  bbi_fedround_poll(fr, 0, NULL, &res, NULL);
  CHECK_EQ_INT(res.event, BBI_FEDROUND_CLOSED);
  CHECK_EQ_INT(res.contributors, 2);
  CHECK(res.params && res.params[0] == 5.0f);
  bb_buffer_free(NULL, res.params);
  /* round 2 is open; round 0 is now 2 rounds old, beyond max_staleness 1 */
  CHECK_EQ_INT(give(fr, 0, 9, late, 1, 0, NULL), BBI_FEDROUND_LATE_DROPPED);
  CHECK_EQ_INT(give(fr, 1, 9, late, 1, 0, NULL), BBI_FEDROUND_LATE_COUNTED);
  const bbi_fedround_counters k = bbi_fedround_get_counters(fr);
  CHECK_EQ_INT(k.late_counted, 2);
  CHECK_EQ_INT(k.late_dropped, 3);
  CHECK_EQ_INT(k.replaced, 1);
  bbi_fedround_free(fr);
}

static uint8_t *snapshot(const bbi_fedround *fr, size_t *len) {
  *len = bbi_fedround_snapshot_size(fr);
  uint8_t *buf = malloc(*len);
  size_t written = 0;
  bb_error err;
  CHECK_MSG(bbi_fedround_snapshot(fr, buf, *len, &written, &err) == 0, "%s", err.message);
  CHECK_EQ_INT(written, *len);
  return buf;
}

/* Round 1 in progress with a late-counted vector, some counters and recent contributors. */
static bbi_fedround *busy_state(void) {
  bbi_fedround *fr = after_one_round(BBI_FEDROUND_LATE_COUNT, 3);
  const float a[1] = {0.3f}, b[1] = {-7.25f};
  give(fr, 0, 5, a, 3, 0, NULL);
  give(fr, 1, 1, b, 2, 0, NULL);
  give(fr, 1, 6, a, 0, 0, NULL); /* rejected */
  return fr;
}

static void finish_round(bbi_fedround *fr, float *out, uint64_t *total) {
  const float c[1] = {11};
  give(fr, 0, 2, c, 1, 0, NULL); /* peer 2 was in round 0: must stay dropped */
  give(fr, 1, 3, c, 5, 0, NULL);
  bbi_fedround_result res;
  bbi_fedround_poll(fr, 0, NULL, &res, NULL);
  CHECK_EQ_INT(res.event, BBI_FEDROUND_CLOSED);
  *out = res.params ? res.params[0] : NAN;
  *total = res.total_samples;
  bb_buffer_free(NULL, res.params);
}

static void test_snapshot_round_trip(void) {
  bbi_fedround *a = busy_state();
  size_t len;
  uint8_t *bytes = snapshot(a, &len);
  bbi_fedround *b = NULL;
  bb_error err;
  CHECK_MSG(bbi_fedround_restore(NULL, bytes, len, &b, &err) == 0, "%s", err.message);
  if (!b) return;
  /* the restored state snapshots to the same bytes */
  size_t len2;
  uint8_t *bytes2 = snapshot(b, &len2);
  CHECK(len2 == len && memcmp(bytes, bytes2, len) == 0);
  CHECK_EQ_INT(bbi_fedround_round_id(b), 1);
  CHECK_EQ_INT(bbi_fedround_pending(b), 2);
  const bbi_fedround_counters ca = bbi_fedround_get_counters(a), cb = bbi_fedround_get_counters(b);
  CHECK(memcmp(&ca, &cb, sizeof ca) == 0);
  float ra, rb;
  uint64_t ta, tb;
  finish_round(a, &ra, &ta);
  finish_round(b, &rb, &tb);
  CHECK(ra == rb);
  CHECK_EQ_INT(ta, 10);
  CHECK_EQ_INT(tb, 10);
  CHECK(fabsf(ra - (float)((3 * 0.3 - 2 * 7.25 + 5 * 11) / 10.0)) < 1e-6f);
  free(bytes);
  free(bytes2);
  bbi_fedround_free(a);
  bbi_fedround_free(b);
}

/* The snapshot's bytes are a format other builds read: a fixed state must keep giving the
 * same bytes (length and FNV-1a 64 pinned from a known-good build). */
static void test_snapshot_bytes_pinned(void) {
  bbi_fedround *a = busy_state();
  size_t len;
  uint8_t *bytes = snapshot(a, &len);
  CHECK_EQ_INT(len, 866);
  CHECK_MSG(bbi_fnv1a64(bytes, len) == 0x2fee8158ef162150ull, "hash %016llx", (unsigned long long)bbi_fnv1a64(bytes, len));
  free(bytes);
  bbi_fedround_free(a);
}

/* busy_state() as the version 1 writer wrote it (the build before the closing config):
 * it still restores, as the plain sample-weighted mean it was, and finishes the round
 * with the same result. */
static const char V1_BUSY_STATE[] =
    "4242465201000000010000000000000002000000000000000000000000000000"
    "0001030000000000000000000000000000000100000000000000000000000000"
    "0000000100000000000000000000000000000001000000000000000100000000"
    "0000000000000000000000000000000000000002000000000000000800000000"
    "00000001010000000000000002000000000000000000e8c00800000000000000"
    "05000000000000000003000000000000009a99993e0200000000000000080000"
    "00000000000100000000000000000800000000000000020000000000000000de"
    "a8d0a4c7ebd5e8";

/* One round of four single-float updates from peers 1..4, closed at `now` from `ref`; its
 * mean (NAN when it did not close) and result. */
static float close_four(bbi_fedround *fr, uint64_t round, const float x[4], const float *ref,
                        bbi_fedround_result *res) {
  for (uint64_t p = 0; p < 4; p++) give(fr, round, p + 1, &x[p], 1, 0, NULL);
  bbi_fedround_poll(fr, 0, ref, res, NULL);
  const float mean = res->event == BBI_FEDROUND_CLOSED ? res->params[0] : NAN;
  bb_buffer_free(NULL, res->params);
  res->params = NULL;
  return mean;
}

/* Past twice the median distance an update is pulled back onto the bound, past
 * drop_factor times it left out; drop_factor 0 pulls back whatever the distance. */
static void test_drop_factor(void) {
  bbi_fedround_config c = config(1);
  c.quorum = 4;
  c.norm_factor = 2;
  c.drop_factor = 3;
  bbi_fedround_result res;
  /* distances 1, 2, 3, 7: median 2.5, bound 5, drop bound 7.5 */
  bbi_fedround *fr = make(&c, 0);
  CHECK(close_four(fr, 0, (const float[]){1, 2, 3, 7}, NULL, &res) == (1 + 2 + 3 + 5) / 4.0f);
  CHECK(res.norm_clipped == 1 && res.norm_dropped == 0 && res.contributors == 4);
  /* 8 is past 7.5 */
  CHECK(close_four(fr, 1, (const float[]){1, 2, 3, 8}, NULL, &res) == 2);
  CHECK(res.norm_clipped == 0 && res.norm_dropped == 1 && res.contributors == 3);
  CHECK(bbi_fedround_get_counters(fr).norm_clipped == 1 && bbi_fedround_get_counters(fr).norm_dropped == 1);
  bbi_fedround_free(fr);
  c.drop_factor = 0;
  fr = make(&c, 0);
  CHECK(close_four(fr, 0, (const float[]){1, 2, 3, 8}, NULL, &res) == (1 + 2 + 3 + 5) / 4.0f);
  bbi_fedround_free(fr);
  /* norm_factor 0 turns the drop bound off with the adaptive one */
  c.norm_factor = 0;
  c.drop_factor = 3;
  fr = make(&c, 0);
  CHECK(close_four(fr, 0, (const float[]){1, 2, 3, 8}, NULL, &res) == 3.5f);
  CHECK(res.norm_dropped == 0 && res.norm_clipped == 0);
  bbi_fedround_free(fr);
  c.norm_factor = 2;
  /* beyond_bound DROP leaves out everything past the bound */
  c.beyond_bound = BBI_FEDROUND_DROP;
  c.drop_factor = 3;
  fr = make(&c, 0);
  CHECK(close_four(fr, 0, (const float[]){1, 2, 3, 7}, NULL, &res) == 2);
  CHECK(res.norm_dropped == 1);
  bbi_fedround_free(fr);
  c.drop_factor = -1;
  bbi_fedround *bad = NULL;
  CHECK_EQ_INT(bbi_fedround_new(NULL, &c, 0, &bad, NULL), BB_ERR_INVALID_ARGUMENT);
}

/* Centered clipping over rounds: the center is the reference moved on by the last round's
 * step, which a snapshot carries. Worked by hand. */
static void test_centered_clipping(void) {
  bbi_fedround_config c = config(1);
  c.quorum = 4;
  c.center_clip = 1;
  bbi_fedround_result res;
  bbi_fedround *a = make(&c, 0);
  /* round 0 from 0, no step yet: deviations 1, 2, 3, 10, median 2.5; 3 and 10 are pulled
   * back to 2.5, the mean of 1, 2, 2.5, 2.5 is 2 */
  const float ref0[1] = {0};
  CHECK(close_four(a, 0, (const float[]){1, 2, 3, 10}, ref0, &res) == 2);
  CHECK_EQ_INT(res.center_clipped, 2);
  /* the step (2) survives a snapshot */
  size_t len;
  uint8_t *bytes = snapshot(a, &len);
  bbi_fedround *b = NULL;
  bb_error err;
  CHECK_MSG(bbi_fedround_restore(NULL, bytes, len, &b, &err) == 0, "%s", err.message);
  free(bytes);
  if (!b) {
    bbi_fedround_free(a);
    return;
  }
  /* round 1 from 2: the center is 4, deviations -1, 0, 1, 16, median 1; 20 is pulled back
   * to 5, and 4 + (-1 + 0 + 1 + 1) / 4 = 4.25 */
  const float ref1[1] = {2}, x1[4] = {3, 4, 5, 20};
  CHECK(close_four(a, 1, x1, ref1, &res) == 4.25f);
  CHECK_EQ_INT(res.center_clipped, 1);
  CHECK(close_four(b, 1, x1, ref1, &res) == 4.25f);
  CHECK_EQ_INT(bbi_fedround_get_counters(a).center_clipped, 3);
  CHECK_EQ_INT(bbi_fedround_get_counters(b).center_clipped, 3);
  bbi_fedround_free(a);
  bbi_fedround_free(b);
  /* a snapshot whose step is cut short, or not finite, is refused */
  a = make(&c, 0);
  close_four(a, 0, (const float[]){1, 2, 3, 10}, ref0, &res);
  bytes = snapshot(a, &len);
  CHECK_EQ_INT(bbi_fedround_restore(NULL, bytes, len - 12, &b, &err), BB_ERR_MALFORMED);
  const float nan = NAN;
  memcpy(bytes + len - 12, &nan, 4);
  const uint64_t sum = bbi_fnv1a64(bytes, len - 8);
  memcpy(bytes + len - 8, &sum, 8);
  CHECK_EQ_INT(bbi_fedround_restore(NULL, bytes, len, &b, &err), BB_ERR_MALFORMED);
  CHECK_MSG(strstr(err.message, "non-finite"), "%s", err.message);
  free(bytes);
  bbi_fedround_free(a);
}

/* The ascent screen in a round: peers 1, 2 and 3 send descent steps, peer 4 its step
 * reversed (test_ascent.c works the same numbers); round 1's reference moved by (0.5,
 * 0.5). Peers 1..3's scores are cos 45°, cos 45° and 1, peer 4's is -1, far below their
 * median (0.854, deviations 0.146: the cut lies at 0.421): its trust falls to -0.5 and
 * with tau 0.1 it is left out; with tau 1 it keeps 1 + (-0.5 + 0.1) of its weight. The
 * screen's memory survives a snapshot. */
static const float SCREEN_ROUND0[4][2] = {{1, 0}, {0, 1}, {1, 1}, {-1, -1}};
static const float SCREEN_REF1[2] = {0.5f, 0.5f};
static const float SCREEN_ROUND1[4][2] = {{1, 0.5f}, {0.5f, 0.75f}, {1, 1}, {0, 0}};

static void close_screened(bbi_fedround *fr, uint64_t round, const float x[4][2], const float *ref,
                           bbi_fedround_result *res) {
  for (uint64_t p = 0; p < 4; p++) give(fr, round, p + 1, x[p], 1, 0, NULL);
  bbi_fedround_poll(fr, 0, ref, res, NULL);
  CHECK_EQ_INT(res->event, BBI_FEDROUND_CLOSED);
}

static bbi_fedround *screened_after_round_0(double tau) {
  bbi_fedround_config c = config(2);
  c.quorum = 4;
  c.ascent_screen = tau;
  bbi_fedround *fr = make(&c, 0);
  bbi_fedround_result res;
  close_screened(fr, 0, SCREEN_ROUND0, NULL, &res);
  CHECK(res.ascent_dropped == 0 && res.ascent_weighed == 0 && res.contributors == 4);
  bb_buffer_free(NULL, res.params);
  return fr;
}

static void test_ascent_screen(void) {
  bbi_fedround *a = screened_after_round_0(0.1);
  size_t len;
  uint8_t *bytes = snapshot(a, &len);
  bbi_fedround *b = NULL;
  bb_error err;
  CHECK_MSG(bbi_fedround_restore(NULL, bytes, len, &b, &err) == 0, "%s", err.message);
  free(bytes);
  bbi_fedround *both[2] = {a, b};
  for (int k = 0; k < 2 && b; k++) {
    bbi_fedround_result res;
    close_screened(both[k], 1, SCREEN_ROUND1, SCREEN_REF1, &res);
    CHECK(res.ascent_dropped == 1 && res.ascent_weighed == 0 && res.contributors == 3);
    CHECK_MSG(res.params && fabsf(res.params[0] - 2.5f / 3) < 1e-6f && fabsf(res.params[1] - 0.75f) < 1e-6f,
              "%g %g", res.params ? res.params[0] : NAN, res.params ? res.params[1] : NAN);
    CHECK_EQ_INT(bbi_fedround_get_counters(both[k]).ascent_dropped, 1);
    bb_buffer_free(NULL, res.params);
  }
  bbi_fedround_free(a);
  bbi_fedround_free(b);
  a = screened_after_round_0(1.0);
  bbi_fedround_result res;
  close_screened(a, 1, SCREEN_ROUND1, SCREEN_REF1, &res);
  CHECK(res.ascent_dropped == 0 && res.ascent_weighed == 1 && res.contributors == 4);
  CHECK(res.params && fabsf(res.params[0] - 2.5f / 3.6f) < 1e-6f && fabsf(res.params[1] - 2.25f / 3.6f) < 1e-6f);
  CHECK_EQ_INT(res.weight, 4); /* 3.6 rounded: what it weighs one tier up */
  bb_buffer_free(NULL, res.params);
  bbi_fedround_free(a);
}

/* busy_state() as the version 2 writer wrote it (the build before the drop factor and
 * centered clipping; its FNV-1a 64 is the one that build's pin held): it still restores,
 * as the bounded mean it was, and finishes the round with the same result. */
static const char V2_BUSY_STATE[] =
    "4242465202000000010000000000000002000000000000000000000000000000"
    "0001030000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000010000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000001000000000000000000"
    "0000000000000100000000000000010000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000200"
    "0000000000000800000000000000010100000000000000020000000000000000"
    "00e8c0080000000000000005000000000000000003000000000000009a99993e"
    "0200000000000000080000000000000001000000000000000008000000000000"
    "000200000000000000007b07e65d285962c1";

/* The bytes of hex text (len bytes; free() them). */
static uint8_t *from_hex(const char *hex, size_t len) {
  uint8_t *bytes = malloc(len);
  for (size_t i = 0; i < len; i++) {
    unsigned byte;
    sscanf(hex + 2 * i, "%2x", &byte);
    bytes[i] = (uint8_t)byte;
  }
  return bytes;
}

/* busy_state() as an older writer wrote it: it restores as round 1 with two pending
 * updates and finishes with busy_state()'s result; NULL when it was refused. */
static bbi_fedround *restore_busy(const uint8_t *bytes, size_t len) {
  bbi_fedround *b = NULL;
  bb_error err;
  CHECK_MSG(bbi_fedround_restore(NULL, bytes, len, &b, &err) == 0, "%s", err.message);
  if (!b) return NULL;
  CHECK_EQ_INT(bbi_fedround_round_id(b), 1);
  CHECK_EQ_INT(bbi_fedround_pending(b), 2);
  float r;
  uint64_t t;
  finish_round(b, &r, &t);
  CHECK(fabsf(r - (float)((3 * 0.3 - 2 * 7.25 + 5 * 11) / 10.0)) < 1e-6f);
  return b;
}

/* An older writer's busy_state() (`hex`, `n` bytes, FNV-1a 64 `hash` as its build's pin
 * held): it restores, finishes the round as it did, and written again is a version 4
 * snapshot of the same state. */
static void check_older_snapshot(const char *hex, size_t n, uint64_t hash) {
  uint8_t *old = from_hex(hex, n);
  CHECK(bbi_fnv1a64(old, n) == hash);
  bbi_fedround *b = restore_busy(old, n);
  free(old);
  if (!b) return;
  size_t len;
  uint8_t *bytes = snapshot(b, &len);
  CHECK(bytes && bb_le_get_u32(bytes + 4) == 4);
  free(bytes);
  bbi_fedround_free(b);
}

static void test_version_2_snapshot(void) {
  CHECK_EQ_INT(sizeof V2_BUSY_STATE / 2, 818);
  check_older_snapshot(V2_BUSY_STATE, sizeof V2_BUSY_STATE / 2, 0x5f93091dd62d1742ull);
}

/* busy_state() as the version 3 writer wrote it (the build before the ascent screen; its
 * FNV-1a 64 is the one that build's pin held). */
static const char V3_BUSY_STATE[] =
    "4242465203000000010000000000000002000000000000000000000000000000"
    "0001030000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000100000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000100000000000000000000000000000001000000000000000100"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000002000000000000000800"
    "00000000000001010000000000000002000000000000000000e8c00800000000"
    "00000005000000000000000003000000000000009a99993e0200000000000000"
    "0800000000000000010000000000000000080000000000000002000000000000"
    "000022404b86bfc97efa";

static void test_version_3_snapshot(void) {
  CHECK_EQ_INT(sizeof V3_BUSY_STATE / 2, 842);
  check_older_snapshot(V3_BUSY_STATE, sizeof V3_BUSY_STATE / 2, 0x86fbd2f6a7aeb831ull);
}

static void test_version_1_snapshot(void) {
  uint8_t *v1 = from_hex(V1_BUSY_STATE, sizeof V1_BUSY_STATE / 2);
  bbi_fedround_free(restore_busy(v1, sizeof V1_BUSY_STATE / 2));
  free(v1);
}

/* Every cut and every flipped bit of a's snapshot is refused. */
static void check_rejects_bad_bytes(bbi_fedround *a) {
  size_t len;
  uint8_t *bytes = snapshot(a, &len);
  bbi_fedround *b = NULL;
  bb_error err;
  for (size_t cut = 0; cut < len; cut++) {
    const int rc = bbi_fedround_restore(NULL, bytes, cut, &b, &err);
    CHECK_MSG(rc == BB_ERR_MALFORMED && b == NULL, "cut at %zu gave %d", cut, rc);
  }
  /* every single flipped bit is caught */
  for (size_t i = 0; i < len; i++) {
    bytes[i] ^= 0x10;
    const int rc = bbi_fedround_restore(NULL, bytes, len, &b, &err);
    CHECK_MSG((rc == BB_ERR_MALFORMED || rc == BB_ERR_UNSUPPORTED) && b == NULL,
              "flip at %zu gave %d", i, rc);
    bytes[i] ^= 0x10;
  }
  uint8_t *longer = malloc(len + 1);
  memcpy(longer, bytes, len);
  longer[len] = 0;
  CHECK_EQ_INT(bbi_fedround_restore(NULL, longer, len + 1, &b, &err), BB_ERR_MALFORMED);
  CHECK(bbi_fedround_snapshot(a, bytes, len - 1, NULL, &err) == BB_ERR_LIMIT);
  free(longer);
  free(bytes);
  bbi_fedround_free(a);
}

static void test_snapshot_rejects_bad_bytes(void) {
  check_rejects_bad_bytes(busy_state());
  /* with centered clipping and a step, after a closed round with an update pending */
  bbi_fedround_config c = config(1);
  c.quorum = 4;
  c.center_clip = 1;
  bbi_fedround *a = make(&c, 0);
  bbi_fedround_result res;
  close_four(a, 0, (const float[]){1, 2, 3, 10}, NULL, &res);
  give(a, 1, 3, (const float[]){2.5f}, 1, 0, NULL);
  check_rejects_bad_bytes(a);
  /* with the ascent screen's memory of two rounds and an update pending */
  a = screened_after_round_0(0.1);
  close_screened(a, 1, SCREEN_ROUND1, SCREEN_REF1, &res);
  bb_buffer_free(NULL, res.params);
  give(a, 2, 1, SCREEN_ROUND1[0], 1, 0, NULL);
  check_rejects_bad_bytes(a);
}

static void test_allocation_failure_keeps_round(void) {
  failing f = {-1, 0};
  bb_allocator alloc = failing_allocator(&f);
  bbi_fedround_config c = config(2);
  c.quorum = 2;
  bbi_fedround *fr = NULL;
  CHECK_EQ_INT(bbi_fedround_new(&alloc, &c, 0, &fr, NULL), 0);
  const float a[2] = {1, 2}, b[2] = {3, 4};
  give(fr, 0, 2, a, 1, 0, NULL);
  /* a failed store leaves the round as it was */
  f.budget = 0;
  int rc;
  give(fr, 0, 1, b, 3, 0, &rc);
  CHECK_EQ_INT(rc, BB_ERR_NOMEM);
  CHECK_EQ_INT(bbi_fedround_pending(fr), 1);
  f.budget = -1;
  give(fr, 0, 1, b, 3, 0, NULL);
  /* every allocation failure while closing leaves everything in place */
  int closed = 0;
  for (long budget = 0; budget < 20 && !closed; budget++) {
    f.budget = budget;
    bbi_fedround_result res;
    bb_error err;
    rc = bbi_fedround_poll(fr, 0, NULL, &res, &err);
    if (rc == 0) {
      closed = 1;
      CHECK_EQ_INT(res.event, BBI_FEDROUND_CLOSED);
      CHECK(res.params && res.params[0] == 2.5f && res.params[1] == 3.5f);
      CHECK_EQ_INT(res.total_samples, 4);
      bb_buffer_free(&alloc, res.params);
    } else {
      CHECK_EQ_INT(rc, BB_ERR_NOMEM);
      CHECK_EQ_INT(res.event, BBI_FEDROUND_IDLE);
      CHECK_EQ_INT(bbi_fedround_pending(fr), 2);
      CHECK_EQ_INT(bbi_fedround_round_id(fr), 0);
      CHECK_EQ_INT(bbi_fedround_get_counters(fr).rounds_closed, 0);
    }
  }
  CHECK(closed);
  f.budget = -1;
  bbi_fedround_free(fr);
  CHECK_EQ_INT(f.live, 0);
}

static void test_bad_config(void) {
  bbi_fedround *fr = NULL;
  bb_error err;
  bbi_fedround_config c = config(0);
  CHECK_EQ_INT(bbi_fedround_new(NULL, &c, 0, &fr, &err), BB_ERR_INVALID_ARGUMENT);
  c = config(2);
  c.quorum = 0;
  CHECK_EQ_INT(bbi_fedround_new(NULL, &c, 0, &fr, &err), BB_ERR_INVALID_ARGUMENT);
  c.quorum = 3;
  c.target = 2;
  CHECK_EQ_INT(bbi_fedround_new(NULL, &c, 0, &fr, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(fr == NULL);
}

int main(void) {
  RUN(test_reference_vector);
  RUN(test_order_independent);
  RUN(test_deadline_and_target);
  RUN(test_extend_policy);
  RUN(test_abandon_policy);
  RUN(test_duplicate_replaces);
  RUN(test_invalid_rejected);
  RUN(test_late_drop);
  RUN(test_late_count);
  RUN(test_snapshot_round_trip);
  RUN(test_snapshot_rejects_bad_bytes);
  RUN(test_snapshot_bytes_pinned);
  RUN(test_version_1_snapshot);
  RUN(test_version_3_snapshot);
  RUN(test_version_2_snapshot);
  RUN(test_drop_factor);
  RUN(test_centered_clipping);
  RUN(test_ascent_screen);
  RUN(test_huge_sample_count_shuts_nobody_out);
  RUN(test_sample_weighting);
  RUN(test_norm_bound);
  RUN(test_methods);
  RUN(test_window_start);
  RUN(test_round_capacity);
  RUN(test_allocation_failure_keeps_round);
  RUN(test_bad_config);
  return bb_test_finish();
}
