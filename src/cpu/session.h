/* The CPU session's insides, shared by the executor (session.c), the graph rewrites it
 * runs at load (session_fold.c, session_fuse.c) and the plan bookkeeping both use
 * (session_plan.c).
 *
 * A session keeps two plans of the same graph, lists of steps in topological order:
 *   general  — rewrites that hold whatever values the initializers have (Constant nodes
 *              folded, Identity elided, activations and residual Adds fused);
 *   constant — the general plan, plus rewrites that take the initializers as given
 *              (nodes of constants folded, BatchNormalization folded into Conv).
 * A run uses the constant plan unless it overrides an initializer that plan assumed,
 * then the general one; with every rewrite off both are the graph as written. */
#ifndef BBI_CPU_SESSION_H
#define BBI_CPU_SESSION_H

#include "bb/cpu.h"
#include "cpu/cpu_op.h"
#include "cpu/run_memory.h"
#include "util/arena.h"
#include "util/mem_pool.h"
#include "util/parallel.h"
#include "util/strmap.h"

#define BBI_NO_VALUE UINT32_MAX

/* One node of a plan (value ids; BBI_NO_VALUE for omitted ones), with what was fused into
 * it: out[0] is then the last value of the chain, and `chain` the fused nodes as written,
 * which run one by one when the fused epilogue cannot (its addend broadcasts, or the
 * output is not float). */
typedef struct bbi_plan_step {
  const bb_ir_node *node;
  const bbi_cpu_op *op;
  uint32_t *in, *out;
  uint32_t n_in, n_out;
  uint32_t *dead; /* values whose last use is this step */
  uint32_t n_dead;
  uint32_t produced;   /* the node's own output 0 (out[0] when nothing is fused) */
  uint32_t addend;     /* the fused Add's other operand, or BBI_NO_VALUE */
  bbi_f32_activation act;
  struct bbi_plan_step *chain;
  uint32_t n_chain;
  /* one parameter's optimizer update as one pass (bbi_plan_fuse_updates) when `update`:
   * in[] the values of its BBI_UPDATE_IN_* slots (BBI_NO_VALUE where the update has none),
   * out = {p', then the rule's state: momentum's buffer, or Adam's m' and v'}, `chain` the
   * graph's nodes of it in their order, run as written when the pass cannot apply */
  bool update;
  bbi_update_rule update_rule;
  /* a Conv with a Transpose of perm [1, 0, 2, .., swap_rank - 1] of its output fused
   * (bbi_plan_fuse_transposes): chain[0] is that Transpose, run as written when the Conv
   * does not write the swapped layout itself */
  int swap_rank;
  bbi_cpu_node_cache cache;
  bbi_cpu_node_memo memo;
  /* a batch band (session_band.c): on its first step, how many steps it spans (0: this
   * step starts none) and what its first run with an input shape found; on each of its
   * steps, which input carries the batch */
  uint32_t band, band_x;
  struct bbi_band_memo *band_memo;
} bbi_plan_step;

/* What a band's first run with an input shape (and thread count) found: whether its
 * steps keep their rules on chunks of it, and the shape of the band's output. */
typedef struct bbi_band_memo {
  int rank, out_rank;
  size_t width;
  int64_t dims[BB_MAX_RANK], out_dims[BB_MAX_RANK];
  bool ok;
} bbi_band_memo;

/* What a worker's band tasks allocate from: a recycling pool and a workspace of its own. */
typedef struct bbi_band_slot {
  bbi_mem_pool *pool;
  bbi_cpu_workspace workspace;
  bb_error err;
} bbi_band_slot;

typedef struct bbi_plan {
  bbi_plan_step *steps;
  uint32_t n_steps;
  uint32_t *constants; /* folded values a run starts with */
  uint32_t n_constants;
  /* the initializers a run starts with: those a step reads (its inputs, its fused Add's
   * operand, its fused nodes' inputs) or the graph returns, less the folded constants that
   * stand in their place; a run takes no reference to the others */
  uint32_t *initials;
  uint32_t n_initials;
  bb_cpu_session_rewrites stats;
} bbi_plan;

struct bb_cpu_session {
  const bb_model *model;
  const bb_graph *graph;
  const bb_allocator *alloc;
  bb_arena *arena; /* the plans and the names */
  /* what runs allocate from: the tensors of one run are recycled by the next, so a warm
   * session takes nothing from `alloc` per run */
  bbi_cpu_run_memory *memory;
  const bb_allocator *run_alloc;
  int64_t opset;
  uint32_t rewrites_off;
  bbi_strmap ids;
  const char **names; /* id → name (ids past the graph's names are the rewrites' values) */
  uint32_t n_values, cap_values;
  bb_tensor **initial;    /* id → initializer tensor (or NULL) */
  bb_tensor **folded;     /* id → a value the rewrites computed at load (or NULL) */
  bool *assumed;          /* id → the constant plan took this initializer's value as given */
  int32_t *declared_type; /* id → elem type from the graph inputs (0 = unknown) */
  bool *is_output;        /* id → a graph output */
  bbi_plan general, constant;
  uint32_t *inputs, *outputs; /* ids of required graph inputs and of graph outputs */
  uint32_t n_inputs, n_outputs;
  bb_tensor **values; /* scratch for a run */
  size_t peak_bytes, produced_bytes;
  bb_cpu_limits limits;
  bbi_band_slot *band_slots[BBI_PARALLEL_MAX_THREADS]; /* slot 0 unused: the caller uses `memory` */
};

