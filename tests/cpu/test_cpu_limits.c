/* The cap on what one op may allocate for one value: a tiny node asking for a huge
 * output (ConstantOfShape of [16384, 16384] floats is 1 GiB) is refused with an error
 * naming the node, the output, its shape and its size before anything is allocated; a
 * working buffer (Conv's column matrix) is held to the same cap; a caller can raise or
 * lower the cap (bb_cpu_limits), for one node or for every node of a session; the limits
 * struct is versioned by struct_size. */
#include <stddef.h>
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

/* An allocator that remembers the largest single request. */
static size_t largest;
static void *watch_malloc(size_t size, void *user) {
  (void)user;
  if (size > largest) largest = size;
  return malloc(size);
}
static void *watch_realloc(void *p, size_t size, void *user) {
  (void)user;
  if (size > largest) largest = size;
  return realloc(p, size);
}
static void watch_free(void *p, void *user) {
  (void)user;
  free(p);
}
static const bb_allocator WATCH = {watch_malloc, watch_realloc, watch_free, NULL};

static bb_tensor *shape_of(size_t n, const int64_t *dims) {
  int64_t d = (int64_t)n;
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_INT64, 1, &d);
  memcpy(bb_tensor_data(t), dims, n * sizeof *dims);
  return t;
}

static int constant_of_shape(const int64_t *dims, size_t rank, const bb_cpu_limits *limits, bb_tensor **out) {
  bb_ir_node *n = bb_ir_node_new(M, "ConstantOfShape", "", "big");
  bb_strlist_append(M, &n->outputs, "y");
  bb_tensor *shape = shape_of(rank, dims);
  bb_error_clear(&err);
  largest = 0;
  int rc = bb_cpu_run_node_limited(n, 17, &shape, 1, out, 1, &WATCH, limits, &err);
  bb_tensor_release(shape);
  return rc;
}

static void test_constant_of_shape_over_the_default_cap(void) {
  bb_tensor *out = NULL;
  CHECK_EQ_INT(constant_of_shape((const int64_t[]){16384, 16384}, 2, NULL, &out), BB_ERR_LIMIT);
  CHECK(out == NULL);
  CHECK_MSG(strstr(err.message, "node big (ConstantOfShape): output 0 (float [16384, 16384]) would take "
                                "1073741824 bytes, over the 268435456-byte cap on one value") != NULL,
            "%s", err.message);
  CHECK_MSG(largest < 4096, "the refused node still asked for %zu bytes", largest);
  /* the plain entry point has the same default */
  bb_ir_node *n = bb_ir_node_new(M, "ConstantOfShape", "", "big");
  bb_strlist_append(M, &n->outputs, "y");
  bb_tensor *shape = shape_of(2, (const int64_t[]){16384, 16384});
  CHECK_EQ_INT(bb_cpu_run_node(n, 17, &shape, 1, &out, 1, NULL, &err), BB_ERR_LIMIT);
  bb_tensor_release(shape);
}

static void test_sizes_past_64_bits(void) {
  bb_tensor *out = NULL;
  int64_t huge = (int64_t)1 << 40;
  CHECK_EQ_INT(constant_of_shape((const int64_t[]){huge, huge}, 2, NULL, &out), BB_ERR_LIMIT);
  CHECK_MSG(strstr(err.message, "output 0 (float [1099511627776, 1099511627776]) would take more bytes than 64 "
                                "bits can count") != NULL, "%s", err.message);
  /* 2^62 floats can be counted, their bytes cannot */
  CHECK_EQ_INT(constant_of_shape((const int64_t[]){(int64_t)1 << 62}, 1, NULL, &out), BB_ERR_LIMIT);
  CHECK_MSG(strstr(err.message, "would take more bytes than 64 bits can count") != NULL, "%s", err.message);
  CHECK(largest < 4096);
}

