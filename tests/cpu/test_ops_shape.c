/* The shape operators of the CPU backend, run through bb_cpu_run_node. Every element of
 * an input gets distinct bytes, so an output can be checked element by element against
 * the input position a reference written here says it comes from (multi-index arithmetic
 * for Transpose, Concat, Split, the Gathers, Expand, Tile and DepthToSpace; Python's slice
 * loop for Slice); Pad, Range, Constant, the Scatters, OneHot and the error paths are
 * hand-derived. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/cpu.h"
#include "bb/ir.h"
#include "bb/tensor.h"
#include "harness.h"

static bb_model *M;
static bb_error err;

/* ---- building nodes and tensors ------------------------------------------------------------ */

static bb_ir_node *make_node(const char *op, size_t n_out) {
  bb_ir_node *n = bb_ir_node_new(M, op, "", "under_test");
  for (size_t i = 0; i < n_out; i++) {
    char name[16];
    snprintf(name, sizeof name, "y%zu", i);
    bb_strlist_append(M, &n->outputs, name);
  }
  return n;
}

static void set_ints(bb_ir_node *n, const char *name, const int64_t *v, size_t count) {
  bb_attr_set_ints(M, &n->attrs, name, v, count);
}

static int run(const bb_ir_node *n, int64_t opset, bb_tensor **in, size_t n_in, bb_tensor **out, size_t n_out) {
  bb_error_clear(&err);
  return bb_cpu_run_node(n, opset, in, n_in, out, n_out, NULL, &err);
}

static void release(bb_tensor **t, size_t n) {
  for (size_t i = 0; i < n; i++) {
    bb_tensor_release(t[i]);
    t[i] = NULL;
  }
}

static int64_t numel_of(int rank, const int64_t *dims) {
  int64_t n = 1;
  for (int k = 0; k < rank; k++) n *= dims[k];
  return n;
}

/* The bytes of element i of a "marked" tensor: distinct for every i below 2^24. */
static uint8_t mark_byte(int64_t i, size_t j) { return (uint8_t)((i >> (8 * (j % 3))) + 17 * (int64_t)j + 1); }

static bb_tensor *marked(int32_t dtype, int rank, const int64_t *dims) {
  bb_tensor *t = bb_tensor_new_empty(NULL, dtype, rank, dims);
  size_t es = bb_dtype_size(dtype);
  uint8_t *p = bb_tensor_data(t);
  for (int64_t i = 0; i < t->numel; i++)
    for (size_t j = 0; j < es; j++) p[(size_t)i * es + j] = mark_byte(i, j);
  return t;
}

static bb_tensor *ints(int32_t dtype, int rank, const int64_t *dims, const int64_t *v) {
  bb_tensor *t = bb_tensor_new_empty(NULL, dtype, rank, dims);
  for (int64_t i = 0; i < t->numel; i++) {
    if (dtype == BB_DTYPE_INT64) ((int64_t *)bb_tensor_data(t))[i] = v[i];
    else ((int32_t *)bb_tensor_data(t))[i] = (int32_t)v[i];
  }
  return t;
}

static bb_tensor *vec64(size_t n, const int64_t *v) {
  int64_t d = (int64_t)n;
  return ints(BB_DTYPE_INT64, 1, &d, v);
}

static bb_tensor *floats(int rank, const int64_t *dims, const float *v) {
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, rank, dims);
  memcpy(bb_tensor_data(t), v, (size_t)t->numel * sizeof(float));
  return t;
}

static bool has_shape(const bb_tensor *t, int rank, const int64_t *dims) {
  if (!t || t->rank != rank) return false;
  for (int k = 0; k < rank; k++)
    if (t->dims[k] != dims[k]) return false;
  return true;
}

/* out[i] must be a copy of element src[i] of the marked tensor `in`. */
static bool gathered_from(const bb_tensor *out, const bb_tensor *in, const int64_t *src) {
  size_t es = bb_dtype_size(in->dtype);
  if (!out || out->dtype != in->dtype) return false;
  for (int64_t i = 0; i < out->numel; i++)
    if (memcmp((const char *)bb_tensor_data(out) + (size_t)i * es,
               (const char *)bb_tensor_data(in) + (size_t)src[i] * es, es) != 0) {
      fprintf(stderr, "  element %lld is not input element %lld\n", (long long)i, (long long)src[i]);
      return false;
    }
  return true;
}

static bool floats_are(const bb_tensor *t, const float *v) {
  if (!t || t->dtype != BB_DTYPE_FLOAT) return false;
  for (int64_t i = 0; i < t->numel; i++)
    if (((const float *)bb_tensor_data(t))[i] != v[i]) {
      fprintf(stderr, "  element %lld: %g, expected %g\n", (long long)i, ((const float *)bb_tensor_data(t))[i], v[i]);
      return false;
    }
  return true;
}

static bool ints_are(const bb_tensor *t, const int64_t *v) {
  if (!t || (t->dtype != BB_DTYPE_INT64 && t->dtype != BB_DTYPE_INT32)) return false;
  for (int64_t i = 0; i < t->numel; i++) {
    int64_t x = t->dtype == BB_DTYPE_INT64 ? ((const int64_t *)bb_tensor_data(t))[i]
                                           : ((const int32_t *)bb_tensor_data(t))[i];
    if (x != v[i]) {
      fprintf(stderr, "  element %lld: %lld, expected %lld\n", (long long)i, (long long)x, (long long)v[i]);
      return false;
    }
  }
  return true;
}

/* Row-major multi-index of flat position i. */
static void unravel(int64_t i, int rank, const int64_t *dims, int64_t *idx) {
  for (int k = rank - 1; k >= 0; k--) {
    idx[k] = dims[k] ? i % dims[k] : 0;
    i = dims[k] ? i / dims[k] : 0;
  }
}

static int64_t ravel(int rank, const int64_t *dims, const int64_t *idx) {
  int64_t i = 0;
  for (int k = 0; k < rank; k++) i = i * dims[k] + idx[k];
  return i;
}

/* ---- views: Reshape, Flatten, Squeeze, Unsqueeze ------------------------------------------- */

static void test_reshape(void) {
  const int64_t d[3] = {2, 3, 4};
  bb_tensor *x = marked(BB_DTYPE_FLOAT, 3, d), *out[1] = {NULL};
  bb_ir_node *n = make_node("Reshape", 1);
  /* 0 copies the input's dimension, -1 is inferred: [2, 3, 4] -> [2, 12] */
  const int64_t s1[3] = {0, -1}, want1[2] = {2, 12};
  bb_tensor *in[2] = {x, vec64(2, s1)};
  CHECK_EQ_INT(run(n, 14, in, 2, out, 1), 0);
  CHECK(has_shape(out[0], 2, want1));
  CHECK(out[0] && out[0]->buffer == x->buffer); /* a view, no copy */
  release(out, 1);
  bb_tensor_release(in[1]);

  /* allowzero (opset 14): 0 is a real zero-size dimension, so [2,3,4] cannot become [0, 12] */
  bb_attr_set_int(M, &n->attrs, "allowzero", 1);
  const int64_t s2[2] = {0, 12};
  in[1] = vec64(2, s2);
  CHECK(run(n, 14, in, 2, out, 1) == BB_ERR_TYPE);
  /* ... while before opset 14 the attribute does not exist and 0 copies */
  CHECK_EQ_INT(run(n, 13, in, 2, out, 1), 0);
  const int64_t want2[2] = {2, 12};
  CHECK(has_shape(out[0], 2, want2));
  release(out, 1);
  bb_tensor_release(in[1]);

  /* errors: two -1, a size that does not match, 0 past the input's rank */
  const int64_t s3[2] = {-1, -1}, s4[2] = {5, 5}, s5[4] = {2, 3, 4, 0};
  const int64_t *bad[3] = {s3, s4, s5};
  const size_t bad_n[3] = {2, 2, 4};
  bb_ir_node *plain = make_node("Reshape", 1);
  for (int i = 0; i < 3; i++) {
    in[1] = vec64(bad_n[i], bad[i]);
    CHECK(run(plain, 14, in, 2, out, 1) < 0);
    CHECK(out[0] == NULL);
    CHECK_MSG(strstr(err.message, "under_test") != NULL, "error names the node: %s", err.message);
    bb_tensor_release(in[1]);
  }

  /* opset 1: the shape is an attribute */
  bb_ir_node *old = make_node("Reshape", 1);
  const int64_t s6[2] = {4, -1}, want6[2] = {4, 6};
  set_ints(old, "shape", s6, 2);
  CHECK_EQ_INT(run(old, 1, &x, 1, out, 1), 0);
  CHECK(has_shape(out[0], 2, want6));
  release(out, 1);
  bb_tensor_release(x);
}

