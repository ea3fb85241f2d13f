/* custom_index (the reference implementation's custom_index_hnsw): a user Index that
 * answers later.
 *
 *   custom_index [--quiet]
 *
 * AsyncFlatIndex is an exact k-NN Index (euclidean distance, ties by id, ids from 1) whose
 * every method defers: it takes a command id with bb_ctx_defer, queues the work and
 * returns BB_LATER. The host is its worker: after each poll it runs the queued work and
 * hands the results back with bb_node_complete (bb_node_fail for a wrong dimension), so the
 * parked Search resumes on a later poll. A queue the host drains keeps the run
 * deterministic; a worker thread would call the same bb_node_complete from its side of a
 * lock.
 *
 * The CustomIndexApp Module is compiled with slot "hnsw" bound to AsyncFlatIndex (dim=4),
 * installed on peer 1, seeded with [i, i+.1, i+.2, i+.3] for i = 0..4 through the
 * installed instance (ids 1..5), and queried with [2, 2.1, 2.2, 2.3], k = 3. Exits 0 only
 * when the Search was suspended, completed on a later poll, and returned
 * [(3, 0.0), (2, 2.0), (4, 2.0)]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/roles.h"
#include "programs/examples.h"

#define MAX_DIM 64

/* ---- AsyncFlatIndex ------------------------------------------------------------------- */

typedef enum work_kind { WORK_ADD, WORK_SEARCH, WORK_REMOVE } work_kind;

typedef struct work {
  work_kind kind;
  uint64_t command;
  size_t len; /* floats the caller gave (may differ from the index's dim) */
  float vec[MAX_DIM];
  size_t k;
  uint64_t id;
} work;

typedef struct async_index {
  const bb_allocator *alloc;
  size_t dim, count, cap;
  float *vecs;    /* count × dim */
  uint64_t *ids;  /* count; assigned from 1 */
  uint64_t next_id;
  work *queue;    /* deferred work, oldest first */
  size_t queued, queue_cap;
  uint64_t deferred; /* methods that returned BB_LATER */
  float last_dists[8]; /* the last Search's distances (the Module emits only the ids) */
  size_t last_found;
} async_index;

static int fail(bb_error *err, int code, const char *what) {
  if (err) {
    err->code = code;
    snprintf(err->message, sizeof err->message, "AsyncFlatIndex: %s", what);
  }
  return code;
}

static int async_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const KEYS[] = {"dim", NULL};
  uint64_t dim;
  int rc;
  if ((rc = bb_config_check(init->config, KEYS, err)) || (rc = bb_config_u64(init->config, "dim", 4, &dim, err)))
    return rc;
  if (dim < 1 || dim > MAX_DIM) return fail(err, BB_ERR_INVALID_ARGUMENT, "dim must be 1..64");
  async_index *x = init->alloc->malloc(sizeof *x, init->alloc->user_data);
  if (!x) return fail(err, BB_ERR_NOMEM, "out of memory");
  memset(x, 0, sizeof *x);
  x->alloc = init->alloc;
  x->dim = (size_t)dim;
  x->next_id = 1;
  *self = x;
  return 0;
}

static void async_destroy(void *self) {
  async_index *x = self;
  const bb_allocator *a = x->alloc;
  if (x->vecs) a->free(x->vecs, a->user_data);
  if (x->ids) a->free(x->ids, a->user_data);
  if (x->queue) a->free(x->queue, a->user_data);
  a->free(x, a->user_data);
}

/* Grows an array of `size`-byte elements to hold `want`. */
static int reserve(const bb_allocator *a, void **items, size_t *cap, size_t want, size_t size) {
  if (want <= *cap) return 0;
  size_t n = *cap ? *cap * 2 : 8;
  while (n < want) n *= 2;
  void *p = a->realloc(*items, n * size, a->user_data);
  if (!p) return BB_ERR_NOMEM;
  *items = p;
  *cap = n;
  return 0;
}

