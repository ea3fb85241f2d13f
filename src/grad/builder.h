/* The gradient builder's shared state: a table of every value of the graph being built
 * (element type, shape with symbolic dims, a known value when one can be computed at build
 * time), node emission that keeps the table current, and the backward-rule contract.
 *
 * Errors are sticky: the first failure is recorded in b->rc / b->err, and every emitting
 * helper then returns NULL, as does any helper given a NULL input. A rule can therefore
 * chain helpers without checking each one; the driver checks b->rc after every rule. */
#ifndef BBI_GRAD_BUILDER_H
#define BBI_GRAD_BUILDER_H

#include <stdbool.h>

#include "bb/grad.h"
#include "util/arena.h"
#include "bb/common.h"
#include "util/strmap.h"

/* A dim is known (>= 0) or a symbol (<= GB_SYMBOL_0). Two equal symbols are the same
 * size; a symbol made for an unknown dim equals only itself. Symbols sit far below the
 * small negative numbers a shape vector may hold (Reshape's -1). */
typedef int64_t gb_dim;
#define GB_SYMBOL_0 (-((int64_t)1 << 40))
#define GB_IS_SYMBOL(d) ((d) <= GB_SYMBOL_0)
#define GB_KNOWN(d) ((d) >= 0)

/* Values at most this many elements long are computed at build time when their inputs are
 * (integer initializers are read when they are this small). */
#define GB_KNOWN_MAX 4096

typedef struct gb_value {
  const char *name;
  int32_t dtype; /* BB_DTYPE_UNDEFINED when unknown */
  int rank;      /* -1 when unknown */
  gb_dim dims[BB_MAX_RANK];
  /* the exact value, when every input of its producer was known and it is small */
  bb_tensor *known;
  /* the entries of a small integer vector (or scalar) as dims, some of them symbols: how
   * Shape(x) is followed through Gather, Concat, Unsqueeze... to a Reshape; -1 when none */
  int vec_len;
  gb_dim vec[BB_MAX_RANK];
  bool is_param;
  bool frozen;        /* an initializer the options or the model's buffers list keep fixed */
  bool grad_input;    /* a graph input whose gradient the options ask for */
  bool reaches;       /* the loss depends on its values (not only on its shape), by any path */
  bool mark;          /* scratch: carries a gradient from the parameter whose cut is searched */
  bool requires_grad; /* floating point and computed from a parameter through gradients */
  bool active;        /* requires grad and reaches the loss */
  const char *origin; /* a parameter this value is computed from (any path), or NULL */
  /* for a value computed from a parameter without a gradient: the node where the path
   * left floating point (or an operator without a gradient), for messages */
  const bb_ir_node *cut;
  const char *shape;  /* a value holding this value's shape, once one was emitted */
  /* backward: the contributions to d loss / d this value, and their sum */
  const char **contrib;
  size_t n_contrib, cap_contrib;
  const char *grad;
} gb_value;

typedef struct gb {
  bb_model *m;
  bb_graph *g;
  const bb_allocator *alloc;
  bb_arena *scratch; /* memory that lives as long as the build */
  bb_error *err;
  int rc;
  int64_t opset;
  gb_value **values; /* each value stays where it was made: rules hold pointers across emits */
  size_t n_values, cap_values;
  bbi_strmap ids; /* name → index into values */
  int64_t n_symbols;
  const char **symbol_names; /* dim_param of symbol GB_SYMBOL_0 - k, or NULL */
  size_t cap_symbols;
  uint64_t counter;     /* for fresh names */
  const char *prefix;   /* names of emitted nodes and values start with it */
  bool grad_domain;     /* an ai.bytesandbrains.grad operator was emitted */
  const char *seed;     /* the Dropout seed input, once made */
  int64_t n_dropouts;
  bb_strlist warnings;
  /* where backpropagation starts: the loss, or the outputs whose gradients come in
   * (BB_GRAD_LOSS_UPSTREAM); `roots_label` names them in messages ("the loss L") */
  const char **roots;
  size_t n_roots;
  const char *roots_label;
} gb;

#define GB_ALL_INPUTS 0xffffffffu

/* A backward rule. dy[k] is d loss / d output k, or NULL when that output reaches no loss.
 * The rule emits nodes and hands each input's gradient to gb_grad. */
typedef int (*gb_backward_fn)(gb *b, bb_ir_node *n, const char *const *dy);

typedef struct gb_rule {
  const char *domain; /* NULL for ai.onnx */
  const char *op_type;
  uint32_t diff_inputs;  /* bit i: a gradient flows into input i */
  uint32_t diff_outputs; /* bit k: the rule uses d output k; another active output is refused */
  gb_backward_fn backward;
} gb_rule;

