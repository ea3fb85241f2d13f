/* bytesandbrains — training any ONNX model: a gradient builder that turns an inference
 * graph into a training graph (forward, loss and one gradient output per trainable
 * parameter, in standard ONNX operators), optimizers emitted as ONNX graphs whose state
 * lives in initializers, and a trainer that runs steps of both on the CPU executor.
 *
 * Example: fit y = x·w to the target 6 for x = [1, 2] (w starts at zero).
 *
 *   bb_model *m = bb_model_new(NULL);
 *   bb_opset_set(m, &m->opsets, "", 17);
 *   m->graph = bb_graph_new(m, "linear");
 *   int64_t x_dims[2] = {1, 2}, w_dims[2] = {2, 1}, y_dims[2] = {1, 1};
 *   bb_vilist_add(m, &m->graph->inputs, "x", bb_type_new_tensor(m, BB_DTYPE_FLOAT, 2, x_dims));
 *   bb_vilist_add(m, &m->graph->outputs, "y", bb_type_new_tensor(m, BB_DTYPE_FLOAT, 2, y_dims));
 *   bb_tensor *w = bb_tensor_new_zeros(NULL, BB_DTYPE_FLOAT, 2, w_dims);
 *   bb_tensor_proto *w_init;
 *   bb_error err;
 *   if (bb_tensor_to_proto(m, w, "w", &w_init, &err)) return 1;
 *   bb_tensorlist_append(m, &m->graph->initializers, w_init);
 *   bb_ir_node *mm = bb_ir_node_new(m, "MatMul", "", "mm");
 *   bb_strlist_append(m, &mm->inputs, "x");
 *   bb_strlist_append(m, &mm->inputs, "w");
 *   bb_strlist_append(m, &mm->outputs, "y");
 *   bb_nodelist_append(m, &m->graph->nodes, mm);
 *
 *   bb_grad_options options = {.struct_size = sizeof options, .loss = BB_GRAD_LOSS_MSE};  // y vs "target"
 *   bb_optimizer_config sgd = bb_optimizer_defaults(BB_OPTIMIZER_SGD);
 *   sgd.lr = 0.1f;
 *   bb_grad_graph *g = NULL;
 *   bb_grad_optimizer *opt = NULL;
 *   bb_grad_trainer *t = NULL;
 *   int rc = bb_grad_build(m, &options, NULL, &g, &err);
 *   if (!rc) rc = bb_grad_optimizer_build(g, &sgd, &opt, &err);
 *   if (!rc) rc = bb_grad_trainer_new(g, opt, 0, NULL, &t, &err);
 *   bb_tensor *x = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 2, x_dims);
 *   bb_tensor *target = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 2, y_dims);
 *   memcpy(bb_tensor_data(x), (const float[]){1, 2}, sizeof(float[2]));
 *   *(float *)bb_tensor_data(target) = 6;
 *   const char *names[2] = {"x", g ? g->target : NULL};
 *   bb_tensor *batch[2] = {x, target};
 *   bb_grad_step step = {0};
 *   for (int i = 0; !rc && i < 50; i++) rc = bb_grad_trainer_step(t, names, batch, 2, &step, &err);
 *   if (rc) fprintf(stderr, "%s\n", err.message);
 *   else printf("loss after 50 steps: %g\n", step.loss);  // w is now near [1.2, 2.4]
 *   bb_tensor_release(x);
 *   bb_tensor_release(target);
 *   bb_tensor_release(w);
 *   bb_grad_trainer_free(t);
 *   bb_grad_optimizer_free(opt);
 *   bb_grad_graph_free(g);
 *   bb_model_free(m);
 *   if (rc || step.loss > 1e-4f) return 1;
 *
 * The graphs are plain ModelProtos: they can be encoded, inspected, checked with
 * onnx.checker and run by any ONNX runtime that implements the few operators of the
 * ai.bytesandbrains.grad domain (docs/GRAD.md). */
#ifndef BB_GRAD_H
#define BB_GRAD_H

