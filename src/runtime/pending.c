/* Operations waiting for completions: an open-addressing table by command id, at most
 * half full, with no tombstones (a removal shifts the entries after it back). */
#include "runtime/engine.h"
#include "runtime/pending.h"
#include "util/mem.h"

static size_t pending_slot(size_t cap, uint64_t command) {
  return (size_t)((command * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

rt_pending *rt_pending_find(bb_node *n, uint64_t command) {
  if (!n->cap_pending) return NULL;
  for (size_t i = pending_slot(n->cap_pending, command);; i = (i + 1) & (n->cap_pending - 1)) {
    rt_pending *p = &n->pending[i];
    if (!p->used) return NULL; /* an empty slot ends the probe chain */
    if (p->command == command) return p;
  }
}

int rt_pending_add(bb_node *n, uint64_t command, rt_exec *e, uint32_t op) {
  if ((n->n_pending + 1) * 2 > n->cap_pending) {
    size_t cap = n->cap_pending ? n->cap_pending * 2 : 64;
    rt_pending *old = n->pending;
    size_t old_cap = n->cap_pending;
    rt_pending *fresh = bbi_mem_calloc(n->alloc, cap, sizeof *fresh);
    if (!fresh) return BB_ERR_NOMEM;
    n->pending = fresh;
    n->cap_pending = cap;
    for (size_t i = 0; i < old_cap; i++)
      if (old[i].used) {
        size_t j = pending_slot(cap, old[i].command);
        while (fresh[j].used) j = (j + 1) & (cap - 1);
        fresh[j] = old[i];
      }
    bbi_mem_free(n->alloc, old);
  }
  size_t j = pending_slot(n->cap_pending, command);
  while (n->pending[j].used) j = (j + 1) & (n->cap_pending - 1);
  n->pending[j] = (rt_pending){command, e, op, true};
  n->n_pending++;
  e->refs++;
  return 0;
}

/* Backward-shift deletion: entries after the hole whose probe chain crosses it move up,
 * so no tombstones are left and a lookup always ends at an empty slot, however many
 * commands came and went. */
void rt_pending_remove(bb_node *n, rt_pending *p) {
  rt_exec *e = p->exec;
  size_t mask = n->cap_pending - 1, hole = (size_t)(p - n->pending);
  for (size_t j = (hole + 1) & mask; n->pending[j].used; j = (j + 1) & mask) {
    size_t home = pending_slot(n->cap_pending, n->pending[j].command);
    bool home_after_hole = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
    if (home_after_hole) continue; /* its chain does not cross the hole */
    n->pending[hole] = n->pending[j];
    hole = j;
  }
  n->pending[hole] = (rt_pending){0};
  n->n_pending--;
  rt_exec_unref(n, e);
}
