/* Batch bands: a run of consecutive steps that each compute every sample of a batch from
 * that sample alone runs as one job of the work pool, whose tasks are fixed chunks of the
 * batch, each task taking its images through every step of the band.
 *
 * Plan (bbi_plan_find_bands, the constant plan of an inference graph): a band is two or
 * more consecutive steps, each of an op that is per-sample along axis 0 (Conv, pooling,
 * inference BatchNormalization, unary activations, Flatten, Reshape, Gemm, MatMul, an
 * elementwise op with a constant operand, Softmax), with nothing fused but an activation,
 * exactly one input that is not a constant of the plan, and every other output omitted;
 * from the second step on that input is the previous step's output, read by that step
 * alone and not a graph output. Each step's own rules on its attributes and shapes (a
 * Flatten's axis past 0, a Gemm's A not transposed and C not batched, a constant operand
 * that does not reach axis 0, ...) are checked on the tensors of the band's first run.
 *
 * Run (bbi_band_run): a float input whose leading dimension N has a divisor T in
 * [BAND_MIN_CHUNKS, BAND_MAX_CHUNKS] with N / T >= BAND_MIN_SAMPLES is cut into T chunks of
 * N / T samples, T the largest such divisor: a function of N alone, never of the thread
 * count, so a run gives the same bits on any number of threads. A task wraps its chunk of
 * the input as a tensor of its own (shape[0] = the chunk), runs each step's op on it
 * serially (a job a task starts runs on that task's thread alone), lets each intermediate
 * go as soon as the next step has read it, and copies the last step's chunk into its rows
 * of the band's output. The intermediates of a chunk are 1/T of the unbanded ones.
 *
 * The first run with an input shape (and thread count), and the first after the steps ran
 * whole, runs chunk 0 on the caller alone, checks every step's rule on its tensors and that
 * every output keeps the chunk's rows; that run also fills the steps' per-session caches
 * (packed weights, in the layout a chunk takes) and memos, which the later tasks only read. A band that fails a rule is remembered as declined for that
 * shape and its steps run one by one, as they do for inputs no divisor fits.
 *
 * Memory: a task on a worker allocates from the pool of its slot (session.h, band_slots)
 * and uses that slot's workspace; the caller's tasks use the session's own. Each slot
 * holds at most what one chunk of the band needs at once (the recycling pool's bound:
 * three times its high-water mark). */
#include <string.h>

#include "bb/artifact.h"
#include "cpu/session.h"
#include "util/mem.h"
#include "util/parallel.h"

#define BAND_MIN_CHUNKS 4
/* (eight chunks, not more: each step's op has a cost per call that smaller chunks repeat,
 * which at batch 64 cost more than their cache gains; four, not fewer: a worker that comes
 * late still finds work) */
#define BAND_MAX_CHUNKS 8
/* (chunks of fewer samples repeat each op's cost per call more than a band saves: the small
 * CNN at batch 32 in chunks of 4 ran 5 % slower in WebAssembly on one thread than whole; in chunks of 8, 2 % faster) */
#define BAND_MIN_SAMPLES 8

typedef enum band_kind {
  BAND_NONE,
  BAND_CONV,
  BAND_POOL,
  BAND_UNARY,
  BAND_BATCHNORM,
  BAND_FLATTEN,
  BAND_RESHAPE,
  BAND_GEMM,
  BAND_MATMUL,
  BAND_BINARY,
  BAND_SOFTMAX,
} band_kind;

static band_kind kind_of(const bbi_plan_step *st) {
  static const struct {
    const char *op;
    band_kind kind;
  } kinds[] = {
      {"Conv", BAND_CONV},          {"MaxPool", BAND_POOL},        {"AveragePool", BAND_POOL},
      {"GlobalAveragePool", BAND_POOL}, {"GlobalMaxPool", BAND_POOL}, {"BatchNormalization", BAND_BATCHNORM},
      {"Relu", BAND_UNARY},         {"LeakyRelu", BAND_UNARY},     {"Sigmoid", BAND_UNARY},
      {"Tanh", BAND_UNARY},         {"Elu", BAND_UNARY},           {"Selu", BAND_UNARY},
      {"HardSigmoid", BAND_UNARY},  {"HardSwish", BAND_UNARY},     {"Softplus", BAND_UNARY},
      {"Softsign", BAND_UNARY},     {"Clip", BAND_UNARY},          {"Gelu", BAND_UNARY},
      {"Erf", BAND_UNARY},          {"Exp", BAND_UNARY},           {"Neg", BAND_UNARY},
      {"Abs", BAND_UNARY},          {"Sqrt", BAND_UNARY},          {"Flatten", BAND_FLATTEN},
      {"Reshape", BAND_RESHAPE},    {"Gemm", BAND_GEMM},           {"MatMul", BAND_MATMUL},
      {"Add", BAND_BINARY},         {"Sub", BAND_BINARY},          {"Mul", BAND_BINARY},
      {"Div", BAND_BINARY},         {"Softmax", BAND_SOFTMAX},     {"LogSoftmax", BAND_SOFTMAX},
  };
  if (!st->node || st->update || !bb_domain_is_onnx(st->node->domain)) return BAND_NONE;
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (strcmp(st->node->op_type, kinds[i].op) == 0) return kinds[i].kind;
  return BAND_NONE;
}

