/* ArraySource: the in-memory DataSource concrete. The host hands it a labelled data set
 * (bb_slot_config.host_data = a bb_dataset that outlives the node, e.g. parsed from CSV
 * with bb_dataset_from_csv); NextBatch streams fixed-size batches of it.
 *
 * Config: batch=32,shuffle=1,seed=<u64>   (seed defaults to the slot's derived seed) */
#include <string.h>

#include "bb/bytes.h"
#include "bb/dataset.h"
#include "bb/roles.h"
#include "components/shipped.h"
#include "bb/common.h"

typedef struct array_source {
  const bb_allocator *alloc;
  const bb_dataset *ds;
  bb_dataset_batcher batcher;
  size_t batch;
  uint64_t seed;
  int shuffle;
} array_source;

static int source_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const KEYS[] = {"batch", "shuffle", "seed", NULL};
  uint64_t batch, shuffle, seed;
  int rc;
  if ((rc = bb_config_check(init->config, KEYS, err)) || (rc = bb_config_u64(init->config, "batch", 32, &batch, err)) ||
      (rc = bb_config_u64(init->config, "shuffle", 1, &shuffle, err)) ||
      (rc = bb_config_u64(init->config, "seed", init->seed, &seed, err)))
    return rc;
  const bb_dataset *ds = init->host_data;
  if (!ds || !ds->n || !ds->dim)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "ArraySource for slot `%s` needs a non-empty data set as the slot's host_data", init->slot);
  if (!batch) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "ArraySource: batch must be at least 1");
  array_source *s = init->alloc->malloc(sizeof *s, init->alloc->user_data);
  if (!s) return bb_error_set(err, BB_ERR_NOMEM, "ArraySource: out of memory");
  memset(s, 0, sizeof *s);
  *s = (array_source){init->alloc, ds, {0}, batch, seed, shuffle != 0};
  rc = bb_dataset_batcher_init(&s->batcher, ds, batch, s->shuffle, seed, init->alloc, err);
  if (rc) {
    init->alloc->free(s, init->alloc->user_data);
    return rc;
  }
  *self = s;
  return 0;
}

static void source_destroy(void *self) {
  array_source *s = self;
  bb_dataset_batcher_free(&s->batcher);
  s->alloc->free(s, s->alloc->user_data);
}

static int source_next(void *self, bb_ctx *ctx, bb_tensor **batch, bb_tensor **labels, bb_error *err) {
  array_source *s = self;
  int64_t dims[2] = {(int64_t)s->batch, (int64_t)s->ds->dim};
  bb_tensor *x = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 2, dims);
  bb_tensor *y = bb_tensor_new_empty(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 1, dims);
  if (!x || !y) {
    bb_tensor_release(x);
    bb_tensor_release(y);
    return bb_error_set(err, BB_ERR_NOMEM, "ArraySource: out of memory");
  }
  if (!s->ds->labels) memset(bb_tensor_data(y), 0, s->batch * sizeof(float));
  size_t epochs = bb_dataset_batcher_next(&s->batcher, NULL, bb_tensor_data(x), bb_tensor_data(y));
  if (epochs) bb_ctx_count(ctx, "array_source.epochs", epochs); /* passes over the data, per node */
  *batch = x;
  *labels = y;
  return 0;
}

static int source_reset(void *self, bb_ctx *ctx, bb_error *err) {
  array_source *s = self;
  (void)ctx;
  bb_dataset_batcher_free(&s->batcher);
  return bb_dataset_batcher_init(&s->batcher, s->ds, s->batch, s->shuffle, s->seed, s->alloc, err);
}

static const bb_data_source_ops SOURCE_OPS = {source_next, source_reset, NULL};

static int source_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_data_source_dispatch(&SOURCE_OPS, self, ctx, call, err);
}

/* State: where the stream is — "BBAS", u32 version 1, u64 rows of the data set, u64 epoch,
 * u64 row of the epoch — so a restored node trains on the batches the saved one would
 * have (each epoch's order follows from the seed and the epoch). */
#define SOURCE_STATE_LEN 32

static int source_save(const void *self, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  const array_source *s = self;
  uint8_t *buf = alloc->malloc(SOURCE_STATE_LEN, alloc->user_data);
  if (!buf) return bb_error_set(err, BB_ERR_NOMEM, "ArraySource: out of memory");
  memcpy(buf, "BBAS", 4);
  bb_le_put_u32(buf + 4, 1);
  bb_le_put_u64(buf + 8, s->ds->n);
  bb_le_put_u64(buf + 16, s->batcher.epoch);
  bb_le_put_u64(buf + 24, s->batcher.pos);
  *out = buf;
  *len = SOURCE_STATE_LEN;
  return 0;
}

static int source_load(void *self, const uint8_t *data, size_t len, bb_error *err) {
  array_source *s = self;
  if (len != SOURCE_STATE_LEN || memcmp(data, "BBAS", 4) != 0 || bb_le_get_u32(data + 4) != 1)
    return bb_error_set(err, BB_ERR_MALFORMED, "ArraySource: saved state of %zu bytes is not a version-1 stream position", len);
  const uint64_t rows = bb_le_get_u64(data + 8), pos = bb_le_get_u64(data + 24);
  if (rows != s->ds->n || pos >= rows)
    return bb_error_set(err, BB_ERR_MALFORMED,
                        "ArraySource: saved at row %llu of %llu rows; this node's data set has %zu",
                        (unsigned long long)pos, (unsigned long long)rows, s->ds->n);
  return bb_dataset_batcher_seek(&s->batcher, bb_le_get_u64(data + 16), (size_t)pos, err);
}

static const bb_component_port SOURCE_STORAGE[] = {{"sample", BB_TYPE_TENSOR_F32}};

const bb_component_type BBI_ARRAY_SOURCE = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "ArraySource",
    .roles = 1u << BB_ROLE_DATA_SOURCE,
    .storage = SOURCE_STORAGE,
    .n_storage = 1,
    .create = source_create,
    .destroy = source_destroy,
    .invoke = source_invoke,
    .save = source_save,
    .load = source_load,
};
