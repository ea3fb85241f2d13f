/* The address book: peer id → addresses (what a Send needs to reach a peer), the per-peer
 * block flag, and when data was last sent to the peer. Lookups compare the peer's bytes,
 * never only a hash, so a peer cannot impersonate another by colliding hashes.
 *
 * Who gets in: the host (bb_node_add_peer, bb_node_block_peer) always; an artifact's
 * AddressBook::Insert and a component's bb_ctx_add_address unless the install's admission
 * hook says no; an envelope's claim of its sender's own address only for a sender the
 * book already holds, or one the hook admits. The book holds at most max_peers entries;
 * a new one then takes the place of the least recently used entry (sends, receipts and
 * inserts count as use), so strangers cannot lock a legitimate peer out by filling it.
 * This node's own entry and blocked peers are never evicted: evicting a block would lift
 * it. */
#include <string.h>

#include "runtime/book.h"
#include "runtime/steps.h"
#include "bb/common.h"
#include "util/hash.h"
#include "util/mem.h"

#define MAX_ADDRS_PER_PEER 8

static size_t slot_of(const rt_book *b, const bb_peer_id *p) {
  return (size_t)bbi_fnv1a64(p->bytes, p->len) & (b->n_slots - 1);
}

/* The index slot holding peer p, or the empty slot where it would go. */
static size_t probe(const rt_book *b, const bb_peer_id *p) {
  size_t i = slot_of(b, p);
  while (b->slots[i] != RT_NONE && !bb_peer_id_equal(&b->items[b->slots[i]].peer, p)) i = (i + 1) & (b->n_slots - 1);
  return i;
}

rt_peer_entry *rt_book_find(const rt_book *b, const bb_peer_id *p) {
  if (!b->n_slots) return NULL;
  uint32_t k = b->slots[probe(b, p)];
  return k == RT_NONE ? NULL : &b->items[k];
}

void rt_book_touch(rt_book *b, rt_peer_entry *e) { e->last_used = ++b->clock; }

static int rehash(bb_node *n, size_t n_slots) {
  rt_book *b = &n->book;
  uint32_t *slots = bbi_mem_alloc(n->alloc, n_slots * sizeof *slots);
  if (!slots) return BB_ERR_NOMEM;
  for (size_t i = 0; i < n_slots; i++) slots[i] = RT_NONE;
  bbi_mem_free(n->alloc, b->slots);
  b->slots = slots;
  b->n_slots = n_slots;
  for (size_t k = 0; k < b->len; k++) slots[probe(b, &b->items[k].peer)] = (uint32_t)k;
  return 0;
}

/* Takes entry k out of the index (linear probing: the entries after it in its run move
 * back to where a lookup would look for them first). */
static void unindex(rt_book *b, uint32_t k) {
  const size_t mask = b->n_slots - 1;
  size_t hole = probe(b, &b->items[k].peer);
  b->slots[hole] = RT_NONE;
  for (size_t j = (hole + 1) & mask; b->slots[j] != RT_NONE; j = (j + 1) & mask) {
    size_t home = slot_of(b, &b->items[b->slots[j]].peer);
    /* the entry at j may fill the hole unless its home lies cyclically in (hole, j] */
    bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    b->slots[hole] = b->slots[j];
    b->slots[j] = RT_NONE;
    hole = j;
  }
}

/* The least recently used entry that may be evicted, or RT_NONE. */
static uint32_t eviction_victim(const bb_node *n) {
  const rt_book *b = &n->book;
  uint32_t victim = RT_NONE;
  for (size_t k = 0; k < b->len; k++) {
    const rt_peer_entry *e = &b->items[k];
    if (e->blocked || bb_peer_id_equal(&e->peer, &n->self)) continue;
    if (victim == RT_NONE || e->last_used < b->items[victim].last_used) victim = (uint32_t)k;
  }
  return victim;
}

rt_peer_entry *rt_book_get(bb_node *n, const bb_peer_id *p) {
  rt_book *b = &n->book;
  rt_peer_entry *e = rt_book_find(b, p);
  if (e) return e;
  uint32_t k;
  if (b->len >= n->cfg.max_peers) {
    if ((k = eviction_victim(n)) == RT_NONE) return NULL;
    unindex(b, k);
    bbi_mem_free(n->alloc, b->items[k].addrs);
    rt_count(n, "book.evicted", 1);
  } else {
    if ((b->len + 1) * 2 > b->n_slots && rehash(n, b->n_slots ? b->n_slots * 2 : 64)) return NULL;
    if (bbi_mem_grow(n->alloc, (void **)&b->items, &b->cap, b->len + 1, sizeof *b->items)) return NULL;
    k = (uint32_t)b->len++;
  }
  e = &b->items[k];
  memset(e, 0, sizeof *e);
  e->peer = *p;
  rt_book_touch(b, e);
  b->slots[probe(b, p)] = k;
  return e;
}

bool rt_book_admits(const bb_node *n, const bb_peer_id *p, bb_admission_source source) {
  if (rt_book_find(&n->book, p)) return true;
  if (n->admit) return n->admit(n->admit_user, p, source);
  if (n->admission.on) {
    const bb_join_role role = rt_admission_role(n, p);
    return role == BB_JOIN_CLIENT || role == BB_JOIN_SERVER;
  }
  return source != BB_ADMIT_CLAIM;
}

static bool same_address(const bb_address *a, const bb_address *b) {
  uint8_t x[512], y[512];
  size_t lx = bb_address_to_bytes(a, x, sizeof x), ly = bb_address_to_bytes(b, y, sizeof y);
  return lx == ly && memcmp(x, y, lx) == 0;
}

int rt_book_add(bb_node *n, const bb_peer_id *p, const bb_address *a) {
  rt_peer_entry *e = rt_book_get(n, p);
  if (!e) return n->book.len >= n->cfg.max_peers ? BB_ERR_LIMIT : BB_ERR_NOMEM;
  rt_book_touch(&n->book, e);
  for (size_t i = 0; i < e->n_addrs; i++)
    if (same_address(&e->addrs[i], a)) return 0;
  if (e->n_addrs >= MAX_ADDRS_PER_PEER) return BB_ERR_EXISTS;
  bb_address *grown = bbi_mem_realloc(n->alloc, e->addrs, (e->n_addrs + 1) * sizeof *grown);
  if (!grown) return BB_ERR_NOMEM;
  e->addrs = grown;
  e->addrs[e->n_addrs++] = *a;
  return 0;
}

int rt_book_add_admitted(bb_node *n, const bb_peer_id *p, const bb_address *a, bb_admission_source source,
                         bb_error *err) {
  if (!rt_book_admits(n, p, source)) {
    rt_count(n, "book.refused", 1);
    char text[128];
    bb_peer_id_to_text(p, text, sizeof text);
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "peer %s was not admitted to the address book", text);
  }
  return bb_node_add_peer(n, p, a, err);
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
    return bb_error_set(err, rc, "address book full: its %zu entries are all blocked peers or this node's own",
                        n->cfg.max_peers);
  if (rc == BB_ERR_EXISTS)
    return bb_error_set(err, BB_ERR_LIMIT, "address book: the peer has %d addresses already", MAX_ADDRS_PER_PEER);
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
  if (!e) return bb_error_set(err, BB_ERR_LIMIT, "address book full: every entry is blocked or this node's own");
  e->blocked = blocked;
  return 0;
}
