/* Every compile error kind that can be raised, each triggered by a minimal bad graph;
 * the kind is the assertion, the message must name the offending node, value, slot or
 * class. */
#include "cctest.h"
#include "bb/common.h"

static const bb_slot LOADER = {BB_ROLE_DATA_SOURCE, "loader", NULL};
static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot INDEX = {BB_ROLE_INDEX, "primary_index", NULL};
static const bb_slot BACKEND = {BB_ROLE_BACKEND, "compute", NULL};

static void quickstart_body(bb_rec *g, void *user) {
  (void)user;
  bb_value batch, labels;
  bb_rec_data_source_next_batch(g, &LOADER, &batch, &labels);
  bb_rec_model_forward(g, &MODEL, batch);
  bb_rec_output(g, "params", bb_rec_model_params(g, &MODEL));
}
static const bb_module QUICKSTART = {sizeof(bb_module), "Quickstart", quickstart_body, NULL, NULL, NULL, 0};

static void index_body(bb_rec *g, void *user) {
  (void)user;
  bb_value q = bb_rec_input(g, "query", NULL);
  bb_rec_output(g, "hits", bb_rec_index_search(g, &INDEX, q, 3));
}
static const bb_module INDEXED = {sizeof(bb_module), "Indexed", index_body, NULL, NULL, NULL, 0};

static void cross_body(bb_rec *g, void *user) {
  (void)user;
  bb_value peers = bb_rec_input(g, "peers", NULL);
  bb_value local = bb_rec_input(g, "local", NULL);
  bb_rec_net_out(g, "port", peers, local);
  bb_value both[] = {bb_rec_lookup_output(g, "port"), local};
  bb_rec_gate_dispatch(g, both, 2);
}
static const bb_module CROSS = {sizeof(bb_module), "Cross", cross_body, NULL, NULL, NULL, 0};

static void mixed_body(bb_rec *g, void *user) {
  (void)user;
  bb_value batch, labels;
  bb_rec_data_source_next_batch(g, &LOADER, &batch, &labels);
  bb_value y = bb_rec_model_forward(g, &MODEL, batch);
  bb_value ones = bb_rec_backend(g, &BACKEND, "Relu", &y, 1, NULL, 0);
  bb_value ins[] = {y, ones};
  bb_rec_output(g, "sum", bb_rec_backend(g, &BACKEND, "Add", ins, 2, NULL, 0));
}
static const bb_module MIXED = {sizeof(bb_module), "Mixed", mixed_body, NULL, NULL, NULL, 0};

static void send_body(bb_rec *g, void *user) {
  (void)user;
  bb_value peers = bb_rec_input(g, "peers", NULL);
  bb_value batch, labels;
  bb_rec_data_source_next_batch(g, &LOADER, &batch, &labels);
  bb_rec_net_out(g, "port", peers, batch);
  bb_rec_output(g, "got", bb_rec_pass_through(g, bb_rec_lookup_output(g, "port")));
}
static const bb_module SENDER = {sizeof(bb_module), "Sender", send_body, NULL, NULL, NULL, 0};

static bb_compiler *new_compiler(void) { return bb_compiler_new(NULL); }

static bb_compiler *quickstart_compiler(bool bind_model) {
  bb_compiler *c = new_compiler();
  ct_declare(c, "Loader", F32);
  ct_declare(c, "Mlp", F32);
  ct_bind(c, BB_ROLE_DATA_SOURCE, "loader", "Loader");
  if (bind_model) ct_bind(c, BB_ROLE_MODEL, "model", "Mlp");
  return c;
}

/* A one-function model with a role node carrying the given metadata (pairs). */
static bb_model *role_model(const char *domain, const char *const *meta) {
  bb_function *f;
  bb_model *m = ct_model("Hand", &f);
  bb_ir_node *n = ct_node(m, f, "Op", domain, NONE, STRS("y"));
  for (size_t i = 0; meta[i]; i += 2) bb_kv_append(m, &n->metadata, meta[i], meta[i + 1]);
  return m;
}

static void test_empty_function_table(void) {
  bb_model *m = bb_model_new(NULL);
  bb_compiler *c = new_compiler();
  ct_compile_fails(c, m, BB_COMPILE_EMPTY_FUNCTION_TABLE, NULL);
  bb_compiler_free(c);
  bb_model_free(m);
}

