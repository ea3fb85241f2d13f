/* FedAvg and RobustAvg: the Aggregator concretes that aggregate in rounds. Both are one
 * adapter over the rounds engine (src/components/aggregators/rounds.h); they differ in
 * how a round closes.
 *
 * FedAvg — the weighted mean of the round's updates.
 *   Config: quorum=1,target=0,deadline_ms=0,no_quorum=extend|abandon,late=drop|count,next=tick|close,
 *           max_staleness=1,init=<slot>,members=addressed|any,max_norm=0,norm_factor=3,
 *           beyond_norm=clip|drop,drop_factor=4,ascent_screen=0.1,weighting=samples|uniform,
 *           max_samples=0,samples_factor=1,center_clip=0,dp_clip=0,dp_noise=0,
 *           dp_clip_quantile=0,dp_clip_rate=0.2,dp_count_noise=0,dp_sample_rate=1,dp_clients=0
 *   dp_clip=C (> 0) makes it DP-FedAvg (parse_dp): updates clipped to distance C, weighed 1,
 *   and with dp_noise=z the mean noised as a sum noised with z × C would be; the
 *   counter fedavg.dp_rounds counts the rounds that spent privacy. dp_clip_quantile=γ
 *   makes C the initial clip of adaptive clipping (parse_dp_adaptive); dp_sample_rate=q
 *   with dp_clients=N takes each client's update with probability q (parse_dp_sampling).
 * RobustAvg — the coordinate-wise median or trimmed mean, Krum or Multi-Krum.
 *   Config: method=median|trimmed|krum|multikrum,trim=0.2,byzantine=0,select=0, and the
 *           round keys above but the weighting and centered-clipping ones (robust methods
 *           weigh every update 1).
 *
 *   Contribute(update, meta): update is a float32 tensor; meta is the number of samples
 *     (U64) or a bundle [samples, round] (U64, U64); with no meta a contribution weighs
 *     1 and belongs to the open round. A bundle [update, samples, round] may also come as
 *     the only input. The contributor is the peer the update came from, so a peer cannot
 *     double its weight by sending twice (the later one replaces the earlier).
 *   Aggregate(trigger): when the open round can close (target reached, or quorum met and
 *     the deadline passed), gives the new global parameters and the id of the round now
 *     open (U64); otherwise nothing, and nothing downstream runs. With next=close (default
 *     next=tick) the contribution that lets the round close also brings forward the tick
 *     of the Interval loop whose tick runs Aggregate (bb_ctx_wake_loops), so the round
 *     closes and the next one starts in the same poll instead of at the loop's next tick;
 *     the loop's period then counts from that tick (a round that closes only at its
 *     deadline still waits for a tick). With init=<slot>, the
 *     first Aggregate gives that Model's Params as round 0's global model. A round
 *     abandoned at its deadline (no_quorum=abandon) gives the last global model again with
 *     the new round's id, so the federation goes on without the lost contributions.
 *
 * A tier between clients and another aggregator (rounds=follow, max_ahead=8): the round
 * ids are the tier above's, carried by the contributions — one tagged with a round up to
 * max_ahead rounds after the open one moves this tier to that round (what it held for the
 * older round is dropped); further ahead it is refused (<type>.refused_ahead). Aggregate
 * then gives the round's result with the bundle [weight, round] as its metadata: the
 * round just closed and what the result weighs (FedAvg: the sum of the sample counts it
 * averaged), so a report [result, [weight, round]] contributes to the tier above exactly
 * as the clients' own updates would have. An abandoned round reports nothing; init= does
 * not apply.
 *
 * Who may contribute: with members=addressed (the default) only this node itself and the
 * peers it sent data to since the round the contribution is tagged with opened — the
 * round's broadcast or sample; on a tier with rounds=follow, which cannot tell when the
 * tier above prompted a round, the peers it sent data to at all. Anyone else is refused
 * and counted (<type>.refused_non_member): an id that was never asked cannot vote. On a node that
 * checks join tokens a contributor must also hold a valid token for the client role
 * (refused as <type>.refused_unadmitted or <type>.refused_role otherwise): a server's or
 * a watcher's token never makes its holder a member.
 *
 * Every refused contribution is refused alone — the round goes on with the others — and
 * counted by its reason (<type>.refused_<reason>: type, metadata, length, nonfinite,
 * samples, future, full, key, besides the membership ones above).
 *
 * What closing a round leaves out or cuts is counted too: norm_clipped, norm_dropped (the
 * distance bound), samples_clipped, center_clipped, and ascent_dropped, ascent_weighed —
 * updates whose contributor answered the model's moves like an ascent step (its step
 * reversed), left out or given part of their weight (ascent_screen; rounds.h and
 * ascent.h say how). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/privacy.h"
#include "bb/roles.h"
#include "components/aggregators/intake.h"
#include "components/aggregators/refusal_notice.h"
#include "components/aggregators/rounds.h"
#include "components/aggregators/secure_rounds.h"
#include "components/shipped.h"
#include "bb/bytes.h"
#include "bb/common.h"
#include "util/mem.h"

/* Adaptive clipping (Andrew et al. 2021): after each round the clip moves towards the
 * `quantile` of the update norms, learnt from a noised count of the updates within it. */
typedef struct dp_adaptive {
  double quantile;    /* γ in (0, 1); 0: the clip is fixed */
  double rate;        /* η, the geometric step's learning rate */
  double count_noise; /* σ_b, the count's noise; 0: max(clients / 20, dp_noise) */
} dp_adaptive;

/* Poisson sampling: every client's update is taken with probability `rate`, by a coin
 * from the round's secret key (bb_dp_sampled); the mean divides by rate × clients. */
typedef struct dp_sampling {
  double rate;      /* q in (0, 1]; 1: every update is taken */
  uint64_t clients; /* N, the population the rate applies to */
  uint8_t key[BB_DP_SAMPLE_KEY_BYTES];
  uint64_t key_round; /* the round the key was drawn for */
  bool keyed;
} dp_sampling;

