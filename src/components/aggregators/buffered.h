/* Asynchronous buffered aggregation (FedBuff: Nguyen et al., "Federated Learning with
 * Buffered Asynchronous Aggregation", AISTATS 2022). Sans-IO, like the rounds engine it
 * is built on: the caller hands in contributions and the time and polls.
 *
 * There is no round barrier. The global model has a version, 0 for the first; a client
 * takes whichever version is current, trains and sends back its parameters tagged with
 * that version. Its staleness s is how many versions were made since; a contribution
 * staler than max_staleness, or tagged with a version not made yet, is refused. An
 * accepted one enters the buffer as its delta from the model it trained from, weighed
 * 1/sqrt(1 + s) and re-based onto the current model:
 *
 *     x = g_now + (p - g_v) / sqrt(1 + s)
 *
 * so the buffer holds what each contributor would move the current model to (with
 * `deltas`, contributors send p - g_v itself — what a compressed update decodes to — and
 * it enters as g_now + (p - g_v) / sqrt(1 + s) alike). Once it holds `buffer`
 * contributions (or more: all that came before the poll) the buffer closes as one round
 * of the rounds engine (rounds.h)
 * whose reference is g_now: the ascent screen, the distance bound (norm_factor × the
 * buffer's median distance, clip or drop), the sample-count caps and the weighted mean
 * all apply per contribution exactly as in a FedAvg round, and the result is the next
 * version. A contributor that sends twice into one buffer replaces its earlier
 * contribution (it cannot double its weight).
 *
 * To measure deltas the last max_staleness + 1 versions are kept: memory is
 * (max_staleness + 1 + buffer) × the model's size. */
#ifndef BBI_OPS_AGGREGATORS_BUFFERED_H
#define BBI_OPS_AGGREGATORS_BUFFERED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "components/aggregators/rounds.h"

/* Most versions kept (max_staleness + 1). */
#define BBI_FEDBUFF_MAX_STALENESS 1024

typedef struct bbi_fedbuff_config {
  /* how a full buffer closes: param_len, method (MEAN), weighting, the caps, the
     distance bound and the ascent screen; quorum and target are the buffer size, and
     the round keys (deadline, late, max_staleness, first_round) are the engine's own */
  bbi_fedround_config closing;
  uint32_t buffer;        /* contributions per step, >= 1 */
  uint64_t max_staleness; /* versions a contribution may lag, <= BBI_FEDBUFF_MAX_STALENESS */
  bool deltas;            /* contributions are steps from the version trained from, not parameters */
} bbi_fedbuff_config;

/* The outcome of one contribution; the refusals come with a negative return code. */
typedef enum bbi_fedbuff_status {
  BBI_FEDBUFF_ACCEPTED = 0,
  BBI_FEDBUFF_REPLACED,          /* the contributor's earlier one in this buffer is replaced */
  BBI_FEDBUFF_REJECTED_STALE,    /* more than max_staleness versions old */
  BBI_FEDBUFF_REJECTED_FUTURE,   /* tagged with a version not made yet */
  BBI_FEDBUFF_REJECTED_LENGTH,   /* not param_len floats */
  BBI_FEDBUFF_REJECTED_NONFINITE,/* a NaN or an infinity, or a delta past the float range */
  BBI_FEDBUFF_REJECTED_SAMPLES,  /* a sample count of 0 */
  BBI_FEDBUFF_REJECTED_KEY,      /* empty key or longer than BBI_FEDROUND_KEY_MAX */
  BBI_FEDBUFF_REJECTED_FULL      /* cannot happen with buffer <= BBI_FEDROUND_MAX_ENTRIES */
} bbi_fedbuff_status;

typedef struct bbi_fedbuff bbi_fedbuff;

/* 1/sqrt(1 + staleness): what a contribution `staleness` versions old weighs. */
double bbi_fedbuff_staleness_weight(uint64_t staleness);

/* Makes the buffer with version 0 = initial (param_len floats; NULL: zeros). */
int bbi_fedbuff_new(const bb_allocator *alloc, const bbi_fedbuff_config *config, const float *initial,
                    uint64_t now_ns, bbi_fedbuff **out, bb_error *err);
void bbi_fedbuff_free(bbi_fedbuff *fb);

/* Offers `params` (param_len floats; with deltas the step), trained from version `version` by `key`, with
 * num_samples. Returns 0 with *status ACCEPTED or REPLACED, or a negative BB_ERR_* with
 * *status saying why (err names the version, value or count at fault); a refusal
 * changes nothing. *staleness (may be NULL) gets the contribution's staleness. */
int bbi_fedbuff_contribute(bbi_fedbuff *fb, uint64_t version, const uint8_t *key, size_t key_len,
                           const float *params, size_t n, uint64_t num_samples, uint64_t now_ns,
                           bbi_fedbuff_status *status, uint64_t *staleness, bb_error *err);

/* Steps the global model when the buffer holds `buffer` contributions: *result is the
 * closing of the rounds engine (CLOSED with the new version's params, owned by the
 * caller, and what the bounds cut; its round_id is the version the buffer was measured
 * against) or IDLE. On failure nothing changed. */
int bbi_fedbuff_poll(bbi_fedbuff *fb, uint64_t now_ns, bbi_fedround_result *result, bb_error *err);

uint64_t bbi_fedbuff_version(const bbi_fedbuff *fb);    /* the current version */
const float *bbi_fedbuff_global(const bbi_fedbuff *fb); /* its params (param_len floats) */
size_t bbi_fedbuff_param_len(const bbi_fedbuff *fb);
size_t bbi_fedbuff_pending(const bbi_fedbuff *fb);      /* contributions in the buffer */
/* When contributions to `version` could first be prompted (bbi_fedround_window_start). */
uint64_t bbi_fedbuff_window_start(const bbi_fedbuff *fb, uint64_t version);

/* The whole state: "BBFB", u32 version 1, u32 buffer, u32 flags (1: deltas), u64 max_staleness, u64 param_len,
 * u64 current version, u64 held versions h, h × param_len floats (oldest first, the
 * current last), u64 m then m bytes of the rounds engine's snapshot, FNV-1a 64 of all
 * before it. */
size_t bbi_fedbuff_snapshot_size(const bbi_fedbuff *fb);
int bbi_fedbuff_snapshot(const bbi_fedbuff *fb, uint8_t *buf, size_t cap, bb_error *err);
/* BB_ERR_MALFORMED (with the byte offset) for truncated, trailing, corrupt or
 * inconsistent bytes; BB_ERR_UNSUPPORTED for another version. */
int bbi_fedbuff_restore(const bb_allocator *alloc, const uint8_t *bytes, size_t len, bbi_fedbuff **out,
                        bb_error *err);

#endif
