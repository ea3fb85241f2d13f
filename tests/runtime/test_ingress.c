/* The ingress queue alone: events wait in order up to the cap, the bytes their values
 * hold count against the budget until they are released. (A snapshot is taken only when
 * the queue is empty, so it has no section to save or load.) */
#include "failalloc.h"
#include "parttest.h"
#include "runtime/ingress.h"
#include "util/mem.h"

/* An INVOKE event holding one bytes value of `size` bytes, charged to q. */
static rt_event invoke_of(rt_ingress *q, size_t size, int target) {
  rt_event ev = {.kind = RT_EV_INVOKE, .target = target};
  ev.names = bbi_mem_calloc(q->alloc, 2, sizeof *ev.names);
  ev.vals = bbi_mem_calloc(q->alloc, 2, sizeof *ev.vals);
  ev.names[0] = bbi_mem_strdup(q->alloc, "x");
  uint8_t buf[64] = {0};
  ev.vals[0] = bb_val_bytes(q->alloc, buf, size);
  ev.n_vals = 1;
  ev.charged = size;
  q->bytes += size;
  return ev;
}

static void test_events_wait_in_order_within_the_cap_and_budget(void) {
  failing fa = {-1, 0};
  bb_allocator alloc = failing_allocator(&fa);
  rt_ingress q;
  rt_ingress_init(&q, &alloc, 100);
  CHECK(rt_ingress_fits(&q, 100) && !rt_ingress_fits(&q, 101));
  for (int i = 0; i < 3; i++) {
    rt_event ev = invoke_of(&q, 30, i);
    CHECK_EQ_INT(rt_ingress_push(&q, &ev, 3), 0);
  }
  CHECK_EQ_INT(q.bytes, 90);
  CHECK(rt_ingress_fits(&q, 10) && !rt_ingress_fits(&q, 11));
  rt_event more = invoke_of(&q, 5, 9);
  CHECK_EQ_INT(rt_ingress_push(&q, &more, 3), BB_ERR_LIMIT); /* the cap: the caller keeps its event */
  rt_event_release(&q, &more);
  CHECK_EQ_INT(q.bytes, 90);
  for (size_t k = 0; k < 3; k++) CHECK_EQ_INT(rt_ingress_at(&q, k)->target, (int)k);
  rt_event_release(&q, rt_ingress_at(&q, 0)); /* a released event returns its bytes */
  CHECK_EQ_INT(q.bytes, 60);
  rt_ingress_free(&q); /* and so does every event still queued */
  CHECK_EQ_INT(q.bytes, 0);
  CHECK_EQ_INT(fa.live, 0);
}

static void test_a_refused_push_leaves_the_event_with_its_owner(void) {
  failing fa = {-1, 0};
  bb_allocator alloc = failing_allocator(&fa);
  rt_ingress q;
  rt_ingress_init(&q, &alloc, 1000);
  rt_event ev = invoke_of(&q, 8, 0);
  fa.budget = 0; /* the queue cannot grow */
  CHECK_EQ_INT(rt_ingress_push(&q, &ev, 10), BB_ERR_NOMEM);
  fa.budget = -1;
  CHECK_EQ_INT(q.events.len, 0);
  rt_event_release(&q, &ev);
  CHECK_EQ_INT(q.bytes, 0);
  rt_ingress_free(&q);
  CHECK_EQ_INT(fa.live, 0);
}

int main(void) {
  RUN(test_events_wait_in_order_within_the_cap_and_budget);
  RUN(test_a_refused_push_leaves_the_event_with_its_owner);
  return bb_test_finish();
}
