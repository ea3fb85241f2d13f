/* The address book: peer id → addresses, and the per-peer block flag. */
#ifndef BBI_RUNTIME_BOOK_H
#define BBI_RUNTIME_BOOK_H

#include "runtime/node.h"

/* The entry of p, or NULL. */
rt_peer_entry *rt_book_find(const rt_book *b, const bb_peer_id *p);
/* The entry of p, created if needed; NULL when the book is full or memory runs out. */
rt_peer_entry *rt_book_get(bb_node *n, const bb_peer_id *p);
/* Adds an address of p (a known one is not added twice); BB_ERR_LIMIT, BB_ERR_NOMEM. */
int rt_book_add(bb_node *n, const bb_peer_id *p, const bb_address *a);
/* Frees the node's book and empties it. */
void rt_book_free(bb_node *n);

#endif /* BBI_RUNTIME_BOOK_H */
