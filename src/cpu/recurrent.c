/* CPU operators of the recurrent family: RNN, GRU and LSTM (ai.onnx, float32), with every
 * attribute and optional input ONNX defines for them. recurrent.h describes how the work
 * is laid out; the backward operators are in recurrent_grad.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cpu/recurrent.h"
#include "tensor/kernels/kernels.h"
#include "util/mem.h"

static const int32_t FLOAT_ONLY[] = {BB_DTYPE_FLOAT, BB_DTYPE_UNDEFINED};

/* ---- activations ------------------------------------------------------------------------ */

static const struct {
  const char *name;
  bbi_rnn_fn fn;
  bool takes_alpha, takes_beta;
  float alpha, beta; /* the defaults of the ONNX operator of the same name */
} ACTIVATIONS[] = {
    {"Relu", BBI_ACT_RELU, false, false, 0, 0},
    {"Tanh", BBI_ACT_TANH, false, false, 0, 0},
    {"Sigmoid", BBI_ACT_SIGMOID, false, false, 0, 0},
    {"Affine", BBI_ACT_AFFINE, true, true, 1.0f, 0.0f},
    {"LeakyRelu", BBI_ACT_LEAKY_RELU, true, false, 0.01f, 0},
    {"ThresholdedRelu", BBI_ACT_THRESHOLDED_RELU, true, false, 1.0f, 0},
    {"ScaledTanh", BBI_ACT_SCALED_TANH, true, true, 1.0f, 1.0f},
    {"HardSigmoid", BBI_ACT_HARD_SIGMOID, true, true, 0.2f, 0.5f},
    {"Elu", BBI_ACT_ELU, true, false, 1.0f, 0},
    {"Softsign", BBI_ACT_SOFTSIGN, false, false, 0, 0},
    {"Softplus", BBI_ACT_SOFTPLUS, false, false, 0, 0},
};
#define N_ACTIVATIONS (sizeof ACTIVATIONS / sizeof ACTIVATIONS[0])

static float act_scalar(const bbi_rnn_act *a, float x) {
  switch (a->fn) {
  case BBI_ACT_RELU: return x > 0 ? x : 0.0f;
  case BBI_ACT_TANH: return tanhf(x);
  case BBI_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
  case BBI_ACT_AFFINE: return a->alpha * x + a->beta;
  case BBI_ACT_LEAKY_RELU: return x >= 0 ? x : a->alpha * x;
  case BBI_ACT_THRESHOLDED_RELU: return x > a->alpha ? x : 0.0f;
  case BBI_ACT_SCALED_TANH: return a->alpha * tanhf(a->beta * x);
  case BBI_ACT_HARD_SIGMOID: return fminf(fmaxf(a->alpha * x + a->beta, 0.0f), 1.0f);
  case BBI_ACT_ELU: return x >= 0 ? x : a->alpha * (expf(x) - 1.0f);
  case BBI_ACT_SOFTSIGN: return x / (1.0f + fabsf(x));
  default: return x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x)); /* Softplus, without overflow */
  }
}

/* d act / dx at x, given y = act(x). */
static float act_slope(const bbi_rnn_act *a, float x, float y) {
  switch (a->fn) {
  case BBI_ACT_RELU: return x > 0 ? 1.0f : 0.0f;
  case BBI_ACT_TANH: return 1.0f - y * y;
  case BBI_ACT_SIGMOID: return y * (1.0f - y);
  case BBI_ACT_AFFINE: return a->alpha;
  case BBI_ACT_LEAKY_RELU: return x >= 0 ? 1.0f : a->alpha;
  case BBI_ACT_THRESHOLDED_RELU: return x > a->alpha ? 1.0f : 0.0f;
  case BBI_ACT_SCALED_TANH: {
    float t = tanhf(a->beta * x);
    return a->alpha * a->beta * (1.0f - t * t);
  }
  case BBI_ACT_HARD_SIGMOID: {
    float v = a->alpha * x + a->beta;
    return v > 0 && v < 1 ? a->alpha : 0.0f;
  }
  case BBI_ACT_ELU: return x >= 0 ? 1.0f : y + a->alpha;
  case BBI_ACT_SOFTSIGN: {
    float d = 1.0f + fabsf(x);
    return 1.0f / (d * d);
  }
  default: return 1.0f / (1.0f + expf(-x)); /* Softplus */
  }
}

