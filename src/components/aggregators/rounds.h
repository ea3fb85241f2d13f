/* Federated-averaging rounds: which contributions belong to which round, when a round
 * closes, and what it closes with. Sans-IO: the caller hands in contributions and the
 * current time (`now_ns`, any monotonic clock) and polls; nothing here reads a clock,
 * sleeps or talks to a network.
 *
 * A round is open from the moment the previous one ended (or the object was made) until
 * poll closes or abandons it. contribute never closes a round by itself; after it the
 * host asks bbi_fedround_next_deadline when to poll (it answers "now" once the round can
 * close). Contributors are identified by an opaque key of up to 64 bytes.
 *
 * Closing trusts no single contributor: an update whose contributor has answered the
 * model's moves like an ascent step loses weight (the ascent screen, ascent.h), every
 * update is pulled back to a bounded distance from the reference (the model the round
 * started from), and in the mean a self-reported sample count weighs at most a bounded
 * multiple of the round's median count; then the update set is reduced by the
 * configured method. Everything is folded
 * in ascending key order, in double, and stored as float, so the result does not depend
 * on arrival order and cannot overflow to infinity. */
#ifndef BBI_OPS_AGGREGATORS_ROUNDS_H
#define BBI_OPS_AGGREGATORS_ROUNDS_H

#include <stddef.h>
#include <stdint.h>

#include "bb/common.h"
#include "components/aggregators/ascent.h"

/* A contributor's key: the ascent screen remembers every key a round takes. */
#define BBI_FEDROUND_KEY_MAX BBI_ASCENT_KEY_MAX

/* What a round does when its deadline passes before `quorum` contributions arrived. */
typedef enum bbi_fedround_no_quorum {
  BBI_FEDROUND_EXTEND = 0,  /* keep the round open; poll reports OVERDUE once, then the round
                              closes at the first poll that finds the quorum met */
  BBI_FEDROUND_ABANDON = 1  /* drop the round's contributions, count it, open the next one */
} bbi_fedround_no_quorum;

/* What happens to a contribution tagged with an earlier round than the open one. */
typedef enum bbi_fedround_late {
  BBI_FEDROUND_LATE_DROP = 0,  /* drop it (counted in late_dropped) */
  BBI_FEDROUND_LATE_COUNT = 1  /* count it into the open round, unless it is older than
                                 max_staleness rounds or its contributor was already part
                                 of a closed round with that id or a later one */
} bbi_fedround_late;

/* How a round's updates become one. */
typedef enum bbi_fedround_method {
  BBI_FEDROUND_MEAN = 0,      /* weighted mean (weighting below) */
  BBI_FEDROUND_MEDIAN = 1,    /* coordinate-wise median */
  BBI_FEDROUND_TRIMMED = 2,   /* coordinate-wise mean after dropping ⌊trim·K⌋ values at each end */
  BBI_FEDROUND_KRUM = 3,      /* the one update whose K - f - 2 nearest others are nearest */
  BBI_FEDROUND_MULTI_KRUM = 4 /* the mean of the `select` updates Krum scores best */
} bbi_fedround_method;

/* What a contribution weighs in the mean. */
typedef enum bbi_fedround_weighting {
  BBI_FEDROUND_BY_SAMPLES = 0, /* its sample count, bounded by max_samples and samples_factor */
  BBI_FEDROUND_UNIFORM = 1     /* 1: sample counts are not trusted at all */
} bbi_fedround_weighting;

/* What happens to an update farther from the reference than the distance bound. */
typedef enum bbi_fedround_beyond {
  BBI_FEDROUND_CLIP = 0, /* pulled back onto the bound: it still counts, as far as the bound
                           (unless farther than drop_factor × the median distance) */
  BBI_FEDROUND_DROP = 1  /* left out of the round's result (a bound of factor >= 1 times the
                           median distance always keeps at least half the updates) */
} bbi_fedround_beyond;

