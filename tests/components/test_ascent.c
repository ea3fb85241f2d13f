/* The ascent screen: scores worked by hand, the rounds it skips, what it remembers and for
 * how long, its snapshot and allocation failure. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "components/aggregators/ascent.h"
#include "failalloc.h"
#include "harness.h"

#define TAU 0.1

static const uint8_t KEYS[3][1] = {{'a'}, {'b'}, {'c'}};

/* Update i of three from contributor KEYS[i] at params[i] (2 floats each). */
static void updates_of(bbi_ascent_update u[3], const float params[3][2], bool fresh) {
  for (size_t i = 0; i < 3; i++) u[i] = (bbi_ascent_update){KEYS[i], 1, params[i], fresh};
}

/* Weighs round `round` from `ref` and remembers it; trust and weight into the arrays. */
static void close_round(bbi_ascent *a, uint64_t round, const float ref[2], const bbi_ascent_update *u, size_t n,
                        double *trust, double *weight) {
  double scratch[6];
  bbi_ascent_weigh(a, round, ref, u, n, TAU, trust, weight, scratch);
  CHECK_EQ_INT(bbi_ascent_reserve(a, u, n, NULL), 0);
  bbi_ascent_commit(a, round, ref, u, n, trust);
}

static bool near(double x, double y) { return fabs(x - y) < 1e-6; }

/* Round 0 from the origin: a and b step along an axis each, c (the liar) sends (-1, -1).
 * Round 1 from (0.5, 0.5): a's and b's steps shrink along the move (descent), c's grows
 * along it (the reversed step). */
static const float ROUND0[3][2] = {{1, 0}, {0, 1}, {-1, -1}};
static const float REF1[2] = {0.5f, 0.5f};
static const float ROUND1[3][2] = {{1, 0.5f}, {0.5f, 0.75f}, {0, 0}};

static bbi_ascent *after_round_0(void) {
  bbi_ascent *a = NULL;
  CHECK_EQ_INT(bbi_ascent_new(NULL, 2, &a, NULL), 0);
  bbi_ascent_update u[3];
  updates_of(u, ROUND0, true);
  double trust[3], weight[3];
  close_round(a, 0, NULL, u, 3, trust, weight);
  for (size_t i = 0; i < 3; i++) CHECK(trust[i] == 0 && weight[i] == 1); /* nothing to compare yet */
  return a;
}

/* a's step changes by (-0.5, 0), b's by (0, -0.75), c's by (0.5, 0.5), the model moved by
 * (0.5, 0.5): scores cos 45° for a and b, -1 for c. Their median is cos 45° with no
 * spread, so c's score counts: each trust becomes half its score, c's -0.5 is past
 * -0.1 - tau and c weighs nothing. */
static void test_scores_worked(void) {
  bbi_ascent *a = after_round_0();
  bbi_ascent_update u[3];
  updates_of(u, ROUND1, true);
  double trust[3], weight[3], scratch[6];
  bbi_ascent_weigh(a, 1, REF1, u, 3, TAU, trust, weight, scratch);
  CHECK_MSG(near(trust[0], 0.5 * sqrt(0.5)) && near(trust[1], 0.5 * sqrt(0.5)), "%g %g", trust[0], trust[1]);
  CHECK_MSG(near(trust[2], -0.5), "%g", trust[2]);
  CHECK(weight[0] == 1 && weight[1] == 1 && weight[2] == 0);
  /* a wider tau leaves c part of its weight: 1 + (-0.5 + 0.1) / 1 */
  bbi_ascent_weigh(a, 1, REF1, u, 3, 1.0, trust, weight, scratch);
  CHECK(near(weight[2], 0.6) && weight[0] == 1);
  bbi_ascent_free(a);
}

/* Round 0 of senders a, b, c, d from the origin at `round0`, then how round 1 from REF1 at
 * `round1` moves their trust and weight. */
