/* The wire layer against published envelope and address vectors, the
 * protobuf-c code generated from proto/bb_core.proto, and hostile bytes: every cap, every
 * truncation, wrong wire types, random strings. */
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "bb/artifact.h"
#include "bb/value.h"
#include "bb/wire.h"
#include "bb_core.pb-c.h"
#include "harness.h"

static const uint8_t VECTOR[] = {
    0x0a, 0x0d, 0xa5, 0x03, 0x0a, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, /* dest /p2p/1 */
    0x12, 0x23, 0x0a, 0x0a, 0xe2, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x11,       /* suffix /site/17 */
    0x12, 0x0b, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x03,             /* payload */
    0x20, 0xbd, 0xd2, 0xa8, 0x88, 0xcc, 0xe1, 0x8c, 0xc1, 0x1d,                               /* type hash */
    0x1a, 0x04, 0x08, 0x01, 0x10, 0x01,                                                       /* REQUEST 1 */
    0x20, 0x80, 0xc2, 0xd7, 0x2f,                                                             /* 100 ms */
    0x38, 0x01,                                                                               /* schema 1 */
    0x42, 0x0d, 0xa5, 0x03, 0x0a, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, /* src /p2p/2 */
};

/* Schema 2 (docs/WIRE.md): a float32 tensor [1, 2] on wire "ClientLogic.updated_params",
 * whose id 0x43cff40e340c5278 is the FNV-1a-64 of the name. */
static const uint8_t VECTOR_V2[] = {
    0x0a, 0x0d, 0xa5, 0x03, 0x0a, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, /* dest /p2p/1 */
    0x12, 0x30, 0x0a, 0x0a, 0xe2, 0x01, 0x43, 0xcf, 0xf4, 0x0e, 0x34, 0x0c, 0x52, 0x78,       /* /site/<wire id> */
    0x12, 0x18, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,       /* FLOAT, rank 1, */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40,                   /* [2]: 1.0 2.0 */
    0x20, 0xe8, 0xf1, 0xf7, 0xa1, 0xbe, 0x93, 0xd2, 0xe9, 0x19,                               /* Tensor */
    0x1a, 0x04, 0x08, 0x01, 0x10, 0x01,                                                       /* REQUEST 1 */
    0x20, 0x80, 0xc2, 0xd7, 0x2f,                                                             /* 100 ms */
    0x38, 0x02,                                                                               /* schema 2 */
    0x42, 0x0d, 0xa5, 0x03, 0x0a, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, /* src /p2p/2 */
};

static void test_peer_ids(void) {
  bb_peer_id p = bb_peer_id_from_u64(1);
  const uint8_t want[] = {0x00, 0x08, 0, 0, 0, 0, 0, 0, 0, 1};
  CHECK(p.len == 10 && memcmp(p.bytes, want, 10) == 0);
  char text[128];
  CHECK(bb_peer_id_to_text(&p, text, sizeof text) > 0);
  CHECK_STR(text, "16uZAbWC1AJvL");
  p = bb_peer_id_from_u64(2);
  bb_peer_id_to_text(&p, text, sizeof text);
  CHECK_STR(text, "16uZAbWC1AJvM");
  p = bb_peer_id_from_u64(42);
  bb_peer_id_to_text(&p, text, sizeof text);
  CHECK_STR(text, "16uZAbWC1AJw3");
  bb_peer_id back;
  bb_error err;
  CHECK_EQ_INT(bb_peer_id_from_text("16uZAbWC1AJw3", &back, &err), 0);
  CHECK(bb_peer_id_equal(&back, &p));
  uint64_t u;
  CHECK(bb_peer_id_as_u64(&back, &u) && u == 42);
  /* a sha2-256 multihash round-trips through text too */
  uint8_t sha[34] = {0x12, 0x20};
  for (int i = 0; i < 32; i++) sha[2 + i] = (uint8_t)(i * 7 + 1);
  CHECK_EQ_INT(bb_peer_id_from_bytes(sha, sizeof sha, &p, &err), 0);
  CHECK(!bb_peer_id_as_u64(&p, &u));
  CHECK(bb_peer_id_to_text(&p, text, sizeof text) > 0);
  CHECK_EQ_INT(bb_peer_id_from_text(text, &back, &err), 0);
  CHECK(bb_peer_id_equal(&back, &p));
  CHECK_EQ_INT(bb_peer_id_from_bytes(sha, 33, &p, &err), BB_ERR_MALFORMED); /* digest cut short */
  CHECK(strstr(err.message, "malformed multihash (33 bytes)") != NULL);
  CHECK_EQ_INT(bb_peer_id_from_text("16uZAbWC1AJv0", &p, &err), BB_ERR_MALFORMED); /* 0 is not base58 */
}

