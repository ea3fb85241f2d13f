/* The shared helpers of src/util: allocation wrappers, little-endian bytes, FNV-1a and the
 * growable ring, each against values computed outside the code under test. */
#include <stdint.h>
#include <string.h>

#include "failalloc.h"
#include "harness.h"
#include "bb/bytes.h"
#include "util/hash.h"
#include "util/mem.h"
#include "util/mem_pool.h"
#include "util/ring.h"

static void test_mem_wrappers(void) {
  failing f = {-1, 0};
  bb_allocator a = failing_allocator(&f);
  void *p = bbi_mem_alloc(&a, 0);
  CHECK(p != NULL); /* size 0 still allocates, so NULL means only out of memory */
  bbi_mem_free(&a, p);
  bbi_mem_free(&a, NULL);
  uint32_t *z = bbi_mem_calloc(&a, 5, sizeof *z);
  CHECK(z && z[0] == 0 && z[4] == 0);
  bbi_mem_free(&a, z);
  CHECK(bbi_mem_calloc(&a, SIZE_MAX / 2, 4) == NULL); /* the product overflows */
  char *s = bbi_mem_strdup(&a, "peer");
  CHECK_STR(s, "peer");
  bbi_mem_free(&a, s);

  int *items = NULL;
  size_t cap = 0;
  CHECK_EQ_INT(bbi_mem_grow(&a, (void **)&items, &cap, 3, sizeof *items), 0);
  CHECK_EQ_INT(cap, 8);
  CHECK_EQ_INT(bbi_mem_grow(&a, (void **)&items, &cap, 9, sizeof *items), 0);
  CHECK_EQ_INT(cap, 16);
  f.budget = 0;
  CHECK_EQ_INT(bbi_mem_grow(&a, (void **)&items, &cap, 17, sizeof *items), BB_ERR_NOMEM);
  CHECK_EQ_INT(cap, 16); /* a failed grow leaves the array as it was */
  CHECK_EQ_INT(bbi_mem_grow(&a, (void **)&items, &cap, SIZE_MAX, sizeof *items), BB_ERR_NOMEM);
  f.budget = -1;
  bbi_mem_free(&a, items);
  CHECK_EQ_INT(f.live, 0);
}

static void test_mem_pool(void) {
  failing f = {-1, 0};
  bb_allocator base = failing_allocator(&f);
  bbi_mem_pool *pool = bbi_mem_pool_new(&base);
  CHECK(pool != NULL);
  const bb_allocator *a = bbi_mem_pool_allocator(pool);
  bbi_mem_pool_stats st;
  /* a "run": three blocks, freed; the next run of the same sizes reuses them */
  for (int run = 0; run < 3; run++) {
    char *x = bbi_mem_alloc(a, 100), *y = bbi_mem_alloc(a, 5000), *z = bbi_mem_alloc(a, 100);
    CHECK(x && y && z && x != z);
    memset(x, 1, 100), memset(y, 2, 5000), memset(z, 3, 100);
    bbi_mem_free(a, y);
    bbi_mem_free(a, x);
    bbi_mem_free(a, z);
  }
  bbi_mem_pool_get_stats(pool, &st);
  CHECK_EQ_INT(st.base_allocations, 3); /* only the first run reached the base */
  CHECK_EQ_INT(st.reuses, 6);
  CHECK_EQ_INT(st.outstanding, 0);
  CHECK_EQ_INT(st.high_water, 128 + 5120 + 128); /* sizes rounded up to their classes */
  CHECK_EQ_INT(st.cached, st.high_water);
  /* free bytes stay within twice the high-water mark: blocks of sizes used one at a time
   * pile up until the fourth goes back to the base */
  bbi_mem_pool *small = bbi_mem_pool_new(&base);
  const bb_allocator *sa = bbi_mem_pool_allocator(small);
  long live = f.live;
  for (int k = 1; k <= 4; k++) bbi_mem_free(sa, bbi_mem_alloc(sa, 640 * (size_t)k));
  bbi_mem_pool_get_stats(small, &st);
  CHECK_EQ_INT(st.high_water, 2560);
  CHECK_EQ_INT(st.cached, 640 + 1280 + 1920);
  CHECK_EQ_INT(f.live, live + 4); /* three cached blocks and the bins table */
  bbi_mem_pool_close(small);
  /* realloc keeps the contents; shrinking keeps the block */
  char *r = bbi_mem_realloc(a, NULL, 10);
  memcpy(r, "recycling", 10);
  CHECK(bbi_mem_realloc(a, r, 20) == r);
  char *g = bbi_mem_realloc(a, r, 300);
  CHECK(g && strcmp(g, "recycling") == 0);
  /* the base failing is a NULL, never a crash */
  f.budget = 0;
  CHECK(bbi_mem_alloc(a, 1 << 20) == NULL);
  CHECK(bbi_mem_realloc(a, g, 1 << 20) == NULL);
  f.budget = -1;
  /* closing with a block outstanding: the pool lives until that block is freed */
  bbi_mem_pool_close(pool);
  CHECK(f.live >= 2);
  bbi_mem_free(a, g);
  CHECK_EQ_INT(f.live, 0);
  /* closing an idle pool frees everything at once */
  pool = bbi_mem_pool_new(&base);
  bbi_mem_free(bbi_mem_pool_allocator(pool), bbi_mem_alloc(bbi_mem_pool_allocator(pool), 8));
  bbi_mem_pool_close(pool);
  bbi_mem_pool_close(NULL);
  CHECK_EQ_INT(f.live, 0);
}

