/* Kernels cut across the work pool (see split.h). Every piece is a call of the kernel on a
 * sub-range of the dimension being cut, which the kernel computes exactly as it would
 * inside one whole call. */
#include "tensor/kernels/split.h"

#include "util/parallel.h"

typedef struct window_job {
  const bbi_window2d *g;
  const float *in;
  float *out;
  size_t ld;
  int64_t *indices;
} window_job;

static size_t window_cost(const bbi_window2d *g) { return g->oh * g->ow * g->kh * g->kw; }

/* ---- column matrices: channels ----------------------------------------------------------- */

static void im2col_piece(void *ctx, size_t c0, size_t c1) {
  const window_job *j = ctx;
  const bbi_window2d *g = j->g;
  bbi_f32_im2col_2d(g, c1 - c0, j->in + c0 * g->ih * g->iw, j->out + c0 * g->kh * g->kw * j->ld, j->ld);
}

void bbi_par_f32_im2col_2d(const bbi_window2d *g, size_t channels, const float *x, float *col, size_t ld) {
  window_job j = {g, x, col, ld, NULL};
  bbi_parallel_for(channels, bbi_par_grain(window_cost(g)), im2col_piece, &j);
}

/* Channels c0..c1 fill columns c0·kh·kw.. of every patch row: pieces never overlap. */
static void patches_piece(void *ctx, size_t c0, size_t c1) {
  const window_job *j = ctx;
  const bbi_window2d *g = j->g;
  bbi_f32_im2col_patches_2d(g, c1 - c0, j->in + c0 * g->ih * g->iw, j->out + c0 * g->kh * g->kw, j->ld);
}

void bbi_par_f32_im2col_patches_2d(const bbi_window2d *g, size_t channels, const float *x, float *col, size_t ld) {
  window_job j = {g, x, col, ld, NULL};
  bbi_parallel_for(channels, bbi_par_grain(window_cost(g)), patches_piece, &j);
}

/* Channels c0..c1 fill rows c0·kh·kw.. of the panels: pieces never overlap. */
typedef struct pack_job {
  const bbi_window2d *g;
  const float *x;
  size_t k;
  int as_a;
  void *packed;
} pack_job;

static void pack_piece(void *ctx, size_t c0, size_t c1) {
  const pack_job *j = ctx;
  /* channel 0 went first; the rest are offset by one */
  bbi_f32_im2col_pack_2d(NULL, j->g, c0 + 1, c1 + 1, j->x, j->g->ih * j->g->iw, j->k, j->as_a, j->packed);
}

int bbi_par_f32_im2col_pack_2d(const bbi_window2d *g, size_t channels, const float *x, size_t k, int as_a,
                               void *packed) {
  /* whether the kernel takes the shape does not depend on the channels asked for: the
   * first channel's call decides for all */
  if (channels == 0 || !bbi_f32_im2col_pack_2d(NULL, g, 0, 1, x, g->ih * g->iw, k, as_a, packed)) return 0;
  pack_job j = {g, x, k, as_a, packed};
  bbi_parallel_for(channels - 1, bbi_par_grain(window_cost(g)), pack_piece, &j);
  return 1;
}

/* Channel c of x receives only the rows of channel c: pieces never touch the same element. */
static void col2im_piece(void *ctx, size_t c0, size_t c1) {
  const window_job *j = ctx;
  const bbi_window2d *g = j->g;
  bbi_f32_col2im_2d(g, c1 - c0, j->in + c0 * g->kh * g->kw * j->ld, j->ld, j->out + c0 * g->ih * g->iw);
}

void bbi_par_f32_col2im_2d(const bbi_window2d *g, size_t channels, const float *col, size_t ld, float *x) {
  window_job j = {g, col, x, ld, NULL};
  bbi_parallel_for(channels, bbi_par_grain(window_cost(g)), col2im_piece, &j);
}

/* ---- pooling: planes ------------------------------------------------------------------------ */

/* A plane's cost in elements: its windows' taps, and per output and per plane what the
 * kernel spends outside the taps (a store, an index, a row's setup; about 8 taps' time
 * per output, 32 per plane on small planes), so planes of a few outputs each still come
 * out as several pieces where they take as long as one large plane. */
static size_t pool_cost(const bbi_window2d *g) { return g->oh * g->ow * (g->kh * g->kw + 8) + 32; }

/* A piece's indices count from its own first plane; moved to count from x's. */
static void shift_indices(int64_t *indices, size_t count, int64_t by) {
  for (size_t i = 0; i < count; i++) indices[i] += by;
}

static void maxpool_piece(void *ctx, size_t p0, size_t p1) {
  const window_job *j = ctx;
  const bbi_window2d *g = j->g;
  const size_t out_plane = g->oh * g->ow;
  int64_t *idx = j->indices ? j->indices + p0 * out_plane : NULL;
  bbi_f32_maxpool2d(g, p1 - p0, j->in + p0 * g->ih * g->iw, j->out + p0 * out_plane, idx);
  if (idx && p0) shift_indices(idx, (p1 - p0) * out_plane, (int64_t)(p0 * g->ih * g->iw));
}