typedef struct round_agg {
  const bb_allocator *alloc;
  const char *type;    /* "FedAvg" or "RobustAvg", for messages */
  const char *counter; /* "fedavg" or "robustavg": the prefix of its node counters */
  bbi_fedround_config cfg;
  bbi_fedround *fr;
  char init_slot[BBI_INTAKE_SLOT_MAX];
  bool members_only;
  bool follow;         /* rounds=follow: a tier below another aggregator */
  bool next_on_close;  /* next=close: a contribution that lets the round close wakes the
                          Interval loop whose tick runs Aggregate (bb_ctx_wake_loops) */
  uint64_t max_ahead;  /* follow: how far ahead a contribution may move the open round */
  bool started;
  float *global; /* the last global model given out (cfg.param_len floats), or NULL */
  double dp_clip;  /* FedAvg with dp_clip > 0: DP-FedAvg, each update's distance clipped to it */
  double dp_noise; /* ... and the sum noised with dp_noise × dp_clip (0: clipped only) */
  dp_adaptive adaptive; /* dp_clip_quantile > 0: the clip follows a quantile of the update norms */
  dp_sampling sampling; /* dp_sample_rate < 1: each round takes a Poisson sample of its clients */
  bool secure;     /* secure=1: the rounds' updates arrive as a SecAgg+ sum (secure_rounds.h) */
  bbi_secure_config secure_cfg;
  bbi_secure *sec;
  bbi_refusal_limit told; /* who was told why their contribution was refused, and when */
} round_agg;

static void count(const round_agg *a, bb_ctx *ctx, const char *what, uint64_t n) {
  bbi_intake_count(ctx, a->counter, what, n);
}

/* ---- config ---------------------------------------------------------------------------- */

/* The keys both types read (each lists them in its KEYS): rounds, the init model,
 * membership and the distance bound. */
static int parse_rounds(round_agg *a, const char *c, bb_error *err) {
  uint64_t quorum, target, deadline_ms, staleness;
  char no_quorum[16], late[16], rounds[16], next[16];
  int rc;
  if ((rc = bb_config_u64(c, "quorum", 1, &quorum, err)) || (rc = bb_config_u64(c, "target", 0, &target, err)) ||
      (rc = bb_config_u64(c, "deadline_ms", 0, &deadline_ms, err)) ||
      (rc = bb_config_u64(c, "max_staleness", 1, &staleness, err)) ||
      (rc = bb_config_str(c, "no_quorum", "extend", no_quorum, sizeof no_quorum, err)) ||
      (rc = bb_config_str(c, "late", "drop", late, sizeof late, err)) ||
      (rc = bbi_intake_parse_bounds(c, a->type, &a->cfg, a->init_slot, &a->members_only, err)) ||
      (rc = bb_config_str(c, "rounds", "own", rounds, sizeof rounds, err)) ||
      (rc = bb_config_u64(c, "max_ahead", 8, &a->max_ahead, err)) ||
      (rc = bb_config_str(c, "next", "tick", next, sizeof next, err)))
    return rc;
  a->next_on_close = strcmp(next, "close") == 0;
  if (!a->next_on_close && strcmp(next, "tick") != 0)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: next=`%s` is not tick|close", a->type, next);
  a->follow = strcmp(rounds, "follow") == 0;
  if (!a->follow && strcmp(rounds, "own") != 0)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: rounds=`%s` is not own|follow", a->type, rounds);
  if (a->follow && (a->init_slot[0] || !a->max_ahead))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "%s: rounds=follow takes its rounds and models from the tier above: no init=, and "
                        "max_ahead >= 1",
                        a->type);
  const size_t most = a->cfg.method == BBI_FEDROUND_KRUM || a->cfg.method == BBI_FEDROUND_MULTI_KRUM
                          ? BBI_FEDROUND_MAX_KRUM
                          : BBI_FEDROUND_MAX_ENTRIES;
  if (!quorum || quorum > most || target > most || (target && target < quorum))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: need 1 <= quorum <= target (or target=0) <= %zu, got `%s`",
                        a->type, most, c);
  if (deadline_ms > UINT64_MAX / 1000000u)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: deadline_ms=%llu is above the largest, %llu", a->type,
                        (unsigned long long)deadline_ms, (unsigned long long)(UINT64_MAX / 1000000u));
  bool abandon = strcmp(no_quorum, "abandon") == 0, late_count = strcmp(late, "count") == 0;
  if ((!abandon && strcmp(no_quorum, "extend") != 0) || (!late_count && strcmp(late, "drop") != 0))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: no_quorum is extend|abandon and late is drop|count",
                        a->type);
  a->cfg.quorum = (uint32_t)quorum;
  a->cfg.target = (uint32_t)target;
  a->cfg.deadline_ns = deadline_ms * 1000000u;
  a->cfg.on_no_quorum = abandon ? BBI_FEDROUND_ABANDON : BBI_FEDROUND_EXTEND;
  a->cfg.late = late_count ? BBI_FEDROUND_LATE_COUNT : BBI_FEDROUND_LATE_DROP;
  a->cfg.max_staleness = staleness;
  return 0;
}

/* A number key read in double (0 when absent): the noise multiplier the accountant is
 * told is the one the noise is drawn with, not its float32 rounding. */
static int config_f64(const char *c, const char *key, double *out, bb_error *err) {
  char text[64], *end = NULL;
  int rc = bb_config_str(c, key, "", text, sizeof text, err);
  if (rc) return rc;
  *out = text[0] ? strtod(text, &end) : 0;
  if (text[0] && (end == text || *end))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "FedAvg: %s=`%s` is not a number", key, text);
  return 0;
}

/* The keys of adaptive clipping and sampling mean nothing without dp_clip. */
static int refuse_dp_keys_without_clip(const char *c, bb_error *err) {
  static const char *const DP_ONLY[] = {"dp_clip_quantile", "dp_clip_rate", "dp_count_noise", "dp_sample_rate",
                                        "dp_clients", NULL};
  char given[32];
  for (size_t i = 0; DP_ONLY[i]; i++) {
    int rc = bb_config_str(c, DP_ONLY[i], "", given, sizeof given, err);
    if (rc) return rc;
    if (given[0])
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "FedAvg: %s= needs dp_clip > 0 (differential privacy)",
                          DP_ONLY[i]);
  }
  return 0;
}

/* dp_clip_quantile=γ (0 < γ < 1) makes dp_clip the initial clip of adaptive clipping, moved
 * after every round by exp(−η (b̃ − γ)), η = dp_clip_rate [0.2], b̃ the fraction of updates
 * within the clip counted with noise of standard deviation dp_count_noise [max(n / 20, z)
 * for n clients counted and dp_noise z]. The updates' noise multiplier grows so that the
 * count and the sum together spend what dp_noise alone would: an explicit dp_count_noise
 * must exceed dp_noise / 2. */