/* Stores a vector of the index's dimension; the worker's Add and the host's seeding. */
static int async_store(async_index *x, const float *vec, uint64_t *id) {
  size_t vcap = x->cap, icap = x->cap;
  if (reserve(x->alloc, (void **)&x->vecs, &vcap, x->count + 1, x->dim * sizeof(float)) ||
      reserve(x->alloc, (void **)&x->ids, &icap, x->count + 1, sizeof(uint64_t)))
    return BB_ERR_NOMEM;
  x->cap = vcap < icap ? vcap : icap;
  memcpy(x->vecs + x->count * x->dim, vec, x->dim * sizeof(float));
  x->ids[x->count++] = *id = x->next_id++;
  return 0;
}

/* Queues work for the host and parks the op: the command id comes from bb_ctx_defer. */
static int defer(async_index *x, bb_ctx *ctx, work w, bb_error *err) {
  if (reserve(x->alloc, (void **)&x->queue, &x->queue_cap, x->queued + 1, sizeof(work)))
    return fail(err, BB_ERR_NOMEM, "out of memory");
  w.command = bb_ctx_defer(ctx);
  x->queue[x->queued++] = w;
  x->deferred++;
  return BB_LATER;
}

static work vector_work(work_kind kind, const bb_tensor *t) {
  work w = {kind, 0, 0, {0}, 0, 0};
  w.len = t->dtype == BB_DTYPE_FLOAT ? (size_t)t->numel : 0;
  if (w.len <= MAX_DIM) memcpy(w.vec, bb_tensor_data(t), w.len * sizeof(float));
  else w.len = MAX_DIM + 1; /* too long for any index: the worker refuses it */
  return w;
}

static int async_add(void *self, bb_ctx *ctx, const bb_tensor *vector, uint64_t *id, bb_error *err) {
  (void)id;
  return defer(self, ctx, vector_work(WORK_ADD, vector), err);
}

static int async_search(void *self, bb_ctx *ctx, const bb_tensor *query, size_t k, bb_tensor **ids,
                        bb_tensor **distances, bb_error *err) {
  (void)ids, (void)distances;
  work w = vector_work(WORK_SEARCH, query);
  w.k = k;
  return defer(self, ctx, w, err);
}

static int async_remove(void *self, bb_ctx *ctx, uint64_t id, bb_error *err) {
  work w = {WORK_REMOVE, 0, 0, {0}, 0, id};
  return defer(self, ctx, w, err);
}

static const bb_index_ops ASYNC_OPS = {async_add, async_search, async_remove, NULL};

static int async_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_index_dispatch(&ASYNC_OPS, self, ctx, call, err);
}

static const bb_component_port ASYNC_STORAGE[] = {{"vector", BB_TYPE_TENSOR_F32}};
static const bb_component_type ASYNC_FLAT_INDEX = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "AsyncFlatIndex",
    .roles = 1u << BB_ROLE_INDEX,
    .storage = ASYNC_STORAGE,
    .n_storage = 1,
    .create = async_create,
    .destroy = async_destroy,
    .invoke = async_invoke,
};

/* ---- the worker: exact k-NN ------------------------------------------------------------- */

typedef struct hit {
  uint64_t id;
  float dist;
} hit;

