/* Snapshots: a quiescent node's whole state as bytes, and back (docs/RUNTIME.md,
 * "Snapshots"). Parked work is captured — executions held by timers (an Interval loop),
 * by pending operations or by running calls — so a restored node continues exactly where
 * the first one stopped.
 *
 * Format (little-endian): "BBSNAP1\0", u32 version, the artifact's shape (graphs, sites,
 * a hash of the targets), then sections in a fixed order: clock and id counters, the
 * bootstrap state, counters, the address book (its use clock, then per peer: id, blocked,
 * whether and when data was sent to it, its last use, its addresses), the dedup window, bound inputs,
 * executions, pending operations, timers, components; a final FNV-1a-64 of everything
 * before it. Every length and index is checked on restore; nothing is applied until the
 * whole snapshot has been read. */
#include <stdlib.h>
#include <string.h>

#include "runtime/book.h"
#include "runtime/engine.h"
#include "runtime/pending.h"
#include "runtime/timers.h"
#include "bb/bytes.h"
#include "bb/common.h"
#include "util/hash.h"
#include "util/mem.h"
#include "util/ring.h"

#define MAGIC "BBSNAP1"
#define VERSION 2u /* 2 added each address-book entry's send time and use tick; 1 is still read */
#define ADDRESS_MAX (128 + 16 * 255) /* bb_address_to_bytes: always enough */

/* ---- writing ------------------------------------------------------------------------- */

/* A u64 length, then the bytes. */
static void put_bytes(bb_le_writer *w, const void *data, size_t len) {
  bb_le_write_u64(w, len);
  bb_le_write(w, data, len);
}
static void put_str(bb_le_writer *w, const char *s) { put_bytes(w, s, strlen(s)); }
static void put_peer(bb_le_writer *w, const bb_peer_id *p) { put_bytes(w, p->bytes, p->len); }

/* The kind's type hash, the length, then the value's wire form. */
static void put_value(bb_le_writer *w, const bb_val *v) {
  size_t size = bb_val_encoded_size(v);
  bb_le_write_u64(w, bb_val_kind_hash((int)bb_val_kind_of(v)));
  bb_le_write_u64(w, size);
  if (w->failed) return;
  uint8_t *tmp = bbi_mem_alloc(w->alloc, size);
  if (!tmp) {
    w->failed = true;
    return;
  }
  bb_val_encode_into(v, tmp);
  bb_le_write(w, tmp, size);
  bbi_mem_free(w->alloc, tmp);
}

/* FNV-1a-64 over the target names, each followed by a 0xff byte (no name holds one). */
static uint64_t targets_hash(const bb_node *n) {
  uint64_t h = BBI_FNV1A64_INIT;
  for (size_t t = 0; t < n->n_targets; t++) {
    h = bbi_fnv1a64_update(h, n->targets[t].name, strlen(n->targets[t].name));
    h = bbi_fnv1a64_update(h, "\xff", 1);
  }
  return h;
}

/* The live executions: whatever timers, pending operations and the bootstrap hold, and
 * their callers. */
typedef struct exec_set {
  rt_exec **items;
  size_t len, cap;
} exec_set;

/* Adds e and its callers (duplicates are dropped by order_by_id). */
static int collect(bb_node *n, exec_set *s, rt_exec *e) {
  for (; e; e = e->parent) {
    if (bbi_mem_grow(n->alloc, (void **)&s->items, &s->cap, s->len + 1, sizeof *s->items)) return BB_ERR_NOMEM;
    s->items[s->len++] = e;
  }
  return 0;
}

static int by_id(const void *a, const void *b) {
  uint64_t x = (*(rt_exec *const *)a)->id, y = (*(rt_exec *const *)b)->id;
  return (x > y) - (x < y);
}

/* Increasing ids, each once: restore looks executions up by binary search. */
static void order_by_id(exec_set *s) {
  if (!s->len) return;
  qsort(s->items, s->len, sizeof *s->items, by_id);
  size_t kept = 1;
  for (size_t i = 1; i < s->len; i++)
    if (s->items[i] != s->items[kept - 1]) s->items[kept++] = s->items[i];
  s->len = kept;
}

