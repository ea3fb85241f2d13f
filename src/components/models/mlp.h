/* A multilayer perceptron over one flat float32 parameter vector: the numeric core of a
 * trainable Model role, which exchanges its parameters as a single 1-D float tensor.
 *
 * Layers are dense: layer l maps a row of size[l-1] values to size[l] values,
 * z = W a + b, with W stored row-major as [size[l], size[l-1]]. Hidden layers apply the
 * configured activation; the last layer gives logits (softmax cross-entropy) or the
 * outputs themselves (mean squared error). With no hidden layers the model is softmax
 * (or linear) regression. The flat vector holds, for each layer in order, W then b; see
 * docs/LEARNING.md for the exact layout.
 *
 * A bbi_mlp keeps a workspace that grows to the largest batch it has seen; after that,
 * forward, backward and training steps do not allocate. Not thread-safe: one caller at a
 * time per object. */
#ifndef BBI_OPS_MODELS_MLP_H
#define BBI_OPS_MODELS_MLP_H

#include <stddef.h>
#include <stdint.h>

#include "bb/common.h"

typedef enum bbi_mlp_activation {
  BBI_MLP_RELU,
  BBI_MLP_TANH,
  BBI_MLP_SIGMOID,
  BBI_MLP_IDENTITY
} bbi_mlp_activation;

typedef enum bbi_mlp_loss {
  /* targets: one class index per row, as a float holding an integer in [0, outputs);
   * forward returns class probabilities */
  BBI_MLP_SOFTMAX_CROSS_ENTROPY,
  /* targets: `outputs` floats per row; the loss is the mean over all N*outputs squares */
  BBI_MLP_MEAN_SQUARED_ERROR
} bbi_mlp_loss;

/* Hidden layers beyond this are refused (BB_ERR_LIMIT). */
#define BBI_MLP_MAX_HIDDEN 64

typedef struct bbi_mlp_config {
  size_t inputs;
  const size_t *hidden; /* n_hidden layer widths (each >= 1); may be NULL when n_hidden 0 */
  size_t n_hidden;
  size_t outputs;       /* >= 2 for softmax cross-entropy, >= 1 for mean squared error */
  bbi_mlp_activation activation; /* of the hidden layers */
  bbi_mlp_loss loss;
  float learning_rate;  /* >= 0 */
  float momentum;       /* in [0, 1) */
  float weight_decay;   /* >= 0; L2 on the weights W, not on the biases */
  uint64_t seed;        /* the initial weights are a function of the seed alone */
  /* NULL, or `inputs` floats each: the model sees x*input_scale + input_shift, feature
   * by feature (e.g. scale 1/16 for pixels 0..16). Copied at creation. */
  const float *input_scale;
  const float *input_shift;
} bbi_mlp_config;

typedef struct bbi_mlp bbi_mlp;

/* Checks cfg and makes a model with freshly initialised parameters: weights uniform in
 * ±sqrt(6/fan_in) before ReLU layers (He) and ±sqrt(6/(fan_in+fan_out)) otherwise
 * (Glorot), biases 0, momentum 0. alloc NULL means the default allocator; it is copied.
 * Returns 0, BB_ERR_INVALID_ARGUMENT / BB_ERR_LIMIT for a bad config, BB_ERR_NOMEM. */
int bbi_mlp_create(const bbi_mlp_config *cfg, const bb_allocator *alloc, bbi_mlp **out,
                  bb_error *err);

/* Releases the model (NULL is ignored). */
void bbi_mlp_free(bbi_mlp *m);

/* Length of the flat parameter vector: the sum over layers of out*(in+1). */
size_t bbi_mlp_param_count(const bbi_mlp *m);

/* The row sizes the model was made with: features in, values out. */
size_t bbi_mlp_inputs(const bbi_mlp *m);
size_t bbi_mlp_outputs(const bbi_mlp *m);

/* The architecture, for an export: the widths of the input and of every layer's output
 * (n_layers + 1 of them), the activation of the hidden layers, the loss (it decides the
 * output: probabilities or raw values), the input normalisation (NULL when there is none;
 * `inputs` floats each) and the parameter vector (bbi_mlp_param_count floats; its layout
 * per layer is W [out, in] row-major, then b [out]). Valid while the model is. */