static int by_distance_then_id(const void *a, const void *b) {
  const hit *x = a, *y = b;
  if (x->dist != y->dist) return x->dist < y->dist ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* The euclidean distance, rounded to 1e-4: the seeded coordinates (i + 0.1, ...) are not
 * exact in float32, and rounding keeps equal distances equal so ties order by id. */
static float distance(const float *a, const float *b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
  return (float)(round(sqrt(s) * 1e4) / 1e4);
}

/* The top k as (ids int64 [k'], distances float32 [k']); a wrong dimension gives k' = 0. */
static int search_now(const async_index *x, const work *w, bb_val **out) {
  size_t found = 0;
  hit *hits = malloc((x->count ? x->count : 1) * sizeof *hits);
  if (!hits) return BB_ERR_NOMEM;
  if (w->len == x->dim) {
    for (size_t i = 0; i < x->count; i++) hits[i] = (hit){x->ids[i], distance(x->vecs + i * x->dim, w->vec, x->dim)};
    qsort(hits, x->count, sizeof *hits, by_distance_then_id);
    found = w->k < x->count ? w->k : x->count;
  }
  int64_t n = (int64_t)found;
  bb_tensor *ids = bb_tensor_new_empty(NULL, BB_DTYPE_INT64, 1, &n), *dists = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 1, &n);
  if (ids && dists)
    for (size_t i = 0; i < found; i++) {
      ((int64_t *)bb_tensor_data(ids))[i] = (int64_t)hits[i].id;
      ((float *)bb_tensor_data(dists))[i] = hits[i].dist;
    }
  out[0] = ids ? bb_val_tensor(NULL, ids) : NULL;
  out[1] = dists ? bb_val_tensor(NULL, dists) : NULL;
  bb_tensor_release(ids);
  bb_tensor_release(dists);
  free(hits);
  return out[0] && out[1] ? 0 : BB_ERR_NOMEM;
}

/* Runs the queued work and completes each parked op on the node. Returns how many ran. */
static int run_pending(async_index *x, bb_node *node, size_t *ran, bb_error *err) {
  *ran = 0;
  for (size_t q = 0; q < x->queued; q++) {
    const work *w = &x->queue[q];
    bb_val *out[2] = {NULL, NULL};
    size_t n_out = 1;
    int rc = 0;
    if (w->kind == WORK_ADD && w->len != x->dim) {
      char why[96];
      snprintf(why, sizeof why, "AsyncFlatIndex: vectors have %zu floats, got %zu", x->dim, w->len);
      rc = bb_node_fail(node, w->command, why, err);
    } else {
      if (w->kind == WORK_ADD) {
        uint64_t id;
        rc = async_store(x, w->vec, &id);
        out[0] = rc ? NULL : bb_val_u64(NULL, BB_VAL_U64, id);
      } else if (w->kind == WORK_SEARCH) {
        rc = search_now(x, w, out);
        n_out = 2;
        for (size_t j = 0; !rc && j < 8 && j < (size_t)bb_val_as_tensor(out[1])->numel; j++)
          x->last_dists[j] = ((const float *)bb_tensor_data(bb_val_as_tensor(out[1])))[j];
        x->last_found = rc ? 0 : (size_t)bb_val_as_tensor(out[1])->numel;
      } else {
        out[0] = bb_val_trigger(NULL); /* Remove is a no-op, as the reference's */
      }
      if (!rc && !out[0]) rc = BB_ERR_NOMEM;
      if (!rc) rc = bb_node_complete(node, w->command, out, n_out, err);
      else if (err) snprintf(err->message, sizeof err->message, "AsyncFlatIndex: out of memory");
    }
    bb_val_release(out[0]);
    bb_val_release(out[1]);
    if (rc) return rc;
    (*ran)++;
  }
  x->queued = 0;
  return 0;
}

/* ---- the example ------------------------------------------------------------------------ */

static int compile(uint8_t **out, size_t *out_len, bb_error *err) {
  bb_model *recorded = NULL;
  uint8_t *bytes = NULL;
  size_t len = 0;
  int rc = bb_module_build(BB_EXAMPLE_CUSTOM_INDEX.modules[0], NULL, &recorded, err);
  if (!rc) rc = bb_model_encode(recorded, &bytes, &len, err);
  bb_model_free(recorded);
  if (rc) return rc;
  bb_compiler *c = bb_compiler_new(NULL);
  if (!c) return BB_ERR_NOMEM;
  rc = bb_example_declare(c, "AsyncFlatIndex", NULL, 0, err);
  if (!rc) rc = bb_compiler_bind_index(c, "hnsw", "AsyncFlatIndex", "dim=4", err);
  if (!rc) rc = bb_compiler_compile(c, bytes, len, out, out_len, err);
  bb_compiler_free(c);
  bb_buffer_free(NULL, bytes);
  return rc;
}