static int parse_dp_adaptive(round_agg *a, const char *c, bb_error *err) {
  double quantile, rate, count_noise;
  int rc;
  if ((rc = config_f64(c, "dp_clip_quantile", &quantile, err)) || (rc = config_f64(c, "dp_clip_rate", &rate, err)) ||
      (rc = config_f64(c, "dp_count_noise", &count_noise, err)))
    return rc;
  if (quantile == 0) {
    if (rate != 0 || count_noise != 0)
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                          "FedAvg: dp_clip_rate and dp_count_noise are adaptive clipping's: they need dp_clip_quantile");
    return 0;
  }
  if (!(quantile > 0 && quantile < 1) || !(rate >= 0 && rate <= 10) || !(count_noise >= 0 && count_noise <= 1e300))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "FedAvg: dp_clip_quantile in (0, 1), 0 <= dp_clip_rate <= 10 and dp_count_noise >= 0, got `%s`",
                        c);
  if (count_noise > 0 && a->dp_noise > 0 && !(2 * count_noise > a->dp_noise))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "FedAvg: dp_count_noise=%g spends more than dp_noise=%g allows (2 × dp_count_noise must "
                        "exceed it)",
                        count_noise, a->dp_noise);
  a->adaptive = (dp_adaptive){quantile, rate > 0 ? rate : 0.2, count_noise};
  return 0;
}

/* dp_sample_rate=q (0 < q < 1) with dp_clients=N: each client's update is taken with
 * probability q, a fresh CSPRNG coin per client and round, and the mean divides the
 * noised sum by q × N whatever number arrived (the count itself would tell who took part).
 * The amplification the accountant credits needs every sampled update the round receives
 * counted: so the round closes at its deadline only (target=0, quorum=1, a deadline),
 * late updates are dropped, and a round nobody sampled answered still gives out the
 * noise on an empty sum (no_quorum=abandon, handled in privatize_abandoned). */
static int parse_dp_sampling(round_agg *a, const char *c, bb_error *err) {
  double rate;
  uint64_t clients;
  int rc;
  if ((rc = config_f64(c, "dp_sample_rate", &rate, err)) || (rc = bb_config_u64(c, "dp_clients", 0, &clients, err)))
    return rc;
  a->sampling.rate = 1;
  if (rate == 0 && clients == 0) return 0;
  if (!(rate > 0 && rate <= 1) || clients == 0 || clients > BBI_FEDROUND_MAX_ENTRIES)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "FedAvg: dp_sample_rate in (0, 1] goes with dp_clients, the clients it samples from "
                        "(1..%d), got `%s`",
                        BBI_FEDROUND_MAX_ENTRIES, c);
  if (rate < 1 && (a->cfg.target != 0 || a->cfg.quorum != 1 || a->cfg.deadline_ns == 0 ||
                   a->cfg.on_no_quorum != BBI_FEDROUND_ABANDON || a->cfg.late != BBI_FEDROUND_LATE_DROP))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "FedAvg: dp_sample_rate=%g counts every sampled update a round receives: it needs target=0, "
                        "quorum=1, a deadline_ms, no_quorum=abandon and late=drop (a round closing on its first "
                        "answers would sample by speed, not by chance)",
                        rate);
  a->sampling.rate = rate;
  a->sampling.clients = clients;
  return 0;
}

/* DP-FedAvg on the server (dp_clip=C,dp_noise=z): each update's distance from the global
 * model it started from is clipped to C, every update weighs 1, and the sum of the
 * clipped updates gets Gaussian noise of standard deviation z × C (the mean: z × C / m for
 * m updates). One client then moves the sum by at most C, which is what the noise and the
 * accountant assume, so every bound that lets one client change how the others are
 * bounded or weighed — the median-relative distance bound, centered clipping, the ascent
 * screen's trust, sample-count weights — is off, and setting one is refused: the fixed
 * clip is the bound. A tier that follows another's rounds does not take dp_*: the noise
 * belongs where the sum is final. */
static int parse_dp(round_agg *a, const char *c, bb_error *err) {
  static const char *const DATA_DEPENDENT[] = {"max_norm",    "norm_factor", "drop_factor",   "center_clip",
                                               "max_samples", "samples_factor", "ascent_screen", NULL};
  double clip, noise;
  char given[32];
  int rc;
  if ((rc = config_f64(c, "dp_clip", &clip, err)) || (rc = config_f64(c, "dp_noise", &noise, err))) return rc;
  if (!(clip >= 0 && clip <= 3e38) || !(noise >= 0 && noise <= 3e38))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "FedAvg: dp_clip and dp_noise are finite numbers >= 0, got `%s`",
                        c);
  if (clip == 0) {
    if (noise > 0)
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                          "FedAvg: dp_noise=%g needs dp_clip > 0 (the noise is a multiple of the clip)", noise);
    return refuse_dp_keys_without_clip(c, err);
  }
  if (a->follow)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "FedAvg: dp_clip is for the aggregator whose sum is final, not a tier with rounds=follow");
  for (size_t i = 0; DATA_DEPENDENT[i]; i++) {
    if ((rc = bb_config_str(c, DATA_DEPENDENT[i], "", given, sizeof given, err))) return rc;
    if (given[0])
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                          "FedAvg: %s= with dp_clip: with differential privacy the fixed clip bounds every update, "
                          "and %s would let one client change how the others count",
                          DATA_DEPENDENT[i], DATA_DEPENDENT[i]);
  }
  if ((rc = bb_config_str(c, "weighting", "uniform", given, sizeof given, err))) return rc;
  if (strcmp(given, "uniform") != 0)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "FedAvg: weighting=%s with dp_clip: every update weighs 1 under differential privacy", given);
  if ((rc = bb_config_str(c, "beyond_norm", "clip", given, sizeof given, err))) return rc;
  if (strcmp(given, "clip") != 0)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "FedAvg: beyond_norm=%s with dp_clip: an update past the clip is clipped, not left out", given);
  a->dp_clip = clip;
  a->dp_noise = noise;
  if ((rc = parse_dp_adaptive(a, c, err)) || (rc = parse_dp_sampling(a, c, err))) return rc;
  a->cfg.weighting = BBI_FEDROUND_UNIFORM;
  a->cfg.max_norm = clip;
  a->cfg.beyond_bound = BBI_FEDROUND_CLIP;
  a->cfg.norm_factor = 0;
  a->cfg.drop_factor = 0;
  a->cfg.center_clip = 0;
  a->cfg.ascent_screen = 0;
  a->cfg.max_samples = 0;
  a->cfg.samples_factor = 0;
  return 0;
}

/* FedAvg under SecAgg+ (secure=1). The server sees only the sum, so every bound that needs
 * the single updates — the distance bounds, centered clipping, the ascent screen, sample
 * counts relative to the round's — is refused by name; the clients clip instead when
 * dp_clip is set (distributed DP). The FedAvg round's quorum, target and deadline decide
 * when the SecAgg+ round starts; the rounds engine below then takes its one result. */
