/* bytesandbrains — the compiler: turns a recorded Module (ONNX ModelProto bytes from
 * bb_module_build) into one installable artifact for every peer.
 *
 *   bb_compiler *c = bb_compiler_new(NULL);
 *   bb_compiler_bind(c, BB_ROLE_MODEL, "model", "CpuMlp", NULL, &err);
 *   bb_compiler_compile(c, bytes, len, &out, &out_len, &err);
 *
 * The pipeline runs the canonical passes named by bb_compiler_pass_names() on the root
 * function, splits it into one function per peer class (partition mains
 * "<Module>[_<class>]#<16 hex>"), runs the per-partition passes, checks slots and
 * dependencies, and stamps the passport (BB_KEY_COMPILED = BB_COMPILED_VERSION) and one
 * binding entry per (partition, bound slot):
 *   BB_KEY_BINDING_PREFIX "<partition>.<slot>" = "<Role>|<concrete type>|<slot id or -1>".
 * Every key and name an artifact carries is in bb/artifact.h.
 *
 * Binding is by slot name: role nodes carry BB_KEY_SLOT_NAME; nodes without one
 * (hand-built IR) are bound by role, which then must have exactly one binding.
 *
 * Component table: the compiler knows nothing of concrete types but what the caller
 * declares — with bb_compiler_declare_component, the storage type of each port (which
 * narrows a role op's abstract outputs, e.g. a model's "tensor" port to
 * BB_TYPE_TENSOR_F32) and the slots the component depends on; with
 * bb_compiler_declare_op_set, the ops a Backend type executes. Undeclared types bind
 * fine; they just refine nothing, depend on nothing and accept any op.
 *
 * Errors: every call returns 0 or a negative BB_ERR_* code and fills err; a failed
 * compile also leaves its bb_compile_error kind in bb_compiler_error_kind(). Messages
 * start with the kind's name and name the offending node, value, slot or class.
 *
 * Output is deterministic: the same input and configuration give the same bytes. */
#ifndef BB_COMPILER_H
#define BB_COMPILER_H

#include <stdbool.h>
#include "bb/artifact.h"
#include "bb/common.h"
#include "bb/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Why a compile failed: the validation errors, then the compile errors, then the kinds
 * for bindings and input bytes. Kinds marked "never raised" are kept so that the numbering
 * and names stay stable for the tools that report them. */
typedef enum bb_compile_error {
  BB_COMPILE_OK = 0,
  /* ValidationError */
  BB_COMPILE_UNKNOWN_OP,
  BB_COMPILE_DANGLING_INPUT,
  BB_COMPILE_DUPLICATE_OUTPUT,
  BB_COMPILE_MISSING_TYPE_INFO,
  BB_COMPILE_MALFORMED_SLOT_METADATA,
  BB_COMPILE_CYCLIC_GRAPH,
  BB_COMPILE_OPSET_NOT_IMPORTED,
  /* CompileError */
  BB_COMPILE_EXPANSION_FAILED,
  BB_COMPILE_ROLE_METHOD_FAILED,      /* never raised */
  BB_COMPILE_AMBIGUOUS_ROLE,
  BB_COMPILE_UNRESOLVED_PEER_CLASS,   /* never raised */
  BB_COMPILE_CROSS_CLASS_DATAFLOW,
  BB_COMPILE_IR_VERSION_MISMATCH,
  BB_COMPILE_MISSING_BINDING,         /* never raised */
  BB_COMPILE_EMPTY_FUNCTION_TABLE,
  BB_COMPILE_RUNTIME_INCOMPLETE,
  BB_COMPILE_INTERNAL,
  BB_COMPILE_TYPE_CONSTRAINT_FAILED,
  BB_COMPILE_UNRESOLVED_TYPE,
  BB_COMPILE_UNBOUND_DEPENDENCY,
  BB_COMPILE_UNKNOWN_PORT,            /* never raised */
  BB_COMPILE_PORT_UNWIRED,            /* never raised */
  BB_COMPILE_NETWORK_OP_NOT_AT_BOUNDARY, /* never raised */
  BB_COMPILE_INVALID_SLOT_ID,
  BB_COMPILE_UNKNOWN_SLOT_ID,
  BB_COMPILE_UNKNOWN_ROLE_RUNTIME,
  BB_COMPILE_MISSING_CODEC_PORT_METADATA,
  BB_COMPILE_INVALID_CODEC_PORT,
  BB_COMPILE_AMBIGUOUS_ROLE_BINDING,
  BB_COMPILE_MISSING_REQUIRED_TRAIT_METADATA,
  BB_COMPILE_DEPENDENCY_ROLE_MISMATCH,
  BB_COMPILE_UNBOUND_SLOT,
  BB_COMPILE_BOOTSTRAP_COMPOSITION_GAP,
  BB_COMPILE_BOOTSTRAP_COMPOSITION_CYCLE,
  BB_COMPILE_INCOMPATIBLE_STORAGE_ON_EDGE,
  /* bindings and input */
  BB_COMPILE_BINDING_ROLE_MISMATCH, /* a slot bound to a concrete of another role */
  BB_COMPILE_BAD_INPUT,             /* the bytes are not an ONNX model */
  /* wires: a bad wire name, one wire declared with two types, or two names whose ids
   * collide */
  BB_COMPILE_WIRE_CONFLICT,
  /* a split whose parts cannot be placed: both on one peer class, a split op recorded
   * without its cuts, two splits in one Module, or a binding that sets a split's keys */
  BB_COMPILE_SPLIT_PLACEMENT,
  BB_COMPILE_ERROR_COUNT
} bb_compile_error;