static void test_le_loads_and_stores(void) {
  uint8_t b[8];
  bb_le_put_u32(b, 0x11223344u);
  CHECK(b[0] == 0x44 && b[1] == 0x33 && b[2] == 0x22 && b[3] == 0x11);
  CHECK(bb_le_get_u32(b) == 0x11223344u);
  bb_le_put_u64(b, 0x0102030405060708ull);
  CHECK(b[0] == 0x08 && b[7] == 0x01);
  CHECK(bb_le_get_u64(b) == 0x0102030405060708ull);
  bb_le_put_u16(b, 0xBEEF);
  CHECK(b[0] == 0xEF && b[1] == 0xBE && bb_le_get_u16(b) == 0xBEEF);
  bb_le_put_f32(b, 1.0f); /* IEEE 754 single 1.0 is 0x3F800000 */
  CHECK(b[0] == 0 && b[1] == 0 && b[2] == 0x80 && b[3] == 0x3F);
  CHECK(bb_le_get_f32(b) == 1.0f);
}

static void test_le_writer_and_reader(void) {
  failing f = {-1, 0};
  bb_allocator a = failing_allocator(&f);
  bb_le_writer w = bb_le_writer_growing(&a);
  bb_le_write_u8(&w, 7);
  bb_le_write_u16(&w, 0x0102);
  bb_le_write_u32(&w, 0xA0B0C0D0u);
  bb_le_write_u64(&w, UINT64_MAX - 1);
  bb_le_write_f32(&w, -2.5f);
  for (int i = 0; i < 100; i++) bb_le_write(&w, "xyz", 3); /* grows past the first 256 bytes */
  CHECK(bb_le_writer_ok(&w));
  CHECK_EQ_INT(w.len, 1 + 2 + 4 + 8 + 4 + 300);

  bb_le_reader r = bb_le_reader_of(w.buf, w.len);
  uint8_t u8 = 0;
  uint16_t u16 = 0;
  uint32_t u32 = 0;
  uint64_t u64 = 0;
  float f32 = 0;
  CHECK(bb_le_read_u8(&r, &u8) && u8 == 7);
  CHECK(bb_le_read_u16(&r, &u16) && u16 == 0x0102);
  CHECK(bb_le_read_u32(&r, &u32) && u32 == 0xA0B0C0D0u);
  CHECK(bb_le_read_u64(&r, &u64) && u64 == UINT64_MAX - 1);
  CHECK(bb_le_read_f32(&r, &f32) && f32 == -2.5f);
  const uint8_t *span = bb_le_read_span(&r, 3);
  CHECK(span && memcmp(span, "xyz", 3) == 0);
  CHECK(bb_le_read(&r, NULL, 297));
  CHECK_EQ_INT(bb_le_left(&r), 0);
  CHECK(!r.short_read);
  CHECK(!bb_le_read_u8(&r, &u8)); /* past the end: refused, position kept */
  CHECK(r.short_read && r.at == r.len);
  bb_le_reader r2 = bb_le_reader_of(w.buf, 3);
  CHECK(!bb_le_read_u32(&r2, &u32) && r2.at == 0);
  CHECK(bb_le_read_span(&r2, SIZE_MAX) == NULL);
  bbi_mem_free(&a, w.buf);

  /* growth that fails is recorded and later writes are dropped */
  bb_le_writer g = bb_le_writer_growing(&a);
  f.budget = 0;
  bb_le_write_u64(&g, 1);
  CHECK(g.failed && !bb_le_writer_ok(&g) && g.len == 0);
  f.budget = -1;
  CHECK_EQ_INT(f.live, 0);

  /* a fixed writer measures a first pass and fills an exact buffer on the second */
  bb_le_writer m = bb_le_writer_fixed(NULL, 0);
  bb_le_write_u32(&m, 5);
  bb_le_write(&m, "ab", 2);
  CHECK_EQ_INT(m.len, 6);
  CHECK(!bb_le_writer_ok(&m));
  uint8_t buf[6];
  bb_le_writer x = bb_le_writer_fixed(buf, sizeof buf);
  bb_le_write_u32(&x, 5);
  bb_le_write(&x, "ab", 2);
  CHECK(bb_le_writer_ok(&x) && buf[0] == 5 && buf[4] == 'a' && buf[5] == 'b');

  /* a span is filled in place; past a fixed buffer's end it is counted, not stored */
  bb_le_writer s = bb_le_writer_growing(&a);
  bb_le_write_u8(&s, 1);
  uint8_t *at = bb_le_write_span(&s, 300);
  CHECK(at == s.buf + 1 && s.len == 301 && bb_le_writer_ok(&s));
  memset(at, 0xAB, 300);
  bb_le_write_u8(&s, 2);
  CHECK(s.buf[0] == 1 && s.buf[300] == 0xAB && s.buf[301] == 2);
  bbi_mem_free(&a, s.buf);
  uint8_t small[4];
  bb_le_writer y = bb_le_writer_fixed(small, sizeof small);
  CHECK(bb_le_write_span(&y, 3) == small);
  CHECK(bb_le_write_span(&y, 2) == NULL && y.len == 5 && !bb_le_writer_ok(&y));
  bb_le_writer gone = bb_le_writer_growing(&a);
  f.budget = 0;
  CHECK(bb_le_write_span(&gone, 1) == NULL && gone.failed && gone.len == 0);
  f.budget = -1;
  CHECK_EQ_INT(f.live, 0);
}

