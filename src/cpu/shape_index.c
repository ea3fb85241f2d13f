/* CPU operators that read or write by index: Gather (whole slices along an axis),
 * GatherElements and ScatterElements (single elements along an axis), GatherND and
 * ScatterND (slices addressed by index tuples). Indices are int32 or int64 and may be
 * negative (counted from the back); one out of range fails the node. The Elements and
 * ND pairs share the step that turns indices into data offsets. */
#include <string.h>

#include "cpu/shape_args.h"
#include "cpu/shape_copy.h"
#include "cpu/shape.h"
#include "util/mem.h"
#include "util/parallel.h"

static const int32_t INDEX_TYPES[] = {BB_DTYPE_INT64, BB_DTYPE_INT32, BB_DTYPE_UNDEFINED};

/* Index i of t, made non-negative against dim; fails when out of [-dim, dim). */
static int read_index(bbi_cpu_op_ctx *ctx, const bb_tensor *t, int64_t i, int64_t dim, int axis, int64_t *out) {
  int64_t v = t->dtype == BB_DTYPE_INT64 ? ((const int64_t *)bb_tensor_data(t))[i]
                                         : ((const int32_t *)bb_tensor_data(t))[i];
  if (v < -dim || v >= dim)
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "index %lld (at %lld) is out of range for axis %d of size %lld",
                       (long long)v, (long long)i, axis, (long long)dim);
  *out = v < 0 ? v + dim : v;
  return 0;
}

static int64_t *alloc_offsets(bbi_cpu_op_ctx *ctx, int64_t n) {
  int64_t *p = bbi_mem_alloc(ctx->alloc, (size_t)n * sizeof *p);
  if (!p) bbi_cpu_fail(ctx, BB_ERR_NOMEM, "cannot allocate %lld offsets", (long long)n);
  return p;
}

static void free_offsets(bbi_cpu_op_ctx *ctx, int64_t *p) { bbi_mem_free(ctx->alloc, p); }

int bbi_cpu_gather(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *data = ctx->inputs[0], *indices = ctx->inputs[1];
  size_t esize;
  int rc, axis;
  if ((rc = bbi_cpu_elem_size(ctx, 0, &esize)) || (rc = bbi_cpu_expect_dtype(ctx, 1, INDEX_TYPES))) return rc;
  if ((rc = bbi_cpu_axis(ctx, bb_attr_get_int(&ctx->node->attrs, "axis", 0), data->rank, &axis))) return rc;
  int rank = data->rank - 1 + indices->rank;
  if (rank > BB_MAX_RANK) return bbi_cpu_fail(ctx, BB_ERR_UNSUPPORTED, "output rank %d is over %d", rank, BB_MAX_RANK);
  int64_t dims[BB_MAX_RANK], outer = 1, inner = 1, dim = data->dims[axis];
  int r = 0;
  for (int k = 0; k < axis; k++) outer *= dims[r++] = data->dims[k];
  for (int k = 0; k < indices->rank; k++) dims[r++] = indices->dims[k];
  for (int k = axis + 1; k < data->rank; k++) inner *= dims[r++] = data->dims[k];
  int64_t n = indices->numel;
  int64_t *idx = alloc_offsets(ctx, n);
  if (!idx) return BB_ERR_NOMEM;
  for (int64_t i = 0; i < n && !rc; i++) rc = read_index(ctx, indices, i, dim, axis, &idx[i]);
  if (!rc) rc = bbi_cpu_make_output(ctx, 0, data->dtype, rank, dims);
  if (!rc) {
    size_t row = (size_t)inner * esize;
    const char *src = bb_tensor_data(data);
    char *dst = bb_tensor_data(ctx->outputs[0]);
    for (int64_t o = 0; o < outer; o++, src += (size_t)dim * row)
      for (int64_t i = 0; i < n; i++, dst += row) memcpy(dst, src + (size_t)idx[i] * row, row);
  }
  free_offsets(ctx, idx);
  return rc;
}

/* ---- single elements along an axis ----------------------------------------------------------- */

/* The data offset (in elements) each index of an Elements operator addresses: the
 * index's own position with its axis coordinate replaced by the index value. Checks the
 * shapes (same rank, indices no larger than data off the axis) and the index range. */
