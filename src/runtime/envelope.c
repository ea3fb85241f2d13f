/* The one envelope builder (envelope.h). */
#include <string.h>

#include "runtime/envelope.h"

void rt_sender_init(rt_sender *s, const bb_address *self, size_t n_self) {
  for (s->n = 0; s->n < n_self && s->n < RT_ENVELOPE_ADDRS; s->n++)
    s->addrs[s->n] = (bb_bytes){s->buf[s->n], bb_address_to_bytes(&self[s->n], s->buf[s->n], RT_ADDRESS_BYTES)};
}

size_t rt_suffix_site(uint64_t site, uint8_t *buf, size_t cap) {
  bb_address a = {.n = 1};
  a.seg[0].kind = BB_ADDR_SITE;
  a.seg[0].value = site;
  return bb_address_to_bytes(&a, buf, cap);
}

size_t rt_suffix_control(uint32_t component, const char *op, uint8_t *buf, size_t cap) {
  if (strlen(op) > BB_ADDR_OP_MAX) return 0;
  bb_address a = {.n = 2};
  a.seg[0].kind = BB_ADDR_COMPONENT;
  a.seg[0].value = component;
  a.seg[1].kind = BB_ADDR_OP;
  strcpy(a.seg[1].op, op);
  return bb_address_to_bytes(&a, buf, cap);
}

int rt_envelope_encode(const bb_allocator *alloc, rt_sender *s, const bb_address *to, size_t n_to,
                       const rt_envelope_body *body, uint8_t **out, size_t *len, bb_error *err) {
  uint8_t dest_buf[RT_ENVELOPE_ADDRS][RT_ADDRESS_BYTES];
  bb_bytes dest[RT_ENVELOPE_ADDRS];
  size_t n_dest = 0;
  for (; n_dest < n_to && n_dest < RT_ENVELOPE_ADDRS; n_dest++)
    dest[n_dest] = (bb_bytes){dest_buf[n_dest], bb_address_to_bytes(&to[n_dest], dest_buf[n_dest], RT_ADDRESS_BYTES)};
  bb_envelope env = {0};
  env.dest_peer_addresses = dest;
  env.n_dest_peer_addresses = n_dest;
  env.fills = body->fills;
  env.n_fills = body->n_fills;
  if (body->request) {
    env.has_correlation = true;
    env.correlation_kind = BB_CORR_REQUEST;
    env.wire_req_id = body->wire_req_id;
    env.remaining_deadline_ns = body->remaining_deadline_ns;
  }
  env.schema_version = BB_ENVELOPE_SCHEMA_VERSION;
  env.src_peer_addresses = s->addrs;
  env.n_src_peer_addresses = s->n;
  return bb_envelope_encode(&env, alloc, out, len, err);
}