void bbi_rnn_activate(const bbi_rnn_act *a, size_t n, const float *x, float *y) {
  switch (a->fn) { /* the common three on the SIMD kernels */
  case BBI_ACT_RELU: bbi_f32_vunary(BBI_UNARY_RELU, n, x, y); return;
  case BBI_ACT_TANH: bbi_f32_vunary(BBI_UNARY_TANH, n, x, y); return;
  case BBI_ACT_SIGMOID: bbi_f32_vunary(BBI_UNARY_SIGMOID, n, x, y); return;
  default:
    for (size_t i = 0; i < n; i++) y[i] = act_scalar(a, x[i]);
  }
}

void bbi_rnn_activate_grad(const bbi_rnn_act *a, size_t n, const float *x, const float *y, const float *dy,
                           float *dx) {
  if (dx != dy && (a->fn == BBI_ACT_SIGMOID || a->fn == BBI_ACT_TANH)) { /* the common two on the SIMD kernels */
    if (a->fn == BBI_ACT_SIGMOID) { /* y (1 - y) */
      bbi_f32_vbinary_rc(BBI_BINARY_SUB, n, 1.0f, y, dx);
      bbi_f32_vbinary(BBI_BINARY_MUL, n, y, dx, dx);
    } else { /* 1 - y² */
      bbi_f32_vbinary(BBI_BINARY_MUL, n, y, y, dx);
      bbi_f32_vbinary_rc(BBI_BINARY_SUB, n, 1.0f, dx, dx);
    }
    bbi_f32_vbinary(BBI_BINARY_MUL, n, dy, dx, dx);
    return;
  }
  for (size_t i = 0; i < n; i++) dx[i] = dy[i] * act_slope(a, x[i], y[i]);
}

/* ---- reading a node ---------------------------------------------------------------------- */

bbi_rnn_kind bbi_rnn_kind_of(const char *op_type) {
  return strncmp(op_type, "LSTM", 4) == 0 ? BBI_RNN_LSTM : strncmp(op_type, "GRU", 3) == 0 ? BBI_RNN_GRU : BBI_RNN_SIMPLE;
}

static int read_activations(bbi_cpu_op_ctx *ctx, bbi_rnn_plan *p) {
  static const bbi_rnn_fn DEFAULTS[3][BBI_RNN_MAX_ACTS] = {
      {BBI_ACT_TANH}, {BBI_ACT_SIGMOID, BBI_ACT_TANH}, {BBI_ACT_SIGMOID, BBI_ACT_TANH, BBI_ACT_TANH}};
  const bb_attrlist *attrs = &ctx->node->attrs;
  const bb_attr *names = bb_attr_find(attrs, "activations"), *alphas = bb_attr_find(attrs, "activation_alpha"),
                *betas = bb_attr_find(attrs, "activation_beta");
  size_t want = (size_t)p->n_acts, total = want * (size_t)p->dirs, next_alpha = 0, next_beta = 0;
  if (names && (names->type != BB_ATTR_STRINGS || (names->n_strings != want && names->n_strings != total)))
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "activations must list %zu or %zu function names", want, total);
  if ((alphas && alphas->type != BB_ATTR_FLOATS) || (betas && betas->type != BB_ATTR_FLOATS))
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "activation_alpha and activation_beta must be lists of floats");
  /* one function per slot of each direction (a list of one direction's serves both);
   * alphas and betas go, in order, to the functions that take them */
  for (size_t k = 0; k < total; k++) {
    bbi_rnn_act *a = &p->act[k / want][k % want];
    if (!names) {
      a->fn = DEFAULTS[p->kind][k % want];
      continue;
    }
    const bb_bytes *s = &names->strings[names->n_strings == total ? k : k % want];
    size_t f = 0;
    while (f < N_ACTIVATIONS && !(strlen(ACTIVATIONS[f].name) == s->len && memcmp(ACTIVATIONS[f].name, s->data, s->len) == 0))
      f++;
    if (f == N_ACTIVATIONS)
      return bbi_cpu_fail(ctx, BB_ERR_UNSUPPORTED, "activation %.*s is not one ONNX defines for recurrent operators",
                         (int)(s->len < 64 ? s->len : 64), (const char *)s->data);
    a->fn = ACTIVATIONS[f].fn;
    a->alpha = ACTIVATIONS[f].alpha;
    a->beta = ACTIVATIONS[f].beta;
    if (ACTIVATIONS[f].takes_alpha && alphas && next_alpha < alphas->n_floats) a->alpha = alphas->floats[next_alpha++];
    if (ACTIVATIONS[f].takes_beta && betas && next_beta < betas->n_floats) a->beta = betas->floats[next_beta++];
  }
  return 0;
}

