/* bytesandbrains — the flat C ABI that bb.wasm exports to JavaScript (js/src/).
 *
 * Only numbers cross the boundary. Objects are named by handles: positive int32 values
 * that index a bounded table of pointers inside the module. A handle also carries its
 * slot's generation, so a handle kept after its object was freed is rejected with
 * BB_ERR_INVALID_ARGUMENT instead of reaching whatever object reuses the slot.
 *
 * Errors: every function that can fail returns a negative BB_ERR_* code and records it
 * with a message; each such call first clears the record, so after a success
 * bb_wasm_last_error_code() is 0 and bb_wasm_last_error() is "".
 *
 * Results: a call that produces bytes or text leaves them in one result buffer
 * (bb_wasm_result_ptr / bb_wasm_result_len), valid until the next call that produces a
 * result; such a call empties the buffer first, so after a failure it is empty.
 *
 * Tensors: a tensor handle holds one reference to a bb_tensor. Tensors a session run
 * returns may share storage with its inputs (Identity, Reshape and other views do), so
 * writing into an input after a run can change such an output.
 *
 * Lifetimes: free every handle when done; the garbage collector of JavaScript sees none
 * of them. A session keeps the model it was made from alive, so models and sessions may
 * be freed in any order (the model's handle dies at once, its memory with the last user).
 *
 * Bump BB_WASM_ABI_VERSION whenever a signature or a meaning here changes, or a function
 * is added: the loader refuses a module whose version it was not written for.
 * Version 2 added tensors, CPU sessions and the operator listing; version 3 the engine:
 * the compiler and the examples' Modules, data sets, nodes, and components whose methods
 * run in the host; version 4 Modules the host records, op sets of Backend types, and host
 * components with control-plane messages, timers, events, dependencies and state; version 5
 * trainers (any ONNX model trained in the module) and models as a slot's host data at
 * install; version 6 join tokens: a node installed with a room and its operator keys
 * checks the tokens the host hands it (bb_wasm_node_admit_token); version 7 split learning
 * (bb_wasm_rec_split) and the sender of a network port (bb_wasm_rec_lookup_sender); version 8
 * the work pool's threads (bb_wasm_set_threads, the workers' loop of bb-mt.wasm); version 9
 * the workers' stacks, which the module holds per slot (bb_wasm_worker_stack, _free); version
 * 10 tensors whose elements the host writes (bb_wasm_tensor_new_empty). */
#ifndef BB_WASM_H
#define BB_WASM_H

#include <stddef.h>
#include <stdint.h>

#define BB_WASM_ABI_VERSION 10u

/* Marks a function bb.wasm imports from its host (module "env"). */
#if defined(__EMSCRIPTEN__) && !defined(BB_WASM_HOST_LINKED) /* tests link their own */
#define BB_WASM_HOST_IMPORT(name) __attribute__((import_module("env"), import_name(#name)))
#else
#define BB_WASM_HOST_IMPORT(name)
#endif


/* Most objects alive at once, of all kinds together. */
#define BB_WASM_MAX_HANDLES 1024

/* The ABI version this module implements (BB_WASM_ABI_VERSION). */
uint32_t bb_wasm_abi_version(void);

/* The library's version, BB_VERSION_STRING, as a NUL-terminated string. */
const char *bb_wasm_version(void);

/* Memory for passing bytes in: at least `size` bytes (a zero size still gives a unique
 * pointer), or NULL with BB_ERR_NOMEM recorded. Release it with bb_wasm_free. */
void *bb_wasm_alloc(size_t size);
void bb_wasm_free(void *ptr);

/* The code and message of the last fallible call: 0 and "" when it succeeded. */
int32_t bb_wasm_last_error_code(void);
const char *bb_wasm_last_error(void);

/* The result buffer (NULL and 0 when empty). Text results are NUL-terminated; the
 * length does not count the NUL. */
const uint8_t *bb_wasm_result_ptr(void);
size_t bb_wasm_result_len(void);

/* Decodes ONNX ModelProto bytes (copied; the caller may free them afterwards) into a
 * model. Returns the model's handle, or a negative code. */
int32_t bb_wasm_model_decode(const uint8_t *data, size_t len);

/* Encodes a model as ModelProto bytes into the result buffer. Returns 0 or a code. */
int32_t bb_wasm_model_encode(int32_t model);

/* Writes a readable summary of a model (JSON when json is nonzero) into the result
 * buffer. Returns 0 or a code. */
int32_t bb_wasm_model_summary(int32_t model, int32_t json);

/* Frees a model and retires its handle; sessions made from it keep working. Returns 0
 * or a code. */
int32_t bb_wasm_model_free(int32_t model);

