/* The reduce operators of the CPU backend, run through bb_cpu_run_node and held to
 * references written here: every Reduce* as a plain loop over all input elements that
 * accumulates in double (or exact integers) into the output position with the reduced
 * coordinates dropped, ArgMax/ArgMin as a scan along the axis, TopK as k repeated scans,
 * CumSum as a sum per position, Softmax/LogSoftmax in double. Inputs are random over
 * random shapes, axes, keepdims, opset forms and element types (float16/bfloat16 values
 * are decoded here, independently of the library); NaN, overflow, ties and the error
 * paths are hand-derived cases. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/cpu.h"
#include "bb/ir.h"
#include "bb/tensor.h"
#include "harness.h"

#define OPTEST_SEED 0x9e3779b97f4a7c15u
#include "optest.h"

static bb_model *M;
static bb_error err;

/* ---- element values, independently of the library ------------------------------------------ */

/* A tensor of random values: reals in [lo, hi] (float16/bfloat16: random patterns with
 * magnitudes in [1/4, 4), or [1/2, 2) when hi < 2; negative too when lo < 0), integers
 * in [lo, hi]. */
static bb_tensor *random_tensor(int32_t dtype, int rank, const int64_t *dims, double lo, double hi) {
  bb_tensor *t = bb_tensor_new_empty(NULL, dtype, rank, dims);
  void *d = bb_tensor_data(t);
  const int64_t e0 = hi < 2 ? -1 : -2, e1 = hi < 2 ? 0 : 1; /* binary exponents */
  for (int64_t i = 0; i < t->numel; i++) {
    uint16_t sign = lo < 0 && (rng_next() & 1) ? 0x8000 : 0;
    switch (dtype) {
    case BB_DTYPE_FLOAT: ((float *)d)[i] = (float)rng_real(lo, hi); break;
    case BB_DTYPE_DOUBLE: ((double *)d)[i] = rng_real(lo, hi); break;
    case BB_DTYPE_FLOAT16:
      ((uint16_t *)d)[i] = (uint16_t)(sign | rng_int(15 + e0, 15 + e1) << 10 | rng_int(0, 1023));
      break;
    case BB_DTYPE_BFLOAT16:
      ((uint16_t *)d)[i] = (uint16_t)(sign | rng_int(127 + e0, 127 + e1) << 7 | rng_int(0, 127));
      break;
    case BB_DTYPE_INT32: ((int32_t *)d)[i] = (int32_t)rng_int((int64_t)lo, (int64_t)hi); break;
    case BB_DTYPE_INT64: ((int64_t *)d)[i] = rng_int((int64_t)lo, (int64_t)hi); break;
    case BB_DTYPE_UINT64: ((uint64_t *)d)[i] = (uint64_t)rng_int((int64_t)lo, (int64_t)hi); break;
    case BB_DTYPE_UINT8: ((uint8_t *)d)[i] = (uint8_t)rng_int((int64_t)lo, (int64_t)hi); break;
    default: break;
    }
  }
  return t;
}

static bb_tensor *floats(int rank, const int64_t *dims, const float *v) {
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, rank, dims);
  memcpy(bb_tensor_data(t), v, (size_t)t->numel * sizeof(float));
  return t;
}

static bb_tensor *vec64(size_t n, const int64_t *v) {
  int64_t d = (int64_t)n;
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_INT64, 1, &d);
  if (n) memcpy(bb_tensor_data(t), v, n * sizeof *v);
  return t;
}

/* ---- running nodes ---------------------------------------------------------------------- */

static bb_ir_node *make_node(const char *op) {
  bb_ir_node *n = bb_ir_node_new(M, op, "", "under_test");
  bb_strlist_append(M, &n->outputs, "y");
  return n;
}

static void release_pair(bb_tensor **t) {
  bb_tensor_release(t[0]);
  bb_tensor_release(t[1]);
}

static int run(const bb_ir_node *n, int64_t opset, bb_tensor **in, size_t n_in, bb_tensor **out) {
  bb_error_clear(&err);
  return bb_cpu_run_node(n, opset, in, n_in, out, 1, NULL, &err);
}

static void unravel(int64_t i, int rank, const int64_t *dims, int64_t *idx) {
  for (int k = rank - 1; k >= 0; k--) {
    idx[k] = i % dims[k];
    i /= dims[k];
  }
}

/* ---- Reduce* ----------------------------------------------------------------------------- */

typedef enum kind { SUM, MEAN, MAX, MIN, PROD, SUM_SQUARE, L1, L2, LOG_SUM, LOG_SUM_EXP, N_KINDS } kind;

