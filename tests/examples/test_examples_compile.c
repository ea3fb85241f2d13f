/* The reference and learning examples' Modules, recorded and compiled with their
 * default bindings from src/programs: the partitions, wire pairs, binding tables and
 * types each must compile into, the negative cases that apply at compile time,
 * deterministic bytes, and onnx.checker (full_check) natively. */
#include "compiler/cctest.h"
#include "programs/examples.h"

static const char *const NAMES[] = {"quickstart",
                                    "component_with_dependency",
                                    "custom_index",
                                    "multi_target_network",
                                    "federated_learning",
                                    "single_node_federated_learning",
                                    "custom_compiler_pass",
                                    "polymorphic_types",
                                    "federated_digits",
                                    "gossip_digits",
                                    "hierarchical_digits",
                                    "federated_cnn",
                                    "split_cnn"};
#define N_NAMES (sizeof NAMES / sizeof NAMES[0])

/* Compiles module `module` of example `name` twice (same bytes), decodes the artifact,
 * checks that it describes and (natively) that onnx.checker accepts it. */
static bb_model *compile_example(const char *name, size_t module) {
  const bb_example *ex = bb_example_find(name);
  CHECK_MSG(ex != NULL, "no example %s", name);
  if (!ex) return NULL;
  uint8_t *a = NULL, *b = NULL;
  size_t alen = 0, blen = 0;
  bb_error err;
  int rc = bb_example_compile(ex, module, &a, &alen, &err);
  CHECK_MSG(rc == 0, "%s[%zu]: %s", name, module, rc ? err.message : "");
  if (rc) return NULL;
  rc = bb_example_compile(ex, module, &b, &blen, &err);
  CHECK_MSG(rc == 0 && alen == blen && memcmp(a, b, alen) == 0, "%s[%zu]: two compiles differ", name, module);
  bb_buffer_free(NULL, b);
  bb_model *m = NULL;
  rc = bb_model_decode(a, alen, NULL, NULL, &m, &err);
  bb_buffer_free(NULL, a);
  CHECK_MSG(rc == 0, "%s: artifact does not decode: %s", name, rc ? err.message : "");
  if (rc) return NULL;
  CHECK_STR(bb_kv_get(&m->metadata, "ai.bytesandbrains.compiled"), "v2");
  char *text = NULL;
  CHECK_MSG(bb_artifact_describe(m, BB_ARTIFACT_JSON, &text, NULL, &err) == 0, "%s: describe: %s", name, err.message);
  bb_buffer_free(NULL, text);
#ifndef __EMSCRIPTEN__
  char tag[96];
  snprintf(tag, sizeof tag, "example-%s-%zu", name, module);
  CHECK_MSG(dt_onnx_check(m, tag) == 0, "onnx.checker rejected %s[%zu]", name, module);
#endif
  return m;
}

/* The number of partitions (functions carrying a peer class). */
static size_t n_partitions(const bb_model *m) {
  size_t n = 0;
  for (size_t i = 0; i < m->functions.len; i++) n += bb_kv_get(&m->functions.items[i]->metadata, BB_KEY_PEER_CLASS) != NULL;
  return n;
}

static const char *peer_class(const bb_function *f) { return f ? bb_kv_get(&f->metadata, BB_KEY_PEER_CLASS) : NULL; }

/* The only Send of `from` pairs with the only Recv of `to`: it sends on the wire the Recv
 * listens to. */
static void check_wire_pair(const bb_function *from, const bb_function *to) {
  CHECK_EQ_INT(ct_count(from, "Send"), 1);
  CHECK_EQ_INT(ct_count(to, "Recv"), 1);
  const bb_ir_node *send = ct_op(from, "Send", 0), *recv = ct_op(to, "Recv", 0);
  if (!send || !recv) return;
  char key[256];
  snprintf(key, sizeof key, "ai.bytesandbrains.dest_site_name.%s", send->inputs.items[0]);
  CHECK_STR(ct_meta(send, key), ct_meta(recv, BB_KEY_WIRE_ID));
}

/* The first input of op in f, after the Rx gates: the gated Recv output. */
static void check_fed_by_recv(const bb_function *f, const char *op, size_t input) {
  const bb_ir_node *n = ct_op(f, op, 0), *recv = ct_op(f, "Recv", 0);
  CHECK(n && recv && input < n->inputs.len);
  if (!n || !recv || input >= n->inputs.len) return;
  char want[256];
  snprintf(want, sizeof want, "%s#backoff_rx_out", recv->outputs.items[0]);
  CHECK_STR(n->inputs.items[input], want);
}