static void test_addresses(void) {
  const uint8_t site[] = {0xa5, 0x03, 0x0a, 0x00, 0x08, 0, 0, 0, 0, 0, 0, 0, 1, 0xe2, 0x01, 0, 0, 0, 0, 0, 0, 0, 0x11};
  const uint8_t op[] = {0xe3, 0x01, 0, 0, 0, 7, 0xe4, 0x01, 0x08, 'F', 'i', 'n', 'd', 'N', 'o', 'd', 'e'};
  bb_address a;
  bb_error err;
  CHECK_EQ_INT(bb_address_from_bytes(site, sizeof site, &a, &err), 0);
  CHECK(a.n == 2 && a.seg[0].kind == BB_ADDR_P2P && a.seg[1].kind == BB_ADDR_SITE && a.seg[1].value == 17);
  char text[512];
  CHECK(bb_address_to_text(&a, text, sizeof text) > 0);
  CHECK_STR(text, "/p2p/16uZAbWC1AJvL/site/17");
  uint8_t bytes[512];
  CHECK(bb_address_to_bytes(&a, bytes, sizeof bytes) == sizeof site && memcmp(bytes, site, sizeof site) == 0);
  CHECK_EQ_INT(bb_address_from_text(" /component/7/op/FindNode ", &a, &err), 0);
  CHECK(bb_address_to_bytes(&a, bytes, sizeof bytes) == sizeof op && memcmp(bytes, op, sizeof op) == 0);
  CHECK(bb_address_find(&a, BB_ADDR_OP) && strcmp(bb_address_find(&a, BB_ADDR_OP)->op, "FindNode") == 0);
  CHECK_EQ_INT(bb_address_from_text("", &a, &err), 0);
  CHECK_EQ_INT(a.n, 0);
  /* what peers must not get away with */
  const uint8_t ip4[] = {0x04, 127, 0, 0, 1};
  CHECK_EQ_INT(bb_address_from_bytes(ip4, sizeof ip4, &a, &err), BB_ERR_MALFORMED);
  CHECK(strstr(err.message, "unknown protocol code 4") != NULL);
  CHECK_EQ_INT(bb_address_from_bytes(site, sizeof site - 1, &a, &err), BB_ERR_MALFORMED);
  CHECK(strstr(err.message, "truncated site segment") != NULL);
  CHECK_EQ_INT(bb_address_from_text("site/17", &a, &err), BB_ERR_MALFORMED);
  CHECK_EQ_INT(bb_address_from_text("/site", &a, &err), BB_ERR_MALFORMED);
  CHECK_EQ_INT(bb_address_from_text("/ip4/1.2.3.4", &a, &err), BB_ERR_MALFORMED);
  CHECK_EQ_INT(bb_address_from_text("/component/4294967296", &a, &err), BB_ERR_MALFORMED); /* over u32 */
  const uint8_t bad_utf8[] = {0xe4, 0x01, 0x02, 0xc3, 0x28};
  CHECK_EQ_INT(bb_address_from_bytes(bad_utf8, sizeof bad_utf8, &a, &err), BB_ERR_MALFORMED);
}

/* The schema 2 vector: its fill addresses a wire by the id of its name, and its payload
 * is the documented tensor. */