static const struct {
  const char *op;
  int axes_input_since;
  double lo, hi; /* input range that keeps the result well conditioned */
} KINDS[N_KINDS] = {
    [SUM] = {"ReduceSum", 13, -2, 2},          [MEAN] = {"ReduceMean", 18, -2, 2},
    [MAX] = {"ReduceMax", 18, -2, 2},          [MIN] = {"ReduceMin", 18, -2, 2},
    [PROD] = {"ReduceProd", 18, -1.5, 1.5},    [SUM_SQUARE] = {"ReduceSumSquare", 18, -2, 2},
    [L1] = {"ReduceL1", 18, -2, 2},            [L2] = {"ReduceL2", 18, -2, 2},
    [LOG_SUM] = {"ReduceLogSum", 18, 0.1, 2},  [LOG_SUM_EXP] = {"ReduceLogSumExp", 18, -2, 2},
};

/* The reference: each input element is folded into the output position whose kept
 * coordinates it shares. Reals accumulate in double; integers in int64 (wrapping). */
static void reference_reduce(kind k, const bb_tensor *x, const bool *mask, double *ref, int64_t *iref, int64_t *count,
                             int64_t n_out) {
  int64_t odims[8];
  for (int a = 0; a < x->rank; a++) odims[a] = mask[a] ? 1 : x->dims[a];
  *count = 1;
  for (int a = 0; a < x->rank; a++)
    if (mask[a]) *count *= x->dims[a];
  bool first_seen[4096] = {false};
  for (int64_t o = 0; o < n_out; o++) ref[o] = iref[o] = 0;
  for (int64_t i = 0; i < x->numel; i++) {
    int64_t idx[8], o = 0;
    unravel(i, x->rank, x->dims, idx);
    for (int a = 0; a < x->rank; a++) o = o * odims[a] + (mask[a] ? 0 : idx[a]);
    double v = tensor_real(x, i);
    int64_t w = tensor_int(x, i);
    bool first = !first_seen[o];
    first_seen[o] = true;
    switch (k) {
    case SUM:
    case MEAN:
    case LOG_SUM:
      ref[o] += v;
      iref[o] = (int64_t)((uint64_t)iref[o] + (uint64_t)w);
      break;
    case MAX:
      ref[o] = first || v > ref[o] ? v : ref[o];
      iref[o] = first || w > iref[o] ? w : iref[o];
      break;
    case MIN:
      ref[o] = first || v < ref[o] ? v : ref[o];
      iref[o] = first || w < iref[o] ? w : iref[o];
      break;
    case PROD:
      ref[o] = (first ? 1 : ref[o]) * v;
      iref[o] = (int64_t)((uint64_t)(first ? 1 : iref[o]) * (uint64_t)w);
      break;
    case SUM_SQUARE:
    case L2:
      ref[o] += v * v;
      iref[o] += w * w;
      break;
    case L1:
      ref[o] += fabs(v);
      iref[o] += w < 0 ? -w : w;
      break;
    case LOG_SUM_EXP: ref[o] += exp(v); break;
    default: break;
    }
  }
  for (int64_t o = 0; o < n_out; o++) {
    if (k == MEAN) {
      ref[o] /= (double)*count;
      iref[o] = *count ? iref[o] / *count : 0;
    }
    if (k == L2) {
      ref[o] = sqrt(ref[o]);
      iref[o] = (int64_t)sqrt((double)iref[o]);
    }
    if (k == LOG_SUM) ref[o] = log(ref[o]); /* integers are not tested with LOG_SUM */
    if (k == LOG_SUM_EXP) ref[o] = log(ref[o]);
  }
}

static double tolerance(int32_t dtype, double ref, int64_t count) {
  switch (dtype) {
  case BB_DTYPE_FLOAT: return 4e-7 * (double)(count + 2) * (1 + fabs(ref));
  case BB_DTYPE_DOUBLE: return 1e-12 * (1 + fabs(ref));
  default: return 1e-2 * (1 + fabs(ref)); /* float16 / bfloat16 outputs */
  }
}

