/* The session's rewrites that change only how the graph runs, never its results:
 *
 *  - Identity elided: its readers read its input's value (unless it names a graph output).
 *  - Activations and residual Adds fused: a Conv, ConvTranspose, Gemm, MatMul, inference
 *    BatchNormalization (or, for an activation, an Add) whose output only feeds an Add,
 *    then (or only) Relu, Clip with constant bounds, Sigmoid, or Sigmoid and Mul (x ·
 *    sigmoid(x), SiLU), runs as one step: the producer's output is finished in place with
 *    bbi_f32_vactivate, which computes the same bits as the separate kernels, while it is
 *    still in cache. The fused nodes are kept with the step and run as written when the
 *    epilogue cannot apply (an Add that broadcasts, a type other than float).
 *
 *  - Each parameter's optimizer update as bb_grad_optimizer_build writes it (SGD: 2 nodes;
 *    momentum: 4, Nesterov: 6; Adam: 13, both moments and the bias-corrected step), with
 *    what comes before the rule when present — the gradient's clipping coefficient (1
 *    Mul), L2 weight decay (Mul, Add), AdamW's decoupled decay of the parameter (1 Mul) —
 *    runs as one pass over the parameter's arrays, each read once and written once, cut
 *    across the work pool by its length alone; the same operations in the same order, so
 *    the same bits. The nodes are kept with the step and run as written when their values
 *    do not allow the pass (another type, a coefficient that is not one scalar, arrays of
 *    different shapes). The scalar nodes (bias corrections, 1 − lr·wd, the clipping
 *    coefficient from the global norm) stay nodes.
 *
 *  - A Transpose of perm [1, 0, 2, ..] written by the Conv before it: a float Conv whose
 *    output only that Transpose reads (a weight gradient's: the batch as channels, turned
 *    back to [M, C, k..]) and that carries nothing fused puts image n's channel m where the
 *    Transpose would copy it (bbi_cpu_node_state.swap_rank). The Transpose is kept with the
 *    step and runs as written when the Conv's path cannot write that layout.
 *
 * An Add is fused into the later of its operands' producers, so its other operand exists
 * when the step runs. */
#include <float.h>
#include <string.h>

#include "bb/artifact.h"
#include "cpu/session.h"
#include "tensor/kernels/split.h"
#include "util/mem.h"

static bool is_op(const bbi_plan_step *st, const char *op_type) {
  return st->node && bb_domain_is_onnx(st->node->domain) && strcmp(st->node->op_type, op_type) == 0;
}

/* ---- Identity ------------------------------------------------------------------------------ */

int bbi_plan_elide_identities(bb_cpu_session *s, bbi_plan *p) {
  uint32_t *alias = bbi_mem_calloc(s->alloc, s->n_values, sizeof *alias);
  if (!alias) return BB_ERR_NOMEM;
  for (uint32_t v = 0; v < s->n_values; v++) alias[v] = v;
  for (uint32_t i = 0; i < p->n_steps; i++) {
    bbi_plan_step *st = &p->steps[i];
    for (uint32_t k = 0; k < st->n_in; k++)
      if (st->in[k] != BBI_NO_VALUE) st->in[k] = alias[st->in[k]];
    if (!is_op(st, "Identity") || st->n_in != 1 || st->n_out != 1 || st->in[0] == BBI_NO_VALUE ||
        st->out[0] == BBI_NO_VALUE || s->is_output[st->out[0]])
      continue;
    alias[st->out[0]] = st->in[0];
    st->node = NULL;
    p->stats.elided_identities++;
  }
  bbi_mem_free(s->alloc, alias);
  bbi_plan_compact(p);
  return 0;
}

/* ---- fusion -------------------------------------------------------------------------------- */

/* Who reads and who makes each value, over the plan's live steps. */
typedef struct value_links {
  uint32_t *uses;     /* reads by steps (a fused step's addend and chain count) */
  uint32_t *reader;   /* the last step that reads it */
  uint32_t *producer; /* the step that makes it, or BBI_NO_VALUE */
} value_links;

static void count_reads(value_links *l, const bbi_plan_step *st, uint32_t i) {
  for (uint32_t k = 0; k < st->n_in; k++)
    if (st->in[k] != BBI_NO_VALUE) l->uses[st->in[k]]++, l->reader[st->in[k]] = i;
}

