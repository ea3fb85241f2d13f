/* GossipAvg: decentralised averaging. Each update a peer receives is mixed into its own
 * model at once, params := (1 - weight)·params + weight·update, through the Model at
 * slot `model`.
 *   Config: model=model,weight=0.5,members=view|any,view=view — the Model is its declared
 *   dependency, so `model` takes no other slot (the compiler checks only the declared
 *   one).
 * Aggregate gives the current parameters (so a graph can report or forward them).
 *
 * Who may contribute: with members=view (the default) a peer of the current view of the
 * PeerSelector at slot `view`, or this node itself; anyone else's update is refused and
 * counted (gossip.refused_non_member), and the model is left as it was. Views are partial
 * and one-sided, so this also turns away honest peers that sampled this one without
 * being in its view: their updates reach the peers whose views hold them. members=any
 * takes every sender. On a node that checks join tokens a sender must also hold a valid
 * token for the client role (gossip.refused_unadmitted, gossip.refused_role). */
#include <stdio.h>
#include <string.h>

#include "bb/roles.h"
#include "components/aggregators/admitted.h"
#include "components/shipped.h"
#include "bb/common.h"
#include "util/mem.h"

#define GOSSIP_AVG_MODEL "model"
static const bb_component_dep GOSSIP_AVG_DEPS[] = {{BB_ROLE_MODEL, GOSSIP_AVG_MODEL}};

typedef enum gossip_members { MEMBERS_VIEW, MEMBERS_ANY } gossip_members;

typedef struct gossip_avg {
  const bb_allocator *alloc;
  float weight;
  gossip_members members;
  char view[64];
} gossip_avg;

static int gossip_avg_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const KEYS[] = {"model", "weight", "members", "view", NULL};
  static const char *const MEMBERS[] = {"view", "any"};
  gossip_avg g = {init->alloc, 0.5f, MEMBERS_VIEW, ""};
  char model[64], members[16];
  int rc;
  if ((rc = bb_config_check(init->config, KEYS, err)) ||
      (rc = bb_config_str(init->config, "model", GOSSIP_AVG_MODEL, model, sizeof model, err)) ||
      (rc = bb_config_f32(init->config, "weight", 0.5f, &g.weight, err)) ||
      (rc = bb_config_str(init->config, "members", "view", members, sizeof members, err)) ||
      (rc = bb_config_str(init->config, "view", "view", g.view, sizeof g.view, err)))
    return rc;
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

static int gossip_avg_contribute(void *self, bb_ctx *ctx, const bb_peer_id *from, const bb_tensor *update,
                                 const bb_val *meta, bb_error *err) {
  (void)meta;
  gossip_avg *g = self;
  const char *refusal;
  int rc = bbi_contributor_admitted(ctx, "GossipAvg", from, &refusal, err);
  if (rc) {
    char name[64];
    snprintf(name, sizeof name, "gossip.%s", refusal);
    bb_ctx_count(ctx, name, 1);
    return rc;
  }
  bool member;
  rc = is_member(g, ctx, from, &member, err);
  if (rc) return rc;
  if (!member) {
    bb_ctx_count(ctx, "gossip.refused_non_member", 1);
    char who[128];
    bb_peer_id_to_text(from, who, sizeof who);
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "GossipAvg: peer %s is not in the current view of slot `%s`",
                        who, g->view);
  }
  bb_val *own = NULL;
  rc = bb_ctx_call(ctx, GOSSIP_AVG_MODEL, "Params", NULL, 0, &own, 1, err);
  if (rc) return rc;
  if (!own || bb_val_kind_of(own) != BB_VAL_TENSOR || bb_val_as_tensor(own)->numel != update->numel || update->dtype != BB_DTYPE_FLOAT) {
    bb_val_release(own);
    return bb_error_set(err, BB_ERR_TYPE, "GossipAvg: the update does not match the model's %lld parameters",
                        own && bb_val_kind_of(own) == BB_VAL_TENSOR ? (long long)bb_val_as_tensor(own)->numel : -1LL);
  }
  int64_t dim = update->numel;
  bb_tensor *mixed = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 1, &dim);
  if (mixed) memcpy(bb_tensor_data(mixed), bb_tensor_data(bb_val_as_tensor(own)), (size_t)dim * sizeof(float));
  bb_val_release(own);
  if (!mixed) return bb_error_set(err, BB_ERR_NOMEM, "GossipAvg: out of memory");
  float *m = bb_tensor_data(mixed);
  const float *u = bb_tensor_data(update);
  for (int64_t i = 0; i < update->numel; i++) {
    if (u[i] != u[i] || u[i] - u[i] != 0) {
      bb_tensor_release(mixed);
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "GossipAvg: value %lld of the update is not finite",
                          (long long)i);
    }
    m[i] = (1 - g->weight) * m[i] + g->weight * u[i];
  }
  bb_val *v = bb_val_tensor(bb_ctx_allocator(ctx), mixed);
  bb_tensor_release(mixed);
  if (!v) return bb_error_set(err, BB_ERR_NOMEM, "GossipAvg: out of memory");
  bb_val *ack = NULL;
  rc = bb_ctx_call(ctx, GOSSIP_AVG_MODEL, "LoadParameters", &v, 1, &ack, 1, err);
  bb_val_release(v);
  bb_val_release(ack);
  if (!rc) bb_ctx_count(ctx, "gossip.merged", 1);
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
};
