/* Runtime values: construction, reference counting and the wire form of every kind
 * (docs/WIRE.md, "Payloads"). Integers on the wire are little-endian and lengths are u64
 * (bincode's layouts), so peers written in other languages read and write the same fills. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bb/value.h"
#include "bb/bytes.h"
#include "bb/common.h"
#include "util/mem.h"

/* The layout, known only here (bb/value.h keeps it opaque): a header, then the payload of
 * variable-length kinds right after it, so a value is one allocation. */
struct bb_val {
  uint32_t refcount;
  uint32_t kind; /* bb_val_kind */
  const bb_allocator *alloc;
  size_t n; /* BYTES: length; PEERS, ADDRESSES, COMPOSITE: count; PEER, ADDRESS: 1 */
  union {
    uint64_t u64;
    bb_tensor *tensor;
    uint8_t *bytes;
    bb_peer_id *peers;
    bb_address *addresses;
    bb_val **children;
  } as;
};

/* Carrier names: their FNV-1a-64 is each kind's type hash on the wire, so they never
 * change (peers of other implementations use the same names). */
static const char *const CARRIER[BB_VAL_KIND_COUNT] = {
    [BB_VAL_TRIGGER] = "bb_runtime::syscall::values::TriggerValue",
    [BB_VAL_BYTES] = "bb_runtime::syscall::values::BytesValue",
    [BB_VAL_TENSOR] = "ai.bytesandbrains.value.Tensor",
    [BB_VAL_U64] = "bb_runtime::syscall::values::U64Value",
    [BB_VAL_TIMESTAMP] = "bb_runtime::syscall::values::TimestampValue",
    [BB_VAL_COMMAND_ID] = "bb_runtime::syscall::values::CommandIdValue",
    [BB_VAL_WIRE_REQ_ID] = "bb_runtime::syscall::values::WireReqIdValue",
    [BB_VAL_CORRELATION] = "bb_runtime::syscall::values::CorrelationTokenValue",
    [BB_VAL_PEER] = "bb_runtime::syscall::values::PeerIdValue",
    [BB_VAL_PEERS] = "bb_runtime::syscall::values::PeerIdVecValue",
    [BB_VAL_ADDRESS] = "bb_runtime::syscall::values::AddressValue",
    [BB_VAL_ADDRESSES] = "bb_runtime::syscall::values::AddressVecValue",
    [BB_VAL_COMPOSITE] = "bb_runtime::syscall::values::CompositeValue",
};

static const char *const KIND_NAME[BB_VAL_KIND_COUNT] = {
    "Trigger", "Bytes", "Tensor", "U64", "Timestamp", "CommandId", "WireReqId",
    "Correlation", "Peer", "Peers", "Address", "Addresses", "Composite"};

/* Bundles nest at most this deep on the wire (a hostile payload must not recurse us off
 * the stack). */
#define MAX_COMPOSITE_DEPTH 16

const char *bb_val_kind_name(int kind) {
  return kind >= 0 && kind < BB_VAL_KIND_COUNT ? KIND_NAME[kind] : "Unknown";
}

const char *bb_val_carrier_name(int kind) {
  return kind >= 0 && kind < BB_VAL_KIND_COUNT ? CARRIER[kind] : NULL;
}

uint64_t bb_val_kind_hash(int kind) {
  const char *name = bb_val_carrier_name(kind);
  return name ? bb_type_hash(name) : 0;
}

int bb_val_kind_of_hash(uint64_t type_hash) {
  for (int k = 0; k < BB_VAL_KIND_COUNT; k++)
    if (bb_type_hash(CARRIER[k]) == type_hash) return k;
  return -1;
}

/* ---- reading ----------------------------------------------------------------------------- */

bb_val_kind bb_val_kind_of(const bb_val *v) { return v ? (bb_val_kind)v->kind : BB_VAL_KIND_COUNT; }

size_t bb_val_count(const bb_val *v) { return v ? v->n : 0; }

bool bb_val_is_u64(const bb_val *v) { return v && v->kind >= BB_VAL_U64 && v->kind <= BB_VAL_CORRELATION; }

uint64_t bb_val_as_u64(const bb_val *v) { return bb_val_is_u64(v) ? v->as.u64 : 0; }

