/* The success paths of the compiler: each canonical pass observed through a compile
 * (including the cases where a naive pass would collide names, drop value infos or
 * unsort a partition), and the gate/deadline/expand passes re-run directly to show they
 * are idempotent. */
#include "cctest.h"
#include "compiler/compiler.h"
#include "bb/common.h"

static const bb_slot LOADER = {BB_ROLE_DATA_SOURCE, "loader", NULL};
static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot AGGREGATOR = {BB_ROLE_AGGREGATOR, "aggregator", NULL};
static const bb_slot SELECTOR = {BB_ROLE_PEER_SELECTOR, "gossip", NULL};
static const bb_slot CODEC = {BB_ROLE_CODEC, "quant", NULL};
static const bb_slot BACKEND = {BB_ROLE_BACKEND, "compute", NULL};

static bb_compiler *standard_compiler(void) {
  bb_compiler *c = bb_compiler_new(NULL);
  ct_declare(c, "Loader", F32);
  ct_declare(c, "Mlp", F32);
  ct_declare(c, "FedAvg", F32);
  ct_declare(c, "Cpu", F32);
  bb_component_port q[] = {{"in", F32}, {"out", U8}};
  bb_component_decl quant = {sizeof quant, "Quant8", q, 2, NULL, 0};
  bb_error err;
  bb_compiler_declare_component(c, &quant, &err);
  ct_bind(c, BB_ROLE_DATA_SOURCE, "loader", "Loader");
  ct_bind(c, BB_ROLE_MODEL, "model", "Mlp");
  ct_bind(c, BB_ROLE_AGGREGATOR, "aggregator", "FedAvg");
  ct_bind(c, BB_ROLE_PEER_SELECTOR, "gossip", "RandomPeers");
  ct_bind(c, BB_ROLE_CODEC, "quant", "Quant8");
  ct_bind(c, BB_ROLE_BACKEND, "compute", "Cpu");
  return c;
}

static bb_model *compile_module(const bb_module *mod, bb_compiler *c) {
  bb_model *rec = dt_build(mod);
  bb_model *m = rec ? ct_compile(c, rec) : NULL;
  bb_model_free(rec);
  return m;
}

/* ---- single_node_quickstart ------------------------------------------------------- */

static void quickstart_body(bb_rec *g, void *user) {
  (void)user;
  bb_value batch, labels;
  bb_rec_data_source_next_batch(g, &LOADER, &batch, &labels);
  bb_rec_model_forward(g, &MODEL, batch);
  bb_rec_output(g, "params", bb_rec_model_params(g, &MODEL));
}
static const bb_module QUICKSTART = {sizeof(bb_module), "Quickstart", quickstart_body, NULL, NULL, NULL, 0};

static void test_single_node_quickstart(void) {
  bb_compiler *c = bb_compiler_new(NULL);
  ct_declare(c, "Loader", F32);
  ct_declare(c, "Mlp", F32);
  ct_bind(c, BB_ROLE_DATA_SOURCE, "loader", "Loader");
  ct_bind(c, BB_ROLE_MODEL, "model", "Mlp");
  bb_model *m = compile_module(&QUICKSTART, c);
  if (m) {
    CHECK_EQ_INT(m->functions.len, 1);
    const bb_function *f = ct_partition(m, "Quickstart");
    CHECK(f != NULL);
    CHECK_STR(bb_kv_get(&m->metadata, "ai.bytesandbrains.compiled"), "v2");
    CHECK_STR(ct_binding(m, f, "loader"), "DataSource|Loader|0");
    CHECK_STR(ct_binding(m, f, "model"), "Model|Mlp|1");
    if (f) {
      CHECK_STRS(&f->outputs, STRS("params"));
      CHECK_STR(cc_type_or_empty(f, "params"), F32);
    }
#ifndef __EMSCRIPTEN__
    CHECK_MSG(dt_onnx_check(m, "quickstart") == 0, "onnx.checker rejected the quickstart artifact");
#endif
  }
  bb_model_free(m);
  bb_compiler_free(c);
}

