/* The session's rewrites that compute at load: nodes whose inputs are all constants run
 * once and their outputs become constants of the plan; an inference BatchNormalization
 * after a Conv with constant weights is folded into new weights and bias,
 *   k = scale / sqrt(var + epsilon),  W'[m] = W[m] · k[m],  B'[m] = B[m] · k[m] + bias[m] − mean[m] · k[m]
 * (computed in double and rounded once, as the BatchNormalization kernel computes k and
 * its shift), which changes results only by float rounding. */
#include <math.h>
#include <string.h>

#include "bb/artifact.h"
#include "cpu/session.h"
#include "util/mem.h"

/* Operators whose outputs are not a function of their inputs alone. */
static bool nondeterministic(const bb_ir_node *n) {
  static const char *const random_ops[] = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                                           "Bernoulli", "Multinomial", "Dropout"};
  for (size_t i = 0; i < sizeof random_ops / sizeof random_ops[0]; i++)
    if (strcmp(n->op_type, random_ops[i]) == 0) return true;
  return false;
}

/* A folded node may not make the session hold more than its inputs did, give or take a
 * kilobyte: what an Expand, Tile or ConstantOfShape grows from a few bytes is made per run,
 * where the run's caps (bb_cpu_limits) count it. */
#define FOLD_GROWTH_BYTES ((size_t)1 << 10)
#define FOLD_MAX_OUTPUT_BYTES ((size_t)64 << 20)

static void mark_assumed(bb_cpu_session *s, const bbi_plan *p, uint32_t v) {
  if (v == BBI_NO_VALUE || !s->initial[v]) return;
  for (uint32_t i = 0; i < p->n_constants; i++)
    if (p->constants[i] == v) return; /* a folded value of the same name is the plan's own */
  s->assumed[v] = true;
}

/* Runs step st on its constant inputs; true when its outputs became constants of p. */
static bool fold_step(bb_cpu_session *s, bbi_plan *p, bbi_plan_step *st, bbi_cpu_workspace *ws) {
  bb_tensor *ins[64], *outs[64];
  if (st->n_in > 64 || st->n_out > 64) return false;
  size_t in_bytes = 0;
  for (uint32_t k = 0; k < st->n_in; k++) {
    ins[k] = bbi_session_constant(s, p, st->in[k]);
    if (st->in[k] != BBI_NO_VALUE && !ins[k]) return false;
    if (ins[k]) in_bytes += ins[k]->buffer->size;
  }
  bb_cpu_limits limits = {sizeof limits, FOLD_MAX_OUTPUT_BYTES, FOLD_MAX_OUTPUT_BYTES};
  bb_error err; /* a node that fails now fails again at run time, with its message */
  if (bbi_cpu_run_op(st->op, st->node, s->opset, ins, st->n_in, outs, st->n_out, s->alloc, &limits, ws, NULL, &err))
    return false;
  size_t out_bytes = 0;
  for (uint32_t k = 0; k < st->n_out; k++) out_bytes += outs[k] ? outs[k]->buffer->size : 0;
  bool keep = out_bytes <= in_bytes + FOLD_GROWTH_BYTES;
  for (uint32_t k = 0; k < st->n_out; k++) {
    if (keep && outs[k] && st->out[k] != BBI_NO_VALUE) {
      if (bbi_session_add_constant(s, p, st->out[k], outs[k])) keep = false;
    } else {
      bb_tensor_release(outs[k]);
    }
  }
  return keep;
}

int bbi_plan_fold_constants(bb_cpu_session *s, bbi_plan *p, bool assume_initializers, bb_error *err) {
  (void)err;
  bbi_cpu_workspace ws = {NULL, 0, s->alloc};
  for (uint32_t i = 0; i < p->n_steps; i++) {
    bbi_plan_step *st = &p->steps[i];
    if (!st->node || nondeterministic(st->node)) continue;
    bool constant = true;
    for (uint32_t k = 0; k < st->n_in && constant; k++)
      constant = st->in[k] == BBI_NO_VALUE || bbi_session_is_constant(s, p, st->in[k]);
    if (!constant || !fold_step(s, p, st, &ws)) continue;
    if (assume_initializers)
      for (uint32_t k = 0; k < st->n_in; k++) mark_assumed(s, p, st->in[k]);
    st->node = NULL;
    p->stats.folded_constants++;
  }
  bbi_cpu_workspace_free(&ws);
  bbi_plan_compact(p);
  return 0;
}

/* ---- BatchNormalization into Conv -------------------------------------------------------- */

static bool is_op(const bbi_plan_step *st, const char *op_type) {
  return st->node && bb_domain_is_onnx(st->node->domain) && strcmp(st->node->op_type, op_type) == 0;
}

/* A float tensor of n values. */
static bool floats_of(const bb_tensor *t, int64_t n) { return t && t->dtype == BB_DTYPE_FLOAT && t->numel == n; }