static void test_caller_sets_the_cap(void) {
  bb_tensor *out = NULL;
  bb_cpu_limits small = {.struct_size = sizeof small, .max_output_bytes = 4096};
  CHECK_EQ_INT(constant_of_shape((const int64_t[]){32, 32}, 2, &small, &out), 0); /* exactly 4096 bytes */
  CHECK(out && out->numel == 1024);
  bb_tensor_release(out);
  out = NULL;
  CHECK_EQ_INT(constant_of_shape((const int64_t[]){33, 32}, 2, &small, &out), BB_ERR_LIMIT);
  CHECK_MSG(strstr(err.message, "4224 bytes, over the 4096-byte cap") != NULL, "%s", err.message);
  bb_cpu_limits roomy = {.struct_size = sizeof roomy, .max_output_bytes = (size_t)8 << 20};
  CHECK_EQ_INT(constant_of_shape((const int64_t[]){1024, 1024}, 2, &roomy, &out), 0); /* 4 MiB */
  CHECK(out && out->numel == 1 << 20);
  bb_tensor_release(out);
}

/* Conv's column matrix (kernel elements x output positions) can be far larger than its
 * output: a 9x9 kernel over a 64x64 image makes 81 x 4096 floats for a 16 KiB output. */
static void test_conv_column_matrix(void) {
  bb_ir_node *n = bb_ir_node_new(M, "Conv", "", "wide");
  bb_strlist_append(M, &n->outputs, "y");
  bb_attr_set_ints(M, &n->attrs, "pads", (const int64_t[]){4, 4, 4, 4}, 4);
  int64_t xd[4] = {1, 1, 64, 64}, wd[4] = {1, 1, 9, 9};
  bb_tensor *in[2] = {bb_tensor_new_zeros(NULL, BB_DTYPE_FLOAT, 4, xd),
                      bb_tensor_new_zeros(NULL, BB_DTYPE_FLOAT, 4, wd)};
  bb_tensor *out = NULL;
  bb_cpu_limits cap = {.struct_size = sizeof cap, .max_output_bytes = 64 << 10};
  CHECK_EQ_INT(bb_cpu_run_node_limited(n, 17, in, 2, &out, 1, NULL, &cap, &err), BB_ERR_LIMIT);
  CHECK_MSG(strstr(err.message, "node wide (Conv): the column matrix would take 1327104 bytes") != NULL, "%s",
            err.message);
  CHECK(out == NULL);
  cap.max_output_bytes = 2 << 20;
  CHECK_EQ_INT(bb_cpu_run_node_limited(n, 17, in, 2, &out, 1, NULL, &cap, &err), 0);
  CHECK(out && out->numel == 64 * 64);
  bb_tensor_release(out);
  bb_tensor_release(in[0]);
  bb_tensor_release(in[1]);
}

/* A caller who never set struct_size (the positional {4096} of the unversioned struct)
 * is told so instead of having a size read as a limit; an older caller's struct, which
 * ends before max_output_bytes, gets the default cap; a newer caller's larger struct,
 * whose fields this library cannot honour, is refused. */
static void test_limits_are_versioned(void) {
  bb_tensor *out = NULL;
  bb_cpu_limits unset = {.max_output_bytes = 4096};
  CHECK_EQ_INT(constant_of_shape((const int64_t[]){32, 32}, 2, &unset, &out), BB_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(err.message, "node big: cpu limits have struct_size 0; set it to sizeof(bb_cpu_limits)") != NULL,
            "%s", err.message);
  CHECK(out == NULL);
  bb_cpu_limits older = {.struct_size = offsetof(bb_cpu_limits, max_output_bytes), .max_output_bytes = 1};
  CHECK_EQ_INT(constant_of_shape((const int64_t[]){1024, 1024}, 2, &older, &out), 0); /* 4 MiB: under the default */
  bb_tensor_release(out);
  out = NULL;
  CHECK_EQ_INT(constant_of_shape((const int64_t[]){16384, 16384}, 2, &older, &out), BB_ERR_LIMIT);
  CHECK_MSG(strstr(err.message, "over the 268435456-byte cap") != NULL, "%s", err.message);
  bb_cpu_limits newer = {.struct_size = sizeof newer + 8, .max_output_bytes = 4096};
  CHECK_EQ_INT(constant_of_shape((const int64_t[]){32, 32}, 2, &newer, &out), BB_ERR_INVALID_ARGUMENT);
  CHECK(out == NULL);
}

