/* bytesandbrains — runtime values: what flows between ops inside a node and, encoded,
 * between peers in an envelope's slot fills.
 *
 * A bb_val is immutable and reference counted, so handing a value to several consumers
 * (or keeping it in a snapshot) costs a retain, never a copy. Every kind has a stable
 * carrier name whose FNV-1a-64 is the SlotFill.type_hash (bb_type_hash) and a byte
 * layout documented in docs/WIRE.md (bincode layouts, plus tensors). */
#ifndef BB_VALUE_H
#define BB_VALUE_H

#include "bb/artifact.h"
#include "bb/common.h"
#include "bb/tensor.h"
#include "bb/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bb_val_kind {
  BB_VAL_TRIGGER = 0,  /* no data: "this happened" */
  BB_VAL_BYTES,        /* opaque bytes */
  BB_VAL_TENSOR,       /* a bb_tensor */
  BB_VAL_U64,          /* a plain counter or id */
  BB_VAL_TIMESTAMP,    /* nanoseconds on the host's clock */
  BB_VAL_COMMAND_ID,   /* an asynchronous command */
  BB_VAL_WIRE_REQ_ID,  /* a wire correlation id */
  BB_VAL_CORRELATION,  /* a correlation token */
  BB_VAL_PEER,         /* one peer id */
  BB_VAL_PEERS,        /* a list of peer ids */
  BB_VAL_ADDRESS,      /* one address */
  BB_VAL_ADDRESSES,    /* a list of addresses */
  BB_VAL_COMPOSITE,    /* an ordered bundle of values */
  BB_VAL_KIND_COUNT
} bb_val_kind;

typedef struct bb_val bb_val;

/* Fields are read-only for everyone but value.c; use the constructors. */
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

/* Constructors return NULL when out of memory. alloc NULL means the default allocator.
 * bb_val_bytes copies; bb_val_tensor and bb_val_composite take new references to what
 * they are given (the caller keeps its own). */
bb_val *bb_val_trigger(const bb_allocator *alloc);
bb_val *bb_val_bytes(const bb_allocator *alloc, const void *data, size_t len);
bb_val *bb_val_u64(const bb_allocator *alloc, bb_val_kind kind, uint64_t value);
bb_val *bb_val_tensor(const bb_allocator *alloc, bb_tensor *t);
bb_val *bb_val_peer(const bb_allocator *alloc, const bb_peer_id *peer);
bb_val *bb_val_peers(const bb_allocator *alloc, const bb_peer_id *peers, size_t n);
bb_val *bb_val_address(const bb_allocator *alloc, const bb_address *address);
bb_val *bb_val_addresses(const bb_allocator *alloc, const bb_address *addresses, size_t n);
bb_val *bb_val_composite(const bb_allocator *alloc, bb_val *const *children, size_t n);

bb_val *bb_val_retain(bb_val *v);
void bb_val_release(bb_val *v); /* NULL is fine */

/* "Trigger", "Bytes", "Tensor", ... */
const char *bb_val_kind_name(int kind);
/* The stable carrier name of a kind (the string its type_hash is computed from). */
const char *bb_val_carrier_name(int kind);
/* bb_type_hash(bb_val_carrier_name(kind)). */
uint64_t bb_val_kind_hash(int kind);
/* The kind whose carrier hash this is; -1 for an unknown hash. */
int bb_val_kind_of_hash(uint64_t type_hash);

/* True for the kinds that hold one u64 (U64 ... CORRELATION). */
bool bb_val_is_u64(const bb_val *v);

/* True when v can be a value of the type (a denotation, bb/artifact.h): of the kind
 * bb_type_value_kind names — a Peer and Peers, an Address and Addresses standing for
 * each other — with the element type a tensor or scalar type names. The abstract type
 * and types of kind "Any" take every value. A composite's parts are not looked into:
 * the ops that read them check them. */
bool bb_val_fits_type(const bb_val *v, const char *type);

/* ---- the wire form ----------------------------------------------------------------- */

/* Exact byte length of v's payload (0 for a trigger). */
size_t bb_val_encoded_size(const bb_val *v);
/* Writes the payload into out (which must hold bb_val_encoded_size bytes); returns the
 * number written. */
size_t bb_val_encode_into(const bb_val *v, uint8_t *out);
/* The payload in a new buffer (free with bb_buffer_free(alloc, ...)). */
int bb_val_encode(const bb_val *v, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err);

/* Decodes a payload of a known carrier. Bad bytes (truncated, trailing, lengths past the
 * end, a tensor whose data does not match its shape, nesting deeper than 16 bundles) are
 * BB_ERR_MALFORMED with the reason; an unknown hash is BB_ERR_NOT_FOUND. The result owns
 * its memory (tensor data is copied once, straight from `data`). */
int bb_val_decode(uint64_t type_hash, const uint8_t *data, size_t len, const bb_allocator *alloc, bb_val **out,
                  bb_error *err);

/* Short human-readable text ("Tensor float32[2,3]", "Peers[3]", "U64 42", ...). */
const char *bb_val_describe(const bb_val *v, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* BB_VALUE_H */