/* ---- tensors ------------------------------------------------------------------------- */

/* A new zero-filled tensor of a bb_dtype (any but UNDEFINED and STRING) with `rank`
 * (0..8) dims read from dims (rank int64 values; may be NULL for rank 0). Returns its
 * handle, or a negative code. */
int32_t bb_wasm_tensor_new(int32_t dtype, int32_t rank, const int64_t *dims);

/* The same, its elements left unset for the caller to write every one of them (what
 * Tensor.from does: it copies the host's array over them at once, so the zero fill would be
 * a wasted pass over the tensor). Returns its handle, or a negative code. */
int32_t bb_wasm_tensor_new_empty(int32_t dtype, int32_t rank, const int64_t *dims);

/* The tensor's bb_dtype, or a negative code. */
int32_t bb_wasm_tensor_dtype(int32_t tensor);

/* The tensor's rank, or a negative code. */
int32_t bb_wasm_tensor_rank(int32_t tensor);

/* The tensor's dims: rank int64 values, valid until the tensor is freed. NULL with the
 * error recorded for a bad handle. */
const int64_t *bb_wasm_tensor_dims(int32_t tensor);

/* The tensor's elements, contiguous, row-major and little-endian (numel × element size
 * bytes, aligned to 64; complex values as real, imaginary pairs; float16 and bfloat16 as
 * their bits). Writable, and valid until the tensor is freed. NULL with the error
 * recorded for a bad handle. */
void *bb_wasm_tensor_data(int32_t tensor);

/* The size of the tensor's elements in bytes, or a negative code. */
int32_t bb_wasm_tensor_nbytes(int32_t tensor);

/* Drops the tensor's handle (and its storage, unless an output or input shares it).
 * Returns 0 or a code. */
int32_t bb_wasm_tensor_free(int32_t tensor);

/* ---- CPU sessions ---------------------------------------------------------------------- */

/* Prepares the main graph of a model for running on the CPU backend. Fails with
 * BB_ERR_UNSUPPORTED naming the first node whose op the backend lacks. Returns the
 * session's handle, or a negative code. */
int32_t bb_wasm_session_new(int32_t model);

/* How many inputs a run needs (graph inputs that are not initializers), or a code. */
int32_t bb_wasm_session_input_count(int32_t session);

/* The name of input i, valid until the session is freed; NULL with the error recorded. */
const char *bb_wasm_session_input_name(int32_t session, int32_t i);

/* How many outputs a run produces, or a negative code. */
int32_t bb_wasm_session_output_count(int32_t session);

/* The name of output i, valid until the session is freed; NULL with the error recorded. */
const char *bb_wasm_session_output_name(int32_t session, int32_t i);

/* Runs the graph. input_names holds n_inputs NUL-terminated UTF-8 names back to back in
 * names_len bytes; input_tensors the n_inputs tensor handles in the same order. Every
 * input must be given (an initializer may be overridden too). On success
 * output_tensors[0..output_count) receive new tensor handles in graph output order, and
 * 0 is returned; on failure nothing is issued and a negative code is returned. */
int32_t bb_wasm_session_run(int32_t session, int32_t n_inputs, const char *input_names, size_t names_len,
                            const int32_t *input_tensors, int32_t *output_tensors);

/* Peak bytes of intermediate tensor data alive at once during the last run, or a code. */
int32_t bb_wasm_session_peak_bytes(int32_t session);

/* Frees a session and retires its handle. Returns 0 or a code. */
int32_t bb_wasm_session_free(int32_t session);

/* ---- the CPU backend's operators ------------------------------------------------------ */

/* How many ai.onnx operators the CPU backend implements. */
int32_t bb_wasm_cpu_op_count(void);

/* Operator i's name (alphabetical order), and the element types it accepts as a
 * comma-separated list of bb_dtype names ("float,double,int32"). Static strings; NULL
 * with the error recorded when i is out of range. */
const char *bb_wasm_cpu_op_name(int32_t i);
const char *bb_wasm_cpu_op_types(int32_t i);

/* ---- byte layouts shared by the engine functions --------------------------------------
 *
 * All integers little-endian.
 *
 * Value list: u64 count, then per value: u64 type_hash, u64 length, the payload (the wire
 * form of docs/WIRE.md, "Payloads"). type_hash 0 with length 0 is an absent value (an
 * optional op input the graph left empty, an output not produced, an unbinding).
 * At most 4096 values.
 *
 * Strings in (names, targets): NUL-terminated UTF-8; lists of them are packed back to back,
 * each with its NUL, and passed with their total length.
 *
 * Peer ids: base58btc text (bb_peer_id_to_text), as libp2p prints them.
 *
 * Steps (bb_wasm_node_poll's result): u32 count, then per step
 *   u32 kind (bb_step_kind), i32 fill_index, u64 exec_id, u64 command, u64 count,
 *   u64 type_hash (APP_EVENT: the value's carrier hash), then seven fields, each a u32
 *   length and its bytes: peer (text; empty when none), bytes (SEND: the envelope;
 *   APP_EVENT: the value's payload), module, topic, op, reason, detail (UTF-8).
 * ---------------------------------------------------------------------------------------- */

