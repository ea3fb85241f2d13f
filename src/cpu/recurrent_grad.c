/* The backward pass of RNN, GRU and LSTM: the ai.bytesandbrains.grad operators RNNGrad,
 * GRUGrad and LSTMGrad (docs/GRAD.md states their contract).
 *
 *   XGrad(X, W, R, B, sequence_lens, initial_h[, initial_c, P], dY, dY_h[, dY_c])
 *     -> (dX, dW, dR, dB, dinitial_h[, dinitial_c, dP])
 *
 * with the forward node's attributes. Any input after R may be omitted (""); so may any
 * output. Each direction reruns its forward pass keeping a trace of every step
 * (recurrent.c), then walks the steps backwards, carrying d h (and d c) from step to step:
 * per step one GEMM over the batch takes the gates' gradients back through R. The gates'
 * gradients of all steps are kept, so dX, dW and dR are one GEMM each afterwards, and the
 * bias gradients column sums. */
#include <string.h>

#include "cpu/recurrent.h"
#include "tensor/kernels/kernels.h"

typedef struct bwd_mem {
  bbi_rnn_trace trace;
  float *dgx, *dgr, *dh, *dc, *dstep, *drh, *tmp, *dp;
  void *packed_r, *packed_rh, *gemm, *forward;
  size_t packed_r_size, packed_rh_size, gemm_size;
} bwd_mem;

static bool gru_linear(const bbi_rnn_plan *p) { return p->kind == BBI_RNN_GRU && p->linear_before_reset; }

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

/* Lays the arrays out (with c->base NULL: measures them). */
static void bwd_layout(const bbi_rnn_plan *p, bbi_rnn_carve *c, bwd_mem *m) {
  uint64_t rows = (uint64_t)(p->seq * p->batch), gh = (uint64_t)(p->gates * p->hidden), h = (uint64_t)p->hidden;
  uint64_t b = (uint64_t)p->batch, i = (uint64_t)p->input;
  m->trace.pre = bbi_rnn_take(c, rows * gh);
  m->trace.post = bbi_rnn_take(c, rows * gh);
  m->trace.hprev = bbi_rnn_take(c, rows * h);
  bool lstm = p->kind == BBI_RNN_LSTM;
  m->trace.cprev = lstm ? bbi_rnn_take(c, rows * h) : NULL;
  m->trace.cell = lstm ? bbi_rnn_take(c, rows * h) : NULL;
  m->trace.cell_act = lstm ? bbi_rnn_take(c, rows * h) : NULL;
  m->trace.rec_h = p->kind == BBI_RNN_GRU ? bbi_rnn_take(c, rows * h) : NULL;
  m->dgx = bbi_rnn_take(c, rows * gh);
  m->dgr = gru_linear(p) ? bbi_rnn_take(c, rows * gh) : m->dgx;
  m->dh = bbi_rnn_take(c, b * h);
  m->dc = bbi_rnn_take(c, b * h);
  m->dstep = bbi_rnn_take(c, b * gh);
  m->drh = bbi_rnn_take(c, b * h);
  m->tmp = bbi_rnn_take(c, 4 * h);
  m->dp = bbi_rnn_take(c, 3 * h);
  size_t k_rec = (size_t)(bbi_rnn_gru_split(p) ? 2 * h : gh);
  m->packed_r_size = bbi_f32_gemm_packed_b_size(NULL, (size_t)h, k_rec);
  m->packed_rh_size = bbi_rnn_gru_split(p) ? bbi_f32_gemm_packed_b_size(NULL, (size_t)h, (size_t)h) : 0;
  size_t g = bbi_f32_gemm_scratch_size((size_t)b, (size_t)h, (size_t)gh);
  g = max_size(g, bbi_f32_gemm_scratch_size((size_t)rows, (size_t)i, (size_t)gh));
  g = max_size(g, bbi_f32_gemm_scratch_size((size_t)gh, (size_t)i, (size_t)rows));
  g = max_size(g, bbi_f32_gemm_scratch_size((size_t)gh, (size_t)h, (size_t)rows));
  m->gemm_size = g;
  m->packed_r = bbi_rnn_take(c, (m->packed_r_size + 3) / 4);
  m->packed_rh = bbi_rnn_take(c, (m->packed_rh_size + 3) / 4);
  m->gemm = bbi_rnn_take(c, (m->gemm_size + 3) / 4);
  m->forward = bbi_rnn_take(c, (bbi_rnn_forward_scratch(p) + 3) / 4);
}

