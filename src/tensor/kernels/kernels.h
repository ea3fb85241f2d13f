/* f32 compute kernels for the CPU backend: GEMM, elementwise binary and unary
 * operations, fused activations, transposes, pooling, depthwise convolution, row
 * reductions, softmax and the scan for a non-finite float.
 *
 * Every kernel comes in two forms: the SIMD one (written once against the portable vector
 * layer in vec.h, so it is SIMD128 in WebAssembly and SSE2 on x86-64, with AVX2/FMA and
 * AVX-512 GEMM micro-kernels picked at run time on x86-64) and a `_scalar` twin, plain C
 * that the tests hold the SIMD form to. Kernels do not allocate: GEMM takes its packing
 * buffer from the caller (sized by bbi_f32_gemm_scratch_size). Arrays may be unaligned;
 * outputs may alias inputs only where a function says so. */
#ifndef BBI_TENSOR_KERNELS_H
#define BBI_TENSOR_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- GEMM ---------------------------------------------------------------------------- */

/* C = alpha * op(A) * op(B) + beta * C + bias, then optionally clamped, with op(A) m×k
 * and op(B) k×n, all row-major with leading dimensions (row strides, in floats). This is
 * ONNX Gemm with C broadcast along rows (bias, n floats) or along columns (bias_per_row,
 * m floats); other broadcasts of ONNX's C are written into the output first and taken in
 * with beta. When beta is 0, C is only written, never read (so it may hold NaN), as in
 * BLAS; with alpha 0 or k 0 neither A nor B is read. A zero-initialised struct plus sizes,
 * pointers and alpha is a plain product. */
typedef struct bbi_f32_gemm_args {
  size_t m, n, k;
  int trans_a;      /* 0: A is m×k (lda >= k); 1: A is stored k×m (lda >= m) */
  int trans_b;      /* 0: B is k×n (ldb >= n); 1: B is stored n×k (ldb >= k) */
  float alpha, beta;
  const float *a;
  size_t lda;
  const float *b;
  size_t ldb;
  const float *bias; /* NULL, or n floats: bias[j] is added to column j of every row */
  float *c;
  size_t ldc;        /* >= n; C must not overlap A or B */
  int clamp;         /* nonzero: every result x becomes min(max(x, min), max) (e.g. ReLU) */
  float min, max;
  const float *bias_per_row; /* NULL, or m floats: bias_per_row[i] is added to row i */
  /* NULL, or op(B) packed once by bbi_f32_gemm_pack_b (for constant weights); b, ldb and
   * trans_b are then not used. It must have been packed for the same n, k and
   * configuration, or the product is refused. */
  const void *packed_b;
  /* NULL, or alpha*op(A) packed once by bbi_f32_gemm_pack_a (for constant weights as the
   * left operand); a, lda and trans_a are then not used. It must have been packed for the
   * same m, k, alpha and configuration, or the product is refused; so is a product of one
   * row or one column (a matrix-vector product, which packs nothing: pass A). */
  const void *packed_a;
  /* NULL, or an m×n matrix with C's row stride (ldc) added to the result after every k
   * block and before ReLU and the clamp: C = act(C + addend), the bits of the separate Add
   * then activation (a residual connection's Add fused into the product's store). */
  const float *addend;
  int relu; /* nonzero: every result x becomes (x < 0 ? 0 : x) + 0, Relu's rule (NaN stays
               NaN, -0 becomes +0), before the clamp */
} bbi_f32_gemm_args;

/* What a micro-kernel does with its accumulated tile `acc` (one k block of the product,
 * already scaled by alpha): on the first k block, c = acc + beta*c + bias + bias_per_row
 * (c is not read when beta is 0, either bias may be NULL); on later ones, c = c + acc.
 * After the last block the addend (if any) is added, then ReLU (`relu`) and the clamp
 * (`clamp`) are applied; they are set for the last block only. */
typedef struct bbi_f32_gemm_tile {
  int first;
  int clamp;
  float beta;
  const float *bias;         /* the tile's first column of the bias row, or NULL */
  float min, max;
  const float *bias_per_row; /* the tile's first row of the per-row bias, or NULL */
  const float *addend;       /* the tile's top-left element of the addend (row stride ldc), or NULL */
  int relu;
} bbi_f32_gemm_tile;

/* A micro-kernel: multiplies a packed mr×kc panel of A (pa, MR floats per k step) by a
 * packed kc×nr panel of B (pb, NR floats per k step), both zero-padded to the full tile,
 * and applies `tile` to the top-left mr×nr corner of C (row stride ldc). */
