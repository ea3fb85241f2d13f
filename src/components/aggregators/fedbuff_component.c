/* FedBuff: the Aggregator concrete that aggregates asynchronously, with a buffer
 * (buffered.h says how a contribution is weighed and when the model steps).
 *
 *   Config: buffer=10,max_staleness=16,updates=params|deltas,init=<slot>,members=addressed|any,max_norm=0,
 *           norm_factor=3,beyond_norm=clip|drop,drop_factor=4,ascent_screen=0.1,
 *           weighting=samples|uniform,max_samples=0,samples_factor=1
 *
 *   Contribute(update, meta): as FedAvg's — update a float32 tensor, meta the sample
 *     count or [samples, version], or the bundle [update, samples, version] alone — where
 *     the round is the version of the global model the contributor trained from. Each
 *     arrival goes into the buffer weighed 1/sqrt(1 + staleness); staler than
 *     max_staleness versions it is refused (fedbuff.refused_stale). With updates=deltas an
 *     update is the step from that version (p - g_v, what a compressed update decodes to
 *     without a reference) instead of the trained parameters.
 *   Aggregate(trigger): steps the global model when the buffer holds `buffer`
 *     contributions or more (all that came since the last step), then gives the current
 *     global model and its version (U64) — every time, so a client that finished can be
 *     sent the current model at once; nothing before there is one. With init=<slot> the first Aggregate gives that Model's Params
 *     as version 0; without, version 0 is zeros and the first buffer's mean is the
 *     contributors' own parameters.
 *
 * Every refused contribution is refused alone and counted by its reason
 * (fedbuff.refused_<reason>: type, metadata, unadmitted, role, non_member, length,
 * nonfinite, samples, future, stale, key), and its contributor is told why. Membership
 * and join tokens are FedAvg's: with members=addressed only this node and the peers it
 * sent data to since the version the contribution names was made. Counted besides:
 * accepted, replaced, staleness (the sum over accepted ones), steps, and what closing a
 * buffer cut (norm_clipped, norm_dropped, samples_clipped, ascent_dropped,
 * ascent_weighed), as FedAvg counts them.
 *
 * Memory: (max_staleness + 1 + buffer) copies of the model. */
#include <string.h>

#include "bb/bytes.h"
#include "bb/roles.h"
#include "components/aggregators/buffered.h"
#include "components/aggregators/intake.h"
#include "components/aggregators/refusal_notice.h"
#include "components/shipped.h"
#include "util/mem.h"

#define TYPE "FedBuff"
#define COUNTER "fedbuff"

typedef struct fedbuff {
  const bb_allocator *alloc;
  bbi_fedbuff_config cfg;
  bbi_fedbuff *fb; /* NULL until the first model */
  char init_slot[BBI_INTAKE_SLOT_MAX];
  bool members_only;
  bool started;
  bbi_refusal_limit told; /* who was told why their contribution was refused, and when */
} fedbuff;

static int fedbuff_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const KEYS[] = {"buffer",      "max_staleness", "updates",       "init",          "members",
                                     "max_norm",    "norm_factor",   "beyond_norm",   "drop_factor",
                                     "ascent_screen", "weighting",   "max_samples",   "samples_factor", NULL};
  const char *c = init->config;
  fedbuff a;
  memset(&a, 0, sizeof a);
  uint64_t buffer;
  char updates[16];
  int rc;
  if ((rc = bb_config_check(c, KEYS, err)) || (rc = bb_config_u64(c, "buffer", 10, &buffer, err)) ||
      (rc = bb_config_str(c, "updates", "params", updates, sizeof updates, err)) ||
      (rc = bb_config_u64(c, "max_staleness", 16, &a.cfg.max_staleness, err)) ||
      (rc = bbi_intake_parse_bounds(c, TYPE, &a.cfg.closing, a.init_slot, &a.members_only, err)) ||
      (rc = bbi_intake_parse_weighting(c, TYPE, &a.cfg.closing, err)))
    return rc;
  if (!buffer || buffer > BBI_FEDROUND_MAX_ENTRIES || a.cfg.max_staleness > BBI_FEDBUFF_MAX_STALENESS)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, TYPE ": need 1 <= buffer <= %d and max_staleness <= %d, got `%s`",
                        BBI_FEDROUND_MAX_ENTRIES, BBI_FEDBUFF_MAX_STALENESS, c);
  a.cfg.deltas = strcmp(updates, "deltas") == 0;
  if (!a.cfg.deltas && strcmp(updates, "params") != 0)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, TYPE ": updates=`%s` is not params|deltas", updates);
  a.cfg.buffer = (uint32_t)buffer;
  a.cfg.closing.method = BBI_FEDROUND_MEAN;
  a.alloc = init->alloc;
  fedbuff *p = bbi_mem_alloc(init->alloc, sizeof *p);
  if (!p) return bb_error_set(err, BB_ERR_NOMEM, TYPE ": out of memory");
  *p = a;
  *self = p;
  return 0;
}