/* dx = dy · act'(clip(pre)), 0 where the clip cut pre. */
static void gate_grad(const bbi_rnn_plan *p, const bbi_rnn_act *a, size_t n, const float *pre, const float *post,
                      const float *dy, float *dx) {
  bbi_rnn_activate_grad(a, n, pre, post, dy, dx);
  if (p->clip > 0)
    for (size_t i = 0; i < n; i++)
      if (pre[i] < -p->clip || pre[i] > p->clip) dx[i] = 0.0f;
}

static void add_product(size_t n, const float *a, const float *b, float *acc, float *tmp) {
  bbi_f32_vbinary(BBI_BINARY_MUL, n, a, b, tmp);
  bbi_f32_vbinary(BBI_BINARY_ADD, n, acc, tmp, acc);
}

/* One row of one step, backwards: dH is the gradient of the row's new hidden state. */
typedef struct row_back {
  const bbi_rnn_plan *p;
  int64_t d, row;
  const bwd_mem *m;
  float *dh, *dc; /* the row's carries: in, d new state; out, the part of d previous state
                     that does not pass through R */
  float *dp;      /* the direction's dP [3H], accumulated (also when P is absent) */
} row_back;

static void lstm_back(const row_back *s) {
  const bbi_rnn_plan *p = s->p;
  size_t h = (size_t)p->hidden, gh = 4 * h;
  const bbi_rnn_act *f = &p->act[s->d][0], *g = &p->act[s->d][1], *hf = &p->act[s->d][2];
  const float *pre = s->m->trace.pre + s->row * (int64_t)gh, *post = s->m->trace.post + s->row * (int64_t)gh;
  const float *cprev = s->m->trace.cprev + s->row * p->hidden, *cell = s->m->trace.cell + s->row * p->hidden;
  const float *cell_act = s->m->trace.cell_act + s->row * p->hidden;
  const float *peep = p->p ? p->p + s->d * 3 * p->hidden : NULL;
  float *dg = s->m->dgx + s->row * (int64_t)gh, *t1 = s->m->tmp, *t2 = s->m->tmp + h;
  float *da_i = dg, *da_o = dg + h, *da_f = dg + 2 * h, *da_c = dg + 3 * h;
  /* o and h(c) */
  bbi_f32_vbinary(BBI_BINARY_MUL, h, s->dh, cell_act, t1);
  gate_grad(p, f, h, pre + h, post + h, t1, da_o);
  bbi_f32_vbinary(BBI_BINARY_MUL, h, s->dh, post + h, t1);
  bbi_rnn_activate_grad(hf, h, cell, cell_act, t1, t2);
  bbi_f32_vbinary(BBI_BINARY_ADD, h, s->dc, t2, s->dc); /* dC */
  if (peep) {
    add_product(h, da_o, peep + h, s->dc, t1);
    add_product(h, da_o, cell, s->dp + h, t1);
  }
  /* c = f ⊙ cprev + i ⊙ c̃ */
  bbi_f32_vbinary(BBI_BINARY_MUL, h, s->dc, post + 3 * h, t1); /* d i */
  bbi_f32_vbinary(BBI_BINARY_MUL, h, s->dc, cprev, t2);        /* d f */
  if (p->input_forget) { /* f = 1 - i */
    bbi_f32_vbinary(BBI_BINARY_SUB, h, t1, t2, t1);
    memset(da_f, 0, h * sizeof(float));
  } else {
    gate_grad(p, f, h, pre + 2 * h, post + 2 * h, t2, da_f);
  }
  gate_grad(p, f, h, pre, post, t1, da_i);
  bbi_f32_vbinary(BBI_BINARY_MUL, h, s->dc, post, t1); /* d c̃ */
  gate_grad(p, g, h, pre + 3 * h, post + 3 * h, t1, da_c);
  bbi_f32_vbinary(BBI_BINARY_MUL, h, s->dc, post + 2 * h, s->dc); /* d cprev */
  if (peep) {
    add_product(h, da_i, peep, s->dc, t1);
    add_product(h, da_i, cprev, s->dp, t1);
    if (!p->input_forget) {
      add_product(h, da_f, peep + 2 * h, s->dc, t1);
      add_product(h, da_f, cprev, s->dp + 2 * h, t1);
    }
  }
  memset(s->dh, 0, h * sizeof(float));
}