static int link_values(bb_cpu_session *s, const bbi_plan *p, value_links *l) {
  l->uses = bbi_mem_calloc(s->alloc, s->n_values, sizeof *l->uses);
  l->reader = bbi_mem_calloc(s->alloc, s->n_values, sizeof *l->reader);
  l->producer = bbi_mem_calloc(s->alloc, s->n_values, sizeof *l->producer);
  if (!l->uses || !l->reader || !l->producer) return BB_ERR_NOMEM;
  for (uint32_t v = 0; v < s->n_values; v++) l->producer[v] = BBI_NO_VALUE;
  for (uint32_t i = 0; i < p->n_steps; i++) {
    const bbi_plan_step *st = &p->steps[i];
    count_reads(l, st, i);
    if (st->addend != BBI_NO_VALUE) l->uses[st->addend]++, l->reader[st->addend] = i;
    for (uint32_t c = 0; c < st->n_chain; c++) count_reads(l, &st->chain[c], i);
    for (uint32_t k = 0; k < st->n_out; k++)
      if (st->out[k] != BBI_NO_VALUE) l->producer[st->out[k]] = i;
  }
  return 0;
}

static void unlink_values(bb_cpu_session *s, value_links *l) {
  bbi_mem_free(s->alloc, l->uses);
  bbi_mem_free(s->alloc, l->reader);
  bbi_mem_free(s->alloc, l->producer);
}

/* A step whose output 0 may carry an epilogue: a new float tensor its op makes. */
static bool can_carry(const bb_cpu_session *s, const bbi_plan_step *st, bool for_add) {
  if (!st->node || st->n_out < 1 || st->out[0] == BBI_NO_VALUE) return false;
  for (uint32_t k = 1; k < st->n_out; k++)
    if (st->out[k] != BBI_NO_VALUE) return false;
  if (is_op(st, "BatchNormalization"))
    return s->opset >= 14 ? bb_attr_get_int(&st->node->attrs, "training_mode", 0) == 0 : st->n_out == 1;
  return is_op(st, "Conv") || is_op(st, "ConvTranspose") || is_op(st, "Gemm") || is_op(st, "MatMul") ||
         (!for_add && is_op(st, "Add"));
}

/* The producer of v if v can take one more fused node: read once, not a graph output, and
 * made by a step that can carry it and carries no activation yet. */
static bbi_plan_step *fusable_producer(const bb_cpu_session *s, bbi_plan *p, const value_links *l, uint32_t v,
                                       bool for_add) {
  if (v == BBI_NO_VALUE || s->is_output[v] || l->uses[v] != 1 || l->producer[v] == BBI_NO_VALUE) return NULL;
  bbi_plan_step *st = &p->steps[l->producer[v]];
  if (st->out[0] != v || !can_carry(s, st, for_add) || st->act.kind != BBI_ACTIVATION_NONE) return NULL;
  if (for_add && st->n_chain) return NULL;
  return st;
}

/* Appends step `link` to producer's chain; its output becomes the producer's. */
static int chain_on(bb_cpu_session *s, bbi_plan_step *producer, bbi_plan_step *link) {
  bbi_plan_step *grown = bbi_arena_grow(s->arena, producer->chain, producer->n_chain * sizeof *grown,
                                        (producer->n_chain + 1) * sizeof *grown);
  if (!grown) return BB_ERR_NOMEM;
  producer->chain = grown;
  producer->chain[producer->n_chain++] = *link;
  producer->out[0] = link->out[0];
  link->node = NULL;
  return 0;
}

/* A scalar float constant of the plan, into *out. */
static bool constant_scalar(const bb_cpu_session *s, const bbi_plan *p, uint32_t v, float *out) {
  const bb_tensor *t = bbi_session_constant(s, p, v);
  if (!t || t->dtype != BB_DTYPE_FLOAT || t->numel != 1) return false;
  *out = *(const float *)bb_tensor_data(t);
  return true;
}

/* Clip's bounds when they are known now (attributes before opset 11, constant inputs after). */
static bool clip_bounds(const bb_cpu_session *s, const bbi_plan *p, const bbi_plan_step *st, bbi_f32_activation *a) {
  a->min = -FLT_MAX, a->max = FLT_MAX;
  if (s->opset < 11) {
    a->min = bb_attr_get_float(&st->node->attrs, "min", -FLT_MAX);
    a->max = bb_attr_get_float(&st->node->attrs, "max", FLT_MAX);
    return st->n_in == 1;
  }
  if (st->n_in > 1 && st->in[1] != BBI_NO_VALUE && !constant_scalar(s, p, st->in[1], &a->min)) return false;
  if (st->n_in > 2 && st->in[2] != BBI_NO_VALUE && !constant_scalar(s, p, st->in[2], &a->max)) return false;
  return true;
}

