/* The gradient builder's table of values: what is known about each value's type, shape
 * and contents, a node's inputs and outputs read through it, symbols for dims known only
 * by name or not at all, fresh names, and the sticky error record. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "grad/builder.h"
#include "util/mem.h"

int gb_fail(gb *b, int code, const char *fmt, ...) {
  if (b->rc) return b->rc;
  b->rc = code;
  if (b->err) {
    char msg[BB_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    bb_error_set(b->err, code, "%s", msg);
  }
  return code;
}

const char *gb_node_label(gb *b, const bb_ir_node *n) {
  const char *label = gb_printf(b, "node %s (%s)", n->name && *n->name ? n->name : "(unnamed)", n->op_type);
  return label ? label : "a node";
}

char *gb_printf(gb *b, const char *fmt, ...) {
  char small[256];
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (len < 0) len = 0;
  char *out = bbi_arena_alloc(b->m->arena, (size_t)len + 1);
  if (!out) {
    gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
    return NULL;
  }
  va_start(ap, fmt);
  vsnprintf(out, (size_t)len + 1, fmt, ap);
  va_end(ap);
  return out;
}

int32_t gb_dtype(gb *b, const char *name) {
  gb_value *v = gb_val(b, name);
  return v ? v->dtype : BB_DTYPE_UNDEFINED;
}

gb_value *gb_val(gb *b, const char *name) {
  uint32_t id;
  if (!name || !bbi_strmap_get(&b->ids, name, &id)) return NULL;
  return b->values[id];
}

bool gb_has_input(const bb_ir_node *n, size_t i) { return i < n->inputs.len && *n->inputs.items[i]; }

gb_value *gb_input_val(gb *b, const bb_ir_node *n, size_t i) {
  return gb_has_input(n, i) ? gb_val(b, n->inputs.items[i]) : NULL;
}

gb_value *gb_output_val(gb *b, const bb_ir_node *n, size_t k) {
  return k < n->outputs.len && *n->outputs.items[k] ? gb_val(b, n->outputs.items[k]) : NULL;
}

gb_value *gb_val_add(gb *b, const char *name) {
  if (b->rc) return NULL;
  if (b->n_values == b->cap_values) {
    size_t cap = b->cap_values;
    if (bbi_mem_grow(b->alloc, (void **)&b->values, &cap, b->n_values + 1, sizeof *b->values)) {
      gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
      return NULL;
    }
    b->cap_values = cap;
  }
  gb_value *v = bbi_arena_alloc(b->scratch, sizeof *v);
  if (!v) {
    gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
    return NULL;
  }
  b->values[b->n_values] = v;
  v->name = name;
  v->rank = -1;
  v->vec_len = -1;
  if (bbi_strmap_put(&b->ids, name, (uint32_t)b->n_values)) {
    gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
    return NULL;
  }
  b->n_values++;
  return v;
}

gb_dim gb_symbol(gb *b, const char *param) {
  if (param && *param)
    for (int64_t k = 0; k < b->n_symbols; k++)
      if (b->symbol_names[k] && strcmp(b->symbol_names[k], param) == 0) return GB_SYMBOL_0 - k;
  if ((size_t)b->n_symbols == b->cap_symbols &&
      bbi_mem_grow(b->alloc, (void **)&b->symbol_names, &b->cap_symbols, (size_t)b->n_symbols + 1,
                  sizeof *b->symbol_names)) {
    gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
    return GB_SYMBOL_0 - b->n_symbols; /* a symbol nothing else will match; the build fails anyway */
  }
  b->symbol_names[b->n_symbols] = param && *param ? param : NULL;
  return GB_SYMBOL_0 - b->n_symbols++;
}

const char *gb_symbol_name(const gb *b, gb_dim d) {
  return GB_IS_SYMBOL(d) && GB_SYMBOL_0 - d < b->n_symbols ? b->symbol_names[GB_SYMBOL_0 - d] : NULL;
}

const char *gb_fresh_name(gb *b, const char *hint) {
  if (b->rc) return NULL;
  if (!gb_val(b, hint)) return gb_printf(b, "%s", hint);
  for (;;) {
    char *name = gb_printf(b, "%s_%llu", hint, (unsigned long long)++b->counter);
    if (!name || !gb_val(b, name)) return name;
  }
}

void gb_val_set_shape(gb_value *v, int32_t dtype, int rank, const gb_dim *dims) {
  v->dtype = dtype;
  v->rank = rank > BB_MAX_RANK ? -1 : rank;
  if (v->rank > 0) memcpy(v->dims, dims, (size_t)v->rank * sizeof *dims);
}