/* The kind's name ("UnknownSlotId", ...), which starts every compile error message;
 * never NULL. */
BB_API const char *bb_compile_error_name(bb_compile_error kind);

/* Defaults of a new compiler. */
#define BB_COMPILER_DEFAULT_PER_HOP_BUDGET_NS 100000000ull
#define BB_COMPILER_TARGET_IR_VERSION 1u

typedef struct bb_compiler bb_compiler;

/* A compiler with no bindings, the defaults (strict types, 100 ms per hop, target IR
 * version 1) and every canonical pass enabled. NULL when out of memory. */
BB_API bb_compiler *bb_compiler_new(const bb_allocator *alloc);
BB_API void bb_compiler_free(bb_compiler *c);

/* Binds a concrete component type (a registry name; recorded, not resolved here) to the
 * slot named `slot` of `role`, with an optional config string recorded for install
 * (model metadata BB_KEY_CONFIG_PREFIX "<slot>"). role BB_COMPILER_ROLE_OF_SLOT takes
 * the role the compiled model records for that slot name (what `bb compile --bind
 * SLOT=TYPE` needs); a compile then fails when no node names the slot. Binding the same
 * slot name twice is BB_ERR_EXISTS. */
#define BB_COMPILER_ROLE_OF_SLOT ((bb_role)0)
BB_API int bb_compiler_bind(bb_compiler *c, bb_role role, const char *slot, const char *concrete_type,
                            const char *config, bb_error *err);
/* Removes the binding of a slot name (BB_ERR_NOT_FOUND when it has none), so that it can be
 * bound again: e.g. an example's configuration with one concrete swapped. */
BB_API int bb_compiler_unbind(bb_compiler *c, const char *slot, bb_error *err);
/* bind_<role>: bb_compiler_bind with the role filled in. */
BB_API int bb_compiler_bind_backend(bb_compiler *c, const char *slot, const char *type, const char *config,
                                    bb_error *err);
BB_API int bb_compiler_bind_model(bb_compiler *c, const char *slot, const char *type, const char *config,
                                  bb_error *err);
BB_API int bb_compiler_bind_index(bb_compiler *c, const char *slot, const char *type, const char *config,
                                  bb_error *err);
BB_API int bb_compiler_bind_aggregator(bb_compiler *c, const char *slot, const char *type, const char *config,
                                       bb_error *err);
BB_API int bb_compiler_bind_codec(bb_compiler *c, const char *slot, const char *type, const char *config,
                                  bb_error *err);
BB_API int bb_compiler_bind_data_source(bb_compiler *c, const char *slot, const char *type, const char *config,
                                        bb_error *err);
BB_API int bb_compiler_bind_peer_selector(bb_compiler *c, const char *slot, const char *type, const char *config,
                                          bb_error *err);
BB_API int bb_compiler_bind_protocol(bb_compiler *c, const char *slot, const char *type, const char *config,
                                     bb_error *err);

/* What a concrete component type declares to the compiler (bb_component_port and
 * bb_component_dep are in bb/artifact.h). */
typedef struct bb_component_decl {
  size_t struct_size; /* sizeof(bb_component_decl) */
  const char *type_name;
  const bb_component_port *storage;
  size_t n_storage;
  const bb_component_dep *deps;
  size_t n_deps;
} bb_component_decl;

/* Declares (or re-declares, replacing) a concrete type's storage ports and dependencies. */
BB_API int bb_compiler_declare_component(bb_compiler *c, const bb_component_decl *decl, bb_error *err);

/* Declares (or re-declares, replacing) the ops a Backend type executes: n_ops (domain,
 * op_type) pairs, domain "" and "ai.onnx" being one domain; duplicates are fine and
 * n_ops may be 0 (a backend that runs nothing). Every backend node bound to a slot of
 * that type must then be one of them, or the compile fails (in the resolve_slots pass)
 * with BB_COMPILE_UNKNOWN_OP naming the node, the op, the slot and the type. A type with no declared op set
 * accepts any op. The op set is independent of bb_compiler_declare_component. */
BB_API int bb_compiler_declare_op_set(bb_compiler *c, const char *type_name, const bb_component_op *ops, size_t n_ops,
                                      bb_error *err);