/* ---- the examples' Modules and the compiler ------------------------------------------- */

/* The examples linked in (src/programs): how many, and example i's name, description
 * (static strings; NULL, recorded, for a bad index) and Module count. */
int32_t bb_wasm_example_count(void);
const char *bb_wasm_example_name(int32_t i);
const char *bb_wasm_example_description(int32_t i);
int32_t bb_wasm_example_module_count(int32_t i);

/* Records Module `module` of the example named `name` into the result as ONNX ModelProto
 * bytes (what the compiler takes). Returns 0 or a code. */
int32_t bb_wasm_example_record(const char *name, int32_t module);

/* A compiler with no bindings (bb_compiler_new). Returns its handle. */
int32_t bb_wasm_compiler_new(void);
/* Binds, declares and sets what the example's own configuration does for that Module (the
 * default concretes); rebind a slot with unbind + bind. */
int32_t bb_wasm_compiler_configure_example(int32_t compiler, const char *name, int32_t module);
/* bb_compiler_bind: role a bb_role (0: the role the model records for the slot); config
 * may be NULL. */
int32_t bb_wasm_compiler_bind(int32_t compiler, int32_t role, const char *slot, const char *type, const char *config);
/* Removes a slot's binding (BB_ERR_NOT_FOUND when it has none). */
int32_t bb_wasm_compiler_unbind(int32_t compiler, const char *slot);
/* Declares a concrete type to the compiler: storage is the denotation every tensor port
 * stores ("ai.bytesandbrains.tensor.f32"; NULL or "" for none), deps "Role:slot,Role:slot"
 * (role names as bb_role_name spells them; NULL or "" for none; at most 16). */
int32_t bb_wasm_compiler_declare(int32_t compiler, const char *type, const char *storage, const char *deps);
/* Permissive types (nonzero) or strict (0, the default). */
int32_t bb_wasm_compiler_set_permissive(int32_t compiler, int32_t permissive);
/* Compiles recorded ModelProto bytes; the artifact goes to the result. A failure's message
 * starts with "compile failed (<kind>)"; bb_wasm_compiler_error_kind gives the kind. */
int32_t bb_wasm_compiler_compile(int32_t compiler, const uint8_t *model, size_t len);
int32_t bb_wasm_compiler_error_kind(int32_t compiler);
/* The name of a bb_compile_error ("TypeConstraintFailed", ...); a static string. */
const char *bb_wasm_compile_error_name(int32_t kind);
int32_t bb_wasm_compiler_free(int32_t compiler);

/* Describes artifact bytes (bb_artifact_describe) into the result: format 0 text, 1 DOT,
 * 2 JSON. */
int32_t bb_wasm_artifact_describe(const uint8_t *artifact, size_t len, int32_t format);

/* Declares the ops a Backend type executes (bb_compiler_declare_op_set): ops packs
 * (domain, op_type) pairs of strings ("" for ONNX operators). A new compiler has
 * CpuBackend's op set declared already, as `bb compile` does. */
int32_t bb_wasm_compiler_declare_op_set(int32_t compiler, const char *type, const char *ops, size_t ops_len);

/* ---- Modules the host records --------------------------------------------------------------
 *
 * A Module is a name, the host's id for it and whether it has a bootstrap; its body (and
 * bootstrap) are recorded by the host: bb_wasm_module_build runs the recorder
 * (bb_module_build, bb/graph.h), which calls the import bb_host_module_record(host_id,
 * bootstrap) once per function it records, and inside that call the host records through
 * the bb_wasm_rec_* functions. A sub-module is recorded on its first call, inside the
 * caller's callback. The result is the ModelProto bytes the compiler takes; a failed
 * recording fails the build with the recorder's first error (bb_rec_fail lets the host
 * end one with its own message, e.g. when its callback threw).
 *
 * Values and calls are numbers: BB_WASM_VALUE_EMPTY is "no value" (what a refused call
 * gives), BB_WASM_VALUE_OMITTED an omitted optional input of a Backend op, and any other
 * number below 1 << 21 (BB_WASM_VALUE_FOREIGN) a value the recorder refuses as not of this
 * recording; the numbers the recorder gives are valid for the build that gave them.
 * bb_wasm_rec_* functions return a value or call number (>= 0), or a negative code when
 * called outside a recording callback or with malformed arguments; the recorder's own
 * refusals are not codes here: they end the recording and fail the build.
 *
 * Attributes (role, syscall and protocol ops): u32 count, then per attribute a u32-length
 * name, a u32 bb_attr_type and its value: INT i64; FLOAT f32; STRING u32-length text;
 * INTS u32 n, n × i64; FLOATS u32 n, n × f32; STRINGS u32 n, n u32-length texts; TENSOR a
 * literal; other types no value (the recorder refuses them). An empty buffer is none.
 * Literals: u32 bb_dtype, u32 rank, rank × i64 dims, u8 has_data, u32 length, the
 * elements little-endian (has_data 0: zeros, length 0). Texts hold no NUL byte. */

