/* Every misuse the recorder reports: the error code, and a message naming the module and
 * the value, slot or port at fault. Each case is one small module whose body commits one
 * mistake; the build must fail with no model. */
#include "dsltest.h"

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot INDEX = {BB_ROLE_INDEX, "index", NULL};
static const bb_slot MODEL_AS_INDEX = {BB_ROLE_INDEX, "model", NULL};
static const bb_slot PROTOCOL = {BB_ROLE_PROTOCOL, "registry", NULL};
static const bb_slot CLASSY_MODEL = {BB_ROLE_MODEL, "classy", "gossip"};
static const bb_slot BAD_SLOT_NAME = {BB_ROLE_MODEL, "1model", NULL};
static const bb_slot BAD_CLASS = {BB_ROLE_PEER_SELECTOR, "sampler", "no class"};
static const bb_slot COMPUTE = {BB_ROLE_BACKEND, "compute", NULL};

static bb_value x_of(bb_rec *g) { return bb_rec_input(g, "x", NULL); }

/* ---- sub-modules the cases call ------------------------------------------------------- */

static void leaf_body(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "b", bb_rec_pass_through(g, bb_rec_input(g, "a", NULL)));
}
static const bb_module LEAF = {sizeof(bb_module), "Leaf", leaf_body, NULL, NULL, NULL, 0};
static const bb_module LEAF_TWIN = {sizeof(bb_module), "Leaf", leaf_body, NULL, NULL, NULL, 0};

static void typed_leaf_body(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "b", bb_rec_address_book_lookup(g, bb_rec_input(g, "peer", BB_TYPE_PEER_ID)));
}
static const bb_module TYPED_LEAF = {sizeof(bb_module), "TypedLeaf", typed_leaf_body, NULL, NULL, NULL, 0};

static void nothing(bb_rec *g, void *user) {
  (void)g;
  (void)user;
}
static const bb_module EMPTY = {sizeof(bb_module), "Empty", nothing, NULL, NULL, NULL, 0};

/* A sub-module that uses the value its caller left in *user (a captured outer value). */
static bb_value captured;
static void capture_body(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "b", bb_rec_pass_through(g, captured));
}
static const bb_module CAPTURE = {sizeof(bb_module), "Capture", capture_body, NULL, NULL, NULL, 0};

/* A sub-module that reads the outputs of a call its caller made. */
static bb_call captured_call;
static void call_reader_body(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "b", bb_rec_call_output(g, captured_call, "b"));
}
static const bb_module CALL_READER = {sizeof(bb_module), "CallReader", call_reader_body, NULL, NULL, NULL, 0};

static const bb_module SELF_CALLER; /* defined below: calls itself */

static const bb_module *const SUBS[] = {&LEAF, &LEAF_TWIN, &TYPED_LEAF, &EMPTY, &CAPTURE, &CALL_READER, &SELF_CALLER};
#define N_SUBS (sizeof SUBS / sizeof SUBS[0])

static void self_caller_body(bb_rec *g, void *user) {
  (void)user;
  bb_rec_call(g, &SELF_CALLER, NULL, 0);
}
static const bb_module SELF_CALLER = {sizeof(bb_module), "SelfCaller", self_caller_body, NULL, NULL, SUBS, N_SUBS};

/* ---- one body per misuse ------------------------------------------------------------------- */

