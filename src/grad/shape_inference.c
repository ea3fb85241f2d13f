/* Build-time inference over the graph being differentiated: each output's element type
 * and shape (dims known, or symbols that say which dims are equal), the entries of small
 * shape vectors followed symbolically from Shape(x), and exact values wherever every input
 * is known (Constant nodes and the integer shape arithmetic around them), computed by the
 * CPU backend itself so they agree with what a run computes.
 *
 * Nothing here refuses a graph: what cannot be told stays unknown, and a backward rule
 * that needs it says so, naming the node. */
#include <math.h>
#include <string.h>

#include "bb/cpu.h"
#include "grad/geometry.h"

static bool is_op(const bb_ir_node *n, const char *op) { return strcmp(n->op_type, op) == 0; }

static gb_dim merge_dim(gb *b, gb_dim a, gb_dim c) {
  if (a == c || c == 1) return a;
  if (a == 1) return c;
  if (GB_KNOWN(a)) return a; /* a symbol against a size other than 1 must be that size */
  if (GB_KNOWN(c)) return c;
  return gb_symbol(b, NULL);
}

/* Multidirectional broadcasting of the present inputs' shapes. */
static bool broadcast(gb *b, gb_value *const *ins, size_t count, int *rank, gb_dim *dims) {
  int r = 0;
  for (size_t i = 0; i < count; i++) {
    if (!ins[i] || ins[i]->rank < 0) return false;
    if (ins[i]->rank > r) r = ins[i]->rank;
  }
  for (int d = 0; d < r; d++) dims[d] = 1;
  for (size_t i = 0; i < count; i++)
    for (int d = 0; d < ins[i]->rank; d++) {
      int od = r - ins[i]->rank + d;
      dims[od] = merge_dim(b, dims[od], ins[i]->dims[d]);
    }
  *rank = r;
  return true;
}

/* The product of dims [from, to) as one dim: known, the single symbol among 1s, or new. */
static gb_dim product(gb *b, const gb_dim *dims, int from, int to) {
  int64_t p = 1;
  gb_dim sym = 0;
  int n_sym = 0;
  for (int d = from; d < to; d++) {
    if (GB_KNOWN(dims[d])) {
      if (dims[d] && p > INT64_MAX / dims[d]) return gb_symbol(b, NULL);
      p *= dims[d];
    } else {
      sym = dims[d];
      n_sym++;
    }
  }
  if (!n_sym) return p;
  return n_sym == 1 && p == 1 ? sym : gb_symbol(b, NULL);
}

/* Reshape's -1: what is left of x's elements after the other dims, when it can be told. */
static gb_dim reshape_hole(gb *b, const gb_value *x, const gb_dim *out, int rank, int hole) {
  if (x->rank < 0) return gb_symbol(b, NULL);
  gb_dim syms[BB_MAX_RANK];
  int n_syms = 0;
  int64_t in_known = 1, out_known = 1;
  for (int d = 0; d < x->rank; d++) {
    if (!GB_KNOWN(x->dims[d])) syms[n_syms++] = x->dims[d];
    else if (x->dims[d] && in_known > INT64_MAX / x->dims[d]) return gb_symbol(b, NULL);
    else in_known *= x->dims[d];
  }
  for (int i = 0; i < rank; i++) {
    if (i == hole) continue;
    if (GB_KNOWN(out[i])) {
      if (out[i] && out_known > INT64_MAX / out[i]) return gb_symbol(b, NULL);
      out_known *= out[i];
      continue;
    }
    int k = 0;
    while (k < n_syms && syms[k] != out[i]) k++;
    if (k == n_syms) return gb_symbol(b, NULL);
    syms[k] = syms[--n_syms];
  }
  if (!n_syms) return out_known && in_known % out_known == 0 ? in_known / out_known : gb_symbol(b, NULL);
  return n_syms == 1 && in_known == out_known ? syms[0] : gb_symbol(b, NULL);
}

static void set_like(gb_value *o, const gb_value *x, int32_t dtype) {
  if (!o || !x) return;
  gb_val_set_shape(o, dtype ? dtype : x->dtype, x->rank, x->dims);
}

static void set_vec(gb_value *o, const gb_dim *vec, int len) {
  if (!o || len < 0 || len > BB_MAX_RANK) return;
  memcpy(o->vec, vec, (size_t)len * sizeof *vec);
  o->vec_len = len;
}

/* Elementwise operators whose output has the first input's type and shape. */
static const char *const SAME_SHAPE[] = {
    "Relu",      "LeakyRelu", "Sigmoid", "Tanh",     "Erf",      "Sqrt",        "Exp",      "Log",
    "Neg",       "Abs",       "Reciprocal", "Softplus", "Softsign", "Identity", "Softmax",  "LogSoftmax",
    "Floor",     "Ceil",      "Round",   "Sign",     "Sin",      "Cos",         "Elu",      "Selu",
    "HardSigmoid", "Celu",    "ThresholdedRelu", "Clip", "Hardmax", "CumSum",  "Trilu",    "Dropout",
    "ScatterElements", "ScatterND", "InstanceNormalization", "Tan", "Atan", "Asin", "Acos", "Sinh", "Cosh",
    NULL};
static const char *const BROADCAST_SAME_TYPE[] = {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "PRelu",
                                                  "Sum", "Max", "Min", "Mean", NULL};
static const char *const BROADCAST_BOOL[] = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
                                             "And",   "Or",   "Xor",     NULL};
