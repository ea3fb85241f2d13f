/* The replay window, a part of its own: the latest `window` (sender, request, site) keys
 * delivered, so DedupGateRx can stop an envelope delivered twice. */
#ifndef BBI_RUNTIME_REPLAY_H
#define BBI_RUNTIME_REPLAY_H

#include "runtime/snapshot_io.h"
#include "util/ring.h"

/* Invariant: at most `window` keys, oldest first. */
typedef struct rt_replay {
  const bb_allocator *alloc;
  bbi_ring keys; /* of uint64_t */
  size_t window;
} rt_replay;

void rt_replay_init(rt_replay *w, const bb_allocator *alloc, size_t window);
/* True when this (sender, request, site) was seen within the window; remembers it
 * otherwise (the oldest key leaves a full window; out of memory, it is not remembered). */
bool rt_replay_seen(rt_replay *w, const bb_peer_id *from, uint64_t request, uint64_t site);
void rt_replay_free(rt_replay *w);
/* Section: u64 count, then the keys, oldest first. */
void rt_replay_save(const rt_replay *w, bb_le_writer *out);
/* Reads a section into an empty window; at most `window` keys. */
int rt_replay_load(rt_replay *w, rt_reader *r);

#endif /* BBI_RUNTIME_REPLAY_H */