static int64_t int_attr(const bb_ir_node *n, const char *name) {
  for (size_t i = 0; n && i < n->attrs.len; i++)
    if (strcmp(n->attrs.items[i]->name, name) == 0) return n->attrs.items[i]->i;
  return -1;
}

/* A compiler configured with example `name`'s defaults for `module`. */
static bb_compiler *configured(const char *name, size_t module) {
  const bb_example *ex = bb_example_find(name);
  bb_compiler *c = bb_compiler_new(NULL);
  bb_error err;
  CHECK_MSG(ex && c && ex->configure(c, module, &err) == 0, "configure %s", name);
  return c;
}

static void test_registry(void) {
  size_t n = 0;
  const bb_example *const *all = bb_examples(&n);
  CHECK_EQ_INT(n, N_NAMES);
  for (size_t i = 0; i < n && i < N_NAMES; i++) {
    CHECK_STR(all[i]->name, NAMES[i]);
    CHECK(all[i]->description && *all[i]->description && all[i]->n_modules >= 1 && all[i]->configure);
    CHECK(bb_example_find(NAMES[i]) == all[i]);
  }
  CHECK(bb_example_find("nope") == NULL);
  uint8_t *out = (uint8_t *)1;
  size_t len = 1;
  bb_error err;
  CHECK(bb_example_compile(all[0], 5, &out, &len, &err) == BB_ERR_INVALID_ARGUMENT && out == NULL && len == 0);
}

static void test_quickstart(void) {
  bb_model *m = compile_example("quickstart", 0);
  if (!m) return;
  const bb_function *p = ct_partition(m, "Quickstart");
  CHECK(p && n_partitions(m) == 1);
  CHECK_STR(peer_class(p), BB_SELF_CLASS);
  CHECK_EQ_INT(ct_count(p, "NextBatch"), 1);
  CHECK_EQ_INT(ct_count(p, "Forward"), 1);
  const bb_ir_node *next = ct_op(p, "NextBatch", 0), *fwd = ct_op(p, "Forward", 0);
  if (next && fwd) CHECK_STR(fwd->inputs.items[0], next->outputs.items[0]);
  CHECK(p && bb_strlist_find(&p->outputs, "prediction") >= 0);
  if (p) CHECK_STR(cc_type_or_empty(p, "prediction"), F32);
  CHECK_STR(ct_binding(m, p, "data_source"), "DataSource|NoopDataLoader|0");
  CHECK_STR(ct_binding(m, p, "model"), "Model|NoopModel|1");
  bb_model_free(m);
}

static void test_component_with_dependency(void) {
  bb_model *m = compile_example("component_with_dependency", 0);
  if (m) {
    const bb_function *p = ct_partition(m, "CountingApp");
    CHECK(p && n_partitions(m) == 1);
    CHECK_EQ_INT(int_attr(ct_op(p, "Search", 0), "k"), 5);
    CHECK_STR(ct_binding(m, p, "primary_index"), "Index|CountingIndex|0");
    /* the dependency-only slot: bound, no node */
    CHECK_STR(ct_binding(m, p, "compute"), "Backend|CpuBackend|-1");
  }
  bb_model_free(m);

  /* without "compute" bound the dependency is unresolved */
  static const bb_component_dep deps[] = {{BB_ROLE_BACKEND, "compute"}};
  const bb_example *ex = bb_example_find("component_with_dependency");
  bb_model *rec = ex ? dt_build(ex->modules[0]) : NULL;
  bb_compiler *c = bb_compiler_new(NULL);
  bb_error err;
  CHECK(bb_example_declare(c, "CountingIndex", deps, 1, &err) == 0);
  ct_bind(c, BB_ROLE_INDEX, "primary_index", "CountingIndex");
  if (rec) ct_compile_fails(c, rec, BB_COMPILE_UNBOUND_DEPENDENCY, STRS("compute"));
  /* and bound under another role it mismatches */
  ct_bind(c, BB_ROLE_MODEL, "compute", "NoopModel");
  if (rec) ct_compile_fails(c, rec, BB_COMPILE_DEPENDENCY_ROLE_MISMATCH, STRS("compute"));
  bb_compiler_free(c);
  bb_model_free(rec);
}

