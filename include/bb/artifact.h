/* bytesandbrains — the vocabulary recorded models and compiled artifacts are written in,
 * shared by the DSL, the compiler, the runtime, the components, bb.wasm and the bb tool:
 * the roles, the domains, the value types, the metadata keys and attribute names, the
 * reserved name parts, and the types a component describes itself to the compiler with.
 *
 * Every name is spelled once, by a macro below, and listed once in the vocabulary table
 * (src/ir/artifact.c) with what it means: bb_vocab_at() walks it, `bb vocab` prints it and
 * docs/IR.md documents every entry. A name that is not here is not part of the format.
 *
 * Keys and names are matched byte for byte. Keys marked "prefix" in the table continue
 * (ai.bytesandbrains.binding.<partition>.<slot>); flags are stamped with the value "true". */
#ifndef BB_ARTIFACT_H
#define BB_ARTIFACT_H

#include <stdbool.h>
#include "bb/common.h"
#include "bb/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- roles ----------------------------------------------------------------------- */

/* The roles a component can play; a slot of a Module has one. */
typedef enum bb_role {
  BB_ROLE_BACKEND = 1,
  BB_ROLE_MODEL,
  BB_ROLE_INDEX,
  BB_ROLE_AGGREGATOR,
  BB_ROLE_CODEC,
  BB_ROLE_DATA_SOURCE,
  BB_ROLE_PEER_SELECTOR,
  BB_ROLE_PROTOCOL
} bb_role;

#define BB_ROLE_FIRST BB_ROLE_BACKEND
#define BB_ROLE_LAST BB_ROLE_PROTOCOL

/* "Model", "DataSource", ...; NULL for an unknown role. */
BB_API const char *bb_role_name(bb_role role);
/* The required_trait the role's nodes carry ("ModelRuntime", ...); NULL if unknown. */
BB_API const char *bb_role_trait(bb_role role);
/* The domain the role's ops are recorded in: BB_DOMAIN_ONNX ("") for Backend,
 * ai.bytesandbrains.role.<role> for the others; NULL for Protocol (every protocol has a
 * domain of its own) and unknown roles. */
BB_API const char *bb_role_domain(bb_role role);
/* The storage port whose declared type types the role's op outputs ("tensor" for Model
 * and Backend, "vector" for Index, "element" for Aggregator, "sample" for DataSource);
 * NULL for Codec (each node names its port, BB_KEY_CODEC_PORT), PeerSelector, Protocol
 * and unknown roles. */
BB_API const char *bb_role_storage_port(bb_role role);

/* The role with that name, trait or op domain; 0 when there is none. The default ONNX
 * domain, in either spelling, is Backend's. */
BB_API bb_role bb_role_from_name(const char *name);
BB_API bb_role bb_role_from_trait(const char *trait);
BB_API bb_role bb_role_from_domain(const char *domain);

/* ---- domains ------------------------------------------------------------------------ */

#define BB_DOMAIN_FRAMEWORK "ai.bytesandbrains"
#define BB_DOMAIN_SYSCALL "ai.bytesandbrains.syscall"
#define BB_DOMAIN_WIRE "ai.bytesandbrains.wire"
#define BB_DOMAIN_MODULE "ai.bytesandbrains.module"
#define BB_DOMAIN_COMPOSITE "ai.bytesandbrains.composite"
#define BB_DOMAIN_ADDRESS_BOOK "ai.bytesandbrains.address_book"
#define BB_DOMAIN_GRAD "ai.bytesandbrains.grad"
/* A protocol's ops are recorded in a domain of its own under this prefix; the component
 * whose type speaks that domain (bb_component_type.protocol_domain) runs them. */
#define BB_DOMAIN_PROTOCOL_PREFIX "ai.bytesandbrains.protocol."
#define BB_DOMAIN_GLOBAL_REGISTRY BB_DOMAIN_PROTOCOL_PREFIX "global_registry"
#define BB_DOMAIN_ROLE_PREFIX "ai.bytesandbrains.role."
#define BB_DOMAIN_ROLE_MODEL BB_DOMAIN_ROLE_PREFIX "model"
#define BB_DOMAIN_ROLE_INDEX BB_DOMAIN_ROLE_PREFIX "index"
#define BB_DOMAIN_ROLE_AGGREGATOR BB_DOMAIN_ROLE_PREFIX "aggregator"
#define BB_DOMAIN_ROLE_CODEC BB_DOMAIN_ROLE_PREFIX "codec"
#define BB_DOMAIN_ROLE_DATA_SOURCE BB_DOMAIN_ROLE_PREFIX "data_source"
#define BB_DOMAIN_ROLE_PEER_SELECTOR BB_DOMAIN_ROLE_PREFIX "peer_selector"
/* Backend ops are recorded in the default ONNX domain "": onnx.checker has no schema
 * registered under the other spelling, "ai.onnx", which readers accept as the same domain. */