static void test_envelope_vector_v2(void) {
  bb_envelope *e = NULL;
  bb_error err;
  CHECK_EQ_INT(sizeof VECTOR_V2, 93);
  CHECK_EQ_INT(bb_envelope_decode(VECTOR_V2, sizeof VECTOR_V2, NULL, NULL, &e, &err), 0);
  if (!e) return;
  CHECK(e->schema_version == BB_ENVELOPE_SCHEMA_VERSION && e->schema_version == 2 && e->n_fills == 1);
  CHECK(bb_wire_id("ClientLogic.updated_params") == 0x43cff40e340c5278ull);
  bb_address a;
  CHECK_EQ_INT(bb_address_from_bytes(e->fills[0].dest_suffix.data, e->fills[0].dest_suffix.len, &a, &err), 0);
  CHECK(a.n == 1 && a.seg[0].kind == BB_ADDR_SITE && a.seg[0].value == bb_wire_id("ClientLogic.updated_params"));
  CHECK(e->fills[0].type_hash == 0x19d3489be43df8e8ull && e->fills[0].type_hash == bb_val_kind_hash(BB_VAL_TENSOR));
  bb_val *v = NULL;
  const bb_slot_fill *f = &e->fills[0];
  CHECK_EQ_INT(bb_val_decode(f->type_hash, f->payload.data, f->payload.len, NULL, &v, &err), 0);
  CHECK(v && bb_val_kind_of(v) == BB_VAL_TENSOR && bb_val_as_tensor(v)->numel == 2 && bb_val_fits_type(v, BB_TYPE_TENSOR_F32) &&
        !bb_val_fits_type(v, BB_TYPE_TENSOR_F16));
  if (v) CHECK(((const float *)bb_tensor_data(bb_val_as_tensor(v)))[1] == 2.0f);
  bb_val_release(v);
  uint8_t *out;
  size_t len;
  CHECK_EQ_INT(bb_envelope_encode(e, NULL, &out, &len, &err), 0);
  CHECK(len == sizeof VECTOR_V2 && memcmp(out, VECTOR_V2, len) == 0);
  bb_buffer_free(NULL, out);
  bb_envelope_free(e, NULL);
  /* wire ids and names: the id is FNV-1a-64 of the name's bytes */
  CHECK(bb_wire_id("FedNetwork.prediction_port") == 0xa27609087b67af71ull);
  CHECK(bb_wire_name_valid("ClientLogic.updated_params") && bb_wire_name_valid("x#inl3"));
  CHECK(!bb_wire_name_valid("") && !bb_wire_name_valid("a b") && !bb_wire_name_valid("a|b"));
  CHECK(!bb_wire_name_valid(NULL));
  char longest[BB_WIRE_NAME_MAX + 2];
  memset(longest, 'w', sizeof longest - 1);
  longest[BB_WIRE_NAME_MAX] = 0;
  CHECK(bb_wire_name_valid(longest));
  longest[BB_WIRE_NAME_MAX] = 'w';
  longest[BB_WIRE_NAME_MAX + 1] = 0;
  CHECK(!bb_wire_name_valid(longest));
}

