/* bytesandbrains — the authoring DSL: Modules, the graph recorder, role slot placeholders
 * and syscall helpers. A program is a bb_module; bb_module_build() runs its body (and
 * bootstrap) callbacks against a recorder and returns the recorded ONNX ModelProto that
 * the compiler partitions.
 *
 * Recorded model shape (names and keys: bb/artifact.h):
 *   functions[0]      the module's body, named after it, metadata module_phase=body
 *   functions[1..k]   one FunctionProto per distinct sub-module reached from the body,
 *                     in the order their first calls began (a sub-module is recorded once)
 *   then, when the bootstrap recorded a node: "<name>" BB_BOOTSTRAP_SUFFIX (module_phase=bootstrap)
 *                     followed by the sub-functions only the bootstrap reached.
 *   Every function has domain BB_DOMAIN_MODULE and imports each domain its nodes use;
 *   the model has ir_version BB_ONNX_IR_VERSION, imports every domain used plus the
 *   default ONNX domain, and an empty main graph named after the module (onnx.checker
 *   requires one; the compiler reads only the functions).
 *
 * Errors: recorder calls made inside callbacks need not be checked one by one.
 * The first misuse (a value from another function or build, a port declared twice, an
 * unknown role method, a bad name, ...) is kept, every later recorder call does nothing
 * and returns an empty value, and bb_module_build returns that first error with a
 * message naming the module and the value, slot or port at fault. */
#ifndef BB_GRAPH_H
#define BB_GRAPH_H

#include <stdbool.h>
#include "bb/artifact.h"
#include "bb/common.h"
#include "bb/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- value types (denotations: see bb/artifact.h) ------------------------------ */

/* The TypeProto the recorder writes for a denotation, in m's arena: tensor_type (the
 * matching elem_type, shape unknown) for tensor denotations, otherwise opaque_type
 * {domain BB_DOMAIN_FRAMEWORK, name = denotation}; denotation set unless abstract.
 * NULL when out of memory. */
BB_API bb_type *bb_value_type_new(bb_model *m, const char *denotation);

/* ---- modules and the recorder ------------------------------------------------- */

typedef struct bb_rec bb_rec; /* one build's recorder; lives only inside bb_module_build */

/* A recorded value: its ONNX name, its type, and the recorder and table entry it came
 * from, so that a value from another function or another build is caught. A value with
 * name NULL is "no value" (what a failed call returns). Copy freely; never fill in. */
typedef struct bb_value {
  const char *name;
  const char *type;
  const bb_rec *rec;
  uint32_t id;
} bb_value;

/* Marks an omitted optional input of a Backend op (recorded as ""). */
#define BB_VALUE_OMITTED ((bb_value){"", BB_TYPE_ABSTRACT, NULL, 0})

typedef void (*bb_module_fn)(bb_rec *rec, void *user);

/* A Module: a name, the callback that records its body, an optional one that records
 * its bootstrap, the user data both receive, and the sub-modules its callbacks may call.
 * Names are C identifiers without "__" that are not of the form v<digits> (the
 * recorder's own value names). */
typedef struct bb_module {
  size_t struct_size; /* sizeof(bb_module): lets the struct grow */
  const char *name;
  bb_module_fn body;
  bb_module_fn bootstrap; /* NULL: no bootstrap */
  void *user;
  const struct bb_module *const *submodules;
  size_t n_submodules;
} bb_module;

/* Records the module into a new ONNX model (release it with bb_model_free). On failure
 * *out is NULL and err holds the first error of the recording. */
BB_API int bb_module_build(const bb_module *module, const bb_allocator *alloc, bb_model **out, bb_error *err);

/* Ends the recording with the author's own error (the message is prefixed with the
 * module). Returns code. */
BB_API int bb_rec_fail(bb_rec *rec, int code, const char *fmt, ...)
       #if defined(__GNUC__) || defined(__clang__)
           __attribute__((format(printf, 3, 4)))
       #endif
           ;

/* True once the recording has failed: a callback may stop early. */
BB_API bool bb_rec_failed(const bb_rec *rec);

/* ---- values in, values out ----------------------------------------------------- */