/* Fails unless input i (when present) is float32 with exactly these dims. */
static int expect_input(bbi_cpu_op_ctx *ctx, size_t i, const char *name, int rank, const int64_t *dims) {
  const bb_tensor *t = bbi_cpu_input(ctx, i);
  if (!t) return 0;
  int rc = bbi_cpu_expect_dtype(ctx, i, FLOAT_ONLY);
  if (rc) return rc;
  bool same = t->rank == rank;
  for (int d = 0; same && d < rank; d++) same = t->dims[d] == dims[d];
  if (same) return 0;
  char got[128], want[128];
  int at = 0;
  for (int d = 0; d < rank && at < 100; d++) at += snprintf(want + at, sizeof want - (size_t)at, "%s%lld", d ? ", " : "", (long long)dims[d]);
  if (!rank) want[0] = '\0';
  return bbi_cpu_fail(ctx, BB_ERR_TYPE, "%s must be [%s], got %s", name, want, bb_tensor_describe(t, got, sizeof got));
}

static int read_lengths(bbi_cpu_op_ctx *ctx, bbi_rnn_plan *p) {
  const bb_tensor *lens = bbi_cpu_input(ctx, 4);
  p->lens = bbi_mem_alloc(p->alloc, (size_t)(p->batch ? p->batch : 1) * sizeof *p->lens);
  if (!p->lens) return bbi_cpu_fail(ctx, BB_ERR_NOMEM, "no memory for the sequence lengths");
  for (int64_t b = 0; b < p->batch; b++) p->lens[b] = p->seq;
  if (!lens) return 0;
  if ((lens->dtype != BB_DTYPE_INT32 && lens->dtype != BB_DTYPE_INT64) || lens->rank != 1 || lens->dims[0] != p->batch)
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "sequence_lens must be int32 [%lld]", (long long)p->batch);
  for (int64_t b = 0; b < p->batch; b++) {
    int64_t v = bbi_cpu_get_i64(lens, b);
    if (v < 0 || v > p->seq)
      return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "sequence_lens[%lld] is %lld, outside [0, %lld]", (long long)b,
                         (long long)v, (long long)p->seq);
    p->lens[b] = v;
  }
  return 0;
}

