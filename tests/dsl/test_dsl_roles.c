/* Every role placeholder method's node: op type, domain, inputs, outputs, attributes,
 * metadata (required_trait, slot_id, slot_name and the method's extras) and output types;
 * slot ids minted per slot name in order of first use; Backend slots record any operator
 * name (which ones run is checked against the bound backend's op set at compile) and
 * nothing that is not a name. */
#include "bb/cpu.h"
#include "dsltest.h"

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot MODEL_AGAIN = {BB_ROLE_MODEL, "model", NULL}; /* another handle, same slot */
static const bb_slot INDEX = {BB_ROLE_INDEX, "index", NULL};
static const bb_slot AGGREGATOR = {BB_ROLE_AGGREGATOR, "agg", NULL};
static const bb_slot CODEC = {BB_ROLE_CODEC, "codec", NULL};
static const bb_slot DATA = {BB_ROLE_DATA_SOURCE, "data", NULL};
static const bb_slot SAMPLER = {BB_ROLE_PEER_SELECTOR, "sampler", NULL};
static const bb_slot GOSSIP = {BB_ROLE_PEER_SELECTOR, "gossip", "gossip_peer"};
static const bb_slot COMPUTE = {BB_ROLE_BACKEND, "compute", NULL};

static const float CONST_VALUES[2] = {1.5f, -2.0f};
static const int64_t CONST_DIMS[1] = {2};

static void roles_body(bb_rec *g, void *user) {
  (void)user;
  bb_value x = bb_rec_input(g, "x", bb_tensor_type(BB_DTYPE_FLOAT));
  bb_value fwd = bb_rec_model_forward(g, &MODEL, x);
  bb_rec_model_backward(g, &MODEL, fwd);
  bb_rec_model_compute_loss(g, &MODEL, fwd, x);
  bb_rec_model_apply_delta(g, &MODEL, x);
  bb_rec_model_load_parameters(g, &MODEL, x);
  bb_value params = bb_rec_model_params(g, &MODEL);

  bb_value id = bb_rec_index_add(g, &INDEX, x);
  bb_rec_index_search(g, &INDEX, x, 5);
  bb_rec_index_remove(g, &INDEX, id);
  bb_rec_index_train(g, &INDEX, x);

  bb_value ack = bb_rec_aggregator_contribute(g, &AGGREGATOR, x, params);
  bb_value agg_params, agg_meta;
  CHECK_EQ_INT(bb_rec_aggregator_aggregate(g, &AGGREGATOR, ack, &agg_params, &agg_meta), 0);
  CHECK_STR(agg_params.name, "v11");
  CHECK_STR(agg_meta.name, "v12");

  bb_value trained = bb_rec_codec_train(g, &CODEC, x);
  bb_value encoded = bb_rec_codec_encode(g, &CODEC, x);
  bb_rec_codec_decode(g, &CODEC, encoded);

  bb_value batch, labels;
  CHECK_EQ_INT(bb_rec_data_source_next_batch(g, &DATA, &batch, &labels), 0);
  CHECK_STR(batch.name, "v16");
  CHECK_STR(labels.name, "v17");
  bb_rec_data_source_reset(g, &DATA, trained);
  bb_rec_data_source_on_data_loaded(g, &DATA);

  bb_value peers = bb_rec_peer_selector_sample(g, &SAMPLER, 3);
  CHECK_STR(peers.type, BB_TYPE_PEER_ID);
  bb_rec_peer_selector_current_view(g, &GOSSIP);

  bb_value sum = bb_rec_backend(g, &COMPUTE, "Add", (bb_value[]){x, x}, 2, NULL, 0);
  CHECK_STR(sum.type, "ai.bytesandbrains.tensor.f32");
  bb_op_attr gemm_attrs[] = {BB_OP_ATTR_FLOAT("alpha", 0.5f), BB_OP_ATTR_INT("transB", 1)};
  bb_rec_backend(g, &COMPUTE, "Gemm", (bb_value[]){x, x, BB_VALUE_OMITTED}, 3, gemm_attrs, 2);
  bb_value halves[2];
  bb_op_attr axis = BB_OP_ATTR_INT("axis", 0);
  CHECK_EQ_INT(bb_rec_role_call(g, &COMPUTE, "Split", &x, 1, &axis, 1, halves, 2), 0);
  bb_literal lit = {BB_DTYPE_FLOAT, CONST_DIMS, 1, CONST_VALUES, sizeof CONST_VALUES};
  bb_op_attr value = BB_OP_ATTR_TENSOR("value", &lit);
  bb_rec_backend(g, &COMPUTE, "Constant", NULL, 0, &value, 1);

  bb_rec_model_forward(g, &MODEL_AGAIN, x);
  bb_rec_model_export(g, &MODEL);
}

