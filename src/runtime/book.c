/* The address book: peer id → addresses (what a Send needs to reach a peer), the per-peer
 * block flag, and when data was last sent to the peer. Lookups compare the peer's bytes,
 * never only a hash, so a peer cannot impersonate another by colliding hashes.
 *
 * The book holds at most max_peers entries; a new one then takes the place of the least
 * recently used entry (sends, receipts and inserts count as use), so strangers cannot lock
 * a legitimate peer out by filling it. This node's own entry and blocked peers are never
 * evicted: evicting a block would lift it. Who may enter is admission's rule
 * (admission.c). */
#include <string.h>

#include "runtime/book.h"
#include "util/hash.h"
#include "util/mem.h"

#define EMPTY UINT32_MAX
#define ADDRESS_MAX (128 + 16 * 255) /* bb_address_to_bytes: always enough */

void rt_book_init(rt_book *b, const bb_allocator *alloc, size_t max_peers, const bb_peer_id *self,
                  rt_counters *counters) {
  memset(b, 0, sizeof *b);
  b->alloc = alloc;
  b->max_peers = max_peers;
  if (self) b->self = *self;
  b->counters = counters;
}

static size_t slot_of(const rt_book *b, const bb_peer_id *p) {
  return (size_t)bbi_fnv1a64(p->bytes, p->len) & (b->n_slots - 1);
}

/* The index slot holding peer p, or the empty slot where it would go. */
static size_t probe(const rt_book *b, const bb_peer_id *p) {
  size_t i = slot_of(b, p);
  while (b->slots[i] != EMPTY && !bb_peer_id_equal(&b->items[b->slots[i]].peer, p)) i = (i + 1) & (b->n_slots - 1);
  return i;
}

rt_peer_entry *rt_book_find(const rt_book *b, const bb_peer_id *p) {
  if (!b->n_slots) return NULL;
  uint32_t k = b->slots[probe(b, p)];
  return k == EMPTY ? NULL : &b->items[k];
}

void rt_book_touch(rt_book *b, rt_peer_entry *e) { e->last_used = ++b->clock; }

static int rehash(rt_book *b, size_t n_slots) {
  uint32_t *slots = bbi_mem_alloc(b->alloc, n_slots * sizeof *slots);
  if (!slots) return BB_ERR_NOMEM;
  for (size_t i = 0; i < n_slots; i++) slots[i] = EMPTY;
  bbi_mem_free(b->alloc, b->slots);
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
  b->slots[hole] = EMPTY;
  for (size_t j = (hole + 1) & mask; b->slots[j] != EMPTY; j = (j + 1) & mask) {
    size_t home = slot_of(b, &b->items[b->slots[j]].peer);
    /* the entry at j may fill the hole unless its home lies cyclically in (hole, j] */
    bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    b->slots[hole] = b->slots[j];
    b->slots[j] = EMPTY;
    hole = j;
  }
}

/* The least recently used entry that may be evicted, or EMPTY. */
static uint32_t eviction_victim(const rt_book *b) {
  uint32_t victim = EMPTY;
  for (size_t k = 0; k < b->len; k++) {
    const rt_peer_entry *e = &b->items[k];
    if (e->blocked || bb_peer_id_equal(&e->peer, &b->self)) continue;
    if (victim == EMPTY || e->last_used < b->items[victim].last_used) victim = (uint32_t)k;
  }
  return victim;
}

rt_peer_entry *rt_book_get(rt_book *b, const bb_peer_id *p) {
  rt_peer_entry *e = rt_book_find(b, p);
  if (e) return e;
  uint32_t k;
  if (b->len >= b->max_peers) {
    if ((k = eviction_victim(b)) == EMPTY) return NULL;
    unindex(b, k);
    bbi_mem_free(b->alloc, b->items[k].addrs);
    rt_count(b->counters, "book.evicted", 1);
  } else {
    if ((b->len + 1) * 2 > b->n_slots && rehash(b, b->n_slots ? b->n_slots * 2 : 64)) return NULL;
    if (bbi_mem_grow(b->alloc, (void **)&b->items, &b->cap, b->len + 1, sizeof *b->items)) return NULL;
    k = (uint32_t)b->len++;
  }
  e = &b->items[k];
  memset(e, 0, sizeof *e);
  e->peer = *p;
  rt_book_touch(b, e);
  b->slots[probe(b, p)] = k;
  return e;
}

static bool same_address(const bb_address *a, const bb_address *b) {
  uint8_t x[512], y[512];
  size_t lx = bb_address_to_bytes(a, x, sizeof x), ly = bb_address_to_bytes(b, y, sizeof y);
  return lx == ly && memcmp(x, y, lx) == 0;
}

int rt_book_add(rt_book *b, const bb_peer_id *p, const bb_address *a) {
  rt_peer_entry *e = rt_book_get(b, p);
  if (!e) return b->len >= b->max_peers ? BB_ERR_LIMIT : BB_ERR_NOMEM;
  rt_book_touch(b, e);
  for (size_t i = 0; i < e->n_addrs; i++)
    if (same_address(&e->addrs[i], a)) return 0;
  if (e->n_addrs >= RT_BOOK_MAX_ADDRS) return BB_ERR_EXISTS;
  bb_address *grown = bbi_mem_realloc(b->alloc, e->addrs, (e->n_addrs + 1) * sizeof *grown);
  if (!grown) return BB_ERR_NOMEM;
  e->addrs = grown;
  e->addrs[e->n_addrs++] = *a;
  return 0;
}