static void value_from_parent(bb_rec *g, void *u) {
  (void)u;
  captured = x_of(g);
  bb_rec_call(g, &CAPTURE, NULL, 0);
}
static void call_output_in_other_function(bb_rec *g, void *u) {
  (void)u;
  captured_call = bb_rec_call(g, &LEAF, (bb_binding[]){{"a", x_of(g)}}, 1);
  bb_rec_call(g, &CALL_READER, NULL, 0);
}
static void empty_value(bb_rec *g, void *u) {
  (void)u;
  bb_value never = {0};
  bb_rec_output(g, "y", never);
}
static void omitted_outside_backend(bb_rec *g, void *u) {
  (void)u;
  bb_rec_model_forward(g, &MODEL, BB_VALUE_OMITTED);
}
static void output_twice(bb_rec *g, void *u) {
  (void)u;
  bb_value x = x_of(g);
  bb_rec_output(g, "y", x);
  bb_rec_output(g, "y", bb_rec_pass_through(g, x));
}
static void net_out_twice(bb_rec *g, void *u) {
  (void)u;
  bb_value x = x_of(g), peers = bb_rec_input(g, "peers", NULL);
  bb_rec_net_out(g, "p", peers, x);
  bb_rec_net_out(g, "p", peers, x);
}
static void blank_wire_name(bb_rec *g, void *u) {
  (void)u;
  bb_rec_net_in(g, "Other module.port", BB_TYPE_TENSOR_F32, NULL);
}
static void piped_wire_name(bb_rec *g, void *u) {
  (void)u;
  bb_value x = x_of(g), peers = bb_rec_input(g, "peers", NULL);
  bb_rec_net_out_wire(g, "p", "a|b", peers, x);
}
static void no_wire_name(bb_rec *g, void *u) {
  (void)u;
  bb_value x = x_of(g), peers = bb_rec_input(g, "peers", NULL);
  bb_rec_net_out_wire(g, "p", NULL, peers, x);
}
static void bad_net_in_type(bb_rec *g, void *u) {
  (void)u;
  bb_rec_net_in(g, "M.p", "bb.peer_id,bb.trigger", NULL);
}
static void port_clashes_with_input(bb_rec *g, void *u) {
  (void)u;
  bb_rec_output(g, "x", bb_rec_pass_through(g, x_of(g)));
}
static void input_clashes_with_port(bb_rec *g, void *u) {
  (void)u;
  bb_rec_output(g, "y", x_of(g));
  bb_rec_input(g, "y", NULL);
}
static void input_retyped(bb_rec *g, void *u) {
  (void)u;
  bb_rec_input(g, "x", BB_TYPE_PEER_ID);
  bb_rec_input(g, "x", BB_TYPE_TRIGGER);
}
static void unknown_method(bb_rec *g, void *u) {
  (void)u;
  bb_value x = x_of(g), out;
  bb_rec_role_call(g, &MODEL, "Foward", &x, 1, NULL, 0, &out, 1);
}
static void method_of_other_role(bb_rec *g, void *u) {
  (void)u;
  bb_rec_model_forward(g, &INDEX, x_of(g));
}
static void protocol_method(bb_rec *g, void *u) {
  (void)u;
  bb_value out;
  bb_rec_role_call(g, &PROTOCOL, "Announce", NULL, 0, NULL, 0, &out, 1);
}
static void wrong_arity(bb_rec *g, void *u) {
  (void)u;
  bb_value in[2] = {x_of(g), x_of(g)}, out;
  bb_rec_role_call(g, &MODEL, "Forward", in, 2, NULL, 0, &out, 1);
}
static void missing_attribute(bb_rec *g, void *u) {
  (void)u;
  bb_value x = x_of(g), out;
  bb_rec_role_call(g, &INDEX, "Search", &x, 1, NULL, 0, &out, 1);
}
static void stray_attribute(bb_rec *g, void *u) {
  (void)u;
  bb_value x = x_of(g), out;
  bb_op_attr a = BB_OP_ATTR_INT("k", 3);
  bb_rec_role_call(g, &MODEL, "Forward", &x, 1, &a, 1, &out, 1);
}
static void backend_without_output(bb_rec *g, void *u) {
  (void)u;
  bb_value x = x_of(g);
  bb_rec_role_call(g, &COMPUTE, "Relu", &x, 1, NULL, 0, NULL, 0);
}
static void attribute_twice(bb_rec *g, void *u) {
  (void)u;
  bb_value x = x_of(g);
  bb_op_attr a[] = {BB_OP_ATTR_INT("axis", 0), BB_OP_ATTR_INT("axis", 1)};
  bb_rec_backend(g, &COMPUTE, "Softmax", &x, 1, a, 2);
}
static void graph_attribute(bb_rec *g, void *u) {
  (void)u;
  bb_value x = x_of(g);
  bb_op_attr a = {.name = "body", .type = BB_ATTR_GRAPH};
  bb_rec_backend(g, &COMPUTE, "Identity", &x, 1, &a, 1);
}
static void slot_with_two_roles(bb_rec *g, void *u) {
  (void)u;
  bb_value x = x_of(g);
  bb_rec_model_forward(g, &MODEL, x);
  bb_rec_index_add(g, &MODEL_AS_INDEX, x);
}
static void peer_class_on_model(bb_rec *g, void *u) {
  (void)u;
  bb_rec_model_forward(g, &CLASSY_MODEL, x_of(g));
}
static void bad_slot_name(bb_rec *g, void *u) {
  (void)u;
  bb_rec_model_forward(g, &BAD_SLOT_NAME, x_of(g));
}
static void bad_peer_class(bb_rec *g, void *u) {
  (void)u;
  bb_rec_peer_selector_current_view(g, &BAD_CLASS);
}
static void minted_input_name(bb_rec *g, void *u) {
  (void)u;
  bb_rec_input(g, "v3", NULL);
}
static void reserved_port_name(bb_rec *g, void *u) {
  (void)u;
  bb_rec_output(g, "y__recv_0", x_of(g));
}
static void spaced_port_name(bb_rec *g, void *u) {
  (void)u;
  bb_rec_net_out(g, "my port", x_of(g), x_of(g));
}
static void missing_name(bb_rec *g, void *u) {
  (void)u;
  bb_rec_input(g, NULL, NULL);
}
static void bad_type(bb_rec *g, void *u) {
  (void)u;
  bb_rec_input(g, "x", "bb.peer_id,bb.trigger");
}
static void not_a_submodule(bb_rec *g, void *u) {
  (void)u;
  bb_rec_call(g, &LEAF, (bb_binding[]){{"a", x_of(g)}}, 1);
}
static void unbound_input(bb_rec *g, void *u) {
  (void)u;
  bb_rec_call(g, &LEAF, NULL, 0);
}
static void unknown_binding(bb_rec *g, void *u) {
  (void)u;
  bb_value x = x_of(g);
  bb_rec_call(g, &LEAF, (bb_binding[]){{"a", x}, {"zzz", x}}, 2);
}
static void binding_twice(bb_rec *g, void *u) {
  (void)u;
  bb_value x = x_of(g);
  bb_rec_call(g, &LEAF, (bb_binding[]){{"a", x}, {"a", x}}, 2);
}
static void second_call_unbound(bb_rec *g, void *u) {
  (void)u;
  bb_rec_call(g, &LEAF, (bb_binding[]){{"a", x_of(g)}}, 1);
  bb_rec_call(g, &LEAF, NULL, 0);
}
static void binding_type_clash(bb_rec *g, void *u) {
  (void)u;
  bb_value t = bb_rec_input(g, "t", bb_tensor_type(BB_DTYPE_FLOAT));
  bb_rec_call(g, &TYPED_LEAF, (bb_binding[]){{"peer", t}}, 1);
}
static void recursion(bb_rec *g, void *u) {
  (void)u;
  bb_rec_call(g, &SELF_CALLER, NULL, 0);
}
static void two_modules_one_name(bb_rec *g, void *u) {
  (void)u;
  bb_value x = x_of(g);
  bb_rec_call(g, &LEAF, (bb_binding[]){{"a", x}}, 1);
  bb_rec_call(g, &LEAF_TWIN, (bb_binding[]){{"a", x}}, 1);
}
static void empty_submodule(bb_rec *g, void *u) {
  (void)u;
  bb_rec_call(g, &EMPTY, NULL, 0);
}
static void unknown_call_port(bb_rec *g, void *u) {
  (void)u;
  bb_rec_call_output(g, bb_rec_call(g, &LEAF, (bb_binding[]){{"a", x_of(g)}}, 1), "nope");
}
static void foreign_call(bb_rec *g, void *u) {
  (void)u;
  bb_call forged = {g, 42};
  bb_rec_call_output(g, forged, "b");
}
static void bootstrap_call_in_body(bb_rec *g, void *u) {
  (void)u;
  bb_rec_call_bootstrap(g, &LEAF, NULL, 0);
}
static void output_of_missing_bootstrap(bb_rec *g, void *u) {
  (void)u;
  bb_rec_call_output(g, bb_rec_call_bootstrap(g, &LEAF, NULL, 0), "b");
}
static void lookup_missing_port(bb_rec *g, void *u) {
  (void)u;
  bb_rec_lookup_output(g, "nope");
}
static void tensor_peers(bb_rec *g, void *u) {
  (void)u;
  bb_value t = bb_rec_input(g, "t", bb_tensor_type(BB_DTYPE_FLOAT));
  bb_rec_net_out(g, "p", t, t);
}
static void vector_as_single_peer(bb_rec *g, void *u) {
  (void)u;
  bb_rec_announce(g, bb_rec_input(g, "servers", BB_TYPE_PEER_ID_VEC));
}
static void empty_bundle(bb_rec *g, void *u) {
  (void)u;
  bb_rec_bundle(g, NULL, 0);
}
static void unbundle_tensor(bb_rec *g, void *u) {
  (void)u;
  bb_value parts[1];
  const char *types[1] = {BB_TYPE_TRIGGER};
  bb_rec_unbundle(g, bb_rec_input(g, "t", bb_tensor_type(BB_DTYPE_INT32)), types, parts, 1);
}
static void short_literal(bb_rec *g, void *u) {
  (void)u;
  static const int64_t dims[1] = {3};
  static const float data[2] = {1, 2};
  bb_literal lit = {BB_DTYPE_FLOAT, dims, 1, data, sizeof data};
  bb_rec_constant(g, "weights", NULL, &lit);
}
static void string_literal(bb_rec *g, void *u) {
  (void)u;
  bb_literal lit = {BB_DTYPE_STRING, NULL, 0, NULL, 0};
  bb_rec_constant(g, "names", NULL, &lit);
}
static void negative_interval(bb_rec *g, void *u) {
  (void)u;
  bb_rec_interval(g, -1);
}
static void empty_gate(bb_rec *g, void *u) {
  (void)u;
  bb_rec_gate_dispatch(g, NULL, 0);
}
static void author_error(bb_rec *g, void *u) {
  (void)u;
  bb_rec_fail(g, BB_ERR_LIMIT, "too many layers (%d)", 99);
}
static void first_error_wins(bb_rec *g, void *u) {
  (void)u;
  bb_rec_lookup_output(g, "first");
  CHECK(bb_rec_failed(g));
  bb_rec_lookup_output(g, "second"); /* ignored, and so is everything after */
  CHECK(bb_rec_model_forward(g, &MODEL, x_of(g)).name == NULL);
}