/* ---- self_send_same_partition / graph_input_peer_class / @default ------------------ */

static void gossip_body(bb_rec *g, void *user) {
  (void)user;
  bb_value peers = bb_rec_peer_selector_sample(g, &SELECTOR, 3);
  bb_rec_net_out(g, "params", peers, bb_rec_model_params(g, &MODEL));
  bb_rec_model_load_parameters(g, &MODEL, bb_rec_lookup_output(g, "params"));
}
static const bb_module GOSSIP = {sizeof(bb_module), "Gossip", gossip_body, NULL, NULL, NULL, 0};

static void test_self_send_same_partition(void) {
  bb_compiler *c = standard_compiler();
  bb_model *m = compile_module(&GOSSIP, c);
  if (m) {
    CHECK_EQ_INT(m->functions.len, 1);
    const bb_function *f = ct_partition(m, "Gossip");
    CHECK_EQ_INT(ct_count(f, "Send"), 1);
    CHECK_EQ_INT(ct_count(f, "Recv"), 1);
    const bb_ir_node *send = ct_op(f, "Send", 0), *recv = ct_op(f, "Recv", 0);
    if (send && recv) {
      char key[200];
      snprintf(key, sizeof key, "ai.bytesandbrains.dest_site_name.%s", send->inputs.items[0]);
      /* the partition's own Recv listens to the wire its Send names */
      CHECK_STR(ct_meta(send, key), "Gossip.params");
      CHECK_STR(ct_meta(recv, BB_KEY_WIRE_ID), "Gossip.params");
    }
    CHECK_STR(ct_binding(m, f, "gossip"), "PeerSelector|RandomPeers|0");
#ifndef __EMSCRIPTEN__
    CHECK_MSG(dt_onnx_check(m, "gossip") == 0, "onnx.checker rejected the gossip artifact");
#endif
  }
  bb_model_free(m);
  bb_compiler_free(c);
}

static void srv_body(bb_rec *g, void *user) {
  bool through_op = user != NULL;
  bb_value srv = bb_rec_input(g, "srv", NULL);
  if (through_op) srv = bb_rec_pass_through(g, srv); /* not a peer-preserving op: class unknown */
  bb_rec_net_out(g, "p", srv, bb_rec_model_params(g, &MODEL));
  bb_rec_model_load_parameters(g, &MODEL, bb_rec_lookup_output(g, "p"));
}

static void test_graph_input_peer_class(void) {
  bb_compiler *c = standard_compiler();
  bb_module direct = {sizeof(bb_module), "Srv", srv_body, NULL, NULL, NULL, 0};
  bb_model *m = compile_module(&direct, c);
  if (m) {
    CHECK_EQ_INT(m->functions.len, 2);
    CHECK(ct_partition(m, "Srv") != NULL);
    const bb_function *rx = ct_partition(m, "Srv_srv");
    CHECK(rx != NULL);
    if (rx) CHECK_STR(bb_kv_get(&rx->metadata, BB_KEY_PEER_CLASS), "srv");
  }
  bb_model_free(m);
  int flag = 1;
  bb_module indirect = {sizeof(bb_module), "Srv", srv_body, NULL, &flag, NULL, 0};
  m = compile_module(&indirect, c);
  if (m) {
    /* @default does not share the @self partition's base name */
    CHECK(ct_partition(m, "Srv") != NULL);
    CHECK(ct_partition(m, "Srv_default") != NULL);
  }
  bb_model_free(m);
  bb_compiler_free(c);
}

/* ---- inlining ---------------------------------------------------------------------- */

static void once_body(bb_rec *g, void *user) {
  (void)user;
  bb_value a = bb_rec_input(g, "a", NULL);
  bb_rec_output(g, "b", bb_rec_pass_through(g, bb_rec_pass_through(g, a)));
}
static const bb_module ONCE = {sizeof(bb_module), "Once", once_body, NULL, NULL, NULL, 0};