int bb_node_snapshot(const bb_node *cn, uint8_t **out, size_t *len, bb_error *err) {
  bb_node *n = (bb_node *)cn; /* only its allocator and its lists are used */
  if (n->frontier.len || n->ingress.len || n->outbound.len || n->acc.len)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "snapshot: the node is busy (%zu ops ready, %zu events queued, %zu envelopes and %zu steps "
                        "not handed out); poll until bb_node_has_work is false",
                        n->frontier.len, n->ingress.len, n->outbound.len, n->acc.len);
  exec_set live = {0};
  int rc = 0;
  for (size_t i = 0; i < n->n_timers && !rc; i++) rc = collect(n, &live, n->timers[i].exec);
  for (size_t i = 0; i < n->cap_pending && !rc; i++)
    if (n->pending[i].used) rc = collect(n, &live, n->pending[i].exec);
  if (!rc) rc = collect(n, &live, n->bootstrap_root);
  if (rc) {
    bbi_mem_free(n->alloc, live.items);
    return bb_error_set(err, rc, "snapshot: out of memory");
  }
  order_by_id(&live);

  bb_le_writer w = bb_le_writer_growing(n->alloc);
  bb_le_write(&w, MAGIC, 8);
  bb_le_write_u32(&w, VERSION);
  bb_le_write_u32(&w, n->n_graphs);
  bb_le_write_u64(&w, n->n_sites);
  bb_le_write_u64(&w, targets_hash(n));
  put_peer(&w, &n->self);
  /* clock and counters of ids */
  bb_le_write_u64(&w, n->now);
  bb_le_write_u64(&w, n->next_exec);
  bb_le_write_u64(&w, n->next_command);
  bb_le_write_u64(&w, n->next_wire_req);
  bb_le_write_u64(&w, n->rng);
  bb_le_write_u64(&w, n->timer_seq);
  /* bootstrap */
  bb_le_write_u8(&w, n->bootstrap_started);
  bb_le_write_u32(&w, (uint32_t)n->bootstrap_running);
  bb_le_write_u64(&w, n->bootstrap_root ? n->bootstrap_root->id : 0);
  /* per target: 1 its bootstrap is done, 2 it is chosen to run, 0 neither */
  for (size_t t = 0; t < n->n_targets; t++)
    bb_le_write_u8(&w, n->targets[t].bootstrap_done ? 1 : n->targets[t].bootstrap_wanted ? 2 : 0);
  /* counters */
  bb_le_write_u64(&w, n->n_counters);
  for (size_t i = 0; i < n->n_counters; i++) {
    put_str(&w, n->counters[i].name);
    bb_le_write_u64(&w, n->counters[i].value);
  }
  /* address book */
  bb_le_write_u64(&w, n->book.clock);
  bb_le_write_u64(&w, n->book.len);
  for (size_t i = 0; i < n->book.len; i++) {
    const rt_peer_entry *e = &n->book.items[i];
    put_peer(&w, &e->peer);
    bb_le_write_u8(&w, e->blocked);
    bb_le_write_u8(&w, e->sent);
    bb_le_write_u64(&w, e->sent_ns);
    bb_le_write_u64(&w, e->last_used);
    bb_le_write_u64(&w, e->n_addrs);
    for (size_t k = 0; k < e->n_addrs; k++) {
      uint8_t a[ADDRESS_MAX];
      size_t al = bb_address_to_bytes(&e->addrs[k], a, sizeof a);
      if (!al) w.failed = true; /* cannot happen: ADDRESS_MAX always suffices */
      put_bytes(&w, a, al);
    }
  }
  /* dedup window, oldest first */
  bb_le_write_u64(&w, n->dedup.len);
  for (size_t i = 0; i < n->dedup.len; i++) bb_le_write_u64(&w, *(const uint64_t *)bbi_ring_at(&n->dedup, i));
  /* bound inputs */
  for (size_t t = 0; t < n->n_targets; t++) {
    const rt_graph *g = &n->graphs[n->targets[t].graph];
    for (uint32_t i = 0; i < g->n_in; i++) {
      const bb_val *v = n->targets[t].bound ? n->targets[t].bound[i] : NULL;
      bb_le_write_u8(&w, v != NULL);
      if (v) put_value(&w, v);
    }
  }
  /* executions */
  bb_le_write_u64(&w, live.len);
  for (size_t k = 0; k < live.len; k++) {
    const rt_exec *e = live.items[k];
    const rt_graph *g = &n->graphs[e->graph];
    bb_le_write_u64(&w, e->id);
    bb_le_write_u32(&w, e->graph);
    bb_le_write_u64(&w, e->parent ? e->parent->id : 0);
    bb_le_write_u32(&w, e->call_op);
    bb_le_write_u64(&w, e->born_ns);
    bb_le_write_u64(&w, e->deadline_at);
    bb_le_write_u8(&w, e->has_src);
    if (e->has_src) put_peer(&w, &e->src);
    bb_le_write_u64(&w, e->wire_req_id);
    bb_le_write_u8(&w, e->bootstrap);
    bb_le_write_u32(&w, (uint32_t)e->target);
    bb_le_write(&w, e->scheduled, (g->n_ops + 7) / 8);
    uint32_t values = 0;
    for (uint32_t s = 0; s < g->n_sites; s++) values += e->vals[s] != NULL;
    bb_le_write_u32(&w, values);
    for (uint32_t s = 0; s < g->n_sites; s++) {
      if (!e->vals[s]) continue;
      bb_le_write_u32(&w, s);
      bb_le_write_u64(&w, e->charged[s]);
      put_value(&w, e->vals[s]);
    }
  }
  /* pending operations */
  bb_le_write_u64(&w, n->n_pending);
  for (size_t i = 0; i < n->cap_pending; i++)
    if (n->pending[i].used) {
      bb_le_write_u64(&w, n->pending[i].command);
      bb_le_write_u64(&w, n->pending[i].exec->id);
      bb_le_write_u32(&w, n->pending[i].op);
    }
  /* timers */
  bb_le_write_u64(&w, n->n_timers);
  for (size_t i = 0; i < n->n_timers; i++) {
    const rt_timer *t = &n->timers[i];
    bb_le_write_u64(&w, t->at);
    bb_le_write_u64(&w, t->seq);
    bb_le_write_u8(&w, (uint8_t)t->kind);
    bb_le_write_u64(&w, t->id);
    bb_le_write_u32(&w, t->op);
    bb_le_write_u32(&w, t->component);
    bb_le_write_u64(&w, t->exec ? t->exec->id : 0);
  }
  /* components */
  bb_le_write_u64(&w, n->n_components);
  for (size_t i = 0; i < n->n_components && !w.failed; i++) {
    const rt_component *c = &n->components[i];
    put_str(&w, c->slot);
    put_str(&w, c->type->type_name);
    uint8_t *state = NULL;
    size_t state_len = 0;
    bool saved = c->type->save != NULL;
    bb_le_write_u8(&w, saved);
    if (!saved) continue;
    bb_error cerr;
    int crc = c->type->save(c->self, n->alloc, &state, &state_len, &cerr);
    if (crc) {
      bbi_mem_free(n->alloc, live.items);
      bbi_mem_free(n->alloc, w.buf);
      return bb_error_set(err, crc, "snapshot: `%s` (slot `%s`) could not save its state: %s", c->type->type_name,
                          c->slot, cerr.message);
    }
    put_bytes(&w, state, state_len);
    bbi_mem_free(n->alloc, state);
  }
  bbi_mem_free(n->alloc, live.items);
  uint64_t h = w.failed ? 0 : bbi_fnv1a64(w.buf, w.len);
  bb_le_write_u64(&w, h);
  if (w.failed) {
    bbi_mem_free(n->alloc, w.buf);
    return bb_error_set(err, BB_ERR_NOMEM, "snapshot: out of memory");
  }
  *out = w.buf;
  *len = w.len;
  return 0;
}

