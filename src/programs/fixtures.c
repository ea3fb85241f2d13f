/* The reference examples' small concretes (see fixtures.h). */
#include "programs/fixtures.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int fail(bb_error *err, int code, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    err->code = code;
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
  }
  return code;
}

/* A float32 tensor of n elements (n may be 0), filled from data (NULL: left for the caller). */
static bb_tensor *f32(bb_ctx *ctx, const float *data, size_t n) {
  int64_t dim = (int64_t)n;
  bb_tensor *t = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 1, &dim);
  if (t && data && n) memcpy(bb_tensor_data(t), data, n * sizeof(float));
  return t;
}

static int nomem(const char *who, bb_error *err) { return fail(err, BB_ERR_NOMEM, "%s: out of memory", who); }

/* The pair of tensors a next_batch returns. */
static int batch_of(bb_ctx *ctx, const char *who, const float *x, size_t nx, const float *y, size_t ny,
                    bb_tensor **batch, bb_tensor **labels, bb_error *err) {
  *batch = f32(ctx, x, nx);
  *labels = f32(ctx, y, ny);
  if (*batch && *labels) return 0;
  bb_tensor_release(*batch);
  bb_tensor_release(*labels);
  *batch = *labels = NULL;
  return nomem(who, err);
}

static int ok(void *self, bb_ctx *ctx, bb_error *err) {
  (void)self, (void)ctx, (void)err;
  return 0;
}

/* ---- components without state share one create/destroy ------------------------------ */

static int stateless_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const NO_KEYS[] = {NULL};
  static char token; /* these keep nothing: any non-NULL instance will do */
  *self = &token;
  return bb_config_check(init->config, NO_KEYS, err);
}

static void stateless_destroy(void *self) { (void)self; }

/* ---- NoopDataLoader, StubLoader, MyData ----------------------------------------------- */

static int noop_next_batch(void *self, bb_ctx *ctx, bb_tensor **batch, bb_tensor **labels, bb_error *err) {
  (void)self;
  static const float ONE[] = {1.0f};
  return batch_of(ctx, "NoopDataLoader", ONE, 1, ONE, 1, batch, labels, err);
}

static int stub_next_batch(void *self, bb_ctx *ctx, bb_tensor **batch, bb_tensor **labels, bb_error *err) {
  (void)self;
  static const float X[] = {1.0f, 2.0f, 3.0f};
  return batch_of(ctx, "StubLoader", X, 3, NULL, 0, batch, labels, err);
}

static int my_data_next_batch(void *self, bb_ctx *ctx, bb_tensor **batch, bb_tensor **labels, bb_error *err) {
  (void)self;
  static const float X[] = {1.0f}, Y[] = {2.0f};
  return batch_of(ctx, "MyData", X, 1, Y, 1, batch, labels, err);
}

static const bb_data_source_ops NOOP_LOADER_OPS = {noop_next_batch, ok, ok};
static const bb_data_source_ops STUB_LOADER_OPS = {stub_next_batch, ok, ok};
static const bb_data_source_ops MY_DATA_OPS = {my_data_next_batch, ok, ok};

static int noop_loader_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_data_source_dispatch(&NOOP_LOADER_OPS, self, ctx, call, err);
}
static int stub_loader_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_data_source_dispatch(&STUB_LOADER_OPS, self, ctx, call, err);
}
static int my_data_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_data_source_dispatch(&MY_DATA_OPS, self, ctx, call, err);
}

/* ---- NoopModel, StubModel: identity forward, empty params ----------------------------- */

static int identity_forward(void *self, bb_ctx *ctx, const bb_tensor *x, bb_tensor **y, bb_error *err) {
  (void)self, (void)ctx, (void)err;
  *y = bb_tensor_retain((bb_tensor *)x); /* tensors are immutable once shared */
  return 0;
}

static int empty_params(void *self, bb_ctx *ctx, bb_tensor **out, bb_error *err) {
  (void)self;
  *out = f32(ctx, NULL, 0);
  return *out ? 0 : nomem("params", err);
}

static int zero_loss(void *self, bb_ctx *ctx, const bb_tensor *prediction, const bb_tensor *target, bb_tensor **loss,
                     bb_error *err) {
  (void)self, (void)prediction, (void)target;
  static const float ZERO[] = {0.0f};
  *loss = f32(ctx, ZERO, 1);
  return *loss ? 0 : nomem("compute_loss", err);
}

static int accept_tensor(void *self, bb_ctx *ctx, const bb_tensor *t, bb_error *err) {
  (void)self, (void)ctx, (void)t, (void)err;
  return 0;
}