/* Declares an input (a formal of this module's function) and returns it. type NULL takes
 * the type of the value the caller binds to it, or BB_TYPE_BYTES in the top-level
 * module; a type that differs from the bound value's concrete type is an error. Declaring
 * the same input again returns it again. Inside a sub-module the caller must bind it. */
BB_API bb_value bb_rec_input(bb_rec *rec, const char *name, const char *type);

/* Declares a local output port: a syscall PassThrough from value to a value named
 * `name`, added to the function's outputs. Returns the port value. A port name may be
 * declared once. */
BB_API bb_value bb_rec_output(bb_rec *rec, const char *name, bb_value value);

/* Sends value to peers (bb.peer_id, bb.peer_id_vec, or an untyped input) as network
 * port `port`: a wire.Send [value, peers] -> [port, handle]. The port joins the
 * function's outputs; its value (read it with bb_rec_lookup_output) is what the
 * receiving side consumes. Returns the request handle (bb.wire_req_id). */
BB_API bb_value bb_rec_net_out(bb_rec *rec, const char *port, bb_value peers, bb_value value);

/* The wire a network port sends on is "<Module>.<port>", Module being the module whose
 * body is compiled (a port recorded in a sub-module is inlined under a name the
 * inliner extends with "#inl<k>"). Peers compiled apart agree on a wire by its name, so
 * a port whose wire must stay put while the program changes around it can be given its
 * wire's name (see BB_WIRE_NAME_MAX in bb/artifact.h for what a name may hold). */
BB_API bb_value bb_rec_net_out_wire(bb_rec *rec, const char *port, const char *wire, bb_value peers, bb_value value);

/* Receives what a network port of another Module — compiled apart, running on other
 * peers or on this one — sends: a wire.Recv listening to the wire named `wire`
 * ("<Module>.<port>", or the name bb_rec_net_out_wire gave it). Returns the payload,
 * typed `type` (what the node refuses a fill of another type with); *sender (sender
 * may be NULL) gets the sending peer's id, a bb.peer_id. Every fill that arrives starts
 * a run of this function in which the payload and the sender hold values. */
BB_API bb_value bb_rec_net_in(bb_rec *rec, const char *wire, const char *type, bb_value *sender);

/* The value of an output port this function already declared (bb_rec_output or
 * bb_rec_net_out). */
BB_API bb_value bb_rec_lookup_output(bb_rec *rec, const char *port);

/* The peer a network port's value came from, where it arrives: a bb.peer_id that the
 * receiving side can answer to (bb_rec_net_out(rec, "reply", sender, ...) sends back to
 * the peer class that sent). `port` must be a network port of this function. */
BB_API bb_value bb_rec_lookup_sender(bb_rec *rec, const char *port);

/* Packs values into one composite (composite.Bundle, attributes child_count and
 * child_types = the parts' denotations, comma-joined). */
BB_API bb_value bb_rec_bundle(bb_rec *rec, const bb_value *parts, size_t n_parts);

/* Unpacks a composite into n parts typed types[i] (composite.Unbundle). Returns 0 or the
 * recording's error. */
BB_API int bb_rec_unbundle(bb_rec *rec, bb_value composite, const char *const *types, bb_value *parts,
                           size_t n_parts);

/* ---- sub-module calls ------------------------------------------------------------ */

/* Binds a value of the caller to a callee input, by the callee's input name. */
typedef struct bb_binding {
  const char *input;
  bb_value value;
} bb_binding;

/* A recorded CALL; read its outputs by port name with bb_rec_call_output. */
typedef struct bb_call {
  const bb_rec *rec;
  uint32_t id;
} bb_call;

/* Calls a sub-module (one of the current module's submodules): records its body into its
 * own function on first use, then a CALL node (domain BB_DOMAIN_MODULE, op_type = its
 * name) whose inputs follow the callee's declared inputs, matched by name; every callee
 * input must be bound exactly once. */
BB_API bb_call bb_rec_call(bb_rec *rec, const bb_module *callee, const bb_binding *bindings, size_t n_bindings);

/* From a bootstrap callback: composes a sub-module's bootstrap, a CALL to
 * "<name>__bootstrap". Nothing is recorded when the callee's bootstrap records nothing. */