static void onnx_body(bb_rec *g, void *user) {
  (void)user;
  bb_value a = bb_rec_input(g, "a", BB_TYPE_ABSTRACT);
  bb_rec_output(g, "b", bb_rec_backend(g, &BACKEND, "Relu", &a, 1, NULL, 0));
}
static const bb_module PURE = {sizeof(bb_module), "Pure", onnx_body, NULL, NULL, NULL, 0};

static void twice_body(bb_rec *g, void *user) {
  (void)user;
  bb_value a = bb_rec_input(g, "a", NULL);
  bb_rec_output(g, "b", bb_rec_model_forward(g, &MODEL, a));
}
static const bb_module TWICE = {sizeof(bb_module), "Twice", twice_body, NULL, NULL, NULL, 0};

static void inline_top(bb_rec *g, void *user) {
  (void)user;
  bb_value x = bb_rec_input(g, "x", NULL);
  bb_value peers = bb_rec_input(g, "peers", NULL);
  bb_binding b1[] = {{"a", x}};
  bb_value once = bb_rec_call_output(g, bb_rec_call(g, &ONCE, b1, 1), "b");
  bb_value p = bb_rec_model_params(g, &MODEL);
  bb_binding b2[] = {{"a", p}};
  bb_value r1 = bb_rec_call_output(g, bb_rec_call(g, &PURE, b2, 1), "b");
  bb_binding b3[] = {{"a", r1}};
  bb_value r2 = bb_rec_call_output(g, bb_rec_call(g, &PURE, b3, 1), "b");
  bb_binding b4[] = {{"a", r2}};
  bb_value t1 = bb_rec_call_output(g, bb_rec_call(g, &TWICE, b4, 1), "b");
  bb_binding b5[] = {{"a", t1}};
  bb_rec_call(g, &TWICE, b5, 1);
  bb_rec_output(g, "once", once);
  /* a second partition: the shared Twice function must survive the merge (defect #5) */
  bb_rec_net_out(g, "out", peers, r2);
  bb_rec_model_load_parameters(g, &MODEL, bb_rec_lookup_output(g, "out"));
}
static const bb_module *const INLINE_SUBS[] = {&ONCE, &PURE, &TWICE};
static const bb_module INLINE_TOP = {sizeof(bb_module), "Top", inline_top, NULL, NULL, INLINE_SUBS, 3};

static void test_inline(void) {
  bb_compiler *c = standard_compiler();
  bb_model *rec = dt_build(&INLINE_TOP);
  bb_model *m = rec ? ct_compile(c, rec) : NULL;
  if (m) {
    CHECK(bb_model_find_function(m, BB_DOMAIN_MODULE, "Once") == NULL);
    CHECK(bb_model_find_function(m, BB_DOMAIN_MODULE, "Pure") == NULL);
    const bb_function *twice = bb_model_find_function(m, BB_DOMAIN_MODULE, "Twice");
    CHECK(twice != NULL);
    CHECK_EQ_INT(m->functions.len, 3); /* two partitions, Twice once */
    const bb_function *top = ct_partition(m, "Top");
    CHECK_EQ_INT(ct_count(top, "Twice"), 2);
    CHECK_EQ_INT(ct_count(top, "Relu"), 2);
    /* inline_renames: Once's internal value renamed, formal a -> x, output b -> the CALL's */
    const bb_ir_node *pt = ct_op(top, "PassThrough", 0);
    if (pt && rec) {
      const bb_ir_node *call = bb_model_find_function(rec, BB_DOMAIN_MODULE, "Top")->nodes.items[0];
      CHECK_STRS(&pt->inputs, STRS("x"));
      CHECK(strstr(pt->outputs.items[0], "#inl") != NULL);
      const bb_ir_node *pt2 = ct_op(top, "PassThrough", 1), *pt3 = ct_op(top, "PassThrough", 2);
      if (pt2 && pt3) {
        CHECK_STR(pt->outputs.items[0], "v0#inl0");
        CHECK_STR(pt2->inputs.items[0], "v0#inl0");
        CHECK_STR(pt2->outputs.items[0], "v1#inl0");
        CHECK_STR(pt3->outputs.items[0], call->outputs.items[0]);
      }
    }
    /* the kept function's output type reached its CALLs: strict typing passed */
    const bb_ir_node *first = ct_op(top, "Twice", 0);
    if (first) CHECK_STR(cc_type_or_empty(top, first->outputs.items[0]), F32);
#ifndef __EMSCRIPTEN__
    CHECK_MSG(dt_onnx_check(m, "inline") == 0, "onnx.checker rejected the artifact with a shared function");
#endif
  }
  bb_model_free(m);
  bb_model_free(rec);
  bb_compiler_free(c);
}

