/* The syscall helpers and the composite ops: each node's op type, domain, inputs,
 * outputs, attributes and metadata, and the value type recorded for every kind of value
 * (peer id, peer-id vector, trigger, bytes, wire request id, address vector, composite,
 * and a tensor of every element type). */
#include "dsltest.h"

#define MI BB_KEY_MODULE_INSTANCE, "Syscalls"

static const int64_t PAIR_DIMS[1] = {2};
static const int64_t PAIR_DATA[2] = {7, -9};
static const int64_t FOUR[1] = {4};

static void syscalls_body(bb_rec *g, void *user) {
  (void)user;
  bb_value server = bb_rec_input(g, "server", BB_TYPE_PEER_ID);
  bb_value addr = bb_rec_input(g, "addr", BB_TYPE_MULTIADDRESS);
  bb_value addrs = bb_rec_input(g, "addrs", BB_TYPE_ADDRESS_VEC);
  bb_value fanout = bb_rec_input(g, "fanout", BB_TYPE_PEER_ID_VEC);
  bb_value same = bb_rec_pass_through(g, server);
  CHECK_STR(same.type, BB_TYPE_PEER_ID);
  bb_literal seed = {BB_DTYPE_UINT8, FOUR, 1, NULL, 0};
  bb_value seeded = bb_rec_constant(g, "server_peer", BB_TYPE_PEER_ID, &seed);
  bb_literal pair = {BB_DTYPE_INT64, PAIR_DIMS, 1, PAIR_DATA, sizeof PAIR_DATA};
  bb_value numbers = bb_rec_constant(g, NULL, NULL, &pair);
  CHECK_STR(numbers.type, "ai.bytesandbrains.tensor.i64");
  bb_value tick = bb_rec_interval(g, 0);
  bb_rec_interval(g, 250000000);
  bb_rec_address_book_insert(g, server, addr);
  bb_rec_address_book_insert_many(g, same, addrs);
  bb_value looked = bb_rec_address_book_lookup(g, seeded);
  bb_value announced = bb_rec_announce(g, server);
  bb_value gate = bb_rec_gate_dispatch(g, (bb_value[]){tick, announced, looked}, 3);
  bb_value parts[3] = {numbers, looked, tick};
  bb_value bundle = bb_rec_bundle(g, parts, 3);
  const char *types[3] = {"ai.bytesandbrains.tensor.i64", BB_TYPE_ADDRESS_VEC, BB_TYPE_TRIGGER};
  bb_value back[3];
  CHECK_EQ_INT(bb_rec_unbundle(g, bundle, types, back, 3), 0);
  CHECK_STR(back[2].type, BB_TYPE_TRIGGER);
  bb_value req = bb_rec_net_out(g, "gossip", fanout, back[0]);
  CHECK_STR(req.type, BB_TYPE_WIRE_REQ_ID);
  bb_rec_output(g, "gate", gate);
}

static const bb_module SYSCALLS = {sizeof(bb_module), "Syscalls", syscalls_body, NULL, NULL, NULL, 0};

static const bb_attr *attr(const bb_ir_node *n, const char *name, int type) {
  const bb_attr *a = n ? bb_attr_find(&n->attrs, name) : NULL;
  CHECK_MSG(a && a->type == type, "attribute %s missing or not of type %d", name, type);
  return a && a->type == type ? a : NULL;
}

static void check_constants(const bb_function *f) {
  const bb_ir_node *c = dt_node(f, 1);
  CHECK_NODE(c, "Constant", BB_DOMAIN_SYSCALL, NONE, STRS("v1"), STRS(BB_KEY_BOOTSTRAP_SEED, "server_peer", MI));
  const bb_attr *value = attr(c, "value", BB_ATTR_TENSOR);
  if (value) {
    static const uint8_t zeros[4];
    CHECK_EQ_INT(value->t->data_type, BB_DTYPE_UINT8);
    CHECK_EQ_INT(value->t->n_dims, 1);
    CHECK_EQ_INT(value->t->dims[0], 4);
    CHECK(value->t->has_raw_data && value->t->raw_data.len == 4 && memcmp(value->t->raw_data.data, zeros, 4) == 0);
  }
  CHECK_OPAQUE(f, "v1", BB_TYPE_PEER_ID);
  c = dt_node(f, 2);
  CHECK_NODE(c, "Constant", BB_DOMAIN_SYSCALL, NONE, STRS("v2"), STRS(MI));
  value = attr(c, "value", BB_ATTR_TENSOR);
  if (value) {
    CHECK_EQ_INT(value->t->data_type, BB_DTYPE_INT64);
    CHECK(value->t->raw_data.len == 16 && memcmp(value->t->raw_data.data, PAIR_DATA, 16) == 0);
  }
  CHECK_TENSOR(f, "v2", "ai.bytesandbrains.tensor.i64", BB_DTYPE_INT64);
}

