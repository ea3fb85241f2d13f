/* The recorder's state and the primitives every recording operation is built from:
 * value checks, value minting, node pushing and the sticky first error. */
#ifndef BBI_DSL_RECORDER_H
#define BBI_DSL_RECORDER_H

#include "bb/graph.h"
#include "util/arena.h"
#include "bb/common.h"
#include "util/strmap.h"

/* One recorded FunctionProto. */
typedef struct rec_fn {
  bb_function *fn;
  const bb_module *module; /* whose body (or bootstrap) it records */
  bool bootstrap;          /* records module->bootstrap */
  bool active;             /* on the call stack now: calling it again would recurse */
  bool dropped;            /* an empty sub-bootstrap, left out of the model */
  bbi_strmap names;         /* value name -> value id, for every value defined here */
} rec_fn;

/* One value the recording defined. */
typedef struct rec_value {
  const char *name;
  const char *type;
  uint32_t fn; /* index in rec->fns */
} rec_value;

/* One recorded CALL. */
typedef struct rec_call {
  uint32_t callee; /* index in rec->fns; UINT32_MAX when nothing was called */
  uint32_t caller;
  uint32_t first_output; /* value id of output 0; the rest follow */
  const bb_module *module;
} rec_call;

/* A callback being recorded: which function, for which module, with which bindings. */
typedef struct rec_frame {
  uint32_t fn;
  const bb_binding *bindings;
  size_t n_bindings;
  const char *scope; /* module_instance: the `_`-joined chain of function names */
} rec_frame;

/* A slot seen in this build. */
typedef struct rec_slot {
  const char *name;
  bb_role role;
  uint32_t id;
} rec_slot;

struct bb_rec {
  bb_model *model;
  const bb_allocator *alloc;
  bb_arena *scratch; /* the recorder's own tables; model data lives in model->arena */
  bb_error error;
  bool failed;
  bool in_bootstrap;
  uint64_t next_site; /* v<n>; restarts for the bootstrap recording */
  uint32_t next_slot_id;
  struct { rec_fn **items; size_t len, cap; } fns;
  struct { rec_value *items; size_t len, cap; } values;
  struct { rec_call *items; size_t len, cap; } calls;
  struct { rec_frame *items; size_t len, cap; } frames;
  struct { rec_slot *items; size_t len, cap; } slots;
};

/* Longest name the recorder accepts. */
#define REC_NAME_MAX 128

/* Records the first error, prefixed with the current module; later calls are ignored.
 * Returns code. */
int rec_error(bb_rec *r, int code, const char *fmt, ...) BB_PRINTF(3, 4);
/* Out of memory at this point. */
int rec_nomem(bb_rec *r);

/* The frame being recorded and its function. */
rec_frame *rec_top(bb_rec *r);
rec_fn *rec_cur(bb_rec *r);

/* True when name can name a module, input or port (see bb_module); what names it in
 * messages ("input", "port", ...). Reports the error itself. */
bool rec_check_name(bb_rec *r, const char *what, const char *name);
/* True for a C identifier of at most REC_NAME_MAX characters. */
bool rec_is_identifier(const char *s);
/* True when type is a usable denotation; reports the error itself. */
bool rec_check_type(bb_rec *r, const char *type);

/* True when two types cannot describe the same value (both concrete and different). */
bool rec_types_conflict(const char *a, const char *b);
/* True when a value of `type` can name the peer(s) of a send or lookup: a peer id, an
 * untyped or abstract value, or with `many` a peer-id vector. */
bool rec_is_peer_type(const char *type, bool many);

/* True when v is a live value of the function being recorded; reports the error (naming
 * `what`, e.g. "input 1 of Forward") otherwise. */
bool rec_check_value(bb_rec *r, bb_value v, const char *what);
/* The handle of value `id`. */
bb_value rec_handle(const bb_rec *r, uint32_t id);
/* The recorded type of a checked value. */
const char *rec_value_type(const bb_rec *r, bb_value v);

/* True when name is not yet defined in the current function; reports the error. */
bool rec_name_free(bb_rec *r, const char *name, const char *what);

/* A copy of an author's string in the model's arena (NULL when out of memory, error
 * recorded). */
const char *rec_copy(bb_rec *r, const char *s);

/* A fresh v<n> name in the model's arena (NULL when out of memory, error recorded). */
const char *rec_mint_name(bb_rec *r);

/* Defines `name` (already in the model arena) in the current function with a value
 * info of `type`; returns the value or an empty one on error. */
bb_value rec_define(bb_rec *r, const char *name, const char *type);

/* A new node (op_type, domain) or NULL (error recorded). */
bb_ir_node *rec_node_new(bb_rec *r, const char *op_type, const char *domain);
/* Appends a value name to a node's inputs or outputs. */
int rec_node_input(bb_rec *r, bb_ir_node *n, const char *name);
int rec_node_output(bb_rec *r, bb_ir_node *n, const char *name);
int rec_node_meta(bb_rec *r, bb_ir_node *n, const char *key, const char *value);
/* Stamps module_instance, appends the node to the current function and imports its
 * domain there. */
int rec_node_push(bb_rec *r, bb_ir_node *n);

/* The shape most helpers record, in two steps: begin makes op(inputs) (inputs already
 * checked) so the caller can add attributes and metadata; end gives it one new output of
 * `type`, pushes it and returns the output (an empty value on error). */
bb_ir_node *rec_node_begin(bb_rec *r, const char *op_type, const char *domain, const bb_value *inputs,
                        size_t n_inputs);
bb_value rec_node_end(bb_rec *r, bb_ir_node *n, const char *type);

/* Sets a node attribute from an author's description (checked here). */
int rec_set_attr(bb_rec *r, bb_ir_node *n, const bb_op_attr *a, const char *op);
/* A TensorProto from a literal (checked here), or NULL with the error recorded. */
bb_tensor_proto *rec_literal(bb_rec *r, const bb_literal *lit, const char *what);

/* True when m is a well-formed module (struct_size, name, body, submodules); reports
 * the error. */
bool rec_check_module(bb_rec *r, const bb_module *m);

/* Function bookkeeping used by module.c and call.c. */
rec_fn *rec_fn_new(bb_rec *r, const char *name, const bb_module *module, bool bootstrap, uint32_t *index);
long rec_fn_find(const bb_rec *r, const char *name);
int rec_frame_push(bb_rec *r, uint32_t fn, const bb_binding *bindings, size_t n_bindings);
void rec_frame_pop(bb_rec *r);

#endif
