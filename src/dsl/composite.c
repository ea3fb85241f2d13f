/* Composite values: Bundle packs values into one, Unbundle takes one apart
 * (domain ai.bytesandbrains.composite). */
#include <stdio.h>
#include <string.h>

#include "dsl/recorder.h"

/* Sets child_count and child_types (the denotations, comma-joined) on a node. */
static int set_child_attrs(bb_rec *r, bb_ir_node *n, const char *const *types, size_t count) {
  size_t len = 1;
  for (size_t i = 0; i < count; i++) len += strlen(types[i]) + 1;
  char *joined = bbi_arena_alloc(r->scratch, len);
  if (!joined) return rec_nomem(r);
  char *p = joined;
  for (size_t i = 0; i < count; i++) {
    if (i) *p++ = ',';
    size_t l = strlen(types[i]);
    memcpy(p, types[i], l);
    p += l;
  }
  *p = '\0';
  if (!bb_attr_set_int(r->model, &n->attrs, BB_ATTR_CHILD_COUNT, (int64_t)count) ||
      !bb_attr_set_string(r->model, &n->attrs, BB_ATTR_CHILD_TYPES, joined))
    return rec_nomem(r);
  return 0;
}

bb_value bb_rec_bundle(bb_rec *rec, const bb_value *parts, size_t n_parts) {
  bb_value none = {0};
  if (!rec || rec->failed) return none;
  if (!n_parts || !parts) {
    rec_error(rec, BB_ERR_INVALID_ARGUMENT, "bundle needs at least one part");
    return none;
  }
  const char **types = bbi_arena_alloc(rec->scratch, n_parts * sizeof *types);
  if (!types) {
    rec_nomem(rec);
    return none;
  }
  for (size_t i = 0; i < n_parts; i++) {
    char what[32];
    snprintf(what, sizeof what, "bundle part %zu", i);
    if (!rec_check_value(rec, parts[i], what)) return none;
    types[i] = rec_value_type(rec, parts[i]);
  }
  bb_ir_node *n = rec_node_begin(rec, "Bundle", BB_DOMAIN_COMPOSITE, parts, n_parts);
  if (!n || set_child_attrs(rec, n, types, n_parts)) return none;
  return rec_node_end(rec, n, BB_TYPE_COMPOSITE);
}

int bb_rec_unbundle(bb_rec *rec, bb_value composite, const char *const *types, bb_value *parts, size_t n_parts) {
  if (parts) memset(parts, 0, n_parts * sizeof *parts);
  if (!rec) return BB_ERR_INVALID_ARGUMENT;
  if (rec->failed) return rec->error.code;
  if (!n_parts || !types || !parts)
    return rec_error(rec, BB_ERR_INVALID_ARGUMENT, "unbundle needs at least one part type and room for the parts");
  if (!rec_check_value(rec, composite, "the composite to unbundle")) return rec->error.code;
  const char *ctype = rec_value_type(rec, composite);
  if (rec_types_conflict(ctype, BB_TYPE_COMPOSITE))
    return rec_error(rec, BB_ERR_TYPE, "unbundle of value '%s', which is %s, not a composite", composite.name,
                     ctype);
  const char **copies = bbi_arena_alloc(rec->scratch, n_parts * sizeof *copies);
  if (!copies) return rec_nomem(rec);
  for (size_t i = 0; i < n_parts; i++)
    if (!rec_check_type(rec, types[i]) || !(copies[i] = rec_copy(rec, types[i]))) return rec->error.code;
  bb_ir_node *n = rec_node_begin(rec, "Unbundle", BB_DOMAIN_COMPOSITE, &composite, 1);
  if (!n) return rec->error.code;
  const char **outs = bbi_arena_alloc(rec->scratch, n_parts * sizeof *outs);
  if (!outs) return rec_nomem(rec);
  for (size_t i = 0; i < n_parts; i++)
    if (!(outs[i] = rec_mint_name(rec)) || rec_node_output(rec, n, outs[i])) return rec->error.code;
  if (set_child_attrs(rec, n, copies, n_parts) || rec_node_push(rec, n)) return rec->error.code;
  for (size_t i = 0; i < n_parts; i++) {
    bb_value v = rec_define(rec, outs[i], copies[i]);
    if (!v.name) {
      memset(parts, 0, n_parts * sizeof *parts);
      return rec->error.code;
    }
    parts[i] = v;
  }
  return 0;
}
