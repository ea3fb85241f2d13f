/* Trilu: the upper (j - i >= k) or lower (j - i <= k) triangle of each matrix in the last
 * two axes, zero elsewhere. Row by row: one copy of the kept run, zero bytes around it
 * (zero bytes are 0 in every element type). */
#include <string.h>

#include "cpu/shape_args.h"
#include "cpu/shape.h"

int bbi_cpu_trilu(bbi_cpu_op_ctx *ctx) {
  const bb_tensor *in = ctx->inputs[0];
  size_t esize;
  int rc = bbi_cpu_elem_size(ctx, 0, &esize);
  if (rc) return rc;
  if (in->rank < 2) return bbi_cpu_fail(ctx, BB_ERR_TYPE, "input must have rank 2 or more, not %d", in->rank);
  int64_t k = 0;
  long n = -1;
  if ((rc = bbi_cpu_int_list(ctx, "k", 1, true, &k, 1, &n))) return rc;
  if (n == 0) return bbi_cpu_fail(ctx, BB_ERR_INVALID_ARGUMENT, "k holds no value");
  bool upper = bb_attr_get_int(&ctx->node->attrs, "upper", 1) != 0;
  if ((rc = bbi_cpu_make_output(ctx, 0, in->dtype, in->rank, in->dims))) return rc;
  const int64_t rows = in->dims[in->rank - 2], cols = in->dims[in->rank - 1];
  const int64_t n_rows = in->numel ? in->numel / cols : 0;
  k = k > cols ? cols : k < -rows ? -rows : k; /* beyond these nothing changes, and i + k cannot overflow */
  const char *src = bb_tensor_data(in);
  char *dst = bb_tensor_data(ctx->outputs[0]);
  for (int64_t r = 0; r < n_rows; r++) {
    /* kept columns [lo, hi) of row i, from j >= i + k (upper) or j <= i + k (lower) */
    int64_t i = r % rows, lo = upper ? i + k : 0, hi = upper ? cols : i + k + 1;
    lo = lo < 0 ? 0 : lo > cols ? cols : lo;
    hi = hi < lo ? lo : hi > cols ? cols : hi;
    size_t row = (size_t)r * (size_t)cols * esize;
    memset(dst + row, 0, (size_t)lo * esize);
    memcpy(dst + row + (size_t)lo * esize, src + row + (size_t)lo * esize, (size_t)(hi - lo) * esize);
    memset(dst + row + (size_t)hi * esize, 0, (size_t)(cols - hi) * esize);
  }
  return 0;
}