static const bb_model_ops NOOP_MODEL_OPS = {.forward = identity_forward, .params = empty_params};
static const bb_model_ops STUB_MODEL_OPS = {identity_forward, zero_loss,     accept_tensor, accept_tensor,
                                            accept_tensor,    empty_params, NULL,          NULL, NULL, NULL, NULL, NULL, NULL, NULL};

static int noop_model_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_model_dispatch(&NOOP_MODEL_OPS, self, ctx, call, err);
}
static int stub_model_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_model_dispatch(&STUB_MODEL_OPS, self, ctx, call, err);
}

/* ---- StubAggregator ------------------------------------------------------------------- */

static int stub_aggregator_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const NO_KEYS[] = {NULL};
  int rc = bb_config_check(init->config, NO_KEYS, err);
  if (rc) return rc;
  bb_fixture_stub_aggregator *a = init->alloc->malloc(sizeof *a, init->alloc->user_data);
  if (!a) return nomem("StubAggregator", err);
  memset(a, 0, sizeof *a);
  a->alloc = init->alloc;
  *self = a;
  return 0;
}

static void stub_aggregator_destroy(void *self) {
  bb_fixture_stub_aggregator *a = self;
  a->alloc->free(a, a->alloc->user_data);
}

static int stub_contribute(void *self, bb_ctx *ctx, const bb_peer_id *from, const bb_tensor *update,
                           const bb_val *meta, bb_error *err) {
  (void)ctx, (void)meta;
  bb_fixture_stub_aggregator *a = self;
  if (update->dtype != BB_DTYPE_FLOAT)
    return fail(err, BB_ERR_TYPE, "StubAggregator: updates are float32, got dtype %d", (int)update->dtype);
  size_t n = (size_t)update->numel, keep = n < 16 ? n : 16;
  if (keep) memcpy(a->last_update, bb_tensor_data(update), keep * sizeof(float));
  a->last_len = n;
  a->last_from = *from;
  a->contributions++;
  return 0;
}

static int stub_aggregate(void *self, bb_ctx *ctx, bb_tensor **params, bb_val **meta, bb_error *err) {
  (void)self;
  *meta = NULL;
  *params = f32(ctx, NULL, 0);
  return *params ? 0 : nomem("StubAggregator", err);
}

static const bb_aggregator_ops STUB_AGGREGATOR_OPS = {stub_contribute, stub_aggregate};

static int stub_aggregator_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_aggregator_dispatch(&STUB_AGGREGATOR_OPS, self, ctx, call, err);
}

/* ---- CountingIndex -------------------------------------------------------------------- */

static int counting_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const KEYS[] = {"bias", NULL};
  uint64_t bias;
  int rc;
  if ((rc = bb_config_check(init->config, KEYS, err)) || (rc = bb_config_u64(init->config, "bias", 1, &bias, err)))
    return rc;
  if (bias > UINT32_MAX) return fail(err, BB_ERR_INVALID_ARGUMENT, "CountingIndex: bias %llu is over u32", (unsigned long long)bias);
  bb_fixture_counting_index *ci = init->alloc->malloc(sizeof *ci, init->alloc->user_data);
  if (!ci) return nomem("CountingIndex", err);
  memset(ci, 0, sizeof *ci);
  ci->alloc = init->alloc;
  ci->bias = (uint32_t)bias;
  *self = ci;
  return 0;
}

static void counting_destroy(void *self) {
  bb_fixture_counting_index *ci = self;
  ci->alloc->free(ci, ci->alloc->user_data);
}

static int counting_add(void *self, bb_ctx *ctx, const bb_tensor *vector, uint64_t *id, bb_error *err) {
  (void)self, (void)ctx, (void)vector, (void)err;
  *id = 0;
  return 0;
}

static int counting_remove(void *self, bb_ctx *ctx, uint64_t id, bb_error *err) {
  (void)self, (void)ctx, (void)id, (void)err;
  return 0;
}

/* The reference's search: two constants as long as the query — its first element
 * repeated, and the bias repeated — added by the Backend the index depends on. */