/* ---- reading ---------------------------------------------------------------------------- */

/* The snapshot being read; the first error sticks (later reads then do nothing). */
typedef struct reader {
  bb_le_reader in;
  bb_error *err;
  int rc;
} reader;

static int bad(reader *r, const char *what) {
  if (!r->rc) r->rc = bb_error_set(r->err, BB_ERR_MALFORMED, "restore: %s (at byte %zu)", what, r->in.at);
  return r->rc;
}

static void out_of_memory(reader *r) {
  if (!r->rc) r->rc = bb_error_set(r->err, BB_ERR_NOMEM, "restore: out of memory");
}

/* len bytes into out (NULL: skipped); false once anything failed. */
static bool take(reader *r, void *out, size_t len) {
  if (r->rc) return false;
  if (!bb_le_read(&r->in, out, len)) return bad(r, "the snapshot is truncated"), false;
  return true;
}

static uint64_t get_u64(reader *r) {
  uint8_t b[8] = {0};
  take(r, b, 8);
  return bb_le_get_u64(b);
}
static uint32_t get_u32(reader *r) {
  uint8_t b[4] = {0};
  take(r, b, 4);
  return bb_le_get_u32(b);
}
static uint8_t get_u8(reader *r) {
  uint8_t x = 0;
  take(r, &x, 1);
  return x;
}

/* A length that must fit in what is left (each unit at least `unit` bytes). */
static size_t get_count(reader *r, size_t unit, const char *what) {
  uint64_t n = get_u64(r);
  if (!r->rc && n > bb_le_left(&r->in) / unit) bad(r, what);
  return r->rc ? 0 : (size_t)n;
}

/* A u64 length and that many bytes, in place (NULL once anything failed). */
static const uint8_t *get_span(reader *r, size_t *len) {
  *len = get_count(r, 1, "a length runs past the end");
  const uint8_t *p = r->in.p + r->in.at;
  return take(r, NULL, *len) ? p : NULL;
}

static bool get_peer(reader *r, bb_peer_id *out) {
  size_t len;
  const uint8_t *p = get_span(r, &len);
  if (!p) return false;
  if (bb_peer_id_from_bytes(p, len, out, NULL)) return bad(r, "a peer id is malformed"), false;
  return true;
}