/* ---- deadlines, expansion, gates ----------------------------------------------------- */

static void sender_body(bb_rec *g, void *user) {
  (void)user;
  bb_value peers = bb_rec_input(g, "peers", NULL);
  bb_rec_net_out(g, "port", peers, bb_rec_model_params(g, &MODEL));
  bb_rec_model_load_parameters(g, &MODEL, bb_rec_lookup_output(g, "port"));
  bb_rec_output(g, "tick", bb_rec_interval(g, 0));
}
static const bb_module SENDER = {sizeof(bb_module), "Sender", sender_body, NULL, NULL, NULL, 0};

static void test_deadline_chain_depth(void) {
  bb_compiler *c = standard_compiler();
  bb_compiler_set_per_hop_budget_ns(c, 10);
  bb_model *rec = dt_build(&SENDER);
  for (int depth = 0; rec && depth < 2; depth++) {
    bb_function *f = rec->functions.items[0];
    for (size_t i = 0; depth && i < f->nodes.len; i++)
      if (strcmp(f->nodes.items[i]->op_type, "Send") == 0)
        bb_kv_upsert(rec, &f->nodes.items[i]->metadata, "ai.bytesandbrains.wire.chain_depth", "3");
    bb_model *m = ct_compile(c, rec);
    const bb_ir_node *send = m ? ct_op(ct_partition(m, "Sender"), "Send", 0) : NULL;
    const bb_ir_node *check = m ? ct_op(ct_partition(m, "Sender"), "DeadlineCheck", 0) : NULL;
    CHECK(send && check);
    if (send) CHECK_EQ_INT(bb_attr_get_int(&send->attrs, "deadline_ns", 0), depth ? 30 : 10);
    if (check) CHECK_EQ_INT(bb_attr_get_int(&check->attrs, "deadline_ns", 0), depth ? 30 : 10);
    bb_model_free(m);
  }
  bb_model_free(rec);
  bb_compiler_free(c);
}

static void test_expand_interval_default(void) {
  bb_compiler *c = standard_compiler();
  bb_model *m = compile_module(&SENDER, c);
  const bb_ir_node *iv = m ? ct_op(ct_partition(m, "Sender"), "Interval", 0) : NULL;
  CHECK(iv != NULL);
  if (iv) {
    CHECK_EQ_INT(bb_attr_get_int(&iv->attrs, "period_ns", 0), 1000000000);
    CHECK_STR(ct_meta(iv, "ai.bytesandbrains.expanded"), "true");
  }
  bb_model_free(m);
  bb_compiler_free(c);
}

static void test_rx_chain_without_dedup(void) {
  bb_compiler *c = standard_compiler();
  bb_error err;
  CHECK(bb_compiler_disable_pass(c, "insert_dedup_gate_rx", &err) == 0);
  CHECK(bb_compiler_disable_pass(c, "partition_by_wire_ops", &err) == BB_ERR_INVALID_ARGUMENT);
  CHECK(bb_compiler_disable_pass(c, "no_such_pass", &err) == BB_ERR_NOT_FOUND);
  bb_model *m = compile_module(&SENDER, c);
  const bb_function *rx = m ? ct_partition(m, "Sender_peers") : NULL;
  CHECK(rx != NULL);
  if (rx) {
    static const char *const ops[] = {"Recv", "PeerHealthGateRx", "BackoffGateRx", "LoadParameters"};
    CHECK_EQ_INT(rx->nodes.len, 4);
    for (size_t i = 0; i < 4 && i < rx->nodes.len; i++) CHECK_STR(rx->nodes.items[i]->op_type, ops[i]);
    CHECK_EQ_INT(ct_count(rx, "DedupGateRx"), 0);
  }
  bb_model_free(m);
  bb_compiler_free(c);
}