int bbi_rnn_plan_read(bbi_cpu_op_ctx *ctx, bbi_rnn_kind kind, bbi_rnn_plan *p) {
  static const int GATES[] = {1, 3, 4};
  const bb_attrlist *attrs = &ctx->node->attrs;
  memset(p, 0, sizeof *p);
  p->kind = kind;
  p->gates = GATES[kind];
  p->n_acts = (int)kind + 1;
  p->alloc = ctx->alloc;
  const bb_tensor *x = ctx->inputs[0], *r = ctx->inputs[2];
  int rc = bbi_cpu_expect_dtype(ctx, 0, FLOAT_ONLY);
  if (rc) return rc;
  if (x->rank != 3) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "X must have rank 3 (got %d)", x->rank);
  if (r->rank != 3) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "R must have rank 3 (got %d)", r->rank);
  p->layout = (int)bb_attr_get_int(attrs, "layout", 0);
  if (p->layout != 0 && p->layout != 1) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "layout must be 0 or 1");
  const char *direction = bb_attr_get_string(attrs, "direction", "forward");
  if (strcmp(direction, "bidirectional") == 0) p->dirs = 2;
  else if (strcmp(direction, "forward") == 0 || strcmp(direction, "reverse") == 0) p->dirs = 1;
  else return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "direction %s is not forward, reverse or bidirectional", direction);
  p->reverse_only = strcmp(direction, "reverse") == 0;
  p->hidden = bb_attr_get_int(attrs, "hidden_size", r->dims[2]);
  p->seq = x->dims[p->layout ? 1 : 0];
  p->batch = x->dims[p->layout ? 0 : 1];
  p->input = x->dims[2];
  if (p->hidden < 1 || p->hidden != r->dims[2])
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "hidden_size %lld does not match R's last dim %lld",
                       (long long)p->hidden, (long long)r->dims[2]);
  int64_t gh = p->gates * p->hidden, h = p->hidden, dirs = p->dirs;
  int64_t state[3] = {p->layout ? p->batch : dirs, p->layout ? dirs : p->batch, h};
  if ((rc = expect_input(ctx, 1, "W", 3, (int64_t[]){dirs, gh, p->input})) ||
      (rc = expect_input(ctx, 2, "R", 3, (int64_t[]){dirs, gh, h})) ||
      (rc = expect_input(ctx, 3, "B", 2, (int64_t[]){dirs, 2 * gh})) ||
      (rc = expect_input(ctx, 5, "initial_h", 3, state)))
    return rc;
  if (kind == BBI_RNN_LSTM &&
      ((rc = expect_input(ctx, 6, "initial_c", 3, state)) || (rc = expect_input(ctx, 7, "P", 2, (int64_t[]){dirs, 3 * h}))))
    return rc;
  const bb_attr *clip = bb_attr_find(attrs, "clip");
  if (clip) {
    p->clip = bb_attr_get_float(attrs, "clip", 0);
    if (!(p->clip > 0)) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "clip must be positive (got %g)", (double)p->clip);
  }
  p->input_forget = kind == BBI_RNN_LSTM && bb_attr_get_int(attrs, "input_forget", 0) != 0;
  p->linear_before_reset = kind == BBI_RNN_GRU && bb_attr_get_int(attrs, "linear_before_reset", 0) != 0;
  if ((rc = read_activations(ctx, p))) return rc;
  /* the largest buffers: the projection and, for the backward pass, its trace */
  int64_t gates_all;
  if (__builtin_mul_overflow(p->seq, p->batch, &gates_all) || __builtin_mul_overflow(gates_all, gh, &gates_all))
    gates_all = -1;
  if ((rc = bbi_cpu_check_size(ctx, gates_all, 4 * sizeof(float), "the gates of every step"))) return rc;
  p->x = bb_tensor_data(x);
  p->w = bb_tensor_data(ctx->inputs[1]);
  p->r = bb_tensor_data(r);
#define DATA_OR_NULL(i) (bbi_cpu_input(ctx, i) ? (const float *)bb_tensor_data(bbi_cpu_input(ctx, i)) : NULL)
  p->b = DATA_OR_NULL(3);
  p->h0 = DATA_OR_NULL(5);
  if (kind == BBI_RNN_LSTM) {
    p->c0 = DATA_OR_NULL(6);
    p->p = DATA_OR_NULL(7);
  }
#undef DATA_OR_NULL
  return read_lengths(ctx, p);
}

void bbi_rnn_plan_free(bbi_rnn_plan *p) {
  bbi_mem_free(p->alloc, p->lens);
  p->lens = NULL;
}

/* ---- the forward pass -------------------------------------------------------------------- */

float *bbi_rnn_take(bbi_rnn_carve *c, uint64_t floats) {
  uint64_t at = (c->at + 63) & ~(uint64_t)63;
  c->at = at + floats * sizeof(float);
  return c->base ? (float *)(c->base + at) : NULL;
}

/* The working arrays of one direction's forward pass. */
typedef struct fwd_mem {
  float *xw, *rec, *post, *h, *c, *rh, *hh, *tmp, *bias;
  void *packed_r, *packed_rh, *gemm;
  size_t packed_r_size, packed_rh_size, gemm_size;
} fwd_mem;