bb_tensor *bb_val_as_tensor(const bb_val *v) { return v && v->kind == BB_VAL_TENSOR ? v->as.tensor : NULL; }

const uint8_t *bb_val_as_bytes(const bb_val *v) { return v && v->kind == BB_VAL_BYTES ? v->as.bytes : NULL; }

const bb_peer_id *bb_val_as_peers(const bb_val *v) {
  return v && (v->kind == BB_VAL_PEER || v->kind == BB_VAL_PEERS) ? v->as.peers : NULL;
}

const bb_address *bb_val_as_addresses(const bb_val *v) {
  return v && (v->kind == BB_VAL_ADDRESS || v->kind == BB_VAL_ADDRESSES) ? v->as.addresses : NULL;
}

bb_val *const *bb_val_children(const bb_val *v) { return v && v->kind == BB_VAL_COMPOSITE ? v->as.children : NULL; }

bb_val *bb_val_child(const bb_val *v, size_t i) {
  return v && v->kind == BB_VAL_COMPOSITE && i < v->n ? v->as.children[i] : NULL;
}

bool bb_val_fits_type(const bb_val *v, const char *type) {
  const char *kind = bb_type_value_kind(type);
  if (!v) return false;
  if (strcmp(kind, "Any") == 0) return true;
  const char *have = bb_val_kind_name((int)v->kind);
  if (strcmp(kind, "Peer") == 0 || strcmp(kind, "Peers") == 0)
    return v->kind == BB_VAL_PEER || v->kind == BB_VAL_PEERS;
  if (strcmp(kind, "Address") == 0 || strcmp(kind, "Addresses") == 0)
    return v->kind == BB_VAL_ADDRESS || v->kind == BB_VAL_ADDRESSES;
  if (strcmp(kind, have) != 0) return false;
  return v->kind != BB_VAL_TENSOR || v->as.tensor->dtype == (int32_t)bb_type_element(type);
}

/* ---- construction ---------------------------------------------------------------------- */

static bb_val *val_new(const bb_allocator *alloc, bb_val_kind kind, size_t extra) {
  if (!alloc) alloc = bb_default_allocator();
  if (extra > SIZE_MAX - sizeof(bb_val)) return NULL;
  bb_val *v = bbi_mem_alloc(alloc, sizeof *v + extra);
  if (!v) return NULL;
  memset(v, 0, sizeof *v);
  v->refcount = 1;
  v->kind = kind;
  v->alloc = alloc;
  return v;
}

/* Variable-length payloads live right after the header: one allocation per value. */
static void *tail(bb_val *v) { return v + 1; }

bb_val *bb_val_trigger(const bb_allocator *alloc) { return val_new(alloc, BB_VAL_TRIGGER, 0); }

bb_val *bb_val_bytes(const bb_allocator *alloc, const void *data, size_t len) {
  bb_val *v = val_new(alloc, BB_VAL_BYTES, len);
  if (!v) return NULL;
  v->n = len;
  v->as.bytes = tail(v);
  if (len) memcpy(v->as.bytes, data, len);
  return v;
}

bb_val *bb_val_u64(const bb_allocator *alloc, bb_val_kind kind, uint64_t value) {
  if (kind < BB_VAL_U64 || kind > BB_VAL_CORRELATION) return NULL;
  bb_val *v = val_new(alloc, kind, 0);
  if (v) v->as.u64 = value;
  return v;
}

bb_val *bb_val_tensor(const bb_allocator *alloc, bb_tensor *t) {
  if (!t) return NULL;
  bb_val *v = val_new(alloc, BB_VAL_TENSOR, 0);
  if (v) v->as.tensor = bb_tensor_retain(t);
  return v;
}

bb_val *bb_val_peers(const bb_allocator *alloc, const bb_peer_id *peers, size_t n) {
  if (n > SIZE_MAX / sizeof *peers) return NULL;
  bb_val *v = val_new(alloc, BB_VAL_PEERS, n * sizeof *peers);
  if (!v) return NULL;
  v->n = n;
  v->as.peers = tail(v);
  if (n) memcpy(v->as.peers, peers, n * sizeof *peers);
  return v;
}

bb_val *bb_val_peer(const bb_allocator *alloc, const bb_peer_id *peer) {
  bb_val *v = bb_val_peers(alloc, peer, 1);
  if (v) v->kind = BB_VAL_PEER;
  return v;
}

