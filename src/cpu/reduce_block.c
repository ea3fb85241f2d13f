/* Reduction passes over outer×len×inner blocks. When inner > 1 the len rows of a block
 * are accumulated into the inner outputs one whole row at a time (contiguous, so the
 * loops vectorise); when inner == 1 each output is a contiguous row reduction. The
 * float forms lean on the SIMD kernels of tensor/kernels. */
#include <math.h>

#include "cpu/reduce_block.h"
#include "tensor/kernels/split.h"
#include "util/parallel.h"

/* Elements per stack buffer for the float/double passes that need temporaries. */
#define CHUNK 1024
/* Independent accumulators per contiguous row in the double and int64 passes. */
#define LANES 8

/* ---- float ------------------------------------------------------------------------------ */

typedef struct chunk_sums {
  const float *x;
  int64_t len;
  float *parts;
} chunk_sums;

static void sum_chunks(void *ctx, size_t c0, size_t c1) {
  const chunk_sums *j = ctx;
  for (size_t c = c0; c < c1; c++) {
    const int64_t at = (int64_t)c * CHUNK, n = j->len - at < CHUNK ? j->len - at : CHUNK;
    bbi_f32_reduce_rows(BBI_REDUCE_SUM, 1, (size_t)n, j->x + at, &j->parts[c]);
  }
}

/* A long row's sum: its chunks' partial sums, computed side by side, added up in double
 * in order. */
static float long_row_sum(int64_t len, const float *x) {
  float parts[BBI_PARALLEL_MAX_TASKS];
  const int64_t per_pass = (int64_t)(sizeof parts / sizeof parts[0]) * CHUNK;
  double total = 0.0;
  for (int64_t at = 0; at < len; at += per_pass) {
    const int64_t n = len - at < per_pass ? len - at : per_pass;
    chunk_sums j = {x + at, n, parts};
    const size_t chunks = (size_t)((n + CHUNK - 1) / CHUNK);
    bbi_parallel_for(chunks, bbi_par_grain(CHUNK), sum_chunks, &j);
    for (size_t c = 0; c < chunks; c++) total += parts[c];
  }
  return (float)total;
}

typedef struct long_rows {
  int64_t len;
  const float *x;
  float *y;
} long_rows;

static void sum_long_rows(void *ctx, size_t r0, size_t r1) {
  const long_rows *j = ctx;
  for (size_t r = r0; r < r1; r++) j->y[r] = long_row_sum(j->len, j->x + (int64_t)r * j->len);
}

/* Sums of contiguous rows. A long row is summed in chunks whose partial sums add up in
 * double, so the rounding error grows with the chunk length, not with the row's (a
 * 2^20-element row is then about as accurate as numpy's pairwise sum). The chunks are
 * fixed by the row's length and their partial sums added in order, so on several threads
 * (rows side by side, or one row's chunks side by side) the sum is the same. */
static void f32_sum_rows(int64_t rows, int64_t len, const float *x, float *y) {
  if (len <= CHUNK) {
    bbi_par_f32_reduce_rows(BBI_REDUCE_SUM, (size_t)rows, (size_t)len, x, y);
  } else if (rows > 1) {
    long_rows j = {len, x, y};
    bbi_parallel_for((size_t)rows, bbi_par_grain((size_t)len), sum_long_rows, &j);
  } else {
    *y = long_row_sum(len, x);
  }
}

/* SUMSQ / ABSSUM of contiguous rows: map a chunk, then sum it with the SIMD kernel. */
static void f32_mapped_rows(bbi_rblock_op op, int64_t rows, int64_t len, const float *x, float *y) {
  float tmp[CHUNK];
  for (int64_t r = 0; r < rows; r++, x += len) {
    double total = 0.0;
    for (int64_t c = 0; c < len; c += CHUNK) {
      size_t n = (size_t)(len - c < CHUNK ? len - c : CHUNK);
      if (op == BBI_RBLOCK_SUMSQ) bbi_f32_vbinary(BBI_BINARY_MUL, n, x + c, x + c, tmp);
      else bbi_f32_vunary(BBI_UNARY_ABS, n, x + c, tmp);
      float part;
      bbi_f32_reduce_rows(BBI_REDUCE_SUM, 1, n, tmp, &part);
      total += part;
    }
    y[r] = (float)total;
  }
}