/* GRU, the part before r: dz, d h̃ and the h gate's gradient, with H = h̃ + z ⊙ (Hp - h̃). */
static void gru_back_h(const row_back *s, float *dz) {
  const bbi_rnn_plan *p = s->p;
  size_t h = (size_t)p->hidden, gh = 3 * h;
  const float *pre = s->m->trace.pre + s->row * (int64_t)gh, *post = s->m->trace.post + s->row * (int64_t)gh;
  const float *hp = s->m->trace.hprev + s->row * p->hidden;
  float *dg = s->m->dgx + s->row * (int64_t)gh, *t1 = s->m->tmp;
  bbi_f32_vbinary(BBI_BINARY_SUB, h, hp, post + 2 * h, t1);
  bbi_f32_vbinary(BBI_BINARY_MUL, h, s->dh, t1, dz);
  bbi_f32_vbinary_rc(BBI_BINARY_SUB, h, 1.0f, post, t1);
  bbi_f32_vbinary(BBI_BINARY_MUL, h, s->dh, t1, t1);
  gate_grad(p, &p->act[s->d][1], h, pre + 2 * h, post + 2 * h, t1, dg + 2 * h);
}

/* GRU, the rest once dr (the gradient of r) is known: the z and r gates, and the direct
 * part of d Hp. */
static void gru_back_zr(const row_back *s, const float *dz, const float *dr) {
  const bbi_rnn_plan *p = s->p;
  size_t h = (size_t)p->hidden, gh = 3 * h;
  const float *pre = s->m->trace.pre + s->row * (int64_t)gh, *post = s->m->trace.post + s->row * (int64_t)gh;
  float *dg = s->m->dgx + s->row * (int64_t)gh;
  gate_grad(p, &p->act[s->d][0], h, pre, post, dz, dg);
  gate_grad(p, &p->act[s->d][0], h, pre + h, post + h, dr, dg + h);
  bbi_f32_vbinary(BBI_BINARY_MUL, h, s->dh, post, s->dh); /* d Hp through z ⊙ Hp */
}

/* linear_before_reset: h̃ = g(xh + r ⊙ hr), hr = Hp·Rhᵀ + Rbh. */
static void gru_back_linear(const row_back *s) {
  const bbi_rnn_plan *p = s->p;
  size_t h = (size_t)p->hidden, gh = 3 * h;
  const float *post = s->m->trace.post + s->row * (int64_t)gh, *hr = s->m->trace.rec_h + s->row * p->hidden;
  float *dg = s->m->dgx + s->row * (int64_t)gh, *dgr = s->m->dgr + s->row * (int64_t)gh;
  float *dz = s->m->tmp + h, *dr = s->m->tmp + 2 * h;
  gru_back_h(s, dz);
  bbi_f32_vbinary(BBI_BINARY_MUL, h, dg + 2 * h, hr, dr);
  gru_back_zr(s, dz, dr);
  memcpy(dgr, dg, 2 * h * sizeof(float));
  bbi_f32_vbinary(BBI_BINARY_MUL, h, dg + 2 * h, post + h, dgr + 2 * h);
}

static int product(const bwd_mem *m, size_t mm, size_t n, size_t k, const float *a, size_t lda, int trans_a,
                   const float *b, size_t ldb, const void *packed_b, float beta, float *c, size_t ldc) {
  bbi_f32_gemm_args g;
  memset(&g, 0, sizeof g);
  g.m = mm, g.n = n, g.k = k, g.alpha = 1.0f, g.beta = beta;
  g.a = a, g.lda = lda, g.trans_a = trans_a, g.b = b, g.ldb = ldb, g.packed_b = packed_b;
  g.c = c, g.ldc = ldc;
  return bbi_f32_gemm(&g, m->gemm, m->gemm_size);
}

