/* Emitting nodes into the graph being built: fresh names under the current prefix,
 * attributes, constants, and inference of every emitted output so later rules can read
 * its type and shape. */
#include <stdarg.h>
#include <string.h>

#include "grad/builder.h"

#define GB_MAX_EMIT_INPUTS 16

static bb_ir_node *new_node(gb *b, const char *op_type, const char *domain, size_t n_out, size_t n_in,
                            const char *const *in) {
  if (b->rc) return NULL;
  for (size_t i = 0; i < n_in; i++)
    if (!in[i]) return NULL;
  const char *first = gb_fresh_name(b, gb_printf(b, "%s/%s", b->prefix ? b->prefix : "grad", op_type));
  if (!first) return NULL;
  bb_ir_node *n = bb_ir_node_new(b->m, op_type, domain, first);
  if (!n) {
    gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
    return NULL;
  }
  for (size_t i = 0; i < n_in; i++)
    if (bb_strlist_append(b->m, &n->inputs, in[i])) {
      gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
      return NULL;
    }
  for (size_t k = 0; k < n_out; k++) {
    const char *name = k ? gb_fresh_name(b, gb_printf(b, "%s:%zu", first, k)) : first;
    /* reserve the name at once, so the next output's fresh name differs */
    if (!name || !gb_val_add(b, name) || bb_strlist_append(b->m, &n->outputs, name)) {
      gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
      return NULL;
    }
  }
  return n;
}

/* new_node over the n_in input names of a variadic call. */
static bb_ir_node *new_node_va(gb *b, const char *op_type, const char *domain, size_t n_out, size_t n_in, va_list ap) {
  const char *in[GB_MAX_EMIT_INPUTS];
  if (n_in > GB_MAX_EMIT_INPUTS) {
    gb_fail(b, BB_ERR_LIMIT, "internal: %s with %zu inputs", op_type, n_in);
    return NULL;
  }
  for (size_t i = 0; i < n_in; i++) in[i] = va_arg(ap, const char *);
  return new_node(b, op_type, domain, n_out, n_in, in);
}

bb_ir_node *gb_new(gb *b, const char *op_type, const char *domain, size_t n_out, size_t n_in, ...) {
  va_list ap;
  va_start(ap, n_in);
  bb_ir_node *n = new_node_va(b, op_type, domain, n_out, n_in, ap);
  va_end(ap);
  return n;
}

const char *gb_add(gb *b, bb_ir_node *n) {
  if (!n || b->rc) return NULL;
  if (bb_nodelist_append(b->m, &b->g->nodes, n)) {
    gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
    return NULL;
  }
  if (n->domain && strcmp(n->domain, BB_GRAD_DOMAIN) == 0) b->grad_domain = true;
  if (gb_infer_node(b, n)) return NULL;
  return n->outputs.items[0];
}

void gb_rename_output(gb *b, bb_ir_node *n, size_t k, const char *hint) {
  if (!n || b->rc || k >= n->outputs.len) return;
  const char *name = gb_fresh_name(b, hint);
  if (name && gb_val_add(b, name)) n->outputs.items[k] = (char *)name;
}

const char *gb_op(gb *b, const char *op_type, size_t n_in, ...) {
  va_list ap;
  va_start(ap, n_in);
  bb_ir_node *n = new_node_va(b, op_type, NULL, 1, n_in, ap);
  va_end(ap);
  return gb_add(b, n);
}

static void attr_done(gb *b, const bb_attr *a) {
  if (!a) gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
}

void gb_attr_int(gb *b, bb_ir_node *n, const char *name, int64_t v) {
  if (n && !b->rc) attr_done(b, bb_attr_set_int(b->m, &n->attrs, name, v));
}

void gb_attr_ints(gb *b, bb_ir_node *n, const char *name, const int64_t *v, size_t count) {
  if (n && !b->rc) attr_done(b, bb_attr_set_ints(b->m, &n->attrs, name, v, count));
}

void gb_attr_float(gb *b, bb_ir_node *n, const char *name, float v) {
  if (n && !b->rc) attr_done(b, bb_attr_set_float(b->m, &n->attrs, name, v));
}

void gb_attr_string(gb *b, bb_ir_node *n, const char *name, const char *v) {
  if (n && !b->rc) attr_done(b, bb_attr_set_string(b->m, &n->attrs, name, v));
}

void gb_attr_tensor(gb *b, bb_ir_node *n, const char *name, bb_tensor_proto *t) {
  if (n && t && !b->rc) attr_done(b, bb_attr_set_tensor(b->m, &n->attrs, name, t));
}

/* A Constant node holding a tensor of dtype, shape dims and raw little-endian data. */
static const char *constant(gb *b, int32_t dtype, size_t rank, const int64_t *dims, const void *data, size_t len) {
  bb_ir_node *n = gb_new(b, "Constant", NULL, 1, 0);
  if (!n) return NULL;
  bb_tensor_proto *t = bb_tensor_proto_new(b->m, NULL, dtype, rank, dims);
  if (!t || bb_tensor_proto_set_raw(b->m, t, data, len)) {
    gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
    return NULL;
  }
  gb_attr_tensor(b, n, "value", t);
  return gb_add(b, n);
}

const char *gb_scalar(gb *b, double v, int32_t dtype) {
  if (dtype == BB_DTYPE_DOUBLE) return constant(b, dtype, 0, NULL, &v, sizeof v);
  float f = (float)v;
  const char *c = constant(b, BB_DTYPE_FLOAT, 0, NULL, &f, sizeof f);
  if (dtype == BB_DTYPE_FLOAT) return c;
  bb_ir_node *n = gb_new(b, "Cast", NULL, 1, 1, c); /* float16, bfloat16: rounded once by Cast */
  gb_attr_int(b, n, "to", dtype);
  return gb_add(b, n);
}

const char *gb_tensor(gb *b, int32_t dtype, int rank, const int64_t *dims, const double *values) {
  int64_t count = 1;
  for (int d = 0; d < rank; d++) count *= dims[d];
  if (dtype == BB_DTYPE_DOUBLE) return constant(b, dtype, (size_t)rank, dims, values, (size_t)count * sizeof *values);
  float *f = bbi_arena_alloc(b->scratch, (size_t)(count ? count : 1) * sizeof *f);
  if (!f) {
    gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
    return NULL;
  }
  for (int64_t i = 0; i < count; i++) f[i] = (float)values[i];
  const char *c = constant(b, BB_DTYPE_FLOAT, (size_t)rank, dims, f, (size_t)count * sizeof *f);
  if (dtype == BB_DTYPE_FLOAT) return c;
  bb_ir_node *n = gb_new(b, "Cast", NULL, 1, 1, c);
  gb_attr_int(b, n, "to", dtype);
  return gb_add(b, n);
}

const char *gb_ints(gb *b, const int64_t *v, size_t n) {
  int64_t dims[1] = {(int64_t)n};
  return constant(b, BB_DTYPE_INT64, 1, dims, v, n * sizeof *v);
}
