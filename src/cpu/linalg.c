/* CPU operators: matrix products (MatMul, Gemm). float32 runs on the packed, blocked
 * GEMM kernels; the other types on straightforward loops with wide accumulators. */
#include <string.h>

#include "cpu/cpu_op.h"
#include "tensor/kernels/kernels.h"
#include "util/mem.h"

static const int32_t MATMUL_TYPES[] = {BB_DTYPE_FLOAT,  BB_DTYPE_DOUBLE, BB_DTYPE_FLOAT16, BB_DTYPE_BFLOAT16,
                                       BB_DTYPE_INT32,  BB_DTYPE_INT64,  BB_DTYPE_UINT32,  BB_DTYPE_UINT64,
                                       BB_DTYPE_UNDEFINED};

static bool is_int(int32_t dt) {
  return dt == BB_DTYPE_INT32 || dt == BB_DTYPE_INT64 || dt == BB_DTYPE_UINT32 || dt == BB_DTYPE_UINT64;
}

/* C[m×n] (+)= A·B for one matrix of a batch, any type except f32: element access through
 * the generic helpers, accumulated in double or int64. */
static void matmul_generic(const bb_tensor *a, int64_t a_off, const bb_tensor *b, int64_t b_off, bb_tensor *c,
                           int64_t c_off, int64_t m, int64_t n, int64_t k) {
  bool ints = is_int(c->dtype);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      if (ints) {
        int64_t acc = 0;
        for (int64_t p = 0; p < k; p++)
          acc += bbi_cpu_get_i64(a, a_off + i * k + p) * bbi_cpu_get_i64(b, b_off + p * n + j);
        bbi_cpu_set_i64(c, c_off + i * n + j, acc);
      } else {
        double acc = 0;
        for (int64_t p = 0; p < k; p++)
          acc += bbi_cpu_get_f64(a, a_off + i * k + p) * bbi_cpu_get_f64(b, b_off + p * n + j);
        bbi_cpu_set_f64(c, c_off + i * n + j, acc);
      }
    }
}

/* op(B) of a product of more than one row and column packed once per session when B is one
 * of the session's constants (the node's cache; NULL otherwise, and the GEMM packs it on
 * every call): the same panels the GEMM would pack, so the same bits. */
enum { PACKED_B = 1 };
static const void *kept_packed_b(bbi_cpu_op_ctx *ctx, const bbi_f32_gemm_args *g, int trans_b, const float *b,
                                 size_t ldb) {
  if (g->m < 2 || g->n < 2) return NULL;
  const size_t bytes = bbi_f32_gemm_packed_b_size(NULL, g->n, g->k);
  bool fresh;
  char *packed = bbi_cpu_node_cache_get(ctx, 1, PACKED_B, bytes + 64, &fresh);
  if (!packed) return NULL;
  packed = (char *)(((uintptr_t)packed + 63) & ~(uintptr_t)63);
  if (fresh && bbi_f32_gemm_pack_b(NULL, g->n, g->k, trans_b, b, ldb, packed, bytes)) {
    ctx->state->cache->kind = 0; /* nothing kept: the next call packs again */
    return NULL;
  }
  return packed;
}

/* numpy.matmul semantics: 1-D operands are promoted (and the added axis dropped again),
 * leading batch dimensions broadcast. */
