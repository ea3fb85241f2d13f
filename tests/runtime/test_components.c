/* The components table alone: found by slot and by number, each component's state saved
 * and loaded, a section naming other components refused, and a component refusing its
 * state putting back the fresh state of those loaded before it. */
#include "parttest.h"
#include "runtime/components.h"
#include "util/mem.h"

/* A component holding one u64; `picky` refuses any state it is handed. */
typedef struct counter {
  uint64_t value;
} counter;

static int counter_save(const void *self, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  (void)err;
  *out = bbi_mem_alloc(alloc, 8);
  if (!*out) return BB_ERR_NOMEM;
  put_u64_at(*out, ((const counter *)self)->value);
  *len = 8;
  return 0;
}

static int counter_load(void *self, const uint8_t *state, size_t len, bb_error *err) {
  if (len != 8) return bb_error_set(err, BB_ERR_MALFORMED, "want 8 bytes, got %zu", len);
  ((counter *)self)->value = bb_le_get_u64(state);
  return 0;
}

static int picky_load(void *self, const uint8_t *state, size_t len, bb_error *err) {
  (void)self, (void)state, (void)len;
  return bb_error_set(err, BB_ERR_MALFORMED, "no state suits me");
}

static const bb_component_type COUNTER = {.struct_size = sizeof(bb_component_type), .type_name = "Counter",
                                          .save = counter_save, .load = counter_load};
static const bb_component_type PICKY = {.struct_size = sizeof(bb_component_type), .type_name = "Picky",
                                        .save = counter_save, .load = picky_load};

typedef struct table {
  counter state[3];
  rt_component items[3];
  rt_components cs;
} table;

static void table_init(table *t, const bb_component_type *last, uint64_t base) {
  static char *slots[] = {"a", "b", "c"};
  memset(t, 0, sizeof *t);
  for (int i = 0; i < 3; i++) {
    t->state[i].value = base + (uint64_t)i;
    t->items[i] = (rt_component){.type = i == 2 ? last : &COUNTER, .self = &t->state[i], .slot = slots[i],
                                 .number = 100u + (uint32_t)i};
  }
  t->cs = (rt_components){bb_default_allocator(), t->items, 3};
}

static void test_lookup_by_slot_and_number(void) {
  table t;
  table_init(&t, &COUNTER, 0);
  CHECK(rt_component_by_slot(&t.cs, "b") == &t.items[1]);
  CHECK(rt_component_by_slot(&t.cs, "z") == NULL);
  CHECK(rt_component_by_number(&t.cs, 102) == &t.items[2]);
  CHECK(rt_component_by_number(&t.cs, 7) == NULL);
}

static uint8_t *saved(size_t *len) {
  table t;
  table_init(&t, &COUNTER, 40);
  bb_le_writer w = bb_le_writer_growing(bb_default_allocator());
  bb_error err;
  CHECK(rt_components_save(&t.cs, &w, &err) == 0);
  *len = w.len;
  return w.buf;
}

static void test_states_save_and_load(void) {
  size_t len;
  uint8_t *bytes = saved(&len);
  table t;
  table_init(&t, &COUNTER, 0);
  bb_error err;
  rt_reader r = rt_reader_of(bytes, len, bb_default_allocator(), &err);
  CHECK_MSG(rt_components_check(&t.cs, &r) == 0 && !bb_le_left(&r.in), "%s", err.message);
  CHECK_EQ_INT(t.state[0].value, 0); /* checking loads nothing */
  r = rt_reader_of(bytes, len, bb_default_allocator(), &err);
  CHECK_MSG(rt_components_load(&t.cs, &r) == 0, "%s", err.message);
  CHECK(t.state[0].value == 40 && t.state[1].value == 41 && t.state[2].value == 42);
  free(bytes);
}

static int check_fresh(const uint8_t *bytes, size_t len, bb_error *err) {
  table t;
  table_init(&t, &COUNTER, 0);
  rt_reader r = rt_reader_of(bytes, len, bb_default_allocator(), err);
  return read_whole(&r, rt_components_check(&t.cs, &r));
}

static void test_another_set_of_components_is_refused(void) {
  size_t len;
  uint8_t *bytes = saved(&len);
  check_truncations_refused(bytes, len, check_fresh);
  check_refused(bytes, len, 8 + 8, "x", 1, check_fresh, "not this node's (slot or type differs)");
  uint8_t four[8] = {4};
  check_refused(bytes, len, 0, four, 8, check_fresh, "another set of components");
  free(bytes);
}

static void test_a_refused_state_puts_back_the_fresh_ones(void) {
  size_t len;
  uint8_t *bytes = saved(&len);
  table t;
  table_init(&t, &PICKY, 0);
  bb_error err;
  rt_reader r = rt_reader_of(bytes, len, bb_default_allocator(), &err);
  CHECK(rt_components_load(&t.cs, &r) == BB_ERR_MALFORMED && strstr(err.message, "refused its state"));
  CHECK(t.state[0].value == 0 && t.state[1].value == 1); /* loaded, then put back */
  free(bytes);
}

int main(void) {
  RUN(test_lookup_by_slot_and_number);
  RUN(test_states_save_and_load);
  RUN(test_another_set_of_components_is_refused);
  RUN(test_a_refused_state_puts_back_the_fresh_ones);
  return bb_test_finish();
}
