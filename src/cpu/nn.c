/* CPU operators: the neural-network family's table, and convolution and pooling for 1- to
 * 3-D spatial inputs [N, C, D1, ...]. float32 convolution is im2col + the packed GEMM
 * kernel, on the NCHW plane for large feature maps and with the positions as rows for
 * small ones (see conv_f32; a 1×1, stride-1, unpadded convolution skips im2col), from the
 * input's shifted rows for a strided or tall window on few channels (nn_conv_rows.c), from
 * zero-padded input rows where the dot product is short and the GEMM the 4-lane one
 * (bbi_nn_conv_direct, the same bits), or the depthwise plane kernel; other types and
 * pooling use direct loops with double accumulators. The family's other operators are in nn_*.c (see nn.h). */
#include <math.h>
#include <string.h>

#include "cpu/nn.h"
#include "tensor/kernels/split.h"
#include "util/mem.h"
#include "util/parallel.h"

#define MAX_SPATIAL 3

static const int32_t FLOAT_TYPES[] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_BFLOAT16,
                                      BB_DTYPE_UNDEFINED};
/* MaxPool-12 also takes 8-bit integers */
static const int32_t MAXPOOL_TYPES[] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_BFLOAT16,
                                        BB_DTYPE_INT8,  BB_DTYPE_UINT8,  BB_DTYPE_UNDEFINED};

/* Where windows go: per spatial dim the kernel extent, stride, dilation, padding and the
 * resulting output extent. */
typedef struct geometry {
  int nd;
  int64_t in[MAX_SPATIAL], kernel[MAX_SPATIAL], stride[MAX_SPATIAL], dilation[MAX_SPATIAL];
  int64_t pad_begin[MAX_SPATIAL], pad_end[MAX_SPATIAL], out[MAX_SPATIAL];
  int64_t in_size, kernel_size, out_size; /* products over the spatial dims */
} geometry;

/* Reads an INTS attribute of exactly n values into v (keeping dflt when absent). */
static int ints_attr(bbi_cpu_op_ctx *ctx, const char *name, int n, int64_t *v, int64_t dflt) {
  for (int i = 0; i < n; i++) v[i] = dflt;
  const bb_attr *a = bb_attr_find(&ctx->node->attrs, name);
  if (!a) return 0;
  if (a->type != BB_ATTR_INTS || (int)a->n_ints != n)
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "attribute %s must hold %d integers", name, n);
  memcpy(v, a->ints, (size_t)n * sizeof *v);
  return 0;
}

/* A Conv's or a pool's attributes for nd spatial dims, as read from its node. */
typedef struct window_attrs {
  int nd;
  bool has_kernel;
  const char *auto_pad; /* the node's own string, or "NOTSET" */
  int64_t kernel[MAX_SPATIAL], stride[MAX_SPATIAL], dilation[MAX_SPATIAL], pads[2 * MAX_SPATIAL];
  int64_t group, ceil_mode, count_include_pad, storage_order;
} window_attrs;
_Static_assert(sizeof(window_attrs) <= BBI_CPU_NODE_MEMO_BYTES, "the attributes fit a node's memo");

/* The node's memo tag for window_attrs. */
#define MEMO_WINDOW_ATTRS 0x57414e4eu

static int read_window_attrs(bbi_cpu_op_ctx *ctx, int nd, bool kernel_required, window_attrs *w) {
  memset(w, 0, sizeof *w);
  w->nd = nd;
  const bb_attrlist *attrs = &ctx->node->attrs;
  const bb_attr *ks = bb_attr_find(attrs, "kernel_shape");
  w->has_kernel = ks != NULL;
  int rc;
  if (ks || kernel_required) {
    if (!ks) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "kernel_shape is required");
    if ((rc = ints_attr(ctx, "kernel_shape", nd, w->kernel, 1))) return rc;
  }
  if ((rc = ints_attr(ctx, "strides", nd, w->stride, 1))) return rc;
  if ((rc = ints_attr(ctx, "dilations", nd, w->dilation, 1))) return rc;
  if ((rc = ints_attr(ctx, "pads", 2 * nd, w->pads, 0))) return rc;
  w->auto_pad = bb_attr_get_string(attrs, "auto_pad", "NOTSET");
  w->group = bb_attr_get_int(attrs, "group", 1);
  w->ceil_mode = bb_attr_get_int(attrs, "ceil_mode", 0);
  w->count_include_pad = bb_attr_get_int(attrs, "count_include_pad", 0);
  w->storage_order = bb_attr_get_int(attrs, "storage_order", 0);
  return 0;
}

/* The node's window attributes for nd spatial dims: in a session read once and kept in
 * the step's memo (what was read depends on the node and nd alone), else read into
 * *local. */
static int window_attrs_of(bbi_cpu_op_ctx *ctx, int nd, bool kernel_required, window_attrs *local,
                           const window_attrs **out) {
  bbi_cpu_node_memo *memo = ctx->state ? ctx->state->memo : NULL;
  if (memo && memo->kind == MEMO_WINDOW_ATTRS && ((const window_attrs *)(void *)memo->data)->nd == nd) {
    *out = (const window_attrs *)(void *)memo->data;
    return 0;
  }
  int rc = read_window_attrs(ctx, nd, kernel_required, local);
  if (rc) return rc;
  if (memo) {
    memcpy(memo->data, local, sizeof *local);
    memo->kind = MEMO_WINDOW_ATTRS;
  }
  *out = local;
  return 0;
}

/* The attributes a run of this session step kept in its memo, or NULL before the first one
 * (their integers other than the window's depend on the node alone). */
static const window_attrs *kept_attrs(const bbi_cpu_op_ctx *ctx) {
  const bbi_cpu_node_memo *memo = ctx->state ? ctx->state->memo : NULL;
  return memo && memo->kind == MEMO_WINDOW_ATTRS ? (const window_attrs *)(const void *)memo->data : NULL;
}

static int plan_geometry(bbi_cpu_op_ctx *ctx, const bb_tensor *x, const int64_t *kernel_from_weights,
                         bool ceil_mode, bool allow_dilation, geometry *g) {
  if (x->rank < 3 || x->rank > 2 + MAX_SPATIAL)
    return bbi_cpu_fail(ctx, BB_ERR_UNSUPPORTED, "input rank %d (1 to %d spatial dims are supported)", x->rank,
                       MAX_SPATIAL);
  memset(g, 0, sizeof *g);
  g->nd = x->rank - 2;
  int nd = g->nd, rc;
  window_attrs local;
  const window_attrs *w;
  if ((rc = window_attrs_of(ctx, nd, !kernel_from_weights, &local, &w))) return rc;
  memcpy(g->in, x->dims + 2, (size_t)nd * sizeof g->in[0]);
  memcpy(g->kernel, w->has_kernel || !kernel_from_weights ? w->kernel : kernel_from_weights,
         (size_t)nd * sizeof g->kernel[0]);
  memcpy(g->stride, w->stride, (size_t)nd * sizeof g->stride[0]);
  memcpy(g->dilation, w->dilation, (size_t)nd * sizeof g->dilation[0]);
  const int64_t *pads = w->pads;
  const char *auto_pad = w->auto_pad;
  g->in_size = g->kernel_size = g->out_size = 1;
  for (int i = 0; i < nd; i++) {
    if (g->kernel[i] < 1 || g->stride[i] < 1 || g->dilation[i] < 1)
      return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "kernel, strides and dilations must be positive");
    if (!allow_dilation && g->dilation[i] != 1)
      return bbi_cpu_fail(ctx, BB_ERR_UNSUPPORTED, "dilations are not supported by this op");
    int64_t span = (g->kernel[i] - 1) * g->dilation[i] + 1;
    if (strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0) {
      g->out[i] = (g->in[i] + g->stride[i] - 1) / g->stride[i];
      int64_t total = (g->out[i] - 1) * g->stride[i] + span - g->in[i];
      if (total < 0) total = 0;
      g->pad_begin[i] = auto_pad[5] == 'U' ? total / 2 : total - total / 2;
      g->pad_end[i] = total - g->pad_begin[i];
    } else if (strcmp(auto_pad, "VALID") == 0) {
      g->out[i] = g->in[i] >= span ? (g->in[i] - span) / g->stride[i] + 1 : 0;
    } else if (strcmp(auto_pad, "NOTSET") == 0) {
      g->pad_begin[i] = pads[i];
      g->pad_end[i] = pads[i + nd];
      if (pads[i] < 0 || pads[i + nd] < 0) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "pads must not be negative");
      int64_t room = g->in[i] + g->pad_begin[i] + g->pad_end[i] - span;
      if (room < 0) g->out[i] = 0;
      else g->out[i] = (ceil_mode ? (room + g->stride[i] - 1) / g->stride[i] : room / g->stride[i]) + 1;
    } else {
      return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "auto_pad %s is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID",
                         auto_pad);
    }
    g->in_size *= g->in[i];
    g->kernel_size *= g->kernel[i];
    g->out_size *= g->out[i];
  }
  return 0;
}

