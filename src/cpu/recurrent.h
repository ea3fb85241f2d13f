/* The recurrent operators' shared core (RNN, GRU, LSTM): their attributes and inputs read
 * once into a plan, the activation functions ONNX lists for them with their derivatives,
 * and the forward pass of one direction, which can keep a trace of every step for the
 * backward pass (recurrent_grad.c).
 *
 * Layout of the work: the input projection of all time steps is one GEMM, X·Wᵀ + bias
 * ([rows, G·H], one row per (time, batch) pair in X's own order); each step multiplies the
 * hidden state of the whole batch by Rᵀ (one GEMM against R packed once per direction);
 * the per-row gate math runs on the SIMD elementwise kernels. G is the number of gates
 * (RNN 1, GRU 3 in the order z r h, LSTM 4 in the order i o f c). */
#ifndef BBI_CPU_RECURRENT_H
#define BBI_CPU_RECURRENT_H

#include "cpu/cpu_op.h"

typedef enum bbi_rnn_kind { BBI_RNN_SIMPLE, BBI_RNN_GRU, BBI_RNN_LSTM } bbi_rnn_kind;

typedef enum bbi_rnn_fn {
  BBI_ACT_RELU,
  BBI_ACT_TANH,
  BBI_ACT_SIGMOID,
  BBI_ACT_AFFINE,
  BBI_ACT_LEAKY_RELU,
  BBI_ACT_THRESHOLDED_RELU,
  BBI_ACT_SCALED_TANH,
  BBI_ACT_HARD_SIGMOID,
  BBI_ACT_ELU,
  BBI_ACT_SOFTSIGN,
  BBI_ACT_SOFTPLUS
} bbi_rnn_fn;

typedef struct bbi_rnn_act {
  bbi_rnn_fn fn;
  float alpha, beta;
} bbi_rnn_act;

#define BBI_RNN_MAX_ACTS 3 /* per direction: RNN f; GRU f g; LSTM f g h */

/* Everything one node asks for, checked against its inputs. Pointers are the inputs' data
 * (NULL for an omitted optional input); lens holds a length per batch row. */
typedef struct bbi_rnn_plan {
  bbi_rnn_kind kind;
  int gates, n_acts;
  int64_t seq, batch, input, hidden, dirs;
  int layout;        /* 0: X [seq, batch, input]; 1: X [batch, seq, input] */
  bool reverse_only; /* direction "reverse" (one direction, run backwards) */
  bool linear_before_reset, input_forget;
  float clip; /* 0: no clipping */
  bbi_rnn_act act[2][BBI_RNN_MAX_ACTS];
  const float *x, *w, *r, *b, *h0, *c0, *p;
  int64_t *lens; /* batch values, each in [0, seq]; allocated by bbi_rnn_plan_read */
  const bb_allocator *alloc;
} bbi_rnn_plan;

/* The kind of an op type ("RNN", "GRU", "LSTM", or the same with a "Grad" suffix). */
bbi_rnn_kind bbi_rnn_kind_of(const char *op_type);

/* Reads the node's attributes and its inputs 0..7 (X, W, R, B, sequence_lens, initial_h,
 * initial_c, P; the last two for LSTM only) into plan, refusing by name every attribute,
 * type or shape that does not fit. Release the plan with bbi_rnn_plan_free, also after a
 * failure. */
int bbi_rnn_plan_read(bbi_cpu_op_ctx *ctx, bbi_rnn_kind kind, bbi_rnn_plan *plan);
void bbi_rnn_plan_free(bbi_rnn_plan *plan);

/* Whether direction d runs from the end of each sequence to its start. */
static inline bool bbi_rnn_reversed(const bbi_rnn_plan *p, int64_t d) { return p->reverse_only || d == 1; }

/* The row of X (and of the projection) that holds time t of batch row b. */
static inline int64_t bbi_rnn_row(const bbi_rnn_plan *p, int64_t t, int64_t b) {
  return p->layout ? b * p->seq + t : t * p->batch + b;
}

/* Offsets (in floats) of Y[t, d, b, :] and of Y_h[d, b, :] (also initial_h, Y_c, initial_c)
 * in the node's layout. */
static inline int64_t bbi_rnn_y_at(const bbi_rnn_plan *p, int64_t t, int64_t d, int64_t b) {
  return (p->layout ? (b * p->seq + t) * p->dirs + d : (t * p->dirs + d) * p->batch + b) * p->hidden;
}
static inline int64_t bbi_rnn_state_at(const bbi_rnn_plan *p, int64_t d, int64_t b) {
  return (p->layout ? b * p->dirs + d : d * p->batch + b) * p->hidden;
}

/* The time step that batch row b is at after `step` steps of direction d. */
static inline int64_t bbi_rnn_time(const bbi_rnn_plan *p, int64_t d, int64_t b, int64_t step) {
  return bbi_rnn_reversed(p, d) ? p->lens[b] - 1 - step : step;
}

/* y = act(x) over n floats (y may be x), and dx = dy · act'(x) given y = act(x). Relu,
 * Tanh and Sigmoid (and the derivatives of the last two) run on the SIMD elementwise
 * kernels, the other activations in plain C. */
void bbi_rnn_activate(const bbi_rnn_act *a, size_t n, const float *x, float *y);
void bbi_rnn_activate_grad(const bbi_rnn_act *a, size_t n, const float *x, const float *y, const float *dy,
                           float *dx);

/* What one direction's forward pass keeps for the backward one, each indexed by the row
 * of X the step read (bbi_rnn_row): the gate pre-activations before clipping (peepholes
 * included) and the activations [rows, G·H]; the hidden state each step started from;
 * for LSTM the cell state it started from, the new cell state and h(cell); for GRU the
 * recurrent operand of the h gate (linear_before_reset: Hp·Rhᵀ + Rbh; else r ⊙ Hp). */
typedef struct bbi_rnn_trace {
  float *pre, *post, *hprev, *cprev, *cell, *cell_act, *rec_h;
} bbi_rnn_trace;

/* Carves 64-byte-aligned float arrays out of one block; with base NULL it only measures
 * (at then holds the bytes the block needs). */
typedef struct bbi_rnn_carve {
  char *base;
  uint64_t at;
} bbi_rnn_carve;

float *bbi_rnn_take(bbi_rnn_carve *c, uint64_t floats);

/* A GRU whose h gate multiplies r ⊙ Hp (linear_before_reset 0): its recurrent product
 * comes in two parts, z and r first. */
static inline bool bbi_rnn_gru_split(const bbi_rnn_plan *p) {
  return p->kind == BBI_RNN_GRU && !p->linear_before_reset;
}

/* The scratch bytes bbi_rnn_forward needs. */
size_t bbi_rnn_forward_scratch(const bbi_rnn_plan *p);

/* Runs direction d: writes its part of y, y_h and y_c (each may be NULL) and fills trace
 * when not NULL (its arrays zeroed by the caller). scratch holds bbi_rnn_forward_scratch
 * bytes, 64-aligned. Returns 0 or the GEMM's error. */
int bbi_rnn_forward(const bbi_rnn_plan *p, int64_t d, float *y, float *y_h, float *y_c, bbi_rnn_trace *trace,
                    void *scratch);

/* The backward pass, in recurrent_grad.c: the ai.bytesandbrains.grad operators RNNGrad,
 * GRUGrad and LSTMGrad. */
int bbi_cpu_op_recurrent_grad(bbi_cpu_op_ctx *ctx);

#endif