static void test_envelope_vectors(void) {
  bb_envelope *e = NULL;
  bb_error err;
  CHECK_EQ_INT(sizeof VECTOR, 80);
  CHECK_EQ_INT(bb_envelope_decode(VECTOR, sizeof VECTOR, NULL, NULL, &e, &err), 0);
  if (!e) return;
  CHECK(e->n_dest_peer_addresses == 1 && e->n_src_peer_addresses == 1 && e->n_fills == 1);
  CHECK(e->has_correlation && e->correlation_kind == BB_CORR_REQUEST && e->wire_req_id == 1);
  CHECK(e->remaining_deadline_ns == 100000000u && e->schema_version == 1);
  CHECK(e->fills[0].type_hash == 0x1d82330cc10a293dull);
  CHECK(e->fills[0].type_hash == bb_type_hash("bb_runtime::syscall::values::BytesValue"));
  CHECK(e->fills[0].payload.len == 11 && e->fills[0].payload.data == VECTOR + 31); /* a slice, not a copy */
  bb_address a;
  CHECK_EQ_INT(bb_address_from_bytes(e->fills[0].dest_suffix.data, e->fills[0].dest_suffix.len, &a, &err), 0);
  CHECK(a.n == 1 && a.seg[0].kind == BB_ADDR_SITE && a.seg[0].value == 17);
  CHECK_EQ_INT(bb_address_from_bytes(e->src_peer_addresses[0].data, e->src_peer_addresses[0].len, &a, &err), 0);
  uint64_t peer;
  CHECK(bb_peer_id_as_u64(&a.seg[0].peer, &peer) && peer == 2);
  uint8_t *out;
  size_t len;
  CHECK_EQ_INT(bb_envelope_encode(e, NULL, &out, &len, &err), 0);
  CHECK(len == sizeof VECTOR && memcmp(out, VECTOR, len) == 0);
  /* protobuf-c, generated from proto/bb_core.proto, reads the same envelope */
  Bb__Core__WireEnvelope *pb = bb__core__wire_envelope__unpack(NULL, len, out);
  CHECK(pb && pb->n_fills == 1 && pb->fills[0]->type_hash == 0x1d82330cc10a293dull && pb->correlation &&
        pb->correlation->wire_req_id == 1 && pb->remaining_deadline_ns == 100000000u);
  if (pb) bb__core__wire_envelope__free_unpacked(pb, NULL);
  bb_buffer_free(NULL, out);
  bb_envelope_free(e, NULL);
  /* the trigger-only fill vector */
  const uint8_t trig[] = {0x12, 0x19, 0x0a, 0x0a, 0xe2, 0x01, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x18, 0x01,
                          0x20, 0xa0, 0xb9, 0x85, 0x9a, 0xa9, 0x89, 0xbb, 0x84, 0xf4, 0x01};
  CHECK_EQ_INT(bb_envelope_decode(trig, sizeof trig, NULL, NULL, &e, &err), 0);
  CHECK(e && e->fills[0].trigger_only && e->fills[0].payload.len == 0 &&
        e->fills[0].type_hash == bb_type_hash("bb_runtime::syscall::values::TriggerValue"));
  bb_envelope_free(e, NULL);
}

/* Envelopes built at random, encoded by us and by protobuf-c: identical bytes, and each
 * decodes the other's. */
