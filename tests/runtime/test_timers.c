/* The timer heap alone: timers fire by time and, at one time, in the order they were set;
 * the cap counts what it drops; a heap saves and loads as it was; its saved bytes are
 * refused when wrong. */
#include "parttest.h"
#include "runtime/timers.h"

static void test_due_timers_fire_in_time_then_insertion_order(void) {
  rt_counters counters;
  rt_counters_init(&counters, bb_default_allocator());
  rt_timers t;
  rt_timers_init(&t, bb_default_allocator(), 100, &counters);
  /* ids 0..59 at times 30 - id % 3 * 10: three times, twenty timers each */
  for (uint64_t id = 0; id < 60; id++)
    CHECK_EQ_INT(rt_timers_add(&t, 30 - id % 3 * 10, RT_TIMER_COMPLETE, id, NULL, 0, 0), 0);
  CHECK_EQ_INT(rt_timers_next(&t), 10);
  rt_timer x;
  CHECK(!rt_timers_pop_due(&t, 9, &x)); /* nothing is due before its time */
  uint64_t last_at = 0, last_id = 0;
  size_t popped = 0;
  while (rt_timers_pop_due(&t, 30, &x)) {
    CHECK(x.at > last_at || (x.at == last_at && x.id > last_id)); /* set later, fires later */
    last_at = x.at;
    last_id = x.id;
    popped++;
  }
  CHECK_EQ_INT(popped, 60);
  CHECK_EQ_INT(rt_timers_next(&t), UINT64_MAX);
  rt_timers_free(&t);
  rt_counters_free(&counters);
}

static void test_the_cap_refuses_and_counts(void) {
  rt_counters counters;
  rt_counters_init(&counters, bb_default_allocator());
  rt_timers t;
  rt_timers_init(&t, bb_default_allocator(), 3, &counters);
  for (int i = 0; i < 3; i++) CHECK_EQ_INT(rt_timers_add(&t, 5, RT_TIMER_COMPLETE, (uint64_t)i, NULL, 0, 0), 0);
  CHECK_EQ_INT(rt_timers_add(&t, 1, RT_TIMER_COMPLETE, 9, NULL, 0, 0), BB_ERR_LIMIT);
  CHECK_EQ_INT(rt_timers_add(&t, 1, RT_TIMER_COMPLETE, 9, NULL, 0, 0), BB_ERR_LIMIT);
  CHECK_EQ_INT(rt_counter_value(&counters, "timers.dropped"), 2);
  CHECK_EQ_INT(t.len, 3);
  CHECK_EQ_INT(t.seq, 3); /* a refused timer takes no place */
  rt_timers_free(&t);
  rt_counters_free(&counters);
}

static bool op_is_odd(const rt_timer *x, void *user) {
  (void)user;
  return x->op % 2 == 1;
}

/* Bringing Interval timers forward: only the ones the predicate picks, only Interval ones,
 * never later than they were; the heap then pops by (time, insertion order) as ever. */
static void test_bring_forward_picks_intervals_and_keeps_the_order(void) {
  rt_timers t;
  rt_timers_init(&t, bb_default_allocator(), 100, NULL);
  /* ops 0..39 as Interval timers at 1000 + op, a COMPLETE timer at 50 with id 7 (odd but not an
     Interval), and op 41 already due at 5 */
  for (uint32_t op = 0; op < 40; op++) CHECK_EQ_INT(rt_timers_add(&t, 1000 + op, RT_TIMER_INTERVAL, 0, NULL, op, 0), 0);
  CHECK_EQ_INT(rt_timers_add(&t, 50, RT_TIMER_COMPLETE, 7, NULL, 7, 0), 0);
  CHECK_EQ_INT(rt_timers_add(&t, 5, RT_TIMER_INTERVAL, 0, NULL, 41, 0), 0);
  CHECK_EQ_INT(rt_timers_bring_forward(&t, 10, op_is_odd, NULL), 20);
  rt_timer x;
  CHECK(rt_timers_pop_due(&t, 10, &x) && x.op == 41 && x.at == 5); /* due earlier: kept its time */
  for (uint32_t op = 1; op < 40; op += 2) /* then the odd ones, now due at 10, in the order set */
    CHECK(rt_timers_pop_due(&t, 10, &x) && x.kind == RT_TIMER_INTERVAL && x.op == op && x.at == 10);
  CHECK(!rt_timers_pop_due(&t, 49, &x));
  CHECK(rt_timers_pop_due(&t, 50, &x) && x.kind == RT_TIMER_COMPLETE);
  for (uint32_t op = 0; op < 40; op += 2) CHECK(rt_timers_pop_due(&t, 2000, &x) && x.op == op && x.at == 1000 + op);
  CHECK_EQ_INT(rt_timers_next(&t), UINT64_MAX);
  CHECK_EQ_INT(rt_timers_bring_forward(&t, 10, op_is_odd, NULL), 0);
  rt_timers_free(&t);
}

