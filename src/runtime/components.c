/* The components bound to slots (components.h). */
#include <string.h>

#include "runtime/components.h"
#include "util/mem.h"

long rt_component_index(const rt_components *cs, const char *slot) {
  for (size_t i = 0; i < cs->len; i++)
    if (strcmp(cs->items[i].slot, slot) == 0) return (long)i;
  return -1;
}

rt_component *rt_component_by_slot(const rt_components *cs, const char *slot) {
  long i = rt_component_index(cs, slot);
  return i < 0 ? NULL : &cs->items[i];
}

rt_component *rt_component_by_number(const rt_components *cs, uint32_t number) {
  rt_component *found = NULL;
  for (size_t i = 0; i < cs->len; i++)
    if (cs->items[i].number == number) found = &cs->items[i];
  return found;
}

void rt_components_free(rt_components *cs) {
  for (size_t i = 0; i < cs->len; i++) {
    if (cs->items[i].self && cs->items[i].type->destroy) cs->items[i].type->destroy(cs->items[i].self);
    bbi_mem_free(cs->alloc, cs->items[i].slot);
    bbi_mem_free(cs->alloc, cs->items[i].config);
  }
  bbi_mem_free(cs->alloc, cs->items);
  cs->items = NULL;
  cs->len = 0;
}

int rt_components_save(const rt_components *cs, bb_le_writer *w, bb_error *err) {
  bb_le_write_u64(w, cs->len);
  for (size_t i = 0; i < cs->len && !w->failed; i++) {
    const rt_component *c = &cs->items[i];
    rt_write_str(w, c->slot);
    rt_write_str(w, c->type->type_name);
    bb_le_write_u8(w, c->type->save != NULL);
    if (!c->type->save) continue;
    uint8_t *state = NULL;
    size_t len = 0;
    bb_error cerr;
    int rc = c->type->save(c->self, cs->alloc, &state, &len, &cerr);
    if (rc)
      return bb_error_set(err, rc, "snapshot: `%s` (slot `%s`) could not save its state: %s", c->type->type_name,
                          c->slot, cerr.message);
    rt_write_bytes(w, state, len);
    bbi_mem_free(cs->alloc, state);
  }
  return 0;
}

static bool spells(const char *s, const uint8_t *bytes, size_t len) {
  return strlen(s) == len && memcmp(s, bytes, len) == 0;
}

int rt_components_check(const rt_components *cs, rt_reader *r) {
  size_t n = rt_read_count(r, 17, "too many components for the bytes left");
  if (!r->rc && n != cs->len) return rt_read_bad(r, "the snapshot has another set of components");
  for (size_t i = 0; i < n && !r->rc; i++) {
    size_t sl, tl, stl;
    const uint8_t *slot = rt_read_span(r, &sl), *type = rt_read_span(r, &tl);
    if (r->rc) break;
    const rt_component *c = &cs->items[i];
    if (!spells(c->slot, slot, sl) || !spells(c->type->type_name, type, tl))
      return rt_read_bad(r, "a component of the snapshot is not this node's (slot or type differs)");
    if (rt_read_u8(r)) rt_read_span(r, &stl);
  }
  return r->rc;
}

/* A component's fresh state, kept while restore can still be refused. */
typedef struct kept_state {
  uint8_t *bytes;
  size_t len;
  bool valid;
} kept_state;

/* Loads component i's saved state (if any), keeping its fresh state in *kept first. */
static int load_one(rt_components *cs, rt_reader *r, size_t i, kept_state *kept) {
  size_t sl, tl, stl = 0;
  rt_read_span(r, &sl);
  rt_read_span(r, &tl);
  bool saved = rt_read_u8(r);
  const uint8_t *state = saved ? rt_read_span(r, &stl) : NULL;
  rt_component *c = &cs->items[i];
  if (r->rc || !saved || !c->type->load) return r->rc;
  bb_error cerr;
  bb_error_clear(&cerr);
  int rc = c->type->save ? c->type->save(c->self, cs->alloc, &kept->bytes, &kept->len, &cerr) : 0;
  if (rc)
    return r->rc = bb_error_set(r->err, rc, "restore: `%s` (slot `%s`) could not save its fresh state: %s",
                                c->type->type_name, c->slot, cerr.message);
  kept->valid = c->type->save != NULL;
  rc = c->type->load(c->self, state ? state : (const uint8_t *)"", stl, &cerr);
  if (rc)
    r->rc = bb_error_set(r->err, rc, "restore: `%s` (slot `%s`) refused its state: %s", c->type->type_name, c->slot,
                         cerr.message);
  return r->rc;
}

int rt_components_load(rt_components *cs, rt_reader *r) {
  size_t n = rt_read_count(r, 17, "too many components for the bytes left");
  if (!r->rc && n != cs->len) rt_read_bad(r, "the snapshot has another set of components");
  if (r->rc) return r->rc;
  kept_state *kept = bbi_mem_calloc(cs->alloc, n + 1, sizeof *kept);
  if (!kept) return rt_read_nomem(r);
  for (size_t i = 0; i < n && !r->rc; i++) load_one(cs, r, i, &kept[i]);
  for (size_t i = 0; i < n; i++) {
    if (r->rc && kept[i].valid) {
      bb_error ignored;
      const rt_component *c = &cs->items[i];
      c->type->load(c->self, kept[i].bytes ? kept[i].bytes : (const uint8_t *)"", kept[i].len, &ignored);
    }
    bbi_mem_free(cs->alloc, kept[i].bytes);
  }
  bbi_mem_free(cs->alloc, kept);
  return r->rc;
}
