/* The vocabulary table behind include/bb/artifact.h: the roles, the tensor denotations
 * and every domain, type, key, attribute, value and reserved name with its meaning. */
#include "bb/artifact.h"

#include <stdio.h>
#include <string.h>

#include "util/hash.h"

/* ---- roles ------------------------------------------------------------------------- */

typedef struct role_entry {
  bb_role role;
  const char *name, *trait, *domain, *storage_port;
} role_entry;

static const role_entry ROLES[] = {
    {BB_ROLE_BACKEND, "Backend", "BackendRuntime", BB_DOMAIN_ONNX, "tensor"},
    {BB_ROLE_MODEL, "Model", "ModelRuntime", BB_DOMAIN_ROLE_MODEL, "tensor"},
    {BB_ROLE_INDEX, "Index", "IndexRuntime", BB_DOMAIN_ROLE_INDEX, "vector"},
    {BB_ROLE_AGGREGATOR, "Aggregator", "AggregatorRuntime", BB_DOMAIN_ROLE_AGGREGATOR, "element"},
    {BB_ROLE_CODEC, "Codec", "CodecRuntime", BB_DOMAIN_ROLE_CODEC, NULL},
    {BB_ROLE_DATA_SOURCE, "DataSource", "DataSourceRuntime", BB_DOMAIN_ROLE_DATA_SOURCE, "sample"},
    {BB_ROLE_PEER_SELECTOR, "PeerSelector", "PeerSelectorRuntime", BB_DOMAIN_ROLE_PEER_SELECTOR, NULL},
    {BB_ROLE_PROTOCOL, "Protocol", "ProtocolRuntime", NULL, NULL},
};
#define N_ROLES (sizeof ROLES / sizeof ROLES[0])

static const role_entry *role_entry_of(bb_role role) {
  return role >= BB_ROLE_FIRST && role <= BB_ROLE_LAST ? &ROLES[role - BB_ROLE_FIRST] : NULL;
}

const char *bb_role_name(bb_role role) {
  const role_entry *r = role_entry_of(role);
  return r ? r->name : NULL;
}

const char *bb_role_trait(bb_role role) {
  const role_entry *r = role_entry_of(role);
  return r ? r->trait : NULL;
}

const char *bb_role_domain(bb_role role) {
  const role_entry *r = role_entry_of(role);
  return r ? r->domain : NULL;
}

const char *bb_role_storage_port(bb_role role) {
  const role_entry *r = role_entry_of(role);
  return r ? r->storage_port : NULL;
}

bb_role bb_role_from_name(const char *name) {
  for (size_t i = 0; name && i < N_ROLES; i++)
    if (strcmp(ROLES[i].name, name) == 0) return ROLES[i].role;
  return (bb_role)0;
}

bb_role bb_role_from_trait(const char *trait) {
  for (size_t i = 0; trait && i < N_ROLES; i++)
    if (strcmp(ROLES[i].trait, trait) == 0) return ROLES[i].role;
  return (bb_role)0;
}

bb_role bb_role_from_domain(const char *domain) {
  if (bb_domain_is_onnx(domain)) return BB_ROLE_BACKEND;
  for (size_t i = 0; i < N_ROLES; i++)
    if (ROLES[i].domain && strcmp(ROLES[i].domain, domain) == 0) return ROLES[i].role;
  return (bb_role)0;
}

bool bb_domain_is_onnx(const char *domain) {
  return !domain || !*domain || strcmp(domain, BB_DOMAIN_ONNX_ALIAS) == 0;
}

/* ---- tensor denotations ---------------------------------------------------------------- */

