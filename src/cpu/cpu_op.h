/* The contract between the CPU backend's executor and its operator implementations.
 *
 * An operator is a bbi_cpu_op entry in its family's table (<family>.c: elementwise.c,
 * shape.c, ...); the family's other files (<family>_<part>.c) implement the rest. Before `run`
 * is called the executor has checked the input/output counts against the entry, so an
 * implementation reads inputs[i] for i < n_inputs (NULL = omitted optional input), reads
 * attributes from node->attrs, and stores one new tensor (refcount 1) in each outputs[i]
 * it produces. On failure it returns bbi_cpu_fail(...) and leaves outputs it set for the
 * executor to release. Implementations never abort on bad input. */
#ifndef BBI_CPU_OP_H
#define BBI_CPU_OP_H

#include "bb/cpu.h"
#include "bb/common.h"
#include "tensor/kernels/kernels.h"

/* Scratch memory shared by the nodes of a run (they run one at a time): grown to the
 * largest request and kept, so temporaries cost one buffer, not one allocation each. */
typedef struct bbi_cpu_workspace {
  void *data;
  size_t size;
  const bb_allocator *alloc;
} bbi_cpu_workspace;

void bbi_cpu_workspace_free(bbi_cpu_workspace *ws);

/* Memory a session keeps for one node between runs: what the op derived once from an input
 * no run replaces (a Conv's packed weights). The op fills it from the session's allocator;
 * the session frees it. */
typedef struct bbi_cpu_node_cache {
  const bb_tensor *source; /* the input it was made from */
  uint32_t kind;           /* what the op made of it (its own tag: one input may be kept in several layouts) */
  void *data;
  size_t size;
  const bb_allocator *alloc;
} bbi_cpu_node_cache;

/* What the session's rewrites fused into a node (docs/PERFORMANCE.md, "graph rewrites"):
 * output 0 becomes act(output + addend). An op that applies it while writing its output
 * sets `applied`; otherwise the session applies it after the op. */
typedef struct bbi_cpu_epilogue {
  bbi_f32_activation act;
  const bb_tensor *addend; /* NULL, or a float tensor of output 0's shape */
  bool applied;
} bbi_cpu_epilogue;

/* What an op parsed from its node's attributes, kept by the session between runs (a
 * session's nodes never change): `kind` is the op's own tag for the layout of `data`, 0
 * while nothing is kept. The op checks that what it kept fits the run's inputs. */
#define BBI_CPU_NODE_MEMO_BYTES 192
typedef struct bbi_cpu_node_memo {
  uint32_t kind;
  _Alignas(8) unsigned char data[BBI_CPU_NODE_MEMO_BYTES];
} bbi_cpu_node_memo;

/* A node's place in a session: its cache, which inputs are the session's constants, and
 * what was fused into it. NULL for a node run on its own. */
typedef struct bbi_cpu_node_state {
  bbi_cpu_node_cache *cache;
  bbi_cpu_node_memo *memo;
  uint32_t constant_inputs; /* bit i: input i is the session's own tensor, the same every run */
  bbi_cpu_epilogue *epilogue; /* NULL: nothing fused */
  bool winograd;              /* a 3×3 Conv may take Winograd's fast path (BB_CPU_REWRITE_WINOGRAD) */
  /* the cache may be read, not replaced (other threads read it: a batch band's tasks); a
   * request it does not hold gets NULL and sets cache_missed */
  bool cache_fixed;
  bool cache_missed;
  /* nonzero: a Transpose of perm [1, 0, 2, .., swap_rank - 1] of output 0 was fused into the
   * node (BB_CPU_REWRITE_FUSE_TRANSPOSE); an op that makes output 0 of that rank with its
   * first two dims swapped, written in that layout, sets `swapped` (else the session runs
   * the Transpose) */
  int swap_rank;
  bool swapped;
} bbi_cpu_node_state;

typedef struct bbi_cpu_op_ctx {
  const bb_ir_node *node;
  int64_t opset; /* ai.onnx opset version in force */
  bb_tensor *const *inputs;
  size_t n_inputs;
  bb_tensor **outputs;
  size_t n_outputs; /* outputs the node declares; outputs[i] for an omitted ("") output may stay NULL */
  const bb_allocator *alloc;
  bb_error *err;
  size_t max_output_bytes; /* the most one value of this op may take (bb_cpu_limits) */
  bbi_cpu_workspace *workspace;
  bbi_cpu_node_state *state; /* NULL outside a session */
} bbi_cpu_op_ctx;

typedef int (*bbi_cpu_op_fn)(bbi_cpu_op_ctx *ctx);

typedef struct bbi_cpu_op {
  const char *op_type;
  int since;          /* first ai.onnx opset version this implementation covers */
  int min_inputs, max_inputs;
  int min_outputs, max_outputs;
  const char *types; /* element types, for `bb ops` (e.g. "float,double,int32,int64") */
  bbi_cpu_op_fn run;
} bbi_cpu_op;

/* Each family file defines one table. */
extern const bbi_cpu_op bbi_cpu_ops_elementwise[];
extern const size_t bbi_cpu_ops_elementwise_count;
extern const bbi_cpu_op bbi_cpu_ops_shape[];
extern const size_t bbi_cpu_ops_shape_count;
extern const bbi_cpu_op bbi_cpu_ops_reduce[];
extern const size_t bbi_cpu_ops_reduce_count;
extern const bbi_cpu_op bbi_cpu_ops_linalg[];
extern const size_t bbi_cpu_ops_linalg_count;
extern const bbi_cpu_op bbi_cpu_ops_nn[];
extern const size_t bbi_cpu_ops_nn_count;
extern const bbi_cpu_op bbi_cpu_ops_recurrent[];
extern const size_t bbi_cpu_ops_recurrent_count;
/* the ai.bytesandbrains.grad domain (training graphs), version 1 */
extern const bbi_cpu_op bbi_cpu_ops_grad[];
extern const size_t bbi_cpu_ops_grad_count;

