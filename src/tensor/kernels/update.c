/* One optimizer step of one parameter in one pass: the optimizer graph's elementwise
 * operations per element, in the graph's order and each rounded to float as the graph's
 * kernels round it, so the result is the graph's bit for bit. */
#include <math.h>

#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"

/* Four elements of bbi_f32_update; `rule` and `prefix` (whether any of clip, l2 and decay
 * is on) are constants wherever this is inlined, so each loop holds its own operations
 * only and a plain rule tests no flag. */
BBI_INLINE void update4(const bbi_f32_update_coef *k, bbi_update_rule rule, bool prefix, bbi_f32x4 p, bbi_f32x4 g,
                        bbi_f32x4 s0, bbi_f32x4 s1, bbi_f32x4 *po, bbi_f32x4 *s0o, bbi_f32x4 *s1o) {
  if (prefix && k->clip) g = g * bbi_f32x4_splat(k->clip_coef);
  if (prefix && k->l2) g = g + p * bbi_f32x4_splat(k->wd);
  const bbi_f32x4 pd = prefix && k->decay ? p * bbi_f32x4_splat(k->decay_scale) : p;
  if (rule == BBI_RULE_SGD) {
    *po = pd - g * bbi_f32x4_splat(k->lr);
  } else if (rule == BBI_RULE_MOMENTUM || rule == BBI_RULE_NESTEROV) {
    const bbi_f32x4 b = s0 * bbi_f32x4_splat(k->mu) + g;
    const bbi_f32x4 dir = rule == BBI_RULE_NESTEROV ? g + b * bbi_f32x4_splat(k->mu) : b;
    *po = pd - dir * bbi_f32x4_splat(k->lr);
    *s0o = b;
  } else {
    const bbi_f32x4 m = s0 * bbi_f32x4_splat(k->b1) + g * bbi_f32x4_splat(k->c1);
    const bbi_f32x4 v = s1 * bbi_f32x4_splat(k->b2) + (g * g) * bbi_f32x4_splat(k->c2);
    const bbi_f32x4 d = bbi_f32x4_sqrt(v) / bbi_f32x4_splat(k->s2) + bbi_f32x4_splat(k->eps);
    *po = pd - bbi_f32x4_splat(k->lr) * (m / d);
    *s0o = m;
    *s1o = v;
  }
}

/* The arrays' elements [i, i + r) (r ≤ 4: a tail when < 4); states the rule has not are
 * neither read nor written. */
BBI_INLINE void update_at(const bbi_f32_update_coef *k, bbi_update_rule rule, bool prefix, const bbi_f32_update_arrays *a,
                          size_t i, size_t r) {
  const size_t states = bbi_update_states(rule);
  const bbi_f32x4 zero = bbi_f32x4_splat(0.0f);
  bbi_f32x4 in[4] = {zero, zero, zero, zero}, out[3] = {zero, zero, zero};
  const float *from[4] = {a->p, a->g, a->state[0], a->state[1]};
  float *to[3] = {a->p_out, a->state_out[0], a->state_out[1]};
  for (size_t j = 0; j < 2 + states; j++) in[j] = r == 4 ? bbi_f32x4_load(from[j] + i) : bbi_f32x4_load_tail(from[j] + i, r);
  update4(k, rule, prefix, in[0], in[1], in[2], in[3], &out[0], &out[1], &out[2]);
  for (size_t j = 0; j < 1 + states; j++) {
    if (r == 4) bbi_f32x4_store(to[j] + i, out[j]);
    else bbi_f32x4_store_tail(to[j] + i, out[j], r);
  }
}

BBI_INLINE void update_loop(const bbi_f32_update_coef *k, bbi_update_rule rule, bool prefix, size_t n,
                            const bbi_f32_update_arrays *a) {
  /* local copies the stores cannot alias, so the splats and pointers leave the loop */
  const bbi_f32_update_coef c = *k;
  const bbi_f32_update_arrays b = *a;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) update_at(&c, rule, prefix, &b, i, 4);
  if (i < n) update_at(&c, rule, prefix, &b, i, n - i);
}

BBI_INLINE void update_run(const bbi_f32_update_coef *k, bbi_update_rule rule, size_t n, const bbi_f32_update_arrays *a) {
  if (k->clip || k->l2 || k->decay) update_loop(k, rule, true, n, a);
  else update_loop(k, rule, false, n, a);
}

void bbi_f32_update(const bbi_f32_update_coef *k, size_t n, const bbi_f32_update_arrays *a) {
  switch (k->rule) {
  case BBI_RULE_SGD: update_run(k, BBI_RULE_SGD, n, a); break;
  case BBI_RULE_MOMENTUM: update_run(k, BBI_RULE_MOMENTUM, n, a); break;
  case BBI_RULE_NESTEROV: update_run(k, BBI_RULE_NESTEROV, n, a); break;
  case BBI_RULE_ADAM: update_run(k, BBI_RULE_ADAM, n, a); break;
  }
}

void bbi_f32_update_scalar(const bbi_f32_update_coef *k, size_t n, const bbi_f32_update_arrays *a) {
  for (size_t i = 0; i < n; i++) {
    float g = a->g[i];
    const float p = a->p[i];
    if (k->clip) g = g * k->clip_coef;
    if (k->l2) g = g + p * k->wd;
    const float pd = k->decay ? p * k->decay_scale : p;
    if (k->rule == BBI_RULE_SGD) {
      a->p_out[i] = pd - g * k->lr;
    } else if (k->rule == BBI_RULE_ADAM) {
      const float m = a->state[0][i] * k->b1 + g * k->c1;
      const float v = a->state[1][i] * k->b2 + (g * g) * k->c2;
      const float d = sqrtf(v) / k->s2 + k->eps;
      a->p_out[i] = pd - k->lr * (m / d);
      a->state_out[0][i] = m, a->state_out[1][i] = v;
    } else {
      const float b = a->state[0][i] * k->mu + g;
      const float dir = k->rule == BBI_RULE_NESTEROV ? g + b * k->mu : b;
      a->p_out[i] = pd - dir * k->lr;
      a->state_out[0][i] = b;
    }
  }
}
