/* A training graph whose gradients come in from outside (BB_GRAD_LOSS_UPSTREAM) runs in
 * two phases, as a part of a split model does: the forward phase before the upstream
 * gradients exist, the backward phase once they arrive. */
#ifndef BBI_GRAD_PHASES_H
#define BBI_GRAD_PHASES_H

#include "bb/grad.h"

/* The two phases of g's training graph, each a model of its own that shares the training
 * graph's initializers:
 *   forward   every node that does not depend on an upstream gradient; its outputs are
 *             the training graph's outputs it computes, then the values the backward phase
 *             reads from it (saved[0..n_saved), those not already among the outputs)
 *   backward  every other node; its inputs are the training graph's inputs, then the saved
 *             values; its outputs are the training graph's outputs it computes.
 * Together they run the training graph's nodes, each once, in its order. *saved lives in
 * the forward model's arena. */
int bbi_grad_phases(const bb_grad_graph *g, const bb_allocator *alloc, bb_model **forward, bb_model **backward,
                    const char ***saved, size_t *n_saved, bb_error *err);

#endif
