/* The compiler's internals: the configured compiler object, one compile's working
 * context and the helpers every pass shares. Keys and names are bb/artifact.h's. */
#ifndef BBI_SRC_COMPILER_COMPILER_H
#define BBI_SRC_COMPILER_COMPILER_H

#include <stdbool.h>
#include <stdio.h>

#include "bb/compiler.h"
#include "bb/graph.h"
#include "util/arena.h"
#include "bb/common.h"
#include "util/strmap.h"

/* ---- the compiler object -------------------------------------------------------- */

typedef struct cc_binding {
  bb_role role;
  char *slot, *type, *config;
} cc_binding;

typedef struct cc_component {
  char *type;
  bb_component_port *storage;
  size_t n_storage;
  bb_component_dep *deps;
  size_t n_deps;
} cc_component;

/* The ops a Backend type declared, sorted by (domain, op_type) without duplicates; the
 * default ONNX domain is stored as "". */
typedef struct cc_op_set {
  char *type;
  bb_component_op *ops;
  size_t n_ops;
} cc_op_set;

typedef struct cc_hook {
  int after; /* canonical pass index, or -1: per partition after every canonical pass */
  char *name;
  bb_compiler_pass_fn fn;
  void *user;
} cc_hook;

/* Canonical pass indices (order of bb_compiler_pass_names). */
enum {
  CC_PASS_INLINE,
  CC_PASS_DEADLINES,
  CC_PASS_VALIDATE,
  CC_PASS_EXPAND,
  CC_PASS_TYPES,
  CC_PASS_PEER_CLASSES,
  CC_PASS_RECV_SYNTH,
  CC_PASS_PARTITION,
  CC_PASS_RESOLVE_SLOTS,
  CC_PASS_WIRE_EDGES,
  CC_PASS_DEDUP_RX,
  CC_PASS_PEER_HEALTH_RX,
  CC_PASS_BACKOFF_RX,
  CC_PASS_PEER_HEALTH_TX,
  CC_PASS_BACKOFF_TX,
  CC_PASS_ASYNC_DEADLINES,
  CC_PASS_RUNTIME_COMPLETE,
  CC_PASS_COUNT
};

struct bb_compiler {
  const bb_allocator *alloc;
  bb_arena *arena;
  struct { cc_binding *items; size_t len, cap; } bindings;
  struct { cc_component *items; size_t len, cap; } components;
  struct { cc_op_set *items; size_t len, cap; } op_sets;
  struct { cc_hook *items; size_t len, cap; } hooks;
  uint64_t per_hop_budget_ns;
  uint32_t target_version;
  bool permissive;
  bool disabled[CC_PASS_COUNT];
  bb_compile_error last_kind;
};

const cc_binding *cc_find_binding(const bb_compiler *c, const char *slot);
const cc_component *cc_find_component(const bb_compiler *c, const char *type);
const cc_op_set *cc_find_op_set(const bb_compiler *c, const char *type);
/* True when the op set holds (domain, op_type); NULL domain is the default ONNX domain. */
bool cc_op_set_has(const cc_op_set *s, const char *domain, const char *op_type);
/* The binding a role node dispatches to: its slot name's, or for a node without one the
 * first binding of the role whose trait it requires; NULL when none. */
const cc_binding *cc_node_binding(const bb_compiler *c, const bb_ir_node *n, const char *trait);

/* ---- one compile ---------------------------------------------------------------- */

typedef struct cc_partition {
  const char *klass;  /* peer class */
  bb_function *fn;    /* the partition main */
} cc_partition;

/* One Send/Recv pair across (or within) peer classes. */
typedef struct cc_edge {
  bb_ir_node *send, *recv;
  const char *from_class, *to_class;
  const char *value; /* the Send's data input (what travels) */
  const char *site;  /* the Recv's payload output (where it lands) */
  uint32_t batch_group;
} cc_edge;

typedef struct cc_ctx {
  bb_compiler *c;
  bb_model *m;
  bb_error *err;
  bb_compile_error kind;
  bb_function *root;
  struct { cc_partition *items; size_t len, cap; } parts;
  struct { cc_edge *items; size_t len, cap; } edges;
  /* a split's parts (cc_bind_split): the clients' slot and the server's, and the
   * DataSource only the clients' part reaches; NULL when there is none */
  struct { const char *client, *server, *data; } split;
  /* value-info index of one function (cc_find_vi), rebuilt when the function changes */
  const bb_function *vi_fn;
  size_t vi_len;
  bbi_strmap vi_map;
} cc_ctx;

/* Fails the compile with `kind`; the message is "<KindName>: <fmt...>". Returns the
 * bb_error code for the kind. */
int cc_fail(cc_ctx *x, bb_compile_error kind, const char *fmt, ...) BB_PRINTF(3, 4);
int cc_nomem(cc_ctx *x);

/* ---- helpers -------------------------------------------------------------------- */