static const char *const REDUCE[] = {"ReduceSum",  "ReduceMean", "ReduceMax",    "ReduceMin",
                                     "ReduceProd", "ReduceL1",   "ReduceL2",     "ReduceLogSum",
                                     "ReduceLogSumExp", "ReduceSumSquare", NULL};

static bool in_list(const char *const *list, const char *op) {
  for (; *list; list++)
    if (strcmp(*list, op) == 0) return true;
  return false;
}

static void infer_matmul(gb *b, const gb_value *a, const gb_value *c, gb_value *o) {
  if (a->rank < 1 || c->rank < 1) return;
  /* 1-D operands are promoted ([K] → [1, K] and [K] → [K, 1]) and the added dim dropped */
  gb_value ba = *a, bc = *c;
  ba.rank = a->rank > 2 ? a->rank - 2 : 0;
  bc.rank = c->rank > 2 ? c->rank - 2 : 0;
  gb_value *both[2] = {&ba, &bc};
  int rank;
  gb_dim dims[BB_MAX_RANK];
  if (!broadcast(b, both, 2, &rank, dims) || rank + 2 > BB_MAX_RANK) return;
  if (a->rank > 1) dims[rank++] = a->dims[a->rank - 2];
  if (c->rank > 1) dims[rank++] = c->dims[c->rank - 1];
  gb_val_set_shape(o, a->dtype, rank, dims);
}

static void infer_window(gb *b, const bb_ir_node *n, gb_value *x, gb_value *w, gb_value *o) {
  int64_t kernel[GB_MAX_SPATIAL];
  gb_window win;
  if (!x || x->rank < 3) return;
  bool transpose = is_op(n, "ConvTranspose"), conv = transpose || is_op(n, "Conv");
  if (gb_window_kernel(n, x, conv ? w : NULL, kernel) < 0) return;
  bool ceil_mode = bb_attr_get_int(&n->attrs, "ceil_mode", 0) != 0;
  int rc = transpose ? gb_window_transpose(n, x, kernel, &win) : gb_window_forward(n, x, kernel, ceil_mode, &win);
  if (rc < 0) return;
  gb_dim dims[BB_MAX_RANK] = {x->dims[0], x->dims[1]};
  if (conv) {
    int64_t group = bb_attr_get_int(&n->attrs, "group", 1);
    if (!w || w->rank < 2) return;
    dims[1] = !transpose ? w->dims[0] : GB_KNOWN(w->dims[1]) ? w->dims[1] * group : gb_symbol(b, NULL);
  }
  for (int i = 0; i < win.nd; i++) dims[2 + i] = rc == 0 ? win.out[i] : gb_symbol(b, NULL);
  gb_val_set_shape(o, x->dtype, x->rank, dims);
}

static void infer_reduce(gb *b, const bb_ir_node *n, const gb_value *x, gb_value *o) {
  if (x->rank < 0) return;
  int64_t axes[BB_MAX_RANK];
  long count = gb_node_axes(b, n, 1, is_op(n, "ReduceSum") ? 13 : 18, x->rank, axes);
  if (count < 0) return;
  bool keep = bb_attr_get_int(&n->attrs, "keepdims", 1) != 0;
  if (!count && bb_attr_get_int(&n->attrs, "noop_with_empty_axes", 0)) {
    set_like(o, x, 0);
    return;
  }
  bool reduced[BB_MAX_RANK] = {false};
  for (long i = 0; i < count; i++) reduced[axes[i]] = true;
  gb_dim dims[BB_MAX_RANK];
  int rank = 0;
  for (int d = 0; d < x->rank; d++) {
    bool r = !count || reduced[d];
    if (!r) dims[rank++] = x->dims[d];
    else if (keep) dims[rank++] = 1;
  }
  gb_val_set_shape(o, x->dtype, rank, dims);
}

static void infer_slice(gb *b, const bb_ir_node *n, const gb_value *x, gb_value *o) {
  int64_t starts[BB_MAX_RANK], ends[BB_MAX_RANK], axes[BB_MAX_RANK], steps[BB_MAX_RANK];
  if (x->rank < 0) {
    if (o) o->dtype = x->dtype;
    return;
  }
  gb_dim dims[BB_MAX_RANK];
  memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
  long ns = gb_known_ints(gb_input_val(b, n, 1), starts, BB_MAX_RANK), ne = gb_known_ints(gb_input_val(b, n, 2), ends, BB_MAX_RANK);
  long na = gb_has_input(n, 3) ? gb_known_ints(gb_input_val(b, n, 3), axes, BB_MAX_RANK) : ns;
  long nt = gb_has_input(n, 4) ? gb_known_ints(gb_input_val(b, n, 4), steps, BB_MAX_RANK) : ns;
  if (ns < 0 || ne != ns || na != ns || nt != ns) { /* bounds known only at run time: the sliced axes are unknown */
    bool sliced[BB_MAX_RANK] = {false};
    for (long i = 0; gb_has_input(n, 3) && i < na; i++) {
      int64_t axis = axes[i] < 0 ? axes[i] + x->rank : axes[i];
      if (axis >= 0 && axis < x->rank) sliced[axis] = true;
    }
    for (int d = 0; d < x->rank; d++)
      if (na < 0 || !gb_has_input(n, 3) || sliced[d]) dims[d] = gb_symbol(b, NULL);
    gb_val_set_shape(o, x->dtype, x->rank, dims);
    return;
  }
  gb_dim vec[BB_MAX_RANK];
  int vec_len = x->rank == 1 ? gb_val_vector(x, vec) : -1;
  for (long i = 0; i < ns; i++) {
    int64_t axis = gb_has_input(n, 3) ? axes[i] : i, step = gb_has_input(n, 4) ? steps[i] : 1;
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis >= x->rank || step == 0) return;
    gb_dim dim = x->dims[axis];
    if (!GB_KNOWN(dim)) { /* x[:, 0:] and x[:, :big] keep an unknown dim as it is */
      bool whole = step == 1 && starts[i] == 0 && ends[i] >= INT32_MAX;
      dims[axis] = whole ? dim : gb_symbol(b, NULL);
      vec_len = -1;
      continue;
    }
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (step > 0) {
      s = s < 0 ? 0 : s > dim ? dim : s;
      e = e < 0 ? 0 : e > dim ? dim : e;
      dims[axis] = e > s ? (e - s + step - 1) / step : 0;
    } else {
      s = s < 0 ? -1 : s > dim - 1 ? dim - 1 : s;
      e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
      dims[axis] = s > e ? (s - e - step - 1) / -step : 0;
    }
    if (vec_len >= 0) { /* slicing a shape vector keeps the entries it selects */
      gb_dim picked[BB_MAX_RANK];
      int k = 0;
      for (int64_t p = s; step > 0 ? p < e : p > e; p += step) picked[k++] = vec[p];
      memcpy(vec, picked, (size_t)k * sizeof *vec);
      vec_len = k;
    }
  }
  gb_val_set_shape(o, x->dtype, x->rank, dims);
  set_vec(o, vec, vec_len);
}