/* A fresh value id for a value the rewrites make, named after `like` for errors; or
 * BBI_NO_VALUE when the id space is full. */
uint32_t bbi_session_new_value(bb_cpu_session *s, const char *like);

/* Whether value v is a constant of plan p: an initializer (for the constant plan) or a
 * value folded into it. */
bool bbi_session_is_constant(const bb_cpu_session *s, const bbi_plan *p, uint32_t v);
/* Bit k set when input k of step st is the session's own tensor (an initializer or folded value). */
uint32_t bbi_session_own_inputs(const bb_cpu_session *s, const bbi_plan_step *st, bb_tensor *const *ins);

/* The tensor of constant v in plan p. */
bb_tensor *bbi_session_constant(const bb_cpu_session *s, const bbi_plan *p, uint32_t v);

/* Records that plan p starts every run with `t` (one reference taken over) as value v. */
int bbi_session_add_constant(bb_cpu_session *s, bbi_plan *p, uint32_t v, bb_tensor *t);

/* How many steps of p read value v (a step reading it twice counts twice; a fused
 * step's addend counts), and whether v is a graph output. */
uint32_t bbi_plan_uses(const bbi_plan *p, uint32_t v);

/* The rewrites, each over plan p in place (the steps stay in topological order), each
 * counting what it did in p->stats. `assume_initializers` lets them take initializers
 * as constants. */
int bbi_plan_fold_constants(bb_cpu_session *s, bbi_plan *p, bool assume_initializers, bb_error *err);
int bbi_plan_fold_batchnorm(bb_cpu_session *s, bbi_plan *p, bb_error *err);
int bbi_plan_elide_identities(bb_cpu_session *s, bbi_plan *p);
int bbi_plan_fuse_activations(bb_cpu_session *s, bbi_plan *p);
int bbi_plan_fuse_updates(bb_cpu_session *s, bbi_plan *p);
int bbi_plan_fuse_transposes(bb_cpu_session *s, bbi_plan *p);
int bbi_plan_find_bands(bb_cpu_session *s, bbi_plan *p);

/* Runs the batch band starting at `first` (first->band > 1): *out gets the output of its
 * last step (a new tensor). Returns 0, BBI_BAND_DECLINED when its steps must run one by
 * one (nothing was made), or an error recorded in err. */
#define BBI_BAND_DECLINED 1
int bbi_band_run(bb_cpu_session *s, bbi_plan_step *first, bb_tensor **out, bb_error *err);

/* Frees the slots band tasks on workers used. */
void bbi_band_slots_free(bb_cpu_session *s);

/* The inputs of a fused optimizer update (bbi_f32_update_coef names the operations): the
 * parameter p (before any decay), the gradient g (before clipping and L2), the rule's
 * states, then the scalars; the update's inputs a rule or form has not are BBI_NO_VALUE.
 * LR is Adam's lr / (1 − b1^t). */
typedef enum bbi_update_in {
  BBI_UPDATE_IN_P,
  BBI_UPDATE_IN_G,
  BBI_UPDATE_IN_STATE0,
  BBI_UPDATE_IN_STATE1,
  BBI_UPDATE_IN_CLIP,
  BBI_UPDATE_IN_WD,
  BBI_UPDATE_IN_DECAY,
  BBI_UPDATE_IN_LR,
  BBI_UPDATE_IN_MU,
  BBI_UPDATE_IN_B1,
  BBI_UPDATE_IN_C1,
  BBI_UPDATE_IN_B2,
  BBI_UPDATE_IN_C2,
  BBI_UPDATE_IN_S2,
  BBI_UPDATE_IN_EPS,
  BBI_UPDATE_INPUTS
} bbi_update_in;

/* Runs a step that bbi_plan_fuse_updates made, `ins` its BBI_UPDATE_INPUTS values (NULL
 * where it has none): the one pass (across the work pool) when they allow it — p, g and
 * the states float tensors of one shape, the coefficients float scalars of no higher rank,
 * p' within max_output_bytes — else nothing. outs gets p' then the states; returns 1 when
 * the nodes must run as written (nothing was made). */
int bbi_run_update(bbi_update_rule rule, bb_tensor *const *ins, const bb_allocator *alloc, size_t max_output_bytes,
                   bb_tensor **outs);

/* Drops the steps marked with node == NULL, keeping the order of the rest. */
void bbi_plan_compact(bbi_plan *p);

#endif