typedef struct query_result {
  int suspended_at, completed_at; /* the polls that parked and resumed the Search (-1: none) */
  size_t steps, completions, failed;
  int64_t found, ids[8]; /* the "neighbors" event: ids, best first */
} query_result;

/* Invokes CustomIndexApp with a query of n floats and polls, acting as the index's worker
 * after every poll, until the node is idle. */
static int query(bb_node *node, async_index *index, const float *q, size_t n, int quiet, query_result *r,
                 bb_error *err) {
  *r = (query_result){-1, -1, 0, 0, 0, -1, {0}};
  int64_t dim = (int64_t)n;
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 1, &dim);
  if (!t) return fail(err, BB_ERR_NOMEM, "out of memory");
  memcpy(bb_tensor_data(t), q, n * sizeof *q);
  bb_named_value in = {"query", bb_val_tensor(NULL, t)};
  bb_tensor_release(t);
  int rc = in.value ? bb_node_invoke(node, "CustomIndexApp", &in, 1, 0, err) : fail(err, BB_ERR_NOMEM, "out of memory");
  bb_val_release(in.value);
  for (int poll = 0; !rc && poll < 40 && (bb_node_has_work(node) || index->queued); poll++) {
    const bb_step *steps;
    size_t n_steps, ran;
    if ((rc = bb_node_poll(node, 0, &steps, &n_steps, err))) break;
    for (size_t i = 0; i < n_steps; i++) {
      const bb_step *s = &steps[i];
      int search = s->op && strstr(s->op, "role.index::Search") != NULL;
      r->steps++;
      if (!quiet) printf("  poll %d: %-16s %s%s%s\n", poll, bb_step_kind_name(s->kind), s->op ? s->op : "",
                         s->topic ? s->topic : "", s->detail ? s->detail : "");
      r->failed += s->kind == BB_STEP_OP_FAILED;
      if (search && s->kind == BB_STEP_ASYNC_SUSPENDED && r->suspended_at < 0) r->suspended_at = poll;
      if (search && s->kind == BB_STEP_OP_COMPLETED && r->completed_at < 0) r->completed_at = poll;
      if (s->kind == BB_STEP_APP_EVENT && strcmp(s->topic, "neighbors") == 0 && s->value &&
          bb_val_kind_of(s->value) == BB_VAL_TENSOR && bb_val_as_tensor(s->value)->dtype == BB_DTYPE_INT64) {
        r->found = bb_val_as_tensor(s->value)->numel;
        const int64_t *ids = bb_tensor_data(bb_val_as_tensor(s->value));
        for (int64_t j = 0; j < r->found && j < 8; j++) r->ids[j] = ids[j];
      }
    }
    /* the host, as the index's worker, finishes what the poll parked */
    if (index->queued) {
      if ((rc = run_pending(index, node, &ran, err))) break;
      r->completions += ran;
      if (!quiet) printf("  worker completed %zu deferred op(s) after poll %d\n", ran, poll);
    }
  }
  return rc;
}

static int check(int cond, const char *what) {
  printf("  [%s] %s\n", cond ? "ok" : "FAILED", what);
  return cond ? 0 : 1;
}

static int die(const char *what, const bb_error *err) {
  fprintf(stderr, "custom_index: %s: %s\n", what, err->message);
  return 1;
}