/* Spatial coordinates of flat index i over extents e (row-major). */
static void unflatten(int nd, const int64_t *e, int64_t i, int64_t *coord) {
  for (int d = nd - 1; d >= 0; d--) {
    coord[d] = i % e[d];
    i /= e[d];
  }
}

/* Flat input offset of output position o and kernel position k, or -1 in the padding. */
static int64_t input_offset(const geometry *g, const int64_t *o, const int64_t *k) {
  int64_t off = 0;
  for (int d = 0; d < g->nd; d++) {
    int64_t p = o[d] * g->stride[d] - g->pad_begin[d] + k[d] * g->dilation[d];
    if (p < 0 || p >= g->in[d]) return -1;
    off = off * g->in[d] + p;
  }
  return off;
}

/* ---- Conv ---------------------------------------------------------------------------------- */

/* col[(c·K + kpos) × out + opos] = x[c][window position] (0 in the padding). */
static void im2col_f32(const geometry *g, const float *x, int64_t channels, float *col) {
  int64_t o[MAX_SPATIAL], k[MAX_SPATIAL];
  for (int64_t c = 0; c < channels; c++)
    for (int64_t kp = 0; kp < g->kernel_size; kp++) {
      unflatten(g->nd, g->kernel, kp, k);
      float *row = col + (c * g->kernel_size + kp) * g->out_size;
      for (int64_t op = 0; op < g->out_size; op++) {
        unflatten(g->nd, g->out, op, o);
        int64_t off = input_offset(g, o, k);
        row[op] = off < 0 ? 0.0f : x[c * g->in_size + off];
      }
    }
}

/* The 1- and 2-D geometry as the window kernels take it (a 1-D window is a 2-D one of
 * height 1). */
static bbi_window2d window_of(const geometry *g, bool include_pad) {
  bbi_window2d w = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, include_pad};
  int h = g->nd == 2 ? 0 : -1, x = g->nd - 1; /* the geometry's index of each dim */
  if (h == 0) {
    w.ih = (size_t)g->in[0], w.oh = (size_t)g->out[0], w.kh = (size_t)g->kernel[0], w.sh = (size_t)g->stride[0];
    w.dh = (size_t)g->dilation[0], w.ph = (size_t)g->pad_begin[0], w.ph_end = (size_t)g->pad_end[0];
  }
  w.iw = (size_t)g->in[x], w.ow = (size_t)g->out[x], w.kw = (size_t)g->kernel[x], w.sw = (size_t)g->stride[x];
  w.dw = (size_t)g->dilation[x], w.pw = (size_t)g->pad_begin[x], w.pw_end = (size_t)g->pad_end[x];
  return w;
}

/* A GEMM fills its tiles well from a few hundred rows on: images with fewer output
 * positions are batched one above the other in the column matrix, up to a bounded matrix. */
#define CONV_MIN_ROWS 512
#define CONV_MAX_COL_BYTES (128u << 10)
/* Windows of at most this many taps (3×3) have their column matrix packed straight into
 * the GEMM's A panels even when wider than the output (a 3×3 window on a 2×2 map): there
 * each patch row is a few taps of a plane in cache, where the transposed column matrix
 * is a call per kw floats. Wider windows (a weight gradient's: dY as the kernel) keep it. */
#define CONV_SMALL_WINDOW 9
/* From this many output positions on, an image that is not batched with others has its
 * product computed on the plane (W · col). */
#ifndef CONV_PLANE_MIN_POSITIONS
#define CONV_PLANE_MIN_POSITIONS 64
#endif

/* Applies the session's fused epilogue (if any) to n floats of the output at offset `at`. */
static void conv_epilogue(bbi_cpu_epilogue *e, float *y, size_t at, size_t n) {
  if (!e) return;
  const float *addend = e->addend ? (const float *)bb_tensor_data(e->addend) + at : NULL;
  bbi_f32_vactivate(&e->act, n, addend, y + at);
}

/* A fused Clip with nothing added goes into the GEMM's store as its clamp, saving a pass
 * over the output: the clamp is min(max(x, lo), hi) with the same NaN and signed-zero rules
 * as the epilogue's, so the same bits. */
static bool clip_in_store(const bbi_cpu_epilogue *e) {
  return e && !e->addend && e->act.kind == BBI_ACTIVATION_CLIP;
}

/* The epilogue the op can apply itself: float, with an addend of the output's shape. */
static bbi_cpu_epilogue *own_epilogue(bbi_cpu_op_ctx *ctx, const bb_tensor *y) {
  bbi_cpu_epilogue *e = bbi_cpu_epilogue_of(ctx);
  if (!e || (e->addend && (e->addend->dtype != BB_DTYPE_FLOAT || !bb_tensor_same_shape(e->addend, y)))) return NULL;
  e->applied = true;
  return e;
}

/* The layouts of W a Conv keeps in its node cache (BBI_NN_CACHE_WINOGRAD: nn_winograd.c's). */
enum { PACKED_W_AS_B = 1, PACKED_W_AS_A = 2, DEPTHWISE_LANES = 3 };

/* A depthwise convolution's constant weights laid out once per session for the kernel's
 * channel-lane path (NULL where that path does not read them, or W is not a constant: the
 * kernel then interleaves them itself, with the same bits). */
static const float *depthwise_lanes(bbi_cpu_op_ctx *ctx, const bbi_window2d *win, size_t channels) {
  const size_t floats = bbi_f32_dwconv2d_lanes_floats(win, channels);
  bool fresh;
  float *lanes = floats ? bbi_cpu_node_cache_get(ctx, 1, DEPTHWISE_LANES, floats * sizeof(float), &fresh) : NULL;
  if (lanes && fresh) bbi_f32_dwconv2d_pack_lanes(win, channels, bb_tensor_data(ctx->inputs[1]), lanes);
  return lanes;
}

/* A depthwise convolution (one input and one output channel per group): the plane kernel
 * in blocks of channels of one image (tasks on the work pool, the batch's images in one
 * job, each task with its own scratch plane) that also applies the fused epilogue (if
 * any) to its block: a Clip in the kernel's stores where it takes it, else a pass over the
 * block while it is in cache.
 * Channels are independent and the blocks follow the shape alone, so any number of
 * threads gives the same bits. */
typedef struct dw_job {
  const bbi_window2d *win;
  const float *x, *w, *lanes, *b;
  float *y;
  bbi_cpu_epilogue *e;
  char *scratch;
  size_t scratch_stride, channels, block, blocks, image0;
} dw_job;

/* Output floats a block of channels aims at. */
#define DW_BLOCK_WORK 16384

/* Task t: block t % blocks of image image0 + t / blocks. */
static void dw_task(void *ctx, size_t task, size_t slot) {
  const dw_job *j = ctx;
  const bbi_window2d *g = j->win;
  const size_t n = j->image0 + task / j->blocks, c0 = task % j->blocks * j->block;
  const size_t c1 = c0 + j->block < j->channels ? c0 + j->block : j->channels;
  const size_t in_plane = g->ih * g->iw, out_plane = g->oh * g->ow, taps = g->kh * g->kw;
  const size_t at = (n * j->channels + c0) * out_plane;
  const bbi_cpu_epilogue *e = j->e;
  const float *addend = e && e->addend ? (const float *)bb_tensor_data(e->addend) + at : NULL;
  bbi_f32_dwconv2d_chw_fused(g, c1 - c0, j->x + (n * j->channels + c0) * in_plane, j->w + c0 * taps,
                             j->lanes ? j->lanes + c0 * taps : NULL, j->b ? j->b + c0 : NULL, e ? &e->act : NULL,
                             addend, j->y + at, (float *)(j->scratch + slot * j->scratch_stride));
}

