/* FedAvg and RobustAvg: the Aggregator concretes that aggregate in rounds. Both are one
 * adapter over the rounds engine (src/components/aggregators/rounds.h); they differ in
 * how a round closes.
 *
 * FedAvg — the weighted mean of the round's updates.
 *   Config: quorum=1,target=0,deadline_ms=0,no_quorum=extend|abandon,late=drop|count,
 *           max_staleness=1,init=<slot>,members=addressed|any,max_norm=0,norm_factor=2,
 *           beyond_norm=clip|drop,drop_factor=3,weighting=samples|uniform,max_samples=0,
 *           samples_factor=1,center_clip=0
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
 *     open (U64); otherwise nothing, and nothing downstream runs. With init=<slot>, the
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
 * round's broadcast or sample. Anyone else is refused and counted
 * (<type>.refused_non_member): an id that was never asked cannot vote. On a node that
 * checks join tokens a contributor must also hold a valid token for the client role
 * (refused as <type>.refused_unadmitted or <type>.refused_role otherwise): a server's or
 * a watcher's token never makes its holder a member.
 *
 * Every refused contribution is refused alone — the round goes on with the others — and
 * counted by its reason (<type>.refused_<reason>: type, metadata, length, nonfinite,
 * samples, future, full, key, besides the membership ones above). */
#include <stdio.h>
#include <string.h>

#include "bb/roles.h"
#include "components/admitted.h"
#include "components/aggregators/refusal_notice.h"
#include "components/aggregators/rounds.h"
#include "components/shipped.h"
#include "bb/bytes.h"
#include "bb/common.h"
#include "util/mem.h"

typedef struct round_agg {
  const bb_allocator *alloc;
  const char *type;    /* "FedAvg" or "RobustAvg", for messages */
  const char *counter; /* "fedavg" or "robustavg": the prefix of its node counters */
  bbi_fedround_config cfg;
  bbi_fedround *fr;
  char init_slot[64];
  bool members_only;
  bool follow;         /* rounds=follow: a tier below another aggregator */
  uint64_t max_ahead;  /* follow: how far ahead a contribution may move the open round */
  bool started;
  float *global; /* the last global model given out (cfg.param_len floats), or NULL */
} round_agg;

static void count(const round_agg *a, bb_ctx *ctx, const char *what, uint64_t n) {
  char name[64];
  snprintf(name, sizeof name, "%s.%s", a->counter, what);
  if (n) bb_ctx_count(ctx, name, n);
}

/* ---- config ---------------------------------------------------------------------------- */

/* The keys both types read (each lists them in its KEYS): rounds, the init model,
 * membership and the distance bound. */