/* Timers of every kind, some due at one time, saved. */
static uint8_t *saved(size_t *len, fake_execs *f, rt_timers *keep) {
  rt_timers_init(keep, bb_default_allocator(), 16, NULL);
  rt_timers_add(keep, 50, RT_TIMER_INTERVAL, 0, &f->items[1], 3, 0);
  rt_timers_add(keep, 20, RT_TIMER_COMPLETE, 7, NULL, 0, 0);
  rt_timers_add(keep, 20, RT_TIMER_COMPONENT, 99, NULL, 0, 1);
  rt_timers_add(keep, 10, RT_TIMER_COMPLETE, 8, NULL, 0, 0);
  bb_le_writer w = bb_le_writer_growing(bb_default_allocator());
  rt_timers_save(keep, &w);
  CHECK(!w.failed);
  *len = w.len;
  return w.buf;
}

/* Loads bytes into t (fresh) against executions g and two components. */
static int load(rt_timers *t, fake_execs *g, const uint8_t *bytes, size_t len, bb_error *err) {
  fake_execs_init(g, 2, 4);
  rt_exec_lookup lookup = fake_lookup(g);
  rt_timers_init(t, bb_default_allocator(), 16, NULL);
  rt_reader r = rt_reader_of(bytes, len, bb_default_allocator(), err);
  return read_whole(&r, rt_timers_load(t, &r, &lookup, 2));
}

static int load_fresh(const uint8_t *bytes, size_t len, bb_error *err) {
  fake_execs g;
  rt_timers t;
  int rc = load(&t, &g, bytes, len, err);
  rt_timers_free(&t);
  return rc;
}

static void test_save_load_round_trip(void) {
  fake_execs f;
  fake_execs_init(&f, 2, 4);
  rt_timers kept;
  size_t len;
  uint8_t *bytes = saved(&len, &f, &kept);
  CHECK_EQ_INT(len, 8 + 4 * 41);
  fake_execs g;
  rt_timers t;
  bb_error err;
  CHECK_MSG(load(&t, &g, bytes, len, &err) == 0, "%s", err.message);
  CHECK_EQ_INT(g.items[1].refs, 1); /* the Interval timer holds its execution */
  CHECK_EQ_INT(t.len, kept.len);
  for (size_t i = 0; i < t.len && i < kept.len; i++) { /* the same heap, entry by entry */
    CHECK(t.items[i].at == kept.items[i].at && t.items[i].seq == kept.items[i].seq);
    CHECK(t.items[i].kind == kept.items[i].kind && t.items[i].id == kept.items[i].id);
    CHECK((t.items[i].exec ? t.items[i].exec->id : 0) == (kept.items[i].exec ? kept.items[i].exec->id : 0));
  }
  /* and they fire as the saved ones would */
  rt_timer a, b;
  t.seq = kept.seq;
  while (rt_timers_pop_due(&kept, UINT64_MAX, &a)) {
    CHECK(rt_timers_pop_due(&t, UINT64_MAX, &b));
    CHECK(a.at == b.at && a.id == b.id && a.kind == b.kind && a.component == b.component);
  }
  CHECK_EQ_INT(t.len, 0);
  rt_timers_free(&t);
  rt_timers_free(&kept);
  free(bytes);
}

static void test_corrupted_bytes_are_refused(void) {
  fake_execs f;
  fake_execs_init(&f, 2, 4);
  rt_timers kept;
  size_t len;
  uint8_t *bytes = saved(&len, &f, &kept);
  check_truncations_refused(bytes, len, load_fresh);
  /* find each kind's entry in the saved heap: kind at +16, op at +25, component at +29,
   * execution at +33 of each 41-byte entry */
  for (size_t i = 0; i < kept.len; i++) {
    size_t at = 8 + i * 41;
    uint8_t v[8];
    if (kept.items[i].kind == RT_TIMER_INTERVAL) {
      put_u64_at(v, 3);
      check_refused(bytes, len, at + 33, v, 8, load_fresh, "interval timer names an unknown execution");
      uint8_t op[4] = {4, 0, 0, 0};
      check_refused(bytes, len, at + 25, op, 4, load_fresh, "interval timer names an unknown execution");
    } else if (kept.items[i].kind == RT_TIMER_COMPONENT) {
      uint8_t comp[4] = {2, 0, 0, 0};
      check_refused(bytes, len, at + 29, comp, 4, load_fresh, "component timer names an unknown component");
    } else {
      put_u64_at(v, 1);
      check_refused(bytes, len, at + 33, v, 8, load_fresh, "unknown kind");
      uint8_t kind = 7;
      check_refused(bytes, len, at + 16, &kind, 1, load_fresh, "unknown kind");
    }
  }
  uint8_t v[8];
  put_u64_at(v, 17);
  check_refused(bytes, len, 0, v, 8, load_fresh, "too many timers");
  rt_timers_free(&kept);
  free(bytes);
}

int main(void) {
  RUN(test_due_timers_fire_in_time_then_insertion_order);
  RUN(test_the_cap_refuses_and_counts);
  RUN(test_bring_forward_picks_intervals_and_keeps_the_order);
  RUN(test_save_load_round_trip);
  RUN(test_corrupted_bytes_are_refused);
  return bb_test_finish();
}