static const bb_module ROLES = {sizeof(bb_module), "Roles", roles_body, NULL, NULL, NULL, 0};

/* metadata of a role node: trait, id, slot name, extras..., module_instance */
#define ROLE(trait, id, slot) BB_KEY_REQUIRED_TRAIT, trait, BB_KEY_SLOT_ID, id, BB_KEY_SLOT_NAME, slot
#define MI BB_KEY_MODULE_INSTANCE, "Roles"

static void check_int_attr(const bb_ir_node *n, const char *name, int64_t v) {
  const bb_attr *a = n ? bb_attr_find(&n->attrs, name) : NULL;
  CHECK_MSG(a != NULL, "attribute %s missing", name);
  if (!a) return;
  CHECK_EQ_INT(a->type, BB_ATTR_INT);
  CHECK_EQ_INT(a->i, v);
}

static void check_model_nodes(const bb_function *f) {
  CHECK_NODE(dt_node(f, 0), "Forward", BB_DOMAIN_ROLE_MODEL, STRS("x"), STRS("v0"),
             STRS(ROLE("ModelRuntime", "0", "model"), MI));
  CHECK_NODE(dt_node(f, 1), "Backward", BB_DOMAIN_ROLE_MODEL, STRS("v0"), STRS("v1"),
             STRS(ROLE("ModelRuntime", "0", "model"), MI));
  CHECK_NODE(dt_node(f, 2), "ComputeLoss", BB_DOMAIN_ROLE_MODEL, STRS("v0", "x"), STRS("v2"),
             STRS(ROLE("ModelRuntime", "0", "model"), MI));
  CHECK_NODE(dt_node(f, 3), "ApplyDelta", BB_DOMAIN_ROLE_MODEL, STRS("x"), STRS("v3"),
             STRS(ROLE("ModelRuntime", "0", "model"), MI));
  CHECK_NODE(dt_node(f, 4), "LoadParameters", BB_DOMAIN_ROLE_MODEL, STRS("x"), STRS("v4"),
             STRS(ROLE("ModelRuntime", "0", "model"), MI));
  CHECK_NODE(dt_node(f, 5), "Params", BB_DOMAIN_ROLE_MODEL, NONE, STRS("v5"),
             STRS(ROLE("ModelRuntime", "0", "model"), MI));
  for (int i = 0; i <= 5; i++) {
    char v[8];
    snprintf(v, sizeof v, "v%d", i);
    CHECK_OPAQUE(f, v, ""); /* abstract: the compiler narrows it from the bound storage */
  }
}

