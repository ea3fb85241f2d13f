/* FedAvg and RobustAvg: the Aggregator concretes.
 *
 * FedAvg — sample-weighted federated averaging in rounds (src/components/aggregators/rounds.h).
 *   Config: quorum=1,target=0,deadline_ms=0,no_quorum=extend|abandon,late=drop|count,
 *           max_staleness=1,init=<slot>
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
 * RobustAvg — coordinate-wise median or trimmed mean of the contributions of a round
 * (one per peer), closed once `quorum` peers contributed.
 *   Config: method=median|trimmed,trim=0.2,quorum=1 */
#include <stdlib.h>
#include <string.h>

#include "bb/roles.h"
#include "components/aggregators/robust.h"
#include "components/aggregators/rounds.h"
#include "components/shipped.h"
#include "bb/bytes.h"
#include "bb/common.h"
#include "util/mem.h"

/* ---- FedAvg --------------------------------------------------------------------------- */

typedef struct fedavg {
  const bb_allocator *alloc;
  bbi_fedround_config cfg;
  bbi_fedround *fr;
  char init_slot[64];
  bool started;
  float *global; /* the last global model given out (cfg.param_len floats), or NULL */
} fedavg;

static int fedavg_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const KEYS[] = {"quorum", "target", "deadline_ms", "no_quorum", "late", "max_staleness", "init",
                                     NULL};
  const char *c = init->config;
  uint64_t quorum, target, deadline_ms, staleness;
  char no_quorum[16], late[16], init_slot[64];
  int rc;
  if ((rc = bb_config_check(c, KEYS, err)) || (rc = bb_config_u64(c, "quorum", 1, &quorum, err)) ||
      (rc = bb_config_u64(c, "target", 0, &target, err)) || (rc = bb_config_u64(c, "deadline_ms", 0, &deadline_ms, err)) ||
      (rc = bb_config_u64(c, "max_staleness", 1, &staleness, err)) ||
      (rc = bb_config_str(c, "no_quorum", "extend", no_quorum, sizeof no_quorum, err)) ||
      (rc = bb_config_str(c, "late", "drop", late, sizeof late, err)) ||
      (rc = bb_config_str(c, "init", "", init_slot, sizeof init_slot, err)))
    return rc;
  if (!quorum || quorum > UINT32_MAX || target > UINT32_MAX || (target && target < quorum))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "FedAvg: need 1 <= quorum <= target (or target=0), got `%s`", c);
  if (deadline_ms > UINT64_MAX / 1000000u)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "FedAvg: deadline_ms=%llu is above the largest, %llu",
                        (unsigned long long)deadline_ms, (unsigned long long)(UINT64_MAX / 1000000u));
  bool abandon = strcmp(no_quorum, "abandon") == 0, count = strcmp(late, "count") == 0;
  if ((!abandon && strcmp(no_quorum, "extend") != 0) || (!count && strcmp(late, "drop") != 0))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "FedAvg: no_quorum is extend|abandon and late is drop|count");
  fedavg *f = bbi_mem_calloc(init->alloc, 1, sizeof *f);
  if (!f) return bb_error_set(err, BB_ERR_NOMEM, "FedAvg: out of memory");
  f->alloc = init->alloc;
  f->cfg.quorum = (uint32_t)quorum;
  f->cfg.target = (uint32_t)target;
  f->cfg.deadline_ns = deadline_ms * 1000000u;
  f->cfg.on_no_quorum = abandon ? BBI_FEDROUND_ABANDON : BBI_FEDROUND_EXTEND;
  f->cfg.late = count ? BBI_FEDROUND_LATE_COUNT : BBI_FEDROUND_LATE_DROP;
  f->cfg.max_staleness = staleness;
  memcpy(f->init_slot, init_slot, sizeof f->init_slot);
  *self = f;
  return 0;
}

static void fedavg_destroy(void *self) {
  fedavg *f = self;
  bbi_fedround_free(f->fr);
  bbi_mem_free(f->alloc, f->global);
  bbi_mem_free(f->alloc, f);
}

/* The rounds start with the first parameter vector seen (its length is the model's). */
static int ensure_rounds(fedavg *f, bb_ctx *ctx, size_t len, bb_error *err) {
  if (f->fr) {
    if (len != f->cfg.param_len)
      return bb_error_set(err, BB_ERR_TYPE, "FedAvg: %zu parameters where the federation has %zu", len,
                          f->cfg.param_len);
    return 0;
  }
  f->cfg.param_len = len;
  return bbi_fedround_new(f->alloc, &f->cfg, bb_ctx_now(ctx), &f->fr, err);
}