static void test_flatten(void) {
  const int64_t d[4] = {2, 3, 4, 5};
  bb_tensor *x = marked(BB_DTYPE_INT16, 4, d), *out[1] = {NULL};
  const int64_t axes[4] = {0, 2, -1, 4};
  const int64_t want[4][2] = {{1, 120}, {6, 20}, {24, 5}, {120, 1}};
  for (int i = 0; i < 4; i++) {
    bb_ir_node *n = make_node("Flatten", 1);
    bb_attr_set_int(M, &n->attrs, "axis", axes[i]);
    CHECK_EQ_INT(run(n, 13, &x, 1, out, 1), 0);
    CHECK_MSG(has_shape(out[0], 2, want[i]), "axis %lld", (long long)axes[i]);
    CHECK(out[0] && out[0]->buffer == x->buffer);
    release(out, 1);
  }
  bb_ir_node *n = make_node("Flatten", 1); /* default axis 1 */
  const int64_t want_default[2] = {2, 60};
  CHECK_EQ_INT(run(n, 13, &x, 1, out, 1), 0);
  CHECK(has_shape(out[0], 2, want_default));
  release(out, 1);
  bb_attr_set_int(M, &n->attrs, "axis", 5);
  CHECK(run(n, 13, &x, 1, out, 1) == BB_ERR_INVALID_ARGUMENT);
  bb_tensor_release(x);
}

static void test_squeeze_unsqueeze(void) {
  const int64_t d[5] = {1, 3, 1, 4, 1};
  bb_tensor *x = marked(BB_DTYPE_UINT8, 5, d), *out[1] = {NULL};
  /* no axes: every 1 goes */
  bb_ir_node *all = make_node("Squeeze", 1);
  const int64_t want_all[2] = {3, 4};
  CHECK_EQ_INT(run(all, 13, &x, 1, out, 1), 0);
  CHECK(has_shape(out[0], 2, want_all));
  CHECK(out[0] && out[0]->buffer == x->buffer);
  release(out, 1);
  /* opset 11: attribute, negative axis */
  bb_ir_node *attr = make_node("Squeeze", 1);
  const int64_t ax[2] = {0, -1}, want_attr[3] = {3, 1, 4};
  set_ints(attr, "axes", ax, 2);
  CHECK_EQ_INT(run(attr, 11, &x, 1, out, 1), 0);
  CHECK(has_shape(out[0], 3, want_attr));
  release(out, 1);
  /* opset 13: input */
  bb_tensor *in[2] = {x, vec64(1, (const int64_t[]){2})};
  const int64_t want_in[4] = {1, 3, 4, 1};
  CHECK_EQ_INT(run(make_node("Squeeze", 1), 13, in, 2, out, 1), 0);
  CHECK(has_shape(out[0], 4, want_in));
  release(out, 1);
  bb_tensor_release(in[1]);
  /* squeezing a dimension that is not 1 */
  in[1] = vec64(1, (const int64_t[]){1});
  CHECK(run(make_node("Squeeze", 1), 13, in, 2, out, 1) == BB_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(err.message, "axis 1") != NULL, "%s", err.message);
  bb_tensor_release(in[1]);

  /* Unsqueeze [3, 4]: axes {-1, 0} (unsorted, negative against the output rank 4) */
  const int64_t d2[2] = {3, 4};
  bb_tensor *y = marked(BB_DTYPE_DOUBLE, 2, d2);
  in[0] = y;
  in[1] = vec64(2, (const int64_t[]){-1, 0});
  const int64_t want_un[4] = {1, 3, 4, 1};
  CHECK_EQ_INT(run(make_node("Unsqueeze", 1), 13, in, 2, out, 1), 0);
  CHECK(has_shape(out[0], 4, want_un));
  CHECK(out[0] && out[0]->buffer == y->buffer);
  release(out, 1);
  bb_tensor_release(in[1]);
  /* opset 11 attribute form, axes 1 and 3 */
  bb_ir_node *un = make_node("Unsqueeze", 1);
  set_ints(un, "axes", (const int64_t[]){3, 1}, 2);
  const int64_t want_un2[4] = {3, 1, 4, 1};
  CHECK_EQ_INT(run(un, 11, &y, 1, out, 1), 0);
  CHECK(has_shape(out[0], 4, want_un2));
  release(out, 1);
  /* a repeated axis and an axis past the output rank */
  in[1] = vec64(2, (const int64_t[]){1, 1});
  CHECK(run(make_node("Unsqueeze", 1), 13, in, 2, out, 1) == BB_ERR_INVALID_ARGUMENT);
  bb_tensor_release(in[1]);
  in[1] = vec64(1, (const int64_t[]){3});
  CHECK(run(make_node("Unsqueeze", 1), 13, in, 2, out, 1) == BB_ERR_INVALID_ARGUMENT);
  bb_tensor_release(in[1]);
  bb_tensor_release(x);
  bb_tensor_release(y);
}

/* ---- Transpose --------------------------------------------------------------------------- */

/* Checks Transpose(perm) of a marked tensor against multi-index arithmetic. */
static void check_transpose(int32_t dtype, int rank, const int64_t *dims, const int64_t *perm) {
  bb_tensor *x = marked(dtype, rank, dims), *out[1] = {NULL};
  bb_ir_node *n = make_node("Transpose", 1);
  if (perm) set_ints(n, "perm", perm, (size_t)rank);
  int64_t p[8], odims[8], idx[8], src_idx[8];
  for (int k = 0; k < rank; k++) p[k] = perm ? perm[k] : rank - 1 - k;
  for (int k = 0; k < rank; k++) odims[k] = dims[p[k]];
  CHECK_EQ_INT(run(n, 13, &x, 1, out, 1), 0);
  CHECK(has_shape(out[0], rank, odims));
  int64_t total = numel_of(rank, dims);
  int64_t *src = malloc((size_t)(total ? total : 1) * sizeof *src);
  for (int64_t i = 0; i < total; i++) {
    unravel(i, rank, odims, idx);
    for (int k = 0; k < rank; k++) src_idx[p[k]] = idx[k];
    src[i] = ravel(rank, dims, src_idx);
  }
  CHECK_MSG(gathered_from(out[0], x, src), "dtype %d rank %d", dtype, rank);
  free(src);
  release(out, 1);
  bb_tensor_release(x);
}