#include <stdbool.h>

#include "bb/artifact.h"
#include "bb/common.h"
#include "bb/cpu.h"
#include "bb/ir.h"
#include "bb/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The operator domain of the few operators the gradients need and ONNX lacks. */
#define BB_GRAD_DOMAIN BB_DOMAIN_GRAD

/* ---- training graphs ------------------------------------------------------------------ */

typedef enum bb_grad_loss {
  /* the graph already computes the loss: `output` names a floating-point scalar */
  BB_GRAD_LOSS_OUTPUT = 0,
  /* mean softmax cross-entropy of logits [N, C, d...] against integer labels [N, d...] */
  BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY = 1,
  /* mean over every element of (prediction - target)^2; target has the prediction's shape */
  BB_GRAD_LOSS_MSE = 2,
  /* mean over every element of softplus(z) - z * t: binary cross-entropy of logits z
   * against targets t in [0, 1] of the same shape */
  BB_GRAD_LOSS_BCE_WITH_LOGITS = 3,
  /* no loss in this graph: it is a part of a model, and d loss / d (each of its outputs)
   * comes in as a graph input from the part that follows (another peer's, in a split);
   * backpropagation starts from those gradients */
  BB_GRAD_LOSS_UPSTREAM = 4
} bb_grad_loss;

/* What to train and against what. Options with only struct_size set mean: the graph's
 * first output is the loss, every floating-point initializer that reaches it is trained
 * except the buffers. */
typedef struct bb_grad_options {
  size_t struct_size; /* sizeof(bb_grad_options) */
  bb_grad_loss loss;
  /* the graph output the built-in loss reads, or the loss itself for BB_GRAD_LOSS_OUTPUT;
   * NULL means the first graph output */
  const char *output;
  /* the graph input that holds the labels / targets of a built-in loss: an existing input
   * (its declared type must fit the loss) or a new one; NULL means "target" */
  const char *target;
  /* the trainable initializers; NULL means every floating-point initializer that reaches
   * the loss, except the buffers: batch-normalisation running statistics (state) and the
   * initializers the model's metadata BB_KEY_BUFFERS names */
  const char *const *params;
  size_t n_params;
  /* initializers never trained, whatever reaches the loss through them (each must be an
   * initializer, and not in params) */
  const char *const *freeze;
  size_t n_freeze;
  /* BB_GRAD_LOSS_UPSTREAM: the values whose gradients come in (each gets an input of its
   * type, named in bb_grad_graph.upstream); NULL means `output` alone */
  const char *const *upstream;
  size_t n_upstream;
  /* graph inputs (not initializers, floating point) whose gradient d loss / d input the
   * graph also yields: what a part of a split model hands back to the part before it */
  const char *const *input_grads;
  size_t n_input_grads;
} bb_grad_options;

/* A training graph and the names that connect it to a trainer. Every string lives in the
 * model's arena. Outputs, in order: the loss (none with BB_GRAD_LOSS_UPSTREAM),
 * grads[0..n_params), state_next[0..n_state), input_grads[0..n_input_grads), then the
 * inference graph's own outputs (the loss itself only once). */
typedef struct bb_grad_graph {
  bb_model *model;
  bb_grad_loss kind;
  const char *loss;       /* the scalar loss output, or NULL with BB_GRAD_LOSS_UPSTREAM */
  const char *target;     /* the label / target input, or NULL with BB_GRAD_LOSS_OUTPUT */
  const char *prediction; /* the output a built-in loss reads (always a graph output), or NULL */
  /* the int64 scalar input that seeds the masks of training-mode Dropout, or NULL when
   * the graph has none */
  const char *seed;
  size_t n_params;
  const char **params; /* trainable initializers */
  const char **grads;  /* grads[i] is the output holding d loss / d params[i] */
  size_t n_state;
  const char **state;      /* initializers a step updates without gradients (running statistics) */
  const char **state_next; /* state_next[i] is the output holding state[i]'s next value */
  size_t n_warnings;
  const char **warnings; /* what was left out and why (a parameter the loss does not depend on) */
  const bb_allocator *alloc;
  /* BB_GRAD_LOSS_UPSTREAM: upstream[i] is the input holding d loss / d upstream_outputs[i]
   * (its type is the output's); the outputs are graph outputs */
  size_t n_upstream;
  const char **upstream_outputs;
  const char **upstream;
  /* input_grads[i] is the output holding d loss / d inputs[i] (zeros, with a warning, for
   * an input the loss does not depend on) */
  size_t n_input_grads;
  const char **inputs;
  const char **input_grads;
} bb_grad_graph;