static int parse_secure(round_agg *a, const char *c, bb_error *err) {
  static const char *const SINGLE_UPDATE[] = {"max_norm",    "norm_factor",    "drop_factor", "center_clip",
                                              "samples_factor", "ascent_screen", NULL};
  uint64_t secure, threshold, shares, timeout_ms;
  double range;
  char given[32];
  int rc;
  if ((rc = bb_config_u64(c, "secure", 0, &secure, err))) return rc;
  if (!secure) {
    for (const char *const *k = (const char *const[]){"secure_threshold", "secure_shares", "secure_range",
                                                      "secure_timeout_ms", NULL};
         *k; k++) {
      if ((rc = bb_config_str(c, *k, "", given, sizeof given, err))) return rc;
      if (given[0])
        return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "FedAvg: %s= needs secure=1", *k);
    }
    return 0;
  }
  if ((rc = bb_config_u64(c, "secure_threshold", 0, &threshold, err)) ||
      (rc = bb_config_u64(c, "secure_shares", 0, &shares, err)) ||
      (rc = bb_config_u64(c, "secure_timeout_ms", 30000, &timeout_ms, err)) ||
      (rc = config_f64(c, "secure_range", &range, err)))
    return rc;
  if (range == 0) range = 8;
  if (secure != 1 || threshold > 254 || shares > 254 || !(range > 0 && range <= 1e6) || !timeout_ms ||
      timeout_ms > UINT64_MAX / 1000000u)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "FedAvg: secure is 0|1, secure_threshold and secure_shares at most 254 (0: SecAgg+'s "
                        "defaults), 0 < secure_range <= 1e6, secure_timeout_ms >= 1; got `%s`",
                        c);
  if (a->follow || !a->init_slot[0])
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "FedAvg: secure=1 needs init=<model slot> (clients send their steps from the global model) "
                        "and its own rounds (not rounds=follow: a tier cannot pass a masked sum on)");
  for (size_t i = 0; SINGLE_UPDATE[i]; i++) {
    if ((rc = bb_config_str(c, SINGLE_UPDATE[i], "", given, sizeof given, err))) return rc;
    if (given[0])
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                          "FedAvg: %s= with secure=1: the server sees only the sum of the updates, and %s needs each "
                          "one (use dp_clip, which the clients apply before masking)",
                          SINGLE_UPDATE[i], SINGLE_UPDATE[i]);
  }
  if ((rc = bb_config_str(c, "beyond_norm", "clip", given, sizeof given, err))) return rc;
  if (strcmp(given, "clip") != 0)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "FedAvg: beyond_norm=%s with secure=1: the server cannot leave out an update it never sees",
                        given);
  if ((rc = bb_config_str(c, "weighting", "uniform", given, sizeof given, err))) return rc;
  const bool by_samples = strcmp(given, "samples") == 0;
  if (by_samples && !a->cfg.max_samples)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "FedAvg: weighting=samples with secure=1 needs max_samples=M: each client sends its weight "
                        "min(samples, M) / M inside the sum");
  bbi_secure_config *s = &a->secure_cfg;
  memset(s, 0, sizeof *s);
  s->threshold = (uint32_t)threshold;
  s->shares = (uint32_t)shares;
  s->range = range;
  s->stage_timeout_ns = timeout_ms * 1000000u;
  s->max_samples = by_samples ? a->cfg.max_samples : 0;
  s->quorum = a->cfg.quorum;
  s->target = a->cfg.target;
  s->deadline_ns = a->cfg.deadline_ns;
  s->abandon = a->cfg.on_no_quorum == BBI_FEDROUND_ABANDON;
  s->members_only = a->members_only;
  a->secure = true;
  /* the rounds engine takes the one unmasked result per round */
  a->cfg.quorum = 1;
  a->cfg.target = 1;
  a->cfg.deadline_ns = 0;
  a->cfg.on_no_quorum = BBI_FEDROUND_EXTEND;
  a->cfg.late = BBI_FEDROUND_LATE_DROP;
  a->cfg.weighting = BBI_FEDROUND_UNIFORM;
  a->cfg.max_norm = a->cfg.norm_factor = a->cfg.drop_factor = a->cfg.center_clip = a->cfg.ascent_screen = 0;
  a->cfg.max_samples = 0;
  a->cfg.samples_factor = 0;
  return 0;
}

static int made(const bb_component_init *init, const round_agg *parsed, void **self, bb_error *err) {
  round_agg *a = bbi_mem_alloc(init->alloc, sizeof *a);
  if (!a) return bb_error_set(err, BB_ERR_NOMEM, "%s: out of memory", parsed->type);
  *a = *parsed;
  a->alloc = init->alloc;
  *self = a;
  return 0;
}

/* Adaptive clipping and Poisson sampling are the server's: it counts the updates within
 * the clip and draws who is in the sum, which under secure=1 it cannot (it sees only the
 * masked sum), so their keys are refused there. */
static int refuse_server_dp_under_secure(const round_agg *a, const char *c, bb_error *err) {
  static const char *const SERVER_DP[] = {"dp_clip_quantile", "dp_sample_rate", NULL};
  char given[32];
  for (size_t i = 0; a->secure && SERVER_DP[i]; i++) {
    int rc = bb_config_str(c, SERVER_DP[i], "", given, sizeof given, err);
    if (rc) return rc;
    if (given[0])
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                          "FedAvg: %s with secure=1: the server sees only the masked sum, not which updates were "
                          "within the clip or which clients a sample drew (use a fixed dp_clip)",
                          SERVER_DP[i]);
  }
  return 0;
}

static int fedavg_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const KEYS[] = {"quorum",        "target",      "deadline_ms", "no_quorum",     "late",
                                     "max_staleness", "init",        "members",     "max_norm",      "norm_factor",
                                     "beyond_norm",   "drop_factor", "weighting",   "max_samples",   "samples_factor",
                                     "center_clip",   "rounds",      "max_ahead",   "ascent_screen", "dp_clip",
                                     "dp_noise",      "dp_clip_quantile", "dp_clip_rate", "dp_count_noise",
                                     "dp_sample_rate", "dp_clients",
                                     "secure",      "secure_threshold", "secure_shares",
                                     "secure_range",  "secure_timeout_ms", "next", NULL};
  const char *c = init->config;
  round_agg a = {.type = "FedAvg", .counter = "fedavg", .sampling = {.rate = 1}};
  float center_clip;
  int rc;
  if ((rc = bb_config_check(c, KEYS, err)) || (rc = parse_rounds(&a, c, err)) ||
      (rc = bbi_intake_parse_weighting(c, a.type, &a.cfg, err)) ||
      (rc = bb_config_f32(c, "center_clip", 0, &center_clip, err)))
    return rc;
  if (!(center_clip >= 0 && center_clip <= 3e38f))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "FedAvg: center_clip is a finite number >= 0 (0: off)");
  a.cfg.method = BBI_FEDROUND_MEAN;
  a.cfg.center_clip = center_clip;
  if ((rc = parse_secure(&a, c, err)) || (rc = refuse_server_dp_under_secure(&a, c, err))) return rc;
  if ((rc = parse_dp(&a, c, err))) return rc;
  if (a.secure) { /* DP's clip and noise move to the clients */
    a.secure_cfg.dp_clip = a.dp_clip;
    a.secure_cfg.dp_noise = a.dp_noise;
    a.dp_clip = 0;
    a.cfg.max_norm = 0;
  }
  if ((rc = made(init, &a, self, err))) return rc;
  round_agg *m = *self;
  if (m->secure && (rc = bbi_secure_new(init->alloc, &m->secure_cfg, &m->sec, err))) {
    bbi_mem_free(init->alloc, m);
    *self = NULL;
  }
  return rc;
}

