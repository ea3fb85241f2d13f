/* CPU operator ConvTranspose for 1- to 3-D spatial inputs [N, C, D1, ...]: float32
 * through the packed GEMM and col2im, the other types by scattering each input element
 * through the kernel into double accumulators, rounded once into the output type. */
#include <string.h>

#include "cpu/nn.h"
#include "tensor/kernels/split.h"
#include "util/mem.h"
#include "util/parallel.h"

static const int32_t FLOAT_NO_BF16[] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_UNDEFINED};

/* ---- ConvTranspose ------------------------------------------------------------------------- */

#define CT_MAX_SPATIAL 3

/* Reads an INTS attribute of exactly n values (or, when alt > 0, of alt values of which the
 * last n are kept) into v, keeping dflt when absent; *given tells whether it was present. */
static int ct_ints(bbi_cpu_op_ctx *ctx, const char *name, int n, int alt, int64_t *v, int64_t dflt, bool *given) {
  for (int i = 0; i < n; i++) v[i] = dflt;
  const bb_attr *a = bb_attr_find(&ctx->node->attrs, name);
  if (given) *given = a != NULL;
  if (!a) return 0;
  if (a->type != BB_ATTR_INTS || ((int)a->n_ints != n && (alt <= 0 || (int)a->n_ints != alt)))
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "attribute %s must hold %d integers", name, n);
  memcpy(v, a->ints + ((int)a->n_ints - n), (size_t)n * sizeof *v);
  return 0;
}

/* Where input position i and kernel position k land: per spatial dim
 * o = i·stride − pad_begin + k·dilation. */
typedef struct ct_geom {
  int nd;
  int64_t in[CT_MAX_SPATIAL], kernel[CT_MAX_SPATIAL], stride[CT_MAX_SPATIAL], dil[CT_MAX_SPATIAL];
  int64_t pad_begin[CT_MAX_SPATIAL], out[CT_MAX_SPATIAL];
  int64_t in_size, out_size, k_size;
} ct_geom;

/* Flat output offset for flat input position i and flat kernel position k, or -1 when it
 * falls outside the output (cut by the padding). */
static int64_t ct_target(const ct_geom *g, int64_t i, int64_t k) {
  int64_t ip[CT_MAX_SPATIAL], kp[CT_MAX_SPATIAL], off = 0;
  for (int d = g->nd - 1; d >= 0; d--) {
    ip[d] = i % g->in[d], i /= g->in[d];
    kp[d] = k % g->kernel[d], k /= g->kernel[d];
  }
  for (int d = 0; d < g->nd; d++) {
    int64_t p = ip[d] * g->stride[d] - g->pad_begin[d] + kp[d] * g->dil[d];
    if (p < 0 || p >= g->out[d]) return -1;
    off = off * g->out[d] + p;
  }
  return off;
}

/* Images with fewer input positions than this are batched side by side in one product
 * (a GEMM fills its tiles well from a few hundred columns on), up to a bounded matrix. */
#define CT_MIN_COLUMNS 512
#define CT_MAX_COL_BYTES (128u << 10)

/* What the chunks of images of one float ConvTranspose share. A chunk's scratch holds a
 * column matrix, the gathered input (`in_at`) and the GEMM's scratch (`scratch_at`). */
typedef struct ct_job {
  const ct_geom *g;
  bbi_window2d win;
  bool planar;
  int64_t n_batch, c_in, cg, mg, m_out, rows, npos, group, chunk;
  const float *x, *w;
  float *y;
  size_t in_at, scratch_at, scratch_size;
} ct_job;

/* Images n0.. (one chunk, fewer for the last), every group: the product, then col2im into
 * the images' outputs (which hold the bias), with the scratch at `mem`. */