BB_API bb_call bb_rec_call_bootstrap(bb_rec *rec, const bb_module *callee, const bb_binding *bindings,
                                     size_t n_bindings);

/* The CALL's output for the callee's port, typed as the callee recorded it. */
BB_API bb_value bb_rec_call_output(bb_rec *rec, bb_call call, const char *port);

/* ---- role slot placeholders --------------------------------------------------------- */

/* A role placeholder, named by the author; the compiler binds a concrete component to it
 * by that name. A slot's id is minted the first time a build records one of its methods
 * (one counter per build, shared by body and bootstrap) and every slot handle with the
 * same name is the same slot. peer_class is for PeerSelector slots only (the class of
 * the peers it picks; NULL means "@self"). Slot names and classes are C identifiers. */
typedef struct bb_slot {
  bb_role role;
  const char *name;
  const char *peer_class;
} bb_slot;

/* An attribute for an op: name, type (BB_ATTR_INT, FLOAT, STRING, INTS, FLOATS, STRINGS
 * or TENSOR) and the matching field(s). The BB_OP_ATTR_* macros fill one in. */
typedef struct bb_literal bb_literal;
typedef struct bb_op_attr {
  const char *name;
  bb_attr_type type;
  int64_t i;
  float f;
  const char *s;
  const int64_t *ints;
  const float *floats;
  const char *const *strings;
  size_t n;
  const bb_literal *t;
} bb_op_attr;

#define BB_OP_ATTR_INT(nm, v) ((bb_op_attr){.name = (nm), .type = BB_ATTR_INT, .i = (v)})
#define BB_OP_ATTR_FLOAT(nm, v) ((bb_op_attr){.name = (nm), .type = BB_ATTR_FLOAT, .f = (v)})
#define BB_OP_ATTR_STRING(nm, v) ((bb_op_attr){.name = (nm), .type = BB_ATTR_STRING, .s = (v)})
#define BB_OP_ATTR_INTS(nm, v, cnt) ((bb_op_attr){.name = (nm), .type = BB_ATTR_INTS, .ints = (v), .n = (cnt)})
#define BB_OP_ATTR_FLOATS(nm, v, cnt) \
  ((bb_op_attr){.name = (nm), .type = BB_ATTR_FLOATS, .floats = (v), .n = (cnt)})
#define BB_OP_ATTR_TENSOR(nm, lit) ((bb_op_attr){.name = (nm), .type = BB_ATTR_TENSOR, .t = (lit)})

/* A tensor literal: element type, dims, and the elements little-endian in data (len must
 * be numel * element size; data NULL means zeros). */
struct bb_literal {
  bb_dtype dtype;
  const int64_t *dims;
  size_t n_dims;
  const void *data;
  size_t len;
};

/* Records slot.method(inputs) — the generic form behind the wrappers below. method is
 * the op type: a role method ("Forward", "NextBatch", ...), or for Backend slots the
 * name of an ONNX operator ("Add", "Gemm", ...; any C identifier). Which operators a
 * Backend slot accepts is the business of the backend bound to it: the compiler checks
 * each against the op set its type declared (bb_compiler_declare_op_set). Role methods
 * take exactly their inputs and outputs and only their own INT attribute (Search: k,
 * Sample: n); Backend ops take any attributes and n_outputs >= 1. The node carries
 * required_trait, slot_id, slot_name and the method's extra metadata; outputs are typed
 * Backend: tensor f32; roles: abstract, Train: trigger, PeerSelector: peer id. Returns 0
 * or the recording's error. */
BB_API int bb_rec_role_call(bb_rec *rec, const bb_slot *slot, const char *method, const bb_value *inputs,
                            size_t n_inputs, const bb_op_attr *attrs, size_t n_attrs, bb_value *outputs,
                            size_t n_outputs);

/* Backend: a one-output ai.onnx op on the slot's backend. */
BB_API bb_value bb_rec_backend(bb_rec *rec, const bb_slot *slot, const char *op, const bb_value *inputs,
                               size_t n_inputs, const bb_op_attr *attrs, size_t n_attrs);