/* Columns of the per-step recurrent product Hp·Rᵀ: every gate, except a GRU without
 * linear_before_reset, whose h gate multiplies r ⊙ Hp instead (a second product). */
static size_t rec_columns(const bbi_rnn_plan *p) {
  return (size_t)((bbi_rnn_gru_split(p) ? 2 : p->gates) * p->hidden);
}

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

static void fwd_layout(const bbi_rnn_plan *p, bbi_rnn_carve *c, fwd_mem *m) {
  size_t rows = (size_t)(p->seq * p->batch), gh = (size_t)(p->gates * p->hidden), h = (size_t)p->hidden;
  size_t b = (size_t)p->batch;
  m->xw = bbi_rnn_take(c, rows * gh);
  m->rec = bbi_rnn_take(c, b * gh);
  m->post = bbi_rnn_take(c, b * gh);
  m->h = bbi_rnn_take(c, b * h);
  m->c = bbi_rnn_take(c, b * h);
  m->rh = bbi_rnn_take(c, b * h);
  m->hh = bbi_rnn_take(c, b * h);
  m->tmp = bbi_rnn_take(c, 2 * h);
  m->bias = bbi_rnn_take(c, gh);
  m->packed_r_size = bbi_f32_gemm_packed_b_size(NULL, rec_columns(p), h);
  m->packed_rh_size = bbi_rnn_gru_split(p) ? bbi_f32_gemm_packed_b_size(NULL, h, h) : 0;
  m->gemm_size = max_size(bbi_f32_gemm_scratch_size(rows, gh, (size_t)p->input), bbi_f32_gemm_scratch_size(b, gh, h));
  m->packed_r = bbi_rnn_take(c, (m->packed_r_size + 3) / 4);
  m->packed_rh = bbi_rnn_take(c, (m->packed_rh_size + 3) / 4);
  m->gemm = bbi_rnn_take(c, (m->gemm_size + 3) / 4);
}

size_t bbi_rnn_forward_scratch(const bbi_rnn_plan *p) {
  bbi_rnn_carve c = {NULL, 0};
  fwd_mem m;
  fwd_layout(p, &c, &m);
  return (size_t)c.at;
}

/* y = act(clip(x)) over n floats. */
static void clip_activate(const bbi_rnn_plan *p, const bbi_rnn_act *a, size_t n, const float *x, float *y) {
  if (p->clip > 0) {
    bbi_f32_vbinary_c(BBI_BINARY_MAX, n, x, -p->clip, y);
    bbi_f32_vbinary_c(BBI_BINARY_MIN, n, y, p->clip, y);
    x = y;
  }
  bbi_rnn_activate(a, n, x, y);
}

/* One forward step of the row of batch row `bi` whose gates are g (the projection already
 * added; pre-activations, updated in place) and whose activations go to post. */
typedef struct row_step {
  const bbi_rnn_plan *p;
  int64_t d, row;
  float *g, *post, *h, *c; /* h and c: the row's state, replaced by the new one */
  bbi_rnn_trace *trace;
  float *tmp; /* 2·hidden floats */
} row_step;