static int ct_chunk(const void *job, int64_t n0, char *mem) {
  const ct_job *j = job;
  const ct_geom *g = j->g;
  const int64_t nc = j->n_batch - n0 < j->chunk ? j->n_batch - n0 : j->chunk, npos = j->npos, cg = j->cg;
  const int64_t rows = j->rows, mg = j->mg, c_in = j->c_in;
  const size_t ld = (size_t)(nc * npos);
  float *col = (float *)mem, *gathered = (float *)(mem + j->in_at);
  void *scratch = mem + j->scratch_at;
  int rc = 0;
  for (int64_t gi = 0; gi < j->group && !rc; gi++) {
    const float *xg = j->x + (n0 * c_in + gi * cg) * npos;
    if (nc > 1) /* the group's channels of every image, side by side: [cg, nc·npos] */
      for (int64_t c = 0; c < cg; c++)
        for (int64_t i = 0; i < nc; i++)
          memcpy(gathered + (size_t)c * ld + (size_t)(i * npos), xg + (i * c_in + c) * npos,
                 (size_t)npos * sizeof(float));
    bbi_f32_gemm_args a;
    memset(&a, 0, sizeof a);
    a.m = (size_t)rows, a.n = ld, a.k = (size_t)cg;
    a.alpha = 1.0f;
    a.trans_a = 1; /* W's rows for this group are cg × (M/group·K) */
    a.a = j->w + gi * cg * rows, a.lda = (size_t)rows;
    a.b = nc > 1 ? gathered : xg, a.ldb = ld;
    a.c = col, a.ldc = ld;
    if ((rc = bbi_f32_gemm(&a, scratch, j->scratch_size))) break;
    for (int64_t i = 0; i < nc; i++) {
      float *yg = j->y + ((n0 + i) * j->m_out + gi * mg) * g->out_size;
      const float *ci = col + i * npos;
      if (j->planar) {
        bbi_par_f32_col2im_2d(&j->win, (size_t)mg, ci, ld, yg);
        continue;
      }
      for (int64_t k = 0; k < g->k_size; k++)
        for (int64_t p = 0; p < npos; p++) {
          int64_t off = ct_target(g, p, k);
          if (off < 0) continue;
          for (int64_t ml = 0; ml < mg; ml++)
            yg[ml * g->out_size + off] += ci[(size_t)(ml * g->k_size + k) * ld + (size_t)p];
        }
    }
  }
  return rc;
}

/* A depthwise transposed convolution (one input and one output channel per group, 1-
 * or 2-D): each output plane, which holds its bias, gets tap by tap in the kernel's order
 * the tap's weight times each input element added at the element's target. These are
 * the products (one per element: the GEMM's K is 1) and the sums, in the same order, that
 * the GEMM and col2im make for each group, without a product per group; planes are the
 * pool's pieces. */
typedef struct ct_dw_job {
  const bbi_window2d *win;
  size_t channels;
  const float *x, *w;
  float *y;
} ct_dw_job;

/* The input indices i in [0, n) whose target i·s − p + k·d lies in [0, out): [*lo, *hi). */
static void ct_dw_span(size_t n, size_t out, size_t s, size_t p, size_t k, size_t d, size_t *lo, size_t *hi) {
  const int64_t shift = (int64_t)(k * d) - (int64_t)p; /* target of i: i·s + shift */
  int64_t first = shift >= 0 ? 0 : (-shift + (int64_t)s - 1) / (int64_t)s;
  int64_t last = (int64_t)out - 1 - shift < 0 ? -1 : ((int64_t)out - 1 - shift) / (int64_t)s; /* inclusive */
  if (last > (int64_t)n - 1) last = (int64_t)n - 1;
  *lo = (size_t)first, *hi = last < first ? (size_t)first : (size_t)(last + 1);
}

static void ct_dw_planes(void *ctx, size_t p0, size_t p1) {
  const ct_dw_job *j = ctx;
  const bbi_window2d *g = j->win;
  for (size_t p = p0; p < p1; p++) {
    const float *x = j->x + p * g->oh * g->ow, *w = j->w + (p % j->channels) * g->kh * g->kw;
    float *y = j->y + p * g->ih * g->iw;
    for (size_t ky = 0; ky < g->kh; ky++) {
      size_t y0, y1;
      ct_dw_span(g->oh, g->ih, g->sh, g->ph, ky, g->dh, &y0, &y1);
      for (size_t kx = 0; kx < g->kw; kx++) {
        size_t x0, x1;
        ct_dw_span(g->ow, g->iw, g->sw, g->pw, kx, g->dw, &x0, &x1);
        const float wv = w[ky * g->kw + kx];
        if (x1 <= x0) continue;
        const size_t n = x1 - x0, ox0 = x0 * g->sw + kx * g->dw - g->pw; /* x0's target column */
        for (size_t iy = y0; iy < y1; iy++) {
          const float *xr = x + iy * g->ow + x0;
          float *yr = y + (iy * g->sh + ky * g->dh - g->ph) * g->iw + ox0;
          if (g->sw == 1)
            for (size_t i = 0; i < n; i++) yr[i] += wv * xr[i];
          else
            for (size_t i = 0; i < n; i++) yr[i * g->sw] += wv * xr[i];
        }
      }
    }
  }
}

