/* CpuBackend: the Backend concrete. A backend node of the graph (an ONNX operator in the
 * default domain) runs on the CPU kernels; inputs must be tensors.
 *   Config: max_output_bytes=268435456 — the most one value of one op may take (the
 *   kernels refuse a larger one before allocating it). */
#include "bb/cpu.h"
#include "bb/roles.h"
#include "bb/common.h"
#include "util/mem.h"

typedef struct cpu_backend {
  const bb_allocator *alloc;
  bb_cpu_limits limits;
} cpu_backend;

static int cpu_create(const bb_component_init *init, void **self, bb_error *err) {
  static const char *const KEYS[] = {"max_output_bytes", NULL};
  uint64_t max_bytes;
  int rc;
  if ((rc = bb_config_check(init->config, KEYS, err)) ||
      (rc = bb_config_u64(init->config, "max_output_bytes", BB_CPU_DEFAULT_MAX_OUTPUT_BYTES, &max_bytes, err)))
    return rc;
  if (!max_bytes || max_bytes > SIZE_MAX)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "CpuBackend: max_output_bytes=%llu is not in 1..%zu",
                        (unsigned long long)max_bytes, (size_t)SIZE_MAX);
  cpu_backend *b = bbi_mem_alloc(init->alloc, sizeof *b);
  if (!b) return bb_error_set(err, BB_ERR_NOMEM, "CpuBackend: out of memory");
  *b = (cpu_backend){init->alloc, {.struct_size = sizeof(bb_cpu_limits), .max_output_bytes = (size_t)max_bytes}};
  *self = b;
  return 0;
}

static void cpu_destroy(void *self) {
  cpu_backend *b = self;
  bbi_mem_free(b->alloc, b);
}

static int cpu_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  const cpu_backend *backend = self;
  if (call->role != BB_ROLE_BACKEND)
    return bb_error_set(err, BB_ERR_UNSUPPORTED, "CpuBackend only runs backend (ONNX) ops, not %s::%s", call->domain,
                        call->op_type);
  bb_tensor *in_stack[16], *out_stack[16];
  if (call->n_inputs > 16 || call->n_outputs > 16)
    return bb_error_set(err, BB_ERR_LIMIT, "CpuBackend: %s has more than 16 inputs or outputs", call->op_type);
  for (size_t i = 0; i < call->n_inputs; i++) {
    const bb_val *v = call->inputs[i];
    if (v && bb_val_kind_of(v) != BB_VAL_TENSOR)
      return bb_error_set(err, BB_ERR_TYPE, "CpuBackend: input %zu of %s must be a Tensor, got %s", i, call->op_type,
                          bb_val_kind_name((int)bb_val_kind_of(v)));
    in_stack[i] = v ? bb_val_as_tensor(v) : NULL;
  }
  /* a call from another component (bb_ctx_call) has no graph node: stand one in with the
   * op type, no attributes and every output wanted */
  char out_name[] = "out", *out_names[16];
  for (size_t i = 0; i < call->n_outputs; i++) out_names[i] = out_name;
  bb_ir_node standin = {0};
  standin.op_type = (char *)call->op_type;
  standin.outputs = (bb_strlist){out_names, call->n_outputs, call->n_outputs};
  const bb_ir_node *node = call->node ? call->node : &standin;
  int rc = bb_cpu_run_node_limited(node, BB_ONNX_OPSET_VERSION, in_stack, call->n_inputs, out_stack,
                                   call->n_outputs, bb_ctx_allocator(ctx), &backend->limits, err);
  if (rc) return rc;
  for (size_t i = 0; i < call->n_outputs; i++) {
    if (!out_stack[i]) continue;
    call->outputs[i] = bb_val_tensor(bb_ctx_allocator(ctx), out_stack[i]);
    bb_tensor_release(out_stack[i]);
    if (!call->outputs[i]) rc = bb_error_set(err, BB_ERR_NOMEM, "CpuBackend: out of memory");
  }
  return rc;
}

static const bb_component_port CPU_STORAGE[] = {{"tensor", BB_TYPE_TENSOR_F32}};

const bb_component_type BBI_CPU_BACKEND = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "CpuBackend",
    .roles = 1u << BB_ROLE_BACKEND,
    .storage = CPU_STORAGE,
    .n_storage = 1,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .invoke = cpu_invoke,
};

int bb_cpu_backend_declare_op_set(bb_compiler *c, bb_error *err) {
  const bb_allocator *alloc = bb_default_allocator();
  size_t n = bb_cpu_op_count(), k = 0;
  bb_component_op *ops = bbi_mem_calloc(alloc, n, sizeof *ops);
  if (!ops) return bb_error_set(err, BB_ERR_NOMEM, "CpuBackend op set: out of memory");
  for (size_t i = 0; i < n; i++)
    if (bb_cpu_supports(BB_DOMAIN_ONNX, bb_cpu_op_name(i), BB_ONNX_OPSET_VERSION))
      ops[k++] = (bb_component_op){BB_DOMAIN_ONNX, bb_cpu_op_name(i)};
  int rc = bb_compiler_declare_op_set(c, BBI_CPU_BACKEND.type_name, ops, k, err);
  bbi_mem_free(alloc, ops);
  return rc;
}
