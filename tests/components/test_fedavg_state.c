/* FedAvg's saved state, a format other builds read: u8 started, u64 n and n floats of the
 * last global model, then the rounds' own snapshot. A state built by that layout loads and
 * saves back to the same bytes (pinned by length and FNV-1a 64); states that break the
 * layout are refused. */
#include <stdlib.h>
#include <string.h>

#include "bb/runtime.h"
#include "components/aggregators/rounds.h"
#include "components/shipped.h"
#include "harness.h"
#include "bb/bytes.h"
#include "util/hash.h"

static void *create_fedavg(void) {
  bb_component_init init = {"aggregator", "", 0, 7, bb_default_allocator(), NULL, NULL};
  void *self = NULL;
  bb_error err;
  CHECK_MSG(BBI_FEDAVG.create(&init, &self, &err) == 0, "%s", err.message);
  return self;
}

/* Rounds over 2 parameters with round 0 closed and round 1 holding one contribution. */
static uint8_t *rounds_snapshot(size_t *len) {
  bbi_fedround_config c;
  memset(&c, 0, sizeof c);
  c.param_len = 2;
  c.quorum = 2;
  c.deadline_ns = 5000;
  bbi_fedround *fr = NULL;
  bb_error err;
  CHECK_MSG(bbi_fedround_new(NULL, &c, 100, &fr, &err) == 0, "%s", err.message);
  if (!fr) return NULL;
  const float a[2] = {1.5f, -2}, b[2] = {0.25f, 8};
  uint8_t key[8];
  size_t kl = bbi_fedround_key_from_u64(11, key);
  CHECK(bbi_fedround_contribute(fr, 0, key, kl, a, 3, 100, NULL, &err) == 0);
  kl = bbi_fedround_key_from_u64(12, key);
  CHECK(bbi_fedround_contribute(fr, 0, key, kl, b, 1, 100, NULL, &err) == 0);
  bbi_fedround_result res;
  CHECK(bbi_fedround_poll(fr, 6000, NULL, &res, &err) == 0 && res.event == BBI_FEDROUND_CLOSED);
  bb_buffer_free(NULL, res.params);
  CHECK(bbi_fedround_contribute(fr, 1, key, kl, a, 2, 6100, NULL, &err) == 0);
  *len = bbi_fedround_snapshot_size(fr);
  uint8_t *bytes = malloc(*len);
  CHECK(bbi_fedround_snapshot(fr, bytes, *len, NULL, &err) == 0);
  bbi_fedround_free(fr);
  return bytes;
}

/* started, then the global model's floats, then the rounds. */
static uint8_t *state(bool started, const float *global, size_t g, const uint8_t *rounds, size_t rounds_len,
                      size_t *len) {
  bb_le_writer w = bb_le_writer_growing(bb_default_allocator());
  bb_le_write_u8(&w, started);
  bb_le_write_u64(&w, g);
  for (size_t i = 0; i < g; i++) bb_le_write_f32(&w, global[i]);
  bb_le_write(&w, rounds, rounds_len);
  CHECK(bb_le_writer_ok(&w));
  *len = w.len;
  return w.buf;
}

/* Loads bytes into a fresh FedAvg and returns what it saves (NULL when load refused). */
static uint8_t *load_and_save(const uint8_t *bytes, size_t len, size_t *out_len, int *load_rc) {
  void *self = create_fedavg();
  if (!self) return NULL;
  bb_error err;
  uint8_t *out = NULL;
  *load_rc = BBI_FEDAVG.load(self, bytes, len, &err);
  if (!*load_rc) CHECK_MSG(BBI_FEDAVG.save(self, bb_default_allocator(), &out, out_len, &err) == 0, "%s", err.message);
  BBI_FEDAVG.destroy(self);
  return out;
}

static void test_state_bytes_pinned(void) {
  size_t rounds_len = 0;
  uint8_t *rounds = rounds_snapshot(&rounds_len);
  if (!rounds) return;
  const float global[2] = {0.75f, -1.25f};
  size_t len = 0, saved_len = 0;
  uint8_t *bytes = state(true, global, 2, rounds, rounds_len, &len);
  int rc;
  uint8_t *saved = load_and_save(bytes, len, &saved_len, &rc);
  CHECK_EQ_INT(rc, 0);
  CHECK(saved && saved_len == len && memcmp(saved, bytes, len) == 0);
  CHECK_EQ_INT(len, 824);
  CHECK_MSG(bbi_fnv1a64(bytes, len) == 0x1c9841f3f3c7a2bdull, "hash %016llx", (unsigned long long)bbi_fnv1a64(bytes, len));
  free(saved);
  free(bytes);

  /* before the first vector: started and nothing else */
  const uint8_t fresh[9] = {1, 0, 0, 0, 0, 0, 0, 0, 0};
  saved = load_and_save(fresh, sizeof fresh, &saved_len, &rc);
  CHECK_EQ_INT(rc, 0);
  CHECK(saved && saved_len == sizeof fresh && memcmp(saved, fresh, sizeof fresh) == 0);
  free(saved);
  /* rounds but no global model yet */
  bytes = state(false, NULL, 0, rounds, rounds_len, &len);
  saved = load_and_save(bytes, len, &saved_len, &rc);
  CHECK_EQ_INT(rc, 0);
  CHECK(saved && saved_len == len && memcmp(saved, bytes, len) == 0);
  free(saved);
  free(bytes);
  free(rounds);
}

static void test_bad_state_refused(void) {
  size_t rounds_len = 0, len = 0, saved_len = 0;
  uint8_t *rounds = rounds_snapshot(&rounds_len);
  if (!rounds) return;
  const float global[3] = {1, 2, 3};
  int rc;
  /* a global model of another length than the rounds' */
  uint8_t *bytes = state(true, global, 3, rounds, rounds_len, &len);
  CHECK(load_and_save(bytes, len, &saved_len, &rc) == NULL && rc == BB_ERR_MALFORMED);
  free(bytes);
  /* a global model and no rounds */
  bytes = state(true, global, 2, NULL, 0, &len);
  CHECK(load_and_save(bytes, len, &saved_len, &rc) == NULL && rc == BB_ERR_MALFORMED);
  free(bytes);
  /* started is 0 or 1; fewer than 9 bytes */
  const uint8_t two[9] = {2};
  CHECK(load_and_save(two, sizeof two, &saved_len, &rc) == NULL && rc == BB_ERR_MALFORMED);
  CHECK(load_and_save(two, 8, &saved_len, &rc) == NULL && rc == BB_ERR_MALFORMED);
  /* a count of floats past the end */
  bytes = state(true, global, 2, rounds, rounds_len, &len);
  bytes[8] = 0x40;
  CHECK(load_and_save(bytes, len, &saved_len, &rc) == NULL && rc == BB_ERR_MALFORMED);
  free(bytes);
  free(rounds);
}

int main(void) {
  RUN(test_state_bytes_pinned);
  RUN(test_bad_state_refused);
  return bb_test_finish();
}
