/* GossipAvg: decentralised averaging. Each update a peer receives is mixed into its own
 * model at once, params := (1 - weight)·params + weight·update, through the Model at
 * slot `model`.
 *   Config: model=model,weight=0.5,members=view|any,view=view,norm_factor=2,max_norm=0,
 *   beyond_norm=clip|drop,drop_factor=3 — the Model is its declared dependency, so
 *   `model` takes no other slot (the compiler checks only the declared one).
 * Aggregate gives the current parameters (so a graph can report or forward them).
 *
 * The distance bound: an update farther from this node's model than norm_factor × the
 * median distance of the last 16 updates it mixed in (before it has mixed any: the norm
 * of its own parameters, which is about how far an independently started model is) is
 * pulled back onto that bound (gossip.norm_clipped), or left out with beyond_norm=drop or
 * when farther than drop_factor × that median (gossip.norm_dropped); max_norm is a fixed
 * bound besides. norm_factor=0 turns the median's bounds off, drop_factor's with it. A model at zeros with nothing mixed in yet has no yardstick: it takes
 * what comes, until the history has one. The history is not saved with a snapshot.
 *
 * Who may contribute: with members=view (the default) a peer of the current view of the
 * PeerSelector at slot `view`, or this node itself; anyone else's update is refused and
 * counted (gossip.refused_non_member), and the model is left as it was. Views are partial
 * and one-sided, so this also turns away honest peers that sampled this one without
 * being in its view: their updates reach the peers whose views hold them. members=any
 * takes every sender. On a node that checks join tokens a sender must also hold a valid
 * token for the client role (gossip.refused_unadmitted, gossip.refused_role).
 *
 * A refused sender is told why (refusal_notice.h), at most once a second per peer and 16
 * times a second in all; one refused only for being outside the view is not. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/roles.h"
#include "components/admitted.h"
#include "components/aggregators/refusal_notice.h"
#include "components/shipped.h"
#include "tensor/kernels/kernels.h"
#include "bb/common.h"
#include "util/mem.h"

#define GOSSIP_AVG_MODEL "model"
static const bb_component_dep GOSSIP_AVG_DEPS[] = {{BB_ROLE_MODEL, GOSSIP_AVG_MODEL}};

typedef enum gossip_members { MEMBERS_VIEW, MEMBERS_ANY } gossip_members;

/* Distances of the updates mixed in that the bound's median reads. */
#define GOSSIP_AVG_HISTORY 16

typedef struct gossip_avg {
  const bb_allocator *alloc;
  float weight;
  gossip_members members;
  char view[64];
  float norm_factor, max_norm, drop_factor;
  bool drop_beyond; /* beyond_norm=drop */
  double history[GOSSIP_AVG_HISTORY]; /* a ring of the distances mixed in */
  size_t n_history, next_history;
  bbi_refusal_limit told; /* the refusal notices sent */
} gossip_avg;

