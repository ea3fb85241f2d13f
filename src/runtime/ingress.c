/* The ingress queue: envelopes, invokes and completions wait here, in order, for a poll;
 * the bytes their values hold count against the ingress byte budget until released. */
#include <string.h>

#include "runtime/ingress.h"
#include "util/mem.h"
#include "util/ring.h"

int rt_ingress_push(bb_node *n, rt_event *ev, size_t limit) {
  if (n->ingress.len >= limit) return BB_ERR_LIMIT;
  return bbi_ring_push(&n->ingress, n->alloc, ev);
}

void rt_event_release(bb_node *n, rt_event *ev) {
  for (size_t i = 0; i < ev->n_fills; i++) {
    rt_fill *f = &ev->fills[i];
    if (f->value) {
      bb_val_release(f->value);
      n->ingress_bytes -= f->charged;
    }
    bbi_mem_free(n->alloc, f->op);
    bbi_mem_free(n->alloc, f->payload);
  }
  bbi_mem_free(n->alloc, ev->fills);
  for (size_t i = 0; i < ev->n_vals; i++) {
    bb_val_release(ev->vals[i]);
    if (ev->names) bbi_mem_free(n->alloc, ev->names[i]);
  }
  bbi_mem_free(n->alloc, ev->names);
  bbi_mem_free(n->alloc, ev->vals);
  n->ingress_bytes -= ev->charged;
  bbi_mem_free(n->alloc, ev->detail);
  memset(ev, 0, sizeof *ev);
}
