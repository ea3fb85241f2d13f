/* Operations waiting for completions: an open-addressing table by command id, at most
 * half full, with no tombstones (a removal shifts the entries after it back). */
#include "runtime/pending.h"
#include "util/mem.h"

static size_t pending_slot(size_t cap, uint64_t command) {
  return (size_t)((command * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

void rt_pending_init(rt_pending_table *t, const bb_allocator *alloc) { *t = (rt_pending_table){alloc, NULL, 0, 0}; }

rt_pending *rt_pending_find(const rt_pending_table *t, uint64_t command) {
  if (!t->cap) return NULL;
  for (size_t i = pending_slot(t->cap, command);; i = (i + 1) & (t->cap - 1)) {
    rt_pending *p = &t->items[i];
    if (!p->used) return NULL; /* an empty slot ends the probe chain */
    if (p->command == command) return p;
  }
}

static int grow(rt_pending_table *t) {
  size_t cap = t->cap ? t->cap * 2 : 64;
  rt_pending *fresh = bbi_mem_calloc(t->alloc, cap, sizeof *fresh);
  if (!fresh) return BB_ERR_NOMEM;
  for (size_t i = 0; i < t->cap; i++)
    if (t->items[i].used) {
      size_t j = pending_slot(cap, t->items[i].command);
      while (fresh[j].used) j = (j + 1) & (cap - 1);
      fresh[j] = t->items[i];
    }
  bbi_mem_free(t->alloc, t->items);
  t->items = fresh;
  t->cap = cap;
  return 0;
}

int rt_pending_add(rt_pending_table *t, uint64_t command, rt_exec *e, uint32_t op) {
  if (rt_pending_find(t, command)) return BB_ERR_EXISTS;
  if ((t->len + 1) * 2 > t->cap && grow(t)) return BB_ERR_NOMEM;
  size_t j = pending_slot(t->cap, command);
  while (t->items[j].used) j = (j + 1) & (t->cap - 1);
  t->items[j] = (rt_pending){command, e, op, true};
  t->len++;
  return 0;
}

/* Backward-shift deletion: entries after the hole whose probe chain crosses it move up,
 * so no tombstones are left and a lookup always ends at an empty slot, however many
 * commands came and went. */
rt_pending rt_pending_remove(rt_pending_table *t, rt_pending *p) {
  rt_pending taken = *p;
  size_t mask = t->cap - 1, hole = (size_t)(p - t->items);
  for (size_t j = (hole + 1) & mask; t->items[j].used; j = (j + 1) & mask) {
    size_t home = pending_slot(t->cap, t->items[j].command);
    bool home_after_hole = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
    if (home_after_hole) continue; /* its chain does not cross the hole */
    t->items[hole] = t->items[j];
    hole = j;
  }
  t->items[hole] = (rt_pending){0};
  t->len--;
  return taken;
}

void rt_pending_free(rt_pending_table *t) {
  bbi_mem_free(t->alloc, t->items);
  rt_pending_init(t, t->alloc);
}

void rt_pending_save(const rt_pending_table *t, bb_le_writer *w) {
  bb_le_write_u64(w, t->len);
  for (size_t i = 0; i < t->cap; i++)
    if (t->items[i].used) {
      bb_le_write_u64(w, t->items[i].command);
      bb_le_write_u64(w, t->items[i].exec->id);
      bb_le_write_u32(w, t->items[i].op);
    }
}

int rt_pending_load(rt_pending_table *t, rt_reader *r, const rt_exec_lookup *execs, uint64_t next_command,
                    size_t max) {
  size_t n = rt_read_count(r, 20, "too many pending operations for the bytes left");
  if (!r->rc && n > max) rt_read_bad(r, "the snapshot holds more pending operations than this node's limits allow");
  while (!r->rc && n * 2 > t->cap) /* the table it would have grown to, so entries land where they did */
    if (grow(t)) return rt_read_nomem(r);
  for (size_t i = 0; i < n && !r->rc; i++) {
    uint64_t command = rt_read_u64(r), exec_id = rt_read_u64(r);
    uint32_t op = rt_read_u32(r);
    if (r->rc) break;
    rt_exec *e = execs->find(execs->user, exec_id, op);
    if (!e || !command || command >= next_command)
      return rt_read_bad(r, "a pending operation names an unknown execution, op or command");
    int rc = rt_pending_add(t, command, e, op);
    if (rc == BB_ERR_EXISTS) return rt_read_bad(r, "two pending operations wait for one command");
    if (rc) return rt_read_nomem(r);
  }
  return r->rc;
}