static void four_senders(const float round0[4][2], const float round1[4][2], double trust[4], double weight[4]) {
  static const uint8_t names[4][1] = {{'a'}, {'b'}, {'c'}, {'d'}};
  bbi_ascent_update u[4], v[4];
  for (size_t i = 0; i < 4; i++) {
    u[i] = (bbi_ascent_update){names[i], 1, round0[i], true};
    v[i] = (bbi_ascent_update){names[i], 1, round1[i], true};
  }
  bbi_ascent *a = NULL;
  CHECK_EQ_INT(bbi_ascent_new(NULL, 2, &a, NULL), 0);
  double scratch[8];
  bbi_ascent_weigh(a, 0, NULL, u, 4, TAU, trust, weight, scratch);
  CHECK_EQ_INT(bbi_ascent_reserve(a, u, 4, NULL), 0);
  bbi_ascent_commit(a, 0, NULL, u, 4, trust);
  bbi_ascent_weigh(a, 1, REF1, v, 4, TAU, trust, weight, scratch);
  bbi_ascent_free(a);
}

static const float FOUR_ROUND0[4][2] = {{1, 0}, {0, 1}, {-1, -1}, {0.5f, 0.5f}};

/* Scores that scatter (every step mostly noise): a negative one within two robust
 * standard deviations of the median counts as 0 and costs its sender nothing. The four
 * senders' steps change by (1, -0.8), (0, -0.75), (-0.5, -0.5) and (-0.3, 0.1): scores
 * -0.110, 0.707, 1 and 0.447. Median 0.577, median absolute deviation 0.276: the cut
 * 0.577 - 2 × 1.4826 × 0.276 = -0.242 lies below a's -0.110. */
static void test_scattered_scores_cost_nothing(void) {
  const float round1[4][2] = {{2.5f, -0.3f}, {0.5f, 0.75f}, {-1, -1}, {0.7f, 1.1f}};
  double trust[4], weight[4];
  four_senders(FOUR_ROUND0, round1, trust, weight);
  CHECK_MSG(trust[0] == 0 && weight[0] == 1, "%g %g", trust[0], weight[0]);
  CHECK_MSG(near(trust[1], 0.5 * sqrt(0.5)) && near(trust[2], 0.5) && near(trust[3], 0.5 * sqrt(0.2)), "%g %g %g", trust[1],
            trust[2], trust[3]);
}

/* A step change whose score against the move (0.5, 0.5) is `score`: the unit vector at the
 * angle acos(-score) from (1, 1). */
static void change_scoring(double score, float out[2]) {
  const double angle = acos(-score) + atan2(1, 1);
  out[0] = (float)cos(angle);
  out[1] = (float)sin(angle);
}

/* Four senders whose round-1 scores are 0.6, 0.1, -0.05 and -0.4: the median, 0.025, lies
 * within the spread (a robust standard deviation of 1.4826 × 0.25), so the round is not
 * judged and no trust moves — not even the best sender's. */
static void test_unclear_round_skipped(void) {
  const double scores[4] = {0.6, 0.1, -0.05, -0.4};
  float round1[4][2];
  for (size_t i = 0; i < 4; i++) {
    float change[2];
    change_scoring(scores[i], change);
    for (size_t j = 0; j < 2; j++) round1[i][j] = REF1[j] + FOUR_ROUND0[i][j] + change[j];
  }
  double trust[4], weight[4];
  four_senders(FOUR_ROUND0, round1, trust, weight);
  for (size_t i = 0; i < 4; i++) CHECK_MSG(trust[i] == 0 && weight[i] == 1, "%zu: %g", i, trust[i]);
}

/* When every step grows along the move (momentum building up early on) the median score
 * is negative: the round says nothing and no trust moves. */