static int conv_depthwise(bbi_cpu_op_ctx *ctx, const geometry *g, bb_tensor *y) {
  const bb_tensor *x = ctx->inputs[0], *w = ctx->inputs[1], *b = bbi_cpu_input(ctx, 2);
  const bbi_window2d win = window_of(g, false);
  size_t scratch_bytes = bbi_f32_dwconv2d_chw_scratch_size(&win);
  int rc = bbi_cpu_check_size(ctx, (int64_t)(scratch_bytes / sizeof(float)), sizeof(float), "the padded plane");
  if (rc) return rc;
  const size_t slots = bbi_parallel_width(), stride = (scratch_bytes + 63) & ~(size_t)63;
  char *scratch = bbi_cpu_scratch(ctx, stride * slots + 64);
  if (!scratch) return BB_ERR_NOMEM;
  const int64_t channels = x->dims[1];
  const size_t work = (size_t)g->out_size * (size_t)g->kernel_size;
  size_t block = (DW_BLOCK_WORK + work - 1) / work;
  /* whole groups of the narrow kernel's lanes (four, or sixteen with AVX-512), so every
   * block starts a group of the laid-out weights */
  block = (block + 15) & ~(size_t)15;
  const size_t blocks = ((size_t)channels + block - 1) / block;
  dw_job j = {&win, bb_tensor_data(x), bb_tensor_data(w), depthwise_lanes(ctx, &win, (size_t)channels),
              b ? bb_tensor_data(b) : NULL, bb_tensor_data(y),
              own_epilogue(ctx, y), (char *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63), stride, (size_t)channels,
              block, blocks, 0};
  /* as many images per job as the pool's task count allows (one job for most batches) */
  const size_t images = (size_t)x->dims[0];
  const size_t per_job = BBI_PARALLEL_MAX_TASKS / blocks ? BBI_PARALLEL_MAX_TASKS / blocks : 1;
  for (size_t n0 = 0; n0 < images; n0 += per_job) {
    j.image0 = n0;
    bbi_parallel_run((images - n0 < per_job ? images - n0 : per_job) * blocks, slots, dw_task, &j);
  }
  return 0;
}

/* W's groups packed once per session when W is one of its constants (NULL when W is not:
 * the GEMM packs it on every product then): as the GEMM's B operand (each group's
 * [mg, kdim] read transposed) for the products with positions as rows, or as its A
 * operand for the products on the plane. */
static const char *packed_weights(bbi_cpu_op_ctx *ctx, bool as_a, int64_t group, size_t mg, size_t kdim,
                                  size_t *stride) {
  size_t size = as_a ? bbi_f32_gemm_packed_a_size(NULL, mg, kdim) : bbi_f32_gemm_packed_b_size(NULL, mg, kdim);
  *stride = (size + 63) & ~(size_t)63;
  bool fresh;
  char *packed = bbi_cpu_node_cache_get(ctx, 1, as_a ? PACKED_W_AS_A : PACKED_W_AS_B, *stride * (size_t)group + 64,
                                        &fresh);
  if (!packed) return NULL;
  packed = (char *)(((uintptr_t)packed + 63) & ~(uintptr_t)63);
  const float *wd = bb_tensor_data(ctx->inputs[1]);
  for (int64_t gi = 0; fresh && gi < group; gi++) {
    const float *wg = wd + (size_t)gi * mg * kdim;
    char *to = packed + (size_t)gi * *stride;
    if (as_a) bbi_f32_gemm_pack_a(NULL, mg, kdim, 0, 1.0f, wg, kdim, to, *stride);
    else bbi_f32_gemm_pack_b(NULL, mg, kdim, 1, wg, kdim, to, *stride);
  }
  return packed;
}

/* The column matrix of one image's group for a product on the plane, written straight
 * into the GEMM's packed B panels: by bbi_f32_im2col_pack_2d where it takes the shape,
 * else a channel at a time through bbi_f32_gemm_pack_b_rows, each channel's kh·kw rows
 * going through a small buffer of the participant's own (in L1) rather than through the
 * whole matrix, which the GEMM would then read again to pack. Tasks take blocks of
 * channels; the panels are copies, so any number of threads gives the same bits. */
typedef struct col_pack_job {
  const bbi_window2d *win;
  const float *x; /* the group's first input channel */
  size_t plane;   /* floats from one input channel to the next */
  size_t channels, block, npos, kdim;
  float *rows;    /* slot s's buffer at rows + s·rows_stride */
  size_t rows_stride;
  char *packed;
} col_pack_job;

static void col_pack_task(void *ctx, size_t task, size_t slot) {
  const col_pack_job *j = ctx;
  const size_t in_plane = j->plane, taps = j->win->kh * j->win->kw;
  const size_t c0 = task * j->block, c1 = c0 + j->block < j->channels ? c0 + j->block : j->channels;
  if (bbi_f32_im2col_pack_2d(NULL, j->win, c0, c1, j->x, in_plane, j->kdim, 0, j->packed)) return;
  float *rows = j->rows + slot * j->rows_stride;
  for (size_t c = c0; c < c1; c++) {
    bbi_f32_im2col_2d(j->win, 1, j->x + c * in_plane, rows, j->npos);
    bbi_f32_gemm_pack_b_rows(NULL, j->npos, j->kdim, c * taps, (c + 1) * taps, rows, j->packed);
  }
}

/* What the chunks of images of one float convolution share (see conv_f32). A chunk's
 * scratch holds a column matrix (on the plane: its packed panels, then `col_slots` buffers
 * of one channel's rows), the transposed product (`tmp_at`) and the GEMM's scratch
 * (`scratch_at`). */
typedef struct conv_job {
  const geometry *g;
  bbi_window2d win;
  int64_t n_batch, c_in, m_out, group, cg, mg, kdim, npos, chunk;
  bool direct, planar, patches, on_plane, col_packed, col_as_a;
  const float *x, *w, *b;
  float *y;
  const char *packed;
  size_t pack_stride, panels_bytes, rows_stride, col_slots;
  bbi_cpu_epilogue *e;
  bbi_f32_activation clip; /* BBI_ACTIVATION_CLIP: the fused Clip the GEMM applies as it stores */
  bool store_epilogue; /* on the plane: the GEMM applies the epilogue (e) as it stores */
  size_t band_slot_bytes; /* nonzero: one image's bands are the pool's tasks, each slot this big */
  size_t tmp_at, scratch_at, scratch_size;
  /* floats of Y from one image's block to the next and from one channel's plane to the
   * next: m_out·P and P, or P and n_batch·P when Y is written swapped ([M, N, ..], with
   * no epilogue) */
  size_t y_image, y_channel;
  bool swapped;
} conv_job;

/* Where image n's channel m starts in Y. */
static size_t y_plane(const conv_job *j, int64_t n, int64_t m) {
  return (size_t)n * j->y_image + (size_t)m * j->y_channel;
}

/* The GEMM's clamp for the job's fused Clip, if it has one. */
static void gemm_clip(const conv_job *j, bbi_f32_gemm_args *a) {
  a->clamp = j->clip.kind == BBI_ACTIVATION_CLIP;
  a->min = j->clip.min, a->max = j->clip.max;
}

/* An epilogue the GEMM can apply as it stores: an addend of the output's shape (if any;
 * the same row stride as the product's block of Y) and as its activation none, ReLU or Clip. The
 * store adds the addend and then applies the activation by the epilogue's rules, so the
 * same bits, without a second pass over the output. */
static bool epilogue_in_store(const bbi_cpu_epilogue *e) {
  return e && (e->act.kind == BBI_ACTIVATION_NONE || e->act.kind == BBI_ACTIVATION_RELU ||
               e->act.kind == BBI_ACTIVATION_CLIP);
}

/* The GEMM's share of the job's epilogue for the product stored at offset `at` of Y (the
 * block's rows npos apart), when the GEMM applies it. */
static void gemm_epilogue(const conv_job *j, size_t at, bbi_f32_gemm_args *a) {
  if (!j->store_epilogue) return;
  const bbi_cpu_epilogue *e = j->e;
  a->addend = e->addend ? (const float *)bb_tensor_data(e->addend) + at : NULL;
  a->relu = e->act.kind == BBI_ACTIVATION_RELU;
  a->clamp = e->act.kind == BBI_ACTIVATION_CLIP;
  a->min = e->act.min, a->max = e->act.max;
}

/* Floats of packed column panels per band of output rows (at most about 256 KiB): a band's
 * panels are written and then read by its GEMM while they are still in L2, where the
 * panels of a whole plane (3.6 MB for 32 channels of 56×56 under a 3×3 window) would go
 * out to L3. */