/* The rule for an operator (domain NULL/"" is ai.onnx), or NULL when it has no gradient. */
const gb_rule *gb_rule_find(const char *domain, const char *op_type);

/* The rule tables of each family. */
extern const gb_rule gb_rules_elementwise[];
extern const size_t gb_rules_elementwise_count;
extern const gb_rule gb_rules_linalg[];
extern const size_t gb_rules_linalg_count;
extern const gb_rule gb_rules_nn[];
extern const size_t gb_rules_nn_count;
extern const gb_rule gb_rules_shape[];
extern const size_t gb_rules_shape_count;
extern const gb_rule gb_rules_reduce[];
extern const size_t gb_rules_reduce_count;
extern const gb_rule gb_rules_recurrent[];
extern const size_t gb_rules_recurrent_count;

/* ---- errors and memory ----------------------------------------------------------------- */

/* A deep copy of a model (through its encoding) made with alloc (build.c). */
int gb_copy_model(const bb_model *model, const bb_allocator *alloc, bb_model **out, bb_error *err);
/* A builder over a copy of the model (b->m, which the caller frees); gb_close frees the
 * rest. On failure nothing is left to free. */
int gb_open(gb *b, const bb_model *model, const bb_allocator *alloc, bb_error *err);
void gb_close(gb *b);
/* The value table's sources: every initializer (small integer ones read) and graph input. */
int gb_add_sources(gb *b);
/* Refuses a node that redefines a value or reads one nothing defined before it. */
int gb_check_node(gb *b, const bb_ir_node *n);

/* Records the first failure (printf-style) and returns its code. */
int gb_fail(gb *b, int code, const char *fmt, ...) BB_PRINTF(3, 4);
/* "node NAME (Op)" for messages. */
const char *gb_node_label(gb *b, const bb_ir_node *n);
/* The element type of a value (BB_DTYPE_UNDEFINED when unknown). */
int32_t gb_dtype(gb *b, const char *name);
/* A printf-style string in the model's arena (NULL and a recorded error when out of memory). */
char *gb_printf(gb *b, const char *fmt, ...) BB_PRINTF(2, 3);

/* ---- the value table (values.c) ------------------------------------------------------- */

/* The value of that name, or NULL when the graph has none. */
gb_value *gb_val(gb *b, const char *name);
/* Whether input i of n exists (not omitted). */
bool gb_has_input(const bb_ir_node *n, size_t i);
/* The value of input i / output k of n, or NULL when it is omitted or unknown to the table. */
gb_value *gb_input_val(gb *b, const bb_ir_node *n, size_t i);
gb_value *gb_output_val(gb *b, const bb_ir_node *n, size_t k);
/* The axes list of a node (attribute before `input_since`, input `input` from then on),
 * normalised against rank; returns the count (0 for none given) or -1 when it is not
 * known at build time. */
long gb_node_axes(gb *b, const bb_ir_node *n, size_t input, int64_t input_since, int rank, int64_t *axes);
/* Adds a value (its name must be new to the table). */
gb_value *gb_val_add(gb *b, const char *name);
/* A fresh symbol, optionally named after a dim_param. */
gb_dim gb_symbol(gb *b, const char *param);
/* The dim_param of a symbol, or NULL. */
const char *gb_symbol_name(const gb *b, gb_dim d);
/* A name no value has yet, made from hint. */
const char *gb_fresh_name(gb *b, const char *hint);
/* Sets v's shape from a type (graph inputs) or from dims. */
void gb_val_set_type(gb *b, gb_value *v, const bb_type *type);
void gb_val_set_shape(gb_value *v, int32_t dtype, int rank, const gb_dim *dims);
/* The number of elements when every dim is known, else -1. */
int64_t gb_val_numel(const gb_value *v);
/* Whether every dim is known. */
bool gb_val_static(const gb_value *v);
/* A value's entries as dims when it is a small integer vector (or scalar) whose entries
 * are known or followed symbolically; returns the count, or -1. */
int gb_val_vector(const gb_value *v, gb_dim *out);
/* The elements of a known integer tensor (at most max); returns the count or -1. */
long gb_known_ints(const gb_value *v, int64_t *out, size_t max);
/* A known scalar as a double; false when the value is not known or has several elements. */
bool gb_known_scalar(const gb_value *v, double *out);
/* A bb_type for declaring a value with this value's dtype and shape (symbols become
 * dim_params when they have a name, unknown dims otherwise). */
bb_type *gb_val_type(gb *b, const gb_value *v);

/* ---- shape inference (shape_inference.c) ------------------------------------------------ */

/* Fills the table entries of n's outputs: element type and shape, and the value itself when
 * every input is known and the result is small. Unknown stays unknown; never fails except
 * for running out of memory. */