static void infer_gather(gb *b, const bb_ir_node *n, const gb_value *x, const gb_value *idx, gb_value *o) {
  if (x->rank < 1 || idx->rank < 0 || x->rank + idx->rank - 1 > BB_MAX_RANK) return;
  int64_t axis = bb_attr_get_int(&n->attrs, "axis", 0);
  if (axis < 0) axis += x->rank;
  if (axis < 0 || axis >= x->rank) return;
  gb_dim dims[BB_MAX_RANK];
  int rank = 0;
  for (int d = 0; d < axis; d++) dims[rank++] = x->dims[d];
  for (int d = 0; d < idx->rank; d++) dims[rank++] = idx->dims[d];
  for (int d = (int)axis + 1; d < x->rank; d++) dims[rank++] = x->dims[d];
  gb_val_set_shape(o, x->dtype, rank, dims);
  gb_dim vec[BB_MAX_RANK];
  int64_t picks[BB_MAX_RANK];
  int len = x->rank == 1 ? gb_val_vector(x, vec) : -1;
  long np = idx->rank <= 1 ? gb_known_ints(idx, picks, BB_MAX_RANK) : -1;
  if (len < 0 || np < 0) return;
  gb_dim out[BB_MAX_RANK];
  for (long i = 0; i < np; i++) {
    int64_t p = picks[i] < 0 ? picks[i] + len : picks[i];
    if (p < 0 || p >= len) return;
    out[i] = vec[p];
  }
  set_vec(o, out, (int)np);
}

static void infer_squeeze(gb *b, const bb_ir_node *n, const gb_value *x, gb_value *o, bool unsqueeze) {
  if (x->rank < 0) return;
  int64_t axes[BB_MAX_RANK];
  int out_rank;
  long count;
  if (unsqueeze) { /* axes count against the output's rank */
    int64_t raw[BB_MAX_RANK];
    const bb_attr *a = bb_attr_find(&n->attrs, "axes");
    if (b->opset >= 13) count = gb_known_ints(gb_input_val(b, n, 1), raw, BB_MAX_RANK);
    else if (a && a->n_ints <= BB_MAX_RANK) count = (long)a->n_ints, memcpy(raw, a->ints, a->n_ints * sizeof *raw);
    else count = -1;
    if (count < 0 || x->rank + count > BB_MAX_RANK) return;
    out_rank = x->rank + (int)count;
    bool at[BB_MAX_RANK] = {false};
    for (long i = 0; i < count; i++) {
      int64_t axis = raw[i] < 0 ? raw[i] + out_rank : raw[i];
      if (axis < 0 || axis >= out_rank || at[axis]) return;
      at[axis] = true;
    }
    gb_dim dims[BB_MAX_RANK];
    for (int d = 0, k = 0; d < out_rank; d++) dims[d] = at[d] ? 1 : x->dims[k++];
    gb_val_set_shape(o, x->dtype, out_rank, dims);
    gb_dim vec[BB_MAX_RANK];
    if (x->rank == 0 && count == 1 && gb_val_vector(x, vec) == 1) set_vec(o, vec, 1);
    return;
  }
  count = gb_node_axes(b, n, 1, 13, x->rank, axes);
  if (count < 0) return;
  bool drop[BB_MAX_RANK] = {false};
  if (!count)
    for (int d = 0; d < x->rank; d++) {
      if (!GB_KNOWN(x->dims[d])) return; /* whether it is 1 decides the rank */
      drop[d] = x->dims[d] == 1;
    }
  for (long i = 0; i < count; i++) drop[axes[i]] = true;
  gb_dim dims[BB_MAX_RANK];
  int rank = 0;
  for (int d = 0; d < x->rank; d++)
    if (!drop[d]) dims[rank++] = x->dims[d];
  gb_val_set_shape(o, x->dtype, rank, dims);
  gb_dim vec[BB_MAX_RANK];
  if (x->rank == 1 && rank == 0 && gb_val_vector(x, vec) == 1) set_vec(o, vec, 1);
}