static void test_bad_input(void) {
  bb_compiler *c = new_compiler();
  uint8_t junk[] = {0xff, 0xff, 0xff};
  uint8_t *out;
  size_t len;
  bb_error err;
  CHECK(bb_compiler_compile(c, junk, sizeof junk, &out, &len, &err) == BB_ERR_MALFORMED);
  CHECK_EQ_INT(bb_compiler_error_kind(c), BB_COMPILE_BAD_INPUT);
  CHECK(strncmp(err.message, "BadInput: ", 10) == 0);
  /* err may be NULL: the code alone still says what happened */
  CHECK(bb_compiler_compile(c, junk, sizeof junk, &out, &len, NULL) == BB_ERR_MALFORMED);
  bb_compiler_free(c);
}

static void test_ir_version_mismatch(void) {
  bb_model *m = dt_build(&QUICKSTART);
  bb_compiler *c = quickstart_compiler(true);
  if (m) {
    bb_kv_append(m, &m->metadata, "ai.bytesandbrains.ir_version", "2");
    ct_compile_fails(c, m, BB_COMPILE_IR_VERSION_MISMATCH, STRS("\"2\"", "targets 1"));
    /* a compiler told to target version 2 takes the model, and refuses one stamped 1 */
    bb_compiler_set_target_version(c, 2);
    bb_model *out = ct_compile(c, m);
    CHECK(out != NULL);
    bb_model_free(out);
    bb_kv_upsert(m, &m->metadata, "ai.bytesandbrains.ir_version", "1");
    ct_compile_fails(c, m, BB_COMPILE_IR_VERSION_MISMATCH, STRS("\"1\"", "targets 2"));
  }
  bb_compiler_free(c);
  bb_model_free(m);
}

static void test_unbound_placeholder(void) {
  bb_model *m = dt_build(&QUICKSTART);
  bb_compiler *c = quickstart_compiler(false);
  if (m) ct_compile_fails(c, m, BB_COMPILE_UNKNOWN_SLOT_ID, STRS("slot_id 1", "\"model\"", "Forward"));
  bb_compiler_free(c);
  bb_model_free(m);
}

static void test_binding_role_mismatch(void) {
  bb_model *m = dt_build(&QUICKSTART);
  bb_compiler *c = quickstart_compiler(false);
  ct_bind(c, BB_ROLE_INDEX, "model", "Flat");
  if (m) ct_compile_fails(c, m, BB_COMPILE_BINDING_ROLE_MISMATCH, STRS("\"model\"", "IndexRuntime"));
  bb_compiler_free(c);
  bb_model_free(m);
}

static void test_ambiguous_role_binding(void) {
  bb_model *m = role_model(BB_DOMAIN_ROLE_MODEL, STRS(BB_KEY_REQUIRED_TRAIT, "ModelRuntime", BB_KEY_SLOT_ID, "0"));
  bb_compiler *c = new_compiler();
  ct_bind(c, BB_ROLE_MODEL, "a", "M");
  ct_bind(c, BB_ROLE_MODEL, "b", "M");
  ct_compile_fails(c, m, BB_COMPILE_AMBIGUOUS_ROLE_BINDING, STRS("ModelRuntime", "[a, b]"));
  bb_compiler_free(c);
  bb_model_free(m);
}

static void test_missing_required_trait(void) {
  bb_model *m = role_model(BB_DOMAIN_ROLE_MODEL, STRS(BB_KEY_SLOT_ID, "0"));
  bb_compiler *c = new_compiler();
  ct_compile_fails(c, m, BB_COMPILE_MISSING_REQUIRED_TRAIT_METADATA, STRS("Op#0"));
  bb_compiler_free(c);
  bb_model_free(m);
}

static void test_invalid_slot_id(void) {
  bb_model *m = role_model(BB_DOMAIN_ROLE_MODEL,
                           STRS(BB_KEY_REQUIRED_TRAIT, "ModelRuntime", BB_KEY_SLOT_ID, "x", BB_KEY_SLOT_NAME, "model"));
  bb_compiler *c = new_compiler();
  ct_bind(c, BB_ROLE_MODEL, "model", "M");
  ct_compile_fails(c, m, BB_COMPILE_INVALID_SLOT_ID, STRS("\"x\""));
  bb_compiler_free(c);
  bb_model_free(m);
}

