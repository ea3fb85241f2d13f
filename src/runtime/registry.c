/* The registry of concrete component types an install may construct, by type name. The
 * runtime knows no concrete type of its own: a host fills the registry it installs with
 * (bb_registry_add_shipped adds the ones this library ships). */
#include <string.h>

#include "bb/runtime.h"
#include "bb/common.h"
#include "util/mem.h"

struct bb_registry {
  const bb_allocator *alloc;
  const bb_component_type **items;
  size_t len, cap;
};

bb_registry *bb_registry_new(const bb_allocator *alloc) {
  if (!alloc) alloc = bb_default_allocator();
  bb_registry *r = bbi_mem_alloc(alloc, sizeof *r);
  if (r) *r = (bb_registry){alloc, NULL, 0, 0};
  return r;
}

void bb_registry_free(bb_registry *r) {
  if (!r) return;
  bbi_mem_free(r->alloc, r->items);
  bbi_mem_free(r->alloc, r);
}

int bb_registry_add(bb_registry *r, const bb_component_type *type, bb_error *err) {
  if (!r) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "registry: no registry to add to");
  if (!type || type->struct_size < BB_COMPONENT_TYPE_SIZE_V1 || !type->type_name || !*type->type_name ||
      !type->create || !type->destroy)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "registry: a component type needs struct_size, type_name, create and destroy");
  if (bb_registry_find(r, type->type_name))
    return bb_error_set(err, BB_ERR_EXISTS, "registry: `%s` is already registered", type->type_name);
  if (bbi_mem_grow(r->alloc, (void **)&r->items, &r->cap, r->len + 1, sizeof *r->items))
    return bb_error_set(err, BB_ERR_NOMEM, "registry: out of memory");
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
