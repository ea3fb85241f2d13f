/* bytesandbrains — the in-memory IR: ONNX models, functions, graphs, nodes, attributes,
 * value infos, types and tensors as plain data, with an ONNX ModelProto codec.
 *
 * Example:
 *
 *   bb_model *m = bb_model_new(NULL);
 *   bb_opset_set(m, &m->opsets, "", 17);
 *   m->graph = bb_graph_new(m, "double_it");
 *   int64_t n[1] = {3};
 *   bb_vilist_add(m, &m->graph->inputs, "x", bb_type_new_tensor(m, BB_DTYPE_FLOAT, 1, n));
 *   bb_vilist_add(m, &m->graph->outputs, "y", bb_type_new_tensor(m, BB_DTYPE_FLOAT, 1, n));
 *   bb_ir_node *add = bb_ir_node_new(m, "Add", "", "twice");
 *   bb_strlist_append(m, &add->inputs, "x");
 *   bb_strlist_append(m, &add->inputs, "x");
 *   bb_strlist_append(m, &add->outputs, "y");
 *   bb_nodelist_append(m, &m->graph->nodes, add);
 *   uint8_t *bytes;
 *   size_t len;
 *   bb_error err;
 *   bb_model *back = NULL;
 *   if (bb_model_encode(m, &bytes, &len, &err) == 0) {  // ONNX ModelProto bytes
 *     bb_model_decode(bytes, len, NULL, NULL, &back, &err);
 *     bb_buffer_free(NULL, bytes);
 *   }
 *   bool same = back && bb_model_equal(m, back);
 *   bb_model_free(back);
 *   bb_model_free(m);  // and everything the model holds
 *   if (!same) return 1;
 *
 * Ownership: a bb_model owns everything reachable from it. Strings, arrays and
 * sub-objects live in the model's arena and are released together by bb_model_free;
 * nothing inside a model is freed on its own. Build and change a model only through the
 * functions below (they allocate from the right arena); reading the structs directly is
 * the intended way to walk a model.
 *
 * Bytes values (attribute strings, raw_data, ...) that the IR stores are followed by a NUL
 * not counted in their length.
 *
 * Presence: optional ONNX strings are NULL when absent; optional scalars have a has_
 * flag. Every list keeps its order, so iteration is deterministic, and encoding the same
 * model twice gives the same bytes.
 *
 * Fields the IR does not model (e.g. training_info, sparse tensors, quantization
 * annotations, fields from newer ONNX versions) are kept as encoded bytes in `extra` and
 * written back unchanged on encode. */
#ifndef BB_IR_H
#define BB_IR_H

#include <stdbool.h>
#include "bb/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- data types ---------------------------------------------------------------- */

/* ONNX TensorProto.DataType codes. */
typedef enum bb_dtype {
  BB_DTYPE_UNDEFINED = 0,
  BB_DTYPE_FLOAT = 1,
  BB_DTYPE_UINT8 = 2,
  BB_DTYPE_INT8 = 3,
  BB_DTYPE_UINT16 = 4,
  BB_DTYPE_INT16 = 5,
  BB_DTYPE_INT32 = 6,
  BB_DTYPE_INT64 = 7,
  BB_DTYPE_STRING = 8,
  BB_DTYPE_BOOL = 9,
  BB_DTYPE_FLOAT16 = 10,
  BB_DTYPE_DOUBLE = 11,
  BB_DTYPE_UINT32 = 12,
  BB_DTYPE_UINT64 = 13,
  BB_DTYPE_COMPLEX64 = 14,
  BB_DTYPE_COMPLEX128 = 15,
  BB_DTYPE_BFLOAT16 = 16
} bb_dtype;

/* Lower-case ONNX name ("float", "int64", ...), or NULL for a code this build does not know. */
BB_API const char *bb_dtype_name(int dtype);
/* Bytes per element in raw_data; 0 for UNDEFINED, STRING and unknown codes. */
BB_API size_t bb_dtype_size(int dtype);

/* ---- small containers ---------------------------------------------------------- */

typedef struct bb_kv {
  char *key;
  char *value;
  bb_bytes extra;
} bb_kv;

/* An ordered list of key/value pairs (metadata_props, external_data). Keys may repeat;
 * lookups return the first match. */
typedef struct bb_kvlist {
  bb_kv *items;
  size_t len, cap;
} bb_kvlist;

typedef struct bb_strlist {
  char **items;
  size_t len, cap;
} bb_strlist;

typedef struct bb_opset {
  char *domain; /* NULL or "" is the default domain ai.onnx */
  bool has_version;
  int64_t version;
  bb_bytes extra;
} bb_opset;