/* One random case: shape, axes (attribute or input by opset), keepdims, dtype. */
static bool random_reduce_case(kind k, int32_t dtype) {
  int rank = (int)rng_int(1, 4);
  int64_t dims[4];
  for (int a = 0; a < rank; a++) dims[a] = rng_int(1, k == PROD ? 2 : 5); /* products stay in range */
  bool mask[4] = {false}, any = false;
  int64_t axes[4];
  size_t n_axes = 0;
  for (int a = 0; a < rank; a++)
    if (rng_next() & 1) {
      mask[a] = any = true;
      axes[n_axes++] = (rng_next() & 1) ? a - rank : a;
    }
  for (size_t i = n_axes; i > 1; i--) { /* any order */
    size_t j = (size_t)rng_int(0, (int64_t)i - 1);
    int64_t t = axes[i - 1];
    axes[i - 1] = axes[j];
    axes[j] = t;
  }
  if (!any)
    for (int a = 0; a < rank; a++) mask[a] = true; /* no axes: everything */
  bool keepdims = rng_next() & 1, axes_input = rng_next() & 1;
  int64_t opset = axes_input ? KINDS[k].axes_input_since : KINDS[k].axes_input_since - 1;
  bb_tensor *x = random_tensor(dtype, rank, dims, KINDS[k].lo, KINDS[k].hi), *out = NULL;
  bb_ir_node *n = make_node(KINDS[k].op);
  bb_attr_set_int(M, &n->attrs, "keepdims", keepdims);
  bb_tensor *in[2] = {x, NULL};
  if (n_axes && axes_input) in[1] = vec64(n_axes, axes);
  else if (n_axes) bb_attr_set_ints(M, &n->attrs, "axes", axes, n_axes);
  bool ok = run(n, opset, in, in[1] ? 2 : 1, &out) == 0;
  if (!ok) fprintf(stderr, "  %s: %s\n", KINDS[k].op, err.message);
  int64_t want[4];
  int want_rank = 0;
  for (int a = 0; a < rank; a++)
    if (!mask[a] || keepdims) want[want_rank++] = mask[a] ? 1 : dims[a];
  ok = ok && out->dtype == dtype && out->rank == want_rank;
  for (int a = 0; ok && a < want_rank; a++) ok = out->dims[a] == want[a];
  double ref[1024];
  int64_t iref[1024], count;
  if (ok) reference_reduce(k, x, mask, ref, iref, &count, out->numel);
  for (int64_t o = 0; ok && o < out->numel; o++) {
    if (optest_is_real(dtype)) {
      double got = tensor_real(out, o);
      ok = fabs(got - ref[o]) <= tolerance(dtype, ref[o], count);
      if (!ok) fprintf(stderr, "  %s %s: [%lld] = %.9g, reference %.9g\n", KINDS[k].op, bb_dtype_name(dtype),
                       (long long)o, got, ref[o]);
    } else {
      int64_t got = tensor_int(out, o), w = iref[o];
      if (dtype == BB_DTYPE_INT32) w = (int32_t)(uint32_t)w;
      ok = got == w;
      if (!ok) fprintf(stderr, "  %s %s: [%lld] = %lld, reference %lld\n", KINDS[k].op, bb_dtype_name(dtype),
                       (long long)o, (long long)got, (long long)w);
    }
  }
  bb_tensor_release(out);
  bb_tensor_release(in[1]);
  bb_tensor_release(x);
  return ok;
}

static void test_reduce_random(void) {
  const int32_t reals[4] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_BFLOAT16};
  for (int k = 0; k < N_KINDS; k++)
    for (int t = 0; t < 4; t++) {
      int failures = 0;
      for (int i = 0; i < 60; i++) failures += !random_reduce_case((kind)k, reals[t]);
      CHECK_MSG(failures == 0, "%s %s: %d of 60 cases", KINDS[k].op, bb_dtype_name(reals[t]), failures);
    }
  /* integers: sums, extremes, products, means, norms (the reference truncates like numpy's astype) */
  const kind int_kinds[7] = {SUM, MEAN, MAX, MIN, PROD, SUM_SQUARE, L1};
  const int32_t int_types[3] = {BB_DTYPE_INT32, BB_DTYPE_INT64, BB_DTYPE_UINT64};
  for (int k = 0; k < 7; k++)
    for (int t = 0; t < 3; t++) {
      double lo = int_types[t] == BB_DTYPE_UINT64 ? 0 : -9, hi = 9;
      int failures = 0;
      for (int i = 0; i < 40; i++) {
        int rank = (int)rng_int(1, 3);
        int64_t dims[3];
        for (int a = 0; a < rank; a++) dims[a] = rng_int(1, 4);
        bb_tensor *x = random_tensor(int_types[t], rank, dims, lo, hi), *out = NULL;
        int axis = (int)rng_int(0, rank - 1);
        bool mask[3] = {false};
        mask[axis] = true;
        bb_ir_node *n = make_node(KINDS[int_kinds[k]].op);
        bb_attr_set_ints(M, &n->attrs, "axes", (const int64_t[]){axis}, 1);
        bool ok = run(n, 11, &x, 1, &out) == 0 && out->dtype == int_types[t];
        double ref[64];
        int64_t iref[64], count;
        if (ok) reference_reduce(int_kinds[k], x, mask, ref, iref, &count, out->numel);
        for (int64_t o = 0; ok && o < out->numel; o++) ok = tensor_int(out, o) == iref[o];
        failures += !ok;
        bb_tensor_release(out);
        bb_tensor_release(x);
      }
      CHECK_MSG(failures == 0, "%s %s: %d of 40 cases", KINDS[int_kinds[k]].op, bb_dtype_name(int_types[t]),
                failures);
    }
}

