/* Snapshots: a quiescent node's whole state as bytes, and back (docs/RUNTIME.md,
 * "Snapshots"). Parked work is captured — executions held by timers (an Interval loop),
 * by pending operations or by running calls — so a restored node continues exactly where
 * the first one stopped.
 *
 * Format (little-endian): "BBSNAP1\0", u32 version, the artifact's shape (graphs, sites,
 * a hash of the targets) and the peer id, then one section per part in a fixed order —
 * the node's clock and id counters, the bootstrap state, counters (steps.h), the address
 * book (book.h), the replay window (replay.h), bound inputs, executions (engine_save.h),
 * pending operations (pending.h), timers (timers.h), components (components.h) — and a
 * final FNV-1a-64 of everything before it. Each part writes and reads its own section
 * beside its data; restore reads every part into a staged copy, checks the whole, and
 * only then hands the copies to the node, so a refused snapshot changes nothing. */
#include <string.h>

#include "runtime/engine_save.h"
#include "bb/common.h"
#include "util/hash.h"
#include "util/mem.h"

#define MAGIC "BBSNAP1"
#define VERSION 2u /* 2 added each address-book entry's send time and use tick; 1 is still read */

/* FNV-1a-64 over the target names, each followed by a 0xff byte (no name holds one). */
static uint64_t targets_hash(const bb_node *n) {
  uint64_t h = BBI_FNV1A64_INIT;
  for (size_t t = 0; t < n->n_targets; t++) {
    h = bbi_fnv1a64_update(h, n->targets[t].name, strlen(n->targets[t].name));
    h = bbi_fnv1a64_update(h, "\xff", 1);
  }
  return h;
}

/* ---- the node's own sections -------------------------------------------------------------- */

static void save_header(const bb_node *n, bb_le_writer *w) {
  bb_le_write(w, MAGIC, 8);
  bb_le_write_u32(w, VERSION);
  bb_le_write_u32(w, n->n_graphs);
  bb_le_write_u64(w, n->n_sites);
  bb_le_write_u64(w, targets_hash(n));
  rt_write_peer(w, &n->self);
}

/* The clock and every id counter (the timer heap's among them). */
static void save_ids(const bb_node *n, bb_le_writer *w) {
  bb_le_write_u64(w, n->now);
  bb_le_write_u64(w, n->next_exec);
  bb_le_write_u64(w, n->next_command);
  bb_le_write_u64(w, n->next_wire_req);
  bb_le_write_u64(w, n->rng);
  bb_le_write_u64(w, n->timers.seq);
}

/* Whether bootstraps started, which runs and its root execution, then per target 1 its
 * bootstrap is done, 2 it is chosen to run, 0 neither. */
static void save_bootstrap(const bb_node *n, bb_le_writer *w) {
  bb_le_write_u8(w, n->bootstrap_started);
  bb_le_write_u32(w, (uint32_t)n->bootstrap_running);
  bb_le_write_u64(w, n->bootstrap_root ? n->bootstrap_root->id : 0);
  for (size_t t = 0; t < n->n_targets; t++)
    bb_le_write_u8(w, n->targets[t].bootstrap_done ? 1 : n->targets[t].bootstrap_wanted ? 2 : 0);
}

/* Per target and formal input: whether a value is bound, and the value. */
static void save_bound(const bb_node *n, bb_le_writer *w) {
  for (size_t t = 0; t < n->n_targets; t++) {
    const rt_graph *g = &n->graphs[n->targets[t].graph];
    for (uint32_t i = 0; i < g->n_in; i++) {
      const bb_val *v = n->targets[t].bound ? n->targets[t].bound[i] : NULL;
      bb_le_write_u8(w, v != NULL);
      if (v) rt_write_value(w, v);
    }
  }
}

/* ---- snapshot ----------------------------------------------------------------------------- */

static int refuse_busy(const bb_node *n, bb_error *err) {
  return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                      "snapshot: the node is busy (%zu ops ready, %zu events queued, %zu envelopes and %zu steps "
                      "not handed out); poll until bb_node_has_work is false",
                      n->frontier.len, n->ingress.events.len, n->outbound.items.len, n->acc.len);
}