static int fedavg_contribute(void *self, bb_ctx *ctx, const bb_peer_id *from, const bb_tensor *update,
                             const bb_val *meta, bb_error *err) {
  fedavg *f = self;
  if (update->dtype != BB_DTYPE_FLOAT || !update->numel)
    return bb_error_set(err, BB_ERR_TYPE, "FedAvg: an update is a non-empty float32 tensor");
  uint64_t samples = 1, round = f->fr ? bbi_fedround_round_id(f->fr) : 0;
  if (meta && bb_val_is_u64(meta)) {
    samples = bb_val_as_u64(meta);
  } else if (bb_val_kind_of(meta) == BB_VAL_COMPOSITE && bb_val_count(meta) == 2 &&
             bb_val_is_u64(bb_val_child(meta, 0)) && bb_val_is_u64(bb_val_child(meta, 1))) {
    samples = bb_val_as_u64(bb_val_child(meta, 0));
    round = bb_val_as_u64(bb_val_child(meta, 1));
  } else if (meta) {
    return bb_error_set(err, BB_ERR_TYPE, "FedAvg: metadata is a sample count or [samples, round], got %s",
                        bb_val_kind_name((int)bb_val_kind_of(meta)));
  }
  int rc = ensure_rounds(f, ctx, (size_t)update->numel, err);
  if (rc) return rc;
  bbi_fedround_status status;
  rc = bbi_fedround_contribute(f->fr, round, from->bytes, from->len, bb_tensor_data(update), samples, bb_ctx_now(ctx),
                              &status, err);
  if (status == BBI_FEDROUND_LATE_DROPPED) bb_ctx_count(ctx, "fedavg.late_dropped", 1);
  if (status == BBI_FEDROUND_REPLACED) bb_ctx_count(ctx, "fedavg.replaced", 1);
  return rc;
}

static bb_tensor *vector_of(bb_ctx *ctx, const float *data, size_t n) {
  int64_t dim = (int64_t)n;
  bb_tensor *t = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 1, &dim);
  if (t) memcpy(bb_tensor_data(t), data, n * sizeof(float));
  return t;
}

/* Keeps what was given out, so an abandoned round can hand it out again. */
static int remember(fedavg *f, const float *params, bb_error *err) {
  if (!f->global && !(f->global = bbi_mem_calloc(f->alloc, f->cfg.param_len, sizeof(float))))
    return bb_error_set(err, BB_ERR_NOMEM, "FedAvg: out of memory");
  memcpy(f->global, params, f->cfg.param_len * sizeof(float));
  return 0;
}

static int give(fedavg *f, bb_ctx *ctx, const float *params, bb_tensor **out, bb_val **meta, bb_error *err) {
  *out = vector_of(ctx, params, f->cfg.param_len);
  *meta = bb_val_u64(bb_ctx_allocator(ctx), BB_VAL_U64, bbi_fedround_round_id(f->fr));
  int rc = *out && *meta ? remember(f, params, err) : bb_error_set(err, BB_ERR_NOMEM, "FedAvg: out of memory");
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
static int check_init_slot(const fedavg *f, bb_ctx *ctx, bb_error *err) {
  const bb_component_type *type = NULL;
  if (!bb_ctx_dependency(ctx, f->init_slot, &type))
    return bb_error_set(err, BB_ERR_NOT_FOUND, "FedAvg: init slot `%s` has no component on this node", f->init_slot);
  if (!(type->roles & (1u << BB_ROLE_MODEL)))
    return bb_error_set(err, BB_ERR_TYPE, "FedAvg: init slot `%s` holds a %s, not a Model", f->init_slot,
                        type->type_name);
  return 0;
}

static int fedavg_aggregate(void *self, bb_ctx *ctx, bb_tensor **params, bb_val **meta, bb_error *err) {
  fedavg *f = self;
  int rc;
  if (!f->started && f->init_slot[0]) { /* round 0's global model is the init slot's */
    bb_val *p = NULL;
    if ((rc = check_init_slot(f, ctx, err)) || (rc = bb_ctx_call(ctx, f->init_slot, "Params", NULL, 0, &p, 1, err)))
      return rc;
    if (!p || bb_val_kind_of(p) != BB_VAL_TENSOR) {
      bb_val_release(p);
      return bb_error_set(err, BB_ERR_TYPE, "FedAvg: Params of slot `%s` is not a tensor", f->init_slot);
    }
    rc = ensure_rounds(f, ctx, (size_t)bb_val_as_tensor(p)->numel, err);
    if (!rc) rc = give(f, ctx, bb_tensor_data(bb_val_as_tensor(p)), params, meta, err);
    if (!rc) f->started = true;
    bb_val_release(p);
    return rc;
  }
  f->started = true;
  if (!f->fr) return 0;
  bbi_fedround_result r;
  if ((rc = bbi_fedround_poll(f->fr, bb_ctx_now(ctx), &r, err))) return rc;
  if (r.event == BBI_FEDROUND_OVERDUE) bb_ctx_count(ctx, "fedavg.rounds_overdue", 1);
  if (r.event == BBI_FEDROUND_ABANDONED) {
    bb_ctx_count(ctx, "fedavg.rounds_abandoned", 1);
    return f->global ? give(f, ctx, f->global, params, meta, err) : 0;
  }
  if (r.event != BBI_FEDROUND_CLOSED) return 0;
  bb_ctx_count(ctx, "fedavg.rounds_closed", 1);
  rc = give(f, ctx, r.params, params, meta, err);
  bb_buffer_free(f->alloc, r.params);
  return rc;
}

static const bb_aggregator_ops FEDAVG_OPS = {fedavg_contribute, fedavg_aggregate};

static int fedavg_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_aggregator_dispatch(&FEDAVG_OPS, self, ctx, call, err);
}