#define CONV_BAND_FLOATS ((size_t)64 << 10)

/* Output rows per band of a product on the plane for `width` participants: as few bands
 * as keep each within the bound, made equal (an uneven cut leaves a last band of a row or
 * two, whose panels are mostly padding and whose GEMM streams all of W again for a few
 * positions); on several participants at least two bands each, so that one late or
 * slowed participant leaves the other work to take, each of at least one tile's width
 * of positions. */
static size_t conv_band_rows(const bbi_window2d *win, size_t kdim, size_t width) {
  const size_t npos = win->oh * win->ow, nr = bbi_f32_gemm_default_config()->nr;
  size_t bands = (kdim * npos + CONV_BAND_FLOATS - 1) / CONV_BAND_FLOATS;
  if (width > 1 && bands < 2 * width) bands = 2 * width;
  size_t band = (win->oh + bands - 1) / bands;
  const size_t least = (nr + win->ow - 1) / win->ow;
  return band > least ? band : least < win->oh ? least : win->oh;
}

/* Output rows [oy0, oy1) of one image's group on the plane, its column panels packed at
 * `mem` by the caller alone (its buffer of one channel's rows after them): the band's
 * window (the same geometry on the input rows it reads, with the padding above it that is
 * left) packs its panels, then Y's columns of the band = W · those panels, with the
 * epilogue in the GEMM's store when it goes there (else the caller applies it to the whole
 * block, so each element meets the code path of one whole call). Every element of Y is the dot product the whole
 * plane's GEMM gives (the GEMM's k blocks follow kdim alone), so the bits are the same for
 * any cut into bands. */
static int conv_band(const conv_job *j, const float *xg, int64_t gi, size_t at, size_t oy0, size_t oy1, char *mem,
                     void *scratch) {
  const bbi_window2d *win = &j->win;
  const size_t kdim = (size_t)j->kdim, ow = win->ow, npos = (size_t)j->npos, bpos = (oy1 - oy0) * ow;
  bbi_window2d bw = *win;
  /* input row of (band row 0, ky = 0) is oy0·sh - ph: rows above it are dropped, or
   * padding rows remain */
  const size_t shift = oy0 * win->sh;
  size_t r0 = 0;
  if (shift <= win->ph) {
    bw.ph = win->ph - shift;
  } else {
    r0 = shift - win->ph < win->ih ? shift - win->ph : win->ih;
    bw.ph = 0;
  }
  bw.ih = win->ih - r0, bw.oh = oy1 - oy0;
  col_pack_job cj = {&bw, xg + r0 * win->iw, (size_t)j->g->in_size, (size_t)j->cg, (size_t)j->cg, bpos, kdim,
                     (float *)(mem + j->panels_bytes), j->rows_stride, mem};
  col_pack_task(&cj, 0, 0);
  bbi_f32_gemm_pack_b_header(NULL, bpos, kdim, mem);
  bbi_f32_gemm_args a;
  memset(&a, 0, sizeof a);
  a.alpha = 1.0f;
  a.m = (size_t)j->mg, a.n = bpos, a.k = kdim;
  a.a = j->w + gi * j->mg * j->kdim, a.lda = kdim;
  a.packed_a = j->packed ? j->packed + (size_t)gi * j->pack_stride : NULL;
  a.packed_b = mem;
  a.c = j->y + at + oy0 * ow, a.ldc = npos;
  a.bias_per_row = j->b ? j->b + gi * j->mg : NULL;
  gemm_epilogue(j, at + oy0 * ow, &a);
  return bbi_f32_gemm(&a, scratch, j->scratch_size);
}

/* One image's group on the plane, a band at a time by the caller alone. */
static int conv_bands(const conv_job *j, const float *xg, int64_t gi, size_t at, char *mem, void *scratch) {
  const size_t oh = j->win.oh, band = conv_band_rows(&j->win, (size_t)j->kdim, 1);
  int rc = 0;
  for (size_t oy0 = 0; oy0 < oh && !rc; oy0 += band)
    rc = conv_band(j, xg, gi, at, oy0, oy0 + band < oh ? oy0 + band : oh, mem, scratch);
  return rc;
}

/* One image's group on the plane with its bands as the pool's tasks: each participant
 * packs and multiplies whole bands in its own slot of the scratch (`band_slot_bytes`
 * apart: panels, a channel's rows, the GEMM's scratch), one job per product. */
typedef struct band_run {
  const conv_job *j;
  const float *xg;
  int64_t gi;
  size_t at, band;
  char *mem;
  int rc[BBI_PARALLEL_MAX_THREADS]; /* per participant: its first error */
} band_run;

static void band_task(void *ctx, size_t task, size_t slot) {
  band_run *r = ctx;
  const conv_job *j = r->j;
  const size_t oy0 = task * r->band, oy1 = oy0 + r->band < j->win.oh ? oy0 + r->band : j->win.oh;
  char *mem = r->mem + slot * j->band_slot_bytes;
  const int rc = conv_band(j, r->xg, r->gi, r->at, oy0, oy1, mem, mem + j->scratch_at);
  if (rc && !r->rc[slot]) r->rc[slot] = rc;
}

static int conv_band_tasks(const conv_job *j, const float *xg, int64_t gi, size_t at, char *mem) {
  const size_t width = bbi_parallel_width(), band = conv_band_rows(&j->win, (size_t)j->kdim, width);
  band_run r = {j, xg, gi, at, band, mem, {0}};
  bbi_parallel_run((j->win.oh + band - 1) / band, width, band_task, &r);
  int rc = 0;
  for (size_t s = 0; s < width && !rc; s++) rc = r.rc[s];
  return rc;
}

/* Channels a strip at a time: each of a strip's rows of Y (far apart, and not in cache) is
 * written from start to end before the next strip's, rather than 16 bytes of every row
 * in turn. */
#define SWAPPED_STRIP 16

/* The product tmp [rows, mg] of images n0.. of group gi into Y written swapped. */
static void swapped_store(const conv_job *j, const float *tmp, size_t rows, int64_t n0, int64_t gi) {
  const size_t mg = (size_t)j->mg;
  float *y = j->y + y_plane(j, n0, gi * j->mg);
  for (size_t m0 = 0; m0 < mg; m0 += SWAPPED_STRIP) {
    const size_t strip = mg - m0 < SWAPPED_STRIP ? mg - m0 : SWAPPED_STRIP;
    bbi_f32_transpose(rows, strip, tmp + m0, mg, y + m0 * j->y_channel, j->y_channel);
  }
}

/* Images n0.. (one chunk, fewer for the last), every group: column matrix, GEMM, then the
 * transposition (positions as rows) and the epilogue, with the scratch at `mem`. What it
 * computes depends on n0 and the shapes alone. */
