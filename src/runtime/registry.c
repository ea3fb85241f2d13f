/* The registry of concrete component types an install may construct, by type name. */
#include <string.h>

#include "components/shipped.h"
#include "runtime/node.h"

struct bb_registry {
  const bb_allocator *alloc;
  const bb_component_type **items;
  size_t len, cap;
};

bb_registry *bb_registry_new(const bb_allocator *alloc) {
  if (!alloc) alloc = bb_default_allocator();
  bb_registry *r = alloc->malloc(sizeof *r, alloc->user_data);
  if (r) *r = (bb_registry){alloc, NULL, 0, 0};
  return r;
}

void bb_registry_free(bb_registry *r) {
  if (!r) return;
  if (r->items) r->alloc->free(r->items, r->alloc->user_data);
  r->alloc->free(r, r->alloc->user_data);
}

int bb_registry_add(bb_registry *r, const bb_component_type *type, bb_error *err) {
  if (!type || type->struct_size < BB_COMPONENT_TYPE_SIZE_V1 || !type->type_name || !*type->type_name ||
      !type->create || !type->destroy)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "registry: a component type needs struct_size, type_name, create and destroy");
  if (bb_registry_find(r, type->type_name))
    return bb_error_set(err, BB_ERR_EXISTS, "registry: `%s` is already registered", type->type_name);
  if (r->len == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 16;
    const bb_component_type **items = r->alloc->realloc(r->items, cap * sizeof *items, r->alloc->user_data);
    if (!items) return bb_error_set(err, BB_ERR_NOMEM, "registry: out of memory");
    r->items = items;
    r->cap = cap;
  }
  r->items[r->len++] = type;
  return 0;
}

const bb_component_type *bb_registry_find(const bb_registry *r, const char *type_name) {
  if (!r || !type_name) return NULL;
  for (size_t i = 0; i < r->len; i++)
    if (strcmp(r->items[i]->type_name, type_name) == 0) return r->items[i];
  return NULL;
}

size_t bb_registry_count(const bb_registry *r) { return r ? r->len : 0; }

const bb_component_type *bb_registry_at(const bb_registry *r, size_t i) {
  return r && i < r->len ? r->items[i] : NULL;
}

/* The default registry: the shipped concretes (src/components/shipped.c). */
const bb_registry *rt_builtin_registry(void) {
  static const bb_component_type *items[64];
  static bb_registry shipped = {NULL, items, 0, 0};
  if (!shipped.len)
    for (size_t i = 0; i < bb_shipped_count() && i < 64; i++) items[shipped.len++] = bb_shipped_at(i);
  return &shipped;
}