#define BB_DOMAIN_ONNX ""
#define BB_DOMAIN_ONNX_ALIAS "ai.onnx"
/* The opset version recorded for every ai.bytesandbrains.* domain. */
#define BB_FRAMEWORK_OPSET_VERSION 1

/* True for the default ONNX domain in either spelling (NULL counts as ""). */
BB_API bool bb_domain_is_onnx(const char *domain);

/* ---- value types -------------------------------------------------------------------- */

/* A value's type is its denotation, the string the IR records on
 * ValueInfoProto.type.denotation. The type tree is open: any denotation made of letters,
 * digits and "._@-" is a type. "" is the abstract type (a bound the compiler refines). */
#define BB_TYPE_ABSTRACT ""
#define BB_TYPE_BYTES "ai.bytesandbrains.opaque"
#define BB_TYPE_PEER_ID "bb.peer_id"
#define BB_TYPE_PEER_ID_VEC "bb.peer_id_vec"
#define BB_TYPE_TRIGGER "bb.trigger"
#define BB_TYPE_WIRE_REQ_ID "bb.wire_req_id"
#define BB_TYPE_MULTIADDRESS "ai.bytesandbrains.multiaddress"
#define BB_TYPE_ADDRESS_VEC "ai.bytesandbrains.address_vec"
#define BB_TYPE_COMPOSITE "ai.bytesandbrains.composite"
#define BB_TYPE_SCALAR_F32 "bb.f32"
#define BB_TYPE_SCALAR_F64 "bb.f64"
#define BB_TYPE_SCALAR_F16 "bb.f16"
#define BB_TYPE_SCALAR_U8 "bb.u8"
#define BB_TYPE_SCALAR_I32 "bb.i32"
/* Tensor denotations: the prefix, then the element type. */
#define BB_TYPE_TENSOR_PREFIX "ai.bytesandbrains.tensor."
#define BB_TYPE_TENSOR_F32 BB_TYPE_TENSOR_PREFIX "f32"
#define BB_TYPE_TENSOR_F64 BB_TYPE_TENSOR_PREFIX "f64"
#define BB_TYPE_TENSOR_F16 BB_TYPE_TENSOR_PREFIX "f16"
#define BB_TYPE_TENSOR_BF16 BB_TYPE_TENSOR_PREFIX "bf16"
#define BB_TYPE_TENSOR_U8 BB_TYPE_TENSOR_PREFIX "u8"
#define BB_TYPE_TENSOR_U16 BB_TYPE_TENSOR_PREFIX "u16"
#define BB_TYPE_TENSOR_U32 BB_TYPE_TENSOR_PREFIX "u32"
#define BB_TYPE_TENSOR_U64 BB_TYPE_TENSOR_PREFIX "u64"
#define BB_TYPE_TENSOR_I8 BB_TYPE_TENSOR_PREFIX "i8"
#define BB_TYPE_TENSOR_I16 BB_TYPE_TENSOR_PREFIX "i16"
#define BB_TYPE_TENSOR_I32 BB_TYPE_TENSOR_PREFIX "i32"
#define BB_TYPE_TENSOR_I64 BB_TYPE_TENSOR_PREFIX "i64"
#define BB_TYPE_TENSOR_BOOL BB_TYPE_TENSOR_PREFIX "bool"

/* The tensor denotation of an element type (BB_TYPE_TENSOR_F32 for BB_DTYPE_FLOAT, ...),
 * or NULL for types without one (STRING, complex). */
BB_API const char *bb_tensor_type(bb_dtype dtype);
/* The element type of a tensor denotation; BB_DTYPE_UNDEFINED for anything else,
 * including a tensor leaf this table does not know (an extension of the type tree). */
BB_API bb_dtype bb_tensor_type_dtype(const char *denotation);

/* ---- model metadata (the compiled artifact) ------------------------------------------ */

#define BB_KEY_COMPILED "ai.bytesandbrains.compiled"
/* v2: Sends name the wire their value travels on (dest_site_name.<value> = the wire's
 * name), Recvs the wire they listen to (BB_KEY_WIRE_ID), and the wire tables below
 * declare every wire's type. v1 artifacts named a Recv of their own artifact instead. */