static int conv_chunk(const void *job, int64_t n0, char *mem) {
  const conv_job *j = job;
  const geometry *g = j->g;
  const int64_t npos = j->npos, mg = j->mg, kdim = j->kdim, cg = j->cg, c_in = j->c_in;
  const int64_t nc = j->n_batch - n0 < j->chunk ? j->n_batch - n0 : j->chunk;
  const size_t ld = (size_t)(nc * npos);
  float *col = (float *)mem, *tmp = (float *)(mem + j->tmp_at);
  void *scratch = mem + j->scratch_at;
  int rc = 0;
  for (int64_t gi = 0; gi < j->group && !rc; gi++) {
    const float *xg = j->x + (n0 * c_in + gi * cg) * g->in_size;
    /* one image's positions as rows: its column matrix straight into the GEMM's A panels */
    const bool a_packed =
        j->col_as_a && bbi_par_f32_im2col_pack_2d(&j->win, (size_t)cg, xg, (size_t)kdim, 1, col);
    if (a_packed) bbi_f32_gemm_pack_a_header(NULL, (size_t)npos, (size_t)kdim, 1.0f, col);
    for (int64_t i = 0; i < nc && !j->direct && !j->col_packed && !a_packed; i++) {
      const float *xi = xg + i * c_in * g->in_size;
      if (j->patches) bbi_par_f32_im2col_patches_2d(&j->win, (size_t)cg, xi, col + i * npos * kdim, (size_t)kdim);
      else if (j->planar) bbi_par_f32_im2col_2d(&j->win, (size_t)cg, xi, col + i * npos, ld);
      else im2col_f32(g, xi, cg, col);
    }
    bbi_f32_gemm_args a;
    memset(&a, 0, sizeof a);
    a.alpha = 1.0f;
    if (j->on_plane) { /* chunk is 1: Y's block [mg, P] = W [mg, kdim] · col [kdim, P] */
      size_t at = y_plane(j, n0, gi * mg);
      a.m = (size_t)mg, a.n = (size_t)npos, a.k = (size_t)kdim;
      a.a = j->w + gi * mg * kdim, a.lda = (size_t)kdim;
      a.packed_a = j->packed ? j->packed + (size_t)gi * j->pack_stride : NULL;
      if (j->band_slot_bytes || (j->col_packed && j->col_slots == 1)) {
        rc = j->band_slot_bytes ? conv_band_tasks(j, xg, gi, at, mem) : conv_bands(j, xg, gi, at, mem, scratch);
        if (!j->store_epilogue) conv_epilogue(j->e, j->y, at, (size_t)(mg * npos));
        continue;
      }
      if (j->col_packed) {
        col_pack_job cj = {&j->win, xg, g->in_size, (size_t)cg, 1, (size_t)npos, (size_t)kdim,
                           (float *)(mem + j->panels_bytes), j->rows_stride, mem};
        const size_t slots = j->col_slots;
        cj.block = slots > 1 ? ((size_t)cg + 4 * slots - 1) / (4 * slots) : (size_t)cg;
        bbi_parallel_run(((size_t)cg + cj.block - 1) / cj.block, slots, col_pack_task, &cj);
        bbi_f32_gemm_pack_b_header(NULL, (size_t)npos, (size_t)kdim, mem);
        a.packed_b = mem;
      }
      a.b = j->direct ? xg : col, a.ldb = (size_t)npos;
      a.c = j->y + at, a.ldc = (size_t)npos;
      a.bias_per_row = j->b ? j->b + gi * mg : NULL;
      gemm_clip(j, &a);
      gemm_epilogue(j, at, &a);
      if ((rc = bbi_f32_gemm(&a, scratch, j->scratch_size))) break;
      if (!j->store_epilogue) conv_epilogue(j->e, j->y, at, (size_t)(mg * npos));
      continue;
    }
    a.m = ld, a.n = (size_t)mg, a.k = (size_t)kdim;
    if (a_packed) a.packed_a = col;
    else if (j->patches) a.a = col, a.lda = (size_t)kdim; /* stored [positions, kdim] */
    else a.trans_a = 1, a.a = j->direct ? xg : col, a.lda = ld; /* stored [kdim, positions] */
    a.trans_b = 1, a.b = j->w + gi * mg * kdim, a.ldb = (size_t)kdim; /* stored [mg, kdim] */
    a.packed_b = j->packed ? j->packed + (size_t)gi * j->pack_stride : NULL;
    a.c = tmp, a.ldc = (size_t)mg;
    a.bias = j->b ? j->b + gi * mg : NULL; /* one bias per output channel = per column of Yᵀ */
    gemm_clip(j, &a);
    if ((rc = bbi_f32_gemm(&a, scratch, j->scratch_size))) break;
    if (j->swapped) { /* the chunk's images lie side by side in each channel's row of Y */
      swapped_store(j, tmp, ld, n0, gi);
      continue;
    }
    for (int64_t i = 0; i < nc; i++) {
      size_t at = y_plane(j, n0 + i, gi * mg);
      bbi_f32_transpose((size_t)npos, (size_t)mg, tmp + (size_t)(i * npos * mg), (size_t)mg, j->y + at, j->y_channel);
      conv_epilogue(j->e, j->y, at, (size_t)(mg * npos));
    }
  }
  return rc;
}

/* Scratch for every participant stays within this bound when chunks go to the pool. */
#define CONV_SPLIT_MAX_BYTES ((size_t)64 << 20)

bool bbi_nn_split_chunks(size_t chunks, size_t width, size_t slot_bytes) {
  return width > 1 && chunks >= 2 && (chunks >= 2 * width || chunks % width == 0) &&
         slot_bytes <= CONV_SPLIT_MAX_BYTES / width;
}

int64_t bbi_nn_even_chunk(int64_t n_batch, int64_t chunk) {
  if (chunk < 1 || n_batch <= 2 * chunk) return chunk;
  int64_t chunks = (n_batch + chunk - 1) / chunk;
  chunks += chunks & 1;
  return (n_batch + chunks - 1) / chunks;
}

typedef struct chunks_run {
  bbi_nn_chunk_fn fn;
  const void *job;
  int64_t chunk;
  char *mem;
  size_t slot_bytes;
  int rc[BBI_PARALLEL_MAX_THREADS]; /* per participant: its first error */
} chunks_run;

static void chunks_task(void *ctx, size_t task, size_t slot) {
  chunks_run *r = ctx;
  int rc = r->fn(r->job, (int64_t)task * r->chunk, r->mem + slot * r->slot_bytes);
  if (rc && !r->rc[slot]) r->rc[slot] = rc;
}

int bbi_nn_run_chunks(bbi_nn_chunk_fn fn, const void *job, int64_t n_batch, int64_t chunk, bool split, size_t width,
                      char *mem, size_t slot_bytes) {
  int rc = 0;
  if (!split) {
    for (int64_t n0 = 0; n0 < n_batch && !rc; n0 += chunk) rc = fn(job, n0, mem);
    return rc;
  }
  chunks_run r = {fn, job, chunk, mem, slot_bytes, {0}};
  bbi_parallel_run((size_t)((n_batch + chunk - 1) / chunk), width, chunks_task, &r);
  for (size_t s = 0; s < width && !rc; s++) rc = r.rc[s];
  return rc;
}

/* The GEMM scratch of one chunk, by the given sizing: on the plane [mg, P] · [P, ...]; else
 * for a full chunk's rows and the last chunk's (its blocking follows its row count). */
static size_t conv_gemm_scratch(size_t (*size_of)(size_t, size_t, size_t), bool on_plane, int64_t mg, int64_t npos,
                                int64_t kdim, size_t rows, size_t last_rows) {
  if (on_plane) return size_of((size_t)mg, (size_t)npos, (size_t)kdim);
  size_t full = size_of(rows, (size_t)mg, (size_t)kdim), last = size_of(last_rows, (size_t)mg, (size_t)kdim);
  return full > last ? full : last;
}

/* One group's convolution on the plane by `run` (bbi_nn_conv_rows or bbi_nn_conv_direct),
 * with the fused epilogue in its store where the GEMM's store would take it, else after
 * it: 0, BBI_NN_DECLINED (nothing written), or an error. */
static int conv_rows(bbi_cpu_op_ctx *ctx, const geometry *g, const bbi_window2d *win, const char *packed,
                     bb_tensor *y, int (*run)(bbi_cpu_op_ctx *, const bbi_nn_conv_rows_job *)) {
  const bb_tensor *x = ctx->inputs[0], *w = ctx->inputs[1], *b = bbi_cpu_input(ctx, 2);
  bbi_cpu_epilogue *e = own_epilogue(ctx, y);
  const bool in_store = epilogue_in_store(e);
  bbi_nn_conv_rows_job rj = {win, (size_t)x->dims[0], (size_t)x->dims[1], (size_t)w->dims[0], (size_t)g->in_size,
                             bb_tensor_data(x), bb_tensor_data(w), b ? bb_tensor_data(b) : NULL, packed,
                             NULL, 0, 0, 0.0f, 0.0f, bb_tensor_data(y)};
  if (in_store) {
    rj.addend = e->addend ? bb_tensor_data(e->addend) : NULL;
    rj.relu = e->act.kind == BBI_ACTIVATION_RELU, rj.clamp = e->act.kind == BBI_ACTIVATION_CLIP;
    rj.min = e->act.min, rj.max = e->act.max;
  }
  const int rc = run(ctx, &rj);
  if (rc == 0 && !in_store) conv_epilogue(e, rj.y, 0, rj.n_batch * rj.m * (size_t)g->out_size);
  return rc;
}

/* How conv_f32 takes a float convolution through the GEMM, by the shapes alone. */
typedef struct conv_form {
  bool direct;   /* 1×1, stride 1, no padding: the input already is the column matrix */
  bool patches;  /* a window wider than its output (a weight gradient's: dY as the kernel) */
  bool on_plane; /* Y = W · col on one image's plane, else positions as the GEMM's rows */
  int64_t chunk; /* images one product takes */
} conv_form;