typedef struct bbi_mlp_shape {
  size_t n_layers;
  size_t widths[BBI_MLP_MAX_HIDDEN + 2];
  bbi_mlp_activation activation;
  bbi_mlp_loss loss;
  const float *input_scale, *input_shift;
  const float *params;
} bbi_mlp_shape;

void bbi_mlp_describe(const bbi_mlp *m, bbi_mlp_shape *out);

/* The model as a standalone ONNX ModelProto (bb_buffer_free(NULL, *out)): float input "x"
 * [N, inputs] → Mul(input_scale) → Add(input_shift) (when normalised) → per layer
 * Gemm(transB = 1) with initializers W<l>, b<l>, then the activation on hidden layers →
 * Softmax into "probabilities" (cross-entropy) or the last Gemm as "y" (squared error). */
int bbi_mlp_export_onnx(const bbi_mlp *m, uint8_t **out, size_t *len, bb_error *err);

/* Copies the parameters into out (len must equal bbi_mlp_param_count). */
int bbi_mlp_params(const bbi_mlp *m, float *out, size_t len, bb_error *err);
/* The momentum SGD velocity (n_params floats) out, and back in (finite values only): the
 * optimizer's state, which a saved model carries so training resumes where it was. */
int bbi_mlp_velocity(const bbi_mlp *m, float *out, size_t len, bb_error *err);
int bbi_mlp_load_velocity(bbi_mlp *m, const float *velocity, size_t len, bb_error *err);

/* Replaces the parameters (len must equal bbi_mlp_param_count). The momentum is kept;
 * the stored gradient is dropped, so the next sgd_step needs a new backward. */
int bbi_mlp_load_params(bbi_mlp *m, const float *params, size_t len, bb_error *err);

/* params += delta (len must equal bbi_mlp_param_count); drops the stored gradient. */
int bbi_mlp_apply_delta(bbi_mlp *m, const float *delta, size_t len, bb_error *err);

/* y [n, outputs] from x [n, inputs]: probabilities for softmax cross-entropy, the raw
 * outputs for mean squared error. n may be 0. BB_ERR_NOMEM when the workspace cannot
 * grow to n rows. */
int bbi_mlp_forward(bbi_mlp *m, const float *x, size_t n, float *y, bb_error *err);

/* The mean loss of outputs y [n, outputs] as forward returns them against targets (see
 * bbi_mlp_loss); n >= 1. Cross-entropy takes -log of the probabilities, each clamped to at
 * least FLT_MIN so a saturated wrong answer costs about 87.3 rather than infinity. */
int bbi_mlp_loss_of(const bbi_mlp *m, const float *y, const float *targets, size_t n,
                   float *loss, bb_error *err);

/* Runs forward on x [n, inputs] (n >= 1) and stores the gradient of the mean loss with
 * respect to every parameter, laid out as the parameters are (weight decay not included:
 * sgd_step adds it). *loss (may be NULL) gets the mean loss, computed from the logits
 * with a log-softmax, so it stays finite where bbi_mlp_loss_of clamps. */
int bbi_mlp_backward(bbi_mlp *m, const float *x, const float *targets, size_t n, float *loss,
                    bb_error *err);

/* The gradient stored by the last backward (bbi_mlp_param_count floats), or NULL when
 * there is none. Valid until the next call that changes the model. */
const float *bbi_mlp_gradient(const bbi_mlp *m);

/* One momentum SGD step with the stored gradient g, for every parameter w:
 * v = momentum*v + g + weight_decay*w (the last term for weights only), w -= lr*v.
 * BB_ERR_INVALID_ARGUMENT when no gradient is stored. */
int bbi_mlp_sgd_step(bbi_mlp *m, bb_error *err);

/* backward, then sgd_step; *loss (may be NULL) is the mean loss before the step. */
int bbi_mlp_train_batch(bbi_mlp *m, const float *x, const float *targets, size_t n,
                       float *loss, bb_error *err);

/* The share of rows of x [n, inputs] (n >= 1) whose largest output is at the index
 * labels[i] (class indices as floats, for either loss; needs outputs >= 2). Runs in
 * chunks, so the workspace grows to at most 256 rows here. */
int bbi_mlp_accuracy(bbi_mlp *m, const float *x, const float *labels, size_t n,
                    float *accuracy, bb_error *err);

#endif
