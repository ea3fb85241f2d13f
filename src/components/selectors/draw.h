/* Distinct random draws for the peer selectors: a partial Fisher–Yates shuffle over the
 * positions 0..n-1, driven by a caller's generator, so a seeded generator gives the same
 * draws on every host. */
#ifndef BBI_COMPONENTS_SELECTORS_DRAW_H
#define BBI_COMPONENTS_SELECTORS_DRAW_H

#include <stddef.h>
#include <stdint.h>

/* Where draws take their randomness: next(user) returns 64 random bits. */
typedef struct bbi_draw_source {
  uint64_t (*next)(void *user);
  void *user;
} bbi_draw_source;

/* Fills idx[0..n) with 0..n-1 and shuffles its first min(k, n) places: they are the draw,
 * distinct positions, each one generator call. Returns min(k, n). */
size_t bbi_draw_distinct(const bbi_draw_source *rng, size_t n, size_t k, size_t *idx);

#endif
