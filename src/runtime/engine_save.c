/* The engine's part of a snapshot (engine_save.h). */
#include <stdlib.h>
#include <string.h>

#include "runtime/engine.h"
#include "runtime/engine_save.h"
#include "util/mem.h"

/* ---- saving ------------------------------------------------------------------------------ */

/* Adds e and its callers (duplicates are dropped by order_by_id). */
static int collect(const bb_node *n, rt_exec_list *l, rt_exec *e) {
  for (; e; e = e->parent) {
    if (bbi_mem_grow(n->alloc, (void **)&l->items, &l->cap, l->len + 1, sizeof *l->items)) return BB_ERR_NOMEM;
    l->items[l->len++] = e;
  }
  return 0;
}

static int by_id(const void *a, const void *b) {
  uint64_t x = (*(rt_exec *const *)a)->id, y = (*(rt_exec *const *)b)->id;
  return (x > y) - (x < y);
}

/* Increasing ids, each once: restore looks executions up by binary search. */
static void order_by_id(rt_exec_list *l) {
  if (!l->len) return;
  qsort(l->items, l->len, sizeof *l->items, by_id);
  size_t kept = 1;
  for (size_t i = 1; i < l->len; i++)
    if (l->items[i] != l->items[kept - 1]) l->items[kept++] = l->items[i];
  l->len = kept;
}

int rt_execs_live(const bb_node *n, rt_exec_list *out) {
  int rc = 0;
  for (size_t i = 0; i < n->timers.len && !rc; i++) rc = collect(n, out, n->timers.items[i].exec);
  for (size_t i = 0; i < n->pending.cap && !rc; i++)
    if (n->pending.items[i].used) rc = collect(n, out, n->pending.items[i].exec);
  if (!rc) rc = collect(n, out, n->bootstrap_root);
  if (!rc) order_by_id(out);
  return rc;
}

void rt_exec_list_free(const bb_node *n, rt_exec_list *l) {
  bbi_mem_free(n->alloc, l->items);
  *l = (rt_exec_list){0};
}

static void save_exec(const bb_node *n, const rt_exec *e, bb_le_writer *w) {
  const rt_graph *g = &n->graphs[e->graph];
  bb_le_write_u64(w, e->id);
  bb_le_write_u32(w, e->graph);
  bb_le_write_u64(w, e->parent ? e->parent->id : 0);
  bb_le_write_u32(w, e->call_op);
  bb_le_write_u64(w, e->born_ns);
  bb_le_write_u64(w, e->deadline_at);
  bb_le_write_u8(w, e->has_src);
  if (e->has_src) rt_write_peer(w, &e->src);
  bb_le_write_u64(w, e->wire_req_id);
  bb_le_write_u8(w, e->bootstrap);
  bb_le_write_u32(w, (uint32_t)e->target);
  bb_le_write(w, e->scheduled, (g->n_ops + 7) / 8);
  uint32_t values = 0;
  for (uint32_t s = 0; s < g->n_sites; s++) values += e->vals[s] != NULL;
  bb_le_write_u32(w, values);
  for (uint32_t s = 0; s < g->n_sites; s++) {
    if (!e->vals[s]) continue;
    bb_le_write_u32(w, s);
    bb_le_write_u64(w, e->charged[s]);
    rt_write_value(w, e->vals[s]);
  }
}

void rt_execs_save(const bb_node *n, const rt_exec_list *live, bb_le_writer *w) {
  bb_le_write_u64(w, live->len);
  for (size_t k = 0; k < live->len; k++) save_exec(n, live->items[k], w);
}

/* ---- loading ------------------------------------------------------------------------------ */

rt_exec *rt_staged_find(const rt_staged_execs *s, uint64_t id) {
  size_t lo = 0, hi = s->list.len;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->list.items[mid]->id < id) lo = mid + 1;
    else hi = mid;
  }
  return lo < s->list.len && s->list.items[lo]->id == id ? s->list.items[lo] : NULL;
}

static rt_exec *find_holding(void *user, uint64_t id, uint32_t op) {
  rt_staged_execs *s = user;
  rt_exec *e = rt_staged_find(s, id);
  if (!e || op >= s->node->graphs[e->graph].n_ops) return NULL;
  e->refs++;
  return e;
}

rt_exec_lookup rt_staged_lookup(rt_staged_execs *s) { return (rt_exec_lookup){find_holding, s}; }

/* Reads the values of e's sites. */
static void load_values(rt_reader *r, rt_exec *e, uint32_t sites) {
  uint32_t values = rt_read_u32(r);
  if (!r->rc && values > sites) rt_read_bad(r, "an execution holds more values than its graph has sites");
  for (uint32_t i = 0; i < values && !r->rc; i++) {
    uint32_t site = rt_read_u32(r);
    uint64_t charged = rt_read_u64(r);
    if (!r->rc && (site >= sites || e->vals[site])) {
      rt_read_bad(r, "a value names a bad site");
      return;
    }
    bb_val *v = rt_read_value(r);
    if (!v) return;
    e->vals[site] = v;
    e->charged[site] = (size_t)charged;
  }
}