static int robust_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const KEYS[] = {"quorum",        "target",      "deadline_ms", "no_quorum", "late",
                                     "max_staleness", "init",        "members",     "max_norm",  "norm_factor",
                                     "beyond_norm",   "drop_factor", "method",      "trim",      "byzantine",
                                     "select",        "rounds",      "max_ahead",   "ascent_screen", "next", NULL};
  static const char *const METHODS[] = {"median", "trimmed", "krum", "multikrum"};
  static const bbi_fedround_method METHOD_OF[] = {BBI_FEDROUND_MEDIAN, BBI_FEDROUND_TRIMMED, BBI_FEDROUND_KRUM,
                                                 BBI_FEDROUND_MULTI_KRUM};
  const char *c = init->config;
  round_agg a = {.type = "RobustAvg", .counter = "robustavg", .sampling = {.rate = 1}};
  char method[16];
  float trim;
  uint64_t byzantine, select;
  int rc;
  if ((rc = bb_config_check(c, KEYS, err)) ||
      (rc = bb_config_str(c, "method", "median", method, sizeof method, err)) ||
      (rc = bb_config_f32(c, "trim", 0.2f, &trim, err)) || (rc = bb_config_u64(c, "byzantine", 0, &byzantine, err)) ||
      (rc = bb_config_u64(c, "select", 0, &select, err)))
    return rc;
  size_t m = 0;
  while (m < 4 && strcmp(method, METHODS[m]) != 0) m++;
  if (m == 4 || !(trim >= 0 && trim < 0.5f) || byzantine > BBI_FEDROUND_MAX_KRUM || select > BBI_FEDROUND_MAX_KRUM)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "RobustAvg: method is median|trimmed|krum|multikrum, 0 <= trim < 0.5, byzantine and select "
                        "<= %d (got `%s`)",
                        BBI_FEDROUND_MAX_KRUM, c);
  a.cfg.method = METHOD_OF[m];
  a.cfg.weighting = BBI_FEDROUND_UNIFORM;
  a.cfg.trim = trim;
  a.cfg.byzantine = (uint32_t)byzantine;
  a.cfg.select = (uint32_t)select;
  if ((rc = parse_rounds(&a, c, err))) return rc;
  return made(init, &a, self, err);
}

static void round_agg_destroy(void *self) {
  round_agg *a = self;
  bbi_fedround_free(a->fr);
  bbi_secure_free(a->sec);
  bbi_mem_free(a->alloc, a->global);
  bbi_mem_free(a->alloc, a);
}

/* ---- Contribute -------------------------------------------------------------------------- */

/* The rounds start with the first parameter vector seen (its length is the model's). */
static int ensure_rounds(round_agg *a, bb_ctx *ctx, size_t len, bb_error *err) {
  if (a->fr) {
    if (len != a->cfg.param_len)
      return bb_error_set(err, BB_ERR_TYPE, "%s: %zu parameters where the federation has %zu", a->type, len,
                          a->cfg.param_len);
    return 0;
  }
  a->cfg.param_len = len;
  return bbi_fedround_new(a->alloc, &a->cfg, bb_ctx_now(ctx), &a->fr, err);
}

/* The counter of each refusal of the rounds engine. */
static const char *refusal_of(bbi_fedround_status status) {
  switch (status) {
  case BBI_FEDROUND_REJECTED_LENGTH: return "refused_length";
  case BBI_FEDROUND_REJECTED_SAMPLES: return "refused_samples";
  case BBI_FEDROUND_REJECTED_NONFINITE: return "refused_nonfinite";
  case BBI_FEDROUND_REJECTED_FUTURE: return "refused_future";
  case BBI_FEDROUND_REJECTED_KEY: return "refused_key";
  case BBI_FEDROUND_REJECTED_FULL: return "refused_full";
  default: return NULL;
  }
}

/* Under Poisson sampling an update for the open round is taken only from a client its
 * coin samples; the round's key is drawn from the system CSPRNG the first time the round
 * is asked. Updates for other rounds go on to the rounds engine, which drops them. */
static int check_sampled(round_agg *a, bb_ctx *ctx, const bb_peer_id *from, uint64_t round, bb_error *err) {
  dp_sampling *s = &a->sampling;
  if (!(s->rate < 1) || round != bbi_fedround_round_id(a->fr)) return 0;
  if (!s->keyed || s->key_round != round) {
    int rc = bb_dp_sample_key(NULL, s->key, err);
    if (rc) return rc;
    s->key_round = round;
    s->keyed = true;
  }
  if (bb_dp_sampled(s->key, from->bytes, from->len, s->rate)) return 0;
  count(a, ctx, "refused_unsampled", 1);
  return bb_error_set(err, BB_ERR_DENIED, "%s: this client is not in round %llu's sample (dp_sample_rate=%g)", a->type,
                      (unsigned long long)round, s->rate);
}