/* The implementation of op_type at that opset (domain "", "ai.onnx" or
 * ai.bytesandbrains.grad), or NULL. A session resolves each node once, when it is built. */
const bbi_cpu_op *bbi_cpu_resolve(const char *domain, const char *op_type, int64_t opset);

/* bb_cpu_run_node_limited with the implementation already resolved (NULL: the node is
 * refused as unsupported), the caller's workspace and the node's state in a session (NULL:
 * none): arity checks, then op->run. */
int bbi_cpu_run_op(const bbi_cpu_op *op, const bb_ir_node *node, int64_t opset, bb_tensor *const *inputs,
                  size_t n_inputs, bb_tensor **outputs, size_t n_outputs, const bb_allocator *alloc,
                  const bb_cpu_limits *limits, bbi_cpu_workspace *workspace, bbi_cpu_node_state *state,
                  bb_error *err);

/* The node's cached data of `size` bytes and kind `kind` (the op's tag for a layout) made
 * from input `input`, or NULL when the node has no cache, that input is not one of the
 * session's constants, or the cache is fixed and holds other data (the op then works
 * without). Data of another input, size or kind
 * is replaced. *fresh is set when the data is new and must be filled. */
void *bbi_cpu_node_cache_get(bbi_cpu_op_ctx *ctx, size_t input, uint32_t kind, size_t size, bool *fresh);

/* The fused epilogue the op should apply to output 0, or NULL. */
static inline bbi_cpu_epilogue *bbi_cpu_epilogue_of(const bbi_cpu_op_ctx *ctx) {
  return ctx->state ? ctx->state->epilogue : NULL;
}

/* At least size bytes of scratch, aligned to 64, valid until the node returns (the next
 * call may move it); NULL with the failure recorded when out of memory. */
void *bbi_cpu_scratch(bbi_cpu_op_ctx *ctx, size_t size);

/* Records "node NAME (OpType): <message>" in ctx->err and returns code. */
int bbi_cpu_fail(bbi_cpu_op_ctx *ctx, int code, const char *fmt, ...) BB_PRINTF(3, 4);

/* Input i, or NULL when absent/omitted. */
static inline bb_tensor *bbi_cpu_input(const bbi_cpu_op_ctx *ctx, size_t i) {
  return i < ctx->n_inputs ? ctx->inputs[i] : NULL;
}

/* Fails with BB_ERR_TYPE unless input i is present and its dtype is one of the
 * BB_DTYPE_UNDEFINED-terminated list. */
int bbi_cpu_expect_dtype(bbi_cpu_op_ctx *ctx, size_t i, const int32_t *allowed);

/* Whether the node asks for output i (declared, and not the omitted name ""). */
bool bbi_cpu_output_wanted(const bbi_cpu_op_ctx *ctx, size_t i);

/* Refuses (BB_ERR_LIMIT) `count` elements of elem_size bytes each when they would take
 * more than ctx->max_output_bytes; `what` names the value in the error. */
int bbi_cpu_check_size(bbi_cpu_op_ctx *ctx, int64_t count, size_t elem_size, const char *what);

/* Allocates outputs[i] with that dtype and shape (within the size cap); returns 0 or a
 * recorded error. */
int bbi_cpu_make_output(bbi_cpu_op_ctx *ctx, size_t i, int32_t dtype, int rank, const int64_t *dims);

/* Reads an int64/int32 1-D (or scalar) tensor into values (at most max); returns the
 * count or a negative recorded error. Used for shape/axes/starts inputs. */
long bbi_cpu_read_ints(bbi_cpu_op_ctx *ctx, const bb_tensor *t, int64_t *values, size_t max, const char *what);

/* Normalises a possibly negative axis against rank; fails when out of [-rank, rank). */
int bbi_cpu_axis(bbi_cpu_op_ctx *ctx, int64_t axis, int rank, int *out);

/* Index into t of element i of a tensor with shape (rank, dims), t broadcasting to that
 * shape unidirectionally (t's dims right-aligned, each 1 or equal). */
int64_t bbi_cpu_broadcast_index(const bb_tensor *t, int rank, const int64_t *dims, int64_t i);

/* Fails with BB_ERR_TYPE unless t broadcasts unidirectionally to x's shape; `what` names
 * t in the error. */
int bbi_cpu_check_unidirectional(bbi_cpu_op_ctx *ctx, const bb_tensor *t, const bb_tensor *x, const char *what);

/* Element access helpers for type-generic code: the value of element i as double / int64,
 * and storing one. Defined for every supported dtype (float16/bfloat16 convert with
 * bb_f16_to_f32 and its kin, bb/tensor.h). */
double bbi_cpu_get_f64(const bb_tensor *t, int64_t i);
int64_t bbi_cpu_get_i64(const bb_tensor *t, int64_t i);
void bbi_cpu_set_f64(bb_tensor *t, int64_t i, double v);
void bbi_cpu_set_i64(bb_tensor *t, int64_t i, int64_t v);

#endif
