/* Framework ops (runtime.md §5): structure, triggers, time, gates, telemetry, bundles and
 * the address book. Each takes its inputs and writes its outputs by position. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bb/tensor.h"
#include "runtime/node.h"

/* ---- helpers ------------------------------------------------------------------------- */

static bb_val *first_input(const rt_call *c) {
  for (size_t i = 0; i < c->n_in; i++)
    if (c->in[i]) return c->in[i];
  return NULL;
}

static int need_input(rt_call *c, bb_error *err) {
  c->reason = "missing_input";
  return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s requires an input", c->op->ir->op_type);
}

static int nomem(bb_error *err) { return bb_error_set(err, BB_ERR_NOMEM, "out of memory"); }

/* Sets output 0 to v (a new reference; NULL: out of memory). A node recorded without
 * outputs still runs: the value is dropped. */
static int put_output(rt_call *c, bb_val *v, bb_error *err) {
  if (!v) return nomem(err);
  if (c->n_out) c->out[0] = v;
  else bb_val_release(v);
  return 0;
}

static int emit_trigger(rt_call *c, bb_error *err) { return put_output(c, bb_val_trigger(c->node->alloc), err); }

static int64_t attr_int(const rt_call *c, const char *name, int64_t dflt) {
  return bb_attr_get_int(&c->op->ir->attrs, name, dflt);
}

static const char *attr_string(const rt_call *c, const char *name) {
  return bb_attr_get_string(&c->op->ir->attrs, name, NULL);
}

/* A `peer` attribute (the peer's multihash bytes). */
static int attr_peer(rt_call *c, bb_peer_id *out, bb_error *err) {
  const bb_attr *a = bb_attr_find(&c->op->ir->attrs, "peer");
  if (!a || !a->has_s) {
    c->reason = "missing_attribute";
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s needs a `peer` attribute", c->op->ir->op_type);
  }
  return bb_peer_id_from_bytes(a->s.data, a->s.len, out, err);
}

static bool peer_blocked(const bb_node *n, const bb_peer_id *p) {
  const rt_peer_entry *e = rt_book_find(&n->book, p);
  return e && e->blocked;
}

/* ---- structure ------------------------------------------------------------------------- */

static int sys_pass_through(rt_call *c, bb_error *err) {
  bb_val *v = first_input(c);
  if (!v) return need_input(c, err);
  return put_output(c, bb_val_retain(v), err);
}

static int sys_tee(rt_call *c, bb_error *err) {
  bb_val *v = first_input(c);
  if (!v) return need_input(c, err);
  for (size_t i = 0; i < c->n_out; i++) c->out[i] = bb_val_retain(v);
  return 0;
}

static int sys_constant(rt_call *c, bb_error *err) {
  const bb_attr *a = bb_attr_find(&c->op->ir->attrs, "value");
  if (!a || !a->t) {
    c->reason = "missing_attribute";
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "Constant needs a TENSOR `value` attribute");
  }
  bb_tensor *t;
  int rc = bb_tensor_from_proto(a->t, c->node->alloc, &t, err);
  if (rc) return rc;
  bb_val *v = bb_val_tensor(c->node->alloc, t);
  bb_tensor_release(t);
  return put_output(c, v, err);
}

static int sys_trigger(rt_call *c, bb_error *err) { return emit_trigger(c, err); }

static int sys_on_trigger(rt_call *c, bb_error *err) {
  if (!first_input(c)) return need_input(c, err);
  return emit_trigger(c, err);
}

static int sys_gate(rt_call *c, bb_error *err) {
  if (!c->n_in || !c->in[0]) return need_input(c, err);
  return put_output(c, bb_val_retain(c->in[0]), err);
}

static int sys_any(rt_call *c, bb_error *err) {
  bb_val *v = first_input(c);
  if (!v) return 0; /* nothing arrived: absorb */
  const char *group = attr_string(c, "group");
  if (group && *group) {
    char key[300];
    snprintf(key, sizeof key, "any.%s", group);
    if (bb_node_counter(c->node, key)) return 0; /* this group already fired */
    rt_count(c->node, key, 1);
  }
  return put_output(c, bb_val_retain(v), err);
}

/* ---- time ----------------------------------------------------------------------------------- */

static int sys_clock(rt_call *c, bb_error *err) {
  return put_output(c, bb_val_u64(c->node->alloc, BB_VAL_TIMESTAMP, c->now), err);
}

