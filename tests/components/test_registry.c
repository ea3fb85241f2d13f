/* GlobalRegistry's engines apart from any node: the Announce and Handshake codecs against
 * hand-built bytes and every truncation, the client's throttle, address wait, timers,
 * Handshake checks and saved state, and the server's lease table (order, expiry, the
 * member cap, draws, saved state, a failed load leaving the table as it was). */
#include <stdlib.h>
#include <string.h>

#include "components/protocols/registry_client.h"
#include "components/protocols/registry_table.h"
#include "failalloc.h"
#include "harness.h"
#include "bb/common.h"

#define MS 1000000ull

static bb_peer_id peer(uint64_t id) { return bb_peer_id_from_u64(id); }

/* Bytes built field by field, as docs/WIRE.md lays them out. */
typedef struct bytes_out {
  uint8_t b[2048];
  size_t n;
} bytes_out;

static void out_u8(bytes_out *o, uint8_t v) { o->b[o->n++] = v; }
static void out_le(bytes_out *o, uint64_t v, int width) {
  for (int i = 0; i < width; i++) o->b[o->n++] = (uint8_t)(v >> (8 * i));
}
static void out_peer(bytes_out *o, uint64_t id) {
  bb_peer_id p = peer(id);
  out_u8(o, p.len);
  memcpy(o->b + o->n, p.bytes, p.len);
  o->n += p.len;
}
static void out_address(bytes_out *o, const bb_address *a) {
  uint8_t buf[512];
  size_t len = bb_address_to_bytes(a, buf, sizeof buf);
  out_le(o, len, 2);
  memcpy(o->b + o->n, buf, len);
  o->n += len;
}

/* Decodes bytes[0..len) from a heap block of exactly that length. */
typedef int (*decode_fn)(const uint8_t *p, size_t len, void *out, bb_error *err);
static int announce_decode(const uint8_t *p, size_t len, void *out, bb_error *err) {
  return bbi_registry_announce_decode(p, len, out, err);
}
static int handshake_decode(const uint8_t *p, size_t len, void *out, bb_error *err) {
  return bbi_registry_handshake_decode(p, len, out, err);
}
static int decode_exact(decode_fn fn, const uint8_t *bytes, size_t len, void *out, bb_error *err) {
  uint8_t *copy = malloc(len ? len : 1);
  memcpy(copy, bytes, len);
  int rc = fn(copy, len, out, err);
  free(copy);
  return rc;
}

static void check_every_cut(decode_fn fn, const bytes_out *m, void *out) {
  bb_error err;
  for (size_t cut = 0; cut < m->n; cut++) {
    int rc = decode_exact(fn, m->b, cut, out, &err);
    CHECK_MSG(rc == BB_ERR_MALFORMED, "cut at %zu gave %d", cut, rc);
  }
  bytes_out longer = *m;
  out_u8(&longer, 0);
  CHECK_EQ_INT(decode_exact(fn, longer.b, longer.n, out, &err), BB_ERR_MALFORMED);
  CHECK(strstr(err.message, "1 trailing bytes") != NULL);
  bytes_out v2 = *m;
  v2.b[0] = 2;
  CHECK_EQ_INT(decode_exact(fn, v2.b, v2.n, out, &err), BB_ERR_MALFORMED);
  CHECK(strstr(err.message, "version 2 at byte 0") != NULL);
}