static void test_transpose(void) {
  /* every permutation of rank 3 */
  const int64_t d3[3] = {2, 3, 4};
  const int64_t perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (int i = 0; i < 6; i++) check_transpose(BB_DTYPE_FLOAT, 3, d3, perms[i]);
  check_transpose(BB_DTYPE_FLOAT, 3, d3, NULL); /* default: reversed */
  /* every element size, on shapes past the tile size with ragged edges */
  const int32_t types[5] = {BB_DTYPE_UINT8, BB_DTYPE_FLOAT16, BB_DTYPE_INT32, BB_DTYPE_INT64, BB_DTYPE_COMPLEX128};
  const int64_t big[2] = {67, 131}, two[2] = {1, 0};
  for (int i = 0; i < 5; i++) check_transpose(types[i], 2, big, two);
  const int64_t d4[4] = {3, 70, 5, 37}, p4[4] = {2, 3, 0, 1}, p4b[4] = {0, 3, 2, 1};
  check_transpose(BB_DTYPE_FLOAT, 4, d4, p4);
  check_transpose(BB_DTYPE_BOOL, 4, d4, p4b);
  const int64_t d5[5] = {2, 1, 3, 1, 5}, p5[5] = {4, 2, 0, 3, 1};
  check_transpose(BB_DTYPE_INT8, 5, d5, p5);
  const int64_t empty[3] = {2, 0, 3};
  check_transpose(BB_DTYPE_FLOAT, 3, empty, perms[3]);

  /* a permutation that keeps every axis longer than 1 in its order moves no element: a view */
  const int64_t d_batch1[4] = {1, 6, 4, 3}, swap[4] = {1, 0, 2, 3}, d_units[5] = {2, 1, 3, 1, 5};
  const int64_t units[5] = {3, 0, 1, 2, 4};
  const struct {
    const int64_t *dims, *perm;
    int rank;
    bool view;
  } views[] = {{d_batch1, swap, 4, true}, {d_units, units, 5, true}, {d_units, p5, 5, false}, {d3, perms[0], 3, true},
               {d3, perms[2], 3, false}};
  for (size_t i = 0; i < sizeof views / sizeof views[0]; i++) {
    check_transpose(BB_DTYPE_FLOAT, views[i].rank, views[i].dims, views[i].perm);
    bb_tensor *x = marked(BB_DTYPE_FLOAT, views[i].rank, views[i].dims), *out[1] = {NULL};
    bb_ir_node *n = make_node("Transpose", 1);
    set_ints(n, "perm", views[i].perm, (size_t)views[i].rank);
    CHECK_EQ_INT(run(n, 13, &x, 1, out, 1), 0);
    CHECK_MSG(out[0] && (out[0]->buffer == x->buffer) == views[i].view, "Transpose case %zu: %s", i,
              views[i].view ? "a copy where no element moves" : "a view of moved elements");
    release(out, 1);
    bb_tensor_release(x);
  }

  /* bad perms: repeated, out of range, wrong length */
  bb_tensor *x = marked(BB_DTYPE_FLOAT, 3, d3), *out[1] = {NULL};
  const int64_t bad[3][3] = {{0, 0, 1}, {0, 1, 3}, {1, 0, 0}};
  const size_t bad_n[3] = {3, 3, 2};
  for (int i = 0; i < 3; i++) {
    bb_ir_node *n = make_node("Transpose", 1);
    set_ints(n, "perm", bad[i], bad_n[i]);
    CHECK(run(n, 13, &x, 1, out, 1) == BB_ERR_INVALID_ARGUMENT);
    CHECK(strstr(err.message, "perm") != NULL);
  }
  bb_tensor_release(x);
}

/* ---- Concat, Split ------------------------------------------------------------------------- */

static void test_concat(void) {
  /* three [2, k, 3] int32 tensors along axis 1 (and -2), sources by multi-index */
  const int64_t ks[3] = {1, 4, 2};
  bb_tensor *in[3], *out[1] = {NULL};
  for (int i = 0; i < 3; i++) in[i] = marked(BB_DTYPE_INT32, 3, (const int64_t[]){2, ks[i], 3});
  const int64_t axes[2] = {1, -2};
  for (int a = 0; a < 2; a++) {
    bb_ir_node *n = make_node("Concat", 1);
    bb_attr_set_int(M, &n->attrs, "axis", axes[a]);
    CHECK_EQ_INT(run(n, 13, in, 3, out, 1), 0);
    const int64_t want[3] = {2, 7, 3};
    CHECK(has_shape(out[0], 3, want));
    bool ok = out[0] != NULL;
    for (int64_t i = 0; ok && i < 42; i++) {
      int64_t idx[3];
      unravel(i, 3, want, idx);
      int which = 0;
      while (idx[1] >= ks[which]) idx[1] -= ks[which++];
      const int64_t src_dims[3] = {2, ks[which], 3};
      ok = memcmp((const int32_t *)bb_tensor_data(out[0]) + i,
                  (const int32_t *)bb_tensor_data(in[which]) + ravel(3, src_dims, idx), 4) == 0;
    }
    CHECK_MSG(ok, "concat along axis %lld", (long long)axes[a]);
    release(out, 1);
  }
  /* opset 1: axis defaults to 1; from opset 4 it is required */
  bb_ir_node *n = make_node("Concat", 1);
  CHECK_EQ_INT(run(n, 1, in, 3, out, 1), 0);
  release(out, 1);
  CHECK(run(n, 13, in, 3, out, 1) == BB_ERR_INVALID_ARGUMENT);
  /* shapes that differ off the axis, and element types that differ */
  bb_attr_set_int(M, &n->attrs, "axis", 0);
  CHECK(run(n, 13, in, 3, out, 1) == BB_ERR_TYPE);
  CHECK(strstr(err.message, "input 1") != NULL);
  bb_tensor *other = marked(BB_DTYPE_FLOAT, 3, (const int64_t[]){2, 1, 3});
  bb_tensor *mixed[2] = {in[0], other};
  bb_attr_set_int(M, &n->attrs, "axis", 1);
  CHECK(run(n, 13, mixed, 2, out, 1) == BB_ERR_TYPE);
  bb_tensor_release(other);
  release(in, 3);
}

static void test_split(void) {
  const int64_t d[2] = {3, 10};
  bb_tensor *x = marked(BB_DTYPE_FLOAT16, 2, d), *out[4] = {NULL};
  /* opset 13, split input {2, 0, 5, 3} along axis 1 (includes a zero-size part) */
  const int64_t sizes[4] = {2, 0, 5, 3};
  bb_ir_node *n = make_node("Split", 4);
  bb_attr_set_int(M, &n->attrs, "axis", -1);
  bb_tensor *in[2] = {x, vec64(4, sizes)};
  CHECK_EQ_INT(run(n, 13, in, 2, out, 4), 0);
  int64_t offset = 0;
  for (int i = 0; i < 4; i++) {
    const int64_t want[2] = {3, sizes[i]};
    CHECK(has_shape(out[i], 2, want));
    int64_t src[30];
    for (int64_t r = 0; r < 3; r++)
      for (int64_t c = 0; c < sizes[i]; c++) src[r * sizes[i] + c] = r * 10 + offset + c;
    CHECK_MSG(gathered_from(out[i], x, src), "part %d", i);
    offset += sizes[i];
  }
  release(out, 4);
  bb_tensor_release(in[1]);
  /* opset 11: the same sizes as an attribute */
  bb_ir_node *attr = make_node("Split", 4);
  bb_attr_set_int(M, &attr->attrs, "axis", 1);
  set_ints(attr, "split", sizes, 4);
  CHECK_EQ_INT(run(attr, 11, &x, 1, out, 4), 0);
  CHECK(out[2] && out[2]->dims[1] == 5);
  release(out, 4);
  /* equal parts: 10 into 2 */
  bb_ir_node *eq = make_node("Split", 2);
  bb_attr_set_int(M, &eq->attrs, "axis", 1);
  CHECK_EQ_INT(run(eq, 13, &x, 1, out, 2), 0);
  CHECK(out[1] && out[1]->dims[1] == 5);
  release(out, 2);
  /* 10 does not split into 4 equal parts before opset 18; num_outputs gives 3,3,3,1 */
  bb_ir_node *uneven = make_node("Split", 4);
  bb_attr_set_int(M, &uneven->attrs, "axis", 1);
  CHECK(run(uneven, 13, &x, 1, out, 4) == BB_ERR_INVALID_ARGUMENT);
  bb_attr_set_int(M, &uneven->attrs, "num_outputs", 4);
  CHECK_EQ_INT(run(uneven, 18, &x, 1, out, 4), 0);
  CHECK(out[0] && out[3] && out[0]->dims[1] == 3 && out[3]->dims[1] == 1);
  release(out, 4);
  /* sizes that do not add up */
  in[1] = vec64(4, (const int64_t[]){2, 2, 5, 3});
  CHECK(run(n, 13, in, 2, out, 4) == BB_ERR_INVALID_ARGUMENT);
  bb_tensor_release(in[1]);
  bb_tensor_release(x);
}

