/* Named state: Limit counters, Serialize queues, Hold slots and Record histories, each
 * kept under a name the op's attribute gives, at most RT_MAX_NAMES names per kind. */
#include <stdio.h>
#include <string.h>

#include "runtime/steps.h"
#include "runtime/syscalls/syscall.h"
#include "bb/common.h"
#include "util/mem.h"
#include "util/ring.h"
#include "util/strmap.h"

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
  bbi_ring values;  /* the others: bb_val *, oldest at the head */
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
  if (len + 2 > sizeof stack && !(key = bbi_mem_alloc(n->alloc, len + 2))) return NULL;
  key[0] = NAMED[kind].tag;
  memcpy(key + 1, name, len + 1);
  uint32_t at;
  struct rt_named *e = NULL;
  if (n->named_index.alloc && bbi_strmap_get(&n->named_index, key, &at)) {
    e = &n->named[at];
  } else if (create) {
    if (n_of_kind(n, kind) >= RT_MAX_NAMES) {
      *full = true;
    } else {
      if (!n->named_index.alloc) bbi_strmap_init(&n->named_index, n->alloc);
      char *owned = bbi_mem_strdup(n->alloc, key);
      if (owned && !bbi_mem_grow(n->alloc, (void **)&n->named, &n->cap_named, n->n_named + 1, sizeof *n->named) &&
          !bbi_strmap_put(&n->named_index, owned, (uint32_t)n->n_named)) {
        e = &n->named[n->n_named++];
        *e = (struct rt_named){.kind = kind, .key = owned, .values = bbi_ring_of(sizeof(bb_val *))};
      } else {
        bbi_mem_free(n->alloc, owned);
      }
    }
  }
  if (key != stack) bbi_mem_free(n->alloc, key);
  return e;
}

static size_t held_bytes(const bb_val *v) { return bb_val_count(v); }

/* The oldest value (the caller's reference now), or NULL when there is none. */
static bb_val *history_pop(bb_node *n, struct rt_named *e) {
  bb_val *v;
  if (!bbi_ring_pop(&e->values, &v)) return NULL;
  n->named_bytes -= held_bytes(v);
  return v;
}

/* Appends v (taking a reference); a full history first drops its oldest value. */
static int history_push(bb_node *n, struct rt_named *e, bb_val *v) {
  if (e->values.len == NAMED[e->kind].history_max) bb_val_release(history_pop(n, e));
  if (bbi_ring_push(&e->values, n->alloc, &v)) return BB_ERR_NOMEM;
  bb_val_retain(v);
  n->named_bytes += held_bytes(v);
  return 0;
}

void rt_syscalls_free_named(bb_node *n) {
  for (size_t i = 0; i < n->n_named; i++) {
    struct rt_named *e = &n->named[i];
    while (e->values.len) bb_val_release(history_pop(n, e));
    bbi_ring_free(&e->values, n->alloc);
    bbi_mem_free(n->alloc, e->key);
  }
  bbi_mem_free(n->alloc, n->named);
  if (n->named_index.alloc) bbi_strmap_free(&n->named_index);
  n->named = NULL;
  n->n_named = n->cap_named = n->named_bytes = 0;
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
  if (bb_val_kind_of(v) != BB_VAL_BYTES) {
    c->reason = "expected_bytes";
    return bb_error_set(err, BB_ERR_TYPE, "%s: input '%s' is %s, not Bytes", c->op->ir->op_type,
                        c->op->ir->inputs.len ? c->op->ir->inputs.items[0] : "",
                        bb_val_kind_name((int)bb_val_kind_of(v)));
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
    rt_count(&c->node->counters, counter, 1); /* beyond the names cap: dropped, and counted */
  } else if (!e) {
    c->reason = full ? "name_limit" : "out_of_memory";
    rc = full ? bb_error_set(err, BB_ERR_LIMIT, "%s: more than %d %ss", c->op->ir->op_type, RT_MAX_NAMES,
                             NAMED[kind].what)
              : nomem(err);
  } else {
    /* what the push would evict frees its bytes first */
    size_t evicted =
        e->values.len == NAMED[kind].history_max ? held_bytes(*(bb_val **)bbi_ring_at(&e->values, 0)) : 0;
    if (c->node->named_bytes - evicted + bb_val_count(v) > c->node->cfg.ingress_byte_budget) {
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

const rt_syscall rt_syscalls_named[] = {
    {BB_DOMAIN_SYSCALL, "Limit.Acquire", sys_limit_acquire},
    {BB_DOMAIN_SYSCALL, "Limit.Release", sys_limit_release},
    {BB_DOMAIN_SYSCALL, "Serialize.Enqueue", sys_enqueue},
    {BB_DOMAIN_SYSCALL, "Serialize.Dequeue", sys_dequeue},
    {BB_DOMAIN_SYSCALL, "Hold.Stash", sys_stash},
    {BB_DOMAIN_SYSCALL, "Hold.Flush", sys_flush},
    {BB_DOMAIN_SYSCALL, "Record", sys_record},
};
const size_t rt_syscalls_named_count = sizeof rt_syscalls_named / sizeof *rt_syscalls_named;
