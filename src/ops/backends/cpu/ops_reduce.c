/* CPU operators: reduce family. */
#include "ops/backends/cpu/cpu_op.h"

const bb_cpu_op bb_cpu_ops_reduce[] = {{NULL, 0, 0, 0, 0, 0, NULL, NULL}};
const size_t bb_cpu_ops_reduce_count = 0;