static int sys_rng(rt_call *c, bb_error *err) {
  bb_ctx ctx = {c->node, NULL, c->exec, c->now, 0, NULL};
  return put_output(c, bb_val_u64(c->node->alloc, BB_VAL_U64, bb_ctx_random(&ctx)), err);
}

/* Parks the op until now + delay, then completes it with a trigger. */
static int park_until(rt_call *c, const char *attr, bb_error *err) {
  int64_t delay = attr_int(c, attr, 0);
  if (delay < 0) delay = 0;
  uint64_t command = c->node->next_command++;
  int rc = rt_timer_add(c->node, c->now + (uint64_t)delay, RT_TIMER_COMPLETE, command, NULL, 0, 0);
  if (rc) {
    c->reason = "timer_limit";
    return bb_error_set(err, rc, "%s: %s", c->op->ir->op_type, rc == BB_ERR_LIMIT ? "too many timers" : "out of memory");
  }
  c->command = command;
  return BB_LATER;
}

static int sys_after(rt_call *c, bb_error *err) { return park_until(c, "delay_ns", err); }
static int sys_sleep(rt_call *c, bb_error *err) { return park_until(c, "duration_ns", err); }

static int sys_interval(rt_call *c, bb_error *err) {
  int64_t period = attr_int(c, "period_ns", 1000000000);
  if (period <= 0) {
    c->reason = "bad_attribute";
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "Interval: period_ns must be positive (got %" PRId64 ")", period);
  }
  int rc = rt_timer_add(c->node, c->now + (uint64_t)period, RT_TIMER_INTERVAL, 0, c->exec, c->op_index, 0);
  if (rc) {
    c->reason = "timer_limit";
    return bb_error_set(err, rc, "Interval: %s", rc == BB_ERR_LIMIT ? "too many timers" : "out of memory");
  }
  return put_output(c, bb_val_u64(c->node->alloc, BB_VAL_TIMESTAMP, c->now), err);
}

/* Deadlines are relative (runtime.md §2.14, [PORT]): to the start of the execution, or
 * the absolute time an inbound envelope's remaining deadline gives. */
static int sys_deadline_check(rt_call *c, bb_error *err) {
  const rt_exec *e = c->exec;
  int64_t d = c->op->deadline_ns;
  if (d <= 0 && !e->deadline_at) {
    c->reason = "missing_attribute";
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "DeadlineCheck needs a positive `deadline_ns` attribute");
  }
  uint64_t at = d > 0 ? e->born_ns + (uint64_t)d : UINT64_MAX;
  if (e->deadline_at && e->deadline_at < at) at = e->deadline_at;
  if (c->now >= at) {
    c->reason = "deadline_exceeded";
    return bb_error_set(err, BB_ERR_LIMIT, "deadline exceeded: %" PRIu64 " ns after the execution began (budget %" PRIu64
                                           " ns)", c->now - e->born_ns, at - e->born_ns);
  }
  return emit_trigger(c, err);
}

/* DeadlineMatch: the race between a result and its timeout resolves once per execution.
 * The engine fires an op once per execution, except that an Interval tick re-arms what
 * depends on it in the same execution; so the first firing is latched by (execution, op).
 * Only an execution an Interval can still re-arm can fire the op again, so a full table
 * keeps just those entries (and this execution's) before it grows: memory stays flat. */
struct rt_latch {
  uint64_t exec;
  uint32_t op;
};

/* True while an Interval can still re-arm the execution: its timer waits, or the tick
 * that fired it is queued to run (between the two the execution holds no timer). */
static bool exec_may_rerun(const bb_node *n, uint64_t exec) {
  for (size_t i = 0; i < n->n_timers; i++)
    if (n->timers[i].kind == RT_TIMER_INTERVAL && n->timers[i].exec && n->timers[i].exec->id == exec) return true;
  for (size_t k = 0; k < n->frontier.len; k++)
    if (((const rt_task *)bb_ring_at(&n->frontier, k))->exec->id == exec) return true;
  return false;
}

static void prune_latches(bb_node *n, uint64_t current) {
  size_t kept = 0;
  for (size_t i = 0; i < n->n_latches; i++)
    if (n->latches[i].exec == current || exec_may_rerun(n, n->latches[i].exec)) n->latches[kept++] = n->latches[i];
  n->n_latches = kept;
}

