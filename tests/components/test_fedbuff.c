/* FedBuff's buffer (components/aggregators/buffered.h) and its component: a contribution
 * s versions old enters as g_now + (p - g_v)/sqrt(1 + s); the model steps every `buffer`
 * contributions and not before; staler than max_staleness, from the future, non-finite or
 * stepping past the float range is refused and changes nothing; the per-contribution
 * bounds of FedAvg (the distance bound) apply to the buffer; the state survives a
 * snapshot, and truncated, corrupt or forged snapshots are refused. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bb/bytes.h"
#include "components/aggregators/buffered.h"
#include "components/shipped.h"
#include "harness.h"
#include "util/hash.h"

/* Bounds off: the buffer's mean is the plain sample-weighted mean, so every step is known. */
static bbi_fedbuff *make_plain(uint32_t buffer, uint64_t max_staleness, const float *initial) {
  bbi_fedbuff_config c;
  memset(&c, 0, sizeof c);
  c.closing.param_len = 2;
  c.buffer = buffer;
  c.max_staleness = max_staleness;
  bbi_fedbuff *fb = NULL;
  bb_error err;
  CHECK_MSG(bbi_fedbuff_new(NULL, &c, initial, 0, &fb, &err) == 0, "%s", err.message);
  return fb;
}

static int offer(bbi_fedbuff *fb, uint64_t key, uint64_t version, float x0, float x1, uint64_t samples,
                 bbi_fedbuff_status *status) {
  uint8_t k[8];
  size_t kl = bbi_fedround_key_from_u64(key, k);
  const float p[2] = {x0, x1};
  bb_error err;
  return bbi_fedbuff_contribute(fb, version, k, kl, p, 2, samples, 0, status, NULL, &err);
}

/* Polls; true when the model stepped (the new version's params into out). */
static bool step(bbi_fedbuff *fb, float out[2]) {
  bbi_fedround_result r;
  bb_error err;
  CHECK_MSG(bbi_fedbuff_poll(fb, 0, &r, &err) == 0, "%s", err.message);
  if (r.event != BBI_FEDROUND_CLOSED) return false;
  memcpy(out, r.params, 2 * sizeof(float));
  bb_buffer_free(NULL, r.params);
  return true;
}

static bool near(double a, double b) { return fabs(a - b) <= 1e-5 * (1 + fabs(b)); }

static void test_staleness_weights(void) {
  CHECK(bbi_fedbuff_staleness_weight(0) == 1.0);
  CHECK(near(bbi_fedbuff_staleness_weight(3), 0.5));
  CHECK(near(bbi_fedbuff_staleness_weight(8), 1.0 / 3));
}

/* Two versions by hand: the buffer steps at 2 and not at 1; a contribution one version old
 * moves the model by its delta from the version it trained from, over sqrt(2). */
static void test_buffer_steps_with_stale_weighed_down(void) {
  bbi_fedbuff *fb = make_plain(2, 4, NULL);
  if (!fb) return;
  bbi_fedbuff_status st;
  float g[2];
  CHECK(offer(fb, 1, 0, 2, 0, 1, &st) == 0 && st == BBI_FEDBUFF_ACCEPTED);
  CHECK(!step(fb, g)); /* one in a buffer of two: no step */
  CHECK_EQ_INT(bbi_fedbuff_version(fb), 0);
  CHECK(offer(fb, 2, 0, 0, 4, 1, &st) == 0);
  CHECK(step(fb, g) && g[0] == 1 && g[1] == 2); /* version 1 = the mean of both */
  CHECK_EQ_INT(bbi_fedbuff_version(fb), 1);
  CHECK(bbi_fedbuff_global(fb)[0] == 1 && bbi_fedbuff_global(fb)[1] == 2);
  /* contributor 3 trained from version 0 (delta [4, 4]); contributor 4 from version 1 */
  CHECK(offer(fb, 3, 0, 4, 4, 1, &st) == 0 && st == BBI_FEDBUFF_ACCEPTED);
  CHECK(offer(fb, 4, 1, 3, 0, 1, &st) == 0);
  CHECK(step(fb, g));
  const double w = 1 / sqrt(2.0);
  const double want0 = ((1 + 4 * w) + 3) / 2, want1 = ((2 + 4 * w) + 0) / 2;
  CHECK_MSG(near(g[0], want0) && near(g[1], want1), "%g %g, want %g %g", (double)g[0], (double)g[1], want0, want1);
  /* unweighted it would have been [4, 3]: the stale step counts less than a fresh one */
  CHECK(g[0] < 4 && g[1] < 3);
  bbi_fedbuff_free(fb);
}

