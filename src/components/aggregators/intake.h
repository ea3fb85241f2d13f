/* What FedAvg, RobustAvg and FedBuff share about taking a contribution in and giving a
 * model out: the config keys of the per-contribution bounds, the checks a contribution
 * passes before it reaches the rounds engine (its type, its metadata, its contributor's
 * admission and membership), the counters of what closing cut, and the init model.
 * Each counter is "<counter>.<what>", counter being the type's prefix ("fedavg"). */
#ifndef BBI_COMPONENTS_AGGREGATORS_INTAKE_H
#define BBI_COMPONENTS_AGGREGATORS_INTAKE_H

#include <stdbool.h>
#include <stdint.h>

#include "bb/runtime.h"
#include "components/aggregators/rounds.h"

#define BBI_INTAKE_SLOT_MAX 64

/* Adds n (when not 0) to the node counter "<counter>.<what>". */
void bbi_intake_count(bb_ctx *ctx, const char *counter, const char *what, uint64_t n);

/* The bounds every contribution is held to and who may contribute: init=<slot>,
 * members=addressed|any, max_norm=0, norm_factor=3, beyond_norm=clip|drop, drop_factor=4,
 * ascent_screen=0.1, into cfg, init_slot and *members_only. */
int bbi_intake_parse_bounds(const char *config, const char *type, bbi_fedround_config *cfg,
                            char init_slot[BBI_INTAKE_SLOT_MAX], bool *members_only, bb_error *err);

/* weighting=samples|uniform, max_samples=0, samples_factor=1, into cfg. */
int bbi_intake_parse_weighting(const char *config, const char *type, bbi_fedround_config *cfg, bb_error *err);

/* An update is a non-empty float32 tensor, its metadata a sample count (U64) or [samples,
 * round]; *samples and *round keep their values where the metadata says nothing. A
 * refusal is counted (refused_type, refused_metadata). */
int bbi_intake_update(bb_ctx *ctx, const char *type, const char *counter, const bb_tensor *update,
                      const bb_val *meta, uint64_t *samples, uint64_t *round, bb_error *err);

/* `from` may contribute: admitted by its join token, and with members_only this node or
 * a peer this node sent data to since window_start (the time round `round` could first be
 * prompted). A refusal is counted (refused_unadmitted, refused_role, refused_non_member). */
int bbi_intake_contributor(bb_ctx *ctx, const char *type, const char *counter, const bb_peer_id *from,
                           bool members_only, uint64_t round, uint64_t window_start, bb_error *err);

/* Counts what closing a round cut (norm_clipped, norm_dropped, samples_clipped,
 * center_clipped, ascent_dropped, ascent_weighed). */
void bbi_intake_count_closing(bb_ctx *ctx, const char *counter, const bbi_fedround_result *r);

/* A float32 vector holding a copy of data[0..n), or NULL when out of memory. */
bb_tensor *bbi_intake_vector(bb_ctx *ctx, const float *data, size_t n);

/* The Params of the Model at `slot` (a tensor value the caller releases); the slot must be
 * bound on this node and hold a Model. */
int bbi_intake_init_params(bb_ctx *ctx, const char *type, const char *slot, bb_val **params, bb_error *err);

#endif
