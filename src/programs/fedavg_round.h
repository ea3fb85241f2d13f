/* FedAvg's round as the federated reference programs record it (federated_digits,
 * federated_cnn, hierarchical_digits): the server's loop, a client's local fit and an
 * aggregator taking in what arrives. Each call records its ops in the order its comment
 * names them and nothing else, so a Module built from these calls is the same graph, op
 * for op and name for name, as one that writes the ops out. */
#ifndef BBI_PROGRAMS_FEDAVG_ROUND_H
#define BBI_PROGRAMS_FEDAVG_ROUND_H

#include <stdbool.h>

#include "bb/compiler.h"
#include "bb/graph.h"

/* The slots the round uses: the Model "model" and the Aggregator "aggregator". */
extern const bb_slot BBI_FEDAVG_MODEL;
extern const bb_slot BBI_FEDAVG_AGGREGATOR;

/* The server's round loop, one round every 200 ms of the host's clock:
 *   (global, round) = aggregator.Aggregate(tick); loaded = model.LoadParameters(global);
 *   accuracy = model.Evaluate(test_x, test_y, loaded);
 *   outputs "accuracy", "round", "model" (global) and, with export_onnx, "onnx"
 *   (model.Export after the load); sends the bundle [global, round] to `to` on port "global". */
void bbi_fedavg_serve(bb_rec *g, bb_value test_x, bb_value test_y, bool export_onnx, bb_value to);

/* bbi_fedavg_serve once per `tick` instead of every 200 ms. */
void bbi_fedavg_serve_on(bb_rec *g, bb_value tick, bb_value test_x, bb_value test_y, bool export_onnx, bb_value to);

/* The [global, round] bundle that arrives on `port`: parts[0] the global parameters
 * (BB_TYPE_TENSOR_F32), parts[1] the round id. */
void bbi_fedavg_receive(bb_rec *g, const char *port, bb_value parts[2]);

/* A client's round on the [global, round] that arrives on `port`:
 *   (trained, samples) = model.Fit(global)
 * Returns the bundle [trained, samples, round], the update the client sends on. */
bb_value bbi_fedavg_fit(bb_rec *g, const char *port);

/* A client's round under secure aggregation (FedAvg with secure=1), on the [global, round]
 * that arrives on `port`: (trained, samples) = model.Fit(global), then
 * aggregator.Contribute([trained, samples, round, global]) on the client itself, which
 * masks the step for the server through SecAgg+. Returns what Contribute gives. */
bb_value bbi_fedavg_contribute_secure(bb_rec *g, const char *port);

/* aggregator.Contribute(what arrives on `port`); returns what Contribute gives. */
bb_value bbi_fedavg_take_in(bb_rec *g, const bb_slot *aggregator, const char *port);

/* The whole round of a server and its clients, with its inputs: "clients" and "server"
 * (peer sets), "test_x" and "test_y" (the held-out set), then
 *   bbi_fedavg_serve to `clients`; a client sends bbi_fedavg_fit of "global" to `server`
 *   on port "update"; the server takes "update" in with the aggregator. */
void bbi_fedavg_record(bb_rec *g, bool export_onnx);

/* The default bindings of that round: the slot "model" on model_type with model_config,
 * "data" on ArraySource (batches of 32), "aggregator" on FedAvg (quorum 6, target 8, a
 * 1 s deadline that abandons a round short of its quorum, initialised from the model). */
int bbi_fedavg_configure(bb_compiler *c, const char *model_type, const char *model_config, bb_error *err);

/* The Codec slot "codec" of the compressed asynchronous round. */
extern const bb_slot BBI_FEDBUFF_CODEC;

/* The asynchronous round (FedBuff): no round barrier. With the inputs of bbi_fedavg_record,
 *   once per invocation: bbi_fedavg_serve_on to `clients` (the current model and its
 *   version, evaluated); a client sends bbi_fedavg_fit of "global" to `server` on port
 *   "update"; the server takes "update" in with the aggregator and outputs "ready", the
 *   peer it came from.
 * compressed: the client sends [codec.Encode(trained, global), samples, version] instead
 * and the server contributes codec.Decode of it (the step; FedBuff with updates=deltas)
 * with [samples, version].
 * The host invokes the server once with every client, then again with each peer that
 * is "ready": a client that finishes gets the current model and trains again. */
void bbi_fedbuff_record(bb_rec *g, bool compressed);

/* The bindings of the asynchronous round: bbi_fedavg_configure's with "aggregator" on
 * FedBuff under fedbuff_config, and with topk_config (NULL: none; the compressed round)
 * "codec" on TopKCodec. */
int bbi_fedbuff_configure(bb_compiler *c, const char *model_type, const char *model_config, const char *fedbuff_config,
                          const char *topk_config, bb_error *err);

#endif