/* Sample counts weigh as in FedAvg; a contributor sending twice replaces its first. */
static void test_samples_and_replacement(void) {
  bbi_fedbuff *fb = make_plain(2, 4, NULL);
  if (!fb) return;
  bbi_fedbuff_status st;
  float g[2];
  CHECK(offer(fb, 1, 0, 100, 100, 1, &st) == 0);
  CHECK(offer(fb, 1, 0, 4, 0, 3, &st) == 0 && st == BBI_FEDBUFF_REPLACED);
  CHECK_EQ_INT(bbi_fedbuff_pending(fb), 1);
  CHECK(!step(fb, g));
  CHECK(offer(fb, 2, 0, 0, 4, 1, &st) == 0);
  CHECK_MSG(step(fb, g) && g[0] == 3 && g[1] == 1, "%g %g", (double)g[0], (double)g[1]);
  bbi_fedbuff_free(fb);
}

/* Past the bound, from the future, wrong length, no samples, NaN, infinity, or a step
 * that leaves the float range: refused, nothing held. */
static void test_hostile_contributions_are_refused(void) {
  const float far[2] = {-3e38f, 0};
  bbi_fedbuff *fb = make_plain(1, 1, far);
  if (!fb) return;
  bbi_fedbuff_status st;
  float g[2];
  CHECK(offer(fb, 1, 0, 3e38f, 0, 1, &st) == 0); /* version 1: [3e38, 0] */
  CHECK(step(fb, g) && g[0] == 3e38f);
  CHECK(offer(fb, 1, 1, 1, 1, 1, &st) == 0);
  CHECK(step(fb, g)); /* version 2: [1, 1] */
  CHECK(offer(fb, 2, 0, 5, 5, 1, &st) < 0 && st == BBI_FEDBUFF_REJECTED_STALE); /* 2 old, bound 1 */
  CHECK(offer(fb, 2, 7, 5, 5, 1, &st) < 0 && st == BBI_FEDBUFF_REJECTED_FUTURE);
  CHECK(offer(fb, 2, 2, 5, 5, 0, &st) < 0 && st == BBI_FEDBUFF_REJECTED_SAMPLES);
  CHECK(offer(fb, 2, 2, NAN, 5, 1, &st) < 0 && st == BBI_FEDBUFF_REJECTED_NONFINITE);
  CHECK(offer(fb, 2, 2, 5, INFINITY, 1, &st) < 0 && st == BBI_FEDBUFF_REJECTED_NONFINITE);
  CHECK(offer(fb, 2, 3, 5, 5, 1, &st) < 0 && st == BBI_FEDBUFF_REJECTED_FUTURE);
  /* from version 1 ([3e38, 0]): [-3e38, 0] is a step of -6e38, past the float range */
  CHECK(offer(fb, 2, 1, -3e38f, 0, 1, &st) < 0 && st == BBI_FEDBUFF_REJECTED_NONFINITE);
  bb_error err;
  uint8_t k[8];
  size_t kl = bbi_fedround_key_from_u64(2, k);
  const float three[3] = {1, 2, 3};
  CHECK(bbi_fedbuff_contribute(fb, 2, k, kl, three, 3, 1, 0, &st, NULL, &err) == BB_ERR_TYPE &&
        st == BBI_FEDBUFF_REJECTED_LENGTH);
  CHECK(bbi_fedbuff_contribute(fb, 2, k, 0, three, 2, 1, 0, &st, NULL, &err) < 0 && st == BBI_FEDBUFF_REJECTED_KEY);
  CHECK_EQ_INT(bbi_fedbuff_pending(fb), 0);
  CHECK(!step(fb, g));
  CHECK_EQ_INT(bbi_fedbuff_version(fb), 2);
  CHECK(bbi_fedbuff_global(fb)[0] == 1 && bbi_fedbuff_global(fb)[1] == 1);
  bbi_fedbuff_free(fb);
}

