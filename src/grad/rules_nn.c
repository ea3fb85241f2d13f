/* Backward rules of the network layers: convolutions and their transposes, pooling,
 * batch and layer normalisation, and Dropout.
 *
 * A convolution's input gradient is the transposed convolution of dY with the same
 * weights, and its weight gradient a convolution over the batch (input and dY with batch
 * and channels swapped, strides and dilations exchanged); a transposed convolution's are
 * the mirror images. These need the spatial dims at build time: the pads that make the
 * transposed convolution land exactly on the input's extent depend on them. */
#include <string.h>

#include "grad/geometry.h"

#define IN(i) (n->inputs.items[i])
#define OUT(k) (n->outputs.items[k])

/* AveragePool's gradient holds one divisor per output position as a constant. */
#define AVERAGE_MAP_MAX (1 << 24)

static const char *k_like(gb *b, double c, const char *v) { return gb_scalar(b, c, gb_dtype(b, v)); }

/* The geometry of a Conv/pool node with every spatial dim known, or a recorded error. */
static bool window(gb *b, bb_ir_node *n, bool transpose, gb_window *w) {
  gb_value *x = gb_val(b, IN(0)), *wt = n->inputs.len > 1 && !strstr(n->op_type, "Pool") ? gb_val(b, IN(1)) : NULL;
  int64_t kernel[GB_MAX_SPATIAL];
  bool ceil_mode = bb_attr_get_int(&n->attrs, "ceil_mode", 0) != 0;
  int rc = gb_window_kernel(n, x, wt, kernel) < 0 ? -1
           : transpose                           ? gb_window_transpose(n, x, kernel, w)
                                                 : gb_window_forward(n, x, kernel, ceil_mode, w);
  if (rc < 0) gb_fail(b, BB_ERR_UNSUPPORTED, "%s: the gradient needs the input's rank, the kernel and valid window attributes",
                      gb_node_label(b, n));
  else if (rc > 0)
    gb_fail(b, BB_ERR_UNSUPPORTED, "%s: the gradient needs the spatial dims of %s, which are not known at build time",
            gb_node_label(b, n), IN(0));
  return rc == 0;
}

static void window_attrs(gb *b, bb_ir_node *node, const gb_window *w, const int64_t *pad_end, int64_t group) {
  int64_t pads[2 * GB_MAX_SPATIAL];
  memcpy(pads, w->pad_begin, (size_t)w->nd * sizeof *pads);
  memcpy(pads + w->nd, pad_end, (size_t)w->nd * sizeof *pads);
  gb_attr_ints(b, node, "strides", w->stride, (size_t)w->nd);
  gb_attr_ints(b, node, "dilations", w->dil, (size_t)w->nd);
  gb_attr_ints(b, node, "pads", pads, 2 * (size_t)w->nd);
  if (group != 1) gb_attr_int(b, node, "group", group);
}

/* The ConvTranspose that takes a gradient over a forward window's output [.., out] back
 * onto its input [.., in]: the forward's pads, and the end pad / output padding that make
 * stride * (out - 1) + span - pads land exactly on `in`. */
static const char *window_back(gb *b, const char *g, const char *weights, const gb_window *w, int64_t group) {
  bb_ir_node *ct = gb_new(b, "ConvTranspose", NULL, 1, 2, g, weights);
  int64_t pad_end[GB_MAX_SPATIAL], out_padding[GB_MAX_SPATIAL];
  bool any_padding = false;
  for (int i = 0; i < w->nd; i++) {
    int64_t reach = w->stride[i] * (w->out[i] - 1) + w->dil[i] * (w->kernel[i] - 1) + 1 - w->pad_begin[i] - w->in[i];
    pad_end[i] = reach > 0 ? reach : 0;
    out_padding[i] = reach < 0 ? -reach : 0;
    any_padding = any_padding || out_padding[i];
  }
  window_attrs(b, ct, w, pad_end, group);
  if (any_padding) gb_attr_ints(b, ct, "output_padding", out_padding, (size_t)w->nd);
  return gb_add(b, ct);
}