typedef void (*bbi_f32_gemm_ukernel_fn)(size_t kc, const float *pa, const float *pb, float *c,
                                       size_t ldc, size_t mr, size_t nr,
                                       const bbi_f32_gemm_tile *tile);

/* A micro-kernel with the cache blocking it was tuned with. */
typedef struct bbi_f32_gemm_config {
  const char *name;  /* e.g. "5x8-f32x4": tile and instruction set */
  size_t mr, nr;     /* micro-tile */
  size_t mc, kc, nc; /* blocks of A (mc×kc, in L2) and B (kc×nc); mc a multiple of mr, nc
                        of nr. Blocks are evened out: k = 700 with kc 512 runs as 2×350. */
  bbi_f32_gemm_ukernel_fn ukernel;
  bbi_f32_gemm_ukernel_fn ukernel_1row; /* the same NR with MR = 1: one-row products on a
                                          packed B */
  bbi_f32_gemm_ukernel_fn ukernel_4row; /* NULL, or the same NR with MR = 4: products of 2 to
                                          4 rows (a convolution's 2×2 feature maps), which
                                          would leave most of a taller tile's work unused,
                                          and, where MR is not a multiple of 4, products
                                          that MR-row panels would pad by over 1/32 more
                                          rows than 4-row ones (16 or 32 rows with MR 5) */
} bbi_f32_gemm_config;

/* The configuration bbi_f32_gemm uses on this machine (chosen by CPU features). */
const bbi_f32_gemm_config *bbi_f32_gemm_default_config(void);

/* All configurations this machine can run, best first; returns how many. For tests and
 * benchmarks. */
size_t bbi_f32_gemm_configs(const bbi_f32_gemm_config *const **list);

/* Bytes of scratch bbi_f32_gemm_run needs for products of these sizes (0 when none). */
size_t bbi_f32_gemm_scratch_size_for(const bbi_f32_gemm_config *cfg, size_t m, size_t n,
                                    size_t k);

/* Computes the product described by g with the given configuration, packing panels of A
 * and B into scratch. One-row (m = 1) and one-column (n = 1) products skip the packing
 * and run as matrix-vector products. Returns 0, or BB_ERR_INVALID_ARGUMENT when a leading
 * dimension is too small, a needed pointer is NULL, scratch_size is below what
 * bbi_f32_gemm_scratch_size_for asks, or packed_b does not fit the product; C is then
 * untouched. */
int bbi_f32_gemm_run(const bbi_f32_gemm_config *cfg, const bbi_f32_gemm_args *g, void *scratch,
                    size_t scratch_size);

/* The same two with the default configuration. */
size_t bbi_f32_gemm_scratch_size(size_t m, size_t n, size_t k);
/* Bytes for a product with the default configuration that runs on its caller alone: given
 * only this much, bbi_f32_gemm never cuts the product across the work pool (for callers
 * that hand whole products to the pool's participants). */
size_t bbi_f32_gemm_scratch_size_alone(size_t m, size_t n, size_t k);
int bbi_f32_gemm(const bbi_f32_gemm_args *g, void *scratch, size_t scratch_size);

/* Bytes that op(B), k×n, takes packed for cfg (NULL: the default configuration). */
size_t bbi_f32_gemm_packed_b_size(const bbi_f32_gemm_config *cfg, size_t n, size_t k);

/* Packs op(B) (k×n; B and ldb read as bbi_f32_gemm_args reads them with trans_b) into
 * `packed` for use as args.packed_b with the same cfg (NULL: default), n and k. Returns 0,
 * or BB_ERR_INVALID_ARGUMENT for a NULL pointer, a short ldb or a small packed_size. */
int bbi_f32_gemm_pack_b(const bbi_f32_gemm_config *cfg, size_t n, size_t k, int trans_b,
                       const float *b, size_t ldb, void *packed, size_t packed_size);

/* Fills rows [p0, p1) of a k×n matrix B into `rows` (row-major, n floats a row). */
typedef void (*bbi_f32_gemm_rows_fn)(void *ctx, size_t p0, size_t p1, float *rows);

/* Packs rows [p0, p1) of B (k×n, not transposed), which `rows` holds (n floats a row),
 * into `packed` as bbi_f32_gemm_pack_b lays out the whole of B. Several calls over
 * disjoint rows, in any order (or at once on several threads), then
 * bbi_f32_gemm_pack_b_header, give what bbi_f32_gemm_pack_b gives for B: a producer of
 * B's rows (a convolution's column matrix, a channel at a time) writes the GEMM's panels
 * without B ever being whole in memory. packed must hold bbi_f32_gemm_packed_b_size bytes. */