static void test_against_protobuf_c(void) {
  uint64_t s = 7;
  for (int round = 0; round < 200; round++) {
    uint8_t blob[256];
    for (size_t i = 0; i < sizeof blob; i++) s = s * 6364136223846793005ull + 1, blob[i] = (uint8_t)(s >> 56);
    bb_slot_fill fills[3];
    memset(fills, 0, sizeof fills);
    bb_bytes addrs[2] = {{blob, 10}, {blob + 10, (size_t)(round % 7)}};
    bb_rtt_report rep = {(uint64_t)round, 2, 3, s, 5, 0};
    size_t nf = (size_t)(round % 4);
    for (size_t i = 0; i < nf; i++) {
      fills[i].dest_suffix = (bb_bytes){blob + 20 + i, 10};
      fills[i].payload = (bb_bytes){blob + 40, (size_t)((round * 13 + (int)i) % 200)};
      fills[i].trigger_only = (round + (int)i) % 3 == 0;
      fills[i].type_hash = s >> (i * 3);
    }
    bb_envelope e;
    memset(&e, 0, sizeof e);
    e.dest_peer_addresses = addrs, e.n_dest_peer_addresses = (size_t)(round % 3);
    e.fills = fills, e.n_fills = nf;
    e.has_correlation = round % 2, e.correlation_kind = round % 3, e.wire_req_id = s >> 7;
    e.remaining_deadline_ns = (uint64_t)round * 1000003u;
    e.rtt_reports = &rep, e.n_rtt_reports = round % 5 == 0;
    e.schema_version = round % 4 ? 1 : 0;
    e.src_peer_addresses = addrs + 1, e.n_src_peer_addresses = 1;
    uint8_t *ours;
    size_t ours_len;
    bb_error err;
    CHECK_EQ_INT(bb_envelope_encode(&e, NULL, &ours, &ours_len, &err), 0);
    Bb__Core__WireEnvelope *pb = bb__core__wire_envelope__unpack(NULL, ours_len, ours);
    CHECK_MSG(pb != NULL, "round %d: protobuf-c rejects our encoding", round);
    if (!pb) continue;
    CHECK(pb->n_fills == nf && pb->remaining_deadline_ns == e.remaining_deadline_ns);
    size_t theirs_len = bb__core__wire_envelope__get_packed_size(pb);
    uint8_t *theirs = malloc(theirs_len);
    bb__core__wire_envelope__pack(pb, theirs);
    CHECK_MSG(theirs_len == ours_len && memcmp(theirs, ours, ours_len) == 0, "round %d: encodings differ", round);
    bb_envelope *back = NULL;
    CHECK_EQ_INT(bb_envelope_decode(theirs, theirs_len, NULL, NULL, &back, &err), 0);
    CHECK(back && back->n_fills == nf && back->wire_req_id == (e.has_correlation ? e.wire_req_id : 0));
    bb_envelope_free(back, NULL);
    free(theirs);
    bb__core__wire_envelope__free_unpacked(pb, NULL);
    bb_buffer_free(NULL, ours);
  }
}

static int decode_rc(const uint8_t *d, size_t n, const bb_envelope_caps *caps, bb_error *err) {
  bb_envelope *e = NULL;
  int rc = bb_envelope_decode(d, n, caps, NULL, &e, err);
  bb_envelope_free(e, NULL);
  return rc;
}

