/* bytesandbrains — any ONNX model as a trainable model: the engine of the OnnxModel
 * component, for hosts that train without a node (bb.wasm's trainer, tools).
 *
 * From the model's bytes it builds the training graph (bb/grad.h), an optimizer graph and
 * a trainer, and the inference form for predictions and export. Data comes as rows:
 * float32 [n, features...] reshaped to the model's data input (its dims after the batch;
 * whole numbers for an int64 or int32 input, an Embedding's token ids), and float32 labels, one per row (class ids for softmax cross-entropy, targets for MSE
 * and BCE). The parameters travel as one flat float32 vector: every trained parameter in
 * the training graph's order (the model's initializer order), each flattened row-major. */
#ifndef BB_ONNX_MODEL_H
#define BB_ONNX_MODEL_H

#include "bb/common.h"
#include "bb/grad.h"
#include "bb/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bb_onnx_model bb_onnx_model;

#define BB_ONNX_MODEL_NAME_MAX 128
#define BB_ONNX_MODEL_FREEZE_MAX 1024

/* How to train. bb_onnx_model_config_parse fills it from text:
 *   loss=xent|mse|bce, optimizer=sgd|momentum|nesterov|adam|adamw, lr, momentum, beta1,
 *   beta2, eps, weight_decay, max_grad_norm (torch.optim's meanings and defaults),
 *   input=NAME, output=NAME (default: the first data input and the first output),
 *   seed=<u64> (the Dropout masks), freeze=NAME|NAME... (initializers never trained),
 *   max_total_bytes=<bytes> (bb_cpu_limits.max_total_bytes of every run). */
typedef struct bb_onnx_model_config {
  size_t struct_size; /* sizeof(bb_onnx_model_config) */
  bb_grad_loss loss;
  bb_optimizer_config optimizer;
  char input[BB_ONNX_MODEL_NAME_MAX], output[BB_ONNX_MODEL_NAME_MAX]; /* "" for the default */
  uint64_t seed;
  char freeze[BB_ONNX_MODEL_FREEZE_MAX]; /* initializer names separated by '|', "" for none */
  /* A part of a split model whose output's gradient comes from the part after it: no loss
   * (BB_GRAD_LOSS_UPSTREAM), and a step is bb_onnx_model_forward then _backward. */
  bool upstream;
  /* A data input whose gradient every step also computes (bb_onnx_model_input_grad): what
   * a part hands back to the part before it; "" for none. */
  char input_grad[BB_ONNX_MODEL_NAME_MAX];
  /* The most bytes the values of one run (a step's graphs, a prediction) hold at once;
   * 0 for the CPU backend's default, BB_CPU_DEFAULT_MAX_TOTAL_BYTES (1 GiB). */
  size_t max_total_bytes;
} bb_onnx_model_config;

/* Parses config text (NULL or "" gives the defaults: xent and Adam with lr 1e-3; seed
 * default_seed). Refuses a key that is neither one of the above nor in more_keys (a
 * NULL-terminated list the caller reads itself, or NULL), naming it. */
BB_API int bb_onnx_model_config_parse(const char *text, const char *const *more_keys, uint64_t default_seed,
                                      bb_onnx_model_config *out, bb_error *err);

/* A model from ONNX ModelProto bytes (copied). Refused with the gradient builder's message
 * when the model cannot be trained (an operator without a gradient, a parameter cut off
 * from the loss, ...), when its data input is not float32, int64 or int32 of known rank,
 * when a parameter is not float32, or config's struct_size is not one this library knows. */
BB_API int bb_onnx_model_new(const uint8_t *onnx, size_t len, const bb_onnx_model_config *config,
                             const bb_allocator *alloc, bb_onnx_model **out, bb_error *err);
BB_API void bb_onnx_model_free(bb_onnx_model *m);

/* Floats in the flat parameter vector. */
BB_API size_t bb_onnx_model_param_count(const bb_onnx_model *m);

/* One optimizer step on a batch. A step whose loss or gradients are not finite changes
 * nothing (out->applied is false) and is counted (bb_grad_trainer_refused). */
BB_API int bb_onnx_model_step(bb_onnx_model *m, const bb_tensor *x, const bb_tensor *labels, bb_grad_step *out,
                              bb_error *err);

/* A step of a model built with `upstream` in two calls: forward runs the training-mode
 * forward on x (rows, as bb_onnx_model_step takes them) and gives the output (a new
 * tensor); backward takes d loss / d output, computes the gradients and takes the
 * optimizer step. Refusals are bb_grad_trainer_backward's: a gradient of another shape is
 * BB_ERR_TYPE, a non-finite one is a refused step (out->applied false, counted); either way
 * the forward is used up. */
BB_API int bb_onnx_model_forward(bb_onnx_model *m, const bb_tensor *x, bb_tensor **y, bb_error *err);
BB_API int bb_onnx_model_backward(bb_onnx_model *m, const bb_tensor *dy, bb_grad_step *out, bb_error *err);

/* d loss / d input (the config's input_grad) of the last applied step, borrowed until the
 * next step; NULL when there is none. */
BB_API const bb_tensor *bb_onnx_model_input_grad(const bb_onnx_model *m);

/* The model's first output for x, with the current parameters and running statistics. */
BB_API int bb_onnx_model_predict(bb_onnx_model *m, const bb_tensor *x, bb_tensor **y, bb_error *err);

/* The mean loss of a prediction (as predict gives it) against labels, as the training
 * graph computes it. */
BB_API int bb_onnx_model_loss(const bb_onnx_model *m, const bb_tensor *prediction, const bb_tensor *labels, float *loss,
                              bb_error *err);

/* A score on labelled rows: accuracy (xent: the largest output at the label; bce: logit >
 * 0 against label > 0.5) or, for mse, the mean squared error. */
BB_API int bb_onnx_model_evaluate(bb_onnx_model *m, const bb_tensor *x, const bb_tensor *labels, float *score,
                                  bb_error *err);

/* The flat parameter vector: copied out (n must be the count), replaced, or added to. */
BB_API int bb_onnx_model_get_params(const bb_onnx_model *m, float *out, size_t n, bb_error *err);
BB_API int bb_onnx_model_set_params(bb_onnx_model *m, const float *params, size_t n, bool add, bb_error *err);

/* The trained model as plain ONNX in inference form (BatchNormalization on its running
 * statistics, Dropout passing through), the current values in its initializers, which
 * keep their names; its inputs and outputs are the model's own. *out is freed with
 * bb_buffer_free(NULL, ...). */
BB_API int bb_onnx_model_export(bb_onnx_model *m, uint8_t **out, size_t *len, bb_error *err);

/* Every tensor the trainer holds (parameters, running statistics, optimizer state) as a
 * ModelProto of initializers, and back: a snapshot a model of the same bytes resumes from. */
BB_API int bb_onnx_model_save(const bb_onnx_model *m, const bb_allocator *alloc, uint8_t **out, size_t *len,
                              bb_error *err);
BB_API int bb_onnx_model_restore(bb_onnx_model *m, const uint8_t *data, size_t len, bb_error *err);

/* The trainer underneath (its step counts and memory figures). */
BB_API const bb_grad_trainer *bb_onnx_model_trainer(const bb_onnx_model *m);

#ifdef __cplusplus
}
#endif
#endif /* BB_ONNX_MODEL_H */