/* Builds the training graph of `model` (which is not changed). Refused, with a message
 * naming the node, value or parameter: an operator on a path from a parameter to the loss
 * that has no gradient, a parameter that reaches the loss only through values without a
 * gradient (naming the operator where its gradient stops: ArgMax, Floor, ...; freeze it to
 * train the rest), a loss that is not a floating-point scalar, a target whose declared type
 * does not fit the loss, a named or frozen parameter that is not a floating-point
 * initializer, options whose struct_size this library does not know, and a model older
 * than ai.onnx opset 13. A parameter that does not reach the loss at all is left out with
 * a warning. options NULL: the defaults. */
BB_API int bb_grad_build(const bb_model *model, const bb_grad_options *options, const bb_allocator *alloc,
                         bb_grad_graph **out, bb_error *err);
BB_API void bb_grad_graph_free(bb_grad_graph *graph);

/* A part of a model: the values `outputs` computed from the values `inputs` (a cut of
 * the model's graph, e.g. the layers one peer of a split runs). */
typedef struct bb_grad_cut_options {
  size_t struct_size; /* sizeof(bb_grad_cut_options) */
  /* values the part starts from (computed values or data inputs of the model); NULL
   * means the model's data inputs */
  const char *const *inputs;
  size_t n_inputs;
  /* values the part ends with; NULL means the model's outputs */
  const char *const *outputs;
  size_t n_outputs;
} bb_grad_cut_options;

/* Makes the part as a standalone model (the model is not changed): the nodes the outputs
 * need, walking back until the inputs, and the initializers those read; its graph inputs
 * and outputs are the cut's values, typed as the builder infers them (element type and
 * shape, symbolic dims kept). Refused, naming the values: a cut that does not separate
 * the graph (an output reached from a data input of the model on a path around the
 * inputs, or an input the outputs do not depend on), a name that is no value of the graph
 * or an initializer, a value both input and output. */
BB_API int bb_grad_cut(const bb_model *model, const bb_grad_cut_options *options, const bb_allocator *alloc,
                       bb_model **out, bb_error *err);

/* The inference form of a model exported for training (PyTorch's TrainingMode.TRAINING):
 * BatchNormalization normalises with its running statistics and Dropout passes its input
 * through. A copy (the model is not changed): what to run for predictions, and to export
 * once bb_grad_trainer_store has written the trained values into it. */
BB_API int bb_grad_inference_model(const bb_model *model, const bb_allocator *alloc, bb_model **out, bb_error *err);

/* ---- optimizers ------------------------------------------------------------------------ */

typedef enum bb_optimizer_kind {
  BB_OPTIMIZER_SGD = 0,
  BB_OPTIMIZER_MOMENTUM = 1, /* heavy-ball momentum, or Nesterov's */
  BB_OPTIMIZER_ADAM = 2,     /* weight decay added to the gradient (L2) */
  BB_OPTIMIZER_ADAMW = 3     /* weight decay applied to the parameters (decoupled) */
} bb_optimizer_kind;

/* Hyper-parameters, with torch.optim's meaning. bb_optimizer_defaults gives torch's
 * defaults for a kind (struct_size set). */