static void check_nodes(const bb_function *f) {
  CHECK_NODE(dt_node(f, 0), "PassThrough", BB_DOMAIN_SYSCALL, STRS("server"), STRS("v0"), STRS(MI));
  CHECK_OPAQUE(f, "v0", BB_TYPE_PEER_ID);
  check_constants(f);
  CHECK_NODE(dt_node(f, 3), "Interval", BB_DOMAIN_SYSCALL, NONE, STRS("v3"), STRS(MI));
  CHECK_EQ_INT(dt_node(f, 3)->attrs.len, 0); /* the compiler's expand_ops fills in its default */
  CHECK_NODE(dt_node(f, 4), "Interval", BB_DOMAIN_SYSCALL, NONE, STRS("v4"), STRS(MI));
  const bb_attr *period = attr(dt_node(f, 4), "period_ns", BB_ATTR_INT);
  if (period) CHECK_EQ_INT(period->i, 250000000);
  CHECK_OPAQUE(f, "v4", BB_TYPE_TRIGGER);
  CHECK_NODE(dt_node(f, 5), "Insert", BB_DOMAIN_ADDRESS_BOOK, STRS("server", "addr"), STRS("v5"), STRS(MI));
  CHECK_OPAQUE(f, "v5", BB_TYPE_TRIGGER);
  CHECK_NODE(dt_node(f, 6), "InsertMany", BB_DOMAIN_ADDRESS_BOOK, STRS("v0", "addrs"), STRS("v6"), STRS(MI));
  CHECK_OPAQUE(f, "v6", BB_TYPE_TRIGGER);
  CHECK_NODE(dt_node(f, 7), "Lookup", BB_DOMAIN_ADDRESS_BOOK, STRS("v1"), STRS("v7"), STRS(MI));
  CHECK_OPAQUE(f, "v7", BB_TYPE_ADDRESS_VEC);
  CHECK_NODE(dt_node(f, 8), "Announce", BB_DOMAIN_GLOBAL_REGISTRY, STRS("server"), STRS("v8"),
             STRS(BB_KEY_INPUT_SERVER_PEER, "server", MI));
  CHECK_OPAQUE(f, "v8", BB_TYPE_TRIGGER);
  CHECK_NODE(dt_node(f, 9), "GateDispatch", BB_DOMAIN_SYSCALL, STRS("v3", "v8", "v7"), STRS("v9"), STRS(MI));
  CHECK_OPAQUE(f, "v9", BB_TYPE_BYTES);
  const char *child_types = "ai.bytesandbrains.tensor.i64,ai.bytesandbrains.address_vec,bb.trigger";
  for (size_t i = 10; i <= 11; i++) {
    const bb_ir_node *n = dt_node(f, i);
    if (i == 10) CHECK_NODE(n, "Bundle", BB_DOMAIN_COMPOSITE, STRS("v2", "v7", "v3"), STRS("v10"), STRS(MI));
    else CHECK_NODE(n, "Unbundle", BB_DOMAIN_COMPOSITE, STRS("v10"), STRS("v11", "v12", "v13"), STRS(MI));
    CHECK_EQ_INT(n ? n->attrs.len : 0, 2);
    if (n && n->attrs.len == 2) {
      CHECK_STR(n->attrs.items[0]->name, BB_ATTR_CHILD_COUNT); /* count first, then types */
      CHECK_EQ_INT(n->attrs.items[0]->i, 3);
      CHECK_STR(bb_attr_get_string(&n->attrs, BB_ATTR_CHILD_TYPES, NULL), child_types);
    }
  }
  CHECK_OPAQUE(f, "v10", BB_TYPE_COMPOSITE);
  CHECK_TENSOR(f, "v11", "ai.bytesandbrains.tensor.i64", BB_DTYPE_INT64);
  CHECK_OPAQUE(f, "v12", BB_TYPE_ADDRESS_VEC);
  CHECK_OPAQUE(f, "v13", BB_TYPE_TRIGGER);
  CHECK_NODE(dt_node(f, 12), "Send", BB_DOMAIN_WIRE, STRS("v11", "fanout"), STRS("gossip", "v14"), STRS(MI));
  CHECK_TENSOR(f, "gossip", "ai.bytesandbrains.tensor.i64", BB_DTYPE_INT64);
  CHECK_OPAQUE(f, "v14", BB_TYPE_WIRE_REQ_ID);
  CHECK_NODE(dt_node(f, 13), "PassThrough", BB_DOMAIN_SYSCALL, STRS("v9"), STRS("gate"), STRS(MI));
  CHECK_EQ_INT(f->nodes.len, 14);
  CHECK_STRS(&f->inputs, STRS("server", "addr", "addrs", "fanout"));
  CHECK_STRS(&f->outputs, STRS("gossip", "gate"));
  CHECK_OPAQUE(f, "addr", BB_TYPE_MULTIADDRESS);
  CHECK_OPAQUE(f, "fanout", BB_TYPE_PEER_ID_VEC);
}

static void test_helper_node_shapes(void) {
  bb_model *m = dt_build(&SYSCALLS);
  if (!m) return;
  const bb_function *f = dt_fn(m, "Syscalls");
  CHECK(f != NULL);
  if (f) check_nodes(f);
  dt_check_roundtrip(m);
#ifndef __EMSCRIPTEN__
  CHECK_MSG(dt_onnx_check(m, "syscalls") == 0, "onnx.checker rejected the syscall helper nodes");
#endif
  bb_model_free(m);
}