void bbi_f32_gemm_pack_b_rows(const bbi_f32_gemm_config *cfg, size_t n, size_t k, size_t p0, size_t p1,
                             const float *rows, void *packed);
/* Where row p of B (k×n) starts in `packed` as bbi_f32_gemm_pack_b_rows lays it out for
 * cfg (NULL: the default): columns [q·NR, q·NR + NR) of the row are the NR floats at
 * row + q·(*panel_stride), and each of the next *rows_after rows (in the same k block)
 * starts NR floats after the one before. NULL when the columns span more than one nc
 * block (the row is then not one run of panels) or p >= k. */
float *bbi_f32_gemm_packed_b_row(const bbi_f32_gemm_config *cfg, size_t n, size_t k, size_t p, void *packed,
                                 size_t *panel_stride, size_t *rows_after);
/* Writes the header of a packed B that bbi_f32_gemm_pack_b_rows filled. */
void bbi_f32_gemm_pack_b_header(const bbi_f32_gemm_config *cfg, size_t n, size_t k, void *packed);

/* Bytes that op(A), m×k, takes packed for cfg (NULL: the default configuration). */
size_t bbi_f32_gemm_packed_a_size(const bbi_f32_gemm_config *cfg, size_t m, size_t k);

/* Packs alpha*op(A) (m×k; A and lda read as bbi_f32_gemm_args reads them with trans_a)
 * into `packed` for use as args.packed_a with the same cfg (NULL: default), m, k and alpha:
 * the panels the driver would pack on every call, so the product is the same bits.
 * Returns 0, or BB_ERR_INVALID_ARGUMENT for a NULL pointer, a short lda or a small
 * packed_size. */
int bbi_f32_gemm_pack_a(const bbi_f32_gemm_config *cfg, size_t m, size_t k, int trans_a,
                       float alpha, const float *a, size_t lda, void *packed, size_t packed_size);
/* The header bbi_f32_gemm_pack_a writes, for panels a producer filled itself (see
 * bbi_f32_gemm_packed_a_row). */
void bbi_f32_gemm_pack_a_header(const bbi_f32_gemm_config *cfg, size_t m, size_t k, float alpha, void *packed);
/* Where column p of op(A) (m×k, times alpha) starts in `packed` as bbi_f32_gemm_pack_a lays
 * it out for cfg (NULL: the default): rows [q·h, q·h + h) of the column are the h floats
 * at col + q·(*panel_stride), h = *height (the panel height the product takes for m rows),
 * zero past row m; each of the next *rows_after columns (in the same k block) starts h
 * floats after the one before. NULL when the rows span more than one mc block or p >= k. */
float *bbi_f32_gemm_packed_a_row(const bbi_f32_gemm_config *cfg, size_t m, size_t k, size_t p, void *packed,
                                 size_t *panel_stride, size_t *rows_after, size_t *height);

/* Reference: the textbook triple loop, float accumulation in k order, alpha applied to the
 * finished dot product. Does no argument checking and ignores packed_b. */
void bbi_f32_gemm_scalar(const bbi_f32_gemm_args *g);

/* Micro-kernels (the configurations above point at them). */
void bbi_f32_gemm_ukernel_5x8__f32x4(size_t kc, const float *pa, const float *pb, float *c,
                                    size_t ldc, size_t mr, size_t nr,
                                    const bbi_f32_gemm_tile *tile);
void bbi_f32_gemm_ukernel_4x8__f32x4(size_t kc, const float *pa, const float *pb, float *c,
                                    size_t ldc, size_t mr, size_t nr,
                                    const bbi_f32_gemm_tile *tile);
void bbi_f32_gemm_ukernel_1x8__f32x4(size_t kc, const float *pa, const float *pb, float *c,
                                    size_t ldc, size_t mr, size_t nr,
                                    const bbi_f32_gemm_tile *tile);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BBI_HAVE_X86_GEMM 1
void bbi_f32_gemm_ukernel_6x16__avx2fma(size_t kc, const float *pa, const float *pb, float *c,
                                       size_t ldc, size_t mr, size_t nr,
                                       const bbi_f32_gemm_tile *tile);
void bbi_f32_gemm_ukernel_1x16__avx2fma(size_t kc, const float *pa, const float *pb, float *c,
                                       size_t ldc, size_t mr, size_t nr,
                                       const bbi_f32_gemm_tile *tile);
void bbi_f32_gemm_ukernel_8x32__avx512(size_t kc, const float *pa, const float *pb, float *c,
                                      size_t ldc, size_t mr, size_t nr,
                                      const bbi_f32_gemm_tile *tile);
