/* Values and their wire form (docs/WIRE.md): every kind round-trips; the carrier hashes
 * are pinned; a published envelope vector comes out byte for byte when its Bytes payload
 * is written by bb_val; bad payloads are refused with a reason. */
#include "rttest.h"
#include "failalloc.h"

static bb_val *roundtrip(const bb_val *v) {
  uint8_t *buf = NULL;
  size_t len = 0;
  bb_val *back = NULL;
  bb_error err;
  CHECK(bb_val_encode(v, NULL, &buf, &len, &err) == 0);
  CHECK_EQ_INT(len, bb_val_encoded_size(v));
  uint64_t type_hash = bb_val_kind_hash((int)bb_val_kind_of(v));
  CHECK_MSG(bb_val_decode(type_hash, buf, len, NULL, &back, &err) == 0, "%s", err.message);
  if (back) {
    uint8_t *again = NULL;
    size_t again_len = 0;
    CHECK(bb_val_encode(back, NULL, &again, &again_len, NULL) == 0);
    CHECK(again_len == len && memcmp(again, buf, len) == 0);
    bb_buffer_free(NULL, again);
  }
  bb_buffer_free(NULL, buf);
  return back;
}

static void test_every_kind_round_trips(void) {
  bb_peer_id peers[3] = {bb_peer_id_from_u64(1), bb_peer_id_from_u64(2), bb_peer_id_from_u64(42)};
  bb_address addr;
  CHECK(bb_address_from_text("/p2p/16uZAbWC1AJvL/site/17/component/7/op/FindNode", &addr, NULL) == 0);
  bb_address addrs[2] = {addr, addr};
  addrs[1].n = 1;
  int64_t dims[2] = {2, 3};
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_INT64, 2, dims);
  for (int i = 0; i < 6; i++) ((int64_t *)bb_tensor_data(t))[i] = i * 1000000007LL;
  bb_val *vals[] = {bb_val_trigger(NULL),
                    bb_val_bytes(NULL, "\x01\x02\x03", 3),
                    bb_val_bytes(NULL, NULL, 0),
                    bb_val_tensor(NULL, t),
                    bb_val_u64(NULL, BB_VAL_U64, 7),
                    bb_val_u64(NULL, BB_VAL_TIMESTAMP, UINT64_MAX),
                    bb_val_u64(NULL, BB_VAL_COMMAND_ID, 1),
                    bb_val_u64(NULL, BB_VAL_WIRE_REQ_ID, 2),
                    bb_val_u64(NULL, BB_VAL_CORRELATION, 3),
                    bb_val_peer(NULL, &peers[2]),
                    bb_val_peers(NULL, peers, 3),
                    bb_val_address(NULL, &addr),
                    bb_val_addresses(NULL, addrs, 2)};
  size_t n = sizeof vals / sizeof vals[0];
  bb_val *bundle = bb_val_composite(NULL, vals, n);
  bb_val *nested = bb_val_composite(NULL, &bundle, 1);
  for (size_t i = 0; i < n; i++) {
    bb_val *back = roundtrip(vals[i]);
    CHECK(back && bb_val_kind_of(back) == bb_val_kind_of(vals[i]));
    bb_val_release(back);
  }
  bb_val *back = roundtrip(nested);
  CHECK(back && bb_val_count(back) == 1 && bb_val_count(bb_val_child(back, 0)) == n);
  if (back && bb_val_count(back) == 1 && bb_val_count(bb_val_child(back, 0)) == n) {
    const bb_tensor *got = bb_val_as_tensor(bb_val_child(bb_val_child(back, 0), 3));
    CHECK(got && got->dtype == BB_DTYPE_INT64 && got->dims[1] == 3 &&
          ((int64_t *)bb_tensor_data(got))[5] == 5 * 1000000007LL);
  }
  bb_val_release(back);
  bb_val_release(nested);
  bb_val_release(bundle);
  for (size_t i = 0; i < n; i++) bb_val_release(vals[i]);
  bb_tensor_release(t);
}