static int sys_deadline_match(rt_call *c, bb_error *err) {
  if (!first_input(c)) {
    c->reason = "missing_input";
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "DeadlineMatch requires at least one input");
  }
  bb_node *n = c->node;
  for (size_t i = 0; i < n->n_latches; i++)
    if (n->latches[i].exec == c->exec->id && n->latches[i].op == c->op_index) return 0; /* lost the race: absorb */
  if (n->n_latches == n->cap_latches) {
    prune_latches(n, c->exec->id);
    if (n->n_latches >= n->cap_latches / 2 && /* grow only when pruning freed too little */
        bb_mem_grow(n->alloc, (void **)&n->latches, &n->cap_latches, n->n_latches + 1, sizeof *n->latches))
      return nomem(err);
  }
  n->latches[n->n_latches++] = (struct rt_latch){c->exec->id, c->op_index};
  return emit_trigger(c, err);
}

/* ---- named state: Limit counters, Serialize queues, Hold slots, Record histories ------- */

typedef enum rt_named_kind { RT_LIMIT, RT_QUEUE, RT_HOLD, RT_RECORD, RT_NAMED_KINDS } rt_named_kind;

#define RT_MAX_NAMES 1024 /* names per kind */

/* What each kind keeps per name: a counter, or a history of at most history_max Bytes values
 * (a push past it evicts the oldest). */
static const struct {
  char tag;
  size_t history_max;
  const char *what;
} NAMED[RT_NAMED_KINDS] = {
    [RT_LIMIT] = {'L', 0, "limit"},
    [RT_QUEUE] = {'Q', 4096, "queue"},
    [RT_HOLD] = {'H', 1, "hold slot"},
    [RT_RECORD] = {'R', 1024, "record"},
};

struct rt_named {
  rt_named_kind kind;
  char *key;       /* tag + name: the index's key */
  uint64_t count;  /* LIMIT: in flight */
  bb_ring values;  /* the others: bb_val *, oldest at the head */
};

static size_t n_of_kind(const bb_node *n, rt_named_kind kind) {
  size_t k = 0;
  for (size_t i = 0; i < n->n_named; i++) k += n->named[i].kind == kind;
  return k;
}

/* The entry of (kind, name); created when `create` (NULL then if the kind has
 * RT_MAX_NAMES names already, or out of memory: *full says which). */
static struct rt_named *named_get(bb_node *n, rt_named_kind kind, const char *name, bool create, bool *full) {
  char stack[128], *key = stack;
  size_t len = strlen(name);
  if (len + 2 > sizeof stack && !(key = bb_mem_alloc(n->alloc, len + 2))) return NULL;
  key[0] = NAMED[kind].tag;
  memcpy(key + 1, name, len + 1);
  uint32_t at;
  struct rt_named *e = NULL;
  if (n->named_index.alloc && bb_strmap_get(&n->named_index, key, &at)) {
    e = &n->named[at];
  } else if (create) {
    if (n_of_kind(n, kind) >= RT_MAX_NAMES) {
      *full = true;
    } else {
      if (!n->named_index.alloc) bb_strmap_init(&n->named_index, n->alloc);
      char *owned = bb_mem_strdup(n->alloc, key);
      if (owned && !bb_mem_grow(n->alloc, (void **)&n->named, &n->cap_named, n->n_named + 1, sizeof *n->named) &&
          !bb_strmap_put(&n->named_index, owned, (uint32_t)n->n_named)) {
        e = &n->named[n->n_named++];
        *e = (struct rt_named){.kind = kind, .key = owned, .values = bb_ring_of(sizeof(bb_val *))};
      } else {
        bb_mem_free(n->alloc, owned);
      }
    }
  }
  if (key != stack) bb_mem_free(n->alloc, key);
  return e;
}

static size_t held_bytes(const bb_val *v) { return v->n; }

/* The oldest value (the caller's reference now), or NULL when there is none. */
static bb_val *history_pop(bb_node *n, struct rt_named *e) {
  bb_val *v;
  if (!bb_ring_pop(&e->values, &v)) return NULL;
  n->named_bytes -= held_bytes(v);
  return v;
}