bb_val *bb_val_addresses(const bb_allocator *alloc, const bb_address *addresses, size_t n) {
  if (n > SIZE_MAX / sizeof *addresses) return NULL;
  bb_val *v = val_new(alloc, BB_VAL_ADDRESSES, n * sizeof *addresses);
  if (!v) return NULL;
  v->n = n;
  v->as.addresses = tail(v);
  if (n) memcpy(v->as.addresses, addresses, n * sizeof *addresses);
  return v;
}

bb_val *bb_val_address(const bb_allocator *alloc, const bb_address *address) {
  bb_val *v = bb_val_addresses(alloc, address, 1);
  if (v) v->kind = BB_VAL_ADDRESS;
  return v;
}

bb_val *bb_val_composite(const bb_allocator *alloc, bb_val *const *children, size_t n) {
  if (n > SIZE_MAX / sizeof *children) return NULL;
  for (size_t i = 0; i < n; i++)
    if (!children[i]) return NULL;
  bb_val *v = val_new(alloc, BB_VAL_COMPOSITE, n * sizeof *children);
  if (!v) return NULL;
  v->n = n;
  v->as.children = tail(v);
  for (size_t i = 0; i < n; i++) v->as.children[i] = bb_val_retain(children[i]);
  return v;
}

bb_val *bb_val_retain(bb_val *v) {
  if (v) v->refcount++;
  return v;
}

void bb_val_release(bb_val *v) {
  if (!v || --v->refcount) return;
  if (v->kind == BB_VAL_TENSOR) bb_tensor_release(v->as.tensor);
  if (v->kind == BB_VAL_COMPOSITE)
    for (size_t i = 0; i < v->n; i++) bb_val_release(v->as.children[i]);
  bbi_mem_free(v->alloc, v);
}

/* ---- encoding -------------------------------------------------------------------------- */

/* A u64 length, then the bytes. */
static void put_bytes(bb_le_writer *w, const void *data, size_t len) {
  bb_le_write_u64(w, len);
  bb_le_write(w, data, len);
}

/* Address segments in bincode's enum layout: u32 variant (P2p 0, Site 1, Component 2,
 * Op 3), then the payload. This is not bb_address_to_bytes. */
static size_t address_size(const bb_address *a) {
  size_t n = 8;
  for (size_t i = 0; i < a->n; i++) {
    const bb_addr_segment *s = &a->seg[i];
    n += 4;
    switch (s->kind) {
    case BB_ADDR_P2P: n += 8 + s->peer.len; break;
    case BB_ADDR_SITE: n += 8; break;
    case BB_ADDR_COMPONENT: n += 4; break;
    case BB_ADDR_OP: n += 8 + strlen(s->op); break;
    }
  }
  return n;
}

static void put_address(bb_le_writer *w, const bb_address *a) {
  bb_le_write_u64(w, a->n);
  for (size_t i = 0; i < a->n; i++) {
    const bb_addr_segment *s = &a->seg[i];
    switch (s->kind) {
    case BB_ADDR_P2P: bb_le_write_u32(w, 0); put_bytes(w, s->peer.bytes, s->peer.len); break;
    case BB_ADDR_SITE: bb_le_write_u32(w, 1); bb_le_write_u64(w, s->value); break;
    case BB_ADDR_COMPONENT: bb_le_write_u32(w, 2); bb_le_write_u32(w, (uint32_t)s->value); break;
    case BB_ADDR_OP: bb_le_write_u32(w, 3); put_bytes(w, s->op, strlen(s->op)); break;
    }
  }
}

/* Tensor: u32 dtype, u32 rank, rank × u64 dims, then the elements (little-endian). */
static size_t tensor_size(const bb_tensor *t) { return 8 + 8 * (size_t)t->rank + bb_tensor_nbytes(t); }

