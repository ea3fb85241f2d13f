/* The replay window (replay.h). Keys mix the sender's bytes, the request id and the site,
 * so one sender's request may reach several sites once each. */
#include "runtime/replay.h"
#include "util/hash.h"

void rt_replay_init(rt_replay *w, const bb_allocator *alloc, size_t window) {
  *w = (rt_replay){alloc, bbi_ring_of(sizeof(uint64_t)), window};
}

bool rt_replay_seen(rt_replay *w, const bb_peer_id *from, uint64_t request, uint64_t site) {
  uint64_t key =
      bbi_fnv1a64(from->bytes, from->len) ^ (request * 0x9E3779B97F4A7C15ull) ^ (site * 0xC2B2AE3D27D4EB4Full);
  for (size_t i = 0; i < w->keys.len; i++)
    if (*(const uint64_t *)bbi_ring_at(&w->keys, i) == key) return true;
  if (w->keys.len == w->window) bbi_ring_pop(&w->keys, NULL); /* the oldest key leaves */
  bbi_ring_push(&w->keys, w->alloc, &key);                    /* out of memory: not remembered */
  return false;
}

void rt_replay_free(rt_replay *w) { bbi_ring_free(&w->keys, w->alloc); }

void rt_replay_save(const rt_replay *w, bb_le_writer *out) {
  bb_le_write_u64(out, w->keys.len);
  for (size_t i = 0; i < w->keys.len; i++) bb_le_write_u64(out, *(const uint64_t *)bbi_ring_at(&w->keys, i));
}

int rt_replay_load(rt_replay *w, rt_reader *r) {
  size_t n = rt_read_count(r, 8, "too many dedup keys for the bytes left");
  if (!r->rc && n > w->window) rt_read_bad(r, "the dedup window is larger than this node's");
  for (size_t i = 0; i < n && !r->rc; i++) {
    uint64_t key = rt_read_u64(r);
    if (!r->rc && bbi_ring_push(&w->keys, w->alloc, &key)) rt_read_nomem(r);
  }
  return r->rc;
}
