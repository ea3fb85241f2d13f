/* bytesandbrains — the sans-IO runtime: one bb_node per peer runs its partitions of a
 * compiled artifact.
 *
 *   bb_install(&args, &node, &err);                 the artifact, my targets, my identity
 *   bb_node_run_bootstrap(node, now);               once
 *   loop:
 *     bb_node_deliver(node, from, bytes, len, now); each envelope the transport received
 *     bb_node_poll(node, now, &steps, &n);          run; steps say what to send / report
 *     next = bb_node_expiry(node);                  when to poll again at the latest
 *
 * The node never reads a clock, a socket or a random source: time comes in as now_ns on
 * every call (it never moves backwards: an older now_ns is taken as the current time),
 * randomness from the seed in the config. Same calls, same steps, byte for byte.
 * Nothing blocks; every cap on what a peer can fill is in bb_node_config. */
#ifndef BB_RUNTIME_H
#define BB_RUNTIME_H

#include <stdbool.h>

#include "bb/join_token.h"
#include "bb/artifact.h"
#include "bb/common.h"
#include "bb/compiler.h"
#include "bb/graph.h"
#include "bb/ir.h"
#include "bb/value.h"
#include "bb/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bb_node bb_node;
typedef struct bb_ctx bb_ctx;

/* Returned by operations and component methods that finish later (see bb_ctx_defer). */
#define BB_LATER 1

/* ---- components ---------------------------------------------------------------------- */

/* One op call on a component: inputs by position (NULL where the graph left an optional
 * input empty); the method stores one new reference per output it produces (outputs it
 * leaves NULL stay unset, so their consumers do not run). */
typedef struct bb_op_call {
  bb_role role;        /* the role the node was recorded for */
  const char *domain;  /* the node's domain, e.g. "ai.bytesandbrains.role.model" */
  const char *op_type; /* e.g. "Forward" */
  const bb_ir_node *node; /* attributes and metadata */
  bb_val *const *inputs;
  size_t n_inputs;
  bb_val **outputs;
  size_t n_outputs;
} bb_op_call;

/* What a component's create gets. */
typedef struct bb_component_init {
  const char *slot;        /* the slot name it is bound to */
  const char *config;      /* the binding's config (artifact or host override); "" if none */
  size_t config_len;
  uint64_t seed;           /* derived from the node's seed and the slot name */
  const bb_allocator *alloc;
  const void *host_data;   /* bb_install_args.host_data for this slot (NULL if none) */
  void *type_data;         /* the type's bb_component_type.type_data (NULL if none) */
} bb_component_init;

/* A concrete component type. Register it in a bb_registry under type_name (the name
 * artifacts bind). Every callback but create and destroy may be NULL. Callbacks return 0,
 * BB_LATER (invoke only: the result comes through bb_node_complete for the command
 * bb_ctx_defer returned) or a negative BB_ERR_* with err filled.
 *
 * Versioned by struct_size: fields are only ever added at the end, and the runtime reads
 * a field only when struct_size covers it, so a caller built against an older header
 * (struct_size of at least BB_COMPONENT_TYPE_SIZE_V1) still registers. */
typedef struct bb_component_type {
  size_t struct_size;   /* sizeof(bb_component_type) */
  const char *type_name;
  uint32_t roles;       /* bit (1u << role) per bb_role it implements */
  const char *protocol_domain; /* nodes of this domain without a slot go to this component */
  const bb_component_dep *deps;   /* slots it reaches with bb_ctx_dependency */
  size_t n_deps;
  const bb_component_port *storage; /* what its ports store, for the compiler */
  size_t n_storage;
  int (*create)(const bb_component_init *init, void **self, bb_error *err);
  void (*destroy)(void *self);
  /* A graph op bound to this component. */
  int (*invoke)(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err);
  /* A control-plane message from `from` (sent with bb_ctx_send_message). */
  int (*on_message)(void *self, bb_ctx *ctx, const char *op, const bb_peer_id *from, const uint8_t *payload,
                    size_t len, bb_error *err);
  /* A timer this component set with bb_ctx_set_timer. */
  int (*on_timer)(void *self, bb_ctx *ctx, uint64_t token, bb_error *err);
  /* State for bb_node_snapshot / bb_node_restore (bytes allocated with alloc). */
  int (*save)(const void *self, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err);
  int (*load)(void *self, const uint8_t *data, size_t len, bb_error *err);
  /* Handed to create as bb_component_init.type_data: lets one create function serve many
   * types (a host that registers types at run time tells them apart by it). */
  void *type_data;
} bb_component_type;