/* ---- Slice ------------------------------------------------------------------------------ */

/* The positions Python's x[start:end:step] takes from a dimension of size dim. */
static int64_t py_slice(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *pos) {
  if (step > 0) {
    if (start < 0) start = start + dim < 0 ? 0 : start + dim;
    if (start > dim) start = dim;
    if (end < 0) end = end + dim < 0 ? 0 : end + dim;
    if (end > dim) end = dim;
  } else {
    if (start < 0) start = start + dim < 0 ? -1 : start + dim;
    if (start >= dim) start = dim - 1;
    if (end < 0) end = end + dim < 0 ? -1 : end + dim;
    if (end >= dim) end = dim - 1;
  }
  int64_t n = 0;
  for (int64_t i = start; step > 0 ? i < end : i > end; i += step) pos[n++] = i;
  return n;
}

/* Slices a marked [6, 7, 8] tensor with the given per-axis arguments (opset 13 inputs,
 * axes given explicitly) and compares with Python's slicing. */
static void check_slice(const int64_t *starts, const int64_t *ends, const int64_t *axes, const int64_t *steps,
                        size_t n) {
  const int64_t d[3] = {6, 7, 8};
  bb_tensor *x = marked(BB_DTYPE_INT64, 3, d), *out[1] = {NULL};
  int64_t pos[3][16], cnt[3];
  for (int k = 0; k < 3; k++) {
    cnt[k] = d[k];
    for (int64_t i = 0; i < d[k]; i++) pos[k][i] = i;
  }
  for (size_t i = 0; i < n; i++) {
    int k = (int)(axes[i] < 0 ? axes[i] + 3 : axes[i]);
    cnt[k] = py_slice(d[k], starts[i], ends[i], steps[i], pos[k]);
  }
  bb_tensor *in[5] = {x, vec64(n, starts), vec64(n, ends), vec64(n, axes), vec64(n, steps)};
  CHECK_EQ_INT(run(make_node("Slice", 1), 13, in, 5, out, 1), 0);
  CHECK(has_shape(out[0], 3, cnt));
  int64_t total = cnt[0] * cnt[1] * cnt[2], src[6 * 7 * 8];
  for (int64_t i = 0; i < total; i++) {
    int64_t idx[3];
    unravel(i, 3, cnt, idx);
    const int64_t at[3] = {pos[0][idx[0]], pos[1][idx[1]], pos[2][idx[2]]};
    src[i] = ravel(3, d, at);
  }
  CHECK_MSG(gathered_from(out[0], x, src), "slice starts[0] %lld", (long long)starts[0]);
  release(out, 1);
  release(in, 5);
}

static void test_slice(void) {
  const int64_t big = INT64_MAX, small = INT64_MIN;
  check_slice((const int64_t[]){1, 0, 3}, (const int64_t[]){5, 7, -1}, (const int64_t[]){0, 1, 2},
              (const int64_t[]){1, 2, 1}, 3);
  check_slice((const int64_t[]){-1, 20, -100}, (const int64_t[]){small, -9, big}, (const int64_t[]){2, 0, 1},
              (const int64_t[]){-3, -2, 3}, 3); /* negative steps, clamping at both ends */
  check_slice((const int64_t[]){5, 2}, (const int64_t[]){1, 2}, (const int64_t[]){-1, 1},
              (const int64_t[]){-1, 1}, 2); /* an empty axis */
  check_slice((const int64_t[]){100}, (const int64_t[]){200}, (const int64_t[]){0}, (const int64_t[]){1}, 1);
  check_slice((const int64_t[]){0}, (const int64_t[]){big}, (const int64_t[]){1}, (const int64_t[]){small}, 1);
  check_slice((const int64_t[]){big, -2}, (const int64_t[]){small, -100}, (const int64_t[]){0, 2},
              (const int64_t[]){-1, -2}, 2); /* reversed down to index 0 */

  /* hand-derived: 0..19 [-1 : INT64_MIN : -3] = 19, 16, ..., 1 */
  const int64_t d20 = 20;
  bb_tensor *x = bb_tensor_new_empty(NULL, BB_DTYPE_INT64, 1, &d20), *out[1] = {NULL};
  for (int64_t i = 0; i < 20; i++) ((int64_t *)bb_tensor_data(x))[i] = i;
  bb_tensor *in[5] = {x, vec64(1, (const int64_t[]){-1}), vec64(1, &small), NULL, vec64(1, (const int64_t[]){-3})};
  CHECK_EQ_INT(run(make_node("Slice", 1), 13, in, 5, out, 1), 0);
  CHECK(out[0] && out[0]->numel == 7 && ints_are(out[0], (const int64_t[]){19, 16, 13, 10, 7, 4, 1}));
  release(out, 1);
  /* [::-1] reaches index 0 */
  bb_tensor_release(in[1]);
  bb_tensor_release(in[4]);
  in[1] = vec64(1, &big);
  in[4] = vec64(1, (const int64_t[]){-1});
  CHECK_EQ_INT(run(make_node("Slice", 1), 13, in, 5, out, 1), 0);
  int64_t reversed[20];
  for (int64_t i = 0; i < 20; i++) reversed[i] = 19 - i;
  CHECK(out[0] && out[0]->numel == 20 && ints_are(out[0], reversed));
  release(out, 1);
  /* default axes and steps: [2:5] with int32 arguments */
  bb_tensor *in3[3] = {x, ints(BB_DTYPE_INT32, 1, (const int64_t[]){1}, (const int64_t[]){2}),
                       ints(BB_DTYPE_INT32, 1, (const int64_t[]){1}, (const int64_t[]){5})};
  CHECK_EQ_INT(run(make_node("Slice", 1), 13, in3, 3, out, 1), 0);
  CHECK(out[0] && out[0]->numel == 3 && ints_are(out[0], (const int64_t[]){2, 3, 4}));
  release(out, 1);
  release(in3 + 1, 2);
  /* a zero step */
  bb_tensor_release(in[4]);
  in[4] = vec64(1, (const int64_t[]){0});
  CHECK(run(make_node("Slice", 1), 13, in, 5, out, 1) == BB_ERR_INVALID_ARGUMENT);
  release(in + 1, 4);
  /* opset 1: attributes; [-4 : 1000] */
  bb_ir_node *old = make_node("Slice", 1);
  set_ints(old, "starts", (const int64_t[]){-4}, 1);
  set_ints(old, "ends", (const int64_t[]){1000}, 1);
  CHECK_EQ_INT(run(old, 1, &x, 1, out, 1), 0);
  CHECK(out[0] && out[0]->numel == 4 && ints_are(out[0], (const int64_t[]){16, 17, 18, 19}));
  release(out, 1);
  bb_tensor_release(x);
}

/* ---- Gather, GatherElements ---------------------------------------------------------------- */

