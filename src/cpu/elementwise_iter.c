/* Type checks and the broadcasting walk of the elementwise operators (see elementwise.h
 * for how a walk is planned). */
#include <stdio.h>
#include <string.h>

#include "cpu/elementwise.h"
#include "tensor/kernels/split.h"
#include "util/parallel.h"

/* ---- type checks ------------------------------------------------------------------------ */

static const char *dtype_text(int32_t dtype) {
  const char *name = bb_dtype_name(dtype);
  return name ? name : "unknown";
}

int bbi_ew_check_type(bbi_cpu_op_ctx *ctx, size_t i, uint32_t types) {
  const bb_tensor *t = bbi_cpu_input(ctx, i);
  if (!t) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "input %zu is missing", i);
  if (bbi_ew_in(types, t->dtype)) return 0;
  char list[256] = "";
  size_t used = 0;
  for (int32_t dt = 0; dt <= BBI_EW_DTYPE_MAX && used < sizeof list; dt++)
    if (bbi_ew_in(types, dt))
      used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? "," : "", dtype_text(dt));
  return bbi_cpu_fail(ctx, BB_ERR_TYPE, "input %zu has element type %s; this op takes %s", i, dtype_text(t->dtype),
                     list);
}

int bbi_ew_check_same_type(bbi_cpu_op_ctx *ctx, size_t first, size_t last) {
  const bb_tensor *a = bbi_cpu_input(ctx, first);
  for (size_t i = first + 1; a && i <= last; i++) {
    const bb_tensor *b = bbi_cpu_input(ctx, i);
    if (b && b->dtype != a->dtype)
      return bbi_cpu_fail(ctx, BB_ERR_TYPE, "input %zu has element type %s but input %zu has %s; they must be equal",
                         i, dtype_text(b->dtype), first, dtype_text(a->dtype));
  }
  return 0;
}

/* ---- broadcasting ---------------------------------------------------------------------- */

int bbi_ew_broadcast(bbi_cpu_op_ctx *ctx, size_t first, size_t last, int *rank, int64_t *dims) {
  int r = 0;
  for (size_t i = first; i <= last; i++) {
    const bb_tensor *t = bbi_cpu_input(ctx, i);
    if (!t) continue;
    int64_t merged[BB_MAX_RANK];
    bb_error err;
    if (bb_broadcast_shapes(r, dims, t->rank, t->dims, &r, merged, &err))
      return bbi_cpu_fail(ctx, err.code, "input %zu does not broadcast with the inputs before it: %s", i, err.message);
    memcpy(dims, merged, (size_t)r * sizeof *dims);
  }
  *rank = r;
  return 0;
}

void bbi_ew_plan_init(bbi_ew_plan *p, int rank, const int64_t *dims, int n_inputs, const int *in_ranks,
                     const int64_t *const *in_dims) {
  const int n = n_inputs + 1;
  memset(p, 0, sizeof *p);
  p->n_operands = n;

  /* Dimensions from the innermost outwards, size-1 ones dropped, merged where every
   * operand's stride over the outer one equals its stride over the inner one times the
   * inner size (both broadcast, or both contiguous). */
  int64_t size[BB_MAX_RANK], stride[BBI_EW_MAX_OPERANDS][BB_MAX_RANK];
  int64_t contiguous[BBI_EW_MAX_OPERANDS]; /* each operand's element count inside dim i */
  int kept = 0;
  for (int k = 0; k < n; k++) contiguous[k] = 1;
  for (int i = rank - 1; i >= 0; i--) {
    if (dims[i] == 0) return; /* empty output: p->run stays 0 */
    int64_t st[BBI_EW_MAX_OPERANDS];
    for (int k = 0; k < n; k++) {
      int64_t extent = dims[i];
      if (k > 0) {
        int j = i - (rank - in_ranks[k - 1]);
        extent = j >= 0 ? in_dims[k - 1][j] : 1;
      }
      st[k] = extent == 1 ? 0 : contiguous[k];
      contiguous[k] *= extent;
    }
    if (dims[i] == 1) continue;
    bool merge = kept > 0;
    for (int k = 0; merge && k < n; k++) merge = st[k] == stride[k][kept - 1] * size[kept - 1];
    if (merge) {
      size[kept - 1] *= dims[i];
    } else {
      size[kept] = dims[i];
      for (int k = 0; k < n; k++) stride[k][kept] = st[k];
      kept++;
    }
  }
  if (kept == 0) { /* a single element */
    p->run = 1;
    return;
  }
  /* The innermost kept dimension is the run; its strides are 0 or 1 because every
   * dimension inside it has size 1. */
  p->run = size[0];
  for (int k = 0; k < n; k++) p->step[k] = (size_t)stride[k][0];
  p->rank = kept - 1;
  for (int d = 0; d < p->rank; d++) {
    int from = kept - 1 - d; /* outermost first */
    p->dims[d] = size[from];
    for (int k = 0; k < n; k++) p->strides[k][d] = stride[k][from];
  }
}