static int gossip_avg_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const KEYS[] = {"model",    "weight",      "members",     "view", "norm_factor",
                                     "max_norm", "beyond_norm", "drop_factor", NULL};
  static const char *const MEMBERS[] = {"view", "any"};
  gossip_avg g = {.alloc = init->alloc};
  const char *c = init->config;
  char model[64], members[16], beyond[16];
  int rc;
  if ((rc = bb_config_check(c, KEYS, err)) || (rc = bb_config_str(c, "model", GOSSIP_AVG_MODEL, model, sizeof model, err)) ||
      (rc = bb_config_f32(c, "weight", 0.5f, &g.weight, err)) ||
      (rc = bb_config_str(c, "members", "view", members, sizeof members, err)) ||
      (rc = bb_config_str(c, "view", "view", g.view, sizeof g.view, err)) ||
      (rc = bb_config_f32(c, "norm_factor", 2, &g.norm_factor, err)) ||
      (rc = bb_config_f32(c, "max_norm", 0, &g.max_norm, err)) ||
      (rc = bb_config_str(c, "beyond_norm", "clip", beyond, sizeof beyond, err)) ||
      (rc = bb_config_f32(c, "drop_factor", 3, &g.drop_factor, err)))
    return rc;
  g.drop_beyond = strcmp(beyond, "drop") == 0;
  if (!g.drop_beyond && strcmp(beyond, "clip") != 0)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "GossipAvg: beyond_norm=`%s` is not clip|drop", beyond);
  if (!(g.norm_factor >= 0 && g.norm_factor <= 3e38f) || !(g.max_norm >= 0 && g.max_norm <= 3e38f) ||
      !(g.drop_factor >= 0 && g.drop_factor <= 3e38f))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "GossipAvg: norm_factor, max_norm and drop_factor are finite numbers >= 0 (0: off)");
  if (strcmp(model, GOSSIP_AVG_MODEL) != 0)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "GossipAvg: model=`%s`: the Model must be at slot `" GOSSIP_AVG_MODEL
                        "`, its declared dependency",
                        model);
  if (!(g.weight > 0 && g.weight <= 1))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "GossipAvg: weight must be in (0, 1], got %g", (double)g.weight);
  size_t m = 0;
  while (m < 2 && strcmp(members, MEMBERS[m]) != 0) m++;
  if (m == 2) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "GossipAvg: members=`%s` is not view|any", members);
  g.members = (gossip_members)m;
  gossip_avg *p = bbi_mem_alloc(init->alloc, sizeof *p);
  if (!p) return bb_error_set(err, BB_ERR_NOMEM, "GossipAvg: out of memory");
  *p = g;
  *self = p;
  return 0;
}

static void gossip_avg_destroy(void *self) {
  gossip_avg *g = self;
  bbi_mem_free(g->alloc, g);
}

/* |a - b|, summed in double (3e38 everywhere cannot overflow it). */
static double distance(const float *a, const float *b, size_t n) {
  double sum = 0.0;
  for (size_t i = 0; i < n; i++) {
    const double d = (double)a[i] - (double)b[i];
    sum += d * d;
  }
  return sqrt(sum);
}

static int by_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* What distances are measured against: the median of the history, or before any update
 * was mixed in the norm of this node's own parameters. */
static double yardstick(const gossip_avg *g, const float *own, size_t n) {
  if (!g->n_history) {
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += (double)own[i] * (double)own[i];
    return sqrt(sum);
  }
  double sorted[GOSSIP_AVG_HISTORY];
  memcpy(sorted, g->history, g->n_history * sizeof *sorted);
  qsort(sorted, g->n_history, sizeof *sorted, by_double);
  const size_t h = g->n_history;
  return h % 2 ? sorted[h / 2] : (sorted[h / 2 - 1] + sorted[h / 2]) / 2.0;
}

/* Whether update u may be mixed into `own` (see the header), with *scale the share of its
 * way from own it keeps (1, or less when pulled back onto the bound) and *at the
 * distance it is mixed in at. */
static bool within_bound(const gossip_avg *g, const float *own, const float *u, size_t n, double *scale, double *at) {
  const double d = distance(u, own, n), middle = yardstick(g, own, n);
  double bound = g->max_norm > 0 ? g->max_norm : INFINITY;
  const bool measured = middle > 0; /* a model at zeros with no history has no yardstick */
  if (measured && g->norm_factor > 0 && g->norm_factor * middle < bound) bound = g->norm_factor * middle;
  const double far = measured && g->norm_factor > 0 && g->drop_factor > 0 ? g->drop_factor * middle : INFINITY;
  *scale = d > bound ? bound / d : 1.0;
  *at = d > bound ? bound : d;
  return !(d > far || (d > bound && g->drop_beyond));
}

/* Records the distance an update was mixed in at. */
static void remember_distance(gossip_avg *g, double at) {
  g->history[g->next_history] = at;
  g->next_history = (g->next_history + 1) % GOSSIP_AVG_HISTORY;
  if (g->n_history < GOSSIP_AVG_HISTORY) g->n_history++;
}