/* Fuses Add step `add` into the later producer of its operands. */
static int fuse_add(bb_cpu_session *s, bbi_plan *p, value_links *l, bbi_plan_step *add) {
  if (add->n_in != 2 || add->n_out != 1 || add->in[0] == add->in[1]) return 0;
  uint32_t a = add->in[0], b = add->in[1];
  uint32_t pa = l->producer[a], pb = l->producer[b];
  /* the operand made last is the one to fuse into: the other exists by then */
  bool into_a = pb == BBI_NO_VALUE || (pa != BBI_NO_VALUE && pa > pb);
  bbi_plan_step *producer = fusable_producer(s, p, l, into_a ? a : b, true);
  if (!producer) return 0;
  uint32_t at = l->producer[into_a ? a : b];
  producer->addend = into_a ? b : a;
  int rc = chain_on(s, producer, add);
  l->producer[producer->out[0]] = at;
  if (!rc) p->stats.fused_adds++;
  return rc;
}

/* x · sigmoid(x): Sigmoid step sig and the Mul that is the only reader of its output. */
static bbi_plan_step *silu_mul(const bb_cpu_session *s, bbi_plan *p, const value_links *l, const bbi_plan_step *sig) {
  uint32_t x = sig->in[0], y = sig->out[0];
  if (y == BBI_NO_VALUE || s->is_output[y] || l->uses[y] != 1 || l->uses[x] != 2) return NULL;
  bbi_plan_step *mul = &p->steps[l->reader[y]];
  if (!is_op(mul, "Mul") || mul->n_in != 2 || mul->n_out != 1) return NULL;
  bool pair = (mul->in[0] == x && mul->in[1] == y) || (mul->in[0] == y && mul->in[1] == x);
  return pair ? mul : NULL;
}

/* Fuses activation step `act` (Relu, Clip, Sigmoid, or Sigmoid + Mul) into its producer. */
static int fuse_activation(bb_cpu_session *s, bbi_plan *p, value_links *l, bbi_plan_step *act) {
  if (act->n_in < 1 || act->n_out != 1 || act->in[0] == BBI_NO_VALUE) return 0;
  bbi_f32_activation a = {BBI_ACTIVATION_NONE, 0.0f, 0.0f};
  bbi_plan_step *mul = NULL;
  uint32_t x = act->in[0];
  if (is_op(act, "Relu") && act->n_in == 1) {
    a.kind = BBI_ACTIVATION_RELU;
  } else if (is_op(act, "Clip") && clip_bounds(s, p, act, &a)) {
    a.kind = BBI_ACTIVATION_CLIP;
  } else if (is_op(act, "Sigmoid") && act->n_in == 1) {
    a.kind = BBI_ACTIVATION_SIGMOID;
    if ((mul = silu_mul(s, p, l, act))) a.kind = BBI_ACTIVATION_SILU;
  } else {
    return 0;
  }
  if (l->uses[x] != (mul ? 2u : 1u) || s->is_output[x] || l->producer[x] == BBI_NO_VALUE) return 0;
  bbi_plan_step *producer = &p->steps[l->producer[x]];
  if (producer->out[0] != x || !can_carry(s, producer, false) || producer->act.kind != BBI_ACTIVATION_NONE) return 0;
  uint32_t at = l->producer[x];
  int rc = chain_on(s, producer, act);
  if (!rc && mul) rc = chain_on(s, producer, mul);
  if (rc) return rc;
  producer->act = a;
  l->producer[producer->out[0]] = at;
  p->stats.fused_activations++;
  return 0;
}

int bbi_plan_fuse_activations(bb_cpu_session *s, bbi_plan *p) {
  value_links l;
  int rc = link_values(s, p, &l);
  for (uint32_t i = 0; i < p->n_steps && !rc; i++) {
    bbi_plan_step *st = &p->steps[i];
    if (!st->node) continue;
    if (is_op(st, "Add")) rc = fuse_add(s, p, &l, st);
    if (!rc && st->node) rc = fuse_activation(s, p, &l, st);
  }
  unlink_values(s, &l);
  bbi_plan_compact(p);
  return rc;
}

