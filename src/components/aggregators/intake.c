#include "components/aggregators/intake.h"

#include <stdio.h>
#include <string.h>

#include "bb/roles.h"
#include "components/admitted.h"

void bbi_intake_count(bb_ctx *ctx, const char *counter, const char *what, uint64_t n) {
  char name[64];
  snprintf(name, sizeof name, "%s.%s", counter, what);
  if (n) bb_ctx_count(ctx, name, n);
}

int bbi_intake_parse_bounds(const char *c, const char *type, bbi_fedround_config *cfg,
                            char init_slot[BBI_INTAKE_SLOT_MAX], bool *members_only, bb_error *err) {
  float max_norm, norm_factor, drop_factor, ascent_screen;
  char members[16], beyond[16];
  int rc;
  if ((rc = bb_config_str(c, "init", "", init_slot, BBI_INTAKE_SLOT_MAX, err)) ||
      (rc = bb_config_str(c, "members", "addressed", members, sizeof members, err)) ||
      (rc = bb_config_f32(c, "max_norm", 0, &max_norm, err)) ||
      (rc = bb_config_f32(c, "norm_factor", 3, &norm_factor, err)) ||
      (rc = bb_config_str(c, "beyond_norm", "clip", beyond, sizeof beyond, err)) ||
      (rc = bb_config_f32(c, "drop_factor", 4, &drop_factor, err)) ||
      (rc = bb_config_f32(c, "ascent_screen", 0.1f, &ascent_screen, err)))
    return rc;
  bool drop = strcmp(beyond, "drop") == 0;
  if (!drop && strcmp(beyond, "clip") != 0)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: beyond_norm=`%s` is not drop|clip", type, beyond);
  *members_only = strcmp(members, "addressed") == 0;
  if (!*members_only && strcmp(members, "any") != 0)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: members=`%s` is not addressed|any", type, members);
  if (!(max_norm >= 0 && max_norm <= 3e38f) || !(norm_factor >= 0 && norm_factor <= 3e38f) ||
      !(drop_factor >= 0 && drop_factor <= 3e38f) || !(ascent_screen >= 0 && ascent_screen <= 3e38f))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "%s: max_norm, norm_factor, drop_factor and ascent_screen are finite numbers >= 0 (0: off)",
                        type);
  cfg->beyond_bound = drop ? BBI_FEDROUND_DROP : BBI_FEDROUND_CLIP;
  cfg->max_norm = max_norm;
  cfg->norm_factor = norm_factor;
  cfg->drop_factor = drop_factor;
  cfg->ascent_screen = ascent_screen;
  return 0;
}

int bbi_intake_parse_weighting(const char *c, const char *type, bbi_fedround_config *cfg, bb_error *err) {
  char weighting[16];
  float samples_factor;
  int rc;
  if ((rc = bb_config_str(c, "weighting", "samples", weighting, sizeof weighting, err)) ||
      (rc = bb_config_u64(c, "max_samples", 0, &cfg->max_samples, err)) ||
      (rc = bb_config_f32(c, "samples_factor", 1, &samples_factor, err)))
    return rc;
  bool uniform = strcmp(weighting, "uniform") == 0;
  if (!uniform && strcmp(weighting, "samples") != 0)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: weighting=`%s` is not samples|uniform", type, weighting);
  if (!(samples_factor >= 0 && samples_factor <= 3e38f))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: samples_factor is a finite number >= 0 (0: off)", type);
  cfg->weighting = uniform ? BBI_FEDROUND_UNIFORM : BBI_FEDROUND_BY_SAMPLES;
  cfg->samples_factor = samples_factor;
  return 0;
}

/* The sample count and round a contribution's metadata gives. */
static int read_meta(const char *type, const bb_val *meta, uint64_t *samples, uint64_t *round, bb_error *err) {
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
  return bb_error_set(err, BB_ERR_TYPE, "%s: metadata is a sample count or [samples, round], got %s", type,
                      bb_val_kind_name((int)bb_val_kind_of(meta)));
}

int bbi_intake_update(bb_ctx *ctx, const char *type, const char *counter, const bb_tensor *update,
                      const bb_val *meta, uint64_t *samples, uint64_t *round, bb_error *err) {
  if (update->dtype != BB_DTYPE_FLOAT || !update->numel) {
    bbi_intake_count(ctx, counter, "refused_type", 1);
    return bb_error_set(err, BB_ERR_TYPE, "%s: an update is a non-empty float32 tensor", type);
  }
  int rc = read_meta(type, meta, samples, round, err);
  if (rc) bbi_intake_count(ctx, counter, "refused_metadata", 1);
  return rc;
}

int bbi_intake_contributor(bb_ctx *ctx, const char *type, const char *counter, const bb_peer_id *from,
                           bool members_only, uint64_t round, uint64_t window_start, bb_error *err) {
  const char *refusal;
  int rc = bbi_contributor_admitted(ctx, type, from, &refusal, err);
  if (rc) {
    bbi_intake_count(ctx, counter, refusal, 1);
    return rc;
  }
  if (!members_only || bb_peer_id_equal(from, bb_ctx_self(ctx)) || bb_ctx_addressed_since(ctx, from, window_start))
    return 0;
  bbi_intake_count(ctx, counter, "refused_non_member", 1);
  char who[128];
  bb_peer_id_to_text(from, who, sizeof who);
  return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: peer %s is not a member of round %llu (this node %s)", type,
                      who, (unsigned long long)round,
                      window_start ? "sent it nothing since the round opened" : "never sent it anything");
}

void bbi_intake_count_closing(bb_ctx *ctx, const char *counter, const bbi_fedround_result *r) {
  bbi_intake_count(ctx, counter, "norm_clipped", r->norm_clipped);
  bbi_intake_count(ctx, counter, "norm_dropped", r->norm_dropped);
  bbi_intake_count(ctx, counter, "samples_clipped", r->samples_clipped);
  bbi_intake_count(ctx, counter, "center_clipped", r->center_clipped);
  bbi_intake_count(ctx, counter, "ascent_dropped", r->ascent_dropped);
  bbi_intake_count(ctx, counter, "ascent_weighed", r->ascent_weighed);
}

bb_tensor *bbi_intake_vector(bb_ctx *ctx, const float *data, size_t n) {
  int64_t dim = (int64_t)n;
  bb_tensor *t = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 1, &dim);
  if (t) memcpy(bb_tensor_data(t), data, n * sizeof(float));
  return t;
}

/* The compiler checks only dependencies at fixed slots, so a slot a config names is
 * checked here, when it is first used: bound, and a Model. */
int bbi_intake_init_params(bb_ctx *ctx, const char *type, const char *slot, bb_val **params, bb_error *err) {
  const bb_component_type *t = NULL;
  *params = NULL;
  if (!bb_ctx_dependency(ctx, slot, &t))
    return bb_error_set(err, BB_ERR_NOT_FOUND, "%s: init slot `%s` has no component on this node", type, slot);
  if (!(t->roles & (1u << BB_ROLE_MODEL)))
    return bb_error_set(err, BB_ERR_TYPE, "%s: init slot `%s` holds a %s, not a Model", type, slot, t->type_name);
  bb_val *p = NULL;
  int rc = bb_ctx_call(ctx, slot, "Params", NULL, 0, &p, 1, err);
  if (rc) return rc;
  if (!p || bb_val_kind_of(p) != BB_VAL_TENSOR) {
    bb_val_release(p);
    return bb_error_set(err, BB_ERR_TYPE, "%s: Params of slot `%s` is not a tensor", type, slot);
  }
  *params = p;
  return 0;
}
