/* The address book alone: entries by peer id, the least recently used evicted when full
 * (never this node's own entry, never a blocked peer), at most RT_BOOK_MAX_ADDRS
 * addresses a peer, a book saved and loaded as it was (version 1 too), and its saved
 * bytes refused when wrong. */
#include "parttest.h"
#include "runtime/book.h"

/* Peer k (a few live at once, for one call's arguments). */
static const bb_peer_id *peer(uint64_t k) {
  static bb_peer_id ring[8];
  static unsigned at;
  bb_peer_id *p = &ring[at++ % 8];
  *p = bb_peer_id_from_u64(k);
  return p;
}

static bb_address address_of(uint64_t k, uint16_t port) {
  bb_address a = {.n = 2};
  a.seg[0].kind = BB_ADDR_SITE; /* any segment that tells two addresses apart */
  a.seg[0].value = port;
  a.seg[1].kind = BB_ADDR_P2P;
  a.seg[1].peer = *peer(k);
  return a;
}

static void test_full_book_evicts_least_recently_used_but_never_self_or_blocked(void) {
  rt_counters counters;
  rt_counters_init(&counters, bb_default_allocator());
  bb_peer_id self = *peer(1);
  rt_book b;
  rt_book_init(&b, bb_default_allocator(), 4, &self, &counters);
  for (uint64_t k = 1; k <= 4; k++) {
    bb_address a = address_of(k, 9000);
    CHECK_EQ_INT(rt_book_add(&b, peer(k), &a), 0);
  }
  bb_error err;
  CHECK_EQ_INT(rt_book_block(&b, peer(2), true, &err), 0);
  rt_book_touch(&b, rt_book_find(&b, peer(3))); /* 4 is now the least recently used */
  CHECK(rt_book_get(&b, peer(5)) != NULL);
  CHECK(!rt_book_find(&b, peer(4)));
  CHECK(rt_book_find(&b, peer(1)) && rt_book_find(&b, peer(2)));
  CHECK_EQ_INT(rt_counter_value(&counters, "book.evicted"), 1);
  /* strangers churn through one place; self and the blocked peer stay */
  for (uint64_t k = 100; k < 2000; k++) CHECK(rt_book_get(&b, peer(k)) != NULL);
  CHECK_EQ_INT(b.len, 4);
  CHECK(rt_book_find(&b, peer(1)) && rt_book_find(&b, peer(2))->blocked);
  for (size_t i = 0; i < b.len; i++) CHECK(b.items[i].last_used <= b.clock);
  /* when only self and blocked peers are left, adding fails rather than evicts them */
  rt_book_block(&b, peer(3), true, &err);
  rt_book_block(&b, peer(1999), true, &err);
  bb_address a = address_of(7, 1);
  CHECK_EQ_INT(rt_book_add(&b, peer(7), &a), BB_ERR_LIMIT);
  CHECK(rt_book_add_or_explain(&b, peer(7), &a, &err) == BB_ERR_LIMIT && strstr(err.message, "full"));
  rt_book_free(&b);
  rt_counters_free(&counters);
}

static void test_a_peer_keeps_at_most_its_addresses(void) {
  rt_book b;
  rt_book_init(&b, bb_default_allocator(), 16, NULL, NULL);
  bb_peer_id p = *peer(9);
  for (uint16_t port = 0; port < RT_BOOK_MAX_ADDRS; port++) {
    bb_address a = address_of(9, port);
    CHECK_EQ_INT(rt_book_add(&b, &p, &a), 0);
    CHECK_EQ_INT(rt_book_add(&b, &p, &a), 0); /* a known one is not added twice */
  }
  bb_address more = address_of(9, 999);
  CHECK_EQ_INT(rt_book_add(&b, &p, &more), BB_ERR_EXISTS);
  CHECK_EQ_INT(rt_book_find(&b, &p)->n_addrs, RT_BOOK_MAX_ADDRS);
  rt_book_forget(&b, &p);
  CHECK(rt_book_find(&b, &p) && rt_book_find(&b, &p)->n_addrs == 0);
  rt_book_free(&b);
}

static uint8_t *saved(size_t *len) {
  rt_book b;
  rt_book_init(&b, bb_default_allocator(), 16, NULL, NULL);
  for (uint64_t k = 1; k <= 3; k++) {
    bb_address a = address_of(k, (uint16_t)(9000 + k)), c = address_of(k, 1);
    rt_book_add(&b, peer(k), &a);
    if (k == 2) rt_book_add(&b, peer(k), &c);
  }
  bb_error err;
  rt_book_block(&b, peer(3), true, &err);
  rt_peer_entry *e = rt_book_find(&b, peer(1));
  e->sent = true;
  e->sent_ns = 12345;
  rt_book_touch(&b, e);
  bb_le_writer w = bb_le_writer_growing(bb_default_allocator());
  rt_book_save(&b, &w);
  rt_book_free(&b);
  *len = w.len;
  return w.buf;
}