/* Reshape, Expand, ConstantOfShape, SumToShape: the target shape from a vector input. */
static bool target_shape(gb *b, const gb_value *shape, int *rank, gb_dim *dims) {
  if (!shape) return false;
  int len = gb_val_vector(shape, dims);
  if (len < 0) {
    if (shape->rank != 1 || !GB_KNOWN(shape->dims[0]) || shape->dims[0] > BB_MAX_RANK) return false;
    len = (int)shape->dims[0]; /* the rank is known, the dims are not */
    for (int i = 0; i < len; i++) dims[i] = gb_symbol(b, NULL);
  }
  *rank = len;
  return true;
}

static void infer_reshape(gb *b, const bb_ir_node *n, const gb_value *x, const gb_value *shape, gb_value *o) {
  int rank;
  gb_dim dims[BB_MAX_RANK];
  if (!target_shape(b, shape, &rank, dims)) return;
  bool allowzero = bb_attr_get_int(&n->attrs, "allowzero", 0) != 0;
  int hole = -1;
  for (int i = 0; i < rank; i++) {
    if (dims[i] == 0 && !allowzero) dims[i] = x->rank > i ? x->dims[i] : gb_symbol(b, NULL);
    else if (dims[i] == -1) hole = i;
    else if (dims[i] < 0 && !GB_IS_SYMBOL(dims[i])) return;
  }
  if (hole >= 0) dims[hole] = reshape_hole(b, x, dims, rank, hole);
  gb_val_set_shape(o, x->dtype, rank, dims);
  gb_dim vec[BB_MAX_RANK];
  int len = gb_val_vector(x, vec);
  if (len >= 0 && rank <= 1 && (rank ? dims[0] == len : len == 1)) set_vec(o, vec, len);
}

static void infer_concat(gb *b, const bb_ir_node *n, gb_value *o) {
  gb_value *first = gb_input_val(b, n, 0);
  if (!first || first->rank < 1) return;
  int64_t axis = bb_attr_get_int(&n->attrs, "axis", 0);
  if (axis < 0) axis += first->rank;
  if (axis < 0 || axis >= first->rank) return;
  gb_dim dims[BB_MAX_RANK], vec[BB_MAX_RANK], part[BB_MAX_RANK];
  memcpy(dims, first->dims, (size_t)first->rank * sizeof *dims);
  int64_t total = 0;
  bool known = true;
  int vec_len = first->rank == 1 ? 0 : -1;
  for (size_t i = 0; i < n->inputs.len; i++) {
    gb_value *x = gb_input_val(b, n, i);
    if (!x || x->rank != first->rank) return;
    for (int d = 0; d < x->rank; d++)
      if (d != axis) dims[d] = merge_dim(b, dims[d], x->dims[d]);
    if (GB_KNOWN(x->dims[axis])) total += x->dims[axis];
    else known = false;
    int len = vec_len >= 0 ? gb_val_vector(x, part) : -1;
    if (len < 0 || vec_len + len > BB_MAX_RANK) vec_len = -1;
    else memcpy(vec + vec_len, part, (size_t)len * sizeof *part), vec_len += len;
  }
  dims[axis] = known ? total : n->inputs.len == 1 ? first->dims[axis] : gb_symbol(b, NULL);
  gb_val_set_shape(o, first->dtype, first->rank, dims);
  set_vec(o, vec, vec_len);
}

static void infer_split(gb *b, const bb_ir_node *n, const gb_value *x) {
  if (x->rank < 1) return;
  int64_t axis = bb_attr_get_int(&n->attrs, "axis", 0);
  if (axis < 0) axis += x->rank;
  if (axis < 0 || axis >= x->rank) return;
  size_t parts = n->outputs.len;
  int64_t sizes[64];
  if (parts > 64) return;
  long given = -1;
  if (b->opset >= 13 && gb_has_input(n, 1)) given = gb_known_ints(gb_input_val(b, n, 1), sizes, 64);
  else if (b->opset < 13) {
    const bb_attr *a = bb_attr_find(&n->attrs, "split");
    if (a && a->n_ints <= 64) given = (long)a->n_ints, memcpy(sizes, a->ints, a->n_ints * sizeof *sizes);
  }
  if (given >= 0 && (size_t)given != parts) return;
  if (given < 0) { /* equal parts, the last one smaller when the dim does not divide */
    if (!GB_KNOWN(x->dims[axis])) return;
    int64_t chunk = (x->dims[axis] + (int64_t)parts - 1) / (int64_t)parts, left = x->dims[axis];
    for (size_t k = 0; k < parts; k++) sizes[k] = left < chunk ? left : chunk, left -= sizes[k];
  }
  for (size_t k = 0; k < parts; k++) {
    gb_value *o = gb_output_val(b, n, k);
    if (!o) continue;
    gb_dim dims[BB_MAX_RANK];
    memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
    dims[axis] = sizes[k];
    gb_val_set_shape(o, x->dtype, x->rank, dims);
  }
}