/* State: u8 started, u64 n then n floats of the last global model (0: none), then the
 * rounds' own snapshot (nothing before the first vector). */
static int fedavg_save(const void *self, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  const fedavg *f = self;
  size_t g = f->global ? f->cfg.param_len : 0, n = f->fr ? bbi_fedround_snapshot_size(f->fr) : 0;
  size_t total = 9 + g * sizeof(float) + n;
  uint8_t *buf = bbi_mem_alloc(alloc, total);
  if (!buf) return bb_error_set(err, BB_ERR_NOMEM, "FedAvg: out of memory");
  bb_le_writer w = bb_le_writer_fixed(buf, total);
  bb_le_write_u8(&w, f->started);
  bb_le_write_u64(&w, g);
  for (size_t i = 0; i < g; i++) bb_le_write_f32(&w, f->global[i]);
  int rc = f->fr ? bbi_fedround_snapshot(f->fr, buf + w.len, n, NULL, err) : 0;
  if (rc) {
    bbi_mem_free(alloc, buf);
    return rc;
  }
  *out = buf;
  *len = total;
  return 0;
}

static int fedavg_load(void *self, const uint8_t *data, size_t len, bb_error *err) {
  fedavg *f = self;
  if (len < 9 || data[0] > 1) return bb_error_set(err, BB_ERR_MALFORMED, "FedAvg: saved state is malformed");
  uint64_t g = bb_le_get_u64(data + 1);
  if (g > (len - 9) / sizeof(float) || (g && len - 9 == g * sizeof(float)))
    return bb_error_set(err, BB_ERR_MALFORMED, "FedAvg: saved global model does not fit the state");
  size_t rest = len - 9 - (size_t)g * sizeof(float);
  bbi_fedround *fr = NULL;
  if (rest) {
    int rc = bbi_fedround_restore(f->alloc, data + 9 + g * sizeof(float), rest, &fr, err);
    if (rc) return rc;
  }
  if (g && (!fr || g != bbi_fedround_param_len(fr))) {
    bbi_fedround_free(fr);
    return bb_error_set(err, BB_ERR_MALFORMED, "FedAvg: saved global model and rounds disagree");
  }
  float *global = NULL;
  if (g && !(global = bbi_mem_calloc(f->alloc, (size_t)g, sizeof(float)))) {
    bbi_fedround_free(fr);
    return bb_error_set(err, BB_ERR_NOMEM, "FedAvg: out of memory");
  }
  for (size_t i = 0; i < g; i++) global[i] = bb_le_get_f32(data + 9 + 4 * i);
  bbi_fedround_free(f->fr);
  bbi_mem_free(f->alloc, f->global);
  f->fr = fr;
  f->global = global;
  f->started = data[0];
  if (fr) f->cfg.param_len = bbi_fedround_param_len(fr);
  return 0;
}

static const bb_component_port AGG_STORAGE[] = {{"element", BB_TYPE_TENSOR_F32}};