/* y = ConstantOfShape(shape), shape an int64 [rank] graph input. */
static bb_model *constant_of_shape_model(size_t rank) {
  bb_model *m = bb_model_new(NULL);
  bb_opset_set(m, &m->opsets, "", 17);
  m->graph = bb_graph_new(m, "g");
  int64_t r = (int64_t)rank;
  bb_vilist_add(m, &m->graph->inputs, "shape", bb_type_new_tensor(m, BB_DTYPE_INT64, 1, &r));
  bb_vilist_add(m, &m->graph->outputs, "y", bb_type_new_tensor(m, BB_DTYPE_FLOAT, -1, NULL));
  bb_ir_node *n = bb_ir_node_new(m, "ConstantOfShape", "", "fill");
  bb_strlist_append(m, &n->inputs, "shape");
  bb_strlist_append(m, &n->outputs, "y");
  bb_nodelist_append(m, &m->graph->nodes, n);
  return m;
}

static int run_session(bb_cpu_session *s, const int64_t *dims, size_t rank, bb_tensor **y) {
  const char *names[1] = {"shape"};
  bb_tensor *shape = shape_of(rank, dims);
  bb_error_clear(&err);
  int rc = bb_cpu_session_run(s, names, &shape, 1, y, &err);
  bb_tensor_release(shape);
  return rc;
}

/* A session holds every node of its runs to the limits set on it: the default cap at
 * first, the caller's after bb_cpu_session_set_limits, the default again after NULL. */
static void test_session_limits(void) {
  bb_model *m = constant_of_shape_model(2);
  bb_cpu_session *s = NULL;
  CHECK_EQ_INT(bb_cpu_session_new(m, NULL, &s, &err), 0);
  if (!s) {
    bb_model_free(m);
    return;
  }
  bb_tensor *y = NULL;
  CHECK_EQ_INT(run_session(s, (const int64_t[]){64, 64}, 2, &y), 0);
  CHECK(y && y->numel == 64 * 64);
  bb_tensor_release(y);
  y = NULL;
  CHECK_EQ_INT(run_session(s, (const int64_t[]){16384, 16384}, 2, &y), BB_ERR_LIMIT);
  bb_cpu_limits small = {.struct_size = sizeof small, .max_output_bytes = 4096};
  CHECK_EQ_INT(bb_cpu_session_set_limits(s, &small, &err), 0);
  CHECK_EQ_INT(run_session(s, (const int64_t[]){32, 32}, 2, &y), 0);
  bb_tensor_release(y);
  y = NULL;
  CHECK_EQ_INT(run_session(s, (const int64_t[]){64, 64}, 2, &y), BB_ERR_LIMIT);
  CHECK_MSG(strstr(err.message, "node fill (ConstantOfShape): output 0 (float [64, 64]) would take 16384 bytes, over "
                                "the 4096-byte cap") != NULL,
            "%s", err.message);
  CHECK(y == NULL);
  /* an unreadable struct leaves the session's limits as they were */
  bb_cpu_limits unset = {.max_output_bytes = (size_t)1 << 30};
  CHECK_EQ_INT(bb_cpu_session_set_limits(s, &unset, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(run_session(s, (const int64_t[]){64, 64}, 2, &y), BB_ERR_LIMIT);
  CHECK_EQ_INT(bb_cpu_session_set_limits(s, NULL, &err), 0);
  CHECK_EQ_INT(run_session(s, (const int64_t[]){64, 64}, 2, &y), 0);
  bb_tensor_release(y);
  bb_cpu_session_free(s);
  bb_model_free(m);
}

int main(void) {
  M = bb_model_new(NULL);
  RUN(test_constant_of_shape_over_the_default_cap);
  RUN(test_sizes_past_64_bits);
  RUN(test_caller_sets_the_cap);
  RUN(test_conv_column_matrix);
  RUN(test_limits_are_versioned);
  RUN(test_session_limits);
  bb_model_free(M);
  return bb_test_finish();
}