/* Every tensor leaf of the type tree maps to its ONNX element type; other types are
 * opaque in the framework domain, named by their denotation. */
static void test_value_type_mapping(void) {
  static const struct {
    bb_dtype dtype;
    const char *denotation;
  } leaves[] = {
      {BB_DTYPE_FLOAT, "ai.bytesandbrains.tensor.f32"},   {BB_DTYPE_DOUBLE, "ai.bytesandbrains.tensor.f64"},
      {BB_DTYPE_FLOAT16, "ai.bytesandbrains.tensor.f16"}, {BB_DTYPE_BFLOAT16, "ai.bytesandbrains.tensor.bf16"},
      {BB_DTYPE_UINT8, "ai.bytesandbrains.tensor.u8"},    {BB_DTYPE_UINT16, "ai.bytesandbrains.tensor.u16"},
      {BB_DTYPE_UINT32, "ai.bytesandbrains.tensor.u32"},  {BB_DTYPE_UINT64, "ai.bytesandbrains.tensor.u64"},
      {BB_DTYPE_INT8, "ai.bytesandbrains.tensor.i8"},     {BB_DTYPE_INT16, "ai.bytesandbrains.tensor.i16"},
      {BB_DTYPE_INT32, "ai.bytesandbrains.tensor.i32"},   {BB_DTYPE_INT64, "ai.bytesandbrains.tensor.i64"},
      {BB_DTYPE_BOOL, "ai.bytesandbrains.tensor.bool"},
  };
  bb_model *m = bb_model_new(NULL);
  for (size_t i = 0; i < sizeof leaves / sizeof leaves[0]; i++) {
    CHECK_STR(bb_tensor_type(leaves[i].dtype), leaves[i].denotation);
    const bb_type *t = bb_value_type_new(m, leaves[i].denotation);
    CHECK(t && t->kind == BB_TYPE_TENSOR && t->elem_type == (int32_t)leaves[i].dtype && !t->shape);
    if (t) CHECK_STR(t->denotation, leaves[i].denotation);
  }
  CHECK(bb_tensor_type(BB_DTYPE_STRING) == NULL);
  CHECK(bb_tensor_type(BB_DTYPE_COMPLEX64) == NULL);
  const bb_type *ext = bb_value_type_new(m, "ai.bytesandbrains.tensor.fp8"); /* a registered extension */
  CHECK(ext && ext->kind == BB_TYPE_TENSOR && ext->elem_type == BB_DTYPE_UNDEFINED);
  const bb_type *scalar = bb_value_type_new(m, BB_TYPE_SCALAR_F32);
  CHECK(scalar && scalar->kind == BB_TYPE_OPAQUE);
  if (scalar) CHECK_STR(scalar->opaque_name, "bb.f32");
  const bb_type *abstract = bb_value_type_new(m, BB_TYPE_ABSTRACT);
  CHECK(abstract && abstract->kind == BB_TYPE_OPAQUE && !abstract->opaque_name && !abstract->denotation);
  if (abstract) CHECK_STR(abstract->opaque_domain, BB_DOMAIN_FRAMEWORK);
  bb_model_free(m);
}

/* Wires between Modules compiled apart: net_in records a Recv listening to the wire it
 * names (payload typed as declared, sender a peer id); net_out_wire names the wire of a
 * Send. */
static void wires_body(bb_rec *g, void *user) {
  (void)user;
  bb_value from;
  bb_value got = bb_rec_net_in(g, "Other.port", BB_TYPE_TENSOR_F32, &from);
  bb_rec_net_out_wire(g, "back", "Wires.answer", from, got);
}

static void test_net_in_and_named_wires(void) {
  const bb_module m = {sizeof(bb_module), "Wires", wires_body, NULL, NULL, NULL, 0};
  bb_model *model = dt_build(&m);
  const bb_function *f = model ? model->functions.items[0] : NULL;
  if (!f) return bb_model_free(model);
  CHECK_NODE(dt_node(f, 0), "Recv", BB_DOMAIN_WIRE, NONE, STRS("v0", "v1"),
             STRS(BB_KEY_WIRE_ID, "Other.port", BB_KEY_MODULE_INSTANCE, "Wires"));
  CHECK_TENSOR(f, "v0", BB_TYPE_TENSOR_F32, BB_DTYPE_FLOAT);
  CHECK_OPAQUE(f, "v1", BB_TYPE_PEER_ID);
  CHECK_NODE(dt_node(f, 1), "Send", BB_DOMAIN_WIRE, STRS("v0", "v1"), STRS("back", "v2"),
             STRS(BB_KEY_WIRE_ID, "Wires.answer", BB_KEY_MODULE_INSTANCE, "Wires"));
  bb_model_free(model);
}

int main(void) {
  RUN(test_helper_node_shapes);
  RUN(test_net_in_and_named_wires);
  RUN(test_value_type_mapping);
  return bb_test_finish();
}
