/* The replay window alone: a (sender, request, site) seen within the window is a replay,
 * the oldest key leaves a full window, a window saves and loads as it was, and its saved
 * bytes are refused when wrong. */
#include "parttest.h"
#include "runtime/replay.h"

static void test_a_key_is_a_replay_while_it_is_in_the_window(void) {
  rt_replay w;
  rt_replay_init(&w, bb_default_allocator(), 3);
  bb_peer_id a = bb_peer_id_from_u64(1), b = bb_peer_id_from_u64(2);
  CHECK(!rt_replay_seen(&w, &a, 7, 100));
  CHECK(rt_replay_seen(&w, &a, 7, 100));
  CHECK(!rt_replay_seen(&w, &b, 7, 100)); /* another sender */
  CHECK(!rt_replay_seen(&w, &a, 7, 101)); /* another site of the same request */
  CHECK_EQ_INT(w.keys.len, 3);
  CHECK(!rt_replay_seen(&w, &a, 8, 100)); /* the window is full: (a, 7, 100) leaves */
  CHECK_EQ_INT(w.keys.len, 3);
  CHECK(!rt_replay_seen(&w, &a, 7, 100));
  rt_replay_free(&w);
}

static uint8_t *saved(size_t *len) {
  rt_replay w;
  rt_replay_init(&w, bb_default_allocator(), 4);
  bb_peer_id a = bb_peer_id_from_u64(1);
  for (uint64_t req = 1; req <= 3; req++) rt_replay_seen(&w, &a, req, 5);
  bb_le_writer out = bb_le_writer_growing(bb_default_allocator());
  rt_replay_save(&w, &out);
  rt_replay_free(&w);
  *len = out.len;
  return out.buf;
}

static int load_fresh(const uint8_t *bytes, size_t len, bb_error *err) {
  rt_replay w;
  rt_replay_init(&w, bb_default_allocator(), 4);
  rt_reader r = rt_reader_of(bytes, len, bb_default_allocator(), err);
  int rc = read_whole(&r, rt_replay_load(&w, &r));
  rt_replay_free(&w);
  return rc;
}

static void test_save_load_round_trip(void) {
  size_t len;
  uint8_t *bytes = saved(&len);
  CHECK_EQ_INT(len, 8 + 3 * 8);
  rt_replay w;
  rt_replay_init(&w, bb_default_allocator(), 4);
  bb_error err;
  rt_reader r = rt_reader_of(bytes, len, bb_default_allocator(), &err);
  CHECK_MSG(rt_replay_load(&w, &r) == 0, "%s", err.message);
  bb_peer_id a = bb_peer_id_from_u64(1);
  CHECK(rt_replay_seen(&w, &a, 2, 5)); /* what was seen before the save is still a replay */
  CHECK(!rt_replay_seen(&w, &a, 4, 5));
  rt_replay_free(&w);
  free(bytes);
}

static void test_corrupted_bytes_are_refused(void) {
  size_t len;
  uint8_t *bytes = saved(&len);
  check_truncations_refused(bytes, len, load_fresh);
  rt_replay small;
  rt_replay_init(&small, bb_default_allocator(), 2);
  bb_error err;
  rt_reader r = rt_reader_of(bytes, len, bb_default_allocator(), &err);
  CHECK(rt_replay_load(&small, &r) == BB_ERR_MALFORMED && strstr(err.message, "larger than this node's"));
  rt_replay_free(&small);
  uint8_t v[8];
  put_u64_at(v, 1000);
  check_refused(bytes, len, 0, v, 8, load_fresh, "too many dedup keys");
  free(bytes);
}

int main(void) {
  RUN(test_a_key_is_a_replay_while_it_is_in_the_window);
  RUN(test_save_load_round_trip);
  RUN(test_corrupted_bytes_are_refused);
  return bb_test_finish();
}
