/* Steps handed to the host, the memory they point to, and named counters. */
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

bb_step *rt_step(bb_node *n, bb_step_kind kind) {
  rt_steps *s = &n->acc;
  if (bbi_mem_grow(n->alloc, (void **)&s->items, &s->cap, s->len + 1, sizeof *s->items)) {
    n->failed_nomem = true;
    return NULL;
  }
  bb_step *st = &s->items[s->len++];
  memset(st, 0, sizeof *st);
  st->kind = kind;
  st->fill_index = -1;
  return st;
}

int rt_step_own(bb_node *n, void *p) {
  rt_steps *s = &n->acc;
  if (bbi_mem_grow(n->alloc, (void **)&s->owned, &s->cap_owned, s->n_owned + 1, sizeof *s->owned)) {
    bbi_mem_free(n->alloc, p);
    n->failed_nomem = true;
    return BB_ERR_NOMEM;
  }
  s->owned[s->n_owned++] = p;
  return 0;
}

int rt_step_hold(bb_node *n, bb_val *v) {
  rt_steps *s = &n->acc;
  if (bbi_mem_grow(n->alloc, (void **)&s->held, &s->cap_held, s->n_held + 1, sizeof *s->held)) {
    n->failed_nomem = true;
    return BB_ERR_NOMEM;
  }
  s->held[s->n_held++] = bb_val_retain(v);
  return 0;
}

void rt_step_cancel(bb_node *n) { n->acc.len--; }

const char *rt_step_str(bb_node *n, const char *str) {
  if (!str) return NULL;
  char *d = bbi_mem_strdup(n->alloc, str);
  if (!d || rt_step_own(n, d)) return "";
  return d;
}

void rt_steps_release(bb_node *n, rt_steps *s) {
  for (size_t i = 0; i < s->n_owned; i++) bbi_mem_free(n->alloc, s->owned[i]);
  for (size_t i = 0; i < s->n_held; i++) bb_val_release(s->held[i]);
  s->len = s->n_owned = s->n_held = 0;
}

void rt_report(bb_node *n, bb_step_kind kind, const bb_peer_id *peer, const char *reason, const char *fmt, ...) {
  char detail[BB_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  bb_step *s = rt_step(n, kind);
  if (!s) return;
  if (peer) {
    s->has_peer = true;
    s->peer = *peer;
  }
  s->reason = rt_step_str(n, reason);
  s->detail = rt_step_str(n, detail);
}

void rt_count(bb_node *n, const char *name, uint64_t delta) {
  for (size_t i = 0; i < n->n_counters; i++)
    if (strcmp(n->counters[i].name, name) == 0) {
      n->counters[i].value += delta;
      return;
    }
  char *copy = bbi_mem_strdup(n->alloc, name);
  if (!copy || bbi_mem_grow(n->alloc, (void **)&n->counters, &n->cap_counters, n->n_counters + 1, sizeof *n->counters)) {
    bbi_mem_free(n->alloc, copy);
    n->failed_nomem = true;
    return;
  }
  n->counters[n->n_counters++] = (rt_counter){copy, delta};
}

uint64_t bb_node_counter(const bb_node *n, const char *name) {
  for (size_t i = 0; i < n->n_counters; i++)
    if (strcmp(n->counters[i].name, name) == 0) return n->counters[i].value;
  return 0;
}