/* float32 over 1024×1024, the benchmarked shape: the last axis, the first, and both. */
static void test_reduce_large(void) {
  const int64_t d[2] = {1024, 1024};
  bb_tensor *x = random_tensor(BB_DTYPE_FLOAT, 2, d, -1, 1), *out = NULL;
  const kind kinds[5] = {SUM, MEAN, MAX, L2, LOG_SUM_EXP};
  for (int k = 0; k < 5; k++)
    for (int a = 0; a < 3; a++) {
      bool mask[2] = {a != 1, a != 0};
      bb_ir_node *n = make_node(KINDS[kinds[k]].op);
      if (a < 2) bb_attr_set_ints(M, &n->attrs, "axes", (const int64_t[]){a}, 1);
      bool ok = run(n, 11, &x, 1, &out) == 0;
      double *ref = malloc(1024 * sizeof *ref);
      int64_t *iref = malloc(1024 * sizeof *iref), count;
      double worst = 0;
      if (ok) {
        /* the reference folds the whole input once per case; its buffers hold 1024 outputs */
        reference_reduce(kinds[k], x, mask, ref, iref, &count, out->numel);
        for (int64_t o = 0; o < out->numel; o++) {
          double e = fabs(tensor_real(out, o) - ref[o]) / (1 + fabs(ref[o]));
          if (e > worst) worst = e;
        }
      }
      CHECK_MSG(ok && worst < 1e-4, "%s axis %d: relative error %g", KINDS[kinds[k]].op, a, worst);
      free(ref);
      free(iref);
      bb_tensor_release(out);
      out = NULL;
    }
  bb_tensor_release(x);
}

static void test_reduce_cases(void) {
  bb_tensor *out = NULL;
  /* NaN propagates through Max and Min */
  bb_tensor *nan = floats(1, (const int64_t[]){3}, (const float[]){1, NAN, 3});
  CHECK(run(make_node("ReduceMax"), 13, &nan, 1, &out) == 0 && isnan(tensor_real(out, 0)));
  bb_tensor_release(out);
  CHECK(run(make_node("ReduceMin"), 13, &nan, 1, &out) == 0 && isnan(tensor_real(out, 0)));
  bb_tensor_release(out);
  bb_tensor_release(nan);
  /* LogSumExp does not overflow: log(e^1000 + e^1000) = 1000 + log 2 */
  bb_tensor *large = floats(1, (const int64_t[]){2}, (const float[]){1000, 1000});
  CHECK(run(make_node("ReduceLogSumExp"), 13, &large, 1, &out) == 0 &&
        fabs(tensor_real(out, 0) - (1000 + log(2.0))) < 1e-3);
  bb_tensor_release(out);
  bb_tensor_release(large);
  /* int32 sums wrap */
  bb_tensor *wrap = bb_tensor_new_empty(NULL, BB_DTYPE_INT32, 1, (const int64_t[]){2});
  ((int32_t *)bb_tensor_data(wrap))[0] = INT32_MAX;
  ((int32_t *)bb_tensor_data(wrap))[1] = 1;
  CHECK(run(make_node("ReduceSum"), 11, &wrap, 1, &out) == 0 && tensor_int(out, 0) == INT32_MIN);
  bb_tensor_release(out);
  bb_tensor_release(wrap);
  /* uint64 compares as unsigned */
  bb_tensor *big = bb_tensor_new_empty(NULL, BB_DTYPE_UINT64, 1, (const int64_t[]){3});
  const uint64_t bv[3] = {5, UINT64_MAX - 1, 7};
  memcpy(bb_tensor_data(big), bv, sizeof bv);
  CHECK(run(make_node("ReduceMax"), 13, &big, 1, &out) == 0 && (uint64_t)tensor_int(out, 0) == UINT64_MAX - 1);
  bb_tensor_release(out);
  CHECK(run(make_node("ReduceMin"), 13, &big, 1, &out) == 0 && tensor_int(out, 0) == 5);
  bb_tensor_release(out);
  bb_tensor_release(big);
  /* an empty reduced axis: sum 0, product 1, max -inf, mean NaN; [2, 0] -> [2] */
  bb_tensor *empty = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 2, (const int64_t[]){2, 0});
  const char *ops[4] = {"ReduceSum", "ReduceProd", "ReduceMax", "ReduceMean"};
  const double want[4] = {0, 1, -INFINITY, NAN};
  for (int i = 0; i < 4; i++) {
    bb_ir_node *n = make_node(ops[i]);
    bb_attr_set_ints(M, &n->attrs, "axes", (const int64_t[]){1}, 1);
    bb_attr_set_int(M, &n->attrs, "keepdims", 0);
    bool ok = run(n, 11, &empty, 1, &out) == 0 && out->rank == 1 && out->numel == 2;
    for (int64_t o = 0; ok && o < 2; o++) ok = isnan(want[i]) ? isnan(tensor_real(out, o)) : tensor_real(out, o) == want[i];
    CHECK_MSG(ok, "%s over an empty axis", ops[i]);
    bb_tensor_release(out);
  }
  bb_tensor_release(empty);
}

