/* The address book: peer id → addresses, the per-peer block flag, when data was last
 * sent to each peer, and who may enter it (see book.c). */
#ifndef BBI_RUNTIME_BOOK_H
#define BBI_RUNTIME_BOOK_H

#include "runtime/node.h"

/* The entry of p, or NULL. */
rt_peer_entry *rt_book_find(const rt_book *b, const bb_peer_id *p);
/* The entry of p, created if needed (evicting the least recently used entry when the
 * book is full); NULL when nothing can be evicted or memory runs out. */
rt_peer_entry *rt_book_get(bb_node *n, const bb_peer_id *p);
/* Marks an entry used now (eviction takes the least recently used). */
void rt_book_touch(rt_book *b, rt_peer_entry *e);
/* Adds an address of p (a known one is not added twice): 0, BB_ERR_LIMIT (nothing can be
 * evicted), BB_ERR_EXISTS (p has its most addresses already), BB_ERR_NOMEM. */
int rt_book_add(bb_node *n, const bb_peer_id *p, const bb_address *a);
/* Whether p may be in the book: it is already, or the admission rule lets it in. */
bool rt_book_admits(const bb_node *n, const bb_peer_id *p, bb_admission_source source);
/* rt_book_add for a peer that must be admitted first (counted in book.refused when not),
 * with err filled as bb_node_add_peer fills it. */
int rt_book_add_admitted(bb_node *n, const bb_peer_id *p, const bb_address *a, bb_admission_source source,
                         bb_error *err);
/* Frees the node's book and empties it. */
void rt_book_free(bb_node *n);

#endif /* BBI_RUNTIME_BOOK_H */