/* Whether `from` may mix its update into this node's model (see the header). */
static int is_member(const gossip_avg *g, bb_ctx *ctx, const bb_peer_id *from, bool *member, bb_error *err) {
  *member = g->members == MEMBERS_ANY || bb_peer_id_equal(from, bb_ctx_self(ctx));
  if (*member) return 0;
  bb_val *view = NULL;
  int rc = bb_ctx_call(ctx, g->view, "CurrentView", NULL, 0, &view, 1, err);
  if (rc) return rc;
  if (view && (bb_val_kind_of(view) == BB_VAL_PEERS || bb_val_kind_of(view) == BB_VAL_PEER))
    for (size_t i = 0; i < bb_val_count(view) && !*member; i++) *member = bb_peer_id_equal(&bb_val_as_peers(view)[i], from);
  bb_val_release(view);
  return 0;
}

/* 0 when `from` may mix its update in: admitted (see admitted.h) and a member; otherwise
 * the refusal, counted (*member false when it is not a member). */
static int check_sender(const gossip_avg *g, bb_ctx *ctx, const bb_peer_id *from, bool *member, bb_error *err) {
  const char *refusal;
  int rc = bbi_contributor_admitted(ctx, "GossipAvg", from, &refusal, err);
  if (rc) {
    char name[64];
    snprintf(name, sizeof name, "gossip.%s", refusal);
    bb_ctx_count(ctx, name, 1);
    return rc;
  }
  if ((rc = is_member(g, ctx, from, member, err)) || *member) return rc;
  bb_ctx_count(ctx, "gossip.refused_non_member", 1);
  char who[128];
  bb_peer_id_to_text(from, who, sizeof who);
  return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "GossipAvg: peer %s is not in the current view of slot `%s`", who,
                      g->view);
}

/* 0 when update can be mixed into `own` (the model's Params value): float32, as many
 * values, all finite; otherwise the refusal, counted. */
static int check_update(bb_ctx *ctx, const bb_val *own, const bb_tensor *update, bb_error *err) {
  if (!own || bb_val_kind_of(own) != BB_VAL_TENSOR || bb_val_as_tensor(own)->numel != update->numel ||
      update->dtype != BB_DTYPE_FLOAT) {
    bb_ctx_count(ctx, "gossip.refused_length", 1);
    const long long n = own && bb_val_kind_of(own) == BB_VAL_TENSOR ? (long long)bb_val_as_tensor(own)->numel : -1LL;
    return bb_error_set(err, BB_ERR_TYPE,
                        "GossipAvg: the update does not match the model's %lld parameters: it holds %lld %s values", n,
                        (long long)update->numel, update->dtype == BB_DTYPE_FLOAT ? "float32" : "non-float32");
  }
  const size_t bad = bbi_f32_first_nonfinite(bb_tensor_data(update), (size_t)update->numel);
  if (bad < (size_t)update->numel) {
    bb_ctx_count(ctx, "gossip.refused_nonfinite", 1);
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "GossipAvg: value %lld of the update is not finite",
                        (long long)bad);
  }
  return 0;
}

/* Loads own + share·(u - own) into the model, in double: a point between two finite
 * vectors. */
static int load_mixed(bb_ctx *ctx, const float *own, const float *u, int64_t n, double share, bb_error *err) {
  bb_tensor *mixed = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 1, &n);
  if (!mixed) return bb_error_set(err, BB_ERR_NOMEM, "GossipAvg: out of memory");
  float *m = bb_tensor_data(mixed);
  for (int64_t i = 0; i < n; i++) m[i] = (float)((double)own[i] + share * ((double)u[i] - (double)own[i]));
  bb_val *v = bb_val_tensor(bb_ctx_allocator(ctx), mixed);
  bb_tensor_release(mixed);
  if (!v) return bb_error_set(err, BB_ERR_NOMEM, "GossipAvg: out of memory");
  bb_val *ack = NULL;
  int rc = bb_ctx_call(ctx, GOSSIP_AVG_MODEL, "LoadParameters", &v, 1, &ack, 1, err);
  bb_val_release(v);
  bb_val_release(ack);
  return rc;
}

