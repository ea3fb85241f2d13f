/* A float convolution on the plane from its input's shifted rows (bbi_f32_conv_rows), for
 * strided windows on few input channels — an image model's stem — whose column matrix is
 * kh/sh times the input it copies. Each image: its shifted rows (tasks by channel), then
 * its output rows in bands (the pool's tasks); every output is the same dot product
 * whatever the cut, so the bits do not depend on the thread count, and they are the GEMM
 * path's (see conv_rows.c). */
#include "cpu/nn.h"
#include "util/parallel.h"

/* Fewer output columns than this leave most of a 32-wide tile idle: the GEMM path's
 * panels then hold positions of several rows. */
#define CONV_ROWS_MIN_WIDTH 16

typedef struct rows_job {
  const bbi_f32_conv_rows_args *a;
  const float *x;
  size_t plane, band;
  float *shifted;
} rows_job;

static void shift_task(void *ctx, size_t task, size_t slot) {
  const rows_job *j = ctx;
  (void)slot;
  bbi_f32_conv_rows_shift(j->a->win, task, task + 1, j->x, j->plane, j->shifted);
}

static void band_task(void *ctx, size_t task, size_t slot) {
  const rows_job *j = ctx;
  const size_t oh = j->a->win->oh, oy0 = task * j->band, oy1 = oy0 + j->band < oh ? oy0 + j->band : oh;
  (void)slot;
  bbi_f32_conv_rows(j->a, oy0, oy1);
}

int bbi_nn_conv_rows(bbi_cpu_op_ctx *ctx, const bbi_nn_conv_rows_job *job) {
  const bbi_window2d *win = job->win;
  if (!bbi_f32_conv_rows_available() || job->m < 8 || win->ow < CONV_ROWS_MIN_WIDTH || (win->sh < 2 && win->kh < 5))
    return BBI_NN_DECLINED;
  const size_t k = job->channels * win->kh * win->kw, npos = win->oh * win->ow;
  const size_t floats = bbi_f32_conv_rows_shifted_floats(win, job->channels);
  int rc = bbi_cpu_check_size(ctx, (int64_t)floats, sizeof(float), "the shifted rows");
  if (rc) return rc;
  const size_t shifted_bytes = (floats * sizeof(float) + 63) & ~(size_t)63;
  const size_t a_bytes = job->packed_a ? 0 : bbi_f32_gemm_packed_a_size(NULL, job->m, k);
  char *mem = bbi_cpu_scratch(ctx, shifted_bytes + a_bytes + 64);
  if (!mem) return BB_ERR_NOMEM;
  mem = (char *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
  char *packed = (char *)job->packed_a;
  if (!packed) { /* W not a constant: packed here, once for the batch */
    packed = mem + shifted_bytes;
    if (bbi_f32_gemm_pack_a(NULL, job->m, k, 0, 1.0f, job->w, k, packed, a_bytes)) return BBI_NN_DECLINED;
  }
  /* W as one k block of 8-row panels: the GEMM's whole dot product in one pass, which the
   * kernel repeats */
  size_t stride, rows_after, height;
  const float *panels = bbi_f32_gemm_packed_a_row(NULL, job->m, k, 0, packed, &stride, &rows_after, &height);
  if (!panels || height != 8 || rows_after + 1 < k) return BBI_NN_DECLINED;
  float *shifted = (float *)mem;
  const size_t width = bbi_parallel_width();
  /* on several threads at least two bands a participant, so a slowed one leaves work to
   * take; on one, one band */
  const size_t bands = width > 1 ? 2 * width : 1;
  rows_job j = {NULL, NULL, job->in_plane, (win->oh + bands - 1) / bands, shifted};
  for (size_t n = 0; n < job->n_batch; n++) {
    const size_t out_at = n * job->m * npos;
    bbi_f32_conv_rows_args a = {win, job->channels, job->m, shifted, panels, stride, job->bias,
                                job->addend ? job->addend + out_at : NULL, job->relu, job->clamp, job->min, job->max,
                                job->y + out_at};
    j.a = &a, j.x = job->x + n * job->channels * job->in_plane;
    bbi_parallel_run(job->channels, width, shift_task, &j);
    bbi_parallel_run((win->oh + j.band - 1) / j.band, width, band_task, &j);
  }
  return 0;
}

/* bbi_nn_conv_direct: the images' bands of output rows as the pool's tasks, each padding
 * the input rows its band reads into its participant's slot of the scratch. Every output
 * is the same dot product whatever the cut, so the bits do not depend on the thread
 * count. */
typedef struct direct_job {
  const bbi_nn_conv_rows_job *job;
  size_t bands, band, slot_floats;
  float *scratch;
} direct_job;

static void direct_task(void *ctx, size_t task, size_t slot) {
  const direct_job *d = ctx;
  const bbi_nn_conv_rows_job *job = d->job;
  const size_t n = task / d->bands, oy0 = task % d->bands * d->band, npos = job->win->oh * job->win->ow;
  const size_t out_at = n * job->m * npos;
  const bbi_f32_conv_direct_args a = {job->win, job->channels, job->m, job->x + n * job->channels * job->in_plane,
                                      job->in_plane, job->w, job->bias, job->addend ? job->addend + out_at : NULL,
                                      job->relu, job->clamp, job->min, job->max, job->y + out_at};
  bbi_f32_conv_direct(&a, oy0, oy0 + d->band, d->scratch + slot * d->slot_floats);
}

int bbi_nn_conv_direct(bbi_cpu_op_ctx *ctx, const bbi_nn_conv_rows_job *job) {
  const bbi_window2d *win = job->win;
  const bbi_f32_gemm_config *cfg = bbi_f32_gemm_default_config();
  const size_t k = job->channels * win->kh * win->kw;
  if (cfg->ukernel != bbi_f32_gemm_ukernel_5x8__f32x4 || k > cfg->kc ||
      !bbi_f32_conv_direct_fits(win, job->channels, job->m))
    return BBI_NN_DECLINED;
  if (job->n_batch == 0) return 0; /* nothing to write (and no images to share out) */
  const size_t width = bbi_parallel_width();
  /* whole images while there are at least two a participant, else bands of rows so there are */
  size_t bands = 1;
  if (width > 1 && job->n_batch < 2 * width) bands = (2 * width + job->n_batch - 1) / job->n_batch;
  if (bands > win->oh) bands = win->oh;
  const size_t band = (win->oh + bands - 1) / bands;
  bands = (win->oh + band - 1) / band;
  const size_t slot_floats = (bbi_f32_conv_direct_scratch_floats(win, job->channels, job->m, band) + 15) & ~(size_t)15;
  int rc = bbi_cpu_check_size(ctx, (int64_t)(slot_floats * width), sizeof(float), "the padded rows");
  if (rc) return rc;
  char *mem = bbi_cpu_scratch(ctx, slot_floats * width * sizeof(float) + 64);
  if (!mem) return BB_ERR_NOMEM;
  direct_job d = {job, bands, band, slot_floats, (float *)(((uintptr_t)mem + 63) & ~(uintptr_t)63)};
  bbi_parallel_run(job->n_batch * bands, width, direct_task, &d);
  return 0;
}
