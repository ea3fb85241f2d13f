/* Rows and labels in the forms an ONNX model declares (onnx_rows.h). */
#include "components/models/onnx_rows.h"

#include <math.h>
#include <string.h>

static bool is_initializer(const bb_model *m, const char *name) {
  for (size_t i = 0; i < m->graph->initializers.len; i++)
    if (strcmp(m->graph->initializers.items[i]->name, name) == 0) return true;
  return false;
}

int bbi_onnx_rows_input_of(const bb_model *m, const char *name, bbi_onnx_rows *out, bb_error *err) {
  const bb_graph *g = m->graph;
  const bb_value_info *in = NULL;
  bool any = !name || !*name;
  for (size_t i = 0; i < g->inputs.len && !in; i++) {
    const bb_value_info *vi = g->inputs.items[i];
    if (!is_initializer(m, vi->name) && (any || strcmp(vi->name, name) == 0)) in = vi;
  }
  if (!in) return bb_error_set(err, BB_ERR_NOT_FOUND, "the model has no data input%s%s", any ? "" : " ", any ? "" : name);
  const bb_type *t = in->type;
  bool dtype_ok = t && t->kind == BB_TYPE_TENSOR &&
                  (t->elem_type == BB_DTYPE_FLOAT || t->elem_type == BB_DTYPE_INT64 || t->elem_type == BB_DTYPE_INT32);
  if (!dtype_ok || !t->shape || t->shape->rank < 1 || t->shape->rank > BB_MAX_RANK)
    return bb_error_set(err, BB_ERR_TYPE, "input %s must be a float32, int64 or int32 tensor of known rank", in->name);
  out->name = in->name;
  out->dtype = t->elem_type;
  out->rank = (int)t->shape->rank;
  for (int d = 0; d < out->rank; d++) out->dims[d] = t->shape->dims[d].kind == BB_DIM_VALUE ? t->shape->dims[d].value : -1;
  return 0;
}

int bbi_onnx_rows_target_of(const bb_model *m, const char *name, const char *prediction, bbi_onnx_rows *out,
                            bb_error *err) {
  const bb_value_info *target = bb_vilist_find(&m->graph->inputs, name);
  const bb_shape *ts = target && target->type ? target->type->shape : NULL;
  if (!target || !target->type) return bb_error_set(err, BB_ERR_NOT_FOUND, "the training graph has no target %s", name);
  out->name = target->name;
  out->dtype = target->type->elem_type;
  out->rank = ts ? (int)ts->rank : 1;
  /* labels come one per row */
  if (out->rank > 2 || (out->rank == 2 && ts->dims[1].kind == BB_DIM_VALUE && ts->dims[1].value != 1))
    return bb_error_set(err, BB_ERR_TYPE, "the loss compares output %s to one label per row, but it gives %s per row",
                        prediction, out->rank > 2 ? "a tensor" : "several values");
  return 0;
}

/* Whole-number rows as an integer input: a float32 holds every whole number up to 2^24. */
static int integer_rows(const bbi_onnx_rows *in, const bb_tensor *x, const int64_t *dims, const bb_allocator *alloc,
                        bb_tensor **out, bb_error *err) {
  bb_tensor *t = bb_tensor_new_empty(alloc, in->dtype, in->rank, dims);
  if (!t) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  const float *v = bb_tensor_data(x);
  for (int64_t i = 0; i < x->numel; i++) {
    if (v[i] != floorf(v[i]) || fabsf(v[i]) > 16777216.0f) {
      bb_tensor_release(t);
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "value %g at %lld is not a whole number of at most 2^24, as %s input %s needs",
                          v[i], (long long)i, bb_dtype_name(in->dtype), in->name);
    }
    if (in->dtype == BB_DTYPE_INT64) ((int64_t *)bb_tensor_data(t))[i] = (int64_t)v[i];
    else ((int32_t *)bb_tensor_data(t))[i] = (int32_t)v[i];
  }
  *out = t;
  return 0;
}

int bbi_onnx_rows_feed(const bbi_onnx_rows *in, const bb_tensor *x, const bb_allocator *alloc, bb_tensor **out,
                       bb_error *err) {
  if (x->dtype != BB_DTYPE_FLOAT || x->rank < 1 || !x->numel)
    return bb_error_set(err, BB_ERR_TYPE, "input must be float32 rows [n, ...]");
  int64_t dims[BB_MAX_RANK], row = 1, n = x->dims[0];
  memcpy(dims, in->dims, sizeof dims);
  dims[0] = n;
  int hole = -1;
  for (int d = 1; d < in->rank; d++) {
    if (dims[d] >= 0) row *= dims[d];
    else if (hole < 0) hole = d;
    else return bb_error_set(err, BB_ERR_TYPE, "input %s has several unknown dims after the batch", in->name);
  }
  if (hole > 0 && row && (x->numel / n) % row == 0) dims[hole] = x->numel / n / row, row *= dims[hole];
  if (row * n != x->numel || (in->dims[0] >= 0 && in->dims[0] != n))
    return bb_error_set(err, BB_ERR_TYPE, "%lld rows of %lld values do not fit input %s, which takes %lld per row",
                        (long long)n, (long long)(x->numel / n), in->name, (long long)row);
  if (in->dtype != BB_DTYPE_FLOAT) return integer_rows(in, x, dims, alloc, out, err);
  *out = bb_tensor_view(x, in->rank, dims);
  return *out ? 0 : bb_error_set(err, BB_ERR_NOMEM, "out of memory");
}

int bbi_onnx_rows_labels(const bbi_onnx_rows *target, const bb_tensor *labels, int64_t n, const bb_allocator *alloc,
                         bb_tensor **out, bb_error *err) {
  if (labels->dtype != BB_DTYPE_FLOAT || labels->numel != n)
    return bb_error_set(err, BB_ERR_TYPE, "takes %lld float32 labels, one per row, got %lld", (long long)n,
                        (long long)labels->numel);
  int64_t dims[2] = {n, 1};
  bb_tensor *t = bb_tensor_new_empty(alloc, target->dtype, target->rank == 2 ? 2 : 1, dims);
  if (!t) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  const float *l = bb_tensor_data(labels);
  for (int64_t i = 0; i < n; i++) {
    if (target->dtype == BB_DTYPE_INT64) {
      if (!(l[i] >= 0) || l[i] != floorf(l[i])) {
        bb_tensor_release(t);
        return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "label %g of row %lld is not a class id", l[i], (long long)i);
      }
      ((int64_t *)bb_tensor_data(t))[i] = (int64_t)l[i];
    } else {
      ((float *)bb_tensor_data(t))[i] = l[i];
    }
  }
  *out = t;
  return 0;
}