static void test_unknown_role_runtime(void) {
  bb_model *m = role_model(BB_DOMAIN_FRAMEWORK, STRS(BB_KEY_REQUIRED_TRAIT, "ProtocolRuntime", BB_KEY_SLOT_ID, "0"));
  bb_compiler *c = new_compiler();
  ct_bind(c, BB_ROLE_PROTOCOL, "proto", "Gossip");
  ct_compile_fails(c, m, BB_COMPILE_UNKNOWN_ROLE_RUNTIME, STRS("ProtocolRuntime"));
  bb_compiler_free(c);
  bb_model_free(m);
}

static void test_codec_ports(void) {
  bb_compiler *c = new_compiler();
  ct_bind(c, BB_ROLE_CODEC, "codec", "Quant");
  bb_model *m = role_model(BB_DOMAIN_ROLE_CODEC,
                           STRS(BB_KEY_REQUIRED_TRAIT, "CodecRuntime", BB_KEY_SLOT_ID, "0", BB_KEY_SLOT_NAME, "codec"));
  ct_compile_fails(c, m, BB_COMPILE_MISSING_CODEC_PORT_METADATA, STRS("Op#0"));
  bb_model_free(m);
  m = role_model(BB_DOMAIN_ROLE_CODEC, STRS(BB_KEY_REQUIRED_TRAIT, "CodecRuntime", BB_KEY_SLOT_ID, "0",
                                            BB_KEY_SLOT_NAME, "codec", BB_KEY_CODEC_PORT, "x"));
  ct_compile_fails(c, m, BB_COMPILE_INVALID_CODEC_PORT, STRS("\"x\""));
  bb_model_free(m);
  bb_compiler_free(c);
}

static void test_validation(void) {
  bb_compiler *c = new_compiler();
  bb_function *f;
  bb_model *m = ct_model("V", &f);
  ct_node(m, f, "Frob", "com.acme", NONE, STRS("y"));
  ct_compile_fails(c, m, BB_COMPILE_UNKNOWN_OP, STRS("com.acme", "Frob"));
  bb_model_free(m);

  m = ct_model("V", &f);
  ct_node(m, f, "Relu", "", STRS("ghost"), STRS("y"));
  ct_compile_fails(c, m, BB_COMPILE_DANGLING_INPUT, STRS("`ghost`", "Relu#0"));
  bb_model_free(m);

  m = ct_model("V", &f);
  ct_node(m, f, "Constant", "", NONE, STRS("v"));
  ct_node(m, f, "Constant", "", NONE, STRS("v"));
  ct_compile_fails(c, m, BB_COMPILE_DUPLICATE_OUTPUT, STRS("`v`", "Constant#0", "Constant#1"));
  bb_model_free(m);

  m = ct_model("V", &f);
  bb_strlist_append(m, &f->inputs, "x");
  ct_node(m, f, "Relu", "", STRS("x"), STRS("y"));
  ct_compile_fails(c, m, BB_COMPILE_MISSING_TYPE_INFO, STRS("`x`"));
  bb_model_free(m);

  m = role_model(BB_DOMAIN_ROLE_MODEL, NONE);
  ct_compile_fails(c, m, BB_COMPILE_MALFORMED_SLOT_METADATA, STRS("Op#0"));
  bb_model_free(m);

  m = ct_model("V", &f);
  ct_node(m, f, "Relu", "", STRS("b"), STRS("a"));
  ct_node(m, f, "Relu", "", STRS("a"), STRS("b"));
  ct_compile_fails(c, m, BB_COMPILE_CYCLIC_GRAPH, STRS("Relu#0", "Relu#1"));
  bb_model_free(m);

  m = ct_model("V", &f);
  bb_opset_set(m, &f->opsets, "", 17);
  ct_node(m, f, "PassThrough", BB_DOMAIN_SYSCALL, NONE, STRS("y"));
  ct_compile_fails(c, m, BB_COMPILE_OPSET_NOT_IMPORTED, STRS(BB_DOMAIN_SYSCALL));
  bb_model_free(m);
  bb_compiler_free(c);
}

static void test_constant_without_value(void) {
  bb_compiler *c = new_compiler();
  static const char *const reasons[] = {"missing attribute", "not a TENSOR", "holds no tensor"};
  for (int r = 0; r < 3; r++) {
    bb_function *f;
    bb_model *m = ct_model("K", &f);
    bb_ir_node *n = ct_node(m, f, "Constant", BB_DOMAIN_SYSCALL, NONE, STRS("k"));
    if (r == 1) bb_attr_set_int(m, &n->attrs, "value", 3);
    if (r == 2) {
      bb_attr *a = bb_attr_set_tensor(m, &n->attrs, "value", bb_tensor_proto_new(m, "t", BB_DTYPE_FLOAT, 0, NULL));
      if (a) a->t = NULL;
    }
    const char *frag[] = {reasons[r], "Constant", NULL};
    ct_compile_fails(c, m, BB_COMPILE_EXPANSION_FAILED, frag);
    bb_model_free(m);
  }
  bb_compiler_free(c);
}