/* Model. */
BB_API bb_value bb_rec_model_forward(bb_rec *rec, const bb_slot *slot, bb_value x);
BB_API bb_value bb_rec_model_backward(bb_rec *rec, const bb_slot *slot, bb_value grad);
BB_API bb_value bb_rec_model_compute_loss(bb_rec *rec, const bb_slot *slot, bb_value prediction, bb_value target);
BB_API bb_value bb_rec_model_apply_delta(bb_rec *rec, const bb_slot *slot, bb_value delta);
BB_API bb_value bb_rec_model_load_parameters(bb_rec *rec, const bb_slot *slot, bb_value params);
BB_API bb_value bb_rec_model_params(bb_rec *rec, const bb_slot *slot);
/* Fit and Evaluate (docs/DEVIATIONS.md): Fit(params) loads params, trains
 * locally (the concrete decides how, e.g. on its DataSource dependency) and gives the
 * trained params and the number of samples it saw; Evaluate(x, labels) gives a score
 * (accuracy for classifiers). */
BB_API int bb_rec_model_fit(bb_rec *rec, const bb_slot *slot, bb_value params, bb_value *trained, bb_value *samples);
BB_API bb_value bb_rec_model_evaluate(bb_rec *rec, const bb_slot *slot, bb_value x, bb_value labels);
/* Export: the model with its current parameters as standalone ONNX bytes (Bytes), in
 * inference form, for onnxruntime or any ONNX runtime. */
BB_API bb_value bb_rec_model_export(bb_rec *rec, const bb_slot *slot);
/* The `_after` forms take an ordering trigger: the op runs (again) only once `after` has
 * a value, e.g. a tick of an Interval or the end of an earlier step. */
BB_API bb_value bb_rec_model_params_after(bb_rec *rec, const bb_slot *slot, bb_value after);
BB_API bb_value bb_rec_model_export_after(bb_rec *rec, const bb_slot *slot, bb_value after);

/* Index. */
BB_API bb_value bb_rec_index_add(bb_rec *rec, const bb_slot *slot, bb_value vector);
BB_API bb_value bb_rec_index_search(bb_rec *rec, const bb_slot *slot, bb_value query, int64_t k);
BB_API bb_value bb_rec_index_remove(bb_rec *rec, const bb_slot *slot, bb_value id);
BB_API bb_value bb_rec_index_train(bb_rec *rec, const bb_slot *slot, bb_value samples);

/* Aggregator. aggregate fills params and metadata (either may be NULL). */
BB_API bb_value bb_rec_aggregator_contribute(bb_rec *rec, const bb_slot *slot, bb_value contribution,
                                             bb_value metadata);
BB_API int bb_rec_aggregator_aggregate(bb_rec *rec, const bb_slot *slot, bb_value trigger, bb_value *params,
                                       bb_value *metadata);

/* Codec. */
BB_API bb_value bb_rec_codec_train(bb_rec *rec, const bb_slot *slot, bb_value samples);
BB_API bb_value bb_rec_codec_encode(bb_rec *rec, const bb_slot *slot, bb_value x);
BB_API bb_value bb_rec_codec_decode(bb_rec *rec, const bb_slot *slot, bb_value y);
/* Encode(x, reference) / Decode(y, reference): x travels relative to the reference (a
 * federated client's update against the global model it trained from), and Decode gives
 * reference + the decoded difference (bb/roles.h, bb_codec_ops). */
BB_API bb_value bb_rec_codec_encode_against(bb_rec *rec, const bb_slot *slot, bb_value x, bb_value reference);
BB_API bb_value bb_rec_codec_decode_against(bb_rec *rec, const bb_slot *slot, bb_value y, bb_value reference);

/* DataSource. next_batch fills batch and labels (either may be NULL). */
BB_API int bb_rec_data_source_next_batch(bb_rec *rec, const bb_slot *slot, bb_value *batch, bb_value *labels);
BB_API int bb_rec_data_source_next_batch_after(bb_rec *rec, const bb_slot *slot, bb_value after, bb_value *batch,
                                               bb_value *labels);