static void fedbuff_destroy(void *self) {
  fedbuff *a = self;
  bbi_fedbuff_free(a->fb);
  bbi_mem_free(a->alloc, a);
}

/* The buffer, with version 0 = initial (NULL: zeros). */
static int start(fedbuff *a, bb_ctx *ctx, const float *initial, size_t n, bb_error *err) {
  a->cfg.closing.param_len = n;
  return bbi_fedbuff_new(a->alloc, &a->cfg, initial, bb_ctx_now(ctx), &a->fb, err);
}

/* ---- Contribute -------------------------------------------------------------------------- */

static const char *refusal_of(bbi_fedbuff_status status) {
  static const char *const NAMES[] = {NULL, NULL, "refused_stale", "refused_future", "refused_length",
                                      "refused_nonfinite", "refused_samples", "refused_key", "refused_full"};
  return (size_t)status < sizeof NAMES / sizeof *NAMES ? NAMES[status] : NULL;
}

static int contribute(fedbuff *a, bb_ctx *ctx, const bb_peer_id *from, const bb_tensor *update, const bb_val *meta,
                      bb_error *err) {
  uint64_t samples = 1, version = a->fb ? bbi_fedbuff_version(a->fb) : 0;
  int rc = bbi_intake_update(ctx, TYPE, COUNTER, update, meta, &samples, &version, err);
  if (!rc)
    rc = bbi_intake_contributor(ctx, TYPE, COUNTER, from, a->members_only, version,
                                a->fb ? bbi_fedbuff_window_start(a->fb, version) : 0, err);
  if (rc) return rc;
  if (!a->fb && a->init_slot[0]) { /* version 0 is the init slot's, not given out yet */
    bbi_intake_count(ctx, COUNTER, "refused_future", 1);
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        TYPE ": an update trained from version %llu before the first model was given out",
                        (unsigned long long)version);
  }
  if (!a->fb && (rc = start(a, ctx, NULL, (size_t)update->numel, err))) return rc;
  bbi_fedbuff_status status = BBI_FEDBUFF_ACCEPTED;
  uint64_t staleness = 0;
  rc = bbi_fedbuff_contribute(a->fb, version, from->bytes, from->len, bb_tensor_data(update), (size_t)update->numel,
                              samples, bb_ctx_now(ctx), &status, &staleness, err);
  if (rc) {
    if (refusal_of(status)) bbi_intake_count(ctx, COUNTER, refusal_of(status), 1);
    return rc;
  }
  bbi_intake_count(ctx, COUNTER, status == BBI_FEDBUFF_REPLACED ? "replaced" : "accepted", 1);
  bbi_intake_count(ctx, COUNTER, "staleness", staleness);
  return 0;
}

/* A refused contribution is refused alone, and its contributor is told why, within the
 * notices' rate bounds (a peer may send refused updates as fast as it likes). */
static int fedbuff_contribute(void *self, bb_ctx *ctx, const bb_peer_id *from, const bb_tensor *update,
                              const bb_val *meta, bb_error *err) {
  fedbuff *a = self;
  int rc = contribute(self, ctx, from, update, meta, err);
  if (rc && rc != BB_ERR_NOMEM) bbi_refusal_notice_send_limited(&a->told, ctx, from, err->message);
  return rc;
}

/* ---- Aggregate --------------------------------------------------------------------------- */