/* The struct_size of a bb_component_type without type_data: the least bb_registry_add
 * accepts. */
#define BB_COMPONENT_TYPE_SIZE_V1 offsetof(bb_component_type, type_data)

/* The concrete types an install may construct, by name. The runtime knows no concrete
 * type of its own: a host adds the ones its artifacts bind (bb_registry_add_shipped in
 * bb/roles.h adds every type this library ships). Any number of types. */
typedef struct bb_registry bb_registry;

/* An empty registry (alloc NULL: malloc); NULL when out of memory. */
BB_API bb_registry *bb_registry_new(const bb_allocator *alloc);
BB_API void bb_registry_free(bb_registry *r);
/* Adds a type (the struct must outlive the registry). BB_ERR_EXISTS for a taken name;
 * BB_ERR_INVALID_ARGUMENT for a struct_size below BB_COMPONENT_TYPE_SIZE_V1. */
BB_API int bb_registry_add(bb_registry *r, const bb_component_type *type, bb_error *err);
BB_API const bb_component_type *bb_registry_find(const bb_registry *r, const char *type_name);
BB_API size_t bb_registry_count(const bb_registry *r);
BB_API const bb_component_type *bb_registry_at(const bb_registry *r, size_t i);

/* ---- what a component can reach while it runs ---------------------------------------- */

BB_API uint64_t bb_ctx_now(const bb_ctx *ctx);
BB_API const bb_peer_id *bb_ctx_self(const bb_ctx *ctx);
/* The peer whose envelope started this execution; NULL for local work. */
BB_API const bb_peer_id *bb_ctx_source(const bb_ctx *ctx);
/* The node's seeded generator (the same sequence for the same calls). */
BB_API uint64_t bb_ctx_random(bb_ctx *ctx);
BB_API const bb_allocator *bb_ctx_allocator(const bb_ctx *ctx);
BB_API const char *bb_ctx_slot(const bb_ctx *ctx);
/* Another component of this node by slot name: its instance and type; NULL if unbound. */
BB_API void *bb_ctx_dependency(bb_ctx *ctx, const char *slot, const bb_component_type **type);
/* Calls an op of another component of this node (a dependency) by slot name, through its
 * role contract, synchronously: e.g. bb_ctx_call(ctx, "model", "Params", NULL, 0, &out, 1,
 * err). outputs get new references. BB_ERR_NOT_FOUND for an unbound slot; a component
 * cannot call itself, and a callee that answers later (BB_LATER) is an error here. */
BB_API int bb_ctx_call(bb_ctx *ctx, const char *slot, const char *op_type, bb_val *const *inputs, size_t n_inputs,
                       bb_val **outputs, size_t n_outputs, bb_error *err);
/* Makes the current invoke asynchronous: returns the command id to complete later with
 * bb_node_complete / bb_node_fail (the invoke then returns BB_LATER). */
BB_API uint64_t bb_ctx_defer(bb_ctx *ctx);
/* Sends `payload` to the component bound to the same slot on peer `to` (its on_message
 * runs there with `op`). The envelope leaves with the next poll's steps. */
BB_API int bb_ctx_send_message(bb_ctx *ctx, const bb_peer_id *to, const char *op, const uint8_t *payload, size_t len,
                               bb_error *err);
/* Brings forward to now the next tick of every Interval loop whose tick reaches an op of
 * this component (directly downstream of the Interval, or inside a function called
 * downstream of it): the tick runs within the same poll when called while an op or a
 * message runs (else at the next poll), and the loop's period counts from it. What an
 * aggregator calls once its open round can close, so that the next round starts at once
 * instead of at the round timer's next tick. BB_ERR_INVALID_ARGUMENT outside a component. */
BB_API int bb_ctx_wake_loops(bb_ctx *ctx, bb_error *err);
/* Calls on_timer(token) at or after at_ns. */
BB_API int bb_ctx_set_timer(bb_ctx *ctx, uint64_t at_ns, uint64_t token, bb_error *err);
/* Publishes an application event (a step BB_STEP_APP_EVENT with this topic and value). */
BB_API int bb_ctx_emit(bb_ctx *ctx, const char *topic, bb_val *value, bb_error *err);
/* Address book: the addresses known for a peer (NULL and *n = 0 if none), and adding one
 * (a peer the book does not hold yet enters only if the install's admission hook, when
 * there is one, admits it: BB_ERR_INVALID_ARGUMENT otherwise). */