typedef struct bb_opsetlist {
  bb_opset *items;
  size_t len, cap;
} bb_opsetlist;

/* ---- types --------------------------------------------------------------------- */

typedef enum bb_dim_kind { BB_DIM_UNKNOWN = 0, BB_DIM_VALUE = 1, BB_DIM_PARAM = 2 } bb_dim_kind;

typedef struct bb_dim {
  bb_dim_kind kind;
  int64_t value; /* BB_DIM_VALUE */
  char *param;   /* BB_DIM_PARAM */
  char *denotation;
  bb_bytes extra;
} bb_dim;

typedef struct bb_shape {
  bb_dim *dims;
  size_t rank, cap;
  bb_bytes extra;
} bb_shape;

typedef enum bb_type_kind {
  BB_TYPE_NONE = 0, /* only a denotation (or nothing) is set */
  BB_TYPE_TENSOR,
  BB_TYPE_SEQUENCE,
  BB_TYPE_MAP,
  BB_TYPE_OPTIONAL,
  BB_TYPE_SPARSE_TENSOR,
  BB_TYPE_OPAQUE
} bb_type_kind;

/* ONNX TypeProto. */
typedef struct bb_type bb_type;
struct bb_type {
  bb_type_kind kind;
  char *denotation;
  /* TENSOR, SPARSE_TENSOR: element type; MAP: key type. */
  bool has_elem_type;
  int32_t elem_type;
  /* TENSOR, SPARSE_TENSOR: NULL when the shape is unknown; rank 0 is a scalar. */
  bb_shape *shape;
  /* SEQUENCE, OPTIONAL: element type; MAP: value type. May be NULL. */
  bb_type *inner;
  char *opaque_domain, *opaque_name; /* OPAQUE */
  bb_bytes extra;       /* unmodelled fields of the TypeProto */
  bb_bytes inner_extra; /* unmodelled fields of the Tensor/Sequence/Map/... sub-message */
};

/* ---- tensors ------------------------------------------------------------------- */

/* ONNX TensorProto: data either in raw_data (little-endian) or in the typed field the
 * data type maps to. Both storage forms are kept exactly as decoded. */
typedef struct bb_tensor_proto {
  char *name;
  char *doc_string;
  bool has_data_type;
  int32_t data_type;
  int64_t *dims;
  size_t n_dims;
  bool has_raw_data;
  bb_bytes raw_data;
  float *float_data;
  size_t n_float_data;
  int32_t *int32_data;
  size_t n_int32_data;
  bb_bytes *string_data;
  size_t n_string_data;
  int64_t *int64_data;
  size_t n_int64_data;
  double *double_data;
  size_t n_double_data;
  uint64_t *uint64_data;
  size_t n_uint64_data;
  bool has_data_location;
  int32_t data_location; /* 0 DEFAULT, 1 EXTERNAL */
  bb_kvlist external_data;
  bb_kvlist metadata;
  bb_bytes extra;
} bb_tensor_proto;

/* Number of elements the dims describe (1 for rank 0). -1 when the product overflows or
 * a dim is negative. */
BB_API int64_t bb_tensor_proto_numel(const bb_tensor_proto *t);

/* ---- attributes ---------------------------------------------------------------- */

/* ONNX AttributeProto.AttributeType. */
typedef enum bb_attr_type {
  BB_ATTR_UNDEFINED = 0,
  BB_ATTR_FLOAT = 1,
  BB_ATTR_INT = 2,
  BB_ATTR_STRING = 3,
  BB_ATTR_TENSOR = 4,
  BB_ATTR_GRAPH = 5,
  BB_ATTR_FLOATS = 6,
  BB_ATTR_INTS = 7,
  BB_ATTR_STRINGS = 8,
  BB_ATTR_TENSORS = 9,
  BB_ATTR_GRAPHS = 10,
  BB_ATTR_SPARSE_TENSOR = 11,
  BB_ATTR_SPARSE_TENSORS = 12,
  BB_ATTR_TYPE_PROTO = 13,
  BB_ATTR_TYPE_PROTOS = 14
} bb_attr_type;

/* Upper-case ONNX name ("INT", "FLOATS", ...), or NULL for an unknown code. */
BB_API const char *bb_attr_type_name(int type);

typedef struct bb_graph bb_graph;

/* ONNX AttributeProto. All value fields are kept as decoded, whatever `type` says;
 * sparse tensors are kept in `extra`. */