void bbi_par_f32_maxpool2d(const bbi_window2d *g, size_t planes, const float *x, float *y, int64_t *indices) {
  window_job j = {g, x, y, 0, indices};
  bbi_parallel_for(planes, bbi_par_grain(pool_cost(g)), maxpool_piece, &j);
}

static void avgpool_piece(void *ctx, size_t p0, size_t p1) {
  const window_job *j = ctx;
  const bbi_window2d *g = j->g;
  bbi_f32_avgpool2d(g, p1 - p0, j->in + p0 * g->ih * g->iw, j->out + p0 * g->oh * g->ow);
}

void bbi_par_f32_avgpool2d(const bbi_window2d *g, size_t planes, const float *x, float *y) {
  window_job j = {g, x, y, 0, NULL};
  bbi_parallel_for(planes, bbi_par_grain(pool_cost(g)), avgpool_piece, &j);
}

/* ---- rows: reductions and softmax ----------------------------------------------------------- */

typedef struct rows_job {
  bbi_reduce_op op;
  size_t cols;  /* elements per row (reduce_rows, softmax); len × inner per outer block (strided) */
  size_t len, inner;
  const float *x;
  float *y;
} rows_job;

static void reduce_rows_piece(void *ctx, size_t r0, size_t r1) {
  const rows_job *j = ctx;
  bbi_f32_reduce_rows(j->op, r1 - r0, j->cols, j->x + r0 * j->cols, j->y + r0);
}

void bbi_par_f32_reduce_rows(bbi_reduce_op op, size_t rows, size_t cols, const float *x, float *y) {
  rows_job j = {op, cols, 0, 0, x, y};
  bbi_parallel_for(rows, bbi_par_grain(cols), reduce_rows_piece, &j);
}

static void reduce_strided_piece(void *ctx, size_t o0, size_t o1) {
  const rows_job *j = ctx;
  bbi_f32_reduce_strided(j->op, o1 - o0, j->len, j->inner, j->x + o0 * j->len * j->inner, j->y + o0 * j->inner);
}

void bbi_par_f32_reduce_strided(bbi_reduce_op op, size_t outer, size_t len, size_t inner, const float *x,
                                float *y) {
  rows_job j = {op, 0, len, inner, x, y};
  bbi_parallel_for(outer, bbi_par_grain(len * inner), reduce_strided_piece, &j);
}

static void softmax_piece(void *ctx, size_t r0, size_t r1) {
  const rows_job *j = ctx;
  bbi_f32_softmax_rows(r1 - r0, j->cols, j->x + r0 * j->cols, j->y + r0 * j->cols);
}

static void log_softmax_piece(void *ctx, size_t r0, size_t r1) {
  const rows_job *j = ctx;
  bbi_f32_log_softmax_rows(r1 - r0, j->cols, j->x + r0 * j->cols, j->y + r0 * j->cols);
}

void bbi_par_f32_softmax_rows(size_t rows, size_t cols, const float *x, float *y) {
  rows_job j = {BBI_REDUCE_SUM, cols, 0, 0, x, y};
  bbi_parallel_for(rows, bbi_par_grain(cols), softmax_piece, &j);
}

void bbi_par_f32_log_softmax_rows(size_t rows, size_t cols, const float *x, float *y) {
  rows_job j = {BBI_REDUCE_SUM, cols, 0, 0, x, y};
  bbi_parallel_for(rows, bbi_par_grain(cols), log_softmax_piece, &j);
}

/* An optimizer update: items are blocks of BBI_PAR_ALIGN elements, so every piece but the
 * last is whole vectors and each element meets the code it meets in one call over all n. */
typedef struct update_job {
  const bbi_f32_update_coef *k;
  size_t n;
  const bbi_f32_update_arrays *a;
} update_job;

/* The arrays from element `at` on (a state and its output are both there or both absent). */
static bbi_f32_update_arrays update_from(const bbi_f32_update_arrays *a, size_t at) {
  bbi_f32_update_arrays b = *a;
  b.p += at, b.g += at, b.p_out += at;
  for (size_t i = 0; i < 2; i++)
    if (b.state[i]) b.state[i] += at, b.state_out[i] += at;
  return b;
}

static void update_piece(void *ctx, size_t begin, size_t end) {
  const update_job *j = ctx;
  size_t lo = begin * BBI_PAR_ALIGN, hi = end * BBI_PAR_ALIGN < j->n ? end * BBI_PAR_ALIGN : j->n;
  const bbi_f32_update_arrays piece = update_from(j->a, lo);
  bbi_f32_update(j->k, hi - lo, &piece);
}

/* About 8192 elements a piece: up to seven arrays' worth of loads and stores, tens of
 * microseconds, well above a task's hand-out. */
#define UPDATE_PIECE_BLOCKS (8192 / BBI_PAR_ALIGN)

void bbi_par_f32_update(const bbi_f32_update_coef *k, size_t n, const bbi_f32_update_arrays *a) {
  update_job j = {k, n, a};
  bbi_parallel_for((n + BBI_PAR_ALIGN - 1) / BBI_PAR_ALIGN, UPDATE_PIECE_BLOCKS, update_piece, &j);
}
