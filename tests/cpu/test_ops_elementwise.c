/* The elementwise operators of the CPU backend, run through bb_cpu_run_node and held to
 * references written here: broadcasting by explicit multi-index arithmetic, arithmetic in
 * double (or exact int64), float16/bfloat16 rounding by searching the format's values,
 * and hand-derived cases for integer division, Mod, Round, Cast and the error paths. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "bb/cpu.h"
#include "bb/ir.h"
#include "bb/tensor.h"
#include "harness.h"
#include "cpu/elementwise.h"
#include "cpu/optest.h"

/* ---- half precision, independently of the library ------------------------------------------ */

/* The value of a positive pattern, with the infinity pattern standing for the first power
 * of two past the largest finite value: rounding to nearest even between the largest
 * finite value and that boundary is exactly IEEE overflow. */
static double pattern_value(uint16_t p, bool bf) {
  if (bf) return p == 0x7f80 ? ldexp(1, 128) : bf16_value(p);
  return p == 0x7c00 ? 65536.0 : f16_value(p);
}

/* x rounded to nearest even float16 (bf false) or bfloat16, by binary search over the
 * monotonic positive patterns. */
static uint16_t nearest_half(double x, bool bf) {
  const uint16_t inf = bf ? 0x7f80 : 0x7c00, sign = signbit(x) ? 0x8000 : 0;
  if (isnan(x)) return bf ? 0x7fc0 : 0x7e00;
  const double a = fabs(x);
  if (a >= pattern_value(inf, bf)) return sign | inf;
  uint16_t lo = 0, hi = inf; /* value(lo) <= a < value(hi) */
  while (hi - lo > 1) {
    uint16_t mid = (uint16_t)((lo + hi) / 2);
    if (pattern_value(mid, bf) <= a) lo = mid;
    else hi = mid;
  }
  const double dl = a - pattern_value(lo, bf), dh = pattern_value(hi, bf) - a;
  uint16_t r = dl < dh ? lo : dh < dl ? hi : (lo & 1) ? hi : lo;
  return sign | r;
}

/* ---- tensors ------------------------------------------------------------------------------ */

static bool is_float(int32_t dt) {
  return dt == BB_DTYPE_FLOAT || dt == BB_DTYPE_DOUBLE || dt == BB_DTYPE_FLOAT16 || dt == BB_DTYPE_BFLOAT16;
}
static bool is_unsigned(int32_t dt) {
  return dt == BB_DTYPE_UINT8 || dt == BB_DTYPE_UINT16 || dt == BB_DTYPE_UINT32 || dt == BB_DTYPE_UINT64;
}

static bb_tensor *tensor(int32_t dtype, int rank, const int64_t *dims) {
  bb_tensor *t = bb_tensor_new_zeros(NULL, dtype, rank, dims);
  if (!t) {
    fprintf(stderr, "cannot allocate a tensor\n");
    exit(2);
  }
  return t;
}

/* Stores an integer with the wrap-around of a C conversion to the type. */
static void put_int(bb_tensor *t, int64_t i, int64_t v) {
  void *d = bb_tensor_data(t);
  switch (t->dtype) {
  case BB_DTYPE_INT8: ((int8_t *)d)[i] = (int8_t)v; break;
  case BB_DTYPE_INT16: ((int16_t *)d)[i] = (int16_t)v; break;
  case BB_DTYPE_INT32: ((int32_t *)d)[i] = (int32_t)v; break;
  case BB_DTYPE_INT64: ((int64_t *)d)[i] = v; break;
  case BB_DTYPE_UINT8: ((uint8_t *)d)[i] = (uint8_t)v; break;
  case BB_DTYPE_UINT16: ((uint16_t *)d)[i] = (uint16_t)v; break;
  case BB_DTYPE_UINT32: ((uint32_t *)d)[i] = (uint32_t)v; break;
  case BB_DTYPE_UINT64: ((uint64_t *)d)[i] = (uint64_t)v; break;
  case BB_DTYPE_BOOL: ((uint8_t *)d)[i] = v != 0; break;
  default: break;
  }
}

/* Stores a value: floating types round to nearest even, integers must be in range. */
static void put(bb_tensor *t, int64_t i, double v) {
  void *d = bb_tensor_data(t);
  switch (t->dtype) {
  case BB_DTYPE_FLOAT: ((float *)d)[i] = (float)v; break;
  case BB_DTYPE_DOUBLE: ((double *)d)[i] = v; break;
  case BB_DTYPE_FLOAT16: ((uint16_t *)d)[i] = nearest_half(v, false); break;
  case BB_DTYPE_BFLOAT16: ((uint16_t *)d)[i] = nearest_half(v, true); break;
  default: put_int(t, i, (int64_t)v); break;
  }
}

/* x rounded to the floating type dt (the value a correctly rounded result would have). */
static double round_to(int32_t dt, double x) {
  switch (dt) {
  case BB_DTYPE_FLOAT: return (float)x;
  case BB_DTYPE_FLOAT16: return f16_value(nearest_half(x, false));
  case BB_DTYPE_BFLOAT16: return bf16_value(nearest_half(x, true));
  default: return x;
  }
}

/* Wraps an integer into dt's range, as two's complement hardware does. */
static int64_t wrap(int32_t dt, int64_t v) {
  switch (dt) {
  case BB_DTYPE_INT8: return (int8_t)v;
  case BB_DTYPE_INT16: return (int16_t)v;
  case BB_DTYPE_INT32: return (int32_t)v;
  case BB_DTYPE_UINT8: return (uint8_t)v;
  case BB_DTYPE_UINT16: return (uint16_t)v;
  case BB_DTYPE_UINT32: return (uint32_t)v;
  case BB_DTYPE_BOOL: return v != 0;
  default: return v;
  }
}

static bool same_value(double got, double want, double rel) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= rel * fabs(want) + 1e-300;
}

static bb_tensor *from_values(int32_t dt, int rank, const int64_t *dims, const double *v) {
  bb_tensor *t = tensor(dt, rank, dims);
  for (int64_t i = 0; i < t->numel; i++) put(t, i, v[i]);
  return t;
}

static bb_tensor *vec(int32_t dt, int64_t n, const double *v) { return from_values(dt, 1, &n, v); }

/* A tensor of random values that dt holds exactly: floats in [lo, hi], integers in the
 * intersection of [lo, hi] with dt's range. */
static bb_tensor *random_tensor(int32_t dt, int rank, const int64_t *dims, double lo, double hi) {
  bb_tensor *t = tensor(dt, rank, dims);
  if (is_unsigned(dt) && lo < 0) lo = 0;
  if (dt == BB_DTYPE_INT8 || dt == BB_DTYPE_UINT8) {
    lo = fmax(lo, dt == BB_DTYPE_INT8 ? -128 : 0);
    hi = fmin(hi, dt == BB_DTYPE_INT8 ? 127 : 255);
  }
  for (int64_t i = 0; i < t->numel; i++) {
    if (is_float(t->dtype)) put(t, i, round_to(dt, rng_real(lo, hi)));
    else if (dt == BB_DTYPE_BOOL) put_int(t, i, (int64_t)(rng_next() & 1));
    else put_int(t, i, rng_int((int64_t)lo, (int64_t)hi));
  }
  return t;
}

/* ---- running nodes -------------------------------------------------------------------------- */

static bb_model *model;
static bb_error last_err;

static bb_ir_node *node(const char *op, size_t n_in, size_t n_out) {
  static int counter;
  char name[32];
  snprintf(name, sizeof name, "n%d", ++counter);
  bb_ir_node *n = bb_ir_node_new(model, op, "", name);
  for (size_t i = 0; i < n_in; i++) {
    snprintf(name, sizeof name, "in%zu", i);
    bb_strlist_append(model, &n->inputs, name);
  }
  for (size_t i = 0; i < n_out; i++) {
    snprintf(name, sizeof name, "out%zu", i);
    bb_strlist_append(model, &n->outputs, name);
  }
  return n;
}

static int run(const bb_ir_node *n, int64_t opset, bb_tensor *const *in, size_t n_in, bb_tensor **out, size_t n_out) {
  bb_error_clear(&last_err);
  return bb_cpu_run_node(n, opset, in, n_in, out, n_out, NULL, &last_err);
}

/* Runs a one-output op; returns its output or NULL (with the error in last_err). */
static bb_tensor *run1(const char *op, int64_t opset, bb_tensor *const *in, size_t n_in) {
  bb_tensor *out = NULL;
  run(node(op, n_in, 1), opset, in, n_in, &out, 1);
  return out;
}

static void release_all(bb_tensor **t, size_t n) {
  for (size_t i = 0; i < n; i++) bb_tensor_release(t[i]);
}

/* Index into input t of the element that flat output index `flat` of an output shaped
 * (rank, dims) reads under multidirectional broadcasting. */
static int64_t broadcast_index(const bb_tensor *t, int rank, const int64_t *dims, int64_t flat) {
  int64_t idx[BB_MAX_RANK];
  for (int d = rank - 1; d >= 0; d--) {
    idx[d] = dims[d] ? flat % dims[d] : 0;
    flat = dims[d] ? flat / dims[d] : 0;
  }
  int64_t at = 0;
  for (int j = 0; j < t->rank; j++) {
    const int d = j + rank - t->rank;
    at = at * t->dims[j] + (t->dims[j] == 1 ? 0 : idx[d]);
  }
  return at;
}

/* The broadcast shape by the rule, written out. */
static int expected_shape(const bb_tensor *const *in, size_t n, int64_t *dims) {
  int rank = 0;
  for (size_t k = 0; k < n; k++) rank = in[k]->rank > rank ? in[k]->rank : rank;
  for (int d = 0; d < rank; d++) {
    dims[d] = 1;
    for (size_t k = 0; k < n; k++) {
      const int j = d - (rank - in[k]->rank);
      if (j >= 0 && in[k]->dims[j] != 1) dims[d] = in[k]->dims[j];
    }
  }
  return rank;
}

static bool has_shape(const bb_tensor *t, int rank, const int64_t *dims) {
  if (!t || t->rank != rank) return false;
  for (int d = 0; d < rank; d++)
    if (t->dims[d] != dims[d]) return false;
  return true;
}

/* ---- the broadcasting walk itself -------------------------------------------------------------- */