void bbi_f32_gemm_ukernel_4x32__avx512(size_t kc, const float *pa, const float *pb, float *c,
                                      size_t ldc, size_t mr, size_t nr,
                                      const bbi_f32_gemm_tile *tile);
void bbi_f32_gemm_ukernel_1x32__avx512(size_t kc, const float *pa, const float *pb, float *c,
                                      size_t ldc, size_t mr, size_t nr,
                                      const bbi_f32_gemm_tile *tile);
#endif

/* Applies `tile` to the mr×nr corner of C from an accumulated tile stored row-major with
 * row stride ld; micro-kernels use it for tiles cut by the edge of C. */
void bbi_f32_gemm_tile_apply(const float *acc, size_t ld, float *c, size_t ldc, size_t mr,
                            size_t nr, const bbi_f32_gemm_tile *tile);

/* The matrix-vector products behind one-row GEMMs: y[j] = sum over p of x[p] * op(B)[p][j]
 * for j < n, op(B) k×n read as bbi_f32_gemm_args reads it. */
void bbi_f32_gemv(size_t n, size_t k, const float *x, const float *b, size_t ldb, int trans_b,
                 float *y);

/* 1 when these kernels were built with relaxed SIMD (bb-relaxed.wasm: their multiply-adds
 * may fuse, vec.h's BBI_F32X4_MADD), 0 otherwise. */
int bbi_kernels_relaxed(void);

/* ---- elementwise ---------------------------------------------------------------------- */

typedef enum bbi_binary_op {
  BBI_BINARY_ADD,
  BBI_BINARY_SUB,
  BBI_BINARY_MUL,
  BBI_BINARY_DIV,
  BBI_BINARY_MAX, /* NaN if either operand is NaN; the larger operand otherwise */
  BBI_BINARY_MIN,
  BBI_BINARY_OP_COUNT
} bbi_binary_op;

/* y[i] = a[i] op b[i], for i < n. y may be a or b. */
void bbi_f32_vbinary(bbi_binary_op op, size_t n, const float *a, const float *b, float *y);
void bbi_f32_vbinary_scalar(bbi_binary_op op, size_t n, const float *a, const float *b, float *y);

/* y[i] = a[i] op b (the second operand is one scalar). y may be a. */
void bbi_f32_vbinary_c(bbi_binary_op op, size_t n, const float *a, float b, float *y);
void bbi_f32_vbinary_c_scalar(bbi_binary_op op, size_t n, const float *a, float b, float *y);

/* y[i] = a op b[i] (the first operand is one scalar). y may be b. */
void bbi_f32_vbinary_rc(bbi_binary_op op, size_t n, float a, const float *b, float *y);
void bbi_f32_vbinary_rc_scalar(bbi_binary_op op, size_t n, float a, const float *b, float *y);

/* Row broadcast over a rows×cols matrix (contiguous rows): y[r][c] = a[r][c] op b[c], or
 * b[c] op a[r][c] when b_first. y may be a. */
void bbi_f32_vbinary_row(bbi_binary_op op, size_t rows, size_t cols, const float *a,
                        const float *b, int b_first, float *y);
void bbi_f32_vbinary_row_scalar(bbi_binary_op op, size_t rows, size_t cols, const float *a,
                               const float *b, int b_first, float *y);

typedef enum bbi_unary_op {
  BBI_UNARY_NEG,
  BBI_UNARY_ABS,
  BBI_UNARY_SQRT,
  BBI_UNARY_EXP,
  BBI_UNARY_LOG,
  BBI_UNARY_RELU, /* (x < 0 ? 0 : x) + 0: NaN stays NaN, -0 becomes +0 */
  BBI_UNARY_SIGMOID,
  BBI_UNARY_TANH,
  BBI_UNARY_OP_COUNT
} bbi_unary_op;

/* y[i] = op(x[i]), for i < n. y may be x. exp, log, sigmoid and tanh are within 2 ulp of
 * the correctly rounded result; the others are exact. The scalar twin calls libm (expf,
 * logf, and tanh and 1/(1+exp(-x)) in double, rounded once). */
void bbi_f32_vunary(bbi_unary_op op, size_t n, const float *x, float *y);
void bbi_f32_vunary_scalar(bbi_unary_op op, size_t n, const float *x, float *y);

/* The activations a session fuses into the node that produces their input. */
typedef enum bbi_activation {
  BBI_ACTIVATION_NONE,
  BBI_ACTIVATION_RELU,    /* (x < 0 ? 0 : x) + 0, as Relu */
  BBI_ACTIVATION_CLIP,    /* min(max(x, min), max), as Clip */
  BBI_ACTIVATION_SIGMOID, /* as Sigmoid */
  BBI_ACTIVATION_SILU     /* x · sigmoid(x), as Sigmoid then Mul */
} bbi_activation;