/* The outputs' gradients, each NULL when absent. */
typedef struct grads_in {
  const float *dy, *dy_h, *dy_c;
} grads_in;

typedef struct grads_out {
  float *dx, *dw, *dr, *db, *dh0, *dc0, *dp;
} grads_out;

/* Walks direction d's steps backwards, filling the gates' gradients and the carries. */
static int walk_back(const bbi_rnn_plan *p, int64_t d, const grads_in *in, bwd_mem *m, float *dp) {
  size_t H = (size_t)p->hidden, GH = (size_t)(p->gates * p->hidden), B = (size_t)p->batch;
  size_t k_rec = bbi_rnn_gru_split(p) ? 2 * H : GH;
  const float *r = p->r + d * (int64_t)GH * p->hidden;
  int rc = bbi_f32_gemm_pack_b(NULL, H, k_rec, 0, r, H, m->packed_r, m->packed_r_size);
  if (!rc && bbi_rnn_gru_split(p)) rc = bbi_f32_gemm_pack_b(NULL, H, H, 0, r + 2 * H * H, H, m->packed_rh, m->packed_rh_size);
  for (size_t b = 0; b < B; b++) {
    int64_t at = bbi_rnn_state_at(p, d, (int64_t)b);
    if (in->dy_h) memcpy(m->dh + b * H, in->dy_h + at, H * sizeof(float));
    else memset(m->dh + b * H, 0, H * sizeof(float));
    if (in->dy_c) memcpy(m->dc + b * H, in->dy_c + at, H * sizeof(float));
    else memset(m->dc + b * H, 0, H * sizeof(float));
  }
  int64_t steps = 0;
  for (size_t b = 0; b < B; b++) steps = p->lens[b] > steps ? p->lens[b] : steps;
  for (int64_t step = steps - 1; step >= 0 && !rc; step--) {
    for (size_t b = 0; b < B; b++) {
      float *dstep = m->dstep + b * GH;
      if (step >= p->lens[b]) { /* the row is past its end: its state passes through */
        memset(dstep, 0, GH * sizeof(float));
        continue;
      }
      int64_t t = bbi_rnn_time(p, d, (int64_t)b, step), row = bbi_rnn_row(p, t, (int64_t)b);
      row_back s = {p, d, row, m, m->dh + b * H, m->dc + b * H, dp};
      if (in->dy) bbi_f32_vbinary(BBI_BINARY_ADD, H, s.dh, in->dy + bbi_rnn_y_at(p, t, d, (int64_t)b), s.dh);
      float *dg = m->dgx + row * (int64_t)GH;
      if (p->kind == BBI_RNN_LSTM) {
        lstm_back(&s);
      } else if (p->kind == BBI_RNN_SIMPLE) {
        gate_grad(p, &p->act[d][0], H, m->trace.pre + row * (int64_t)GH, m->trace.post + row * (int64_t)GH, s.dh, dg);
        memset(s.dh, 0, H * sizeof(float));
      } else if (gru_linear(p)) {
        gru_back_linear(&s);
        dg = m->dgr + row * (int64_t)GH;
      } else { /* the h gate now; z and r after the product that gives d (r ⊙ Hp) */
        gru_back_h(&s, m->tmp + H);
        memcpy(dstep + 2 * H, dg + 2 * H, H * sizeof(float));
        continue;
      }
      memcpy(dstep, dg, GH * sizeof(float));
    }
    if (bbi_rnn_gru_split(p)) {
      rc = rc ? rc : product(m, B, H, H, m->dstep + 2 * H, GH, 0, NULL, 0, m->packed_rh, 0.0f, m->drh, H);
      for (size_t b = 0; b < B && !rc; b++) {
        if (step >= p->lens[b]) continue;
        int64_t t = bbi_rnn_time(p, d, (int64_t)b, step), row = bbi_rnn_row(p, t, (int64_t)b);
        row_back s = {p, d, row, m, m->dh + b * H, m->dc + b * H, dp};
        const float *hp = m->trace.hprev + row * p->hidden, *post = m->trace.post + row * (int64_t)GH;
        float *dz = m->tmp + H, *dr = m->tmp + 2 * H, *drh = m->drh + b * H;
        gru_back_h(&s, dz); /* dz again: the carry still holds d H */
        bbi_f32_vbinary(BBI_BINARY_MUL, H, drh, hp, dr);
        gru_back_zr(&s, dz, dr);
        add_product(H, drh, post + H, s.dh, m->tmp + 3 * H);
        memcpy(m->dstep + b * GH, m->dgx + row * (int64_t)GH, 2 * H * sizeof(float));
      }
    }
    if (!rc) rc = product(m, B, H, k_rec, m->dstep, GH, 0, NULL, 0, m->packed_r, 1.0f, m->dh, H);
  }
  return rc;
}