static void test_messages(void) {
  bb_peer_id p7 = peer(7);
  bb_address addrs[2] = {bb_address_p2p(&p7), bb_address_p2p(&p7)};
  addrs[1].n = 0; /* an empty address is still one entry */
  bbi_registry_announce a = {p7, {addrs[0], addrs[1]}, 2};
  uint8_t buf[BBI_REGISTRY_MESSAGE_MAX];
  size_t len = bbi_registry_announce_encode(&a, buf, sizeof buf);
  bytes_out want = {{0}, 0};
  out_u8(&want, 1);
  out_peer(&want, 7);
  out_u8(&want, 2);
  out_address(&want, &addrs[0]);
  out_address(&want, &addrs[1]);
  CHECK(len == want.n && memcmp(buf, want.b, len) == 0);
  CHECK_EQ_INT(bbi_registry_announce_encode(&a, buf, 3), want.n); /* the length even when it does not fit */
  bbi_registry_announce back;
  bb_error err;
  CHECK_MSG(bbi_registry_announce_decode(want.b, want.n, &back, &err) == 0, "%s", err.message);
  CHECK(bb_peer_id_equal(&back.peer, &p7) && back.n_addrs == 2);
  check_every_cut(announce_decode, &want, &back);
  /* an Announce carries 1..8 addresses */
  bytes_out none = {{0}, 0};
  out_u8(&none, 1);
  out_peer(&none, 7);
  out_u8(&none, 0);
  CHECK_EQ_INT(bbi_registry_announce_decode(none.b, none.n, &back, &err), BB_ERR_MALFORMED);
  CHECK(strstr(err.message, "0 addresses (need 1 to 8)") != NULL);

  bbi_registry_handshake h = {9000 * MS, 3000 * MS, {addrs[0]}, 1};
  len = bbi_registry_handshake_encode(&h, buf, sizeof buf);
  bytes_out hw = {{0}, 0};
  out_u8(&hw, 1);
  out_le(&hw, 9000 * MS, 8);
  out_le(&hw, 3000 * MS, 8);
  out_u8(&hw, 1);
  out_address(&hw, &addrs[0]);
  CHECK(len == hw.n && memcmp(buf, hw.b, len) == 0);
  bbi_registry_handshake hb;
  CHECK_EQ_INT(bbi_registry_handshake_decode(hw.b, hw.n, &hb, &err), 0);
  CHECK(hb.ttl_ns == 9000 * MS && hb.heartbeat_ns == 3000 * MS && hb.n_addrs == 1);
  check_every_cut(handshake_decode, &hw, &hb);
  /* a Handshake may carry none; nine is one too many */
  bytes_out h0 = {{0}, 0};
  out_u8(&h0, 1);
  out_le(&h0, 1, 8);
  out_le(&h0, 1, 8);
  out_u8(&h0, 0);
  CHECK_EQ_INT(bbi_registry_handshake_decode(h0.b, h0.n, &hb, &err), 0);
  h0.b[h0.n - 1] = 9;
  CHECK_EQ_INT(bbi_registry_handshake_decode(h0.b, h0.n, &hb, &err), BB_ERR_MALFORMED);
  CHECK(strstr(err.message, "byte 17: 9 addresses") != NULL);
  /* a peer id that is no multihash names its byte */
  bytes_out bad = {{0}, 0};
  out_u8(&bad, 1);
  out_u8(&bad, 2);
  out_u8(&bad, 0xff);
  out_u8(&bad, 0xff);
  CHECK(bbi_registry_announce_decode(bad.b, bad.n, &back, &err) < 0);
  CHECK(strstr(err.message, "Announce: peer id at byte 2") != NULL);
}