static int contribute(void *self, bb_ctx *ctx, const bb_peer_id *from, const bb_tensor *update, const bb_val *meta,
                      bb_error *err) {
  round_agg *a = self;
  uint64_t samples = 1, round = a->fr ? bbi_fedround_round_id(a->fr) : 0;
  int rc = bbi_intake_update(ctx, a->type, a->counter, update, meta, &samples, &round, err);
  /* a member of round `round`: a peer this node sent data to since that round could first
     be prompted (before the rounds start: ever). A tier that follows another's rounds
     cannot tell when that was — the tier above may abandon a round this tier still holds
     open and prompt the next before this tier closes it — so its members are the peers it
     has sent data to at all. */
  if (!rc)
    rc = bbi_intake_contributor(ctx, a->type, a->counter, from, a->members_only, round,
                                a->fr && !a->follow ? bbi_fedround_window_start(a->fr, round) : 0, err);
  if (rc) return rc;
  if (a->fr && (size_t)update->numel != a->cfg.param_len) count(a, ctx, "refused_length", 1);
  if ((rc = ensure_rounds(a, ctx, (size_t)update->numel, err))) return rc;
  if (a->follow && round > bbi_fedround_round_id(a->fr)) {
    const uint64_t open = bbi_fedround_round_id(a->fr);
    if (round - open > a->max_ahead) {
      count(a, ctx, "refused_ahead", 1);
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                          "%s: an update for round %llu is more than max_ahead=%llu rounds after the open round %llu",
                          a->type, (unsigned long long)round, (unsigned long long)a->max_ahead,
                          (unsigned long long)open);
    }
    if (bbi_fedround_pending(a->fr)) count(a, ctx, "rounds_abandoned", 1);
    if ((rc = bbi_fedround_follow(a->fr, round, bb_ctx_now(ctx), err))) return rc;
  }
  if ((rc = check_sampled(a, ctx, from, round, err))) return rc;
  bbi_fedround_status status = BBI_FEDROUND_ACCEPTED;
  rc = bbi_fedround_contribute(a->fr, round, from->bytes, from->len, bb_tensor_data(update), samples, bb_ctx_now(ctx),
                              &status, err);
  if (status == BBI_FEDROUND_LATE_DROPPED) count(a, ctx, "late_dropped", 1);
  if (status == BBI_FEDROUND_REPLACED) count(a, ctx, "replaced", 1);
  if (rc && refusal_of(status)) count(a, ctx, refusal_of(status), 1);
  if (!rc && a->next_on_close && bbi_fedround_next_deadline(a->fr, bb_ctx_now(ctx)) <= bb_ctx_now(ctx))
    rc = bb_ctx_wake_loops(ctx, err);
  return rc;
}

/* Under secure=1 the only update taken is this client's own, with the global model it
 * trained from: meta [samples, round, global] (the bundle [trained, samples, round,
 * global]); it is masked for the server whose prompt it answers. An update in the clear
 * is refused: it would show the server what secure aggregation hides. */
static int contribute_secure(round_agg *a, bb_ctx *ctx, const bb_tensor *update, const bb_val *meta, bb_error *err) {
  const bb_tensor *global = bb_val_count(meta) == 3 ? bb_val_as_tensor(bb_val_child(meta, 2)) : NULL;
  const bb_peer_id *server = bb_ctx_source(ctx);
  if (!global || !server || bb_peer_id_equal(server, bb_ctx_self(ctx))) {
    count(a, ctx, "refused_plain", 1);
    return bb_error_set(err, BB_ERR_DENIED,
                        "FedAvg: secure=1 takes updates only masked through SecAgg+; a client contributes [trained, "
                        "samples, round, global] on its own node");
  }
  const bb_val *samples = bb_val_child(meta, 0), *round = bb_val_child(meta, 1);
  if (!bb_val_is_u64(samples) || !bb_val_is_u64(round) || update->dtype != BB_DTYPE_FLOAT ||
      global->dtype != BB_DTYPE_FLOAT || update->numel != global->numel || update->numel < 1 ||
      !bb_val_as_u64(samples)) {
    count(a, ctx, "refused_metadata", 1);
    return bb_error_set(err, BB_ERR_TYPE,
                        "FedAvg: a secure contribution is [trained, samples, round, global]: float32 tensors of one "
                        "length, samples >= 1");
  }
  return bbi_secure_contribute(a->sec, ctx, server, bb_val_as_u64(round), bb_tensor_data(update),
                               bb_tensor_data(global), (size_t)update->numel, bb_val_as_u64(samples), err);
}

/* A refused contribution is refused alone, and its contributor is told why, within the
 * notices' rate bounds (a peer may send refused updates as fast as it likes). */
static int round_agg_contribute(void *self, bb_ctx *ctx, const bb_peer_id *from, const bb_tensor *update,
                                const bb_val *meta, bb_error *err) {
  round_agg *a = self;
  int rc = a->secure ? contribute_secure(a, ctx, update, meta, err) : contribute(self, ctx, from, update, meta, err);
  if (rc && rc != BB_ERR_NOMEM) bbi_refusal_notice_send_limited(&a->told, ctx, from, err->message);
  return rc;
}

/* ---- Aggregate --------------------------------------------------------------------------- */

/* Keeps what was given out: an abandoned round hands it out again, and the next round's
 * updates are measured from it. */
static int remember(round_agg *a, const float *params, bb_error *err) {
  if (!a->global && !(a->global = bbi_mem_calloc(a->alloc, a->cfg.param_len, sizeof(float))))
    return bb_error_set(err, BB_ERR_NOMEM, "%s: out of memory", a->type);
  memcpy(a->global, params, a->cfg.param_len * sizeof(float));
  return 0;
}

/* A tier's report upward: [weight, round] of the round that closed. */
static bb_val *report_meta(bb_ctx *ctx, const bbi_fedround_result *r) {
  const bb_allocator *alloc = bb_ctx_allocator(ctx);
  bb_val *parts[2] = {bb_val_u64(alloc, BB_VAL_U64, r->weight), bb_val_u64(alloc, BB_VAL_U64, r->round_id)};
  bb_val *meta = parts[0] && parts[1] ? bb_val_composite(alloc, parts, 2) : NULL;
  bb_val_release(parts[0]);
  bb_val_release(parts[1]);
  return meta;
}

/* Gives params with the round's metadata: the id of the round now open, or with
 * rounds=follow the report of the round that closed (`closed`). */
static int give(round_agg *a, bb_ctx *ctx, const float *params, const bbi_fedround_result *closed, bb_tensor **out,
                bb_val **meta, bb_error *err) {
  *out = bbi_intake_vector(ctx, params, a->cfg.param_len);
  *meta = a->follow && closed ? report_meta(ctx, closed)
                              : bb_val_u64(bb_ctx_allocator(ctx), BB_VAL_U64, bbi_fedround_round_id(a->fr));
  int rc = *out && *meta ? remember(a, params, err) : bb_error_set(err, BB_ERR_NOMEM, "%s: out of memory", a->type);
  if (!rc && a->sec)
    rc = bbi_secure_open(a->sec, bbi_fedround_round_id(a->fr), params, a->cfg.param_len, bb_ctx_now(ctx), err);
  if (rc) {
    bb_tensor_release(*out);
    bb_val_release(*meta);
    *out = NULL;
    *meta = NULL;
  }
  return rc;
}

/* The clip the open round's updates are held to: the fixed dp_clip, or where adaptive
 * clipping has moved it (kept by the rounds engine, so a snapshot keeps it too). */
static double current_clip(const round_agg *a) { return a->fr ? bbi_fedround_max_norm(a->fr) : a->dp_clip; }

/* The count the round's updates are divided by: the m that arrived, or under sampling
 * the expected q × N, which says nothing about who took part. */