static void check_index_and_aggregator_nodes(const bb_function *f) {
  CHECK_NODE(dt_node(f, 6), "Add", BB_DOMAIN_ROLE_INDEX, STRS("x"), STRS("v6"),
             STRS(ROLE("IndexRuntime", "1", "index"), MI));
  CHECK_NODE(dt_node(f, 7), "Search", BB_DOMAIN_ROLE_INDEX, STRS("x"), STRS("v7"),
             STRS(ROLE("IndexRuntime", "1", "index"), MI));
  check_int_attr(dt_node(f, 7), "k", 5);
  CHECK_EQ_INT(dt_node(f, 7)->attrs.len, 1);
  CHECK_NODE(dt_node(f, 8), "Remove", BB_DOMAIN_ROLE_INDEX, STRS("v6"), STRS("v8"),
             STRS(ROLE("IndexRuntime", "1", "index"), MI));
  CHECK_NODE(dt_node(f, 9), "Train", BB_DOMAIN_ROLE_INDEX, STRS("x"), STRS("v9"),
             STRS(ROLE("IndexRuntime", "1", "index"), BB_KEY_INDEX_PORT, "samples", MI));
  CHECK_OPAQUE(f, "v9", BB_TYPE_TRIGGER);
  CHECK_NODE(dt_node(f, 10), "Contribute", BB_DOMAIN_ROLE_AGGREGATOR, STRS("x", "v5"), STRS("v10"),
             STRS(ROLE("AggregatorRuntime", "2", "agg"), MI));
  CHECK_NODE(dt_node(f, 11), "Aggregate", BB_DOMAIN_ROLE_AGGREGATOR, STRS("v10"), STRS("v11", "v12"),
             STRS(ROLE("AggregatorRuntime", "2", "agg"), MI));
  CHECK_OPAQUE(f, "v11", "");
  CHECK_OPAQUE(f, "v12", "");
}

static void check_codec_data_selector_nodes(const bb_function *f) {
  CHECK_NODE(dt_node(f, 12), "Train", BB_DOMAIN_ROLE_CODEC, STRS("x"), STRS("v13"),
             STRS(ROLE("CodecRuntime", "3", "codec"), BB_KEY_CODEC_PORT, "in", MI));
  CHECK_OPAQUE(f, "v13", BB_TYPE_TRIGGER);
  CHECK_NODE(dt_node(f, 13), "Encode", BB_DOMAIN_ROLE_CODEC, STRS("x"), STRS("v14"),
             STRS(ROLE("CodecRuntime", "3", "codec"), BB_KEY_CODEC_PORT, "out", MI));
  CHECK_NODE(dt_node(f, 14), "Decode", BB_DOMAIN_ROLE_CODEC, STRS("v14"), STRS("v15"),
             STRS(ROLE("CodecRuntime", "3", "codec"), BB_KEY_CODEC_PORT, "in", MI));
  CHECK_OPAQUE(f, "v15", "");
  CHECK_NODE(dt_node(f, 15), "NextBatch", BB_DOMAIN_ROLE_DATA_SOURCE, NONE, STRS("v16", "v17"),
             STRS(ROLE("DataSourceRuntime", "4", "data"), MI));
  CHECK_NODE(dt_node(f, 16), "Reset", BB_DOMAIN_ROLE_DATA_SOURCE, STRS("v13"), STRS("v18"),
             STRS(ROLE("DataSourceRuntime", "4", "data"), MI));
  CHECK_NODE(dt_node(f, 17), "OnDataLoaded", BB_DOMAIN_ROLE_DATA_SOURCE, NONE, STRS("v19"),
             STRS(ROLE("DataSourceRuntime", "4", "data"), MI));
  CHECK_NODE(dt_node(f, 18), "Sample", BB_DOMAIN_ROLE_PEER_SELECTOR, NONE, STRS("v20"),
             STRS(ROLE("PeerSelectorRuntime", "5", "sampler"), BB_KEY_PEER_CLASS, "@self", MI));
  check_int_attr(dt_node(f, 18), "n", 3);
  CHECK_OPAQUE(f, "v20", BB_TYPE_PEER_ID);
  CHECK_NODE(dt_node(f, 19), "CurrentView", BB_DOMAIN_ROLE_PEER_SELECTOR, NONE, STRS("v21"),
             STRS(ROLE("PeerSelectorRuntime", "6", "gossip"), BB_KEY_PEER_CLASS, "gossip_peer", MI));
  CHECK_OPAQUE(f, "v21", BB_TYPE_PEER_ID);
}