#define BB_WASM_VALUE_EMPTY 0
#define BB_WASM_VALUE_OMITTED 1
#define BB_WASM_VALUE_FOREIGN 2

/* A Module (its name is checked when it is built or called). Returns its handle. */
int32_t bb_wasm_module_new(const char *name, int32_t host_id, int32_t has_bootstrap);
/* Lists submodule as one the module's callbacks may call (it stays alive as long as the
 * module does, whatever happens to its handle). */
int32_t bb_wasm_module_add_submodule(int32_t module, int32_t submodule);
/* Records the module into the result (ModelProto bytes). One build at a time. */
int32_t bb_wasm_module_build(int32_t module);
int32_t bb_wasm_module_free(int32_t module);

/* Imported from the host (module "env"): record the body (bootstrap 0) or the bootstrap of
 * the module the host gave host_id. */
BB_WASM_HOST_IMPORT(bb_host_module_record) void bb_host_module_record(int32_t host_id, int32_t bootstrap);

/* The recorder, inside bb_host_module_record (bb/graph.h has what each records). type
 * NULL: none; peer_class NULL: "@self"; packed strings as elsewhere. */
int32_t bb_wasm_rec_input(const char *name, const char *type);
int32_t bb_wasm_rec_output(const char *name, int32_t value);
int32_t bb_wasm_rec_net_out(const char *port, int32_t peers, int32_t value);
int32_t bb_wasm_rec_lookup_output(const char *port);
int32_t bb_wasm_rec_lookup_sender(const char *port);
/* bb_rec_split: shape (bb_split_shape), the cuts packed (one or two), the two Model slots,
 * the averager's Aggregator slot (NULL: no averaging), and values [server_peers, tick,
 * test_x, test_y, eval_tick, clients] (BB_WASM_VALUE_EMPTY for no held-out set, no
 * clients). */
int32_t bb_wasm_rec_split(int32_t shape, const char *cuts, size_t cuts_len, const char *client_slot, const char *server_slot,
                          const char *averager_slot, const int32_t *values, size_t n_values);
int32_t bb_wasm_rec_bundle(const int32_t *parts, size_t n);
/* types packs one denotation per part; parts receives n value numbers. */
int32_t bb_wasm_rec_unbundle(int32_t composite, const char *types, size_t types_len, int32_t *parts, size_t n);
/* A call of a submodule (bootstrap nonzero: its bootstrap), binding inputs (packed names)
 * to values; returns a call number for bb_wasm_rec_call_output. */
int32_t bb_wasm_rec_call(int32_t module, int32_t bootstrap, const char *inputs, size_t inputs_len,
                         const int32_t *values, size_t n);
int32_t bb_wasm_rec_call_output(int32_t call, const char *port);
/* bb_rec_role_call, bb_rec_syscall and bb_rec_protocol_call: outputs receives n_outputs
 * value numbers; return 0 or a code. */
int32_t bb_wasm_rec_role_call(int32_t role, const char *slot, const char *peer_class, const char *method,
                              const int32_t *inputs, size_t n_inputs, const uint8_t *attrs, size_t attrs_len,
                              int32_t *outputs, size_t n_outputs);
int32_t bb_wasm_rec_syscall(const char *op, const int32_t *inputs, size_t n_inputs, const uint8_t *attrs,
                            size_t attrs_len, int32_t *outputs, size_t n_outputs);
int32_t bb_wasm_rec_protocol_call(const char *domain, const char *op, const int32_t *inputs, size_t n_inputs,
                                  const uint8_t *attrs, size_t attrs_len, int32_t *outputs, size_t n_outputs);