static void test_gather(void) {
  const int64_t d[3] = {4, 5, 3};
  bb_tensor *x = marked(BB_DTYPE_FLOAT, 3, d), *out[1] = {NULL};
  /* axis 1 with 2-D int32 indices, one negative: out [4, 2, 2, 3] */
  const int64_t id[2] = {2, 2}, iv[4] = {4, 0, -1, 2};
  bb_tensor *in[2] = {x, ints(BB_DTYPE_INT32, 2, id, iv)};
  bb_ir_node *n = make_node("Gather", 1);
  bb_attr_set_int(M, &n->attrs, "axis", 1);
  CHECK_EQ_INT(run(n, 13, in, 2, out, 1), 0);
  const int64_t want[4] = {4, 2, 2, 3};
  CHECK(has_shape(out[0], 4, want));
  int64_t src[48];
  for (int64_t i = 0; i < 48; i++) {
    int64_t idx[4];
    unravel(i, 4, want, idx);
    int64_t j = iv[idx[1] * 2 + idx[2]];
    const int64_t at[3] = {idx[0], j < 0 ? j + 5 : j, idx[3]};
    src[i] = ravel(3, d, at);
  }
  CHECK(gathered_from(out[0], x, src));
  release(out, 1);
  bb_tensor_release(in[1]);
  /* a scalar index on axis 0 drops the axis */
  in[1] = ints(BB_DTYPE_INT64, 0, NULL, (const int64_t[]){3});
  CHECK_EQ_INT(run(make_node("Gather", 1), 13, in, 2, out, 1), 0);
  CHECK(has_shape(out[0], 2, d + 1));
  int64_t src0[15];
  for (int64_t i = 0; i < 15; i++) src0[i] = 45 + i;
  CHECK(gathered_from(out[0], x, src0));
  release(out, 1);
  bb_tensor_release(in[1]);
  /* out of range either way, and float indices */
  const int64_t bad[2] = {4, -5};
  for (int i = 0; i < 2; i++) {
    in[1] = vec64(1, &bad[i]);
    CHECK(run(make_node("Gather", 1), 13, in, 2, out, 1) == BB_ERR_INVALID_ARGUMENT);
    CHECK(strstr(err.message, "out of range") != NULL);
    bb_tensor_release(in[1]);
  }
  in[1] = x;
  CHECK(run(make_node("Gather", 1), 13, in, 2, out, 1) == BB_ERR_TYPE);
  bb_tensor_release(x);
}

static void test_gather_elements(void) {
  /* ONNX's example: data [[1,2],[3,4]], indices [[0,0],[1,0]], axis 1 -> [[1,1],[4,3]] */
  const int64_t d[2] = {2, 2};
  bb_tensor *x = floats(2, d, (const float[]){1, 2, 3, 4}), *out[1] = {NULL};
  bb_tensor *in[2] = {x, vec64(4, (const int64_t[]){0, 0, 1, 0})};
  bb_tensor *idx = bb_tensor_view(in[1], 2, d);
  bb_tensor_release(in[1]);
  in[1] = idx;
  bb_ir_node *n = make_node("GatherElements", 1);
  bb_attr_set_int(M, &n->attrs, "axis", 1);
  CHECK_EQ_INT(run(n, 13, in, 2, out, 1), 0);
  CHECK(floats_are(out[0], (const float[]){1, 1, 4, 3}));
  release(out, 1);
  bb_tensor_release(idx);
  /* axis 0, fewer rows than data, negative index: data 3x3 1..9, indices [[1,2,0],[-1,0,0]] */
  const int64_t d3[2] = {3, 3}, di[2] = {2, 3};
  bb_tensor *y = floats(2, d3, (const float[]){1, 2, 3, 4, 5, 6, 7, 8, 9});
  bb_tensor *in2[2] = {y, ints(BB_DTYPE_INT32, 2, di, (const int64_t[]){1, 2, 0, -1, 0, 0})};
  bb_ir_node *n0 = make_node("GatherElements", 1);
  CHECK_EQ_INT(run(n0, 13, in2, 2, out, 1), 0);
  CHECK(has_shape(out[0], 2, di) && floats_are(out[0], (const float[]){4, 8, 3, 7, 2, 3}));
  release(out, 1);
  bb_tensor_release(in2[1]);
  in2[1] = ints(BB_DTYPE_INT32, 2, di, (const int64_t[]){1, 2, 3, 0, 0, 0});
  CHECK(run(n0, 13, in2, 2, out, 1) == BB_ERR_INVALID_ARGUMENT);
  bb_tensor_release(in2[1]);
  bb_tensor_release(x);
  bb_tensor_release(y);
}

/* ---- Expand, Tile, Pad ------------------------------------------------------------------- */

static void test_expand(void) {
  /* [3, 1] to [2, 1, 6]: result [2, 3, 6] (the 1 in the shape keeps the input's 3) */
  const int64_t d[2] = {3, 1};
  bb_tensor *x = marked(BB_DTYPE_INT16, 2, d), *out[1] = {NULL};
  bb_tensor *in[2] = {x, vec64(3, (const int64_t[]){2, 1, 6})};
  CHECK_EQ_INT(run(make_node("Expand", 1), 13, in, 2, out, 1), 0);
  const int64_t want[3] = {2, 3, 6};
  CHECK(has_shape(out[0], 3, want));
  int64_t src[36];
  for (int64_t i = 0; i < 36; i++) {
    int64_t idx[3];
    unravel(i, 3, want, idx);
    src[i] = idx[1];
  }
  CHECK(gathered_from(out[0], x, src));
  release(out, 1);
  bb_tensor_release(in[1]);
  in[1] = vec64(2, (const int64_t[]){2, 4});
  CHECK(run(make_node("Expand", 1), 13, in, 2, out, 1) == BB_ERR_TYPE);
  bb_tensor_release(in[1]);
  bb_tensor_release(x);
}

static void test_tile(void) {
  const int64_t d[3] = {2, 3, 2};
  bb_tensor *x = marked(BB_DTYPE_DOUBLE, 3, d), *out[1] = {NULL};
  const int64_t reps[3] = {2, 1, 3}, want[3] = {4, 3, 6};
  bb_tensor *in[2] = {x, vec64(3, reps)};
  CHECK_EQ_INT(run(make_node("Tile", 1), 13, in, 2, out, 1), 0);
  CHECK(has_shape(out[0], 3, want));
  int64_t src[72];
  for (int64_t i = 0; i < 72; i++) {
    int64_t idx[3];
    unravel(i, 3, want, idx);
    for (int k = 0; k < 3; k++) idx[k] %= d[k];
    src[i] = ravel(3, d, idx);
  }
  CHECK(gathered_from(out[0], x, src));
  release(out, 1);
  bb_tensor_release(in[1]);
  /* opset 1: tiles 2 along axis 1 */
  bb_tensor *old_in[3] = {x, vec64(1, (const int64_t[]){2}), vec64(1, (const int64_t[]){1})};
  CHECK_EQ_INT(run(make_node("Tile", 1), 1, old_in, 3, out, 1), 0);
  const int64_t want_old[3] = {2, 6, 2};
  CHECK(has_shape(out[0], 3, want_old));
  release(out, 1);
  release(old_in + 1, 2);
  /* a negative repeat, and the wrong count */
  in[1] = vec64(3, (const int64_t[]){1, -1, 1});
  CHECK(run(make_node("Tile", 1), 13, in, 2, out, 1) == BB_ERR_INVALID_ARGUMENT);
  bb_tensor_release(in[1]);
  in[1] = vec64(2, (const int64_t[]){1, 1});
  CHECK(run(make_node("Tile", 1), 13, in, 2, out, 1) == BB_ERR_INVALID_ARGUMENT);
  bb_tensor_release(in[1]);
  bb_tensor_release(x);
}