static void test_client(void) {
  bbi_registry_client c;
  bbi_registry_client_init(&c, 5000 * MS);
  bb_peer_id server = peer(100), other = peer(200);
  CHECK(!bbi_registry_client_timer_due(&c, 0)); /* no server yet */
  CHECK(bbi_registry_client_target(&c, &server, 0));
  /* no address for the server: wait once, then send anyway */
  CHECK(bbi_registry_client_wait_for_address(&c, false));
  CHECK(!bbi_registry_client_wait_for_address(&c, false));
  CHECK(!bbi_registry_client_wait_for_address(&c, true));
  /* before a Handshake: repeat after retry, and never throttle */
  CHECK_EQ_INT(bbi_registry_client_announced(&c, 10), 10 + 5000 * MS);
  CHECK(bbi_registry_client_target(&c, &server, 11));
  uint64_t t1 = bbi_registry_client_new_timer(&c), t2 = bbi_registry_client_new_timer(&c);
  CHECK(!bbi_registry_client_timer_due(&c, t1) && bbi_registry_client_timer_due(&c, t2));
  /* Handshakes: only from the server announced to, with 0 < heartbeat <= ttl */
  bbi_registry_handshake h = {9000 * MS, 3000 * MS, {{0}}, 0};
  uint8_t buf[BBI_REGISTRY_MESSAGE_MAX];
  size_t len = bbi_registry_handshake_encode(&h, buf, sizeof buf);
  bbi_registry_handshake got;
  bb_error err;
  CHECK_EQ_INT(bbi_registry_client_check_handshake(&c, &other, buf, len, &got, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "did not announce to") != NULL);
  bbi_registry_handshake zero = {9000 * MS, 0, {{0}}, 0}, over = {9000 * MS, 9001 * MS, {{0}}, 0};
  len = bbi_registry_handshake_encode(&zero, buf, sizeof buf);
  CHECK_EQ_INT(bbi_registry_client_check_handshake(&c, &server, buf, len, &got, &err), BB_ERR_MALFORMED);
  len = bbi_registry_handshake_encode(&over, buf, sizeof buf);
  CHECK_EQ_INT(bbi_registry_client_check_handshake(&c, &server, buf, len, &got, &err), BB_ERR_MALFORMED);
  CHECK(strstr(err.message, "must be in (0, ttl") != NULL);
  CHECK_EQ_INT(c.interval_ns, 0); /* checking changed nothing */
  len = bbi_registry_handshake_encode(&h, buf, sizeof buf);
  CHECK_EQ_INT(bbi_registry_client_check_handshake(&c, &server, buf, len, &got, &err), 0);
  uint64_t at = 0;
  CHECK(bbi_registry_client_apply_handshake(&c, &got, &at)); /* the first */
  CHECK_EQ_INT(at, 10 + 3000 * MS);
  CHECK(!bbi_registry_client_apply_handshake(&c, &got, &at));
  /* after it: the same server is throttled within an interval, another one is not */
  CHECK_EQ_INT(bbi_registry_client_announced(&c, 20), 20 + 3000 * MS);
  CHECK(!bbi_registry_client_target(&c, &server, 20 + 3000 * MS - 1));
  CHECK(bbi_registry_client_target(&c, &server, 20 + 3000 * MS));
  CHECK(bbi_registry_client_target(&c, &other, 21));
  CHECK(bb_peer_id_equal(&c.server, &other));
}

static void test_client_state(void) {
  bbi_registry_client c;
  bbi_registry_client_init(&c, 1);
  bb_peer_id server = peer(100);
  bbi_registry_client_target(&c, &server, 0);
  c.ttl_ns = 9000 * MS;
  c.interval_ns = 3000 * MS;
  c.timer_gen = 17;
  c.announced = true;
  uint8_t buf[BBI_REGISTRY_CLIENT_STATE_MAX];
  size_t len = bbi_registry_client_save(&c, buf, sizeof buf);
  bytes_out want = {{0}, 0};
  out_u8(&want, 1);
  out_u8(&want, 1);
  out_peer(&want, 100);
  out_le(&want, 9000 * MS, 8);
  out_le(&want, 3000 * MS, 8);
  out_le(&want, 17, 8);
  CHECK(len == want.n && memcmp(buf, want.b, len) == 0);
  bbi_registry_client d;
  bbi_registry_client_init(&d, 1);
  bb_error err;
  CHECK_EQ_INT(bbi_registry_client_load(&d, buf, len, &err), 0);
  CHECK(d.has_server && bb_peer_id_equal(&d.server, &server) && d.ttl_ns == c.ttl_ns &&
        d.interval_ns == c.interval_ns && d.timer_gen == 17 && !d.announced);
  /* without the token: token 0 */
  CHECK_EQ_INT(bbi_registry_client_load(&d, buf, len - 8, &err), 0);
  CHECK_EQ_INT(d.timer_gen, 0);
  /* refused, d unchanged */
  d.timer_gen = 5;
  for (size_t cut = 0; cut < len - 8; cut++) CHECK(bbi_registry_client_load(&d, buf, cut, &err) == BB_ERR_MALFORMED);
  CHECK_EQ_INT(bbi_registry_client_load(&d, buf, len - 4, &err), BB_ERR_MALFORMED);
  buf[1] = 2;
  CHECK_EQ_INT(bbi_registry_client_load(&d, buf, len, &err), BB_ERR_MALFORMED);
  CHECK(strstr(err.message, "has_server 2") != NULL);
  CHECK_EQ_INT(d.timer_gen, 5);
  /* no server: no peer in the state */
  bbi_registry_client_init(&c, 1);
  CHECK_EQ_INT(bbi_registry_client_save(&c, buf, sizeof buf), 2 + 24);
}