/* FedAvg's distance bound holds in the buffer: with the defaults (3 × the median
 * distance, clip), one contributor pushing 1e6 away moves the model a bounded step. */
static void test_distance_bound_applies(void) {
  bbi_fedbuff_config c;
  memset(&c, 0, sizeof c);
  c.closing.param_len = 2;
  c.closing.norm_factor = 3;
  c.closing.drop_factor = 4;
  c.buffer = 4;
  c.max_staleness = 4;
  bbi_fedbuff *fb = NULL;
  bb_error err;
  CHECK_MSG(bbi_fedbuff_new(NULL, &c, NULL, 0, &fb, &err) == 0, "%s", err.message);
  if (!fb) return;
  float g[2];
  CHECK(offer(fb, 1, 0, 1, 0, 1, NULL) == 0 && offer(fb, 2, 0, 0, 1, 1, NULL) == 0);
  CHECK(offer(fb, 3, 0, 1, 1, 1, NULL) == 0 && offer(fb, 4, 0, 1e6f, 1e6f, 1, NULL) == 0);
  bbi_fedround_result r;
  CHECK(bbi_fedbuff_poll(fb, 0, &r, &err) == 0 && r.event == BBI_FEDROUND_CLOSED);
  CHECK_EQ_INT(r.norm_dropped, 1); /* far past drop_factor × the median: left out */
  memcpy(g, r.params, sizeof g);
  bb_buffer_free(NULL, r.params);
  CHECK_MSG(fabsf(g[0]) < 2 && fabsf(g[1]) < 2, "%g %g", (double)g[0], (double)g[1]);
  bbi_fedbuff_free(fb);
}

/* ---- snapshots --------------------------------------------------------------------------- */

/* A buffer at version 3 (max_staleness 2: the ring has wrapped) holding one contribution. */
static bbi_fedbuff *busy(void) {
  bbi_fedbuff *fb = make_plain(2, 2, NULL);
  if (!fb) return NULL;
  float g[2];
  for (uint64_t v = 0; v < 3; v++) {
    CHECK(offer(fb, 1, v, (float)v + 1, 2, 1, NULL) == 0 && offer(fb, 2, v, 0, (float)v, 3, NULL) == 0);
    CHECK(step(fb, g));
  }
  CHECK(offer(fb, 5, 1, 7, -7, 2, NULL) == 0);
  return fb;
}

static uint8_t *snapshot_of(const bbi_fedbuff *fb, size_t *len) {
  *len = bbi_fedbuff_snapshot_size(fb);
  uint8_t *b = malloc(*len);
  bb_error err;
  CHECK_MSG(b && bbi_fedbuff_snapshot(fb, b, *len, &err) == 0, "%s", err.message);
  return b;
}