static void test_plan_merges_and_broadcasts(void) {
  bbi_ew_plan p;
  const int64_t same[3] = {2, 3, 4};
  const int64_t *d2[2] = {same, same};
  int r2[2] = {3, 3};
  bbi_ew_plan_init(&p, 3, same, 2, r2, d2);
  CHECK(p.rank == 0 && p.run == 24 && p.step[0] == 1 && p.step[1] == 1 && p.step[2] == 1);

  const int64_t big[2] = {1000, 1000}, row[1] = {1000};
  const int64_t *rows[2] = {big, row};
  int rr[2] = {2, 1};
  bbi_ew_plan_init(&p, 2, big, 2, rr, rows);
  CHECK(p.rank == 1 && p.dims[0] == 1000 && p.run == 1000);
  CHECK(p.step[1] == 1 && p.step[2] == 1 && p.strides[1][0] == 1000 && p.strides[2][0] == 0);

  const int64_t col[2] = {4, 1}, line[2] = {1, 5}, outer[2] = {4, 5};
  const int64_t *cl[2] = {col, line};
  int rc2[2] = {2, 2};
  bbi_ew_plan_init(&p, 2, outer, 2, rc2, cl);
  CHECK(p.rank == 1 && p.dims[0] == 4 && p.run == 5);
  CHECK(p.step[1] == 0 && p.step[2] == 1 && p.strides[1][0] == 1 && p.strides[2][0] == 0);

  /* [2,1,3,4] with [3,1]: the size-1 output-free dims vanish, [3,4] with [3,1] keeps two dims */
  const int64_t a4[4] = {2, 1, 3, 4}, b2[2] = {3, 1};
  const int64_t *ab[2] = {a4, b2};
  int rab[2] = {4, 2};
  bbi_ew_plan_init(&p, 4, a4, 2, rab, ab);
  CHECK(p.rank == 2 && p.dims[0] == 2 && p.dims[1] == 3 && p.run == 4);
  CHECK(p.step[2] == 0 && p.strides[2][0] == 0 && p.strides[2][1] == 1 && p.strides[1][0] == 12);

  /* a scalar output, and an empty one */
  const int64_t *none[1] = {NULL};
  int r0[1] = {0};
  bbi_ew_plan_init(&p, 0, NULL, 1, r0, none);
  CHECK(p.run == 1 && p.rank == 0);
  const int64_t empty[2] = {0, 3};
  const int64_t *e1[1] = {empty};
  int re[1] = {2};
  bbi_ew_plan_init(&p, 2, empty, 1, re, e1);
  CHECK(p.run == 0);
}

/* ---- binary arithmetic over shapes and types ----------------------------------------------------- */

typedef enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MAX, OP_MIN, OP_POW, N_ARITH } arith;
static const char *const ARITH_NAMES[N_ARITH] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"};

static double ref_float(arith op, double a, double b) {
  switch (op) {
  case OP_ADD: return a + b;
  case OP_SUB: return a - b;
  case OP_MUL: return a * b;
  case OP_DIV: return a / b;
  case OP_MAX: return a > b ? a : b;
  case OP_MIN: return a < b ? a : b;
  default: return pow(a, b);
  }
}

/* Integer semantics: wrapping arithmetic, division truncating toward zero with x/0 = 0. */
static int64_t ref_int(arith op, int32_t dt, int64_t a, int64_t b) {
  switch (op) {
  case OP_ADD: return wrap(dt, (int64_t)((uint64_t)a + (uint64_t)b));
  case OP_SUB: return wrap(dt, (int64_t)((uint64_t)a - (uint64_t)b));
  case OP_MUL: return wrap(dt, (int64_t)((uint64_t)a * (uint64_t)b));
  case OP_DIV: return b == 0 ? 0 : wrap(dt, a / b);
  case OP_MAX: return a > b ? a : b;
  case OP_MIN: return a < b ? a : b;
  default: {
    int64_t r = 1;
    for (int64_t k = 0; k < b; k++) r = (int64_t)((uint64_t)r * (uint64_t)a);
    return wrap(dt, r);
  }
  }
}

static const int32_t NUMERIC_TYPES[] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_BFLOAT16,
                                        BB_DTYPE_INT8,  BB_DTYPE_INT16,  BB_DTYPE_INT32,   BB_DTYPE_INT64,
                                        BB_DTYPE_UINT8, BB_DTYPE_UINT16, BB_DTYPE_UINT32,  BB_DTYPE_UINT64};
#define N_NUMERIC (sizeof NUMERIC_TYPES / sizeof NUMERIC_TYPES[0])

typedef struct shape_pair {
  int ra;
  int64_t a[6];
  int rb;
  int64_t b[6];
} shape_pair;

static const shape_pair SHAPES[] = {
    {3, {3, 4, 5}, 3, {3, 4, 5}},         /* same shape */
    {3, {3, 4, 5}, 1, {5}},               /* trailing vector */
    {3, {3, 4, 5}, 0, {0}},               /* scalar */
    {0, {0}, 2, {4, 3}},                  /* scalar first */
    {2, {4, 1}, 2, {1, 5}},               /* outer product */
    {2, {4, 1}, 1, {5}},                  /* column against row */
    {4, {2, 1, 3, 1}, 3, {4, 1, 6}},      /* both broadcast, interleaved */
    {3, {2, 3, 4}, 3, {2, 1, 4}},         /* middle dimension */
    {1, {1}, 1, {7}},                     /* size-1 vector */
    {2, {37, 19}, 2, {37, 1}},            /* odd sizes, column */
    {6, {2, 1, 2, 1, 2, 3}, 6, {1, 2, 1, 2, 1, 3}}, /* high rank, alternating */
    {2, {0, 3}, 1, {3}},                  /* empty */
    {2, {3, 300}, 2, {3, 300}},           /* longer than one chunk of staging */
    {2, {3, 300}, 1, {1}},                /* a repeated operand over several chunks */
    {1, {1}, 2, {2, 300}},
    /* short runs, widened over many rows (with a partial last block) */
    {2, {1000, 3}, 1, {3}},               /* a repeated row */
    {2, {1000, 3}, 2, {1000, 1}},         /* a column, expanded */
    {3, {5, 700, 3}, 3, {5, 1, 3}},       /* a repeated row that changes with the outer index */
    {3, {5, 700, 3}, 3, {1, 700, 1}},     /* a column repeated over the outer index */
};
#define N_SHAPES (sizeof SHAPES / sizeof SHAPES[0])

/* Each arithmetic op, every numeric type, every shape pair: the output shape and each
 * element against a reference. Floating types must be exact for + - * / max min (the
 * correctly rounded result; computing through float is innocuous for float16/bfloat16),
 * and within rounding for Pow. */
static void test_binary_arithmetic_broadcast(void) {
  for (int op = 0; op < N_ARITH; op++)
    for (size_t ti = 0; ti < N_NUMERIC; ti++) {
      const int32_t dt = NUMERIC_TYPES[ti];
      if (op == OP_POW && !is_float(dt) && dt != BB_DTYPE_INT32 && dt != BB_DTYPE_INT64) continue;
      int bad = 0;
      for (size_t s = 0; s < N_SHAPES && !bad; s++) {
        const shape_pair *sp = &SHAPES[s];
        bb_tensor *in[2];
        if (op == OP_POW) {
          in[0] = random_tensor(dt, sp->ra, sp->a, is_float(dt) ? 0.25 : -4, 4);
          in[1] = random_tensor(dt, sp->rb, sp->b, is_float(dt) ? -3 : 0, 5);
        } else {
          in[0] = random_tensor(dt, sp->ra, sp->a, -100, 100);
          in[1] = random_tensor(dt, sp->rb, sp->b, op == OP_DIV && is_float(dt) ? 1 : -100, 100);
        }
        bb_tensor *y = run1(ARITH_NAMES[op], 17, in, 2);
        int64_t dims[BB_MAX_RANK];
        const int rank = expected_shape((const bb_tensor *const *)in, 2, dims);
        if (!has_shape(y, rank, dims) || y->dtype != dt) {
          fprintf(stderr, "%s %s shapes #%zu: wrong output (%s)\n", ARITH_NAMES[op], bb_dtype_name(dt), s,
                  last_err.message);
          bad = 1;
        }
        for (int64_t i = 0; !bad && i < y->numel; i++) {
          const int64_t ia = broadcast_index(in[0], rank, dims, i), ib = broadcast_index(in[1], rank, dims, i);
          if (is_float(dt)) {
            const double want = round_to(dt, ref_float((arith)op, tensor_real(in[0], ia), tensor_real(in[1], ib)));
            const double rel = op != OP_POW ? 0 : dt == BB_DTYPE_DOUBLE ? 1e-15 : dt == BB_DTYPE_FLOAT ? 3e-7
                               : dt == BB_DTYPE_FLOAT16 ? 1e-3 : 8e-3;
            if (!same_value(tensor_real(y, i), want, rel)) bad = 1;
          } else if (tensor_int(y, i) != ref_int((arith)op, dt, tensor_int(in[0], ia), tensor_int(in[1], ib))) {
            bad = 1;
          }
          if (bad)
            fprintf(stderr, "%s %s shapes #%zu element %lld: got %.17g\n", ARITH_NAMES[op], bb_dtype_name(dt), s,
                    (long long)i, tensor_real(y, i));
        }
        release_all(in, 2);
        bb_tensor_release(y);
      }
      CHECK_MSG(!bad, "%s %s", ARITH_NAMES[op], bb_dtype_name(dt));
    }
}

/* The benchmarked case: float32 Add of a million elements against a row and a column, and
 * the outer product of a column and a row. */
static void test_large_float_broadcast(void) {
  const int64_t big[2] = {1000, 1000}, row[1] = {1000}, col[2] = {1000, 1}, line[2] = {1, 1000};
  const int64_t *second[3] = {row, col, line};
  const int second_rank[3] = {1, 2, 2};
  for (int c = 0; c < 3; c++) {
    bb_tensor *in[2] = {random_tensor(BB_DTYPE_FLOAT, 2, c == 2 ? col : big, -1, 1),
                        random_tensor(BB_DTYPE_FLOAT, second_rank[c], second[c], -1, 1)};
    bb_tensor *y = run1("Add", 14, in, 2);
    CHECK(has_shape(y, 2, big));
    int bad = 0;
    for (int64_t i = 0; y && i < y->numel && !bad; i++) {
      const float want =
          (float)(tensor_real(in[0], broadcast_index(in[0], 2, big, i)) + tensor_real(in[1], broadcast_index(in[1], 2, big, i)));
      bad = ((const float *)bb_tensor_data(y))[i] != want;
    }
    CHECK_MSG(!bad, "case %d", c);
    release_all(in, 2);
    bb_tensor_release(y);
  }
}