int main(int argc, char **argv) {
  int quiet = argc > 1 && strcmp(argv[1], "--quiet") == 0;
  bb_error err = {0};
  uint8_t *artifact = NULL;
  size_t artifact_len = 0;
  if (compile(&artifact, &artifact_len, &err)) return die("compile", &err);
  bb_registry *reg = bb_registry_new(NULL);
  if (!reg || bb_registry_add(reg, &ASYNC_FLAT_INDEX, &err)) return die("registry", &err);

  bb_peer_id self = bb_peer_id_from_u64(1);
  bb_address addr = bb_address_p2p(&self);
  const char *targets[] = {"CustomIndexApp"};
  bb_node_config nc = {0};
  nc.struct_size = sizeof nc;
  nc.trace_ops = true; /* AsyncSuspended and OpCompleted steps show the op parking and resuming */
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = self;
  a.addresses = &addr;
  a.n_addresses = 1;
  a.artifact = artifact;
  a.artifact_len = artifact_len;
  a.targets = targets;
  a.n_targets = 1;
  a.registry = reg;
  a.config = &nc;
  bb_node *node = NULL;
  if (bb_install(&a, &node, NULL, &err)) return die("install", &err);
  const bb_component_type *type = NULL;
  async_index *index = bb_node_component(node, "hnsw", &type);
  if (!index || type != &ASYNC_FLAT_INDEX) return fprintf(stderr, "custom_index: no AsyncFlatIndex at hnsw\n"), 1;

  size_t bootstrap_steps = 0;
  const bb_step *steps;
  size_t n;
  if (bb_node_run_bootstrap(node, 0, &err)) return die("bootstrap", &err);
  while (bb_node_has_work(node)) {
    if (bb_node_poll(node, 0, &steps, &n, &err)) return die("poll", &err);
    bootstrap_steps += n;
  }
  printf("bootstrap drained %zu step(s)\n", bootstrap_steps);

  /* seed the installed instance, the one the node's Search will read */
  for (int i = 0; i < 5; i++) {
    float v[4] = {(float)i, i + 0.1f, i + 0.2f, i + 0.3f};
    uint64_t id;
    if (async_store(index, v, &id)) return fprintf(stderr, "custom_index: out of memory\n"), 1;
    if (!quiet) printf("add(vec[%d]) -> id=%llu\n", i, (unsigned long long)id);
  }

  static const float QUERY[] = {2.0f, 2.1f, 2.2f, 2.3f};
  query_result r;
  if (query(node, index, QUERY, 4, quiet, &r, &err)) return die("query", &err);
  printf("search([2, 2.1, 2.2, 2.3], k=3) -> [");
  for (int64_t j = 0; j < r.found && j < 8; j++)
    printf("%s(%lld, %.1f)", j ? ", " : "", (long long)r.ids[j], (double)index->last_dists[j]);
  printf("]  (%zu step(s), %zu completed by the worker)\n", r.steps, r.completions);

  static const int64_t WANT_IDS[] = {3, 2, 4};
  static const float WANT_DISTS[] = {0.0f, 2.0f, 2.0f};
  int result_ok = r.found == 3 && index->last_found == 3;
  for (int j = 0; j < 3 && result_ok; j++) result_ok = r.ids[j] == WANT_IDS[j] && index->last_dists[j] == WANT_DISTS[j];
  int failures = 0;
  failures += check(index->deferred == 1 && r.completions == 1 && r.failed == 0,
                    "Search returned BB_LATER and was completed by the host");
  failures += check(r.suspended_at >= 0 && r.completed_at > r.suspended_at,
                    "AsyncSuspended, then OpCompleted on a later poll");
  failures += check(result_ok, "result is [(3, 0.0), (2, 2.0), (4, 2.0)]");

  /* a query of the wrong dimension completes too, with nothing found */
  if (query(node, index, QUERY, 3, quiet, &r, &err)) return die("query", &err);
  printf("search([2, 2.1, 2.2], k=3) -> %lld result(s)\n", (long long)r.found);
  failures += check(index->deferred == 2 && r.completed_at > r.suspended_at && r.found == 0,
                    "a 3-float query is deferred, completed, and finds nothing");
  if (!failures) printf("Async Index installed and driven end to end.\n");

  bb_node_free(node);
  bb_registry_free(reg);
  bb_buffer_free(NULL, artifact);
  return failures ? 1 : 0;
}