/* Bytes per operand of the local buffer that short runs are widened with. */
#define WIDE_TILE_BYTES 4096

/* How an operand is walked when several rows of the innermost outer dimension are fused
 * into one run. */
typedef enum {
  ROWS_CONTINUE, /* contiguous into the next row, or one element for everything: as is */
  ROWS_REPEAT,   /* the same row again: copied side by side into the tile once */
  ROWS_COLUMN    /* one element per row, repeated along it: expanded into the tile per call */
} rows_mode;

/* How many rows one call covers (1: no widening). Runs shorter than a quarter of the tile
 * are widened. */
static int64_t widen_rows(const bbi_ew_plan *p, const size_t *elem_size, rows_mode *mode) {
  if (p->rank == 0) return 1;
  const int d = p->rank - 1;
  size_t widest = 0;
  for (int k = 0; k < p->n_operands; k++) {
    const int64_t stride = p->strides[k][d];
    /* a step-1 operand's row stride is the run (it continues) or 0 (it repeats) */
    mode[k] = p->step[k] ? (stride ? ROWS_CONTINUE : ROWS_REPEAT) : (stride ? ROWS_COLUMN : ROWS_CONTINUE);
    if (mode[k] != ROWS_CONTINUE && elem_size[k] > widest) widest = elem_size[k];
  }
  if (!widest || (uint64_t)p->run * widest > WIDE_TILE_BYTES / 4) return 1;
  const int64_t rows = WIDE_TILE_BYTES / (int64_t)((size_t)p->run * widest);
  return rows < p->dims[d] ? rows : p->dims[d];
}

/* tile = rows rows of `run` copies of the element at src + r * stride (bytes). */
static void expand_column(void *tile, const char *src, int64_t stride, int64_t rows, int64_t run, size_t esize) {
#define EXPAND(T)                                                                                         \
  do {                                                                                                    \
    T *t = tile;                                                                                          \
    for (int64_t r = 0; r < rows; r++) {                                                                  \
      T v;                                                                                                \
      memcpy(&v, src + r * stride, sizeof v);                                                             \
      for (int64_t j = 0; j < run; j++) *t++ = v;                                                         \
    }                                                                                                     \
  } while (0)
  switch (esize) {
  case 1: EXPAND(uint8_t); break;
  case 2: EXPAND(uint16_t); break;
  case 4: EXPAND(uint32_t); break;
  default: EXPAND(uint64_t); break;
  }
#undef EXPAND
}

/* One walk: the plan, its operands, and how it is cut into calls of fn. Without rows (a
 * single run) a call is a piece of the run, starting at a multiple of `piece` elements;
 * otherwise it is up to `rows` rows of the innermost outer dimension, `calls_per_row` of
 * them per index of the dimensions outside it, as one thread would make them. */
typedef struct ew_walk {
  const bbi_ew_plan *p;
  void *const *base;
  const size_t *elem_size;
  bbi_ew_run_fn fn;
  void *user;
  rows_mode mode[BBI_EW_MAX_OPERANDS];
  int64_t rows, calls_per_row, piece;
} ew_walk;

/* Calls [c0, c1) of a single run. */
static void walk_run(void *ctx, size_t c0, size_t c1) {
  const ew_walk *w = ctx;
  const bbi_ew_plan *p = w->p;
  void *ptr[BBI_EW_MAX_OPERANDS];
  const int64_t begin = (int64_t)c0 * w->piece, end = (int64_t)c1 * w->piece < p->run ? (int64_t)c1 * w->piece : p->run;
  for (int k = 0; k < p->n_operands; k++)
    ptr[k] = (char *)w->base[k] + (size_t)begin * p->step[k] * w->elem_size[k];
  w->fn(w->user, (size_t)(end - begin), ptr, p->step);
}