/* The index of the step's one input that is not a constant of p, or BBI_NO_VALUE when it
 * has none or several, or the step cannot be in a band. */
static uint32_t batched_input(const bb_cpu_session *s, const bbi_plan *p, const bbi_plan_step *st) {
  const band_kind kind = kind_of(st);
  if (kind == BAND_NONE || st->addend != BBI_NO_VALUE || st->n_out < 1 || st->out[0] == BBI_NO_VALUE) return BBI_NO_VALUE;
  if (st->n_chain && st->act.kind == BBI_ACTIVATION_NONE) return BBI_NO_VALUE;
  for (uint32_t k = 1; k < st->n_out; k++)
    if (st->out[k] != BBI_NO_VALUE) return BBI_NO_VALUE;
  uint32_t x = BBI_NO_VALUE;
  for (uint32_t k = 0; k < st->n_in; k++) {
    if (st->in[k] == BBI_NO_VALUE || bbi_session_is_constant(s, p, st->in[k])) continue;
    if (x != BBI_NO_VALUE) return BBI_NO_VALUE;
    x = k;
  }
  /* the operand a step's rule reads must be the batched one: A of Gemm and MatMul, X of
   * the others (Reshape's shape is a constant) */
  if (x == BBI_NO_VALUE || (kind != BAND_BINARY && x != 0)) return BBI_NO_VALUE;
  return x;
}

int bbi_plan_find_bands(bb_cpu_session *s, bbi_plan *p) {
  for (uint32_t i = 0; i < p->n_steps;) {
    bbi_plan_step *first = &p->steps[i];
    uint32_t x = batched_input(s, p, first), n = 1;
    if (x == BBI_NO_VALUE) {
      i++;
      continue;
    }
    first->band_x = x;
    while (i + n < p->n_steps) {
      const bbi_plan_step *prev = &p->steps[i + n - 1];
      bbi_plan_step *next = &p->steps[i + n];
      const uint32_t nx = batched_input(s, p, next), v = prev->out[0];
      if (nx == BBI_NO_VALUE || next->in[nx] != v || s->is_output[v] || bbi_plan_uses(p, v) != 1) break;
      next->band_x = nx;
      n++;
    }
    if (n >= 2) {
      first->band = n;
      first->band_memo = bbi_arena_alloc(s->arena, sizeof *first->band_memo);
      if (!first->band_memo) return BB_ERR_NOMEM;
      memset(first->band_memo, 0, sizeof *first->band_memo);
      p->stats.batch_bands++;
    }
    i += n;
  }
  return 0;
}

/* ---- running ------------------------------------------------------------------------------ */

typedef struct band_slot_use {
  const bb_allocator *alloc;
  bbi_cpu_workspace *workspace;
  bb_error *err;
} band_slot_use;

typedef struct band_job {
  bb_cpu_session *s;
  bbi_plan_step *first;
  const bb_tensor *x;
  bb_tensor *y;
  int64_t chunk;        /* samples a task takes */
  size_t first_chunk;   /* the job's task t takes chunk first_chunk + t */
  size_t y_chunk_bytes; /* bytes of y one chunk fills */
  size_t max_chunk_bytes; /* the most a step's value for one chunk may take: max_output_bytes / chunks */
  bool check;           /* the first run with this shape: check each step's rule */
  bool retry[BAND_MAX_CHUNKS]; /* a task found a step's cache holding other data */
  band_slot_use slots[BBI_PARALLEL_MAX_THREADS];
  int rc[BBI_PARALLEL_MAX_THREADS]; /* per participant: its first failure */
} band_job;

/* Whether a step that made `y` from the chunk `x` (its input band_x) computed each sample
 * from that sample alone, by its op's rule (the leading dimension kept is checked by the
 * caller). */