static void test_uninformative_round_skipped(void) {
  bbi_ascent *a = after_round_0();
  const float grown[3][2] = {{1.75f, 0.75f}, {0.75f, 1.75f}, {0, 0}};
  bbi_ascent_update u[3];
  updates_of(u, grown, true);
  double trust[3], weight[3], scratch[6];
  bbi_ascent_weigh(a, 1, REF1, u, 3, TAU, trust, weight, scratch);
  for (size_t i = 0; i < 3; i++) CHECK(trust[i] == 0 && weight[i] == 1);
  bbi_ascent_free(a);
}

/* A late copy (trained from an older model) is neither scored nor remembered. */
static void test_late_copies_not_scored(void) {
  bbi_ascent *a = after_round_0();
  bbi_ascent_update u[3];
  updates_of(u, ROUND1, true);
  u[2].fresh = false;
  double trust[3], weight[3];
  close_round(a, 1, REF1, u, 3, trust, weight);
  CHECK(trust[2] == 0 && weight[2] == 1);
  bbi_ascent_free(a);
}

/* A round that only contributor d took part in. */
static void close_round_of_d(bbi_ascent *a, uint64_t round) {
  static const uint8_t d[1] = {'d'};
  const bbi_ascent_update u = {d, 1, REF1, true};
  double trust, weight;
  close_round(a, round, REF1, &u, 1, &trust, &weight);
}

/* Steps are compared across a gap of up to BBI_ASCENT_RING rounds, not beyond; a trust
 * outlives its step for BBI_ASCENT_FORGET rounds. */
static void test_memory_spans(void) {
  for (uint64_t gap = BBI_ASCENT_RING; gap <= BBI_ASCENT_RING + 1; gap++) {
    bbi_ascent *a = after_round_0();
    for (uint64_t r = 1; r < gap; r++) close_round_of_d(a, r);
    bbi_ascent_update u[3];
    updates_of(u, ROUND1, true);
    double trust[3], weight[3], scratch[6];
    bbi_ascent_weigh(a, gap, REF1, u, 3, TAU, trust, weight, scratch);
    CHECK_MSG(gap == BBI_ASCENT_RING ? near(trust[2], -0.5) : trust[2] == 0, "gap %llu: %g",
              (unsigned long long)gap, trust[2]);
    bbi_ascent_free(a);
  }
  bbi_ascent *a = after_round_0();
  bbi_ascent_update u[3];
  double trust[3], weight[3], scratch[6];
  updates_of(u, ROUND1, true);
  close_round(a, 1, REF1, u, 3, trust, weight);
  for (uint64_t r = 2; r < 1 + BBI_ASCENT_FORGET; r++) close_round_of_d(a, r);
  bbi_ascent_weigh(a, 1 + BBI_ASCENT_FORGET, REF1, u, 3, TAU, trust, weight, scratch);
  CHECK(near(trust[2], -0.5) && weight[2] == 0);
  close_round_of_d(a, 1 + BBI_ASCENT_FORGET);
  bbi_ascent_weigh(a, 2 + BBI_ASCENT_FORGET, REF1, u, 3, TAU, trust, weight, scratch);
  CHECK(trust[2] == 0 && weight[2] == 1);
  bbi_ascent_free(a);
}

static uint8_t *written(const bbi_ascent *a, size_t *len) {
  *len = bbi_ascent_snapshot_size(a);
  uint8_t *buf = malloc(*len);
  bb_le_writer w = bb_le_writer_fixed(buf, *len);
  bbi_ascent_write(a, &w);
  CHECK(bb_le_writer_ok(&w) && w.len == *len);
  return buf;
}

static int read_back(const uint8_t *bytes, size_t len, uint64_t open_round, bbi_ascent **out, bb_error *err) {
  bbi_ascent *b = NULL;
  CHECK_EQ_INT(bbi_ascent_new(NULL, 2, &b, NULL), 0);
  bb_le_reader in = bb_le_reader_of(bytes, len);
  int rc = bbi_ascent_read(b, &in, open_round, err);
  if (!rc && in.at != len) rc = -1;
  if (rc) bbi_ascent_free(b);
  *out = rc ? NULL : b;
  return rc;
}