static int give(const fedbuff *a, bb_ctx *ctx, bb_tensor **params, bb_val **meta, bb_error *err) {
  *params = bbi_intake_vector(ctx, bbi_fedbuff_global(a->fb), bbi_fedbuff_param_len(a->fb));
  *meta = bb_val_u64(bb_ctx_allocator(ctx), BB_VAL_U64, bbi_fedbuff_version(a->fb));
  if (*params && *meta) return 0;
  bb_tensor_release(*params);
  bb_val_release(*meta);
  *params = NULL;
  *meta = NULL;
  return bb_error_set(err, BB_ERR_NOMEM, TYPE ": out of memory");
}

static int fedbuff_aggregate(void *self, bb_ctx *ctx, bb_tensor **params, bb_val **meta, bb_error *err) {
  fedbuff *a = self;
  int rc;
  if (!a->started && !a->fb && a->init_slot[0]) { /* version 0 is the init slot's model */
    bb_val *p = NULL;
    if ((rc = bbi_intake_init_params(ctx, TYPE, a->init_slot, &p, err))) return rc;
    const bb_tensor *t = bb_val_as_tensor(p);
    rc = t->dtype == BB_DTYPE_FLOAT && t->numel ? start(a, ctx, bb_tensor_data(t), (size_t)t->numel, err)
                                                : bb_error_set(err, BB_ERR_TYPE, TYPE ": Params of slot `%s` is not "
                                                                                 "a non-empty float32 tensor",
                                                               a->init_slot);
    bb_val_release(p);
    if (rc) return rc;
  }
  a->started = true;
  if (!a->fb) return 0;
  bbi_fedround_result r;
  if ((rc = bbi_fedbuff_poll(a->fb, bb_ctx_now(ctx), &r, err))) return rc;
  if (r.event == BBI_FEDROUND_CLOSED) {
    bbi_intake_count(ctx, COUNTER, "steps", 1);
    bbi_intake_count_closing(ctx, COUNTER, &r);
    bb_buffer_free(a->alloc, r.params);
  }
  return give(a, ctx, params, meta, err);
}

static const bb_aggregator_ops FEDBUFF_OPS = {fedbuff_contribute, fedbuff_aggregate};

static int fedbuff_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_aggregator_dispatch(&FEDBUFF_OPS, self, ctx, call, err);
}

/* ---- saved state --------------------------------------------------------------------------- */

/* u8 started, then the buffer's own snapshot (buffered.h; nothing before the first model). */
static int fedbuff_save(const void *self, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  const fedbuff *a = self;
  const size_t n = a->fb ? bbi_fedbuff_snapshot_size(a->fb) : 0;
  uint8_t *buf = bbi_mem_alloc(alloc, 1 + n);
  if (!buf) return bb_error_set(err, BB_ERR_NOMEM, TYPE ": out of memory");
  buf[0] = a->started;
  int rc = a->fb ? bbi_fedbuff_snapshot(a->fb, buf + 1, n, err) : 0;
  if (rc) {
    bbi_mem_free(alloc, buf);
    return rc;
  }
  *out = buf;
  *len = 1 + n;
  return 0;
}

static int fedbuff_load(void *self, const uint8_t *data, size_t len, bb_error *err) {
  fedbuff *a = self;
  if (len < 1 || data[0] > 1) return bb_error_set(err, BB_ERR_MALFORMED, TYPE ": saved state is malformed");
  bbi_fedbuff *fb = NULL;
  int rc = len > 1 ? bbi_fedbuff_restore(a->alloc, data + 1, len - 1, &fb, err) : 0;
  if (rc) return rc;
  bbi_fedbuff_free(a->fb);
  a->fb = fb;
  a->started = data[0];
  if (fb) a->cfg.closing.param_len = bbi_fedbuff_param_len(fb);
  return 0;
}

static const bb_component_port AGG_STORAGE[] = {{"element", BB_TYPE_TENSOR_F32}};

/* No dependency is declared: the optional init=<slot> is named by the config
 * (bbi_intake_init_params). */
const bb_component_type BBI_FEDBUFF = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "FedBuff",
    .roles = 1u << BB_ROLE_AGGREGATOR,
    .storage = AGG_STORAGE,
    .n_storage = 1,
    .create = fedbuff_create,
    .destroy = fedbuff_destroy,
    .invoke = fedbuff_invoke,
    .on_message = bbi_refusal_notice_receive_for,
    .save = fedbuff_save,
    .load = fedbuff_load,
};
