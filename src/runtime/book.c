/* The address book: peer id → addresses (what a Send needs to reach a peer), plus the
 * per-peer block flag. Lookups compare the peer's bytes, never only a hash, so a peer
 * cannot impersonate another by colliding hashes. */
#include <string.h>

#include "runtime/book.h"
#include "bb/common.h"
#include "util/hash.h"
#include "util/mem.h"

#define MAX_PEERS 16384
#define MAX_ADDRS_PER_PEER 8

static size_t slot_of(const rt_book *b, const bb_peer_id *p) {
  return (size_t)bbi_fnv1a64(p->bytes, p->len) & (b->n_slots - 1);
}

rt_peer_entry *rt_book_find(const rt_book *b, const bb_peer_id *p) {
  if (!b->n_slots) return NULL;
  for (size_t i = slot_of(b, p);; i = (i + 1) & (b->n_slots - 1)) {
    uint32_t k = b->slots[i];
    if (k == RT_NONE) return NULL;
    if (bb_peer_id_equal(&b->items[k].peer, p)) return &b->items[k];
  }
}

static int rehash(bb_node *n, size_t n_slots) {
  rt_book *b = &n->book;
  uint32_t *slots = bbi_mem_alloc(n->alloc, n_slots * sizeof *slots);
  if (!slots) return BB_ERR_NOMEM;
  for (size_t i = 0; i < n_slots; i++) slots[i] = RT_NONE;
  bbi_mem_free(n->alloc, b->slots);
  b->slots = slots;
  b->n_slots = n_slots;
  for (size_t k = 0; k < b->len; k++) {
    size_t i = slot_of(b, &b->items[k].peer);
    while (slots[i] != RT_NONE) i = (i + 1) & (n_slots - 1);
    slots[i] = (uint32_t)k;
  }
  return 0;
}

rt_peer_entry *rt_book_get(bb_node *n, const bb_peer_id *p) {
  rt_book *b = &n->book;
  rt_peer_entry *e = rt_book_find(b, p);
  if (e) return e;
  if (b->len >= MAX_PEERS) return NULL;
  if ((b->len + 1) * 2 > b->n_slots && rehash(n, b->n_slots ? b->n_slots * 2 : 64)) return NULL;
  if (bbi_mem_grow(n->alloc, (void **)&b->items, &b->cap, b->len + 1, sizeof *b->items)) return NULL;
  e = &b->items[b->len];
  memset(e, 0, sizeof *e);
  e->peer = *p;
  size_t i = slot_of(b, p);
  while (b->slots[i] != RT_NONE) i = (i + 1) & (b->n_slots - 1);
  b->slots[i] = (uint32_t)b->len++;
  return e;
}

static bool same_address(const bb_address *a, const bb_address *b) {
  uint8_t x[512], y[512];
  size_t lx = bb_address_to_bytes(a, x, sizeof x), ly = bb_address_to_bytes(b, y, sizeof y);
  return lx == ly && memcmp(x, y, lx) == 0;
}

int rt_book_add(bb_node *n, const bb_peer_id *p, const bb_address *a) {
  rt_peer_entry *e = rt_book_get(n, p);
  if (!e) return BB_ERR_LIMIT;
  for (size_t i = 0; i < e->n_addrs; i++)
    if (same_address(&e->addrs[i], a)) return 0;
  if (e->n_addrs >= MAX_ADDRS_PER_PEER) return BB_ERR_LIMIT;
  bb_address *grown = bbi_mem_realloc(n->alloc, e->addrs, (e->n_addrs + 1) * sizeof *grown);
  if (!grown) return BB_ERR_NOMEM;
  e->addrs = grown;
  e->addrs[e->n_addrs++] = *a;
  return 0;
}

void rt_book_free(bb_node *n) {
  for (size_t i = 0; i < n->book.len; i++) bbi_mem_free(n->alloc, n->book.items[i].addrs);
  bbi_mem_free(n->alloc, n->book.items);
  bbi_mem_free(n->alloc, n->book.slots);
  memset(&n->book, 0, sizeof n->book);
}

int bb_node_add_peer(bb_node *n, const bb_peer_id *peer, const bb_address *address, bb_error *err) {
  int rc = rt_book_add(n, peer, address);
  if (rc == BB_ERR_LIMIT)
    return bb_error_set(err, rc, "address book full (%d peers, %d addresses each)", MAX_PEERS, MAX_ADDRS_PER_PEER);
  if (rc) return bb_error_set(err, rc, "out of memory adding a peer");
  return 0;
}

void bb_node_forget_peer(bb_node *n, const bb_peer_id *peer) {
  rt_peer_entry *e = rt_book_find(&n->book, peer);
  if (!e) return;
  bbi_mem_free(n->alloc, e->addrs);
  e->addrs = NULL;
  e->n_addrs = 0;
}

int bb_node_block_peer(bb_node *n, const bb_peer_id *peer, bool blocked, bb_error *err) {
  rt_peer_entry *e = rt_book_get(n, peer);
  if (!e) return bb_error_set(err, BB_ERR_LIMIT, "address book full");
  e->blocked = blocked;
  return 0;
}