typedef struct bbi_f32_activation {
  bbi_activation kind;
  float min, max; /* BBI_ACTIVATION_CLIP's bounds */
} bbi_f32_activation;

/* y[i] = act(y[i] + addend[i]) (addend NULL: act(y[i])), for i < n: the same bits as the
 * separate Add and activation kernels. The scalar twin computes sigmoid in double, as
 * bbi_f32_vunary_scalar does. */
void bbi_f32_vactivate(const bbi_f32_activation *a, size_t n, const float *addend, float *y);
void bbi_f32_vactivate_scalar(const bbi_f32_activation *a, size_t n, const float *addend, float *y);

/* One optimizer step of one parameter over n elements, torch.optim's rule as the optimizer
 * graph (bb_grad_optimizer_build) writes it, its operations in the graph's order, each
 * rounded to float, none fused:
 *   g ← g·clip_coef (clip), then g ← g + p·wd (l2: L2 weight decay);
 *   p̂ = p·decay_scale (decay: AdamW's decoupled decay), else p;
 *   SGD       p' = p̂ − g·lr
 *   momentum  b' = b·mu + g, p' = p̂ − b'·lr          (state 0: the buffer b)
 *   Nesterov  b' = b·mu + g, p' = p̂ − (g + b'·mu)·lr
 *   Adam      m' = m·b1 + g·c1, v' = v·b2 + (g·g)·c2, p' = p̂ − lr·(m' / (sqrt(v') / s2 + eps))
 *             (state 0 and 1: m and v; lr is then lr / (1 − b1^t), c1 = 1 − b1, c2 = 1 − b2,
 *             s2 = sqrt(1 − b2^t), as the graph computes them).
 * Each input is read once and each output written once; the outputs must not overlap the
 * inputs; the states a rule has not are neither read nor written (may be NULL). */
typedef enum bbi_update_rule { BBI_RULE_SGD, BBI_RULE_MOMENTUM, BBI_RULE_NESTEROV, BBI_RULE_ADAM } bbi_update_rule;

typedef struct bbi_f32_update_coef {
  bbi_update_rule rule;
  bool clip, l2, decay;
  float clip_coef, wd, decay_scale;
  float lr, mu;                  /* mu: momentum and Nesterov */
  float b1, c1, b2, c2, s2, eps; /* Adam */
} bbi_f32_update_coef;

/* The states a rule keeps: none for SGD, the buffer for momentum and Nesterov, m and v
 * for Adam. */
static inline size_t bbi_update_states(bbi_update_rule rule) {
  return rule == BBI_RULE_SGD ? 0 : rule == BBI_RULE_ADAM ? 2 : 1;
}

typedef struct bbi_f32_update_arrays {
  const float *p, *g, *state[2];
  float *p_out, *state_out[2];
} bbi_f32_update_arrays;

void bbi_f32_update(const bbi_f32_update_coef *k, size_t n, const bbi_f32_update_arrays *a);
void bbi_f32_update_scalar(const bbi_f32_update_coef *k, size_t n, const bbi_f32_update_arrays *a);

/* y[j·ldy + i] = x[i·ldx + j] for i < rows, j < cols (y must not overlap x). */
void bbi_f32_transpose(size_t rows, size_t cols, const float *x, size_t ldx, float *y, size_t ldy);
void bbi_f32_transpose_scalar(size_t rows, size_t cols, const float *x, size_t ldx, float *y, size_t ldy);

/* ---- comparison and selection -------------------------------------------------------- */

typedef enum bbi_compare_op { BBI_COMPARE_EQ, BBI_COMPARE_GT, BBI_COMPARE_GE, BBI_COMPARE_LT, BBI_COMPARE_LE } bbi_compare_op;

/* y[i] = a[i·sa] op b[i·sb] as a bool (byte 0 or 1), for i < n; sa and sb are 1 for an
 * operand that advances, 0 for one that repeats its first element. Any comparison with a
 * NaN is false. */
void bbi_f32_vcompare(bbi_compare_op op, size_t n, const float *a, size_t sa, const float *b, size_t sb, uint8_t *y);
void bbi_f32_vcompare_scalar(bbi_compare_op op, size_t n, const float *a, size_t sa, const float *b, size_t sb,
                            uint8_t *y);

/* y[i] = cond[i] ? a[i·sa] : b[i·sb] (any nonzero byte is true), bits copied unchanged;
 * y may be a or b when it advances. */
