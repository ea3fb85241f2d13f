#include "fedavg_round.h"

#include "programs/examples.h"

const bb_slot BBI_FEDAVG_MODEL = {BB_ROLE_MODEL, "model", NULL};
const bb_slot BBI_FEDAVG_AGGREGATOR = {BB_ROLE_AGGREGATOR, "aggregator", NULL};

/* One round every 200 ms of the host's clock. */
#define ROUND_PERIOD_NS 200000000

void bbi_fedavg_serve(bb_rec *g, bb_value test_x, bb_value test_y, bool export_onnx, bb_value to) {
  bbi_fedavg_serve_on(g, bb_rec_interval(g, ROUND_PERIOD_NS), test_x, test_y, export_onnx, to);
}

void bbi_fedavg_serve_on(bb_rec *g, bb_value tick, bb_value test_x, bb_value test_y, bool export_onnx, bb_value to) {
  bb_value global, round;
  bb_rec_aggregator_aggregate(g, &BBI_FEDAVG_AGGREGATOR, tick, &global, &round);
  bb_value loaded = bb_rec_model_load_parameters(g, &BBI_FEDAVG_MODEL, global);
  bb_value eval_in[3] = {test_x, test_y, loaded};
  bb_value accuracy;
  bb_rec_role_call(g, &BBI_FEDAVG_MODEL, "Evaluate", eval_in, 3, NULL, 0, &accuracy, 1);
  bb_rec_output(g, "accuracy", accuracy);
  bb_rec_output(g, "round", round);
  bb_rec_output(g, "model", global);
  if (export_onnx) bb_rec_output(g, "onnx", bb_rec_model_export_after(g, &BBI_FEDAVG_MODEL, loaded));
  bb_value to_clients[2] = {global, round};
  bb_rec_net_out(g, "global", to, bb_rec_bundle(g, to_clients, 2));
}

void bbi_fedavg_receive(bb_rec *g, const char *port, bb_value parts[2]) {
  static const char *const GLOBAL_PARTS[] = {BB_TYPE_TENSOR_F32, BB_TYPE_ABSTRACT};
  bb_rec_unbundle(g, bb_rec_lookup_output(g, port), GLOBAL_PARTS, parts, 2);
}

bb_value bbi_fedavg_fit(bb_rec *g, const char *port) {
  bb_value parts[2];
  bbi_fedavg_receive(g, port, parts);
  bb_value trained, samples;
  bb_rec_model_fit(g, &BBI_FEDAVG_MODEL, parts[0], &trained, &samples);
  bb_value update[3] = {trained, samples, parts[1]};
  return bb_rec_bundle(g, update, 3);
}

bb_value bbi_fedavg_contribute_secure(bb_rec *g, const char *port) {
  bb_value parts[2];
  bbi_fedavg_receive(g, port, parts);
  bb_value trained, samples;
  bb_rec_model_fit(g, &BBI_FEDAVG_MODEL, parts[0], &trained, &samples);
  bb_value update[4] = {trained, samples, parts[1], parts[0]};
  bb_value bundle = bb_rec_bundle(g, update, 4);
  return bb_rec_aggregator_contribute(g, &BBI_FEDAVG_AGGREGATOR, bundle, bundle);
}

bb_value bbi_fedavg_take_in(bb_rec *g, const bb_slot *aggregator, const char *port) {
  bb_value received = bb_rec_lookup_output(g, port);
  return bb_rec_aggregator_contribute(g, aggregator, received, received);
}

void bbi_fedavg_record(bb_rec *g, bool export_onnx) {
  bb_value clients = bb_rec_input(g, "clients", BB_TYPE_PEER_ID_VEC);
  bb_value server = bb_rec_input(g, "server", BB_TYPE_PEER_ID_VEC);
  bb_value test_x = bb_rec_input(g, "test_x", bb_tensor_type(BB_DTYPE_FLOAT));
  bb_value test_y = bb_rec_input(g, "test_y", bb_tensor_type(BB_DTYPE_FLOAT));
  bbi_fedavg_serve(g, test_x, test_y, export_onnx, clients);
  bb_rec_net_out(g, "update", server, bbi_fedavg_fit(g, "global"));
  bbi_fedavg_take_in(g, &BBI_FEDAVG_AGGREGATOR, "update");
}

const bb_slot BBI_FEDBUFF_CODEC = {BB_ROLE_CODEC, "codec", NULL};

/* A client's update as its step, encoded by the codec against the global model it
 * trained from: [encoded, samples, version]. */
