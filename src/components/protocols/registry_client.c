/* A GlobalRegistry client's state machine (see registry_client.h). */
#include "components/protocols/registry_client.h"

#include <string.h>

#include "bb/common.h"

void bbi_registry_client_init(bbi_registry_client *c, uint64_t retry_ns) {
  memset(c, 0, sizeof *c);
  c->retry_ns = retry_ns;
}

bool bbi_registry_client_target(bbi_registry_client *c, const bb_peer_id *server, uint64_t now) {
  bool same = c->has_server && bb_peer_id_equal(server, &c->server);
  if (same && c->announced && c->interval_ns && now - c->last_announce_ns < c->interval_ns) return false;
  c->server = *server;
  c->has_server = true;
  return true;
}

bool bbi_registry_client_wait_for_address(bbi_registry_client *c, bool server_has_address) {
  if (!server_has_address && !c->awaiting_address) {
    c->awaiting_address = true;
    return true;
  }
  c->awaiting_address = false;
  return false;
}

uint64_t bbi_registry_client_announced(bbi_registry_client *c, uint64_t now) {
  c->last_announce_ns = now;
  c->announced = true;
  return now + (c->interval_ns ? c->interval_ns : c->retry_ns);
}

uint64_t bbi_registry_client_new_timer(bbi_registry_client *c) { return ++c->timer_gen; }

bool bbi_registry_client_timer_due(const bbi_registry_client *c, uint64_t token) {
  return token == c->timer_gen && c->has_server;
}

int bbi_registry_client_check_handshake(const bbi_registry_client *c, const bb_peer_id *from, const uint8_t *payload,
                                       size_t len, bbi_registry_handshake *h, bb_error *err) {
  if (!c->has_server || !bb_peer_id_equal(from, &c->server))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "GlobalRegistryClient: Handshake from a peer it did not announce to");
  int rc = bbi_registry_handshake_decode(payload, len, h, err);
  if (rc) return rc;
  if (!h->heartbeat_ns || h->heartbeat_ns > h->ttl_ns)
    return bb_error_set(err, BB_ERR_MALFORMED, "Handshake: heartbeat %llu ns must be in (0, ttl %llu ns]",
                        (unsigned long long)h->heartbeat_ns, (unsigned long long)h->ttl_ns);
  return 0;
}

bool bbi_registry_client_apply_handshake(bbi_registry_client *c, const bbi_registry_handshake *h,
                                        uint64_t *heartbeat_at) {
  bool first = !c->interval_ns;
  c->ttl_ns = h->ttl_ns;
  c->interval_ns = h->heartbeat_ns;
  *heartbeat_at = c->last_announce_ns + c->interval_ns;
  return first;
}

size_t bbi_registry_client_save(const bbi_registry_client *c, uint8_t *out, size_t cap) {
  bb_le_writer w = bb_le_writer_fixed(out, cap);
  bb_le_write_u8(&w, BBI_REGISTRY_VERSION);
  bb_le_write_u8(&w, c->has_server);
  if (c->has_server) bbi_registry_write_peer(&w, &c->server);
  bb_le_write_u64(&w, c->ttl_ns);
  bb_le_write_u64(&w, c->interval_ns);
  bb_le_write_u64(&w, c->timer_gen);
  return w.len;
}

int bbi_registry_client_load(bbi_registry_client *c, const uint8_t *data, size_t len, bb_error *err) {
  bbi_registry_reader r = bbi_registry_reader_of(data, len, "GlobalRegistryClient snapshot", err);
  uint8_t has = 0;
  bb_peer_id server = {0};
  uint64_t ttl = 0, interval = 0, timer_gen = 0;
  int rc = bbi_registry_read_header(&r);
  if (!rc) rc = bbi_registry_read_u8(&r, "has_server", &has);
  if (!rc && has > 1) rc = bb_error_set(err, BB_ERR_MALFORMED, "GlobalRegistryClient snapshot: has_server %u", has);
  if (!rc && has) rc = bbi_registry_read_peer(&r, &server);
  if (!rc) rc = bbi_registry_read_u64(&r, "ttl_ns", &ttl);
  if (!rc) rc = bbi_registry_read_u64(&r, "interval_ns", &interval);
  if (!rc && bb_le_left(&r.in)) rc = bbi_registry_read_u64(&r, "timer_gen", &timer_gen);
  if (!rc) rc = bbi_registry_read_end(&r);
  if (rc) return rc;
  c->timer_gen = timer_gen;
  c->has_server = has;
  c->server = server;
  c->ttl_ns = ttl;
  c->interval_ns = interval;
  c->announced = false;
  return 0;
}
