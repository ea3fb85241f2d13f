/* Strided box copies. A box is first simplified (axes of size 1 dropped, axes that are
 * contiguous with their inner neighbour in both source and destination merged), so most
 * copies end as a few long memcpy runs; what stays is walked with an odometer over the
 * outer axes and an innermost run chosen once per box. */
#include <string.h>

#include "cpu/shape_copy.h"
#include "tensor/kernels/kernels.h"
#include "tensor/kernels/split.h"
#include "util/parallel.h"

typedef struct box {
  int rank;
  int64_t dims[BBI_COPY_MAX_RANK];
  int64_t ss[BBI_COPY_MAX_RANK]; /* source strides, bytes */
  int64_t ds[BBI_COPY_MAX_RANK]; /* destination strides, bytes */
} box;

typedef enum run_kind { RUN_MEMCPY, RUN_FILL, RUN_STRIDED, RUN_TILED } run_kind;

/* What happens at each position of the outer odometer. */
typedef struct run {
  run_kind kind;
  size_t esize;
  int64_t n, ss, ds;    /* the innermost axis */
  int64_t m, ds2;      /* RUN_TILED: the axis along which the source is contiguous */
} run;

/* Transposed boxes are copied in square tiles whose rows span one 64-byte cache line
 * (at least 8 elements): measured best for 1000² and 1024² float tiles, where larger
 * tiles suffer from cache-set aliasing at power-of-two strides. */
static int64_t tile_side(size_t es) { return es >= 8 ? 8 : (int64_t)(64 / es); }

static void simplify(box *b) {
  int r = 0;
  for (int k = 0; k < b->rank; k++) {
    if (b->dims[k] == 1) continue;
    if (r && b->ss[r - 1] == b->ss[k] * b->dims[k] && b->ds[r - 1] == b->ds[k] * b->dims[k]) {
      b->dims[r - 1] *= b->dims[k];
      b->ss[r - 1] = b->ss[k];
      b->ds[r - 1] = b->ds[k];
      continue;
    }
    b->dims[r] = b->dims[k];
    b->ss[r] = b->ss[k];
    b->ds[r] = b->ds[k];
    r++;
  }
  b->rank = r;
}

/* Copies n elements with the given byte strides. Called with a constant es, so each
 * element size gets its own loop with a fixed-size memcpy. */
static inline void copy_elems(size_t es, int64_t n, const char *s, int64_t ss, char *d, int64_t ds) {
  for (int64_t i = 0; i < n; i++) memcpy(d + i * ds, s + i * ss, es);
}

/* A tile-by-tile transpose: the source is contiguous along a (m elements), the
 * destination along b (n elements). */
static inline void copy_tiled(size_t es, int64_t m, int64_t n, const char *s, int64_t ssb, char *d, int64_t dsa) {
  const int64_t t = tile_side(es);
  for (int64_t a0 = 0; a0 < m; a0 += t) {
    int64_t a1 = a0 + t < m ? a0 + t : m;
    for (int64_t b0 = 0; b0 < n; b0 += t) {
      int64_t b1 = b0 + t < n ? b0 + t : n;
      for (int64_t a = a0; a < a1; a++) {
        char *drow = d + a * dsa;
        const char *scol = s + a * (int64_t)es;
        for (int64_t bi = b0; bi < b1; bi++) memcpy(drow + bi * (int64_t)es, scol + bi * ssb, es);
      }
    }
  }
}

static void do_strided(const run *r, const char *s, char *d) {
  switch (r->esize) {
  case 1: copy_elems(1, r->n, s, r->ss, d, r->ds); break;
  case 2: copy_elems(2, r->n, s, r->ss, d, r->ds); break;
  case 4: copy_elems(4, r->n, s, r->ss, d, r->ds); break;
  case 8: copy_elems(8, r->n, s, r->ss, d, r->ds); break;
  default: copy_elems(r->esize, r->n, s, r->ss, d, r->ds); break;
  }
}

/* 4-byte elements whose strides are whole elements: the vector transpose kernel on square
 * tiles of this side (4-byte moves copy every bit pattern, NaNs' included). */
#define TILE4 64

static void copy_tiled4(const run *r, const char *s, char *d) {
  const size_t ldx = (size_t)r->ss / 4, ldy = (size_t)r->ds2 / 4;
  const float *x = (const float *)(const void *)s;
  float *y = (float *)(void *)d;
  for (int64_t a0 = 0; a0 < r->m; a0 += TILE4) {
    const size_t na = (size_t)(r->m - a0 < TILE4 ? r->m - a0 : TILE4);
    for (int64_t b0 = 0; b0 < r->n; b0 += TILE4) {
      const size_t nb = (size_t)(r->n - b0 < TILE4 ? r->n - b0 : TILE4);
      bbi_f32_transpose(nb, na, x + (size_t)b0 * ldx + (size_t)a0, ldx, y + (size_t)a0 * ldy + (size_t)b0, ldy);
    }
  }
}

static bool tiled4(const run *r) {
  return r->esize == 4 && r->ss > 0 && r->ss % 4 == 0 && r->ds2 > 0 && r->ds2 % 4 == 0;
}

static void do_tiled(const run *r, const char *s, char *d) {
  if (tiled4(r) && ((uintptr_t)s | (uintptr_t)d) % 4 == 0) {
    copy_tiled4(r, s, d);
    return;
  }
  switch (r->esize) {
  case 1: copy_tiled(1, r->m, r->n, s, r->ss, d, r->ds2); break;
  case 2: copy_tiled(2, r->m, r->n, s, r->ss, d, r->ds2); break;
  case 4: copy_tiled(4, r->m, r->n, s, r->ss, d, r->ds2); break;
  case 8: copy_tiled(8, r->m, r->n, s, r->ss, d, r->ds2); break;
  default: copy_tiled(r->esize, r->m, r->n, s, r->ss, d, r->ds2); break;
  }
}

