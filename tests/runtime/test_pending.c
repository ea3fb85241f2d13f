/* The pending table alone: ops parked by command id, found, removed (handing the
 * execution back untouched), saved and loaded, and its saved bytes refused when wrong. */
#include "parttest.h"
#include "runtime/pending.h"

static uint64_t next_command = 1000;

static void test_add_find_remove_keep_every_entry_reachable(void) {
  rt_pending_table t;
  rt_pending_init(&t, bb_default_allocator());
  rt_exec e = {.id = 1};
  bool live[600] = {0};
  /* commands come and go in an order that wraps probe chains; every live one stays found */
  for (uint64_t round = 0; round < 3000; round++) {
    uint64_t cmd = 1 + (round * 7919) % 600;
    rt_pending *p = rt_pending_find(&t, cmd);
    CHECK_EQ_INT(p != NULL, live[cmd - 1]);
    if (p) {
      rt_pending back = rt_pending_remove(&t, p);
      CHECK(back.command == cmd && back.exec == &e && back.op == (uint32_t)cmd);
      live[cmd - 1] = false;
    } else {
      CHECK_EQ_INT(rt_pending_add(&t, cmd, &e, (uint32_t)cmd), 0);
      live[cmd - 1] = true;
    }
    CHECK(t.cap == 0 || (t.cap & (t.cap - 1)) == 0);
    CHECK(t.len * 2 <= t.cap);
  }
  size_t n_live = 0;
  for (uint64_t c = 1; c <= 600; c++) {
    n_live += live[c - 1];
    CHECK_EQ_INT(rt_pending_find(&t, c) != NULL, live[c - 1]);
  }
  CHECK_EQ_INT(t.len, n_live);
  CHECK_EQ_INT(e.refs, 0); /* the table never touches references: its holder does */
  rt_pending_free(&t);
}

static void test_one_command_is_awaited_once(void) {
  rt_pending_table t;
  rt_pending_init(&t, bb_default_allocator());
  rt_exec e = {.id = 1};
  CHECK_EQ_INT(rt_pending_add(&t, 5, &e, 0), 0);
  CHECK_EQ_INT(rt_pending_add(&t, 5, &e, 1), BB_ERR_EXISTS);
  CHECK_EQ_INT(t.len, 1);
  CHECK_EQ_INT(rt_pending_find(&t, 5)->op, 0);
  rt_pending_free(&t);
}

/* Three parked ops of two executions, saved. */
static uint8_t *saved(size_t *len, fake_execs *f) {
  rt_pending_table t;
  rt_pending_init(&t, bb_default_allocator());
  rt_pending_add(&t, 11, &f->items[0], 2);
  rt_pending_add(&t, 12, &f->items[1], 0);
  rt_pending_add(&t, 13, &f->items[0], 3);
  bb_le_writer w = bb_le_writer_growing(bb_default_allocator());
  rt_pending_save(&t, &w);
  rt_pending_free(&t);
  CHECK(!w.failed);
  *len = w.len;
  return w.buf;
}

/* Loads bytes into t (fresh) against executions g, at most max entries. */
static int load(rt_pending_table *t, fake_execs *g, const uint8_t *bytes, size_t len, size_t max, bb_error *err) {
  fake_execs_init(g, 2, 4);
  rt_exec_lookup lookup = fake_lookup(g);
  rt_pending_init(t, bb_default_allocator());
  rt_reader r = rt_reader_of(bytes, len, bb_default_allocator(), err);
  return read_whole(&r, rt_pending_load(t, &r, &lookup, next_command, max));
}

static int load_fresh(const uint8_t *bytes, size_t len, bb_error *err) {
  fake_execs g;
  rt_pending_table t;
  int rc = load(&t, &g, bytes, len, 16, err);
  rt_pending_free(&t);
  return rc;
}

static void test_save_load_round_trip(void) {
  fake_execs f;
  fake_execs_init(&f, 2, 4);
  size_t len;
  uint8_t *bytes = saved(&len, &f);
  CHECK_EQ_INT(len, 8 + 3 * 20);
  rt_pending_table t;
  fake_execs g;
  bb_error err;
  CHECK_MSG(load(&t, &g, bytes, len, 16, &err) == 0, "%s", err.message);
  CHECK_EQ_INT(t.len, 3);
  CHECK(rt_pending_find(&t, 11) && rt_pending_find(&t, 11)->exec == &g.items[0] && rt_pending_find(&t, 11)->op == 2);
  CHECK(rt_pending_find(&t, 12) && rt_pending_find(&t, 12)->exec == &g.items[1]);
  CHECK(rt_pending_find(&t, 13) && rt_pending_find(&t, 13)->op == 3);
  CHECK_EQ_INT(g.items[0].refs, 2); /* each loaded entry holds its execution once */
  CHECK_EQ_INT(g.items[1].refs, 1);
  bb_le_writer w = bb_le_writer_growing(bb_default_allocator());
  rt_pending_save(&t, &w);
  CHECK(w.len == len && memcmp(w.buf, bytes, len) == 0); /* the same bytes again */
  free(w.buf);
  rt_pending_free(&t);
  free(bytes);
}

static void test_corrupted_bytes_are_refused(void) {
  fake_execs f;
  fake_execs_init(&f, 2, 4);
  size_t len;
  uint8_t *bytes = saved(&len, &f);
  check_truncations_refused(bytes, len, load_fresh);
  uint8_t v[8];
  put_u64_at(v, 1u << 20);
  check_refused(bytes, len, 0, v, 8, load_fresh, "too many pending operations");
  put_u64_at(v, 9); /* the first entry's execution: no such id */
  check_refused(bytes, len, 16, v, 8, load_fresh, "unknown execution, op or command");
  put_u64_at(v, next_command); /* a command never minted */
  check_refused(bytes, len, 8, v, 8, load_fresh, "unknown execution, op or command");
  uint8_t op[4] = {9, 0, 0, 0}; /* an op its graph does not have */
  check_refused(bytes, len, 24, op, 4, load_fresh, "unknown execution, op or command");
  /* the second entry waits for the first one's command */
  uint8_t *twice = malloc(len);
  memcpy(twice, bytes, len);
  memcpy(twice + 28, bytes + 8, 8);
  bb_error err;
  CHECK(load_fresh(twice, len, &err) == BB_ERR_MALFORMED && strstr(err.message, "two pending operations"));
  free(twice);
  free(bytes);
}

static void test_limit_refused(void) {
  fake_execs f;
  fake_execs_init(&f, 2, 4);
  size_t len;
  uint8_t *bytes = saved(&len, &f);
  rt_pending_table t;
  fake_execs g;
  bb_error err;
  CHECK(load(&t, &g, bytes, len, 2, &err) == BB_ERR_MALFORMED && strstr(err.message, "limits"));
  rt_pending_free(&t);
  free(bytes);
}

int main(void) {
  RUN(test_add_find_remove_keep_every_entry_reachable);
  RUN(test_one_command_is_awaited_once);
  RUN(test_save_load_round_trip);
  RUN(test_corrupted_bytes_are_refused);
  RUN(test_limit_refused);
  return bb_test_finish();
}