/* Mixes `from`'s update in, or refuses it; *tell says whether the sender is to hear why. */
static int contribute(gossip_avg *g, bb_ctx *ctx, const bb_peer_id *from, const bb_tensor *update, bool *tell,
                      bb_error *err) {
  bb_val *own = NULL;
  bool member = true;
  int rc = check_sender(g, ctx, from, &member, err);
  *tell = member;
  if (!rc) rc = bb_ctx_call(ctx, GOSSIP_AVG_MODEL, "Params", NULL, 0, &own, 1, err);
  if (!rc) rc = check_update(ctx, own, update, err);
  double scale = 1.0, at = 0.0;
  if (!rc) {
    const float *mine = bb_tensor_data(bb_val_as_tensor(own));
    if (!within_bound(g, mine, bb_tensor_data(update), (size_t)update->numel, &scale, &at)) {
      bb_ctx_count(ctx, "gossip.norm_dropped", 1);
      char who[128];
      bb_peer_id_to_text(from, who, sizeof who);
      rc = bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "GossipAvg: the update of peer %s is beyond the distance bound (left out)", who);
    } else {
      rc = load_mixed(ctx, mine, bb_tensor_data(update), update->numel, (double)g->weight * scale, err);
    }
  }
  bb_val_release(own);
  if (rc) return rc;
  remember_distance(g, at);
  if (scale < 1.0) bb_ctx_count(ctx, "gossip.norm_clipped", 1);
  bb_ctx_count(ctx, "gossip.merged", 1);
  return 0;
}

/* A refused update is refused alone, and its sender is told why, within the notices'
 * bounds (anyone may push updates at any rate) — unless it is only not in the view:
 * views are partial and one-sided, so honest peers are refused so all the time, and
 * their updates still reach the peers whose views hold them. */
static int gossip_avg_contribute(void *self, bb_ctx *ctx, const bb_peer_id *from, const bb_tensor *update,
                                 const bb_val *meta, bb_error *err) {
  (void)meta;
  gossip_avg *g = self;
  bool tell = true;
  int rc = contribute(g, ctx, from, update, &tell, err);
  if (rc && rc != BB_ERR_NOMEM && tell) bbi_refusal_notice_send_limited(&g->told, ctx, from, err->message);
  return rc;
}

static int gossip_avg_aggregate(void *self, bb_ctx *ctx, bb_tensor **params, bb_val **meta, bb_error *err) {
  (void)self;
  (void)meta;
  bb_val *own = NULL;
  int rc = bb_ctx_call(ctx, GOSSIP_AVG_MODEL, "Params", NULL, 0, &own, 1, err);
  if (!rc && own && bb_val_kind_of(own) == BB_VAL_TENSOR) *params = bb_tensor_retain(bb_val_as_tensor(own));
  bb_val_release(own);
  return rc;
}

static const bb_aggregator_ops GOSSIP_AVG_OPS = {gossip_avg_contribute, gossip_avg_aggregate};

static int gossip_avg_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_aggregator_dispatch(&GOSSIP_AVG_OPS, self, ctx, call, err);
}

static const bb_component_port GOSSIP_AVG_STORAGE[] = {{"element", BB_TYPE_TENSOR_F32}};

const bb_component_type BBI_GOSSIP_AVG = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "GossipAvg",
    .roles = 1u << BB_ROLE_AGGREGATOR,
    .deps = GOSSIP_AVG_DEPS,
    .n_deps = 1,
    .storage = GOSSIP_AVG_STORAGE,
    .n_storage = 1,
    .create = gossip_avg_create,
    .destroy = gossip_avg_destroy,
    .invoke = gossip_avg_invoke,
    .on_message = bbi_refusal_notice_receive_for,
};