/* The carrier names hash to these, on every peer of every implementation. */
static void test_pinned_type_hashes(void) {
  CHECK(bb_val_kind_hash(BB_VAL_TRIGGER) == 0xf408ec4a93415ca0ull);
  CHECK(bb_val_kind_hash(BB_VAL_BYTES) == 0x1d82330cc10a293dull);
  CHECK(bb_val_kind_hash(BB_VAL_PEER) == 0x6750d1de54e51ec5ull);
  CHECK(bb_val_kind_hash(BB_VAL_PEERS) == 0x64d32aef2d363637ull);
  CHECK(bb_val_kind_hash(BB_VAL_WIRE_REQ_ID) == 0x9e56307df460aef2ull);
  CHECK(bb_val_kind_hash(BB_VAL_ADDRESS) == 0x8927bf653df72630ull);
  CHECK(bb_val_kind_hash(BB_VAL_ADDRESSES) == 0x99f6119f618d070cull);
  CHECK(bb_val_kind_hash(BB_VAL_COMPOSITE) == 0xb94ced714c59208dull);
  CHECK(bb_val_kind_hash(BB_VAL_U64) == 0x10b1ed195d35f79bull);
  CHECK(bb_val_kind_hash(BB_VAL_TIMESTAMP) == 0x0ba64ceeddeecae0ull);
  CHECK(bb_val_kind_hash(BB_VAL_COMMAND_ID) == 0xf6f80cc002ab2b94ull);
  CHECK(bb_val_kind_hash(BB_VAL_CORRELATION) == 0x48e3d9e278407bddull);
  for (int k = 0; k < BB_VAL_KIND_COUNT; k++) CHECK(bb_val_kind_of_hash(bb_val_kind_hash(k)) == k);
  CHECK(bb_val_kind_of_hash(0xdeadbeef) == -1);
}

/* The envelope vector: BytesValue([1,2,3]) to site 17, REQUEST 1, 100 ms, PeerId(1) ← PeerId(2). */
static void test_envelope_vector(void) {
  static const uint8_t want[] = {
      0x0a, 0x0d, 0xa5, 0x03, 0x0a, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x12, 0x23, 0x0a, 0x0a,
      0xe2, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x11, 0x12, 0x0b, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x01, 0x02, 0x03, 0x20, 0xbd, 0xd2, 0xa8, 0x88, 0xcc, 0xe1, 0x8c, 0xc1, 0x1d, 0x1a, 0x04, 0x08, 0x01, 0x10,
      0x01, 0x20, 0x80, 0xc2, 0xd7, 0x2f, 0x38, 0x01, 0x42, 0x0d, 0xa5, 0x03, 0x0a, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x02};
  bb_val *v = bb_val_bytes(NULL, "\x01\x02\x03", 3);
  uint8_t payload[16], dest[32], src[32], suffix[16];
  size_t plen = bb_val_encode_into(v, payload);
  bb_peer_id p1 = bb_peer_id_from_u64(1), p2 = bb_peer_id_from_u64(2);
  bb_address a1 = p2p_address(&p1), a2 = p2p_address(&p2), site = {.n = 1};
  site.seg[0].kind = BB_ADDR_SITE;
  site.seg[0].value = 17;
  bb_bytes d = {dest, bb_address_to_bytes(&a1, dest, sizeof dest)}, s = {src, bb_address_to_bytes(&a2, src, sizeof src)};
  bb_slot_fill fill = {.dest_suffix = {suffix, bb_address_to_bytes(&site, suffix, sizeof suffix)},
                       .payload = {payload, plen},
                       .type_hash = bb_val_kind_hash((int)bb_val_kind_of(v))};
  bb_envelope e = {0};
  e.dest_peer_addresses = &d;
  e.n_dest_peer_addresses = 1;
  e.fills = &fill;
  e.n_fills = 1;
  e.has_correlation = true;
  e.correlation_kind = BB_CORR_REQUEST;
  e.wire_req_id = 1;
  e.remaining_deadline_ns = 100000000;
  e.schema_version = 1;
  e.src_peer_addresses = &s;
  e.n_src_peer_addresses = 1;
  uint8_t *out;
  size_t len;
  CHECK(bb_envelope_encode(&e, NULL, &out, &len, NULL) == 0);
  CHECK(len == sizeof want && memcmp(out, want, len) == 0);
  bb_buffer_free(NULL, out);
  bb_val_release(v);
}