typedef struct bb_optimizer_config {
  size_t struct_size; /* sizeof(bb_optimizer_config) */
  bb_optimizer_kind kind;
  float lr;
  float momentum;     /* MOMENTUM */
  bool nesterov;      /* MOMENTUM */
  float beta1, beta2; /* ADAM, ADAMW */
  float eps;          /* ADAM, ADAMW */
  float weight_decay;
  /* > 0: scale every gradient by min(1, max_grad_norm / (global L2 norm + 1e-6)) first */
  float max_grad_norm;
} bb_optimizer_config;

BB_API bb_optimizer_config bb_optimizer_defaults(bb_optimizer_kind kind);

/* An optimizer graph. Inputs: the parameters and their gradients (named as in the training
 * graph). Initializers: the hyper-parameters ("optimizer.lr", ...) and the state (per
 * parameter "<p>.momentum" or "<p>.exp_avg" and "<p>.exp_avg_sq"; "optimizer.step", an
 * int64 count of the steps taken), so an encoded snapshot carries them. Outputs, in
 * order: params_next[0..n_params), then state_next[0..n_state). */
typedef struct bb_grad_optimizer {
  bb_model *model;
  size_t n_params;
  const char **params, **grads, **params_next;
  size_t n_state;
  const char **state, **state_next;
  const bb_allocator *alloc;
} bb_grad_optimizer;

/* Builds the optimizer graph for the parameters of a training graph. */
BB_API int bb_grad_optimizer_build(const bb_grad_graph *graph, const bb_optimizer_config *config,
                                   bb_grad_optimizer **out, bb_error *err);
BB_API void bb_grad_optimizer_free(bb_grad_optimizer *opt);

/* ---- training steps -------------------------------------------------------------------- */

typedef struct bb_grad_trainer bb_grad_trainer;

/* Prepares both graphs for running (each is planned once) and takes the parameters, the
 * state and the optimizer state from their initializers. graph and opt must outlive the
 * trainer. dropout_seed is the seed of step 0; step k seeds Dropout with dropout_seed + k. */
BB_API int bb_grad_trainer_new(const bb_grad_graph *graph, const bb_grad_optimizer *opt, uint64_t dropout_seed,
                               const bb_allocator *alloc, bb_grad_trainer **out, bb_error *err);
BB_API void bb_grad_trainer_free(bb_grad_trainer *t);

/* The limits every run of the trainer's sessions (the training graph or its two phases,
 * and the optimizer graph) is held to. A new trainer has the CPU backend's defaults
 * (BB_CPU_DEFAULT_MAX_OUTPUT_BYTES per value, BB_CPU_DEFAULT_MAX_TOTAL_BYTES in all);
 * a model whose steps need more raises them here; NULL restores the defaults. A run past
 * a limit fails the step with BB_ERR_LIMIT naming the node and the value, and the
 * trainer's tensors stay as they were. BB_ERR_INVALID_ARGUMENT, nothing changed, for a
 * struct_size this library cannot read. */
BB_API int bb_grad_trainer_set_limits(bb_grad_trainer *t, const bb_cpu_limits *limits, bb_error *err);

typedef struct bb_grad_step {
  float loss;
  /* false when the loss or a gradient was not finite: nothing changed, the step was counted */
  bool applied;
} bb_grad_step;

/* One step on a batch: runs the training graph, then the optimizer graph, and keeps the
 * new parameters, state and optimizer state. inputs are the training graph's data inputs
 * and its target by name (and, for a graph built with BB_GRAD_LOSS_UPSTREAM, its upstream
 * gradients: the step is then bb_grad_trainer_forward and bb_grad_trainer_backward); each
 * must match the dtype and the known dims the graph declares, and a target must have the
 * prediction's shape (MSE, BCE). out->loss is NaN for a graph without a loss. */
BB_API int bb_grad_trainer_step(bb_grad_trainer *t, const char *const *names, bb_tensor *const *inputs, size_t n_inputs,
                                bb_grad_step *out, bb_error *err);