/* FedAvg declares no dependency: its one reach, the optional init=<slot>, is named by the
 * config (check_init_slot). */
const bb_component_type BBI_FEDAVG = {
    sizeof(bb_component_type), "FedAvg", 1u << BB_ROLE_AGGREGATOR, NULL, NULL, 0, AGG_STORAGE, 1,
    fedavg_create, fedavg_destroy, fedavg_invoke, NULL, NULL, fedavg_save, fedavg_load, NULL};

/* ---- RobustAvg -------------------------------------------------------------------------- */

typedef struct robust_entry {
  bb_peer_id peer;
  float *v;
} robust_entry;

typedef struct robust {
  const bb_allocator *alloc;
  bool median;
  double trim;
  size_t quorum, len;
  robust_entry *items;
  size_t n, cap;
} robust;

static int robust_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const KEYS[] = {"method", "trim", "quorum", NULL};
  char method[16];
  float trim;
  uint64_t quorum;
  int rc;
  if ((rc = bb_config_check(init->config, KEYS, err)) ||
      (rc = bb_config_str(init->config, "method", "median", method, sizeof method, err)) ||
      (rc = bb_config_f32(init->config, "trim", 0.2f, &trim, err)) ||
      (rc = bb_config_u64(init->config, "quorum", 1, &quorum, err)))
    return rc;
  bool median = strcmp(method, "median") == 0;
  if ((!median && strcmp(method, "trimmed") != 0) || trim < 0 || trim >= 0.5f || !quorum || quorum > 4096)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "RobustAvg: method is median|trimmed, 0 <= trim < 0.5, 1 <= quorum <= 4096 (got `%s`)",
                        init->config);
  robust *r = bbi_mem_alloc(init->alloc, sizeof *r);
  if (!r) return bb_error_set(err, BB_ERR_NOMEM, "RobustAvg: out of memory");
  *r = (robust){init->alloc, median, trim, quorum, 0, NULL, 0, 0};
  *self = r;
  return 0;
}

static void robust_clear(robust *r) {
  for (size_t i = 0; i < r->n; i++) bbi_mem_free(r->alloc, r->items[i].v);
  r->n = 0;
}

static void robust_destroy(void *self) {
  robust *r = self;
  robust_clear(r);
  bbi_mem_free(r->alloc, r->items);
  bbi_mem_free(r->alloc, r);
}

static int robust_contribute(void *self, bb_ctx *ctx, const bb_peer_id *from, const bb_tensor *update,
                             const bb_val *meta, bb_error *err) {
  (void)ctx;
  (void)meta;
  robust *r = self;
  size_t len = (size_t)update->numel;
  if (update->dtype != BB_DTYPE_FLOAT || !len || (r->len && len != r->len))
    return bb_error_set(err, BB_ERR_TYPE, "RobustAvg: updates are float32 tensors of one length (%zu)", r->len);
  const float *x = bb_tensor_data(update);
  for (size_t i = 0; i < len; i++)
    if (x[i] != x[i] || x[i] - x[i] != 0)
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "RobustAvg: value %zu of the update is not finite", i);
  float *copy = bbi_mem_alloc(r->alloc, len * sizeof *copy);
  if (!copy) return bb_error_set(err, BB_ERR_NOMEM, "RobustAvg: out of memory");
  memcpy(copy, x, len * sizeof *copy);
  for (size_t i = 0; i < r->n; i++)
    if (bb_peer_id_equal(&r->items[i].peer, from)) { /* a peer's later update replaces its earlier one */
      bbi_mem_free(r->alloc, r->items[i].v);
      r->items[i].v = copy;
      return 0;
    }
  if (bbi_mem_grow(r->alloc, (void **)&r->items, &r->cap, r->n + 1, sizeof *r->items)) {
    bbi_mem_free(r->alloc, copy);
    return bb_error_set(err, BB_ERR_NOMEM, "RobustAvg: out of memory");
  }
  r->items[r->n++] = (robust_entry){*from, copy};
  r->len = len;
  return 0;
}

