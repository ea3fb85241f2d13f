/* The outbound queue alone: envelopes wait in order; past the cap the oldest is dropped,
 * freed and counted, and the count is handed out once. (A snapshot is taken only when
 * the queue is empty, so it has no section to save or load.) */
#include "failalloc.h"
#include "parttest.h"
#include "runtime/outbound.h"
#include "util/mem.h"

static void test_the_oldest_goes_past_the_cap(void) {
  failing fa = {-1, 0};
  bb_allocator alloc = failing_allocator(&fa);
  rt_counters counters;
  rt_counters_init(&counters, &alloc);
  rt_outbound_queue q;
  rt_outbound_init(&q, &alloc, 2, &counters);
  for (uint64_t k = 1; k <= 5; k++) {
    uint8_t *bytes = bbi_mem_alloc(&alloc, 4);
    bytes[0] = (uint8_t)k;
    bb_peer_id p = bb_peer_id_from_u64(k);
    CHECK_EQ_INT(rt_outbound_push(&q, &p, bytes, 4), 0);
  }
  CHECK_EQ_INT(q.items.len, 2);
  CHECK_EQ_INT(rt_outbound_take_dropped(&q), 3);
  CHECK_EQ_INT(rt_outbound_take_dropped(&q), 0);
  CHECK_EQ_INT(rt_counter_value(&counters, "outbound.dropped"), 3);
  rt_outbound o;
  CHECK(rt_outbound_pop(&q, &o) && o.bytes[0] == 4 && o.len == 4);
  bbi_mem_free(&alloc, o.bytes);
  rt_outbound_free(&q); /* frees what still waits */
  rt_counters_free(&counters);
  CHECK_EQ_INT(fa.live, 0);
}

static void test_a_refused_push_frees_the_bytes(void) {
  failing fa = {-1, 0};
  bb_allocator alloc = failing_allocator(&fa);
  rt_outbound_queue q;
  rt_outbound_init(&q, &alloc, 8, NULL);
  uint8_t *bytes = bbi_mem_alloc(&alloc, 4);
  bb_peer_id p = bb_peer_id_from_u64(1);
  fa.budget = 0;
  CHECK_EQ_INT(rt_outbound_push(&q, &p, bytes, 4), BB_ERR_NOMEM);
  fa.budget = -1;
  rt_outbound_free(&q);
  CHECK_EQ_INT(fa.live, 0);
}

int main(void) {
  RUN(test_the_oldest_goes_past_the_cap);
  RUN(test_a_refused_push_frees_the_bytes);
  return bb_test_finish();
}