static void lstm_row(const row_step *s) {
  const bbi_rnn_plan *p = s->p;
  size_t h = (size_t)p->hidden;
  const bbi_rnn_act *f = &p->act[s->d][0], *g = &p->act[s->d][1], *hf = &p->act[s->d][2];
  const float *peep = p->p ? p->p + s->d * 3 * p->hidden : NULL; /* i, o, f */
  float *gi = s->g, *go = s->g + h, *gf = s->g + 2 * h, *gc = s->g + 3 * h;
  float *pi = s->post, *po = s->post + h, *pf = s->post + 2 * h, *pc = s->post + 3 * h;
  float *tmp = s->tmp, *cell_act = s->trace ? s->trace->cell_act + s->row * p->hidden : s->tmp + h;
  if (s->trace) memcpy(s->trace->cprev + s->row * p->hidden, s->c, h * sizeof(float));
  if (peep) {
    bbi_f32_vbinary(BBI_BINARY_MUL, h, peep, s->c, tmp);
    bbi_f32_vbinary(BBI_BINARY_ADD, h, gi, tmp, gi);
    bbi_f32_vbinary(BBI_BINARY_MUL, h, peep + 2 * h, s->c, tmp);
    bbi_f32_vbinary(BBI_BINARY_ADD, h, gf, tmp, gf);
  }
  clip_activate(p, f, h, gi, pi);
  if (p->input_forget) bbi_f32_vbinary_rc(BBI_BINARY_SUB, h, 1.0f, pi, pf); /* f = 1 - i */
  else clip_activate(p, f, h, gf, pf);
  clip_activate(p, g, h, gc, pc);
  bbi_f32_vbinary(BBI_BINARY_MUL, h, pi, pc, tmp);
  bbi_f32_vbinary(BBI_BINARY_MUL, h, pf, s->c, s->c);
  bbi_f32_vbinary(BBI_BINARY_ADD, h, s->c, tmp, s->c); /* c = f ⊙ c + i ⊙ c̃ */
  if (peep) {
    bbi_f32_vbinary(BBI_BINARY_MUL, h, peep + h, s->c, tmp);
    bbi_f32_vbinary(BBI_BINARY_ADD, h, go, tmp, go);
  }
  clip_activate(p, f, h, go, po);
  bbi_rnn_activate(hf, h, s->c, cell_act);
  bbi_f32_vbinary(BBI_BINARY_MUL, h, po, cell_act, s->h); /* h = o ⊙ h(c) */
  if (s->trace) memcpy(s->trace->cell + s->row * p->hidden, s->c, h * sizeof(float));
}

/* h̃ from its pre-activation gh, then H = h̃ + z ⊙ (Hp - h̃), in place of Hp. */
static void gru_finish(const bbi_rnn_plan *p, const bbi_rnn_act *g, const float *gh, const float *z, float *ph, float *hp,
                       float *tmp) {
  size_t h = (size_t)p->hidden;
  clip_activate(p, g, h, gh, ph);
  bbi_f32_vbinary(BBI_BINARY_SUB, h, hp, ph, tmp);
  bbi_f32_vbinary(BBI_BINARY_MUL, h, z, tmp, tmp);
  bbi_f32_vbinary(BBI_BINARY_ADD, h, ph, tmp, hp);
}

/* linear_before_reset: h̃ = g(xh + r ⊙ (Hp·Rhᵀ + Rbh)), all in one step. */
static void gru_row_linear(const row_step *s, const float *xh, const float *rbh) {
  const bbi_rnn_plan *p = s->p;
  size_t h = (size_t)p->hidden;
  float *gh = s->g + 2 * h;
  if (rbh) bbi_f32_vbinary(BBI_BINARY_ADD, h, gh, rbh, gh);
  if (s->trace) memcpy(s->trace->rec_h + s->row * p->hidden, gh, h * sizeof(float));
  clip_activate(p, &p->act[s->d][0], 2 * h, s->g, s->post);
  bbi_f32_vbinary(BBI_BINARY_MUL, h, s->post + h, gh, gh);
  bbi_f32_vbinary(BBI_BINARY_ADD, h, xh, gh, gh);
  gru_finish(p, &p->act[s->d][1], gh, s->post, s->post + 2 * h, s->h, s->tmp);
}

static void store_trace(const row_step *s) {
  const bbi_rnn_plan *p = s->p;
  size_t gh = (size_t)(p->gates * p->hidden);
  memcpy(s->trace->pre + s->row * (int64_t)gh, s->g, gh * sizeof(float));
  memcpy(s->trace->post + s->row * (int64_t)gh, s->post, gh * sizeof(float));
}

static int product(size_t m, size_t n, size_t k, const float *a, size_t lda, const float *b, size_t ldb, int trans_b,
                   const void *packed_b, const float *bias, float *c, size_t ldc, const fwd_mem *mem) {
  bbi_f32_gemm_args g;
  memset(&g, 0, sizeof g);
  g.m = m, g.n = n, g.k = k, g.alpha = 1.0f;
  g.a = a, g.lda = lda, g.b = b, g.ldb = ldb, g.trans_b = trans_b, g.packed_b = packed_b;
  g.bias = bias, g.c = c, g.ldc = ldc;
  return bbi_f32_gemm(&g, mem->gemm, mem->gemm_size);
}

