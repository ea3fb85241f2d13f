/* bytesandbrains — the role contracts as typed C tables.
 *
 * A concrete component implements the methods of its role(s) with plain C types
 * (tensors, peer ids) and lets the role's dispatcher translate the graph's op call:
 *
 *   static const bb_model_ops MY_MODEL = {my_forward, my_loss, ...};
 *   static int my_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
 *     return bb_model_dispatch(&MY_MODEL, self, ctx, call, err);
 *   }
 *
 * The dispatcher checks every input's kind (a wrong one fails the op with
 * "input N of Forward must be a Tensor, got Bytes"), calls the method, and writes its
 * results as the op's outputs; a method that returns nothing writes a trigger, so what
 * is wired after it runs. A method may finish later: it calls bb_ctx_defer, returns
 * BB_LATER, and the host (or the component) calls bb_node_complete with the outputs.
 * A NULL method fails the op with BB_ERR_UNSUPPORTED naming the method. */
#ifndef BB_ROLES_H
#define BB_ROLES_H

#include "bb/artifact.h"
#include "bb/compiler.h"
#include "bb/runtime.h"
#include "bb/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Model (ai.bytesandbrains.role.model): one flat float32 parameter vector. */
typedef struct bb_model_ops {
  /* y = f(x); a trainable model remembers x for the next backward */
  int (*forward)(void *self, bb_ctx *ctx, const bb_tensor *x, bb_tensor **y, bb_error *err);
  /* the loss of a prediction against a target (a scalar tensor) */
  int (*compute_loss)(void *self, bb_ctx *ctx, const bb_tensor *prediction, const bb_tensor *target,
                      bb_tensor **loss, bb_error *err);
  /* gradients of the last loss and one optimizer step (grad: the loss, as a trigger) */
  int (*backward)(void *self, bb_ctx *ctx, const bb_tensor *grad, bb_error *err);
  int (*apply_delta)(void *self, bb_ctx *ctx, const bb_tensor *delta, bb_error *err);
  int (*load_parameters)(void *self, bb_ctx *ctx, const bb_tensor *params, bb_error *err);
  int (*params)(void *self, bb_ctx *ctx, bb_tensor **out, bb_error *err);
  /* beyond the reference: load params, train locally, give the result and how many
   * samples it saw (a federated client's round) */
  int (*fit)(void *self, bb_ctx *ctx, const bb_tensor *params, bb_tensor **trained, uint64_t *samples,
             bb_error *err);
  /* a score of the model on labelled data (accuracy for classifiers), a scalar */
  int (*evaluate)(void *self, bb_ctx *ctx, const bb_tensor *x, const bb_tensor *labels, bb_tensor **score,
                  bb_error *err);
  /* the model with its current parameters as a standalone ONNX ModelProto, in inference
   * form (what onnxruntime or `bb run` executes): a new Bytes value */
  int (*export_onnx)(void *self, bb_ctx *ctx, bb_val **onnx, bb_error *err);
  /* One part of a split model (bb_rec_split, docs/SPLIT.md). A method may leave its
   * outputs NULL: the op then gives nothing and what follows it does not run (a step
   * that waits for the last one's gradients, a gradient for a step that is gone).
   * split_forward: the clients' first part starts a step when none waits (it draws the
   * batch itself) and gives its activations, the batch's labels and the step's name (a
   * float32 [1]); split_relay: a middle part's forward for the step of the peer that
   * sent it; split_loss: the part with the loss (target: the labels, or the step whose
   * labels the part kept) gives d loss / d activations and the loss; split_backward: the
   * gradient of the step's output comes back, the part takes its optimizer step and gives
   * d loss / d its input as *out (a tensor), or a trigger when its input is data. */
  int (*split_forward)(void *self, bb_ctx *ctx, bb_tensor **activations, bb_tensor **labels, bb_tensor **step,
                       bb_error *err);
  int (*split_relay)(void *self, bb_ctx *ctx, const bb_tensor *activations, const bb_tensor *step, bb_tensor **out,
                     bb_error *err);
  int (*split_loss)(void *self, bb_ctx *ctx, const bb_tensor *activations, const bb_tensor *target,
                    bb_tensor **gradient, bb_tensor **loss, bb_error *err);
  int (*split_backward)(void *self, bb_ctx *ctx, const bb_tensor *gradient, const bb_tensor *step, bb_val **out,
                        bb_error *err);
  /* split_share (SplitFed): when the clients' part has taken its round of steps and none
   * waits, its parameters (the flat vector Params gives) to be averaged; the client then
   * takes no step until the average comes back (LoadParameters) */
  int (*split_share)(void *self, bb_ctx *ctx, bb_tensor **params, bb_error *err);
} bb_model_ops;

/* DataSource (ai.bytesandbrains.role.data_source). */
typedef struct bb_data_source_ops {
  int (*next_batch)(void *self, bb_ctx *ctx, bb_tensor **batch, bb_tensor **labels, bb_error *err);
  int (*reset)(void *self, bb_ctx *ctx, bb_error *err);
  int (*on_data_loaded)(void *self, bb_ctx *ctx, bb_error *err);
} bb_data_source_ops;

/* Aggregator (ai.bytesandbrains.role.aggregator). contribute gets the peer the value came
 * from (the node itself for local values) and the metadata value as sent (may be NULL).
 * aggregate returns nothing (*params NULL, result 0) while no round is ready. */
