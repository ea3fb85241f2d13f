/* The worked example (FedNetwork with LoaderLeaf, TrainerLeaf and SinkLeaf, the Module
 * of the multi_target_network example): the recorded functions, nodes, metadata and
 * value infos, written out by hand from the recorder's rules: every function has domain
 * ai.bytesandbrains.module and opset imports, role nodes carry required_trait, slot_id
 * and slot_name, CALL outputs carry value infos, and the model has an IR version,
 * opsets and an empty main graph. Also: the model passes onnx.checker, round-trips, and
 * builds to the same bytes every time. */
#include "dsltest.h"
#include "fednetwork.h"


#define MI(chain) BB_KEY_MODULE_INSTANCE, chain

static void test_model_header(const bb_model *m) {
  CHECK(m->has_ir_version);
  CHECK_EQ_INT(m->ir_version, BB_ONNX_IR_VERSION);
  CHECK_STR(m->producer_name, "bytesandbrains");
  CHECK_EQ_INT(m->metadata.len, 0);
  CHECK(m->graph != NULL);
  if (m->graph) {
    CHECK_STR(m->graph->name, "FedNetwork");
    CHECK_EQ_INT(m->graph->nodes.len, 0);
    CHECK_EQ_INT(m->graph->inputs.len + m->graph->outputs.len, 0);
  }
  /* the default domain, then every domain in order of first use */
  static const char *const domains[] = {"",
                                        BB_DOMAIN_MODULE,
                                        BB_DOMAIN_WIRE,
                                        BB_DOMAIN_ROLE_DATA_SOURCE,
                                        BB_DOMAIN_SYSCALL,
                                        BB_DOMAIN_ROLE_MODEL,
                                        BB_DOMAIN_ROLE_AGGREGATOR};
  CHECK_EQ_INT(m->opsets.len, 7);
  for (size_t i = 0; i < 7 && i < m->opsets.len; i++) {
    CHECK_STR(m->opsets.items[i].domain, domains[i]);
    CHECK_EQ_INT(m->opsets.items[i].version, i == 0 ? BB_ONNX_OPSET_VERSION : 1);
  }
  CHECK_EQ_INT(m->functions.len, 4);
  static const char *const names[] = {"FedNetwork", "LoaderLeaf", "TrainerLeaf", "SinkLeaf"};
  for (size_t i = 0; i < 4 && i < m->functions.len; i++) {
    CHECK_STR(m->functions.items[i]->name, names[i]);
    CHECK_STR(m->functions.items[i]->domain, BB_DOMAIN_MODULE);
  }
}

static void test_root(const bb_model *m) {
  const bb_function *f = dt_fn(m, "FedNetwork");
  CHECK(f == (m->functions.len ? m->functions.items[0] : NULL));
  if (!f) return;
  CHECK_KVS(&f->metadata, STRS(BB_KEY_MODULE_PHASE, "body"));
  CHECK_STRS(&f->inputs, STRS("sink_peers"));
  CHECK_STRS(&f->outputs, STRS("prediction_port"));
  CHECK_STRS(&f->attr_names, NONE);
  CHECK_EQ_INT(f->nodes.len, 4);
  CHECK_NODE(dt_node(f, 0), "LoaderLeaf", BB_DOMAIN_MODULE, NONE, STRS("v2"), STRS(MI("FedNetwork")));
  CHECK_NODE(dt_node(f, 1), "TrainerLeaf", BB_DOMAIN_MODULE, STRS("v2"), STRS("v4"), STRS(MI("FedNetwork")));
  CHECK_NODE(dt_node(f, 2), "Send", BB_DOMAIN_WIRE, STRS("v4", "sink_peers"), STRS("prediction_port", "v5"),
             STRS(MI("FedNetwork")));
  CHECK_NODE(dt_node(f, 3), "SinkLeaf", BB_DOMAIN_MODULE, STRS("prediction_port", "prediction_port"), NONE,
             STRS(MI("FedNetwork")));
  for (size_t i = 0; i < f->nodes.len; i++) CHECK_EQ_INT(f->nodes.items[i]->attrs.len, 0);
  /* value infos in recording order */
  CHECK_EQ_INT(f->value_infos.len, 5);
  static const char *const vis[] = {"sink_peers", "v2", "v4", "prediction_port", "v5"};
  for (size_t i = 0; i < 5 && i < f->value_infos.len; i++) CHECK_STR(f->value_infos.items[i]->name, vis[i]);
  CHECK_OPAQUE(f, "sink_peers", BB_TYPE_BYTES);
  CHECK_OPAQUE(f, "v2", "");
  CHECK_OPAQUE(f, "v4", "");
  CHECK_OPAQUE(f, "prediction_port", "");
  CHECK_OPAQUE(f, "v5", BB_TYPE_WIRE_REQ_ID);
  CHECK_EQ_INT(bb_opset_get(&f->opsets, BB_DOMAIN_MODULE), 1);
  CHECK_EQ_INT(bb_opset_get(&f->opsets, BB_DOMAIN_WIRE), 1);
  CHECK_EQ_INT(f->opsets.len, 2);
}