/* bb_rec_constant with a literal; label and type may be NULL. */
int32_t bb_wasm_rec_constant(const char *label, const char *type, const uint8_t *literal, size_t len);
/* The address book (many nonzero: InsertMany) and Announce. */
int32_t bb_wasm_rec_address_book_insert(int32_t peer, int32_t addresses, int32_t many);
int32_t bb_wasm_rec_address_book_lookup(int32_t peer);
int32_t bb_wasm_rec_announce(int32_t server_peer);
/* Ends the recording with the host's own error (bb_rec_fail). */
int32_t bb_wasm_rec_fail(int32_t code, const char *message);
/* 1 once the recording has failed, 0 while it has not. */
int32_t bb_wasm_rec_failed(void);
/* A value's name and type (denotation; "" abstract), valid until the build ends. */
const char *bb_wasm_rec_value_name(int32_t value);
const char *bb_wasm_rec_value_type(int32_t value);

/* ---- data sets ------------------------------------------------------------------------ */

/* Data sets are what an ArraySource reads: float32 features [rows, dim] and labels [rows].
 * A node installed with one keeps it alive, so it may be freed right after the install. */

/* Parses numeric CSV (bb_dataset_from_csv): label_column 0-based, negative from the right,
 * INT32_MIN for none. Returns the data set's handle. */
int32_t bb_wasm_dataset_from_csv(const uint8_t *csv, size_t len, int32_t label_column, int32_t has_header);
/* From a float32 [rows, dim] tensor and a float32 [rows] one (labels 0: none); copied. */
int32_t bb_wasm_dataset_from_tensors(int32_t features, int32_t labels);
/* A new data set of rows[0..n) of another (u32 row indices; a row may repeat). */
int32_t bb_wasm_dataset_subset(int32_t dataset, const uint32_t *rows, size_t n);
/* The result: u64 rows, u64 dim, u64 labelled (1 or 0). */
int32_t bb_wasm_dataset_shape(int32_t dataset);
/* A new tensor handle holding a copy of the features (labels 0) or the labels (nonzero). */
int32_t bb_wasm_dataset_tensor(int32_t dataset, int32_t labels);
int32_t bb_wasm_dataset_free(int32_t dataset);

/* ---- components whose methods run in the host -------------------------------------------- */

/* Most host types one module instance registers: a type lives as long as the instance. */
#define BB_WASM_MAX_HOST_TYPES 1024

/* Registers a concrete type, for every node installed afterwards, whose methods are the
 * host's imports below; roles is a set of (1 << bb_role) bits; protocol_domain (NULL or ""
 * for none) the ai.bytesandbrains.protocol.<name> domain whose slotless ops it runs. Names
 * must be new (not a shipped type's). Returns the type id the imports are called with: 1
 * for the first type registered, 2 for the second, ... up to BB_WASM_MAX_HOST_TYPES. */
int32_t bb_wasm_host_type_add(const char *name, uint32_t roles, const char *protocol_domain);

/* Imported from the host (module "env"). create returns the host's id for the new
 * instance (> 0) or a negative BB_ERR_* code; invoke returns 0 (outputs set with
 * bb_wasm_call_set_outputs), 1 (later: after bb_wasm_call_defer; finish with
 * bb_wasm_node_complete or bb_wasm_node_fail) or a negative code; on_message (a
 * control-plane message another peer's component at the same slot sent, `from` its peer
 * id as text), on_timer (a timer the instance set), save (the instance's state, given with
 * bb_wasm_call_set_state; none given is empty) and load (state a save gave, for a fresh
 * instance) return 0 or a negative code. Each may explain a failure with bb_wasm_call_fail
 * first. */
BB_WASM_HOST_IMPORT(bb_host_create)
int32_t bb_host_create(int32_t type_id, const char *slot, const char *config, size_t config_len, uint64_t seed);
BB_WASM_HOST_IMPORT(bb_host_destroy) void bb_host_destroy(int32_t instance);
BB_WASM_HOST_IMPORT(bb_host_invoke)
int32_t bb_host_invoke(int32_t instance, const char *op_type, int32_t n_inputs, int32_t n_outputs);
BB_WASM_HOST_IMPORT(bb_host_on_message)
int32_t bb_host_on_message(int32_t instance, const char *op, const char *from, const uint8_t *payload, size_t len);
BB_WASM_HOST_IMPORT(bb_host_on_timer) int32_t bb_host_on_timer(int32_t instance, uint64_t token);
BB_WASM_HOST_IMPORT(bb_host_save) int32_t bb_host_save(int32_t instance);
BB_WASM_HOST_IMPORT(bb_host_load) int32_t bb_host_load(int32_t instance, const uint8_t *state, size_t len);

/* Only while bb_host_invoke runs: the call's inputs as a value list (into the result);
 * the op's attributes (into the result, in the attribute layout of "Modules the host
 * records"; a TENSOR attribute is listed with no value); its outputs, by position (a value
 * list of at most n_outputs values); the command that makes it asynchronous (the same on
 * every call). */
