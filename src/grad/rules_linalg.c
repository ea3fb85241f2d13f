/* Backward rules of MatMul and Gemm, as MatMul / Gemm / Transpose of the forward's
 * inputs and the output gradient. */
#include "grad/builder.h"

#define IN(i) (n->inputs.items[i])

/* x with its last two dims swapped. */
static const char *swap_last(gb *b, const char *x) {
  gb_value *v = gb_val(b, x);
  if (!v) return NULL;
  int64_t perm[BB_MAX_RANK];
  for (int d = 0; d < v->rank; d++) perm[d] = d;
  perm[v->rank - 2] = v->rank - 1;
  perm[v->rank - 1] = v->rank - 2;
  return gb_transpose(b, x, perm, v->rank);
}

/* Y = A @ B with ONNX's promotion of 1-D operands and broadcasting of batch dims:
 * dA = dY @ B^T and dB = A^T @ dY, each summed over the batch dims its operand was
 * broadcast along. A [.., K] against a 2-D B folds the batch into the GEMM instead. */
static int matmul_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_value *a = gb_val(b, IN(0)), *c = gb_val(b, IN(1));
  if (a->rank < 1 || c->rank < 1)
    return gb_fail(b, BB_ERR_UNSUPPORTED, "%s: the gradient needs the ranks of both inputs", gb_node_label(b, n));
  int ra = a->rank, rc = c->rank;
  gb_dim k_dim = a->dims[ra - 1], n_dim = c->dims[rc - 1];
  const char *A = IN(0), *B = IN(1), *g = dy[0];
  if (ra == 1 && rc == 1) {
    A = gb_unsqueeze(b, A, (int64_t[]){0}, 1);
    B = gb_unsqueeze(b, B, (int64_t[]){1}, 1);
    g = gb_unsqueeze(b, g, (int64_t[]){0, 1}, 2);
  } else if (ra == 1) {
    A = gb_unsqueeze(b, A, (int64_t[]){0}, 1);
    g = gb_unsqueeze(b, g, (int64_t[]){-2}, 1);
  } else if (rc == 1) {
    B = gb_unsqueeze(b, B, (int64_t[]){1}, 1);
    g = gb_unsqueeze(b, g, (int64_t[]){-1}, 1);
  }
  if (ra == 1) ra = 2;
  if (rc == 1) rc = 2, n_dim = 1;
  if (gb_needs(b, n, 0)) {
    const char *da = gb_unbroadcast(b, gb_op(b, "MatMul", 2, g, swap_last(b, B)), A);
    gb_grad(b, n, 0, A == IN(0) ? da : gb_reshape_like(b, da, IN(0)));
  }
  if (gb_needs(b, n, 1)) {
    const char *db;
    if (rc == 2 && ra > 2 && GB_KNOWN(k_dim) && GB_KNOWN(n_dim)) {
      const char *a2 = gb_reshape(b, A, (int64_t[]){-1, k_dim}, 2), *g2 = gb_reshape(b, g, (int64_t[]){-1, n_dim}, 2);
      db = gb_op(b, "MatMul", 2, gb_transpose(b, a2, (int64_t[]){1, 0}, 2), g2);
    } else {
      db = gb_unbroadcast(b, gb_op(b, "MatMul", 2, swap_last(b, A), g), B);
    }
    gb_grad(b, n, 1, B == IN(1) ? db : gb_reshape_like(b, db, IN(1)));
  }
  return b->rc;
}

static const char *gemm(gb *b, const char *p, const char *q, bool trans_p, bool trans_q, float alpha) {
  bb_ir_node *n = gb_new(b, "Gemm", NULL, 1, 2, p, q);
  if (trans_p) gb_attr_int(b, n, "transA", 1);
  if (trans_q) gb_attr_int(b, n, "transB", 1);
  if (alpha != 1.0f) gb_attr_float(b, n, "alpha", alpha);
  return gb_add(b, n);
}

/* Y = alpha * A' B' + beta * C, A' = A or A^T, B' = B or B^T: each gradient is one Gemm
 * of dY with the other operand, in whichever orientation gives it the operand's own
 * layout; dC is beta * dY summed over the axes C was broadcast along. */
static int gemm_back(gb *b, bb_ir_node *n, const char *const *dy) {
  bool ta = bb_attr_get_int(&n->attrs, "transA", 0) != 0, tb = bb_attr_get_int(&n->attrs, "transB", 0) != 0;
  float alpha = bb_attr_get_float(&n->attrs, "alpha", 1.0f), beta = bb_attr_get_float(&n->attrs, "beta", 1.0f);
  const char *g = dy[0];
  if (gb_needs(b, n, 0))
    gb_grad(b, n, 0, !ta ? gemm(b, g, IN(1), false, !tb, alpha) : gemm(b, IN(1), g, tb, true, alpha));
  if (gb_needs(b, n, 1))
    gb_grad(b, n, 1, !tb ? gemm(b, IN(0), g, !ta, false, alpha) : gemm(b, g, IN(0), true, ta, alpha));
  if (gb_needs(b, n, 2)) {
    const char *gc = beta == 1.0f ? g : gb_op(b, "Mul", 2, g, gb_scalar(b, beta, gb_dtype(b, g)));
    gb_grad(b, n, 2, gb_unbroadcast(b, gc, IN(2)));
  }
  return b->rc;
}

const gb_rule gb_rules_linalg[] = {
    {NULL, "MatMul", 3, 1, matmul_back},
    {NULL, "Gemm", 7, 1, gemm_back},
};
const size_t gb_rules_linalg_count = sizeof gb_rules_linalg / sizeof gb_rules_linalg[0];