void bbi_f32_vselect(size_t n, const uint8_t *cond, const float *a, size_t sa, const float *b, size_t sb, float *y);
void bbi_f32_vselect_scalar(size_t n, const uint8_t *cond, const float *a, size_t sa, const float *b, size_t sb,
                           float *y);

/* ---- windows: pooling and the column matrices of convolution ---------------------------- */

/* A 2-D window sliding over planes of ih×iw floats, placed at oh×ow positions (ONNX's
 * pads, strides, dilations and ceil_mode already turned into the position grid, which the
 * caller computes). Strides and dilations are >= 1; the window at (oy, ox) starts at row
 * oy·sh - ph, column ox·sw - pw of the plane. */
typedef struct bbi_window2d {
  size_t ih, iw, oh, ow;
  size_t kh, kw, sh, sw, dh, dw;
  size_t ph, pw, ph_end, pw_end; /* padding before and after */
  int count_include_pad;         /* average pooling: padding positions count as zeros */
} bbi_window2d;

/* The column matrix of a convolution: for each channel c < channels of x [channels, ih,
 * iw] and window position (ky, kx), the row at col + ((c·kh + ky)·kw + kx)·ld holds the
 * oh·ow values the window reads there, 0 in the padding. */
void bbi_f32_im2col_2d(const bbi_window2d *g, size_t channels, const float *x, float *col, size_t ld);
void bbi_f32_im2col_2d_scalar(const bbi_window2d *g, size_t channels, const float *x, float *col, size_t ld);
/* Rows [c0·kh·kw, c1·kh·kw) of that column matrix (channels c0..c1 of x, channel c's
 * ih×iw plane at x + c·plane, plane >= ih·iw: a band of a taller image's rows takes its
 * image's plane), k rows in all and oh·ow columns, written straight into packed GEMM
 * panels, the same bytes, with no row buffer: as B (k×oh·ow) the way
 * bbi_f32_gemm_pack_b_rows writes it, or with as_a as A transposed (oh·ow×k, alpha 1, the
 * positions as rows) the way bbi_f32_gemm_pack_a lays it out (then
 * bbi_f32_gemm_pack_a_header). cfg NULL is the default. Returns 0, writing
 * nothing, where it has no kernel for cfg and the shape (x86-64 with AVX-512, the
 * 32-wide configuration, panels 4 to 32 wide, the positions in one nc / mc block); the
 * caller then packs through a column matrix. */
int bbi_f32_im2col_pack_2d(const bbi_f32_gemm_config *cfg, const bbi_window2d *g, size_t c0, size_t c1,
                           const float *x, size_t plane, size_t k, int as_a, void *packed);

/* The transposed column matrix: row p = oy·ow + ox (row stride ld ≥ channels·kh·kw) holds
 * the window of output position p, (channel, ky, kx) order, 0 in the padding. Copies runs
 * of kw, so it suits windows wider than the output (a weight gradient's convolution). */
/* dst[0, len) = zeros with `inside` floats of src at dst + left (left + inside <= len; src
 * NULL: all zeros): a row of an input with its padding written out. */
void bbi_f32_padded_row(float *dst, size_t len, size_t left, const float *src, size_t inside);
void bbi_f32_im2col_patches_2d(const bbi_window2d *g, size_t channels, const float *x, float *col, size_t ld);
void bbi_f32_im2col_patches_2d_scalar(const bbi_window2d *g, size_t channels, const float *x, float *col, size_t ld);

/* A convolution from its input's shifted rows (conv_rows.c), for few input channels and a
 * wide window: for each channel c and window column kx, `shifted` holds the rows the
 * window reads through that column, row r of (c, kx) at shifted + ((c·kw + kx)·H + r)·W
 * (H = (oh-1)·sh + (kh-1)·dh + 1 rows, padding included; W = ow rounded up to 32) with
 * element ox = x[c][r - ph][ox·sw + kx·dw - pw], 0 in the padding and past ow. Output
 * channels [0, m) of rows [oy0, oy1) are then the GEMM's product W · column matrix with
 * W's 8-row panels packed as bbi_f32_gemm_pack_a lays them out in one k block: the same
 * operations in the same order, so the same bits as bbi_f32_gemm's product and store. */
typedef struct bbi_f32_conv_rows_args {
  const bbi_window2d *win;
  size_t channels, m;
  const float *shifted;
  const float *panels;  /* W's first 8-row panel; panel q at panels + q·panel_stride */
  size_t panel_stride;
  const float *bias;    /* per output channel, or NULL */
  const float *addend;  /* the output's shape (its plane as the row stride), or NULL */
  int relu, clamp;
  float min, max;
  float *y;             /* output channel 0 of the image: m planes of oh·ow */
} bbi_f32_conv_rows_args;