BB_API const bb_address *bb_ctx_addresses_of(bb_ctx *ctx, const bb_peer_id *peer, size_t *n);
BB_API int bb_ctx_add_address(bb_ctx *ctx, const bb_peer_id *peer, const bb_address *address, bb_error *err);
/* Whether a wire.Send of this node queued data for `peer` at or after since_ns (the
 * node's clock): how an aggregator tells the peers it addressed in a round (its
 * members) from any other sender. Only the latest send per peer is kept, and only while
 * the peer is in the address book. */
BB_API bool bb_ctx_addressed_since(const bb_ctx *ctx, const bb_peer_id *peer, uint64_t since_ns);
/* Signs msg with this node's identity (bb_install_args.sign): 0 with signature filled, or
 * BB_LATER when the host signs later; the signature then comes to this component's
 * on_message as op BB_SIGNED_OP from this node itself (bb_ctx_self), 64 bytes.
 * BB_ERR_UNSUPPORTED when the node was installed without a signer. */
BB_API int bb_ctx_sign(bb_ctx *ctx, const uint8_t *msg, size_t len, uint8_t signature[64], bb_error *err);
#define BB_SIGNED_OP "bb.Signed"
/* Whether this node was installed with a signer. */
BB_API bool bb_ctx_can_sign(const bb_ctx *ctx);
/* Bumps a named counter (bb_node_counter reads it). */
BB_API void bb_ctx_count(bb_ctx *ctx, const char *name, uint64_t delta);
/* Whether this node checks join tokens (installed with bb_install_args.admission): then
 * only peers whose token grants a role take part in that role. */
BB_API bool bb_ctx_tokens_required(const bb_ctx *ctx);
/* The role `peer`'s join token grants now (bb_node_peer_role); BB_JOIN_NONE without a
 * valid token, or when the node checks none. */
BB_API bb_join_role bb_ctx_peer_role(const bb_ctx *ctx, const bb_peer_id *peer);

/* ---- configuration ------------------------------------------------------------------- */

/* Caps and budgets. Zero fields take the defaults in brackets. */
typedef struct bb_node_config {
  size_t struct_size;             /* sizeof(bb_node_config) */
  uint64_t seed;                  /* [0] the RNG seed (components get seeds derived from it) */
  size_t cycle_op_budget;         /* [1000] ops per poll before BB_STEP_CYCLE_BUDGET_EXCEEDED */
  size_t max_pending_async;       /* [10000] operations waiting for a completion */
  size_t max_outbound;            /* [max_peers] envelopes queued before the oldest is dropped;
                                     a Send to more peers than this fails as a whole */
  size_t max_ingress_events;      /* [4096] queued deliveries/events before deliver refuses */
  size_t ingress_byte_budget;     /* [256 MiB] bytes of peer/app data held at once */
  size_t max_app_event_bytes;     /* [1 MiB] one app event or invoke input */
  size_t max_invoke_inputs;       /* [100] */
  size_t max_timers;              /* [65536] */
  size_t max_executions;          /* [65536] executions alive at once */
  size_t dedup_window;            /* [8192] payload hashes DedupGateRx remembers */
  const bb_envelope_caps *envelope_caps; /* [NULL: the defaults] what bb_node_deliver
                                            accepts; install copies it */
  bool trace_ops;                 /* also report BB_STEP_OP_COMPLETED / _ASYNC_SUSPENDED */
  size_t max_peers;               /* [16384] address book entries; past it the least
                                     recently used entry makes room */
  size_t max_admitted;            /* [max_peers] peers whose join tokens are recorded
                                     (bb_node_admit_token); past it an expired record, else
                                     the one admitted longest ago, makes room */
} bb_node_config;

/* Config for one slot, overriding the artifact's binding config. */
typedef struct bb_slot_config {
  const char *slot;
  const char *config;      /* text passed to the component's create */
  const void *host_data;   /* an opaque pointer passed along (e.g. a host-side data set) */
} bb_slot_config;