static void test_reduce_sum_forms(void) {
  const int64_t d[2] = {2, 3};
  bb_tensor *x = floats(2, d, (const float[]){1, 2, 3, 4, 5, 6}), *out = NULL;
  /* opset 13, no axes: all; with noop_with_empty_axes: the input unchanged (absent or empty axes) */
  bb_ir_node *n = make_node("ReduceSum");
  CHECK(run(n, 13, &x, 1, &out) == 0 && out->rank == 2 && out->numel == 1 && tensor_real(out, 0) == 21);
  bb_tensor_release(out);
  bb_attr_set_int(M, &n->attrs, "noop_with_empty_axes", 1);
  bb_tensor *in[2] = {x, vec64(0, NULL)};
  for (size_t n_in = 1; n_in <= 2; n_in++) {
    bool ok = run(n, 13, in, n_in, &out) == 0 && out->rank == 2 && out->numel == 6;
    for (int64_t i = 0; ok && i < 6; i++) ok = tensor_real(out, i) == (double)(i + 1);
    CHECK_MSG(ok, "noop with %zu inputs", n_in);
    bb_tensor_release(out);
  }
  /* ... but before opset 13 the attribute does not exist and axes are an attribute */
  CHECK(run(n, 11, &x, 1, &out) == 0 && out->numel == 1);
  bb_tensor_release(out);
  bb_tensor_release(in[1]);
  /* axes input [-1] with keepdims 0: row sums */
  in[1] = vec64(1, (const int64_t[]){-1});
  bb_ir_node *rows = make_node("ReduceSum");
  bb_attr_set_int(M, &rows->attrs, "keepdims", 0);
  CHECK(run(rows, 13, in, 2, &out) == 0 && out->rank == 1 && tensor_real(out, 0) == 6 && tensor_real(out, 1) == 15);
  bb_tensor_release(out);
  bb_tensor_release(in[1]);
  /* errors: an axis out of range, an axis twice, a type ReduceSum does not take */
  in[1] = vec64(1, (const int64_t[]){2});
  CHECK(run(rows, 13, in, 2, &out) == BB_ERR_INVALID_ARGUMENT && strstr(err.message, "under_test"));
  bb_tensor_release(in[1]);
  in[1] = vec64(2, (const int64_t[]){1, -1});
  CHECK(run(rows, 13, in, 2, &out) == BB_ERR_INVALID_ARGUMENT && strstr(err.message, "twice"));
  bb_tensor_release(in[1]);
  bb_tensor *u8 = random_tensor(BB_DTYPE_UINT8, 2, d, 0, 9);
  CHECK(run(make_node("ReduceSum"), 13, &u8, 1, &out) == BB_ERR_TYPE);
  CHECK(run(make_node("ReduceMax"), 13, &u8, 1, &out) == 0); /* Max and Min take 8-bit types */
  bb_tensor_release(out);
  bb_tensor_release(u8);
  bb_tensor_release(x);
}

/* ---- ArgMax, ArgMin, Hardmax ---------------------------------------------------------------- */