static void infer_pad(gb *b, const bb_ir_node *n, const gb_value *x, gb_value *o) {
  int64_t pads[2 * BB_MAX_RANK], axes[BB_MAX_RANK];
  if (x->rank < 0) return;
  long np = gb_known_ints(gb_input_val(b, n, 1), pads, 2 * BB_MAX_RANK);
  long na = x->rank;
  for (long i = 0; i < na; i++) axes[i] = i;
  if (gb_has_input(n, 3) && (na = gb_known_ints(gb_input_val(b, n, 3), axes, BB_MAX_RANK)) < 0) return;
  if (np != 2 * na) return;
  gb_dim dims[BB_MAX_RANK];
  memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
  for (long i = 0; i < na; i++) {
    int64_t a = axes[i] < 0 ? axes[i] + x->rank : axes[i];
    if (a < 0 || a >= x->rank) return;
    int64_t grow = pads[i] + pads[i + na];
    dims[a] = GB_KNOWN(dims[a]) ? dims[a] + grow : grow ? gb_symbol(b, NULL) : dims[a];
  }
  gb_val_set_shape(o, x->dtype, x->rank, dims);
}

static void infer_expand(gb *b, const gb_value *x, const gb_value *shape, gb_value *o) {
  gb_value target;
  memset(&target, 0, sizeof target);
  if (!target_shape(b, shape, &target.rank, target.dims)) return;
  for (int d = 0; d < target.rank; d++)
    if (!GB_KNOWN(target.dims[d]) && !GB_IS_SYMBOL(target.dims[d])) return;
  gb_value *both[2] = {(gb_value *)x, &target};
  int rank;
  gb_dim dims[BB_MAX_RANK];
  if (broadcast(b, both, 2, &rank, dims)) gb_val_set_shape(o, x->dtype, rank, dims);
}

static void infer_transpose(const bb_ir_node *n, const gb_value *x, gb_value *o) {
  if (x->rank < 0) return;
  gb_dim dims[BB_MAX_RANK];
  const bb_attr *perm = bb_attr_find(&n->attrs, "perm");
  if (perm && perm->n_ints != (size_t)x->rank) return;
  for (int d = 0; d < x->rank; d++) {
    int64_t p = perm ? perm->ints[d] : x->rank - 1 - d;
    if (p < 0 || p >= x->rank) return;
    dims[d] = x->dims[p];
  }
  gb_val_set_shape(o, x->dtype, x->rank, dims);
}

static void infer_layernorm(gb *b, const bb_ir_node *n, const gb_value *x) {
  set_like(gb_output_val(b, n, 0), x, 0);
  if (x->rank < 1) return;
  int64_t axis = bb_attr_get_int(&n->attrs, "axis", -1);
  if (axis < 0) axis += x->rank;
  if (axis < 0 || axis >= x->rank) return;
  gb_dim dims[BB_MAX_RANK];
  for (int d = 0; d < x->rank; d++) dims[d] = d < axis ? x->dims[d] : 1;
  int32_t stat = bb_attr_get_int(&n->attrs, "stash_type", 1) == 16 ? BB_DTYPE_BFLOAT16 : BB_DTYPE_FLOAT;
  for (size_t k = 1; k < 3; k++)
    if (gb_output_val(b, n, k)) gb_val_set_shape(gb_output_val(b, n, k), stat, x->rank, dims);
}

static void infer_class_loss(gb *b, const bb_ir_node *n, const gb_value *x, const gb_value *labels) {
  gb_value *o = gb_output_val(b, n, 0);
  if (o && strcmp(bb_attr_get_string(&n->attrs, "reduction", "mean"), "none") == 0) set_like(o, labels, x->dtype);
  else if (o) gb_val_set_shape(o, x->dtype, 0, NULL);
  set_like(gb_output_val(b, n, 1), x, 0);
}

static void infer_shape_op(gb *b, const bb_ir_node *n, const gb_value *x, gb_value *o) {
  if (x->rank < 0) {
    gb_val_set_shape(o, BB_DTYPE_INT64, 1, (gb_dim[]){gb_symbol(b, NULL)});
    return;
  }
  int64_t start = b->opset >= 15 ? bb_attr_get_int(&n->attrs, "start", 0) : 0;
  int64_t end = b->opset >= 15 ? bb_attr_get_int(&n->attrs, "end", x->rank) : x->rank;
  if (start < 0) start += x->rank;
  if (end < 0) end += x->rank;
  start = start < 0 ? 0 : start > x->rank ? x->rank : start;
  end = end < start ? start : end > x->rank ? x->rank : end;
  gb_val_set_shape(o, BB_DTYPE_INT64, 1, (gb_dim[]){end - start});
  set_vec(o, x->dims + start, (int)(end - start));
}

static void infer_topk(gb *b, const bb_ir_node *n, const gb_value *x, const gb_value *k) {
  gb_value *values = gb_output_val(b, n, 0), *indices = gb_output_val(b, n, 1);
  if (x->rank < 1) {
    if (values) values->dtype = x->dtype;
    if (indices) indices->dtype = BB_DTYPE_INT64;
    return;
  }
  int64_t axis = bb_attr_get_int(&n->attrs, "axis", -1);
  if (axis < 0) axis += x->rank;
  if (axis < 0 || axis >= x->rank) return;
  gb_dim dims[BB_MAX_RANK];
  memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
  int64_t count;
  dims[axis] = gb_known_ints(k, &count, 1) == 1 ? count : gb_symbol(b, NULL);
  if (values) gb_val_set_shape(values, x->dtype, x->rank, dims);
  if (indices) gb_val_set_shape(indices, BB_DTYPE_INT64, x->rank, dims);
}

