/* The worked example (FedNetwork, tests/dsl/fednetwork.h) compiled end to end: two
 * partitions, a paired Send/Recv whose destination site resolves, RX gates, the
 * deadline check, the binding table, onnx.checker and byte-identical recompiles. */
#include "cctest.h"
#include "../dsl/fednetwork.h"


static bb_compiler *fed_compiler(void) {
  bb_compiler *c = bb_compiler_new(NULL);
  ct_declare(c, "ListLoader", F32);
  ct_declare(c, "Mlp", F32);
  ct_declare(c, "FedAvg", F32);
  ct_bind(c, BB_ROLE_DATA_SOURCE, "loader", "ListLoader");
  ct_bind(c, BB_ROLE_MODEL, "model", "Mlp");
  ct_bind(c, BB_ROLE_AGGREGATOR, "aggregator", "FedAvg");
  return c;
}

static void test_partitions(void) {
  bb_model *rec = dt_build(&FED_NETWORK);
  bb_compiler *c = fed_compiler();
  bb_model *m = rec ? ct_compile(c, rec) : NULL;
  if (m) {
    CHECK_EQ_INT(m->functions.len, 2);
    const bb_function *tx = ct_partition(m, "FedNetwork"), *rx = ct_partition(m, "FedNetwork_sink_peers");
    CHECK(tx && rx);
    CHECK(m->functions.items[0] == tx); /* "@self" sorts before "sink_peers" */
    /* sender: NextBatch PassThrough Forward PassThrough DeadlineCheck Send */
    static const char *const tx_ops[] = {"NextBatch", "PassThrough", "Forward", "PassThrough", "DeadlineCheck", "Send"};
    CHECK_EQ_INT(tx ? tx->nodes.len : 0, 6);
    for (size_t i = 0; tx && i < 6 && i < tx->nodes.len; i++) CHECK_STR(tx->nodes.items[i]->op_type, tx_ops[i]);
    const bb_ir_node *send = ct_op(tx, "Send", 0);
    CHECK_EQ_INT(ct_count(tx, "Recv"), 0);
    if (send) {
      CHECK_EQ_INT(bb_attr_get_int(&send->attrs, "deadline_ns", 0), 100000000);
      CHECK_STRS(&send->inputs, STRS("v4", "sink_peers", "prediction_port__send_sentinel_4#__trigger_deadline"));
      CHECK_STRS(&send->outputs, STRS("prediction_port__send_sentinel_4", "v5"));
      CHECK_STR(ct_meta(send, "ai.bytesandbrains.wire_transport"), "data");
      CHECK_STR(ct_meta(send, "ai.bytesandbrains.batch_group_id"), "0");
      CHECK_STR(ct_meta(send, "ai.bytesandbrains.dest_site_name.v4"), "FedNetwork.prediction_port");
      CHECK_STR(ct_meta(send, "ai.bytesandbrains.wire.wire_id"), "FedNetwork.prediction_port");
      CHECK_STR(ct_meta(send, "ai.bytesandbrains.deadline_gated"), "true");
    }
    /* receiver: Recv, the three RX gates, Contribute reading the last gate twice */
    static const char *const rx_ops[] = {"Recv", "DedupGateRx", "PeerHealthGateRx", "BackoffGateRx", "Contribute"};
    CHECK_EQ_INT(rx ? rx->nodes.len : 0, 5);
    for (size_t i = 0; rx && i < 5 && i < rx->nodes.len; i++) CHECK_STR(rx->nodes.items[i]->op_type, rx_ops[i]);
    const bb_ir_node *recv = ct_op(rx, "Recv", 0);
    if (recv) {
      CHECK_STRS(&recv->outputs, STRS("prediction_port__recv_0", "prediction_port__recv_0__sender"));
      CHECK_STR(ct_meta(recv, "ai.bytesandbrains.home_class"), "sink_peers");
      CHECK_STR(ct_meta(recv, "ai.bytesandbrains.wire.wire_id"), "FedNetwork.prediction_port");
      CHECK_STR(ct_meta(recv, "ai.bytesandbrains.wire_transport"), "data");
      CHECK_STR(ct_meta(recv, "ai.bytesandbrains.batch_group_id"), "0");
      CHECK(ct_meta(recv, "ai.bytesandbrains.recv_slot_id") == NULL); /* a gate reads it */
    }
    const bb_ir_node *contribute = ct_op(rx, "Contribute", 0);
    if (contribute)
      CHECK_STRS(&contribute->inputs, STRS("prediction_port__recv_0#backoff_rx_out", "prediction_port__recv_0#backoff_rx_out"));
    /* the wire the Send names is the one the receiving partition's Recv listens to, and
     * the wire tables declare it, with the type of the value sent */
    const char *wire = ct_meta(send, "ai.bytesandbrains.dest_site_name.v4");
    CHECK(wire && recv && strcmp(wire, ct_meta(recv, "ai.bytesandbrains.wire.wire_id")) == 0);
    static const char *const table[] = {"ai.bytesandbrains.wire_out.FedNetwork.prediction_port",
                                        "ai.bytesandbrains.wire_in.FedNetwork.prediction_port"};
    for (int i = 0; i < 2; i++)
      CHECK_STR(bb_kv_get(&m->metadata, table[i]), "Tensor|ai.bytesandbrains.tensor.f32|0xd004f177a0b61c58");
    CHECK(bb_wire_type_hash("ai.bytesandbrains.tensor.f32") == 0xd004f177a0b61c58ull);
    /* passport and bindings: one passport, one entry per (partition, bound slot) */
    CHECK_STR(bb_kv_get(&m->metadata, "ai.bytesandbrains.compiled"), "v2");
    size_t passports = 0, bindings = 0;
    for (size_t i = 0; i < m->metadata.len; i++) {
      passports += strcmp(m->metadata.items[i].key, "ai.bytesandbrains.compiled") == 0;
      bindings += strncmp(m->metadata.items[i].key, "ai.bytesandbrains.binding.", 26) == 0;
    }
    CHECK_EQ_INT(passports, 1);
    CHECK_EQ_INT(bindings, 6);
    CHECK_STR(ct_binding(m, tx, "loader"), "DataSource|ListLoader|0");
    CHECK_STR(ct_binding(m, tx, "model"), "Model|Mlp|1");
    CHECK_STR(ct_binding(m, tx, "aggregator"), "Aggregator|FedAvg|-1");
    CHECK_STR(ct_binding(m, rx, "loader"), "DataSource|ListLoader|-1");
    CHECK_STR(ct_binding(m, rx, "model"), "Model|Mlp|-1");
    CHECK_STR(ct_binding(m, rx, "aggregator"), "Aggregator|FedAvg|2");
    /* refinement narrowed the role outputs and what flows from them */
    if (tx) {
      CHECK_STR(cc_type_or_empty(tx, "v3#inl1"), F32);
      CHECK_STR(cc_type_or_empty(tx, "v4"), F32);
    }
    if (rx) CHECK_STR(cc_type_or_empty(rx, "prediction_port__recv_0"), F32);
  }
  bb_model_free(m);
  bb_compiler_free(c);
  bb_model_free(rec);
}