static bb_val *get_value(reader *r, const bb_allocator *alloc) {
  uint64_t hash = get_u64(r);
  size_t len;
  const uint8_t *p = get_span(r, &len);
  if (!p && len) return NULL;
  bb_val *v = NULL;
  bb_error verr;
  int rc = r->rc ? r->rc : bb_val_decode(hash, p ? p : (const uint8_t *)"", len, alloc, &v, &verr);
  if (rc && !r->rc)
    r->rc = bb_error_set(r->err, rc == BB_ERR_NOMEM ? BB_ERR_NOMEM : BB_ERR_MALFORMED,
                         "restore: a value does not decode: %s", verr.message);
  if (rc) return NULL;
  return v;
}

/* What restore builds before it touches the node. */
typedef struct staged_exec {
  rt_exec *e;
  uint64_t parent;
  uint32_t holds; /* timers, pending operations and children that hold it */
} staged_exec;

typedef struct staged {
  staged_exec *execs;
  size_t n_execs;
  rt_pending *pending;
  size_t n_pending;
  rt_timer *timers;
  size_t n_timers;
  uint64_t *timer_exec;
  bb_val **bound;     /* per target and input, flattened */
  size_t n_bound;
} staged;

static void staged_free(bb_node *n, staged *s) {
  for (size_t i = 0; i < s->n_execs; i++) {
    rt_exec *e = s->execs[i].e;
    if (!e) continue;
    for (uint32_t k = 0; k < n->graphs[e->graph].n_sites; k++) bb_val_release(e->vals[k]);
    bbi_mem_free(n->alloc, e);
  }
  for (size_t i = 0; i < s->n_bound; i++) bb_val_release(s->bound[i]);
  bbi_mem_free(n->alloc, s->execs);
  bbi_mem_free(n->alloc, s->pending);
  bbi_mem_free(n->alloc, s->timers);
  bbi_mem_free(n->alloc, s->timer_exec);
  bbi_mem_free(n->alloc, s->bound);
}

/* The staged execution with this id (all read, in increasing ids), or NULL. */
static staged_exec *find_staged(const staged *s, uint64_t id) {
  size_t lo = 0, hi = s->n_execs;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->execs[mid].e->id < id) lo = mid + 1;
    else hi = mid;
  }
  return lo < s->n_execs && s->execs[lo].e->id == id ? &s->execs[lo] : NULL;
}

static void read_exec(bb_node *n, reader *r, staged *s, size_t k) {
  uint64_t id = get_u64(r);
  uint32_t graph = get_u32(r);
  if (r->rc) return;
  if (graph >= n->n_graphs || !n->graphs[graph].active || !id || id >= n->next_exec ||
      (k && id <= s->execs[k - 1].e->id)) {
    bad(r, "an execution names a graph this node does not run, or an id out of order");
    return;
  }
  const rt_graph *g = &n->graphs[graph];
  size_t sites = g->n_sites, bits = (g->n_ops + 7) / 8;
  rt_exec *e = rt_exec_alloc(n, graph);
  if (!e) {
    r->rc = bb_error_set(r->err, BB_ERR_NOMEM, "restore: out of memory");
    return;
  }
  s->execs[k].e = e;
  e->id = id;
  s->execs[k].parent = get_u64(r);
  e->call_op = get_u32(r);
  e->born_ns = get_u64(r);
  e->deadline_at = get_u64(r);
  e->has_src = get_u8(r);
  if (e->has_src) get_peer(r, &e->src);
  e->wire_req_id = get_u64(r);
  e->bootstrap = get_u8(r);
  e->target = (int)get_u32(r);
  take(r, e->scheduled, bits);
  if (!r->rc && (e->target < -1 || e->target >= (int)n->n_targets)) bad(r, "an execution names an unknown target");
  uint32_t values = get_u32(r);
  if (!r->rc && values > sites) bad(r, "an execution holds more values than its graph has sites");
  for (uint32_t i = 0; i < values && !r->rc; i++) {
    uint32_t site = get_u32(r);
    uint64_t charged = get_u64(r);
    if (!r->rc && (site >= sites || e->vals[site])) {
      bad(r, "a value names a bad site");
      return;
    }
    bb_val *v = get_value(r, n->alloc);
    if (!v) return;
    e->vals[site] = v;
    e->charged[site] = (size_t)charged;
  }
}

