/* An allocator that fails on demand, for allocation-failure injection: the next `budget`
 * allocations succeed, the one after fails (budget < 0: never), and `live` counts the
 * blocks not yet freed so a test can prove nothing leaked. */
#ifndef BB_TESTS_FAILALLOC_H
#define BB_TESTS_FAILALLOC_H

#include <stdlib.h>

#include "bb/common.h"

typedef struct failing {
  long budget;
  long live;
} failing;

static void *f_malloc(size_t size, void *ud) {
  failing *f = ud;
  if (f->budget == 0) return NULL;
  if (f->budget > 0) f->budget--;
  void *p = malloc(size);
  if (p) f->live++;
  return p;
}

static void *f_realloc(void *ptr, size_t size, void *ud) {
  failing *f = ud;
  if (f->budget == 0) return NULL;
  if (f->budget > 0) f->budget--;
  void *p = realloc(ptr, size);
  if (p && !ptr) f->live++;
  return p;
}

static void f_free(void *ptr, void *ud) {
  failing *f = ud;
  if (ptr) f->live--;
  free(ptr);
}

/* The allocator over a failing state. */
static inline bb_allocator failing_allocator(failing *f) {
  bb_allocator a = {f_malloc, f_realloc, f_free, f};
  return a;
}

#endif
