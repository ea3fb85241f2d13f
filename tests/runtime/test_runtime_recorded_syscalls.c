/* Syscalls recorded with the DSL's bb_rec_syscall run as the runtime implements them, once
 * compiled: Sleep parks until its duration passed, Clock reads the node's time, AppEmit
 * and AppNotify publish events, IncrMetric counts, Limit.Acquire lets at most n through,
 * Serialize queues Bytes in order. */
#include "rttest.h"

static bb_value sys1(bb_rec *g, const char *op, bb_value in, const bb_op_attr *attrs, size_t n_attrs) {
  bb_value out = {0};
  bb_rec_syscall(g, op, &in, 1, attrs, n_attrs, &out, 1);
  return out;
}

static void sys0(bb_rec *g, const char *op, bb_value in, const char *name) {
  bb_op_attr a = BB_OP_ATTR_STRING("name", name);
  bb_rec_syscall(g, op, &in, 1, &a, 1, NULL, 0);
}

static void timed_body(bb_rec *g, void *user) {
  (void)user;
  bb_value go = bb_rec_input(g, "go", NULL);
  bb_value woke = sys1(g, "Sleep", go, (bb_op_attr[]){BB_OP_ATTR_INT("duration_ns", 100)}, 1);
  sys0(g, "AppEmit", sys1(g, "Clock", woke, NULL, 0), "woke_at");
  sys0(g, "IncrMetric", woke, "slept");
  bb_op_attr once[] = {BB_OP_ATTR_STRING("name", "one"), BB_OP_ATTR_INT("n", 1)};
  sys0(g, "AppNotify", sys1(g, "Limit.Acquire", go, once, 2), "acquired");
  bb_op_attr q = BB_OP_ATTR_STRING("queue", "q");
  bb_value queued = sys1(g, "Serialize.Enqueue", go, &q, 1);
  sys0(g, "AppEmit", sys1(g, "Serialize.Dequeue", queued, &q, 1), "dequeued");
}

static const bb_module TIMED = {sizeof(bb_module), "Timed", timed_body, NULL, NULL, NULL, 0};

static int configure_nothing(bb_compiler *c, const void *user, bb_error *err) {
  (void)c;
  (void)user;
  (void)err;
  return 0;
}

static size_t events(const bb_step *s, size_t n, const char *topic, const bb_val **last) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (s[i].kind == BB_STEP_APP_EVENT && strcmp(s[i].topic, topic) == 0) k++, *last = s[i].value;
  return k;
}

static void invoke_go(bb_node *n, const char *text, uint64_t now) {
  bb_error err;
  CHECK_MSG(bb_node_deliver_event(n, "Timed", "go", (const uint8_t *)text, strlen(text), now, &err) == 0, "%s",
            err.message);
}

static void test_recorded_syscalls_run(void) {
  size_t len = 0;
  uint8_t *art = compile_test_module(&TIMED, configure_nothing, NULL, &len);
  if (!art) return;
  const char *targets[] = {"Timed"};
  bb_node *n = install_peer(art, len, 1, targets, 1, shipped_registry(), NULL);
  free(art);
  if (!n) return;
  invoke_go(n, "first", 10);
  invoke_go(n, "second", 20);
  const bb_step *s = NULL;
  size_t count = 0;
  bb_error err;
  const bb_val *v = NULL;
  CHECK_MSG(bb_node_poll(n, 20, &s, &count, &err) == 0, "%s", err.message);
  CHECK_EQ_INT(events(s, count, "woke_at", &v), 0); /* both runs sleep */
  CHECK_EQ_INT(events(s, count, "acquired", &v), 1); /* the limit of one let the first through */
  CHECK_EQ_INT(events(s, count, "dequeued", &v), 2);
  CHECK(v && bb_val_kind_of(v) == BB_VAL_BYTES && bb_val_count(v) == 6 && memcmp(bb_val_as_bytes(v), "second", 6) == 0);
  /* the runs start at the poll: both sleeps end 100 ns after it */
  CHECK_EQ_INT(bb_node_expiry(n), 120);
  CHECK_MSG(bb_node_poll(n, 119, &s, &count, &err) == 0, "%s", err.message);
  CHECK_EQ_INT(events(s, count, "woke_at", &v), 0);
  CHECK_MSG(bb_node_poll(n, 120, &s, &count, &err) == 0, "%s", err.message);
  CHECK_EQ_INT(events(s, count, "woke_at", &v), 2);
  CHECK(v && bb_val_kind_of(v) == BB_VAL_TIMESTAMP && bb_val_as_u64(v) == 120);
  CHECK_EQ_INT(bb_node_counter(n, "slept"), 2);
  bb_node_free(n);
}

int main(void) {
  RUN(test_recorded_syscalls_run);
  return bb_test_finish();
}