static void expect_refused(uint64_t hash, const void *payload, size_t len, const char *words) {
  bb_val *v = NULL;
  bb_error err;
  int rc = bb_val_decode(hash, payload, len, NULL, &v, &err);
  CHECK_MSG(rc != 0 && !v && strstr(err.message, words), "wanted \"%s\", got rc %d \"%s\"", words, rc, err.message);
  bb_val_release(v);
}

static void test_bad_payloads(void) {
  uint64_t bytes = bb_val_kind_hash(BB_VAL_BYTES), tensor = bb_val_kind_hash(BB_VAL_TENSOR),
           bundle = bb_val_kind_hash(BB_VAL_COMPOSITE), peers = bb_val_kind_hash(BB_VAL_PEERS);
  expect_refused(bytes, "\x01\x00", 2, "truncated");
  expect_refused(bytes, "\x05\x00\x00\x00\x00\x00\x00\x00\x01", 9, "runs past the end");
  expect_refused(bytes, "\x01\x00\x00\x00\x00\x00\x00\x00\x01\x02", 10, "trailing");
  expect_refused(0xdeadbeef, "", 0, "unknown type hash");
  /* tensors: unknown dtype, rank over 8, data that does not match the shape */
  uint8_t t[64] = {0};
  t[0] = 99;
  expect_refused(tensor, t, 8, "element type");
  t[0] = 1, t[4] = 9;
  expect_refused(tensor, t, 8, "rank 9");
  t[4] = 1, t[8] = 4; /* float[4] with 3 floats of data */
  expect_refused(tensor, t, 16 + 12, "needs 16 data bytes");
  /* a count no payload could hold */
  uint8_t huge[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
  expect_refused(peers, huge, 8, "cannot fit");
  expect_refused(bundle, huge, 8, "cannot fit");
  expect_refused(bb_val_kind_hash(BB_VAL_ADDRESSES), huge, 8, "cannot fit");
  expect_refused(bb_val_kind_hash(BB_VAL_ADDRESS), huge, 8, "cannot fit");
  /* bundles nested deeper than 16 (the encoder writes them; the decoder will not recurse) */
  bb_val *deep = bb_val_trigger(NULL);
  for (int i = 0; i < 17; i++) {
    bb_val *outer = bb_val_composite(NULL, &deep, 1);
    bb_val_release(deep);
    deep = outer;
  }
  uint8_t *enc;
  size_t enc_len;
  CHECK(bb_val_encode(deep, NULL, &enc, &enc_len, NULL) == 0);
  expect_refused(bundle, enc, enc_len, "deeper than 16");
  bb_buffer_free(NULL, enc);
  bb_val_release(deep);
  /* an empty payload may come as NULL (found by fuzz_node_deliver: NULL + 0) */
  bb_val *v = NULL;
  CHECK(bb_val_decode(bb_val_kind_hash(BB_VAL_TRIGGER), NULL, 0, NULL, &v, NULL) == 0 && v);
  bb_val_release(v);
  expect_refused(bytes, NULL, 0, "truncated");
}

/* ---- bincode layouts, written out by hand --------------------------------------------- */

typedef struct wbuf {
  uint8_t b[256];
  size_t len;
} wbuf;

static void put_le(wbuf *w, uint64_t x, int width) {
  for (int i = 0; i < width; i++) w->b[w->len++] = (uint8_t)(x >> (8 * i));
}

static void put_raw(wbuf *w, const void *p, size_t n) {
  memcpy(w->b + w->len, p, n);
  w->len += n;
}

/* PeerId(1)'s multihash: identity code 0, length 8, the id big-endian. */
static const uint8_t PEER1_MULTIHASH[10] = {0x00, 0x08, 0, 0, 0, 0, 0, 0, 0, 0x01};

/* v encodes to exactly `want`, and `want` decodes to a value that encodes to it again. */
static void expect_layout(const bb_val *v, const wbuf *want, const char *what) {
  uint8_t *got = NULL;
  size_t len = 0;
  CHECK(bb_val_encode(v, NULL, &got, &len, NULL) == 0);
  CHECK_MSG(len == want->len && memcmp(got, want->b, len) == 0, "%s: %zu bytes, wanted %zu", what, len, want->len);
  bb_buffer_free(NULL, got);
  bb_val *back = NULL;
  bb_error err;
  uint64_t type_hash = bb_val_kind_hash((int)bb_val_kind_of(v));
  CHECK_MSG(bb_val_decode(type_hash, want->b, want->len, NULL, &back, &err) == 0, "%s: %s", what, err.message);
  if (back) {
    uint8_t again[256];
    CHECK(bb_val_encoded_size(back) == want->len && bb_val_encode_into(back, again) == want->len &&
          memcmp(again, want->b, want->len) == 0);
  }
  bb_val_release(back);
}

static void test_bincode_layouts(void) {
  /* Bytes: u64 length + the bytes */
  bb_val *b = bb_val_bytes(NULL, "\x01\x02\x03", 3);
  wbuf w = {.len = 0};
  put_le(&w, 3, 8);
  put_raw(&w, "\x01\x02\x03", 3);
  expect_layout(b, &w, "Bytes");
  /* the one-u64 kinds: little-endian */
  bb_val *u = bb_val_u64(NULL, BB_VAL_TIMESTAMP, 0x0102030405060708ull);
  w.len = 0;
  put_le(&w, 0x0102030405060708ull, 8);
  CHECK(w.b[0] == 0x08);
  expect_layout(u, &w, "Timestamp");
  /* Peer: u64 length + multihash; Peers: u64 count + each peer */
  bb_peer_id p1 = bb_peer_id_from_u64(1);
  bb_val *peer = bb_val_peer(NULL, &p1);
  w.len = 0;
  put_le(&w, 10, 8);
  put_raw(&w, PEER1_MULTIHASH, 10);
  expect_layout(peer, &w, "Peer");
  bb_peer_id two[2] = {p1, p1};
  bb_val *peers = bb_val_peers(NULL, two, 2);
  w.len = 0;
  put_le(&w, 2, 8);
  for (int i = 0; i < 2; i++) {
    put_le(&w, 10, 8);
    put_raw(&w, PEER1_MULTIHASH, 10);
  }
  expect_layout(peers, &w, "Peers");
  /* Address: u64 segment count, then per segment a u32 variant (P2p 0, Site 1,
   * Component 2, Op 3) and its payload */
  bb_address a;
  CHECK(bb_address_from_text("/p2p/16uZAbWC1AJvL/site/17/component/7/op/Find", &a, NULL) == 0);
  bb_val *addr = bb_val_address(NULL, &a);
  w.len = 0;
  put_le(&w, 4, 8);
  put_le(&w, 0, 4), put_le(&w, 10, 8), put_raw(&w, PEER1_MULTIHASH, 10);
  put_le(&w, 1, 4), put_le(&w, 17, 8);
  put_le(&w, 2, 4), put_le(&w, 7, 4);
  put_le(&w, 3, 4), put_le(&w, 4, 8), put_raw(&w, "Find", 4);
  expect_layout(addr, &w, "Address");
  bb_val *addrs = bb_val_addresses(NULL, &a, 1);
  wbuf one = w;
  w.len = 0;
  put_le(&w, 1, 8);
  put_raw(&w, one.b, one.len);
  expect_layout(addrs, &w, "Addresses");
  /* Composite: u64 count, then per child its u64 type hash, u64 length and bytes —
   * nested bundles the same way, one level in */
  bb_val *trigger = bb_val_trigger(NULL);
  bb_val *inner = bb_val_composite(NULL, &trigger, 1);
  bb_val *kids[2] = {b, inner};
  bb_val *outer = bb_val_composite(NULL, kids, 2);
  w.len = 0;
  put_le(&w, 2, 8);
  put_le(&w, 0x1d82330cc10a293dull, 8), put_le(&w, 11, 8), put_le(&w, 3, 8), put_raw(&w, "\x01\x02\x03", 3);
  put_le(&w, 0xb94ced714c59208dull, 8), put_le(&w, 24, 8);
  put_le(&w, 1, 8), put_le(&w, 0xf408ec4a93415ca0ull, 8), put_le(&w, 0, 8);
  expect_layout(outer, &w, "Composite");
  /* a child whose hash no kind has is refused */
  w.b[8] ^= 0xff;
  expect_refused(bb_val_kind_hash(BB_VAL_COMPOSITE), w.b, w.len, "unknown type hash");
  bb_val *all[] = {b, u, peer, peers, addr, addrs, trigger, inner, outer};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) bb_val_release(all[i]);
}