static void test_custom_index(void) {
  bb_model *m = compile_example("custom_index", 0);
  if (!m) return;
  const bb_function *p = ct_partition(m, "CustomIndexApp");
  CHECK(p && n_partitions(m) == 1);
  const bb_ir_node *search = ct_op(p, "Search", 0);
  CHECK_EQ_INT(int_attr(search, "k"), 3);
  if (search) CHECK_STR(search->inputs.items[0], "query");
  CHECK_STR(ct_binding(m, p, "hnsw"), "Index|FlatIndex|0");
  bb_model_free(m);
}

static void test_multi_target_network(void) {
  bb_model *m = compile_example("multi_target_network", 0);
  if (!m) return;
  const bb_function *src = ct_partition(m, "FedNetwork"), *sink = ct_partition(m, "FedNetwork_sink_peers");
  CHECK(src && sink);
  CHECK_EQ_INT(n_partitions(m), 2);
  CHECK_STR(peer_class(src), BB_SELF_CLASS);
  CHECK_STR(peer_class(sink), "sink_peers");
  CHECK_EQ_INT(ct_count(src, "NextBatch"), 1);
  CHECK_EQ_INT(ct_count(src, "Forward"), 1);
  CHECK_EQ_INT(ct_count(sink, "Contribute"), 1);
  CHECK_EQ_INT(ct_count(src, "Contribute") + ct_count(sink, "Forward") + ct_count(sink, "NextBatch"), 0);
  check_wire_pair(src, sink);
  /* traced by hand from the pass order: [NextBatch, PassThrough, Forward, PassThrough,
   * DeadlineCheck, Send] and [Recv, the three Rx gates, Contribute] */
  CHECK_EQ_INT(src ? src->nodes.len : 0, 6);
  CHECK_EQ_INT(sink ? sink->nodes.len : 0, 5);
  const bb_ir_node *recv = ct_op(sink, "Recv", 0);
  if (recv) CHECK_STR(recv->outputs.items[0], "prediction_port__recv_0");
  /* contribution and metadata are the same received value */
  check_fed_by_recv(sink, "Contribute", 0);
  check_fed_by_recv(sink, "Contribute", 1);
  CHECK_STR(ct_binding(m, src, "loader"), "DataSource|StubLoader|0");
  CHECK_STR(ct_binding(m, src, "model"), "Model|StubModel|1");
  CHECK_STR(ct_binding(m, src, "aggregator"), "Aggregator|StubAggregator|-1");
  CHECK_STR(ct_binding(m, sink, "aggregator"), "Aggregator|StubAggregator|2");
  CHECK_STR(ct_binding(m, sink, "model"), "Model|StubModel|-1");
  bb_model_free(m);
}

