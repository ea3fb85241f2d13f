/* CPU operators: nn family. */
#include "ops/backends/cpu/cpu_op.h"

const bb_cpu_op bb_cpu_ops_nn[] = {{NULL, 0, 0, 0, 0, 0, NULL, NULL}};
const size_t bb_cpu_ops_nn_count = 0;