/* ---- integer corner cases ------------------------------------------------------------------------- */

static void check_ints(const bb_tensor *y, int32_t dt, const int64_t *want, int64_t n, const char *what) {
  CHECK_MSG(y && y->dtype == dt && y->numel == n, "%s: %s", what, last_err.message);
  for (int64_t i = 0; y && i < n && i < y->numel; i++)
    CHECK_MSG(tensor_int(y, i) == want[i], "%s[%lld]: got %lld, want %lld", what, (long long)i,
              (long long)tensor_int(y, i), (long long)want[i]);
}

static bb_tensor *ints(int32_t dt, int64_t n, const int64_t *v) {
  bb_tensor *t = tensor(dt, 1, &n);
  for (int64_t i = 0; i < n; i++) put_int(t, i, v[i]);
  return t;
}

static void test_integer_division_and_wrapping(void) {
  /* truncation toward zero; x/0 = 0; MIN/-1 wraps to MIN */
  const int64_t a[7] = {7, -7, 7, -7, 5, INT32_MIN, 0}, b[7] = {2, 2, -2, -2, 0, -1, 0};
  const int64_t q[7] = {3, -3, -3, 3, 0, INT32_MIN, 0};
  bb_tensor *in[2] = {ints(BB_DTYPE_INT32, 7, a), ints(BB_DTYPE_INT32, 7, b)};
  bb_tensor *y = run1("Div", 14, in, 2);
  check_ints(y, BB_DTYPE_INT32, q, 7, "int32 Div");
  bb_tensor_release(y);
  release_all(in, 2);

  const int64_t a8[2] = {-128, 100}, b8[2] = {-1, 0}, q8[2] = {-128, 0};
  bb_tensor *in8[2] = {ints(BB_DTYPE_INT8, 2, a8), ints(BB_DTYPE_INT8, 2, b8)};
  y = run1("Div", 14, in8, 2);
  check_ints(y, BB_DTYPE_INT8, q8, 2, "int8 Div");
  bb_tensor_release(y);
  release_all(in8, 2);

  const int64_t a64[2] = {INT64_MIN, 9}, b64[2] = {-1, 0}, q64[2] = {INT64_MIN, 0};
  bb_tensor *in64[2] = {ints(BB_DTYPE_INT64, 2, a64), ints(BB_DTYPE_INT64, 2, b64)};
  y = run1("Div", 14, in64, 2);
  check_ints(y, BB_DTYPE_INT64, q64, 2, "int64 Div");
  bb_tensor_release(y);
  release_all(in64, 2);

  /* wrap-around: 3-5 as uint8, 16*17 as uint8, 65535^2 as uint16, INT32_MAX+1, INT64_MAX*2 */
  const struct {
    const char *op;
    int32_t dt;
    int64_t a, b, want;
  } cases[] = {
      {"Sub", BB_DTYPE_UINT8, 3, 5, 254},
      {"Mul", BB_DTYPE_UINT8, 16, 17, 16},
      {"Mul", BB_DTYPE_UINT16, 65535, 65535, 1},
      {"Add", BB_DTYPE_INT32, INT32_MAX, 1, INT32_MIN},
      {"Mul", BB_DTYPE_INT64, INT64_MAX, 2, -2},
      {"Sub", BB_DTYPE_INT64, INT64_MIN, 1, INT64_MAX},
      {"Add", BB_DTYPE_UINT64, -1 /* 2^64-1 */, 2, 1},
      {"Div", BB_DTYPE_UINT64, -2 /* 2^64-2 */, 2, INT64_MAX},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    bb_tensor *io[2] = {ints(cases[c].dt, 1, &cases[c].a), ints(cases[c].dt, 1, &cases[c].b)};
    y = run1(cases[c].op, 14, io, 2);
    check_ints(y, cases[c].dt, &cases[c].want, 1, cases[c].op);
    bb_tensor_release(y);
    release_all(io, 2);
  }

  /* Neg and Abs of MIN wrap to MIN; Relu and Sign on integers */
  const int64_t v[4] = {INT32_MIN, -5, 0, 7};
  const int64_t neg[4] = {INT32_MIN, 5, 0, -7}, abs_[4] = {INT32_MIN, 5, 0, 7}, relu[4] = {0, 0, 0, 7},
                sign[4] = {-1, -1, 0, 1};
  bb_tensor *x = ints(BB_DTYPE_INT32, 4, v);
  const struct {
    const char *op;
    const int64_t *want;
  } un[] = {{"Neg", neg}, {"Abs", abs_}, {"Relu", relu}, {"Sign", sign}};
  for (size_t c = 0; c < 4; c++) {
    y = run1(un[c].op, 14, &x, 1);
    check_ints(y, BB_DTYPE_INT32, un[c].want, 4, un[c].op);
    bb_tensor_release(y);
  }
  bb_tensor_release(x);
  const int64_t uv[3] = {0, 7, 255}, usign[3] = {0, 1, 1};
  x = ints(BB_DTYPE_UINT8, 3, uv);
  y = run1("Abs", 13, &x, 1);
  check_ints(y, BB_DTYPE_UINT8, uv, 3, "uint8 Abs");
  bb_tensor_release(y);
  y = run1("Sign", 13, &x, 1);
  check_ints(y, BB_DTYPE_UINT8, usign, 3, "uint8 Sign");
  bb_tensor_release(y);
  bb_tensor_release(x);
}

/* Mod: integer mod takes the divisor's sign, fmod=1 the dividend's (ONNX's mixed-sign
 * example, worked by hand); a zero divisor gives 0. */
static void test_mod(void) {
  const int64_t a[7] = {-4, 7, 5, 4, -7, 8, 5}, b[7] = {2, -3, 8, -2, 3, 5, 0};
  const int64_t mod[7] = {0, -2, 5, 0, 2, 3, 0}, rem[7] = {0, 1, 5, 0, -1, 3, 0};
  const int32_t types[4] = {BB_DTYPE_INT8, BB_DTYPE_INT16, BB_DTYPE_INT32, BB_DTYPE_INT64};
  for (int t = 0; t < 4; t++) {
    bb_tensor *in[2] = {ints(types[t], 7, a), ints(types[t], 7, b)};
    bb_tensor *y = run1("Mod", 13, in, 2);
    check_ints(y, types[t], mod, 7, "Mod");
    bb_tensor_release(y);
    bb_ir_node *n = node("Mod", 2, 1);
    bb_attr_set_int(model, &n->attrs, "fmod", 1);
    y = NULL;
    run(n, 13, in, 2, &y, 1);
    check_ints(y, types[t], rem, 7, "Mod fmod=1");
    bb_tensor_release(y);
    release_all(in, 2);
  }
  const int64_t ua[3] = {4, 250, 9}, ub[3] = {3, 7, 0}, umod[3] = {1, 5, 0};
  bb_tensor *uin[2] = {ints(BB_DTYPE_UINT8, 3, ua), ints(BB_DTYPE_UINT8, 3, ub)};
  bb_tensor *y = run1("Mod", 13, uin, 2);
  check_ints(y, BB_DTYPE_UINT8, umod, 3, "uint8 Mod");
  bb_tensor_release(y);
  release_all(uin, 2);

  /* Mod of int32 [3,2,5] by a [1] divisor (ONNX's broadcast example), against % written out */
  const int64_t d35[3] = {3, 2, 5};
  bb_tensor *bx[2] = {tensor(BB_DTYPE_INT32, 3, d35), ints(BB_DTYPE_INT32, 1, (const int64_t[]){7})};
  for (int64_t i = 0; i < 30; i++) put_int(bx[0], i, i - 15);
  y = run1("Mod", 13, bx, 2);
  CHECK(has_shape(y, 3, d35));
  for (int64_t i = 0; y && i < 30; i++) {
    int64_t r = (i - 15) % 7;
    if (r < 0) r += 7;
    CHECK_MSG(tensor_int(y, i) == r, "broadcast Mod %lld", (long long)i);
  }
  bb_tensor_release(y);
  release_all(bx, 2);

  /* floating fmod, exact by definition */
  const double fa[6] = {-4.3, 7.2, 5.0, 4.3, -7.2, 8.0}, fb[6] = {2.1, -3.4, 8.0, -2.1, 3.4, 5.0};
  const int32_t ftypes[4] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_BFLOAT16};
  for (int t = 0; t < 4; t++) {
    bb_tensor *in[2] = {vec(ftypes[t], 6, fa), vec(ftypes[t], 6, fb)};
    bb_ir_node *n = node("Mod", 2, 1);
    bb_attr_set_int(model, &n->attrs, "fmod", 1);
    y = NULL;
    CHECK_EQ_INT(run(n, 13, in, 2, &y, 1), 0);
    for (int i = 0; y && i < 6; i++)
      CHECK_MSG(tensor_real(y, i) == round_to(ftypes[t], fmod(tensor_real(in[0], i), tensor_real(in[1], i))), "%s fmod[%d]",
                bb_dtype_name(ftypes[t]), i);
    bb_tensor_release(y);
    /* floats without fmod=1 are an error */
    y = run1("Mod", 13, in, 2);
    CHECK(y == NULL && last_err.code == BB_ERR_INVALID_ARGUMENT && strstr(last_err.message, "fmod"));
    release_all(in, 2);
  }
}

/* ---- Pow with mixed types ----------------------------------------------------------------------- */