/* Appends v (taking a reference); a full history first drops its oldest value. */
static int history_push(bb_node *n, struct rt_named *e, bb_val *v) {
  if (e->values.len == NAMED[e->kind].history_max) bb_val_release(history_pop(n, e));
  if (bb_ring_push(&e->values, n->alloc, &v)) return BB_ERR_NOMEM;
  bb_val_retain(v);
  n->named_bytes += held_bytes(v);
  return 0;
}

void rt_syscalls_free(bb_node *n) {
  for (size_t i = 0; i < n->n_named; i++) {
    struct rt_named *e = &n->named[i];
    while (e->values.len) bb_val_release(history_pop(n, e));
    bb_ring_free(&e->values, n->alloc);
    bb_mem_free(n->alloc, e->key);
  }
  bb_mem_free(n->alloc, n->named);
  if (n->named_index.alloc) bb_strmap_free(&n->named_index);
  bb_mem_free(n->alloc, n->latches);
  n->named = NULL;
  n->latches = NULL;
  n->n_named = n->cap_named = n->n_latches = n->cap_latches = n->named_bytes = 0;
}

/* The op's name attribute (`attr`), required and non-empty. */
static int need_name(rt_call *c, const char *attr, const char **name, bb_error *err) {
  *name = attr_string(c, attr);
  if (*name && **name) return 0;
  c->reason = "missing_attribute";
  return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s needs a `%s` attribute", c->op->ir->op_type, attr);
}

/* A new reference to the Bytes input at 0 (absent: an empty Bytes value); another kind
 * is a type mismatch (reason expected_bytes). */
static int bytes_input(rt_call *c, bb_val **out, bb_error *err) {
  bb_val *v = c->n_in ? c->in[0] : NULL;
  if (!v) {
    *out = bb_val_bytes(c->node->alloc, NULL, 0);
    return *out ? 0 : nomem(err);
  }
  if (v->kind != BB_VAL_BYTES) {
    c->reason = "expected_bytes";
    return bb_error_set(err, BB_ERR_TYPE, "%s: input '%s' is %s, not Bytes", c->op->ir->op_type,
                        c->op->ir->inputs.len ? c->op->ir->inputs.items[0] : "", bb_val_kind_name((int)v->kind));
  }
  *out = bb_val_retain(v);
  return 0;
}

/* Stores a Bytes input in the (kind, name) history. Values held across the node count
 * against the ingress byte budget's size, so a peer cannot grow them without bound. */
static int store_input(rt_call *c, rt_named_kind kind, const char *name, bb_error *err) {
  bb_val *v;
  int rc = bytes_input(c, &v, err);
  if (rc) return rc;
  bool full = false;
  struct rt_named *e = named_get(c->node, kind, name, true, &full);
  if (!e && full && kind != RT_QUEUE) {
    char counter[32];
    snprintf(counter, sizeof counter, "%s.dropped", kind == RT_HOLD ? "hold" : "record");
    rt_count(c->node, counter, 1); /* beyond the names cap: dropped (runtime.md §5.1) */
  } else if (!e) {
    c->reason = full ? "name_limit" : "out_of_memory";
    rc = full ? bb_error_set(err, BB_ERR_LIMIT, "%s: more than %d %ss", c->op->ir->op_type, RT_MAX_NAMES,
                             NAMED[kind].what)
              : nomem(err);
  } else {
    /* what the push would evict frees its bytes first */
    size_t evicted =
        e->values.len == NAMED[kind].history_max ? held_bytes(*(bb_val **)bb_ring_at(&e->values, 0)) : 0;
    if (c->node->named_bytes - evicted + v->n > c->node->cfg.ingress_byte_budget) {
      c->reason = "store_byte_limit";
      rc = bb_error_set(err, BB_ERR_LIMIT, "%s: %s `%s` would hold more than %zu bytes across the node",
                        c->op->ir->op_type, NAMED[kind].what, name, c->node->cfg.ingress_byte_budget);
    } else if ((rc = history_push(c->node, e, v))) {
      rc = nomem(err);
    }
  }
  bb_val_release(v);
  return rc;
}

/* Takes the oldest value of the (kind, name) history to output 0; absorbs when there is none. */
static int take_output(rt_call *c, rt_named_kind kind, const char *name) {
  bool full = false;
  struct rt_named *e = named_get(c->node, kind, name, false, &full);
  bb_val *v = e ? history_pop(c->node, e) : NULL;
  if (!v) return 0;
  if (c->n_out) c->out[0] = v;
  else bb_val_release(v);
  return 0;
}