static int element_offsets(bbi_cpu_op_ctx *ctx, const bb_tensor *data, const bb_tensor *indices, int axis,
                           int64_t *offsets) {
  char d1[96], d2[96];
  bool fits = indices->rank == data->rank;
  for (int k = 0; fits && k < data->rank; k++) fits = k == axis || indices->dims[k] <= data->dims[k];
  if (!fits)
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "indices %s do not fit data %s", bb_tensor_describe(indices, d1, sizeof d1),
                       bb_tensor_describe(data, d2, sizeof d2));
  int64_t strides[BB_MAX_RANK], pos[BB_MAX_RANK] = {0}, base = 0;
  bbi_copy_strides(data->rank, data->dims, 1, strides);
  for (int64_t i = 0; i < indices->numel; i++) {
    int64_t v = 0;
    int rc = read_index(ctx, indices, i, data->dims[axis], axis, &v);
    if (rc) return rc;
    offsets[i] = base + v * strides[axis];
    /* next position of the indices; base is its data offset without the axis term */
    for (int k = data->rank - 1; k >= 0; k--) {
      if (++pos[k] < indices->dims[k]) {
        if (k != axis) base += strides[k];
        break;
      }
      if (k != axis) base -= strides[k] * (indices->dims[k] - 1);
      pos[k] = 0;
    }
  }
  return 0;
}

int bbi_cpu_gather_elements(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *data = ctx->inputs[0], *indices = ctx->inputs[1];
  size_t esize;
  int rc, axis;
  if ((rc = bbi_cpu_elem_size(ctx, 0, &esize)) || (rc = bbi_cpu_expect_dtype(ctx, 1, INDEX_TYPES))) return rc;
  if ((rc = bbi_cpu_axis(ctx, bb_attr_get_int(&ctx->node->attrs, "axis", 0), data->rank, &axis))) return rc;
  int64_t *offsets = alloc_offsets(ctx, indices->numel);
  if (!offsets) return BB_ERR_NOMEM;
  rc = element_offsets(ctx, data, indices, axis, offsets);
  if (!rc) rc = bbi_cpu_make_output(ctx, 0, data->dtype, indices->rank, indices->dims);
  if (!rc) {
    const char *src = bb_tensor_data(data);
    char *dst = bb_tensor_data(ctx->outputs[0]);
    for (int64_t i = 0; i < indices->numel; i++)
      memcpy(dst + (size_t)i * esize, src + (size_t)offsets[i] * esize, esize);
  }
  free_offsets(ctx, offsets);
  return rc;
}

/* ---- scatter: how an update meets the element it lands on ------------------------------------ */

typedef enum reduction { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN } reduction;

/* The reduction attribute (opset 16: none/add/mul, 18: max/min). */
static int read_reduction(bbi_cpu_op_ctx *ctx, int32_t dtype, reduction *red) {
  const char *name = ctx->opset >= 16 ? bb_attr_get_string(&ctx->node->attrs, "reduction", "none") : "none";
  static const char *const names[] = {"none", "add", "mul", "max", "min"};
  for (int i = 0; i < 5; i++)
    if (strcmp(name, names[i]) == 0 && (i < 3 || ctx->opset >= 18)) {
      *red = (reduction)i;
      if (*red != RED_NONE && (dtype == BB_DTYPE_BOOL || dtype == BB_DTYPE_COMPLEX64 || dtype == BB_DTYPE_COMPLEX128))
        return bbi_cpu_fail(ctx, BB_ERR_TYPE, "reduction %s does not apply to %s", name, bb_dtype_name(dtype));
      return 0;
    }
  return bbi_cpu_fail(ctx, BB_ERR_UNSUPPORTED, "reduction %s is not supported", name);
}

static bool is_real(int32_t dtype) {
  return dtype == BB_DTYPE_FLOAT || dtype == BB_DTYPE_DOUBLE || dtype == BB_DTYPE_FLOAT16 ||
         dtype == BB_DTYPE_BFLOAT16;
}

/* out[o] = out[o] red upd[u]; integers wrap, uint64 compares unsigned. */
static void scatter_one(reduction red, bb_tensor *out, int64_t o, const bb_tensor *upd, int64_t u, size_t esize) {
  if (red == RED_NONE) {
    const char *from = (const char *)bb_tensor_data(upd) + (size_t)u * esize;
    memcpy((char *)bb_tensor_data(out) + (size_t)o * esize, from, esize);
  } else if (is_real(out->dtype)) {
    double a = bbi_cpu_get_f64(out, o), b = bbi_cpu_get_f64(upd, u);
    double v = red == RED_ADD ? a + b : red == RED_MUL ? a * b : red == RED_MAX ? (b > a ? b : a) : (b < a ? b : a);
    bbi_cpu_set_f64(out, o, v);
  } else {
    int64_t a = bbi_cpu_get_i64(out, o), b = bbi_cpu_get_i64(upd, u);
    bool u64 = out->dtype == BB_DTYPE_UINT64, b_greater = u64 ? (uint64_t)b > (uint64_t)a : b > a;
    int64_t v = red == RED_ADD   ? (int64_t)((uint64_t)a + (uint64_t)b)
                : red == RED_MUL ? (int64_t)((uint64_t)a * (uint64_t)b)
                : red == RED_MAX ? (b_greater ? b : a)
                                 : (b_greater || a == b ? a : b);
    bbi_cpu_set_i64(out, o, v);
  }
}