static int parse_rounds(round_agg *a, const char *c, bb_error *err) {
  uint64_t quorum, target, deadline_ms, staleness;
  float max_norm, norm_factor, drop_factor;
  char no_quorum[16], late[16], members[16], beyond[16], rounds[16];
  int rc;
  if ((rc = bb_config_u64(c, "quorum", 1, &quorum, err)) || (rc = bb_config_u64(c, "target", 0, &target, err)) ||
      (rc = bb_config_u64(c, "deadline_ms", 0, &deadline_ms, err)) ||
      (rc = bb_config_u64(c, "max_staleness", 1, &staleness, err)) ||
      (rc = bb_config_str(c, "no_quorum", "extend", no_quorum, sizeof no_quorum, err)) ||
      (rc = bb_config_str(c, "late", "drop", late, sizeof late, err)) ||
      (rc = bb_config_str(c, "init", "", a->init_slot, sizeof a->init_slot, err)) ||
      (rc = bb_config_str(c, "members", "addressed", members, sizeof members, err)) ||
      (rc = bb_config_f32(c, "max_norm", 0, &max_norm, err)) ||
      (rc = bb_config_f32(c, "norm_factor", 2, &norm_factor, err)) ||
      (rc = bb_config_str(c, "beyond_norm", "clip", beyond, sizeof beyond, err)) ||
      (rc = bb_config_f32(c, "drop_factor", 3, &drop_factor, err)) ||
      (rc = bb_config_str(c, "rounds", "own", rounds, sizeof rounds, err)) ||
      (rc = bb_config_u64(c, "max_ahead", 8, &a->max_ahead, err)))
    return rc;
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
  bool drop = strcmp(beyond, "drop") == 0;
  if (!drop && strcmp(beyond, "clip") != 0)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: beyond_norm=`%s` is not drop|clip", a->type, beyond);
  a->cfg.beyond_bound = drop ? BBI_FEDROUND_DROP : BBI_FEDROUND_CLIP;
  a->members_only = strcmp(members, "addressed") == 0;
  if (!a->members_only && strcmp(members, "any") != 0)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: members=`%s` is not addressed|any", a->type, members);
  if (!(max_norm >= 0 && max_norm <= 3e38f) || !(norm_factor >= 0 && norm_factor <= 3e38f) ||
      !(drop_factor >= 0 && drop_factor <= 3e38f))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "%s: max_norm, norm_factor and drop_factor are finite numbers >= 0 (0: off)", a->type);
  a->cfg.quorum = (uint32_t)quorum;
  a->cfg.target = (uint32_t)target;
  a->cfg.deadline_ns = deadline_ms * 1000000u;
  a->cfg.on_no_quorum = abandon ? BBI_FEDROUND_ABANDON : BBI_FEDROUND_EXTEND;
  a->cfg.late = late_count ? BBI_FEDROUND_LATE_COUNT : BBI_FEDROUND_LATE_DROP;
  a->cfg.max_staleness = staleness;
  a->cfg.max_norm = max_norm;
  a->cfg.norm_factor = norm_factor;
  a->cfg.drop_factor = drop_factor;
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

static int fedavg_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const KEYS[] = {"quorum",      "target",      "deadline_ms",    "no_quorum",   "late",
                                     "max_staleness", "init",      "members",        "max_norm",    "norm_factor",
                                     "beyond_norm", "drop_factor", "weighting",      "max_samples", "samples_factor",
                                     "center_clip", "rounds",      "max_ahead",      NULL};
  const char *c = init->config;
  round_agg a = {.type = "FedAvg", .counter = "fedavg"};
  char weighting[16];
  float samples_factor, center_clip;
  int rc;
  if ((rc = bb_config_check(c, KEYS, err)) || (rc = parse_rounds(&a, c, err)) ||
      (rc = bb_config_str(c, "weighting", "samples", weighting, sizeof weighting, err)) ||
      (rc = bb_config_u64(c, "max_samples", 0, &a.cfg.max_samples, err)) ||
      (rc = bb_config_f32(c, "samples_factor", 1, &samples_factor, err)) ||
      (rc = bb_config_f32(c, "center_clip", 0, &center_clip, err)))
    return rc;
  bool uniform = strcmp(weighting, "uniform") == 0;
  if (!uniform && strcmp(weighting, "samples") != 0)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "FedAvg: weighting=`%s` is not samples|uniform", weighting);
  if (!(samples_factor >= 0 && samples_factor <= 3e38f) || !(center_clip >= 0 && center_clip <= 3e38f))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "FedAvg: samples_factor and center_clip are finite numbers >= 0 (0: off)");
  a.cfg.method = BBI_FEDROUND_MEAN;
  a.cfg.weighting = uniform ? BBI_FEDROUND_UNIFORM : BBI_FEDROUND_BY_SAMPLES;
  a.cfg.samples_factor = samples_factor;
  a.cfg.center_clip = center_clip;
  return made(init, &a, self, err);
}

static int robust_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const KEYS[] = {"quorum",      "target",      "deadline_ms", "no_quorum", "late",
                                     "max_staleness", "init",      "members",     "max_norm",  "norm_factor",
                                     "beyond_norm", "drop_factor", "method",      "trim",      "byzantine",
                                     "select",      "rounds",      "max_ahead",   NULL};
  static const char *const METHODS[] = {"median", "trimmed", "krum", "multikrum"};
  static const bbi_fedround_method METHOD_OF[] = {BBI_FEDROUND_MEDIAN, BBI_FEDROUND_TRIMMED, BBI_FEDROUND_KRUM,
                                                 BBI_FEDROUND_MULTI_KRUM};
  const char *c = init->config;
  round_agg a = {.type = "RobustAvg", .counter = "robustavg"};
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