/* Where a peer the address book does not hold yet would come from. */
typedef enum bb_admission_source {
  BB_ADMIT_CLAIM = 1, /* an envelope's sender claims a /p2p address of its own */
  BB_ADMIT_GRAPH,     /* an AddressBook::Insert op of the artifact (a bootstrap's seeds) */
  BB_ADMIT_COMPONENT  /* a component: bb_ctx_add_address (views, registries) */
} bb_admission_source;

/* Decides whether `peer` may enter the address book: the seam where a host checks who
 * may take part (an allowlist, its own rule). Without a hook the rule is: with a join
 * policy (bb_install_args.admission), only peers holding a valid, unexpired client or
 * server token (bb_node_admit_token) enter, from any source; without one, claims from
 * senders the book does not hold are refused, graph and component inserts are admitted.
 * A hook replaces that rule (bb_node_peer_role tells it what tokens say). The host's own
 * bb_node_add_peer / bb_node_block_peer need no admission. */
typedef bool (*bb_admit_fn)(void *user, const bb_peer_id *peer, bb_admission_source source);
/* Another artifact a node runs beside bb_install_args.artifact, with its own targets:
 * Modules compiled apart that share one peer (and the components bound to the same slot
 * names). */
typedef struct bb_install_artifact {
  const uint8_t *artifact;
  size_t artifact_len;
  const char *const *targets;
  size_t n_targets;
} bb_install_artifact;

/* Signs for this node: the Ed25519 signature (64 bytes) of msg by the identity whose public
 * key the node's key-bound peer id holds (bb_peer_id_from_ed25519). `slot` names the
 * component that asks. Returns 0 with signature filled, or BB_LATER when the host signs
 * asynchronously (an identity in a non-extractable WebCrypto key): the host then hands the
 * signature to bb_node_signed(node, slot, ...); a negative BB_ERR_* with err set refuses. */
typedef int (*bb_sign_fn)(void *user, const char *slot, const uint8_t *msg, size_t len, uint8_t signature[64],
                          bb_error *err);

typedef struct bb_install_args {
  size_t struct_size;              /* sizeof(bb_install_args); BB_INSTALL_ARGS_SIZE_V1 at least */
  bb_peer_id self;
  const bb_address *addresses;     /* my addresses (what peers should reach me at) */
  size_t n_addresses;
  const uint8_t *artifact;         /* compiled ModelProto bytes */
  size_t artifact_len;
  const char *const *targets;      /* partition names (exact, or the part before '#') */
  size_t n_targets;
  const bb_registry *registry;     /* the concrete types (read during install only); NULL: none */
  const bb_slot_config *slots;
  size_t n_slots;
  const bb_node_config *config;    /* NULL: defaults */
  const bb_allocator *alloc;       /* NULL: malloc */
  bb_admit_fn admit;               /* NULL: the default admission rule (bb_admit_fn) */
  void *admit_user;
  const bb_install_artifact *more; /* further artifacts (NULL: none) */
  size_t n_more;
  /* Join tokens decide who takes part (copied at install; NULL: no tokens are checked).
   * With a policy, the default admission rule lets only token holders into the address
   * book, and the shipped aggregators take contributions only from peers whose token
   * grants the client role (docs/SECURITY.md, "Membership in the engine"). */
  const bb_join_policy *admission;
  /* Signs with this node's identity (bb_ctx_sign); NULL: the node signs nothing, and what
   * needs its signature (FedAvg's secure=1 on a client) is refused by name. */
  bb_sign_fn sign;
  void *sign_user;
} bb_install_args;

/* The struct_size of a bb_install_args without `more`: the least bb_install accepts. */
#define BB_INSTALL_ARGS_SIZE_V1 offsetof(bb_install_args, more)
/* The struct_size of a bb_install_args without `admission` (a caller built against that
 * header installs without join tokens). */
#define BB_INSTALL_ARGS_SIZE_V2 offsetof(bb_install_args, admission)
/* The struct_size of a bb_install_args without `sign` (the node has no signer). */
#define BB_INSTALL_ARGS_SIZE_V3 offsetof(bb_install_args, sign)