/* Output 0 as a copy of data, checking that updates has data's element type. */
static int scatter_start(bbi_cpu_op_ctx *ctx, const bb_tensor *data, const bb_tensor *updates) {
  if (updates->dtype != data->dtype) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "updates and data differ in element type");
  int rc = bbi_cpu_make_output(ctx, 0, data->dtype, data->rank, data->dims);
  if (!rc) memcpy(bb_tensor_data(ctx->outputs[0]), bb_tensor_data(data), bb_tensor_nbytes(data));
  return rc;
}

/* ---- the pooling gradients' scatter across the pool ------------------------------------------ */

/* Updates per piece of a flat float scatter (add or none) with int64 indices; the pieces
 * are cut by the update count alone. */
#define SCATTER_PIECE 2048

typedef struct flat_scatter {
  const int64_t *idx;
  const float *u, *data;
  float *y;
  int64_t n, dim, data_per_piece;
  bool add;
  int64_t *lo, *hi; /* per piece: the least and greatest element its updates land on */
  bool *bad;        /* per piece: an index out of range */
} flat_scatter;

/* Piece k: the range its updates land on (and whether one is out of range), and the k-th
 * part of data copied into the output. */
static void flat_scatter_scan(void *ctx, size_t begin, size_t end) {
  const flat_scatter *j = ctx;
  for (size_t k = begin; k < end; k++) {
    int64_t from = (int64_t)k * SCATTER_PIECE, to = from + SCATTER_PIECE < j->n ? from + SCATTER_PIECE : j->n;
    int64_t lo = j->dim, hi = -1;
    bool bad = false;
    for (int64_t i = from; i < to; i++) {
      int64_t v = j->idx[i];
      bad |= v < -j->dim || v >= j->dim;
      v = v < 0 ? v + j->dim : v;
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
    j->lo[k] = lo, j->hi[k] = hi, j->bad[k] = bad;
    int64_t d0 = (int64_t)k * j->data_per_piece, d1 = d0 + j->data_per_piece < j->dim ? d0 + j->data_per_piece : j->dim;
    if (d0 < d1) memcpy(j->y + d0, j->data + d0, (size_t)(d1 - d0) * sizeof *j->y);
  }
}

/* Piece k's updates, in their order. */
static void flat_scatter_apply(void *ctx, size_t begin, size_t end) {
  const flat_scatter *j = ctx;
  int64_t from = (int64_t)begin * SCATTER_PIECE, to = (int64_t)end * SCATTER_PIECE < j->n ? (int64_t)end * SCATTER_PIECE : j->n;
  for (int64_t i = from; i < to; i++) {
    int64_t v = j->idx[i] < 0 ? j->idx[i] + j->dim : j->idx[i];
    if (j->add) j->y[v] += j->u[i];
    else j->y[v] = j->u[i];
  }
}

/* ScatterElements over flat float data (a pooling gradient's), int64 indices, add or none,
 * at least two pieces of updates: data copied and the indices checked piece by piece
 * across the pool; when the pieces land on ranges that follow one another (each above
 * every earlier one: no element gets updates from two pieces, so each element meets its
 * updates in their order), the updates too. The loop over all updates otherwise, with the
 * same bits. Returns 1 (nothing made) where it does not apply or an index is out of range,
 * for the general path to run (and report it). */
static int flat_scatter_pooled(bbi_cpu_op_ctx *ctx, const bb_tensor *data, const bb_tensor *indices,
                               const bb_tensor *updates, bool add) {
  int64_t n = indices->numel, pieces = (n + SCATTER_PIECE - 1) / SCATTER_PIECE;
  if (data->rank != 1 || indices->rank != 1 || updates->rank != 1 || indices->dtype != BB_DTYPE_INT64 ||
      updates->dtype != BB_DTYPE_FLOAT || data->dtype != BB_DTYPE_FLOAT || n != updates->numel || pieces < 2 ||
      pieces > BBI_PARALLEL_MAX_TASKS || bbi_parallel_width() < 2)
    return 1;
  int64_t *range = bbi_mem_alloc(ctx->alloc, (size_t)pieces * (2 * sizeof(int64_t) + sizeof(bool)));
  if (!range) return bbi_cpu_fail(ctx, BB_ERR_NOMEM, "cannot allocate %lld ranges", (long long)pieces);
  int rc = bbi_cpu_make_output(ctx, 0, data->dtype, data->rank, data->dims);
  if (rc) {
    bbi_mem_free(ctx->alloc, range);
    return rc;
  }
  flat_scatter j = {bb_tensor_data(indices), bb_tensor_data(updates), bb_tensor_data(data), bb_tensor_data(ctx->outputs[0]),
                    n, data->dims[0], (data->dims[0] + pieces - 1) / pieces, add, range, range + pieces,
                    (bool *)(range + 2 * pieces)};
  bbi_parallel_for((size_t)pieces, 1, flat_scatter_scan, &j);
  bool in_order = true;
  for (int64_t k = 0; k < pieces; k++) {
    if (j.bad[k]) {
      bbi_mem_free(ctx->alloc, range);
      bb_tensor_release(ctx->outputs[0]);
      ctx->outputs[0] = NULL;
      return 1;
    }
    in_order &= k == 0 || j.hi[k - 1] < j.lo[k];
  }
  if (in_order) bbi_parallel_for((size_t)pieces, 1, flat_scatter_apply, &j);
  else flat_scatter_apply(&j, 0, (size_t)pieces);
  bbi_mem_free(ctx->alloc, range);
  return 0;
}

int bbi_cpu_scatter_elements(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *data = ctx->inputs[0], *indices = ctx->inputs[1], *updates = ctx->inputs[2];
  size_t esize;
  int rc, axis;
  reduction red;
  if ((rc = bbi_cpu_elem_size(ctx, 0, &esize)) || (rc = bbi_cpu_expect_dtype(ctx, 1, INDEX_TYPES)) ||
      (rc = read_reduction(ctx, data->dtype, &red)))
    return rc;
  if ((rc = bbi_cpu_axis(ctx, bb_attr_get_int(&ctx->node->attrs, "axis", 0), data->rank, &axis))) return rc;
  char d1[96], d2[96];
  if (!bb_tensor_same_shape(indices, updates))
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "updates %s and indices %s differ in shape",
                       bb_tensor_describe(updates, d1, sizeof d1), bb_tensor_describe(indices, d2, sizeof d2));
  if (red == RED_ADD || red == RED_NONE) {
    rc = flat_scatter_pooled(ctx, data, indices, updates, red == RED_ADD);
    if (rc != 1) return rc;
    rc = 0;
  }
  int64_t *offsets = alloc_offsets(ctx, indices->numel);
  if (!offsets) return BB_ERR_NOMEM;
  rc = element_offsets(ctx, data, indices, axis, offsets);
  if (!rc) rc = scatter_start(ctx, data, updates);
  if (!rc && data->dtype == BB_DTYPE_FLOAT && (red == RED_ADD || red == RED_NONE)) {
    /* the pooling gradients' case, in float arithmetic (what scatter_one's double rounds to) */
    float *y = bb_tensor_data(ctx->outputs[0]);
    const float *u = bb_tensor_data(updates);
    if (red == RED_ADD)
      for (int64_t i = 0; i < indices->numel; i++) y[offsets[i]] += u[i];
    else
      for (int64_t i = 0; i < indices->numel; i++) y[offsets[i]] = u[i];
  } else {
    for (int64_t i = 0; !rc && i < indices->numel; i++) scatter_one(red, ctx->outputs[0], offsets[i], updates, i, esize);
  }
  free_offsets(ctx, offsets);
  return rc;
}