/* The end pads of the weight gradient's convolution, into pad_end; returns whether its
 * output still reaches past the kernel somewhere (a Slice must keep the first k).
 * Per axis, in + pb + pe - d(k-1) - 1 = s(out-1) + r with r >= 0: that convolution (stride
 * d, dilation s) gives k + floor(r/d) positions, and the last one it needs (k-1) reads no
 * further than in + pe - r - 1. Taking δ = min(r, pe) off the end pad reads the same
 * products and gives k + floor((r-δ)/d) positions: exactly k when r - δ < d. */
static bool weight_grad_pads(const gb_window *w, int64_t *pad_end) {
  bool beyond = false;
  for (int d = 0; d < w->nd; d++) {
    int64_t r = w->in[d] + w->pad_begin[d] + w->pad_end[d] - w->dil[d] * (w->kernel[d] - 1) - 1 -
                w->stride[d] * (w->out[d] - 1);
    int64_t cut = r < w->dil[d] ? 0 : r < w->pad_end[d] ? r : w->pad_end[d];
    pad_end[d] = w->pad_end[d] - cut;
    beyond = beyond || (r - cut) / w->dil[d] > 0;
  }
  return beyond;
}

/* d weights of a convolution of `input` [N, C, in..] that gave `outgrad` [N, M, out..]:
 * [M, C/group, k..], as a Conv with the batch as channels, whose kernel is outgrad and
 * whose strides and dilations are the forward's dilations and strides. */
static const char *weight_grad(gb *b, bb_ir_node *n, const char *input, const char *outgrad, const gb_window *w,
                               int64_t group) {
  gb_value *xv = gb_val(b, input), *gv = gb_val(b, outgrad);
  int r = w->nd + 2;
  int64_t swap[BB_MAX_RANK] = {1, 0}, pad_end[GB_MAX_SPATIAL];
  for (int d = 2; d < r; d++) swap[d] = d;
  const char *xt, *gt;
  if (group == 1) {
    xt = gb_transpose(b, input, swap, r);
    gt = gb_transpose(b, outgrad, swap, r);
  } else {
    int64_t c = xv->dims[1], m = gv->dims[1];
    if (!GB_KNOWN(c) || !GB_KNOWN(m)) {
      gb_fail(b, BB_ERR_UNSUPPORTED, "%s: a grouped gradient needs the channel counts at build time", gb_node_label(b, n));
      return NULL;
    }
    int64_t split[BB_MAX_RANK + 1] = {-1, group, c / group}, merged[BB_MAX_RANK] = {c / group, -1};
    int64_t perm[BB_MAX_RANK + 1] = {2, 1, 0};
    for (int d = 0; d < w->nd; d++) split[3 + d] = merged[2 + d] = w->in[d], perm[3 + d] = 3 + d;
    xt = gb_reshape(b, gb_transpose(b, gb_reshape(b, input, split, (size_t)r + 1), perm, r + 1), merged, (size_t)r);
    split[2] = m / group, merged[0] = m;
    perm[0] = 1, perm[1] = 2, perm[2] = 0;
    for (int d = 0; d < w->nd; d++) split[3 + d] = merged[2 + d] = w->out[d];
    gt = gb_reshape(b, gb_transpose(b, gb_reshape(b, outgrad, split, (size_t)r + 1), perm, r + 1), merged, (size_t)r);
  }
  bb_ir_node *conv = gb_new(b, "Conv", NULL, 1, 2, xt, gt);
  gb_window exchanged = *w;
  memcpy(exchanged.stride, w->dil, sizeof w->dil);
  memcpy(exchanged.dil, w->stride, sizeof w->stride);
  const bool trim = weight_grad_pads(w, pad_end);
  window_attrs(b, conv, &exchanged, pad_end, group);
  const char *full = gb_add(b, conv);
  if (trim) { /* the end pad could not take it all: keep the first k positions */
    int64_t zeros[GB_MAX_SPATIAL] = {0}, axes[GB_MAX_SPATIAL];
    for (int d = 0; d < w->nd; d++) axes[d] = 2 + d;
    full = gb_op(b, "Slice", 4, full, gb_ints(b, zeros, (size_t)w->nd), gb_ints(b, w->kernel, (size_t)w->nd),
                 gb_ints(b, axes, (size_t)w->nd));
  }
  return gb_transpose(b, full, swap, r);
}