static void test_fnv1a(void) {
  /* the published FNV-1a test vectors (offset bases, "a" and "foobar") */
  CHECK(bbi_fnv1a64("", 0) == 0xcbf29ce484222325ull);
  CHECK(bbi_fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull);
  CHECK(bbi_fnv1a64("foobar", 6) == 0x85944171f73967e8ull);
  CHECK(bbi_fnv1a32("", 0) == 0x811c9dc5u);
  CHECK(bbi_fnv1a32("a", 1) == 0xe40c292cu);
  CHECK(bbi_fnv1a32("foobar", 6) == 0xbf9cf968u);
  /* hashing in pieces equals hashing at once */
  CHECK(bbi_fnv1a64_update(bbi_fnv1a64_update(BBI_FNV1A64_INIT, "foo", 3), "bar", 3) == bbi_fnv1a64("foobar", 6));
  CHECK(bbi_fnv1a32_update(bbi_fnv1a32_update(BBI_FNV1A32_INIT, "foo", 3), "bar", 3) == bbi_fnv1a32("foobar", 6));
}

static void test_ring(void) {
  failing f = {-1, 0};
  bb_allocator a = failing_allocator(&f);
  bbi_ring r = bbi_ring_of(sizeof(int));
  int v, next_in = 0, next_out = 0;
  /* interleave pushes and pops so the ring wraps before each growth */
  for (int round = 0; round < 5; round++) {
    for (int i = 0; i < 7 + round * 5; i++, next_in++) CHECK_EQ_INT(bbi_ring_push(&r, &a, &next_in), 0);
    for (int i = 0; i < 5; i++) CHECK(bbi_ring_pop(&r, &v) && v == next_out++);
  }
  for (size_t k = 0; k < r.len; k++) CHECK_EQ_INT(*(int *)bbi_ring_at(&r, k), next_out + (int)k);
  /* remove from the middle keeps the order */
  size_t before = r.len;
  int third = *(int *)bbi_ring_at(&r, 2);
  bbi_ring_remove(&r, 2);
  CHECK_EQ_INT(r.len, before - 1);
  CHECK_EQ_INT(*(int *)bbi_ring_at(&r, 0), next_out);
  CHECK_EQ_INT(*(int *)bbi_ring_at(&r, 1), next_out + 1);
  CHECK_EQ_INT(*(int *)bbi_ring_at(&r, 2), third + 1);
  /* keep the even values only */
  size_t kept = 0;
  for (size_t k = 0; k < r.len; k++) {
    int x = *(int *)bbi_ring_at(&r, k);
    if (x % 2 == 0) *(int *)bbi_ring_at(&r, kept++) = x;
  }
  bbi_ring_truncate(&r, kept);
  for (size_t k = 0; k < r.len; k++) CHECK(*(int *)bbi_ring_at(&r, k) % 2 == 0);
  /* a full ring that cannot grow refuses the push and keeps its elements */
  while (r.len < r.cap) CHECK_EQ_INT(bbi_ring_push(&r, &a, &next_in), 0);
  size_t full = r.len;
  f.budget = 0;
  CHECK_EQ_INT(bbi_ring_push(&r, &a, &next_in), BB_ERR_NOMEM);
  CHECK_EQ_INT(r.len, full);
  f.budget = -1;
  while (bbi_ring_pop(&r, NULL)) {
  }
  CHECK(!bbi_ring_pop(&r, &v));
  bbi_ring_free(&r, &a);
  CHECK(r.items == NULL && r.len == 0 && r.elem == sizeof(int));
  CHECK_EQ_INT(f.live, 0);
}