/* body records a node; the bootstrap uses a value of the body */
static bb_value body_value;
static void body_keeps_value(bb_rec *g, void *u) {
  (void)u;
  body_value = x_of(g);
  bb_rec_output(g, "y", body_value);
}
static void bootstrap_uses_body_value(bb_rec *g, void *u) {
  (void)u;
  bb_rec_model_forward(g, &MODEL, body_value);
}

typedef struct misuse {
  const char *module;
  bb_module_fn body, bootstrap;
  bool no_submodules;
  int code;
  const char *const *fragments;
} misuse;

static const misuse CASES[] = {
    {"T", value_from_parent, NULL, false, BB_ERR_INVALID_ARGUMENT,
     STRS("module 'Capture': ", "input of PassThrough is value 'x' of module 'T'", "input binding")},
    {"T", call_output_in_other_function, NULL, false, BB_ERR_INVALID_ARGUMENT,
     STRS("module 'CallReader': ", "output port 'b' of a call made in another function")},
    {"T", empty_value, NULL, false, BB_ERR_INVALID_ARGUMENT,
     STRS("module 'T': ", "output port 'y' is an empty value")},
    {"T", omitted_outside_backend, NULL, false, BB_ERR_INVALID_ARGUMENT,
     STRS("input 0 of Forward", "BB_VALUE_OMITTED")},
    {"T", output_twice, NULL, false, BB_ERR_EXISTS, STRS("module 'T': output port 'y' is declared twice")},
    {"T", net_out_twice, NULL, false, BB_ERR_EXISTS, STRS("module 'T': network port 'p' is declared twice")},
    {"T", blank_wire_name, NULL, false, BB_ERR_INVALID_ARGUMENT,
     STRS("wire name 'Other module.port' is not 1 to 255 printable characters without blanks or '|'")},
    {"T", piped_wire_name, NULL, false, BB_ERR_INVALID_ARGUMENT, STRS("wire name 'a|b'")},
    {"T", no_wire_name, NULL, false, BB_ERR_INVALID_ARGUMENT, STRS("network port 'p' needs a wire name")},
    {"T", bad_net_in_type, NULL, false, BB_ERR_INVALID_ARGUMENT, STRS("bb.peer_id,bb.trigger")},
    {"T", port_clashes_with_input, NULL, false, BB_ERR_EXISTS, STRS("output port 'x' clashes with a value")},
    {"T", input_clashes_with_port, NULL, false, BB_ERR_EXISTS, STRS("input 'y' clashes with a value")},
    {"T", input_retyped, NULL, false, BB_ERR_TYPE,
     STRS("input 'x' declared again as bb.trigger", "declared bb.peer_id")},
    {"T", unknown_method, NULL, false, BB_ERR_NOT_FOUND,
     STRS("module 'T': Model slot 'model' has no method 'Foward'",
          "Forward, Backward, ComputeLoss, ApplyDelta, LoadParameters, Params")},
    {"T", method_of_other_role, NULL, false, BB_ERR_NOT_FOUND, STRS("Index slot 'index' has no method 'Forward'")},
    {"T", protocol_method, NULL, false, BB_ERR_NOT_FOUND,
     STRS("Protocol slot 'registry' has no method 'Announce'", "bb_rec_announce")},
    {"T", wrong_arity, NULL, false, BB_ERR_INVALID_ARGUMENT,
     STRS("Model.Forward (slot 'model') takes 1 inputs", "called with 2")},
    {"T", missing_attribute, NULL, false, BB_ERR_INVALID_ARGUMENT,
     STRS("Index.Search (slot 'index') needs the INT attribute 'k'")},
    {"T", stray_attribute, NULL, false, BB_ERR_INVALID_ARGUMENT,
     STRS("Model.Forward", "takes no attributes", "'k'")},
    {"T", backend_without_output, NULL, false, BB_ERR_INVALID_ARGUMENT,
     STRS("Backend slot 'compute'", "at least one output")},
    {"T", attribute_twice, NULL, false, BB_ERR_EXISTS, STRS("attribute 'axis' of Softmax is given twice")},
    {"T", graph_attribute, NULL, false, BB_ERR_UNSUPPORTED, STRS("attribute 'body' of Identity has type GRAPH")},
    {"T", slot_with_two_roles, NULL, false, BB_ERR_EXISTS,
     STRS("slot 'model' has role Model; it cannot also have role Index")},
    {"T", peer_class_on_model, NULL, false, BB_ERR_INVALID_ARGUMENT, STRS("Model slot 'classy' has a peer_class")},
    {"T", bad_slot_name, NULL, false, BB_ERR_INVALID_ARGUMENT, STRS("Model slot name '1model'")},
    {"T", bad_peer_class, NULL, false, BB_ERR_INVALID_ARGUMENT,
     STRS("PeerSelector slot 'sampler' has peer class 'no class'")},
    {"T", minted_input_name, NULL, false, BB_ERR_INVALID_ARGUMENT,
     STRS("module 'T': input name 'v3' is not allowed", "v<digits>")},
    {"T", reserved_port_name, NULL, false, BB_ERR_INVALID_ARGUMENT,
     STRS("output port name 'y__recv_0' is not allowed")},
    {"T", spaced_port_name, NULL, false, BB_ERR_INVALID_ARGUMENT,
     STRS("network port name 'my port' is not allowed")},
    {"T", missing_name, NULL, false, BB_ERR_INVALID_ARGUMENT, STRS("input name is missing")},
    {"T", bad_type, NULL, false, BB_ERR_INVALID_ARGUMENT, STRS("type 'bb.peer_id,bb.trigger' is not a denotation")},
    {"T", not_a_submodule, NULL, true, BB_ERR_NOT_FOUND,
     STRS("module 'T': calls module 'Leaf', which is not one of its submodules")},
    {"T", unbound_input, NULL, false, BB_ERR_NOT_FOUND, STRS("module 'Leaf': input 'a' is not bound by the call")},
    {"T", unknown_binding, NULL, false, BB_ERR_NOT_FOUND, STRS("module 'T': module 'Leaf' has no input 'zzz'")},
    {"T", binding_twice, NULL, false, BB_ERR_EXISTS, STRS("input 'a' of module 'Leaf' is bound twice")},
    {"T", second_call_unbound, NULL, false, BB_ERR_NOT_FOUND,
     STRS("module 'T': input 'a' of module 'Leaf' is not bound")},
    {"T", binding_type_clash, NULL, false, BB_ERR_TYPE,
     STRS("module 'TypedLeaf': input 'peer' is declared bb.peer_id",
          "binds 't' of type ai.bytesandbrains.tensor.f32")},
    {"T", recursion, NULL, false, BB_ERR_INVALID_ARGUMENT,
     STRS("module 'SelfCaller': calls 'SelfCaller', which is already being recorded")},
    {"T", two_modules_one_name, NULL, false, BB_ERR_EXISTS, STRS("a different module of that name")},
    {"T", empty_submodule, NULL, false, BB_ERR_INVALID_ARGUMENT, STRS("module 'Empty' recorded nothing")},
    {"T", nothing, NULL, false, BB_ERR_INVALID_ARGUMENT, STRS("module 'T' recorded nothing")},
    {"T", unknown_call_port, NULL, false, BB_ERR_NOT_FOUND, STRS("module 'Leaf' has no output port 'nope'")},
    {"T", foreign_call, NULL, false, BB_ERR_INVALID_ARGUMENT, STRS("a call that is not from this recording")},
    {"T", bootstrap_call_in_body, NULL, false, BB_ERR_INVALID_ARGUMENT,
     STRS("bootstrap of module 'Leaf' outside a bootstrap callback")},
    {"T", body_keeps_value, output_of_missing_bootstrap, false, BB_ERR_NOT_FOUND,
     STRS("module 'T' bootstrap: ", "module 'Leaf' recorded no bootstrap")},
    {"T", lookup_missing_port, NULL, false, BB_ERR_NOT_FOUND, STRS("no output port 'nope' has been declared")},
    {"T", tensor_peers, NULL, false, BB_ERR_TYPE,
     STRS("the peers of network port 'p' are value 't'", "expected bb.peer_id")},
    {"T", vector_as_single_peer, NULL, false, BB_ERR_TYPE,
     STRS("the peer of Announce is value 'servers' of type bb.peer_id_vec")},
    {"T", empty_bundle, NULL, false, BB_ERR_INVALID_ARGUMENT, STRS("bundle needs at least one part")},
    {"T", unbundle_tensor, NULL, false, BB_ERR_TYPE, STRS("unbundle of value 't'", "not a composite")},
    {"T", short_literal, NULL, false, BB_ERR_INVALID_ARGUMENT,
     STRS("Constant: 8 data bytes given, the dims need 12")},
    {"T", string_literal, NULL, false, BB_ERR_UNSUPPORTED, STRS("element type 8 cannot be a literal")},
    {"T", negative_interval, NULL, false, BB_ERR_INVALID_ARGUMENT, STRS("Interval period -1 ns is negative")},
    {"T", empty_gate, NULL, false, BB_ERR_INVALID_ARGUMENT, STRS("GateDispatch needs at least one input")},
    {"T", author_error, NULL, false, BB_ERR_LIMIT, STRS("module 'T': too many layers (99)")},
    {"T", first_error_wins, NULL, false, BB_ERR_NOT_FOUND, STRS("'first'")},
    {"T", body_keeps_value, bootstrap_uses_body_value, false, BB_ERR_INVALID_ARGUMENT,
     STRS("module 'T' bootstrap: input 0 of Forward is value 'x' of module 'T', which this function cannot see")},
    {"Bad-Name", body_keeps_value, NULL, false, BB_ERR_INVALID_ARGUMENT,
     STRS("module name 'Bad-Name' is not allowed")},
    {"T__bootstrap", body_keeps_value, NULL, false, BB_ERR_INVALID_ARGUMENT, STRS("module name 'T__bootstrap'")},
};