static void test_decode_without_memory(void) {
  bb_tensor *t = bb_tensor_new_zeros(NULL, BB_DTYPE_FLOAT, 1, (int64_t[]){5});
  bb_val *parts[2] = {bb_val_tensor(NULL, t), bb_val_bytes(NULL, "ab", 2)};
  bb_val *bundle = bb_val_composite(NULL, parts, 2);
  uint8_t *buf;
  size_t len;
  CHECK(bb_val_encode(bundle, NULL, &buf, &len, NULL) == 0);
  bool succeeded = false;
  for (long budget = 0; budget < 16 && !succeeded; budget++) {
    failing f = {budget, 0};
    bb_allocator a = failing_allocator(&f);
    bb_val *v = NULL;
    bb_error err;
    int rc = bb_val_decode(bb_val_kind_hash(BB_VAL_COMPOSITE), buf, len, &a, &v, &err);
    CHECK(rc == 0 || (rc == BB_ERR_NOMEM && !v));
    succeeded = rc == 0;
    bb_val_release(v);
    CHECK_EQ_INT(f.live, 0);
  }
  CHECK(succeeded);
  bb_buffer_free(NULL, buf);
  bb_val_release(bundle);
  bb_val_release(parts[0]);
  bb_val_release(parts[1]);
  bb_tensor_release(t);
}