size_t bb_val_encoded_size(const bb_val *v) {
  size_t n = 0;
  switch ((bb_val_kind)v->kind) {
  case BB_VAL_TRIGGER: return 0;
  case BB_VAL_BYTES: return 8 + v->n;
  case BB_VAL_TENSOR: return tensor_size(v->as.tensor);
  case BB_VAL_U64:
  case BB_VAL_TIMESTAMP:
  case BB_VAL_COMMAND_ID:
  case BB_VAL_WIRE_REQ_ID:
  case BB_VAL_CORRELATION: return 8;
  case BB_VAL_PEER: return 8 + v->as.peers[0].len;
  case BB_VAL_PEERS:
    n = 8;
    for (size_t i = 0; i < v->n; i++) n += 8 + v->as.peers[i].len;
    return n;
  case BB_VAL_ADDRESS: return address_size(&v->as.addresses[0]);
  case BB_VAL_ADDRESSES:
    n = 8;
    for (size_t i = 0; i < v->n; i++) n += address_size(&v->as.addresses[i]);
    return n;
  case BB_VAL_COMPOSITE:
    n = 8;
    for (size_t i = 0; i < v->n; i++) n += 16 + bb_val_encoded_size(v->as.children[i]);
    return n;
  case BB_VAL_KIND_COUNT: break;
  }
  return 0;
}

static void encode(const bb_val *v, bb_le_writer *w) {
  switch ((bb_val_kind)v->kind) {
  case BB_VAL_TRIGGER: break;
  case BB_VAL_BYTES: put_bytes(w, v->as.bytes, v->n); break;
  case BB_VAL_TENSOR: {
    const bb_tensor *t = v->as.tensor;
    bb_le_write_u32(w, (uint32_t)t->dtype);
    bb_le_write_u32(w, (uint32_t)t->rank);
    for (int i = 0; i < t->rank; i++) bb_le_write_u64(w, (uint64_t)t->dims[i]);
    bb_le_write(w, bb_tensor_data(t), bb_tensor_nbytes(t)); /* every target we build for is little-endian */
    break;
  }
  case BB_VAL_U64:
  case BB_VAL_TIMESTAMP:
  case BB_VAL_COMMAND_ID:
  case BB_VAL_WIRE_REQ_ID:
  case BB_VAL_CORRELATION: bb_le_write_u64(w, v->as.u64); break;
  case BB_VAL_PEER: put_bytes(w, v->as.peers[0].bytes, v->as.peers[0].len); break;
  case BB_VAL_PEERS:
    bb_le_write_u64(w, v->n);
    for (size_t i = 0; i < v->n; i++) put_bytes(w, v->as.peers[i].bytes, v->as.peers[i].len);
    break;
  case BB_VAL_ADDRESS: put_address(w, &v->as.addresses[0]); break;
  case BB_VAL_ADDRESSES:
    bb_le_write_u64(w, v->n);
    for (size_t i = 0; i < v->n; i++) put_address(w, &v->as.addresses[i]);
    break;
  case BB_VAL_COMPOSITE:
    bb_le_write_u64(w, v->n);
    for (size_t i = 0; i < v->n; i++) {
      const bb_val *c = v->as.children[i];
      bb_le_write_u64(w, bb_val_kind_hash((int)c->kind));
      bb_le_write_u64(w, bb_val_encoded_size(c));
      encode(c, w);
    }
    break;
  case BB_VAL_KIND_COUNT: break;
  }
}

size_t bb_val_encode_into(const bb_val *v, uint8_t *out) {
  bb_le_writer w = bb_le_writer_fixed(out, bb_val_encoded_size(v)); /* the size out was made for */
  encode(v, &w);
  return w.len;
}

int bb_val_encode(const bb_val *v, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  if (!alloc) alloc = bb_default_allocator();
  size_t n = bb_val_encoded_size(v);
  uint8_t *buf = bbi_mem_alloc(alloc, n);
  if (!buf) return bb_error_set(err, BB_ERR_NOMEM, "out of memory encoding a %zu-byte %s value", n,
                                bb_val_kind_name((int)v->kind));
  *len = bb_val_encode_into(v, buf);
  *out = buf;
  return 0;
}

/* ---- decoding -------------------------------------------------------------------------- */

/* A payload being decoded: its bytes, and what it is (for messages). */
typedef struct reader {
  bb_le_reader in;
  const char *what;
  bb_error *err;
} reader;

static int short_read(reader *r, size_t need) {
  return bb_error_set(r->err, BB_ERR_MALFORMED, "%s payload truncated: needs %zu more bytes, %zu left", r->what, need,
                      bb_le_left(&r->in));
}