BB_API bb_value bb_rec_data_source_reset(bb_rec *rec, const bb_slot *slot, bb_value trigger);
BB_API bb_value bb_rec_data_source_on_data_loaded(bb_rec *rec, const bb_slot *slot);

/* PeerSelector. */
BB_API bb_value bb_rec_peer_selector_sample(bb_rec *rec, const bb_slot *slot, int64_t n);
BB_API bb_value bb_rec_peer_selector_current_view(bb_rec *rec, const bb_slot *slot);
BB_API bb_value bb_rec_peer_selector_sample_after(bb_rec *rec, const bb_slot *slot, int64_t n, bb_value after);

/* ---- split learning ------------------------------------------------------------------ */

typedef enum bb_split_shape {
  /* the client holds the first layers, the server the rest and the loss: the labels
   * travel with the activations */
  BB_SPLIT_VANILLA = 0,
  /* the client holds the first layers and the last ones with the loss, the server the
   * middle: the labels never leave the client */
  BB_SPLIT_U = 1
} bb_split_shape;

/* How long a client's step waits for its answer by default (SplitModel's timeout_ms), and
 * so how long the split's messages live on the wire (their deadline). */
#define BB_SPLIT_TIMEOUT_MS 10000

/* One ONNX model trained across two peer classes, cut at named values (docs/SPLIT.md).
 * The model itself is the slots' business: each side's slot is bound to a component that
 * takes the model (SplitModel), and the compiler tells each which part it holds. */
typedef struct bb_split {
  size_t struct_size; /* sizeof(bb_split) */
  bb_split_shape shape;
  /* the values of the model it is cut at, in the model's order: one (vanilla) or two
   * (U-shaped; the client's first part ends at cuts[0], the server's at cuts[1]) */
  const char *const *cuts;
  size_t n_cuts;
  /* Model slots of the clients' part(s) and the server's; the clients' component draws
   * its batches from a DataSource it depends on */
  const bb_slot *client;
  const bb_slot *server;
  /* the peers the clients send to: a peer-typed value whose name (an input) or class (a
   * PeerSelector's) is the server's peer class */
  bb_value server_peers;
  /* each value starts a client's step (an Interval): a step waits while the last one
   * waits for its gradients */
  bb_value tick;
  /* a held-out set on the clients, scored whenever eval_tick has a value; all three, or
   * none (names NULL) */
  bb_value test_x, test_y, eval_tick;
  /* SplitFed (optional: NULL for none): an Aggregator slot on the server's peers that
   * averages the clients' parts, and the peers the average goes to (a peer-typed value;
   * the clients run the partition of its class too) */
  const bb_slot *averager;
  bb_value clients;
} bb_split;

/* Records split learning of one model between the peers that run the module (the
 * clients) and the server's peers, as network ports of this function:
 *   vanilla   client: (a, y, step) = client.SplitForward(tick) (a batch and its forward,
 *                     unless a step waits) -> "split_activations" [a, y, step]
 *             server: (g, loss) = server.SplitLoss(a, y); output "split_loss";
 *                     -> sender "split_gradients" [g, step]
 *             client: client.SplitBackward(g, step)
 *   U         client: SplitForward -> "split_activations" [a1, step]
 *             server: a2 = server.SplitRelay(a1, step) -> sender "split_features" [a2, step]
 *             client: (g2, loss) = client.SplitLoss(a2, step) (the labels stayed here);
 *                     output "split_loss"; -> "split_head_gradients" [g2, step]
 *             server: g1 = server.SplitBackward(g2, step) -> sender "split_gradients" [g1, step]
 *             client: client.SplitBackward(g1, step)
 * SplitFed: every tick the client's part is offered to be averaged (client.SplitShare:
 * given once it has taken its round of steps, and then the client waits for the
 * average) -> "split_share"; the server's averager.Contribute(part, part) (weight 1), then
 * averager.Aggregate -> "split_average" to `clients`, where client.LoadParameters takes it.
 * With a held-out set: the client's part's Forward of test_x (at eval_tick) travels on
 * "split_eval" (vanilla, with test_y, to the server's Evaluate, whose score comes back on
 * "split_score") or through the server's Forward and back on "split_eval_features" (U:
 * the client's Evaluate); each client outputs its score as "accuracy". Every op on the
 * two slots carries the cuts,
 * the shape and its side (BB_KEY_SPLIT_*), which the compiler hands the components it
 * binds there. Returns 0 or the recording's error. */