static void test_cross_class_dataflow(void) {
  bb_model *m = dt_build(&CROSS);
  bb_compiler *c = new_compiler();
  if (m) ct_compile_fails(c, m, BB_COMPILE_CROSS_CLASS_DATAFLOW, STRS("GateDispatch", "`peers`", "`@self`"));
  bb_compiler_free(c);
  bb_model_free(m);
}

/* The clients reply to peers picked on the server side: that peer list never reaches
 * them. */
static const bb_slot PICKER = {BB_ROLE_PEER_SELECTOR, "picker", "server"};
static void leaky_body(bb_rec *g, void *user) {
  (void)user;
  bb_value clients = bb_rec_input(g, "clients", NULL);
  bb_value servers = bb_rec_peer_selector_sample(g, &PICKER, 1);
  bb_rec_net_out(g, "ask", clients, bb_rec_input(g, "question", NULL));
  bb_rec_net_out(g, "reply", servers, bb_rec_pass_through(g, bb_rec_lookup_output(g, "ask")));
}
static const bb_module LEAKY = {sizeof(bb_module), "Leaky", leaky_body, NULL, NULL, NULL, 0};

static void test_value_crossing_classes(void) {
  bb_model *m = dt_build(&LEAKY);
  bb_compiler *c = new_compiler();
  ct_bind(c, BB_ROLE_PEER_SELECTOR, "picker", "Random");
  bb_compiler_set_permissive_types(c, true);
  if (m) ct_compile_fails(c, m, BB_COMPILE_CROSS_CLASS_DATAFLOW, STRS("Send", "`clients`", "`@self`"));
  bb_compiler_free(c);
  bb_model_free(m);
}

static void test_dependencies(void) {
  bb_model *m = dt_build(&INDEXED);
  bb_component_dep deps[] = {{BB_ROLE_BACKEND, "compute"}};
  bb_component_port ports[] = {{"vector", F32}};
  bb_component_decl counting = {sizeof counting, "CountingIndex", ports, 1, deps, 1};
  bb_error err;
  bb_compiler *c = new_compiler();
  bb_compiler_declare_component(c, &counting, &err);
  ct_bind(c, BB_ROLE_INDEX, "primary_index", "CountingIndex");
  bb_compiler_set_permissive_types(c, true);
  if (m) ct_compile_fails(c, m, BB_COMPILE_UNBOUND_DEPENDENCY, STRS("CountingIndex", "Backend", "\"compute\""));
  ct_bind(c, BB_ROLE_MODEL, "compute", "Mlp");
  if (m) ct_compile_fails(c, m, BB_COMPILE_DEPENDENCY_ROLE_MISMATCH, STRS("Backend", "ModelRuntime", "\"compute\""));
  bb_compiler_free(c);
  /* bound right, it compiles; the dependency-only slot gets -1 */
  c = new_compiler();
  bb_compiler_declare_component(c, &counting, &err);
  ct_bind(c, BB_ROLE_INDEX, "primary_index", "CountingIndex");
  ct_bind(c, BB_ROLE_BACKEND, "compute", "Cpu");
  bb_compiler_set_permissive_types(c, true);
  bb_model *out = m ? ct_compile(c, m) : NULL;
  if (out) CHECK_STR(ct_binding(out, ct_partition(out, "Indexed"), "compute"), "Backend|Cpu|-1");
  bb_model_free(out);
  bb_compiler_free(c);
  bb_model_free(m);
}

/* root R with bootstrap functions: B0 = R__bootstrap calling `first`, B1 calling `second` */
static bb_model *bootstrap_model(const char *first, const char *second) {
  bb_function *root;
  bb_model *m = ct_model("R", &root);
  ct_node(m, root, "PassThrough", BB_DOMAIN_SYSCALL, STRS("x"), STRS("y"));
  ct_input(m, root, "x", BB_TYPE_BYTES);
  const char *names[2] = {"R__bootstrap", "B1"};
  const char *calls[2] = {first, second};
  for (int i = 0; i < 2; i++) {
    bb_function *b = bb_function_new(m, names[i], BB_DOMAIN_MODULE);
    bb_kv_append(m, &b->metadata, BB_KEY_MODULE_PHASE, BB_MODULE_PHASE_BOOTSTRAP);
    bb_model_add_function(m, b);
    if (!calls[i]) continue;
    for (int k = 0; k < 2; k++) ct_node(m, b, calls[i], BB_DOMAIN_MODULE, NONE, NONE);
  }
  return m;
}