static const struct {
  bb_dtype dtype;
  const char *denotation;
} TENSOR_TYPES[] = {
    {BB_DTYPE_FLOAT, BB_TYPE_TENSOR_F32},  {BB_DTYPE_DOUBLE, BB_TYPE_TENSOR_F64},
    {BB_DTYPE_FLOAT16, BB_TYPE_TENSOR_F16}, {BB_DTYPE_BFLOAT16, BB_TYPE_TENSOR_BF16},
    {BB_DTYPE_UINT8, BB_TYPE_TENSOR_U8},   {BB_DTYPE_UINT16, BB_TYPE_TENSOR_U16},
    {BB_DTYPE_UINT32, BB_TYPE_TENSOR_U32}, {BB_DTYPE_UINT64, BB_TYPE_TENSOR_U64},
    {BB_DTYPE_INT8, BB_TYPE_TENSOR_I8},    {BB_DTYPE_INT16, BB_TYPE_TENSOR_I16},
    {BB_DTYPE_INT32, BB_TYPE_TENSOR_I32},  {BB_DTYPE_INT64, BB_TYPE_TENSOR_I64},
    {BB_DTYPE_BOOL, BB_TYPE_TENSOR_BOOL},
};
#define N_TENSOR_TYPES (sizeof TENSOR_TYPES / sizeof TENSOR_TYPES[0])

const char *bb_tensor_type(bb_dtype dtype) {
  for (size_t i = 0; i < N_TENSOR_TYPES; i++)
    if (TENSOR_TYPES[i].dtype == dtype) return TENSOR_TYPES[i].denotation;
  return NULL;
}

bb_dtype bb_tensor_type_dtype(const char *denotation) {
  for (size_t i = 0; denotation && i < N_TENSOR_TYPES; i++)
    if (strcmp(TENSOR_TYPES[i].denotation, denotation) == 0) return TENSOR_TYPES[i].dtype;
  return BB_DTYPE_UNDEFINED;
}

/* ---- wires ---------------------------------------------------------------------------------- */

uint64_t bb_wire_id(const char *name) { return bbi_fnv1a64(name ? name : "", name ? strlen(name) : 0); }

bool bb_wire_name_valid(const char *name) {
  size_t len = name ? strlen(name) : 0;
  if (!len || len > BB_WIRE_NAME_MAX) return false;
  for (size_t i = 0; i < len; i++)
    if (name[i] <= ' ' || name[i] > '~' || name[i] == '|') return false;
  return true;
}

uint64_t bb_wire_type_hash(const char *type) { return type && *type ? bbi_fnv1a64(type, strlen(type)) : 0; }

static const struct {
  const char *type, *kind;
} TYPE_KINDS[] = {
    {BB_TYPE_COMPOSITE, "Composite"},   {BB_TYPE_PEER_ID, "Peer"},        {BB_TYPE_PEER_ID_VEC, "Peers"},
    {BB_TYPE_TRIGGER, "Trigger"},       {BB_TYPE_WIRE_REQ_ID, "WireReqId"}, {BB_TYPE_MULTIADDRESS, "Address"},
    {BB_TYPE_ADDRESS_VEC, "Addresses"},
};

static const struct {
  const char *type;
  bb_dtype dtype;
} SCALAR_TYPES[] = {
    {BB_TYPE_SCALAR_F32, BB_DTYPE_FLOAT}, {BB_TYPE_SCALAR_F64, BB_DTYPE_DOUBLE}, {BB_TYPE_SCALAR_F16, BB_DTYPE_FLOAT16},
    {BB_TYPE_SCALAR_U8, BB_DTYPE_UINT8},  {BB_TYPE_SCALAR_I32, BB_DTYPE_INT32},
};

bb_dtype bb_type_element(const char *type) {
  for (size_t i = 0; type && i < sizeof SCALAR_TYPES / sizeof *SCALAR_TYPES; i++)
    if (strcmp(SCALAR_TYPES[i].type, type) == 0) return SCALAR_TYPES[i].dtype;
  return bb_tensor_type_dtype(type);
}

const char *bb_type_value_kind(const char *type) {
  if (bb_type_element(type) != BB_DTYPE_UNDEFINED) return "Tensor";
  for (size_t i = 0; type && i < sizeof TYPE_KINDS / sizeof *TYPE_KINDS; i++)
    if (strcmp(TYPE_KINDS[i].type, type) == 0) return TYPE_KINDS[i].kind;
  return "Any";
}

bool bb_wire_types_agree(const char *sent, const char *expected) {
  return !sent || !*sent || !expected || !*expected || strcmp(sent, expected) == 0;
}