static int robust_aggregate(void *self, bb_ctx *ctx, bb_tensor **params, bb_val **meta, bb_error *err) {
  robust *r = self;
  if (r->n < r->quorum) return 0;
  int64_t dim = (int64_t)r->len;
  bb_tensor *out = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 1, &dim);
  const float **vecs = bbi_mem_calloc(r->alloc, r->n, sizeof *vecs);
  float *scratch = bbi_mem_calloc(r->alloc, r->n, sizeof *scratch);
  int rc = 0;
  if (!out || !vecs || !scratch) rc = bb_error_set(err, BB_ERR_NOMEM, "RobustAvg: out of memory");
  else {
    for (size_t i = 0; i < r->n; i++) vecs[i] = r->items[i].v;
    rc = r->median ? bbi_robust_median(vecs, r->n, r->len, bb_tensor_data(out), scratch, err)
                   : bbi_robust_trimmed_mean(vecs, r->n, r->len, r->trim, bb_tensor_data(out), scratch, err);
  }
  bbi_mem_free(r->alloc, (void *)vecs);
  bbi_mem_free(r->alloc, scratch);
  if (!rc) *meta = bb_val_u64(bb_ctx_allocator(ctx), BB_VAL_U64, r->n);
  if (rc || !*meta) {
    bb_tensor_release(out);
    return rc ? rc : bb_error_set(err, BB_ERR_NOMEM, "RobustAvg: out of memory");
  }
  robust_clear(r); /* only a round that closed is cleared */
  *params = out;
  return 0;
}

static const bb_aggregator_ops ROBUST_OPS = {robust_contribute, robust_aggregate};

static int robust_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_aggregator_dispatch(&ROBUST_OPS, self, ctx, call, err);
}

const bb_component_type BBI_ROBUST_AVG = {
    sizeof(bb_component_type), "RobustAvg", 1u << BB_ROLE_AGGREGATOR, NULL, NULL, 0, AGG_STORAGE, 1,
    robust_create, robust_destroy, robust_invoke, NULL, NULL, NULL, NULL, NULL};

/* ---- GossipAvg ----------------------------------------------------------------------------
 * Decentralised averaging: each update a peer receives is mixed into its own model at
 * once, params := (1 - weight)·params + weight·update, through the Model at slot `model`.
 *   Config: model=model,weight=0.5 — the Model is its declared dependency, so `model`
 *   takes no other slot (the compiler checks only the declared one).
 * Aggregate gives the current parameters (so a graph can report or forward them). */

#define GOSSIP_AVG_MODEL "model"
static const bb_component_dep GOSSIP_AVG_DEPS[] = {{BB_ROLE_MODEL, GOSSIP_AVG_MODEL}};

typedef struct gossip_avg {
  const bb_allocator *alloc;
  float weight;
} gossip_avg;

static int gossip_avg_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const KEYS[] = {"model", "weight", NULL};
  gossip_avg g = {init->alloc, 0.5f};
  char model[64];
  int rc;
  if ((rc = bb_config_check(init->config, KEYS, err)) ||
      (rc = bb_config_str(init->config, "model", GOSSIP_AVG_MODEL, model, sizeof model, err)) ||
      (rc = bb_config_f32(init->config, "weight", 0.5f, &g.weight, err)))
    return rc;
  if (strcmp(model, GOSSIP_AVG_MODEL) != 0)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "GossipAvg: model=`%s`: the Model must be at slot `" GOSSIP_AVG_MODEL "`, its declared dependency",
                        model);
  if (!(g.weight > 0 && g.weight <= 1))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "GossipAvg: weight must be in (0, 1], got %g", (double)g.weight);
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

static int gossip_avg_contribute(void *self, bb_ctx *ctx, const bb_peer_id *from, const bb_tensor *update,
                                 const bb_val *meta, bb_error *err) {
  (void)from;
  (void)meta;
  gossip_avg *g = self;
  bb_val *own = NULL;
  int rc = bb_ctx_call(ctx, GOSSIP_AVG_MODEL, "Params", NULL, 0, &own, 1, err);
  if (rc) return rc;
  const bb_tensor *params = bb_val_as_tensor(own);
  if (!params || params->numel != update->numel || update->dtype != BB_DTYPE_FLOAT) {
    long long have = params ? (long long)params->numel : -1LL;
    bb_val_release(own);
    return bb_error_set(err, BB_ERR_TYPE, "GossipAvg: the update does not match the model's %lld parameters", have);
  }
  bb_tensor *mixed = vector_of(ctx, bb_tensor_data(params), (size_t)update->numel);
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

const bb_component_type BBI_GOSSIP_AVG = {
    sizeof(bb_component_type), "GossipAvg", 1u << BB_ROLE_AGGREGATOR, NULL, GOSSIP_AVG_DEPS, 1, AGG_STORAGE, 1,
    gossip_avg_create, gossip_avg_destroy, gossip_avg_invoke, NULL, NULL, NULL, NULL, NULL};
