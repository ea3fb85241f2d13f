/* bb.wasm's ABI for privacy (bb/privacy.h): the Rényi-DP accountant. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "abi_internal.h"
#include "bb/privacy.h"
#include "bb_wasm.h"

int32_t bb_wasm_dp_epsilon(double q, double sigma, double steps, double delta) {
  bbw_error_clear();
  bbw_result_clear();
  if (!(steps >= 0) || steps != floor(steps) || steps > 9007199254740992.0)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "dp epsilon: steps %g is not a whole number in 0..2^53", steps);
  double eps, order;
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_dp_epsilon(q, sigma, (uint64_t)steps, delta, &eps, &order, &err);
  if (rc < 0) return bbw_fail_from(rc, &err, "dp epsilon");
  uint8_t *out = malloc(16);
  if (!out) return bbw_fail(BB_ERR_NOMEM, "dp epsilon: out of memory for the result");
  uint64_t bits;
  memcpy(&bits, &eps, 8);
  bb_le_put_u64(out, bits);
  memcpy(&bits, &order, 8);
  bb_le_put_u64(out + 8, bits);
  bbw_result_take(out, 16);
  return BB_OK;
}
