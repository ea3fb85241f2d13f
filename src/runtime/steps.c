/* Steps handed to the host, the memory they point to, and named counters (steps.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "runtime/steps.h"
#include "util/mem.h"

static const char *const STEP_NAMES[] = {
    "",          "Send",         "AppEvent",          "OpFailed",     "WireReceiveFailed",
    "PeerResolveFailed", "OutboundDropped", "CycleBudgetExceeded", "BootstrapComplete", "WaitingOnBootstrap",
    "OpCompleted", "AsyncSuspended", "IngressDropped"};

const char *bb_step_kind_name(bb_step_kind kind) {
  return kind > 0 && (size_t)kind < sizeof STEP_NAMES / sizeof *STEP_NAMES ? STEP_NAMES[kind] : "Unknown";
}

/* ---- steps ------------------------------------------------------------------------------ */

void rt_steps_init(rt_steps *s, const bb_allocator *alloc) {
  memset(s, 0, sizeof *s);
  s->alloc = alloc;
}

bb_step *rt_step(rt_steps *s, bb_step_kind kind) {
  if (bbi_mem_grow(s->alloc, (void **)&s->items, &s->cap, s->len + 1, sizeof *s->items)) {
    s->nomem = true;
    return NULL;
  }
  bb_step *st = &s->items[s->len++];
  memset(st, 0, sizeof *st);
  st->kind = kind;
  st->fill_index = -1;
  return st;
}

int rt_step_own(rt_steps *s, void *p) {
  if (bbi_mem_grow(s->alloc, (void **)&s->owned, &s->cap_owned, s->n_owned + 1, sizeof *s->owned)) {
    bbi_mem_free(s->alloc, p);
    s->nomem = true;
    return BB_ERR_NOMEM;
  }
  s->owned[s->n_owned++] = p;
  return 0;
}

int rt_step_hold(rt_steps *s, bb_val *v) {
  if (bbi_mem_grow(s->alloc, (void **)&s->held, &s->cap_held, s->n_held + 1, sizeof *s->held)) {
    s->nomem = true;
    return BB_ERR_NOMEM;
  }
  s->held[s->n_held++] = bb_val_retain(v);
  return 0;
}

void rt_step_cancel(rt_steps *s) { s->len--; }

const char *rt_step_str(rt_steps *s, const char *str) {
  if (!str) return NULL;
  char *d = bbi_mem_strdup(s->alloc, str);
  if (!d || rt_step_own(s, d)) return "";
  return d;
}

void rt_report(rt_steps *s, bb_step_kind kind, const bb_peer_id *peer, const char *reason, const char *fmt, ...) {
  char detail[BB_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  bb_step *st = rt_step(s, kind);
  if (!st) return;
  if (peer) {
    st->has_peer = true;
    st->peer = *peer;
  }
  st->reason = rt_step_str(s, reason);
  st->detail = rt_step_str(s, detail);
}

void rt_steps_release(rt_steps *s) {
  for (size_t i = 0; i < s->n_owned; i++) bbi_mem_free(s->alloc, s->owned[i]);
  for (size_t i = 0; i < s->n_held; i++) bb_val_release(s->held[i]);
  s->len = s->n_owned = s->n_held = 0;
}

void rt_steps_hand_out(rt_steps *acc, rt_steps *batch) {
  rt_steps emptied = *batch;
  *batch = *acc;
  *acc = emptied;
  acc->len = acc->n_owned = acc->n_held = 0;
}

void rt_steps_free(rt_steps *s) {
  rt_steps_release(s);
  bbi_mem_free(s->alloc, s->items);
  bbi_mem_free(s->alloc, s->owned);
  bbi_mem_free(s->alloc, s->held);
  rt_steps_init(s, s->alloc);
}

/* ---- counters ----------------------------------------------------------------------------- */

void rt_counters_init(rt_counters *c, const bb_allocator *alloc) {
  memset(c, 0, sizeof *c);
  c->alloc = alloc;
}

static rt_counter *find_counter(const rt_counters *c, const char *name) {
  for (size_t i = 0; i < c->len; i++)
    if (strcmp(c->items[i].name, name) == 0) return &c->items[i];
  return NULL;
}

void rt_count(rt_counters *c, const char *name, uint64_t delta) {
  if (!c) return;
  rt_counter *k = find_counter(c, name);
  if (k) {
    k->value += delta;
    return;
  }
  char *copy = bbi_mem_strdup(c->alloc, name);
  if (!copy || bbi_mem_grow(c->alloc, (void **)&c->items, &c->cap, c->len + 1, sizeof *c->items)) {
    bbi_mem_free(c->alloc, copy);
    c->nomem = true;
    return;
  }
  c->items[c->len++] = (rt_counter){copy, delta};
}

uint64_t rt_counter_value(const rt_counters *c, const char *name) {
  const rt_counter *k = find_counter(c, name);
  return k ? k->value : 0;
}

void rt_counters_free(rt_counters *c) {
  for (size_t i = 0; i < c->len; i++) bbi_mem_free(c->alloc, c->items[i].name);
  bbi_mem_free(c->alloc, c->items);
  rt_counters_init(c, c->alloc);
}

void rt_counters_save(const rt_counters *c, bb_le_writer *w) {
  bb_le_write_u64(w, c->len);
  for (size_t i = 0; i < c->len; i++) {
    rt_write_str(w, c->items[i].name);
    bb_le_write_u64(w, c->items[i].value);
  }
}

int rt_counters_load(rt_counters *c, rt_reader *r) {
  size_t n = rt_read_count(r, 16, "too many counters for the bytes left");
  if (!r->rc && n && bbi_mem_grow(c->alloc, (void **)&c->items, &c->cap, n, sizeof *c->items)) return rt_read_nomem(r);
  for (size_t i = 0; i < n && !r->rc; i++) {
    size_t len;
    const uint8_t *name = rt_read_span(r, &len);
    uint64_t value = rt_read_u64(r);
    if (r->rc) break;
    if (!len || memchr(name, 0, len)) return rt_read_bad(r, "a counter name is empty or holds NUL");
    char *copy = bbi_mem_alloc(c->alloc, len + 1);
    if (!copy) return rt_read_nomem(r);
    memcpy(copy, name, len);
    copy[len] = 0;
    if (find_counter(c, copy)) {
      bbi_mem_free(c->alloc, copy);
      return rt_read_bad(r, "a counter is named twice");
    }
    c->items[c->len++] = (rt_counter){copy, value};
  }
  return r->rc;
}