static double dp_denominator(const round_agg *a, uint32_t contributors) {
  return a->sampling.rate < 1 ? a->sampling.rate * (double)a->sampling.clients : (double)contributors;
}

/* Adaptive clipping's count noise: dp_count_noise, or max(n / 20, z) — Andrew et al.'s
 * n / 20, but never so small that the count takes more than a quarter of the budget. */
static double count_noise(const round_agg *a, double n) {
  if (a->adaptive.count_noise > 0) return a->adaptive.count_noise;
  return fmax(n / 20, a->dp_noise);
}

/* The multiplier the sum's noise is drawn with: dp_noise, or under adaptive clipping the
 * larger one that leaves room for the count's noise (bb_dp_adaptive_noise_multiplier), so
 * the pair spends what dp_noise alone would and the accountant's ε stays that of dp_noise. */
static int update_multiplier(const round_agg *a, double n, double *z, bb_error *err) {
  *z = a->dp_noise;
  if (a->adaptive.quantile == 0 || a->dp_noise == 0) return 0;
  return bb_dp_adaptive_noise_multiplier(a->dp_noise, count_noise(a, n), z, err);
}

/* After a round that spent privacy: the clip moves towards the quantile, from the noised
 * count of the `within` of `contributors` updates that were within it. Held to
 * [1e-30, 1e30] so that no run of rounds makes it 0 (no bound) or infinite. */
static int move_clip(round_agg *a, uint32_t within, uint32_t contributors, bb_error *err) {
  if (a->adaptive.quantile == 0 || !a->fr) return 0;
  const double n = dp_denominator(a, contributors);
  bb_dp_adaptive_clip st = {.struct_size = sizeof st,
                            .clip = current_clip(a),
                            .target_quantile = a->adaptive.quantile,
                            .learning_rate = a->adaptive.rate,
                            .count_stddev = count_noise(a, n),
                            .expected_clients = a->sampling.rate < 1 ? n : 0};
  int rc = bb_dp_adaptive_clip_update(&st, within, contributors, NULL, NULL, err);
  if (rc) return rc;
  return bbi_fedround_set_max_norm(a->fr, fmin(1e30, fmax(1e-30, st.clip)), err);
}

/* DP-FedAvg on a round's result `params`, the mean of `contributors` clipped updates from
 * `ref` (NULL: zeros): under sampling the mean re-divided by q × N; the noise of the sum,
 * z × clip, divided as the sum is. Drawn by the privacy layer from the system CSPRNG as
 * an exact discrete Gaussian; fedavg.dp_rounds counts the rounds that spent privacy, the
 * steps the accountant composes (bb_dp_epsilon). */
static int privatize_mean(round_agg *a, bb_ctx *ctx, float *params, const float *ref, uint32_t contributors,
                          uint32_t within, bb_error *err) {
  const double clip = current_clip(a), n = dp_denominator(a, contributors);
  if (a->sampling.rate < 1) {
    const double scale = contributors / n;
    for (size_t j = 0; j < a->cfg.param_len; j++) {
      const double r = ref ? (double)ref[j] : 0.0;
      params[j] = (float)(r + scale * ((double)params[j] - r));
    }
  }
  double z;
  int rc = update_multiplier(a, n, &z, err);
  if (!rc && z > 0 && n > 0) rc = bb_dp_add_gaussian(params, a->cfg.param_len, z * clip / n, 0, NULL, err);
  if (!rc) rc = move_clip(a, within, contributors, err);
  if (rc) return rc;
  count(a, ctx, "dp_rounds", 1);
  return 0;
}

static int privatize(round_agg *a, bb_ctx *ctx, bbi_fedround_result *r, bb_error *err) {
  if (a->dp_clip <= 0) return 0;
  return privatize_mean(a, ctx, r->params, a->global, r->contributors, r->contributors - r->norm_clipped, err);
}

/* Under sampling a round that no sampled client answered is the mechanism on an empty
 * sum: the last global model plus the noise, given out like any other round (giving out
 * the model unchanged would tell that nobody took part). */
static int privatize_abandoned(round_agg *a, bb_ctx *ctx, bb_tensor **params, bb_val **meta, bb_error *err) {
  float *noised = bbi_mem_alloc(a->alloc, a->cfg.param_len * sizeof *noised);
  if (!noised) return bb_error_set(err, BB_ERR_NOMEM, "%s: out of memory", a->type);
  memcpy(noised, a->global, a->cfg.param_len * sizeof *noised);
  int rc = privatize_mean(a, ctx, noised, a->global, 0, 0, err);
  if (!rc) rc = give(a, ctx, noised, NULL, params, meta, err);
  bbi_mem_free(a->alloc, noised);
  return rc;
}

/* Under secure=1: the open round's unmasked result enters the rounds engine as its one
 * contribution (1: go on and close the round); a round that ended without a sum gives the
 * last model out again with the next round's id (0). */
static int take_secure(round_agg *a, bb_ctx *ctx, bb_tensor **params, bb_val **meta, bb_error *err) {
  float *result = bbi_mem_alloc(a->alloc, a->cfg.param_len * sizeof(float));
  if (!result) return bb_error_set(err, BB_ERR_NOMEM, "FedAvg: out of memory");
  bool abandoned = false;
  int rc = 0;
  const uint64_t round = bbi_fedround_round_id(a->fr);
  if (bbi_secure_take(a->sec, result, a->cfg.param_len, &abandoned) == 1) {
    static const uint8_t KEY[] = {'s', 'e', 'c', 'a', 'g', 'g'};
    rc = bbi_fedround_contribute(a->fr, round, KEY, sizeof KEY, result, 1, bb_ctx_now(ctx), NULL, err);
    if (!rc && a->secure_cfg.dp_clip > 0) count(a, ctx, "dp_rounds", 1);
    rc = rc ? rc : 1;
  } else if (abandoned && a->global) {
    count(a, ctx, "rounds_abandoned", 1);
    rc = bbi_fedround_follow(a->fr, round + 1, bb_ctx_now(ctx), err);
    if (!rc) rc = give(a, ctx, a->global, NULL, params, meta, err);
  }
  bbi_mem_free(a->alloc, result);
  return rc;
}