static int get_u32(reader *r, uint32_t *x) { return bb_le_read_u32(&r->in, x) ? 0 : short_read(r, 4); }

static int get_u64(reader *r, uint64_t *x) { return bb_le_read_u64(&r->in, x) ? 0 : short_read(r, 8); }

/* A u64 length followed by that many bytes, which must be in the buffer. */
static int get_span(reader *r, const uint8_t **data, size_t *len) {
  uint64_t n = 0;
  int rc = get_u64(r, &n);
  if (rc) return rc;
  if (n > bb_le_left(&r->in))
    return bb_error_set(r->err, BB_ERR_MALFORMED, "%s payload: length %" PRIu64 " runs past the end (%zu bytes left)",
                        r->what, n, bb_le_left(&r->in));
  *len = (size_t)n;
  *data = bb_le_read_span(&r->in, *len);
  return 0;
}

/* A count of items each at least min_item bytes long: bounded by what is left, so a
 * hostile count cannot make us allocate more than the payload justifies. */
static int get_count(reader *r, size_t min_item, size_t *count) {
  uint64_t n = 0;
  int rc = get_u64(r, &n);
  if (rc) return rc;
  if (n > bb_le_left(&r->in) / min_item)
    return bb_error_set(r->err, BB_ERR_MALFORMED, "%s payload: count %" PRIu64 " cannot fit in %zu bytes", r->what, n,
                        bb_le_left(&r->in));
  *count = (size_t)n;
  return 0;
}

static int get_peer(reader *r, bb_peer_id *peer) {
  const uint8_t *d = NULL;
  size_t n = 0;
  int rc = get_span(r, &d, &n);
  return rc ? rc : bb_peer_id_from_bytes(d, n, peer, r->err);
}

static int get_address(reader *r, bb_address *a) {
  size_t n = 0;
  int rc = get_count(r, 4, &n);
  if (rc) return rc;
  if (n > BB_ADDR_MAX_SEGMENTS)
    return bb_error_set(r->err, BB_ERR_MALFORMED, "address has %zu segments (at most %d)", n, BB_ADDR_MAX_SEGMENTS);
  memset(a, 0, sizeof *a);
  a->n = n;
  for (size_t i = 0; i < n; i++) {
    bb_addr_segment *s = &a->seg[i];
    uint32_t variant = 0, c32 = 0;
    const uint8_t *d = NULL;
    size_t len = 0;
    if ((rc = get_u32(r, &variant))) return rc;
    switch (variant) {
    case 0:
      s->kind = BB_ADDR_P2P;
      if ((rc = get_peer(r, &s->peer))) return rc;
      break;
    case 1:
      s->kind = BB_ADDR_SITE;
      if ((rc = get_u64(r, &s->value))) return rc;
      break;
    case 2:
      s->kind = BB_ADDR_COMPONENT;
      if ((rc = get_u32(r, &c32))) return rc;
      s->value = c32;
      break;
    case 3:
      s->kind = BB_ADDR_OP;
      if ((rc = get_span(r, &d, &len))) return rc;
      if (len > BB_ADDR_OP_MAX || memchr(d, 0, len))
        return bb_error_set(r->err, BB_ERR_MALFORMED, "address op segment of %zu bytes is too long or holds NUL", len);
      memcpy(s->op, d, len);
      s->op[len] = 0;
      break;
    default: return bb_error_set(r->err, BB_ERR_MALFORMED, "address segment variant %" PRIu32 " is unknown", variant);
    }
  }
  return 0;
}