int32_t bb_wasm_call_inputs(void);
int32_t bb_wasm_call_attributes(void);
int32_t bb_wasm_call_set_outputs(const uint8_t *list, size_t len);
uint64_t bb_wasm_call_defer(void);
/* While bb_host_invoke, bb_host_on_message or bb_host_on_timer runs (bb/runtime.h, "what a
 * component can reach while it runs"): the node's time; my peer id and the peer whose
 * envelope started this work ("" for local work) as text into the result; the node's
 * seeded generator; a control-plane message to the component at the same slot on peer
 * `to`; a timer (bb_host_on_timer(token) at or after at_ns); an application event (a value
 * list of one value); a named counter; an op of another component of the node by slot
 * (synchronous; inputs a value list, its n_outputs outputs a value list into the result). */
uint64_t bb_wasm_call_now(void);
int32_t bb_wasm_call_self(void);
int32_t bb_wasm_call_source(void);
uint64_t bb_wasm_call_random(void);
int32_t bb_wasm_call_send_message(const char *to, const char *op, const uint8_t *payload, size_t len);
int32_t bb_wasm_call_set_timer(uint64_t at_ns, uint64_t token);
int32_t bb_wasm_call_emit(const char *topic, const uint8_t *value, size_t len);
int32_t bb_wasm_call_count(const char *name, uint64_t delta);
int32_t bb_wasm_call_dependency(const char *slot, const char *op, const uint8_t *inputs, size_t len, int32_t n_outputs);
/* Only while bb_host_save runs: the instance's state (copied). */
int32_t bb_wasm_call_set_state(const uint8_t *state, size_t len);
/* While any of the imports above runs: the message (and code) of the failure it is about
 * to return. */
int32_t bb_wasm_call_fail(int32_t code, const char *message);

/* ---- nodes ---------------------------------------------------------------------------- */

/* Installs artifact bytes (copied) as peer `self` for the packed targets. slots packs
 * (slot, config) pairs of strings (an empty config keeps the artifact's), and datasets
 * holds one host data handle per pair (0: none; NULL: none at all) handed to the slot's
 * component: a data set handle (an ArraySource reads it; the node keeps it alive) or a
 * model handle (an OnnxModel trains it: its ModelProto bytes, read at creation). The node
 * knows the shipped types and every host type added so far (and the examples' fixtures,
 * NoopModel and the like). With a room (NULL or "": none), the node checks join tokens:
 * operator_keys holds the n_operator_keys Ed25519 public keys (32 bytes each) whose
 * tokens the room trusts (bb_install_args.admission). A failure's message starts with
 * "install failed (<kind>)". Returns the node's handle. */
int32_t bb_wasm_node_install(const uint8_t *artifact, size_t artifact_len, const char *self, const char *targets,
                             size_t targets_len, const char *slots, size_t slots_len, const int32_t *datasets,
                             uint64_t seed, const char *room, const uint8_t *operator_keys, size_t n_operator_keys,
                             int32_t signs);
/* With signs nonzero at install, the host signs for the node's peer id (bb_install_args.sign):
 * the node asks through the import bb_host_sign (below) and the host answers, once its
 * asynchronous signature is ready, with bb_wasm_node_signed. */
BB_WASM_HOST_IMPORT(bb_host_sign)
int32_t bb_host_sign(int32_t node, const char *slot, const uint8_t *message, size_t len);
/* The Ed25519 signature (64 bytes) bb_host_sign asked for the component at `slot`: it
 * reaches that component with the next poll. */
int32_t bb_wasm_node_signed(int32_t node, const char *slot, const uint8_t *signature);
int32_t bb_wasm_node_free(int32_t node);
/* The result: my peer id, u32 target count and each resolved target name (fields as in
 * steps), then 7 × u64 stats: executions, frontier, pending_async, timers, ingress,
 * outbound, ingress_bytes. */
int32_t bb_wasm_node_info(int32_t node);
int32_t bb_wasm_node_add_peer(int32_t node, const char *peer);
int32_t bb_wasm_node_forget_peer(int32_t node, const char *peer);
int32_t bb_wasm_node_block_peer(int32_t node, const char *peer, int32_t blocked);
/* Verifies the join token (binary) `peer` presents at now_unix_s, the host's wall clock
 * (bb_node_admit_token). Returns the role it grants (1 client, 2 server, 3 watcher), or a
 * code: BB_ERR_MALFORMED or BB_ERR_DENIED with the message naming the refused check. */
