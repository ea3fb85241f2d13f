/* The one envelope builder: data sends (wire.Send) and control messages
 * (bb_ctx_send_message) both go out through rt_envelope_encode, which writes the
 * destination's and this node's addresses, the schema version and, for data, the
 * request id and the remaining deadline. */
#ifndef BBI_RUNTIME_ENVELOPE_H
#define BBI_RUNTIME_ENVELOPE_H

#include "bb/wire.h"

/* Longest address bytes written (bb_envelope_caps' default max_address_bytes). */
#define RT_ADDRESS_BYTES 512
/* Addresses written per side of an envelope. */
#define RT_ENVELOPE_ADDRS 8

/* This node's addresses as an envelope carries them, encoded once per send. */
typedef struct rt_sender {
  uint8_t buf[RT_ENVELOPE_ADDRS][RT_ADDRESS_BYTES];
  bb_bytes addrs[RT_ENVELOPE_ADDRS];
  size_t n;
} rt_sender;

/* What an envelope carries besides its addresses. */
typedef struct rt_envelope_body {
  bb_slot_fill *fills;
  size_t n_fills;
  bool request;                   /* a data send: carries a request correlation */
  uint64_t wire_req_id;           /* request only */
  uint64_t remaining_deadline_ns; /* request only; 0: none */
} rt_envelope_body;

/* Encodes this node's first RT_ENVELOPE_ADDRS addresses into s. */
void rt_sender_init(rt_sender *s, const bb_address *self, size_t n_self);
/* The /site/<id> suffix of a data fill into buf; its length. */
size_t rt_suffix_site(uint64_t site, uint8_t *buf, size_t cap);
/* The /component/<n>/op/<op> suffix of a control fill into buf; its length (0: op is
 * longer than BB_ADDR_OP_MAX). */
size_t rt_suffix_control(uint32_t component, const char *op, uint8_t *buf, size_t cap);
/* One envelope to a peer reached at `to` (its first RT_ENVELOPE_ADDRS addresses), from s;
 * *out is freed with bbi_mem_free(alloc, ...). */
int rt_envelope_encode(const bb_allocator *alloc, rt_sender *s, const bb_address *to, size_t n_to,
                       const rt_envelope_body *body, uint8_t **out, size_t *len, bb_error *err);

#endif /* BBI_RUNTIME_ENVELOPE_H */
