/* Tensors and their reference-counted buffers. */
#include <stdio.h>
#include <string.h>

#include "bb/tensor.h"
#include "bb/common.h"
#include "util/mem.h"

#define BBI_TENSOR_ALIGN 64u

static bool shape_ok(int rank, const int64_t *dims, int64_t *numel) {
  if (rank < 0 || rank > BB_MAX_RANK) return false;
  int64_t n = 1;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0) return false;
    if (dims[i] && n > INT64_MAX / dims[i]) return false;
    n *= dims[i];
  }
  *numel = n;
  return true;
}

/* The buffer header and the data live in one allocation; data is aligned inside it. */
static bb_buffer *buffer_new(const bb_allocator *alloc, size_t size) {
  size_t header = (sizeof(bb_buffer) + BBI_TENSOR_ALIGN - 1) & ~(size_t)(BBI_TENSOR_ALIGN - 1);
  if (size > SIZE_MAX - header - BBI_TENSOR_ALIGN) return NULL;
  void *raw = bbi_mem_alloc(alloc, header + size + BBI_TENSOR_ALIGN);
  if (!raw) return NULL;
  uintptr_t base = (uintptr_t)raw;
  uintptr_t data = (base + header + BBI_TENSOR_ALIGN - 1) & ~(uintptr_t)(BBI_TENSOR_ALIGN - 1);
  bb_buffer *b = raw; /* header at the start of the allocation */
  memset(b, 0, sizeof *b);
  b->refcount = 1;
  b->size = size;
  b->data = (void *)data;
  b->alloc = alloc;
  return b;
}

static void buffer_release(bb_buffer *b) {
  if (!b || --b->refcount) return;
  if (b->release) b->release(b->release_data);
  bbi_mem_free(b->alloc, b);
}

static bb_tensor *header_new(const bb_allocator *alloc, int32_t dtype, int rank, const int64_t *dims, int64_t numel) {
  bb_tensor *t = bbi_mem_calloc(alloc, 1, sizeof *t);
  if (!t) return NULL;
  t->refcount = 1;
  t->dtype = dtype;
  t->rank = rank;
  if (rank) memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
  t->numel = numel;
  return t;
}

bb_tensor *bb_tensor_new_empty(const bb_allocator *alloc, int32_t dtype, int rank, const int64_t *dims) {
  if (!alloc) alloc = bb_default_allocator();
  int64_t numel;
  size_t esize = bb_dtype_size(dtype);
  if (!esize || !shape_ok(rank, dims, &numel)) return NULL;
  if ((uint64_t)numel > SIZE_MAX / esize) return NULL;
  bb_buffer *b = buffer_new(alloc, (size_t)numel * esize);
  if (!b) return NULL;
  bb_tensor *t = header_new(alloc, dtype, rank, dims, numel);
  if (!t) {
    buffer_release(b);
    return NULL;
  }
  t->buffer = b;
  return t;
}

bb_tensor *bb_tensor_new_zeros(const bb_allocator *alloc, int32_t dtype, int rank, const int64_t *dims) {
  bb_tensor *t = bb_tensor_new_empty(alloc, dtype, rank, dims);
  if (t) memset(bb_tensor_data(t), 0, bb_tensor_nbytes(t));
  return t;
}

bb_tensor *bb_tensor_wrap(const bb_allocator *alloc, int32_t dtype, int rank, const int64_t *dims, void *data,
                          void (*release)(void *user_data), void *user_data) {
  if (!alloc) alloc = bb_default_allocator();
  int64_t numel;
  size_t esize = bb_dtype_size(dtype);
  if (!esize || !shape_ok(rank, dims, &numel) || (uint64_t)numel > SIZE_MAX / esize) return NULL;
  bb_buffer *b = bbi_mem_calloc(alloc, 1, sizeof *b);
  if (!b) return NULL;
  b->refcount = 1;
  b->size = (size_t)numel * esize;
  b->data = data;
  b->alloc = alloc;
  b->release = release;
  b->release_data = user_data;
  bb_tensor *t = header_new(alloc, dtype, rank, dims, numel);
  if (!t) {
    b->release = NULL; /* the caller keeps ownership when wrapping fails */
    buffer_release(b);
    return NULL;
  }
  t->buffer = b;
  return t;
}

bb_tensor *bb_tensor_view(const bb_tensor *src, int rank, const int64_t *dims) {
  int64_t numel;
  if (!shape_ok(rank, dims, &numel) || numel != src->numel) return NULL;
  const bb_allocator *alloc = src->buffer->alloc;
  bb_tensor *t = header_new(alloc, src->dtype, rank, dims, numel);
  if (!t) return NULL;
  t->buffer = src->buffer;
  t->buffer->refcount++;
  t->offset = src->offset;
  return t;
}

bb_tensor *bb_tensor_retain(bb_tensor *t) {
  if (t) t->refcount++;
  return t;
}

void bb_tensor_release(bb_tensor *t) {
  if (!t || --t->refcount) return;
  const bb_allocator *alloc = t->buffer->alloc;
  buffer_release(t->buffer);
  bbi_mem_free(alloc, t);
}

size_t bb_tensor_nbytes(const bb_tensor *t) { return (size_t)t->numel * bb_dtype_size(t->dtype); }

bool bb_tensor_same_shape(const bb_tensor *a, const bb_tensor *b) {
  return a->rank == b->rank && memcmp(a->dims, b->dims, (size_t)a->rank * sizeof a->dims[0]) == 0;
}

static const char *onnx_type_label(int32_t dtype) {
  switch (dtype) {
  case BB_DTYPE_FLOAT: return "float32";
  case BB_DTYPE_DOUBLE: return "float64";
  default: {
    const char *n = bb_dtype_name(dtype);
    return n ? n : "?";
  }
  }
}

const char *bb_tensor_describe(const bb_tensor *t, char *buf, size_t size) {
  if (!size) return buf;
  int n = snprintf(buf, size, "%s[", onnx_type_label(t->dtype));
  for (int i = 0; i < t->rank && n > 0 && (size_t)n < size; i++)
    n += snprintf(buf + n, size - (size_t)n, "%s%lld", i ? "," : "", (long long)t->dims[i]);
  if (n > 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, "]");
  return buf;
}

static void shape_text(char *buf, size_t size, int rank, const int64_t *d) {
  int n = snprintf(buf, size, "[");
  for (int i = 0; i < rank && n > 0 && (size_t)n < size; i++)
    n += snprintf(buf + n, size - (size_t)n, "%s%lld", i ? "," : "", (long long)d[i]);
  if (n > 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, "]");
}

int bb_broadcast_shapes(int rank_a, const int64_t *a, int rank_b, const int64_t *b, int *rank_out, int64_t *out,
                        bb_error *err) {
  int r = rank_a > rank_b ? rank_a : rank_b;
  if (r > BB_MAX_RANK) return bb_error_set(err, BB_ERR_UNSUPPORTED, "rank %d is over the limit of %d", r, BB_MAX_RANK);
  for (int i = 0; i < r; i++) {
    int ia = i - (r - rank_a), ib = i - (r - rank_b);
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da == db || db == 1) out[i] = da;
    else if (da == 1) out[i] = db;
    else {
      char sa[128], sb[128];
      shape_text(sa, sizeof sa, rank_a, a);
      shape_text(sb, sizeof sb, rank_b, b);
      return bb_error_set(err, BB_ERR_TYPE, "shapes %s and %s do not broadcast (dimension %d: %lld vs %lld)", sa, sb,
                          i, (long long)da, (long long)db);
    }
  }
  *rank_out = r;
  return 0;
}
