/* Backward rules of the operators that move data without computing: reshapes, Transpose,
 * Concat / Split, Slice / Pad, Gather / GatherElements / TopK, DepthToSpace / SpaceToDepth
 * and Expand. Each gradient moves the output gradient back (the inverse reshape,
 * permutation, split or pad), and the gathers' scatter it with an "add" reduction so
 * repeated indices accumulate. */
#include <stdint.h>
#include <string.h>

#include "grad/builder.h"

#define IN(i) (n->inputs.items[i])
#define OUT(k) (n->outputs.items[k])

/* Gather's indices are checked for negative entries at build time up to this many. */
#define KNOWN_INDICES_MAX 4096

/* Reshape, Flatten, Squeeze, Unsqueeze: the gradient takes the input's shape back. */
static int reshape_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_grad(b, n, 0, gb_reshape_like(b, dy[0], IN(0)));
  return b->rc;
}

static int expand_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_grad(b, n, 0, gb_unbroadcast(b, dy[0], IN(0)));
  return b->rc;
}

static int transpose_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_value *x = gb_val(b, IN(0));
  if (x->rank < 0) return gb_fail(b, BB_ERR_UNSUPPORTED, "%s: the gradient needs the input's rank", gb_node_label(b, n));
  const bb_attr *perm = bb_attr_find(&n->attrs, "perm");
  int64_t inverse[BB_MAX_RANK];
  for (int d = 0; d < x->rank; d++) {
    int64_t p = perm ? perm->ints[d] : x->rank - 1 - d;
    inverse[p] = d;
  }
  gb_grad(b, n, 0, gb_transpose(b, dy[0], inverse, x->rank));
  return b->rc;
}

static int concat_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_value *first = gb_val(b, IN(0));
  int64_t axis = bb_attr_get_int(&n->attrs, "axis", 0);
  if (first->rank < 1) return gb_fail(b, BB_ERR_UNSUPPORTED, "%s: the gradient needs the inputs' rank", gb_node_label(b, n));
  if (axis < 0) axis += first->rank;
  /* the split sizes: constants when every input's dim is known, else read at run time */
  int64_t sizes[64];
  bool known = n->inputs.len <= 64;
  for (size_t i = 0; known && i < n->inputs.len; i++) {
    gb_dim d = gb_val(b, IN(i))->dims[axis];
    known = GB_KNOWN(d);
    sizes[i] = d;
  }
  const char *split;
  if (known) {
    split = gb_ints(b, sizes, n->inputs.len);
  } else {
    bb_ir_node *cat = gb_new(b, "Concat", NULL, 1, 0);
    for (size_t i = 0; cat && i < n->inputs.len; i++) {
      const char *dim = gb_op(b, "Gather", 2, gb_shape_of(b, IN(i)), gb_ints(b, &axis, 1));
      if (!dim || bb_strlist_append(b->m, &cat->inputs, dim)) gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
    }
    gb_attr_int(b, cat, "axis", 0);
    split = gb_add(b, cat);
  }
  bb_ir_node *s = gb_new(b, "Split", NULL, n->inputs.len, 2, dy[0], split);
  gb_attr_int(b, s, "axis", axis);
  if (!gb_add(b, s)) return b->rc;
  for (size_t i = 0; i < n->inputs.len; i++) gb_grad(b, n, i, s->outputs.items[i]);
  return b->rc;
}

static int split_back(gb *b, bb_ir_node *n, const char *const *dy) {
  bb_ir_node *cat = gb_new(b, "Concat", NULL, 1, 0);
  for (size_t k = 0; cat && k < n->outputs.len; k++) {
    const char *part = dy[k] ? dy[k] : gb_zeros_like(b, OUT(k)); /* an output no loss reads */
    if (!part || bb_strlist_append(b->m, &cat->inputs, part)) gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
  }
  gb_attr_int(b, cat, "axis", bb_attr_get_int(&n->attrs, "axis", 0));
  gb_grad(b, n, 0, gb_add(b, cat));
  return b->rc;
}