/* Most contributions one round holds (a Krum round: BBI_FEDROUND_MAX_KRUM, as its cost
 * grows with the square of the count). */
#define BBI_FEDROUND_MAX_ENTRIES 65536
#define BBI_FEDROUND_MAX_KRUM 1024

typedef struct bbi_fedround_config {
  size_t param_len;        /* floats in every contribution and in the result; > 0 */
  uint32_t quorum;         /* contributions a round needs to close; >= 1 */
  uint32_t target;         /* 0, or the cohort size (>= quorum) that closes a round at once */
  uint64_t deadline_ns;    /* how long a round stays open; 0: no deadline, close as soon
                              as the quorum is met */
  bbi_fedround_no_quorum on_no_quorum;
  bbi_fedround_late late;
  uint64_t max_staleness;  /* late contributions more rounds old than this are dropped */
  uint64_t first_round;    /* id of the first round */
  /* closing (all zero: the plain sample-weighted mean of version 1) */
  bbi_fedround_method method;
  bbi_fedround_weighting weighting;
  double trim;             /* TRIMMED: in [0, 0.5) */
  uint32_t byzantine;      /* KRUM, MULTI_KRUM: f, the updates assumed hostile; 0: as many
                              as Krum tolerates, ⌊(K - 3) / 2⌋ */
  uint32_t select;         /* MULTI_KRUM: updates averaged; 0: K - f */
  uint64_t max_samples;    /* a sample count above it weighs max_samples; 0: no fixed cap */
  double samples_factor;   /* a sample count above samples_factor × the round's median
                              count weighs that much; 0: no such cap */
  double max_norm;         /* an update farther than this from the reference is pulled
                              back onto that distance; 0: no fixed bound */
  double norm_factor;      /* ... farther than norm_factor × the round's median distance;
                              0: no such bound */
  bbi_fedround_beyond beyond_bound; /* what an update past the bound becomes */
  double drop_factor;      /* CLIP with norm_factor > 0: an update farther than drop_factor ×
                              the round's median distance is left out all the same; 0: none is */
  double center_clip;      /* MEAN: centered clipping — each kept update's deviation from
                              the center (the reference moved on by the last closed round's
                              step) is pulled back to center_clip × the round's median
                              deviation, and the result is the center plus their weighted
                              mean; 0: off (the plain weighted mean) */
  double ascent_screen;    /* the ascent screen (ascent.h): tau, how far below -0.1 the
                              trust of a contributor whose updates answer the model's moves
                              like ascent steps falls before it weighs nothing (MEAN: an
                              update keeps min(1, max(0, 1 + (trust + 0.1) / tau)) of its
                              weight; other methods leave out only the updates that keep
                              none); 0: off */
} bbi_fedround_config;

/* The outcome of one contribution. Rejections come with a negative return code too. */
typedef enum bbi_fedround_status {
  BBI_FEDROUND_ACCEPTED = 0,
  BBI_FEDROUND_REPLACED,          /* the contributor's earlier vector in this round is replaced */
  BBI_FEDROUND_LATE_COUNTED,      /* an earlier round's vector, counted into the open round */
  BBI_FEDROUND_LATE_DROPPED,      /* an earlier round's vector, dropped */
  BBI_FEDROUND_REJECTED_LENGTH,   /* wrong number of floats */
  BBI_FEDROUND_REJECTED_SAMPLES,  /* num_samples is 0 */
  BBI_FEDROUND_REJECTED_NONFINITE,/* a NaN or an infinity */
  BBI_FEDROUND_REJECTED_FUTURE,   /* tagged with a round that has not opened yet */
  BBI_FEDROUND_REJECTED_KEY,      /* empty key, or longer than BBI_FEDROUND_KEY_MAX */
  BBI_FEDROUND_REJECTED_FULL      /* the round holds its most contributions already */
} bbi_fedround_status;