int bbi_rnn_forward(const bbi_rnn_plan *p, int64_t d, float *y, float *y_h, float *y_c, bbi_rnn_trace *trace,
                    void *scratch) {
  bbi_rnn_carve carve = {scratch, 0};
  fwd_mem m;
  fwd_layout(p, &carve, &m);
  size_t H = (size_t)p->hidden, GH = (size_t)(p->gates * p->hidden), B = (size_t)p->batch;
  size_t rows = (size_t)(p->seq * p->batch), n_rec = rec_columns(p);
  const float *w = p->w + d * (int64_t)GH * p->input, *r = p->r + d * (int64_t)GH * p->hidden;
  const float *wb = p->b ? p->b + d * 2 * (int64_t)GH : NULL, *rb = wb ? wb + GH : NULL;
  bool linear = p->kind == BBI_RNN_GRU && p->linear_before_reset;
  /* the projection's bias: Wb + Rb, but for linear_before_reset Rbh stays inside r ⊙ (..) */
  for (size_t j = 0; j < GH; j++) m.bias[j] = wb ? wb[j] + (linear && j >= 2 * H ? 0.0f : rb[j]) : 0.0f;
  int rc = product(rows, GH, (size_t)p->input, p->x, (size_t)p->input, w, (size_t)p->input, 1, NULL, m.bias, m.xw, GH, &m);
  if (!rc) rc = bbi_f32_gemm_pack_b(NULL, n_rec, H, 1, r, H, m.packed_r, m.packed_r_size);
  if (!rc && bbi_rnn_gru_split(p)) rc = bbi_f32_gemm_pack_b(NULL, H, H, 1, r + 2 * H * H, H, m.packed_rh, m.packed_rh_size);
  if (rc) return rc;
  for (size_t b = 0; b < B; b++) {
    int64_t at = bbi_rnn_state_at(p, d, (int64_t)b);
    if (p->h0) memcpy(m.h + b * H, p->h0 + at, H * sizeof(float));
    else memset(m.h + b * H, 0, H * sizeof(float));
    if (p->c0) memcpy(m.c + b * H, p->c0 + at, H * sizeof(float));
    else memset(m.c + b * H, 0, H * sizeof(float));
  }
  int64_t steps = 0;
  for (size_t b = 0; b < B; b++) steps = p->lens[b] > steps ? p->lens[b] : steps;
  for (int64_t step = 0; step < steps && !rc; step++) {
    rc = product(B, n_rec, H, m.h, H, NULL, 0, 1, m.packed_r, NULL, m.rec, GH, &m);
    for (size_t b = 0; b < B && !rc; b++) {
      if (step >= p->lens[b]) {
        if (bbi_rnn_gru_split(p)) memset(m.rh + b * H, 0, H * sizeof(float));
        continue;
      }
      int64_t t = bbi_rnn_time(p, d, (int64_t)b, step), row = bbi_rnn_row(p, t, (int64_t)b);
      row_step s = {p, d, row, m.rec + b * GH, m.post + b * GH, m.h + b * H, m.c + b * H, trace, m.tmp};
      const float *xw = m.xw + row * (int64_t)GH;
      if (trace) memcpy(trace->hprev + row * p->hidden, s.h, H * sizeof(float));
      bbi_f32_vbinary(BBI_BINARY_ADD, p->kind == BBI_RNN_GRU ? 2 * H : GH, s.g, xw, s.g);
      if (p->kind == BBI_RNN_LSTM) {
        lstm_row(&s);
      } else if (p->kind == BBI_RNN_SIMPLE) {
        clip_activate(p, &p->act[d][0], H, s.g, s.post);
        memcpy(s.h, s.post, H * sizeof(float));
      } else if (linear) {
        gru_row_linear(&s, xw + 2 * H, rb ? rb + 2 * H : NULL);
      } else { /* z and r now; h̃ after the product of r ⊙ Hp */
        clip_activate(p, &p->act[d][0], 2 * H, s.g, s.post);
        bbi_f32_vbinary(BBI_BINARY_MUL, H, s.post + H, s.h, m.rh + b * H);
        if (trace) memcpy(trace->rec_h + row * p->hidden, m.rh + b * H, H * sizeof(float));
        continue;
      }
      if (trace) store_trace(&s);
      if (y) memcpy(y + bbi_rnn_y_at(p, t, d, (int64_t)b), s.h, H * sizeof(float));
    }
    if (rc || !bbi_rnn_gru_split(p)) continue;
    rc = product(B, H, H, m.rh, H, NULL, 0, 1, m.packed_rh, NULL, m.hh, H, &m);
    for (size_t b = 0; b < B && !rc; b++) {
      if (step >= p->lens[b]) continue;
      int64_t t = bbi_rnn_time(p, d, (int64_t)b, step), row = bbi_rnn_row(p, t, (int64_t)b);
      row_step s = {p, d, row, m.rec + b * GH, m.post + b * GH, m.h + b * H, m.c + b * H, trace, m.tmp};
      float *gh = s.g + 2 * H;
      bbi_f32_vbinary(BBI_BINARY_ADD, H, m.xw + row * (int64_t)GH + 2 * H, m.hh + b * H, gh);
      gru_finish(p, &p->act[d][1], gh, s.post, s.post + 2 * H, s.h, s.tmp);
      if (trace) store_trace(&s);
      if (y) memcpy(y + bbi_rnn_y_at(p, t, d, (int64_t)b), s.h, H * sizeof(float));
    }
  }
  for (size_t b = 0; b < B; b++) {
    int64_t at = bbi_rnn_state_at(p, d, (int64_t)b);
    if (y_h) memcpy(y_h + at, m.h + b * H, H * sizeof(float));
    if (y_c) memcpy(y_c + at, m.c + b * H, H * sizeof(float));
  }
  return rc;
}

