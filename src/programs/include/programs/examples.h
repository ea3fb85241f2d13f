/* bytesandbrains — the reference examples' Modules (docs/EXAMPLES.md), recorded with the
 * DSL and compiled with their default bindings. Used by `bb compile --example NAME`,
 * bb.wasm, the runnable programs in examples/programs and tests/examples.
 *
 * Concrete type names bound here are the names the shipped concretes and the fixtures
 * (programs/fixtures.h) register:
 *   NoopDataLoader, NoopModel   quickstart's fixtures
 *   StubLoader, StubModel,      fixtures several examples share
 *   StubAggregator
 *   CountingIndex               component_with_dependency's Index, depends on Backend
 *                               slot "compute"
 *   FlatIndex                   exact k-NN Index (custom_index; exact, so every run
 *                               finds the same neighbours)
 *   CpuBackend                  the CPU Backend
 *   FedAvg                      FedAvg<CpuBackend>, depends on Backend slot "backend"
 *   GlobalRegistryClient,       the GlobalRegistry protocol sides; the server is also a
 *   GlobalRegistryServer        PeerSelector
 *   MyModel, MyData             single_node_federated_learning's concretes
 *   OnnxModel                   any ONNX model as a trainable Model (federated_cnn)
 *   SplitModel                  one side's part of an ONNX model trained split (split_cnn)
 * Every tensor-storing port is declared BB_TYPE_TENSOR_F32. */
#ifndef BB_EXAMPLES_H
#define BB_EXAMPLES_H

#include <stddef.h>
#include <stdint.h>

#include "bb/compiler.h"
#include "bb/graph.h"

typedef struct bb_example {
  const char *name;
  const char *description;
  /* The Modules the example records; each compiles into its own artifact. */
  const bb_module *const *modules;
  size_t n_modules;
  /* Binds the default concretes for modules[module], declares their components and
   * adds any user pass. */
  int (*configure)(bb_compiler *c, size_t module, bb_error *err);
} bb_example;

/* The table, in a fixed order (the order `bb compile --examples` lists). */
BB_API const bb_example *const *bb_examples(size_t *count);
/* The example named `name`, or NULL. */
BB_API const bb_example *bb_example_find(const char *name);

/* Records ex->modules[module], configures a fresh compiler with ex->configure and
 * compiles: *out is the artifact (free with bb_buffer_free(NULL, *out)). */
BB_API int bb_example_compile(const bb_example *ex, size_t module, uint8_t **out, size_t *out_len, bb_error *err);

/* Shared by the example files: the f32 tensor storage declaration of a concrete, with
 * optional dependencies. */
BB_API int bb_example_declare(bb_compiler *c, const char *type, const bb_component_dep *deps, size_t n_deps,
                              bb_error *err);
/* CpuBackend's declaration: the same f32 storage, and the CPU executor's op set. */
BB_API int bb_example_declare_cpu_backend(bb_compiler *c, bb_error *err);

/* The examples, one per file. */
BB_API extern const bb_example BB_EXAMPLE_QUICKSTART;
BB_API extern const bb_example BB_EXAMPLE_COMPONENT_WITH_DEPENDENCY;
BB_API extern const bb_example BB_EXAMPLE_CUSTOM_INDEX;
BB_API extern const bb_example BB_EXAMPLE_MULTI_TARGET_NETWORK;
BB_API extern const bb_example BB_EXAMPLE_FEDERATED_LEARNING;
BB_API extern const bb_example BB_EXAMPLE_SINGLE_NODE_FEDERATED_LEARNING;
BB_API extern const bb_example BB_EXAMPLE_CUSTOM_COMPILER_PASS;
BB_API extern const bb_example BB_EXAMPLE_POLYMORPHIC_TYPES;
BB_API extern const bb_example BB_EXAMPLE_FEDERATED_DIGITS;
BB_API extern const bb_example BB_EXAMPLE_GOSSIP_DIGITS;
BB_API extern const bb_example BB_EXAMPLE_HIERARCHICAL_DIGITS;
BB_API extern const bb_example BB_EXAMPLE_FEDERATED_CNN;
BB_API extern const bb_example BB_EXAMPLE_SPLIT_CNN;

/* polymorphic_types' negative case: AddReluDemo seeded x = tensor.f32, y = tensor.f64,
 * which the compiler must reject (TypeConstraintFailed, "mixed" precision). Compiled
 * with the example's configure(…, 0, …). */
BB_API extern const bb_module BB_EXAMPLE_MIXED_PRECISION_DEMO;

/* federated_digits --secure: FedDigits with the clients' updates masked (SecAgg+): the
 * server's loop as FedDigits', and each client, on the [global, round] it receives, fits
 * and contributes [trained, samples, round, global] to its own aggregator slot, which
 * masks the step for the server (FedAvg with secure=1; docs/PRIVACY.md). Inputs
 * "clients", "test_x", "test_y"; one target for the server ("SecureFedDigits") and one
 * for the clients ("SecureFedDigits_clients"). Compiled with the example's configure(…,
 * 0, …) and the aggregator rebound to FedAvg with secure=1. */
BB_API extern const bb_module BB_FEDERATED_DIGITS_SECURE;

/* federated_digits: its model slot's default binding, CpuMlp with this config (the
 * example's export rebuilds the same network with bb_cpu_mlp_export). */
#define BB_FEDERATED_DIGITS_MLP_CONFIG                                                                     \
  "inputs=64,hidden=32,outputs=10,activation=relu,lr=0.05,momentum=0.9,input_scale=0.0625,fit_steps=12,data=data"

/* federated_digits' FedBuffDigits: its aggregator slot's default binding, FedBuff with this
 * config (a step every 6 contributions, at most 16 versions of lag, version 0 the
 * server model's initial parameters). */
#define BB_FEDERATED_DIGITS_FEDBUFF_CONFIG "buffer=6,max_staleness=16,init=model"

/* federated_cnn: its model slot's default binding, OnnxModel with this config; the model's
 * bytes are the slot's host data. */
#define BB_FEDERATED_CNN_MODEL_CONFIG "loss=xent,optimizer=nesterov,lr=0.05,fit_steps=10,data=data"

/* split_cnn: where federated_cnn's CNN is cut (after its convolutions; the U-shaped split
 * also before its last layer), and both sides' default SplitModel config (the model's
 * bytes are the slots' host data). */
#define BB_SPLIT_CNN_CUT "/MaxPool_1_output_0"
#define BB_SPLIT_CNN_HEAD_CUT "/Relu_2_output_0"
#define BB_SPLIT_CNN_MODEL_CONFIG "loss=xent,optimizer=nesterov,lr=0.05"
/* SplitFedCnn's averager: FedAvg of eight clients' parts, a round closing with all eight,
 * or six past 3 s (a host with another number of clients gives its own). */
#define BB_SPLIT_FED_CNN_AVERAGER_CONFIG "quorum=6,target=8,deadline_ms=3000,no_quorum=extend"

/* federated_learning: the server's peer (the id ClientLogic's bootstrap announces to),
 * how often ServerReduce closes a round, and the wires the three Modules talk on. */
#define BB_FL_SERVER_PEER 100
#define BB_FL_ROUND_NS 200000000ll
#define BB_FL_WIRE_SERVER_PARAMS "ServerLogic.server_params"
#define BB_FL_WIRE_UPDATED_PARAMS "ClientLogic.updated_params"
#define BB_FL_WIRE_GLOBAL "ServerReduce.global"

/* custom_compiler_pass: the metadata key its pass stamps on every wire Send. */
#define BB_EXAMPLE_TRACING_KEY "example.tracing_id"

#endif