/* What a poll did. */
typedef enum bbi_fedround_event {
  BBI_FEDROUND_IDLE = 0,  /* nothing to do yet */
  BBI_FEDROUND_CLOSED,    /* a round closed; the result carries its mean */
  BBI_FEDROUND_ABANDONED, /* a round passed its deadline without quorum and was dropped */
  BBI_FEDROUND_OVERDUE    /* a round passed its deadline without quorum and keeps waiting */
} bbi_fedround_event;

typedef struct bbi_fedround_result {
  bbi_fedround_event event;
  uint64_t round_id;      /* the round the event is about */
  uint64_t total_samples; /* CLOSED: Σ n_i as reported (saturating at 2^64 - 1) */
  uint64_t weight;        /* CLOSED: what the result weighs one tier up — the sum of the
                             weights the mean gave its kept updates (bounded sample
                             counts, or 1 each), rounded, at least 1 when any was kept;
                             for the other methods the number of updates kept */
  uint32_t contributors;  /* CLOSED: vectors reduced; ABANDONED: vectors dropped;
                             OVERDUE: vectors held so far */
  uint32_t norm_clipped;  /* CLOSED: updates pulled back to the distance bound */
  uint32_t norm_dropped;  /* CLOSED: updates left out for their distance */
  uint32_t samples_clipped; /* CLOSED: sample counts cut to the cap */
  uint32_t center_clipped;  /* CLOSED: deviations pulled back by centered clipping */
  uint32_t ascent_dropped;  /* CLOSED: updates left out by the ascent screen */
  uint32_t ascent_weighed;  /* CLOSED: updates the ascent screen gave part of their weight */
  float *params;          /* CLOSED: param_len floats owned by the caller, freed with
                             bb_buffer_free(alloc, params); otherwise NULL */
} bbi_fedround_result;

typedef struct bbi_fedround_counters {
  uint64_t rounds_closed;
  uint64_t rounds_abandoned;
  uint64_t rejected;     /* every REJECTED_* outcome */
  uint64_t late_counted;
  uint64_t late_dropped;
  uint64_t replaced;
  uint64_t norm_clipped;    /* updates pulled back, over every closed round */
  uint64_t norm_dropped;    /* updates left out for their distance, over every closed round */
  uint64_t samples_clipped; /* sample counts cut, over every closed round */
  uint64_t center_clipped;  /* deviations pulled back by centered clipping, over every closed round */
  uint64_t ascent_dropped;  /* updates the ascent screen left out, over every closed round */
  uint64_t ascent_weighed;  /* updates it gave part of their weight, over every closed round */
} bbi_fedround_counters;

typedef struct bbi_fedround bbi_fedround;

/* Makes the bookkeeping for `config`, with round `config->first_round` open from now_ns.
 * alloc NULL means the default allocator. */
int bbi_fedround_new(const bb_allocator *alloc, const bbi_fedround_config *config,
                    uint64_t now_ns, bbi_fedround **out, bb_error *err);
void bbi_fedround_free(bbi_fedround *fr);

/* Big-endian bytes of a numeric id, so key order is numeric order; fills key, returns 8. */
size_t bbi_fedround_key_from_u64(uint64_t id, uint8_t key[8]);

/* Offers one contribution from `key` for round `round_id`. Returns 0 and sets *status
 * to ACCEPTED, REPLACED, LATE_COUNTED or LATE_DROPPED; or a negative BB_ERR_* code with
 * *status saying why it was rejected and err naming the contributor, value or count at
 * fault. A rejection changes nothing but the rejected counter. */
int bbi_fedround_contribute(bbi_fedround *fr, uint64_t round_id, const uint8_t *key,
                           size_t key_len, const float *params, uint64_t num_samples,
                           uint64_t now_ns, bbi_fedround_status *status, bb_error *err);