static void test_pow_types(void) {
  /* ONNX's test_pow_types_*: [1,2,3] ^ [4,5,6] for every base/exponent pairing */
  const int32_t bases[4] = {BB_DTYPE_FLOAT, BB_DTYPE_INT32, BB_DTYPE_INT64, BB_DTYPE_DOUBLE};
  const int32_t exps[7] = {BB_DTYPE_FLOAT, BB_DTYPE_INT32, BB_DTYPE_INT64, BB_DTYPE_UINT32,
                           BB_DTYPE_UINT64, BB_DTYPE_INT8, BB_DTYPE_DOUBLE};
  const double x[3] = {1, 2, 3}, e[3] = {4, 5, 6}, want[3] = {1, 32, 729};
  for (int bi = 0; bi < 4; bi++)
    for (int ei = 0; ei < 7; ei++) {
      bb_tensor *in[2] = {vec(bases[bi], 3, x), vec(exps[ei], 3, e)};
      bb_tensor *y = run1("Pow", 15, in, 2);
      CHECK_MSG(y && y->dtype == bases[bi], "Pow %s^%s: %s", bb_dtype_name(bases[bi]), bb_dtype_name(exps[ei]),
                last_err.message);
      for (int i = 0; y && i < 3; i++)
        CHECK_MSG(tensor_real(y, i) == want[i], "Pow %s^%s [%d] = %g", bb_dtype_name(bases[bi]), bb_dtype_name(exps[ei]),
                  i, tensor_real(y, i));
      bb_tensor_release(y);
      /* before opset 12 the types must match */
      y = run1("Pow", 11, in, 2);
      CHECK(bases[bi] == exps[ei] ? y != NULL : (y == NULL && last_err.code == BB_ERR_TYPE));
      bb_tensor_release(y);
      release_all(in, 2);
    }

  /* integer powers are exact past 2^53, negative exponents truncate, 0^-1 is defined as 0 */
  const int64_t b64[6] = {3, 2, -1, -1, 0, 5}, e64[6] = {39, -1, -3, -4, -1, 0};
  const int64_t p64[6] = {4052555153018976267LL, 0, -1, 1, 0, 1};
  bb_tensor *in[2] = {ints(BB_DTYPE_INT64, 6, b64), ints(BB_DTYPE_INT64, 6, e64)};
  bb_tensor *y = run1("Pow", 15, in, 2);
  check_ints(y, BB_DTYPE_INT64, p64, 6, "int64 Pow");
  bb_tensor_release(y);
  release_all(in, 2);

  /* an integer base with a fractional exponent truncates the result: 2^0.5 -> 1, 10^-1 -> 0, 9^0.5 -> 3 */
  const int64_t ib[3] = {2, 10, 9}, ir[3] = {1, 0, 3};
  const double fe[3] = {0.5, -1, 0.5};
  bb_tensor *mixed[2] = {ints(BB_DTYPE_INT32, 3, ib), vec(BB_DTYPE_FLOAT, 3, fe)};
  y = run1("Pow", 15, mixed, 2);
  check_ints(y, BB_DTYPE_INT32, ir, 3, "int32^float Pow");
  bb_tensor_release(y);
  release_all(mixed, 2);

  /* a float16 base with an int64 exponent */
  const double hb[3] = {1.5, -2, 0.5};
  const int64_t he[3] = {3, 3, 11};
  bb_tensor *half[2] = {vec(BB_DTYPE_FLOAT16, 3, hb), ints(BB_DTYPE_INT64, 3, he)};
  y = run1("Pow", 15, half, 2);
  CHECK(y && y->dtype == BB_DTYPE_FLOAT16 && tensor_real(y, 0) == 3.375 && tensor_real(y, 1) == -8 && tensor_real(y, 2) == ldexp(1, -11));
  bb_tensor_release(y);
  release_all(half, 2);

  /* bool or uint8 bases are not ONNX Pow types */
  bb_tensor *bad[2] = {ints(BB_DTYPE_UINT8, 1, he), ints(BB_DTYPE_UINT8, 1, he)};
  y = run1("Pow", 15, bad, 2);
  CHECK(y == NULL && last_err.code == BB_ERR_TYPE);
  release_all(bad, 2);
}

/* ---- comparisons and logic ----------------------------------------------------------------------- */

static void test_comparisons(void) {
  const char *ops[5] = {"Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"};
  /* floats with NaN and signed zeros: every comparison with NaN is false, -0 == 0 */
  const double a[5] = {1, NAN, 0.0, 2, -3}, b[5] = {1, 1, -0.0, 3, -4};
  const bool want[5][5] = {{1, 0, 1, 0, 0}, {0, 0, 0, 0, 1}, {0, 0, 0, 1, 0}, {1, 0, 1, 0, 1}, {1, 0, 1, 1, 0}};
  const int32_t ftypes[4] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_BFLOAT16};
  for (int t = 0; t < 4; t++) {
    bb_tensor *in[2] = {vec(ftypes[t], 5, a), vec(ftypes[t], 5, b)};
    for (int o = 0; o < 5; o++) {
      bb_tensor *y = run1(ops[o], 16, in, 2);
      CHECK_MSG(y && y->dtype == BB_DTYPE_BOOL, "%s %s", ops[o], bb_dtype_name(ftypes[t]));
      for (int i = 0; y && i < 5; i++)
        CHECK_MSG(tensor_int(y, i) == want[o][i], "%s %s [%d]", ops[o], bb_dtype_name(ftypes[t]), i);
      bb_tensor_release(y);
    }
    release_all(in, 2);
  }
  /* uint64 values past 2^63 and int64 values past 2^53 compare exactly */
  const int64_t ua[2] = {-1, INT64_MAX}, ub[2] = {-2, INT64_MAX - 1};
  bb_tensor *uin[2] = {ints(BB_DTYPE_UINT64, 2, ua), ints(BB_DTYPE_UINT64, 2, ub)};
  bb_tensor *y = run1("Greater", 13, uin, 2);
  const int64_t both[2] = {1, 1};
  check_ints(y, BB_DTYPE_BOOL, both, 2, "uint64 Greater");
  bb_tensor_release(y);
  release_all(uin, 2);
  bb_tensor *iin[2] = {ints(BB_DTYPE_INT64, 2, ua), ints(BB_DTYPE_INT64, 2, ub)};
  y = run1("Less", 13, iin, 2);
  const int64_t neither[2] = {0, 0};
  check_ints(y, BB_DTYPE_BOOL, neither, 2, "int64 Less");
  bb_tensor_release(y);
  release_all(iin, 2);

  /* broadcast [3,1] against [4] over int16, against a reference */
  const int64_t c31[2] = {3, 1}, c4 = 4, c34[2] = {3, 4};
  bb_tensor *bin[2] = {random_tensor(BB_DTYPE_INT16, 2, c31, -3, 3), random_tensor(BB_DTYPE_INT16, 1, &c4, -3, 3)};
  for (int o = 0; o < 5; o++) {
    y = run1(ops[o], 16, bin, 2);
    CHECK(has_shape(y, 2, c34));
    for (int64_t i = 0; y && i < 12; i++) {
      const int64_t x0 = tensor_int(bin[0], i / 4), x1 = tensor_int(bin[1], i % 4);
      const bool w = o == 0 ? x0 == x1 : o == 1 ? x0 > x1 : o == 2 ? x0 < x1 : o == 3 ? x0 >= x1 : x0 <= x1;
      CHECK_MSG(tensor_int(y, i) == w, "%s broadcast [%lld]", ops[o], (long long)i);
    }
    bb_tensor_release(y);
  }
  release_all(bin, 2);

  /* Equal on bools; mixed types are an error */
  const int64_t p[4] = {0, 0, 1, 1}, q[4] = {0, 1, 0, 1}, eq[4] = {1, 0, 0, 1};
  bb_tensor *bools[2] = {ints(BB_DTYPE_BOOL, 4, p), ints(BB_DTYPE_BOOL, 4, q)};
  y = run1("Equal", 13, bools, 2);
  check_ints(y, BB_DTYPE_BOOL, eq, 4, "bool Equal");
  bb_tensor_release(y);
  y = run1("Greater", 13, bools, 2);
  CHECK(y == NULL && last_err.code == BB_ERR_TYPE);
  bb_tensor_release(bools[1]);
  bools[1] = vec(BB_DTYPE_FLOAT, 4, (const double[]){0, 1, 0, 1});
  y = run1("Equal", 13, bools, 2);
  CHECK(y == NULL && last_err.code == BB_ERR_TYPE && strstr(last_err.message, "float"));
  release_all(bools, 2);
}

static void test_logic(void) {
  /* a [2,1] column against a [1,2] row gives the truth table; a byte 2 counts as true */
  const int64_t c21[2] = {2, 1}, c12[2] = {1, 2}, c22[2] = {2, 2};
  bb_tensor *in[2] = {tensor(BB_DTYPE_BOOL, 2, c21), tensor(BB_DTYPE_BOOL, 2, c12)};
  ((uint8_t *)bb_tensor_data(in[0]))[1] = 2;
  ((uint8_t *)bb_tensor_data(in[1]))[1] = 1;
  const struct {
    const char *op;
    int64_t want[4]; /* (0,0) (0,1) (1,0) (1,1) */
  } cases[3] = {{"And", {0, 0, 0, 1}}, {"Or", {0, 1, 1, 1}}, {"Xor", {0, 1, 1, 0}}};
  for (int c = 0; c < 3; c++) {
    bb_tensor *y = run1(cases[c].op, 7, in, 2);
    CHECK(has_shape(y, 2, c22));
    check_ints(y, BB_DTYPE_BOOL, cases[c].want, 4, cases[c].op);
    bb_tensor_release(y);
  }
  bb_tensor *y = run1("Not", 1, in, 1);
  const int64_t not_[2] = {1, 0};
  check_ints(y, BB_DTYPE_BOOL, not_, 2, "Not");
  bb_tensor_release(y);
  bb_tensor_release(in[1]);
  in[1] = tensor(BB_DTYPE_INT32, 2, c12);
  y = run1("And", 7, in, 2);
  CHECK(y == NULL && last_err.code == BB_ERR_TYPE);
  release_all(in, 2);
}

/* ---- Where, variadic ops ------------------------------------------------------------------------- */