static conv_form conv_form_of(const geometry *g, int64_t kdim, int64_t n_batch) {
  conv_form f = {true, false, false, 1};
  const bool planar = g->nd <= 2;
  const int64_t npos = g->out_size;
  for (int d = 0; d < g->nd; d++)
    f.direct = f.direct && g->kernel[d] == 1 && g->stride[d] == 1 && g->pad_begin[d] == 0 && g->pad_end[d] == 0;
  if (!f.direct && planar && npos < CONV_MIN_ROWS) {
    int64_t chunk = (CONV_MIN_ROWS + npos - 1) / npos;
    int64_t fit = (int64_t)(CONV_MAX_COL_BYTES / sizeof(float)) / (kdim * npos);
    chunk = chunk < fit ? chunk : fit;
    chunk = chunk < n_batch ? chunk : n_batch;
    f.chunk = bbi_nn_even_chunk(n_batch, chunk > 1 ? chunk : 1);
  }
  /* the wider window copies runs of kw in the transposed column matrix, runs of ow in the other */
  const bbi_window2d win = window_of(g, false);
  f.patches = !f.direct && planar && win.kw > win.ow;
  f.on_plane = f.chunk == 1 && npos >= CONV_PLANE_MIN_POSITIONS && !f.patches;
  return f;
}

/* Whether the convolution writes Y swapped, [M, N, ..] (the session fused a Transpose of
 * perm [1, 0, 2, ..] into it): on the path with positions as the GEMM's rows, whose
 * products are transposed into Y a block at a time and then land in the swapped places
 * by the same copy; not a depthwise or on-the-plane one, nor one Winograd may take (a 3×3
 * with constant weights), nor one with an epilogue to apply. */
static bool conv_swaps_output(const bbi_cpu_op_ctx *ctx, const geometry *g, int64_t group) {
  const bb_tensor *x = ctx->inputs[0], *w = ctx->inputs[1];
  if (!ctx->state || ctx->state->swap_rank != x->rank || x->dtype != BB_DTYPE_FLOAT || bbi_cpu_epilogue_of(ctx))
    return false;
  const int64_t cg = x->dims[1] / group, mg = w->dims[0] / group;
  if (g->nd <= 2 && group > 1 && cg == 1 && mg == 1) return false;
  const bool square3 = g->nd == 2 && g->kernel[0] == 3 && g->kernel[1] == 3;
  const bool unit = g->nd == 2 && g->stride[0] == 1 && g->stride[1] == 1 && g->dilation[0] == 1 && g->dilation[1] == 1;
  const bool w_constant = (ctx->state->constant_inputs & 2u) != 0; /* Winograd keeps W transformed */
  if (ctx->state->winograd && w_constant && group == 1 && square3 && unit) return false;
  return !conv_form_of(g, cg * g->kernel_size, x->dims[0]).on_plane;
}

/* Per group, one of two orientations of the same product (each output the bias plus its
 * products summed in the same k order, so the two give the same bits):
 *  - with many output positions, Y = W · col on the plane: W [mg, kdim] is the GEMM's A,
 *    the column matrix [kdim, P] (for a 1×1, stride-1, unpadded convolution the input
 *    itself) its B, and the product lands straight in the image's [mg, P] block of Y; W
 *    is packed as A once per session when it is constant, and the column matrix is
 *    written as packed B panels (col_pack_job: straight in with bbi_f32_im2col_pack_2d, or
 *    a channel's rows at a time) rather than whole;
 *  - with few, Yᵀ = colᵀ · Wᵀ: the positions of `chunk` images (one above the other) are
 *    the GEMM's rows, the output channels its columns and W its B operand, packed once per
 *    session when W is constant, so small feature maps (a few positions, many channels)
 *    keep the GEMM's tiles full and the weights are read once per run; one image's column
 *    matrix is written straight into the GEMM's packed A panels where the kernel takes the
 *    shape (bbi_f32_im2col_pack_2d). The product lands in `tmp` [chunk·P, mg] and is
 *    transposed into each image's [mg, P] block.
 * The bias comes with the GEMM; the fused epilogue (if any) finishes each block while it
 * is in cache. The chunks of images (one image each on the plane) are independent: on
 * several threads they are the pool's tasks when there are enough of them (see
 * bbi_nn_split_chunks), else each GEMM and column matrix is cut across the pool. */