static void test_tx_gates_on_peer_attribute(void) {
  bb_compiler *c = standard_compiler();
  bb_model *rec = dt_build(&SENDER);
  if (rec) {
    bb_function *f = rec->functions.items[0];
    for (size_t i = 0; i < f->nodes.len; i++)
      if (strcmp(f->nodes.items[i]->op_type, "Send") == 0) bb_attr_set_string(rec, &f->nodes.items[i]->attrs, "peer", "QmPeer");
  }
  bb_model *m = rec ? ct_compile(c, rec) : NULL;
  const bb_function *tx = m ? ct_partition(m, "Sender") : NULL;
  if (tx) {
    const bb_ir_node *ph = ct_op(tx, "PeerHealthGateTx", 0), *bo = ct_op(tx, "BackoffGateTx", 0), *send = ct_op(tx, "Send", 0);
    CHECK(ph && bo && send);
    if (ph && bo && send) {
      CHECK_STR(bo->inputs.items[0], ph->outputs.items[0]);
      CHECK_STR(send->inputs.items[0], bo->outputs.items[0]);
      CHECK_STR(bb_attr_get_string(&ph->attrs, "peer", ""), "QmPeer");
      CHECK_STR(bb_attr_get_string(&bo->attrs, "peer", ""), "QmPeer");
      CHECK(bb_nodelist_index(&tx->nodes, ph) < bb_nodelist_index(&tx->nodes, bo));
      CHECK(bb_nodelist_index(&tx->nodes, bo) < bb_nodelist_index(&tx->nodes, send));
    }
  }
  bb_model_free(m);
  bb_model_free(rec);
  bb_compiler_free(c);
}

/* ---- user passes ------------------------------------------------------------------- */

typedef struct seen {
  int calls;
  char classes[256];
} seen;

static int record_stage(bb_model *model, bb_function *function, const char *peer_class, void *user, bb_error *err) {
  (void)err;
  seen *s = user;
  s->calls++;
  size_t used = strlen(s->classes);
  snprintf(s->classes + used, sizeof s->classes - used, "%s%s", used ? "," : "", peer_class ? peer_class : "(root)");
  /* stamp every Send, like the custom_compiler_pass example */
  for (size_t i = 0; i < function->nodes.len; i++)
    if (strcmp(function->nodes.items[i]->op_type, "Send") == 0 &&
        bb_kv_upsert(model, &function->nodes.items[i]->metadata, "example.tracing_id", "trace-1"))
      return BB_ERR_NOMEM;
  return 0;
}

static void test_user_stage_per_partition(void) {
  bb_compiler *c = standard_compiler();
  seen at_end = {0}, after_validate = {0}, after_dedup = {0};
  bb_error err;
  CHECK(bb_compiler_add_pass(c, NULL, "tracing", record_stage, &at_end, &err) == 0);
  CHECK(bb_compiler_add_pass(c, "validate", "after_validate", record_stage, &after_validate, &err) == 0);
  CHECK(bb_compiler_add_pass(c, "insert_dedup_gate_rx", "after_dedup", record_stage, &after_dedup, &err) == 0);
  CHECK(bb_compiler_add_pass(c, NULL, "tracing", record_stage, &at_end, &err) == BB_ERR_EXISTS);
  CHECK(bb_compiler_add_pass(c, "nope", "x", record_stage, &at_end, &err) == BB_ERR_NOT_FOUND);
  bb_model *m = compile_module(&SENDER, c);
  CHECK_EQ_INT(at_end.calls, 2);
  CHECK_STR(at_end.classes, "@self,peers");
  CHECK_EQ_INT(after_validate.calls, 1);
  CHECK_STR(after_validate.classes, "(root)");
  CHECK_EQ_INT(after_dedup.calls, 2);
  const bb_ir_node *send = m ? ct_op(ct_partition(m, "Sender"), "Send", 0) : NULL;
  CHECK_STR(ct_meta(send, "example.tracing_id"), "trace-1");
  bb_model_free(m);
  bb_compiler_free(c);
}