static void read_engine(bb_node *n, reader *r, staged *s) {
  s->n_execs = get_count(r, 40, "too many executions for the bytes left");
  s->execs = bbi_mem_calloc(n->alloc, s->n_execs + 1, sizeof *s->execs);
  if (!s->execs) {
    s->n_execs = 0;
    out_of_memory(r);
    return;
  }
  for (size_t k = 0; k < s->n_execs && !r->rc; k++) read_exec(n, r, s, k);
  /* parents must be captured executions of this snapshot */
  for (size_t k = 0; k < s->n_execs && !r->rc; k++) {
    rt_exec *e = s->execs[k].e;
    if (!s->execs[k].parent) continue;
    staged_exec *caller = find_staged(s, s->execs[k].parent);
    rt_exec *p = caller ? caller->e : NULL;
    if (caller) caller->holds++;
    if (!p || p == e || e->call_op >= n->graphs[p->graph].n_ops ||
        n->graphs[p->graph].ops[e->call_op].kind != RT_OP_CALL || n->graphs[p->graph].ops[e->call_op].callee != e->graph)
      bad(r, "an execution's caller is not a call of its graph in this snapshot");
  }
  s->n_pending = get_count(r, 20, "too many pending operations for the bytes left");
  s->pending = bbi_mem_calloc(n->alloc, s->n_pending + 1, sizeof *s->pending);
  if (!s->pending && !r->rc) r->rc = bb_error_set(r->err, BB_ERR_NOMEM, "restore: out of memory");
  for (size_t i = 0; i < s->n_pending && !r->rc; i++) {
    s->pending[i].command = get_u64(r);
    staged_exec *held = find_staged(s, get_u64(r));
    rt_exec *e = held ? held->e : NULL;
    if (held) held->holds++;
    s->pending[i].op = get_u32(r);
    s->pending[i].exec = e;
    if (!r->rc && (!e || s->pending[i].op >= n->graphs[e->graph].n_ops || !s->pending[i].command ||
                   s->pending[i].command >= n->next_command))
      bad(r, "a pending operation names an unknown execution, op or command");
    for (size_t k = 0; k < i && !r->rc; k++)
      if (s->pending[k].command == s->pending[i].command) bad(r, "two pending operations wait for one command");
  }
  s->n_timers = get_count(r, 41, "too many timers for the bytes left");
  s->timers = bbi_mem_calloc(n->alloc, s->n_timers + 1, sizeof *s->timers);
  s->timer_exec = bbi_mem_calloc(n->alloc, s->n_timers + 1, sizeof *s->timer_exec);
  if ((!s->timers || !s->timer_exec) && !r->rc) r->rc = bb_error_set(r->err, BB_ERR_NOMEM, "restore: out of memory");
  for (size_t i = 0; i < s->n_timers && !r->rc; i++) {
    rt_timer *t = &s->timers[i];
    t->at = get_u64(r);
    t->seq = get_u64(r);
    t->kind = (rt_timer_kind)get_u8(r);
    t->id = get_u64(r);
    t->op = get_u32(r);
    t->component = get_u32(r);
    s->timer_exec[i] = get_u64(r);
    if (r->rc) break;
    if (t->kind == RT_TIMER_INTERVAL) {
      staged_exec *held = find_staged(s, s->timer_exec[i]);
      if (held) held->holds++;
      t->exec = held ? held->e : NULL;
      if (!t->exec || t->op >= n->graphs[t->exec->graph].n_ops) bad(r, "an interval timer names an unknown execution");
    } else if (t->kind == RT_TIMER_COMPONENT) {
      if (t->component >= n->n_components || s->timer_exec[i]) bad(r, "a component timer names an unknown component");
    } else if (t->kind != RT_TIMER_COMPLETE || s->timer_exec[i]) {
      bad(r, "a timer has an unknown kind");
    }
  }
}

static size_t charged_bytes(const bb_node *n, const rt_exec *e) {
  size_t total = 0;
  for (uint32_t i = 0; i < n->graphs[e->graph].n_sites; i++) total += e->charged[i];
  return total;
}

/* A component's fresh state, kept while restore can still be refused. */
typedef struct kept_state {
  uint8_t *bytes;
  size_t len;
  bool valid;
} kept_state;