/* DepthToSpace ([N, C, H, W] → [N, C/b², H·b, W·b]) and SpaceToDepth, its inverse. */
static void infer_depth_space(gb *b, const bb_ir_node *n, const gb_value *x, gb_value *o) {
  int64_t block = bb_attr_get_int(&n->attrs, "blocksize", 0);
  if (x->rank != 4 || block < 1 || block > INT32_MAX) {
    if (o) o->dtype = x->dtype;
    return;
  }
  bool to_space = is_op(n, "DepthToSpace");
  gb_dim dims[4] = {x->dims[0]};
  int64_t area = block * block;
  for (int d = 1; d < 4; d++) {
    gb_dim v = x->dims[d];
    bool shrink = (d == 1) == to_space;
    int64_t by = d == 1 ? area : block;
    dims[d] = !GB_KNOWN(v) ? gb_symbol(b, NULL) : shrink ? v / by : v * by;
  }
  gb_val_set_shape(o, x->dtype, 4, dims);
}

/* The shape rules: fills what can be told about n's outputs from its inputs. */
static void infer_shapes(gb *b, const bb_ir_node *n) {
  const char *op = n->op_type;
  gb_value *x = gb_input_val(b, n, 0), *o = gb_output_val(b, n, 0);
  gb_value *ins[64];
  size_t n_in = n->inputs.len < 64 ? n->inputs.len : 64;
  for (size_t i = 0; i < n_in; i++) ins[i] = gb_input_val(b, n, i);
  int rank;
  gb_dim dims[BB_MAX_RANK];
  bool grad_domain = n->domain && strcmp(n->domain, BB_GRAD_DOMAIN) == 0;

  if (gb_infer_recurrent(b, n)) return;
  if (grad_domain) {
    if (is_op(n, "Dropout") && x) {
      set_like(o, x, 0);
      set_like(gb_output_val(b, n, 1), x, BB_DTYPE_BOOL);
    } else if (is_op(n, "SumToShape") && x && target_shape(b, gb_input_val(b, n, 1), &rank, dims)) {
      gb_val_set_shape(o, x->dtype, rank, dims);
    }
    return;
  }
  if (!bb_domain_is_onnx(n->domain)) return;
  if (in_list(SAME_SHAPE, op) && x) {
    set_like(o, x, 0);
    if (is_op(n, "Dropout")) set_like(gb_output_val(b, n, 1), x, BB_DTYPE_BOOL);
  } else if (in_list(BROADCAST_SAME_TYPE, op) && x) {
    if (broadcast(b, ins, n_in, &rank, dims)) gb_val_set_shape(o, x->dtype, rank, dims);
    else if (o) o->dtype = x->dtype;
  } else if (in_list(BROADCAST_BOOL, op)) {
    if (broadcast(b, ins, n_in, &rank, dims)) gb_val_set_shape(o, BB_DTYPE_BOOL, rank, dims);
  } else if (is_op(n, "Where") && n_in == 3 && ins[1]) {
    if (broadcast(b, ins, 3, &rank, dims)) gb_val_set_shape(o, ins[1]->dtype, rank, dims);
  } else if ((is_op(n, "Not") || is_op(n, "IsNaN") || is_op(n, "IsInf")) && x) {
    set_like(o, x, BB_DTYPE_BOOL);
  } else if (is_op(n, "Cast") && x) {
    set_like(o, x, (int32_t)bb_attr_get_int(&n->attrs, "to", x->dtype));
    gb_dim vec[BB_MAX_RANK];
    int len = gb_val_vector(x, vec);
    if (len >= 0 && o && (o->dtype == BB_DTYPE_INT64 || o->dtype == BB_DTYPE_INT32)) set_vec(o, vec, len);
  } else if (is_op(n, "CastLike") && x && ins[1]) {
    set_like(o, x, ins[1]->dtype);
  } else if (is_op(n, "MatMul") && x && ins[1]) {
    infer_matmul(b, x, ins[1], o);
  } else if (is_op(n, "Gemm") && x && ins[1] && x->rank == 2 && ins[1]->rank == 2) {
    bool ta = bb_attr_get_int(&n->attrs, "transA", 0), tb = bb_attr_get_int(&n->attrs, "transB", 0);
    gb_val_set_shape(o, x->dtype, 2, (gb_dim[]){x->dims[ta ? 1 : 0], ins[1]->dims[tb ? 0 : 1]});
  } else if (is_op(n, "Conv") || is_op(n, "ConvTranspose") || is_op(n, "MaxPool") || is_op(n, "AveragePool")) {
    infer_window(b, n, x, n_in > 1 ? ins[1] : NULL, o);
    if (is_op(n, "MaxPool") && o) set_like(gb_output_val(b, n, 1), o, BB_DTYPE_INT64);
  } else if ((is_op(n, "GlobalAveragePool") || is_op(n, "GlobalMaxPool")) && x && x->rank >= 2) {
    memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
    for (int d = 2; d < x->rank; d++) dims[d] = 1;
    gb_val_set_shape(o, x->dtype, x->rank, dims);
  } else if (is_op(n, "BatchNormalization") && x) {
    set_like(o, x, 0);
    for (size_t k = 1; k < 3 && k + 2 < n_in; k++) set_like(gb_output_val(b, n, k), ins[k + 2], 0);
  } else if (is_op(n, "LayerNormalization") && x) {
    infer_layernorm(b, n, x);
  } else if ((is_op(n, "SoftmaxCrossEntropyLoss") || is_op(n, "NegativeLogLikelihoodLoss")) && x && ins[1]) {
    infer_class_loss(b, n, x, ins[1]);
  } else if (is_op(n, "Reshape") && x) {
    infer_reshape(b, n, x, ins[1], o);
  } else if (is_op(n, "Flatten") && x && x->rank >= 0) {
    int64_t axis = bb_attr_get_int(&n->attrs, "axis", 1);
    if (axis < 0) axis += x->rank;
    if (axis >= 0 && axis <= x->rank)
      gb_val_set_shape(o, x->dtype, 2,
                       (gb_dim[]){product(b, x->dims, 0, (int)axis), product(b, x->dims, (int)axis, x->rank)});
  } else if (is_op(n, "Transpose") && x) {
    infer_transpose(n, x, o);
  } else if (is_op(n, "Concat")) {
    infer_concat(b, n, o);
  } else if (is_op(n, "Split") && x) {
    infer_split(b, n, x);
  } else if (is_op(n, "Slice") && x) {
    infer_slice(b, n, x, o);
  } else if (is_op(n, "Pad") && x) {
    infer_pad(b, n, x, o);
  } else if (is_op(n, "Gather") && x && ins[1]) {
    infer_gather(b, n, x, ins[1], o);
  } else if (is_op(n, "GatherElements") && x && ins[1]) {
    set_like(o, ins[1], x->dtype);
  } else if (is_op(n, "TopK") && x) {
    infer_topk(b, n, x, ins[1]);
  } else if ((is_op(n, "DepthToSpace") || is_op(n, "SpaceToDepth")) && x) {
    infer_depth_space(b, n, x, o);
  } else if ((is_op(n, "Squeeze") || is_op(n, "Unsqueeze")) && x) {
    infer_squeeze(b, n, x, o, is_op(n, "Unsqueeze"));
  } else if (is_op(n, "Expand") && x) {
    infer_expand(b, x, ins[1], o);
  } else if (in_list(REDUCE, op) && x) {
    infer_reduce(b, n, x, o);
  } else if ((is_op(n, "ArgMax") || is_op(n, "ArgMin")) && x && x->rank >= 1) {
    int64_t axis = bb_attr_get_int(&n->attrs, "axis", 0);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis >= x->rank) return;
    memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
    bool keep = bb_attr_get_int(&n->attrs, "keepdims", 1) != 0;
    dims[axis] = 1;
    if (!keep) memmove(dims + axis, dims + axis + 1, (size_t)(x->rank - axis - 1) * sizeof *dims);
    gb_val_set_shape(o, BB_DTYPE_INT64, keep ? x->rank : x->rank - 1, dims);
  } else if (is_op(n, "Shape") && x && o) {
    infer_shape_op(b, n, x, o);
  } else if (is_op(n, "Size") && o) {
    gb_val_set_shape(o, BB_DTYPE_INT64, 0, NULL);
  } else if (is_op(n, "ConstantOfShape") && target_shape(b, x, &rank, dims)) {
    const bb_attr *v = bb_attr_find(&n->attrs, "value");
    int32_t dtype = v && v->t && v->t->has_data_type ? v->t->data_type : BB_DTYPE_FLOAT;
    for (int d = 0; d < rank; d++)
      if (!GB_KNOWN(dims[d]) && !GB_IS_SYMBOL(dims[d])) return;
    gb_val_set_shape(o, dtype, rank, dims);
  } else if (is_op(n, "Constant") && o) {
    const bb_attr *v = bb_attr_find(&n->attrs, "value");
    if (v && v->t && v->t->n_dims <= BB_MAX_RANK)
      gb_val_set_shape(o, v->t->data_type, (int)v->t->n_dims, v->t->dims);
    else if (bb_attr_find(&n->attrs, "value_float") || bb_attr_find(&n->attrs, "value_int"))
      gb_val_set_shape(o, bb_attr_find(&n->attrs, "value_int") ? BB_DTYPE_INT64 : BB_DTYPE_FLOAT, 0, NULL);
    else if ((v = bb_attr_find(&n->attrs, "value_ints")) || (v = bb_attr_find(&n->attrs, "value_floats")))
      gb_val_set_shape(o, v->type == BB_ATTR_INTS ? BB_DTYPE_INT64 : BB_DTYPE_FLOAT, 1,
                       (gb_dim[]){v->type == BB_ATTR_INTS ? (int64_t)v->n_ints : (int64_t)v->n_floats});
  } else if (is_op(n, "Range") && n_in == 3 && x) {
    double s, l, d;
    if (gb_known_scalar(ins[0], &s) && gb_known_scalar(ins[1], &l) && gb_known_scalar(ins[2], &d) && d != 0) {
      double c = ceil((l - s) / d);
      int64_t count = c > 0 ? (int64_t)c : 0;
      gb_val_set_shape(o, x->dtype, 1, (gb_dim[]){count});
    } else {
      gb_val_set_shape(o, x->dtype, 1, (gb_dim[]){gb_symbol(b, NULL)});
    }
  } else if (is_op(n, "OneHot") && x && n_in == 3 && x->rank >= 0 && x->rank < BB_MAX_RANK && ins[2]) {
    double depth;
    int64_t axis = bb_attr_get_int(&n->attrs, "axis", -1);
    if (axis < 0) axis += x->rank + 1;
    if (axis < 0 || axis > x->rank) return;
    for (int d = 0, k = 0; d <= x->rank; d++) dims[d] = d == axis ? -1 : x->dims[k++];
    dims[axis] = gb_known_scalar(ins[1], &depth) ? (int64_t)depth : gb_symbol(b, NULL);
    gb_val_set_shape(o, ins[2]->dtype, x->rank + 1, dims);
  } else if (is_op(n, "Tile") && x && x->rank >= 0) {
    int64_t reps[BB_MAX_RANK];
    if (gb_known_ints(gb_input_val(b, n, 1), reps, BB_MAX_RANK) != x->rank) return;
    for (int d = 0; d < x->rank; d++)
      dims[d] = GB_KNOWN(x->dims[d]) ? x->dims[d] * reps[d] : reps[d] == 1 ? x->dims[d] : gb_symbol(b, NULL);
    gb_val_set_shape(o, x->dtype, x->rank, dims);
  }
}