/* Slice with unit steps: the gradient is dY padded with zeros back to X's extent. */
static int slice_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_value *x = gb_val(b, IN(0));
  int64_t starts[BB_MAX_RANK], ends[BB_MAX_RANK], axes[BB_MAX_RANK], steps[BB_MAX_RANK];
  long ns = gb_known_ints(gb_val(b, IN(1)), starts, BB_MAX_RANK), ne = gb_known_ints(gb_val(b, IN(2)), ends, BB_MAX_RANK);
  long na = gb_has_input(n, 3) ? gb_known_ints(gb_val(b, IN(3)), axes, BB_MAX_RANK) : ns;
  long nt = gb_has_input(n, 4) ? gb_known_ints(gb_val(b, IN(4)), steps, BB_MAX_RANK) : ns;
  if (x->rank < 0 || ns < 0 || ne != ns || na != ns || nt != ns)
    return gb_fail(b, BB_ERR_UNSUPPORTED, "%s: the gradient needs constant starts, ends, axes and steps",
                   gb_node_label(b, n));
  int64_t pads[2 * BB_MAX_RANK] = {0};
  for (long i = 0; i < ns; i++) {
    int64_t axis = gb_has_input(n, 3) ? axes[i] : i;
    if (axis < 0) axis += x->rank;
    if (gb_has_input(n, 4) && steps[i] != 1)
      return gb_fail(b, BB_ERR_UNSUPPORTED, "%s: the gradient of a Slice with step %lld is not implemented (steps of 1 are)",
                     gb_node_label(b, n), (long long)steps[i]);
    gb_dim dim = x->dims[axis];
    int64_t s = starts[i], e = ends[i];
    if (!GB_KNOWN(dim)) { /* without the extent only x[k:] can be told */
      if (s < 0 || e < INT32_MAX)
        return gb_fail(b, BB_ERR_UNSUPPORTED, "%s: the gradient needs dim %lld of %s, which is not known at build time",
                       gb_node_label(b, n), (long long)axis, IN(0));
      pads[axis] = s;
      continue;
    }
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    s = s < 0 ? 0 : s > dim ? dim : s;
    e = e < s ? s : e > dim ? dim : e;
    pads[axis] = s;
    pads[axis + x->rank] = dim - e;
  }
  gb_grad(b, n, 0, gb_op(b, "Pad", 2, dy[0], gb_ints(b, pads, 2 * (size_t)x->rank)));
  return b->rc;
}

/* Pad (constant mode): the gradient is the slice of dY over X's extent. */
static int pad_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_value *x = gb_val(b, IN(0));
  const char *mode = bb_attr_get_string(&n->attrs, "mode", "constant");
  if (strcmp(mode, "constant") != 0)
    return gb_fail(b, BB_ERR_UNSUPPORTED, "%s: the gradient of mode %s is not implemented (constant is)", gb_node_label(b, n),
                   mode);
  int64_t pads[2 * BB_MAX_RANK], axes[BB_MAX_RANK];
  long np = gb_known_ints(gb_val(b, IN(1)), pads, 2 * BB_MAX_RANK), na = x->rank;
  if (gb_has_input(n, 3)) na = gb_known_ints(gb_val(b, IN(3)), axes, BB_MAX_RANK);
  else
    for (long i = 0; i < na; i++) axes[i] = i;
  if (x->rank < 0 || na < 0 || np != 2 * na)
    return gb_fail(b, BB_ERR_UNSUPPORTED, "%s: the gradient needs constant pads", gb_node_label(b, n));
  int64_t starts[BB_MAX_RANK], ends[BB_MAX_RANK];
  for (long i = 0; i < na; i++) {
    if (pads[i] < 0 || pads[i + na] < 0)
      return gb_fail(b, BB_ERR_UNSUPPORTED, "%s: the gradient of negative pads is not implemented", gb_node_label(b, n));
    starts[i] = pads[i];
    ends[i] = pads[i + na] ? -pads[i + na] : INT64_MAX;
  }
  gb_grad(b, n, 0, gb_op(b, "Slice", 4, dy[0], gb_ints(b, starts, na), gb_ints(b, ends, na), gb_ints(b, axes, na)));
  return b->rc;
}