/* The GEMM scratch of a chunk's product and of the last chunk's, by the given sizing. */
static size_t ct_gemm_scratch(size_t (*size_of)(size_t, size_t, size_t), size_t rows, size_t cols,
                              size_t last_cols, size_t k) {
  size_t full = size_of(rows, cols, k), last = size_of(rows, last_cols, k);
  return full > last ? full : last;
}

/* float32: per group, the column matrix col = W_gᵀ·X_g ([M/group·K] × in positions, by the
 * packed GEMM, for `chunk` images side by side) is scattered into Y (col2im), which starts
 * as the bias. 1- and 2-D use the window kernels; 3-D finds each target by arithmetic. The
 * chunks are independent: on several threads they are the pool's tasks when there are
 * enough of them (bbi_nn_split_chunks), else each GEMM is cut across the pool. */
static int convtranspose_f32(bbi_cpu_op_ctx *ctx, const ct_geom *g, int64_t group, bb_tensor *y) {
  const bb_tensor *x = ctx->inputs[0], *w = ctx->inputs[1], *b = bbi_cpu_input(ctx, 2);
  int64_t n_batch = x->dims[0], c_in = x->dims[1], cg = c_in / group, mg = w->dims[1], m_out = mg * group;
  int64_t rows = mg * g->k_size, npos = g->in_size;
  /* one image's column matrix is the most this op asks for at once (more images only up to a bound) */
  int rc = bbi_cpu_check_size(ctx, rows * npos, sizeof(float), "the column matrix");
  if (rc) return rc;
  bool planar = g->nd <= 2;
  int64_t chunk = 1;
  if (planar && npos < CT_MIN_COLUMNS) {
    chunk = (CT_MIN_COLUMNS + npos - 1) / npos;
    int64_t fit = (int64_t)(CT_MAX_COL_BYTES / sizeof(float)) / ((rows + cg) * npos);
    chunk = chunk < fit ? chunk : fit;
    chunk = chunk < n_batch ? chunk : n_batch;
    chunk = bbi_nn_even_chunk(n_batch, chunk > 1 ? chunk : 1);
  }
  size_t cols = (size_t)(chunk * npos), last_cols = (size_t)((n_batch % chunk ? n_batch % chunk : chunk) * npos);
  size_t col_bytes = (size_t)rows * cols * sizeof(float), in_bytes = chunk > 1 ? (size_t)cg * cols * sizeof(float) : 0;
  size_t in_at = (col_bytes + 63) & ~(size_t)63, scratch_at = (in_at + in_bytes + 63) & ~(size_t)63;
  const size_t chunks = (size_t)((n_batch + chunk - 1) / chunk), width = bbi_parallel_width();
  const size_t alone = ct_gemm_scratch(bbi_f32_gemm_scratch_size_alone, (size_t)rows, cols, last_cols, (size_t)cg);
  const bool split = bbi_nn_split_chunks(chunks, width, (scratch_at + alone + 63) & ~(size_t)63);
  const size_t scratch_size =
      split ? alone : ct_gemm_scratch(bbi_f32_gemm_scratch_size, (size_t)rows, cols, last_cols, (size_t)cg);
  ct_job j;
  memset(&j, 0, sizeof j);
  const size_t slot_bytes = (scratch_at + scratch_size + 63) & ~(size_t)63;
  char *mem = bbi_cpu_scratch(ctx, (split ? width : 1) * slot_bytes + 64);
  if (!mem) return BB_ERR_NOMEM;
  mem = (char *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
  const float *bd = b ? bb_tensor_data(b) : NULL;
  float *yd = bb_tensor_data(y);
  for (int64_t p = 0; p < n_batch * m_out; p++)
    for (int64_t o = 0; o < g->out_size; o++) yd[p * g->out_size + o] = bd ? bd[p % m_out] : 0.0f;
  /* the output is the image the windows slide over; the input positions are their grid */
  bbi_window2d win = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0};
  if (planar) {
    int h = g->nd == 2 ? 0 : -1, v = g->nd - 1;
    if (h == 0) {
      win.ih = (size_t)g->out[0], win.oh = (size_t)g->in[0], win.kh = (size_t)g->kernel[0];
      win.sh = (size_t)g->stride[0], win.dh = (size_t)g->dil[0], win.ph = (size_t)g->pad_begin[0];
    }
    win.iw = (size_t)g->out[v], win.ow = (size_t)g->in[v], win.kw = (size_t)g->kernel[v];
    win.sw = (size_t)g->stride[v], win.dw = (size_t)g->dil[v], win.pw = (size_t)g->pad_begin[v];
  }
  if (planar && group > 1 && cg == 1 && mg == 1) {
    ct_dw_job dj = {&win, (size_t)c_in, bb_tensor_data(x), bb_tensor_data(w), yd};
    bbi_parallel_for((size_t)(n_batch * c_in), bbi_par_grain((size_t)(npos * g->k_size)), ct_dw_planes, &dj);
    return 0;
  }
  j.g = g, j.win = win, j.planar = planar;
  j.n_batch = n_batch, j.c_in = c_in, j.cg = cg, j.mg = mg, j.m_out = m_out, j.rows = rows, j.npos = npos;
  j.group = group, j.chunk = chunk;
  j.x = bb_tensor_data(x), j.w = bb_tensor_data(w), j.y = yd;
  j.in_at = in_at, j.scratch_at = scratch_at, j.scratch_size = scratch_size;
  rc = bbi_nn_run_chunks(ct_chunk, &j, n_batch, chunk, split, width, mem, slot_bytes);
  return rc ? bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "GEMM rejected its arguments") : 0;
}