int bb_node_snapshot(const bb_node *n, uint8_t **out, size_t *len, bb_error *err) {
  if (n->frontier.len || n->ingress.events.len || n->outbound.items.len || n->acc.len) return refuse_busy(n, err);
  rt_exec_list live = {0};
  if (rt_execs_live(n, &live)) {
    rt_exec_list_free(n, &live);
    return bb_error_set(err, BB_ERR_NOMEM, "snapshot: out of memory");
  }
  bb_le_writer w = bb_le_writer_growing(n->alloc);
  save_header(n, &w);
  save_ids(n, &w);
  save_bootstrap(n, &w);
  rt_counters_save(&n->counters, &w);
  rt_book_save(&n->book, &w);
  rt_replay_save(&n->replay, &w);
  save_bound(n, &w);
  rt_execs_save(n, &live, &w);
  rt_pending_save(&n->pending, &w);
  rt_timers_save(&n->timers, &w);
  int rc = rt_components_save(&n->components, &w, err);
  rt_exec_list_free(n, &live);
  bb_le_write_u64(&w, w.failed ? 0 : bbi_fnv1a64(w.buf, w.len));
  if (!rc && w.failed) rc = bb_error_set(err, BB_ERR_NOMEM, "snapshot: out of memory");
  if (rc) {
    bbi_mem_free(n->alloc, w.buf);
    return rc;
  }
  *out = w.buf;
  *len = w.len;
  return 0;
}

/* ---- restore ------------------------------------------------------------------------------- */

/* Every part read from the snapshot, not yet the node's. */
typedef struct staged {
  uint32_t version;
  uint64_t now, next_exec, next_command, next_wire_req, rng, timer_seq;
  bool boot_started;
  int boot_running;
  uint64_t boot_root;
  uint8_t *boot_flags; /* per target, as save_bootstrap wrote them */
  rt_counters counters;
  rt_book book;
  rt_replay replay;
  bb_val **bound;       /* per target and input, flattened */
  bb_val ***bound_room; /* per target without a bound array that gets values: the array */
  rt_staged_execs execs;
  rt_pending_table pending;
  rt_timers timers;
} staged;

static void staged_init(staged *s, bb_node *n) {
  memset(s, 0, sizeof *s);
  rt_counters_init(&s->counters, n->alloc);
  rt_book_init(&s->book, n->alloc, n->cfg.max_peers, &n->self, &n->counters);
  rt_replay_init(&s->replay, n->alloc, n->cfg.dedup_window);
  s->execs.node = n;
  rt_pending_init(&s->pending, n->alloc);
  rt_timers_init(&s->timers, n->alloc, n->cfg.max_timers, NULL);
}

static size_t bound_count(const bb_node *n) {
  size_t total = 0;
  for (size_t t = 0; t < n->n_targets; t++) total += n->graphs[n->targets[t].graph].n_in;
  return total;
}

static void staged_free(bb_node *n, staged *s) {
  bbi_mem_free(n->alloc, s->boot_flags);
  rt_counters_free(&s->counters);
  rt_book_free(&s->book);
  rt_replay_free(&s->replay);
  for (size_t i = 0; s->bound && i < bound_count(n); i++) bb_val_release(s->bound[i]);
  bbi_mem_free(n->alloc, s->bound);
  for (size_t t = 0; s->bound_room && t < n->n_targets; t++) bbi_mem_free(n->alloc, s->bound_room[t]);
  bbi_mem_free(n->alloc, s->bound_room);
  rt_pending_free(&s->pending);
  rt_timers_free(&s->timers);
  rt_staged_free(&s->execs);
}

