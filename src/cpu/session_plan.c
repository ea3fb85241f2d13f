/* The values and steps of a session's plans, as the rewrites (session_fold.c,
 * session_fuse.c) and the executor (session.c) share them: fresh value ids, the constants
 * each plan starts a run with, and the steps' bookkeeping (session.h). */
#include "cpu/session.h"

uint32_t bbi_session_new_value(bb_cpu_session *s, const char *like) {
  if (s->n_values >= s->cap_values) return BBI_NO_VALUE;
  s->names[s->n_values] = like;
  return s->n_values++;
}

bool bbi_session_is_constant(const bb_cpu_session *s, const bbi_plan *p, uint32_t v) {
  return bbi_session_constant(s, p, v) != NULL;
}

bb_tensor *bbi_session_constant(const bb_cpu_session *s, const bbi_plan *p, uint32_t v) {
  if (v == BBI_NO_VALUE) return NULL;
  for (uint32_t i = 0; i < p->n_constants; i++)
    if (p->constants[i] == v) return s->folded[v];
  return p == &s->constant ? s->initial[v] : NULL;
}

int bbi_session_add_constant(bb_cpu_session *s, bbi_plan *p, uint32_t v, bb_tensor *t) {
  uint32_t *grown = bbi_arena_grow(s->arena, p->constants, p->n_constants * sizeof *grown, (p->n_constants + 1) * sizeof *grown);
  if (!grown) {
    bb_tensor_release(t);
    return BB_ERR_NOMEM;
  }
  p->constants = grown;
  p->constants[p->n_constants++] = v;
  bb_tensor_release(s->folded[v]);
  s->folded[v] = t;
  return 0;
}

uint32_t bbi_session_own_inputs(const bb_cpu_session *s, const bbi_plan_step *st, bb_tensor *const *ins) {
  uint32_t mask = 0;
  for (uint32_t k = 0; k < st->n_in && k < 32; k++) {
    uint32_t v = st->in[k];
    if (v != BBI_NO_VALUE && ins[k] && (ins[k] == s->initial[v] || ins[k] == s->folded[v])) mask |= 1u << k;
  }
  return mask;
}

uint32_t bbi_plan_uses(const bbi_plan *p, uint32_t v) {
  uint32_t uses = 0;
  for (uint32_t i = 0; i < p->n_steps; i++) {
    const bbi_plan_step *st = &p->steps[i];
    if (!st->node) continue;
    for (uint32_t k = 0; k < st->n_in; k++) uses += st->in[k] == v;
    uses += st->addend == v;
  }
  return uses;
}

void bbi_plan_compact(bbi_plan *p) {
  uint32_t kept = 0;
  for (uint32_t i = 0; i < p->n_steps; i++)
    if (p->steps[i].node) p->steps[kept++] = p->steps[i];
  p->n_steps = kept;
}