static int op_matmul(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *a = ctx->inputs[0], *b = ctx->inputs[1];
  int rc = bbi_cpu_expect_dtype(ctx, 0, MATMUL_TYPES);
  if (rc) return rc;
  if (b->dtype != a->dtype)
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "inputs have different element types (%s and %s)", bb_dtype_name(a->dtype),
                       bb_dtype_name(b->dtype));
  if (a->rank == 0 || b->rank == 0) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "MatMul does not take scalars");
  int64_t ad[BB_MAX_RANK + 1], bd[BB_MAX_RANK + 1];
  int ar = a->rank, br = b->rank;
  memcpy(ad, a->dims, sizeof a->dims);
  memcpy(bd, b->dims, sizeof b->dims);
  if (ar == 1) ad[1] = ad[0], ad[0] = 1, ar = 2;
  if (br == 1) bd[1] = 1, br = 2;
  int64_t m = ad[ar - 2], k = ad[ar - 1], n = bd[br - 1];
  if (bd[br - 2] != k) {
    char sa[96], sb[96];
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "inner dimensions differ: %s · %s", bb_tensor_describe(a, sa, sizeof sa),
                       bb_tensor_describe(b, sb, sizeof sb));
  }
  int batch_rank;
  int64_t batch[BB_MAX_RANK];
  rc = bb_broadcast_shapes(ar - 2, ad, br - 2, bd, &batch_rank, batch, ctx->err);
  if (rc) return bbi_cpu_fail(ctx, rc, "batch dimensions: %s", ctx->err ? ctx->err->message : "");
  int64_t out[BB_MAX_RANK + 2];
  int out_rank = 0;
  for (int i = 0; i < batch_rank; i++) out[out_rank++] = batch[i];
  if (a->rank > 1) out[out_rank++] = m;
  if (b->rank > 1) out[out_rank++] = n;
  if (out_rank > BB_MAX_RANK) return bbi_cpu_fail(ctx, BB_ERR_UNSUPPORTED, "output rank %d is over %d", out_rank, BB_MAX_RANK);
  rc = bbi_cpu_make_output(ctx, 0, a->dtype, out_rank, out);
  if (rc) return rc;
  bb_tensor *c = ctx->outputs[0];
  int64_t n_batch = 1;
  for (int i = 0; i < batch_rank; i++) n_batch *= batch[i];
  if (!c->numel) return 0;

  size_t scratch_size = 0;
  void *scratch = NULL;
  if (a->dtype == BB_DTYPE_FLOAT) {
    scratch_size = bbi_f32_gemm_scratch_size((size_t)m, (size_t)n, (size_t)k);
    scratch = scratch_size ? bbi_cpu_scratch(ctx, scratch_size) : NULL;
    if (scratch_size && !scratch) return BB_ERR_NOMEM;
  }
  for (int64_t bi = 0; bi < n_batch; bi++) {
    /* offsets of this batch entry in A and B, following broadcast (size-1) dims */
    int64_t rem = bi, a_mat = 0, b_mat = 0, a_stride = 1, b_stride = 1;
    for (int d = batch_rank - 1; d >= 0; d--) {
      int64_t idx = rem % batch[d];
      rem /= batch[d];
      int da = d - (batch_rank - (ar - 2)), db = d - (batch_rank - (br - 2));
      if (da >= 0) {
        if (ad[da] != 1) a_mat += idx * a_stride;
        a_stride *= ad[da];
      }
      if (db >= 0) {
        if (bd[db] != 1) b_mat += idx * b_stride;
        b_stride *= bd[db];
      }
    }
    int64_t a_off = a_mat * m * k, b_off = b_mat * k * n, c_off = bi * m * n;
    if (a->dtype == BB_DTYPE_FLOAT) {
      bbi_f32_gemm_args g;
      memset(&g, 0, sizeof g);
      g.m = (size_t)m, g.n = (size_t)n, g.k = (size_t)k;
      g.alpha = 1.0f;
      g.a = (const float *)bb_tensor_data(a) + a_off, g.lda = (size_t)k;
      g.b = (const float *)bb_tensor_data(b) + b_off, g.ldb = (size_t)n;
      g.c = (float *)bb_tensor_data(c) + c_off, g.ldc = (size_t)n;
      if (n_batch == 1 && b->rank == 2) g.packed_b = kept_packed_b(ctx, &g, 0, g.b, g.ldb);
      if (bbi_f32_gemm(&g, scratch, scratch_size))
        return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "GEMM rejected its arguments");
    } else {
      matmul_generic(a, a_off, b, b_off, c, c_off, m, n, k);
    }
  }
  return 0;
}