int gb_infer_node(gb *b, const bb_ir_node *n);
/* The shapes of RNN, GRU, LSTM and their gradient operators (shape_inference_recurrent.c);
 * false for any other node. */
bool gb_infer_recurrent(gb *b, const bb_ir_node *n);
/* The forward input each output of RNNGrad / GRUGrad / LSTMGrad is the gradient of:
 * X W R B initial_h initial_c P (5 outputs for RNN and GRU, 7 for LSTM). */
extern const size_t gb_recurrent_grad_of[7];

/* ---- emitting nodes (emit.c) ---------------------------------------------------------- */

/* A new node with n_out fresh outputs and the given inputs (const char *, "" for an
 * omitted optional input), not yet in the graph: set attributes, then gb_add it. NULL when
 * an input is NULL or after a failure. */
bb_ir_node *gb_new(gb *b, const char *op_type, const char *domain, size_t n_out, size_t n_in, ...);
/* Appends the node to the graph, infers its outputs and returns output 0 (NULL on failure). */
const char *gb_add(gb *b, bb_ir_node *n);
/* Gives output k of a node not yet added a fresh name made from hint (the graph's own
 * names for what it exposes: "loss", "<param>_grad"). */
void gb_rename_output(gb *b, bb_ir_node *n, size_t k, const char *hint);
/* gb_add(gb_new(...)) for single-output ai.onnx operators without attributes. */
const char *gb_op(gb *b, const char *op_type, size_t n_in, ...);
/* Attribute setters that tolerate a NULL node. */
void gb_attr_int(gb *b, bb_ir_node *n, const char *name, int64_t v);
void gb_attr_ints(gb *b, bb_ir_node *n, const char *name, const int64_t *v, size_t count);
void gb_attr_float(gb *b, bb_ir_node *n, const char *name, float v);
void gb_attr_string(gb *b, bb_ir_node *n, const char *name, const char *v);
void gb_attr_tensor(gb *b, bb_ir_node *n, const char *name, bb_tensor_proto *t);

/* Constants (Constant nodes): a scalar of a floating-point dtype, and an int64 vector. */
const char *gb_scalar(gb *b, double v, int32_t dtype);
const char *gb_ints(gb *b, const int64_t *v, size_t n);
/* A tensor constant of a floating-point dtype with the given dims and values. */
const char *gb_tensor(gb *b, int32_t dtype, int rank, const int64_t *dims, const double *values);

/* ---- emitting shape plumbing (emit_shapes.c) ----------------------------------------- */

/* A value holding x's shape: a constant when every dim is known, else Shape(x). */
const char *gb_shape_of(gb *b, const char *x);
/* g reshaped to x's shape. */
const char *gb_reshape_like(gb *b, const char *g, const char *x);
/* g, of a shape that x broadcasts to, summed back to x's shape (ReduceSum over the
 * broadcast axes and Reshape; SumToShape when the axes cannot be told at build time). */
const char *gb_unbroadcast(gb *b, const char *g, const char *x);
/* ReduceSum over axes (normalised, non-negative); n = 0 sums over every axis. */
const char *gb_reduce_sum(gb *b, const char *x, const int64_t *axes, size_t n, bool keepdims);
/* The product of x's dims over axes as a scalar of dtype (n = 0: every element). */
const char *gb_count(gb *b, const char *x, const int64_t *axes, size_t n, int32_t dtype);
const char *gb_transpose(gb *b, const char *x, const int64_t *perm, int rank);
const char *gb_unsqueeze(gb *b, const char *x, const int64_t *axes, size_t n);
const char *gb_reshape(gb *b, const char *x, const int64_t *shape, size_t n);
/* Zeros of x's dtype and shape. */
const char *gb_zeros_like(gb *b, const char *x);

/* ---- backward (contributions.c) --------------------------------------------------------- */

/* Whether input i of n needs a gradient (it requires grad and the rule says it flows). */
bool gb_needs(gb *b, const bb_ir_node *n, size_t i);
/* Adds g as a contribution to d loss / d (input i of n); ignored when the input needs none. */
void gb_grad(gb *b, const bb_ir_node *n, size_t i, const char *g);
/* Names output k of a forward node (when omitted) so a rule can read it; returns the name. */
const char *gb_ensure_output(gb *b, bb_ir_node *n, size_t k, const char *suffix);

/* ---- losses (loss.c) ----------------------------------------------------------------- */

/* Appends the built-in loss to the forward graph; *loss is the scalar it makes. The target
 * input is created (or an existing input is checked) and named in *target. */
int gb_add_loss(gb *b, const bb_grad_options *opt, const char *prediction, const char **target, const char **loss);

#endif