/* 1 when this machine has the kernel (x86-64 with AVX-512), else 0. */
int bbi_f32_conv_rows_available(void);
/* Floats the shifted rows of `channels` channels take. */
size_t bbi_f32_conv_rows_shifted_floats(const bbi_window2d *g, size_t channels);
/* Writes the shifted rows of channels [c0, c1) of x (channel c's plane at x + c·plane). */
void bbi_f32_conv_rows_shift(const bbi_window2d *g, size_t c0, size_t c1, const float *x, size_t plane,
                             float *shifted);
/* Output rows [oy0, oy1) of every output channel; returns 1, or 0 (writing nothing) where
 * the kernel is not available. */
int bbi_f32_conv_rows(const bbi_f32_conv_rows_args *a, size_t oy0, size_t oy1);

/* A convolution with unit column stride and a small dot product per output (conv_direct.c)
 * from a zero-padded copy of its input rows, with the 4-lane GEMM's tile operations in its
 * order: where the 4-lane GEMM runs the product (m, n >= 2, k <= its kc: one k block) each
 * output is the bits of im2col + that GEMM with bias_per_row, addend, relu and clamp. */
#define BBI_F32_CONV_DIRECT_MAX_K 16
typedef struct bbi_f32_conv_direct_args {
  const bbi_window2d *win; /* sw == 1 */
  size_t channels, m;
  const float *x;  /* channel c's ih×iw plane at x + c·plane */
  size_t plane;
  const float *w;  /* [m, channels·kh·kw] */
  const float *bias;   /* NULL, or m floats */
  const float *addend; /* NULL, or [m, oh·ow] like y */
  int relu, clamp;
  float min, max;
  float *y; /* [m, oh·ow] */
} bbi_f32_conv_direct_args;

/* 1 when the kernel takes the shape: sw == 1, m >= 2, channels·kh·kw <= BBI_F32_CONV_DIRECT_MAX_K. */
int bbi_f32_conv_direct_fits(const bbi_window2d *g, size_t channels, size_t m);
/* Floats of scratch a call for at most `rows` output rows takes. */
size_t bbi_f32_conv_direct_scratch_floats(const bbi_window2d *g, size_t channels, size_t m, size_t rows);
size_t bbi_f32_conv_direct_padded_width(const bbi_window2d *g);
/* Output rows [oy0, oy1) of every output channel (a shape that fits). */
void bbi_f32_conv_direct(const bbi_f32_conv_direct_args *a, size_t oy0, size_t oy1, float *scratch);

/* The adjoint of bbi_f32_im2col_2d, accumulating: every value of the column matrix (its rows) is added to
 * the element of x it was read from; values that fall in the padding are dropped. */
void bbi_f32_col2im_2d(const bbi_window2d *g, size_t channels, const float *col, size_t ld, float *x);
void bbi_f32_col2im_2d_scalar(const bbi_window2d *g, size_t channels, const float *col, size_t ld, float *x);

/* y [planes, oh, ow] = the maximum of each window of x [planes, ih, iw]: the first value
 * of the window in row-major order, replaced by every later one that is greater (so a NaN
 * first stays, a NaN later is passed over; a window entirely in the padding gives -inf).
 * indices (NULL: not wanted) gets where each maximum is, as a flat index into x counted
 * from its first plane (-1 in the plane for an all-padding window). */
void bbi_f32_maxpool2d(const bbi_window2d *g, size_t planes, const float *x, float *y, int64_t *indices);
void bbi_f32_maxpool2d_scalar(const bbi_window2d *g, size_t planes, const float *x, float *y, int64_t *indices);

/* y = the mean of each window: the sum of its values inside the image in row-major order,
 * divided by how many there are (with count_include_pad: how many positions lie inside
 * the padded extent); NaN for a window that counts none. */
void bbi_f32_avgpool2d(const bbi_window2d *g, size_t planes, const float *x, float *y);
void bbi_f32_avgpool2d_scalar(const bbi_window2d *g, size_t planes, const float *x, float *y);

/* Depthwise convolution on planes: channel c of y [channels, oh, ow] is plane c of x
 * [channels, ih, iw] convolved with filter c of w [channels, kh, kw] (cross-correlation, as
 * ONNX Conv with group = channels), plus bias[c] (bias NULL: none). Each output is the bias,
 * then the window's products added in row-major kernel order, padding read as 0. `scratch`
 * holds bbi_f32_dwconv2d_chw_scratch_size(g) bytes (aligned to 16); channels are
 * independent, so any split of them gives the same result. */