/* Gemm: Y = alpha·op(A)·op(B) + beta·C, C broadcast unidirectionally to [M, N]. */
static int op_gemm(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *a = ctx->inputs[0], *b = ctx->inputs[1], *cin = bbi_cpu_input(ctx, 2);
  int rc = bbi_cpu_expect_dtype(ctx, 0, MATMUL_TYPES);
  if (rc) return rc;
  if (b->dtype != a->dtype || (cin && cin->dtype != a->dtype))
    return bbi_cpu_fail(ctx, BB_ERR_TYPE, "inputs must share one element type");
  if (a->rank != 2 || b->rank != 2) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "A and B must be 2-D");
  const bb_attrlist *at = &ctx->node->attrs;
  int trans_a = (int)bb_attr_get_int(at, "transA", 0), trans_b = (int)bb_attr_get_int(at, "transB", 0);
  float alpha = bb_attr_get_float(at, "alpha", 1.0f), beta = bb_attr_get_float(at, "beta", 1.0f);
  int64_t m = trans_a ? a->dims[1] : a->dims[0], k = trans_a ? a->dims[0] : a->dims[1];
  int64_t kb = trans_b ? b->dims[1] : b->dims[0], n = trans_b ? b->dims[0] : b->dims[1];
  if (k != kb) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "inner dimensions differ (%lld vs %lld)", (long long)k, (long long)kb);
  int64_t out[2] = {m, n};
  /* C must broadcast to [M, N] (unidirectionally) */
  if (cin) {
    if (cin->rank > 2) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "C has rank %d", cin->rank);
    for (int i = 0; i < cin->rank; i++) {
      int64_t want = out[2 - cin->rank + i];
      if (cin->dims[i] != 1 && cin->dims[i] != want)
        return bbi_cpu_fail(ctx, BB_ERR_TYPE, "C does not broadcast to [%lld, %lld]", (long long)m, (long long)n);
    }
  }
  rc = bbi_cpu_make_output(ctx, 0, a->dtype, 2, out);
  if (rc) return rc;
  bb_tensor *y = ctx->outputs[0];
  if (!y->numel) return 0;
  /* the C term, broadcast into Y first unless it is a plain row bias the kernel fuses */
  bool row_bias = cin && a->dtype == BB_DTYPE_FLOAT && beta == 1.0f && cin->numel == n &&
                  (cin->rank == 1 || cin->dims[0] == 1);
  bool c_in_y = cin && !row_bias && beta != 0.0f;
  if (c_in_y) {
    int64_t c0 = cin->rank == 2 ? cin->dims[0] : 1, c1 = cin->rank >= 1 ? cin->dims[cin->rank - 1] : 1;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        int64_t src = (c0 == 1 ? 0 : i) * c1 + (c1 == 1 ? 0 : j);
        if (is_int(a->dtype)) bbi_cpu_set_i64(y, i * n + j, bbi_cpu_get_i64(cin, src));
        else bbi_cpu_set_f64(y, i * n + j, bbi_cpu_get_f64(cin, src));
      }
  }
  if (a->dtype == BB_DTYPE_FLOAT) {
    bbi_f32_gemm_args g;
    memset(&g, 0, sizeof g);
    g.m = (size_t)m, g.n = (size_t)n, g.k = (size_t)k;
    g.trans_a = trans_a, g.trans_b = trans_b;
    g.alpha = alpha, g.beta = c_in_y ? beta : 0.0f;
    g.a = bb_tensor_data(a), g.lda = (size_t)a->dims[1];
    g.b = bb_tensor_data(b), g.ldb = (size_t)b->dims[1];
    g.bias = row_bias ? bb_tensor_data(cin) : NULL;
    g.c = bb_tensor_data(y), g.ldc = (size_t)n;
    g.packed_b = kept_packed_b(ctx, &g, trans_b, g.b, g.ldb);
    size_t scratch_size = bbi_f32_gemm_scratch_size(g.m, g.n, g.k);
    void *scratch = scratch_size ? bbi_cpu_scratch(ctx, scratch_size) : NULL;
    if (scratch_size && !scratch) return BB_ERR_NOMEM;
    rc = bbi_f32_gemm(&g, scratch, scratch_size);
    return rc ? bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "GEMM rejected its arguments") : 0;
  }
  bool ints = is_int(a->dtype);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      int64_t yi = i * n + j;
      if (ints) {
        int64_t acc = 0;
        for (int64_t p = 0; p < k; p++)
          acc += bbi_cpu_get_i64(a, trans_a ? p * m + i : i * k + p) * bbi_cpu_get_i64(b, trans_b ? j * k + p : p * n + j);
        int64_t cterm = c_in_y ? bbi_cpu_get_i64(y, yi) : 0;
        bbi_cpu_set_i64(y, yi, (int64_t)(alpha * (double)acc) + (int64_t)(beta * (double)cterm));
      } else {
        double acc = 0;
        for (int64_t p = 0; p < k; p++)
          acc += bbi_cpu_get_f64(a, trans_a ? p * m + i : i * k + p) * bbi_cpu_get_f64(b, trans_b ? j * k + p : p * n + j);
        double cterm = c_in_y ? bbi_cpu_get_f64(y, yi) : 0.0;
        bbi_cpu_set_f64(y, yi, alpha * acc + beta * cterm);
      }
    }
  return 0;
}

const bbi_cpu_op bbi_cpu_ops_linalg[] = {
    {"MatMul", 1, 2, 2, 1, 1, "float,double,float16,bfloat16,int32,int64,uint32,uint64", op_matmul},
    {"Gemm", 1, 2, 3, 1, 1, "float,double,float16,bfloat16,int32,int64,uint32,uint64", op_gemm},
};
const size_t bbi_cpu_ops_linalg_count = sizeof bbi_cpu_ops_linalg / sizeof bbi_cpu_ops_linalg[0];