/* The bias gradient: dY summed over every axis but the channels. */
static const char *bias_grad(gb *b, const char *g, int rank) {
  int64_t axes[BB_MAX_RANK] = {0};
  for (int d = 2; d < rank; d++) axes[d - 1] = d;
  return gb_reduce_sum(b, g, axes, (size_t)rank - 1, false);
}

static int conv_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_window w;
  if (!window(b, n, false, &w)) return b->rc;
  int64_t group = bb_attr_get_int(&n->attrs, "group", 1);
  if (gb_needs(b, n, 0)) gb_grad(b, n, 0, window_back(b, dy[0], IN(1), &w, group));
  if (gb_needs(b, n, 1)) gb_grad(b, n, 1, weight_grad(b, n, IN(0), dy[0], &w, group));
  if (gb_needs(b, n, 2)) gb_grad(b, n, 2, bias_grad(b, dy[0], w.nd + 2));
  return b->rc;
}

/* Y = ConvTranspose(X, W): dX = Conv(dY, W) with the same window; dW is the weight
 * gradient of that convolution with X in the place of its output gradient. */
static int convtranspose_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_window w;
  if (!window(b, n, true, &w)) return b->rc;
  int64_t group = bb_attr_get_int(&n->attrs, "group", 1);
  gb_window fwd = w; /* the convolution from Y's extent back to X's */
  memcpy(fwd.in, w.out, sizeof w.out);
  memcpy(fwd.out, w.in, sizeof w.in);
  if (gb_needs(b, n, 0)) {
    bb_ir_node *conv = gb_new(b, "Conv", NULL, 1, 2, dy[0], IN(1));
    window_attrs(b, conv, &fwd, fwd.pad_end, group);
    gb_grad(b, n, 0, gb_add(b, conv));
  }
  if (gb_needs(b, n, 1)) gb_grad(b, n, 1, weight_grad(b, n, dy[0], IN(0), &fwd, group));
  if (gb_needs(b, n, 2)) gb_grad(b, n, 2, bias_grad(b, dy[0], w.nd + 2));
  return b->rc;
}

/* MaxPool: dY goes to the element each window picked (the forward's Indices output,
 * flat over the whole input), summed where windows overlap. */
static int maxpool_back(gb *b, bb_ir_node *n, const char *const *dy) {
  if (bb_attr_get_int(&n->attrs, "storage_order", 0) != 0)
    return gb_fail(b, BB_ERR_UNSUPPORTED, "%s: the gradient of storage_order 1 is not implemented", gb_node_label(b, n));
  if (b->opset < 16)
    return gb_fail(b, BB_ERR_UNSUPPORTED,
                   "%s: the gradient uses ScatterElements' reduction, which needs opset 16 (the model has %lld)",
                   gb_node_label(b, n), (long long)b->opset);
  const char *indices = gb_ensure_output(b, n, 1, ":indices");
  int64_t flat[1] = {-1};
  const char *zeros = gb_zeros_like(b, gb_reshape(b, IN(0), flat, 1));
  bb_ir_node *s = gb_new(b, "ScatterElements", NULL, 1, 3, zeros, gb_reshape(b, indices, flat, 1), gb_reshape(b, dy[0], flat, 1));
  gb_attr_int(b, s, "axis", 0);
  gb_attr_string(b, s, "reduction", "add");
  gb_grad(b, n, 0, gb_reshape_like(b, gb_add(b, s), IN(0)));
  return b->rc;
}

/* AveragePool: each output's gradient, divided by the count its window averaged, spread
 * back over the window: a ConvTranspose with a kernel of ones over [N*C, 1, ..]. The counts
 * follow the forward's rule (padding counted with count_include_pad, never past it). */