/* ---- slices addressed by index tuples --------------------------------------------------------- */

/* For GatherND/ScatterND: the data offset (in elements) of the slice each index tuple (the
 * last axis of indices, m values) addresses, after batch_dims leading axes that indices and
 * data share. *slice is the element count of one slice. */
static int tuple_offsets(bbi_cpu_op_ctx *ctx, const bb_tensor *data, const bb_tensor *indices, int batch,
                         int64_t *offsets, int64_t *slice) {
  int q = indices->rank;
  int64_t m = q ? indices->dims[q - 1] : 0;
  if (q < 1 || batch < 0 || batch >= q || batch >= data->rank || m < 1 || m > data->rank - batch)
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT,
                       "indices of rank %d (tuples of %lld) and batch_dims %d do not address data of rank %d", q,
                       (long long)m, batch, data->rank);
  for (int k = 0; k < batch; k++)
    if (indices->dims[k] != data->dims[k])
      return bbi_cpu_fail(ctx, BB_ERR_TYPE, "batch axis %d is %lld in indices and %lld in data", k,
                         (long long)indices->dims[k], (long long)data->dims[k]);
  int64_t strides[BB_MAX_RANK], batches = 1;
  bbi_copy_strides(data->rank, data->dims, 1, strides);
  for (int k = 0; k < batch; k++) batches *= data->dims[k];
  *slice = strides[batch + m - 1]; /* the elements after the addressed axes */
  int64_t tuples = indices->numel / m, per_batch = batches ? tuples / batches : 0;
  for (int64_t t = 0; t < tuples; t++) {
    int64_t off = batch ? (t / per_batch) * strides[batch - 1] : 0;
    for (int64_t j = 0; j < m; j++) {
      int a = batch + (int)j;
      int64_t v = 0;
      int rc = read_index(ctx, indices, t * m + j, data->dims[a], a, &v);
      if (rc) return rc;
      off += v * strides[a];
    }
    offsets[t] = off;
  }
  return 0;
}