int rt_book_add_or_explain(rt_book *b, const bb_peer_id *p, const bb_address *a, bb_error *err) {
  int rc = rt_book_add(b, p, a);
  if (rc == BB_ERR_LIMIT)
    return bb_error_set(err, rc, "address book full: its %zu entries are all blocked peers or this node's own",
                        b->max_peers);
  if (rc == BB_ERR_EXISTS)
    return bb_error_set(err, BB_ERR_LIMIT, "address book: the peer has %d addresses already", RT_BOOK_MAX_ADDRS);
  if (rc) return bb_error_set(err, rc, "out of memory adding a peer");
  return 0;
}

void rt_book_forget(rt_book *b, const bb_peer_id *p) {
  rt_peer_entry *e = rt_book_find(b, p);
  if (!e) return;
  bbi_mem_free(b->alloc, e->addrs);
  e->addrs = NULL;
  e->n_addrs = 0;
}

int rt_book_block(rt_book *b, const bb_peer_id *p, bool blocked, bb_error *err) {
  rt_peer_entry *e = rt_book_get(b, p);
  if (!e) return bb_error_set(err, BB_ERR_LIMIT, "address book full: every entry is blocked or this node's own");
  e->blocked = blocked;
  return 0;
}

void rt_book_free(rt_book *b) {
  for (size_t i = 0; i < b->len; i++) bbi_mem_free(b->alloc, b->items[i].addrs);
  bbi_mem_free(b->alloc, b->items);
  bbi_mem_free(b->alloc, b->slots);
  b->items = NULL;
  b->slots = NULL;
  b->len = b->cap = b->n_slots = 0;
  b->clock = 0;
}

/* ---- save and load -------------------------------------------------------------------------- */

void rt_book_save(const rt_book *b, bb_le_writer *w) {
  bb_le_write_u64(w, b->clock);
  bb_le_write_u64(w, b->len);
  for (size_t i = 0; i < b->len; i++) {
    const rt_peer_entry *e = &b->items[i];
    rt_write_peer(w, &e->peer);
    bb_le_write_u8(w, e->blocked);
    bb_le_write_u8(w, e->sent);
    bb_le_write_u64(w, e->sent_ns);
    bb_le_write_u64(w, e->last_used);
    bb_le_write_u64(w, e->n_addrs);
    for (size_t k = 0; k < e->n_addrs; k++) {
      uint8_t a[ADDRESS_MAX];
      size_t al = bb_address_to_bytes(&e->addrs[k], a, sizeof a);
      if (!al) w->failed = true; /* cannot happen: ADDRESS_MAX always suffices */
      rt_write_bytes(w, a, al);
    }
  }
}

/* Reads p's addresses into its entry. */
static void load_addresses(rt_book *b, rt_reader *r, const bb_peer_id *p) {
  size_t n_addrs = rt_read_count(r, 8, "too many addresses for the bytes left");
  for (size_t k = 0; k < n_addrs && !r->rc; k++) {
    size_t al;
    const uint8_t *ab = rt_read_span(r, &al);
    bb_address a;
    if (r->rc) return;
    if (bb_address_from_bytes(ab, al, &a, NULL)) {
      rt_read_bad(r, "an address of the address book is malformed");
      return;
    }
    int rc = rt_book_add(b, p, &a);
    if (rc == BB_ERR_NOMEM) rt_read_nomem(r);
    else if (rc) rt_read_bad(r, "a peer has too many addresses");
  }
}

/* Reads entry i of a section. */
static void load_entry(rt_book *b, rt_reader *r, uint32_t version, size_t i, uint64_t clock) {
  bb_peer_id p;
  if (!rt_read_peer(r, &p)) return;
  bool blocked = rt_read_u8(r), sent = false;
  uint64_t sent_ns = 0, last_used = i + 1; /* version 1: the order entries were made in */
  if (version >= 2) {
    sent = rt_read_u8(r);
    sent_ns = rt_read_u64(r);
    last_used = rt_read_u64(r);
    if (!r->rc && last_used > clock) rt_read_bad(r, "an address-book entry was used after the book's clock");
  }
  if (!r->rc && rt_book_find(b, &p)) rt_read_bad(r, "the address book names a peer twice");
  rt_peer_entry *e = r->rc ? NULL : rt_book_get(b, &p);
  if (!r->rc && !e) rt_read_nomem(r);
  if (r->rc) return;
  e->blocked = blocked;
  e->sent = sent;
  e->sent_ns = sent_ns;
  load_addresses(b, r, &p);
  if (!r->rc) rt_book_find(b, &p)->last_used = last_used; /* after the inserts, which count as uses */
}

int rt_book_load(rt_book *b, rt_reader *r, uint32_t version) {
  uint64_t clock = version >= 2 ? rt_read_u64(r) : 0;
  size_t n_peers = rt_read_count(r, version >= 2 ? 34 : 17, "too many peers for the bytes left");
  if (!r->rc && n_peers > b->max_peers) rt_read_bad(r, "the address book holds more peers than this node's max_peers");
  for (size_t i = 0; i < n_peers && !r->rc; i++) load_entry(b, r, version, i, clock);
  b->clock = version >= 2 ? clock : n_peers;
  return r->rc;
}