static void check_backend_nodes(const bb_function *f) {
  CHECK_NODE(dt_node(f, 20), "Add", "", STRS("x", "x"), STRS("v22"), STRS(ROLE("BackendRuntime", "7", "compute"), MI));
  CHECK_TENSOR(f, "v22", "ai.bytesandbrains.tensor.f32", BB_DTYPE_FLOAT);
  const bb_ir_node *gemm = dt_node(f, 21);
  CHECK_NODE(gemm, "Gemm", "", STRS("x", "x", ""), STRS("v23"), STRS(ROLE("BackendRuntime", "7", "compute"), MI));
  if (gemm) {
    CHECK_EQ_INT(gemm->attrs.len, 2);
    CHECK_STR(gemm->attrs.items[0]->name, "alpha");
    CHECK_EQ_INT(gemm->attrs.items[0]->type, BB_ATTR_FLOAT);
    CHECK(gemm->attrs.items[0]->f == 0.5f);
    check_int_attr(gemm, "transB", 1);
  }
  CHECK_NODE(dt_node(f, 22), "Split", "", STRS("x"), STRS("v24", "v25"),
             STRS(ROLE("BackendRuntime", "7", "compute"), MI));
  check_int_attr(dt_node(f, 22), "axis", 0);
  const bb_ir_node *c = dt_node(f, 23);
  CHECK_NODE(c, "Constant", "", NONE, STRS("v26"), STRS(ROLE("BackendRuntime", "7", "compute"), MI));
  const bb_attr *value = c ? bb_attr_find(&c->attrs, "value") : NULL;
  CHECK(value && value->type == BB_ATTR_TENSOR && value->t);
  if (value && value->t) {
    CHECK_EQ_INT(value->t->data_type, BB_DTYPE_FLOAT);
    CHECK_EQ_INT(value->t->n_dims, 1);
    CHECK_EQ_INT(value->t->dims[0], 2);
    CHECK(value->t->raw_data.len == sizeof CONST_VALUES && memcmp(value->t->raw_data.data, CONST_VALUES, 8) == 0);
  }
  /* a second handle with the same slot name is the same slot */
  CHECK_NODE(dt_node(f, 24), "Forward", BB_DOMAIN_ROLE_MODEL, STRS("x"), STRS("v27"),
             STRS(ROLE("ModelRuntime", "0", "model"), MI));
  /* Export takes no input (its _after form takes only the ordering trigger) */
  CHECK_NODE(dt_node(f, 25), "Export", BB_DOMAIN_ROLE_MODEL, NONE, STRS("v28"),
             STRS(ROLE("ModelRuntime", "0", "model"), MI));
}

static void test_every_placeholder_method(void) {
  bb_model *m = dt_build(&ROLES);
  if (!m) return;
  const bb_function *f = dt_fn(m, "Roles");
  CHECK(f != NULL);
  if (f) {
    CHECK_EQ_INT(f->nodes.len, 26);
    CHECK_TENSOR(f, "x", "ai.bytesandbrains.tensor.f32", BB_DTYPE_FLOAT);
    CHECK_STRS(&f->attr_names, STRS("__slot_0", "__slot_1", "__slot_2", "__slot_3", "__slot_4", "__slot_5",
                                    "__slot_6", "__slot_7"));
    check_model_nodes(f);
    check_index_and_aggregator_nodes(f);
    check_codec_data_selector_nodes(f);
    check_backend_nodes(f);
    CHECK_EQ_INT(bb_opset_get(&f->opsets, ""), BB_ONNX_OPSET_VERSION);
    CHECK_EQ_INT(bb_opset_get(&f->opsets, BB_DOMAIN_ROLE_PEER_SELECTOR), 1);
    CHECK_EQ_INT(f->opsets.len, 7);
  }
  dt_check_roundtrip(m);
#ifndef __EMSCRIPTEN__
  CHECK_MSG(dt_onnx_check(m, "roles") == 0, "onnx.checker rejected the role placeholder nodes");
#endif
  bb_model_free(m);
}