/* Running out of memory leaves the object that reported it unusable; every other code
 * reports a refusal the caller can act on and carry on. */
static void test_fatal_errors(void) {
  const int recoverable[] = {BB_OK,          BB_ERR_INVALID_ARGUMENT, BB_ERR_MALFORMED, BB_ERR_UNSUPPORTED,
                             BB_ERR_NOT_FOUND, BB_ERR_EXISTS,         BB_ERR_LIMIT,     BB_ERR_IO,
                             BB_ERR_TYPE,    BB_ERR_DENIED};
  for (size_t i = 0; i < sizeof recoverable / sizeof *recoverable; i++)
    CHECK_MSG(!bb_err_is_fatal(recoverable[i]), "%s counted as fatal", bb_strerror(recoverable[i]));
  CHECK(bb_err_is_fatal(BB_ERR_NOMEM));
  CHECK(bb_err_is_fatal(BB_ERR_FATAL));
  /* a failing allocation really is reported with a fatal code */
  bb_error err;
  CHECK(bb_err_is_fatal(bb_error_set(&err, BB_ERR_NOMEM, "out of memory")));
  CHECK(bb_err_is_fatal(err.code));
}

int main(void) {
  RUN(test_mem_wrappers);
  RUN(test_mem_pool);
  RUN(test_le_loads_and_stores);
  RUN(test_le_writer_and_reader);
  RUN(test_fnv1a);
  RUN(test_ring);
  RUN(test_fatal_errors);
  return bb_test_finish();
}