static void test_table(void) {
  static bbi_registry_table t; /* large: not on the stack */
  bbi_registry_table_init(&t, 3000 * MS);
  CHECK_EQ_INT(bbi_registry_table_heartbeat_ns(&t), 1000 * MS);
  bool is_new = false;
  bb_error err;
  static const uint64_t order[] = {5, 300, 2, 70000, 9};
  for (size_t i = 0; i < 5; i++) {
    bb_peer_id p = peer(order[i]);
    CHECK_EQ_INT(bbi_registry_table_register(&t, &p, i * MS, &is_new, &err), 0);
    CHECK(is_new);
  }
  for (size_t i = 1; i < t.n; i++) { /* peer-id order: length, then bytes */
    const bb_peer_id *a = &t.members[i - 1].peer, *b = &t.members[i].peer;
    CHECK(a->len < b->len || (a->len == b->len && memcmp(a->bytes, b->bytes, a->len) < 0));
  }
  bb_peer_id two = peer(2);
  CHECK_EQ_INT(bbi_registry_table_register(&t, &two, 2000 * MS, &is_new, &err), 0);
  CHECK(!is_new && t.n == 5);
  /* expiry: kept while now < expires */
  bbi_registry_table_evict(&t, 3000 * MS); /* 5 (registered at 0) expires now */
  CHECK_EQ_INT(t.n, 4);
  bbi_registry_table_evict(&t, 3004 * MS - 1);
  CHECK_EQ_INT(t.n, 2); /* 2 (refreshed) and 9 (at 4 ms) are left */
  bbi_registry_table_evict(&t, 5000 * MS);
  CHECK_EQ_INT(t.n, 0);
  /* the cap */
  for (uint64_t id = 1; id <= BBI_REGISTRY_MAX_MEMBERS; id++) {
    bb_peer_id p = peer(id);
    CHECK(bbi_registry_table_register(&t, &p, 0, &is_new, &err) == 0);
  }
  bb_peer_id extra = peer(5000);
  CHECK_EQ_INT(bbi_registry_table_register(&t, &extra, 0, &is_new, &err), BB_ERR_LIMIT);
  CHECK(strstr(err.message, "registry full") != NULL);
  bb_peer_id first = peer(1);
  CHECK_EQ_INT(bbi_registry_table_register(&t, &first, 1, &is_new, &err), 0); /* a refresh still works */
}