static void do_run(const run *r, const char *s, char *d) {
  switch (r->kind) {
  case RUN_MEMCPY: memcpy(d, s, (size_t)r->n * r->esize); break;
  case RUN_FILL: bbi_copy_fill(d, r->esize, r->n, s); break;
  case RUN_STRIDED: do_strided(r, s, d); break;
  case RUN_TILED: do_tiled(r, s, d); break;
  }
}

/* Runs r at every index of the axes outer[0..n_outer), outermost first. Offsets are
 * kept as integers so negative strides never form out-of-range pointers. */
static void walk(const box *b, const int *outer, int n_outer, const char *src, char *dst, const run *r) {
  int64_t idx[BBI_COPY_MAX_RANK] = {0};
  int64_t so = 0, dof = 0;
  for (;;) {
    do_run(r, src + so, dst + dof);
    int k = n_outer - 1;
    for (; k >= 0; k--) {
      int a = outer[k];
      if (++idx[k] < b->dims[a]) {
        so += b->ss[a];
        dof += b->ds[a];
        break;
      }
      so -= b->ss[a] * (b->dims[a] - 1);
      dof -= b->ds[a] * (b->dims[a] - 1);
      idx[k] = 0;
    }
    if (k < 0) return;
  }
}

/* A box copied in pieces on the pool: each piece copies the same elements whichever
 * participant runs it. */
typedef struct box_job {
  const box *b;
  const int *outer;
  int n_outer;
  const char *src;
  char *dst;
  const run *r;
} box_job;

/* A transposed box cut along its tiled axis (the source's contiguous one). */
static void tiled_piece(void *ctx, size_t a0, size_t a1) {
  const box_job *j = ctx;
  run r = *j->r;
  r.m = (int64_t)(a1 - a0);
  walk(j->b, j->outer, j->n_outer, j->src + (int64_t)a0 * (int64_t)r.esize, j->dst + (int64_t)a0 * r.ds2, &r);
}

/* A box cut along its outermost walked axis: piece [i0, i1) of that axis, the rest whole. */
static void outer_piece(void *ctx, size_t i0, size_t i1) {
  const box_job *j = ctx;
  box b = *j->b;
  const int a = j->outer[0];
  b.dims[a] = (int64_t)(i1 - i0);
  walk(&b, j->outer, j->n_outer, j->src + (int64_t)i0 * b.ss[a], j->dst + (int64_t)i0 * b.ds[a], j->r);
}

void bbi_copy_strided(size_t esize, int rank, const int64_t *dims, const char *src, const int64_t *src_strides,
                     char *dst, const int64_t *dst_strides) {
  box b = {rank, {0}, {0}, {0}};
  for (int k = 0; k < rank; k++) {
    if (dims[k] == 0) return;
    b.dims[k] = dims[k];
    b.ss[k] = src_strides[k];
    b.ds[k] = dst_strides[k];
  }
  simplify(&b);
  if (b.rank == 0) {
    memcpy(dst, src, esize);
    return;
  }
  const int64_t es = (int64_t)esize;
  const int in = b.rank - 1;
  run r = {RUN_STRIDED, esize, b.dims[in], b.ss[in], b.ds[in], 0, 0};
  int tiled_axis = -1;
  if (r.ds == es && r.ss == es) {
    r.kind = RUN_MEMCPY;
  } else if (r.ds == es && r.ss == 0) {
    r.kind = RUN_FILL;
  } else if (r.ds == es) {
    for (int k = 0; k < in; k++)
      if (b.ss[k] == es) tiled_axis = k;
    if (tiled_axis >= 0) {
      r.kind = RUN_TILED;
      r.m = b.dims[tiled_axis];
      r.ds2 = b.ds[tiled_axis];
    }
  }
  int outer[BBI_COPY_MAX_RANK], n_outer = 0;
  int64_t outer_count = 1;
  for (int k = 0; k < in; k++)
    if (k != tiled_axis) outer[n_outer++] = k, outer_count *= b.dims[k];
  if (r.kind == RUN_TILED) { /* transposes: pieces of the tiled axis on the pool */
    box_job j = {&b, outer, n_outer, src, dst, &r};
    bbi_parallel_for((size_t)r.m, bbi_par_grain((size_t)(r.n * outer_count)), tiled_piece, &j);
    return;
  }
  if (n_outer > 0) { /* many runs: pieces of the outermost axis on the pool */
    box_job j = {&b, outer, n_outer, src, dst, &r};
    const int64_t per_index = outer_count / b.dims[outer[0]] * r.n;
    bbi_parallel_for((size_t)b.dims[outer[0]], bbi_par_grain((size_t)per_index), outer_piece, &j);
    return;
  }
  walk(&b, outer, n_outer, src, dst, &r);
}

void bbi_copy_strides(int rank, const int64_t *dims, int64_t unit, int64_t *strides) {
  int64_t s = unit;
  for (int k = rank - 1; k >= 0; k--) {
    strides[k] = s;
    s *= dims[k];
  }
}

void bbi_copy_fill(char *dst, size_t esize, int64_t n, const void *value) {
  if (n <= 0) return;
  memcpy(dst, value, esize);
  /* doubling copies: log2(n) memcpy calls */
  size_t done = 1, total = (size_t)n;
  while (done < total) {
    size_t chunk = done < total - done ? done : total - done;
    memcpy(dst + done * esize, dst, chunk * esize);
    done += chunk;
  }
}