static int conv_f32(bbi_cpu_op_ctx *ctx, const geometry *g, int64_t group, bool swapped, bb_tensor *y) {
  const bb_tensor *x = ctx->inputs[0], *w = ctx->inputs[1], *b = bbi_cpu_input(ctx, 2);
  int64_t n_batch = x->dims[0], c_in = x->dims[1], m_out = w->dims[0];
  int64_t cg = c_in / group, mg = m_out / group, kdim = cg * g->kernel_size, npos = g->out_size;
  bool planar = g->nd <= 2;
  if (planar && group > 1 && cg == 1 && mg == 1) return conv_depthwise(ctx, g, y);
  if (g->nd == 2 && group == 1) {
    const bbi_window2d win = window_of(g, false);
    bool done;
    int rc = bbi_nn_conv_winograd(ctx, &win, own_epilogue(ctx, y), y, &done);
    if (rc || done) return rc;
  }
  const conv_form form = conv_form_of(g, kdim, n_batch);
  const bool direct = form.direct, patches = form.patches, on_plane = form.on_plane;
  const int64_t chunk = form.chunk;
  /* one image's column matrix is the most this op asks for at once (more images only up to a bound) */
  int rc = direct ? 0 : bbi_cpu_check_size(ctx, kdim * g->out_size, sizeof(float), "the column matrix");
  if (rc) return rc;
  conv_job j;
  memset(&j, 0, sizeof j);
  j.g = g, j.win = window_of(g, false);
  j.y_image = (size_t)(swapped ? npos : m_out * npos), j.y_channel = (size_t)(swapped ? n_batch * npos : npos);
  j.swapped = swapped;
  size_t rows = (size_t)(chunk * npos);
  if ((rc = bbi_cpu_check_size(ctx, (int64_t)rows * mg, sizeof(float), "the product's rows"))) return rc;
  size_t pack_stride = 0;
  /* (a one-row product on the plane is a matrix-vector product, which takes W as it is) */
  const char *packed =
      on_plane && mg == 1 ? NULL : packed_weights(ctx, on_plane, group, (size_t)mg, (size_t)kdim, &pack_stride);
  if (on_plane && planar && !direct && group == 1) {
    if ((rc = conv_rows(ctx, g, &j.win, packed, y, bbi_nn_conv_rows)) != BBI_NN_DECLINED) return rc;
    if ((rc = conv_rows(ctx, g, &j.win, packed, y, bbi_nn_conv_direct)) != BBI_NN_DECLINED) return rc;
    rc = 0;
  }
  /* W not constant but multiplied more than once (images in several chunks): packed here,
   * once per run, rather than by every GEMM */
  const bool pack_here = !on_plane && !packed && group == 1 && chunk < n_batch;
  size_t pack_bytes = pack_here ? bbi_f32_gemm_packed_b_size(NULL, (size_t)mg, (size_t)kdim) : 0;
  /* on the plane, the column matrix as packed panels, then buffers of one channel's rows:
   * one per participant of a pack cut across the pool, one when the chunk runs whole */
  const bool col_packed = on_plane && !direct && planar;
  size_t panels_bytes = 0, rows_stride = 0;
  if (col_packed) {
    panels_bytes = (bbi_f32_gemm_packed_b_size(NULL, (size_t)npos, (size_t)kdim) + 63) & ~(size_t)63;
    rows_stride = ((size_t)(g->kernel_size * npos) + 15) & ~(size_t)15;
  }
  const size_t chunks = (size_t)((n_batch + chunk - 1) / chunk), width = bbi_parallel_width();
  /* one image with its positions as rows may have its column matrix packed as the GEMM's
   * A (bbi_f32_im2col_pack_2d; a product of one row or one column is a matrix-vector one,
   * which takes A as it is): room for those panels too. Not a window wider than its
   * output (a weight gradient's: few positions, a kernel-sized plane of taps): there each
   * of its many column rows would be one gather, where the transposed column matrix
   * copies runs of kw floats and packs them */
  const bool col_as_a = !on_plane && !direct && planar && chunk == 1 && npos > 1 && mg > 1 &&
                        (!patches || g->kernel_size <= CONV_SMALL_WINDOW);
  size_t col_bytes_alone = direct ? 0
                           : col_packed ? panels_bytes + rows_stride * sizeof(float)
                                        : (size_t)kdim * rows * sizeof(float);
  if (col_as_a) {
    const size_t a_bytes = bbi_f32_gemm_packed_a_size(NULL, (size_t)npos, (size_t)kdim);
    col_bytes_alone = col_bytes_alone > a_bytes ? col_bytes_alone : a_bytes;
  }
  size_t tmp_bytes = on_plane ? 0 : rows * (size_t)mg * sizeof(float);
  /* the GEMM's blocking (and so its scratch) follows its row count, which is smaller for
   * the last chunk of images: room for both; a product that runs whole on one participant
   * needs room for that participant alone */
  size_t last_rows = (size_t)((n_batch % chunk ? n_batch % chunk : chunk) * npos);
  const size_t alone = conv_gemm_scratch(bbi_f32_gemm_scratch_size_alone, on_plane, mg, npos, kdim, rows, last_rows);
  size_t tmp_at = (col_bytes_alone + 63) & ~(size_t)63, scratch_at = (tmp_at + tmp_bytes + 63) & ~(size_t)63;
  const bool split = bbi_nn_split_chunks(chunks, width, (scratch_at + alone + 63) & ~(size_t)63);
  size_t scratch_size = alone;
  j.col_slots = 1;
  if (!split) {
    j.col_slots = width;
    size_t col_bytes = col_packed ? panels_bytes + width * rows_stride * sizeof(float) : col_bytes_alone;
    tmp_at = (col_bytes + 63) & ~(size_t)63, scratch_at = (tmp_at + tmp_bytes + 63) & ~(size_t)63;
    scratch_size = conv_gemm_scratch(bbi_f32_gemm_scratch_size, on_plane, mg, npos, kdim, rows, last_rows);
  }
  /* one image on the plane on several threads: its bands are the pool's tasks, each
   * participant with its own slot (a band's panels, a channel's rows, the GEMM's scratch) */
  size_t band_slot_bytes = 0;
  const size_t band_rows = col_packed ? conv_band_rows(&j.win, (size_t)kdim, width) : 0;
  /* (with fewer than two bands a participant, as on an 8×8 map, each participant would
   * stream all of W for its band: there the GEMM's regions, which cut W's rows, go to
   * the pool instead) */
  if (col_packed && !split && width > 1 && (j.win.oh + band_rows - 1) / band_rows >= 2 * width) {
    const size_t bpos = band_rows * j.win.ow;
    panels_bytes = (bbi_f32_gemm_packed_b_size(NULL, bpos, (size_t)kdim) + 63) & ~(size_t)63;
    rows_stride = ((size_t)g->kernel_size * bpos + 15) & ~(size_t)15;
    tmp_at = scratch_at = (panels_bytes + rows_stride * sizeof(float) + 63) & ~(size_t)63;
    scratch_size = bbi_f32_gemm_scratch_size_alone((size_t)mg, bpos, (size_t)kdim);
    band_slot_bytes = (scratch_at + scratch_size + 63) & ~(size_t)63;
  }
  const size_t slot_bytes = band_slot_bytes ? width * band_slot_bytes : (scratch_at + scratch_size + 63) & ~(size_t)63;
  const size_t slots = split ? width : 1, pack_at = slots * slot_bytes;
  char *mem = bbi_cpu_scratch(ctx, pack_at + pack_bytes + 64);
  if (!mem) return BB_ERR_NOMEM;
  mem = (char *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
  if (pack_here) {
    if (bbi_f32_gemm_pack_b(NULL, (size_t)mg, (size_t)kdim, 1, bb_tensor_data(w), (size_t)kdim, mem + pack_at,
                            pack_bytes))
      return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "GEMM rejected its arguments");
    packed = mem + pack_at;
  }
  j.n_batch = n_batch, j.c_in = c_in, j.m_out = m_out, j.group = group, j.cg = cg, j.mg = mg, j.kdim = kdim;
  j.npos = npos, j.chunk = chunk;
  j.direct = direct, j.planar = planar, j.patches = patches, j.on_plane = on_plane, j.col_packed = col_packed;
  j.col_as_a = col_as_a;
  j.x = bb_tensor_data(x), j.w = bb_tensor_data(w), j.b = b ? bb_tensor_data(b) : NULL, j.y = bb_tensor_data(y);
  j.packed = packed, j.pack_stride = pack_stride, j.panels_bytes = panels_bytes, j.rows_stride = rows_stride;
  j.e = own_epilogue(ctx, y);
  if (direct && clip_in_store(j.e)) j.clip = j.e->act, j.e = NULL; /* 1×1 products; the others keep the epilogue */
  /* on the plane the product lands in Y's own layout: the epilogue goes into its store
   * (a product of one row is a matrix-vector one, which takes it too) */
  j.store_epilogue = on_plane && epilogue_in_store(j.e);
  j.tmp_at = tmp_at, j.scratch_at = scratch_at, j.scratch_size = scratch_size, j.band_slot_bytes = band_slot_bytes;
  rc = bbi_nn_run_chunks(conv_chunk, &j, n_batch, chunk, split, width, mem, slot_bytes);
  return rc ? bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "GEMM rejected its arguments") : 0;
}

static void conv_generic(bbi_cpu_op_ctx *ctx, const geometry *g, int64_t group, bb_tensor *y) {
  const bb_tensor *x = ctx->inputs[0], *w = ctx->inputs[1], *b = bbi_cpu_input(ctx, 2);
  int64_t n_batch = x->dims[0], c_in = x->dims[1], m_out = w->dims[0], cg = c_in / group, mg = m_out / group;
  int64_t o[MAX_SPATIAL], k[MAX_SPATIAL];
  for (int64_t n = 0; n < n_batch; n++)
    for (int64_t m = 0; m < m_out; m++) {
      int64_t gi = m / mg;
      for (int64_t op = 0; op < g->out_size; op++) {
        unflatten(g->nd, g->out, op, o);
        double acc = b ? bbi_cpu_get_f64(b, m) : 0.0;
        for (int64_t c = 0; c < cg; c++)
          for (int64_t kp = 0; kp < g->kernel_size; kp++) {
            unflatten(g->nd, g->kernel, kp, k);
            int64_t off = input_offset(g, o, k);
            if (off < 0) continue;
            acc += bbi_cpu_get_f64(x, (n * c_in + gi * cg + c) * g->in_size + off) *
                   bbi_cpu_get_f64(w, (m * cg + c) * g->kernel_size + kp);
          }
        bbi_cpu_set_f64(y, (n * m_out + m) * g->out_size + op, acc);
      }
    }
}

static int op_conv(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *x = ctx->inputs[0], *w = ctx->inputs[1], *b = bbi_cpu_input(ctx, 2);
  int rc = bbi_cpu_expect_dtype(ctx, 0, FLOAT_TYPES);
  if (rc) return rc;
  if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "X, W and B must share one element type");
  if (w->rank != x->rank) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "W has rank %d, X has rank %d", w->rank, x->rank);
  const window_attrs *kept = kept_attrs(ctx);
  int64_t group = kept ? kept->group : bb_attr_get_int(&ctx->node->attrs, "group", 1);
  if (group < 1 || x->dims[1] % group || w->dims[0] % group)
    return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "group %lld does not divide the channels", (long long)group);
  if (w->dims[1] * group != x->dims[1])
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "W expects %lld input channels, X has %lld", (long long)(w->dims[1] * group),
                       (long long)x->dims[1]);
  if (b && (b->rank != 1 || b->dims[0] != w->dims[0]))
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "B must be 1-D with %lld values", (long long)w->dims[0]);
  geometry g;
  if ((rc = plan_geometry(ctx, x, w->dims + 2, false, true, &g))) return rc;
  for (int d = 0; d < g.nd; d++)
    if (g.kernel[d] != w->dims[2 + d]) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "kernel_shape does not match W");
  const bool swapped = conv_swaps_output(ctx, &g, group);
  int64_t out[BB_MAX_RANK] = {swapped ? w->dims[0] : x->dims[0], swapped ? x->dims[0] : w->dims[0]};
  memcpy(out + 2, g.out, (size_t)g.nd * sizeof out[0]);
  if ((rc = bbi_cpu_make_output(ctx, 0, x->dtype, x->rank, out))) return rc;
  if (swapped) ctx->state->swapped = true;
  if (!ctx->outputs[0]->numel) return 0;
  if (x->dtype == BB_DTYPE_FLOAT) return conv_f32(ctx, &g, group, swapped, ctx->outputs[0]);
  conv_generic(ctx, &g, group, ctx->outputs[0]);
  return 0;
}

