#include "components/selectors/draw.h"

size_t bbi_draw_distinct(const bbi_draw_source *rng, size_t n, size_t k, size_t *idx) {
  for (size_t i = 0; i < n; i++) idx[i] = i;
  if (k > n) k = n;
  for (size_t i = 0; i < k; i++) {
    size_t j = i + (size_t)(rng->next(rng->user) % (n - i));
    size_t t = idx[i];
    idx[i] = idx[j];
    idx[j] = t;
  }
  return k;
}