static void test_arg(void) {
  int failures = 0;
  const int32_t types[4] = {BB_DTYPE_FLOAT, BB_DTYPE_FLOAT16, BB_DTYPE_INT32, BB_DTYPE_UINT64};
  for (int i = 0; i < 200; i++) {
    int32_t dtype = types[i % 4];
    bool want_max = i & 1, last = rng_next() & 1, keepdims = rng_next() & 1;
    int rank = (int)rng_int(1, 4);
    int64_t dims[4];
    for (int a = 0; a < rank; a++) dims[a] = rng_int(1, 5);
    int axis = (int)rng_int(-rank, rank - 1), ax = axis < 0 ? axis + rank : axis;
    /* few distinct values, so ties are common */
    bb_tensor *x = random_tensor(dtype, rank, dims, dtype == BB_DTYPE_UINT64 ? 0 : -2, 2), *out = NULL;
    bb_ir_node *n = make_node(want_max ? "ArgMax" : "ArgMin");
    bb_attr_set_int(M, &n->attrs, "axis", axis);
    bb_attr_set_int(M, &n->attrs, "keepdims", keepdims);
    bb_attr_set_int(M, &n->attrs, "select_last_index", last);
    bool ok = run(n, 13, &x, 1, &out) == 0 && out->dtype == BB_DTYPE_INT64 && out->rank == rank - !keepdims;
    int64_t outer = 1, inner = 1;
    for (int a = 0; a < rank; a++) {
      if (a < ax) outer *= dims[a];
      if (a > ax) inner *= dims[a];
    }
    for (int64_t o = 0; ok && o < outer; o++)
      for (int64_t j = 0; ok && j < inner; j++) {
        int64_t best = 0;
        for (int64_t l = 1; l < dims[ax]; l++) {
          double v = tensor_real(x, (o * dims[ax] + l) * inner + j), b = tensor_real(x, (o * dims[ax] + best) * inner + j);
          if (want_max ? (v > b || (last && v == b)) : (v < b || (last && v == b))) best = l;
        }
        ok = ((const int64_t *)bb_tensor_data(out))[o * inner + j] == best;
      }
    failures += !ok;
    bb_tensor_release(out);
    bb_tensor_release(x);
  }
  CHECK_MSG(failures == 0, "%d of 200 random ArgMax/ArgMin cases", failures);

  /* NaN wins, first (or last) of them; an empty axis is an error */
  bb_tensor *x = floats(1, (const int64_t[]){5}, (const float[]){1, NAN, 7, NAN, -3}), *out = NULL;
  bb_ir_node *n = make_node("ArgMin");
  CHECK(run(n, 13, &x, 1, &out) == 0 && ((const int64_t *)bb_tensor_data(out))[0] == 1);
  bb_tensor_release(out);
  bb_attr_set_int(M, &n->attrs, "select_last_index", 1);
  CHECK(run(n, 13, &x, 1, &out) == 0 && ((const int64_t *)bb_tensor_data(out))[0] == 3);
  bb_tensor_release(out);
  bb_tensor_release(x);
  bb_tensor *empty = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 2, (const int64_t[]){0, 3});
  CHECK(run(make_node("ArgMax"), 13, &empty, 1, &out) == BB_ERR_INVALID_ARGUMENT);
  bb_tensor_release(empty);

  /* Hardmax: a one-hot of the first maximum along the last axis */
  bb_tensor *h = floats(2, (const int64_t[]){2, 3}, (const float[]){1, 3, 3, 5, -1, 2});
  CHECK(run(make_node("Hardmax"), 13, &h, 1, &out) == 0);
  const float want[6] = {0, 1, 0, 1, 0, 0};
  bool ok = out && out->numel == 6;
  for (int i = 0; ok && i < 6; i++) ok = tensor_real(out, i) == want[i];
  CHECK(ok);
  bb_tensor_release(out);
  /* opset 11, axis 0 coerces to [1, 6]: one 1 in the whole tensor */
  bb_ir_node *old = make_node("Hardmax");
  bb_attr_set_int(M, &old->attrs, "axis", 0);
  CHECK(run(old, 11, &h, 1, &out) == 0);
  ok = out && out->numel == 6;
  for (int i = 0; ok && i < 6; i++) ok = tensor_real(out, i) == (i == 3 ? 1 : 0);
  CHECK(ok);
  bb_tensor_release(out);
  bb_tensor_release(h);
}

/* ---- Softmax, LogSoftmax ---------------------------------------------------------------------- */

/* Softmax over the middle axis of outer×len×inner, in double. */
static void reference_softmax(bool is_log, const bb_tensor *x, int64_t outer, int64_t len, int64_t inner, double *ref) {
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < inner; j++) {
      double m = -INFINITY, s = 0;
      for (int64_t l = 0; l < len; l++) m = fmax(m, tensor_real(x, (o * len + l) * inner + j));
      for (int64_t l = 0; l < len; l++) s += exp(tensor_real(x, (o * len + l) * inner + j) - m);
      for (int64_t l = 0; l < len; l++) {
        int64_t i = (o * len + l) * inner + j;
        ref[i] = is_log ? tensor_real(x, i) - m - log(s) : exp(tensor_real(x, i) - m) / s;
      }
    }
}