/* Why an install failed. */
typedef enum bb_install_error_kind {
  BB_INSTALL_OK = 0,
  BB_INSTALL_EMPTY_TARGETS,
  BB_INSTALL_BAD_ARTIFACT,          /* not a decodable ModelProto */
  BB_INSTALL_NOT_COMPILED,
  BB_INSTALL_INCOMPATIBLE_VERSION,
  BB_INSTALL_UNKNOWN_TARGET,
  BB_INSTALL_INVALID_BINDING_TABLE,
  BB_INSTALL_SLOT_BINDING_CONFLICT,
  BB_INSTALL_UNREGISTERED_CONCRETE,
  BB_INSTALL_CONSTRUCTION_FAILED,
  BB_INSTALL_UNRESOLVED_OP,         /* an op of my partitions has nothing to run it */
  BB_INSTALL_UNRESOLVED_DESTINATION,/* a Send whose receiving site is not in the artifact */
  BB_INSTALL_INVALID_ARGUMENT,
  BB_INSTALL_OUT_OF_MEMORY,
  BB_INSTALL_WIRE_CONFLICT          /* two wires with one id, or one wire declared with two types */
} bb_install_error_kind;

BB_API const char *bb_install_error_name(bb_install_error_kind kind);

/* Installs the artifact (and args->more) for my targets: checks each passport, constructs
 * one component per bound slot (shared by the targets, of any artifact, that name it)
 * from args->registry, resolves every op, the wire every Send sends on and the wire
 * every Recv of my partitions listens to. On failure *out is NULL, *kind says why and err
 * names the target, slot, type, op or wire; a bound type the registry lacks is
 * BB_INSTALL_UNREGISTERED_CONCRETE. kind may be NULL. */
BB_API int bb_install(const bb_install_args *args, bb_node **out, bb_install_error_kind *kind, bb_error *err);
BB_API void bb_node_free(bb_node *node);

/* ---- steps --------------------------------------------------------------------------- */

typedef enum bb_step_kind {
  BB_STEP_SEND = 1,              /* send `bytes` (one envelope) to `peer` */
  BB_STEP_APP_EVENT,             /* `module` produced `topic` = `value` (bytes: its payload) */
  BB_STEP_OP_FAILED,             /* an op failed: op, reason, detail */
  BB_STEP_WIRE_RECEIVE_FAILED,   /* a slot fill was refused: fill_index, type_hash, reason */
  BB_STEP_PEER_RESOLVE_FAILED,   /* a Send had no address for `peer` */
  BB_STEP_OUTBOUND_DROPPED,      /* `count` envelopes dropped by the outbound cap */
  BB_STEP_CYCLE_BUDGET_EXCEEDED, /* more ready work remains: poll again */
  BB_STEP_BOOTSTRAP_COMPLETE,    /* `module`'s bootstrap finished */
  BB_STEP_WAITING_ON_BOOTSTRAP,  /* a bootstrap waits for a completion */
  BB_STEP_OP_COMPLETED,          /* (trace_ops) an op ran */
  BB_STEP_ASYNC_SUSPENDED,       /* (trace_ops) an op waits for command `command` */
  BB_STEP_INGRESS_DROPPED        /* a delivery was refused at poll time (reason, peer) */
} bb_step_kind;

BB_API const char *bb_step_kind_name(bb_step_kind kind);

/* One step. Pointers stay valid until the next bb_node_poll (or bb_node_free). */
typedef struct bb_step {
  bb_step_kind kind;
  bool has_peer;
  bb_peer_id peer;       /* SEND: destination; failures: the peer involved */
  const uint8_t *bytes;  /* SEND: the encoded envelope; APP_EVENT with a Bytes value: its
                            bytes (other kinds: NULL; bb_val_encode(value) gives the payload) */
  size_t len;
  const char *module;    /* APP_EVENT, BOOTSTRAP_*, OP_*: the partition */
  const char *topic;     /* APP_EVENT: output or event name */
  bb_val *value;         /* APP_EVENT: the value (borrowed) */
  const char *op;        /* OP_*: "domain::OpType" and node name */
  const char *reason;    /* failures: a stable token ("deadline_exceeded", ...) */
  const char *detail;    /* failures: the full message */
  uint64_t exec_id, command, count, type_hash;
  int fill_index;        /* WIRE_RECEIVE_FAILED */
} bb_step;

/* ---- driving a node ------------------------------------------------------------------ */

/* Hands the node one envelope received from `from`. The envelope is checked against the
 * caps and copied; BB_ERR_MALFORMED / BB_ERR_LIMIT say why bytes were refused (nothing is
 * queued then), BB_ERR_LIMIT also when the ingress queue is full. Per-fill problems
 * (unknown site or type, budget) are reported as steps by the next poll. */
BB_API int bb_node_deliver(bb_node *node, const bb_peer_id *from, const uint8_t *bytes, size_t len, uint64_t now_ns,
                           bb_error *err);

