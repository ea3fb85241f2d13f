/* The ingress queue and its byte budget (ingress.h). */
#include <string.h>

#include "runtime/ingress.h"
#include "util/mem.h"

void rt_ingress_init(rt_ingress *q, const bb_allocator *alloc, size_t budget) {
  memset(q, 0, sizeof *q);
  q->alloc = alloc;
  q->events = bbi_ring_of(sizeof(rt_event));
  q->budget = budget;
}

bool rt_ingress_fits(const rt_ingress *q, size_t more) { return q->bytes + more <= q->budget; }

int rt_ingress_push(rt_ingress *q, rt_event *ev, size_t limit) {
  if (q->events.len >= limit) return BB_ERR_LIMIT;
  return bbi_ring_push(&q->events, q->alloc, ev);
}

rt_event *rt_ingress_at(const rt_ingress *q, size_t k) { return bbi_ring_at(&q->events, k); }

void rt_event_release(rt_ingress *q, rt_event *ev) {
  for (size_t i = 0; i < ev->n_fills; i++) {
    rt_fill *f = &ev->fills[i];
    if (f->value) {
      bb_val_release(f->value);
      rt_ingress_uncharge(q, f->charged);
    }
    bbi_mem_free(q->alloc, f->op);
    bbi_mem_free(q->alloc, f->payload);
  }
  bbi_mem_free(q->alloc, ev->fills);
  for (size_t i = 0; i < ev->n_vals; i++) {
    bb_val_release(ev->vals[i]);
    if (ev->names) bbi_mem_free(q->alloc, ev->names[i]);
  }
  bbi_mem_free(q->alloc, ev->names);
  bbi_mem_free(q->alloc, ev->vals);
  rt_ingress_uncharge(q, ev->charged);
  bbi_mem_free(q->alloc, ev->detail);
  memset(ev, 0, sizeof *ev);
}

void rt_ingress_free(rt_ingress *q) {
  for (size_t k = 0; k < q->events.len; k++) rt_event_release(q, rt_ingress_at(q, k));
  bbi_ring_free(&q->events, q->alloc);
}