/* The magic and checksum, then the version, the artifact's shape and the peer id. */
static int load_header(const bb_node *n, rt_reader *r, staged *s, size_t len) {
  if (len < 16 || memcmp(r->in.p, MAGIC, 8) != 0)
    return bb_error_set(r->err, BB_ERR_MALFORMED, "restore: not a snapshot");
  if (bbi_fnv1a64(r->in.p, len - 8) != bb_le_get_u64(r->in.p + len - 8))
    return bb_error_set(r->err, BB_ERR_MALFORMED, "restore: the snapshot's checksum does not match (corrupted bytes)");
  r->in.len = len - 8; /* the checksum is not content */
  rt_read_take(r, NULL, 8);
  s->version = rt_read_u32(r);
  if (!r->rc && s->version != VERSION && s->version != 1) return rt_read_bad(r, "an unknown snapshot version");
  uint32_t graphs = rt_read_u32(r);
  uint64_t sites = rt_read_u64(r), th = rt_read_u64(r);
  bb_peer_id self;
  if (!rt_read_peer(r, &self)) return r->rc;
  if (graphs != n->n_graphs || sites != n->n_sites)
    return bb_error_set(r->err, BB_ERR_MALFORMED,
                        "restore: the snapshot was taken with an artifact of %u graphs and %llu sites; this node "
                        "runs one of %u graphs and %llu sites",
                        graphs, (unsigned long long)sites, n->n_graphs, (unsigned long long)n->n_sites);
  if (th != targets_hash(n))
    return bb_error_set(r->err, BB_ERR_MALFORMED,
                        "restore: the snapshot was taken with other targets than this node's %zu (first: `%s`)",
                        n->n_targets, n->n_targets ? n->targets[0].name : "");
  if (!bb_peer_id_equal(&self, &n->self))
    return bb_error_set(r->err, BB_ERR_MALFORMED, "restore: the snapshot was taken by another peer than this node");
  return 0;
}

static void load_ids(rt_reader *r, staged *s) {
  s->now = rt_read_u64(r);
  s->next_exec = rt_read_u64(r);
  s->next_command = rt_read_u64(r);
  s->next_wire_req = rt_read_u64(r);
  s->rng = rt_read_u64(r);
  s->timer_seq = rt_read_u64(r);
}

static int load_bootstrap(const bb_node *n, rt_reader *r, staged *s) {
  s->boot_started = rt_read_u8(r);
  s->boot_running = (int)rt_read_u32(r);
  s->boot_root = rt_read_u64(r);
  if (!r->rc && !(s->boot_flags = bbi_mem_calloc(n->alloc, n->n_targets + 1, 1))) return rt_read_nomem(r);
  rt_read_take(r, s->boot_flags, n->n_targets);
  if (!r->rc && (s->boot_running < -1 || s->boot_running >= (int)n->n_targets))
    return rt_read_bad(r, "the bootstrap state names an unknown target");
  for (size_t t = 0; t < n->n_targets && !r->rc; t++)
    if (s->boot_flags[t] > 2 || (s->boot_flags[t] && n->targets[t].bootstrap < 0))
      return rt_read_bad(r, "the bootstrap state of a target is not one it can be in");
  return r->rc;
}

/* Reads the bound inputs and reserves the arrays of targets that had none. */
static int load_bound(const bb_node *n, rt_reader *r, staged *s) {
  size_t total = bound_count(n);
  s->bound = bbi_mem_calloc(n->alloc, total + 1, sizeof *s->bound);
  s->bound_room = bbi_mem_calloc(n->alloc, n->n_targets + 1, sizeof *s->bound_room);
  if (!s->bound || !s->bound_room) return rt_read_nomem(r);
  for (size_t i = 0; i < total && !r->rc; i++)
    if (rt_read_u8(r)) s->bound[i] = rt_read_value(r);
  for (size_t t = 0, b = 0; t < n->n_targets && !r->rc; t++) {
    uint32_t n_in = n->graphs[n->targets[t].graph].n_in;
    bool any = false;
    for (uint32_t i = 0; i < n_in; i++) any |= s->bound[b++] != NULL;
    if (any && !n->targets[t].bound && !(s->bound_room[t] = bbi_mem_calloc(n->alloc, n_in, sizeof(bb_val *))))
      return rt_read_nomem(r);
  }
  return r->rc;
}

/* Reads every part into s and checks the whole; the components' section is only checked
 * (its start is kept in *components_at). */