int32_t bb_wasm_node_admit_token(int32_t node, const char *peer, const uint8_t *token, size_t len,
                                 uint64_t now_unix_s, uint64_t now_ns);
/* The role peer's recorded token grants now (0: none), or a code. */
int32_t bb_wasm_node_peer_role(int32_t node, const char *peer);
int32_t bb_wasm_node_run_bootstrap(int32_t node, uint64_t now_ns);
/* One envelope from peer `from` (bb_node_deliver). */
int32_t bb_wasm_node_deliver(int32_t node, const char *from, const uint8_t *bytes, size_t len, uint64_t now_ns);
/* Runs what is ready; the steps go to the result. Returns how many, or a code. */
int32_t bb_wasm_node_poll(int32_t node, uint64_t now_ns);
/* The next timer or deadline (UINT64_MAX: none, or a bad handle, recorded). */
uint64_t bb_wasm_node_expiry(int32_t node);
/* 1 when a poll would do work now, 0 when not, or a code. */
int32_t bb_wasm_node_has_work(int32_t node);
/* Runs a target with named inputs: names packed, values a value list of as many (none
 * absent). */
int32_t bb_wasm_node_invoke(int32_t node, const char *module, const char *names, size_t names_len,
                            const uint8_t *values, size_t values_len, uint64_t now_ns);
/* Binds an input of a target for every new run: a value list of one value (absent:
 * unbind). */
int32_t bb_wasm_node_bind_input(int32_t node, const char *module, const char *input, const uint8_t *values,
                                size_t values_len);
/* Completes an asynchronous op with a value list of its outputs, or fails it. */
int32_t bb_wasm_node_complete(int32_t node, uint64_t command, const uint8_t *values, size_t values_len);
int32_t bb_wasm_node_fail(int32_t node, uint64_t command, const char *detail);
/* A named counter (0 when unknown, or for a bad handle, recorded). */
uint64_t bb_wasm_node_counter(int32_t node, const char *name);
/* The node's state into the result (bb_node_snapshot), and back into a node freshly
 * installed from the same artifact and targets. */
int32_t bb_wasm_node_snapshot(int32_t node);
int32_t bb_wasm_node_restore(int32_t node, const uint8_t *bytes, size_t len);

/* ---- training ------------------------------------------------------------------------ */

/* A trainer is any ONNX model made trainable (bb/onnx_model.h; docs/GRAD.md): its training
 * and optimizer graphs planned once, its inference form for predictions and export. Data
 * comes as float32 tensors of rows [n, features...] (reshaped to the model's data input)
 * and float32 labels [n], one per row (class ids for xent). */

/* A trainer over ModelProto bytes (copied). config: the OnnxModel engine's keys (loss,
 * optimizer, lr, momentum, beta1, beta2, eps, weight_decay, max_grad_norm, input, output,
 * seed; NULL or "" for xent and Adam); seed is the Dropout seed unless config sets one.
 * Returns the trainer's handle, or a negative code (the gradient builder's message names
 * what cannot be trained). */
int32_t bb_wasm_trainer_new(const uint8_t *onnx, size_t len, const char *config, uint64_t seed);
int32_t bb_wasm_trainer_free(int32_t trainer);
/* Floats in the flat parameter vector, or a code. */
int32_t bb_wasm_trainer_param_count(int32_t trainer);
/* One optimizer step on a batch: 1 when applied, 0 when refused (a non-finite loss or
 * gradient: nothing changed), or a code. */
int32_t bb_wasm_trainer_step(int32_t trainer, int32_t x, int32_t labels);
/* The loss of the last step (NaN before the first, or for a bad handle, recorded). */
float bb_wasm_trainer_last_loss(int32_t trainer);
/* The model's first output for x: a new tensor handle, or a code. */
int32_t bb_wasm_trainer_predict(int32_t trainer, int32_t x);
/* The result: f32 score (accuracy; mse: the mean squared error), f32 mean loss. */
int32_t bb_wasm_trainer_evaluate(int32_t trainer, int32_t x, int32_t labels);
/* The flat parameter vector as a new float32 tensor handle; and replacing it. */
int32_t bb_wasm_trainer_params(int32_t trainer);
int32_t bb_wasm_trainer_load_params(int32_t trainer, int32_t params);
/* The trained model as plain ONNX (inference form, initializers keeping their names) into
 * the result. */
int32_t bb_wasm_trainer_export(int32_t trainer);
/* Every tensor the trainer holds (parameters, statistics, optimizer state) into the
 * result, and back into a trainer of the same model. */