int bbi_nn_conv_transpose(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *x = ctx->inputs[0], *w = ctx->inputs[1], *b = bbi_cpu_input(ctx, 2);
  int rc = bbi_cpu_expect_dtype(ctx, 0, FLOAT_NO_BF16);
  if (rc) return rc;
  if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "X, W and B must share one element type");
  if (x->rank < 3 || x->rank > 2 + CT_MAX_SPATIAL)
    return bbi_cpu_fail(ctx, BB_ERR_UNSUPPORTED, "input rank %d (1 to %d spatial dims are supported)", x->rank,
                       CT_MAX_SPATIAL);
  if (w->rank != x->rank) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "W has rank %d, X has rank %d", w->rank, x->rank);
  int nd = x->rank - 2;
  int64_t group = bb_attr_get_int(&ctx->node->attrs, "group", 1);
  int64_t c_in = x->dims[1];
  if (group < 1 || c_in % group || w->dims[0] != c_in)
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "W must be [C, M/group, k...] with C = %lld divisible by group %lld",
                       (long long)c_in, (long long)group);
  int64_t mg = w->dims[1], m_out = mg * group, cg = c_in / group;
  if (b && (b->rank != 1 || b->dims[0] != m_out))
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "B must be 1-D with %lld values", (long long)m_out);
  int64_t kernel[CT_MAX_SPATIAL], stride[CT_MAX_SPATIAL], dil[CT_MAX_SPATIAL], opad[CT_MAX_SPATIAL];
  int64_t pads[2 * CT_MAX_SPATIAL], oshape[CT_MAX_SPATIAL], out[CT_MAX_SPATIAL], in[CT_MAX_SPATIAL];
  bool has_kernel, has_oshape;
  if ((rc = ct_ints(ctx, "kernel_shape", nd, 0, kernel, 1, &has_kernel)) ||
      (rc = ct_ints(ctx, "strides", nd, 0, stride, 1, NULL)) || (rc = ct_ints(ctx, "dilations", nd, 0, dil, 1, NULL)) ||
      (rc = ct_ints(ctx, "output_padding", nd, 0, opad, 0, NULL)) ||
      (rc = ct_ints(ctx, "pads", 2 * nd, 0, pads, 0, NULL)) ||
      (rc = ct_ints(ctx, "output_shape", nd, nd + 2, oshape, 0, &has_oshape)))
    return rc;
  const char *auto_pad = bb_attr_get_string(&ctx->node->attrs, "auto_pad", "NOTSET");
  bool same_upper = strcmp(auto_pad, "SAME_UPPER") == 0, same_lower = strcmp(auto_pad, "SAME_LOWER") == 0;
  if (!same_upper && !same_lower && strcmp(auto_pad, "NOTSET") != 0 && strcmp(auto_pad, "VALID") != 0)
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "auto_pad %s is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID",
                       auto_pad);
  if (strcmp(auto_pad, "VALID") == 0)
    for (int i = 0; i < 2 * nd; i++) pads[i] = 0;
  int64_t in_size = 1, out_size = 1, k_size = 1;
  for (int i = 0; i < nd; i++) {
    in[i] = x->dims[2 + i];
    if (has_kernel && kernel[i] != w->dims[2 + i])
      return bbi_cpu_fail(ctx, BB_ERR_TYPE, "kernel_shape does not match W");
    kernel[i] = w->dims[2 + i];
    if (stride[i] < 1 || dil[i] < 1 || kernel[i] < 1 || opad[i] < 0)
      return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "kernel, strides and dilations must be positive");
    int64_t full = stride[i] * (in[i] - 1) + opad[i] + (kernel[i] - 1) * dil[i] + 1;
    if (has_oshape || same_upper || same_lower) {
      out[i] = has_oshape ? oshape[i] : in[i] * stride[i];
      int64_t total = full - out[i];
      if (!same_lower) { /* SAME_UPPER (and output_shape without auto_pad) put the odd pad at the end */
        pads[i] = total / 2;
        pads[i + nd] = total - total / 2;
      } else {
        pads[i] = total - total / 2;
        pads[i + nd] = total / 2;
      }
    } else {
      out[i] = full - pads[i] - pads[i + nd];
    }
    if (out[i] < 0) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "the output would have a negative size");
    in_size *= in[i], out_size *= out[i], k_size *= kernel[i];
  }
  int64_t odims[BB_MAX_RANK] = {x->dims[0], m_out};
  memcpy(odims + 2, out, (size_t)nd * sizeof out[0]);
  if ((rc = bbi_cpu_make_output(ctx, 0, x->dtype, x->rank, odims))) return rc;
  bb_tensor *y = ctx->outputs[0];
  if (!y->numel) return 0;
  ct_geom g = {nd, {0}, {0}, {0}, {0}, {0}, {0}, in_size, out_size, k_size};
  memcpy(g.in, in, sizeof in);
  memcpy(g.kernel, kernel, sizeof kernel);
  memcpy(g.stride, stride, sizeof stride);
  memcpy(g.dil, dil, sizeof dil);
  memcpy(g.pad_begin, pads, (size_t)nd * sizeof pads[0]);
  memcpy(g.out, out, sizeof out);
  if (x->dtype == BB_DTYPE_FLOAT) return convtranspose_f32(ctx, &g, group, y);
  double *acc = bbi_mem_alloc(ctx->alloc, (size_t)y->numel * sizeof *acc);
  if (!acc) return bbi_cpu_fail(ctx, BB_ERR_NOMEM, "no memory for the accumulator");
  for (int64_t n = 0; n < x->dims[0]; n++)
    for (int64_t m = 0; m < m_out; m++)
      for (int64_t o = 0; o < out_size; o++) acc[(n * m_out + m) * out_size + o] = b ? bbi_cpu_get_f64(b, m) : 0.0;
  for (int64_t n = 0; n < x->dims[0]; n++)
    for (int64_t c = 0; c < c_in; c++) {
      int64_t gi = c / cg;
      for (int64_t i = 0; i < in_size; i++) {
        double xv = bbi_cpu_get_f64(x, (n * c_in + c) * in_size + i);
        for (int64_t k = 0; k < k_size; k++) {
          int64_t off = ct_target(&g, i, k);
          if (off < 0) continue;
          for (int64_t ml = 0; ml < mg; ml++)
            acc[(n * m_out + gi * mg + ml) * out_size + off] += xv * bbi_cpu_get_f64(w, (c * mg + ml) * k_size + k);
        }
      }
    }
  for (int64_t i = 0; i < y->numel; i++) bbi_cpu_set_f64(y, i, acc[i]);
  bbi_mem_free(ctx->alloc, acc);
  return 0;
}