static int counting_search(void *self, bb_ctx *ctx, const bb_tensor *query, size_t k, bb_tensor **ids,
                           bb_tensor **distances, bb_error *err) {
  (void)k;
  bb_fixture_counting_index *ci = self;
  ci->searches++;
  if (query->dtype != BB_DTYPE_FLOAT || query->numel < 1)
    return fail(err, BB_ERR_TYPE, "CountingIndex: the query must be a non-empty float32 tensor");
  size_t n = (size_t)query->numel;
  bb_tensor *first = f32(ctx, NULL, n), *bias = f32(ctx, NULL, n);
  bb_val *in[2] = {first ? bb_val_tensor(NULL, first) : NULL, bias ? bb_val_tensor(NULL, bias) : NULL};
  bb_val *sum = NULL;
  int rc = in[0] && in[1] ? 0 : nomem("CountingIndex", err);
  if (!rc) {
    float *a = bb_tensor_data(first), *b = bb_tensor_data(bias);
    for (size_t i = 0; i < n; i++) a[i] = ((const float *)bb_tensor_data(query))[0], b[i] = (float)ci->bias;
    rc = bb_ctx_call(ctx, "compute", "Add", in, 2, &sum, 1, err);
  }
  if (!rc && (!sum || bb_val_kind_of(sum) != BB_VAL_TENSOR || bb_val_as_tensor(sum)->numel != (int64_t)n))
    rc = fail(err, BB_ERR_TYPE, "CountingIndex: the backend's Add did not return %zu floats", n);
  if (!rc) {
    ci->backend_adds++;
    ci->last_len = n;
    memcpy(ci->last_sum, bb_tensor_data(bb_val_as_tensor(sum)), (n < 16 ? n : 16) * sizeof(float));
    int64_t zero = 0;
    *ids = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_INT64, 1, &zero);
    *distances = f32(ctx, NULL, 0);
    if (!*ids || !*distances) {
      bb_tensor_release(*ids);
      bb_tensor_release(*distances);
      *ids = *distances = NULL;
      rc = nomem("CountingIndex", err);
    }
  }
  bb_val_release(sum);
  bb_val_release(in[0]);
  bb_val_release(in[1]);
  bb_tensor_release(first);
  bb_tensor_release(bias);
  return rc;
}

static const bb_index_ops COUNTING_OPS = {counting_add, counting_search, counting_remove, NULL};

static int counting_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_index_dispatch(&COUNTING_OPS, self, ctx, call, err);
}

/* ---- MyModel -------------------------------------------------------------------------- */

static int my_model_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const KEYS[] = {"w", NULL};
  float w;
  int rc;
  if ((rc = bb_config_check(init->config, KEYS, err)) || (rc = bb_config_f32(init->config, "w", 1.0f, &w, err)))
    return rc;
  bb_fixture_my_model *m = init->alloc->malloc(sizeof *m, init->alloc->user_data);
  if (!m) return nomem("MyModel", err);
  memset(m, 0, sizeof *m);
  m->alloc = init->alloc;
  m->w = w;
  *self = m;
  return 0;
}

static void my_model_destroy(void *self) {
  bb_fixture_my_model *m = self;
  m->alloc->free(m, m->alloc->user_data);
}

static int first_float(const bb_tensor *t, const char *method, float *out, bb_error *err) {
  if (t->dtype != BB_DTYPE_FLOAT || t->numel < 1)
    return fail(err, BB_ERR_TYPE, "MyModel: %s needs a non-empty float32 tensor", method);
  *out = ((const float *)bb_tensor_data(t))[0];
  return 0;
}

static int my_forward(void *self, bb_ctx *ctx, const bb_tensor *x, bb_tensor **y, bb_error *err) {
  bb_fixture_my_model *m = self;
  float x0 = 0.0f;
  int rc = first_float(x, "forward", &x0, err);
  if (rc) return rc;
  float wx = m->w * x0;
  m->forwards++;
  *y = f32(ctx, &wx, 1);
  return *y ? 0 : nomem("MyModel", err);
}

static int my_load(void *self, bb_ctx *ctx, const bb_tensor *p, bb_error *err) {
  (void)ctx;
  return first_float(p, "load_parameters", &((bb_fixture_my_model *)self)->w, err);
}

static int my_apply_delta(void *self, bb_ctx *ctx, const bb_tensor *d, bb_error *err) {
  (void)ctx;
  float d0 = 0.0f;
  int rc = first_float(d, "apply_delta", &d0, err);
  if (!rc) ((bb_fixture_my_model *)self)->w += d0;
  return rc;
}

static int my_params(void *self, bb_ctx *ctx, bb_tensor **out, bb_error *err) {
  bb_fixture_my_model *m = self;
  m->params_reads++;
  *out = f32(ctx, &m->w, 1);
  return *out ? 0 : nomem("MyModel", err);
}

