/* The neural-network family's operators that live outside nn.c (which holds the table,
 * convolution and pooling). */
#ifndef BBI_CPU_NN_H
#define BBI_CPU_NN_H

#include "cpu/cpu_op.h"

/* nn.c: whether a convolution's independent chunks of images go to the pool as its tasks
 * (each chunk's products then run whole on one participant, in slot_bytes of scratch
 * apiece) rather than one after the other with each product cut across the pool: with
 * enough chunks to share out evenly among `width` participants, and scratch within a
 * bound. Every chunk is computed the same way either way, so the choice never changes the
 * result. */
bool bbi_nn_split_chunks(size_t chunks, size_t width, size_t slot_bytes);

/* nn.c: the images per chunk for n_batch images batched at most `chunk` at a time: with
 * three chunks or more, an even number of nearly equal chunks where whole images allow it
 * (an odd count would leave one of two threads a chunk the other does not get), else
 * `chunk`. By the shape alone, never the thread count. */
int64_t bbi_nn_even_chunk(int64_t n_batch, int64_t chunk);

/* One chunk of images n0.. of a convolution, with its scratch at `mem`: 0 or the first
 * error. */
typedef int (*bbi_nn_chunk_fn)(const void *job, int64_t n0, char *mem);

/* Runs fn on the chunks n0 = 0, chunk, 2·chunk, … < n_batch: with `split`, as the pool's
 * tasks on `width` participants, each in its own slot_bytes of `mem` (slot s's at
 * mem + s·slot_bytes); else one after the other in `mem`. Returns the first error (by
 * participant when split), else 0. */
int bbi_nn_run_chunks(bbi_nn_chunk_fn fn, const void *job, int64_t n_batch, int64_t chunk, bool split, size_t width,
                      char *mem, size_t slot_bytes);

/* nn_winograd.c: a float 3×3 convolution (stride 1, dilation 1, one group; the caller
 * checked the rest) by Winograd's F(2×2, 3×3) into y, the epilogue e (if any) applied,
 * when the session allows it (bbi_cpu_node_state.winograd), W is one of its constants, the
 * shape is one where it is faster and every output came out finite; *done says whether
 * it did (if not, the caller computes y itself, overwriting whatever is there). Returns 0
 * or an error. The transformed weights are kept in the node's cache under these kinds (U
 * packed as the GEMM's A, or as its B for products with tiles as rows). */
#define BBI_NN_CACHE_WINOGRAD 4
#define BBI_NN_CACHE_WINOGRAD_B 5
int bbi_nn_conv_winograd(bbi_cpu_op_ctx *ctx, const bbi_window2d *win, bbi_cpu_epilogue *e, bb_tensor *y, bool *done);

/* nn_conv_rows.c: a float convolution (one group, 2-D) straight from its input's rows. */
typedef struct bbi_nn_conv_rows_job {
  const bbi_window2d *win;
  size_t n_batch, channels, m, in_plane; /* images, input and output channels, ih·iw */
  const float *x, *w, *bias;             /* bias: per output channel, or NULL */
  const char *packed_a;                  /* W packed as the GEMM's A (bbi_f32_gemm_pack_a), or NULL */
  const float *addend;                   /* the output's shape, or NULL */
  int relu, clamp;                       /* applied as the GEMM's store applies them */
  float min, max;
  float *y;
} bbi_nn_conv_rows_job;
/* What bbi_nn_conv_rows returns where it does not take the convolution. */
#define BBI_NN_DECLINED 1
/* Runs the convolution where it takes it — a window strided or at least 5 tall, at least
 * 16 output columns and 8 output channels, W as one k block of the GEMM's 8-row panels, on
 * a machine with the kernel — and returns 0; else BBI_NN_DECLINED, writing nothing; or an
 * error (the output then unspecified). It may take the op's scratch either way. */
int bbi_nn_conv_rows(bbi_cpu_op_ctx *ctx, const bbi_nn_conv_rows_job *job);
/* Runs the convolution with bbi_f32_conv_direct where it takes it — a shape the kernel fits
 * (unit column stride, channels·kh·kw <= BBI_F32_CONV_DIRECT_MAX_K, at least 2 output
 * channels) where the product would run on the 4-lane GEMM as one k block, so that the
 * output is that path's bits — and returns 0; else BBI_NN_DECLINED, writing nothing; or an
 * error. packed_a is not used. */
int bbi_nn_conv_direct(bbi_cpu_op_ctx *ctx, const bbi_nn_conv_rows_job *job);
/* nn_conv_transpose.c */
int bbi_nn_conv_transpose(bbi_cpu_op_ctx *ctx);

/* nn_norm.c */
int bbi_nn_batch_normalization(bbi_cpu_op_ctx *ctx);
int bbi_nn_layer_normalization(bbi_cpu_op_ctx *ctx);
int bbi_nn_instance_normalization(bbi_cpu_op_ctx *ctx);

/* nn_loss.c */
int bbi_nn_softmax_cross_entropy_loss(bbi_cpu_op_ctx *ctx);
int bbi_nn_negative_log_likelihood_loss(bbi_cpu_op_ctx *ctx);

#endif
