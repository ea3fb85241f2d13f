/* The SecAgg+ masking graph (Bell et al. 2020 use a random graph of logarithmic degree; a
 * random Harary graph is one: every client has exactly `degree` neighbours). */
#include "privacy/secagg_graph.h"

#include <string.h>

#include <sodium/crypto_kdf_blake2b.h>
#include <sodium/utils.h>

#include "privacy/random.h"
#include "privacy/secagg_crypto.h"
#include "util/mem.h"

int sa_graph_init(sa_graph *g, const uint8_t setup_hash[32], uint32_t n, uint32_t degree, const bb_allocator *alloc) {
  memset(g, 0, sizeof *g);
  g->n = n;
  g->degree = degree;
  if (degree >= n - 1) return 0;
  g->ring = bbi_mem_calloc(alloc, n, sizeof *g->ring);
  g->pos = bbi_mem_calloc(alloc, n, sizeof *g->pos);
  if (!g->ring || !g->pos) {
    sa_graph_free(g, alloc);
    return BB_ERR_NOMEM;
  }
  /* Fisher–Yates over a ChaCha20 stream keyed by the setup hash */
  bbi_prng prng;
  memset(&prng, 0, sizeof prng);
  prng.at = sizeof prng.buf;
  crypto_kdf_blake2b_derive_from_key(prng.key, sizeof prng.key, SA_KDF_GRAPH, SA_KDF_CONTEXT, setup_hash);
  for (uint32_t i = 0; i < n; i++) g->ring[i] = i;
  for (uint32_t i = n - 1; i > 0; i--) {
    const uint32_t j = (uint32_t)bbi_prng_below(&prng, (uint64_t)i + 1);
    const uint32_t t = g->ring[i];
    g->ring[i] = g->ring[j];
    g->ring[j] = t;
  }
  bbi_prng_wipe(&prng);
  for (uint32_t p = 0; p < n; p++) g->pos[g->ring[p]] = p;
  return 0;
}

void sa_graph_free(sa_graph *g, const bb_allocator *alloc) {
  bbi_mem_free(alloc, g->ring);
  bbi_mem_free(alloc, g->pos);
  g->ring = g->pos = NULL;
}

static void sort_u32(uint32_t *a, uint32_t n) {
  for (uint32_t i = 1; i < n; i++) {
    const uint32_t v = a[i];
    uint32_t j = i;
    for (; j > 0 && a[j - 1] > v; j--) a[j] = a[j - 1];
    a[j] = v;
  }
}

void sa_graph_neighbours(const sa_graph *g, uint32_t i, uint32_t *out) {
  if (!g->ring) {
    for (uint32_t j = 0, k = 0; j < g->n; j++)
      if (j != i) out[k++] = j;
    return;
  }
  const uint32_t p = g->pos[i], half = g->degree / 2;
  for (uint32_t d = 1; d <= half; d++) {
    out[2 * (d - 1)] = g->ring[(p + d) % g->n];
    out[2 * (d - 1) + 1] = g->ring[(p + g->n - d) % g->n];
  }
  sort_u32(out, g->degree);
}

bool sa_graph_adjacent(const sa_graph *g, uint32_t i, uint32_t j) {
  if (i == j || i >= g->n || j >= g->n) return false;
  if (!g->ring) return true;
  const uint32_t a = g->pos[i], b = g->pos[j];
  const uint32_t d = a > b ? a - b : b - a;
  const uint32_t ring_d = d < g->n - d ? d : g->n - d;
  return ring_d <= g->degree / 2;
}

uint8_t sa_share_x(const uint32_t *owner_neighbours, uint32_t degree, uint32_t holder) {
  uint32_t lo = 0, hi = degree;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (owner_neighbours[mid] < holder) lo = mid + 1;
    else hi = mid;
  }
  return lo < degree && owner_neighbours[lo] == holder ? (uint8_t)(lo + 1) : 0;
}