static void test_where(void) {
  /* three-way broadcasts to [2,4,3], for each element size: the condition advancing along
   * the innermost run, then repeated along it */
  const int64_t dout[3] = {2, 4, 3};
  const struct {
    int rc, rx, ry;
    int64_t c[3], x[3], y[3];
  } shapes[2] = {{3, 2, 1, {2, 1, 3}, {4, 1}, {3}}, {2, 3, 1, {4, 1}, {2, 1, 3}, {1}}};
  const int32_t types[5] = {BB_DTYPE_BOOL, BB_DTYPE_FLOAT16, BB_DTYPE_INT32, BB_DTYPE_DOUBLE, BB_DTYPE_INT64};
  for (int s = 0; s < 2; s++)
    for (int t = 0; t < 5; t++) {
      bb_tensor *in[3] = {random_tensor(BB_DTYPE_BOOL, shapes[s].rc, shapes[s].c, 0, 1),
                          random_tensor(types[t], shapes[s].rx, shapes[s].x, -50, 50),
                          random_tensor(types[t], shapes[s].ry, shapes[s].y, -50, 50)};
      bb_tensor *y = run1("Where", 16, in, 3);
      CHECK_MSG(has_shape(y, 3, dout) && y->dtype == types[t], "Where %s: %s", bb_dtype_name(types[t]),
                last_err.message);
      for (int64_t i = 0; y && i < y->numel; i++) {
        const bool c = tensor_int(in[0], broadcast_index(in[0], 3, dout, i)) != 0;
        const bb_tensor *from = c ? in[1] : in[2];
        CHECK_MSG(tensor_real(y, i) == tensor_real(from, broadcast_index(from, 3, dout, i)), "Where #%d %s [%lld]", s,
                  bb_dtype_name(types[t]), (long long)i);
      }
      bb_tensor_release(y);
      release_all(in, 3);
    }
  /* ONNX's long example, same shapes */
  const int64_t d22[2] = {2, 2};
  bb_tensor *in[3] = {tensor(BB_DTYPE_BOOL, 2, d22), tensor(BB_DTYPE_INT64, 2, d22), tensor(BB_DTYPE_INT64, 2, d22)};
  const int64_t cond[4] = {1, 0, 1, 1}, x[4] = {1, 2, 3, 4}, z[4] = {9, 8, 7, 6}, w[4] = {1, 8, 3, 4};
  for (int i = 0; i < 4; i++) put_int(in[0], i, cond[i]), put_int(in[1], i, x[i]), put_int(in[2], i, z[i]);
  bb_tensor *y = run1("Where", 16, in, 3);
  check_ints(y, BB_DTYPE_INT64, w, 4, "Where long");
  bb_tensor_release(y);
  /* a non-bool condition and differing x/y types fail */
  bb_tensor *swapped[3] = {in[1], in[1], in[2]};
  y = run1("Where", 16, swapped, 3);
  CHECK(y == NULL && last_err.code == BB_ERR_TYPE);
  bb_tensor *f = vec(BB_DTYPE_FLOAT, 1, (const double[]){1});
  bb_tensor *mixed[3] = {in[0], in[1], f};
  y = run1("Where", 16, mixed, 3);
  CHECK(y == NULL && last_err.code == BB_ERR_TYPE);
  bb_tensor_release(f);
  release_all(in, 3);
}

static void test_variadic(void) {
  const int64_t d31[2] = {3, 1}, d14[2] = {1, 4}, d4 = 4, d34[2] = {3, 4};
  const char *ops[4] = {"Sum", "Mean", "Max", "Min"};
  const int32_t types[5] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_INT32, BB_DTYPE_UINT8};
  for (int t = 0; t < 5; t++)
    for (int o = 0; o < 4; o++) {
      bb_tensor *in[3] = {random_tensor(types[t], 2, d31, -8, 8), random_tensor(types[t], 2, d14, -8, 8),
                          random_tensor(types[t], 1, &d4, -8, 8)};
      bb_tensor *y = run1(ops[o], 13, in, 3);
      if (o < 2 && !is_float(types[t])) { /* Sum and Mean are floating-point only */
        CHECK_MSG(y == NULL && last_err.code == BB_ERR_TYPE, "%s %s", ops[o], bb_dtype_name(types[t]));
        release_all(in, 3);
        continue;
      }
      CHECK_MSG(has_shape(y, 2, d34), "%s %s: %s", ops[o], bb_dtype_name(types[t]), last_err.message);
      for (int64_t i = 0; y && i < 12; i++) {
        const double v[3] = {tensor_real(in[0], i / 4), tensor_real(in[1], i % 4), tensor_real(in[2], i % 4)};
        double want;
        if (o <= 1) {
          /* float16 rounds after each addition, like any chain of float16 Adds */
          want = round_to(types[t], round_to(types[t], v[0] + v[1]) + v[2]);
          if (o == 1) want = round_to(types[t], want / 3);
        } else {
          want = v[0];
          for (int k = 1; k < 3; k++) want = o == 2 ? fmax(want, v[k]) : fmin(want, v[k]);
        }
        CHECK_MSG(tensor_real(y, i) == want, "%s %s [%lld]: %g vs %g", ops[o], bb_dtype_name(types[t]), (long long)i,
                  tensor_real(y, i), want);
      }
      bb_tensor_release(y);
      /* one input is a copy */
      y = run1(ops[o], 13, in + 2, 1);
      CHECK(y && y->numel == 4 && tensor_real(y, 3) == tensor_real(in[2], 3));
      bb_tensor_release(y);
      release_all(in, 3);
    }
  /* Max and Min let a NaN through */
  const double a[2] = {NAN, 1}, b[2] = {2, NAN};
  bb_tensor *in[2] = {vec(BB_DTYPE_DOUBLE, 2, a), vec(BB_DTYPE_DOUBLE, 2, b)};
  bb_tensor *y = run1("Max", 13, in, 2);
  CHECK(y && isnan(tensor_real(y, 0)) && isnan(tensor_real(y, 1)));
  bb_tensor_release(y);
  release_all(in, 2);
}

/* ---- unary ops ------------------------------------------------------------------------------------ */

typedef struct unary_case {
  const char *op;
  double lo, hi; /* input range */
  const char *attr1;
  double v1;
  const char *attr2;
  double v2;
} unary_case;

static double ref_unary(const unary_case *u, double x) {
  const char *op = u->op;
  if (!strcmp(op, "Neg")) return -x;
  if (!strcmp(op, "Abs")) return fabs(x);
  if (!strcmp(op, "Sqrt")) return sqrt(x);
  if (!strcmp(op, "Exp")) return exp(x);
  if (!strcmp(op, "Log")) return log(x);
  if (!strcmp(op, "Relu")) return x > 0 ? x : 0;
  if (!strcmp(op, "Sigmoid")) return 1 / (1 + exp(-x));
  if (!strcmp(op, "Tanh")) return tanh(x);
  if (!strcmp(op, "LeakyRelu")) return x >= 0 ? x : u->v1 * x;
  if (!strcmp(op, "Reciprocal")) return 1 / x;
  if (!strcmp(op, "Floor")) return floor(x);
  if (!strcmp(op, "Ceil")) return ceil(x);
  if (!strcmp(op, "Sign")) return x > 0 ? 1 : x < 0 ? -1 : 0;
  if (!strcmp(op, "Erf")) return erf(x);
  if (!strcmp(op, "Softplus")) return log1p(exp(x));
  if (!strcmp(op, "Softsign")) return x / (1 + fabs(x));
  if (!strcmp(op, "Elu")) return x >= 0 ? x : u->v1 * expm1(x);
  if (!strcmp(op, "Selu")) return x > 0 ? u->v2 * x : u->v2 * u->v1 * expm1(x);
  if (!strcmp(op, "HardSigmoid")) return fmax(0, fmin(1, u->v1 * x + u->v2));
  return NAN;
}

static void test_unary_float(void) {
  const double selu_alpha = 1.67326319217681884765625, selu_gamma = 1.05070102214813232421875;
  const unary_case cases[] = {
      {"Neg", -10, 10, NULL, 0, NULL, 0},        {"Abs", -10, 10, NULL, 0, NULL, 0},
      {"Sqrt", 0, 100, NULL, 0, NULL, 0},        {"Exp", -20, 20, NULL, 0, NULL, 0},
      {"Log", 0.001, 1000, NULL, 0, NULL, 0},    {"Relu", -5, 5, NULL, 0, NULL, 0},
      {"Sigmoid", -30, 30, NULL, 0, NULL, 0},    {"Tanh", -10, 10, NULL, 0, NULL, 0},
      {"LeakyRelu", -5, 5, NULL, 0.01, NULL, 0}, {"LeakyRelu", -5, 5, "alpha", 0.1, NULL, 0},
      {"Reciprocal", 0.1, 50, NULL, 0, NULL, 0}, {"Floor", -50, 50, NULL, 0, NULL, 0},
      {"Ceil", -50, 50, NULL, 0, NULL, 0},       {"Sign", -3, 3, NULL, 0, NULL, 0},
      {"Erf", -4, 4, NULL, 0, NULL, 0},          {"Softplus", -20, 20, NULL, 0, NULL, 0},
      {"Softsign", -20, 20, NULL, 0, NULL, 0},   {"Elu", -5, 5, NULL, 1, NULL, 0},
      {"Elu", -5, 5, "alpha", 2, NULL, 0},       {"Selu", -5, 5, NULL, selu_alpha, NULL, selu_gamma},
      {"Selu", -5, 5, "alpha", 2, "gamma", 3},   {"HardSigmoid", -5, 5, NULL, 0.2, NULL, 0.5},
      {"HardSigmoid", -5, 5, "alpha", 0.5, "beta", 0.6},
  };
  const int32_t types[4] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_BFLOAT16};
  const double rel[4] = {1e-6, 1e-13, 1.0 / 1024, 1.0 / 128};
  const int64_t n = 700;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int t = 0; t < 4; t++) {
      const unary_case *u = &cases[c];
      bb_tensor *x = random_tensor(types[t], 1, &n, u->lo, u->hi);
      bb_ir_node *nd = node(u->op, 1, 1);
      if (u->attr1) bb_attr_set_float(model, &nd->attrs, u->attr1, (float)u->v1);
      if (u->attr2) bb_attr_set_float(model, &nd->attrs, u->attr2, (float)u->v2);
      bb_tensor *y = NULL;
      const int rc = run(nd, 17, &x, 1, &y, 1);
      const bool bf16_defined = strcmp(u->op, "Softplus") && strcmp(u->op, "Softsign") && strcmp(u->op, "Elu") &&
                                strcmp(u->op, "Selu") && strcmp(u->op, "HardSigmoid");
      if (types[t] == BB_DTYPE_BFLOAT16 && !bf16_defined) {
        CHECK_MSG(rc == BB_ERR_TYPE, "%s takes no bfloat16 in ONNX 1.12", u->op);
      } else {
        int bad = 0;
        CHECK_MSG(rc == 0 && y && y->dtype == types[t], "%s %s: %s", u->op, bb_dtype_name(types[t]),
                  last_err.message);
        for (int64_t i = 0; y && i < n && !bad; i++) {
          /* the float attributes as the op sees them */
          unary_case as_float = *u;
          as_float.v1 = (float)u->v1;
          as_float.v2 = (float)u->v2;
          const double want = round_to(types[t], ref_unary(&as_float, tensor_real(x, i)));
          /* float16 subnormals are coarser than its relative precision */
          const double floor_abs = types[t] == BB_DTYPE_FLOAT16 ? ldexp(1, -24) : 1e-30;
          if (!same_value(tensor_real(y, i), want, rel[t]) && !(fabs(tensor_real(y, i) - want) <= floor_abs)) {
            fprintf(stderr, "%s %s x=%.9g: got %.9g want %.9g\n", u->op, bb_dtype_name(types[t]), tensor_real(x, i),
                    tensor_real(y, i), want);
            bad = 1;
          }
        }
        CHECK_MSG(!bad, "%s %s", u->op, bb_dtype_name(types[t]));
      }
      bb_tensor_release(y);
      bb_tensor_release(x);
    }
}

