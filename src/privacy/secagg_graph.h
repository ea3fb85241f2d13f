/* The masking graph: a random Harary graph (a ring of the clients in a random order, each
 * linked to the degree/2 nearest on either side), or the complete graph when the degree is
 * n - 1. The order comes from the round's setup hash, so every client checks its
 * neighbours itself and the server cannot place anyone. */
#ifndef BBI_PRIVACY_SECAGG_GRAPH_H
#define BBI_PRIVACY_SECAGG_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "bb/common.h"

typedef struct sa_graph {
  uint32_t n, degree;
  uint32_t *ring; /* ring[pos]: the client at position pos (NULL for the complete graph) */
  uint32_t *pos;  /* pos[client]: its position */
} sa_graph;

int sa_graph_init(sa_graph *g, const uint8_t setup_hash[32], uint32_t n, uint32_t degree, const bb_allocator *alloc);
void sa_graph_free(sa_graph *g, const bb_allocator *alloc);
/* Client i's neighbours, ascending, into out[0..degree). */
void sa_graph_neighbours(const sa_graph *g, uint32_t i, uint32_t *out);
bool sa_graph_adjacent(const sa_graph *g, uint32_t i, uint32_t j);

/* The x coordinate of holder's share of owner's secrets: 1 + holder's place among owner's
 * ascending neighbours, found in that list; 0 when holder is not there. */
uint8_t sa_share_x(const uint32_t *owner_neighbours, uint32_t degree, uint32_t holder);

#endif