/* Limit.Acquire: at most `n` in flight under `name`; past that, absorb. */
static int sys_limit_acquire(rt_call *c, bb_error *err) {
  const char *name;
  int rc = need_name(c, "name", &name, err);
  if (rc) return rc;
  int64_t cap = attr_int(c, "n", 1);
  bool full = false;
  struct rt_named *e = named_get(c->node, RT_LIMIT, name, true, &full);
  if (!e) {
    c->reason = full ? "name_limit" : "out_of_memory";
    return full ? bb_error_set(err, BB_ERR_LIMIT, "Limit.Acquire: more than %d limits", RT_MAX_NAMES) : nomem(err);
  }
  if (cap <= 0 || e->count >= (uint64_t)cap) return 0;
  e->count++;
  return emit_trigger(c, err);
}

static int sys_limit_release(rt_call *c, bb_error *err) {
  const char *name;
  int rc = need_name(c, "name", &name, err);
  if (rc) return rc;
  bool full = false;
  struct rt_named *e = named_get(c->node, RT_LIMIT, name, false, &full);
  if (e && e->count) e->count--;
  return emit_trigger(c, err);
}

static int sys_enqueue(rt_call *c, bb_error *err) {
  const char *name;
  int rc = need_name(c, "queue", &name, err);
  if (!rc) rc = store_input(c, RT_QUEUE, name, err);
  return rc ? rc : emit_trigger(c, err);
}

static int sys_dequeue(rt_call *c, bb_error *err) {
  const char *name;
  int rc = need_name(c, "queue", &name, err);
  return rc ? rc : take_output(c, RT_QUEUE, name);
}

static int sys_stash(rt_call *c, bb_error *err) {
  const char *name;
  int rc = need_name(c, "slot", &name, err);
  return rc ? rc : store_input(c, RT_HOLD, name, err);
}

static int sys_flush(rt_call *c, bb_error *err) {
  const char *name;
  int rc = need_name(c, "slot", &name, err);
  return rc ? rc : take_output(c, RT_HOLD, name);
}

static int sys_record(rt_call *c, bb_error *err) {
  const char *name;
  int rc = need_name(c, "name", &name, err);
  return rc ? rc : store_input(c, RT_RECORD, name, err);
}

/* ---- tokens and bootstrap commands -------------------------------------------------------- */

/* Shares the counter of the wire's request ids, so a token never equals one. */
static int sys_correlate_tag(rt_call *c, bb_error *err) {
  return put_output(c, bb_val_u64(c->node->alloc, BB_VAL_CORRELATION, c->node->next_wire_req++), err);
}

static int sys_bootstrap_dispatch(rt_call *c, bb_error *err) {
  return put_output(c, bb_val_u64(c->node->alloc, BB_VAL_COMMAND_ID, c->node->next_command++), err);
}

/* Parks until the host completes the command BootstrapDispatch minted. Only a minted
 * command that nothing waits on yet: a peer's value must not take over a Sleep's
 * completion or one minted later. */
static int sys_bootstrap_output(rt_call *c, bb_error *err) {
  const bb_val *v = c->n_in ? c->in[0] : NULL;
  if (!v) {
    c->reason = "missing_input";
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "BootstrapOutput: missing `cmd` input");
  }
  if (v->kind != BB_VAL_COMMAND_ID) {
    c->reason = "expected_command_id";
    return bb_error_set(err, BB_ERR_TYPE, "BootstrapOutput: `cmd` input is %s, not a CommandId",
                        bb_val_kind_name((int)v->kind));
  }
  uint64_t cmd = v->as.u64;
  if (!cmd || cmd >= c->node->next_command) {
    c->reason = "unknown_command";
    return bb_error_set(err, BB_ERR_NOT_FOUND, "BootstrapOutput: command %" PRIu64 " was never minted", cmd);
  }
  if (rt_pending_find(c->node, cmd)) {
    c->reason = "command_in_use";
    return bb_error_set(err, BB_ERR_EXISTS, "BootstrapOutput: command %" PRIu64 " is already awaited", cmd);
  }
  c->command = cmd;
  return BB_LATER;
}

/* ---- gates --------------------------------------------------------------------------------- */

static int need_source(rt_call *c, bb_error *err) {
  c->reason = "no_source_peer";
  return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: this execution did not come from a peer",
                      c->op->ir->op_type);
}

