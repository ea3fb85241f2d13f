/* Window geometry of Conv, ConvTranspose and pooling, resolved the way the CPU backend
 * resolves it, so inferred shapes and backward pads agree with what the forward computes. */
#include <string.h>

#include "grad/geometry.h"

/* An INTS attribute of exactly n values into v (dflt when absent); false when malformed. */
static bool ints_attr(const bb_ir_node *n, const char *name, int count, int64_t *v, int64_t dflt) {
  for (int i = 0; i < count; i++) v[i] = dflt;
  const bb_attr *a = bb_attr_find(&n->attrs, name);
  if (!a) return true;
  if (a->type != BB_ATTR_INTS || (int)a->n_ints != count) return false;
  memcpy(v, a->ints, (size_t)count * sizeof *v);
  return true;
}

int gb_window_kernel(const bb_ir_node *n, const gb_value *x, const gb_value *w, int64_t *kernel) {
  if (!x || x->rank < 3 || x->rank > 2 + GB_MAX_SPATIAL) return -1;
  int nd = x->rank - 2;
  if (bb_attr_find(&n->attrs, "kernel_shape")) return ints_attr(n, "kernel_shape", nd, kernel, 1) ? nd : -1;
  if (!w || w->rank != x->rank) return -1;
  for (int i = 0; i < nd; i++) {
    if (w->dims[2 + i] < 0) return -1;
    kernel[i] = w->dims[2 + i];
  }
  return nd;
}

static int common(const bb_ir_node *n, const gb_value *x, const int64_t *kernel, gb_window *w, int64_t *pads) {
  memset(w, 0, sizeof *w);
  if (!x || x->rank < 3 || x->rank > 2 + GB_MAX_SPATIAL) return -1;
  w->nd = x->rank - 2;
  memcpy(w->kernel, kernel, (size_t)w->nd * sizeof *kernel);
  if (!ints_attr(n, "strides", w->nd, w->stride, 1) || !ints_attr(n, "dilations", w->nd, w->dil, 1) ||
      !ints_attr(n, "pads", 2 * w->nd, pads, 0))
    return -1;
  bool known = true;
  for (int i = 0; i < w->nd; i++) {
    if (w->kernel[i] < 1 || w->stride[i] < 1 || w->dil[i] < 1) return -1;
    w->in[i] = x->dims[2 + i];
    known = known && w->in[i] >= 0;
  }
  return known ? 0 : 1;
}

int gb_window_forward(const bb_ir_node *n, const gb_value *x, const int64_t *kernel, bool ceil_mode, gb_window *w) {
  int64_t pads[2 * GB_MAX_SPATIAL];
  int rc = common(n, x, kernel, w, pads);
  if (rc) return rc;
  const char *auto_pad = bb_attr_get_string(&n->attrs, "auto_pad", "NOTSET");
  for (int i = 0; i < w->nd; i++) {
    int64_t span = (w->kernel[i] - 1) * w->dil[i] + 1;
    if (strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0) {
      w->out[i] = (w->in[i] + w->stride[i] - 1) / w->stride[i];
      int64_t total = (w->out[i] - 1) * w->stride[i] + span - w->in[i];
      if (total < 0) total = 0;
      w->pad_begin[i] = auto_pad[5] == 'U' ? total / 2 : total - total / 2;
      w->pad_end[i] = total - w->pad_begin[i];
    } else if (strcmp(auto_pad, "VALID") == 0) {
      w->out[i] = w->in[i] >= span ? (w->in[i] - span) / w->stride[i] + 1 : 0;
    } else if (strcmp(auto_pad, "NOTSET") == 0) {
      w->pad_begin[i] = pads[i];
      w->pad_end[i] = pads[i + w->nd];
      if (pads[i] < 0 || pads[i + w->nd] < 0) return -1;
      int64_t room = w->in[i] + w->pad_begin[i] + w->pad_end[i] - span;
      w->out[i] = room < 0 ? 0 : (ceil_mode ? (room + w->stride[i] - 1) / w->stride[i] : room / w->stride[i]) + 1;
    } else {
      return -1;
    }
  }
  return 0;
}

int gb_window_transpose(const bb_ir_node *n, const gb_value *x, const int64_t *kernel, gb_window *w) {
  int64_t pads[2 * GB_MAX_SPATIAL], oshape[GB_MAX_SPATIAL];
  int rc = common(n, x, kernel, w, pads);
  if (rc) return rc;
  if (!ints_attr(n, "output_padding", w->nd, w->out_padding, 0)) return -1;
  const bb_attr *os = bb_attr_find(&n->attrs, "output_shape");
  bool has_oshape = os != NULL;
  if (os) { /* output_shape may list the spatial dims only, or N and C too */
    if (os->type != BB_ATTR_INTS || (os->n_ints != (size_t)w->nd && os->n_ints != (size_t)w->nd + 2)) return -1;
    memcpy(oshape, os->ints + (os->n_ints - (size_t)w->nd), (size_t)w->nd * sizeof *oshape);
  }
  const char *auto_pad = bb_attr_get_string(&n->attrs, "auto_pad", "NOTSET");
  bool same_upper = strcmp(auto_pad, "SAME_UPPER") == 0, same_lower = strcmp(auto_pad, "SAME_LOWER") == 0;
  bool valid = strcmp(auto_pad, "VALID") == 0;
  if (!same_upper && !same_lower && !valid && strcmp(auto_pad, "NOTSET") != 0) return -1;
  for (int i = 0; i < w->nd; i++) {
    int64_t full = w->stride[i] * (w->in[i] - 1) + w->out_padding[i] + (w->kernel[i] - 1) * w->dil[i] + 1;
    if (has_oshape || same_upper || same_lower) {
      w->out[i] = has_oshape ? oshape[i] : w->in[i] * w->stride[i];
      int64_t total = full - w->out[i];
      w->pad_begin[i] = same_lower ? total - total / 2 : total / 2;
      w->pad_end[i] = total - w->pad_begin[i];
    } else {
      w->pad_begin[i] = valid ? 0 : pads[i];
      w->pad_end[i] = valid ? 0 : pads[i + w->nd];
      w->out[i] = full - w->pad_begin[i] - w->pad_end[i];
    }
    if (w->out[i] < 0) return -1;
  }
  return 0;
}