BB_API void bb_compiler_set_per_hop_budget_ns(bb_compiler *c, uint64_t ns);
/* Permissive: values whose type stays unresolved are accepted (strict is the default). */
BB_API void bb_compiler_set_permissive_types(bb_compiler *c, bool permissive);
/* The BB_KEY_IR_VERSION an input model may stamp (default 1). */
BB_API void bb_compiler_set_target_version(bb_compiler *c, uint32_t version);

/* The canonical passes, in pipeline order, NULL-terminated. "partition_by_wire_ops"
 * cannot be disabled. */
BB_API const char *const *bb_compiler_pass_names(void);
/* Disables a canonical pass, or removes user passes of that name. BB_ERR_NOT_FOUND when
 * neither exists; BB_ERR_INVALID_ARGUMENT for partition_by_wire_ops. */
BB_API int bb_compiler_disable_pass(bb_compiler *c, const char *name, bb_error *err);

/* A user pass. `function` is the root function for points before partitioning (and
 * peer_class NULL), else one partition main (peer_class its class); `model` is the
 * working model (functions may be read and changed with the ir.h functions). Return 0 or
 * a negative code with err filled; the compile then fails with BB_COMPILE_INTERNAL
 * naming the pass. */
typedef int (*bb_compiler_pass_fn)(bb_model *model, bb_function *function, const char *peer_class,
                                   void *user, bb_error *err);

/* Adds a user pass that runs right after the canonical pass `after` (a name from
 * bb_compiler_pass_names, whether or not that pass is disabled), or with after NULL
 * per partition after every canonical pass, before dependency checks and stamping.
 * Passes at the same point run in the order added. Names must be unique among user
 * passes. */
BB_API int bb_compiler_add_pass(bb_compiler *c, const char *after, const char *name, bb_compiler_pass_fn fn,
                                void *user, bb_error *err);

/* Compiles recorded ONNX ModelProto bytes into artifact bytes (*out freed with
 * bb_buffer_free(alloc of the compiler, *out)). */
BB_API int bb_compiler_compile(bb_compiler *c, const uint8_t *model, size_t len, uint8_t **out, size_t *out_len,
                               bb_error *err);
/* The same on an in-memory model (left unchanged); *out is a new model. */
BB_API int bb_compiler_compile_model(bb_compiler *c, const bb_model *model, bb_model **out, bb_error *err);

/* The kind of the last failed compile (BB_COMPILE_OK after a success). */
BB_API bb_compile_error bb_compiler_error_kind(const bb_compiler *c);

/* ---- artifacts ------------------------------------------------------------------ */

typedef enum bb_artifact_format {
  BB_ARTIFACT_TEXT = 0,
  BB_ARTIFACT_DOT = 1,
  BB_ARTIFACT_JSON = 2
} bb_artifact_format;

/* Describes a compiled artifact: its partitions (name, peer class, nodes), the wire
 * edges between them (from/to partition names, the value sent, the Recv payload it lands
 * in and the wire), the wires it sends on and receives from, and the binding table. JSON
 * has at least
 *   {"partitions":[{"name","peer_class","nodes":[...]}],
 *    "wire_edges":[{"from","to","value","site","wire"}],
 *    "wires":[{"name","direction","kind","type","type_hash","id"}],
 *    "bindings":[{"target","slot","role","type","slot_id"}]}.
 * The NUL-terminated text is allocated with the model's allocator; free it with
 * bb_buffer_free. BB_ERR_MALFORMED when the model carries no passport. */
BB_API int bb_artifact_describe(const bb_model *artifact, bb_artifact_format format, char **out, size_t *out_len,
                                bb_error *err);

/* Whether two compiled artifacts can talk, from their wire tables alone: for every wire
 * one sends on and the other receives from (either way) whether the types agree
 * ("pairs") or not ("disagrees"); every wire one declares that the other has no half of
 * ("missing": a third artifact may hold it); and two distinct wires whose ids collide
 * ("collides"). They can talk when at least one wire pairs, none disagrees and none
 * collides (*can_talk, may be NULL). The labels (NULL: "A", "B") name the artifacts in
 * the report, a text (one line per wire, then the verdict) or JSON
 *   {"can_talk":bool,"wires":[{"verdict","wire","from"|"other",
 *                              "sent","expected" | "direction"}]}
 * (BB_ARTIFACT_DOT is BB_ERR_INVALID_ARGUMENT), allocated with the allocator `a` was
 * made with (free with bb_buffer_free). BB_ERR_MALFORMED for a model without a passport or a malformed wire table. */
BB_API int bb_artifact_wires_compare(const bb_model *a, const char *a_label, const bb_model *b, const char *b_label,
                                     bb_artifact_format format, char **out, size_t *out_len, bool *can_talk,
                                     bb_error *err);

#ifdef __cplusplus
}
#endif
#endif /* BB_COMPILER_H */
