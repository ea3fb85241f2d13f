/* bytesandbrains — runtime values: what flows between ops inside a node and, encoded,
 * between peers in an envelope's slot fills.
 *
 * Example:
 *
 *   int64_t dims[1] = {2};
 *   bb_tensor *t = bb_tensor_new_zeros(NULL, BB_DTYPE_FLOAT, 1, dims);
 *   bb_val *v = t ? bb_val_tensor(NULL, t) : NULL;  // takes a reference of its own
 *   bb_tensor_release(t);
 *   uint8_t *payload;
 *   size_t len;
 *   bb_error err;
 *   bb_val *back = NULL;
 *   if (v && bb_val_encode(v, NULL, &payload, &len, &err) == 0) {  // what a slot fill carries
 *     bb_val_decode(bb_val_kind_hash(BB_VAL_TENSOR), payload, len, NULL, &back, &err);
 *     bb_buffer_free(NULL, payload);
 *   }
 *   char text[64];
 *   if (back) printf("%s\n", bb_val_describe(back, text, sizeof text));  // Tensor float32[2]
 *   bool tensor = back && bb_val_kind_of(back) == BB_VAL_TENSOR && bb_val_as_tensor(back)->numel == 2;
 *   bb_val_release(back);
 *   bb_val_release(v);
 *   if (!tensor) return 1;
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

/* A value is opaque: its layout belongs to the value module (src/value), and everyone
 * else reads it through the accessors below, so the layout can change without touching
 * the code that reads values. */
typedef struct bb_val bb_val;

/* Constructors return NULL when out of memory. alloc NULL means the default allocator.
 * bb_val_bytes copies; bb_val_tensor and bb_val_composite take new references to what
 * they are given (the caller keeps its own). */
BB_API bb_val *bb_val_trigger(const bb_allocator *alloc);
BB_API bb_val *bb_val_bytes(const bb_allocator *alloc, const void *data, size_t len);
BB_API bb_val *bb_val_u64(const bb_allocator *alloc, bb_val_kind kind, uint64_t value);
BB_API bb_val *bb_val_tensor(const bb_allocator *alloc, bb_tensor *t);
BB_API bb_val *bb_val_peer(const bb_allocator *alloc, const bb_peer_id *peer);
BB_API bb_val *bb_val_peers(const bb_allocator *alloc, const bb_peer_id *peers, size_t n);
BB_API bb_val *bb_val_address(const bb_allocator *alloc, const bb_address *address);
BB_API bb_val *bb_val_addresses(const bb_allocator *alloc, const bb_address *addresses, size_t n);
BB_API bb_val *bb_val_composite(const bb_allocator *alloc, bb_val *const *children, size_t n);

BB_API bb_val *bb_val_retain(bb_val *v);
BB_API void bb_val_release(bb_val *v); /* NULL is fine */

/* "Trigger", "Bytes", "Tensor", ... */
BB_API const char *bb_val_kind_name(int kind);
/* The stable carrier name of a kind (the string its type_hash is computed from). */
BB_API const char *bb_val_carrier_name(int kind);
/* bb_type_hash(bb_val_carrier_name(kind)). */
BB_API uint64_t bb_val_kind_hash(int kind);
/* The kind whose carrier hash this is; -1 for an unknown hash. */
BB_API int bb_val_kind_of_hash(uint64_t type_hash);

/* ---- reading a value ------------------------------------------------------------------
 * Each accessor takes NULL or a value of any kind, and gives the stated default when the
 * value does not hold what is asked for. Pointers are borrowed: they live as long as the
 * value (retain the value, or the tensor, to keep them). */

/* The kind; BB_VAL_KIND_COUNT for NULL. */
BB_API bb_val_kind bb_val_kind_of(const bb_val *v);
/* BYTES: the length; PEERS, ADDRESSES, COMPOSITE: the number of items; PEER, ADDRESS: 1;
 * every other kind and NULL: 0. */
BB_API size_t bb_val_count(const bb_val *v);
/* True for the kinds that hold one u64 (U64 ... CORRELATION); false for NULL. */
BB_API bool bb_val_is_u64(const bb_val *v);
/* The u64 of those kinds; 0 for any other kind. */
BB_API uint64_t bb_val_as_u64(const bb_val *v);
/* TENSOR: the tensor; NULL otherwise. */
BB_API bb_tensor *bb_val_as_tensor(const bb_val *v);
/* BYTES: the bytes (bb_val_count of them); NULL otherwise. */
BB_API const uint8_t *bb_val_as_bytes(const bb_val *v);
/* PEER, PEERS: the peer ids (bb_val_count of them); NULL otherwise. */
BB_API const bb_peer_id *bb_val_as_peers(const bb_val *v);
/* ADDRESS, ADDRESSES: the addresses (bb_val_count of them); NULL otherwise. */
BB_API const bb_address *bb_val_as_addresses(const bb_val *v);
/* COMPOSITE: the children (bb_val_count of them); NULL otherwise. */
BB_API bb_val *const *bb_val_children(const bb_val *v);
/* COMPOSITE: child i; NULL past the last child and for any other kind. */
BB_API bb_val *bb_val_child(const bb_val *v, size_t i);

/* True when v can be a value of the type (a denotation, bb/artifact.h): of the kind
 * bb_type_value_kind names — a Peer and Peers, an Address and Addresses standing for
 * each other — with the element type a tensor or scalar type names. The abstract type
 * and types of kind "Any" take every value. A composite's parts are not looked into:
 * the ops that read them check them. */
BB_API bool bb_val_fits_type(const bb_val *v, const char *type);

/* ---- the wire form ----------------------------------------------------------------- */

/* Exact byte length of v's payload (0 for a trigger). */
BB_API size_t bb_val_encoded_size(const bb_val *v);
/* Writes the payload into out (which must hold bb_val_encoded_size bytes); returns the
 * number written. */
BB_API size_t bb_val_encode_into(const bb_val *v, uint8_t *out);
/* The payload in a new buffer (free with bb_buffer_free(alloc, ...)). */
BB_API int bb_val_encode(const bb_val *v, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err);

/* Decodes a payload of a known carrier. Bad bytes (truncated, trailing, lengths past the
 * end, a tensor whose data does not match its shape, nesting deeper than 16 bundles) are
 * BB_ERR_MALFORMED with the reason; an unknown hash is BB_ERR_NOT_FOUND. The result owns
 * its memory (tensor data is copied once, straight from `data`). */
BB_API int bb_val_decode(uint64_t type_hash, const uint8_t *data, size_t len, const bb_allocator *alloc, bb_val **out,
                         bb_error *err);

/* Short human-readable text ("Tensor float32[2,3]", "Peers[3]", "U64 42", ...). */
BB_API const char *bb_val_describe(const bb_val *v, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* BB_VALUE_H */