/* Calls [c0, c1) over the outer dimensions: the odometer starts at call c0. */
static void walk_rows(void *ctx, size_t c0, size_t c1) {
  const ew_walk *w = ctx;
  const bbi_ew_plan *p = w->p;
  const int n = p->n_operands, last = p->rank - 1;
  const int64_t rows = w->rows;
  union {
    uint64_t align;
    unsigned char bytes[WIDE_TILE_BYTES];
  } tile[BBI_EW_MAX_OPERANDS];
  const char *tiled[BBI_EW_MAX_OPERANDS] = {NULL}; /* the row a ROWS_REPEAT tile holds copies of */
  size_t step[BBI_EW_MAX_OPERANDS];
  for (int k = 0; k < n; k++) step[k] = rows > 1 && w->mode[k] == ROWS_COLUMN ? 1 : p->step[k];

  int64_t byte_stride[BBI_EW_MAX_OPERANDS][BB_MAX_RANK], offset[BBI_EW_MAX_OPERANDS] = {0};
  int64_t idx[BB_MAX_RANK] = {0};
  for (int k = 0; k < n; k++)
    for (int d = 0; d < p->rank; d++) byte_stride[k][d] = p->strides[k][d] * (int64_t)w->elem_size[k];
  /* where call c0 starts: its row in the innermost outer dimension, the others' indices */
  int64_t outer = (int64_t)c0 / w->calls_per_row;
  idx[last] = (int64_t)c0 % w->calls_per_row * rows;
  for (int d = last - 1; d >= 0; d--) {
    idx[d] = outer % p->dims[d];
    outer /= p->dims[d];
  }
  for (int k = 0; k < n; k++)
    for (int d = 0; d <= last; d++) offset[k] += byte_stride[k][d] * idx[d];
  void *ptr[BBI_EW_MAX_OPERANDS];
  for (size_t call = c0; call < c1; call++) {
    const int64_t take = rows > 1 && p->dims[last] - idx[last] < rows ? p->dims[last] - idx[last] : rows;
    for (int k = 0; k < n; k++) {
      ptr[k] = (char *)w->base[k] + offset[k];
      if (rows == 1 || w->mode[k] == ROWS_CONTINUE) continue;
      if (w->mode[k] == ROWS_COLUMN) {
        expand_column(tile[k].bytes, ptr[k], byte_stride[k][last], take, p->run, w->elem_size[k]);
      } else if (tiled[k] != ptr[k]) {
        const size_t row_bytes = (size_t)p->run * w->elem_size[k];
        for (int64_t r = 0; r < rows; r++) memcpy(tile[k].bytes + (size_t)r * row_bytes, ptr[k], row_bytes);
        tiled[k] = ptr[k];
      }
      ptr[k] = tile[k].bytes;
    }
    w->fn(w->user, (size_t)(p->run * take), ptr, step);
    /* odometer: advance the innermost outer dimension by `take`, carrying outwards */
    int64_t inc = take;
    int d = last;
    for (; d >= 0; d--) {
      idx[d] += inc;
      for (int k = 0; k < n; k++) offset[k] += byte_stride[k][d] * inc;
      if (idx[d] < p->dims[d]) break;
      for (int k = 0; k < n; k++) offset[k] -= byte_stride[k][d] * p->dims[d];
      idx[d] = 0;
      inc = 1;
    }
    if (d < 0) return;
  }
}

/* Large walks go to the pool, cut into calls as one thread makes them (every element meets
 * the same kernel call shape), so the result is the same on any number of threads. */
void bbi_ew_plan_each(const bbi_ew_plan *p, void *const *base, const size_t *elem_size, bbi_ew_run_fn fn,
                     void *user) {
  if (p->run == 0) return;
  ew_walk w = {p, base, elem_size, fn, user, {ROWS_CONTINUE}, 1, 1, 0};
  if (p->rank == 0) {
    /* pieces of a whole number of vector blocks */
    w.piece = (BBI_PAR_GRAIN + BBI_PAR_ALIGN - 1) / BBI_PAR_ALIGN * BBI_PAR_ALIGN;
    bbi_parallel_for((size_t)((p->run + w.piece - 1) / w.piece), 1, walk_run, &w);
    return;
  }
  w.rows = widen_rows(p, elem_size, w.mode);
  const int last = p->rank - 1;
  w.calls_per_row = (p->dims[last] + w.rows - 1) / w.rows;
  int64_t calls = w.calls_per_row;
  for (int d = 0; d < last; d++) calls *= p->dims[d];
  bbi_parallel_for((size_t)calls, bbi_par_grain((size_t)(p->run * w.rows)), walk_rows, &w);
}

void bbi_ew_apply(bb_tensor *y, const bb_tensor *const *in, int n_inputs, bbi_ew_run_fn fn, void *user) {
  int ranks[BBI_EW_MAX_OPERANDS - 1];
  const int64_t *dims[BBI_EW_MAX_OPERANDS - 1];
  void *base[BBI_EW_MAX_OPERANDS] = {bb_tensor_data(y)};
  size_t esize[BBI_EW_MAX_OPERANDS] = {bb_dtype_size(y->dtype)};
  for (int k = 0; k < n_inputs; k++) {
    ranks[k] = in[k]->rank;
    dims[k] = in[k]->dims;
    base[k + 1] = bb_tensor_data(in[k]);
    esize[k + 1] = bb_dtype_size(in[k]->dtype);
  }
  bbi_ew_plan plan;
  bbi_ew_plan_init(&plan, y->rank, y->dims, n_inputs, ranks, dims);
  bbi_ew_plan_each(&plan, base, esize, fn, user);
}