static int round_agg_aggregate(void *self, bb_ctx *ctx, bb_tensor **params, bb_val **meta, bb_error *err) {
  round_agg *a = self;
  int rc;
  if (!a->started && a->init_slot[0]) { /* round 0's global model is the init slot's */
    bb_val *p = NULL;
    if ((rc = bbi_intake_init_params(ctx, a->type, a->init_slot, &p, err))) return rc;
    rc = ensure_rounds(a, ctx, (size_t)bb_val_as_tensor(p)->numel, err);
    if (!rc) rc = give(a, ctx, bb_tensor_data(bb_val_as_tensor(p)), NULL, params, meta, err);
    if (!rc) a->started = true;
    bb_val_release(p);
    return rc;
  }
  a->started = true;
  if (!a->fr) return 0;
  if (a->sec && (rc = take_secure(a, ctx, params, meta, err)) != 1) return rc;
  bbi_fedround_result r;
  if ((rc = bbi_fedround_poll(a->fr, bb_ctx_now(ctx), a->global, &r, err))) return rc;
  if (r.event == BBI_FEDROUND_OVERDUE) count(a, ctx, "rounds_overdue", 1);
  if (r.event == BBI_FEDROUND_ABANDONED) {
    count(a, ctx, "rounds_abandoned", 1);
    if (a->global && a->sampling.rate < 1) return privatize_abandoned(a, ctx, params, meta, err);
    return a->global && !a->follow ? give(a, ctx, a->global, NULL, params, meta, err) : 0;
  }
  if (r.event != BBI_FEDROUND_CLOSED) return 0;
  count(a, ctx, "rounds_closed", 1);
  bbi_intake_count_closing(ctx, a->counter, &r);
  rc = privatize(a, ctx, &r, err);
  if (!rc) rc = give(a, ctx, r.params, &r, params, meta, err);
  bb_buffer_free(a->alloc, r.params);
  return rc;
}

static const bb_aggregator_ops ROUND_AGG_OPS = {round_agg_contribute, round_agg_aggregate};

static int round_agg_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_aggregator_dispatch(&ROUND_AGG_OPS, self, ctx, call, err);
}

/* ---- saved state --------------------------------------------------------------------------- */

/* u8 started, u64 n then n floats of the last global model (0: none), then the rounds'
 * own snapshot (nothing before the first vector). */
static int round_agg_save(const void *self, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  const round_agg *a = self;
  size_t g = a->global ? a->cfg.param_len : 0, n = a->fr ? bbi_fedround_snapshot_size(a->fr) : 0;
  size_t total = 9 + g * sizeof(float) + n;
  uint8_t *buf = bbi_mem_alloc(alloc, total);
  if (!buf) return bb_error_set(err, BB_ERR_NOMEM, "%s: out of memory", a->type);
  bb_le_writer w = bb_le_writer_fixed(buf, total);
  bb_le_write_u8(&w, a->started);
  bb_le_write_u64(&w, g);
  for (size_t i = 0; i < g; i++) bb_le_write_f32(&w, a->global[i]);
  int rc = a->fr ? bbi_fedround_snapshot(a->fr, buf + w.len, n, NULL, err) : 0;
  if (rc) {
    bbi_mem_free(alloc, buf);
    return rc;
  }
  *out = buf;
  *len = total;
  return 0;
}

static int round_agg_load(void *self, const uint8_t *data, size_t len, bb_error *err) {
  round_agg *a = self;
  if (len < 9 || data[0] > 1) return bb_error_set(err, BB_ERR_MALFORMED, "%s: saved state is malformed", a->type);
  uint64_t g = bb_le_get_u64(data + 1);
  if (g > (len - 9) / sizeof(float) || (g && len - 9 == g * sizeof(float)))
    return bb_error_set(err, BB_ERR_MALFORMED, "%s: saved global model does not fit the state", a->type);
  size_t rest = len - 9 - (size_t)g * sizeof(float);
  bbi_fedround *fr = NULL;
  if (rest) {
    int rc = bbi_fedround_restore(a->alloc, data + 9 + g * sizeof(float), rest, &fr, err);
    if (rc) return rc;
  }
  if (g && (!fr || g != bbi_fedround_param_len(fr))) {
    bbi_fedround_free(fr);
    return bb_error_set(err, BB_ERR_MALFORMED, "%s: saved global model and rounds disagree", a->type);
  }
  float *global = NULL;
  if (g && !(global = bbi_mem_calloc(a->alloc, (size_t)g, sizeof(float)))) {
    bbi_fedround_free(fr);
    return bb_error_set(err, BB_ERR_NOMEM, "%s: out of memory", a->type);
  }
  for (size_t i = 0; i < g; i++) global[i] = bb_le_get_f32(data + 9 + 4 * i);
  bbi_fedround_free(a->fr);
  bbi_mem_free(a->alloc, a->global);
  a->fr = fr;
  a->global = global;
  a->started = data[0];
  if (fr) a->cfg.param_len = bbi_fedround_param_len(fr);
  /* a restored secure server takes joins for its open round again (its SecAgg+ round, if
     one ran, is lost: its clients abort at their deadline) */
  if (a->sec && fr && global) return bbi_secure_open(a->sec, bbi_fedround_round_id(fr), global, a->cfg.param_len, 0, err);
  return 0;
}

/* ---- SecAgg+'s messages and deadlines (secure=1) ------------------------------------------- */

static int fedavg_on_message(void *self, bb_ctx *ctx, const char *op, const bb_peer_id *from, const uint8_t *payload,
                             size_t len, bb_error *err) {
  round_agg *a = self;
  if (a->sec && (strncmp(op, "SecAgg", 6) == 0 || strcmp(op, BB_SIGNED_OP) == 0)) return bbi_secure_message(a->sec, ctx, op, from, payload, len, err);
  return bbi_refusal_notice_receive(ctx, op, from, payload, len, err);
}

static int fedavg_on_timer(void *self, bb_ctx *ctx, uint64_t token, bb_error *err) {
  (void)token;
  round_agg *a = self;
  return a->sec ? bbi_secure_timer(a->sec, ctx, err) : 0;
}

static const bb_component_port AGG_STORAGE[] = {{"element", BB_TYPE_TENSOR_F32}};

/* Neither declares a dependency: their one reach, the optional init=<slot>, is named by
 * the config (bbi_intake_init_params). */
const bb_component_type BBI_FEDAVG = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "FedAvg",
    .roles = 1u << BB_ROLE_AGGREGATOR,
    .storage = AGG_STORAGE,
    .n_storage = 1,
    .create = fedavg_create,
    .destroy = round_agg_destroy,
    .invoke = round_agg_invoke,
    .on_message = fedavg_on_message,
    .on_timer = fedavg_on_timer,
    .save = round_agg_save,
    .load = round_agg_load,
};

const bb_component_type BBI_ROBUST_AVG = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "RobustAvg",
    .roles = 1u << BB_ROLE_AGGREGATOR,
    .storage = AGG_STORAGE,
    .n_storage = 1,
    .create = robust_create,
    .destroy = round_agg_destroy,
    .invoke = round_agg_invoke,
    .on_message = bbi_refusal_notice_receive_for,
    .save = round_agg_save,
    .load = round_agg_load,
};