static void test_deterministic_and_checked(void) {
  bb_model *rec = dt_build(&FED_NETWORK);
  bb_compiler *c = fed_compiler();
  uint8_t *bytes, *a = NULL, *b = NULL;
  size_t len, na = 0, nb = 0;
  bb_error err;
  if (rec && !dt_encode(rec, &bytes, &len)) {
    CHECK(bb_compiler_compile(c, bytes, len, &a, &na, &err) == 0);
    CHECK(bb_compiler_compile(c, bytes, len, &b, &nb, &err) == 0);
    CHECK_MSG(a && b && na == nb && memcmp(a, b, na) == 0, "two compiles gave different bytes");
    bb_buffer_free(NULL, bytes);
  }
  bb_model *m = NULL;
  if (a && bb_model_decode(a, na, NULL, NULL, &m, &err) == 0) {
    /* every domain used is imported, by the model and by each function */
    for (size_t f = 0; f < m->functions.len; f++) {
      const bb_function *fn = m->functions.items[f];
      for (size_t i = 0; i < fn->nodes.len; i++) {
        const char *d = fn->nodes.items[i]->domain ? fn->nodes.items[i]->domain : "";
        CHECK_MSG(bb_opset_get(&fn->opsets, d) >= 0, "%s does not import %s", fn->name, d);
        CHECK_MSG(bb_opset_get(&m->opsets, d) >= 0, "the model does not import %s", d);
      }
    }
#ifndef __EMSCRIPTEN__
    CHECK_MSG(dt_onnx_check(m, "compiled-fednetwork") == 0, "onnx.checker rejected the compiled FedNetwork");
#endif
  }
  bb_model_free(m);
  bb_buffer_free(NULL, a);
  bb_buffer_free(NULL, b);
  bb_compiler_free(c);
  bb_model_free(rec);
}