/* A member of round `round`: this node, or a peer it sent data to since that round could
 * first be prompted (before the rounds start: ever). */
static bool member(const round_agg *a, bb_ctx *ctx, const bb_peer_id *from, uint64_t round) {
  if (!a->members_only || bb_peer_id_equal(from, bb_ctx_self(ctx))) return true;
  return bb_ctx_addressed_since(ctx, from, a->fr ? bbi_fedround_window_start(a->fr, round) : 0);
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

/* The sample count and round a contribution's metadata gives (see the header). */
static int read_meta(const round_agg *a, const bb_val *meta, uint64_t *samples, uint64_t *round, bb_error *err) {
  if (!meta) return 0;
  if (bb_val_is_u64(meta)) {
    *samples = bb_val_as_u64(meta);
    return 0;
  }
  if (bb_val_kind_of(meta) == BB_VAL_COMPOSITE && bb_val_count(meta) == 2 && bb_val_is_u64(bb_val_child(meta, 0)) &&
      bb_val_is_u64(bb_val_child(meta, 1))) {
    *samples = bb_val_as_u64(bb_val_child(meta, 0));
    *round = bb_val_as_u64(bb_val_child(meta, 1));
    return 0;
  }
  return bb_error_set(err, BB_ERR_TYPE, "%s: metadata is a sample count or [samples, round], got %s", a->type,
                      bb_val_kind_name((int)bb_val_kind_of(meta)));
}

static int contribute(void *self, bb_ctx *ctx, const bb_peer_id *from, const bb_tensor *update, const bb_val *meta,
                      bb_error *err) {
  round_agg *a = self;
  if (update->dtype != BB_DTYPE_FLOAT || !update->numel) {
    count(a, ctx, "refused_type", 1);
    return bb_error_set(err, BB_ERR_TYPE, "%s: an update is a non-empty float32 tensor", a->type);
  }
  uint64_t samples = 1, round = a->fr ? bbi_fedround_round_id(a->fr) : 0;
  int rc = read_meta(a, meta, &samples, &round, err);
  if (rc) {
    count(a, ctx, "refused_metadata", 1);
    return rc;
  }
  const char *refusal;
  if ((rc = bbi_contributor_admitted(ctx, a->type, from, &refusal, err))) {
    count(a, ctx, refusal, 1);
    return rc;
  }
  if (!member(a, ctx, from, round)) {
    count(a, ctx, "refused_non_member", 1);
    char who[128];
    bb_peer_id_to_text(from, who, sizeof who);
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "%s: peer %s is not a member of round %llu (this node sent it nothing since the round opened)",
                        a->type, who, (unsigned long long)round);
  }
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
  bbi_fedround_status status = BBI_FEDROUND_ACCEPTED;
  rc = bbi_fedround_contribute(a->fr, round, from->bytes, from->len, bb_tensor_data(update), samples, bb_ctx_now(ctx),
                              &status, err);
  if (status == BBI_FEDROUND_LATE_DROPPED) count(a, ctx, "late_dropped", 1);
  if (status == BBI_FEDROUND_REPLACED) count(a, ctx, "replaced", 1);
  if (rc && refusal_of(status)) count(a, ctx, refusal_of(status), 1);
  return rc;
}

/* A refused contribution is refused alone, and its contributor is told why. */
static int round_agg_contribute(void *self, bb_ctx *ctx, const bb_peer_id *from, const bb_tensor *update,
                                const bb_val *meta, bb_error *err) {
  int rc = contribute(self, ctx, from, update, meta, err);
  if (rc && rc != BB_ERR_NOMEM) bbi_refusal_notice_send(ctx, from, err->message);
  return rc;
}

/* ---- Aggregate --------------------------------------------------------------------------- */