static void test_caps_and_hostile_bytes(void) {
  bb_error err;
  bb_envelope_caps caps = {.struct_size = sizeof caps, .max_total_bytes = 79};
  CHECK_EQ_INT(decode_rc(VECTOR, sizeof VECTOR, &caps, &err), BB_ERR_LIMIT);
  CHECK_STR(err.message, "envelope buffer too large: cap=79 got=80");
  caps = (bb_envelope_caps){.struct_size = sizeof caps, .max_fill_payload_bytes = 10};
  CHECK_EQ_INT(decode_rc(VECTOR, sizeof VECTOR, &caps, &err), BB_ERR_LIMIT);
  CHECK_STR(err.message, "slot fill payload exceeds cap: cap=10 got=11");
  caps = (bb_envelope_caps){.struct_size = sizeof caps, .max_dest_suffix_bytes = 9};
  CHECK_EQ_INT(decode_rc(VECTOR, sizeof VECTOR, &caps, &err), BB_ERR_LIMIT);
  caps = (bb_envelope_caps){.struct_size = sizeof caps, .max_address_bytes = 12};
  CHECK_EQ_INT(decode_rc(VECTOR, sizeof VECTOR, &caps, &err), BB_ERR_LIMIT);
  CHECK(strstr(err.message, "dest_peer_addresses entry too large") != NULL);
  /* too many fills: 65 empty fills against the default cap of 64 */
  uint8_t many[2 * 65];
  for (int i = 0; i < 65; i++) many[2 * i] = 0x12, many[2 * i + 1] = 0x00;
  CHECK_EQ_INT(decode_rc(many, sizeof many, NULL, &err), BB_ERR_LIMIT);
  CHECK(strstr(err.message, "too many slot fills") != NULL);
  CHECK_EQ_INT(decode_rc(many, 2 * 64, NULL, &err), 0);
  /* versioned by struct_size: caps zeroed with one field set (struct_size unset) and caps
   * from a newer header are refused; a caller whose older header ends before max_fills
   * has its fields read and the rest defaulted, whatever lies past its struct */
  memset(&caps, 0, sizeof caps);
  caps.max_total_bytes = 79;
  CHECK_EQ_INT(decode_rc(VECTOR, sizeof VECTOR, &caps, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "struct_size 0; set it to sizeof(bb_envelope_caps)") != NULL);
  caps = (bb_envelope_caps){.struct_size = sizeof caps + 8};
  CHECK_EQ_INT(decode_rc(VECTOR, sizeof VECTOR, &caps, &err), BB_ERR_INVALID_ARGUMENT);
  caps = (bb_envelope_caps){.struct_size = offsetof(bb_envelope_caps, max_fills), .max_total_bytes = 79, .max_fills = 1};
  CHECK_EQ_INT(decode_rc(VECTOR, sizeof VECTOR, &caps, &err), BB_ERR_LIMIT);
  CHECK_STR(err.message, "envelope buffer too large: cap=79 got=80");
  caps.max_total_bytes = 0;
  CHECK_EQ_INT(decode_rc(many, 2 * 64, &caps, &err), 0);
  /* schema version 3 (1 and 2 decode: nodes refuse 1 themselves) */
  const uint8_t v3[] = {0x38, 0x03};
  CHECK_EQ_INT(decode_rc(v3, sizeof v3, NULL, &err), BB_ERR_UNSUPPORTED);
  CHECK_STR(err.message, "envelope schema_version mismatch: got=3 supported=[1,2]");
  const uint8_t v2[] = {0x38, 0x02};
  CHECK_EQ_INT(decode_rc(v2, sizeof v2, NULL, &err), 0);
  /* a known field with the wrong wire type */
  const uint8_t wrong[] = {0x20 | 2, 0x00};
  CHECK_EQ_INT(decode_rc(wrong, sizeof wrong, NULL, &err), BB_ERR_MALFORMED);
  CHECK(strstr(err.message, "remaining_deadline_ns") != NULL);
  /* unknown fields are skipped when well-formed */
  const uint8_t unknown[] = {0xc8, 0x01, 0x05, 0x38, 0x01};
  CHECK_EQ_INT(decode_rc(unknown, sizeof unknown, NULL, &err), 0);
  /* every truncation: an error, or a prefix that ends between top-level fields */
  const size_t boundaries[] = {0, 15, 52, 58, 63, 65, 80};
  for (size_t cut = 0; cut < sizeof VECTOR; cut++) {
    bool boundary = false;
    for (size_t i = 0; i < sizeof boundaries / sizeof boundaries[0]; i++) boundary |= boundaries[i] == cut;
    int rc = decode_rc(VECTOR, cut, NULL, &err);
    CHECK_MSG(boundary ? rc == 0 : rc == BB_ERR_MALFORMED, "cut at %zu: rc %d (%s)", cut, rc, err.message);
  }
  /* random strings and bit flips: never a crash (ASan/UBSan runs this) */
  uint64_t s = 99;
  uint8_t buf[128];
  size_t rejected = 0;
  for (int i = 0; i < 20000; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    size_t n = (size_t)((s >> 33) % sizeof buf);
    for (size_t k = 0; k < n; k++) s = s * 6364136223846793005ull + 1442695040888963407ull, buf[k] = (uint8_t)(s >> 56);
    rejected += decode_rc(buf, n, NULL, &err) != 0;
  }
  for (size_t bit = 0; bit < sizeof VECTOR * 8; bit++) {
    memcpy(buf, VECTOR, sizeof VECTOR);
    buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    (void)decode_rc(buf, sizeof VECTOR, NULL, &err);
  }
  printf("    20000 random byte strings: %zu rejected\n", rejected);
  CHECK(rejected > 10000);
}

int main(void) {
  RUN(test_peer_ids);
  RUN(test_addresses);
  RUN(test_envelope_vectors);
  RUN(test_envelope_vector_v2);
  RUN(test_against_protobuf_c);
  RUN(test_caps_and_hostile_bytes);
  return bb_test_finish();
}