static void test_federated_learning(void) {
  const bb_example *ex = bb_example_find("federated_learning");
  CHECK(ex && ex->n_modules == 3);
  if (!ex || ex->n_modules != 3) return;
  CHECK_STR(ex->modules[0]->name, "ClientLogic");
  CHECK_STR(ex->modules[1]->name, "ServerLogic");
  CHECK_STR(ex->modules[2]->name, "ServerReduce");

  /* recorded: ClientLogic has a body and a bootstrap, the server modules a body only */
  for (size_t i = 0; i < 3; i++) {
    bb_model *rec = dt_build(ex->modules[i]);
    if (!rec) continue;
    CHECK_EQ_INT(rec->functions.len, i == 0 ? 2 : 1);
    bb_model_free(rec);
  }

  /* each names the wires it sends on and listens to: the three pair up */
  bb_model *client = compile_example("federated_learning", 0);
  if (client) {
    const bb_function *p = ct_partition(client, "ClientLogic");
    CHECK(p && n_partitions(client) == 1);
    CHECK_EQ_INT(ct_count(p, "Fit"), 1);
    CHECK_EQ_INT(ct_count(p, "Send"), 1);
    CHECK_EQ_INT(ct_count(p, "Recv"), 1);
    const bb_ir_node *recv = ct_op(p, "Recv", 0), *send = ct_op(p, "Send", 0);
    if (recv) CHECK_STR(ct_meta(recv, BB_KEY_WIRE_ID), "ServerLogic.server_params");
    if (send) {
      CHECK_STR(send->inputs.items[1], "server_peer");
      CHECK_STR(ct_meta(send, BB_KEY_WIRE_ID), "ClientLogic.updated_params");
    }
    CHECK_STR(bb_kv_get(&client->metadata, BB_KEY_WIRE_OUT_PREFIX "ClientLogic.updated_params"),
              "Composite|ai.bytesandbrains.composite|0x8aef80be67049517");
    CHECK(bb_kv_get(&client->metadata, BB_KEY_WIRE_IN_PREFIX "ServerLogic.server_params") != NULL);
    const bb_function *boot = dt_fn(client, "ClientLogic__bootstrap");
    CHECK(boot != NULL);
    CHECK_EQ_INT(ct_count(boot, "Constant"), 2);
    CHECK_EQ_INT(ct_count(boot, "InsertMany"), 1);
    CHECK_EQ_INT(ct_count(boot, "Announce"), 1);
    CHECK_STR(ct_binding(client, p, "discovery"), "Protocol|GlobalRegistryClient|-1");
    CHECK_STR(ct_binding(client, p, "model"), "Model|StubModel|0");
    CHECK_STR(ct_binding(client, p, "data"), "DataSource|StubLoader|-1");
  }
  bb_model_free(client);

  bb_model *logic = compile_example("federated_learning", 1);
  if (logic) {
    const bb_function *p = ct_partition(logic, "ServerLogic");
    CHECK(p && n_partitions(logic) == 1);
    CHECK_EQ_INT(ct_count(p, "LoadParameters"), 1);
    CHECK_EQ_INT(ct_count(p, "Sample"), 1);
    CHECK_EQ_INT(ct_count(p, "Params"), 1);
    const bb_ir_node *sample = ct_op(p, "Sample", 0), *send = ct_op(p, "Send", 0), *recv = ct_op(p, "Recv", 0);
    CHECK_EQ_INT(int_attr(sample, "n"), 2);
    CHECK_STR(ct_meta(sample, BB_KEY_PEER_CLASS), "clients");
    if (sample && send) CHECK_STR(send->inputs.items[1], sample->outputs.items[0]);
    if (recv) CHECK_STR(ct_meta(recv, BB_KEY_WIRE_ID), "ServerReduce.global");
    if (send) CHECK_STR(ct_meta(send, BB_KEY_WIRE_ID), "ServerLogic.server_params");
    CHECK_STR(ct_binding(logic, p, "view"), "PeerSelector|GlobalRegistryServer|1");
    CHECK_STR(ct_binding(logic, p, "discovery"), "Protocol|GlobalRegistryServer|-1");
    CHECK_STR(ct_binding(logic, p, "model"), "Model|StubModel|0");
  }
  bb_model_free(logic);

  bb_model *reduce = compile_example("federated_learning", 2);
  if (reduce) {
    const bb_function *p = ct_partition(reduce, "ServerReduce");
    CHECK(p && n_partitions(reduce) == 1);
    CHECK_EQ_INT(ct_count(p, "Contribute"), 1);
    CHECK_EQ_INT(ct_count(p, "Aggregate"), 1);
    CHECK_EQ_INT(ct_count(p, "Interval"), 1);
    const bb_ir_node *recv = ct_op(p, "Recv", 0), *send = ct_op(p, "Send", 0);
    if (recv) CHECK_STR(ct_meta(recv, BB_KEY_WIRE_ID), "ClientLogic.updated_params");
    if (send) CHECK_STR(ct_meta(send, BB_KEY_WIRE_ID), "ServerReduce.global");
    CHECK_STR(ct_binding(reduce, p, "aggregator"), "Aggregator|FedAvg|0");
    CHECK_STR(ct_binding(reduce, p, "backend"), "Backend|CpuBackend|-1");
    CHECK_STR(bb_kv_get(&reduce->metadata, BB_KEY_CONFIG_PREFIX "aggregator"), "quorum=2,target=2,init=model");
  }
  bb_model_free(reduce);

  /* FedAvg needs its backend */
  bb_model *rec = dt_build(ex->modules[2]);
  bb_compiler *c = bb_compiler_new(NULL);
  bb_compiler_set_permissive_types(c, true);
  static const bb_component_dep deps[] = {{BB_ROLE_BACKEND, "backend"}};
  bb_error err;
  CHECK(bb_example_declare(c, "FedAvg", deps, 1, &err) == 0);
  ct_bind(c, BB_ROLE_AGGREGATOR, "aggregator", "FedAvg");
  if (rec) ct_compile_fails(c, rec, BB_COMPILE_UNBOUND_DEPENDENCY, STRS("backend"));
  bb_compiler_free(c);
  bb_model_free(rec);
}