static bool per_sample(const bb_cpu_session *s, const bbi_plan_step *st, bb_tensor *const *ins, const bb_tensor *y) {
  const bb_tensor *x = ins[st->band_x];
  const bb_attrlist *attrs = &st->node->attrs;
  switch (kind_of(st)) {
  case BAND_CONV:
  case BAND_POOL:
  case BAND_UNARY: return x->rank >= 1;
  case BAND_BATCHNORM: return bb_attr_get_int(attrs, "training_mode", 0) == 0;
  case BAND_FLATTEN: {
    int64_t axis = bb_attr_get_int(attrs, "axis", 1);
    if (axis < 0) axis += x->rank;
    return axis >= 1;
  }
  case BAND_RESHAPE: {
    const bb_tensor *shape = st->n_in > 1 ? ins[1] : NULL;
    if (!shape || shape->numel < 1 || (shape->dtype != BB_DTYPE_INT64 && shape->dtype != BB_DTYPE_INT32)) return false;
    const int64_t lead = bbi_cpu_get_i64(shape, 0);
    return lead == -1 || (lead == 0 && bb_attr_get_int(attrs, "allowzero", 0) == 0);
  }
  case BAND_GEMM: {
    const bb_tensor *c = st->n_in > 2 ? ins[2] : NULL;
    return bb_attr_get_int(attrs, "transA", 0) == 0 && x->rank == 2 && (!c || c->rank < 2 || c->dims[0] == 1);
  }
  case BAND_MATMUL: return x->rank >= 2 && ins[1] && ins[1]->rank == 2;
  case BAND_BINARY: {
    const bb_tensor *c = ins[st->band_x ? 0 : 1];
    if (!c || !bb_tensor_same_shape(x, y)) return false;
    if (s->opset < 7 && c->rank > 0 && c->rank < x->rank) {
      /* before opset 7 a constant of lower rank lines up with x's dims from `axis` on
       * (by default its trailing ones): at axis 0 it meets the batch */
      int64_t axis = bb_attr_get_int(attrs, "axis", x->rank - c->rank);
      if (axis < 0) axis += x->rank;
      return axis >= 1 || c->dims[0] == 1;
    }
    return c->rank < x->rank || (c->rank == x->rank && c->dims[0] == 1);
  }
  case BAND_SOFTMAX: {
    int64_t axis = bb_attr_get_int(attrs, "axis", s->opset >= 13 ? -1 : 1);
    if (axis < 0) axis += x->rank;
    return axis >= 1;
  }
  default: return false;
  }
}

/* Takes chunk c through every step of the band; *out gets the last step's chunk. With
 * `fixed` the steps' caches are only read (tasks run side by side). Returns 0,
 * BBI_BAND_DECLINED (a rule failed while checking), BAND_CACHE_MISSED (a step asked its
 * fixed cache for other data: the chunk must run again on the caller alone), or an error
 * recorded in u->err. */
#define BAND_CACHE_MISSED 2
static int run_chunk(const band_job *j, size_t c, const band_slot_use *u, bool fixed, bb_tensor **out) {
  bb_cpu_session *s = j->s;
  const bb_tensor *x = j->x;
  *out = NULL;
  int64_t dims[BB_MAX_RANK];
  memcpy(dims, x->dims, sizeof dims);
  dims[0] = j->chunk;
  const size_t sample_bytes = bb_tensor_nbytes(x) / (size_t)x->dims[0];
  bb_tensor *cur = bb_tensor_wrap(u->alloc, x->dtype, x->rank, dims,
                                  (char *)bb_tensor_data(x) + c * (size_t)j->chunk * sample_bytes, NULL, NULL);
  if (!cur) return bb_error_set(u->err, BB_ERR_NOMEM, "out of memory running a batch band");
  const uint32_t n = j->first->band;
  for (uint32_t k = 0; k < n; k++) {
    bbi_plan_step *st = &j->first[k];
    bb_tensor *ins[64], *outs[64];
    if (st->n_in > 64 || st->n_out > 64) {
      bb_tensor_release(cur);
      return BBI_BAND_DECLINED;
    }
    for (uint32_t i = 0; i < st->n_in; i++)
      ins[i] = i == st->band_x ? cur : st->in[i] == BBI_NO_VALUE ? NULL : s->values[st->in[i]];
    bbi_cpu_epilogue epilogue = {st->act, NULL, false};
    bbi_cpu_node_state state = {&st->cache, &st->memo, bbi_session_own_inputs(s, st, ins), st->n_chain ? &epilogue : NULL,
                                !(s->rewrites_off & BB_CPU_REWRITE_WINOGRAD), fixed, false, 0, false};
    int rc = bbi_cpu_run_op(st->op, st->node, s->opset, ins, st->n_in, outs, st->n_out, u->alloc, &s->limits,
                            u->workspace, &state, u->err);
    if (!rc && state.cache_missed) rc = BAND_CACHE_MISSED;
    for (uint32_t i = 1; i < st->n_out; i++) bb_tensor_release(outs[i]);
    bb_tensor *y = outs[0];
    if (!rc && !y) rc = BBI_BAND_DECLINED;
    if (!rc && (y->dtype != BB_DTYPE_FLOAT || y->rank < 1 || y->dims[0] != j->chunk)) rc = BBI_BAND_DECLINED;
    /* a value over the cap for the whole batch: the steps run one by one refuse it */
    if (!rc && bb_tensor_nbytes(y) > j->max_chunk_bytes) rc = BBI_BAND_DECLINED;
    if (!rc && j->check && !per_sample(s, st, ins, y)) rc = BBI_BAND_DECLINED;
    if (!rc && st->n_chain && !epilogue.applied) bbi_f32_vactivate(&st->act, (size_t)y->numel, NULL, bb_tensor_data(y));
    bb_tensor_release(cur);
    cur = y;
    if (rc) {
      bb_tensor_release(cur);
      return rc;
    }
  }
  *out = cur;
  return 0;
}