/* updates=deltas: the step itself comes in, weighed alike. */
static void test_deltas(void) {
  bbi_fedbuff_config c;
  memset(&c, 0, sizeof c);
  c.closing.param_len = 2;
  c.buffer = 1;
  c.max_staleness = 4;
  c.deltas = true;
  const float start[2] = {10, 20};
  bbi_fedbuff *fb = NULL;
  bb_error err;
  CHECK_MSG(bbi_fedbuff_new(NULL, &c, start, 0, &fb, &err) == 0, "%s", err.message);
  if (!fb) return;
  float g[2];
  CHECK(offer(fb, 1, 0, 1, -1, 1, NULL) == 0 && step(fb, g) && g[0] == 11 && g[1] == 19);
  CHECK(offer(fb, 2, 0, 4, 4, 1, NULL) == 0 && step(fb, g)); /* one version old */
  CHECK_MSG(near(g[0], 11 + 4 / sqrt(2.0)) && near(g[1], 19 + 4 / sqrt(2.0)), "%g %g", (double)g[0], (double)g[1]);
  size_t len;
  uint8_t *bytes = snapshot_of(fb, &len);
  bbi_fedbuff *b = NULL;
  CHECK(bytes && bbi_fedbuff_restore(NULL, bytes, len, &b, &err) == 0);
  if (b) { /* the restored buffer still takes steps */
    CHECK(offer(b, 3, 2, 1, 1, 1, NULL) == 0 && step(b, g));
    CHECK(near(g[0], 12 + 4 / sqrt(2.0)));
  }
  free(bytes);
  bbi_fedbuff_free(b);
  bbi_fedbuff_free(fb);
}

static void test_snapshot_round_trip(void) {
  bbi_fedbuff *a = busy(), *b = NULL;
  if (!a) return;
  size_t len, len2;
  uint8_t *bytes = snapshot_of(a, &len);
  bb_error err;
  CHECK(bbi_fedbuff_snapshot(a, bytes, len - 1, &err) == BB_ERR_LIMIT);
  CHECK_MSG(bbi_fedbuff_restore(NULL, bytes, len, &b, &err) == 0, "%s", err.message);
  if (b) {
    uint8_t *again = snapshot_of(b, &len2);
    CHECK(len2 == len && memcmp(again, bytes, len) == 0);
    free(again);
    CHECK_EQ_INT(bbi_fedbuff_version(b), 3);
    CHECK_EQ_INT(bbi_fedbuff_pending(b), 1);
    /* both go on alike: a contribution from the oldest version kept, then the step */
    float ga[2], gb[2];
    CHECK(offer(a, 6, 1, 2, 2, 1, NULL) == 0 && offer(b, 6, 1, 2, 2, 1, NULL) == 0);
    CHECK(step(a, ga) && step(b, gb) && memcmp(ga, gb, sizeof ga) == 0);
    CHECK(offer(b, 6, 1, 2, 2, 1, NULL) < 0); /* version 1 is 3 old now in both */
  }
  free(bytes);
  bbi_fedbuff_free(a);
  bbi_fedbuff_free(b);
}

/* Every truncation and every flipped byte is refused; a state whose checksum is right but
 * whose fields disagree (forged) is refused, and another format version is named. */
static void test_bad_snapshots_are_refused(void) {
  bbi_fedbuff *a = busy();
  if (!a) return;
  size_t len;
  uint8_t *bytes = snapshot_of(a, &len);
  bbi_fedbuff *b = NULL;
  bb_error err;
  size_t accepted = 0;
  for (size_t n = 0; n < len; n++)
    if (bbi_fedbuff_restore(NULL, bytes, n, &b, &err) == 0) accepted++, bbi_fedbuff_free(b);
  for (size_t i = 0; i < len; i++) {
    bytes[i] ^= 0x40;
    if (bbi_fedbuff_restore(NULL, bytes, len, &b, &err) == 0) accepted++, bbi_fedbuff_free(b);
    bytes[i] ^= 0x40;
  }
  CHECK_EQ_INT(accepted, 0);
  /* forged with a right checksum: format 2; held versions 1 (the version says 3) */
  uint8_t *forged = malloc(len);
  if (!forged || len < 48) return;
  memcpy(forged, bytes, len);
  forged[4] = 2;
  bb_le_writer w = bb_le_writer_fixed(forged + len - 8, 8);
  bb_le_write_u64(&w, bbi_fnv1a64(forged, len - 8));
  CHECK(bbi_fedbuff_restore(NULL, forged, len, &b, &err) == BB_ERR_UNSUPPORTED);
  memcpy(forged, bytes, len);
  forged[40] = 1; /* the u64 held count at byte 40 */
  w = bb_le_writer_fixed(forged + len - 8, 8);
  bb_le_write_u64(&w, bbi_fnv1a64(forged, len - 8));
  CHECK(bbi_fedbuff_restore(NULL, forged, len, &b, &err) == BB_ERR_MALFORMED);
  free(forged);
  free(bytes);
  bbi_fedbuff_free(a);
}