/* What the graph itself declares about a value (value_info, graph outputs). */
static void declared(gb *b, gb_value *o) {
  const bb_value_info *vi = bb_vilist_find(&b->g->value_infos, o->name);
  if (!vi) vi = bb_vilist_find(&b->g->outputs, o->name);
  if (!vi || !vi->type) return;
  gb_value d;
  memset(&d, 0, sizeof d);
  d.rank = -1;
  gb_val_set_type(b, &d, vi->type);
  if (!o->dtype) o->dtype = d.dtype;
  if (o->rank < 0 && d.rank >= 0) gb_val_set_shape(o, o->dtype, d.rank, d.dims);
}

static bool random_op(const bb_ir_node *n) {
  return !bb_domain_is_onnx(n->domain) || is_op(n, "Dropout") ||
         strncmp(n->op_type, "Random", 6) == 0 || is_op(n, "Multinomial") || is_op(n, "Bernoulli");
}

/* Computes n's outputs at build time when every input is known and every output is small. */
static int fold(gb *b, const bb_ir_node *n) {
  bb_tensor *ins[64], *outs[64];
  if (n->inputs.len > 64 || n->outputs.len > 64 || random_op(n)) return 0;
  for (size_t i = 0; i < n->inputs.len; i++) {
    gb_value *v = gb_input_val(b, n, i);
    if (*n->inputs.items[i] && (!v || !v->known)) return 0;
    ins[i] = v ? v->known : NULL;
  }
  for (size_t k = 0; k < n->outputs.len; k++) {
    gb_value *o = gb_output_val(b, n, k);
    int64_t numel = o ? gb_val_numel(o) : 0;
    if (numel < 0 || numel > GB_KNOWN_MAX) return 0;
  }
  bb_error ignored;
  int rc = bb_cpu_run_node(n, b->opset, ins, n->inputs.len, outs, n->outputs.len, b->alloc, &ignored);
  if (rc == BB_ERR_NOMEM) return gb_fail(b, rc, "out of memory building the training graph");
  if (rc) return 0; /* a node that fails on known inputs fails at run time too; it is not this pass's to report */
  for (size_t k = 0; k < n->outputs.len; k++) {
    gb_value *o = gb_output_val(b, n, k);
    if (!o || !outs[k]) {
      bb_tensor_release(outs[k]);
      continue;
    }
    gb_dim dims[BB_MAX_RANK];
    for (int d = 0; d < outs[k]->rank; d++) dims[d] = outs[k]->dims[d];
    gb_val_set_shape(o, outs[k]->dtype, outs[k]->rank, dims);
    bb_tensor_release(o->known);
    o->known = outs[k];
    o->vec_len = -1; /* the value itself now says everything */
  }
  return 0;
}