typedef struct bb_aggregator_ops {
  int (*contribute)(void *self, bb_ctx *ctx, const bb_peer_id *from, const bb_tensor *update, const bb_val *meta,
                    bb_error *err);
  int (*aggregate)(void *self, bb_ctx *ctx, bb_tensor **params, bb_val **meta, bb_error *err);
} bb_aggregator_ops;

/* Codec (ai.bytesandbrains.role.codec): float tensors in, encoded bytes out. Encode and
 * Decode take an optional second input, a reference tensor: Encode(x, reference) sends x
 * relative to it (the shipped codecs: x - reference) and Decode(y, reference) gives x back
 * (reference + the decoded difference); Decode(y) without one gives the difference. The
 * calls with a reference go to encode_against / decode_against (NULL: refused as
 * unsupported), the others to encode / decode. */
typedef struct bb_codec_ops {
  int (*train)(void *self, bb_ctx *ctx, const bb_tensor *samples, bb_error *err);
  int (*encode)(void *self, bb_ctx *ctx, const bb_tensor *x, bb_val **encoded, bb_error *err);
  int (*decode)(void *self, bb_ctx *ctx, const bb_val *encoded, bb_tensor **x, bb_error *err);
  int (*encode_against)(void *self, bb_ctx *ctx, const bb_tensor *x, const bb_tensor *reference, bb_val **encoded,
                        bb_error *err);
  int (*decode_against)(void *self, bb_ctx *ctx, const bb_val *encoded, const bb_tensor *reference, bb_tensor **x,
                        bb_error *err);
} bb_codec_ops;

/* Index (ai.bytesandbrains.role.index). search returns ids (int64 [k']) and distances
 * (float32 [k']), best first; k comes from the node's `k` attribute. */
typedef struct bb_index_ops {
  int (*add)(void *self, bb_ctx *ctx, const bb_tensor *vector, uint64_t *id, bb_error *err);
  int (*search)(void *self, bb_ctx *ctx, const bb_tensor *query, size_t k, bb_tensor **ids, bb_tensor **distances,
                bb_error *err);
  int (*remove)(void *self, bb_ctx *ctx, uint64_t id, bb_error *err);
  int (*train)(void *self, bb_ctx *ctx, const bb_tensor *samples, bb_error *err);
} bb_index_ops;

/* PeerSelector (ai.bytesandbrains.role.peer_selector); n comes from the node's `n`
 * attribute. *peers is a Peers value. */
typedef struct bb_peer_selector_ops {
  int (*sample)(void *self, bb_ctx *ctx, size_t n, bb_val **peers, bb_error *err);
  int (*current_view)(void *self, bb_ctx *ctx, bb_val **peers, bb_error *err);
} bb_peer_selector_ops;

BB_API int bb_model_dispatch(const bb_model_ops *ops, void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err);
BB_API int bb_data_source_dispatch(const bb_data_source_ops *ops, void *self, bb_ctx *ctx, const bb_op_call *call,
                                   bb_error *err);
BB_API int bb_aggregator_dispatch(const bb_aggregator_ops *ops, void *self, bb_ctx *ctx, const bb_op_call *call,
                                  bb_error *err);
BB_API int bb_codec_dispatch(const bb_codec_ops *ops, void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err);
BB_API int bb_index_dispatch(const bb_index_ops *ops, void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err);
BB_API int bb_peer_selector_dispatch(const bb_peer_selector_ops *ops, void *self, bb_ctx *ctx, const bb_op_call *call,
                                     bb_error *err);

/* ---- component configs ----------------------------------------------------------------
 * A binding's config is text: comma-separated key=value pairs ("hidden=32x16,lr=0.05").
 * These read one key (the default when it is absent) and fail with a message naming the
 * key and the text when the value does not parse: integers are decimal digits only (no
 * sign, no blanks). bb_config_check refuses keys not in `allowed` (NULL-terminated), so a
 * typo is an error rather than a silent default, and a key given twice. */
BB_API int bb_config_check(const char *config, const char *const *allowed, bb_error *err);
BB_API int bb_config_u64(const char *config, const char *key, uint64_t dflt, uint64_t *out, bb_error *err);
BB_API int bb_config_f32(const char *config, const char *key, float dflt, float *out, bb_error *err);
/* The raw value text (NUL-terminated into buf); dflt when absent. */
BB_API int bb_config_str(const char *config, const char *key, const char *dflt, char *buf, size_t size, bb_error *err);

/* The concretes this library ships (docs/COMPONENTS.md lists them with their configs). */
BB_API int bb_registry_add_shipped(bb_registry *r, bb_error *err);

/* The ONNX model a CpuMlp with this config (its binding's text) and flat parameter vector
 * exports (its Export op): pixels → Mul(input_scale) → Add(input_shift) → Gemm → activation
 * → ... → Gemm → Softmax (xent) with the input "pixels" and the output "probabilities"
 * ("outputs" for mse); Mul and Add only when the config scales or shifts. *onnx is freed
 * with bb_buffer_free(NULL, ...). */
BB_API int bb_cpu_mlp_export(const char *config, const bb_tensor *params, uint8_t **onnx, size_t *len, bb_error *err);

/* Declares CpuBackend's op set to a compiler: every operator the CPU executor runs at
 * BB_ONNX_OPSET_VERSION (bb_cpu_op_count/bb_cpu_op_name), in the default ONNX domain. A
 * Backend slot bound to CpuBackend then refuses any other op at compile. */
BB_API int bb_cpu_backend_declare_op_set(bb_compiler *c, bb_error *err);

#ifdef __cplusplus
}
#endif
#endif /* BB_ROLES_H */