static void test_each_misuse(void) {
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
    const misuse *c = &CASES[i];
    bb_module m = {sizeof(bb_module), c->module, c->body, c->bootstrap, NULL, SUBS, c->no_submodules ? 0 : N_SUBS};
    int before = bb_test_failures;
    dt_build_fails(&m, c->code, c->fragments);
    if (bb_test_failures != before) fprintf(stderr, "    (case %zu: %s)\n", i, c->fragments[0]);
  }
  CHECK(bb_rec_failed(NULL));
}

/* A value kept from an earlier build is refused, even while that model is alive. */
static bb_value kept;
static int build_no;
static void keep_then_reuse(bb_rec *g, void *u) {
  (void)u;
  if (build_no++ == 0) {
    kept = x_of(g);
    bb_rec_output(g, "y", kept);
  } else {
    bb_rec_output(g, "y", kept);
  }
}

static void test_value_from_another_build(void) {
  bb_module m = {sizeof(bb_module), "T", keep_then_reuse, NULL, NULL, NULL, 0};
  build_no = 0;
  bb_model *first = dt_build(&m);
  dt_build_fails(&m, BB_ERR_INVALID_ARGUMENT,
                 STRS("module 'T': the value of output port 'y' is not a value of this recording"));
  bb_model_free(first);
}