static int load_parts(bb_node *n, rt_reader *r, staged *s, size_t *components_at) {
  load_ids(r, s);
  load_bootstrap(n, r, s);
  rt_counters_load(&s->counters, r);
  rt_book_load(&s->book, r, s->version);
  rt_replay_load(&s->replay, r);
  if (!r->rc) load_bound(n, r, s);
  if (!r->rc) rt_execs_load(&s->execs, r, s->next_exec);
  if (!r->rc && s->boot_root && !rt_staged_find(&s->execs, s->boot_root))
    rt_read_bad(r, "the bootstrap's execution is not in the snapshot");
  rt_exec_lookup held = rt_staged_lookup(&s->execs);
  if (!r->rc) rt_pending_load(&s->pending, r, &held, s->next_command, n->cfg.max_pending_async);
  if (!r->rc) rt_timers_load(&s->timers, r, &held, n->components.len);
  *components_at = r->in.at;
  if (!r->rc) rt_components_check(&n->components, r);
  if (!r->rc && bb_le_left(&r->in)) rt_read_bad(r, "the snapshot has trailing bytes");
  if (!r->rc) rt_execs_check(&s->execs, r);
  return r->rc;
}

static void commit_bound(bb_node *n, staged *s) {
  for (size_t t = 0, b = 0; t < n->n_targets; t++) {
    rt_target *tg = &n->targets[t];
    uint32_t n_in = n->graphs[tg->graph].n_in;
    if (s->bound_room[t]) tg->bound = s->bound_room[t], s->bound_room[t] = NULL;
    for (uint32_t i = 0; i < n_in; i++, b++) {
      if (tg->bound) {
        bb_val_release(tg->bound[i]);
        tg->bound[i] = s->bound[b];
      } else {
        bb_val_release(s->bound[b]); /* NULL: no target without an array has a bound input */
      }
      s->bound[b] = NULL;
    }
  }
}

/* Hands every staged part to the node (cannot fail: their room is taken). */
static void commit(bb_node *n, staged *s) {
  n->now = s->now;
  n->next_exec = s->next_exec;
  n->next_command = s->next_command;
  n->next_wire_req = s->next_wire_req;
  n->rng = s->rng;
  n->bootstrap_started = s->boot_started;
  n->bootstrap_running = s->boot_running;
  for (size_t t = 0; t < n->n_targets; t++) {
    n->targets[t].bootstrap_done = s->boot_flags[t] == 1;
    n->targets[t].bootstrap_wanted = s->boot_flags[t] == 2;
  }
  n->bootstrap_root = s->boot_root ? rt_staged_find(&s->execs, s->boot_root) : NULL;
  rt_counters_free(&n->counters);
  n->counters = s->counters;
  rt_counters_init(&s->counters, n->alloc);
  rt_book_free(&n->book);
  n->book = s->book;
  rt_book_init(&s->book, n->alloc, 0, NULL, NULL);
  rt_replay_free(&n->replay);
  n->replay = s->replay;
  rt_replay_init(&s->replay, n->alloc, 0);
  commit_bound(n, s);
  rt_execs_commit(n, &s->execs);
  rt_pending_free(&n->pending);
  n->pending = s->pending;
  rt_pending_init(&s->pending, n->alloc);
  rt_timers_free(&n->timers);
  s->timers.seq = s->timer_seq;
  s->timers.counters = &n->counters;
  n->timers = s->timers;
  rt_timers_init(&s->timers, n->alloc, 0, NULL);
}

int bb_node_restore(bb_node *n, const uint8_t *data, size_t len, bb_error *err) {
  if (n->n_execs || n->timers.len || n->pending.len || n->frontier.len || n->ingress.events.len || n->bootstrap_started)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "restore: the node has already run; restore into a freshly installed node");
  rt_reader r = rt_reader_of(data, len, n->alloc, err);
  staged s;
  staged_init(&s, n);
  size_t components_at = 0;
  int rc = load_header(n, &r, &s, len);
  if (rc) {
    staged_free(n, &s);
    return rc;
  }
  if (!load_parts(n, &r, &s, &components_at)) {
    r.in.at = components_at;
    rt_components_load(&n->components, &r); /* last: a refusal puts the fresh states back */
  }
  if (!r.rc) commit(n, &s);
  staged_free(n, &s);
  return r.rc;
}