static void test_bootstrap_composition(void) {
  bb_compiler *c = new_compiler();
  bb_model *m = bootstrap_model("X", NULL);
  ct_compile_fails(c, m, BB_COMPILE_BOOTSTRAP_COMPOSITION_GAP, STRS("R__bootstrap", "`X`"));
  bb_model_free(m);
  m = bootstrap_model("B1", "R__bootstrap");
  ct_compile_fails(c, m, BB_COMPILE_BOOTSTRAP_COMPOSITION_CYCLE, STRS("[R__bootstrap, B1, R__bootstrap]"));
  bb_model_free(m);
  /* a chain of 5000 bootstrap functions is refused, not recursed through */
  bb_function *root;
  m = ct_model("R", &root);
  ct_node(m, root, "PassThrough", BB_DOMAIN_SYSCALL, STRS("x"), STRS("y"));
  ct_input(m, root, "x", BB_TYPE_BYTES);
  for (int i = 0; i < 5000; i++) {
    char name[32], next[32];
    snprintf(name, sizeof name, i ? "B%d" : "R__bootstrap", i);
    snprintf(next, sizeof next, "B%d", i + 1);
    bb_function *b = bb_function_new(m, name, BB_DOMAIN_MODULE);
    bb_kv_append(m, &b->metadata, BB_KEY_MODULE_PHASE, BB_MODULE_PHASE_BOOTSTRAP);
    bb_model_add_function(m, b);
    if (i < 4999)
      for (int k = 0; k < 2; k++) ct_node(m, b, next, BB_DOMAIN_MODULE, NONE, NONE);
  }
  ct_compile_fails(c, m, BB_COMPILE_INTERNAL, STRS("deeper than 1024"));
  bb_model_free(m);
  bb_compiler_free(c);
}

static bb_compiler *sender_compiler(void) {
  bb_compiler *c = new_compiler();
  ct_declare(c, "Loader", F32);
  ct_bind(c, BB_ROLE_DATA_SOURCE, "loader", "Loader");
  return c;
}

static void test_deadline_stage_disabled(void) {
  bb_model *m = dt_build(&SENDER);
  bb_compiler *c = sender_compiler();
  bb_error err;
  CHECK(bb_compiler_disable_pass(c, "insert_async_deadlines", &err) == 0);
  if (m) ct_compile_fails(c, m, BB_COMPILE_INTERNAL, STRS("deadline_ns but no DeadlineCheck", "Send"));
  bb_compiler_free(c);
  bb_model_free(m);
}

static void test_deadline_on_inputless_node(void) {
  bb_model *m = dt_build(&SENDER);
  bb_compiler *c = sender_compiler();
  if (m) {
    bb_function *f = m->functions.items[0];
    bb_ir_node *n = ct_node(m, f, "Interval", BB_DOMAIN_SYSCALL, NONE, STRS("tick"));
    bb_attr_set_int(m, &n->attrs, "deadline_ns", 5);
    ct_compile_fails(c, m, BB_COMPILE_RUNTIME_INCOMPLETE, STRS("Interval", "deadline_ns"));
  }
  bb_compiler_free(c);
  bb_model_free(m);
}

static void test_peer_send_without_tx_gates(void) {
  bb_model *m = dt_build(&SENDER);
  bb_compiler *c = sender_compiler();
  bb_error err;
  bb_compiler_disable_pass(c, "insert_peer_health_gate_tx", &err);
  bb_compiler_disable_pass(c, "insert_backoff_gate_tx", &err);
  if (m) {
    bb_function *f = m->functions.items[0];
    for (size_t i = 0; i < f->nodes.len; i++)
      if (strcmp(f->nodes.items[i]->op_type, "Send") == 0) bb_attr_set_string(m, &f->nodes.items[i]->attrs, "peer", "QmPeer");
    ct_compile_fails(c, m, BB_COMPILE_INTERNAL, STRS("PeerHealthGateTx"));
  }
  bb_compiler_free(c);
  bb_model_free(m);
}