static bool check_softmax(bool is_log, int64_t opset, int32_t dtype, int rank, const int64_t *dims, int64_t axis,
                          bool set_axis) {
  bb_tensor *x = random_tensor(dtype, rank, dims, -5, 5), *out = NULL;
  bb_ir_node *n = make_node(is_log ? "LogSoftmax" : "Softmax");
  if (set_axis) bb_attr_set_int(M, &n->attrs, "axis", axis);
  int ax = (int)(axis < 0 ? axis + rank : axis);
  int64_t outer = 1, len = 1, inner = 1;
  for (int a = 0; a < rank; a++) {
    if (a < ax) outer *= dims[a];
    else if (a == ax || opset < 13) len *= dims[a]; /* before 13: coerced to [outer, rest] */
    else inner *= dims[a];
  }
  bool ok = run(n, opset, &x, 1, &out) == 0 && out->dtype == dtype && out->numel == x->numel;
  double *ref = malloc((size_t)x->numel * sizeof *ref), worst = 0;
  if (ok) {
    reference_softmax(is_log, x, outer, len, inner, ref);
    for (int64_t i = 0; i < x->numel; i++) {
      double e = fabs(tensor_real(out, i) - ref[i]) / (is_log ? 1 + fabs(ref[i]) : 1e-3 + fabs(ref[i]));
      if (e > worst) worst = e;
    }
  }
  double tol = dtype == BB_DTYPE_FLOAT ? 1e-5 : dtype == BB_DTYPE_DOUBLE ? 1e-12 : 1e-2;
  if (!ok || worst > tol)
    fprintf(stderr, "  %s opset %lld %s axis %lld: %s, relative error %g\n", n->op_type, (long long)opset,
            bb_dtype_name(dtype), (long long)axis, ok ? "ran" : err.message, worst);
  free(ref);
  bb_tensor_release(out);
  bb_tensor_release(x);
  return ok && worst <= tol;
}

static void test_softmax(void) {
  const int64_t d[3] = {3, 4, 5};
  const int32_t types[3] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16};
  for (int is_log = 0; is_log < 2; is_log++)
    for (int t = 0; t < 3; t++) {
      for (int64_t axis = -3; axis < 3; axis++) {
        CHECK(check_softmax(is_log, 13, types[t], 3, d, axis, true));
        CHECK(check_softmax(is_log, 11, types[t], 3, d, axis, true));
      }
      CHECK(check_softmax(is_log, 13, types[t], 3, d, -1, false)); /* default -1 */
      CHECK(check_softmax(is_log, 11, types[t], 3, d, 1, false));  /* default 1, coerced */
    }
  const int64_t big[2] = {1024, 1024};
  CHECK(check_softmax(false, 13, BB_DTYPE_FLOAT, 2, big, -1, false));
  CHECK(check_softmax(false, 13, BB_DTYPE_FLOAT, 2, big, 0, true));
  CHECK(check_softmax(true, 13, BB_DTYPE_FLOAT, 2, big, -1, false));

  /* before opset 13 a 1-D input with the default axis 1 is coerced to [n, 1]: all ones */
  bb_tensor *row = floats(1, (const int64_t[]){3}, (const float[]){-1, 0, 5}), *ones = NULL;
  CHECK(run(make_node("Softmax"), 11, &row, 1, &ones) == 0 && ones->numel == 3 && tensor_real(ones, 0) == 1 &&
        tensor_real(ones, 1) == 1 && tensor_real(ones, 2) == 1);
  bb_tensor_release(ones);
  bb_tensor_release(row);

  /* large inputs stay finite; integers and bad axes fail */
  bb_tensor *x = floats(1, (const int64_t[]){3}, (const float[]){1000, 1001, 1002}), *out = NULL;
  CHECK(run(make_node("Softmax"), 13, &x, 1, &out) == 0 && fabs(tensor_real(out, 2) - 0.66524096) < 1e-6);
  bb_tensor_release(out);
  bb_ir_node *bad = make_node("Softmax");
  bb_attr_set_int(M, &bad->attrs, "axis", 1);
  CHECK(run(bad, 13, &x, 1, &out) == BB_ERR_INVALID_ARGUMENT);
  bb_tensor_release(x);
  bb_tensor *i = random_tensor(BB_DTYPE_INT32, 1, (const int64_t[]){3}, 0, 3);
  CHECK(run(make_node("LogSoftmax"), 13, &i, 1, &out) == BB_ERR_TYPE);
  bb_tensor_release(i);
}

/* ---- CumSum, TopK ---------------------------------------------------------------------------- */

static void test_cumsum(void) {
  const int32_t types[3] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_INT64};
  const int64_t d[3] = {3, 4, 5};
  int failures = 0;
  for (int t = 0; t < 3; t++)
    for (int axis = -3; axis < 3; axis++)
      for (int mode = 0; mode < 4; mode++) {
        bool exclusive = mode & 1, reverse = mode & 2;
        bb_tensor *x = random_tensor(types[t], 3, d, -9, 9), *out = NULL;
        bb_tensor *in[2] = {x, bb_tensor_new_empty(NULL, BB_DTYPE_INT32, 0, NULL)};
        *(int32_t *)bb_tensor_data(in[1]) = axis;
        bb_ir_node *n = make_node("CumSum");
        bb_attr_set_int(M, &n->attrs, "exclusive", exclusive);
        bb_attr_set_int(M, &n->attrs, "reverse", reverse);
        bool ok = run(n, 14, in, 2, &out) == 0 && out->dtype == types[t] && out->numel == 60;
        int ax = axis < 0 ? axis + 3 : axis;
        int64_t stride = ax == 0 ? 20 : ax == 1 ? 5 : 1;
        for (int64_t i = 0; ok && i < 60; i++) {
          /* the sum of the elements before (or after, reversed) position i along the axis */
          int64_t idx[3];
          unravel(i, 3, d, idx);
          double want = 0;
          for (int64_t l = 0; l < d[ax]; l++) {
            bool before = reverse ? l > idx[ax] : l < idx[ax];
            bool take = before || (!exclusive && l == idx[ax]);
            if (take) want += tensor_real(x, i + (l - idx[ax]) * stride);
          }
          ok = fabs(tensor_real(out, i) - want) <= 1e-5 * (1 + fabs(want));
        }
        failures += !ok;
        bb_tensor_release(out);
        release_pair(in);
      }
  CHECK_MSG(failures == 0, "%d of 72 CumSum cases", failures);
}