static const bb_model_ops MY_MODEL_OPS = {my_forward, zero_loss, accept_tensor, my_apply_delta,
                                          my_load,    my_params, NULL,          NULL, NULL, NULL, NULL, NULL, NULL, NULL};

static int my_model_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_model_dispatch(&MY_MODEL_OPS, self, ctx, call, err);
}

/* ---- the types ------------------------------------------------------------------------ */

static const bb_component_port F32_STORAGE[] = {
    {"tensor", BB_TYPE_TENSOR_F32}, {"vector", BB_TYPE_TENSOR_F32},
    {"sample", BB_TYPE_TENSOR_F32}, {"element", BB_TYPE_TENSOR_F32}};
#define N_F32_STORAGE (sizeof F32_STORAGE / sizeof F32_STORAGE[0])
static const bb_component_dep COUNTING_DEPS[] = {{BB_ROLE_BACKEND, "compute"}};

#define ROLE(r) (1u << (r))
const bb_component_type BB_FIXTURE_NOOP_DATA_LOADER = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "NoopDataLoader",
    .roles = ROLE(BB_ROLE_DATA_SOURCE),
    .storage = F32_STORAGE,
    .n_storage = N_F32_STORAGE,
    .create = stateless_create,
    .destroy = stateless_destroy,
    .invoke = noop_loader_invoke,
};
const bb_component_type BB_FIXTURE_NOOP_MODEL = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "NoopModel",
    .roles = ROLE(BB_ROLE_MODEL),
    .storage = F32_STORAGE,
    .n_storage = N_F32_STORAGE,
    .create = stateless_create,
    .destroy = stateless_destroy,
    .invoke = noop_model_invoke,
};
const bb_component_type BB_FIXTURE_STUB_LOADER = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "StubLoader",
    .roles = ROLE(BB_ROLE_DATA_SOURCE),
    .storage = F32_STORAGE,
    .n_storage = N_F32_STORAGE,
    .create = stateless_create,
    .destroy = stateless_destroy,
    .invoke = stub_loader_invoke,
};
const bb_component_type BB_FIXTURE_STUB_MODEL = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "StubModel",
    .roles = ROLE(BB_ROLE_MODEL),
    .storage = F32_STORAGE,
    .n_storage = N_F32_STORAGE,
    .create = stateless_create,
    .destroy = stateless_destroy,
    .invoke = stub_model_invoke,
};
const bb_component_type BB_FIXTURE_STUB_AGGREGATOR = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "StubAggregator",
    .roles = ROLE(BB_ROLE_AGGREGATOR),
    .storage = F32_STORAGE,
    .n_storage = N_F32_STORAGE,
    .create = stub_aggregator_create,
    .destroy = stub_aggregator_destroy,
    .invoke = stub_aggregator_invoke,
};
const bb_component_type BB_FIXTURE_COUNTING_INDEX = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "CountingIndex",
    .roles = ROLE(BB_ROLE_INDEX),
    .deps = COUNTING_DEPS,
    .n_deps = 1,
    .storage = F32_STORAGE,
    .n_storage = N_F32_STORAGE,
    .create = counting_create,
    .destroy = counting_destroy,
    .invoke = counting_invoke,
};
const bb_component_type BB_FIXTURE_MY_MODEL = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "MyModel",
    .roles = ROLE(BB_ROLE_MODEL),
    .storage = F32_STORAGE,
    .n_storage = N_F32_STORAGE,
    .create = my_model_create,
    .destroy = my_model_destroy,
    .invoke = my_model_invoke,
};
const bb_component_type BB_FIXTURE_MY_DATA = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "MyData",
    .roles = ROLE(BB_ROLE_DATA_SOURCE),
    .storage = F32_STORAGE,
    .n_storage = N_F32_STORAGE,
    .create = stateless_create,
    .destroy = stateless_destroy,
    .invoke = my_data_invoke,
};

int bb_fixtures_register(bb_registry *r, bb_error *err) {
  static const bb_component_type *const ALL[] = {
      &BB_FIXTURE_NOOP_DATA_LOADER, &BB_FIXTURE_NOOP_MODEL,      &BB_FIXTURE_STUB_LOADER, &BB_FIXTURE_STUB_MODEL,
      &BB_FIXTURE_STUB_AGGREGATOR,  &BB_FIXTURE_COUNTING_INDEX, &BB_FIXTURE_MY_MODEL,    &BB_FIXTURE_MY_DATA};
  for (size_t i = 0; i < sizeof ALL / sizeof ALL[0]; i++) {
    int rc = bb_registry_add(r, ALL[i], err);
    if (rc) return rc;
  }
  return 0;
}