size_t bbi_f32_dwconv2d_chw_scratch_size(const bbi_window2d *g);
void bbi_f32_dwconv2d_chw(const bbi_window2d *g, size_t channels, const float *x, const float *w,
                          const float *bias, float *y, float *scratch);
void bbi_f32_dwconv2d_chw_scalar(const bbi_window2d *g, size_t channels, const float *x, const float *w,
                                 const float *bias, float *y);
/* Constant weights laid out once as the kernel's channel-lane path reads them (natively
 * with AVX-512, outputs narrower than 16 columns): tap k of channels 16i to 16i + 15 at
 * lanes + (i·kh·kw + k)·16, 0 in a last group's spare lanes. bbi_f32_dwconv2d_lanes_floats
 * is their size in floats, 0 where the kernel does not take them (then pass NULL).
 * bbi_f32_dwconv2d_chw_lanes is bbi_f32_dwconv2d_chw reading them: its first channel a
 * multiple of 16, lanes pointing at that channel's group; the same bits. */
size_t bbi_f32_dwconv2d_lanes_floats(const bbi_window2d *g, size_t channels);
void bbi_f32_dwconv2d_pack_lanes(const bbi_window2d *g, size_t channels, const float *w, float *lanes);
void bbi_f32_dwconv2d_chw_lanes(const bbi_window2d *g, size_t channels, const float *x, const float *w,
                                const float *lanes, const float *bias, float *y, float *scratch);
/* bbi_f32_dwconv2d_chw_lanes with a fused epilogue (act NULL: none): y[i] = act(y[i] +
 * addend[i]) (addend NULL: act(y[i])), addend aligned with y; the same bits as
 * bbi_f32_vactivate on all of y after the kernel. A Clip with nothing added goes into the
 * AVX-512 paths' stores (no pass over y); the rest is that pass. */
void bbi_f32_dwconv2d_chw_fused(const bbi_window2d *g, size_t channels, const float *x, const float *w,
                                const float *lanes, const float *bias, const bbi_f32_activation *act,
                                const float *addend, float *y, float *scratch);

/* ---- reductions ----------------------------------------------------------------------- */

typedef enum bbi_reduce_op {
  BBI_REDUCE_SUM,
  BBI_REDUCE_MEAN,
  BBI_REDUCE_MAX, /* NaN if the row holds a NaN; -inf for an empty row */
  BBI_REDUCE_MIN, /* NaN if the row holds a NaN; +inf for an empty row */
  BBI_REDUCE_OP_COUNT
} bbi_reduce_op;

/* y[r] = op over x[r][0..cols), for each of `rows` contiguous rows (mean of an empty row
 * is NaN; with cols 0, x is not read and may be NULL). Sums are accumulated in another
 * order than the scalar twin's (16 partial sums). */
void bbi_f32_reduce_rows(bbi_reduce_op op, size_t rows, size_t cols, const float *x, float *y);
void bbi_f32_reduce_rows_scalar(bbi_reduce_op op, size_t rows, size_t cols, const float *x,
                               float *y);

/* Reduces the middle axis of an outer×len×inner array: y[o][i] = op over x[o][0..len)[i],
 * which covers every reduction over one run of adjacent axes. For inner > 1 the sums are
 * accumulated in the twin's order, so the two agree exactly. */
void bbi_f32_reduce_strided(bbi_reduce_op op, size_t outer, size_t len, size_t inner,
                           const float *x, float *y);
void bbi_f32_reduce_strided_scalar(bbi_reduce_op op, size_t outer, size_t len, size_t inner,
                                  const float *x, float *y);

/* The index of the first float of x[0..n) that is NaN or ±Inf, or n when all are finite
 * (denormals, ±0 and ±FLT_MAX are finite; with n 0, x is not read and may be NULL). */
size_t bbi_f32_first_nonfinite(const float *x, size_t n);
size_t bbi_f32_first_nonfinite_scalar(const float *x, size_t n);

/* Softmax / log-softmax over each of `rows` contiguous rows of `cols` floats, stable for
 * any finite input (the row maximum is subtracted first). y may be x. */
void bbi_f32_softmax_rows(size_t rows, size_t cols, const float *x, float *y);
void bbi_f32_softmax_rows_scalar(size_t rows, size_t cols, const float *x, float *y);
void bbi_f32_log_softmax_rows(size_t rows, size_t cols, const float *x, float *y);
void bbi_f32_log_softmax_rows_scalar(size_t rows, size_t cols, const float *x, float *y);

#endif