static void test_pad(void) {
  const int64_t d[2] = {2, 3};
  bb_tensor *x = floats(2, d, (const float[]){1, 2, 3, 4, 5, 6}), *out[1] = {NULL};
  /* constant 9, pads begin {1, 0}, end {0, 2}: out [3, 5] */
  bb_tensor *value = floats(0, NULL, (const float[]){9});
  bb_tensor *in[3] = {x, vec64(4, (const int64_t[]){1, 0, 0, 2}), value};
  CHECK_EQ_INT(run(make_node("Pad", 1), 13, in, 3, out, 1), 0);
  const int64_t want[2] = {3, 5};
  CHECK(has_shape(out[0], 2, want));
  CHECK(floats_are(out[0], (const float[]){9, 9, 9, 9, 9, 1, 2, 3, 9, 9, 4, 5, 6, 9, 9}));
  release(out, 1);
  bb_tensor_release(in[1]);
  /* negative pads crop: begin {0, -1}, end {-1, 1}, default value 0 -> [[2, 3, 0]] */
  in[1] = vec64(4, (const int64_t[]){0, -1, -1, 1});
  CHECK_EQ_INT(run(make_node("Pad", 1), 13, in, 2, out, 1), 0);
  CHECK(out[0] && out[0]->numel == 3 && floats_are(out[0], (const float[]){2, 3, 0}));
  release(out, 1);
  bb_tensor_release(in[1]);
  /* reflect and edge, begin {1, 2}, end {1, 1}: out [4, 6] */
  const char *modes[2] = {"reflect", "edge"};
  const float want_modes[2][24] = {
      {6, 5, 4, 5, 6, 5, 3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5, 3, 2, 1, 2, 3, 2},
      {1, 1, 1, 2, 3, 3, 1, 1, 1, 2, 3, 3, 4, 4, 4, 5, 6, 6, 4, 4, 4, 5, 6, 6}};
  for (int m = 0; m < 2; m++) {
    bb_ir_node *n = make_node("Pad", 1);
    bb_attr_set_string(M, &n->attrs, "mode", modes[m]);
    in[1] = vec64(4, (const int64_t[]){1, 2, 1, 1});
    CHECK_EQ_INT(run(n, 13, in, 2, out, 1), 0);
    CHECK_MSG(out[0] && out[0]->numel == 24 && floats_are(out[0], want_modes[m]), "mode %s", modes[m]);
    release(out, 1);
    bb_tensor_release(in[1]);
    /* reflecting 3 past an axis of 3 */
    in[1] = vec64(4, (const int64_t[]){0, 3, 0, 0});
    if (m == 0) CHECK(run(n, 13, in, 2, out, 1) == BB_ERR_INVALID_ARGUMENT);
    bb_tensor_release(in[1]);
  }
  /* opset 2: pads and value attributes, on int32 */
  bb_tensor *xi = ints(BB_DTYPE_INT32, 1, (const int64_t[]){2}, (const int64_t[]){7, 8});
  bb_ir_node *old = make_node("Pad", 1);
  set_ints(old, "pads", (const int64_t[]){2, 1}, 2);
  bb_attr_set_float(M, &old->attrs, "value", -3.0f);
  CHECK_EQ_INT(run(old, 2, &xi, 1, out, 1), 0);
  CHECK(out[0] && out[0]->numel == 5 && ints_are(out[0], (const int64_t[]){-3, -3, 7, 8, -3}));
  release(out, 1);
  bb_ir_node *wrap = make_node("Pad", 1);
  bb_attr_set_string(M, &wrap->attrs, "mode", "wrap");
  set_ints(wrap, "pads", (const int64_t[]){1, 1}, 2);
  CHECK(run(wrap, 2, &xi, 1, out, 1) == BB_ERR_UNSUPPORTED);
  bb_tensor_release(xi);
  bb_tensor_release(value);
  bb_tensor_release(x);
}

/* ---- Shape, Size, ConstantOfShape, Constant, Range ------------------------------------------- */

static void test_shape_size(void) {
  const int64_t d[4] = {2, 3, 5, 7};
  bb_tensor *x = marked(BB_DTYPE_BOOL, 4, d), *out[1] = {NULL};
  CHECK_EQ_INT(run(make_node("Shape", 1), 13, &x, 1, out, 1), 0);
  CHECK(out[0] && out[0]->numel == 4 && ints_are(out[0], d));
  release(out, 1);
  /* start/end from opset 15: [-3 : -1] -> {3, 5}; clamped [1 : 10] -> {3, 5, 7} */
  bb_ir_node *n = make_node("Shape", 1);
  bb_attr_set_int(M, &n->attrs, "start", -3);
  bb_attr_set_int(M, &n->attrs, "end", -1);
  CHECK_EQ_INT(run(n, 15, &x, 1, out, 1), 0);
  CHECK(out[0] && out[0]->numel == 2 && ints_are(out[0], (const int64_t[]){3, 5}));
  release(out, 1);
  CHECK_EQ_INT(run(n, 14, &x, 1, out, 1), 0); /* before 15 the attributes do not exist */
  CHECK(out[0] && out[0]->numel == 4);
  release(out, 1);
  bb_attr_set_int(M, &n->attrs, "start", 1);
  bb_attr_set_int(M, &n->attrs, "end", 10);
  CHECK_EQ_INT(run(n, 15, &x, 1, out, 1), 0);
  CHECK(out[0] && out[0]->numel == 3 && ints_are(out[0], (const int64_t[]){3, 5, 7}));
  release(out, 1);
  CHECK_EQ_INT(run(make_node("Size", 1), 13, &x, 1, out, 1), 0);
  CHECK(out[0] && out[0]->rank == 0 && ints_are(out[0], (const int64_t[]){210}));
  release(out, 1);
  bb_tensor_release(x);
}

static void test_constants(void) {
  bb_tensor *out[1] = {NULL};
  /* ConstantOfShape: int32 7 into [2, 3]; default float 0 into [4] */
  bb_tensor *shape = vec64(2, (const int64_t[]){2, 3});
  bb_ir_node *n = make_node("ConstantOfShape", 1);
  const int32_t seven = 7;
  bb_tensor_proto *tp = bb_tensor_proto_new(M, "v", BB_DTYPE_INT32, 1, (const int64_t[]){1});
  bb_tensor_proto_set_raw(M, tp, &seven, sizeof seven);
  bb_attr_set_tensor(M, &n->attrs, "value", tp);
  CHECK_EQ_INT(run(n, 9, &shape, 1, out, 1), 0);
  CHECK(out[0] && out[0]->dtype == BB_DTYPE_INT32 && ints_are(out[0], (const int64_t[]){7, 7, 7, 7, 7, 7}));
  release(out, 1);
  bb_tensor_release(shape);
  shape = vec64(1, (const int64_t[]){4});
  CHECK_EQ_INT(run(make_node("ConstantOfShape", 1), 9, &shape, 1, out, 1), 0);
  CHECK(out[0] && out[0]->numel == 4 && floats_are(out[0], (const float[]){0, 0, 0, 0}));
  release(out, 1);
  bb_tensor_release(shape);
  shape = vec64(1, (const int64_t[]){-1});
  CHECK(run(make_node("ConstantOfShape", 1), 9, &shape, 1, out, 1) == BB_ERR_INVALID_ARGUMENT);
  bb_tensor_release(shape);

  /* Constant: a tensor value, value_floats, value_int; none and two are errors */
  bb_ir_node *c = make_node("Constant", 1);
  const double vals[3] = {0.5, -2, 1e300};
  bb_tensor_proto *tv = bb_tensor_proto_new(M, "c", BB_DTYPE_DOUBLE, 1, (const int64_t[]){3});
  bb_tensor_proto_set_raw(M, tv, vals, sizeof vals);
  bb_attr_set_tensor(M, &c->attrs, "value", tv);
  CHECK_EQ_INT(run(c, 13, NULL, 0, out, 1), 0);
  CHECK(out[0] && out[0]->dtype == BB_DTYPE_DOUBLE && out[0]->numel == 3 &&
        memcmp(bb_tensor_data(out[0]), vals, sizeof vals) == 0);
  release(out, 1);
  bb_ir_node *cf = make_node("Constant", 1);
  bb_attr_set_floats(M, &cf->attrs, "value_floats", (const float[]){1.5f, 2.5f}, 2);
  CHECK_EQ_INT(run(cf, 13, NULL, 0, out, 1), 0);
  CHECK(out[0] && out[0]->rank == 1 && out[0]->numel == 2 && floats_are(out[0], (const float[]){1.5f, 2.5f}));
  release(out, 1);
  bb_ir_node *ci = make_node("Constant", 1);
  bb_attr_set_int(M, &ci->attrs, "value_int", -42);
  CHECK_EQ_INT(run(ci, 13, NULL, 0, out, 1), 0);
  CHECK(out[0] && out[0]->rank == 0 && ints_are(out[0], (const int64_t[]){-42}));
  release(out, 1);
  CHECK(run(make_node("Constant", 1), 13, NULL, 0, out, 1) == BB_ERR_INVALID_ARGUMENT);
  bb_attr_set_int(M, &cf->attrs, "value_int", 1);
  CHECK(run(cf, 13, NULL, 0, out, 1) == BB_ERR_INVALID_ARGUMENT);
}

