/* Shape plumbing the backward rules share: a value's shape (a constant when it is known at
 * build time), reshapes, reductions, counts, zeros, and un-broadcasting a gradient back to
 * the shape of the input that was broadcast. */
#include "grad/builder.h"

const char *gb_shape_of(gb *b, const char *x) {
  gb_value *v = gb_val(b, x);
  if (!v || b->rc) return NULL;
  if (v->shape) return v->shape;
  const char *shape;
  if (gb_val_static(v)) {
    int64_t dims[BB_MAX_RANK];
    for (int d = 0; d < v->rank; d++) dims[d] = v->dims[d];
    shape = gb_ints(b, dims, (size_t)v->rank);
  } else {
    shape = gb_op(b, "Shape", 1, x);
  }
  if (shape && (v = gb_val(b, x))) v->shape = shape; /* emitting may have moved the table */
  return shape;
}

const char *gb_reshape(gb *b, const char *x, const int64_t *shape, size_t n) {
  return gb_op(b, "Reshape", 2, x, gb_ints(b, shape, n));
}

const char *gb_reshape_like(gb *b, const char *g, const char *x) { return gb_op(b, "Reshape", 2, g, gb_shape_of(b, x)); }

const char *gb_reduce_sum(gb *b, const char *x, const int64_t *axes, size_t n, bool keepdims) {
  bb_ir_node *node = n ? gb_new(b, "ReduceSum", NULL, 1, 2, x, gb_ints(b, axes, n)) : gb_new(b, "ReduceSum", NULL, 1, 1, x);
  gb_attr_int(b, node, "keepdims", keepdims);
  return gb_add(b, node);
}

const char *gb_transpose(gb *b, const char *x, const int64_t *perm, int rank) {
  bb_ir_node *n = gb_new(b, "Transpose", NULL, 1, 1, x);
  gb_attr_ints(b, n, "perm", perm, (size_t)rank);
  return gb_add(b, n);
}

const char *gb_unsqueeze(gb *b, const char *x, const int64_t *axes, size_t n) {
  return gb_op(b, "Unsqueeze", 2, x, gb_ints(b, axes, n));
}

const char *gb_count(gb *b, const char *x, const int64_t *axes, size_t n, int32_t dtype) {
  gb_value *v = gb_val(b, x);
  if (!v || b->rc) return NULL;
  int64_t count = 1;
  bool known = v->rank >= 0;
  for (size_t i = 0; known && i < (n ? n : (size_t)v->rank); i++) {
    gb_dim d = v->dims[n ? axes[i] : (int64_t)i];
    if (GB_KNOWN(d)) count *= d;
    else known = false;
  }
  if (known) return gb_scalar(b, (double)count, dtype);
  const char *c;
  if (n) { /* the product of the gathered dims, as a scalar */
    bb_ir_node *prod = gb_new(b, "ReduceProd", NULL, 1, 1, gb_op(b, "Gather", 2, gb_op(b, "Shape", 1, x), gb_ints(b, axes, n)));
    gb_attr_int(b, prod, "keepdims", 0);
    c = gb_add(b, prod);
  } else {
    c = gb_op(b, "Size", 1, x);
  }
  bb_ir_node *cast = gb_new(b, "Cast", NULL, 1, 1, c);
  gb_attr_int(b, cast, "to", dtype);
  return gb_add(b, cast);
}

const char *gb_zeros_like(gb *b, const char *x) {
  gb_value *v = gb_val(b, x);
  if (!v || b->rc) return NULL;
  int32_t dtype = v->dtype;
  bb_ir_node *n = gb_new(b, "ConstantOfShape", NULL, 1, 1, gb_shape_of(b, x));
  if (!n) return NULL;
  static const uint8_t zero[16];
  int64_t one = 1;
  bb_tensor_proto *t = bb_tensor_proto_new(b->m, NULL, dtype, 1, &one);
  size_t size = bb_dtype_size(dtype);
  if (!t || !size || size > sizeof zero || bb_tensor_proto_set_raw(b->m, t, zero, size)) {
    gb_fail(b, t ? BB_ERR_TYPE : BB_ERR_NOMEM, "cannot make zeros of %s's element type", x);
    return NULL;
  }
  gb_attr_tensor(b, n, "value", t);
  return gb_add(b, n);
}

/* SumToShape: the exact sum back to x's shape, decided at run time. */
static const char *sum_to_shape(gb *b, const char *g, const char *x) {
  return gb_add(b, gb_new(b, "SumToShape", BB_GRAD_DOMAIN, 1, 2, g, gb_shape_of(b, x)));
}

const char *gb_unbroadcast(gb *b, const char *g, const char *x) {
  gb_value *gv = gb_val(b, g), *xv = gb_val(b, x);
  if (!gv || !xv || b->rc) return NULL;
  if (gv->rank < 0 || xv->rank < 0 || xv->rank > gv->rank) return sum_to_shape(b, g, x);
  int lead = gv->rank - xv->rank;
  int64_t axes[BB_MAX_RANK];
  size_t n = 0;
  bool inner = false;
  for (int d = 0; d < lead; d++) axes[n++] = d;
  for (int d = 0; d < xv->rank; d++) {
    gb_dim xd = xv->dims[d], gd = gv->dims[lead + d];
    if (xd == 1 && gd != 1) {
      axes[n++] = lead + d;
      inner = true;
    } else if (!GB_KNOWN(xd) && xd != gd) {
      return sum_to_shape(b, g, x); /* x's dim may be 1 or gd: only the run can tell */
    }
  }
  if (!n) return g;
  if (!inner) return gb_reduce_sum(b, g, axes, n, false);
  const char *sum = gb_reduce_sum(b, g, axes, n, true);
  return lead ? gb_reshape_like(b, sum, x) : sum;
}