/* A shape vector (or scalar) whose every entry is known becomes a known value, so the
 * shape arithmetic after it (a Slice's bounds from Shape(x), as torch.chunk exports them)
 * folds to constants. */
static void materialise_vector(gb *b, gb_value *o) {
  if (!o || o->known || o->vec_len < 0 || (o->dtype != BB_DTYPE_INT64 && o->dtype != BB_DTYPE_INT32) || o->rank > 1 ||
      (o->rank == 0 && o->vec_len != 1) || (o->rank == 1 && o->dims[0] != o->vec_len))
    return;
  for (int i = 0; i < o->vec_len; i++)
    if (!GB_KNOWN(o->vec[i])) return;
  int64_t len = o->vec_len;
  bb_tensor *t = bb_tensor_new_empty(b->alloc, o->dtype, o->rank, &len);
  if (!t) {
    gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
    return;
  }
  for (int i = 0; i < o->vec_len; i++) {
    if (o->dtype == BB_DTYPE_INT64) ((int64_t *)bb_tensor_data(t))[i] = o->vec[i];
    else ((int32_t *)bb_tensor_data(t))[i] = (int32_t)o->vec[i];
  }
  o->known = t;
}

int gb_infer_node(gb *b, const bb_ir_node *n) {
  for (size_t i = 0; i < n->inputs.len; i++)
    if (*n->inputs.items[i] && !gb_val(b, n->inputs.items[i]))
      return gb_fail(b, BB_ERR_MALFORMED, "%s reads %s, which no earlier node, graph input or initializer defines",
                     gb_node_label(b, n), n->inputs.items[i]);
  for (size_t k = 0; k < n->outputs.len; k++)
    if (*n->outputs.items[k] && !gb_val(b, n->outputs.items[k]) && !gb_val_add(b, n->outputs.items[k])) return b->rc;
  infer_shapes(b, n);
  for (size_t k = 0; k < n->outputs.len; k++) {
    gb_value *o = gb_output_val(b, n, k);
    if (o && (o->rank < 0 || !o->dtype)) declared(b, o);
  }
  for (size_t k = 0; k < n->outputs.len && !b->rc; k++) materialise_vector(b, gb_output_val(b, n, k));
  fold(b, n);
  return b->rc;
}