static int decode_tensor(reader *r, const bb_allocator *alloc, bb_val **out) {
  uint32_t dtype = 0, rank = 0;
  int rc;
  if ((rc = get_u32(r, &dtype)) || (rc = get_u32(r, &rank))) return rc;
  size_t esize = bb_dtype_size((int)dtype);
  if (!esize || dtype == BB_DTYPE_STRING)
    return bb_error_set(r->err, BB_ERR_MALFORMED, "tensor payload: element type %" PRIu32 " is not a fixed-size type",
                        dtype);
  if (rank > BB_MAX_RANK)
    return bb_error_set(r->err, BB_ERR_MALFORMED, "tensor payload: rank %" PRIu32 " exceeds %d", rank, BB_MAX_RANK);
  int64_t dims[BB_MAX_RANK];
  uint64_t numel = 1;
  for (uint32_t i = 0; i < rank; i++) {
    uint64_t d = 0;
    if ((rc = get_u64(r, &d))) return rc;
    if (d > (uint64_t)INT64_MAX || (d && numel > UINT64_MAX / d))
      return bb_error_set(r->err, BB_ERR_MALFORMED, "tensor payload: dim %" PRIu32 " = %" PRIu64 " overflows", i, d);
    dims[i] = (int64_t)d;
    numel *= d;
  }
  size_t left = bb_le_left(&r->in);
  if (numel > left / esize || numel * esize != left)
    return bb_error_set(r->err, BB_ERR_MALFORMED,
                        "tensor payload: %s[%" PRIu64 " elements] needs %" PRIu64 " data bytes, %zu present",
                        bb_dtype_name((int)dtype), numel, numel > UINT64_MAX / esize ? UINT64_MAX : numel * esize, left);
  bb_tensor *t = bb_tensor_new_empty(alloc, (int32_t)dtype, (int)rank, dims);
  if (!t) return bb_error_set(r->err, BB_ERR_NOMEM, "out of memory for a %zu-byte tensor", left);
  bb_le_read(&r->in, bb_tensor_data(t), left);
  *out = bb_val_tensor(alloc, t);
  bb_tensor_release(t);
  return *out ? 0 : bb_error_set(r->err, BB_ERR_NOMEM, "out of memory");
}

static int decode_kind(int kind, reader *r, const bb_allocator *alloc, int depth, bb_val **out);

static int decode_composite(reader *r, const bb_allocator *alloc, int depth, bb_val **out) {
  if (depth >= MAX_COMPOSITE_DEPTH)
    return bb_error_set(r->err, BB_ERR_MALFORMED, "bundles nest deeper than %d", MAX_COMPOSITE_DEPTH);
  size_t n = 0;
  int rc = get_count(r, 16, &n);
  if (rc) return rc;
  bb_val *stack_children[8];
  bb_val **children = stack_children;
  if (n > 8) {
    children = bbi_mem_alloc(alloc, n * sizeof *children);
    if (!children) return bb_error_set(r->err, BB_ERR_NOMEM, "out of memory for %zu bundle children", n);
  }
  size_t made = 0;
  for (; made < n; made++) {
    uint64_t hash = 0;
    const uint8_t *d = NULL;
    size_t len = 0;
    if ((rc = get_u64(r, &hash)) || (rc = get_span(r, &d, &len))) break;
    int kind = bb_val_kind_of_hash(hash);
    if (kind < 0) {
      rc = bb_error_set(r->err, BB_ERR_MALFORMED, "bundle child %zu has unknown type hash 0x%016" PRIx64, made, hash);
      break;
    }
    reader sub = {bb_le_reader_of(d, len), bb_val_kind_name(kind), r->err};
    if ((rc = decode_kind(kind, &sub, alloc, depth + 1, &children[made]))) break;
  }
  if (!rc) {
    *out = bb_val_composite(alloc, children, n);
    if (!*out) rc = bb_error_set(r->err, BB_ERR_NOMEM, "out of memory");
  }
  for (size_t i = 0; i < made; i++) bb_val_release(children[i]);
  if (children != stack_children) bbi_mem_free(alloc, children);
  return rc;
}