void gb_val_set_type(gb *b, gb_value *v, const bb_type *type) {
  if (!type || type->kind != BB_TYPE_TENSOR) return;
  v->dtype = type->has_elem_type ? type->elem_type : BB_DTYPE_UNDEFINED;
  if (!type->shape || type->shape->rank > BB_MAX_RANK) return;
  v->rank = (int)type->shape->rank;
  for (int d = 0; d < v->rank; d++) {
    const bb_dim *dim = &type->shape->dims[d];
    v->dims[d] = dim->kind == BB_DIM_VALUE && dim->value >= 0 ? dim->value
                                                              : gb_symbol(b, dim->kind == BB_DIM_PARAM ? dim->param : NULL);
  }
}

int64_t gb_val_numel(const gb_value *v) {
  if (v->rank < 0) return -1;
  int64_t n = 1;
  for (int d = 0; d < v->rank; d++) {
    if (v->dims[d] < 0) return -1;
    if (v->dims[d] && n > INT64_MAX / v->dims[d]) return -1;
    n *= v->dims[d];
  }
  return n;
}

bool gb_val_static(const gb_value *v) { return gb_val_numel(v) >= 0; }

static bool is_int_dtype(int32_t dt) { return dt == BB_DTYPE_INT64 || dt == BB_DTYPE_INT32; }

int gb_val_vector(const gb_value *v, gb_dim *out) {
  if (v->vec_len >= 0) {
    memcpy(out, v->vec, (size_t)v->vec_len * sizeof *out);
    return v->vec_len;
  }
  if (!v->known || !is_int_dtype(v->known->dtype) || v->known->rank > 1 || v->known->numel > BB_MAX_RANK) return -1;
  int64_t vals[BB_MAX_RANK];
  long n = gb_known_ints(v, vals, BB_MAX_RANK);
  for (long i = 0; i < n; i++) out[i] = vals[i];
  return (int)n;
}

long gb_known_ints(const gb_value *v, int64_t *out, size_t max) {
  const bb_tensor *t = v ? v->known : NULL;
  if (!t || !is_int_dtype(t->dtype) || (uint64_t)t->numel > max) return -1;
  for (int64_t i = 0; i < t->numel; i++)
    out[i] = t->dtype == BB_DTYPE_INT64 ? ((const int64_t *)bb_tensor_data(t))[i] : ((const int32_t *)bb_tensor_data(t))[i];
  return (long)t->numel;
}

long gb_node_axes(gb *b, const bb_ir_node *n, size_t input, int64_t input_since, int rank, int64_t *axes) {
  long count = 0;
  if (b->opset >= input_since) {
    if (gb_has_input(n, input) && (count = gb_known_ints(gb_input_val(b, n, input), axes, BB_MAX_RANK)) < 0) return -1;
  } else {
    const bb_attr *a = bb_attr_find(&n->attrs, "axes");
    if (a) {
      if (a->n_ints > BB_MAX_RANK) return -1;
      count = (long)a->n_ints;
      memcpy(axes, a->ints, a->n_ints * sizeof *axes);
    }
  }
  for (long i = 0; i < count; i++) {
    if (axes[i] < 0) {
      if (rank < 0) return -1;
      axes[i] += rank;
    }
    if (axes[i] < 0 || (rank >= 0 && axes[i] >= rank)) return -1;
  }
  return count;
}

bool gb_known_scalar(const gb_value *v, double *out) {
  const bb_tensor *t = v ? v->known : NULL;
  if (!t || t->numel != 1) return false;
  const void *d = bb_tensor_data(t);
  switch (t->dtype) {
  case BB_DTYPE_FLOAT: *out = *(const float *)d; return true;
  case BB_DTYPE_DOUBLE: *out = *(const double *)d; return true;
  case BB_DTYPE_INT64: *out = (double)*(const int64_t *)d; return true;
  case BB_DTYPE_INT32: *out = *(const int32_t *)d; return true;
  case BB_DTYPE_BOOL: *out = *(const uint8_t *)d; return true;
  default: return false;
  }
}

bb_type *gb_val_type(gb *b, const gb_value *v) {
  bb_type *t = bb_type_new_tensor(b->m, v->dtype, -1, NULL);
  if (!t) {
    gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
    return NULL;
  }
  if (v->rank < 0) return t;
  if (!v->rank) { /* a scalar: a shape with no dims */
    t->shape = bbi_arena_alloc(b->m->arena, sizeof *t->shape);
    if (!t->shape) gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
    return t->shape ? t : NULL;
  }
  for (int d = 0; d < v->rank; d++)
    if (bb_type_add_dim(b->m, t, v->dims[d] >= 0 ? v->dims[d] : -1, gb_symbol_name(b, v->dims[d]))) {
      gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
      return NULL;
    }
  return t;
}
