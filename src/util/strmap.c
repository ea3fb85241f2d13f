#include "util/strmap.h"

#include <string.h>

#include "util/hash.h"

void bbi_strmap_init(bbi_strmap *m, const bb_allocator *alloc) {
  memset(m, 0, sizeof *m);
  m->alloc = alloc ? alloc : bb_default_allocator();
}

void bbi_strmap_free(bbi_strmap *m) {
  if (m->keys) m->alloc->free((void *)m->keys, m->alloc->user_data);
  if (m->values) m->alloc->free(m->values, m->alloc->user_data);
  memset(m, 0, sizeof *m);
}

static size_t slot_of(const bbi_strmap *m, const char *key) {
  size_t mask = m->cap - 1, i = (size_t)bbi_fnv1a64(key, strlen(key)) & mask;
  while (m->keys[i] && strcmp(m->keys[i], key) != 0) i = (i + 1) & mask;
  return i;
}

static int grow(bbi_strmap *m) {
  size_t cap = m->cap ? m->cap * 2 : 16;
  if (cap > SIZE_MAX / sizeof(void *)) return BB_ERR_NOMEM;
  const char **keys = m->alloc->malloc(cap * sizeof *keys, m->alloc->user_data);
  uint32_t *values = m->alloc->malloc(cap * sizeof *values, m->alloc->user_data);
  if (!keys || !values) {
    if (keys) m->alloc->free((void *)keys, m->alloc->user_data);
    if (values) m->alloc->free(values, m->alloc->user_data);
    return BB_ERR_NOMEM;
  }
  memset((void *)keys, 0, cap * sizeof *keys);
  bbi_strmap old = *m;
  m->keys = keys;
  m->values = values;
  m->cap = cap;
  for (size_t i = 0; i < old.cap; i++) {
    if (!old.keys[i]) continue;
    size_t s = slot_of(m, old.keys[i]);
    m->keys[s] = old.keys[i];
    m->values[s] = old.values[i];
  }
  if (old.keys) m->alloc->free((void *)old.keys, m->alloc->user_data);
  if (old.values) m->alloc->free(old.values, m->alloc->user_data);
  return 0;
}

int bbi_strmap_put(bbi_strmap *m, const char *key, uint32_t value) {
  if ((m->len + 1) * 4 > m->cap * 3 && grow(m)) return BB_ERR_NOMEM;
  size_t s = slot_of(m, key);
  if (!m->keys[s]) {
    m->keys[s] = key;
    m->len++;
  }
  m->values[s] = value;
  return 0;
}

bool bbi_strmap_get(const bbi_strmap *m, const char *key, uint32_t *value) {
  if (!m->cap) return false;
  size_t s = slot_of(m, key);
  if (!m->keys[s]) return false;
  *value = m->values[s];
  return true;
}