static int averagepool_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_window w;
  if (!window(b, n, false, &w)) return b->rc;
  int32_t dtype = gb_dtype(b, IN(0));
  bool include_pad = bb_attr_get_int(&n->attrs, "count_include_pad", 0) != 0;
  int64_t out_size = 1, k_size = 1;
  for (int d = 0; d < w.nd; d++) out_size *= w.out[d], k_size *= w.kernel[d];
  if (out_size + k_size > AVERAGE_MAP_MAX)
    return gb_fail(b, BB_ERR_LIMIT, "%s: the gradient's count map would hold %lld values, over %d", gb_node_label(b, n),
                   (long long)(out_size + k_size), AVERAGE_MAP_MAX);
  double *recip = bbi_arena_alloc(b->scratch, (size_t)(out_size + k_size) * sizeof *recip);
  if (!recip) return gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
  double *ones = recip + out_size;
  for (int64_t k = 0; k < k_size; k++) ones[k] = 1.0;
  for (int64_t o = 0; o < out_size; o++) {
    int64_t count = 1, rest = o;
    for (int d = w.nd - 1; d >= 0; d--) { /* windows are boxes: count per dim, multiply */
      int64_t od = rest % w.out[d], inside = 0;
      rest /= w.out[d];
      for (int64_t k = 0; k < w.kernel[d]; k++) {
        int64_t p = od * w.stride[d] - w.pad_begin[d] + k * w.dil[d];
        inside += include_pad ? p >= -w.pad_begin[d] && p < w.in[d] + w.pad_end[d] : p >= 0 && p < w.in[d];
      }
      count *= inside;
    }
    recip[o] = count ? 1.0 / (double)count : 0.0;
  }
  int64_t shape[BB_MAX_RANK] = {1, 1}, plane[BB_MAX_RANK] = {-1, 1}, kshape[BB_MAX_RANK] = {1, 1};
  for (int d = 0; d < w.nd; d++) shape[2 + d] = plane[2 + d] = w.out[d], kshape[2 + d] = w.kernel[d];
  const char *scaled = gb_op(b, "Mul", 2, dy[0], gb_tensor(b, dtype, w.nd + 2, shape, recip));
  const char *planes = gb_reshape(b, scaled, plane, (size_t)w.nd + 2);
  const char *spread = window_back(b, planes, gb_tensor(b, dtype, w.nd + 2, kshape, ones), &w, 1);
  gb_grad(b, n, 0, gb_reshape_like(b, spread, IN(0)));
  return b->rc;
}

static int global_averagepool_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_value *x = gb_val(b, IN(0));
  if (x->rank < 3) return gb_fail(b, BB_ERR_UNSUPPORTED, "%s: the gradient needs the input's rank", gb_node_label(b, n));
  int64_t axes[BB_MAX_RANK];
  for (int d = 2; d < x->rank; d++) axes[d - 2] = d;
  const char *mean = gb_op(b, "Div", 2, dy[0], gb_count(b, IN(0), axes, (size_t)x->rank - 2, x->dtype));
  gb_grad(b, n, 0, gb_op(b, "Expand", 2, mean, gb_shape_of(b, IN(0))));
  return b->rc;
}

/* Scale or bias [C] as [1, C, 1, ..] against X of rank r. */
static const char *per_channel(gb *b, const char *v, int rank) {
  int64_t shape[BB_MAX_RANK] = {1, -1};
  for (int d = 2; d < rank; d++) shape[d] = 1;
  return gb_reshape(b, v, shape, (size_t)rank);
}

/* BatchNormalization. In training mode (batch statistics) with x̂ = (X - mean) * inv_std:
 * dB = Σ dY, dScale = Σ dY·x̂ and dX = scale·inv_std·(dY - (dB + x̂·dScale) / count), the
 * sums over every axis but the channels. In inference mode it is an affine map of X. */