/* Runs chunk c and copies its result into its rows of y. */
static int chunk_into(const band_job *j, size_t c, const band_slot_use *u, bool fixed) {
  bb_tensor *part;
  int rc = run_chunk(j, c, u, fixed, &part);
  if (rc) return rc;
  if (bb_tensor_nbytes(part) != j->y_chunk_bytes || part->rank != j->y->rank ||
      memcmp(part->dims + 1, j->y->dims + 1, (size_t)(part->rank - 1) * sizeof part->dims[0]))
    rc = BBI_BAND_DECLINED;
  else
    memcpy((char *)bb_tensor_data(j->y) + c * j->y_chunk_bytes, bb_tensor_data(part), j->y_chunk_bytes);
  bb_tensor_release(part);
  return rc;
}

/* A task: its chunk with the caches read only. A chunk whose step wanted a cache in
 * another layout (a Conv that left Winograd's path for the direct one on a non-finite
 * output) is marked to run again after the job, on the caller, where the cache may
 * change: a chunk's result never depends on what an earlier run left in a cache. */
static void band_task(void *ctx, size_t task, size_t slot) {
  band_job *j = ctx;
  const size_t c = j->first_chunk + task;
  const int rc = chunk_into(j, c, &j->slots[slot], true);
  if (rc == BAND_CACHE_MISSED) j->retry[c] = true;
  else if (rc && !j->rc[slot]) j->rc[slot] = rc;
}

/* The largest divisor of n in [BAND_MIN_CHUNKS, BAND_MAX_CHUNKS] that leaves chunks of
 * BAND_MIN_SAMPLES samples or more, or 0. */
static int64_t chunks_of(int64_t n) {
  for (int64_t t = BAND_MAX_CHUNKS; t >= BAND_MIN_CHUNKS; t--)
    if (n % t == 0 && n / t >= BAND_MIN_SAMPLES) return t;
  return 0;
}

/* The slots workers' tasks use: made on the caller before the job, kept by the session. */
static int ensure_slots(bb_cpu_session *s, size_t width) {
  for (size_t i = 1; i < width; i++) {
    if (s->band_slots[i]) continue;
    bbi_band_slot *b = bbi_mem_calloc(s->alloc, 1, sizeof *b);
    if (!b) return BB_ERR_NOMEM;
    if (!(b->pool = bbi_mem_pool_new(s->alloc))) {
      bbi_mem_free(s->alloc, b);
      return BB_ERR_NOMEM;
    }
    b->workspace.alloc = bbi_mem_pool_allocator(b->pool);
    s->band_slots[i] = b;
  }
  return 0;
}

void bbi_band_slots_free(bb_cpu_session *s) {
  for (size_t i = 0; i < BBI_PARALLEL_MAX_THREADS; i++) {
    bbi_band_slot *b = s->band_slots[i];
    if (!b) continue;
    bbi_cpu_workspace_free(&b->workspace);
    bbi_mem_pool_close(b->pool);
    bbi_mem_free(s->alloc, b);
    s->band_slots[i] = NULL;
  }
}