/* Runs everything that is ready; *steps (n_steps of them) say what happened (none: idle). */
BB_API int bb_node_poll(bb_node *node, uint64_t now_ns, const bb_step **steps, size_t *n_steps, bb_error *err);

/* The time of the next timer or deadline; UINT64_MAX when none. Poll at or after it. */
BB_API uint64_t bb_node_expiry(const bb_node *node);

/* True when a poll would do work now (queued events or ready ops). */
BB_API bool bb_node_has_work(const bb_node *node);

/* Starts the bootstraps of my targets (in target order); their completion is reported
 * as BB_STEP_BOOTSTRAP_COMPLETE. Until then body work waits. A second call does nothing.
 * The same as bb_node_run_bootstraps with BB_BOOTSTRAP_ALL. */
BB_API int bb_node_run_bootstrap(bb_node *node, uint64_t now_ns, bb_error *err);

/* Which bootstraps to run (a target's bootstrap is its Module's "<Module>__bootstrap"). */
typedef enum bb_bootstrap_scope {
  BB_BOOTSTRAP_ALL = 0,  /* every target's */
  BB_BOOTSTRAP_MODULES,  /* the targets' of the Modules named in `names` */
  BB_BOOTSTRAP_SLOTS     /* those that reach (directly or through the functions they call)
                            a component bound at one of the slots named in `names` */
} bb_bootstrap_scope;

typedef struct bb_bootstrap_targets {
  size_t struct_size; /* sizeof(bb_bootstrap_targets) */
  bb_bootstrap_scope scope;
  const char *const *names; /* MODULES: Module names; SLOTS: slot names */
  size_t n_names;
} bb_bootstrap_targets;

/* Starts the chosen bootstraps that have not run (nor been chosen) yet, one after
 * another in target order; a later call may choose more. Body work waits while any of
 * them runs. BB_ERR_NOT_FOUND for a name that chooses nothing (a Module none of my
 * targets' bootstraps belongs to, a slot no component is bound at), naming what there
 * is; BB_ERR_INVALID_ARGUMENT for an unknown scope. */
BB_API int bb_node_run_bootstraps(bb_node *node, const bb_bootstrap_targets *which, uint64_t now_ns, bb_error *err);

/* Runs a target once with named inputs (raw bytes each; NULL names = none). The module is
 * a target name as given to install (or its resolved name). */
typedef struct bb_named_value {
  const char *name;
  bb_val *value;
} bb_named_value;
BB_API int bb_node_invoke(bb_node *node, const char *module, const bb_named_value *inputs, size_t n_inputs,
                          uint64_t now_ns, bb_error *err);
/* Gives an input of a target a value every new run of that target starts with — runs the
 * host invokes, and runs an arriving envelope starts (which carry no inputs of their own):
 * e.g. the server's peer id on a federated client. A value given to bb_node_invoke takes
 * precedence. value NULL removes the binding. */
BB_API int bb_node_bind_input(bb_node *node, const char *module, const char *input, bb_val *value, bb_error *err);
/* One input as bytes (a Bytes value): bb_node_invoke with a single input. */
BB_API int bb_node_deliver_event(bb_node *node, const char *module, const char *input, const uint8_t *bytes, size_t len,
                                 uint64_t now_ns, bb_error *err);

/* Completes an asynchronous op: its outputs, by position (references are taken). */
BB_API int bb_node_complete(bb_node *node, uint64_t command, bb_val *const *outputs, size_t n_outputs, bb_error *err);
/* Hands over a signature the node's signer answered BB_LATER for: it reaches the component
 * at `slot` with the next poll (on_message, op BB_SIGNED_OP, from this node).
 * BB_ERR_NOT_FOUND for a slot no component is bound at. */
BB_API int bb_node_signed(bb_node *node, const char *slot, const uint8_t signature[64], uint64_t now_ns, bb_error *err);
/* Fails an asynchronous op with a message (truncated to 4 KiB). */
BB_API int bb_node_fail(bb_node *node, uint64_t command, const char *detail, bb_error *err);

/* ---- peers and introspection --------------------------------------------------------- */

/* Adds an address for a peer (what Sends use to reach it). A full book makes room by
 * evicting its least recently used entry (never this node's own or a blocked peer's). */
