/* GlobalRegistry's fields and messages (see registry_codec.h). */
#include "components/protocols/registry_codec.h"

#include "bb/common.h"

static int truncated(bbi_registry_reader *r, const char *field) {
  return bb_error_set(r->err, BB_ERR_MALFORMED, "%s: truncated at byte %zu (reading %s, %zu bytes in all)", r->what,
                      r->in.at, field, r->in.len);
}

int bbi_registry_read_u8(bbi_registry_reader *r, const char *field, uint8_t *out) {
  return bb_le_read_u8(&r->in, out) ? 0 : truncated(r, field);
}

int bbi_registry_read_u64(bbi_registry_reader *r, const char *field, uint64_t *out) {
  return bb_le_read_u64(&r->in, out) ? 0 : truncated(r, field);
}

int bbi_registry_read_peer(bbi_registry_reader *r, bb_peer_id *out) {
  uint8_t n = 0;
  int rc = bbi_registry_read_u8(r, "the peer id length", &n);
  if (rc) return rc;
  const size_t at = r->in.at;
  const uint8_t *bytes = bb_le_read_span(&r->in, n);
  if (!bytes) return truncated(r, "the peer id");
  if (bb_peer_id_from_bytes(bytes, n, out, r->err))
    return bb_error_prefix(r->err, "%s: peer id at byte %zu: ", r->what, at);
  return 0;
}

int bbi_registry_read_addresses(bbi_registry_reader *r, bb_address *out, size_t *n, bool need_one) {
  uint8_t count = 0;
  int rc = bbi_registry_read_u8(r, "the address count", &count);
  if (rc) return rc;
  if (count > BBI_REGISTRY_MAX_ADDRS || (need_one && !count))
    return bb_error_set(r->err, BB_ERR_MALFORMED, "%s: byte %zu: %u addresses (need %d to %d)", r->what, r->in.at - 1,
                        count, need_one ? 1 : 0, BBI_REGISTRY_MAX_ADDRS);
  for (size_t i = 0; i < count; i++) {
    uint8_t lo = 0, hi = 0; /* a u16, read a byte at a time so a cut names the byte it fell on */
    if ((rc = bbi_registry_read_u8(r, "an address length", &lo)) || (rc = bbi_registry_read_u8(r, "an address length", &hi)))
      return rc;
    const size_t len = (size_t)lo | (size_t)hi << 8, at = r->in.at;
    const uint8_t *bytes = bb_le_read_span(&r->in, len);
    if (!bytes) return truncated(r, "an address");
    if (bb_address_from_bytes(bytes, len, &out[i], r->err))
      return bb_error_prefix(r->err, "%s: address %zu at byte %zu: ", r->what, i, at);
  }
  *n = count;
  return 0;
}

int bbi_registry_read_header(bbi_registry_reader *r) {
  uint8_t v = 0;
  int rc = bbi_registry_read_u8(r, "the version", &v);
  if (rc) return rc;
  if (v != BBI_REGISTRY_VERSION)
    return bb_error_set(r->err, BB_ERR_MALFORMED, "%s: version %u at byte 0 (expected %d)", r->what, v,
                        BBI_REGISTRY_VERSION);
  return 0;
}

int bbi_registry_read_end(bbi_registry_reader *r) {
  if (bb_le_left(&r->in))
    return bb_error_set(r->err, BB_ERR_MALFORMED, "%s: %zu trailing bytes after byte %zu", r->what, bb_le_left(&r->in),
                        r->in.at);
  return 0;
}

void bbi_registry_write_peer(bb_le_writer *w, const bb_peer_id *p) {
  bb_le_write_u8(w, p->len);
  bb_le_write(w, p->bytes, p->len);
}

void bbi_registry_write_addresses(bb_le_writer *w, const bb_address *a, size_t n) {
  bb_le_write_u8(w, (uint8_t)n);
  for (size_t i = 0; i < n; i++) {
    uint8_t b[BBI_REGISTRY_MAX_ADDRESS_BYTES];
    size_t len = bb_address_to_bytes(&a[i], b, sizeof b);
    bb_le_write_u16(w, (uint16_t)len);
    bb_le_write(w, b, len);
  }
}

size_t bbi_registry_announce_encode(const bbi_registry_announce *m, uint8_t *out, size_t cap) {
  bb_le_writer w = bb_le_writer_fixed(out, cap);
  bb_le_write_u8(&w, BBI_REGISTRY_VERSION);
  bbi_registry_write_peer(&w, &m->peer);
  bbi_registry_write_addresses(&w, m->addrs, m->n_addrs);
  return w.len;
}

size_t bbi_registry_handshake_encode(const bbi_registry_handshake *m, uint8_t *out, size_t cap) {
  bb_le_writer w = bb_le_writer_fixed(out, cap);
  bb_le_write_u8(&w, BBI_REGISTRY_VERSION);
  bb_le_write_u64(&w, m->ttl_ns);
  bb_le_write_u64(&w, m->heartbeat_ns);
  bbi_registry_write_addresses(&w, m->addrs, m->n_addrs);
  return w.len;
}

int bbi_registry_announce_decode(const uint8_t *p, size_t len, bbi_registry_announce *out, bb_error *err) {
  bbi_registry_reader r = bbi_registry_reader_of(p, len, "Announce", err);
  int rc = bbi_registry_read_header(&r);
  if (!rc) rc = bbi_registry_read_peer(&r, &out->peer);
  if (!rc) rc = bbi_registry_read_addresses(&r, out->addrs, &out->n_addrs, true);
  return rc ? rc : bbi_registry_read_end(&r);
}

int bbi_registry_handshake_decode(const uint8_t *p, size_t len, bbi_registry_handshake *out, bb_error *err) {
  bbi_registry_reader r = bbi_registry_reader_of(p, len, "Handshake", err);
  int rc = bbi_registry_read_header(&r);
  if (!rc) rc = bbi_registry_read_u64(&r, "ttl_ns", &out->ttl_ns);
  if (!rc) rc = bbi_registry_read_u64(&r, "heartbeat_ns", &out->heartbeat_ns);
  if (!rc) rc = bbi_registry_read_addresses(&r, out->addrs, &out->n_addrs, false);
  return rc ? rc : bbi_registry_read_end(&r);
}
