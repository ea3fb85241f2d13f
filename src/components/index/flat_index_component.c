/* FlatIndex: the Index concrete — exact k-nearest-neighbour search over float32 vectors
 * (src/components/index/flat_index.h, SIMD distances).
 * Config: dim=<n>,metric=l2|ip
 * Add(vector) → id (U64); Search(query) with attribute k → (ids int64 [k'], distances
 * float32 [k']), best first; Remove(id). State survives snapshots. */
#include <string.h>

#include "bb/roles.h"
#include "components/index/flat_index.h"
#include "components/shipped.h"
#include "bb/common.h"
#include "util/mem.h"

typedef struct flat {
  const bb_allocator *alloc;
  bbi_flat_index *idx;
} flat;

static int flat_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const KEYS[] = {"dim", "metric", NULL};
  uint64_t dim;
  char metric[8];
  int rc;
  if ((rc = bb_config_check(init->config, KEYS, err)) || (rc = bb_config_u64(init->config, "dim", 0, &dim, err)) ||
      (rc = bb_config_str(init->config, "metric", "l2", metric, sizeof metric, err)))
    return rc;
  bool ip = strcmp(metric, "ip") == 0;
  if (!dim || (!ip && strcmp(metric, "l2") != 0))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "FlatIndex: config needs dim=<n> and metric l2|ip (got `%s`)",
                        init->config);
  flat *f = bbi_mem_alloc(init->alloc, sizeof *f);
  if (!f) return bb_error_set(err, BB_ERR_NOMEM, "FlatIndex: out of memory");
  f->alloc = init->alloc;
  if ((rc = bbi_flat_index_new(init->alloc, dim, ip ? BBI_FLAT_INDEX_IP : BBI_FLAT_INDEX_L2SQ, &f->idx, err))) {
    bbi_mem_free(init->alloc, f);
    return rc;
  }
  *self = f;
  return 0;
}

static void flat_destroy(void *self) {
  flat *f = self;
  bbi_flat_index_free(f->idx);
  bbi_mem_free(f->alloc, f);
}

static int check_vector(const flat *f, const bb_tensor *v, bb_error *err) {
  if (v->dtype != BB_DTYPE_FLOAT || (size_t)v->numel != bbi_flat_index_dim(f->idx))
    return bb_error_set(err, BB_ERR_TYPE, "FlatIndex: vectors are float32 [%zu], got %lld floats",
                        bbi_flat_index_dim(f->idx), (long long)v->numel);
  return 0;
}

static int flat_add(void *self, bb_ctx *ctx, const bb_tensor *vector, uint64_t *id, bb_error *err) {
  (void)ctx;
  flat *f = self;
  int rc = check_vector(f, vector, err);
  return rc ? rc : bbi_flat_index_add(f->idx, bb_tensor_data(vector), id, err);
}

static int flat_search(void *self, bb_ctx *ctx, const bb_tensor *query, size_t k, bb_tensor **ids, bb_tensor **dists,
                       bb_error *err) {
  flat *f = self;
  int rc = check_vector(f, query, err);
  if (rc) return rc;
  if (k > 65536) return bb_error_set(err, BB_ERR_LIMIT, "FlatIndex: k = %zu is over 65536", k);
  int64_t kk = (int64_t)k;
  bb_tensor *ti = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_INT64, 1, &kk);
  bb_tensor *td = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 1, &kk);
  uint64_t *tmp = bbi_mem_alloc(f->alloc, k * sizeof *tmp);
  size_t found = 0;
  if (!ti || !td || !tmp) rc = bb_error_set(err, BB_ERR_NOMEM, "FlatIndex: out of memory");
  else rc = bbi_flat_index_search(f->idx, bb_tensor_data(query), k, tmp, bb_tensor_data(td), &found, err);
  if (!rc) {
    int64_t *out = bb_tensor_data(ti);
    for (size_t i = 0; i < found; i++) out[i] = (int64_t)tmp[i];
    int64_t fd = (int64_t)found;
    *ids = bb_tensor_view(ti, 1, &fd);
    *dists = bb_tensor_view(td, 1, &fd);
    if (!*ids || !*dists) {
      bb_tensor_release(*ids);
      bb_tensor_release(*dists);
      *ids = *dists = NULL;
      rc = bb_error_set(err, BB_ERR_NOMEM, "FlatIndex: out of memory");
    }
  }
  bbi_mem_free(f->alloc, tmp);
  bb_tensor_release(ti);
  bb_tensor_release(td);
  return rc;
}

static int flat_remove(void *self, bb_ctx *ctx, uint64_t id, bb_error *err) {
  (void)ctx;
  return bbi_flat_index_remove(((flat *)self)->idx, id, err);
}

static const bb_index_ops FLAT_OPS = {flat_add, flat_search, flat_remove, NULL};

static int flat_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_index_dispatch(&FLAT_OPS, self, ctx, call, err);
}

static int flat_save(const void *self, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  const flat *f = self;
  size_t n = bbi_flat_index_snapshot_size(f->idx);
  uint8_t *buf = bbi_mem_alloc(alloc, n);
  if (!buf) return bb_error_set(err, BB_ERR_NOMEM, "FlatIndex: out of memory");
  int rc = bbi_flat_index_snapshot(f->idx, buf, n, len, err);
  if (rc) bbi_mem_free(alloc, buf);
  else *out = buf;
  return rc;
}

static int flat_load(void *self, const uint8_t *data, size_t len, bb_error *err) {
  flat *f = self;
  bbi_flat_index *idx = NULL;
  int rc = bbi_flat_index_restore(f->alloc, data, len, &idx, err);
  if (rc) return rc;
  bbi_flat_index_free(f->idx);
  f->idx = idx;
  return 0;
}

static const bb_component_port FLAT_STORAGE[] = {{"vector", BB_TYPE_TENSOR_F32}};

const bb_component_type BBI_FLAT_INDEX = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "FlatIndex",
    .roles = 1u << BB_ROLE_INDEX,
    .storage = FLAT_STORAGE,
    .n_storage = 1,
    .create = flat_create,
    .destroy = flat_destroy,
    .invoke = flat_invoke,
    .save = flat_save,
    .load = flat_load,
};