static bb_tensor *vector_of(bb_ctx *ctx, const float *data, size_t n) {
  int64_t dim = (int64_t)n;
  bb_tensor *t = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 1, &dim);
  if (t) memcpy(bb_tensor_data(t), data, n * sizeof(float));
  return t;
}

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
  *out = vector_of(ctx, params, a->cfg.param_len);
  *meta = a->follow && closed ? report_meta(ctx, closed)
                              : bb_val_u64(bb_ctx_allocator(ctx), BB_VAL_U64, bbi_fedround_round_id(a->fr));
  int rc = *out && *meta ? remember(a, params, err) : bb_error_set(err, BB_ERR_NOMEM, "%s: out of memory", a->type);
  if (rc) {
    bb_tensor_release(*out);
    bb_val_release(*meta);
    *out = NULL;
    *meta = NULL;
  }
  return rc;
}

/* The compiler checks only dependencies at fixed slots, so the slot init= names is
 * checked here, when it is first used: bound, and a Model. */
static int check_init_slot(const round_agg *a, bb_ctx *ctx, bb_error *err) {
  const bb_component_type *type = NULL;
  if (!bb_ctx_dependency(ctx, a->init_slot, &type))
    return bb_error_set(err, BB_ERR_NOT_FOUND, "%s: init slot `%s` has no component on this node", a->type,
                        a->init_slot);
  if (!(type->roles & (1u << BB_ROLE_MODEL)))
    return bb_error_set(err, BB_ERR_TYPE, "%s: init slot `%s` holds a %s, not a Model", a->type, a->init_slot,
                        type->type_name);
  return 0;
}

static int round_agg_aggregate(void *self, bb_ctx *ctx, bb_tensor **params, bb_val **meta, bb_error *err) {
  round_agg *a = self;
  int rc;
  if (!a->started && a->init_slot[0]) { /* round 0's global model is the init slot's */
    bb_val *p = NULL;
    if ((rc = check_init_slot(a, ctx, err)) || (rc = bb_ctx_call(ctx, a->init_slot, "Params", NULL, 0, &p, 1, err)))
      return rc;
    if (!p || bb_val_kind_of(p) != BB_VAL_TENSOR) {
      bb_val_release(p);
      return bb_error_set(err, BB_ERR_TYPE, "%s: Params of slot `%s` is not a tensor", a->type, a->init_slot);
    }
    rc = ensure_rounds(a, ctx, (size_t)bb_val_as_tensor(p)->numel, err);
    if (!rc) rc = give(a, ctx, bb_tensor_data(bb_val_as_tensor(p)), NULL, params, meta, err);
    if (!rc) a->started = true;
    bb_val_release(p);
    return rc;
  }
  a->started = true;
  if (!a->fr) return 0;
  bbi_fedround_result r;
  if ((rc = bbi_fedround_poll(a->fr, bb_ctx_now(ctx), a->global, &r, err))) return rc;
  if (r.event == BBI_FEDROUND_OVERDUE) count(a, ctx, "rounds_overdue", 1);
  if (r.event == BBI_FEDROUND_ABANDONED) {
    count(a, ctx, "rounds_abandoned", 1);
    return a->global && !a->follow ? give(a, ctx, a->global, NULL, params, meta, err) : 0;
  }
  if (r.event != BBI_FEDROUND_CLOSED) return 0;
  count(a, ctx, "rounds_closed", 1);
  count(a, ctx, "norm_clipped", r.norm_clipped);
  count(a, ctx, "norm_dropped", r.norm_dropped);
  count(a, ctx, "samples_clipped", r.samples_clipped);
  count(a, ctx, "center_clipped", r.center_clipped);
  rc = give(a, ctx, r.params, &r, params, meta, err);
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
  return 0;
}

static const bb_component_port AGG_STORAGE[] = {{"element", BB_TYPE_TENSOR_F32}};

/* Neither declares a dependency: their one reach, the optional init=<slot>, is named by
 * the config (check_init_slot). */
const bb_component_type BBI_FEDAVG = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "FedAvg",
    .roles = 1u << BB_ROLE_AGGREGATOR,
    .storage = AGG_STORAGE,
    .n_storage = 1,
    .create = fedavg_create,
    .destroy = round_agg_destroy,
    .invoke = round_agg_invoke,
    .on_message = bbi_refusal_notice_receive_for,
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