/* Advances the state to now_ns: closes the open round when it can (target reached, or
 * quorum met and deadline passed or absent), abandons or reports it when its deadline
 * passed without quorum. `reference` (param_len floats; NULL: zeros) is the model the
 * round's updates started from, which distances are measured from. *result is always
 * filled. On failure (BB_ERR_NOMEM) the round is left exactly as it was and *result is
 * IDLE. */
int bbi_fedround_poll(bbi_fedround *fr, uint64_t now_ns, const float *reference, bbi_fedround_result *result,
                     bb_error *err);

/* Moves the open round forward to `round_id`, as a tier below another aggregator does
 * when the tier above has opened a newer round than this one: contributions held for the
 * open round are dropped (the round counts as abandoned when there were any), and
 * `round_id` opens at now_ns — its deadline counts from then, while its window
 * (bbi_fedround_window_start) begins where the open round's did, since the tier above may
 * have prompted it any time since. BB_ERR_INVALID_ARGUMENT when round_id is not after the
 * open round. */
int bbi_fedround_follow(bbi_fedround *fr, uint64_t round_id, uint64_t now_ns, bb_error *err);

/* The earliest time at which poll may do something: now_ns when it would act at once,
 * UINT64_MAX when only a contribution can change that. */
uint64_t bbi_fedround_next_deadline(const bbi_fedround *fr, uint64_t now_ns);

/* When contributions to round `round_id` could first be prompted: the time it opened
 * (0 for the first round, whose prompts may come before it opens). Rounds older than
 * the last 64 answer with the oldest opening remembered, which is later: a check against
 * it errs on the strict side. */
uint64_t bbi_fedround_window_start(const bbi_fedround *fr, uint64_t round_id);

uint64_t bbi_fedround_round_id(const bbi_fedround *fr);
size_t bbi_fedround_param_len(const bbi_fedround *fr); /* floats per contribution */
size_t bbi_fedround_pending(const bbi_fedround *fr); /* contributions in the open round */
bbi_fedround_counters bbi_fedround_get_counters(const bbi_fedround *fr);
const bb_allocator *bbi_fedround_allocator(const bbi_fedround *fr);

/* The fixed distance bound (config max_norm) and a new one for the rounds still to close:
 * the adaptive clip of DP-FedAvg moves it between rounds, and the snapshot keeps it.
 * BB_ERR_INVALID_ARGUMENT unless 0 < max_norm <= 1e300 (0, "no bound", is not a move). */
double bbi_fedround_max_norm(const bbi_fedround *fr);
int bbi_fedround_set_max_norm(bbi_fedround *fr, double max_norm, bb_error *err);

/* Bytes bbi_fedround_snapshot writes. */
size_t bbi_fedround_snapshot_size(const bbi_fedround *fr);

/* Writes the whole state (config, open round with its contributions, counters, the
 * memory of who was in recent rounds and when recent rounds opened, the last round's
 * step, the ascent screen's memory) to buf; BB_ERR_LIMIT when cap is too small. The
 * format (little-endian, version 4): "BBFR", u32 version, the config, the round state,
 * the entries, the recent-contributor records, the step, the ascent screen's records
 * (bbi_ascent_write), and a FNV-1a 64 of everything before it. Version 1 (no closing
 * config, no opening times, six counters) is still read, as the plain mean it computed;
 * version 2 (no drop factor, no centered clipping, nine counters, no step) as the
 * bounded mean it computed; version 3 (no ascent screen, ten counters) as the bounded
 * mean without the screen. */
int bbi_fedround_snapshot(const bbi_fedround *fr, uint8_t *buf, size_t cap, size_t *written,
                         bb_error *err);

/* Rebuilds a state from snapshot bytes; BB_ERR_MALFORMED (with the byte offset) for
 * truncated, trailing, corrupt or inconsistent bytes, BB_ERR_UNSUPPORTED for another
 * version. */
int bbi_fedround_restore(const bb_allocator *alloc, const uint8_t *bytes, size_t len,
                        bbi_fedround **out, bb_error *err);

#endif