static int boom(bb_model *model, bb_function *function, const char *peer_class, void *user, bb_error *err) {
  (void)model, (void)function, (void)peer_class, (void)user;
  return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "boom");
}

static void test_user_stage_error(void) {
  bb_model *m = dt_build(&QUICKSTART);
  bb_compiler *c = quickstart_compiler(true);
  bb_error err;
  CHECK(bb_compiler_add_pass(c, NULL, "s", boom, NULL, &err) == 0);
  if (m) ct_compile_fails(c, m, BB_COMPILE_INTERNAL, STRS("compiler stage `s` failed: boom"));
  /* removing it by name makes the compile pass again */
  CHECK(bb_compiler_disable_pass(c, "s", &err) == 0);
  bb_model *out = m ? ct_compile(c, m) : NULL;
  bb_model_free(out);
  bb_compiler_free(c);
  bb_model_free(m);
}

/* Functions that each call the next twice double at every level when inlined: the
 * compile stops at a node cap instead of exhausting memory. */
static void test_inline_blowup_capped(void) {
  bb_function *root;
  bb_model *m = ct_model("R", &root);
  ct_input(m, root, "x", BB_TYPE_BYTES);
  ct_node(m, root, "F1", BB_DOMAIN_MODULE, STRS("x"), STRS("y"));
  for (int i = 1; i <= 40; i++) {
    char name[16], next[16];
    snprintf(name, sizeof name, "F%d", i);
    snprintf(next, sizeof next, "F%d", i + 1);
    bb_function *f = bb_function_new(m, name, BB_DOMAIN_MODULE);
    bb_model_add_function(m, f);
    bb_strlist_append(m, &f->inputs, "a");
    bb_strlist_append(m, &f->outputs, "b");
    if (i < 40) {
      ct_node(m, f, next, BB_DOMAIN_MODULE, STRS("a"), STRS("b"));
      ct_node(m, f, next, BB_DOMAIN_MODULE, STRS("a"), STRS("c"));
    } else {
      ct_node(m, f, "Relu", "", STRS("a"), STRS("b"));
    }
  }
  bb_compiler *c = new_compiler();
  ct_compile_fails(c, m, BB_COMPILE_INTERNAL, STRS("would exceed", "nodes"));
  bb_compiler_free(c);
  bb_model_free(m);
}

static void test_dangling_call(void) {
  bb_function *f;
  bb_model *m = ct_model("D", &f);
  ct_node(m, f, "Missing", BB_DOMAIN_MODULE, NONE, NONE);
  bb_compiler *c = new_compiler();
  ct_compile_fails(c, m, BB_COMPILE_INTERNAL, STRS("`D", "missing function `Missing`"));
  bb_compiler_free(c);
  bb_model_free(m);
}

static void test_unresolved_type(void) {
  bb_model *m = dt_build(&QUICKSTART);
  bb_compiler *c = new_compiler();
  ct_bind(c, BB_ROLE_DATA_SOURCE, "loader", "Loader"); /* no storage declared */
  ct_bind(c, BB_ROLE_MODEL, "model", "Mlp");
  if (m) ct_compile_fails(c, m, BB_COMPILE_UNRESOLVED_TYPE, STRS("`v0`", "Quickstart"));
  bb_compiler_set_permissive_types(c, true);
  bb_model *out = m ? ct_compile(c, m) : NULL;
  bb_model_free(out);
  bb_compiler_free(c);
  bb_model_free(m);
}

static void test_mixed_precision(void) {
  bb_model *m = dt_build(&MIXED);
  bb_compiler *c = new_compiler();
  ct_declare(c, "Loader", F64);
  ct_declare(c, "Mlp64", F64);
  ct_bind(c, BB_ROLE_DATA_SOURCE, "loader", "Loader");
  ct_bind(c, BB_ROLE_MODEL, "model", "Mlp64");
  ct_bind(c, BB_ROLE_BACKEND, "compute", "Cpu");
  if (m) ct_compile_fails(c, m, BB_COMPILE_TYPE_CONSTRAINT_FAILED, STRS("Relu", F64, F32));
  bb_compiler_free(c);
  bb_model_free(m);
}

