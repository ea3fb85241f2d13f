/* The components bound to slots, a part of its own: one instance per slot name, found by
 * slot or by the number that addresses it on every peer, each with its saved state in a
 * snapshot. */
#ifndef BBI_RUNTIME_COMPONENTS_H
#define BBI_RUNTIME_COMPONENTS_H

#include "runtime/snapshot_io.h"
#include "bb/runtime.h"

typedef struct rt_component {
  const bb_component_type *type;
  void *self;
  char *slot;
  uint32_t number;    /* stable across peers: FNV-1a-32 of the slot name */
  bb_role role;       /* the role it is bound as */
  char *config;
  bool wake;          /* bb_ctx_wake_loops was called: the engine brings forward, within the
                         same poll, the Interval ticks that reach an op of this component */
} rt_component;

/* Invariants: slot names and numbers are unique. */
typedef struct rt_components {
  const bb_allocator *alloc;
  rt_component *items;
  size_t len;
} rt_components;

/* The index of the component bound at `slot`, or -1. */
long rt_component_index(const rt_components *cs, const char *slot);
/* The component bound at `slot`, or NULL. */
rt_component *rt_component_by_slot(const rt_components *cs, const char *slot);
/* The component a control message's address numbers, or NULL. */
rt_component *rt_component_by_number(const rt_components *cs, uint32_t number);
/* Destroys every component and frees the table. */
void rt_components_free(rt_components *cs);
/* Section: u64 count, then per component its slot, its type name, whether it saved and
 * (if so) its state. */
int rt_components_save(const rt_components *cs, bb_le_writer *w, bb_error *err);
/* Reads a section and checks it names these components (slot and type, in order);
 * nothing is loaded. */
int rt_components_check(const rt_components *cs, rt_reader *r);
/* Reads a section rt_components_check accepted and loads each saved state. A component
 * that can save keeps its fresh state first: if a later one refuses its state (or
 * memory runs out), those already loaded get their fresh state back. */
int rt_components_load(rt_components *cs, rt_reader *r);

#endif /* BBI_RUNTIME_COMPONENTS_H */