static void test_unary_special_values(void) {
  const double x[6] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, -1};
  bb_tensor *t = vec(BB_DTYPE_FLOAT, 6, x);
  bb_tensor *y = run1("Relu", 14, &t, 1);
  CHECK(y && isnan(tensor_real(y, 0)) && tensor_real(y, 1) == INFINITY && tensor_real(y, 2) == 0 && tensor_real(y, 5) == 0);
  bb_tensor_release(y);
  y = run1("Sqrt", 13, &t, 1);
  CHECK(y && isnan(tensor_real(y, 0)) && tensor_real(y, 1) == INFINITY && isnan(tensor_real(y, 5)));
  bb_tensor_release(y);
  y = run1("Sigmoid", 13, &t, 1);
  CHECK(y && isnan(tensor_real(y, 0)) && tensor_real(y, 1) == 1 && tensor_real(y, 2) == 0 && tensor_real(y, 3) == 0.5);
  bb_tensor_release(y);
  y = run1("Sign", 13, &t, 1);
  CHECK(y && isnan(tensor_real(y, 0)) && tensor_real(y, 1) == 1 && tensor_real(y, 2) == -1 && tensor_real(y, 3) == 0 && tensor_real(y, 5) == -1);
  bb_tensor_release(y);
  y = run1("Softplus", 1, &t, 1);
  CHECK(y && tensor_real(y, 1) == INFINITY && tensor_real(y, 2) == 0);
  bb_tensor_release(y);
  y = run1("HardSigmoid", 6, &t, 1);
  CHECK(y && isnan(tensor_real(y, 0)) && tensor_real(y, 1) == 1 && tensor_real(y, 2) == 0);
  bb_tensor_release(y);
  bb_tensor_release(t);
  /* large inputs stay finite: softplus(100) = 100, sigmoid(-100) is tiny, not NaN */
  const double big[2] = {100, -100};
  t = vec(BB_DTYPE_DOUBLE, 2, big);
  y = run1("Softplus", 1, &t, 1);
  CHECK(y && tensor_real(y, 0) == 100 && same_value(tensor_real(y, 1), exp(-100), 1e-12));
  bb_tensor_release(y);
  bb_tensor_release(t);
}

/* Round halves to even (ONNX's examples and more, by hand). */
static void test_round(void) {
  const double x[12] = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.3, 2.7, -4.5, 0.9, -2.7, 8388609.0};
  const double want[12] = {0, 2, 2, -0.0, -2, -2, 2, 3, -4, 1, -3, 8388609.0};
  const int32_t types[3] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16};
  for (int t = 0; t < 3; t++) {
    bb_tensor *in = vec(types[t], t == 2 ? 11 : 12, x);
    bb_tensor *y = run1("Round", 11, &in, 1);
    for (int64_t i = 0; y && i < in->numel; i++)
      CHECK_MSG(tensor_real(y, i) == want[i], "Round %s(%g) = %g", bb_dtype_name(types[t]), x[i], tensor_real(y, i));
    bb_tensor_release(y);
    bb_tensor_release(in);
  }
}

/* Erf on integers is computed in double and truncated: erf(n) < 1 for |n| <= 5, and rounds
 * to 1 in double from 6 on. */
static void test_integer_erf(void) {
  const int64_t x[5] = {-7, -1, 0, 3, 6}, want[5] = {-1, 0, 0, 0, 1};
  bb_tensor *t = ints(BB_DTYPE_INT32, 5, x);
  bb_tensor *y = run1("Erf", 13, &t, 1);
  check_ints(y, BB_DTYPE_INT32, want, 5, "int32 Erf");
  bb_tensor_release(y);
  bb_tensor_release(t);
}

/* ---- Clip ------------------------------------------------------------------------------------------- */

static void test_clip(void) {
  const double x[6] = {-3, -1, 0, 1, 3, NAN};
  /* opset 6: attributes */
  bb_tensor *in = vec(BB_DTYPE_FLOAT, 6, x);
  bb_ir_node *n = node("Clip", 1, 1);
  bb_attr_set_float(model, &n->attrs, "min", -1.5f);
  bb_attr_set_float(model, &n->attrs, "max", 2.0f);
  bb_tensor *y = NULL;
  CHECK_EQ_INT(run(n, 6, &in, 1, &y, 1), 0);
  const double w6[6] = {-1.5, -1, 0, 1, 2, NAN};
  for (int i = 0; y && i < 6; i++) CHECK(same_value(tensor_real(y, i), w6[i], 0));
  bb_tensor_release(y);

  /* opset 13: optional inputs; min only, max only (min omitted), neither */
  bb_tensor *lo = from_values(BB_DTYPE_FLOAT, 0, NULL, (const double[]){-0.5});
  bb_tensor *hi = from_values(BB_DTYPE_FLOAT, 0, NULL, (const double[]){0.5});
  bb_tensor *args[4][3] = {{in, lo, hi}, {in, lo, NULL}, {in, NULL, hi}, {in, NULL, NULL}};
  const double want[4][6] = {{-0.5, -0.5, 0, 0.5, 0.5, NAN}, {-0.5, -0.5, 0, 1, 3, NAN},
                             {-3, -1, 0, 0.5, 0.5, NAN}, {-3, -1, 0, 1, 3, NAN}};
  for (int c = 0; c < 4; c++) {
    y = run1("Clip", 13, args[c], 3);
    for (int i = 0; y && i < 6; i++) CHECK_MSG(same_value(tensor_real(y, i), want[c][i], 0), "Clip case %d [%d]", c, i);
    CHECK(y != NULL);
    bb_tensor_release(y);
  }
  /* min > max gives max everywhere */
  bb_tensor *swapped[3] = {in, hi, lo};
  y = run1("Clip", 13, swapped, 3);
  for (int i = 0; y && i < 5; i++) CHECK(tensor_real(y, i) == -0.5);
  bb_tensor_release(y);
  /* a bound of another type, or not a scalar, fails */
  bb_tensor *dlo = from_values(BB_DTYPE_DOUBLE, 0, NULL, (const double[]){-0.5});
  bb_tensor *mixed[2] = {in, dlo};
  y = run1("Clip", 13, mixed, 2);
  CHECK(y == NULL && last_err.code == BB_ERR_TYPE);
  bb_tensor *two = vec(BB_DTYPE_FLOAT, 2, (const double[]){0, 1});
  bb_tensor *nonscalar[2] = {in, two};
  y = run1("Clip", 13, nonscalar, 2);
  CHECK(y == NULL && last_err.code == BB_ERR_INVALID_ARGUMENT);
  /* before opset 11 bounds are attributes, not inputs */
  y = run1("Clip", 6, args[0], 3);
  CHECK(y == NULL && last_err.code == BB_ERR_INVALID_ARGUMENT);
  bb_tensor_release(two);
  bb_tensor_release(dlo);
  bb_tensor_release(lo);
  bb_tensor_release(hi);
  bb_tensor_release(in);

  /* int8 with ONNX's default bounds (the type's limits), and with a min */
  const int64_t xi[5] = {-128, -6, 0, 6, 127};
  bb_tensor *xi8 = ints(BB_DTYPE_INT8, 5, xi), *min8 = ints(BB_DTYPE_INT8, 1, (const int64_t[]){0});
  y = run1("Clip", 13, &xi8, 1);
  check_ints(y, BB_DTYPE_INT8, xi, 5, "int8 Clip default");
  bb_tensor_release(y);
  bb_tensor *im[2] = {xi8, min8};
  y = run1("Clip", 13, im, 2);
  const int64_t wmin[5] = {0, 0, 0, 6, 127};
  check_ints(y, BB_DTYPE_INT8, wmin, 5, "int8 Clip min");
  bb_tensor_release(y);
  release_all(im, 2);

  /* float16: default bounds are +-65504, so infinities clip to them */
  const double hx[3] = {-INFINITY, 1.5, INFINITY};
  bb_tensor *h = vec(BB_DTYPE_FLOAT16, 3, hx);
  y = run1("Clip", 13, &h, 1);
  CHECK(y && tensor_real(y, 0) == -65504 && tensor_real(y, 1) == 1.5 && tensor_real(y, 2) == 65504);
  bb_tensor_release(y);
  bb_tensor_release(h);
}

/* ---- Cast ------------------------------------------------------------------------------------------- */

static const int32_t ALL_TYPES[] = {BB_DTYPE_FLOAT, BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_BFLOAT16,
                                    BB_DTYPE_INT8,  BB_DTYPE_INT16,  BB_DTYPE_INT32,   BB_DTYPE_INT64,
                                    BB_DTYPE_UINT8, BB_DTYPE_UINT16, BB_DTYPE_UINT32,  BB_DTYPE_UINT64,
                                    BB_DTYPE_BOOL};
#define N_ALL (sizeof ALL_TYPES / sizeof ALL_TYPES[0])

/* The documented float -> integer rule: truncate, NaN -> 0, saturate at the int64 range,
 * then wrap to the width of dt (uint64 keeps [2^63, 2^64) and saturates above). */