BB_API int bb_rec_split(bb_rec *rec, const bb_split *split);

/* ---- syscall helpers ---------------------------------------------------------------- */

/* syscall PassThrough: x under a new name, same type. */
BB_API bb_value bb_rec_pass_through(bb_rec *rec, bb_value x);

/* syscall Constant with attribute value = the literal, typed `type` (NULL: the literal's
 * tensor type); label (may be NULL) goes to metadata bootstrap.seed for diagnostics. */
BB_API bb_value bb_rec_constant(bb_rec *rec, const char *label, const char *type, const bb_literal *value);

/* syscall Interval: a trigger every period_ns (0 leaves the compiler's default). */
BB_API bb_value bb_rec_interval(bb_rec *rec, int64_t period_ns);

/* syscall GateDispatch: a barrier over n inputs; bytes out. */
BB_API bb_value bb_rec_gate_dispatch(bb_rec *rec, const bb_value *inputs, size_t n_inputs);

/* address_book Insert / InsertMany (trigger out) and Lookup (address vector out). */
BB_API bb_value bb_rec_address_book_insert(bb_rec *rec, bb_value peer, bb_value address);
BB_API bb_value bb_rec_address_book_insert_many(bb_rec *rec, bb_value peer, bb_value addresses);
BB_API bb_value bb_rec_address_book_lookup(bb_rec *rec, bb_value peer);

/* protocol.global_registry Announce toward server_peer (trigger out); metadata
 * input.server_peer names the input. */
BB_API bb_value bb_rec_announce(bb_rec *rec, bb_value server_peer);

/* Any syscall the runtime implements, by op type, checked against its shape: how many
 * inputs and outputs it takes, its attributes (name, type, required, least value) and
 * how its outputs are typed. The ops, by what they do (docs/AUTHORING.md has the table):
 *   structure  PassThrough, Tee (n outputs), Gate, Any (attr group), OnTrigger, Pulse,
 *              EventSource, LifecyclePhase, GateDispatch
 *   time       Interval (period_ns), Clock, RngU64, After (delay_ns), Sleep (duration_ns)
 *   named      Limit.Acquire (name, n), Limit.Release (name), Serialize.Enqueue and
 *              Serialize.Dequeue (queue), Hold.Stash and Hold.Flush (slot), Record (name):
 *              what they keep is Bytes
 *   telemetry  AppEmit, AppNotify (name: an application topic), IncrMetric (name, delta)
 *   tokens     CorrelateTag, BootstrapDispatch, BootstrapOutput
 * Constant takes a literal (bb_rec_constant); the gates and deadline checks are the
 * compiler's. Inputs of ops that wait on something are ordering triggers: the op runs once
 * they all have values. Returns 0 or the recording's error. */
BB_API int bb_rec_syscall(bb_rec *rec, const char *op, const bb_value *inputs, size_t n_inputs, const bb_op_attr *attrs,
                          size_t n_attrs, bb_value *outputs, size_t n_outputs);

/* The syscalls bb_rec_syscall records, in table order: how many, and the i-th op type
 * (NULL past the end). */
BB_API size_t bb_rec_syscall_count(void);
BB_API const char *bb_rec_syscall_name(size_t i);

/* A protocol's op: `op` in `domain` (BB_DOMAIN_PROTOCOL_PREFIX "<name>"), slotless, with
 * any attributes and n_outputs abstract outputs. At install the component whose type
 * speaks the domain runs it (the one bound as Protocol first). Returns 0 or the
 * recording's error. */
BB_API int bb_rec_protocol_call(bb_rec *rec, const char *domain, const char *op, const bb_value *inputs,
                                size_t n_inputs, const bb_op_attr *attrs, size_t n_attrs, bb_value *outputs,
                                size_t n_outputs);

#ifdef __cplusplus
}
#endif
#endif /* BB_GRAPH_H */