static bb_value fit_encoded(bb_rec *g, const char *port) {
  bb_value parts[2];
  bbi_fedavg_receive(g, port, parts);
  bb_value trained, samples;
  bb_rec_model_fit(g, &BBI_FEDAVG_MODEL, parts[0], &trained, &samples);
  bb_value update[3] = {bb_rec_codec_encode_against(g, &BBI_FEDBUFF_CODEC, trained, parts[0]), samples, parts[1]};
  return bb_rec_bundle(g, update, 3);
}

/* The server's intake of an encoded update: the decoded step, with [samples, version]. */
static void take_in_encoded(bb_rec *g, const char *port) {
  static const char *const PARTS[] = {BB_TYPE_ABSTRACT, BB_TYPE_ABSTRACT, BB_TYPE_ABSTRACT};
  bb_value parts[3];
  bb_rec_unbundle(g, bb_rec_lookup_output(g, port), PARTS, parts, 3);
  bb_value delta = bb_rec_codec_decode(g, &BBI_FEDBUFF_CODEC, parts[0]);
  bb_rec_aggregator_contribute(g, &BBI_FEDAVG_AGGREGATOR, delta, bb_rec_bundle(g, parts + 1, 2));
}

void bbi_fedbuff_record(bb_rec *g, bool compressed) {
  bb_value clients = bb_rec_input(g, "clients", BB_TYPE_PEER_ID_VEC);
  bb_value server = bb_rec_input(g, "server", BB_TYPE_PEER_ID_VEC);
  bb_value test_x = bb_rec_input(g, "test_x", bb_tensor_type(BB_DTYPE_FLOAT));
  bb_value test_y = bb_rec_input(g, "test_y", bb_tensor_type(BB_DTYPE_FLOAT));
  bb_value once;
  bb_rec_syscall(g, "Pulse", NULL, 0, NULL, 0, &once, 1);
  bbi_fedavg_serve_on(g, once, test_x, test_y, false, clients);
  bb_rec_net_out(g, "update", server, compressed ? fit_encoded(g, "global") : bbi_fedavg_fit(g, "global"));
  if (compressed)
    take_in_encoded(g, "update");
  else
    bbi_fedavg_take_in(g, &BBI_FEDAVG_AGGREGATOR, "update");
  bb_rec_output(g, "ready", bb_rec_lookup_sender(g, "update"));
}

int bbi_fedbuff_configure(bb_compiler *c, const char *model_type, const char *model_config, const char *fedbuff_config,
                          const char *topk_config, bb_error *err) {
  bb_compiler_set_permissive_types(c, true);
  static const bb_component_port codec_ports[] = {{"in", BB_TYPE_TENSOR_F32}, {"out", BB_TYPE_BYTES}};
  const bb_component_decl topk = {sizeof topk, "TopKCodec", codec_ports, 2, NULL, 0};
  if (topk_config && (bb_compiler_declare_component(c, &topk, err) ||
                      bb_compiler_bind_codec(c, "codec", "TopKCodec", topk_config, err)))
    return err ? err->code : BB_ERR_INVALID_ARGUMENT;
  if (bb_example_declare(c, model_type, NULL, 0, err) || bb_example_declare(c, "ArraySource", NULL, 0, err) ||
      bb_example_declare(c, "FedBuff", NULL, 0, err) ||
      bb_compiler_bind_model(c, "model", model_type, model_config, err) ||
      bb_compiler_bind_data_source(c, "data", "ArraySource", "batch=32", err) ||
      bb_compiler_bind_aggregator(c, "aggregator", "FedBuff", fedbuff_config, err))
    return err ? err->code : BB_ERR_INVALID_ARGUMENT;
  return 0;
}

int bbi_fedavg_configure(bb_compiler *c, const char *model_type, const char *model_config, bb_error *err) {
  static const bb_component_dep fedavg_deps[] = {{BB_ROLE_MODEL, "model"}};
  /* round ids and sample counts are metadata values without a storage type */
  bb_compiler_set_permissive_types(c, true);
  if (bb_example_declare(c, model_type, NULL, 0, err) || bb_example_declare(c, "ArraySource", NULL, 0, err) ||
      bb_example_declare(c, "FedAvg", fedavg_deps, 1, err) ||
      bb_compiler_bind_model(c, "model", model_type, model_config, err) ||
      bb_compiler_bind_data_source(c, "data", "ArraySource", "batch=32", err) ||
      bb_compiler_bind_aggregator(c, "aggregator", "FedAvg", "quorum=6,target=8,deadline_ms=1000,no_quorum=abandon,init=model", err))
    return err ? err->code : BB_ERR_INVALID_ARGUMENT;
  return 0;
}
