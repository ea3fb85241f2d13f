/* bytesandbrains — tensors through bb.wasm's ABI: a handle holds one reference to a
 * bb_tensor whose elements the host reads and writes in place. */
#include <stdbool.h>
#include <string.h>

#include "abi_internal.h"
#include "bb_wasm.h"

/* The byte sizes the ABI reports are int32: larger tensors are refused at creation (the
 * module's memory cannot hold one anyway). */
#define TENSOR_BYTES_MAX ((uint64_t)INT32_MAX)

bb_tensor *bbw_tensor_of(int32_t handle) {
  const bbw_slot *s = bbw_handle_slot(handle, SLOT_TENSOR);
  return s != NULL ? s->object : NULL;
}

int32_t bbw_tensor_issue(bb_tensor *tensor) {
  int32_t handle = bbw_handle_issue(SLOT_TENSOR, tensor);
  if (handle < 0) bb_tensor_release(tensor);
  return handle;
}

void bbw_tensor_retire(int32_t handle) {
  bbw_slot *s = bbw_handle_slot(handle, SLOT_TENSOR);
  if (s == NULL) return;
  bb_tensor_release(s->object);
  bbw_slot_release(s);
}

/* A new tensor, its elements zero (zero) or left for the caller to write (its bytes are
 * whatever the allocator handed out, never read before the host writes them all). */
static int32_t tensor_new(int32_t dtype, int32_t rank, const int64_t *dims, bool zero) {
  bbw_error_clear();
  const char *type_name = bb_dtype_name(dtype);
  size_t element_size = bb_dtype_size(dtype);
  if (type_name == NULL) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "tensor new: %d is not a data type", (int)dtype);
  if (element_size == 0)
    return bbw_fail(BB_ERR_UNSUPPORTED, "tensor new: %s tensors are not supported", type_name);
  if (rank < 0 || rank > BB_MAX_RANK)
    return bbw_fail(BB_ERR_LIMIT, "tensor new: rank %d is outside 0..%d", (int)rank, BB_MAX_RANK);
  if (dims == NULL && rank > 0)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "tensor new: NULL dims with rank %d", (int)rank);
  int64_t shape[BB_MAX_RANK];
  if (rank > 0) memcpy(shape, dims, (size_t)rank * sizeof shape[0]);
  uint64_t bytes = element_size;
  for (int32_t i = 0; i < rank; i++) {
    if (shape[i] < 0)
      return bbw_fail(BB_ERR_INVALID_ARGUMENT, "tensor new: dim %d is %lld, dims must not be negative", (int)i,
                      (long long)shape[i]);
    /* Once a dim is zero the tensor is empty, whatever the other dims are. */
    if (bytes != 0 && (uint64_t)shape[i] > TENSOR_BYTES_MAX / bytes) bytes = TENSOR_BYTES_MAX + 1;
    else bytes *= (uint64_t)shape[i];
  }
  if (bytes > TENSOR_BYTES_MAX)
    return bbw_fail(BB_ERR_LIMIT, "tensor new: a %s tensor of that shape exceeds %llu bytes", type_name,
                    (unsigned long long)TENSOR_BYTES_MAX);
  bb_tensor *tensor = zero ? bb_tensor_new_zeros(NULL, dtype, rank, shape) : bb_tensor_new_empty(NULL, dtype, rank, shape);
  if (tensor == NULL)
    return bbw_fail(BB_ERR_NOMEM, "tensor new: out of memory allocating %llu bytes", (unsigned long long)bytes);
  return bbw_tensor_issue(tensor);
}

int32_t bb_wasm_tensor_new(int32_t dtype, int32_t rank, const int64_t *dims) {
  return tensor_new(dtype, rank, dims, true);
}

int32_t bb_wasm_tensor_new_empty(int32_t dtype, int32_t rank, const int64_t *dims) {
  return tensor_new(dtype, rank, dims, false);
}

int32_t bb_wasm_tensor_dtype(int32_t tensor) {
  bbw_error_clear();
  const bb_tensor *t = bbw_tensor_of(tensor);
  return t != NULL ? t->dtype : bbw_last();
}

int32_t bb_wasm_tensor_rank(int32_t tensor) {
  bbw_error_clear();
  const bb_tensor *t = bbw_tensor_of(tensor);
  return t != NULL ? t->rank : bbw_last();
}

const int64_t *bb_wasm_tensor_dims(int32_t tensor) {
  bbw_error_clear();
  const bb_tensor *t = bbw_tensor_of(tensor);
  return t != NULL ? t->dims : NULL;
}

void *bb_wasm_tensor_data(int32_t tensor) {
  bbw_error_clear();
  const bb_tensor *t = bbw_tensor_of(tensor);
  return t != NULL ? bb_tensor_data(t) : NULL;
}

int32_t bb_wasm_tensor_nbytes(int32_t tensor) {
  bbw_error_clear();
  const bb_tensor *t = bbw_tensor_of(tensor);
  if (t == NULL) return bbw_last();
  size_t bytes = bb_tensor_nbytes(t);
  if (bytes > TENSOR_BYTES_MAX)
    return bbw_fail(BB_ERR_LIMIT, "tensor nbytes: %zu bytes do not fit the ABI's int32", bytes);
  return (int32_t)bytes;
}

int32_t bb_wasm_tensor_free(int32_t tensor) {
  bbw_error_clear();
  if (bbw_tensor_of(tensor) == NULL) return bbw_last();
  bbw_tensor_retire(tensor);
  return BB_OK;
}