typedef struct bb_attr {
  char *name;
  char *ref_attr_name;
  char *doc_string;
  bool has_type;
  int32_t type; /* bb_attr_type */
  bool has_f, has_i, has_s;
  float f;
  int64_t i;
  bb_bytes s;
  bb_tensor_proto *t;
  bb_graph *g;
  bb_type *tp;
  float *floats;
  size_t n_floats;
  int64_t *ints;
  size_t n_ints;
  bb_bytes *strings;
  size_t n_strings;
  bb_tensor_proto **tensors;
  size_t n_tensors;
  bb_graph **graphs;
  size_t n_graphs;
  bb_type **type_protos;
  size_t n_type_protos;
  bb_bytes extra;
} bb_attr;

typedef struct bb_attrlist {
  bb_attr **items;
  size_t len, cap;
} bb_attrlist;

/* ---- value infos, nodes, graphs, functions, models ----------------------------- */

typedef struct bb_value_info {
  char *name;
  bb_type *type; /* NULL when absent */
  char *doc_string;
  bb_kvlist metadata;
  bb_bytes extra;
} bb_value_info;

typedef struct bb_vilist {
  bb_value_info **items;
  size_t len, cap;
} bb_vilist;

typedef struct bb_ir_node {
  char *name;
  char *op_type;
  char *domain;
  char *overload;
  char *doc_string;
  bb_strlist inputs;  /* "" marks an omitted optional input */
  bb_strlist outputs; /* "" marks an omitted optional output */
  bb_attrlist attrs;
  bb_kvlist metadata;
  bb_bytes extra;
} bb_ir_node;

typedef struct bb_nodelist {
  bb_ir_node **items;
  size_t len, cap;
} bb_nodelist;

typedef struct bb_tensorlist {
  bb_tensor_proto **items;
  size_t len, cap;
} bb_tensorlist;

/* ONNX GraphProto (the model's main graph, or a subgraph attribute). */
struct bb_graph {
  char *name;
  char *doc_string;
  bb_nodelist nodes;
  bb_tensorlist initializers;
  bb_vilist inputs;
  bb_vilist outputs;
  bb_vilist value_infos;
  bb_kvlist metadata;
  bb_bytes extra;
};

/* ONNX FunctionProto. */
typedef struct bb_function {
  char *name;
  char *domain;
  char *overload;
  char *doc_string;
  bb_strlist inputs;
  bb_strlist outputs;
  bb_strlist attr_names;  /* attributes without defaults */
  bb_attrlist attr_protos; /* attributes with defaults */
  bb_nodelist nodes;
  bb_opsetlist opsets;
  bb_vilist value_infos;
  bb_kvlist metadata;
  bb_bytes extra;
} bb_function;

typedef struct bb_functionlist {
  bb_function **items;
  size_t len, cap;
} bb_functionlist;

typedef struct bb_arena bb_arena;

/* ONNX ModelProto, and the owner of everything inside it. */
typedef struct bb_model {
  bool has_ir_version;
  int64_t ir_version;
  char *producer_name;
  char *producer_version;
  char *domain;
  bool has_model_version;
  int64_t model_version;
  char *doc_string;
  bb_graph *graph; /* NULL when absent */
  bb_opsetlist opsets;
  bb_kvlist metadata;
  bb_functionlist functions;
  bb_bytes extra;
  bb_arena *arena;
} bb_model;

/* The IR version and default-domain opset bytesandbrains writes into models it makes:
 * the newest that the ONNX checker on the supported platforms accepts. */
#define BB_ONNX_IR_VERSION 8
#define BB_ONNX_OPSET_VERSION 17

/* ---- lifetime and codec -------------------------------------------------------- */

/* A new, empty model (no fields set). NULL when out of memory. */
BB_API bb_model *bb_model_new(const bb_allocator *alloc);
BB_API void bb_model_free(bb_model *model);

/* Limits applied while decoding untrusted bytes. Zero fields take the defaults.
 * Versioned by struct_size, which the caller sets to sizeof(bb_decode_limits): fields its
 * struct_size does not cover take the defaults; 0 or a struct_size larger than this
 * library knows is BB_ERR_INVALID_ARGUMENT. */
typedef struct bb_decode_limits {
  size_t struct_size; /* sizeof(bb_decode_limits) */
  size_t max_bytes;   /* default 2 GiB - 1 (protobuf's own limit) */
  uint32_t max_depth; /* nested messages, default 64 */
} bb_decode_limits;

/* Decodes ONNX ModelProto bytes. Bad input is reported, never trusted: on failure *out
 * is NULL and err names what was wrong and where (message path and byte offset).
 * `limits` may be NULL. */