/* ---- the Backend slot records any operator name, and nothing else ----------------------- */

static void all_cpu_ops_body(bb_rec *g, void *user) {
  (void)user;
  bb_value x = bb_rec_input(g, "x", NULL);
  for (size_t i = 0; i < bb_cpu_op_count(); i++) {
    bb_value out;
    CHECK_EQ_INT(bb_rec_role_call(g, &COMPUTE, bb_cpu_op_name(i), &x, 1, NULL, 0, &out, 1), 0);
  }
}

/* records the op named by user */
static void invented_op_body(bb_rec *g, void *user) {
  bb_op_attr dims = BB_OP_ATTR_INTS("dims", CONST_DIMS, 1);
  bb_rec_backend(g, &COMPUTE, (const char *)user, NULL, 0, &dims, 1);
}

static void test_backend_ops_are_operator_names(void) {
  bb_module all = {sizeof(bb_module), "AllCpuOps", all_cpu_ops_body, NULL, NULL, NULL, 0};
  bb_model *m = dt_build(&all);
  const bb_function *f = m ? dt_fn(m, "AllCpuOps") : NULL;
  CHECK(bb_cpu_op_count() > 30);
  if (f) {
    CHECK_EQ_INT(f->nodes.len, bb_cpu_op_count());
    for (size_t i = 0; i < f->nodes.len; i++) {
      CHECK_STR(f->nodes.items[i]->op_type, bb_cpu_op_name(i));
      CHECK_STR(f->nodes.items[i]->domain, "");
      CHECK_STR(bb_kv_get(&f->nodes.items[i]->metadata, BB_KEY_REQUIRED_TRAIT), "BackendRuntime");
    }
  }
  bb_model_free(m);
  /* no CPU operator: recorded all the same, for whichever backend the compiler binds */
  static const char *const INVENTED[] = {"Zeros", "add"};
  for (size_t i = 0; i < 2; i++) {
    bb_module invented = {sizeof(bb_module), "Invented", invented_op_body, NULL, (void *)INVENTED[i], NULL, 0};
    m = dt_build(&invented);
    f = m ? dt_fn(m, "Invented") : NULL;
    CHECK(f && f->nodes.len == 1);
    if (f && f->nodes.len == 1) {
      CHECK(!bb_cpu_supports(BB_DOMAIN_ONNX, INVENTED[i], BB_ONNX_OPSET_VERSION));
      CHECK_STR(f->nodes.items[0]->op_type, INVENTED[i]);
      CHECK_STR(f->nodes.items[0]->domain, BB_DOMAIN_ONNX);
      CHECK_STR(bb_kv_get(&f->nodes.items[0]->metadata, BB_KEY_SLOT_NAME), "compute");
    }
    bb_model_free(m);
  }
  /* what cannot name an operator is refused while recording */
  bb_module dashed = {sizeof(bb_module), "Dashed", invented_op_body, NULL, (void *)"Add-2", NULL, 0};
  dt_build_fails(&dashed, BB_ERR_INVALID_ARGUMENT,
                 STRS("module 'Dashed'", "Backend slot 'compute'", "op 'Add-2' is not an ONNX operator name"));
  bb_module empty = {sizeof(bb_module), "Empty", invented_op_body, NULL, (void *)"", NULL, 0};
  dt_build_fails(&empty, BB_ERR_INVALID_ARGUMENT, STRS("op '' is not an ONNX operator name"));
}

int main(void) {
  RUN(test_every_placeholder_method);
  RUN(test_backend_ops_are_operator_names);
  return bb_test_finish();
}