/* Each accessor gives what the value holds, and its stated default for NULL and for every
 * other kind. */
static void test_accessors(void) {
  bb_peer_id peers[2] = {bb_peer_id_from_u64(5), bb_peer_id_from_u64(6)};
  bb_address addr;
  CHECK(bb_address_from_text("/p2p/16uZAbWC1AJvL/site/17", &addr, NULL) == 0);
  bb_tensor *t = bb_tensor_new_zeros(NULL, BB_DTYPE_FLOAT, 1, (int64_t[]){3});
  bb_val *tensor = bb_val_tensor(NULL, t), *bytes = bb_val_bytes(NULL, "abc", 3),
         *stamp = bb_val_u64(NULL, BB_VAL_TIMESTAMP, 99), *peer = bb_val_peer(NULL, &peers[1]),
         *list = bb_val_peers(NULL, peers, 2), *address = bb_val_address(NULL, &addr), *trigger = bb_val_trigger(NULL);
  bb_val *parts[2] = {stamp, bytes};
  bb_val *bundle = bb_val_composite(NULL, parts, 2);
  bb_val *all[] = {tensor, bytes, stamp, peer, list, address, trigger, bundle};

  CHECK(bb_val_as_tensor(tensor) == t && bb_val_kind_of(tensor) == BB_VAL_TENSOR && bb_val_count(tensor) == 0);
  CHECK(bb_val_count(bytes) == 3 && memcmp(bb_val_as_bytes(bytes), "abc", 3) == 0);
  CHECK(bb_val_is_u64(stamp) && bb_val_as_u64(stamp) == 99 && bb_val_kind_of(stamp) == BB_VAL_TIMESTAMP);
  CHECK(bb_val_count(peer) == 1 && bb_peer_id_equal(&bb_val_as_peers(peer)[0], &peers[1]));
  CHECK(bb_val_count(list) == 2 && bb_peer_id_equal(&bb_val_as_peers(list)[1], &peers[1]));
  CHECK(bb_val_count(address) == 1 && bb_val_as_addresses(address) != NULL);
  CHECK(bb_val_count(bundle) == 2 && bb_val_child(bundle, 0) == stamp && bb_val_child(bundle, 1) == bytes &&
        bb_val_children(bundle)[1] == bytes && bb_val_child(bundle, 2) == NULL);
  /* NULL and every kind that does not hold the thing asked for */
  CHECK(bb_val_kind_of(NULL) == BB_VAL_KIND_COUNT && bb_val_count(NULL) == 0 && !bb_val_is_u64(NULL));
  CHECK(!bb_val_as_u64(NULL) && !bb_val_as_tensor(NULL) && !bb_val_as_bytes(NULL) && !bb_val_as_peers(NULL) &&
        !bb_val_as_addresses(NULL) && !bb_val_children(NULL) && !bb_val_child(NULL, 0));
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
    bb_val_kind k = bb_val_kind_of(all[i]);
    CHECK_MSG((bb_val_as_tensor(all[i]) != NULL) == (k == BB_VAL_TENSOR), "tensor of %s", bb_val_kind_name((int)k));
    CHECK_MSG((bb_val_as_bytes(all[i]) != NULL) == (k == BB_VAL_BYTES), "bytes of %s", bb_val_kind_name((int)k));
    CHECK_MSG((bb_val_as_peers(all[i]) != NULL) == (k == BB_VAL_PEER || k == BB_VAL_PEERS), "peers of %s",
              bb_val_kind_name((int)k));
    CHECK_MSG((bb_val_as_addresses(all[i]) != NULL) == (k == BB_VAL_ADDRESS), "addresses of %s",
              bb_val_kind_name((int)k));
    CHECK_MSG((bb_val_child(all[i], 0) != NULL) == (k == BB_VAL_COMPOSITE), "child of %s", bb_val_kind_name((int)k));
    CHECK_MSG((bb_val_as_u64(all[i]) != 0) == (k == BB_VAL_TIMESTAMP), "u64 of %s", bb_val_kind_name((int)k));
  }
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) bb_val_release(all[i]);
  bb_tensor_release(t);
}