int bbi_band_run(bb_cpu_session *s, bbi_plan_step *first, bb_tensor **out, bb_error *err) {
  *out = NULL;
  bbi_band_memo *m = first->band_memo;
  if (!m) return BBI_BAND_DECLINED;
  const bb_tensor *x = s->values[first->in[first->band_x]];
  const int64_t chunks = x && x->dtype == BB_DTYPE_FLOAT && x->rank >= 1 && x->numel ? chunks_of(x->dims[0]) : 0;
  if (!chunks) {
    /* the steps run whole, and may leave their caches in another layout than the chunks
     * take: the next band run checks again on the caller first, so that its tasks never
     * write a cache */
    m->rank = -1;
    return BBI_BAND_DECLINED;
  }
  const int64_t n_batch = x->dims[0];
  const size_t width = bbi_parallel_width();
  const bool known =
      m->rank == x->rank && m->width == width && !memcmp(m->dims, x->dims, (size_t)x->rank * sizeof x->dims[0]);
  if (known && !m->ok) return BBI_BAND_DECLINED;
  if (ensure_slots(s, width)) return bb_error_set(err, BB_ERR_NOMEM, "out of memory running a batch band");
  band_job j;
  memset(&j, 0, sizeof j);
  j.s = s, j.first = first, j.x = x, j.chunk = n_batch / chunks, j.check = !known;
  const size_t cap = s->limits.max_output_bytes ? s->limits.max_output_bytes : BB_CPU_DEFAULT_MAX_OUTPUT_BYTES;
  j.max_chunk_bytes = cap / (size_t)chunks;
  j.slots[0] = (band_slot_use){s->run_alloc, &s->memory->workspace, err};
  for (size_t i = 1; i < width; i++) {
    bbi_band_slot *b = s->band_slots[i];
    bb_error_clear(&b->err);
    j.slots[i] = (band_slot_use){bbi_mem_pool_allocator(b->pool), &b->workspace, &b->err};
  }
  for (uint32_t k = 0; k < first->band; k++) first[k].cache.alloc = s->alloc;
  bb_tensor *part = NULL;
  if (!known) {
    /* chunk 0 alone on the caller: the steps' rules, the output's shape, the caches */
    memset(m, 0, sizeof *m);
    m->rank = x->rank, m->width = width;
    memcpy(m->dims, x->dims, sizeof m->dims);
    bb_error probe_err;
    bb_error_clear(&probe_err);
    const band_slot_use probe = {s->run_alloc, &s->memory->workspace, &probe_err};
    /* declined, or an error the steps run one by one will report */
    if (run_chunk(&j, 0, &probe, false, &part)) return BBI_BAND_DECLINED;
    m->out_rank = part->rank;
    memcpy(m->out_dims, part->dims, sizeof m->out_dims);
    m->out_dims[0] = n_batch;
    j.first_chunk = 1;
  }
  int rc = 0;
  j.y = bb_tensor_new_empty(s->run_alloc, BB_DTYPE_FLOAT, m->out_rank, m->out_dims);
  if (!j.y) rc = bb_error_set(err, BB_ERR_NOMEM, "out of memory running a batch band");
  if (!rc) {
    j.y_chunk_bytes = bb_tensor_nbytes(j.y) / (size_t)chunks;
    if (part) memcpy(bb_tensor_data(j.y), bb_tensor_data(part), j.y_chunk_bytes);
    bbi_parallel_run((size_t)chunks - j.first_chunk, width, band_task, &j);
    bool retried = false;
    for (int64_t c = 0; c < chunks && !rc; c++)
      if (j.retry[c]) rc = chunk_into(&j, (size_t)c, &j.slots[0], false), retried = true;
    if (retried) m->rank = -1; /* the caches may have changed: the next run checks again */
    for (size_t i = 0; i < width && !rc; i++)
      if ((rc = j.rc[i]) && i > 0 && rc != BBI_BAND_DECLINED) *err = s->band_slots[i]->err;
    for (size_t i = 0; i < width && rc != BBI_BAND_DECLINED; i++)
      if (j.rc[i] == BBI_BAND_DECLINED) rc = BBI_BAND_DECLINED;
  }
  bb_tensor_release(part);
  if (rc) {
    bb_tensor_release(j.y);
    /* a chunk that broke a rule after the first run: the steps run one by one from now on */
    if (rc == BBI_BAND_DECLINED) m->ok = false;
    return rc;
  }
  m->ok = true;
  *out = j.y;
  return 0;
}