BB_API int bb_model_decode(const uint8_t *data, size_t len, const bb_allocator *alloc,
                           const bb_decode_limits *limits, bb_model **out, bb_error *err);

/* Encodes a model as ONNX ModelProto bytes into a buffer allocated with the model's
 * allocator; release it with bb_buffer_free(NULL or that allocator, *out). */
BB_API int bb_model_encode(const bb_model *model, uint8_t **out, size_t *out_len, bb_error *err);

/* Standalone TensorProto bytes (e.g. the input_N.pb / output_N.pb files of ONNX tests):
 * decode into m's arena (checked like bb_model_decode), and encode into a buffer freed
 * with bb_buffer_free(NULL, *out). */
BB_API int bb_tensor_proto_decode(bb_model *m, const uint8_t *data, size_t len, bb_tensor_proto **out, bb_error *err);
BB_API int bb_tensor_proto_encode(const bb_tensor_proto *t, uint8_t **out, size_t *out_len, bb_error *err);

/* Deep structural equality of two models (every modelled field, presence flags and the
 * preserved extra bytes). Floats compare by bit pattern, so NaNs round-trip. */
BB_API bool bb_model_equal(const bb_model *a, const bb_model *b);

/* A readable summary of a model (IR and opset versions, producer, metadata, the main
 * graph and every function with inputs, outputs and node counts by domain and op type),
 * as text or, with json = true, as a JSON object. The buffer is NUL-terminated, made with
 * the model's allocator; release it with bb_buffer_free. */
BB_API int bb_model_summary(const bb_model *model, bool json, char **out, size_t *out_len,
                            bb_error *err);

/* ---- building and changing ----------------------------------------------------- */

/* Copies a string / bytes into the model's arena. NULL in gives NULL out. */
BB_API char *bb_model_strdup(bb_model *m, const char *s);

/* Sets one of the model's string fields (e.g. &m->producer_name) to a copy of s. */
BB_API int bb_model_set_string(bb_model *m, char **field, const char *s);

/* Ordered key/value metadata. get returns the first match's value or NULL. upsert
 * replaces the first match's value (removing later duplicates) or appends. append always
 * appends. remove deletes every entry with that key and returns how many it removed. */
BB_API const char *bb_kv_get(const bb_kvlist *list, const char *key);
BB_API int bb_kv_upsert(bb_model *m, bb_kvlist *list, const char *key, const char *value);
BB_API int bb_kv_append(bb_model *m, bb_kvlist *list, const char *key, const char *value);
BB_API size_t bb_kv_remove(bb_kvlist *list, const char *key);

/* String lists (node inputs/outputs, function formals). */
BB_API int bb_strlist_append(bb_model *m, bb_strlist *list, const char *s);
BB_API int bb_strlist_insert(bb_model *m, bb_strlist *list, size_t index, const char *s);
BB_API int bb_strlist_remove(bb_strlist *list, size_t index);
/* Index of the first entry equal to s, or -1. */
BB_API long bb_strlist_find(const bb_strlist *list, const char *s);

/* Opset imports: the version for a domain ("" and "ai.onnx" are the same domain), and an
 * upsert that sets it. get returns -1 when the domain is not imported. */
BB_API int64_t bb_opset_get(const bb_opsetlist *list, const char *domain);
BB_API int bb_opset_set(bb_model *m, bb_opsetlist *list, const char *domain, int64_t version);

/* Types. */
BB_API bb_type *bb_type_new(bb_model *m, bb_type_kind kind);
/* A tensor type of `elem_type`; rank < 0 leaves the shape unknown, otherwise dims[i] < 0
 * is an unknown dimension (dims may be NULL for all-unknown). */
BB_API bb_type *bb_type_new_tensor(bb_model *m, int32_t elem_type, int rank, const int64_t *dims);
/* Appends a dimension to a tensor type's shape (creating the shape). param may be NULL. */
BB_API int bb_type_add_dim(bb_model *m, bb_type *type, int64_t value, const char *param);

/* Value infos. add appends a new value info with that name; find returns the first with
 * that name or NULL. */
BB_API bb_value_info *bb_vilist_add(bb_model *m, bb_vilist *list, const char *name, bb_type *type);
BB_API bb_value_info *bb_vilist_find(const bb_vilist *list, const char *name);
BB_API int bb_vilist_remove(bb_vilist *list, size_t index);

/* Tensors. A new tensor with name, type and dims and no data. */
BB_API bb_tensor_proto *bb_tensor_proto_new(bb_model *m, const char *name, int32_t data_type,
                                            size_t n_dims, const int64_t *dims);