#define BB_COMPILED_VERSION "v2"
/* binding.<partition>.<slot> = "<Role>|<concrete type>|<slot id or -1>" */
#define BB_KEY_BINDING_PREFIX "ai.bytesandbrains.binding."
/* config.<slot> = the config text bound with the slot */
#define BB_KEY_CONFIG_PREFIX "ai.bytesandbrains.config."
#define BB_KEY_IR_VERSION "ai.bytesandbrains.ir_version"
/* wire_out.<wire> / wire_in.<wire> = "<Kind>|<type>|0x<type hash>": a wire some partition
 * of the artifact sends on / receives from (see "wires" below). */
#define BB_KEY_WIRE_OUT_PREFIX "ai.bytesandbrains.wire_out."
#define BB_KEY_WIRE_IN_PREFIX "ai.bytesandbrains.wire_in."

/* ---- function metadata ---------------------------------------------------------------- */

#define BB_KEY_MODULE_PHASE "ai.bytesandbrains.module_phase"
#define BB_MODULE_PHASE_BODY "body"
#define BB_MODULE_PHASE_BOOTSTRAP "bootstrap"

/* ---- node metadata the recorder writes ---------------------------------------------------- */

#define BB_KEY_MODULE_INSTANCE "ai.bytesandbrains.module_instance"
#define BB_KEY_REQUIRED_TRAIT "ai.bytesandbrains.required_trait"
#define BB_KEY_SLOT_ID "ai.bytesandbrains.slot_id"
#define BB_KEY_SLOT_NAME "ai.bytesandbrains.slot_name"
#define BB_KEY_CODEC_PORT "ai.bytesandbrains.codec.port"
#define BB_KEY_INDEX_PORT "ai.bytesandbrains.index.port"
#define BB_KEY_PEER_CLASS "ai.bytesandbrains.peer_class"
#define BB_KEY_BOOTSTRAP_SEED "ai.bytesandbrains.bootstrap.seed"
#define BB_KEY_INPUT_SERVER_PEER "ai.bytesandbrains.input.server_peer"
/* The values of codec.port. */
#define BB_CODEC_PORT_IN "in"
#define BB_CODEC_PORT_OUT "out"
/* On the ops of a split (bb_rec_split): the values the model is cut at ('|'-joined), the
 * split's shape and which side's part the op's slot holds. */
#define BB_KEY_SPLIT_CUTS "ai.bytesandbrains.split.cuts"
#define BB_KEY_SPLIT_SHAPE "ai.bytesandbrains.split.shape"
#define BB_KEY_SPLIT_SIDE "ai.bytesandbrains.split.side"
#define BB_SPLIT_SHAPE_VANILLA "vanilla"
#define BB_SPLIT_SHAPE_U "u"
#define BB_SPLIT_SIDE_CLIENT "client"
#define BB_SPLIT_SIDE_SERVER "server"

/* ---- model metadata the trainer reads -------------------------------------------------------- */

/* The initializers that are buffers (state a model keeps, never trained): a comma-separated
 * list of their names. ONNX marks no difference between a parameter and a buffer, so an
 * exporter writes this (PyTorch: the names of module.named_buffers()). */
#define BB_KEY_BUFFERS "ai.bytesandbrains.buffers"

/* ---- node metadata the compiler writes ------------------------------------------------------ */