BB_API int bb_node_add_peer(bb_node *node, const bb_peer_id *peer, const bb_address *address, bb_error *err);
/* Forgets a peer's addresses. */
BB_API void bb_node_forget_peer(bb_node *node, const bb_peer_id *peer);
/* Refuses everything from (and to, through the gates) a peer, or lifts that. */
BB_API int bb_node_block_peer(bb_node *node, const bb_peer_id *peer, bool blocked, bb_error *err);

/* Verifies the join token `peer` presents (binary, len bytes) against the install's join
 * policy at now_unix_s (the host's wall clock, Unix seconds) and, when it admits, records
 * the role it grants until its expiry, measured on the node's clock from now_ns. A newer
 * token of the same peer replaces its record. Returns 0 (with *role, when role is not
 * NULL); a refusal returns bb_join_token_verify's code with err naming the check that
 * failed, and is counted (admission.refused_<reason>, e.g. admission.refused_expired);
 * BB_ERR_INVALID_ARGUMENT when the node was installed without a join policy. */
BB_API int bb_node_admit_token(bb_node *node, const bb_peer_id *peer, const uint8_t *token, size_t len,
                               uint64_t now_unix_s, uint64_t now_ns, bb_join_role *role, bb_error *err);
/* The role `peer`'s recorded token grants at the node's current time; BB_JOIN_NONE when
 * it has none, it expired, or the node checks no tokens. */
BB_API bb_join_role bb_node_peer_role(const bb_node *node, const bb_peer_id *peer);

BB_API const bb_peer_id *bb_node_self(const bb_node *node);
/* The resolved target names (e.g. "Client#9f3a…"). */
BB_API size_t bb_node_target_count(const bb_node *node);
BB_API const char *bb_node_target(const bb_node *node, size_t i);
/* A component by slot name (NULL if none): its instance and type. */
BB_API void *bb_node_component(const bb_node *node, const char *slot, const bb_component_type **type);
/* A named counter (wire.rejected, ops.failed, ... and IncrMetric names); 0 if unknown. */
BB_API uint64_t bb_node_counter(const bb_node *node, const char *name);
/* This node's own number for a value of a target (its resolved name); UINT64_MAX if
 * none. Peers never see it: a fill addresses the wire a Recv listens to (bb_wire_id). */
BB_API uint64_t bb_node_site(const bb_node *node, const char *module, const char *value);

typedef struct bb_node_stats {
  size_t executions, frontier, pending_async, timers, ingress, outbound, ingress_bytes;
} bb_node_stats;
BB_API void bb_node_stats_get(const bb_node *node, bb_node_stats *out);

/* ---- upgrades ------------------------------------------------------------------------ */

/* A node freshly installed (from a newer artifact, say) takes over from the node it
 * replaces on the same peer, so the peers it talks to see one peer carry on: the clock,
 * the request-id counter (receivers recognise replays by request id, so ids must never
 * repeat), the address book with blocked peers, the named counters, the join tokens it
 * verified (when both nodes check them under the same room and keys), and per slot bound
 * to the same type in both nodes, the component's saved state (save/load) and its
 * pending timers. Executions, Interval loops and bound inputs are not carried: the host
 * starts the new node's targets. `fresh` must not have run (no bootstrap, invoke or
 * delivery) and must have `old`'s peer id; BB_ERR_INVALID_ARGUMENT otherwise. On any
 * error discard `fresh`; `old` is never changed. */
BB_API int bb_node_take_over(bb_node *fresh, const bb_node *old, bb_error *err);

/* ---- snapshot ------------------------------------------------------------------------ */

/* The node's whole state as bytes (docs/RUNTIME.md, "Snapshots"): parked executions and
 * their values, timers, pending operations, the address book, counters, ids, the random
 * generator and each component's saved state. Refused (BB_ERR_INVALID_ARGUMENT) while the
 * node is busy — ops ready, events queued, envelopes or steps not yet handed out: poll
 * until bb_node_has_work is false first. Envelopes already handed out are not included. */
BB_API int bb_node_snapshot(const bb_node *node, uint8_t **out, size_t *len, bb_error *err);
/* Restores a snapshot into a node freshly installed from the same artifact and targets.
 * Bootstrap is considered done. BB_ERR_MALFORMED for bytes that do not match. */
BB_API int bb_node_restore(bb_node *node, const uint8_t *data, size_t len, bb_error *err);

#ifdef __cplusplus
}
#endif
#endif /* BB_RUNTIME_H */