static void f32_mapped_strided(bbi_rblock_op op, int64_t outer, int64_t len, int64_t inner, const float *x, float *y) {
  for (int64_t o = 0; o < outer; o++, y += inner) {
    for (int64_t i = 0; i < inner; i++) y[i] = 0.0f;
    for (int64_t l = 0; l < len; l++, x += inner) {
      if (op == BBI_RBLOCK_SUMSQ)
        for (int64_t i = 0; i < inner; i++) y[i] += x[i] * x[i];
      else
        for (int64_t i = 0; i < inner; i++) y[i] += fabsf(x[i]);
    }
  }
}

/* log(sum(exp(x - m))) + m with m the maximum; an infinite or NaN maximum is the answer. */
static float f32_lse_finish(float m, float sum) { return isfinite(m) ? m + logf(sum) : m; }

static void f32_lse(int64_t outer, int64_t len, int64_t inner, const float *x, float *y) {
  bbi_f32_reduce_strided(BBI_REDUCE_MAX, (size_t)outer, (size_t)len, (size_t)inner, x, y);
  float tmp[CHUNK], sum[CHUNK];
  if (inner == 1) {
    for (int64_t r = 0; r < outer; r++, x += len) {
      double total = 0.0;
      for (int64_t c = 0; c < len && isfinite(y[r]); c += CHUNK) {
        size_t n = (size_t)(len - c < CHUNK ? len - c : CHUNK);
        float part;
        bbi_f32_vbinary_c(BBI_BINARY_SUB, n, x + c, y[r], tmp);
        bbi_f32_vunary(BBI_UNARY_EXP, n, tmp, tmp);
        bbi_f32_reduce_rows(BBI_REDUCE_SUM, 1, n, tmp, &part);
        total += part;
      }
      y[r] = f32_lse_finish(y[r], (float)total);
    }
    return;
  }
  for (int64_t o = 0; o < outer; o++, x += len * inner, y += inner) {
    for (int64_t i0 = 0; i0 < inner; i0 += CHUNK) {
      size_t n = (size_t)(inner - i0 < CHUNK ? inner - i0 : CHUNK);
      for (size_t i = 0; i < n; i++) sum[i] = 0.0f;
      for (int64_t l = 0; l < len; l++) {
        bbi_f32_vbinary(BBI_BINARY_SUB, n, x + l * inner + i0, y + i0, tmp);
        bbi_f32_vunary(BBI_UNARY_EXP, n, tmp, tmp);
        bbi_f32_vbinary(BBI_BINARY_ADD, n, sum, tmp, sum);
      }
      for (size_t i = 0; i < n; i++) y[i0 + (int64_t)i] = f32_lse_finish(y[i0 + (int64_t)i], sum[i]);
    }
  }
}

static void f32_mapped(bbi_rblock_op op, int64_t outer, int64_t len, int64_t inner, const float *x, float *y) {
  if (inner == 1) f32_mapped_rows(op, outer, len, x, y);
  else f32_mapped_strided(op, outer, len, inner, x, y);
}

static void f32_lse_op(bbi_rblock_op op, int64_t outer, int64_t len, int64_t inner, const float *x, float *y) {
  (void)op;
  f32_lse(outer, len, inner, x, y);
}

/* A pass whose outer blocks are independent, run on outer sub-ranges side by side. */
typedef void (*f32_pass_fn)(bbi_rblock_op op, int64_t outer, int64_t len, int64_t inner, const float *x, float *y);

typedef struct outer_job {
  f32_pass_fn fn;
  bbi_rblock_op op;
  int64_t len, inner;
  const float *x;
  float *y;
} outer_job;

static void outer_piece(void *ctx, size_t o0, size_t o1) {
  const outer_job *j = ctx;
  j->fn(j->op, (int64_t)(o1 - o0), j->len, j->inner, j->x + (int64_t)o0 * j->len * j->inner, j->y + (int64_t)o0 * j->inner);
}

static void split_outer(f32_pass_fn fn, bbi_rblock_op op, int64_t outer, int64_t len, int64_t inner, const float *x,
                        float *y) {
  outer_job j = {fn, op, len, inner, x, y};
  bbi_parallel_for((size_t)outer, bbi_par_grain((size_t)(len * inner)), outer_piece, &j);
}