static void test_edge_storage_mismatch(void) {
  bb_model *m = dt_build(&SENDER);
  bb_compiler *c = sender_compiler();
  if (m) {
    bb_function *f = m->functions.items[0];
    bb_value_info *vi = bb_vilist_find(&f->value_infos, "port");
    if (vi) vi->type = bb_value_type_new(m, U8);
    ct_compile_fails(c, m, BB_COMPILE_INCOMPATIBLE_STORAGE_ON_EDGE, STRS(F32, U8, "Codec"));
  }
  bb_compiler_free(c);
  bb_model_free(m);
}

static void test_ambiguous_role(void) {
  bb_function *f;
  bb_model *m = ct_model("A", &f);
  bb_ir_node *a = ct_node(m, f, "Forward", BB_DOMAIN_ROLE_MODEL, NONE, STRS("y"));
  bb_kv_append(m, &a->metadata, "ai.bytesandbrains.concrete_type", "Mlp");
  bb_kv_append(m, &a->metadata, "ai.bytesandbrains.instance", "0");
  bb_ir_node *b = ct_node(m, f, "Params", BB_DOMAIN_ROLE_MODEL, NONE, STRS("z"));
  bb_kv_append(m, &b->metadata, BB_KEY_REQUIRED_TRAIT, "ModelRuntime");
  bb_kv_append(m, &b->metadata, BB_KEY_SLOT_ID, "4");
  bb_compiler *c = new_compiler();
  ct_bind(c, BB_ROLE_MODEL, "model", "Mlp");
  ct_compile_fails(c, m, BB_COMPILE_AMBIGUOUS_ROLE, STRS(BB_DOMAIN_ROLE_MODEL, "Mlp", "slot 4"));
  bb_compiler_free(c);
  bb_model_free(m);
}

static int inject_role_node(bb_model *model, bb_function *function, const char *peer_class, void *user, bb_error *err) {
  (void)peer_class, (void)user, (void)err;
  bb_ir_node *n = bb_ir_node_new(model, "Params", BB_DOMAIN_ROLE_MODEL, NULL);
  bb_kv_append(model, &n->metadata, BB_KEY_REQUIRED_TRAIT, "ModelRuntime");
  bb_kv_append(model, &n->metadata, BB_KEY_SLOT_ID, "9");
  bb_kv_append(model, &n->metadata, BB_KEY_SLOT_NAME, "late");
  return bb_nodelist_append(model, &function->nodes, n);
}

static void test_unbound_slot(void) {
  bb_model *m = dt_build(&QUICKSTART);
  bb_compiler *c = quickstart_compiler(true);
  bb_error err;
  bb_compiler_add_pass(c, NULL, "inject", inject_role_node, NULL, &err);
  if (m) ct_compile_fails(c, m, BB_COMPILE_UNBOUND_SLOT, STRS("Model", "\"late\""));
  bb_compiler_free(c);
  bb_model_free(m);
}

static void test_every_kind_named(void) {
  for (int k = 0; k < BB_COMPILE_ERROR_COUNT; k++) CHECK(strcmp(bb_compile_error_name((bb_compile_error)k), "Unknown") != 0);
  CHECK_STR(bb_compile_error_name(BB_COMPILE_UNKNOWN_SLOT_ID), "UnknownSlotId");
  CHECK_STR(bb_compile_error_name(BB_COMPILE_ERROR_COUNT), "Unknown");
}

int main(void) {
  RUN(test_empty_function_table);
  RUN(test_bad_input);
  RUN(test_ir_version_mismatch);
  RUN(test_unbound_placeholder);
  RUN(test_binding_role_mismatch);
  RUN(test_ambiguous_role_binding);
  RUN(test_missing_required_trait);
  RUN(test_invalid_slot_id);
  RUN(test_unknown_role_runtime);
  RUN(test_codec_ports);
  RUN(test_validation);
  RUN(test_constant_without_value);
  RUN(test_cross_class_dataflow);
  RUN(test_value_crossing_classes);
  RUN(test_dependencies);
  RUN(test_bootstrap_composition);
  RUN(test_deadline_stage_disabled);
  RUN(test_deadline_on_inputless_node);
  RUN(test_peer_send_without_tx_gates);
  RUN(test_user_stage_error);
  RUN(test_dangling_call);
  RUN(test_inline_blowup_capped);
  RUN(test_unresolved_type);
  RUN(test_mixed_precision);
  RUN(test_edge_storage_mismatch);
  RUN(test_ambiguous_role);
  RUN(test_unbound_slot);
  RUN(test_every_kind_named);
  return bb_test_finish();
}