static int load_fresh(const uint8_t *bytes, size_t len, bb_error *err) {
  rt_book b;
  rt_book_init(&b, bb_default_allocator(), 16, NULL, NULL);
  rt_reader r = rt_reader_of(bytes, len, bb_default_allocator(), err);
  int rc = read_whole(&r, rt_book_load(&b, &r, 2));
  rt_book_free(&b);
  return rc;
}

static void test_save_load_round_trip(void) {
  size_t len;
  uint8_t *bytes = saved(&len);
  rt_book b;
  rt_book_init(&b, bb_default_allocator(), 16, NULL, NULL);
  bb_error err;
  rt_reader r = rt_reader_of(bytes, len, bb_default_allocator(), &err);
  CHECK_MSG(rt_book_load(&b, &r, 2) == 0, "%s", err.message);
  CHECK_EQ_INT(b.len, 3);
  const rt_peer_entry *one = rt_book_find(&b, peer(1));
  CHECK(one && one->sent && one->sent_ns == 12345 && one->last_used == b.clock);
  CHECK(rt_book_find(&b, peer(2))->n_addrs == 2);
  CHECK(rt_book_find(&b, peer(3))->blocked);
  bb_le_writer w = bb_le_writer_growing(bb_default_allocator());
  rt_book_save(&b, &w);
  CHECK(w.len == len && memcmp(w.buf, bytes, len) == 0);
  free(w.buf);
  rt_book_free(&b);
  free(bytes);
}

/* Version 1 had no use clock, send flag, send time or use tick: entries are used in the
 * order they were made. */
static void test_version_1_is_read(void) {
  bb_le_writer w = bb_le_writer_growing(bb_default_allocator());
  bb_le_write_u64(&w, 2);
  for (uint64_t k = 1; k <= 2; k++) {
    rt_write_peer(&w, peer(k));
    bb_le_write_u8(&w, k == 2); /* blocked */
    bb_le_write_u64(&w, 1);
    bb_address a = address_of(k, 7);
    uint8_t buf[256];
    rt_write_bytes(&w, buf, bb_address_to_bytes(&a, buf, sizeof buf));
  }
  rt_book b;
  rt_book_init(&b, bb_default_allocator(), 16, NULL, NULL);
  bb_error err;
  rt_reader r = rt_reader_of(w.buf, w.len, bb_default_allocator(), &err);
  CHECK_MSG(rt_book_load(&b, &r, 1) == 0, "%s", err.message);
  CHECK_EQ_INT(b.clock, 2);
  CHECK(rt_book_find(&b, peer(1))->last_used == 1);
  CHECK(rt_book_find(&b, peer(2))->last_used == 2 && rt_book_find(&b, peer(2))->blocked);
  rt_book_free(&b);
  free(w.buf);
}

static void test_corrupted_bytes_are_refused(void) {
  size_t len;
  uint8_t *bytes = saved(&len);
  check_truncations_refused(bytes, len, load_fresh);
  uint8_t v[8];
  put_u64_at(v, 17);
  check_refused(bytes, len, 8, v, 8, load_fresh, "too many peers");
  put_u64_at(v, 0); /* the use clock before every entry's last use */
  check_refused(bytes, len, 0, v, 8, load_fresh, "used after the book's clock");
  /* the second peer's id spelled as the first's: entries are 8 + id, then 1 + 1 + 8 + 8 */
  size_t id_len = bytes[16], first = 16, second = first + 8 + id_len + 18;
  second += 8 + 8 + bytes[second + 8]; /* past the first entry's one address */
  check_refused(bytes, len, second, bytes + first, 8 + id_len, load_fresh, "names a peer twice");
  uint8_t junk = 0xff; /* the first entry's address, made unreadable */
  check_refused(bytes, len, first + 8 + id_len + 18 + 8 + 8, &junk, 1, load_fresh,
                "address of the address book is malformed");
  free(bytes);
  /* more peers than this book may hold */
  rt_book small;
  rt_book_init(&small, bb_default_allocator(), 2, NULL, NULL);
  bytes = saved(&len);
  bb_error err;
  rt_reader r = rt_reader_of(bytes, len, bb_default_allocator(), &err);
  CHECK(rt_book_load(&small, &r, 2) == BB_ERR_MALFORMED && strstr(err.message, "max_peers"));
  rt_book_free(&small);
  free(bytes);
}

int main(void) {
  RUN(test_full_book_evicts_least_recently_used_but_never_self_or_blocked);
  RUN(test_a_peer_keeps_at_most_its_addresses);
  RUN(test_save_load_round_trip);
  RUN(test_version_1_is_read);
  RUN(test_corrupted_bytes_are_refused);
  return bb_test_finish();
}
