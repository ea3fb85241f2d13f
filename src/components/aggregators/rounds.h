/* Federated-averaging rounds: which contributions belong to which round, when a round
 * closes, and the sample-weighted mean it closes with. Sans-IO: the caller hands in
 * contributions and the current time (`now_ns`, any monotonic clock) and polls; nothing
 * here reads a clock, sleeps or talks to a network.
 *
 * A round is open from the moment the previous one ended (or the object was made) until
 * poll closes or abandons it. contribute never closes a round by itself; after it the
 * host asks bbi_fedround_next_deadline when to poll (it answers "now" once the round can
 * close). Contributors are identified by an opaque key of up to 64 bytes; the mean is
 * folded in ascending key order (bytewise, a shorter key before its extensions), in
 * double, and stored as float, so the result does not depend on arrival order. */
#ifndef BBI_OPS_AGGREGATORS_ROUNDS_H
#define BBI_OPS_AGGREGATORS_ROUNDS_H

#include <stddef.h>
#include <stdint.h>

#include "bb/common.h"

#define BBI_FEDROUND_KEY_MAX 64

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
} bbi_fedround_config;

/* The outcome of one contribution. Rejections come with a negative return code too. */
typedef enum bbi_fedround_status {
  BBI_FEDROUND_ACCEPTED = 0,
  BBI_FEDROUND_REPLACED,          /* the contributor's earlier vector in this round is replaced */
  BBI_FEDROUND_LATE_COUNTED,      /* an earlier round's vector, counted into the open round */
  BBI_FEDROUND_LATE_DROPPED,      /* an earlier round's vector, dropped */
  BBI_FEDROUND_REJECTED_LENGTH,   /* wrong number of floats */
  BBI_FEDROUND_REJECTED_SAMPLES,  /* num_samples is 0, or the round's total would overflow */
  BBI_FEDROUND_REJECTED_NONFINITE,/* a NaN or an infinity */
  BBI_FEDROUND_REJECTED_FUTURE,   /* tagged with a round that has not opened yet */
  BBI_FEDROUND_REJECTED_KEY       /* empty key, or longer than BBI_FEDROUND_KEY_MAX */
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
  uint64_t total_samples; /* CLOSED: Σ n_i */
  uint32_t contributors;  /* CLOSED: vectors in the mean; ABANDONED: vectors dropped;
                             OVERDUE: vectors held so far */
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
 * passed without quorum. *result is always filled. On failure (BB_ERR_NOMEM) the round
 * is left exactly as it was and *result is IDLE. */
int bbi_fedround_poll(bbi_fedround *fr, uint64_t now_ns, bbi_fedround_result *result,
                     bb_error *err);

/* The earliest time at which poll may do something: now_ns when it would act at once,
 * UINT64_MAX when only a contribution can change that. */
uint64_t bbi_fedround_next_deadline(const bbi_fedround *fr, uint64_t now_ns);

uint64_t bbi_fedround_round_id(const bbi_fedround *fr);
size_t bbi_fedround_param_len(const bbi_fedround *fr); /* floats per contribution */
size_t bbi_fedround_pending(const bbi_fedround *fr); /* contributions in the open round */
bbi_fedround_counters bbi_fedround_get_counters(const bbi_fedround *fr);
const bb_allocator *bbi_fedround_allocator(const bbi_fedround *fr);

/* Bytes bbi_fedround_snapshot writes. */
size_t bbi_fedround_snapshot_size(const bbi_fedround *fr);

/* Writes the whole state (config, open round with its contributions, counters, the
 * memory of who was in recent rounds) to buf; BB_ERR_LIMIT when cap is too small. The
 * format (little-endian, version 1): "BBFR", u32 version, the config, the round state,
 * the entries, the recent-contributor records, and a FNV-1a 64 of everything before it. */
int bbi_fedround_snapshot(const bbi_fedround *fr, uint8_t *buf, size_t cap, size_t *written,
                         bb_error *err);

/* Rebuilds a state from snapshot bytes; BB_ERR_MALFORMED (with the byte offset) for
 * truncated, trailing, corrupt or inconsistent bytes, BB_ERR_UNSUPPORTED for another
 * version. */
int bbi_fedround_restore(const bb_allocator *alloc, const uint8_t *bytes, size_t len,
                        bbi_fedround **out, bb_error *err);

#endif