static const bb_module UNNAMED = {sizeof(bb_module), NULL, leaf_body, NULL, NULL, NULL, 0};
static const bb_module *const UNNAMED_ONLY[] = {&UNNAMED};
static void call_unnamed(bb_rec *g, void *u) {
  (void)u;
  bb_rec_call(g, &UNNAMED, NULL, 0);
}

static void test_malformed_modules(void) {
  bb_model *out = NULL;
  bb_error err;
  CHECK_EQ_INT(bb_module_build(NULL, NULL, &out, &err), BB_ERR_INVALID_ARGUMENT);
  bb_module no_size = {0, "T", body_keeps_value, NULL, NULL, NULL, 0};
  dt_build_fails(&no_size, BB_ERR_INVALID_ARGUMENT, STRS("module 'T' has struct_size 0", "sizeof(bb_module)"));
  bb_module no_body = {sizeof(bb_module), "T", NULL, NULL, NULL, NULL, 0};
  dt_build_fails(&no_body, BB_ERR_INVALID_ARGUMENT, STRS("module 'T' has no body callback"));
  bb_module no_array = {sizeof(bb_module), "T", body_keeps_value, NULL, NULL, NULL, 2};
  dt_build_fails(&no_array, BB_ERR_INVALID_ARGUMENT, STRS("counts 2 submodules but gives no array"));
  /* a malformed sub-module is reported when it is called */
  bb_module caller = {sizeof(bb_module), "T", call_unnamed, NULL, NULL, UNNAMED_ONLY, 1};
  dt_build_fails(&caller, BB_ERR_INVALID_ARGUMENT, STRS("module 'T': module name is missing"));
}

int main(void) {
  RUN(test_each_misuse);
  RUN(test_value_from_another_build);
  RUN(test_malformed_modules);
  return bb_test_finish();
}