size_t bb_wire_entry_format(const char *type, char *out, size_t size) {
  int n = snprintf(out, size, "%s|%s|0x%016llx", bb_type_value_kind(type), type ? type : "",
                   (unsigned long long)bb_wire_type_hash(type));
  return n < 0 ? size : (size_t)n;
}

bool bb_wire_entry_parse(const char *value, const char **type, size_t *type_len) {
  const char *bar1 = value ? strchr(value, '|') : NULL, *bar2 = bar1 ? strchr(bar1 + 1, '|') : NULL;
  if (!bar2 || strchr(bar2 + 1, '|') || (size_t)(bar2 - bar1 - 1) > BB_WIRE_NAME_MAX) return false;
  char t[BB_WIRE_NAME_MAX + 1], want[BB_WIRE_NAME_MAX + 64];
  memcpy(t, bar1 + 1, (size_t)(bar2 - bar1 - 1));
  t[bar2 - bar1 - 1] = 0;
  size_t n = bb_wire_entry_format(t, want, sizeof want);
  if (n >= sizeof want || strcmp(want, value) != 0) return false;
  *type = bar1 + 1;
  *type_len = (size_t)(bar2 - bar1 - 1);
  return true;
}

/* ---- the vocabulary ------------------------------------------------------------------------ */

#define DOMAIN(n, m) {n, BB_VOCAB_DOMAIN, false, m}
#define TYPE(n, m) {n, BB_VOCAB_TYPE, false, m}
#define MODEL_KEY(n, p, m) {n, BB_VOCAB_MODEL_KEY, p, m}
#define FUNCTION_KEY(n, m) {n, BB_VOCAB_FUNCTION_KEY, false, m}
#define NODE_KEY(n, p, m) {n, BB_VOCAB_NODE_KEY, p, m}
#define ATTRIBUTE(n, m) {n, BB_VOCAB_ATTRIBUTE, false, m}
#define VALUE(n, m) {n, BB_VOCAB_VALUE, false, m}
#define NAME(n, p, m) {n, BB_VOCAB_NAME, p, m}