/* A step of a graph built with BB_GRAD_LOSS_UPSTREAM in two calls, as one part of a split
 * model takes it: forward runs what does not need the upstream gradients (the part's
 * outputs, and what the backward pass reads, which the trainer keeps), and gives the
 * upstream outputs (one new reference each, in graph->upstream_outputs order; outputs may
 * be NULL); a later backward takes their gradients (in graph->upstream order), computes
 * the parameters' and inputs' gradients and takes the optimizer step. A new forward
 * forgets one that waits. Backward without a waiting forward is BB_ERR_INVALID_ARGUMENT;
 * a gradient of another element type or shape than its output is BB_ERR_TYPE (the step is
 * lost, nothing changes); a gradient that is not finite refuses the step (out->applied
 * false, counted by bb_grad_trainer_refused). Either way the waiting forward is used up. */
BB_API int bb_grad_trainer_forward(bb_grad_trainer *t, const char *const *names, bb_tensor *const *inputs,
                                   size_t n_inputs, bb_tensor **outputs, bb_error *err);
BB_API int bb_grad_trainer_backward(bb_grad_trainer *t, bb_tensor *const *upstream, size_t n_upstream,
                                    bb_grad_step *out, bb_error *err);

/* d loss / d input of the last applied step for an input named in the graph's
 * input_grads (borrowed: valid until the next step), or NULL. */
BB_API const bb_tensor *bb_grad_trainer_input_grad(const bb_grad_trainer *t, const char *input);

/* Memory of the steps. Both graphs run through one recycling allocator (see
 * bb_cpu_session_memory), so once the first steps have run, a step of the same shapes
 * takes nothing from the trainer's allocator: `allocations` stops growing. */
typedef struct bb_grad_trainer_memory_stats {
  size_t held_bytes;             /* the parameters, running statistics and optimizer state */
  size_t step_in_use_high_water; /* the most bytes the runs had in use at once (tensors and scratch) */
  size_t step_high_water;        /* the most bytes the runs held at once, kept for reuse included */
  uint64_t allocations;          /* requests the runs passed to the trainer's allocator, in all */
} bb_grad_trainer_memory_stats;

BB_API void bb_grad_trainer_memory(const bb_grad_trainer *t, bb_grad_trainer_memory_stats *out);

/* Steps attempted, and those refused for a non-finite loss or gradient. */
BB_API uint64_t bb_grad_trainer_steps(const bb_grad_trainer *t);
BB_API uint64_t bb_grad_trainer_refused(const bb_grad_trainer *t);

/* The current value of a parameter, state or optimizer-state tensor by name (borrowed:
 * valid until the next step), or NULL. */
BB_API const bb_tensor *bb_grad_trainer_value(const bb_grad_trainer *t, const char *name);

/* The tensors the trainer holds, by index: the parameters (in the training graph's order),
 * then the running statistics, then the optimizer state. */
BB_API size_t bb_grad_trainer_value_count(const bb_grad_trainer *t);
BB_API const char *bb_grad_trainer_value_name(const bb_grad_trainer *t, size_t i);

/* Replaces a held tensor's values with a copy of `value`, which must have its element type
 * and shape (BB_ERR_NOT_FOUND for a name it does not hold, BB_ERR_TYPE otherwise). */
BB_API int bb_grad_trainer_set_value(bb_grad_trainer *t, const char *name, const bb_tensor *value, bb_error *err);

/* The inverse of bb_grad_trainer_store: every initializer of m that names a held tensor
 * replaces its values (a snapshot, or parameters trained elsewhere). */
BB_API int bb_grad_trainer_load(bb_grad_trainer *t, const bb_model *m, bb_error *err);

/* Writes the current parameters, state and optimizer state into the initializers of the
 * same names in m (the inference model for an export, the training or optimizer graph for
 * a snapshot); names m does not have are skipped. */
BB_API int bb_grad_trainer_store(const bb_grad_trainer *t, bb_model *m, bb_error *err);

#ifdef __cplusplus
}
#endif
#endif /* BB_GRAD_H */