/* Sets raw_data to a copy of len bytes (little-endian elements). */
BB_API int bb_tensor_proto_set_raw(bb_model *m, bb_tensor_proto *t, const void *data, size_t len);
BB_API int bb_tensorlist_append(bb_model *m, bb_tensorlist *list, bb_tensor_proto *t);

/* Attributes. find returns the first attribute with that name or NULL. The setters upsert:
 * they replace an attribute of the same name (keeping its position) or append one. */
BB_API bb_attr *bb_attr_find(const bb_attrlist *list, const char *name);
BB_API bb_attr *bb_attr_set_float(bb_model *m, bb_attrlist *list, const char *name, float v);
BB_API bb_attr *bb_attr_set_int(bb_model *m, bb_attrlist *list, const char *name, int64_t v);
BB_API bb_attr *bb_attr_set_string(bb_model *m, bb_attrlist *list, const char *name, const char *v);
BB_API bb_attr *bb_attr_set_bytes(bb_model *m, bb_attrlist *list, const char *name, const void *v,
                                  size_t len);
BB_API bb_attr *bb_attr_set_floats(bb_model *m, bb_attrlist *list, const char *name, const float *v,
                                   size_t n);
BB_API bb_attr *bb_attr_set_ints(bb_model *m, bb_attrlist *list, const char *name, const int64_t *v,
                                 size_t n);
BB_API bb_attr *bb_attr_set_strings(bb_model *m, bb_attrlist *list, const char *name,
                                    const char *const *v, size_t n);
/* tensor, graph and type are taken as they are (they must belong to m). */
BB_API bb_attr *bb_attr_set_tensor(bb_model *m, bb_attrlist *list, const char *name, bb_tensor_proto *t);
BB_API bb_attr *bb_attr_set_graph(bb_model *m, bb_attrlist *list, const char *name, bb_graph *g);
BB_API bb_attr *bb_attr_set_type(bb_model *m, bb_attrlist *list, const char *name, bb_type *tp);
/* Removes every attribute with that name; returns how many. */
BB_API size_t bb_attr_remove(bb_attrlist *list, const char *name);
/* Typed reads with a default: the value when the attribute exists with that type. */
BB_API int64_t bb_attr_get_int(const bb_attrlist *list, const char *name, int64_t dflt);
BB_API float bb_attr_get_float(const bb_attrlist *list, const char *name, float dflt);
/* A STRING attribute's value as a C string; dflt when it is missing, not a STRING, or
 * holds a NUL byte. */
BB_API const char *bb_attr_get_string(const bb_attrlist *list, const char *name, const char *dflt);

/* Nodes. new makes a node (not in any list); insert places it at index (== len appends). */
BB_API bb_ir_node *bb_ir_node_new(bb_model *m, const char *op_type, const char *domain, const char *name);
BB_API int bb_nodelist_insert(bb_model *m, bb_nodelist *list, size_t index, bb_ir_node *node);
BB_API int bb_nodelist_append(bb_model *m, bb_nodelist *list, bb_ir_node *node);
/* Removes the node at index from the list (its memory stays with the model). */
BB_API int bb_nodelist_remove(bb_nodelist *list, size_t index);
/* Index of the node in the list, or -1. */
BB_API long bb_nodelist_index(const bb_nodelist *list, const bb_ir_node *node);
/* First node that produces `value`, or NULL. */
BB_API bb_ir_node *bb_nodelist_producer(const bb_nodelist *list, const char *value);

/* Graphs and functions. */
BB_API bb_graph *bb_graph_new(bb_model *m, const char *name);
BB_API bb_function *bb_function_new(bb_model *m, const char *name, const char *domain);
BB_API int bb_model_add_function(bb_model *m, bb_function *f);
/* First function with that domain (NULL matches "") and name, any overload; or NULL. */
BB_API bb_function *bb_model_find_function(const bb_model *m, const char *domain, const char *name);

/* Renames every use and definition of a value inside a graph or function: node inputs
 * and outputs, formals / graph inputs and outputs, value infos, initializers, and
 * references from subgraph attributes that do not shadow the name. Returns how many
 * places changed (0 when the value does not occur), or a negative error code. */
BB_API long bb_graph_rename_value(bb_model *m, bb_graph *g, const char *from, const char *to);
BB_API long bb_function_rename_value(bb_model *m, bb_function *f, const char *from, const char *to);

#ifdef __cplusplus
}
#endif
#endif /* BB_IR_H */
