/* Shared by the operator tests: a seeded random generator (define OPTEST_SEED before
 * including to pick the sequence), reading tensor elements independently of the library
 * (float16/bfloat16 decoded here, not by the code under test), a node to run alone, and
 * the largest error of a result against a reference. */
#ifndef BB_TESTS_OPS_OPTEST_H
#define BB_TESTS_OPS_OPTEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bb/ir.h"
#include "bb/tensor.h"

#ifndef OPTEST_SEED
#define OPTEST_SEED 0x243f6a8885a308d3u
#endif

static uint64_t rng_state = OPTEST_SEED;

static inline uint64_t rng_next(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

/* A uniform integer in [lo, hi] and a uniform real in [lo, hi). */
static inline int64_t rng_int(int64_t lo, int64_t hi) {
  return lo + (int64_t)(rng_next() % (uint64_t)(hi - lo + 1));
}
static inline double rng_real(double lo, double hi) {
  return lo + (hi - lo) * (double)(rng_next() >> 11) / 9007199254740992.0;
}

static inline double f16_value(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
  return h & 0x8000 ? -v : v;
}

static inline double bf16_value(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* Element i of an integer or bool tensor (uint64 as its two's-complement bits). */
static inline int64_t tensor_int(const bb_tensor *t, int64_t i) {
  const void *d = bb_tensor_data(t);
  switch (t->dtype) {
  case BB_DTYPE_INT8: return ((const int8_t *)d)[i];
  case BB_DTYPE_INT16: return ((const int16_t *)d)[i];
  case BB_DTYPE_INT32: return ((const int32_t *)d)[i];
  case BB_DTYPE_INT64: return ((const int64_t *)d)[i];
  case BB_DTYPE_UINT8: case BB_DTYPE_BOOL: return ((const uint8_t *)d)[i];
  case BB_DTYPE_UINT16: return ((const uint16_t *)d)[i];
  case BB_DTYPE_UINT32: return ((const uint32_t *)d)[i];
  case BB_DTYPE_UINT64: return (int64_t)((const uint64_t *)d)[i];
  default: return 0;
  }
}

/* Element i of any tensor as a double. */
static inline double tensor_real(const bb_tensor *t, int64_t i) {
  const void *d = bb_tensor_data(t);
  switch (t->dtype) {
  case BB_DTYPE_FLOAT: return ((const float *)d)[i];
  case BB_DTYPE_DOUBLE: return ((const double *)d)[i];
  case BB_DTYPE_FLOAT16: return f16_value(((const uint16_t *)d)[i]);
  case BB_DTYPE_BFLOAT16: return bf16_value(((const uint16_t *)d)[i]);
  case BB_DTYPE_UINT64: return (double)((const uint64_t *)d)[i];
  default: return (double)tensor_int(t, i);
  }
}

static inline int optest_is_real(int32_t dt) {
  return dt == BB_DTYPE_FLOAT || dt == BB_DTYPE_DOUBLE || dt == BB_DTYPE_FLOAT16 || dt == BB_DTYPE_BFLOAT16;
}

/* A node of ai.onnx `op` in m, its inputs named in0.., its outputs out0.. */
static inline bb_ir_node *optest_node(bb_model *m, const char *op, int n_in, int n_out) {
  bb_ir_node *n = bb_ir_node_new(m, op, NULL, "under_test");
  char name[16];
  for (int i = 0; i < n_in; i++) snprintf(name, sizeof name, "in%d", i), bb_strlist_append(m, &n->inputs, name);
  for (int i = 0; i < n_out; i++) snprintf(name, sizeof name, "out%d", i), bb_strlist_append(m, &n->outputs, name);
  return n;
}

/* Adds t to m's initializers as `name`, taking the caller's reference: 0, or non-zero with
 * err saying why where the conversion failed. */
static inline int optest_add_initializer(bb_model *m, const char *name, bb_tensor *t, bb_error *err) {
  bb_tensor_proto *p = NULL;
  int rc = bb_tensor_to_proto(m, t, name, &p, err) || bb_tensorlist_append(m, &m->graph->initializers, p);
  bb_tensor_release(t);
  return rc;
}

/* A float32 or float64 tensor of uniform values in [lo, hi). */
static inline bb_tensor *optest_rand(int32_t dtype, int rank, const int64_t *dims, double lo, double hi) {
  bb_tensor *t = bb_tensor_new_empty(NULL, dtype, rank, dims);
  for (int64_t i = 0; i < t->numel; i++) {
    double v = rng_real(lo, hi);
    if (dtype == BB_DTYPE_FLOAT) ((float *)bb_tensor_data(t))[i] = (float)v;
    else ((double *)bb_tensor_data(t))[i] = v;
  }
  return t;
}

/* The largest |got - want| / (1 + |want|) over got's elements; NaN when one is NaN, so every bound fails. */
static inline double optest_max_err(const bb_tensor *got, const double *want) {
  double worst = 0;
  for (int64_t i = 0; i < got->numel; i++) {
    double e = fabs(tensor_real(got, i) - want[i]) / (1.0 + fabs(want[i]));
    if (!(e <= worst)) worst = e;
  }
  return worst;
}

/* Whether two float tensors hold the same bits element by element (in WebAssembly any NaN
 * matches any NaN: the engine picks a NaN's payload). */
static inline int optest_same_bits(const bb_tensor *a, const bb_tensor *b) {
  if (!a || !b || a->numel != b->numel) return 0;
  const float *x = bb_tensor_data(a), *y = bb_tensor_data(b);
  for (int64_t i = 0; i < a->numel; i++) {
#if defined(__wasm__)
    if (isnan(x[i]) && isnan(y[i])) continue;
#endif
    if (memcmp(x + i, y + i, sizeof(float)) != 0) return 0;
  }
  return 1;
}

#endif
