/* Timers: a binary min-heap ordered by (time, insertion order), so timers due at the same
 * instant fire in the order they were set. */
#include <string.h>

#include "runtime/timers.h"
#include "util/mem.h"

static bool before(const rt_timer *a, const rt_timer *b) { return a->at < b->at || (a->at == b->at && a->seq < b->seq); }

static void swap(rt_timer *a, rt_timer *b) {
  rt_timer t = *a;
  *a = *b;
  *b = t;
}

void rt_timers_init(rt_timers *t, const bb_allocator *alloc, size_t max, rt_counters *counters) {
  memset(t, 0, sizeof *t);
  t->alloc = alloc;
  t->max = max;
  t->counters = counters;
}

/* Adds x, keeping its seq. */
static int push(rt_timers *t, const rt_timer *x) {
  if (bbi_mem_grow(t->alloc, (void **)&t->items, &t->cap, t->len + 1, sizeof *t->items)) return BB_ERR_NOMEM;
  size_t i = t->len++;
  t->items[i] = *x;
  while (i && before(&t->items[i], &t->items[(i - 1) / 2])) {
    swap(&t->items[i], &t->items[(i - 1) / 2]);
    i = (i - 1) / 2;
  }
  return 0;
}

int rt_timers_add(rt_timers *t, uint64_t at, rt_timer_kind kind, uint64_t id, rt_exec *exec, uint32_t op,
                  uint32_t component) {
  if (t->len >= t->max) {
    rt_count(t->counters, "timers.dropped", 1);
    return BB_ERR_LIMIT;
  }
  int rc = push(t, &(rt_timer){at, t->seq, kind, id, op, component, exec});
  if (!rc) t->seq++;
  return rc;
}

static void sift_down(rt_timers *t, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < t->len && before(&t->items[l], &t->items[m])) m = l;
    if (r < t->len && before(&t->items[r], &t->items[m])) m = r;
    if (m == i) break;
    swap(&t->items[i], &t->items[m]);
    i = m;
  }
}

bool rt_timers_pop_due(rt_timers *t, uint64_t now, rt_timer *out) {
  if (!t->len || t->items[0].at > now) return false;
  *out = t->items[0];
  t->items[0] = t->items[--t->len];
  sift_down(t, 0);
  return true;
}

size_t rt_timers_bring_forward(rt_timers *t, uint64_t now, bool (*hit)(const rt_timer *, void *), void *user) {
  size_t moved = 0;
  for (size_t i = 0; i < t->len; i++) {
    rt_timer *x = &t->items[i];
    if (x->kind != RT_TIMER_INTERVAL || x->at <= now || !hit(x, user)) continue;
    x->at = now;
    moved++;
  }
  if (moved) /* times only went down: rebuild the heap bottom-up */
    for (size_t i = t->len / 2; i-- > 0;) sift_down(t, i);
  return moved;
}

uint64_t rt_timers_next(const rt_timers *t) { return t->len ? t->items[0].at : UINT64_MAX; }

void rt_timers_free(rt_timers *t) {
  bbi_mem_free(t->alloc, t->items);
  t->items = NULL;
  t->len = t->cap = 0;
}

void rt_timers_save(const rt_timers *t, bb_le_writer *w) {
  bb_le_write_u64(w, t->len);
  for (size_t i = 0; i < t->len; i++) {
    const rt_timer *x = &t->items[i];
    bb_le_write_u64(w, x->at);
    bb_le_write_u64(w, x->seq);
    bb_le_write_u8(w, (uint8_t)x->kind);
    bb_le_write_u64(w, x->id);
    bb_le_write_u32(w, x->op);
    bb_le_write_u32(w, x->component);
    bb_le_write_u64(w, x->exec ? x->exec->id : 0);
  }
}

/* Reads one timer; what it names must exist. */
static void load_timer(rt_reader *r, rt_timer *x, const rt_exec_lookup *execs, size_t n_components) {
  x->at = rt_read_u64(r);
  x->seq = rt_read_u64(r);
  x->kind = (rt_timer_kind)rt_read_u8(r);
  x->id = rt_read_u64(r);
  x->op = rt_read_u32(r);
  x->component = rt_read_u32(r);
  uint64_t exec_id = rt_read_u64(r);
  if (r->rc) return;
  if (x->kind == RT_TIMER_INTERVAL) {
    if (!(x->exec = execs->find(execs->user, exec_id, x->op)))
      rt_read_bad(r, "an interval timer names an unknown execution");
  } else if (x->kind == RT_TIMER_COMPONENT) {
    if (x->component >= n_components || exec_id) rt_read_bad(r, "a component timer names an unknown component");
  } else if (x->kind != RT_TIMER_COMPLETE || exec_id) {
    rt_read_bad(r, "a timer has an unknown kind");
  }
}

int rt_timers_load(rt_timers *t, rt_reader *r, const rt_exec_lookup *execs, size_t n_components) {
  size_t n = rt_read_count(r, 41, "too many timers for the bytes left");
  if (!r->rc && n > t->max) rt_read_bad(r, "the snapshot holds more timers than this node's limits allow");
  if (!r->rc && n && bbi_mem_grow(t->alloc, (void **)&t->items, &t->cap, n, sizeof *t->items)) return rt_read_nomem(r);
  for (size_t i = 0; i < n && !r->rc; i++) {
    rt_timer x = {0};
    load_timer(r, &x, execs, n_components);
    if (!r->rc) push(t, &x); /* cannot fail: the room is reserved */
  }
  return r->rc;
}