void bbi_rblock_f32(bbi_rblock_op op, int64_t outer, int64_t len, int64_t inner, const float *x, float *y) {
  switch (op) {
  case BBI_RBLOCK_SUM:
    if (inner == 1) f32_sum_rows(outer, len, x, y);
    else bbi_par_f32_reduce_strided(BBI_REDUCE_SUM, (size_t)outer, (size_t)len, (size_t)inner, x, y);
    break;
  case BBI_RBLOCK_MAX: bbi_par_f32_reduce_strided(BBI_REDUCE_MAX, (size_t)outer, (size_t)len, (size_t)inner, x, y); break;
  case BBI_RBLOCK_MIN: bbi_par_f32_reduce_strided(BBI_REDUCE_MIN, (size_t)outer, (size_t)len, (size_t)inner, x, y); break;
  case BBI_RBLOCK_SUMSQ:
  case BBI_RBLOCK_ABSSUM:
    split_outer(f32_mapped, op, outer, len, inner, x, y);
    break;
  case BBI_RBLOCK_LSE: split_outer(f32_lse_op, op, outer, len, inner, x, y); break;
  case BBI_RBLOCK_PROD: break; /* run in double by the caller */
  }
}

/* ---- double ----------------------------------------------------------------------------- */

static double f64_identity(bbi_rblock_op op) {
  switch (op) {
  case BBI_RBLOCK_PROD: return 1.0;
  case BBI_RBLOCK_MAX:
  case BBI_RBLOCK_LSE: return -INFINITY;
  case BBI_RBLOCK_MIN: return INFINITY;
  default: return 0.0;
  }
}

/* acc[i] = acc[i] op x[i] for i < n (LSE is done elsewhere). */
static void f64_accumulate(bbi_rblock_op op, int64_t n, double *acc, const double *x) {
  switch (op) {
  case BBI_RBLOCK_SUM:
    for (int64_t i = 0; i < n; i++) acc[i] += x[i];
    break;
  case BBI_RBLOCK_PROD:
    for (int64_t i = 0; i < n; i++) acc[i] *= x[i];
    break;
  case BBI_RBLOCK_SUMSQ:
    for (int64_t i = 0; i < n; i++) acc[i] += x[i] * x[i];
    break;
  case BBI_RBLOCK_ABSSUM:
    for (int64_t i = 0; i < n; i++) acc[i] += fabs(x[i]);
    break;
  case BBI_RBLOCK_MAX: /* a NaN in x is taken; a NaN in acc stays (no comparison is true) */
    for (int64_t i = 0; i < n; i++)
      if (x[i] > acc[i] || x[i] != x[i]) acc[i] = x[i];
    break;
  case BBI_RBLOCK_MIN:
    for (int64_t i = 0; i < n; i++)
      if (x[i] < acc[i] || x[i] != x[i]) acc[i] = x[i];
    break;
  case BBI_RBLOCK_LSE: break;
  }
}

/* Contiguous rows, accumulated in LANES independent lanes that are merged at the end
 * (squares and absolute values are already mapped, so their lanes merge by summing). */
static void f64_rows(bbi_rblock_op op, int64_t rows, int64_t len, const double *x, double *y) {
  const bbi_rblock_op merge = op == BBI_RBLOCK_SUMSQ || op == BBI_RBLOCK_ABSSUM ? BBI_RBLOCK_SUM : op;
  for (int64_t r = 0; r < rows; r++, x += len) {
    double acc[LANES];
    for (int k = 0; k < LANES; k++) acc[k] = f64_identity(op);
    int64_t l = 0;
    for (; l + LANES <= len; l += LANES) f64_accumulate(op, LANES, acc, x + l);
    for (int k = 1; k < LANES; k++) f64_accumulate(merge, 1, acc, acc + k);
    for (; l < len; l++) f64_accumulate(op, 1, acc, x + l);
    y[r] = acc[0];
  }
}

static void f64_lse(int64_t outer, int64_t len, int64_t inner, const double *x, double *y) {
  bbi_rblock_f64(BBI_RBLOCK_MAX, outer, len, inner, x, y);
  double sum[CHUNK];
  for (int64_t o = 0; o < outer; o++) {
    const double *xo = x + o * len * inner;
    double *m = y + o * inner;
    for (int64_t i0 = 0; i0 < inner; i0 += CHUNK) {
      int64_t n = inner - i0 < CHUNK ? inner - i0 : CHUNK;
      for (int64_t i = 0; i < n; i++) sum[i] = 0.0;
      for (int64_t l = 0; l < len; l++) {
        const double *row = xo + l * inner + i0;
        for (int64_t i = 0; i < n; i++) sum[i] += exp(row[i] - m[i0 + i]);
      }
      for (int64_t i = 0; i < n; i++)
        if (isfinite(m[i0 + i])) m[i0 + i] += log(sum[i]);
    }
  }
}