/* ---- Transpose into its Conv --------------------------------------------------------------- */

/* The rank of a Transpose whose perm is [1, 0, 2, .., rank - 1] (rank 3 or more), else 0. */
static int swaps_first_dims(const bbi_plan_step *st) {
  const bb_attr *perm = bb_attr_find(&st->node->attrs, "perm");
  if (!perm || perm->n_ints < 3 || perm->n_ints > BB_MAX_RANK) return 0;
  for (size_t i = 0; i < perm->n_ints; i++)
    if (perm->ints[i] != (i < 2 ? 1 - (int64_t)i : (int64_t)i)) return 0;
  return (int)perm->n_ints;
}

/* Fuses Transpose step `tr` into the Conv that makes its input, when that Conv's output is
 * read by it alone, is no graph output and the Conv carries nothing fused. */
static int fuse_transpose(bb_cpu_session *s, bbi_plan *p, value_links *l, bbi_plan_step *tr) {
  const int rank = swaps_first_dims(tr);
  if (!rank || tr->n_in != 1 || tr->n_out != 1 || tr->out[0] == BBI_NO_VALUE) return 0;
  const uint32_t v = tr->in[0];
  if (v == BBI_NO_VALUE || s->is_output[v] || l->uses[v] != 1 || l->producer[v] == BBI_NO_VALUE) return 0;
  bbi_plan_step *conv = &p->steps[l->producer[v]];
  if (!is_op(conv, "Conv") || conv->n_out != 1 || conv->out[0] != v || conv->n_chain || conv->update ||
      conv->addend != BBI_NO_VALUE || conv->act.kind != BBI_ACTIVATION_NONE)
    return 0;
  const uint32_t at = l->producer[v];
  int rc = chain_on(s, conv, tr);
  if (rc) return rc;
  conv->swap_rank = rank;
  l->producer[conv->out[0]] = at;
  p->stats.fused_transposes++;
  return 0;
}

int bbi_plan_fuse_transposes(bb_cpu_session *s, bbi_plan *p) {
  value_links l;
  int rc = link_values(s, p, &l);
  for (uint32_t i = 0; i < p->n_steps && !rc; i++) {
    bbi_plan_step *st = &p->steps[i];
    if (st->node && is_op(st, "Transpose")) rc = fuse_transpose(s, p, &l, st);
  }
  unlink_values(s, &l);
  bbi_plan_compact(p);
  return rc;
}

/* ---- optimizer updates ------------------------------------------------------------------- */

/* The step making v when it is op_type with n_in inputs and one output, read `reads` times
 * (all by the update being matched), not a graph output (unless `output_ok`), and nothing
 * fused into it yet. */
static bbi_plan_step *made_by(const bb_cpu_session *s, bbi_plan *p, const value_links *l, uint32_t v, const char *op_type,
                              uint32_t n_in, uint32_t reads, bool output_ok) {
  if (v == BBI_NO_VALUE || (s->is_output[v] && !output_ok) || l->uses[v] != reads || l->producer[v] == BBI_NO_VALUE)
    return NULL;
  bbi_plan_step *st = &p->steps[l->producer[v]];
  if (!st->node || !is_op(st, op_type) || st->n_in != n_in || st->n_out != 1 || st->out[0] != v || st->n_chain ||
      st->addend != BBI_NO_VALUE || st->update)
    return NULL;
  for (uint32_t k = 0; k < n_in; k++)
    if (st->in[k] == BBI_NO_VALUE) return NULL;
  return st;
}

/* The most nodes one update has: Adam's thirteen, the decoupled decay's Mul, clipping's
 * Mul, L2's Mul and Add. */
#define UPDATE_MAX_NODES 17

/* An update being matched, from its last node (the Sub making p'): the nodes taken so far,
 * the values of its inputs (bbi_update_in slots) and its outputs. */
typedef struct update_match {
  const bb_cpu_session *s;
  bbi_plan *p;
  const value_links *l;
  bbi_plan_step *nodes[UPDATE_MAX_NODES];
  uint32_t n_nodes;
  uint32_t in[BBI_UPDATE_INPUTS];
  uint32_t out[3], n_out;
  bbi_update_rule rule;
} update_match;