static void test_topk(void) {
  int failures = 0;
  const int32_t types[3] = {BB_DTYPE_FLOAT, BB_DTYPE_INT32, BB_DTYPE_UINT64};
  for (int c = 0; c < 120; c++) {
    int32_t dtype = types[c % 3];
    const int64_t d[3] = {rng_int(1, 4), rng_int(1, 9), rng_int(1, 4)};
    int axis = (int)rng_int(0, 2);
    int64_t k = rng_int(0, d[axis]);
    bool largest = rng_next() & 1;
    bb_tensor *x = random_tensor(dtype, 3, d, dtype == BB_DTYPE_UINT64 ? 0 : -3, 3), *out[2] = {NULL, NULL};
    bb_ir_node *n = bb_ir_node_new(M, "TopK", "", "under_test");
    bb_strlist_append(M, &n->outputs, "values");
    bb_strlist_append(M, &n->outputs, "indices");
    bb_attr_set_int(M, &n->attrs, "axis", axis - 3);
    bb_attr_set_int(M, &n->attrs, "largest", largest);
    bb_tensor *in[2] = {x, vec64(1, &k)};
    bb_error_clear(&err);
    bool ok = bb_cpu_run_node(n, 11, in, 2, out, 2, NULL, &err) == 0 && out[1]->dtype == BB_DTYPE_INT64 &&
              out[0]->dims[axis] == k && out[1]->dims[axis] == k;
    /* the reference picks, k times, the best element not yet taken (lowest index on ties) */
    int64_t stride = axis == 0 ? d[1] * d[2] : axis == 1 ? d[2] : 1;
    for (int64_t i = 0; ok && i < out[0]->numel; i++) {
      int64_t idx[3], kd[3] = {d[0], d[1], d[2]};
      kd[axis] = k;
      unravel(i, 3, kd, idx);
      int64_t j = idx[axis], base = idx[0] * d[1] * d[2] + idx[1] * d[2] + idx[2] - j * stride;
      bool taken[9] = {false};
      int64_t pick = -1;
      for (int64_t r = 0; r <= j; r++) {
        pick = -1;
        for (int64_t l = 0; l < d[axis]; l++) {
          if (taken[l]) continue;
          double v = tensor_real(x, base + l * stride), b = pick < 0 ? 0 : tensor_real(x, base + pick * stride);
          if (pick < 0 || (largest ? v > b : v < b)) pick = l;
        }
        taken[pick] = true;
      }
      ok = ((const int64_t *)bb_tensor_data(out[1]))[i] == pick && tensor_real(out[0], i) == tensor_real(x, base + pick * stride);
    }
    failures += !ok;
    bb_tensor_release(out[0]);
    bb_tensor_release(out[1]);
    release_pair(in);
  }
  CHECK_MSG(failures == 0, "%d of 120 TopK cases", failures);
  /* k past the axis */
  bb_tensor *x = floats(1, (const int64_t[]){3}, (const float[]){1, 2, 3}), *out[2] = {NULL, NULL};
  bb_tensor *in[2] = {x, vec64(1, (const int64_t[]){4})};
  bb_ir_node *n = bb_ir_node_new(M, "TopK", "", "under_test");
  bb_strlist_append(M, &n->outputs, "values");
  bb_strlist_append(M, &n->outputs, "indices");
  CHECK(bb_cpu_run_node(n, 11, in, 2, out, 2, NULL, &err) == BB_ERR_INVALID_ARGUMENT);
  release_pair(in);
}

int main(void) {
  M = bb_model_new(NULL);
  RUN(test_reduce_random);
  RUN(test_reduce_large);
  RUN(test_reduce_cases);
  RUN(test_reduce_sum_forms);
  RUN(test_arg);
  RUN(test_softmax);
  RUN(test_cumsum);
  RUN(test_topk);
  bb_model_free(M);
  return bb_test_finish();
}