static void test_leaves(const bb_model *m) {
  const bb_function *f = dt_fn(m, "LoaderLeaf");
  CHECK(f != NULL);
  if (f) {
    CHECK_EQ_INT(f->metadata.len, 0); /* only the roots are phase-stamped */
    CHECK_STRS(&f->inputs, NONE);
    CHECK_STRS(&f->outputs, STRS("batch"));
    CHECK_STRS(&f->attr_names, STRS("__slot_0"));
    CHECK_EQ_INT(f->nodes.len, 2);
    CHECK_NODE(dt_node(f, 0), "NextBatch", BB_DOMAIN_ROLE_DATA_SOURCE, NONE, STRS("v0", "v1"),
               STRS(BB_KEY_REQUIRED_TRAIT, "DataSourceRuntime", BB_KEY_SLOT_ID, "0", BB_KEY_SLOT_NAME, "loader",
                    MI("FedNetwork_LoaderLeaf")));
    CHECK_NODE(dt_node(f, 1), "PassThrough", BB_DOMAIN_SYSCALL, STRS("v0"), STRS("batch"),
               STRS(MI("FedNetwork_LoaderLeaf")));
    CHECK_EQ_INT(f->value_infos.len, 3);
    CHECK_OPAQUE(f, "v0", "");
    CHECK_OPAQUE(f, "v1", "");
    CHECK_OPAQUE(f, "batch", "");
  }
  f = dt_fn(m, "TrainerLeaf");
  CHECK(f != NULL);
  if (f) {
    CHECK_STRS(&f->inputs, STRS("batch"));
    CHECK_STRS(&f->outputs, STRS("prediction"));
    CHECK_STRS(&f->attr_names, STRS("__slot_1"));
    CHECK_EQ_INT(f->nodes.len, 2);
    CHECK_NODE(dt_node(f, 0), "Forward", BB_DOMAIN_ROLE_MODEL, STRS("batch"), STRS("v3"),
               STRS(BB_KEY_REQUIRED_TRAIT, "ModelRuntime", BB_KEY_SLOT_ID, "1", BB_KEY_SLOT_NAME, "model",
                    MI("FedNetwork_TrainerLeaf")));
    CHECK_NODE(dt_node(f, 1), "PassThrough", BB_DOMAIN_SYSCALL, STRS("v3"), STRS("prediction"),
               STRS(MI("FedNetwork_TrainerLeaf")));
    /* the formal takes the type of the bound actual (v2: the abstract role output) */
    CHECK_OPAQUE(f, "batch", "");
    CHECK_OPAQUE(f, "v3", "");
    CHECK_OPAQUE(f, "prediction", "");
  }
  f = dt_fn(m, "SinkLeaf");
  CHECK(f != NULL);
  if (f) {
    CHECK_STRS(&f->inputs, STRS("contribution", "metadata"));
    CHECK_STRS(&f->outputs, NONE);
    CHECK_STRS(&f->attr_names, STRS("__slot_2"));
    CHECK_EQ_INT(f->nodes.len, 1);
    CHECK_NODE(dt_node(f, 0), "Contribute", BB_DOMAIN_ROLE_AGGREGATOR, STRS("contribution", "metadata"),
               STRS("v6"),
               STRS(BB_KEY_REQUIRED_TRAIT, "AggregatorRuntime", BB_KEY_SLOT_ID, "2", BB_KEY_SLOT_NAME,
                    "aggregator", MI("FedNetwork_SinkLeaf")));
    CHECK_OPAQUE(f, "v6", "");
  }
}

static void test_recorded_structure(void) {
  bb_model *m = dt_build(&FED_NETWORK);
  if (!m) return;
  test_model_header(m);
  test_root(m);
  test_leaves(m);
  bb_model_free(m);
}

static void test_roundtrip_and_determinism(void) {
  bb_model *a = dt_build(&FED_NETWORK), *b = dt_build(&FED_NETWORK);
  if (!a || !b) return;
  dt_check_roundtrip(a);
  CHECK(bb_model_equal(a, b));
  uint8_t *x, *y;
  size_t nx, ny;
  if (!dt_encode(a, &x, &nx)) {
    if (!dt_encode(b, &y, &ny)) {
      CHECK_MSG(nx == ny && memcmp(x, y, nx) == 0, "two builds gave different bytes");
      bb_buffer_free(NULL, y);
    }
    bb_buffer_free(NULL, x);
  }
  bb_model_free(a);
  bb_model_free(b);
}

static void test_onnx_checker(void) {
#ifdef __EMSCRIPTEN__
  printf("    (onnx.checker runs in the native build only)\n");
#else
  bb_model *m = dt_build(&FED_NETWORK);
  if (!m) return;
  CHECK_MSG(dt_onnx_check(m, "fednetwork") == 0, "onnx.checker rejected the recorded FedNetwork");
  /* the checker is really consulted: without the opset imports the model is rejected */
  m->opsets.len = 0;
  CHECK_MSG(dt_onnx_check(m, "fednetwork-no-opsets") != 0, "onnx.checker accepted a model without opset imports");
  bb_model_free(m);
#endif
}

int main(void) {
  RUN(test_recorded_structure);
  RUN(test_roundtrip_and_determinism);
  RUN(test_onnx_checker);
  return bb_test_finish();
}