static int decode_kind(int kind, reader *r, const bb_allocator *alloc, int depth, bb_val **out) {
  int rc = 0;
  *out = NULL;
  switch ((bb_val_kind)kind) {
  case BB_VAL_TRIGGER: *out = bb_val_trigger(alloc); break;
  case BB_VAL_BYTES: {
    const uint8_t *d = NULL;
    size_t n = 0;
    if ((rc = get_span(r, &d, &n))) return rc;
    *out = bb_val_bytes(alloc, d, n);
    break;
  }
  case BB_VAL_TENSOR: rc = decode_tensor(r, alloc, out); break;
  case BB_VAL_U64:
  case BB_VAL_TIMESTAMP:
  case BB_VAL_COMMAND_ID:
  case BB_VAL_WIRE_REQ_ID:
  case BB_VAL_CORRELATION: {
    uint64_t x = 0;
    if ((rc = get_u64(r, &x))) return rc;
    *out = bb_val_u64(alloc, (bb_val_kind)kind, x);
    break;
  }
  case BB_VAL_PEER: {
    bb_peer_id p;
    if ((rc = get_peer(r, &p))) return rc;
    *out = bb_val_peer(alloc, &p);
    break;
  }
  case BB_VAL_PEERS: {
    size_t n = 0;
    if ((rc = get_count(r, 8, &n))) return rc;
    bb_peer_id *peers = n ? bbi_mem_alloc(alloc, n * sizeof *peers) : NULL;
    if (n && !peers) return bb_error_set(r->err, BB_ERR_NOMEM, "out of memory for %zu peers", n);
    for (size_t i = 0; i < n && !rc; i++) rc = get_peer(r, &peers[i]);
    if (!rc) *out = bb_val_peers(alloc, peers, n);
    bbi_mem_free(alloc, peers);
    if (rc) return rc;
    break;
  }
  case BB_VAL_ADDRESS: {
    bb_address a;
    if ((rc = get_address(r, &a))) return rc;
    *out = bb_val_address(alloc, &a);
    break;
  }
  case BB_VAL_ADDRESSES: {
    size_t n = 0;
    if ((rc = get_count(r, 8, &n))) return rc;
    bb_address *list = n ? bbi_mem_alloc(alloc, n * sizeof *list) : NULL;
    if (n && !list) return bb_error_set(r->err, BB_ERR_NOMEM, "out of memory for %zu addresses", n);
    for (size_t i = 0; i < n && !rc; i++) rc = get_address(r, &list[i]);
    if (!rc) *out = bb_val_addresses(alloc, list, n);
    bbi_mem_free(alloc, list);
    if (rc) return rc;
    break;
  }
  case BB_VAL_COMPOSITE: rc = decode_composite(r, alloc, depth, out); break;
  case BB_VAL_KIND_COUNT: break;
  }
  if (rc) return rc;
  if (!*out) return bb_error_set(r->err, BB_ERR_NOMEM, "out of memory decoding a %s value", r->what);
  if (bb_le_left(&r->in)) {
    size_t extra = bb_le_left(&r->in);
    bb_val_release(*out);
    *out = NULL;
    return bb_error_set(r->err, BB_ERR_MALFORMED, "%s payload has %zu trailing bytes", r->what, extra);
  }
  return 0;
}

int bb_val_decode(uint64_t type_hash, const uint8_t *data, size_t len, const bb_allocator *alloc, bb_val **out,
                  bb_error *err) {
  *out = NULL;
  if (!alloc) alloc = bb_default_allocator();
  int kind = bb_val_kind_of_hash(type_hash);
  if (kind < 0) return bb_error_set(err, BB_ERR_NOT_FOUND, "unknown type hash 0x%016" PRIx64, type_hash);
  if (!data) {
    if (len) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "value payload of %zu bytes at NULL", len);
    data = (const uint8_t *)""; /* an empty payload may come as NULL */
  }
  reader r = {bb_le_reader_of(data, len), bb_val_kind_name(kind), err};
  return decode_kind(kind, &r, alloc, 0, out);
}

const char *bb_val_describe(const bb_val *v, char *buf, size_t size) {
  char inner[128];
  switch ((bb_val_kind)v->kind) {
  case BB_VAL_TENSOR: snprintf(buf, size, "Tensor %s", bb_tensor_describe(v->as.tensor, inner, sizeof inner)); break;
  case BB_VAL_BYTES:
  case BB_VAL_PEERS:
  case BB_VAL_ADDRESSES:
  case BB_VAL_COMPOSITE: snprintf(buf, size, "%s[%zu]", bb_val_kind_name((int)v->kind), v->n); break;
  case BB_VAL_U64:
  case BB_VAL_TIMESTAMP:
  case BB_VAL_COMMAND_ID:
  case BB_VAL_WIRE_REQ_ID:
  case BB_VAL_CORRELATION:
    snprintf(buf, size, "%s %" PRIu64, bb_val_kind_name((int)v->kind), v->as.u64);
    break;
  case BB_VAL_PEER:
    bb_peer_id_to_text(&v->as.peers[0], inner, sizeof inner);
    snprintf(buf, size, "Peer %s", inner);
    break;
  default: snprintf(buf, size, "%s", bb_val_kind_name((int)v->kind)); break;
  }
  return buf;
}