/* ---- the operators ------------------------------------------------------------------------ */

static int op_recurrent(bbi_cpu_op_ctx *ctx) {
  bbi_rnn_plan p;
  bbi_rnn_kind kind = bbi_rnn_kind_of(ctx->node->op_type);
  int rc = bbi_rnn_plan_read(ctx, kind, &p);
  if (rc) {
    bbi_rnn_plan_free(&p);
    return rc;
  }
  int64_t y_dims[4] = {p.layout ? p.batch : p.seq, p.layout ? p.seq : p.dirs, p.layout ? p.dirs : p.batch, p.hidden};
  int64_t state_dims[3] = {p.layout ? p.batch : p.dirs, p.layout ? p.dirs : p.batch, p.hidden};
  float *out[3] = {NULL, NULL, NULL};
  for (size_t k = 0; k < 3 && !rc; k++) {
    if (!bbi_cpu_output_wanted(ctx, k)) continue;
    if ((rc = bbi_cpu_make_output(ctx, k, BB_DTYPE_FLOAT, k ? 3 : 4, k ? state_dims : y_dims))) break;
    out[k] = bb_tensor_data(ctx->outputs[k]);
    memset(out[k], 0, (size_t)ctx->outputs[k]->numel * sizeof(float)); /* Y is 0 past each sequence's end */
  }
  size_t need = bbi_rnn_forward_scratch(&p);
  void *scratch = rc ? NULL : bbi_cpu_scratch(ctx, need);
  if (!rc && !scratch) rc = BB_ERR_NOMEM;
  for (int64_t d = 0; d < p.dirs && !rc; d++)
    if (bbi_rnn_forward(&p, d, out[0], out[1], out[2], NULL, scratch))
      rc = bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "GEMM rejected its arguments");
  bbi_rnn_plan_free(&p);
  return rc;
}

const bbi_cpu_op bbi_cpu_ops_recurrent[] = {
    {"RNN", 7, 3, 6, 0, 2, "float", op_recurrent},
    {"GRU", 7, 3, 6, 0, 2, "float", op_recurrent},
    {"LSTM", 7, 3, 8, 0, 3, "float", op_recurrent},
};
const size_t bbi_cpu_ops_recurrent_count = sizeof bbi_cpu_ops_recurrent / sizeof bbi_cpu_ops_recurrent[0];