static int sys_dedup_rx(rt_call *c, bb_error *err) {
  if (!c->n_in || !c->in[0]) return need_input(c, err);
  if (!c->exec->has_src) return need_source(c, err);
  uint64_t site = c->graph->site_base + c->op->in[0];
  if (rt_replayed(c->node, c->exec, site)) {
    c->reason = "duplicate";
    rt_count(c->node, "wire.duplicates", 1);
    return bb_error_set(err, BB_ERR_EXISTS, "DedupGateRx dropped a replayed delivery (request %" PRIu64 ")",
                        c->exec->wire_req_id);
  }
  return put_output(c, bb_val_retain(c->in[0]), err);
}

static int sys_peer_health_rx(rt_call *c, bb_error *err) {
  if (!c->n_in || !c->in[0]) return need_input(c, err);
  if (!c->exec->has_src) return need_source(c, err);
  if (peer_blocked(c->node, &c->exec->src)) {
    c->reason = "blocklisted";
    return bb_error_set(err, BB_ERR_LIMIT, "PeerHealthGateRx denied a delivery from a blocked peer");
  }
  return put_output(c, bb_val_retain(c->in[0]), err);
}

static int sys_backoff_rx(rt_call *c, bb_error *err) {
  if (!c->n_in || !c->in[0]) return need_input(c, err);
  if (!c->exec->has_src) return need_source(c, err);
  return put_output(c, bb_val_retain(c->in[0]), err);
}

static int sys_peer_gate_tx(rt_call *c, bb_error *err) {
  bb_peer_id p;
  int rc = attr_peer(c, &p, err);
  if (rc) return rc;
  if (peer_blocked(c->node, &p)) {
    c->reason = "blocklisted";
    return bb_error_set(err, BB_ERR_LIMIT, "%s denied a send to a blocked peer", c->op->ir->op_type);
  }
  return emit_trigger(c, err);
}

/* ---- telemetry ---------------------------------------------------------------------------- */

static bool reserved_topic(const char *t) {
  return strncmp(t, "bb.", 3) == 0 || strncmp(t, "ai.bytesandbrains.", 18) == 0;
}

static int sys_app_emit(rt_call *c, bb_error *err) {
  const char *name = attr_string(c, "name");
  if (!name || !*name) {
    c->reason = "missing_attribute";
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s needs a `name` attribute", c->op->ir->op_type);
  }
  if (reserved_topic(name)) {
    c->reason = "reserved_topic_prefix";
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "topic `%s` uses a reserved prefix (bb., ai.bytesandbrains.)", name);
  }
  bb_val *v = strcmp(c->op->ir->op_type, "AppNotify") == 0 ? NULL : first_input(c);
  bb_val *empty = NULL;
  if (!v) v = empty = bb_val_bytes(c->node->alloc, NULL, 0);
  if (!v) return nomem(err);
  bb_ctx ctx = {c->node, NULL, c->exec, c->now, 0, NULL};
  int rc = bb_ctx_emit(&ctx, name, v, err);
  bb_step *s = rc ? NULL : &c->node->acc.items[c->node->acc.len - 1];
  if (s) s->module = c->exec->target >= 0 ? c->node->targets[c->exec->target].name : c->graph->fn->name;
  bb_val_release(empty);
  return rc;
}

static int sys_incr_metric(rt_call *c, bb_error *err) {
  const char *name = attr_string(c, "name");
  if (!name || !*name) {
    c->reason = "missing_attribute";
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "IncrMetric needs a `name` attribute");
  }
  rt_count(c->node, name, (uint64_t)attr_int(c, "delta", 1));
  return 0;
}

/* ---- bundles ------------------------------------------------------------------------------- */

static int sys_bundle(rt_call *c, bb_error *err) {
  size_t n = 0;
  bb_val *stack[32];
  for (size_t i = 0; i < c->n_in && n < 32; i++)
    if (c->in[i]) stack[n++] = c->in[i];
  if (!n) {
    c->reason = "bundle_no_children";
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "Bundle has no inputs");
  }
  return put_output(c, bb_val_composite(c->node->alloc, stack, n), err);
}