/* ---- idempotence, run on the passes directly ---------------------------------------- */

static void test_pass_idempotence(void) {
  bb_compiler *c = standard_compiler();
  bb_model *m = compile_module(&SENDER, c);
  if (!m) {
    bb_compiler_free(c);
    return;
  }
  bb_error err;
  cc_ctx x = {.c = c, .m = m, .err = &err};
  for (size_t i = 0; i < m->functions.len; i++) {
    bb_function *f = m->functions.items[i];
    x.root = f;
    size_t before = f->nodes.len;
    uint8_t *b0, *b1;
    size_t n0, n1;
    dt_encode(m, &b0, &n0);
    cc_partition p = {"any", f};
    CHECK(cc_expand_ops(&x) == 0);
    for (int w = 0; w < 3; w++) CHECK(cc_gate_rx(&x, &p, w) == 0);
    for (int w = 0; w < 2; w++) CHECK(cc_gate_tx(&x, &p, w) == 0);
    CHECK(cc_insert_deadline_checks(&x, &p) == 0);
    CHECK(cc_check_runtime_complete(&x, &p) == 0);
    CHECK_EQ_INT(f->nodes.len, before);
    dt_encode(m, &b1, &n1);
    CHECK_MSG(n0 == n1 && memcmp(b0, b1, n0) == 0, "re-running the passes changed %s", f->name);
    bb_buffer_free(NULL, b0);
    bb_buffer_free(NULL, b1);
  }
  bb_model_free(m);
  bb_compiler_free(c);
}

/* ---- refinement and codecs ------------------------------------------------------------ */

static void codec_body(bb_rec *g, void *user) {
  (void)user;
  bb_value peers = bb_rec_input(g, "peers", NULL);
  bb_value small = bb_rec_codec_encode(g, &CODEC, bb_rec_model_params(g, &MODEL));
  bb_rec_net_out(g, "wire", peers, small);
  bb_value back = bb_rec_codec_decode(g, &CODEC, bb_rec_lookup_output(g, "wire"));
  bb_rec_aggregator_contribute(g, &AGGREGATOR, back, back);
}
static const bb_module CODED = {sizeof(bb_module), "Coded", codec_body, NULL, NULL, NULL, 0};

static void test_codec_bridges_storage(void) {
  bb_compiler *c = standard_compiler();
  bb_model *m = compile_module(&CODED, c);
  const bb_function *tx = m ? ct_partition(m, "Coded") : NULL, *rx = m ? ct_partition(m, "Coded_peers") : NULL;
  CHECK(tx && rx);
  if (tx && rx) {
    const bb_ir_node *enc = ct_op(tx, "Encode", 0), *dec = ct_op(rx, "Decode", 0), *recv = ct_op(rx, "Recv", 0);
    CHECK(enc && dec && recv);
    if (enc && dec && recv) {
      CHECK_STR(cc_type_or_empty(tx, enc->inputs.items[0]), F32);
      CHECK_STR(cc_type_or_empty(tx, enc->outputs.items[0]), U8);
      CHECK_STR(cc_type_or_empty(rx, recv->outputs.items[0]), U8);
      CHECK_STR(cc_type_or_empty(rx, dec->outputs.items[0]), F32);
    }
  }
  bb_model_free(m);
  bb_compiler_free(c);
}

/* ---- two sends, one receiving class: no name collisions (defect #4) ------------------ */