/* ---- pooling ------------------------------------------------------------------------------- */

/* float32 with 1 or 2 spatial dims: the pooling kernels. */
static void pool_f32(const geometry *g, bool is_max, bool include_pad, int64_t planes, const bb_tensor *x,
                     bb_tensor *y, bb_tensor *indices) {
  bbi_window2d k = window_of(g, include_pad);
  if (is_max)
    bbi_par_f32_maxpool2d(&k, (size_t)planes, bb_tensor_data(x), bb_tensor_data(y), indices ? bb_tensor_data(indices) : NULL);
  else
    bbi_par_f32_avgpool2d(&k, (size_t)planes, bb_tensor_data(x), bb_tensor_data(y));
}

static int pool(bbi_cpu_op_ctx *ctx, bool is_max) {
  const bb_tensor *x = ctx->inputs[0];
  int rc = bbi_cpu_expect_dtype(ctx, 0, is_max && ctx->opset >= 12 ? MAXPOOL_TYPES : FLOAT_TYPES);
  if (rc) return rc;
  const window_attrs *kept = kept_attrs(ctx);
  const bb_attrlist *attrs = &ctx->node->attrs;
  bool ceil_mode = (kept ? kept->ceil_mode : bb_attr_get_int(attrs, "ceil_mode", 0)) != 0;
  bool include_pad = (kept ? kept->count_include_pad : bb_attr_get_int(attrs, "count_include_pad", 0)) != 0;
  int64_t storage_order = kept ? kept->storage_order : bb_attr_get_int(attrs, "storage_order", 0);
  geometry g;
  if ((rc = plan_geometry(ctx, x, NULL, ceil_mode, is_max || ctx->opset >= 19, &g))) return rc;
  int64_t out[BB_MAX_RANK] = {x->dims[0], x->dims[1]};
  memcpy(out + 2, g.out, (size_t)g.nd * sizeof out[0]);
  if ((rc = bbi_cpu_make_output(ctx, 0, x->dtype, x->rank, out))) return rc;
  bool want_indices = is_max && bbi_cpu_output_wanted(ctx, 1);
  if (want_indices && (rc = bbi_cpu_make_output(ctx, 1, BB_DTYPE_INT64, x->rank, out))) return rc;
  bb_tensor *y = ctx->outputs[0];
  int64_t planes = x->dims[0] * x->dims[1];
  if (x->dtype == BB_DTYPE_FLOAT && g.nd <= 2 && storage_order == 0) {
    pool_f32(&g, is_max, include_pad, planes, x, y, want_indices ? ctx->outputs[1] : NULL);
    return 0;
  }
  int64_t o[MAX_SPATIAL], k[MAX_SPATIAL], pos[MAX_SPATIAL];
  for (int64_t pl = 0; pl < planes; pl++)
    for (int64_t op = 0; op < g.out_size; op++) {
      unflatten(g.nd, g.out, op, o);
      double acc = is_max ? -INFINITY : 0.0;
      int64_t count = 0, arg = -1;
      for (int64_t kp = 0; kp < g.kernel_size; kp++) {
        unflatten(g.nd, g.kernel, kp, k);
        bool inside_padded = true;
        for (int d = 0; d < g.nd; d++) {
          pos[d] = o[d] * g.stride[d] - g.pad_begin[d] + k[d] * g.dilation[d];
          inside_padded = inside_padded && pos[d] >= -g.pad_begin[d] && pos[d] < g.in[d] + g.pad_end[d];
        }
        int64_t off = input_offset(&g, o, k);
        if (off < 0) {
          if (include_pad && inside_padded) count++; /* a padding zero */
          continue;
        }
        double v = bbi_cpu_get_f64(x, pl * g.in_size + off);
        count++;
        if (!is_max) acc += v;
        else if (v > acc || arg < 0) acc = v, arg = off;
      }
      int64_t yi = pl * g.out_size + op;
      bbi_cpu_set_f64(y, yi, is_max ? acc : count ? acc / (double)count : NAN);
      if (want_indices) {
        int64_t flat = arg;
        if (storage_order == 1 && arg >= 0) { /* column-major over the spatial dims */
          int64_t c[MAX_SPATIAL], stride = 1;
          unflatten(g.nd, g.in, arg, c);
          flat = 0;
          for (int d = 0; d < g.nd; d++) flat += c[d] * stride, stride *= g.in[d];
        }
        bbi_cpu_set_i64(ctx->outputs[1], yi, pl * g.in_size + flat);
      }
    }
  return 0;
}

static int op_maxpool(bbi_cpu_op_ctx *ctx) { return pool(ctx, true); }
static int op_averagepool(bbi_cpu_op_ctx *ctx) { return pool(ctx, false); }

static int global_pool(bbi_cpu_op_ctx *ctx, bool is_max) {
  const bb_tensor *x = ctx->inputs[0];
  int rc = bbi_cpu_expect_dtype(ctx, 0, FLOAT_TYPES);
  if (rc) return rc;
  if (x->rank < 3) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "input must be [N, C, spatial...] (rank %d)", x->rank);
  int64_t out[BB_MAX_RANK];
  int64_t spatial = 1;
  for (int i = 0; i < x->rank; i++) {
    out[i] = i < 2 ? x->dims[i] : 1;
    if (i >= 2) spatial *= x->dims[i];
  }
  if ((rc = bbi_cpu_make_output(ctx, 0, x->dtype, x->rank, out))) return rc;
  int64_t planes = x->dims[0] * x->dims[1];
  if (x->dtype == BB_DTYPE_FLOAT) {
    bbi_par_f32_reduce_rows(is_max ? BBI_REDUCE_MAX : BBI_REDUCE_MEAN, (size_t)planes, (size_t)spatial, bb_tensor_data(x),
                       bb_tensor_data(ctx->outputs[0]));
    return 0;
  }
  for (int64_t p = 0; p < planes; p++) {
    double acc = is_max ? -INFINITY : 0.0;
    for (int64_t i = 0; i < spatial; i++) {
      double v = bbi_cpu_get_f64(x, p * spatial + i);
      acc = is_max ? (v > acc || v != v ? v : acc) : acc + v;
    }
    bbi_cpu_set_f64(ctx->outputs[0], p, is_max ? acc : acc / (double)spatial);
  }
  return 0;
}

static int op_global_averagepool(bbi_cpu_op_ctx *ctx) { return global_pool(ctx, false); }
static int op_global_maxpool(bbi_cpu_op_ctx *ctx) { return global_pool(ctx, true); }

const bbi_cpu_op bbi_cpu_ops_nn[] = {
    {"Conv", 1, 2, 3, 1, 1, "float,double,float16,bfloat16", op_conv},
    {"MaxPool", 1, 1, 1, 1, 2, "float,double,float16,bfloat16,int8,uint8", op_maxpool},
    {"AveragePool", 1, 1, 1, 1, 1, "float,double,float16,bfloat16", op_averagepool},
    {"GlobalAveragePool", 1, 1, 1, 1, 1, "float,double,float16,bfloat16", op_global_averagepool},
    {"GlobalMaxPool", 1, 1, 1, 1, 1, "float,double,float16,bfloat16", op_global_maxpool},
    {"ConvTranspose", 1, 2, 3, 1, 1, "float,double,float16", bbi_nn_conv_transpose},
    {"BatchNormalization", 1, 5, 5, 1, 5, "float,double,float16,bfloat16", bbi_nn_batch_normalization},
    {"LayerNormalization", 17, 2, 3, 1, 3, "float,double,float16,bfloat16", bbi_nn_layer_normalization},
    {"InstanceNormalization", 6, 3, 3, 1, 1, "float,double,float16", bbi_nn_instance_normalization},
    {"SoftmaxCrossEntropyLoss", 12, 2, 3, 1, 2, "float,double,float16,bfloat16", bbi_nn_softmax_cross_entropy_loss},
    {"NegativeLogLikelihoodLoss", 12, 2, 3, 1, 1, "float,double,float16,bfloat16", bbi_nn_negative_log_likelihood_loss},
};
const size_t bbi_cpu_ops_nn_count = sizeof bbi_cpu_ops_nn / sizeof bbi_cpu_ops_nn[0];