static void test_single_node_federated_learning(void) {
  bb_model *m = compile_example("single_node_federated_learning", 0);
  if (!m) return;
  const bb_function *client = ct_partition(m, "FederatedRound");
  const bb_function *server = ct_partition(m, "FederatedRound_server_peers");
  CHECK(client && server);
  CHECK_EQ_INT(n_partitions(m), 2);
  CHECK_STR(peer_class(server), "server_peers");
  CHECK_EQ_INT(ct_count(client, "NextBatch"), 1);
  CHECK_EQ_INT(ct_count(client, "Forward"), 1);
  CHECK_EQ_INT(ct_count(client, "Params"), 1);
  CHECK_EQ_INT(ct_count(server, "Contribute"), 1);
  check_wire_pair(client, server);
  check_fed_by_recv(server, "Contribute", 0);
  check_fed_by_recv(server, "Contribute", 1);
  /* slot dedup at install: both targets name every slot with the same role and type,
   * and each slot's non-negative id appears in exactly one of them (ids to merge) */
  static const char *const slots[] = {"model", "data", "aggregator", "backend"};
  static const char *const want[] = {"Model|MyModel|", "DataSource|MyData|", "Aggregator|FedAvg|",
                                     "Backend|CpuBackend|"};
  for (size_t i = 0; i < 4 && client && server; i++) {
    const char *a = ct_binding(m, client, slots[i]), *b = ct_binding(m, server, slots[i]);
    CHECK_MSG(a && b, "slot %s missing from a binding table", slots[i]);
    if (!a || !b) continue;
    size_t n = strlen(want[i]);
    CHECK_MSG(strncmp(a, want[i], n) == 0 && strncmp(b, want[i], n) == 0, "slot %s: %s / %s", slots[i], a, b);
    int real = (strcmp(a + n, "-1") != 0) + (strcmp(b + n, "-1") != 0);
    CHECK_EQ_INT(real, strcmp(slots[i], "backend") == 0 ? 0 : 1);
  }
  CHECK_STR(ct_binding(m, client, "aggregator"), "Aggregator|FedAvg|-1");
  CHECK_STR(ct_binding(m, server, "aggregator"), "Aggregator|FedAvg|2");
  bb_model_free(m);
}

static size_t count_stamped(const bb_model *m, size_t *sends) {
  size_t n = 0;
  *sends = 0;
  for (size_t f = 0; f < m->functions.len; f++) {
    const bb_function *fn = m->functions.items[f];
    *sends += ct_count(fn, "Send");
    for (size_t i = 0; i < fn->nodes.len; i++)
      n += strcmp(fn->nodes.items[i]->op_type, "Send") == 0 && ct_meta(fn->nodes.items[i], BB_EXAMPLE_TRACING_KEY);
  }
  return n;
}

static void test_custom_compiler_pass(void) {
  bb_model *m = compile_example("custom_compiler_pass", 0);
  if (m) {
    const bb_function *app = ct_partition(m, "App"), *peers = ct_partition(m, "App_peers");
    CHECK(app && peers);
    CHECK_EQ_INT(n_partitions(m), 2);
    check_wire_pair(app, peers);
    check_fed_by_recv(peers, "Identity", 0);
    CHECK_STR(ct_binding(m, peers, "compute"), "Backend|CpuBackend|0");
    size_t sends = 0, stamped = count_stamped(m, &sends);
    CHECK(sends >= 1);
    CHECK_EQ_INT(stamped, sends);
    CHECK_STR(ct_meta(ct_op(app, "Send", 0), BB_EXAMPLE_TRACING_KEY), "trace-0");
  }
  bb_model_free(m);

  /* the same compile without the user pass stamps nothing */
  const bb_example *ex = bb_example_find("custom_compiler_pass");
  bb_model *rec = ex ? dt_build(ex->modules[0]) : NULL;
  bb_compiler *c = configured("custom_compiler_pass", 0);
  bb_error err;
  CHECK(bb_compiler_disable_pass(c, "stamp_tracing_ids", &err) == 0);
  bb_model *plain = rec ? ct_compile(c, rec) : NULL;
  if (plain) {
    size_t sends = 0;
    CHECK_EQ_INT(count_stamped(plain, &sends), 0);
    CHECK(sends >= 1);
  }
  bb_model_free(plain);
  bb_compiler_free(c);
  bb_model_free(rec);
}