static void two_sends_body(bb_rec *g, void *user) {
  (void)user;
  bb_value peers = bb_rec_input(g, "peers", NULL);
  bb_value p = bb_rec_model_params(g, &MODEL);
  bb_rec_net_out(g, "a", peers, p);
  bb_rec_net_out(g, "b", peers, bb_rec_pass_through(g, p));
  bb_rec_aggregator_contribute(g, &AGGREGATOR, bb_rec_lookup_output(g, "a"), bb_rec_lookup_output(g, "b"));
}
static const bb_module TWO_SENDS = {sizeof(bb_module), "TwoSends", two_sends_body, NULL, NULL, NULL, 0};

static void test_two_sends_distinct_names(void) {
  bb_compiler *c = standard_compiler();
  bb_model *m = compile_module(&TWO_SENDS, c);
  const bb_function *tx = m ? ct_partition(m, "TwoSends") : NULL, *rx = m ? ct_partition(m, "TwoSends_peers") : NULL;
  CHECK(tx && rx);
  CHECK_EQ_INT(ct_count(tx, "DeadlineCheck"), 2);
  CHECK_EQ_INT(ct_count(rx, "Recv"), 2);
  CHECK_EQ_INT(ct_count(rx, "DedupGateRx"), 2);
  const bb_ir_node *contribute = ct_op(rx, "Contribute", 0);
  if (contribute) CHECK_STRS(&contribute->inputs, STRS("a__recv_0#backoff_rx_out", "b__recv_1#backoff_rx_out"));
  /* every output name is produced once per function */
  for (size_t f = 0; m && f < m->functions.len; f++) {
    const bb_function *fn = m->functions.items[f];
    for (size_t i = 0; i < fn->nodes.len; i++)
      for (size_t o = 0; o < fn->nodes.items[i]->outputs.len; o++)
        CHECK(bb_nodelist_producer(&fn->nodes, fn->nodes.items[i]->outputs.items[o]) == fn->nodes.items[i]);
  }
#ifndef __EMSCRIPTEN__
  if (m) CHECK_MSG(dt_onnx_check(m, "two-sends") == 0, "onnx.checker rejected the two-send artifact");
#endif
  bb_model_free(m);
  bb_compiler_free(c);
}

/* ---- bootstrap with several partitions (defects #5, #8, #9) ------------------------- */

static void boot_body(bb_rec *g, void *user) {
  (void)user;
  bb_value peers = bb_rec_input(g, "peers", NULL);
  bb_rec_net_out(g, "p", peers, bb_rec_model_params(g, &MODEL));
  bb_rec_aggregator_contribute(g, &AGGREGATOR, bb_rec_lookup_output(g, "p"), bb_rec_lookup_output(g, "p"));
}
static void boot_bootstrap(bb_rec *g, void *user) {
  (void)user;
  bb_value batch, labels;
  bb_rec_data_source_next_batch(g, &LOADER, &batch, &labels);
  bb_rec_model_load_parameters(g, &MODEL, batch);
}
static const bb_module BOOTED = {sizeof(bb_module), "Booted", boot_body, boot_bootstrap, NULL, NULL, 0};

static void test_bootstrap_multi_partition(void) {
  bb_compiler *c = standard_compiler();
  bb_compiler_set_permissive_types(c, true);
  bb_model *m = compile_module(&BOOTED, c);
  if (m) {
    CHECK_EQ_INT(m->functions.len, 3);
    const bb_function *boot = bb_model_find_function(m, BB_DOMAIN_MODULE, "Booted__bootstrap");
    CHECK(boot != NULL);
    if (boot) CHECK_STR(bb_kv_get(&boot->metadata, BB_KEY_MODULE_PHASE), "bootstrap");
    const bb_function *tx = ct_partition(m, "Booted"), *rx = ct_partition(m, "Booted_peers");
    /* slot ids are unique across body and bootstrap: loader (bootstrap only) is 2 */
    CHECK_STR(ct_binding(m, tx, "model"), "Model|Mlp|0");
    CHECK_STR(ct_binding(m, rx, "aggregator"), "Aggregator|FedAvg|1");
    CHECK_STR(ct_binding(m, rx, "loader"), "DataSource|Loader|2");
#ifndef __EMSCRIPTEN__
    CHECK_MSG(dt_onnx_check(m, "booted") == 0, "onnx.checker rejected the bootstrap artifact");
#endif
  }
  bb_model_free(m);
  bb_compiler_free(c);
}