/* Gather(W, idx, axis): dW = zeros(W) with dY scattered back, repeated indices adding up
 * (ScatterND, reduction "add"); an axis other than 0 is moved to the front and back. */
static int gather_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_value *w = gb_val(b, IN(0)), *idx = gb_val(b, IN(1));
  if (b->opset < 16)
    return gb_fail(b, BB_ERR_UNSUPPORTED, "%s: the gradient uses ScatterND's reduction, which needs opset 16 (the model has %lld)",
                   gb_node_label(b, n), (long long)b->opset);
  if (w->rank < 1 || idx->rank < 0)
    return gb_fail(b, BB_ERR_UNSUPPORTED, "%s: the gradient needs the ranks of data and indices", gb_node_label(b, n));
  int64_t axis = bb_attr_get_int(&n->attrs, "axis", 0);
  if (axis < 0) axis += w->rank;
  int q = idx->rank, r = w->rank;
  const char *indices = IN(1), *g = dy[0], *data = IN(0);
  /* negative indices count from the end of the axis */
  int64_t known[KNOWN_INDICES_MAX];
  long nk = gb_known_ints(idx, known, KNOWN_INDICES_MAX);
  bool nonneg = nk >= 0;
  for (long i = 0; i < nk; i++) nonneg = nonneg && known[i] >= 0;
  if (!nonneg) {
    const char *dim = gb_op(b, "Gather", 2, gb_shape_of(b, IN(0)), gb_ints(b, &axis, 1));
    if (gb_dtype(b, indices) != BB_DTYPE_INT64) {
      bb_ir_node *cast = gb_new(b, "Cast", NULL, 1, 1, indices);
      gb_attr_int(b, cast, "to", BB_DTYPE_INT64);
      indices = gb_add(b, cast);
    }
    const char *neg = gb_op(b, "Less", 2, indices, gb_ints(b, (int64_t[]){0}, 1));
    indices = gb_op(b, "Where", 3, neg, gb_op(b, "Add", 2, indices, dim), indices);
    if (q == 0) indices = gb_reshape_like(b, indices, IN(1)); /* the comparison made a scalar index [1] */
  }
  if (axis) { /* dY is W[:axis] + idx + W[axis+1:]: bring idx's dims first */
    int64_t perm[BB_MAX_RANK], wperm[BB_MAX_RANK];
    int k = 0;
    for (int d = 0; d < q; d++) perm[k++] = axis + d;
    for (int d = 0; d < axis; d++) perm[k++] = d;
    for (int d = (int)axis + q; d < r + q - 1; d++) perm[k++] = d;
    g = gb_transpose(b, g, perm, r + q - 1);
    wperm[0] = axis;
    for (int d = 0, j = 1; d < r; d++)
      if (d != axis) wperm[j++] = d;
    data = gb_transpose(b, data, wperm, r);
  }
  const char *scattered = NULL;
  bb_ir_node *s = gb_new(b, "ScatterND", NULL, 1, 3, gb_zeros_like(b, data), gb_unsqueeze(b, indices, (int64_t[]){-1}, 1), g);
  gb_attr_string(b, s, "reduction", "add");
  scattered = gb_add(b, s);
  if (axis) {
    int64_t back[BB_MAX_RANK];
    for (int d = 0; d < r; d++) back[d] = d < axis ? d + 1 : d == axis ? 0 : d;
    scattered = gb_transpose(b, scattered, back, r);
  }
  gb_grad(b, n, 0, scattered);
  return b->rc;
}

/* dX = zeros(X) with dY put back at the positions the indices picked along the axis. */
static const char *scatter_back(gb *b, const bb_ir_node *n, const char *indices, const char *dy, const char *reduction) {
  bb_ir_node *s = gb_new(b, "ScatterElements", NULL, 1, 3, gb_zeros_like(b, IN(0)), indices, dy);
  gb_attr_int(b, s, "axis", bb_attr_get_int(&n->attrs, "axis", strcmp(n->op_type, "TopK") == 0 ? -1 : 0));
  if (reduction) gb_attr_string(b, s, "reduction", reduction);
  return gb_add(b, s);
}