static const bb_vocab_entry VOCAB[] = {
    DOMAIN(BB_DOMAIN_FRAMEWORK, "the framework's root domain; also the domain of opaque TypeProtos"),
    DOMAIN(BB_DOMAIN_SYSCALL, "runtime system ops: PassThrough, Constant, Interval, GateDispatch, the gates, ..."),
    DOMAIN(BB_DOMAIN_WIRE, "Send and Recv: values crossing to other peers"),
    DOMAIN(BB_DOMAIN_MODULE, "every recorded function, and the CALL nodes that invoke one (op_type = its name)"),
    DOMAIN(BB_DOMAIN_COMPOSITE, "Bundle and Unbundle of composite values"),
    DOMAIN(BB_DOMAIN_ADDRESS_BOOK, "Insert, InsertMany and Lookup on the node's address book"),
    DOMAIN(BB_DOMAIN_GRAD, "operators training graphs need that ONNX lacks (seeded Dropout, SumToShape; docs/GRAD.md)"),
    {BB_DOMAIN_PROTOCOL_PREFIX, BB_VOCAB_DOMAIN, true,
     "a protocol's ops: protocol.<name>, run by the component whose type speaks that domain"},
    DOMAIN(BB_DOMAIN_GLOBAL_REGISTRY, "the GlobalRegistry protocol's ops (Announce)"),
    DOMAIN(BB_DOMAIN_ROLE_MODEL, "Model role ops (Forward, Backward, ComputeLoss, ApplyDelta, ...)"),
    DOMAIN(BB_DOMAIN_ROLE_INDEX, "Index role ops (Add, Search, Remove, Train)"),
    DOMAIN(BB_DOMAIN_ROLE_AGGREGATOR, "Aggregator role ops (Contribute, Aggregate)"),
    DOMAIN(BB_DOMAIN_ROLE_CODEC, "Codec role ops (Train, Encode, Decode)"),
    DOMAIN(BB_DOMAIN_ROLE_DATA_SOURCE, "DataSource role ops (NextBatch, Reset, OnDataLoaded)"),
    DOMAIN(BB_DOMAIN_ROLE_PEER_SELECTOR, "PeerSelector role ops (Sample, CurrentView)"),
    DOMAIN(BB_DOMAIN_ONNX_ALIAS, "the default ONNX domain's other spelling; Backend ops are recorded in \"\""),

    TYPE(BB_TYPE_BYTES, "untyped bytes; the type of a top-level input declared without one"),
    TYPE(BB_TYPE_PEER_ID, "one peer id"),
    TYPE(BB_TYPE_PEER_ID_VEC, "a list of peer ids"),
    TYPE(BB_TYPE_TRIGGER, "a value that only says \"now\" (ordering, timer ticks)"),
    TYPE(BB_TYPE_WIRE_REQ_ID, "the request handle of a wire Send"),
    TYPE(BB_TYPE_MULTIADDRESS, "one peer address"),
    TYPE(BB_TYPE_ADDRESS_VEC, "a list of peer addresses"),
    TYPE(BB_TYPE_COMPOSITE, "a bundle of values (composite.Bundle)"),
    TYPE(BB_TYPE_SCALAR_F32, "a float32 scalar"),
    TYPE(BB_TYPE_SCALAR_F64, "a float64 scalar"),
    TYPE(BB_TYPE_SCALAR_F16, "a float16 scalar"),
    TYPE(BB_TYPE_SCALAR_U8, "a uint8 scalar"),
    TYPE(BB_TYPE_SCALAR_I32, "an int32 scalar"),
    {BB_TYPE_TENSOR_PREFIX, BB_VOCAB_TYPE, true,
     "tensors: the prefix, then f32 f64 f16 bf16 u8 u16 u32 u64 i8 i16 i32 i64 or bool"},

    MODEL_KEY(BB_KEY_COMPILED, false, "the passport: present (= \"v2\") on compiled artifacts only"),
    MODEL_KEY(BB_KEY_BINDING_PREFIX, true,
              "binding.<partition>.<slot> = \"<Role>|<concrete type>|<slot id or -1>\", one per partition and "
              "bound slot"),
    MODEL_KEY(BB_KEY_CONFIG_PREFIX, true, "config.<slot> = the config text bound with the slot"),
    MODEL_KEY(BB_KEY_IR_VERSION, false, "the framework IR version an input model was written for (compiler checks it)"),
    MODEL_KEY(BB_KEY_WIRE_OUT_PREFIX, true,
              "wire_out.<wire> = \"<Kind>|<type>|0x<type hash>\": a wire a partition of the artifact sends on"),
    MODEL_KEY(BB_KEY_WIRE_IN_PREFIX, true,
              "wire_in.<wire> = \"<Kind>|<type>|0x<type hash>\": a wire a partition of the artifact receives from"),

    FUNCTION_KEY(BB_KEY_MODULE_PHASE, "\"body\" on a Module's body function, \"bootstrap\" on its bootstrap"),

    NODE_KEY(BB_KEY_MODULE_INSTANCE, false, "recorder: the `_`-joined chain of functions the node was recorded in"),
    NODE_KEY(BB_KEY_REQUIRED_TRAIT, false, "recorder: the role trait a role node needs (\"ModelRuntime\", ...)"),
    NODE_KEY(BB_KEY_SLOT_ID, false, "recorder: the node's slot id, unique per build"),
    NODE_KEY(BB_KEY_SLOT_NAME, false, "recorder: the author's slot name, which bindings are keyed by"),
    NODE_KEY(BB_KEY_CODEC_PORT, false,
             "recorder: the codec port (\"in\" or \"out\") a Codec op's outputs are typed by"),
    NODE_KEY(BB_KEY_INDEX_PORT, false, "recorder: the index port of Index.Train (\"samples\")"),
    NODE_KEY(BB_KEY_PEER_CLASS, false,
             "recorder: on PeerSelector nodes, the class of the peers picked; compiler: the class of a partition "
             "(its metadata) and of a peer-typed input (its value info)"),
    NODE_KEY(BB_KEY_BOOTSTRAP_SEED, false, "recorder: a Constant's label, for diagnostics"),
    NODE_KEY(BB_KEY_INPUT_SERVER_PEER, false, "recorder: the input of Announce that names the server peer"),
    NODE_KEY(BB_KEY_SPLIT_CUTS, false, "recorder: on a split's ops (its Model calls and its Sends), the values the model is cut at, '|'-joined"),
    NODE_KEY(BB_KEY_SPLIT_SHAPE, false, "recorder: on a split's ops, \"vanilla\" or \"u\""),
    NODE_KEY(BB_KEY_SPLIT_SIDE, false, "recorder: on a split's ops, \"client\" or \"server\": whose part the op's slot holds"),
    NODE_KEY(BB_KEY_HOME_CLASS, false, "compiler: the peer class a node runs on"),
    NODE_KEY(BB_KEY_SYNTHESIZED_FROM_SEND, false, "compiler: on a synthesized Recv, the index of its Send"),
    NODE_KEY(BB_KEY_WIRE_ID, false,
             "compiler (recorder for named wires): on a Send and on every Recv of its wire, the wire's name"),
    NODE_KEY(BB_KEY_CHAIN_DEPTH, false, "input: the hops a Send's value travels (its deadline is depth x budget)"),
    NODE_KEY(BB_KEY_WIRE_TRANSPORT, false, "compiler: on both halves of a wire edge, \"data\" or \"trigger_only\""),
    NODE_KEY(BB_KEY_BATCH_GROUP, false, "compiler: on both halves of a wire edge, its (from, to) class pair's group"),
    NODE_KEY(BB_KEY_DEST_SITE_PREFIX, true,
             "compiler: dest_site_name.<sent value> = the name of the wire it travels on (its id addresses the fill)"),
    NODE_KEY(BB_KEY_EXPANDED, false, "compiler: flag, the node went through expand_ops"),
    NODE_KEY(BB_KEY_RX_CHAIN_HEAD, false, "compiler: on a Recv, the last value of its receive gate chain"),
    NODE_KEY(BB_KEY_RECV_SLOT_ID, false, "compiler: on a Recv, the slot id of the role node its payload feeds"),
    NODE_KEY(BB_KEY_DEP_PREFIX, true,
             "compiler: dep.<Role> = the slot a concrete-typed node reaches for that dependency"),
    NODE_KEY(BB_KEY_CONCRETE_TYPE, false, "input: a role node bound to a concrete type directly (with instance)"),
    NODE_KEY(BB_KEY_INSTANCE, false, "input: the instance of a concrete-typed role node"),
    NODE_KEY(BB_KEY_DEADLINE_GATED, false, "compiler: flag, the node is guarded by a DeadlineCheck"),
    NODE_KEY(BB_KEY_DEADLINE_SOURCE, false, "compiler: on a DeadlineCheck, the node it guards"),
    NODE_KEY(BB_KEY_DEDUP_RX_GATED, false, "compiler: flag on a Recv, its payload passes DedupGateRx"),
    NODE_KEY(BB_KEY_DEDUP_RX_SOURCE, false, "compiler: on a DedupGateRx, the Recv it guards"),
    NODE_KEY(BB_KEY_PEER_HEALTH_RX_GATED, false, "compiler: flag on a Recv, its payload passes PeerHealthGateRx"),
    NODE_KEY(BB_KEY_PEER_HEALTH_RX_SOURCE, false, "compiler: on a PeerHealthGateRx, the Recv it guards"),
    NODE_KEY(BB_KEY_BACKOFF_RX_GATED, false, "compiler: flag on a Recv, its payload passes BackoffGateRx"),
    NODE_KEY(BB_KEY_BACKOFF_RX_SOURCE, false, "compiler: on a BackoffGateRx, the Recv it guards"),
    NODE_KEY(BB_KEY_PEER_HEALTH_TX_GATED, false,
             "compiler: flag on a Send (and its gate), it sends through PeerHealthGateTx"),
    NODE_KEY(BB_KEY_PEER_HEALTH_TX_SOURCE, false, "compiler: on a PeerHealthGateTx, the Send it guards"),
    NODE_KEY(BB_KEY_BACKOFF_TX_GATED, false, "compiler: flag on a Send (and its gate), it sends through BackoffGateTx"),
    NODE_KEY(BB_KEY_BACKOFF_TX_SOURCE, false, "compiler: on a BackoffGateTx, the Send it guards"),

    ATTRIBUTE(BB_ATTR_CHILD_COUNT, "composite.Bundle: the number of parts"),
    ATTRIBUTE(BB_ATTR_CHILD_TYPES, "composite.Bundle: the parts' denotations, comma-joined"),
    ATTRIBUTE(BB_ATTR_DEADLINE_NS, "wire Send and DeadlineCheck: the relative deadline in nanoseconds"),
    ATTRIBUTE(BB_ATTR_PEER, "wire Send and the transmit gates: the peer a Send addresses"),
    ATTRIBUTE(BB_ATTR_PERIOD_NS, "syscall Interval: the period in nanoseconds"),
    ATTRIBUTE(BB_ATTR_VALUE, "syscall Constant: the tensor it produces"),

    VALUE(BB_COMPILED_VERSION, "of compiled: the artifact format version (v2: wires named, wire tables)"),
    VALUE(BB_MODULE_PHASE_BODY, "of module_phase: a Module's body"),
    VALUE(BB_MODULE_PHASE_BOOTSTRAP, "of module_phase: a Module's bootstrap"),
    VALUE(BB_CODEC_PORT_IN, "of codec.port: outputs typed by the codec's `in` storage"),
    VALUE(BB_CODEC_PORT_OUT, "of codec.port: outputs typed by the codec's `out` storage"),
    VALUE(BB_SPLIT_SHAPE_VANILLA, "of split.shape: the server holds the loss; labels travel with the activations"),
    VALUE(BB_SPLIT_SHAPE_U, "of split.shape: the client holds the first layers and the head with the loss"),
    VALUE(BB_SPLIT_SIDE_CLIENT, "of split.side: the part of the peers with the data"),
    VALUE(BB_SPLIT_SIDE_SERVER, "of split.side: the part of the server's peers"),
    VALUE(BB_WIRE_TRANSPORT_DATA, "of wire_transport: the edge carries a value"),
    VALUE(BB_WIRE_TRANSPORT_TRIGGER_ONLY, "of wire_transport: the edge carries a bb.trigger only"),
    VALUE(BB_FLAG_TRUE, "of every flag key"),

    NAME(BB_BOOTSTRAP_SUFFIX, false, "<module>__bootstrap names a Module's bootstrap function"),
    NAME(BB_SENDER_SUFFIX, false, "<port>__sender: the peer a network port's value came from, on the receiving side"),
    NAME(BB_SLOT_ATTR_PREFIX, true, "__slot_<id>: a function attribute per slot id first used in that function"),
    NAME(BB_SELF_CLASS, false, "the peer class of the node's own peer"),
    NAME(BB_DEFAULT_CLASS, false, "the peer class of nodes nothing places elsewhere"),
    NAME(BB_DEADLINE_TRIGGER_SUFFIX, false, "<site>#__trigger_deadline: the trigger a DeadlineCheck adds to its node"),
};
#define N_VOCAB (sizeof VOCAB / sizeof VOCAB[0])

size_t bb_vocab_count(void) { return N_VOCAB; }

const bb_vocab_entry *bb_vocab_at(size_t i) { return i < N_VOCAB ? &VOCAB[i] : NULL; }

const bb_vocab_entry *bb_vocab_find(bb_vocab_kind kind, const char *name) {
  for (size_t i = 0; name && i < N_VOCAB; i++)
    if (VOCAB[i].kind == kind && strcmp(VOCAB[i].name, name) == 0) return &VOCAB[i];
  return NULL;
}

const char *bb_vocab_kind_name(bb_vocab_kind kind) {
  switch (kind) {
    case BB_VOCAB_DOMAIN: return "domain";
    case BB_VOCAB_TYPE: return "type";
    case BB_VOCAB_MODEL_KEY: return "model key";
    case BB_VOCAB_FUNCTION_KEY: return "function key";
    case BB_VOCAB_NODE_KEY: return "node key";
    case BB_VOCAB_ATTRIBUTE: return "attribute";
    case BB_VOCAB_VALUE: return "value";
    case BB_VOCAB_NAME: return "name";
  }
  return "unknown";
}
