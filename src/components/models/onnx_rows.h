/* Rows as an ONNX model's tensors: what a DataSource gives (float32 rows [n, features]
 * and float32 labels, one per row) in the form a model's data input and its training
 * graph's target declare. Shared by the engines that train ONNX models (OnnxModel,
 * SplitModel). */
#ifndef BBI_COMPONENTS_MODELS_ONNX_ROWS_H
#define BBI_COMPONENTS_MODELS_ONNX_ROWS_H

#include "bb/ir.h"
#include "bb/tensor.h"

/* A declared tensor: its name, element type and dims (-1: not known, the batch dim
 * first). */
typedef struct bbi_onnx_rows {
  const char *name;
  int32_t dtype;
  int rank;
  int64_t dims[BB_MAX_RANK];
} bbi_onnx_rows;

/* The graph input `name` of m (NULL or "": its first input that is not an initializer),
 * which must be a float32, int64 or int32 tensor of known rank (the name stays m's). */
int bbi_onnx_rows_input_of(const bb_model *m, const char *name, bbi_onnx_rows *out, bb_error *err);

/* The target input `name` of a training graph, which must take one label per row. */
int bbi_onnx_rows_target_of(const bb_model *m, const char *name, const char *prediction, bbi_onnx_rows *out,
                            bb_error *err);

/* x as the input takes it: rows [n, ...] take the input's dims after the batch (a view of
 * x for float32; whole-number rows copied for an int64 or int32 input). */
int bbi_onnx_rows_feed(const bbi_onnx_rows *in, const bb_tensor *x, const bb_allocator *alloc, bb_tensor **out,
                       bb_error *err);

/* n float32 labels as the target takes them (class ids for an int64 target). */
int bbi_onnx_rows_labels(const bbi_onnx_rows *target, const bb_tensor *labels, int64_t n, const bb_allocator *alloc,
                         bb_tensor **out, bb_error *err);

#endif