/* What a snapshot holds decides round 1 the same way; every cut, a trust out of range,
 * keys out of order and a reference from the open round are refused. */
static void test_snapshot(void) {
  bbi_ascent *a = after_round_0();
  size_t len;
  uint8_t *bytes = written(a, &len);
  bbi_ascent *b = NULL;
  bb_error err;
  CHECK_MSG(read_back(bytes, len, 1, &b, &err) == 0, "%s", err.message);
  if (b) {
    bbi_ascent_update u[3];
    updates_of(u, ROUND1, true);
    double ta[3], wa[3], tb[3], wb[3], scratch[6];
    bbi_ascent_weigh(a, 1, REF1, u, 3, TAU, ta, wa, scratch);
    bbi_ascent_weigh(b, 1, REF1, u, 3, TAU, tb, wb, scratch);
    CHECK(memcmp(ta, tb, sizeof ta) == 0 && memcmp(wa, wb, sizeof wa) == 0);
    size_t len2;
    uint8_t *again = written(b, &len2);
    CHECK(len2 == len && memcmp(again, bytes, len) == 0);
    free(again);
    bbi_ascent_free(b);
  }
  for (size_t cut = 0; cut < len; cut++) CHECK_MSG(read_back(bytes, cut, 1, &b, &err) != 0, "cut %zu", cut);
  CHECK_EQ_INT(read_back(bytes, len, 0, &b, &err), BB_ERR_MALFORMED); /* round 0 not closed yet */
  /* the first slot holds round 0 (1 + 8 + 8 bytes), slots 1..3 are empty, then the count:
   * the first contributor's trust sits after its key length, key and round */
  const size_t trust_at = 17 + 3 + 8 + 1 + 1 + 8;
  const double bad_trust = 1.5;
  memcpy(bytes + trust_at, &bad_trust, 8);
  CHECK_EQ_INT(read_back(bytes, len, 1, &b, &err), BB_ERR_MALFORMED);
  CHECK_MSG(strstr(err.message, "trust"), "%s", err.message);
  free(bytes);
  bbi_ascent_free(a);
}

/* A failed reserve changes nothing the screen decides by, and nothing leaks. */
static void test_allocation_failure(void) {
  failing f = {-1, 0};
  bb_allocator alloc = failing_allocator(&f);
  bbi_ascent *a = NULL;
  CHECK_EQ_INT(bbi_ascent_new(&alloc, 2, &a, NULL), 0);
  bbi_ascent_update u[3];
  updates_of(u, ROUND0, true);
  double trust[3], weight[3], scratch[6];
  int reserved = 0;
  for (long budget = 0; budget < 10 && !reserved; budget++) {
    f.budget = budget;
    const int rc = bbi_ascent_reserve(a, u, 3, NULL);
    reserved = rc == 0;
    if (rc) CHECK_EQ_INT(rc, BB_ERR_NOMEM);
  }
  CHECK(reserved);
  f.budget = -1;
  bbi_ascent_weigh(a, 0, NULL, u, 3, TAU, trust, weight, scratch);
  bbi_ascent_commit(a, 0, NULL, u, 3, trust);
  updates_of(u, ROUND1, true);
  bbi_ascent_weigh(a, 1, REF1, u, 3, TAU, trust, weight, scratch);
  CHECK(near(trust[2], -0.5));
  bbi_ascent_free(a);
  CHECK_EQ_INT(f.live, 0);
}

int main(void) {
  RUN(test_scores_worked);
  RUN(test_scattered_scores_cost_nothing);
  RUN(test_uninformative_round_skipped);
  RUN(test_unclear_round_skipped);
  RUN(test_late_copies_not_scored);
  RUN(test_memory_spans);
  RUN(test_snapshot);
  RUN(test_allocation_failure);
  return bb_test_finish();
}