int bb_node_restore(bb_node *n, const uint8_t *data, size_t len, bb_error *err) {
  if (n->n_execs || n->n_timers || n->n_pending || n->frontier.len || n->ingress.len || n->bootstrap_started)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "restore: the node has already run; restore into a freshly installed node");
  if (len < 16 || memcmp(data, MAGIC, 8) != 0) return bb_error_set(err, BB_ERR_MALFORMED, "restore: not a snapshot");
  if (bbi_fnv1a64(data, len - 8) != bb_le_get_u64(data + len - 8))
    return bb_error_set(err, BB_ERR_MALFORMED, "restore: the snapshot's checksum does not match (corrupted bytes)");
  reader r = {bb_le_reader_of(data, len - 8), err, 0}; /* the checksum is not content */
  take(&r, NULL, 8);
  uint32_t version = get_u32(&r);
  if (version != VERSION && version != 1) return bad(&r, "an unknown snapshot version");
  uint32_t graphs = get_u32(&r);
  uint64_t sites = get_u64(&r), th = get_u64(&r);
  bb_peer_id self;
  get_peer(&r, &self);
  if (r.rc) return r.rc;
  if (graphs != n->n_graphs || sites != n->n_sites)
    return bb_error_set(err, BB_ERR_MALFORMED,
                        "restore: the snapshot was taken with an artifact of %u graphs and %llu sites; this node "
                        "runs one of %u graphs and %llu sites",
                        graphs, (unsigned long long)sites, n->n_graphs, (unsigned long long)n->n_sites);
  if (th != targets_hash(n))
    return bb_error_set(err, BB_ERR_MALFORMED,
                        "restore: the snapshot was taken with other targets than this node's %zu (first: `%s`)",
                        n->n_targets, n->n_targets ? n->targets[0].name : "");
  if (!bb_peer_id_equal(&self, &n->self))
    return bb_error_set(err, BB_ERR_MALFORMED, "restore: the snapshot was taken by another peer than this node");
  uint64_t now = get_u64(&r), next_exec = get_u64(&r), next_command = get_u64(&r), next_wire = get_u64(&r);
  uint64_t rng = get_u64(&r), timer_seq = get_u64(&r);
  bool boot_started = get_u8(&r);
  int boot_running = (int)get_u32(&r);
  uint64_t boot_root = get_u64(&r);
  uint8_t done[64] = {0};
  for (size_t t = 0; t < n->n_targets; t++) {
    uint8_t d = get_u8(&r);
    if (t < 64) done[t] = d;
  }
  if (!r.rc && (boot_running < -1 || boot_running >= (int)n->n_targets || n->n_targets > 64))
    bad(&r, "the bootstrap state names an unknown target");
  for (size_t t = 0; t < n->n_targets && t < 64 && !r.rc; t++)
    if (done[t] > 2 || (done[t] && n->targets[t].bootstrap < 0))
      bad(&r, "the bootstrap state of a target is not one it can be in");
  /* the clock and id counters bound what follows */
  uint64_t saved_next_exec = n->next_exec, saved_next_command = n->next_command;
  n->next_exec = next_exec;
  n->next_command = next_command;
  /* counters, book and dedup are read into temporaries */
  size_t n_counters = get_count(&r, 16, "too many counters for the bytes left");
  rt_counter *counters = bbi_mem_calloc(n->alloc, n_counters + 1, sizeof *counters);
  for (size_t i = 0; i < n_counters && counters && !r.rc; i++) {
    size_t sl;
    const uint8_t *s = get_span(&r, &sl);
    counters[i].value = get_u64(&r);
    if (r.rc) break;
    if (!sl || memchr(s, 0, sl)) {
      bad(&r, "a counter name is empty or holds NUL");
      break;
    }
    if (!(counters[i].name = bbi_mem_alloc(n->alloc, sl + 1))) break;
    memcpy(counters[i].name, s, sl);
    counters[i].name[sl] = 0;
  }
  rt_book book_saved = n->book;
  memset(&n->book, 0, sizeof n->book); /* read the book straight into a fresh one */
  uint64_t book_clock = version >= 2 ? get_u64(&r) : 0;
  size_t n_peers = get_count(&r, version >= 2 ? 34 : 17, "too many peers for the bytes left");
  if (!r.rc && n_peers > n->cfg.max_peers) bad(&r, "the address book holds more peers than this node's max_peers");
  for (size_t i = 0; i < n_peers && !r.rc; i++) {
    bb_peer_id p;
    if (!get_peer(&r, &p)) break;
    bool blocked = get_u8(&r), sent = false;
    uint64_t sent_ns = 0, last_used = i + 1; /* version 1: the order entries were made in */
    if (version >= 2) {
      sent = get_u8(&r);
      sent_ns = get_u64(&r);
      last_used = get_u64(&r);
      if (!r.rc && last_used > book_clock) bad(&r, "an address-book entry was used after the book's clock");
    }
    size_t n_addrs = get_count(&r, 8, "too many addresses for the bytes left");
    if (!r.rc && rt_book_find(&n->book, &p)) bad(&r, "the address book names a peer twice");
    rt_peer_entry *e = r.rc ? NULL : rt_book_get(n, &p);
    if (!r.rc && !e) r.rc = bb_error_set(err, BB_ERR_NOMEM, "restore: out of memory");
    if (e) {
      e->blocked = blocked;
      e->sent = sent;
      e->sent_ns = sent_ns;
    }
    for (size_t k = 0; k < n_addrs && !r.rc; k++) {
      size_t al;
      const uint8_t *ab = get_span(&r, &al);
      bb_address a;
      if (!ab && al) break;
      if (bb_address_from_bytes(ab ? ab : (const uint8_t *)"", al, &a, NULL)) {
        bad(&r, "an address of the address book is malformed");
        break;
      }
      int brc = rt_book_add(n, &p, &a);
      if (brc == BB_ERR_NOMEM) out_of_memory(&r);
      else if (brc) bad(&r, "a peer has too many addresses");
    }
    if (e) e->last_used = last_used; /* after the inserts, which count as uses */
  }
  n->book.clock = version >= 2 ? book_clock : n_peers;
  size_t n_dedup = get_count(&r, 8, "too many dedup keys for the bytes left");
  if (!r.rc && n_dedup > n->cfg.dedup_window) bad(&r, "the dedup window is larger than this node's");
  bbi_ring dedup = bbi_ring_of(sizeof(uint64_t));
  bool dedup_ok = true;
  for (size_t i = 0; i < n_dedup && dedup_ok && !r.rc; i++) {
    uint64_t key = get_u64(&r);
    dedup_ok = bbi_ring_push(&dedup, n->alloc, &key) == 0;
  }
  staged s = {0};
  size_t bound_total = 0;
  for (size_t t = 0; t < n->n_targets; t++) bound_total += n->graphs[n->targets[t].graph].n_in;
  s.bound = bbi_mem_calloc(n->alloc, bound_total + 1, sizeof *s.bound);
  s.n_bound = s.bound ? bound_total : 0;
  for (size_t i = 0; i < bound_total && s.bound && !r.rc; i++)
    if (get_u8(&r)) s.bound[i] = get_value(&r, n->alloc);
  if (!counters || !dedup_ok || !s.bound) out_of_memory(&r);
  if (!r.rc) read_engine(n, &r, &s);
  if (!r.rc && boot_root && !find_staged(&s, boot_root)) bad(&r, "the bootstrap's execution is not in the snapshot");
  /* components: checked against this node, loaded last */
  size_t n_comp = r.rc ? 0 : get_count(&r, 17, "too many components for the bytes left");
  if (!r.rc && n_comp != n->n_components) bad(&r, "the snapshot has another set of components");
  size_t comp_start = r.in.at;
  for (size_t i = 0; i < n_comp && !r.rc; i++) {
    size_t sl, tl, stl;
    const uint8_t *slot = get_span(&r, &sl), *type = get_span(&r, &tl);
    if (r.rc) break;
    const rt_component *c = &n->components[i];
    if (strlen(c->slot) != sl || memcmp(c->slot, slot, sl) || strlen(c->type->type_name) != tl ||
        memcmp(c->type->type_name, type, tl))
      bad(&r, "a component of the snapshot is not this node's (slot or type differs)");
    if (get_u8(&r)) get_span(&r, &stl);
  }
  if (!r.rc && bb_le_left(&r.in)) bad(&r, "the snapshot has trailing bytes");
  /* every staged execution must be held by something, and together they must fit this
   * node's limits */
  size_t charged = 0;
  for (size_t k = 0; k < s.n_execs && !r.rc; k++) {
    rt_exec *e = s.execs[k].e;
    if (!s.execs[k].holds) bad(&r, "an execution in the snapshot is held by nothing");
    for (uint32_t i = 0; i < n->graphs[e->graph].n_sites && !r.rc; i++) {
      if (e->charged[i] > n->cfg.ingress_byte_budget - charged)
        bad(&r, "the snapshot's values are charged more bytes than this node's ingress budget");
      charged += e->charged[i];
    }
  }
  if (!r.rc && (s.n_execs > n->cfg.max_executions || s.n_timers > n->cfg.max_timers ||
                s.n_pending > n->cfg.max_pending_async))
    bad(&r, "the snapshot holds more executions, timers or pending operations than this node's limits allow");

  /* the space the commit needs is taken now, so the commit itself cannot fail */
  rt_pending *table = NULL;
  size_t table_cap = n->cap_pending;
  bb_val **new_bound[64] = {0};
  if (!r.rc && s.n_timers && bbi_mem_grow(n->alloc, (void **)&n->timers, &n->cap_timers, s.n_timers, sizeof *n->timers))
    out_of_memory(&r);
  if (!r.rc && 2 * s.n_pending > table_cap) { /* rt_pending_add grows past half full */
    for (table_cap = 64; table_cap < 2 * s.n_pending;) table_cap *= 2;
    if (!(table = bbi_mem_calloc(n->alloc, table_cap, sizeof *table))) out_of_memory(&r);
  }
  for (size_t t = 0, b = 0; t < n->n_targets && !r.rc; t++) {
    const rt_graph *g = &n->graphs[n->targets[t].graph];
    bool any = false;
    for (uint32_t i = 0; i < g->n_in; i++) any |= s.bound[b++] != NULL;
    if (any && !n->targets[t].bound && !(new_bound[t] = bbi_mem_calloc(n->alloc, g->n_in, sizeof(bb_val *))))
      out_of_memory(&r);
  }

  /* components load their state; a component that can save keeps its fresh state first,
   * so a later refusal puts it back */
  kept_state *kept = r.rc ? NULL : bbi_mem_calloc(n->alloc, n_comp + 1, sizeof *kept);
  if (!r.rc && !kept) out_of_memory(&r);
  if (!r.rc) r.in.at = comp_start;
  for (size_t i = 0; i < n_comp && !r.rc; i++) {
    size_t sl, tl, stl = 0;
    get_span(&r, &sl);
    get_span(&r, &tl);
    bool saved = get_u8(&r);
    const uint8_t *state = saved ? get_span(&r, &stl) : NULL;
    rt_component *c = &n->components[i];
    if (!saved || !c->type->load) continue;
    bb_error cerr;
    bb_error_clear(&cerr);
    int crc = c->type->save ? c->type->save(c->self, n->alloc, &kept[i].bytes, &kept[i].len, &cerr) : 0;
    if (crc) {
      r.rc = bb_error_set(err, crc, "restore: `%s` (slot `%s`) could not save its fresh state: %s",
                          c->type->type_name, c->slot, cerr.message);
      break;
    }
    kept[i].valid = c->type->save != NULL;
    crc = c->type->load(c->self, state ? state : (const uint8_t *)"", stl, &cerr);
    if (crc)
      r.rc = bb_error_set(err, crc, "restore: `%s` (slot `%s`) refused its state: %s", c->type->type_name, c->slot,
                          cerr.message);
  }
  for (size_t i = 0; kept && i < n_comp; i++) {
    if (r.rc && kept[i].valid) {
      bb_error ignored;
      rt_component *c = &n->components[i];
      c->type->load(c->self, kept[i].bytes ? kept[i].bytes : (const uint8_t *)"", kept[i].len, &ignored);
    }
    bbi_mem_free(n->alloc, kept[i].bytes);
  }
  bbi_mem_free(n->alloc, kept);

  if (r.rc) {
    bbi_mem_free(n->alloc, table);
    for (size_t t = 0; t < 64; t++) bbi_mem_free(n->alloc, new_bound[t]);
    staged_free(n, &s);
    for (size_t i = 0; i < n_counters && counters; i++) bbi_mem_free(n->alloc, counters[i].name);
    bbi_mem_free(n->alloc, counters);
    bbi_ring_free(&dedup, n->alloc);
    rt_book_free(n);
    n->book = book_saved;
    n->next_exec = saved_next_exec;
    n->next_command = saved_next_command;
    return r.rc;
  }

  /* commit */
  if (table) {
    bbi_mem_free(n->alloc, n->pending); /* a fresh node's table holds nothing */
    n->pending = table;
    n->cap_pending = table_cap;
  }
  rt_book old = book_saved;
  for (size_t i = 0; i < old.len; i++) bbi_mem_free(n->alloc, old.items[i].addrs);
  bbi_mem_free(n->alloc, old.items);
  bbi_mem_free(n->alloc, old.slots);
  for (size_t i = 0; i < n->n_counters; i++) bbi_mem_free(n->alloc, n->counters[i].name);
  bbi_mem_free(n->alloc, n->counters);
  n->counters = counters;
  n->n_counters = n->cap_counters = n_counters;
  bbi_ring_free(&n->dedup, n->alloc);
  n->dedup = dedup;
  n->now = now;
  n->next_wire_req = next_wire;
  n->rng = rng;
  n->bootstrap_started = boot_started;
  n->bootstrap_running = boot_running;
  for (size_t t = 0; t < n->n_targets; t++) {
    n->targets[t].bootstrap_done = done[t] == 1;
    n->targets[t].bootstrap_wanted = done[t] == 2;
  }
  for (size_t t = 0, b = 0; t < n->n_targets; t++) {
    const rt_graph *g = &n->graphs[n->targets[t].graph];
    if (new_bound[t]) n->targets[t].bound = new_bound[t];
    for (uint32_t i = 0; i < g->n_in; i++, b++) {
      if (n->targets[t].bound) {
        bb_val_release(n->targets[t].bound[i]);
        n->targets[t].bound[i] = s.bound[b];
      } else {
        bb_val_release(s.bound[b]); /* NULL: no target without an array has a bound input */
      }
      s.bound[b] = NULL;
    }
  }
  /* executions: each child holds its caller; pending operations and timers take their
   * own references as they are re-added (neither can fail: their room is reserved) */
  for (size_t k = 0; k < s.n_execs; k++) {
    rt_exec *e = s.execs[k].e;
    if (s.execs[k].parent) {
      e->parent = find_staged(&s, s.execs[k].parent)->e;
      e->parent->refs++;
    }
    n->ingress_bytes += charged_bytes(n, e);
    if (e->id == boot_root) n->bootstrap_root = e;
    n->n_execs++;
  }
  for (size_t i = 0; i < s.n_pending; i++) (void)rt_pending_add(n, s.pending[i].command, s.pending[i].exec, s.pending[i].op);
  for (size_t i = 0; i < s.n_timers; i++) {
    n->timer_seq = s.timers[i].seq; /* keep each timer's place among equals */
    (void)rt_timer_add(n, s.timers[i].at, s.timers[i].kind, s.timers[i].id, s.timers[i].exec, s.timers[i].op,
                       s.timers[i].component);
  }
  n->timer_seq = timer_seq;
  for (size_t k = 0; k < s.n_execs; k++) s.execs[k].e = NULL; /* the node owns them now */
  staged_free(n, &s);
  return 0;
}