int bbi_cpu_gather_nd(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *data = ctx->inputs[0], *indices = ctx->inputs[1];
  size_t esize;
  int rc;
  if ((rc = bbi_cpu_elem_size(ctx, 0, &esize)) || (rc = bbi_cpu_expect_dtype(ctx, 1, INDEX_TYPES))) return rc;
  int batch = ctx->opset >= 12 ? (int)bb_attr_get_int(&ctx->node->attrs, "batch_dims", 0) : 0;
  int64_t *offsets = alloc_offsets(ctx, indices->numel);
  if (!offsets) return BB_ERR_NOMEM;
  int64_t slice = 1;
  rc = tuple_offsets(ctx, data, indices, batch, offsets, &slice);
  int64_t dims[BB_MAX_RANK], m = indices->rank ? indices->dims[indices->rank - 1] : 1;
  int rank = 0;
  for (int k = 0; !rc && k < indices->rank - 1; k++) dims[rank++] = indices->dims[k];
  for (int k = batch + (int)m; !rc && k < data->rank; k++) {
    if (rank == BB_MAX_RANK) rc = bbi_cpu_fail(ctx, BB_ERR_UNSUPPORTED, "output rank is over %d", BB_MAX_RANK);
    else dims[rank++] = data->dims[k];
  }
  if (!rc) rc = bbi_cpu_make_output(ctx, 0, data->dtype, rank, dims);
  if (!rc) {
    size_t bytes = (size_t)slice * esize;
    const char *src = bb_tensor_data(data);
    char *dst = bb_tensor_data(ctx->outputs[0]);
    for (int64_t t = 0; t < indices->numel / m; t++)
      memcpy(dst + (size_t)t * bytes, src + (size_t)offsets[t] * esize, bytes);
  }
  free_offsets(ctx, offsets);
  return rc;
}

int bbi_cpu_scatter_nd(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *data = ctx->inputs[0], *indices = ctx->inputs[1], *updates = ctx->inputs[2];
  size_t esize;
  int rc;
  reduction red;
  if ((rc = bbi_cpu_elem_size(ctx, 0, &esize)) || (rc = bbi_cpu_expect_dtype(ctx, 1, INDEX_TYPES)) ||
      (rc = read_reduction(ctx, data->dtype, &red)))
    return rc;
  int64_t *offsets = alloc_offsets(ctx, indices->numel);
  if (!offsets) return BB_ERR_NOMEM;
  int64_t slice = 1;
  rc = tuple_offsets(ctx, data, indices, 0, offsets, &slice);
  if (!rc) { /* updates: indices.shape[:-1] + data.shape[m:] */
    int64_t want[2 * BB_MAX_RANK], m = indices->dims[indices->rank - 1];
    int rank = 0;
    for (int k = 0; k < indices->rank - 1; k++) want[rank++] = indices->dims[k];
    for (int k = (int)m; k < data->rank; k++) want[rank++] = data->dims[k];
    bool same = rank == updates->rank;
    for (int k = 0; same && k < rank; k++) same = want[k] == updates->dims[k];
    char d1[96];
    if (!same)
      rc = bbi_cpu_fail(ctx, BB_ERR_TYPE, "updates %s do not match indices and data",
                       bb_tensor_describe(updates, d1, sizeof d1));
  }
  if (!rc) rc = scatter_start(ctx, data, updates);
  int64_t tuples = rc ? 0 : updates->numel / (slice ? slice : 1);
  for (int64_t t = 0; t < tuples; t++)
    for (int64_t e = 0; e < slice; e++)
      scatter_one(red, ctx->outputs[0], offsets[t] + e, updates, t * slice + e, esize);
  free_offsets(ctx, offsets);
  return rc;
}