/* BatchNormalization in inference mode: one output, statistics as inputs. */
static bool inference_batchnorm(const bb_cpu_session *s, const bbi_plan_step *st) {
  if (!is_op(st, "BatchNormalization") || st->n_in != 5) return false;
  if (s->opset >= 14) return bb_attr_get_int(&st->node->attrs, "training_mode", 0) == 0 && st->n_out == 1;
  return st->n_out == 1 && (s->opset >= 9 || bb_attr_get_int(&st->node->attrs, "spatial", 1) == 1);
}

/* The step of p that produces v, or NULL. */
static bbi_plan_step *producer_of(bbi_plan *p, uint32_t v) {
  for (uint32_t i = 0; i < p->n_steps; i++)
    for (uint32_t k = 0; p->steps[i].node && k < p->steps[i].n_out; k++)
      if (p->steps[i].out[k] == v) return &p->steps[i];
  return NULL;
}

/* W' and B' of the fold into new tensors; BB_ERR_NOMEM or 0. */
static int folded_weights(const bb_cpu_session *s, const bb_tensor *w, const bb_tensor *b, bb_tensor *const *bn,
                          double eps, bb_tensor **w_out, bb_tensor **b_out) {
  const int64_t m = w->dims[0], per = w->numel / m;
  *w_out = bb_tensor_new_empty(s->alloc, BB_DTYPE_FLOAT, w->rank, w->dims);
  *b_out = bb_tensor_new_empty(s->alloc, BB_DTYPE_FLOAT, 1, &m);
  if (!*w_out || !*b_out) return BB_ERR_NOMEM;
  const float *wd = bb_tensor_data(w), *bd = b ? bb_tensor_data(b) : NULL;
  const float *scale = bb_tensor_data(bn[1]), *bias = bb_tensor_data(bn[2]), *mean = bb_tensor_data(bn[3]),
              *var = bb_tensor_data(bn[4]);
  float *wo = bb_tensor_data(*w_out), *bo = bb_tensor_data(*b_out);
  for (int64_t c = 0; c < m; c++) {
    double k = scale[c] / sqrt((double)var[c] + eps), shift = bias[c] - mean[c] * k;
    for (int64_t i = 0; i < per; i++) wo[c * per + i] = (float)(wd[c * per + i] * k);
    bo[c] = (float)((bd ? bd[c] : 0.0) * k + shift);
  }
  return 0;
}

/* Folds BatchNormalization step bn into the Conv before it, when everything is constant. */
static int fold_one(bb_cpu_session *s, bbi_plan *p, bbi_plan_step *bn) {
  bbi_plan_step *conv = producer_of(p, bn->in[0]);
  if (!conv || !is_op(conv, "Conv") || conv->n_out != 1 || conv->n_in < 2 || s->is_output[bn->in[0]] ||
      bbi_plan_uses(p, bn->in[0]) != 1)
    return 0;
  const bb_tensor *w = bbi_session_constant(s, p, conv->in[1]);
  const bb_tensor *b = conv->n_in > 2 && conv->in[2] != BBI_NO_VALUE ? bbi_session_constant(s, p, conv->in[2]) : NULL;
  if (!w || w->dtype != BB_DTYPE_FLOAT || w->rank < 3 || !w->dims[0] ||
      (conv->n_in > 2 && conv->in[2] != BBI_NO_VALUE && !floats_of(b, w->dims[0])))
    return 0;
  bb_tensor *params[5] = {NULL};
  for (int i = 1; i < 5; i++)
    if (!floats_of(params[i] = bbi_session_constant(s, p, bn->in[i]), w->dims[0])) return 0;
  uint32_t *in = bbi_arena_alloc(s->arena, 4 * sizeof *in);
  uint32_t w_id = bbi_session_new_value(s, s->names[conv->in[1]]), b_id = bbi_session_new_value(s, s->names[bn->out[0]]);
  if (!in || w_id == BBI_NO_VALUE || b_id == BBI_NO_VALUE) return BB_ERR_NOMEM;
  bb_tensor *w2 = NULL, *b2 = NULL;
  int rc = folded_weights(s, w, b, params, bb_attr_get_float(&bn->node->attrs, "epsilon", 1e-5f), &w2, &b2);
  if (rc || (rc = bbi_session_add_constant(s, p, w_id, w2))) {
    bb_tensor_release(w2);
    bb_tensor_release(b2);
    return rc;
  }
  if ((rc = bbi_session_add_constant(s, p, b_id, b2))) return rc;
  for (uint32_t k = 1; k < conv->n_in; k++) mark_assumed(s, p, conv->in[k]);
  for (uint32_t k = 1; k < 5; k++) mark_assumed(s, p, bn->in[k]);
  in[0] = conv->in[0], in[1] = w_id, in[2] = b_id;
  conv->in = in;
  conv->n_in = 3;
  conv->out[0] = conv->produced = bn->out[0];
  bn->node = NULL;
  p->stats.folded_batchnorms++;
  return 0;
}

int bbi_plan_fold_batchnorm(bb_cpu_session *s, bbi_plan *p, bb_error *err) {
  (void)err;
  for (uint32_t i = 0; i < p->n_steps; i++) {
    if (!inference_batchnorm(s, &p->steps[i])) continue;
    int rc = fold_one(s, p, &p->steps[i]);
    if (rc) return rc;
  }
  bbi_plan_compact(p);
  return 0;
}