#define BB_KEY_HOME_CLASS "ai.bytesandbrains.home_class"
#define BB_KEY_SYNTHESIZED_FROM_SEND "ai.bytesandbrains.synthesized_from_send"
/* On both halves of a wire (a Send and every Recv that listens to it): the wire's name. */
#define BB_KEY_WIRE_ID "ai.bytesandbrains.wire.wire_id"
#define BB_KEY_CHAIN_DEPTH "ai.bytesandbrains.wire.chain_depth"
#define BB_KEY_WIRE_TRANSPORT "ai.bytesandbrains.wire_transport"
#define BB_WIRE_TRANSPORT_DATA "data"
#define BB_WIRE_TRANSPORT_TRIGGER_ONLY "trigger_only"
#define BB_KEY_BATCH_GROUP "ai.bytesandbrains.batch_group_id"
/* dest_site_name.<value> = the name of the wire a Send's value travels on */
#define BB_KEY_DEST_SITE_PREFIX "ai.bytesandbrains.dest_site_name."
#define BB_KEY_EXPANDED "ai.bytesandbrains.expanded"
#define BB_KEY_RX_CHAIN_HEAD "ai.bytesandbrains.rx_chain_head"
#define BB_KEY_RECV_SLOT_ID "ai.bytesandbrains.recv_slot_id"
/* dep.<Role> = the slot a node's concrete reaches for that dependency */
#define BB_KEY_DEP_PREFIX "ai.bytesandbrains.dep."
#define BB_KEY_CONCRETE_TYPE "ai.bytesandbrains.concrete_type"
#define BB_KEY_INSTANCE "ai.bytesandbrains.instance"
#define BB_KEY_DEADLINE_GATED "ai.bytesandbrains.deadline_gated"
#define BB_KEY_DEADLINE_SOURCE "ai.bytesandbrains.deadline_source"
/* The gates: <gate>_gated flags the guarded node, <gate>_source names it on the gate. */
#define BB_KEY_DEDUP_RX_GATED "ai.bytesandbrains.dedup_rx_gated"
#define BB_KEY_DEDUP_RX_SOURCE "ai.bytesandbrains.dedup_rx_source"
#define BB_KEY_PEER_HEALTH_RX_GATED "ai.bytesandbrains.peer_health_rx_gated"
#define BB_KEY_PEER_HEALTH_RX_SOURCE "ai.bytesandbrains.peer_health_rx_source"
#define BB_KEY_BACKOFF_RX_GATED "ai.bytesandbrains.backoff_rx_gated"
#define BB_KEY_BACKOFF_RX_SOURCE "ai.bytesandbrains.backoff_rx_source"
#define BB_KEY_PEER_HEALTH_TX_GATED "ai.bytesandbrains.peer_health_tx_gated"
#define BB_KEY_PEER_HEALTH_TX_SOURCE "ai.bytesandbrains.peer_health_tx_source"
#define BB_KEY_BACKOFF_TX_GATED "ai.bytesandbrains.backoff_tx_gated"
#define BB_KEY_BACKOFF_TX_SOURCE "ai.bytesandbrains.backoff_tx_source"
/* The value every flag key above is stamped with. */
#define BB_FLAG_TRUE "true"

/* ---- node attributes ---------------------------------------------------------------------- */

#define BB_ATTR_CHILD_COUNT "ai.bytesandbrains.composite.child_count"
#define BB_ATTR_CHILD_TYPES "ai.bytesandbrains.composite.child_types"
#define BB_ATTR_DEADLINE_NS "deadline_ns"
#define BB_ATTR_PEER "peer"
#define BB_ATTR_PERIOD_NS "period_ns"
#define BB_ATTR_VALUE "value"

/* ---- reserved names and name parts ------------------------------------------------------------ */

/* A module's bootstrap function is "<module>" BB_BOOTSTRAP_SUFFIX. */
#define BB_BOOTSTRAP_SUFFIX "__bootstrap"
/* The peer a network port's value came from is "<port>" BB_SENDER_SUFFIX on the receiving
 * side (bb_rec_lookup_sender). */
#define BB_SENDER_SUFFIX "__sender"
/* A function attribute "__slot_<id>" lists each slot id first used in it. */
#define BB_SLOT_ATTR_PREFIX "__slot_"
/* The peer class of the node's own peer, and of nodes no peer selector places. */
#define BB_SELF_CLASS "@self"
#define BB_DEFAULT_CLASS "@default"
/* The value a DeadlineCheck adds to the node it guards is "<site>" BB_DEADLINE_TRIGGER_SUFFIX. */
#define BB_DEADLINE_TRIGGER_SUFFIX "#__trigger_deadline"

/* ---- wires ------------------------------------------------------------------------------------ */

/* A wire is a value's way from the Sends that name it to the Recvs that listen to it, on
 * any peer, in any artifact. Its name is "<Module>.<port>" for a network port of a
 * Module's body, or what the author named it; two artifacts compiled apart that use one
 * name use one wire. On the wire, a fill addresses its Recvs by the wire's id: the
 * FNV-1a-64 of the name's bytes (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
 * Names are 1 to BB_WIRE_NAME_MAX bytes of printable ASCII without blanks or '|'. */
#define BB_WIRE_NAME_MAX 255
BB_API uint64_t bb_wire_id(const char *name);
BB_API bool bb_wire_name_valid(const char *name);

/* A wire's type is the denotation of the value it carries (the abstract type "" when the
 * compiler could not tell); its hash is the FNV-1a-64 of the denotation, 0 for "". */