static void test_compile_model_api(void) {
  bb_compiler *c = standard_compiler();
  bb_model *rec = dt_build(&SENDER);
  bb_model *out = NULL;
  bb_error err;
  if (rec) {
    uint8_t *before;
    size_t n;
    dt_encode(rec, &before, &n);
    CHECK(bb_compiler_compile_model(c, rec, &out, &err) == 0);
    CHECK_EQ_INT(bb_compiler_error_kind(c), BB_COMPILE_OK);
    uint8_t *after;
    size_t n2;
    dt_encode(rec, &after, &n2);
    CHECK_MSG(n == n2 && memcmp(before, after, n) == 0, "compile_model changed its input");
    bb_buffer_free(NULL, before);
    bb_buffer_free(NULL, after);
  }
  CHECK(out && out->functions.len == 2);
  CHECK(bb_compiler_bind(c, BB_ROLE_MODEL, "model", "Other", NULL, &err) == BB_ERR_EXISTS);
  CHECK(bb_compiler_bind(c, BB_ROLE_MODEL, "a.b", "Other", NULL, &err) == BB_ERR_INVALID_ARGUMENT);
  CHECK(bb_compiler_bind(c, BB_ROLE_MODEL, "m2", "Bad|Type", NULL, &err) == BB_ERR_INVALID_ARGUMENT);
  CHECK(bb_compiler_bind_index(c, "idx", "Flat", "{\"dim\":4}", &err) == 0);
  bb_model *again = rec ? ct_compile(c, rec) : NULL;
  if (again) CHECK_STR(bb_kv_get(&again->metadata, "ai.bytesandbrains.config.idx"), "{\"dim\":4}");
  bb_model_free(again);
  bb_model_free(out);
  bb_model_free(rec);
  bb_compiler_free(c);
}

static void test_bind_by_slot_name_only(void) {
  bb_compiler *c = bb_compiler_new(NULL);
  ct_declare(c, "Mlp", F32);
  bb_error err;
  CHECK(bb_compiler_bind(c, BB_COMPILER_ROLE_OF_SLOT, "model", "Mlp", NULL, &err) == 0);
  CHECK(bb_compiler_bind(c, BB_COMPILER_ROLE_OF_SLOT, "loader", "Loader", NULL, &err) == 0);
  ct_declare(c, "Loader", F32);
  bb_model *m = compile_module(&QUICKSTART, c);
  const bb_function *f = m ? ct_partition(m, "Quickstart") : NULL;
  CHECK_STR(ct_binding(m, f, "model"), "Model|Mlp|1");
  CHECK_STR(ct_binding(m, f, "loader"), "DataSource|Loader|0");
  bb_model_free(m);
  /* a role-less binding nobody names cannot be placed */
  CHECK(bb_compiler_bind(c, BB_COMPILER_ROLE_OF_SLOT, "ghost", "Thing", NULL, &err) == 0);
  bb_model *rec = dt_build(&QUICKSTART);
  if (rec) ct_compile_fails(c, rec, BB_COMPILE_BINDING_ROLE_MISMATCH, STRS("\"ghost\""));
  bb_model_free(rec);
  bb_compiler_free(c);
}

int main(void) {
  RUN(test_bind_by_slot_name_only);
  RUN(test_single_node_quickstart);
  RUN(test_self_send_same_partition);
  RUN(test_graph_input_peer_class);
  RUN(test_inline);
  RUN(test_deadline_chain_depth);
  RUN(test_expand_interval_default);
  RUN(test_rx_chain_without_dedup);
  RUN(test_tx_gates_on_peer_attribute);
  RUN(test_user_stage_per_partition);
  RUN(test_pass_idempotence);
  RUN(test_codec_bridges_storage);
  RUN(test_two_sends_distinct_names);
  RUN(test_bootstrap_multi_partition);
  RUN(test_compile_model_api);
  return bb_test_finish();
}