/* dX, dW, dR and dB of direction d from the gates' gradients of every step. */
static int weight_grads(const bbi_rnn_plan *p, int64_t d, const bwd_mem *m, const grads_out *out) {
  size_t H = (size_t)p->hidden, GH = (size_t)(p->gates * p->hidden), I = (size_t)p->input;
  size_t rows = (size_t)(p->seq * p->batch);
  int rc = 0;
  if (out->dx)
    rc = product(m, rows, I, GH, m->dgx, GH, 0, p->w + d * (int64_t)(GH * I), I, NULL, d ? 1.0f : 0.0f, out->dx, I);
  if (!rc && out->dw) rc = product(m, GH, I, rows, m->dgx, GH, 1, p->x, I, NULL, 0.0f, out->dw + d * (int64_t)(GH * I), I);
  float *dr = out->dr ? out->dr + d * (int64_t)(GH * H) : NULL;
  if (!rc && dr && bbi_rnn_gru_split(p)) {
    rc = product(m, 2 * H, H, rows, m->dgx, GH, 1, m->trace.hprev, H, NULL, 0.0f, dr, H);
    if (!rc) rc = product(m, H, H, rows, m->dgx + 2 * H, GH, 1, m->trace.rec_h, H, NULL, 0.0f, dr + 2 * H * H, H);
  } else if (!rc && dr) {
    rc = product(m, GH, H, rows, m->dgr, GH, 1, m->trace.hprev, H, NULL, 0.0f, dr, H);
  }
  if (!rc && out->db) {
    float *db = out->db + d * 2 * (int64_t)GH;
    bbi_f32_reduce_strided(BBI_REDUCE_SUM, 1, rows, GH, m->dgx, db);
    bbi_f32_reduce_strided(BBI_REDUCE_SUM, 1, rows, GH, m->dgr, db + GH);
  }
  return rc;
}

static const float *input_data(const bbi_cpu_op_ctx *ctx, size_t i) {
  const bb_tensor *t = bbi_cpu_input(ctx, i);
  return t ? bb_tensor_data(t) : NULL;
}

/* Checks that input i (when present) is float32 shaped like `like`. */
static int expect_like(bbi_cpu_op_ctx *ctx, size_t i, const char *name, int rank, const int64_t *dims) {
  const bb_tensor *t = bbi_cpu_input(ctx, i);
  if (!t) return 0;
  bool same = t->dtype == BB_DTYPE_FLOAT && t->rank == rank;
  for (int k = 0; same && k < rank; k++) same = t->dims[k] == dims[k];
  char got[128];
  return same ? 0 : bbi_cpu_fail(ctx, BB_ERR_TYPE, "%s must be float32 shaped like the forward output, got %s", name,
                                 bb_tensor_describe(t, got, sizeof got));
}

/* Zeroes what a direction accumulates, and the trace: rows a short sequence never visits
 * are read by the weight products (against gate gradients of 0). */
static void clear_direction(const bbi_rnn_plan *p, const bwd_mem *m) {
  size_t rows = (size_t)(p->seq * p->batch), h = (size_t)p->hidden, gh = (size_t)p->gates * h;
  float *const per_gate[] = {m->trace.pre, m->trace.post, m->dgx, m->dgr};
  float *const per_state[] = {m->trace.hprev, m->trace.cprev, m->trace.cell, m->trace.cell_act, m->trace.rec_h};
  for (size_t i = 0; i < sizeof per_gate / sizeof per_gate[0]; i++) memset(per_gate[i], 0, rows * gh * sizeof(float));
  for (size_t i = 0; i < sizeof per_state / sizeof per_state[0]; i++)
    if (per_state[i]) memset(per_state[i], 0, rows * h * sizeof(float));
  memset(m->dp, 0, 3 * h * sizeof(float));
}