/* Which values a wire of a type accepts: the kind the type stands for (a Peer and Peers,
 * an Address and Addresses stand for each other), the element type of tensor and scalar
 * types, anything for the abstract type and types outside the table. */
static void test_values_fit_types(void) {
  bb_peer_id p = bb_peer_id_from_u64(1);
  bb_address a = bb_address_p2p(&p);
  int64_t one = 1;
  bb_tensor *f32 = bb_tensor_new_zeros(NULL, BB_DTYPE_FLOAT, 1, &one);
  bb_tensor *i32 = bb_tensor_new_zeros(NULL, BB_DTYPE_INT32, 0, NULL);
  bb_val *v_f32 = bb_val_tensor(NULL, f32), *v_i32 = bb_val_tensor(NULL, i32), *peer = bb_val_peer(NULL, &p),
         *peers = bb_val_peers(NULL, &p, 1), *addr = bb_val_address(NULL, &a), *bytes = bb_val_bytes(NULL, "x", 1),
         *trig = bb_val_trigger(NULL), *bundle = bb_val_composite(NULL, &v_f32, 1);
  bb_tensor_release(f32);
  bb_tensor_release(i32);
  CHECK(bb_val_fits_type(v_f32, BB_TYPE_TENSOR_F32) && !bb_val_fits_type(v_f32, BB_TYPE_TENSOR_F16));
  CHECK(bb_val_fits_type(v_i32, BB_TYPE_SCALAR_I32) && !bb_val_fits_type(v_i32, BB_TYPE_SCALAR_F32));
  CHECK(!bb_val_fits_type(v_f32, BB_TYPE_COMPOSITE) && bb_val_fits_type(bundle, BB_TYPE_COMPOSITE));
  CHECK(bb_val_fits_type(peer, BB_TYPE_PEER_ID_VEC) && bb_val_fits_type(peers, BB_TYPE_PEER_ID));
  CHECK(bb_val_fits_type(addr, BB_TYPE_ADDRESS_VEC) && !bb_val_fits_type(peer, BB_TYPE_MULTIADDRESS));
  CHECK(bb_val_fits_type(bytes, BB_TYPE_BYTES) && bb_val_fits_type(v_f32, BB_TYPE_BYTES)); /* untyped */
  CHECK(bb_val_fits_type(trig, BB_TYPE_TRIGGER) && !bb_val_fits_type(trig, BB_TYPE_TENSOR_F32));
  CHECK(bb_val_fits_type(bundle, BB_TYPE_ABSTRACT) && bb_val_fits_type(peer, "example.own_type"));
  CHECK(!bb_val_fits_type(NULL, BB_TYPE_ABSTRACT));
  bb_val *all[] = {v_f32, v_i32, peer, peers, addr, bytes, trig, bundle};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) bb_val_release(all[i]);
}

int main(void) {
  RUN(test_values_fit_types);
  RUN(test_every_kind_round_trips);
  RUN(test_accessors);
  RUN(test_pinned_type_hashes);
  RUN(test_envelope_vector);
  RUN(test_bad_payloads);
  RUN(test_bincode_layouts);
  RUN(test_decode_without_memory);
  return bb_test_finish();
}