static int batchnorm_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_value *x = gb_val(b, IN(0));
  if (x->rank < 2) return gb_fail(b, BB_ERR_UNSUPPORTED, "%s: the gradient needs the input's rank", gb_node_label(b, n));
  int r = x->rank;
  bool training = b->opset >= 14 && bb_attr_get_int(&n->attrs, "training_mode", 0) != 0;
  double eps = bb_attr_get_float(&n->attrs, "epsilon", 1e-5f);
  int64_t axes[BB_MAX_RANK] = {0};
  for (int d = 2; d < r; d++) axes[d - 1] = d;
  size_t n_axes = (size_t)r - 1;
  const char *g = dy[0], *xhat, *inv;
  if (training) {
    const char *count = gb_count(b, IN(0), axes, n_axes, x->dtype);
    const char *mean = gb_op(b, "Div", 2, gb_reduce_sum(b, IN(0), axes, n_axes, true), count);
    const char *xc = gb_op(b, "Sub", 2, IN(0), mean);
    const char *var = gb_op(b, "Div", 2, gb_reduce_sum(b, gb_op(b, "Mul", 2, xc, xc), axes, n_axes, true), count);
    inv = gb_op(b, "Reciprocal", 1, gb_op(b, "Sqrt", 1, gb_op(b, "Add", 2, var, k_like(b, eps, IN(0)))));
    xhat = gb_op(b, "Mul", 2, xc, inv);
    const char *sum_g = gb_reduce_sum(b, g, axes, n_axes, true);
    const char *sum_gx = gb_reduce_sum(b, gb_op(b, "Mul", 2, g, xhat), axes, n_axes, true);
    if (gb_needs(b, n, 0)) {
      const char *centred = gb_op(b, "Div", 2, gb_op(b, "Add", 2, sum_g, gb_op(b, "Mul", 2, xhat, sum_gx)), count);
      const char *factor = gb_op(b, "Mul", 2, per_channel(b, IN(1), r), inv);
      gb_grad(b, n, 0, gb_op(b, "Mul", 2, factor, gb_op(b, "Sub", 2, g, centred)));
    }
    if (gb_needs(b, n, 1)) gb_grad(b, n, 1, gb_reshape_like(b, sum_gx, IN(1)));
    if (gb_needs(b, n, 2)) gb_grad(b, n, 2, gb_reshape_like(b, sum_g, IN(2)));
    return b->rc;
  }
  inv = per_channel(b, gb_op(b, "Reciprocal", 1, gb_op(b, "Sqrt", 1, gb_op(b, "Add", 2, IN(4), k_like(b, eps, IN(4))))), r);
  if (gb_needs(b, n, 0)) gb_grad(b, n, 0, gb_op(b, "Mul", 2, g, gb_op(b, "Mul", 2, per_channel(b, IN(1), r), inv)));
  if (gb_needs(b, n, 1)) {
    xhat = gb_op(b, "Mul", 2, gb_op(b, "Sub", 2, IN(0), per_channel(b, IN(3), r)), inv);
    gb_grad(b, n, 1, gb_reduce_sum(b, gb_op(b, "Mul", 2, g, xhat), axes, n_axes, false));
  }
  if (gb_needs(b, n, 2)) gb_grad(b, n, 2, gb_reduce_sum(b, g, axes, n_axes, false));
  return b->rc;
}

/* LayerNormalization, from the Mean and InvStdDev the forward node computes anyway:
 * with x̂ = (X - mean) * inv_std and G = dY * scale,
 * dX = inv_std * (G - mean(G) - x̂ * mean(G * x̂)) over the normalised axes. */