static int run_grad(bbi_cpu_op_ctx *ctx, const bbi_rnn_plan *p) {
  size_t first = p->kind == BBI_RNN_LSTM ? 8 : 6; /* where the outputs' gradients start */
  int64_t y_dims[4] = {p->layout ? p->batch : p->seq, p->layout ? p->seq : p->dirs, p->layout ? p->dirs : p->batch,
                       p->hidden};
  int64_t state_dims[3] = {p->layout ? p->batch : p->dirs, p->layout ? p->dirs : p->batch, p->hidden};
  int rc;
  if ((rc = expect_like(ctx, first, "dY", 4, y_dims)) || (rc = expect_like(ctx, first + 1, "dY_h", 3, state_dims)) ||
      (p->kind == BBI_RNN_LSTM && (rc = expect_like(ctx, first + 2, "dY_c", 3, state_dims))))
    return rc;
  grads_in in = {input_data(ctx, first), input_data(ctx, first + 1),
                 p->kind == BBI_RNN_LSTM ? input_data(ctx, first + 2) : NULL};
  /* outputs shaped like X, W, R, B, initial_h, initial_c, P */
  int64_t gh = p->gates * p->hidden;
  const int64_t *shapes[7] = {ctx->inputs[0]->dims, ctx->inputs[1]->dims, ctx->inputs[2]->dims,
                              (int64_t[]){p->dirs, 2 * gh}, state_dims, state_dims, (int64_t[]){p->dirs, 3 * p->hidden}};
  static const int RANKS[7] = {3, 3, 3, 2, 3, 3, 2};
  float *outs[7] = {NULL};
  for (size_t k = 0; k < ctx->n_outputs; k++) {
    if (!bbi_cpu_output_wanted(ctx, k)) continue;
    if ((rc = bbi_cpu_make_output(ctx, k, BB_DTYPE_FLOAT, RANKS[k], shapes[k]))) return rc;
    outs[k] = bb_tensor_data(ctx->outputs[k]);
    memset(outs[k], 0, (size_t)ctx->outputs[k]->numel * sizeof(float));
  }
  grads_out out = {outs[0], outs[1], outs[2], outs[3], outs[4], outs[5], outs[6]};
  bbi_rnn_carve measure = {NULL, 0};
  bwd_mem m;
  bwd_layout(p, &measure, &m);
  if ((rc = bbi_cpu_check_size(ctx, (int64_t)measure.at, 1, "the backward pass's working memory"))) return rc;
  bbi_rnn_carve c = {bbi_cpu_scratch(ctx, (size_t)measure.at), 0};
  if (!c.base) return BB_ERR_NOMEM;
  bwd_layout(p, &c, &m);
  for (int64_t d = 0; d < p->dirs && !rc; d++) {
    clear_direction(p, &m);
    rc = bbi_rnn_forward(p, d, NULL, NULL, NULL, &m.trace, m.forward);
    if (!rc) rc = walk_back(p, d, &in, &m, m.dp);
    if (!rc) rc = weight_grads(p, d, &m, &out);
    for (size_t b = 0; b < (size_t)p->batch && !rc; b++) {
      int64_t at = bbi_rnn_state_at(p, d, (int64_t)b);
      if (out.dh0) memcpy(out.dh0 + at, m.dh + b * (size_t)p->hidden, (size_t)p->hidden * sizeof(float));
      if (out.dc0) memcpy(out.dc0 + at, m.dc + b * (size_t)p->hidden, (size_t)p->hidden * sizeof(float));
    }
    if (out.dp) memcpy(out.dp + d * 3 * p->hidden, m.dp, 3 * (size_t)p->hidden * sizeof(float));
  }
  return rc ? bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "GEMM rejected its arguments") : 0;
}

int bbi_cpu_op_recurrent_grad(bbi_cpu_op_ctx *ctx) {
  bbi_rnn_plan p;
  int rc = bbi_rnn_plan_read(ctx, bbi_rnn_kind_of(ctx->node->op_type), &p);
  if (!rc) rc = run_grad(ctx, &p);
  bbi_rnn_plan_free(&p);
  return rc;
}
