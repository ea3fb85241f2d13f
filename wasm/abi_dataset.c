/* bytesandbrains — data sets through bb.wasm's ABI: what an ArraySource reads, made from
 * CSV or tensors, cut into subsets and read back as tensors. A data set is shared with
 * the nodes installed with it (bbw_shared_dataset). */
#include <stdlib.h>
#include <string.h>

#include "abi_internal.h"
#include "bb_wasm.h"

void bbw_dataset_release(bbw_shared_dataset *d) {
  if (d == NULL || --d->users > 0) return;
  bb_dataset_free(&d->data);
  free(d);
}

bbw_shared_dataset *bbw_dataset_of(int32_t handle) {
  bbw_slot *s = bbw_handle_slot(handle, SLOT_DATASET);
  return s ? s->object : NULL;
}

/* Issues a handle for a filled data set (freeing it on failure). */
static int32_t dataset_issue(bb_dataset *data) {
  bbw_shared_dataset *d = malloc(sizeof *d);
  if (d == NULL) {
    bb_dataset_free(data);
    return bbw_fail(BB_ERR_NOMEM, "dataset: out of memory");
  }
  *d = (bbw_shared_dataset){*data, 1};
  int32_t handle = bbw_handle_issue(SLOT_DATASET, d);
  if (handle < 0) bbw_dataset_release(d);
  return handle;
}

int32_t bb_wasm_dataset_from_csv(const uint8_t *csv, size_t len, int32_t label_column, int32_t has_header) {
  bbw_error_clear();
  if (csv == NULL && len > 0) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "dataset csv: NULL data of %zu bytes", len);
  bb_csv_options opt = {.struct_size = sizeof opt, .label_column = label_column, .has_header = has_header != 0};
  bb_dataset data = {0};
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_dataset_from_csv(csv, len, &opt, NULL, &data, &err);
  if (rc < 0) return bbw_fail_from(rc, &err, "dataset csv");
  return dataset_issue(&data);
}

int32_t bb_wasm_dataset_from_tensors(int32_t features, int32_t labels) {
  bbw_error_clear();
  const bb_tensor *x = bbw_tensor_of(features);
  if (x == NULL) return bbw_last();
  const bb_tensor *y = labels ? bbw_tensor_of(labels) : NULL;
  if (labels && y == NULL) return bbw_last();
  if (x->dtype != BB_DTYPE_FLOAT || x->rank != 2 || x->dims[0] < 1 || x->dims[1] < 1)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "dataset: features must be a float32 [rows, dim] tensor with rows, dim >= 1");
  if (y && (y->dtype != BB_DTYPE_FLOAT || y->rank != 1 || y->dims[0] != x->dims[0]))
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "dataset: labels must be a float32 [rows] tensor (%lld rows)",
                    (long long)x->dims[0]);
  bb_dataset data = {0};
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_dataset_init(&data, (size_t)x->dims[0], (size_t)x->dims[1], y != NULL, NULL, &err);
  if (rc < 0) return bbw_fail_from(rc, &err, "dataset");
  memcpy(data.features, bb_tensor_data(x), (size_t)x->numel * sizeof(float));
  if (y) memcpy(data.labels, bb_tensor_data(y), (size_t)y->numel * sizeof(float));
  return dataset_issue(&data);
}

int32_t bb_wasm_dataset_subset(int32_t dataset, const uint32_t *rows, size_t n) {
  bbw_error_clear();
  const bbw_shared_dataset *d = bbw_dataset_of(dataset);
  if (d == NULL) return bbw_last();
  if (rows == NULL && n > 0) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "dataset subset: NULL rows");
  size_t *indices = malloc((n ? n : 1) * sizeof *indices);
  if (indices == NULL) return bbw_fail(BB_ERR_NOMEM, "dataset subset: out of memory");
  for (size_t i = 0; i < n; i++) indices[i] = rows[i];
  bb_dataset data = {0};
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_dataset_subset(&d->data, indices, n, NULL, &data, &err);
  free(indices);
  if (rc < 0) return bbw_fail_from(rc, &err, "dataset subset");
  return dataset_issue(&data);
}

int32_t bb_wasm_dataset_shape(int32_t dataset) {
  bbw_error_clear();
  bbw_result_clear();
  const bbw_shared_dataset *d = bbw_dataset_of(dataset);
  if (d == NULL) return bbw_last();
  bb_le_writer w = bbw_writer();
  bb_le_write_u64(&w, d->data.n);
  bb_le_write_u64(&w, d->data.dim);
  bb_le_write_u64(&w, d->data.labels != NULL);
  return bbw_result_from(&w, "dataset shape");
}

int32_t bb_wasm_dataset_tensor(int32_t dataset, int32_t labels) {
  bbw_error_clear();
  const bbw_shared_dataset *d = bbw_dataset_of(dataset);
  if (d == NULL) return bbw_last();
  if (labels && d->data.labels == NULL) return bbw_fail(BB_ERR_NOT_FOUND, "dataset: it has no labels");
  int64_t dims[2] = {(int64_t)d->data.n, (int64_t)d->data.dim};
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, labels ? 1 : 2, dims);
  if (t == NULL) return bbw_fail(BB_ERR_NOMEM, "dataset tensor: out of memory");
  memcpy(bb_tensor_data(t), labels ? d->data.labels : d->data.features, (size_t)t->numel * sizeof(float));
  return bbw_tensor_issue(t);
}

int32_t bb_wasm_dataset_free(int32_t dataset) {
  bbw_error_clear();
  bbw_slot *s = bbw_handle_slot(dataset, SLOT_DATASET);
  if (s == NULL) return bbw_last();
  bbw_dataset_release(s->object);
  bbw_slot_release(s);
  return BB_OK;
}
