/* bb_tensor <-> ONNX TensorProto. */
#include <string.h>

#include "bb/tensor.h"
#include "bb/common.h"

/* Copies n typed values into dst of the tensor's element type, narrowing as ONNX stores
 * small types widened in int32_data / uint64_data. */
static void copy_i32(void *dst, const int32_t *src, int64_t n, int32_t dtype) {
  for (int64_t i = 0; i < n; i++) {
    switch (dtype) {
    case BB_DTYPE_INT8: ((int8_t *)dst)[i] = (int8_t)src[i]; break;
    case BB_DTYPE_UINT8:
    case BB_DTYPE_BOOL: ((uint8_t *)dst)[i] = (uint8_t)src[i]; break;
    case BB_DTYPE_INT16: ((int16_t *)dst)[i] = (int16_t)src[i]; break;
    case BB_DTYPE_UINT16:
    case BB_DTYPE_FLOAT16:
    case BB_DTYPE_BFLOAT16: ((uint16_t *)dst)[i] = (uint16_t)src[i]; break;
    default: ((int32_t *)dst)[i] = src[i]; break;
    }
  }
}

int bb_tensor_from_proto(const bb_tensor_proto *p, const bb_allocator *alloc, bb_tensor **out, bb_error *err) {
  *out = NULL;
  const char *name = p->name ? p->name : "(unnamed)";
  int32_t dtype = p->data_type;
  size_t esize = bb_dtype_size(dtype);
  if (dtype == BB_DTYPE_STRING || !esize)
    return bb_error_set(err, BB_ERR_UNSUPPORTED, "tensor %s: element type %s is not supported", name,
                        bb_dtype_name(dtype) ? bb_dtype_name(dtype) : "unknown");
  if (p->has_data_location && p->data_location == 1)
    return bb_error_set(err, BB_ERR_UNSUPPORTED, "tensor %s: external data is not supported", name);
  if (p->n_dims > BB_MAX_RANK)
    return bb_error_set(err, BB_ERR_UNSUPPORTED, "tensor %s: rank %zu is over %d", name, p->n_dims, BB_MAX_RANK);
  int64_t numel = bb_tensor_proto_numel(p);
  if (numel < 0) return bb_error_set(err, BB_ERR_MALFORMED, "tensor %s: invalid dims", name);
  bb_tensor *t = bb_tensor_new_empty(alloc, dtype, (int)p->n_dims, p->dims);
  if (!t) return bb_error_set(err, BB_ERR_NOMEM, "tensor %s: cannot allocate %lld elements", name, (long long)numel);
  void *dst = bb_tensor_data(t);
  size_t want = bb_tensor_nbytes(t);
  int64_t n_typed = -1;
  const void *typed = NULL;
  int kind = 0; /* 1 float, 2 int32, 3 int64, 4 double, 5 uint64 */
  bool complex = dtype == BB_DTYPE_COMPLEX64 || dtype == BB_DTYPE_COMPLEX128;
  switch (dtype) {
  case BB_DTYPE_FLOAT:
  case BB_DTYPE_COMPLEX64: typed = p->float_data, n_typed = (int64_t)p->n_float_data, kind = 1; break;
  case BB_DTYPE_INT64: typed = p->int64_data, n_typed = (int64_t)p->n_int64_data, kind = 3; break;
  case BB_DTYPE_DOUBLE:
  case BB_DTYPE_COMPLEX128: typed = p->double_data, n_typed = (int64_t)p->n_double_data, kind = 4; break;
  case BB_DTYPE_UINT32:
  case BB_DTYPE_UINT64: typed = p->uint64_data, n_typed = (int64_t)p->n_uint64_data, kind = 5; break;
  default: typed = p->int32_data, n_typed = (int64_t)p->n_int32_data, kind = 2; break;
  }
  int64_t values = complex ? numel * 2 : numel;
  if (p->has_raw_data) {
    if (p->raw_data.len != want) {
      bb_tensor_release(t);
      return bb_error_set(err, BB_ERR_MALFORMED, "tensor %s: raw_data has %zu bytes, dims and type need %zu", name,
                          p->raw_data.len, want);
    }
    if (want) memcpy(dst, p->raw_data.data, want); /* ONNX raw data is little-endian, as are our hosts */
  } else if (numel) {
    if (n_typed != values) {
      bb_tensor_release(t);
      return bb_error_set(err, BB_ERR_MALFORMED, "tensor %s: holds %lld values, dims say %lld", name,
                          (long long)n_typed, (long long)values);
    }
    switch (kind) {
    case 1: memcpy(dst, typed, (size_t)values * sizeof(float)); break;
    case 2: copy_i32(dst, typed, values, dtype); break;
    case 3: memcpy(dst, typed, (size_t)values * sizeof(int64_t)); break;
    case 4: memcpy(dst, typed, (size_t)values * sizeof(double)); break;
    case 5:
      for (int64_t i = 0; i < values; i++) {
        uint64_t v = ((const uint64_t *)typed)[i];
        if (dtype == BB_DTYPE_UINT32) ((uint32_t *)dst)[i] = (uint32_t)v;
        else ((uint64_t *)dst)[i] = v;
      }
      break;
    }
  }
  *out = t;
  return 0;
}

int bb_tensor_to_proto(bb_model *m, const bb_tensor *t, const char *name, bb_tensor_proto **out, bb_error *err) {
  bb_tensor_proto *p = bb_tensor_proto_new(m, name, t->dtype, (size_t)t->rank, t->dims);
  if (!p || bb_tensor_proto_set_raw(m, p, bb_tensor_data(t), bb_tensor_nbytes(t)))
    return bb_error_set(err, BB_ERR_NOMEM, "out of memory converting tensor %s", name ? name : "");
  *out = p;
  return 0;
}