static void test_range(void) {
  bb_tensor *out[1] = {NULL};
  /* float: 1, 1.5, ..., up to but not including 3.1 -> 5 values */
  bb_tensor *f[3] = {floats(0, NULL, (const float[]){1}), floats(0, NULL, (const float[]){3.1f}),
                     floats(0, NULL, (const float[]){0.5f})};
  CHECK_EQ_INT(run(make_node("Range", 1), 11, f, 3, out, 1), 0);
  CHECK(out[0] && out[0]->numel == 5 && floats_are(out[0], (const float[]){1, 1.5f, 2, 2.5f, 3}));
  release(out, 1);
  release(f, 3);
  /* int32: 10 down to (not including) 4 by -3 -> 10, 7 */
  bb_tensor *i[3] = {ints(BB_DTYPE_INT32, 0, NULL, (const int64_t[]){10}),
                     ints(BB_DTYPE_INT32, 0, NULL, (const int64_t[]){4}),
                     ints(BB_DTYPE_INT32, 0, NULL, (const int64_t[]){-3})};
  CHECK_EQ_INT(run(make_node("Range", 1), 11, i, 3, out, 1), 0);
  CHECK(out[0] && out[0]->dtype == BB_DTYPE_INT32 && out[0]->numel == 2 && ints_are(out[0], (const int64_t[]){10, 7}));
  release(out, 1);
  /* the wrong direction gives nothing; delta 0 is an error */
  ((int32_t *)bb_tensor_data(i[2]))[0] = 3;
  CHECK_EQ_INT(run(make_node("Range", 1), 11, i, 3, out, 1), 0);
  CHECK(out[0] && out[0]->numel == 0);
  release(out, 1);
  ((int32_t *)bb_tensor_data(i[2]))[0] = 0;
  CHECK(run(make_node("Range", 1), 11, i, 3, out, 1) == BB_ERR_INVALID_ARGUMENT);
  release(i, 3);
}

/* ---- GatherND, ScatterElements, ScatterND ------------------------------------------------------ */

static void test_gather_nd(void) {
  /* data [2, 3, 4]; tuples of 2 -> slices of 4: indices [[1, -1], [0, 2], [1, 0]] */
  const int64_t d[3] = {2, 3, 4};
  bb_tensor *x = marked(BB_DTYPE_UINT16, 3, d), *out[1] = {NULL};
  const int64_t tuples[6] = {1, -1, 0, 2, 1, 0};
  bb_tensor *idx = vec64(6, tuples), *in[2] = {x, bb_tensor_view(idx, 2, (const int64_t[]){3, 2})};
  CHECK_EQ_INT(run(make_node("GatherND", 1), 13, in, 2, out, 1), 0);
  const int64_t want[2] = {3, 4};
  CHECK(has_shape(out[0], 2, want));
  int64_t src[12];
  for (int64_t t = 0; t < 3; t++)
    for (int64_t e = 0; e < 4; e++) {
      int64_t j = tuples[2 * t + 1] < 0 ? tuples[2 * t + 1] + 3 : tuples[2 * t + 1];
      src[t * 4 + e] = (tuples[2 * t] * 3 + j) * 4 + e;
    }
  CHECK(gathered_from(out[0], x, src));
  release(out, 1);
  bb_tensor_release(in[1]);
  /* batch_dims 1: indices [2, 1] pick row idx[b] of batch b -> [2, 4] */
  in[1] = ints(BB_DTYPE_INT64, 2, (const int64_t[]){2, 1}, (const int64_t[]){1, -1});
  bb_ir_node *batched = make_node("GatherND", 1);
  bb_attr_set_int(M, &batched->attrs, "batch_dims", 1);
  CHECK_EQ_INT(run(batched, 13, in, 2, out, 1), 0);
  const int64_t want_b[2] = {2, 4}, src_b[8] = {4, 5, 6, 7, 20, 21, 22, 23};
  CHECK(has_shape(out[0], 2, want_b) && gathered_from(out[0], x, src_b));
  release(out, 1);
  bb_tensor_release(in[1]);
  /* tuples longer than the rank, and an index out of range */
  in[1] = bb_tensor_view(idx, 2, (const int64_t[]){1, 6});
  CHECK(run(make_node("GatherND", 1), 13, in, 2, out, 1) == BB_ERR_INVALID_ARGUMENT);
  bb_tensor_release(in[1]);
  in[1] = vec64(2, (const int64_t[]){2, 0});
  CHECK(run(make_node("GatherND", 1), 13, in, 2, out, 1) == BB_ERR_INVALID_ARGUMENT);
  bb_tensor_release(in[1]);
  bb_tensor_release(idx);
  bb_tensor_release(x);
}

