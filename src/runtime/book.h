/* The address book, a part of its own: peer id → addresses (what a Send needs to reach
 * a peer), the per-peer block flag, and when data was last sent to each peer (see
 * book.c). It sees no node: who may enter it is admission's rule (admission.h). */
#ifndef BBI_RUNTIME_BOOK_H
#define BBI_RUNTIME_BOOK_H

#include <stdbool.h>

#include "runtime/snapshot_io.h"
#include "runtime/steps.h"
#include "bb/wire.h"

/* Addresses kept per peer. */
#define RT_BOOK_MAX_ADDRS 8

typedef struct rt_peer_entry {
  bb_peer_id peer;
  bb_address *addrs;
  size_t n_addrs;
  bool blocked;
  bool sent;          /* a wire.Send queued data for this peer (at sent_ns) */
  uint64_t sent_ns;   /* the node's clock then: what round membership is judged by */
  uint64_t last_used; /* the book's use clock at the last send, receipt or insert */
} rt_peer_entry;

/* Invariants: every entry is indexed once in `slots` (open addressing by the peer's
 * bytes, at most half full); at most max_peers entries; no entry's last_used exceeds
 * `clock`; `self` and blocked peers are never evicted. */
typedef struct rt_book {
  const bb_allocator *alloc;
  rt_peer_entry *items;
  size_t len, cap;
  uint32_t *slots; /* index into items, UINT32_MAX for empty */
  size_t n_slots;
  uint64_t clock;  /* ticks once per use; the least recently used entry is evicted first */
  size_t max_peers;
  bb_peer_id self;       /* this node's own entry, never evicted */
  rt_counters *counters; /* book.evicted (NULL: not counted) */
} rt_book;

void rt_book_init(rt_book *b, const bb_allocator *alloc, size_t max_peers, const bb_peer_id *self,
                  rt_counters *counters);
/* The entry of p, or NULL. */
rt_peer_entry *rt_book_find(const rt_book *b, const bb_peer_id *p);
/* The entry of p, created if needed (evicting the least recently used entry when the
 * book is full); NULL when nothing can be evicted or memory runs out. */
rt_peer_entry *rt_book_get(rt_book *b, const bb_peer_id *p);
/* Marks an entry used now (eviction takes the least recently used). */
void rt_book_touch(rt_book *b, rt_peer_entry *e);
/* Adds an address of p (a known one is not added twice): 0, BB_ERR_LIMIT (nothing can be
 * evicted), BB_ERR_EXISTS (p has its most addresses already), BB_ERR_NOMEM. */
int rt_book_add(rt_book *b, const bb_peer_id *p, const bb_address *a);
/* rt_book_add with err saying what went wrong (BB_ERR_LIMIT for a full book or entry). */
int rt_book_add_or_explain(rt_book *b, const bb_peer_id *p, const bb_address *a, bb_error *err);
/* Drops p's addresses (its entry, block flag and send time stay). */
void rt_book_forget(rt_book *b, const bb_peer_id *p);
/* Sets p's block flag, making its entry if needed. */
int rt_book_block(rt_book *b, const bb_peer_id *p, bool blocked, bb_error *err);
/* Frees the entries and empties the book (its settings stay). */
void rt_book_free(rt_book *b);
/* Section: the use clock, then per peer its id, the block flag, whether and when data
 * was sent to it, its last use and its addresses (each as bytes). */
void rt_book_save(const rt_book *b, bb_le_writer *w);
/* Reads a section into an empty book. Version 1 (no clock, send time or use tick)
 * numbers its entries' uses in the order they were made. */
int rt_book_load(rt_book *b, rt_reader *r, uint32_t version);

#endif /* BBI_RUNTIME_BOOK_H */