/* ---- the component ------------------------------------------------------------------------ */

static int create(const char *config, void **self, bb_error *err) {
  bb_component_init init = {"aggregator", config, 0, 7, bb_default_allocator(), NULL, NULL};
  return BBI_FEDBUFF.create(&init, self, err);
}

static void test_component_config(void) {
  void *self = NULL;
  bb_error err;
  CHECK(create("buffer=0", &self, &err) == BB_ERR_INVALID_ARGUMENT);
  CHECK(create("max_staleness=100000", &self, &err) == BB_ERR_INVALID_ARGUMENT);
  CHECK(create("quorum=3", &self, &err) < 0); /* a FedAvg key: no rounds here */
  CHECK(create("beyond_norm=maybe", &self, &err) == BB_ERR_INVALID_ARGUMENT);
  CHECK(create("updates=gradients", &self, &err) == BB_ERR_INVALID_ARGUMENT);
  CHECK_MSG(create("buffer=3,max_staleness=4,weighting=uniform", &self, &err) == 0, "%s", err.message);
  if (self) BBI_FEDBUFF.destroy(self);
}

/* The component's state is u8 started then the buffer's snapshot: it loads and saves
 * back to the same bytes, and a bad state leaves the component as it was. */
static void test_component_state(void) {
  bbi_fedbuff *a = busy();
  void *self = NULL;
  bb_error err;
  if (!a || create("", &self, &err) != 0) return;
  size_t n;
  uint8_t *snap = snapshot_of(a, &n);
  uint8_t *state = malloc(n + 1);
  if (!state || !snap) return;
  state[0] = 1;
  memcpy(state + 1, snap, n);
  CHECK_MSG(BBI_FEDBUFF.load(self, state, n + 1, &err) == 0, "%s", err.message);
  uint8_t *saved = NULL;
  size_t saved_len = 0;
  CHECK_MSG(BBI_FEDBUFF.save(self, bb_default_allocator(), &saved, &saved_len, &err) == 0, "%s", err.message);
  CHECK(saved_len == n + 1 && memcmp(saved, state, n + 1) == 0);
  bb_buffer_free(bb_default_allocator(), saved);
  state[0] = 2;
  CHECK(BBI_FEDBUFF.load(self, state, n + 1, &err) == BB_ERR_MALFORMED);
  state[0] = 1;
  CHECK(BBI_FEDBUFF.load(self, state, n, &err) == BB_ERR_MALFORMED);
  CHECK(BBI_FEDBUFF.save(self, bb_default_allocator(), &saved, &saved_len, &err) == 0);
  CHECK(saved_len == n + 1 && memcmp(saved, state, n + 1) == 0); /* unchanged by the bad loads */
  bb_buffer_free(bb_default_allocator(), saved);
  free(state);
  free(snap);
  BBI_FEDBUFF.destroy(self);
  bbi_fedbuff_free(a);
}

int main(void) {
  RUN(test_staleness_weights);
  RUN(test_buffer_steps_with_stale_weighed_down);
  RUN(test_samples_and_replacement);
  RUN(test_hostile_contributions_are_refused);
  RUN(test_distance_bound_applies);
  RUN(test_deltas);
  RUN(test_snapshot_round_trip);
  RUN(test_bad_snapshots_are_refused);
  RUN(test_component_config);
  RUN(test_component_state);
  return bb_test_finish();
}