int32_t bb_wasm_trainer_save(int32_t trainer);
int32_t bb_wasm_trainer_restore(int32_t trainer, const uint8_t *data, size_t len);
/* The result: u64 steps, u64 refused, u64 held bytes (parameters and optimizer state),
 * u64 the most bytes a step had in use, u64 the most its recycling allocator held, u64
 * requests that reached the module's allocator (constant once warm). */
int32_t bb_wasm_trainer_stats(int32_t trainer);

/* ---- privacy (abi_privacy.c) ------------------------------------------------------------ */

/* The privacy `steps` steps of the sampled Gaussian mechanism spend (sampling rate q,
 * noise multiplier sigma) at delta, by the Rényi-DP accountant with the classic conversion
 * (bb_dp_epsilon). steps is a whole number up to 2^53. The result: f64 epsilon, f64 the
 * Rényi order that gives it. Returns 0 or a code. */
int32_t bb_wasm_dp_epsilon(double q, double sigma, double steps, double delta);


/* ---- threads -------------------------------------------------------------------------
 * bb-mt.wasm (shared memory) runs jobs of the CPU backend on a work pool: the host starts
 * workers (Web Workers, worker_threads), each instantiating the same module on the same
 * memory with a stack of its own (bb_wasm_worker_stack; its __stack_pointer set to the
 * stack's top before any call), calling bb_wasm_worker_main, and freeing the stack once
 * that has returned (bb_wasm_worker_stack_free). The caller of a job always takes part and waits by spinning, never
 * in memory.atomic.wait, so it may be a browser's main thread. Results are bit-identical
 * for any number of threads. In bb.wasm only one thread exists. */

/* 1 when this module can run threads (bb-mt.wasm), 0 otherwise. */
int32_t bb_wasm_threads_supported(void);

/* Sets how many threads jobs use, the caller included (1 to BB_CPU_MAX_THREADS); the host
 * then starts workers for slots 1..n-1. Returns 0 or a code (BB_ERR_UNSUPPORTED for n > 1
 * in bb.wasm). Not while a job runs. */
int32_t bb_wasm_set_threads(uint32_t n);

/* How many threads jobs use now. */
uint32_t bb_wasm_threads(void);

/* The loop of the worker in slot `slot` (1..n-1), run on the worker's own instance: waits
 * for jobs and runs their tasks; returns 0 after bb_wasm_stop_workers, or a code at once
 * (bb.wasm, a slot out of range, no memory for the thread's thread-local block). Workers
 * never allocate once in their loop. */
int32_t bb_wasm_worker_main(uint32_t slot);

/* Makes every worker's loop return; jobs then run on their callers alone (1 thread). */
void bb_wasm_stop_workers(void);

/* Allocates the stack of slot `slot`'s worker (1..BB_CPU_MAX_THREADS-1), `bytes` of the
 * module's memory (64 KiB at least), which the slot holds until bb_wasm_worker_stack_free;
 * returns the stack's top (16-byte aligned: the worker instance's first __stack_pointer),
 * or 0 with the error set (bb.wasm, a bad slot or size, a slot that holds a stack already,
 * no memory). Called on the host's main thread. */
uint32_t bb_wasm_worker_stack(uint32_t slot, uint32_t bytes);

/* Returns slot `slot`'s stack to the module's allocator, once its worker has returned from
 * bb_wasm_worker_main (or never called it; a worker that is terminated in its loop keeps
 * its stack). Returns 0 or a code: BB_ERR_INVALID_ARGUMENT while the worker runs in
 * bb_wasm_worker_main, BB_ERR_NOT_FOUND when the slot holds no stack. */
int32_t bb_wasm_worker_stack_free(uint32_t slot);

/* The pool's counters since the module started: 0 jobs that went to the pool, 1 their
 * tasks, 2 of which workers ran, 3 workers in their loop now, 4 worker stacks held now
 * (bb_wasm_worker_stack, not yet freed); -1 for another `which`. */
double bb_wasm_pool_stat(uint32_t which);

/* The pool's trace (a debugging aid; it reads the clock several times a job): on (1) or
 * off (0), zeroed either way. Its fields, by `which`: 0 jobs traced, 1 the callers' ns from
 * publishing a job to its end, 2 their ns in their own tasks, 3 their tasks, 4 their ns
 * waiting for the workers after their last task, 5 the workers' ns in tasks, 6 their tasks,
 * 7 times a worker saw a new job, 8 their ns from its publication, 9 of those, jobs with no
 * task left, 10 times a worker went to sleep, 11 the callers' ns waking the workers; -1 for another `which`. A worker's clock is
 * the host's (thread-worker-core.js: the main thread's origin). */
void bb_wasm_pool_trace_set(uint32_t on);
double bb_wasm_pool_trace_stat(uint32_t which);

#endif /* BB_WASM_H */
