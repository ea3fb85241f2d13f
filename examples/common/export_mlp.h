/* Writes a trained multilayer perceptron (CpuMlp's flat parameter vector) as a standard
 * ONNX model: input "pixels" float32 [N, inputs], output "probabilities" float32
 * [N, outputs]; the input scaling, the layers (Gemm), the hidden activation (Relu) and the
 * final Softmax are all in the graph, so onnxruntime or `bb run` need nothing else. */
#ifndef BB_EXAMPLES_EXPORT_MLP_H
#define BB_EXAMPLES_EXPORT_MLP_H

#include <stddef.h>

#include "bb/common.h"

/* sizes: n_sizes layer widths from input to output (e.g. {64, 32, 10}); params holds
 * Σ out·(in+1) floats, each layer W [out, in] row-major then b [out]. */
int bb_export_mlp(const float *params, size_t n_params, const size_t *sizes, size_t n_sizes, float input_scale,
                  const char *path, bb_error *err);

#endif