static int64_t float_to_int(int32_t dt, double v) {
  if (isnan(v)) return 0;
  if (dt == BB_DTYPE_UINT64 && v >= 9223372036854775808.0)
    return v >= 18446744073709551616.0 ? -1 : (int64_t)(uint64_t)v;
  const double t = trunc(v);
  const int64_t i = t >= 9223372036854775808.0 ? INT64_MAX : t < -9223372036854775808.0 ? INT64_MIN : (int64_t)t;
  return wrap(dt, i);
}

/* Every source type to every target type over special values, against the rules written
 * out; the floating targets against the value search above. */
static void test_cast_matrix(void) {
  const double fvals[] = {0, -0.0, 1, -1, 2.5, -2.5, 2.7, -2.7, 127, 128, 255, 256, 300, -129, 65504, 65520,
                          1e10, -1e10, 1e19, 1e20, -1e20, 1.8446744073709552e19, 1e30, NAN, INFINITY, -INFINITY, 1e-8,
                          /* a float16 / bfloat16 rounding that a pass through float would get wrong */
                          ldexp(1 + ldexp(1, -40), -25), 1 + ldexp(1, -8) + ldexp(1, -40), 0.1, 1.0 / 3};
  const int64_t ivals[] = {0, 1, -1, 127, -128, 255, 300, 65535, 65536, -40000, 2147483647, -2147483647 - 1,
                           (1LL << 40) + 3, (1LL << 53) + 1, INT64_MIN, INT64_MAX, 16777217};
  const int64_t nf = sizeof fvals / sizeof fvals[0], ni = sizeof ivals / sizeof ivals[0];
  for (size_t s = 0; s < N_ALL; s++) {
    const int32_t src = ALL_TYPES[s];
    const int64_t n = is_float(src) ? nf : ni;
    bb_tensor *x = tensor(src, 1, &n);
    for (int64_t i = 0; i < n; i++) {
      if (is_float(src)) put(x, i, fvals[i]);
      else put_int(x, i, ivals[i]);
    }
    for (size_t d = 0; d < N_ALL; d++) {
      const int32_t dst = ALL_TYPES[d];
      bb_ir_node *nd = node("Cast", 1, 1);
      bb_attr_set_int(model, &nd->attrs, "to", dst);
      bb_tensor *y = NULL;
      CHECK_MSG(run(nd, 13, &x, 1, &y, 1) == 0 && y && y->dtype == dst, "Cast %s->%s: %s", bb_dtype_name(src),
                bb_dtype_name(dst), last_err.message);
      int bad = 0;
      for (int64_t i = 0; y && i < n && !bad; i++) {
        /* the source value exactly: double for floats, int64 (or uint64 bits) for integers */
        const double sv = tensor_real(x, i);
        const int64_t si = is_float(src) ? 0 : tensor_int(x, i);
        const double exact = is_float(src) ? sv : src == BB_DTYPE_UINT64 ? (double)(uint64_t)si : (double)si;
        if (dst == BB_DTYPE_BOOL) {
          bad = tensor_int(y, i) != (is_float(src) ? (sv != 0) : (si != 0));
        } else if (dst == BB_DTYPE_FLOAT16 || dst == BB_DTYPE_BFLOAT16) {
          bad = ((const uint16_t *)bb_tensor_data(y))[i] != nearest_half(exact, dst == BB_DTYPE_BFLOAT16) &&
                !(isnan(exact) && isnan(tensor_real(y, i)));
        } else if (is_float(dst)) {
          bad = !same_value(tensor_real(y, i), round_to(dst, exact), 0);
        } else if (is_float(src)) {
          bad = tensor_int(y, i) != float_to_int(dst, sv);
        } else {
          bad = tensor_int(y, i) != wrap(dst, si);
        }
        if (bad)
          fprintf(stderr, "Cast %s->%s of %.17g: got %.17g (bits %lld)\n", bb_dtype_name(src), bb_dtype_name(dst),
                  exact, tensor_real(y, i), (long long)tensor_int(y, i));
      }
      CHECK_MSG(!bad, "Cast %s->%s", bb_dtype_name(src), bb_dtype_name(dst));
      bb_tensor_release(y);
    }
    bb_tensor_release(x);
  }
}

static void test_cast_hand_cases(void) {
  /* float16 boundaries: 65520 is the tie between the largest value and overflow (to even:
   * infinity), 2^-25 the tie between 0 and the smallest subnormal (to even: 0) */
  const double v[6] = {1.0, 65504, 65519.99, 65520, ldexp(1, -24), ldexp(1, -25)};
  const uint16_t h[6] = {0x3c00, 0x7bff, 0x7bff, 0x7c00, 0x0001, 0x0000};
  bb_tensor *x = vec(BB_DTYPE_DOUBLE, 6, v);
  bb_ir_node *nd = node("Cast", 1, 1);
  bb_attr_set_int(model, &nd->attrs, "to", BB_DTYPE_FLOAT16);
  bb_tensor *y = NULL;
  run(nd, 13, &x, 1, &y, 1);
  for (int i = 0; y && i < 6; i++) CHECK_MSG(((uint16_t *)bb_tensor_data(y))[i] == h[i], "f16 %d", i);
  bb_tensor_release(y);
  bb_tensor_release(x);

  /* float -> integer: truncation, NaN -> 0, wrap of in-range-of-int64 values */
  const double fx[6] = {2.7, -2.7, NAN, 300, -1, 1e20};
  bb_tensor *f = vec(BB_DTYPE_FLOAT, 6, fx);
  const int64_t u8[6] = {2, 254, 0, 44, 255, 255}, i64[6] = {2, -2, 0, 300, -1, INT64_MAX};
  nd = node("Cast", 1, 1);
  bb_attr_set_int(model, &nd->attrs, "to", BB_DTYPE_UINT8);
  y = NULL;
  run(nd, 13, &f, 1, &y, 1);
  check_ints(y, BB_DTYPE_UINT8, u8, 6, "float->uint8");
  bb_tensor_release(y);
  /* opset 1-5 name the type with a string */
  nd = node("Cast", 1, 1);
  bb_attr_set_string(model, &nd->attrs, "to", "INT64");
  y = NULL;
  CHECK_EQ_INT(run(nd, 5, &f, 1, &y, 1), 0);
  check_ints(y, BB_DTYPE_INT64, i64, 6, "float->int64");
  bb_tensor_release(y);

  /* same type: a new header over the same buffer */
  nd = node("Cast", 1, 1);
  bb_attr_set_int(model, &nd->attrs, "to", BB_DTYPE_FLOAT);
  y = NULL;
  run(nd, 13, &f, 1, &y, 1);
  CHECK(y && y != f && y->buffer == f->buffer);
  bb_tensor_release(y);

  /* CastLike takes the type of its second input */
  bb_tensor *like[2] = {f, ints(BB_DTYPE_INT16, 1, (const int64_t[]){0})};
  y = run1("CastLike", 15, like, 2);
  CHECK(y && y->dtype == BB_DTYPE_INT16 && tensor_int(y, 0) == 2 && tensor_int(y, 3) == 300);
  bb_tensor_release(y);
  bb_tensor_release(like[1]);

  /* errors: STRING is unsupported, 99 and a missing `to` are invalid */
  nd = node("Cast", 1, 1);
  bb_attr_set_int(model, &nd->attrs, "to", BB_DTYPE_STRING);
  y = NULL;
  CHECK(run(nd, 13, &f, 1, &y, 1) == BB_ERR_UNSUPPORTED && y == NULL);
  nd = node("Cast", 1, 1);
  bb_attr_set_int(model, &nd->attrs, "to", 99);
  CHECK(run(nd, 13, &f, 1, &y, 1) == BB_ERR_INVALID_ARGUMENT && y == NULL);
  CHECK(run(node("Cast", 1, 1), 13, &f, 1, &y, 1) == BB_ERR_INVALID_ARGUMENT && y == NULL);
  bb_tensor_release(f);
}

/* ---- Identity, Dropout ----------------------------------------------------------------------------- */

static void test_identity_and_dropout(void) {
  const int64_t d23[2] = {2, 3};
  bb_tensor *x = random_tensor(BB_DTYPE_FLOAT, 2, d23, -1, 1);
  bb_tensor *y = run1("Identity", 16, &x, 1);
  CHECK(y && y != x && y->buffer == x->buffer && has_shape(y, 2, d23));
  bb_tensor_release(y);

  /* opset 13 inference: output is input, mask all true */
  bb_tensor *out[2] = {NULL, NULL};
  CHECK_EQ_INT(run(node("Dropout", 1, 2), 13, &x, 1, out, 2), 0);
  CHECK(out[0] && out[0]->buffer == x->buffer);
  CHECK(out[1] && out[1]->dtype == BB_DTYPE_BOOL && has_shape(out[1], 2, d23));
  for (int i = 0; out[1] && i < 6; i++) CHECK(tensor_int(out[1], i) == 1);
  release_all(out, 2);

  bb_tensor *ratio = from_values(BB_DTYPE_FLOAT, 0, NULL, (const double[]){0.3});
  bb_tensor *off = ints(BB_DTYPE_BOOL, 1, (const int64_t[]){0}), *on = ints(BB_DTYPE_BOOL, 1, (const int64_t[]){1});
  bb_tensor *zero = from_values(BB_DTYPE_FLOAT, 0, NULL, (const double[]){0});
  bb_tensor *with_ratio[3] = {x, ratio, off};
  CHECK_EQ_INT(run(node("Dropout", 3, 1), 13, with_ratio, 3, out, 1), 0);
  CHECK(out[0] && out[0]->buffer == x->buffer);
  release_all(out, 1);
  /* training with ratio 0 is the identity; with a positive ratio it is unsupported */
  bb_tensor *train0[3] = {x, zero, on}, *train[3] = {x, ratio, on};
  CHECK_EQ_INT(run(node("Dropout", 3, 1), 13, train0, 3, out, 1), 0);
  release_all(out, 1);
  CHECK_EQ_INT(run(node("Dropout", 3, 1), 13, train, 3, out, 1), BB_ERR_UNSUPPORTED);
  CHECK(strstr(last_err.message, "training"));
  bb_tensor *bad_ratio = from_values(BB_DTYPE_FLOAT, 0, NULL, (const double[]){1.5});
  bb_tensor *bad[2] = {x, bad_ratio};
  CHECK_EQ_INT(run(node("Dropout", 2, 1), 13, bad, 2, out, 1), BB_ERR_INVALID_ARGUMENT);

  /* opset 7: the mask has the input's type; opset 6 with is_test=0 asks for training */
  CHECK_EQ_INT(run(node("Dropout", 1, 2), 7, &x, 1, out, 2), 0);
  CHECK(out[1] && out[1]->dtype == BB_DTYPE_FLOAT && tensor_real(out[1], 5) == 1.0);
  release_all(out, 2);
  bb_ir_node *n6 = node("Dropout", 1, 1);
  bb_attr_set_int(model, &n6->attrs, "is_test", 0);
  CHECK_EQ_INT(run(n6, 6, &x, 1, out, 1), BB_ERR_UNSUPPORTED);
  /* ints are not Dropout types */
  bb_tensor *xi = ints(BB_DTYPE_INT32, 1, (const int64_t[]){1});
  CHECK_EQ_INT(run(node("Dropout", 1, 1), 13, &xi, 1, out, 1), BB_ERR_TYPE);
  bb_tensor *rel[] = {xi, ratio, off, on, zero, bad_ratio, x};
  release_all(rel, sizeof rel / sizeof rel[0]);
}

