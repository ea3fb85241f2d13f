/* Steps and counters alone: a step list owns what its steps point to until released and
 * flags, rather than loses silently, what it could not allocate; counters count by name,
 * save and load as they were, and their saved bytes are refused when wrong. */
#include "failalloc.h"
#include "parttest.h"
#include "runtime/steps.h"

static void test_a_list_owns_what_its_steps_point_to(void) {
  failing fa = {-1, 0};
  bb_allocator alloc = failing_allocator(&fa);
  rt_steps s;
  rt_steps_init(&s, &alloc);
  bb_val *v = bb_val_u64(NULL, BB_VAL_U64, 7);
  bb_step *st = rt_step(&s, BB_STEP_APP_EVENT);
  CHECK(st && st->kind == BB_STEP_APP_EVENT && st->fill_index == -1);
  CHECK_EQ_INT(rt_step_hold(&s, v), 0);
  st->value = v;
  st->topic = rt_step_str(&s, "topic");
  rt_report(&s, BB_STEP_OP_FAILED, NULL, "why", "detail %d", 42);
  CHECK_EQ_INT(s.len, 2);
  CHECK_STR(s.items[1].detail, "detail 42");
  CHECK_STR(s.items[0].topic, "topic");
  rt_step(&s, BB_STEP_SEND);
  rt_step_cancel(&s);
  CHECK_EQ_INT(s.len, 2);
  bb_val_release(v); /* the list still holds it */
  CHECK_EQ_INT(bb_val_as_u64(s.items[0].value), 7);
  rt_steps_release(&s);
  CHECK_EQ_INT(s.len, 0);
  CHECK(!s.nomem);
  rt_steps_free(&s);
  CHECK_EQ_INT(fa.live, 0);
}

/* A poll hands out what accumulated; the next one first releases what it handed out. */
static void test_steps_are_handed_out_and_released_a_poll_later(void) {
  failing fa = {-1, 0};
  bb_allocator alloc = failing_allocator(&fa);
  rt_steps acc, batch;
  rt_steps_init(&acc, &alloc);
  rt_steps_init(&batch, &alloc);
  for (int poll = 0; poll < 3; poll++) {
    rt_steps_release(&batch);
    rt_report(&acc, BB_STEP_OP_FAILED, NULL, "why", "poll %d", poll);
    rt_steps_hand_out(&acc, &batch);
    CHECK_EQ_INT(acc.len, 0);
    CHECK(batch.len == 1 && strstr(batch.items[0].detail, "poll") != NULL);
    CHECK_EQ_INT(acc.n_owned, 0); /* what batch points to is batch's */
  }
  rt_steps_free(&acc);
  rt_steps_free(&batch);
  CHECK_EQ_INT(fa.live, 0);
}

static void test_a_failed_allocation_is_flagged(void) {
  failing fa = {0, 0};
  bb_allocator alloc = failing_allocator(&fa);
  rt_steps s;
  rt_steps_init(&s, &alloc);
  CHECK(rt_step(&s, BB_STEP_SEND) == NULL);
  CHECK(s.nomem);
  rt_counters c;
  rt_counters_init(&c, &alloc);
  rt_count(&c, "x", 1);
  CHECK(c.nomem && rt_counter_value(&c, "x") == 0);
  rt_count(NULL, "x", 1); /* a part without counters counts nothing */
  rt_steps_free(&s);
  rt_counters_free(&c);
  CHECK_EQ_INT(fa.live, 0);
}

static uint8_t *saved(size_t *len) {
  rt_counters c;
  rt_counters_init(&c, bb_default_allocator());
  rt_count(&c, "wire.rejected", 2);
  rt_count(&c, "book.evicted", 1);
  rt_count(&c, "wire.rejected", 3);
  CHECK_EQ_INT(rt_counter_value(&c, "wire.rejected"), 5);
  CHECK_EQ_INT(c.len, 2);
  bb_le_writer w = bb_le_writer_growing(bb_default_allocator());
  rt_counters_save(&c, &w);
  rt_counters_free(&c);
  *len = w.len;
  return w.buf;
}

static int load_fresh(const uint8_t *bytes, size_t len, bb_error *err) {
  rt_counters c;
  rt_counters_init(&c, bb_default_allocator());
  rt_reader r = rt_reader_of(bytes, len, bb_default_allocator(), err);
  int rc = read_whole(&r, rt_counters_load(&c, &r));
  rt_counters_free(&c);
  return rc;
}

static void test_counters_save_and_load(void) {
  size_t len;
  uint8_t *bytes = saved(&len);
  rt_counters c;
  rt_counters_init(&c, bb_default_allocator());
  bb_error err;
  rt_reader r = rt_reader_of(bytes, len, bb_default_allocator(), &err);
  CHECK_MSG(rt_counters_load(&c, &r) == 0, "%s", err.message);
  CHECK_EQ_INT(rt_counter_value(&c, "wire.rejected"), 5);
  CHECK_EQ_INT(rt_counter_value(&c, "book.evicted"), 1);
  bb_le_writer w = bb_le_writer_growing(bb_default_allocator());
  rt_counters_save(&c, &w);
  CHECK(w.len == len && memcmp(w.buf, bytes, len) == 0);
  free(w.buf);
  rt_counters_free(&c);
  /* out of memory at every allocation: refused as such, nothing kept */
  for (long budget = 0; budget < 8; budget++) {
    failing fa = {budget, 0};
    bb_allocator alloc = failing_allocator(&fa);
    rt_counters_init(&c, &alloc);
    r = rt_reader_of(bytes, len, &alloc, &err);
    int rc = rt_counters_load(&c, &r);
    CHECK(rc == 0 || rc == BB_ERR_NOMEM);
    rt_counters_free(&c);
    CHECK_EQ_INT(fa.live, 0);
  }
  free(bytes);
}

static void test_corrupted_counters_are_refused(void) {
  size_t len;
  uint8_t *bytes = saved(&len);
  check_truncations_refused(bytes, len, load_fresh);
  uint8_t nul = 0;
  check_refused(bytes, len, 16, &nul, 1, load_fresh, "empty or holds NUL");
  /* the second name spelled as the first (both 13 bytes would not fit: make both "book.evicted") */
  uint8_t *twice = malloc(len);
  memcpy(twice, bytes, len);
  memcpy(twice + 8, bytes + 8 + 8 + 13 + 8, 8 + 12); /* first name := "book.evicted" (12 bytes) */
  size_t shorter = len - 1;
  memmove(twice + 8 + 8 + 12, bytes + 8 + 8 + 13, len - (8 + 8 + 13));
  bb_error err;
  CHECK(load_fresh(twice, shorter, &err) == BB_ERR_MALFORMED && strstr(err.message, "named twice"));
  free(twice);
  free(bytes);
}

int main(void) {
  RUN(test_a_list_owns_what_its_steps_point_to);
  RUN(test_steps_are_handed_out_and_released_a_poll_later);
  RUN(test_a_failed_allocation_is_flagged);
  RUN(test_counters_save_and_load);
  RUN(test_corrupted_counters_are_refused);
  return bb_test_finish();
}