/* made_by's step, taken into the update. */
static bbi_plan_step *take(update_match *u, uint32_t v, const char *op_type, uint32_t n_in, uint32_t reads,
                           bool output_ok) {
  bbi_plan_step *st = made_by(u->s, u->p, u->l, v, op_type, n_in, reads, output_ok);
  if (st) u->nodes[u->n_nodes++] = st;
  return st;
}

/* Adam's rule behind the step Mul(a, q):
 *   m' = Add(Mul(m, b1), Mul(g, c1)), v' = Add(Mul(v, b2), Mul(Mul(g, g), c2)),
 *   q = Div(m', Add(Div(Sqrt(v'), s2), eps));
 * *g gets the gradient (read three times). */
static bool match_adam(update_match *u, const bbi_plan_step *step, uint32_t *g) {
  bbi_plan_step *q, *d, *e, *r, *m, *v, *mb, *gc, *vb, *g2c, *gg;
  if (!(q = take(u, step->in[1], "Div", 2, 1, false)) || !(d = take(u, q->in[1], "Add", 2, 1, false)) ||
      !(e = take(u, d->in[0], "Div", 2, 1, false)) || !(r = take(u, e->in[0], "Sqrt", 1, 1, false)) ||
      !(m = take(u, q->in[0], "Add", 2, 1, true)) || !(v = take(u, r->in[0], "Add", 2, 1, true)) ||
      !(mb = take(u, m->in[0], "Mul", 2, 1, false)) || !(gc = take(u, m->in[1], "Mul", 2, 1, false)) ||
      !(vb = take(u, v->in[0], "Mul", 2, 1, false)) || !(g2c = take(u, v->in[1], "Mul", 2, 1, false)) ||
      !(gg = take(u, g2c->in[0], "Mul", 2, 1, false)))
    return false;
  *g = gc->in[0];
  if (gg->in[0] != *g || gg->in[1] != *g) return false;
  uint32_t *in = u->in;
  in[BBI_UPDATE_IN_STATE0] = mb->in[0], in[BBI_UPDATE_IN_STATE1] = vb->in[0];
  in[BBI_UPDATE_IN_B1] = mb->in[1], in[BBI_UPDATE_IN_C1] = gc->in[1];
  in[BBI_UPDATE_IN_B2] = vb->in[1], in[BBI_UPDATE_IN_C2] = g2c->in[1];
  in[BBI_UPDATE_IN_S2] = e->in[1], in[BBI_UPDATE_IN_EPS] = d->in[1], in[BBI_UPDATE_IN_LR] = step->in[0];
  u->out[1] = m->out[0], u->out[2] = v->out[0], u->n_out = 3;
  u->rule = BBI_RULE_ADAM;
  return true;
}

/* Momentum's rule behind the step Mul(dir, lr): the buffer b' = Add(Mul(b, mu), g), a graph
 * output, and dir = b' (heavy-ball) or Add(g, Mul(b', mu)) (Nesterov); *g gets the
 * gradient, *reads its reads. */
static bool match_momentum(update_match *u, const bbi_plan_step *step, uint32_t *g, uint32_t *reads) {
  uint32_t dir = step->in[0];
  bbi_plan_step *nesterov = NULL, *ahead = NULL, *b, *bm;
  if (!u->s->is_output[dir]) {
    if (!(nesterov = take(u, dir, "Add", 2, 1, false)) || !(ahead = take(u, nesterov->in[1], "Mul", 2, 1, false)))
      return false;
    dir = ahead->in[0];
  }
  if (!u->s->is_output[dir] || !(b = take(u, dir, "Add", 2, 1, true)) || !(bm = take(u, b->in[0], "Mul", 2, 1, false)))
    return false;
  *g = b->in[1], *reads = nesterov ? 2 : 1;
  if (nesterov && (nesterov->in[0] != *g || ahead->in[1] != bm->in[1])) return false;
  u->in[BBI_UPDATE_IN_STATE0] = bm->in[0], u->in[BBI_UPDATE_IN_MU] = bm->in[1], u->in[BBI_UPDATE_IN_LR] = step->in[1];
  u->out[1] = b->out[0], u->n_out = 2;
  u->rule = nesterov ? BBI_RULE_NESTEROV : BBI_RULE_MOMENTUM;
  return true;
}

/* AdamW's decoupled decay: the parameter the last Sub reads (p_read) is Mul(p, decay). */
static void match_decay(update_match *u, uint32_t p_read) {
  bbi_plan_step *decay = take(u, p_read, "Mul", 2, 1, false);
  if (decay) u->in[BBI_UPDATE_IN_DECAY] = decay->in[1], p_read = decay->in[0];
  u->in[BBI_UPDATE_IN_P] = p_read;
}