static void test_polymorphic_types(void) {
  bb_model *m = compile_example("polymorphic_types", 0);
  if (m) {
    const bb_function *p = ct_partition(m, "AddReluDemo");
    const bb_ir_node *add = ct_op(p, "Add", 0), *relu = ct_op(p, "Relu", 0);
    CHECK(p && add && relu);
    if (p && add && relu) {
      /* one seed (x = tensor.f32) resolves y, the Add output and the Relu output */
      CHECK_STR(cc_type_or_empty(p, "x"), F32);
      CHECK_STR(cc_type_or_empty(p, "y"), F32);
      CHECK_STR(cc_type_or_empty(p, add->outputs.items[0]), F32);
      CHECK_STR(cc_type_or_empty(p, relu->outputs.items[0]), F32);
      CHECK_STR(cc_type_or_empty(p, "w"), F32);
    }
    CHECK_STR(ct_binding(m, p, "default_backend"), "Backend|CpuBackend|0");
  }
  bb_model_free(m);

  m = compile_example("polymorphic_types", 1);
  if (m) {
    const bb_function *p = ct_partition(m, "StampDemo");
    CHECK(p != NULL);
    CHECK_STR(ct_binding(m, p, "default_backend"), "Backend|CpuBackend|0");
  }
  bb_model_free(m);

  /* seeding x = f32 and y = f64 is rejected */
  bb_model *rec = dt_build(&BB_EXAMPLE_MIXED_PRECISION_DEMO);
  bb_compiler *c = configured("polymorphic_types", 0);
  if (rec) ct_compile_fails(c, rec, BB_COMPILE_TYPE_CONSTRAINT_FAILED, STRS(F32, F64));
  bb_compiler_free(c);
  bb_model_free(rec);
}

/* hierarchical_digits: five partitions — the root's loop (@self), the edge's relay
 * (edges), the client's round (clients), the edge's aggregation (edge) and the root's
 * intake (root) — each with its own aggregator slot bound where it aggregates. */
static void test_hierarchical_digits(void) {
  bb_model *m = compile_example("hierarchical_digits", 0);
  if (!m) return;
  CHECK_EQ_INT(n_partitions(m), 5);
  const bb_function *loop = ct_partition(m, "HierDigits"), *relay = ct_partition(m, "HierDigits_edges"),
                    *client = ct_partition(m, "HierDigits_clients"), *edge = ct_partition(m, "HierDigits_edge"),
                    *intake = ct_partition(m, "HierDigits_root");
  CHECK(loop && relay && client && edge && intake);
  if (!(loop && relay && client && edge && intake)) {
    bb_model_free(m);
    return;
  }
  CHECK_STR(peer_class(edge), "edge");
  CHECK_EQ_INT(ct_count(loop, "Aggregate"), 1);
  CHECK_EQ_INT(ct_count(relay, "Send"), 1);
  CHECK_EQ_INT(ct_count(client, "Fit"), 1);
  CHECK_EQ_INT(ct_count(edge, "Contribute"), 1);
  CHECK_EQ_INT(ct_count(edge, "Aggregate"), 1);
  CHECK_EQ_INT(ct_count(intake, "Contribute"), 1);
  check_wire_pair(relay, client);
  check_wire_pair(edge, intake);
  CHECK_STR(ct_binding(m, edge, "edge_aggregator"), "Aggregator|FedAvg|2");
  bb_model_free(m);
}

int main(void) {
  RUN(test_registry);
  RUN(test_hierarchical_digits);
  RUN(test_quickstart);
  RUN(test_component_with_dependency);
  RUN(test_custom_index);
  RUN(test_multi_target_network);
  RUN(test_federated_learning);
  RUN(test_single_node_federated_learning);
  RUN(test_custom_compiler_pass);
  RUN(test_polymorphic_types);
  return bb_test_finish();
}