/* GatherElements: repeated indices add up (ScatterElements' "add", opset 16). */
static int gather_elements_back(gb *b, bb_ir_node *n, const char *const *dy) {
  if (b->opset < 16)
    return gb_fail(b, BB_ERR_UNSUPPORTED,
                   "%s: the gradient uses ScatterElements' reduction, which needs opset 16 (the model has %lld)",
                   gb_node_label(b, n), (long long)b->opset);
  gb_grad(b, n, 0, scatter_back(b, n, IN(1), dy[0], "add"));
  return b->rc;
}

/* TopK: the values go back to where the forward's indices took them from (distinct within
 * each slice, so no reduction is needed). */
static int topk_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_grad(b, n, 0, scatter_back(b, n, gb_ensure_output(b, n, 1, ":indices"), dy[0], NULL));
  return b->rc;
}

/* DepthToSpace in DCR mode and SpaceToDepth are each other's inverse permutation. The
 * inverse of CRD mode is its reshape and transpose undone:
 * dY [N, C', H·b, W·b] → [N, C', H, b, W, b] → (0, 1, 3, 5, 2, 4) → [N, C'·b·b, H, W]. */
static int depth_space_back(gb *b, bb_ir_node *n, const char *const *dy) {
  int64_t block = bb_attr_get_int(&n->attrs, "blocksize", 0);
  if (strcmp(n->op_type, "SpaceToDepth") == 0) {
    bb_ir_node *d = gb_new(b, "DepthToSpace", NULL, 1, 1, dy[0]);
    gb_attr_int(b, d, "blocksize", block);
    gb_attr_string(b, d, "mode", "DCR");
    gb_grad(b, n, 0, gb_add(b, d));
    return b->rc;
  }
  if (strcmp(bb_attr_get_string(&n->attrs, "mode", "DCR"), "CRD") != 0) {
    bb_ir_node *s = gb_new(b, "SpaceToDepth", NULL, 1, 1, dy[0]);
    gb_attr_int(b, s, "blocksize", block);
    gb_grad(b, n, 0, gb_add(b, s));
    return b->rc;
  }
  gb_value *x = gb_val(b, IN(0));
  if (x->rank != 4 || !GB_KNOWN(x->dims[2]) || !GB_KNOWN(x->dims[3]))
    return gb_fail(b, BB_ERR_UNSUPPORTED, "%s: the gradient of mode CRD needs the input's height and width at build time",
                   gb_node_label(b, n));
  /* Reshape's 0 keeps the batch and channel dims as they are, known or not */
  const char *blocks = gb_reshape(b, dy[0], (int64_t[]){0, 0, x->dims[2], block, x->dims[3], block}, 6);
  const char *moved = gb_transpose(b, blocks, (int64_t[]){0, 1, 3, 5, 2, 4}, 6);
  gb_grad(b, n, 0, gb_reshape_like(b, moved, IN(0)));
  return b->rc;
}

const gb_rule gb_rules_shape[] = {
    {NULL, "Reshape", 1, 1, reshape_back},
    {NULL, "Flatten", 1, 1, reshape_back},
    {NULL, "Squeeze", 1, 1, reshape_back},
    {NULL, "Unsqueeze", 1, 1, reshape_back},
    {NULL, "Expand", 1, 1, expand_back},
    {NULL, "Transpose", 1, 1, transpose_back},
    {NULL, "Concat", GB_ALL_INPUTS, 1, concat_back},
    {NULL, "Split", 1, UINT32_MAX, split_back},
    {NULL, "Slice", 1, 1, slice_back},
    {NULL, "Pad", 1, 1, pad_back},
    {NULL, "Gather", 1, 1, gather_back},
    {NULL, "GatherElements", 1, 1, gather_elements_back},
    {NULL, "TopK", 1, 1, topk_back},
    {NULL, "DepthToSpace", 1, 1, depth_space_back},
    {NULL, "SpaceToDepth", 1, 1, depth_space_back},
};
const size_t gb_rules_shape_count = sizeof gb_rules_shape / sizeof gb_rules_shape[0];