void bbi_rblock_f64(bbi_rblock_op op, int64_t outer, int64_t len, int64_t inner, const double *x, double *y) {
  if (op == BBI_RBLOCK_LSE) {
    f64_lse(outer, len, inner, x, y);
    return;
  }
  const double init = f64_identity(op);
  if (inner == 1) {
    f64_rows(op, outer, len, x, y);
    return;
  }
  for (int64_t o = 0; o < outer; o++, y += inner) {
    for (int64_t i = 0; i < inner; i++) y[i] = init;
    for (int64_t l = 0; l < len; l++, x += inner) f64_accumulate(op, inner, y, x);
  }
}

/* ---- int64 ------------------------------------------------------------------------------ */

static int64_t i64_identity(bbi_rblock_op op, bool is_unsigned) {
  switch (op) {
  case BBI_RBLOCK_PROD: return 1;
  case BBI_RBLOCK_MAX: return is_unsigned ? 0 : INT64_MIN;
  case BBI_RBLOCK_MIN: return is_unsigned ? -1 /* UINT64_MAX */ : INT64_MAX;
  default: return 0;
  }
}

/* acc[i] = acc[i] op x[i], in uint64 arithmetic so overflow wraps instead of being undefined. */
static void i64_accumulate(bbi_rblock_op op, bool is_unsigned, int64_t n, int64_t *acc, const int64_t *x) {
  switch (op) {
  case BBI_RBLOCK_SUM:
    for (int64_t i = 0; i < n; i++) acc[i] = (int64_t)((uint64_t)acc[i] + (uint64_t)x[i]);
    break;
  case BBI_RBLOCK_PROD:
    for (int64_t i = 0; i < n; i++) acc[i] = (int64_t)((uint64_t)acc[i] * (uint64_t)x[i]);
    break;
  case BBI_RBLOCK_SUMSQ:
    for (int64_t i = 0; i < n; i++) acc[i] = (int64_t)((uint64_t)acc[i] + (uint64_t)x[i] * (uint64_t)x[i]);
    break;
  case BBI_RBLOCK_ABSSUM:
    for (int64_t i = 0; i < n; i++) {
      uint64_t v = !is_unsigned && x[i] < 0 ? 0 - (uint64_t)x[i] : (uint64_t)x[i];
      acc[i] = (int64_t)((uint64_t)acc[i] + v);
    }
    break;
  case BBI_RBLOCK_MAX:
    for (int64_t i = 0; i < n; i++)
      if (is_unsigned ? (uint64_t)x[i] > (uint64_t)acc[i] : x[i] > acc[i]) acc[i] = x[i];
    break;
  case BBI_RBLOCK_MIN:
    for (int64_t i = 0; i < n; i++)
      if (is_unsigned ? (uint64_t)x[i] < (uint64_t)acc[i] : x[i] < acc[i]) acc[i] = x[i];
    break;
  case BBI_RBLOCK_LSE: break; /* run in double by the caller */
  }
}

static void i64_rows(bbi_rblock_op op, bool is_unsigned, int64_t rows, int64_t len, const int64_t *x, int64_t *y) {
  const bbi_rblock_op merge = op == BBI_RBLOCK_SUMSQ || op == BBI_RBLOCK_ABSSUM ? BBI_RBLOCK_SUM : op;
  for (int64_t r = 0; r < rows; r++, x += len) {
    int64_t acc[LANES];
    for (int k = 0; k < LANES; k++) acc[k] = i64_identity(op, is_unsigned);
    int64_t l = 0;
    for (; l + LANES <= len; l += LANES) i64_accumulate(op, is_unsigned, LANES, acc, x + l);
    for (int k = 1; k < LANES; k++) i64_accumulate(merge, is_unsigned, 1, acc, acc + k);
    for (; l < len; l++) i64_accumulate(op, is_unsigned, 1, acc, x + l);
    y[r] = acc[0];
  }
}

void bbi_rblock_i64(bbi_rblock_op op, bool is_unsigned, int64_t outer, int64_t len, int64_t inner, const int64_t *x,
                   int64_t *y) {
  const int64_t init = i64_identity(op, is_unsigned);
  if (inner == 1) {
    i64_rows(op, is_unsigned, outer, len, x, y);
    return;
  }
  for (int64_t o = 0; o < outer; o++, y += inner) {
    for (int64_t i = 0; i < inner; i++) y[i] = init;
    for (int64_t l = 0; l < len; l++, x += inner) i64_accumulate(op, is_unsigned, inner, y, x);
  }
}