static int sys_unbundle(rt_call *c, bb_error *err) {
  const bb_val *b = c->n_in ? c->in[0] : NULL;
  if (!b) return need_input(c, err);
  if (b->kind != BB_VAL_COMPOSITE) {
    c->reason = "expected_composite";
    return bb_error_set(err, BB_ERR_TYPE, "Unbundle expects a bundle, got %s", bb_val_kind_name((int)b->kind));
  }
  int64_t count = attr_int(c, BB_ATTR_CHILD_COUNT, -1);
  if (count >= 0 && (uint64_t)count != b->n) {
    c->reason = "unbundle_child_count_mismatch";
    return bb_error_set(err, BB_ERR_TYPE, "Unbundle expects %" PRId64 " children, the bundle has %zu", count, b->n);
  }
  for (size_t i = 0; i < b->n && i < c->n_out; i++) c->out[i] = bb_val_retain(b->as.children[i]);
  return 0;
}

/* ---- address book ---------------------------------------------------------------------------- */

/* A peer id input: a Peer(s) value, or what a bootstrap `constant` of type bb.peer_id
 * carries — a one-element int64 tensor holding a test identity (bb_peer_id_from_u64). */
static int peer_input(rt_call *c, size_t i, bb_peer_id *out, bb_error *err) {
  const bb_val *v = i < c->n_in ? c->in[i] : NULL;
  if (v && (v->kind == BB_VAL_PEER || v->kind == BB_VAL_PEERS) && v->n) {
    *out = v->as.peers[0];
    return 0;
  }
  if (v && v->kind == BB_VAL_TENSOR && v->as.tensor->dtype == BB_DTYPE_INT64 && v->as.tensor->numel == 1 &&
      *(const int64_t *)bb_tensor_data(v->as.tensor) >= 0) {
    *out = bb_peer_id_from_u64((uint64_t)*(const int64_t *)bb_tensor_data(v->as.tensor));
    return 0;
  }
  c->reason = "expected_peer_id";
  return bb_error_set(err, BB_ERR_TYPE, "%s: input %zu must be a peer id", c->op->ir->op_type, i);
}

/* An address input: Address(es) values, or a bootstrap `constant` of type address_vec —
 * a uint8 tensor holding one address as text ("/p2p/100/site/11"). */
static int address_input(rt_call *c, size_t i, bb_address *one, const bb_address **out, size_t *n, bb_error *err) {
  const bb_val *a = i < c->n_in ? c->in[i] : NULL;
  if (a && (a->kind == BB_VAL_ADDRESS || a->kind == BB_VAL_ADDRESSES) && a->n) {
    *out = a->as.addresses;
    *n = a->n;
    return 0;
  }
  if (a && a->kind == BB_VAL_TENSOR && a->as.tensor->dtype == BB_DTYPE_UINT8 && a->as.tensor->numel > 0 &&
      a->as.tensor->numel < 1024) {
    char text[1024];
    memcpy(text, bb_tensor_data(a->as.tensor), (size_t)a->as.tensor->numel);
    text[a->as.tensor->numel] = 0;
    int rc = bb_address_from_text(text, one, err);
    if (rc) {
      c->reason = "expected_multiaddress";
      return bb_error_prefix(err, "%s: input %zu: ", c->op->ir->op_type, i);
    }
    *out = one;
    *n = 1;
    return 0;
  }
  c->reason = "expected_multiaddress";
  return bb_error_set(err, BB_ERR_TYPE, "%s: input %zu must be one or more addresses", c->op->ir->op_type, i);
}

static int sys_book_insert(rt_call *c, bb_error *err) {
  bb_peer_id p;
  bb_address one;
  const bb_address *addrs = NULL;
  size_t n = 0;
  int rc = peer_input(c, 0, &p, err);
  if (!rc) rc = address_input(c, 1, &one, &addrs, &n, err);
  if (rc) return rc;
  for (size_t i = 0; i < n; i++)
    if ((rc = bb_node_add_peer(c->node, &p, &addrs[i], err))) {
      c->reason = "address_book_insert_failed";
      return rc;
    }
  return 0;
}

static int sys_book_lookup(rt_call *c, bb_error *err) {
  bb_peer_id p;
  int rc = peer_input(c, 0, &p, err);
  if (rc) return rc;
  const rt_peer_entry *e = rt_book_find(&c->node->book, &p);
  if (!e || !e->n_addrs) {
    c->reason = "address_book_lookup_miss";
    return bb_error_set(err, BB_ERR_NOT_FOUND, "AddressBook::Lookup: the peer is not in the address book");
  }
  return put_output(c, bb_val_addresses(c->node->alloc, e->addrs, e->n_addrs), err);
}

