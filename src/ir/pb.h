/* Helpers around protobuf-c for the ONNX codec: a structural scan of untrusted bytes that
 * names what is wrong and where, capture and restore of the fields the IR does not model,
 * and the bridge from bb_allocator to ProtobufCAllocator. */
#ifndef BBI_IR_PB_H
#define BBI_IR_PB_H

#include <protobuf-c/protobuf-c.h>

#include "bb/ir.h"
#include "util/arena.h"

/* Checks that data is a well-formed encoding of message type `desc`, recursively for
 * known sub-messages: tags, wire types that match the schema, varints of at most 10
 * bytes, lengths inside their parent, packed arrays that parse, strings that are UTF-8
 * without NUL bytes, and nesting no deeper than max_depth. On failure fills err with the
 * message path (e.g. "ModelProto.graph.node[3].attribute[0].t") and byte offset. */
int bbi_pb_scan(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
               uint32_t max_depth, bb_error *err);

/* Encodes the fields of msg that the IR does not model: its unknown fields and the known
 * fields numbered in keep[] (all other known fields are the IR's). The result goes into
 * the arena; an empty result is {NULL, 0}. */
int bbi_pb_capture_extra(const ProtobufCMessage *msg, const uint32_t *keep, size_t n_keep,
                        bb_arena *arena, bb_bytes *out);

/* Attaches previously captured extra bytes to msg as unknown fields, so packing msg writes
 * them back. The field array is allocated from the arena; data points into extra. */
int bbi_pb_restore_extra(ProtobufCMessage *msg, bb_bytes extra, bb_arena *arena, bb_error *err);

/* A ProtobufCAllocator that allocates through a bb_allocator. */
ProtobufCAllocator bbi_pb_allocator(const bb_allocator *alloc);

#endif