/* ---- errors and legacy broadcasting ------------------------------------------------------------------- */

static void test_errors_name_the_node(void) {
  const int64_t d23[2] = {2, 3}, d43[2] = {4, 3};
  bb_tensor *in[2] = {tensor(BB_DTYPE_FLOAT, 2, d23), tensor(BB_DTYPE_FLOAT, 2, d43)};
  bb_ir_node *n = node("Add", 2, 1);
  bb_tensor *y = NULL;
  CHECK_EQ_INT(run(n, 14, in, 2, &y, 1), BB_ERR_TYPE);
  CHECK_MSG(strstr(last_err.message, n->name) && strstr(last_err.message, "broadcast"), "%s", last_err.message);
  bb_tensor_release(in[1]);
  in[1] = tensor(BB_DTYPE_INT32, 2, d23);
  CHECK_EQ_INT(run(n, 14, in, 2, &y, 1), BB_ERR_TYPE);
  CHECK_MSG(strstr(last_err.message, "int32") && strstr(last_err.message, "float"), "%s", last_err.message);
  release_all(in, 2);
  /* bool is not a type Add takes */
  bb_tensor *b[2] = {tensor(BB_DTYPE_BOOL, 2, d23), tensor(BB_DTYPE_BOOL, 2, d23)};
  CHECK_EQ_INT(run(n, 14, b, 2, &y, 1), BB_ERR_TYPE);
  CHECK_MSG(strstr(last_err.message, "bool"), "%s", last_err.message);
  /* a variadic op with one mismatching input, and one that does not broadcast */
  bb_tensor *f = tensor(BB_DTYPE_FLOAT, 2, d23), *g = tensor(BB_DTYPE_DOUBLE, 2, d23);
  bb_tensor *h = tensor(BB_DTYPE_FLOAT, 2, d43);
  bb_tensor *v1[3] = {f, f, g}, *v2[3] = {f, f, h};
  CHECK(run1("Max", 13, v1, 3) == NULL && last_err.code == BB_ERR_TYPE);
  CHECK(run1("Sum", 13, v2, 3) == NULL && last_err.code == BB_ERR_TYPE && strstr(last_err.message, "input 2"));
  bb_tensor *rel[] = {b[0], b[1], f, g, h};
  release_all(rel, 5);
  /* an op at an opset before it existed is unknown */
  bb_tensor *x = tensor(BB_DTYPE_FLOAT, 2, d23);
  CHECK(run1("GreaterOrEqual", 11, (bb_tensor *[]){x, x}, 2) == NULL && last_err.code == BB_ERR_UNSUPPORTED);
  bb_tensor_release(x);
}

/* Opsets before 7: B broadcasts onto A only with broadcast=1, aligned at axis. */
static void test_legacy_broadcast(void) {
  const int64_t da[3] = {2, 3, 4}, d3 = 3, d4 = 4, d34[2] = {3, 4};
  bb_tensor *a = random_tensor(BB_DTYPE_FLOAT, 3, da, -5, 5);
  bb_tensor *b3 = random_tensor(BB_DTYPE_FLOAT, 1, &d3, -5, 5), *b4 = random_tensor(BB_DTYPE_FLOAT, 1, &d4, -5, 5);
  bb_tensor *b34 = random_tensor(BB_DTYPE_FLOAT, 2, d34, -5, 5);
  /* axis 1 with B [3]: B[j] is added along the middle dimension */
  bb_ir_node *n = node("Sub", 2, 1);
  bb_attr_set_int(model, &n->attrs, "broadcast", 1);
  bb_attr_set_int(model, &n->attrs, "axis", 1);
  bb_tensor *y = NULL, *in[2] = {a, b3};
  CHECK_EQ_INT(run(n, 6, in, 2, &y, 1), 0);
  for (int64_t i = 0; y && i < 24; i++) CHECK(tensor_real(y, i) == (float)(tensor_real(a, i) - tensor_real(b3, (i / 4) % 3)));
  bb_tensor_release(y);
  /* default axis: trailing */
  n = node("Mul", 2, 1);
  bb_attr_set_int(model, &n->attrs, "broadcast", 1);
  in[1] = b34;
  y = NULL;
  CHECK_EQ_INT(run(n, 6, in, 2, &y, 1), 0);
  for (int64_t i = 0; y && i < 24; i++) CHECK(tensor_real(y, i) == (float)(tensor_real(a, i) * tensor_real(b34, i % 12)));
  bb_tensor_release(y);
  /* B [3] at the default (trailing) axis does not fit; without broadcast=1 shapes must match */
  in[1] = b3;
  CHECK_EQ_INT(run(n, 6, in, 2, &y, 1), BB_ERR_TYPE);
  in[1] = b4;
  CHECK_EQ_INT(run(node("Add", 2, 1), 6, in, 2, &y, 1), BB_ERR_TYPE);
  /* the same inputs at opset 7 broadcast the numpy way */
  CHECK_EQ_INT(run(node("Add", 2, 1), 7, in, 2, &y, 1), 0);
  bb_tensor_release(y);
  bb_tensor *rel[] = {a, b3, b4, b34};
  release_all(rel, 4);
}

/* ---- the declared types -------------------------------------------------------------------------------- */

/* Whether name is one of the sep-separated words of list. */
static bool listed(const char *list, const char *name, char sep) {
  const size_t len = strlen(name);
  for (const char *p = list; (p = strstr(p, name)); p += len)
    if ((p == list || p[-1] == sep) && (p[len] == sep || p[len] == '\0')) return true;
  return false;
}

/* Every elementwise op runs on exactly the types its table entry lists and rejects the
 * others with BB_ERR_TYPE. */
static void test_types_match_the_table(void) {
  static const char *const ops[] = {"Abs", "Add", "And", "Cast", "CastLike", "Ceil", "Clip", "Div", "Dropout",
                                    "Elu", "Equal", "Erf", "Exp", "Floor", "Greater", "GreaterOrEqual",
                                    "HardSigmoid", "Identity", "LeakyRelu", "Less", "LessOrEqual", "Log", "Max",
                                    "Mean", "Min", "Mod", "Mul", "Neg", "Not", "Or", "Pow", "Reciprocal", "Relu",
                                    "Round", "Selu", "Sigmoid", "Sign", "Softplus", "Softsign", "Sqrt", "Sub",
                                    "Sum", "Tanh", "Where", "Xor"};
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
    const char *types = NULL;
    for (size_t i = 0; i < bb_cpu_op_count(); i++)
      if (!strcmp(bb_cpu_op_name(i), ops[o])) types = bb_cpu_op_types(i);
    CHECK_MSG(types != NULL, "%s is not registered", ops[o]);
    if (!types) continue;
    for (size_t t = 0; t < N_ALL; t++) {
      const int32_t dt = ALL_TYPES[t];
      const int64_t two = 2;
      bb_tensor *x = tensor(dt, 1, &two), *cond = tensor(BB_DTYPE_BOOL, 1, &two);
      bb_ir_node *n;
      bb_tensor *in[3] = {x, x, x};
      size_t n_in = 2;
      const char *op = ops[o];
      if (!strcmp(op, "Where")) {
        in[0] = cond, n_in = 3;
      } else if (listed("Abs Cast Ceil Clip Dropout Elu Erf Exp Floor HardSigmoid Identity LeakyRelu Log Neg Not "
                        "Reciprocal Relu Round Selu Sigmoid Sign Softplus Softsign Sqrt Tanh",
                        op, ' ')) {
        n_in = 1;
      }
      n = node(op, n_in, 1);
      if (!strcmp(op, "Cast")) bb_attr_set_int(model, &n->attrs, "to", BB_DTYPE_FLOAT);
      if (!strcmp(op, "Mod")) bb_attr_set_int(model, &n->attrs, "fmod", 1);
      bb_tensor *y = NULL;
      const int rc = run(n, 17, in, n_in, &y, 1);
      if (listed(types, bb_dtype_name(dt), ','))
        CHECK_MSG(rc == 0 && y, "%s on %s (listed): %s", op, bb_dtype_name(dt), last_err.message);
      else
        CHECK_MSG(rc == BB_ERR_TYPE && !y, "%s on %s (not listed): rc %d", op, bb_dtype_name(dt), rc);
      bb_tensor_release(y);
      bb_tensor_release(x);
      bb_tensor_release(cond);
    }
  }
}

int main(void) {
  model = bb_model_new(NULL);
  if (!model) return 2;
  RUN(test_plan_merges_and_broadcasts);
  RUN(test_binary_arithmetic_broadcast);
  RUN(test_large_float_broadcast);
  RUN(test_integer_division_and_wrapping);
  RUN(test_mod);
  RUN(test_pow_types);
  RUN(test_comparisons);
  RUN(test_logic);
  RUN(test_where);
  RUN(test_variadic);
  RUN(test_unary_float);
  RUN(test_unary_special_values);
  RUN(test_round);
  RUN(test_integer_erf);
  RUN(test_clip);
  RUN(test_cast_matrix);
  RUN(test_cast_hand_cases);
  RUN(test_identity_and_dropout);
  RUN(test_errors_name_the_node);
  RUN(test_legacy_broadcast);
  RUN(test_types_match_the_table);
  bb_model_free(model);
  return bb_test_finish();
}