/* ---- the table ----------------------------------------------------------------------------- */

static const rt_syscall SYSCALLS[] = {
    {BB_DOMAIN_SYSCALL, "PassThrough", sys_pass_through},
    {BB_DOMAIN_SYSCALL, "Tee", sys_tee},
    {BB_DOMAIN_SYSCALL, "Constant", sys_constant},
    {BB_DOMAIN_SYSCALL, "Pulse", sys_trigger},
    {BB_DOMAIN_SYSCALL, "GateDispatch", sys_trigger},
    {BB_DOMAIN_SYSCALL, "OnTrigger", sys_on_trigger},
    {BB_DOMAIN_SYSCALL, "EventSource", sys_trigger},
    {BB_DOMAIN_SYSCALL, "LifecyclePhase", sys_trigger},
    {BB_DOMAIN_SYSCALL, "Gate", sys_gate},
    {BB_DOMAIN_SYSCALL, "Any", sys_any},
    {BB_DOMAIN_SYSCALL, "Clock", sys_clock},
    {BB_DOMAIN_SYSCALL, "RngU64", sys_rng},
    {BB_DOMAIN_SYSCALL, "After", sys_after},
    {BB_DOMAIN_SYSCALL, "Sleep", sys_sleep},
    {BB_DOMAIN_SYSCALL, "Interval", sys_interval},
    {BB_DOMAIN_SYSCALL, "DeadlineCheck", sys_deadline_check},
    {BB_DOMAIN_SYSCALL, "DeadlineMatch", sys_deadline_match},
    {BB_DOMAIN_SYSCALL, "Limit.Acquire", sys_limit_acquire},
    {BB_DOMAIN_SYSCALL, "Limit.Release", sys_limit_release},
    {BB_DOMAIN_SYSCALL, "Serialize.Enqueue", sys_enqueue},
    {BB_DOMAIN_SYSCALL, "Serialize.Dequeue", sys_dequeue},
    {BB_DOMAIN_SYSCALL, "Hold.Stash", sys_stash},
    {BB_DOMAIN_SYSCALL, "Hold.Flush", sys_flush},
    {BB_DOMAIN_SYSCALL, "CorrelateTag", sys_correlate_tag},
    {BB_DOMAIN_SYSCALL, "BootstrapDispatch", sys_bootstrap_dispatch},
    {BB_DOMAIN_SYSCALL, "BootstrapOutput", sys_bootstrap_output},
    {BB_DOMAIN_SYSCALL, "DedupGateRx", sys_dedup_rx},
    {BB_DOMAIN_SYSCALL, "PeerHealthGateRx", sys_peer_health_rx},
    {BB_DOMAIN_SYSCALL, "BackoffGateRx", sys_backoff_rx},
    {BB_DOMAIN_SYSCALL, "PeerHealthGateTx", sys_peer_gate_tx},
    {BB_DOMAIN_SYSCALL, "BackoffGateTx", sys_peer_gate_tx},
    {BB_DOMAIN_SYSCALL, "AppEmit", sys_app_emit},
    {BB_DOMAIN_SYSCALL, "AppNotify", sys_app_emit},
    {BB_DOMAIN_SYSCALL, "IncrMetric", sys_incr_metric},
    {BB_DOMAIN_SYSCALL, "Record", sys_record},
    {BB_DOMAIN_COMPOSITE, "Bundle", sys_bundle},
    {BB_DOMAIN_COMPOSITE, "Unbundle", sys_unbundle},
    {BB_DOMAIN_ADDRESS_BOOK, "Insert", sys_book_insert},
    {BB_DOMAIN_ADDRESS_BOOK, "InsertMany", sys_book_insert},
    {BB_DOMAIN_ADDRESS_BOOK, "Lookup", sys_book_lookup},
};

rt_syscall_fn rt_syscall_find(const char *domain, const char *op_type) {
  for (size_t i = 0; i < sizeof SYSCALLS / sizeof *SYSCALLS; i++)
    if (strcmp(SYSCALLS[i].domain, domain) == 0 && strcmp(SYSCALLS[i].op_type, op_type) == 0) return SYSCALLS[i].fn;
  return NULL;
}