static uint64_t splitmix(void *user) {
  uint64_t *state = user, z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void test_table_sample_and_state(void) {
  static bbi_registry_table t, u;
  bbi_registry_table_init(&t, 3000 * MS);
  bool is_new;
  bb_error err;
  for (uint64_t id = 10; id < 16; id++) {
    bb_peer_id p = peer(id);
    bbi_registry_table_register(&t, &p, id * MS, &is_new, &err);
  }
  uint64_t s1 = 3, s2 = 3;
  bbi_draw_source r1 = {splitmix, &s1}, r2 = {splitmix, &s2};
  size_t idx[2 * BBI_REGISTRY_MAX_MEMBERS];
  bb_peer_id a[8], b[8];
  CHECK_EQ_INT(bbi_registry_table_sample(&t, &r1, NULL, NULL, 4, idx, a), 4);
  CHECK_EQ_INT(bbi_registry_table_sample(&t, &r2, NULL, NULL, 4, idx, b), 4);
  CHECK(memcmp(a, b, 4 * sizeof *a) == 0); /* the same seed, the same draw */
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < i; j++) CHECK(!bb_peer_id_equal(&a[i], &a[j]));
  CHECK_EQ_INT(bbi_registry_table_sample(&t, &r1, NULL, NULL, 50, idx, a), 6);

  /* saved state: version, ttl, u32 count, (peer, expiry) in peer-id order */
  size_t cap = bbi_registry_table_save_size(&t);
  uint8_t *buf = malloc(cap);
  size_t len = bbi_registry_table_save(&t, buf, cap);
  bytes_out want = {{0}, 0};
  out_u8(&want, 1);
  out_le(&want, 3000 * MS, 8);
  out_le(&want, 6, 4);
  for (size_t i = 0; i < t.n; i++) {
    out_u8(&want, t.members[i].peer.len);
    memcpy(want.b + want.n, t.members[i].peer.bytes, t.members[i].peer.len);
    want.n += t.members[i].peer.len;
    out_le(&want, t.members[i].expires_ns, 8);
  }
  CHECK(len == want.n && memcmp(buf, want.b, len) == 0);
  bbi_registry_table_init(&u, 1);
  CHECK_EQ_INT(bbi_registry_table_load(&u, buf, len, bb_default_allocator(), &err), 0);
  CHECK(u.ttl_ns == t.ttl_ns && u.n == t.n && memcmp(u.members, t.members, t.n * sizeof *t.members) == 0);
  /* refused loads leave the table as it was */
  for (size_t cut = 0; cut < len; cut++)
    CHECK(bbi_registry_table_load(&u, buf, cut, bb_default_allocator(), &err) == BB_ERR_MALFORMED);
  bytes_out swapped = want; /* the first two members swapped: out of order */
  size_t rec = 1 + t.members[0].peer.len + 8;
  memcpy(swapped.b + 13, want.b + 13 + rec, rec);
  memcpy(swapped.b + 13 + rec, want.b + 13, rec);
  CHECK_EQ_INT(bbi_registry_table_load(&u, swapped.b, swapped.n, bb_default_allocator(), &err), BB_ERR_MALFORMED);
  CHECK(strstr(err.message, "member 1 out of order") != NULL);
  bytes_out many = {{0}, 0};
  out_u8(&many, 1);
  out_le(&many, 1, 8);
  out_le(&many, BBI_REGISTRY_MAX_MEMBERS + 1, 4);
  CHECK_EQ_INT(bbi_registry_table_load(&u, many.b, many.n, bb_default_allocator(), &err), BB_ERR_MALFORMED);
  failing f = {0, 0};
  bb_allocator fa = failing_allocator(&f);
  CHECK_EQ_INT(bbi_registry_table_load(&u, buf, len, &fa, &err), BB_ERR_NOMEM);
  CHECK(u.ttl_ns == t.ttl_ns && u.n == t.n && memcmp(u.members, t.members, t.n * sizeof *t.members) == 0);
  CHECK_EQ_INT(f.live, 0);
  free(buf);
}

int main(void) {
  RUN(test_messages);
  RUN(test_client);
  RUN(test_client_state);
  RUN(test_table);
  RUN(test_table_sample_and_state);
  return bb_test_finish();
}