/* A node's printable name: its name, or "<domain>::<op_type>#<index>" when unnamed. */
const char *cc_node_label(cc_ctx *x, const bb_function *f, const bb_ir_node *n);
bool cc_is(const bb_ir_node *n, const char *domain, const char *op_type);
bool cc_domain_is(const bb_ir_node *n, const char *domain);
const char *cc_meta(const bb_ir_node *n, const char *key);
/* Parses a decimal u32; false when s is not one. */
bool cc_parse_u32(const char *s, uint32_t *out);
char *cc_printf(cc_ctx *x, const char *fmt, ...) BB_PRINTF(2, 3);
/* The first value info of f with that name, or NULL; indexed, so lookups stay O(1) on
 * large functions (value infos are only ever appended). */
bb_value_info *cc_find_vi(cc_ctx *x, const bb_function *f, const char *name);
/* The denotation recorded for a value in f ("" when it has no typed value info). */
const char *cc_value_type(cc_ctx *x, const bb_function *f, const char *value);
/* One entry of an artifact's wire table (src/compiler/wires.c). */
typedef struct cc_wire {
  char *name, *type;
  bool in;          /* received, else sent */
  const char *kind; /* bb_type_value_kind(type) */
  uint64_t type_hash;
} cc_wire;
/* The wire table of a compiled artifact, in metadata order (free with cc_free_wires);
 * BB_ERR_MALFORMED for an entry that is not what the compiler writes. */
int cc_read_wires(const bb_model *m, const bb_allocator *alloc, cc_wire **out, size_t *n, bb_error *err);
void cc_free_wires(const bb_allocator *alloc, cc_wire *w, size_t n);

/* The wire a Send sends on: its wire_id (recv synthesis stamps every Send's; an author
 * may name the wire), else "<root Module>.<its data output>". NULL when out of memory. */
const char *cc_wire_of_send(cc_ctx *x, const bb_ir_node *send);
/* Sets (or adds) the denotation of a value's value info in f. */
int cc_set_value_type(cc_ctx *x, bb_function *f, const char *value, const char *denotation);
/* A shallow-attribute copy of a node (strings, lists and metadata copied). */
bb_ir_node *cc_node_clone(cc_ctx *x, const bb_ir_node *n);
/* The role name of a trait ("Model" from "ModelRuntime"); the trait itself when no role
 * has it. */
const char *cc_canonical_role(const char *trait);
/* True for an ai.bytesandbrains.role.* domain. */
bool cc_is_role_domain(const char *domain);

/* The name compiler-inserted nodes next to n derive theirs from: n's name, else its
 * first output (unique in a function), else its first input. */
const char *cc_site_base(const bb_ir_node *n);

/* A value → producing-node-index map over a node list (first producer wins). */
int cc_index_producers(cc_ctx *x, const bb_nodelist *nodes, bbi_strmap *map);

/* ---- passes (each returns 0 or the failing code, error in x) ---------------------- */

int cc_refine_types(cc_ctx *x);                 /* refine.c */
int cc_entry_checks(cc_ctx *x);                 /* validate.c */
int cc_inline(cc_ctx *x);                       /* inline.c */
int cc_derive_deadlines(cc_ctx *x);             /* deadlines.c */
int cc_check_seams(cc_ctx *x);                  /* validate.c */
int cc_check_bootstrap(cc_ctx *x);              /* bootstrap.c */
int cc_validate(cc_ctx *x);                     /* validate.c */
int cc_expand_ops(cc_ctx *x);                   /* expand.c */
int cc_solve_types(cc_ctx *x, bool check_edges); /* types.c */
int cc_infer_peer_classes(cc_ctx *x);           /* peer_class.c */
int cc_synthesize_recvs(cc_ctx *x);             /* recv_synth.c */
int cc_partition_root(cc_ctx *x);                    /* partition.c */
int cc_resolve_slots(cc_ctx *x);                /* slots.c */
int cc_bind_split(cc_ctx *x);                   /* split.c */
/* Whether partition p binds slot b: false for a split's part p does not hold, and for the
 * DataSource only the clients' part draws from, where p holds no clients' part. */
bool cc_split_binds(const cc_ctx *x, const cc_partition *p, const cc_binding *b); /* split.c */
int cc_analyze_wire_edges(cc_ctx *x, cc_partition *p); /* wire_edges.c */
int cc_gate_rx(cc_ctx *x, cc_partition *p, int which);  /* gates.c */
int cc_gate_tx(cc_ctx *x, cc_partition *p, int which);  /* gates.c */
int cc_insert_deadline_checks(cc_ctx *x, cc_partition *p); /* deadlines.c */
int cc_check_runtime_complete(cc_ctx *x, cc_partition *p); /* runtime_check.c */
int cc_name_partition(cc_ctx *x, cc_partition *p);         /* partition.c */
int cc_check_dangling_calls(cc_ctx *x, cc_partition *p);   /* validate.c */
int cc_check_dependencies(cc_ctx *x);           /* slots.c */
int cc_check_slots_bound(cc_ctx *x);            /* slots.c */
int cc_stamp_passport(cc_ctx *x);               /* passport.c */

#endif