static int layernorm_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_value *x = gb_val(b, IN(0));
  if (x->rank < 1) return gb_fail(b, BB_ERR_UNSUPPORTED, "%s: the gradient needs the input's rank", gb_node_label(b, n));
  int64_t axis = bb_attr_get_int(&n->attrs, "axis", -1);
  if (axis < 0) axis += x->rank;
  int64_t axes[BB_MAX_RANK];
  size_t n_axes = 0;
  for (int64_t d = axis; d < x->rank; d++) axes[n_axes++] = d;
  const char *mean = gb_ensure_output(b, n, 1, ":mean"), *inv = gb_ensure_output(b, n, 2, ":inv_std_dev");
  if (gb_dtype(b, mean) != x->dtype) { /* statistics are kept in stash_type */
    bb_ir_node *c1 = gb_new(b, "Cast", NULL, 1, 1, mean), *c2 = NULL;
    gb_attr_int(b, c1, "to", x->dtype);
    mean = gb_add(b, c1);
    c2 = gb_new(b, "Cast", NULL, 1, 1, inv);
    gb_attr_int(b, c2, "to", x->dtype);
    inv = gb_add(b, c2);
  }
  const char *g = dy[0];
  const char *xhat = gb_op(b, "Mul", 2, gb_op(b, "Sub", 2, IN(0), mean), inv);
  if (gb_needs(b, n, 0)) {
    const char *count = gb_count(b, IN(0), axes, n_axes, x->dtype);
    const char *gs = gb_op(b, "Mul", 2, g, IN(1));
    const char *m1 = gb_op(b, "Div", 2, gb_reduce_sum(b, gs, axes, n_axes, true), count);
    const char *m2 = gb_op(b, "Div", 2, gb_reduce_sum(b, gb_op(b, "Mul", 2, gs, xhat), axes, n_axes, true), count);
    const char *inner = gb_op(b, "Sub", 2, gb_op(b, "Sub", 2, gs, m1), gb_op(b, "Mul", 2, xhat, m2));
    gb_grad(b, n, 0, gb_op(b, "Mul", 2, inv, inner));
  }
  if (gb_needs(b, n, 1)) gb_grad(b, n, 1, gb_unbroadcast(b, gb_op(b, "Mul", 2, g, xhat), IN(1)));
  if (gb_needs(b, n, 2)) gb_grad(b, n, 2, gb_unbroadcast(b, g, IN(2)));
  return b->rc;
}

/* ai.onnx Dropout here is the identity (inference mode, or a ratio of 0); the training
 * graph replaces every training-mode Dropout that can drop with the seeded one below. */
static int dropout_identity_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_grad(b, n, 0, dy[0]);
  return b->rc;
}

/* Seeded Dropout: dX = dY / (1 - ratio) where the mask kept the element, else 0. */
static int dropout_back(gb *b, bb_ir_node *n, const char *const *dy) {
  const char *mask = gb_ensure_output(b, n, 1, ":mask");
  const char *ratio = gb_has_input(n, 1) ? IN(1) : k_like(b, 0.5, IN(0));
  if (gb_dtype(b, ratio) != gb_dtype(b, IN(0))) {
    bb_ir_node *cast = gb_new(b, "Cast", NULL, 1, 1, ratio);
    gb_attr_int(b, cast, "to", gb_dtype(b, IN(0)));
    ratio = gb_add(b, cast);
  }
  const char *kept = gb_op(b, "Div", 2, dy[0], gb_op(b, "Sub", 2, k_like(b, 1, IN(0)), ratio));
  gb_grad(b, n, 0, gb_op(b, "Where", 3, mask, kept, k_like(b, 0, IN(0))));
  return b->rc;
}

const gb_rule gb_rules_nn[] = {
    {NULL, "Conv", 7, 1, conv_back},
    {NULL, "ConvTranspose", 7, 1, convtranspose_back},
    {NULL, "MaxPool", 1, 1, maxpool_back},
    {NULL, "AveragePool", 1, 1, averagepool_back},
    {NULL, "GlobalAveragePool", 1, 1, global_averagepool_back},
    {NULL, "BatchNormalization", 7, 1, batchnorm_back},
    {NULL, "LayerNormalization", 7, 1, layernorm_back},
    {NULL, "Dropout", 1, 1, dropout_identity_back},
    {BB_GRAD_DOMAIN, "Dropout", 1, 1, dropout_back},
};
const size_t gb_rules_nn_count = sizeof gb_rules_nn / sizeof gb_rules_nn[0];
