/* The SplitModel engine: the part(s) of one ONNX model that one side of a split holds
 * (docs/SPLIT.md), each trained by an OnnxModel engine built from a cut of the model, and
 * the state between the calls of a step: a client has at most one step in flight (a
 * step whose gradients do not come back within the timeout is given up), a server with a
 * middle part keeps each client's last forward until its gradient comes back. No engine
 * (bb_ctx) here: the component (split_model_component.c) passes the time and the peer.
 *
 *   vanilla  client: first = input → cuts[0]            (gradients come in)
 *            server: first = cuts[0] → output + loss    (yields d loss / d cuts[0])
 *   U        client: first = input → cuts[0], head = cuts[1] → output + loss
 *            server: first = cuts[0] → cuts[1]          (gradients come in, yields d / d cuts[0]) */
#ifndef BBI_COMPONENTS_MODELS_SPLIT_MODEL_H
#define BBI_COMPONENTS_MODELS_SPLIT_MODEL_H

#include "bb/onnx_model.h"
#include "bb/wire.h"

#define BBI_SPLIT_CUTS_MAX 256

typedef struct bbi_split_config {
  bb_onnx_model_config train; /* loss, optimizer, seed, freeze, input, output */
  char cuts[BBI_SPLIT_CUTS_MAX]; /* '|'-joined: one value (vanilla) or two (U) */
  bool server;                   /* the side: the server's part, else the clients' */
  bool u_shaped;
  char data[64];        /* the clients' DataSource slot, which the client part draws batches from */
  uint64_t timeout_ns;  /* a client's step (or the average it shared for) given up after this long */
  uint64_t round_steps; /* SplitFed: the steps a client takes between sharing its part */
  size_t max_pending;   /* a middle part's forwards kept at once (one per client) */
} bbi_split_config;

/* What went wrong how often: the component reports each as a node counter. */
typedef struct bbi_split_counts {
  uint64_t steps;              /* steps whose part took its optimizer step */
  uint64_t timeouts;           /* client steps given up for want of gradients */
  uint64_t stale;              /* gradients or activations for a step that is gone */
  uint64_t refused_activations; /* activations of the wrong shape, or labels that do not fit */
  uint64_t refused_gradients;  /* gradients of the wrong shape, or not finite */
  uint64_t evicted;            /* middle forwards dropped to make room */
  uint64_t shares;             /* SplitFed: the client's part given to be averaged */
  uint64_t average_timeouts;   /* SplitFed: averages that did not come back in time */
} bbi_split_counts;

typedef struct bbi_split_model bbi_split_model;

/* Parses config text: OnnxModel's training keys and cuts, side, shape, data, timeout_ms,
 * max_pending, round_steps; any other key must be in `keys` (NULL-terminated: the caller's whole list,
 * which may name the engine's own keys too). */
int bbi_split_config_parse(const char *text, const char *const *keys, uint64_t default_seed, bbi_split_config *out,
                           bb_error *err);

/* Cuts the whole model (ONNX bytes) into every part of the split, refusing a cut that does
 * not separate the graph or a parameter read on two sides, and builds the parts this side
 * holds. */
int bbi_split_model_new(const uint8_t *onnx, size_t len, const bbi_split_config *config, const bb_allocator *alloc,
                        bbi_split_model **out, bb_error *err);
void bbi_split_model_free(bbi_split_model *m);

const bbi_split_counts *bbi_split_model_counts(const bbi_split_model *m);

/* Whether a client may start a step at now_ns: no step waits for its gradients (or the
 * one that waits has waited past the timeout: it is given up, and counted) and no
 * average it shared for is due (SplitFed; the same timeout). */
bool bbi_split_ready(bbi_split_model *m, uint64_t now_ns);

/* SplitFed: whether a client's part is due to be shared now — round_steps steps taken
 * since it last loaded an average (or started) and no step in flight; the client then
 * waits for the average (bbi_split_loaded) before its next step. */
bool bbi_split_share_due(bbi_split_model *m, uint64_t now_ns);
/* The client loaded the average of the parts: its next round begins. */
void bbi_split_loaded(bbi_split_model *m);

/* The training step's calls (bb_model_ops.split_*; NULL outputs when the call gives
 * nothing). `from` is the peer that sent what a server's call handles (a middle part keeps
 * one forward per peer). bbi_split_forward starts a client's step on a batch at now_ns,
 * the node's clock (when bbi_split_ready says so). */
int bbi_split_forward(bbi_split_model *m, uint64_t now_ns, const bb_tensor *x, const bb_tensor *labels,
                      bb_tensor **activations, bb_tensor **step, bb_error *err);
int bbi_split_relay(bbi_split_model *m, const bb_peer_id *from, const bb_tensor *activations,
                    const bb_tensor *step, bb_tensor **out, bb_error *err);
int bbi_split_loss(bbi_split_model *m, const bb_tensor *activations, const bb_tensor *target, bb_tensor **gradient,
                   bb_tensor **loss, bb_error *err);
/* *input_gradient is NULL for the clients' first part (its input is data); *applied says
 * whether the call was for the step in flight (false: a stale gradient, ignored). */
int bbi_split_backward(bbi_split_model *m, const bb_peer_id *from, const bb_tensor *gradient, const bb_tensor *step,
                       bb_tensor **input_gradient, bool *applied, bb_error *err);

/* Inference: the first part's output for x (rows for the clients, activations for a
 * middle part), and the score of the part with the loss on activations and labels. */
int bbi_split_predict(bbi_split_model *m, const bb_tensor *x, bb_tensor **y, bb_error *err);
int bbi_split_evaluate(bbi_split_model *m, const bb_tensor *activations, const bb_tensor *labels, float *score,
                       bb_error *err);

/* The engines of the parts this side holds: [0] the first, [1] the head (U clients). */
bb_onnx_model *bbi_split_part(const bbi_split_model *m, size_t i);
size_t bbi_split_part_count(const bbi_split_model *m);

#endif