BB_API uint64_t bb_wire_type_hash(const char *type);
/* The runtime value kind a type stands for, spelled as bb_val_kind_name spells kinds:
 * "Tensor" (tensor and scalar types), "Composite", "Peer", "Peers", "Trigger",
 * "WireReqId", "Address", "Addresses"; "Any" for the abstract type, for
 * BB_TYPE_BYTES (what an input declared without a type gets: the host may give it any
 * value) and for denotations this table does not know (the type tree is open). */
BB_API const char *bb_type_value_kind(const char *type);
/* The element type of a tensor or scalar denotation (bb.f32 is BB_DTYPE_FLOAT, ...);
 * BB_DTYPE_UNDEFINED for anything else. */
BB_API bb_dtype bb_type_element(const char *type);
/* Whether a value declared `sent` may land where `expected` is declared: equal types,
 * or either one abstract. */
BB_API bool bb_wire_types_agree(const char *sent, const char *expected);

/* A wire table entry's value (BB_KEY_WIRE_OUT_PREFIX / BB_KEY_WIRE_IN_PREFIX) for a type:
 * "<Kind>|<type>|0x<16 hex digits of its hash>", the type at most BB_WIRE_NAME_MAX
 * bytes. format writes it NUL-terminated and
 * returns its length (which is >= size when it did not fit); parse finds the type in
 * such a value (*type points into it, *type_len bytes long) and is false unless the
 * kind and the hash are those of that type. */
BB_API size_t bb_wire_entry_format(const char *type, char *out, size_t size);
BB_API bool bb_wire_entry_parse(const char *value, const char **type, size_t *type_len);

/* ---- the table ---------------------------------------------------------------------------------- */

typedef enum bb_vocab_kind {
  BB_VOCAB_DOMAIN = 1,   /* a node or function domain */
  BB_VOCAB_TYPE,         /* a value type denotation */
  BB_VOCAB_MODEL_KEY,    /* a key of the model's metadata */
  BB_VOCAB_FUNCTION_KEY, /* a key of a function's metadata */
  BB_VOCAB_NODE_KEY,     /* a key of a node's metadata */
  BB_VOCAB_ATTRIBUTE,    /* a node attribute name */
  BB_VOCAB_VALUE,        /* a value a key takes */
  BB_VOCAB_NAME          /* a reserved name or name part */
} bb_vocab_kind;

typedef struct bb_vocab_entry {
  const char *name;    /* the exact spelling */
  bb_vocab_kind kind;
  bool prefix;         /* the name is a prefix that continues (a key or name family) */
  const char *meaning; /* one line: what it is, who writes it, who reads it */
} bb_vocab_entry;

/* The table, in a fixed order (domains, types, model, function and node keys,
 * attributes, values, names); bb_vocab_at(i) is NULL past the end. */
BB_API size_t bb_vocab_count(void);
BB_API const bb_vocab_entry *bb_vocab_at(size_t i);
/* The entry of that kind and exact name, or NULL. */
BB_API const bb_vocab_entry *bb_vocab_find(bb_vocab_kind kind, const char *name);
/* "domain", "type", "model key", ...; "unknown" for other values. */
BB_API const char *bb_vocab_kind_name(bb_vocab_kind kind);
/* The roles and the table as text for people or, with as_json, as one JSON object
 * {"roles":[{"role","name","trait","domain","storage_port"}],
 *  "entries":[{"name","kind","prefix","meaning"}]} (what `bb vocab` prints). The
 * NUL-terminated text comes from alloc (NULL: the default one); free it with
 * bb_buffer_free(alloc, *out). */
BB_API int bb_vocab_describe(bool as_json, const bb_allocator *alloc, char **out, size_t *out_len, bb_error *err);

/* ---- what a component type declares ------------------------------------------------------ */

/* The storage type of one of a component's ports: it narrows the abstract outputs of its
 * role's ops (see bb_role_storage_port). */
typedef struct bb_component_port {
  const char *port; /* "tensor", "vector", "element", "in", "out", "sample" */
  const char *type; /* a denotation, e.g. BB_TYPE_TENSOR_F32 */
} bb_component_port;

/* A slot a component reaches at run time (bb_ctx_dependency). */
typedef struct bb_component_dep {
  bb_role role;     /* the role the dependency must be bound as */
  const char *slot; /* the slot name it must be bound at */
} bb_component_dep;

/* One op a Backend component executes. */
typedef struct bb_component_op {
  const char *domain;  /* BB_DOMAIN_ONNX (or its alias) for ONNX operators */
  const char *op_type; /* "Add", "Gemm", ... */
} bb_component_op;

#ifdef __cplusplus
}
#endif
#endif /* BB_ARTIFACT_H */
