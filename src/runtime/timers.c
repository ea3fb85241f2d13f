/* Timers: a binary min-heap ordered by (time, insertion order), so timers due at the same
 * instant fire in the order they were set. */
#include "runtime/steps.h"
#include "runtime/timers.h"
#include "util/mem.h"

static bool before(const rt_timer *a, const rt_timer *b) { return a->at < b->at || (a->at == b->at && a->seq < b->seq); }

static void swap(rt_timer *a, rt_timer *b) {
  rt_timer t = *a;
  *a = *b;
  *b = t;
}

int rt_timer_add(bb_node *n, uint64_t at, rt_timer_kind kind, uint64_t id, rt_exec *exec, uint32_t op,
                 uint32_t component) {
  if (n->n_timers >= n->cfg.max_timers) {
    rt_count(n, "timers.dropped", 1);
    return BB_ERR_LIMIT;
  }
  if (bbi_mem_grow(n->alloc, (void **)&n->timers, &n->cap_timers, n->n_timers + 1, sizeof *n->timers))
    return BB_ERR_NOMEM;
  size_t i = n->n_timers++;
  n->timers[i] = (rt_timer){at, n->timer_seq++, kind, id, op, component, exec};
  if (exec) exec->refs++;
  while (i && before(&n->timers[i], &n->timers[(i - 1) / 2])) {
    swap(&n->timers[i], &n->timers[(i - 1) / 2]);
    i = (i - 1) / 2;
  }
  return 0;
}

bool rt_timer_pop_due(bb_node *n, rt_timer *out) {
  if (!n->n_timers || n->timers[0].at > n->now) return false;
  *out = n->timers[0];
  n->timers[0] = n->timers[--n->n_timers];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < n->n_timers && before(&n->timers[l], &n->timers[m])) m = l;
    if (r < n->n_timers && before(&n->timers[r], &n->timers[m])) m = r;
    if (m == i) break;
    swap(&n->timers[i], &n->timers[m]);
    i = m;
  }
  return true;
}
