/* Shared by the tests of the control-plane components (GossipView, GlobalRegistry): a
 * message delivered to a slot as a peer would send it, the payload of a message a node
 * sent, and a byte builder for the documented payload and state layouts. */
#ifndef BB_TESTS_CONTROL_PLANE_H
#define BB_TESTS_CONTROL_PLANE_H

#include "../runtime/rttest.h"
#include "bb/wire.h"
#include "util/hash.h"

/* Delivers `op` with `payload` to the component bound at `slot` of `to`, from peer
 * `from_id`: a control-plane fill addressed by the FNV-1a 32 of the slot name. */
__attribute__((unused)) static void deliver_message(bb_node *to, uint64_t from_id, const char *slot, const char *op,
                                                    const uint8_t *payload, size_t len, uint64_t now) {
  bb_address suffix = {.n = 2};
  suffix.seg[0].kind = BB_ADDR_COMPONENT;
  suffix.seg[0].value = bbi_fnv1a32(slot, strlen(slot));
  suffix.seg[1].kind = BB_ADDR_OP;
  strcpy(suffix.seg[1].op, op);
  uint8_t sbuf[300], dbuf[300];
  bb_address dest = p2p_address(bb_node_self(to));
  bb_bytes d = {dbuf, bb_address_to_bytes(&dest, dbuf, sizeof dbuf)};
  bb_slot_fill fill = {.dest_suffix = {sbuf, bb_address_to_bytes(&suffix, sbuf, sizeof sbuf)},
                       .payload = {(uint8_t *)payload, len},
                       .type_hash = bb_val_kind_hash(BB_VAL_BYTES)};
  bb_envelope env = {0};
  env.dest_peer_addresses = &d;
  env.n_dest_peer_addresses = 1;
  env.fills = &fill;
  env.n_fills = 1;
  env.schema_version = BB_ENVELOPE_SCHEMA_VERSION;
  uint8_t *bytes;
  size_t blen;
  bb_error err;
  CHECK(bb_envelope_encode(&env, NULL, &bytes, &blen, &err) == 0);
  bb_peer_id from = bb_peer_id_from_u64(from_id);
  CHECK_MSG(bb_node_deliver(to, &from, bytes, blen, now, &err) == 0, "%s", err.message);
  free(bytes);
}

/* The payload of the first fill addressed to op `op` among the SEND steps, copied to out
 * when it fits: its length, or 0 when there is none. */
__attribute__((unused)) static size_t sent_payload(const bb_step *steps, size_t n, const char *op, uint8_t *out,
                                                   size_t cap) {
  for (size_t i = 0; i < n; i++) {
    if (steps[i].kind != BB_STEP_SEND) continue;
    bb_envelope *e = NULL;
    bb_error err;
    if (bb_envelope_decode(steps[i].bytes, steps[i].len, NULL, NULL, &e, &err)) continue;
    size_t got = 0;
    for (size_t f = 0; f < e->n_fills && !got; f++) {
      bb_address suffix;
      const bb_bytes *ds = &e->fills[f].dest_suffix;
      if (bb_address_from_bytes(ds->data, ds->len, &suffix, &err) || !suffix.n) continue;
      const bb_addr_segment *last = &suffix.seg[suffix.n - 1];
      if (last->kind != BB_ADDR_OP || strcmp(last->op, op) != 0) continue;
      const bb_bytes *pl = &e->fills[f].payload;
      if (pl->len <= cap) memcpy(out, pl->data, pl->len);
      got = pl->len;
    }
    bb_envelope_free(e, NULL);
    if (got) return got;
  }
  return 0;
}

/* Bytes built field by field, as a layout documents them (little-endian). */
typedef struct bytes_out {
  uint8_t b[1024];
  size_t n;
} bytes_out;

__attribute__((unused)) static void out_u8(bytes_out *o, uint8_t v) { o->b[o->n++] = v; }
__attribute__((unused)) static void out_le(bytes_out *o, uint64_t v, int width) {
  for (int i = 0; i < width; i++) o->b[o->n++] = (uint8_t)(v >> (8 * i));
}
/* u8 length, then the multihash bytes of test identity `id`. */
__attribute__((unused)) static void out_peer(bytes_out *o, uint64_t id) {
  bb_peer_id p = bb_peer_id_from_u64(id);
  out_u8(o, p.len);
  memcpy(o->b + o->n, p.bytes, p.len);
  o->n += p.len;
}
/* u16 length, then the binary form of /p2p/<id>. */
__attribute__((unused)) static void out_p2p_address(bytes_out *o, uint64_t id) {
  bb_peer_id p = bb_peer_id_from_u64(id);
  bb_address a = p2p_address(&p);
  uint8_t buf[512];
  size_t len = bb_address_to_bytes(&a, buf, sizeof buf);
  out_le(o, len, 2);
  memcpy(o->b + o->n, buf, len);
  o->n += len;
}

#endif