static void test_scatter(void) {
  /* ScatterElements along axis 1 on [2, 4] of 0..7, indices [[3, -1], [0, 0]], updates 10..13:
   * none: the later of two writes to one place wins; add: both are added */
  const int64_t d[2] = {2, 4}, di[2] = {2, 2};
  bb_tensor *x = floats(2, d, (const float[]){0, 1, 2, 3, 4, 5, 6, 7}), *out[1] = {NULL};
  bb_tensor *in[3] = {x, ints(BB_DTYPE_INT64, 2, di, (const int64_t[]){3, -1, 0, 0}),
                      floats(2, di, (const float[]){10, 11, 12, 13})};
  bb_ir_node *n = make_node("ScatterElements", 1);
  bb_attr_set_int(M, &n->attrs, "axis", 1);
  CHECK_EQ_INT(run(n, 16, in, 3, out, 1), 0);
  CHECK(floats_are(out[0], (const float[]){0, 1, 2, 11, 13, 5, 6, 7}));
  release(out, 1);
  bb_attr_set_string(M, &n->attrs, "reduction", "add");
  CHECK_EQ_INT(run(n, 16, in, 3, out, 1), 0);
  CHECK(floats_are(out[0], (const float[]){0, 1, 2, 24, 29, 5, 6, 7}));
  release(out, 1);
  CHECK_EQ_INT(run(n, 13, in, 3, out, 1), 0); /* no reduction before opset 16 */
  CHECK(floats_are(out[0], (const float[]){0, 1, 2, 11, 13, 5, 6, 7}));
  release(out, 1);
  bb_attr_set_string(M, &n->attrs, "reduction", "max");
  CHECK(run(n, 16, in, 3, out, 1) == BB_ERR_UNSUPPORTED); /* max arrives in opset 18 */
  CHECK_EQ_INT(run(n, 18, in, 3, out, 1), 0);
  CHECK(floats_are(out[0], (const float[]){0, 1, 2, 11, 13, 5, 6, 7}));
  release(out, 1);
  release(in + 1, 2);
  /* ScatterND with mul: rows 1 and 0 of [2, 4], twice row 1 */
  const int64_t dt[2] = {3, 1}, du[2] = {3, 4};
  bb_tensor *nd[3] = {x, ints(BB_DTYPE_INT64, 2, dt, (const int64_t[]){1, 0, -1}),
                      floats(2, du, (const float[]){2, 2, 2, 2, 3, 3, 3, 3, -1, 0, 1, 2})};
  bb_ir_node *m = make_node("ScatterND", 1);
  bb_attr_set_string(M, &m->attrs, "reduction", "mul");
  CHECK_EQ_INT(run(m, 16, nd, 3, out, 1), 0);
  CHECK(floats_are(out[0], (const float[]){0, 3, 6, 9, -8, 0, 12, 28}));
  release(out, 1);
  /* updates of the wrong shape */
  bb_tensor_release(nd[2]);
  nd[2] = floats(2, d, (const float[]){0, 0, 0, 0, 0, 0, 0, 0});
  CHECK(run(m, 16, nd, 3, out, 1) == BB_ERR_TYPE);
  release(nd + 1, 2);
  bb_tensor_release(x);
}

/* ---- DepthToSpace, SpaceToDepth, Trilu, OneHot ------------------------------------------------- */

static void test_depth_space(void) {
  /* [2, 8, 3, 2] with blocks of 2: output (n, c, y, x) comes from channel
   * DCR: (y%2*2 + x%2)*2 + c, CRD: c*4 + y%2*2 + x%2, at (y/2, x/2) */
  const int64_t d[4] = {2, 8, 3, 2}, want[4] = {2, 2, 6, 4};
  bb_tensor *x = marked(BB_DTYPE_FLOAT, 4, d), *out[1] = {NULL};
  for (int crd = 0; crd < 2; crd++) {
    bb_ir_node *n = make_node("DepthToSpace", 1);
    bb_attr_set_int(M, &n->attrs, "blocksize", 2);
    bb_attr_set_string(M, &n->attrs, "mode", crd ? "CRD" : "DCR");
    CHECK_EQ_INT(run(n, 13, &x, 1, out, 1), 0);
    CHECK(has_shape(out[0], 4, want));
    int64_t src[96];
    for (int64_t i = 0; i < 96; i++) {
      int64_t o[4];
      unravel(i, 4, want, o);
      int64_t blk = o[2] % 2 * 2 + o[3] % 2, ch = crd ? o[1] * 4 + blk : blk * 2 + o[1];
      const int64_t at[4] = {o[0], ch, o[2] / 2, o[3] / 2};
      src[i] = ravel(4, d, at);
    }
    CHECK_MSG(gathered_from(out[0], x, src), "mode %s", crd ? "CRD" : "DCR");
    /* SpaceToDepth undoes DCR */
    if (!crd) {
      bb_tensor *back[1] = {NULL};
      bb_ir_node *s = make_node("SpaceToDepth", 1);
      bb_attr_set_int(M, &s->attrs, "blocksize", 2);
      CHECK_EQ_INT(run(s, 13, out, 1, back, 1), 0);
      CHECK(has_shape(back[0], 4, d) && memcmp(bb_tensor_data(back[0]), bb_tensor_data(x), bb_tensor_nbytes(x)) == 0);
      release(back, 1);
    }
    release(out, 1);
  }
  bb_ir_node *bad = make_node("DepthToSpace", 1);
  bb_attr_set_int(M, &bad->attrs, "blocksize", 3); /* 8 channels are not blocks of 9 */
  CHECK(run(bad, 13, &x, 1, out, 1) == BB_ERR_INVALID_ARGUMENT);
  bb_tensor_release(x);
}

static void test_trilu(void) {
  const int64_t d[3] = {2, 3, 5};
  bb_tensor *x = marked(BB_DTYPE_INT32, 3, d), *out[1] = {NULL};
  const int64_t ks[5] = {0, 2, -1, 7, -9};
  for (int upper = 0; upper < 2; upper++)
    for (int t = 0; t < 5; t++) {
      bb_ir_node *n = make_node("Trilu", 1);
      bb_attr_set_int(M, &n->attrs, "upper", upper);
      bb_tensor *in[2] = {x, ints(BB_DTYPE_INT64, 0, NULL, &ks[t])};
      bool ok = run(n, 14, in, 2, out, 1) == 0 && has_shape(out[0], 3, d);
      for (int64_t i = 0; ok && i < 30; i++) {
        int64_t row = i / 5 % 3, col = i % 5;
        bool keep = upper ? col - row >= ks[t] : col - row <= ks[t];
        int32_t want = keep ? ((const int32_t *)bb_tensor_data(x))[i] : 0;
        ok = ((const int32_t *)bb_tensor_data(out[0]))[i] == want;
      }
      CHECK_MSG(ok, "upper %d k %lld", upper, (long long)ks[t]);
      release(out, 1);
      bb_tensor_release(in[1]);
    }
  bb_tensor_release(x);
}

static void test_one_hot(void) {
  /* indices [1, -1, 5, 0] (5 is out of range: all off), depth 3, values (off 0, on 7), axis 0 */
  bb_tensor *in[3] = {ints(BB_DTYPE_INT64, 1, (const int64_t[]){4}, (const int64_t[]){1, -1, 5, 0}),
                      floats(0, NULL, (const float[]){3}), ints(BB_DTYPE_INT32, 1, (const int64_t[]){2},
                                                               (const int64_t[]){0, 7})};
  bb_tensor *out[1] = {NULL};
  bb_ir_node *n = make_node("OneHot", 1);
  bb_attr_set_int(M, &n->attrs, "axis", 0);
  CHECK_EQ_INT(run(n, 11, in, 3, out, 1), 0);
  const int64_t want[2] = {3, 4};
  CHECK(has_shape(out[0], 2, want) && ints_are(out[0], (const int64_t[]){0, 0, 0, 7, 7, 0, 0, 0, 0, 7, 0, 0}));
  release(out, 1);
  /* default axis -1: [4, 3] */
  CHECK_EQ_INT(run(make_node("OneHot", 1), 11, in, 3, out, 1), 0);
  CHECK(ints_are(out[0], (const int64_t[]){0, 7, 0, 0, 0, 7, 0, 0, 0, 7, 0, 0}));
  release(out, 1);
  release(in, 3);
}

int main(void) {
  M = bb_model_new(NULL);
  RUN(test_reshape);
  RUN(test_flatten);
  RUN(test_squeeze_unsqueeze);
  RUN(test_transpose);
  RUN(test_concat);
  RUN(test_split);
  RUN(test_slice);
  RUN(test_gather);
  RUN(test_gather_elements);
  RUN(test_expand);
  RUN(test_tile);
  RUN(test_pad);
  RUN(test_shape_size);
  RUN(test_constants);
  RUN(test_range);
  RUN(test_gather_nd);
  RUN(test_scatter);
  RUN(test_depth_space);
  RUN(test_trilu);
  RUN(test_one_hot);
  bb_model_free(M);
  return bb_test_finish();
}