/* What the gradient the rule reads (`reads` times) was made from: L2 weight decay,
 * Add(g, Mul(p, wd)) with p the parameter, and before it clipping, Mul(g, coef). */
static void match_gradient(update_match *u, uint32_t g, uint32_t reads) {
  const update_match before = *u;
  bbi_plan_step *l2 = take(u, g, "Add", 2, reads, false), *pw = l2 ? take(u, l2->in[1], "Mul", 2, 1, false) : NULL;
  if (pw && pw->in[0] == u->in[BBI_UPDATE_IN_P]) u->in[BBI_UPDATE_IN_WD] = pw->in[1], g = l2->in[0], reads = 1;
  else *u = before;
  bbi_plan_step *clip = take(u, g, "Mul", 2, reads, false);
  if (clip) u->in[BBI_UPDATE_IN_CLIP] = clip->in[1], g = clip->in[0];
  u->in[BBI_UPDATE_IN_G] = g;
}

/* Makes the matched update one step over its last node's place; the nodes stay as its
 * chain, in plan order (a step's index is its place in p->steps). */
static int make_update(bb_cpu_session *s, bbi_plan *p, const update_match *u) {
  bbi_plan_step *fin = u->nodes[0];
  bbi_plan_step *chain = bbi_arena_alloc(s->arena, u->n_nodes * sizeof *chain);
  uint32_t *ins = bbi_arena_memdup(s->arena, u->in, sizeof u->in);
  uint32_t *outs = bbi_arena_memdup(s->arena, u->out, u->n_out * sizeof *outs);
  if (!chain || !ins || !outs) return BB_ERR_NOMEM;
  uint32_t order[UPDATE_MAX_NODES];
  for (uint32_t i = 0; i < u->n_nodes; i++) order[i] = (uint32_t)(u->nodes[i] - p->steps);
  for (uint32_t i = 1; i < u->n_nodes; i++) /* insertion sort of at most 17 indices */
    for (uint32_t j = i; j > 0 && order[j - 1] > order[j]; j--) {
      uint32_t t = order[j];
      order[j] = order[j - 1], order[j - 1] = t;
    }
  for (uint32_t i = 0; i < u->n_nodes; i++) chain[i] = p->steps[order[i]];
  for (uint32_t i = 1; i < u->n_nodes; i++) u->nodes[i]->node = NULL;
  fin->in = ins, fin->n_in = BBI_UPDATE_INPUTS;
  fin->out = outs, fin->n_out = u->n_out;
  fin->produced = outs[0];
  fin->chain = chain, fin->n_chain = u->n_nodes;
  fin->update = true, fin->update_rule = u->rule;
  p->stats.fused_updates++;
  return 0;
}

/* The rule behind the step Mul(x, y) the last Sub subtracts: Adam's, momentum's, else
 * SGD's (p' = p̂ − g·lr). *g gets the gradient the rule reads, *reads how often. */
static void match_rule(update_match *u, const bbi_plan_step *step, uint32_t *g, uint32_t *reads) {
  const update_match before = *u;
  if (match_adam(u, step, g)) {
    *reads = 3;
    return;
  }
  *u = before;
  if (match_momentum(u, step, g, reads)) return;
  *u = before;
  u->rule = BBI_RULE_SGD, u->in[BBI_UPDATE_IN_LR] = step->in[1];
  *g = step->in[0], *reads = 1;
}

/* Matches one parameter's update as bb_grad_optimizer_build writes it, ending in Sub step
 * `fin` whose output p' leaves the graph, operands in its order:
 *   p' = Sub(p̂, Mul(a, q))      Adam (match_adam)
 *   p' = Sub(p̂, Mul(dir, lr))   momentum or Nesterov (match_momentum), else SGD (dir = g)
 * with p̂ = p or Mul(p, decay) (match_decay) and the gradient the rule reads clipped and
 * L2-decayed or not (match_gradient), and makes it one step. */