static void test_describe(void) {
  bb_model *rec = dt_build(&FED_NETWORK);
  bb_compiler *c = fed_compiler();
  bb_model *m = rec ? ct_compile(c, rec) : NULL;
  char *text = NULL;
  size_t len = 0;
  bb_error err;
  if (m) {
    const bb_function *tx = ct_partition(m, "FedNetwork"), *rx = ct_partition(m, "FedNetwork_sink_peers");
    CHECK(bb_artifact_describe(m, BB_ARTIFACT_JSON, &text, &len, &err) == 0);
    if (text && tx && rx) {
      CHECK_EQ_INT(strlen(text), len);
      char want[512];
      snprintf(want, sizeof want,
               "\"wire_edges\":[{\"from\":\"%s\",\"to\":\"%s\",\"value\":\"v4\",\"site\":\"prediction_port__recv_0\","
               "\"wire\":\"FedNetwork.prediction_port\"}]",
               tx->name, rx->name);
      CHECK_MSG(strstr(text, want) != NULL, "JSON lacks %s", want);
      snprintf(want, sizeof want, "{\"name\":\"%s\",\"peer_class\":\"sink_peers\"", rx->name);
      CHECK_MSG(strstr(text, want) != NULL, "JSON lacks %s", want);
      snprintf(want, sizeof want, "{\"target\":\"%s\",\"slot\":\"aggregator\",\"role\":\"Aggregator\",\"type\":\"FedAvg\",\"slot_id\":2}", rx->name);
      CHECK_MSG(strstr(text, want) != NULL, "JSON lacks %s", want);
#ifndef __EMSCRIPTEN__
      /* it is JSON */
      char path[256], cmd[600];
      snprintf(path, sizeof path, "%s/bb-describe-%ld.json", BB_TEST_BINARY_DIR, (long)getpid());
      FILE *f = fopen(path, "w");
      if (f) {
        fputs(text, f);
        fclose(f);
        snprintf(cmd, sizeof cmd, "%s -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d[\"partitions\"])==2' '%s'", BB_TEST_PYTHON, path);
        CHECK_MSG(system(cmd) == 0, "describe JSON does not parse");
        remove(path);
      }
#endif
    }
    bb_buffer_free(NULL, text);
    text = NULL;
    CHECK(bb_artifact_describe(m, BB_ARTIFACT_TEXT, &text, &len, &err) == 0);
    if (text) {
      CHECK(strstr(text, "artifact: 2 partition(s), 1 wire edge(s)") != NULL);
      CHECK(strstr(text, "class sink_peers") != NULL);
    }
    bb_buffer_free(NULL, text);
    text = NULL;
    CHECK(bb_artifact_describe(m, BB_ARTIFACT_DOT, &text, &len, &err) == 0);
    if (text) {
      CHECK(strncmp(text, "digraph artifact {", 18) == 0);
      CHECK(strstr(text, "style=dashed") != NULL);
    }
    bb_buffer_free(NULL, text);
  }
  /* a recorded (uncompiled) model is refused */
  if (rec) {
    CHECK(bb_artifact_describe(rec, BB_ARTIFACT_TEXT, &text, &len, &err) == BB_ERR_MALFORMED);
    CHECK(strstr(err.message, "passport") != NULL);
  }
  bb_model_free(m);
  bb_compiler_free(c);
  bb_model_free(rec);
}

int main(void) {
  RUN(test_describe);
  RUN(test_partitions);
  RUN(test_deterministic_and_checked);
  return bb_test_finish();
}