/* Reads execution k (ids increase). */
static void load_exec(rt_staged_execs *s, rt_reader *r, size_t k, uint64_t next_exec) {
  const bb_node *n = s->node;
  uint64_t id = rt_read_u64(r);
  uint32_t graph = rt_read_u32(r);
  if (r->rc) return;
  if (graph >= n->n_graphs || !n->graphs[graph].active || !id || id >= next_exec ||
      (k && id <= s->list.items[k - 1]->id)) {
    rt_read_bad(r, "an execution names a graph this node does not run, or an id out of order");
    return;
  }
  const rt_graph *g = &n->graphs[graph];
  rt_exec *e = rt_exec_alloc(n, graph);
  if (!e) {
    rt_read_nomem(r);
    return;
  }
  s->list.items[s->list.len++] = e;
  e->id = id;
  s->parent[k] = rt_read_u64(r);
  e->call_op = rt_read_u32(r);
  e->born_ns = rt_read_u64(r);
  e->deadline_at = rt_read_u64(r);
  e->has_src = rt_read_u8(r);
  if (e->has_src) rt_read_peer(r, &e->src);
  e->wire_req_id = rt_read_u64(r);
  e->bootstrap = rt_read_u8(r);
  e->target = (int)rt_read_u32(r);
  rt_read_take(r, e->scheduled, (g->n_ops + 7) / 8);
  if (!r->rc && (e->target < -1 || e->target >= (int)n->n_targets))
    rt_read_bad(r, "an execution names an unknown target");
  load_values(r, e, g->n_sites);
}

/* Each caller must be an execution of this snapshot whose op is a CALL of the callee's
 * graph; the callee holds it. */
static void link_callers(rt_staged_execs *s, rt_reader *r) {
  const bb_node *n = s->node;
  for (size_t k = 0; k < s->list.len && !r->rc; k++) {
    rt_exec *e = s->list.items[k];
    if (!s->parent[k]) continue;
    rt_exec *p = rt_staged_find(s, s->parent[k]);
    const rt_op *call = p && e->call_op < n->graphs[p->graph].n_ops ? &n->graphs[p->graph].ops[e->call_op] : NULL;
    if (!call || p == e || call->kind != RT_OP_CALL || call->callee != e->graph) {
      rt_read_bad(r, "an execution's caller is not a call of its graph in this snapshot");
      return;
    }
    p->refs++;
    e->parent = p;
  }
}

int rt_execs_load(rt_staged_execs *s, rt_reader *r, uint64_t next_exec) {
  const bb_node *n = s->node;
  size_t count = rt_read_count(r, 40, "too many executions for the bytes left");
  if (r->rc) return r->rc;
  s->list.items = bbi_mem_calloc(n->alloc, count + 1, sizeof *s->list.items);
  s->parent = bbi_mem_calloc(n->alloc, count + 1, sizeof *s->parent);
  if (!s->list.items || !s->parent) return rt_read_nomem(r);
  s->list.cap = count;
  for (size_t k = 0; k < count && !r->rc; k++) load_exec(s, r, k, next_exec);
  link_callers(s, r);
  return r->rc;
}

static size_t charged_bytes(const bb_node *n, const rt_exec *e) {
  size_t total = 0;
  for (uint32_t i = 0; i < n->graphs[e->graph].n_sites; i++) total += e->charged[i];
  return total;
}

int rt_execs_check(const rt_staged_execs *s, rt_reader *r) {
  const bb_node *n = s->node;
  size_t charged = 0;
  for (size_t k = 0; k < s->list.len && !r->rc; k++) {
    const rt_exec *e = s->list.items[k];
    if (!e->refs) return rt_read_bad(r, "an execution in the snapshot is held by nothing");
    for (uint32_t i = 0; i < n->graphs[e->graph].n_sites; i++) {
      if (e->charged[i] > n->ingress.budget - charged)
        return rt_read_bad(r, "the snapshot's values are charged more bytes than this node's ingress budget");
      charged += e->charged[i];
    }
  }
  if (!r->rc && s->list.len > n->cfg.max_executions)
    rt_read_bad(r, "the snapshot holds more executions than this node's limits allow");
  return r->rc;
}

void rt_execs_commit(bb_node *n, rt_staged_execs *s) {
  for (size_t k = 0; k < s->list.len; k++) {
    rt_ingress_charge(&n->ingress, charged_bytes(n, s->list.items[k]));
    n->n_execs++;
  }
  s->list.len = 0; /* the node owns them now */
}

void rt_staged_free(rt_staged_execs *s) {
  const bb_node *n = s->node;
  for (size_t k = 0; k < s->list.len; k++) {
    rt_exec *e = s->list.items[k];
    for (uint32_t i = 0; i < n->graphs[e->graph].n_sites; i++) bb_val_release(e->vals[i]);
    bbi_mem_free(n->alloc, e);
  }
  bbi_mem_free(n->alloc, s->list.items);
  bbi_mem_free(n->alloc, s->parent);
  s->list = (rt_exec_list){0};
  s->parent = NULL;
}