static int fuse_update(bb_cpu_session *s, bbi_plan *p, const value_links *l, bbi_plan_step *fin) {
  if (fin->n_in != 2 || fin->n_out != 1 || fin->in[0] == BBI_NO_VALUE || fin->out[0] == BBI_NO_VALUE ||
      !s->is_output[fin->out[0]] || fin->n_chain || fin->addend != BBI_NO_VALUE)
    return 0;
  update_match u = {.s = s, .p = p, .l = l, .nodes = {fin}, .n_nodes = 1, .out = {fin->out[0]}, .n_out = 1};
  for (uint32_t k = 0; k < BBI_UPDATE_INPUTS; k++) u.in[k] = BBI_NO_VALUE;
  const bbi_plan_step *step = take(&u, fin->in[1], "Mul", 2, 1, false);
  if (!step) return 0;
  match_decay(&u, fin->in[0]);
  uint32_t g, reads;
  match_rule(&u, step, &g, &reads);
  match_gradient(&u, g, reads);
  return make_update(s, p, &u);
}

int bbi_plan_fuse_updates(bb_cpu_session *s, bbi_plan *p) {
  value_links l;
  int rc = link_values(s, p, &l);
  for (uint32_t i = 0; i < p->n_steps && !rc; i++) {
    bbi_plan_step *st = &p->steps[i];
    if (st->node && !st->update && is_op(st, "Sub")) rc = fuse_update(s, p, &l, st);
  }
  unlink_values(s, &l);
  bbi_plan_compact(p);
  return rc;
}

int bbi_run_update(bbi_update_rule rule, bb_tensor *const *ins, const bb_allocator *alloc, size_t max_output_bytes,
                   bb_tensor **outs) {
  const bb_tensor *pt = ins[BBI_UPDATE_IN_P];
  const uint32_t states = (uint32_t)bbi_update_states(rule);
  if (!pt || !ins[BBI_UPDATE_IN_G] || !ins[BBI_UPDATE_IN_LR]) return 1;
  for (uint32_t i = 0; i < states; i++)
    if (!ins[BBI_UPDATE_IN_STATE0 + i]) return 1;
  float c[BBI_UPDATE_INPUTS] = {0};
  for (uint32_t k = 0; k < BBI_UPDATE_INPUTS; k++) {
    const bb_tensor *t = ins[k];
    if (!t) continue;
    const bool array = k < BBI_UPDATE_IN_CLIP; /* else a coefficient */
    if (t->dtype != BB_DTYPE_FLOAT || (array && !bb_tensor_same_shape(t, pt)) ||
        (!array && (t->numel != 1 || t->rank > pt->rank)))
      return 1;
    if (!array) c[k] = *(const float *)bb_tensor_data(t);
  }
  if ((size_t)pt->numel > max_output_bytes / sizeof(float)) return 1;
  const bbi_f32_update_coef k = {
      .rule = rule, .clip = ins[BBI_UPDATE_IN_CLIP] != NULL, .l2 = ins[BBI_UPDATE_IN_WD] != NULL,
      .decay = ins[BBI_UPDATE_IN_DECAY] != NULL, .clip_coef = c[BBI_UPDATE_IN_CLIP], .wd = c[BBI_UPDATE_IN_WD],
      .decay_scale = c[BBI_UPDATE_IN_DECAY], .lr = c[BBI_UPDATE_IN_LR], .mu = c[BBI_UPDATE_IN_MU],
      .b1 = c[BBI_UPDATE_IN_B1], .c1 = c[BBI_UPDATE_IN_C1], .b2 = c[BBI_UPDATE_IN_B2], .c2 = c[BBI_UPDATE_IN_C2],
      .s2 = c[BBI_UPDATE_IN_S2], .eps = c[BBI_UPDATE_IN_EPS]};
  for (uint32_t i = 0; i < 1 + states; i++)
    if (!(outs[i] = bb_tensor_new_empty(alloc, BB_DTYPE_FLOAT, pt->rank, pt->dims))) {
      for (uint32_t j = 0; j < i; j++) bb_tensor_release(outs[j]), outs[j] = NULL;
      return BB_ERR_NOMEM;
    }
  bbi_f32_update_arrays a = {bb_tensor_data(pt), bb_tensor_data(ins[BBI_UPDATE_IN_G]), {NULL, NULL},
                             bb_tensor_data(outs[0]), {NULL, NULL}};
  for (uint32_t i = 0; i < states; i++)
    a.state[i] = bb_tensor_data(ins[BBI_UPDATE_IN_STATE0 + i]), a.state_out[i] = bb_tensor_data(outs[1 + i]);
  bbi_par_f32_update(&k, (size_t)pt->numel, &a);
  return 0;
}
