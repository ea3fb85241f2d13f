/* The CPU backend's operator table: lookup by (op_type, opset), arity checks, and the
 * single-node entry point. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bb/artifact.h"
#include "cpu/cpu_op.h"
#include "util/mem.h"
#include "util/options.h"

typedef struct family {
  const bbi_cpu_op *ops;
  const size_t *count;
} family;

static const family FAMILIES[] = {
    {bbi_cpu_ops_elementwise, &bbi_cpu_ops_elementwise_count},
    {bbi_cpu_ops_shape, &bbi_cpu_ops_shape_count},
    {bbi_cpu_ops_reduce, &bbi_cpu_ops_reduce_count},
    {bbi_cpu_ops_linalg, &bbi_cpu_ops_linalg_count},
    {bbi_cpu_ops_nn, &bbi_cpu_ops_nn_count},
    {bbi_cpu_ops_recurrent, &bbi_cpu_ops_recurrent_count},
};
#define N_FAMILIES (sizeof FAMILIES / sizeof FAMILIES[0])

static bool grad_domain(const char *domain) { return domain && strcmp(domain, BB_DOMAIN_GRAD) == 0; }

/* The entry with the newest `since` not after opset; the grad domain has one version. */
const bbi_cpu_op *bbi_cpu_resolve(const char *domain, const char *op_type, int64_t opset) {
  const bbi_cpu_op *best = NULL;
  if (!op_type) return NULL;
  if (grad_domain(domain)) {
    for (size_t i = 0; i < bbi_cpu_ops_grad_count; i++)
      if (strcmp(bbi_cpu_ops_grad[i].op_type, op_type) == 0) best = &bbi_cpu_ops_grad[i];
    return best;
  }
  if (!bb_domain_is_onnx(domain)) return NULL;
  for (size_t f = 0; f < N_FAMILIES; f++)
    for (size_t i = 0; i < *FAMILIES[f].count; i++) {
      const bbi_cpu_op *op = &FAMILIES[f].ops[i];
      if (strcmp(op->op_type, op_type) == 0 && op->since <= opset && (!best || op->since > best->since)) best = op;
    }
  return best;
}

bool bb_cpu_supports(const char *domain, const char *op_type, int64_t opset) {
  return bbi_cpu_resolve(domain, op_type, opset) != NULL;
}

/* ---- listing, sorted by name ---------------------------------------------------------- */

static const bbi_cpu_op *sorted[256];
static size_t n_sorted;

static int by_name(const void *a, const void *b) {
  const bbi_cpu_op *x = *(const bbi_cpu_op *const *)a, *y = *(const bbi_cpu_op *const *)b;
  int c = strcmp(x->op_type, y->op_type);
  return c ? c : x->since - y->since;
}

static void build_listing(void) {
  if (n_sorted) return;
  size_t n = 0;
  for (size_t f = 0; f < N_FAMILIES; f++)
    for (size_t i = 0; i < *FAMILIES[f].count && n < sizeof sorted / sizeof sorted[0]; i++) {
      const bbi_cpu_op *op = &FAMILIES[f].ops[i];
      /* one line per op name: the newest entry */
      size_t k = 0;
      while (k < n && strcmp(sorted[k]->op_type, op->op_type) != 0) k++;
      if (k < n) {
        if (op->since > sorted[k]->since) sorted[k] = op;
      } else {
        sorted[n++] = op;
      }
    }
  qsort(sorted, n, sizeof sorted[0], by_name);
  n_sorted = n;
}

size_t bb_cpu_op_count(void) {
  build_listing();
  return n_sorted;
}

const char *bb_cpu_op_name(size_t i) { return i < bb_cpu_op_count() ? sorted[i]->op_type : NULL; }

const char *bb_cpu_op_types(size_t i) { return i < bb_cpu_op_count() ? sorted[i]->types : NULL; }

/* the grad domain's table is written in alphabetical order */
size_t bb_cpu_grad_op_count(void) { return bbi_cpu_ops_grad_count; }
const char *bb_cpu_grad_op_name(size_t i) { return i < bbi_cpu_ops_grad_count ? bbi_cpu_ops_grad[i].op_type : NULL; }
const char *bb_cpu_grad_op_types(size_t i) { return i < bbi_cpu_ops_grad_count ? bbi_cpu_ops_grad[i].types : NULL; }

/* ---- one node ----------------------------------------------------------------------------- */

int bb_cpu_run_node(const bb_ir_node *node, int64_t opset, bb_tensor *const *inputs, size_t n_inputs,
                    bb_tensor **outputs, size_t n_outputs, const bb_allocator *alloc, bb_error *err) {
  return bb_cpu_run_node_limited(node, opset, inputs, n_inputs, outputs, n_outputs, alloc, NULL, err);
}

int bb_cpu_run_node_limited(const bb_ir_node *node, int64_t opset, bb_tensor *const *inputs, size_t n_inputs,
                            bb_tensor **outputs, size_t n_outputs, const bb_allocator *alloc,
                            const bb_cpu_limits *limits, bb_error *err) {
  bb_cpu_limits lim = {0};
  if (limits && !bbi_options_read(&lim, sizeof lim, limits))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "node %s: cpu limits have struct_size %zu; set it to sizeof(bb_cpu_limits), %zu",
                        node && node->name ? node->name : "?", limits->struct_size, sizeof lim);
  const bbi_cpu_op *op = NULL;
  if (bb_domain_is_onnx(node->domain) || grad_domain(node->domain)) op = bbi_cpu_resolve(node->domain, node->op_type, opset);
  bbi_cpu_workspace ws = {NULL, 0, alloc ? alloc : bb_default_allocator()};
  int rc = bbi_cpu_run_op(op, node, opset, inputs, n_inputs, outputs, n_outputs, alloc, &lim, &ws, NULL, err);
  bbi_cpu_workspace_free(&ws);
  return rc;
}

void bbi_cpu_workspace_free(bbi_cpu_workspace *ws) {
  bbi_mem_free(ws->alloc, ws->data);
  ws->data = NULL;
  ws->size = 0;
}

void *bbi_cpu_scratch(bbi_cpu_op_ctx *ctx, size_t size) {
  bbi_cpu_workspace *ws = ctx->workspace;
  if (size > SIZE_MAX - 64) {
    bbi_cpu_fail(ctx, BB_ERR_NOMEM, "cannot allocate %zu bytes of scratch", size);
    return NULL;
  }
  if (ws->size < size + 64) {
    bbi_mem_free(ws->alloc, ws->data);
    ws->size = 0;
    if (!(ws->data = bbi_mem_alloc(ws->alloc, size + 64))) {
      bbi_cpu_fail(ctx, BB_ERR_NOMEM, "cannot allocate %zu bytes of scratch", size);
      return NULL;
    }
    ws->size = size + 64;
  }
  return (void *)(((uintptr_t)ws->data + 63) & ~(uintptr_t)63);
}

void *bbi_cpu_node_cache_get(bbi_cpu_op_ctx *ctx, size_t input, uint32_t kind, size_t size, bool *fresh) {
  *fresh = false;
  if (!ctx->state || !ctx->state->cache || input >= 32 || !(ctx->state->constant_inputs >> input & 1u)) return NULL;
  bbi_cpu_node_cache *c = ctx->state->cache;
  const bb_tensor *source = ctx->inputs[input];
  if (c->data && c->source == source && c->kind == kind && c->size == size) return c->data;
  if (ctx->state->cache_fixed) {
    ctx->state->cache_missed = true;
    return NULL;
  }
  bbi_mem_free(c->alloc, c->data);
  c->data = bbi_mem_alloc(c->alloc, size);
  c->source = c->data ? source : NULL;
  c->kind = kind;
  c->size = c->data ? size : 0;
  *fresh = c->data != NULL;
  return c->data;
}

int bbi_cpu_run_op(const bbi_cpu_op *op, const bb_ir_node *node, int64_t opset, bb_tensor *const *inputs,
                  size_t n_inputs, bb_tensor **outputs, size_t n_outputs, const bb_allocator *alloc,
                  const bb_cpu_limits *limits, bbi_cpu_workspace *workspace, bbi_cpu_node_state *state,
                  bb_error *err) {
  size_t cap = limits && limits->max_output_bytes ? limits->max_output_bytes : BB_CPU_DEFAULT_MAX_OUTPUT_BYTES;
  bbi_cpu_op_ctx ctx = {node, opset, inputs, n_inputs, outputs, n_outputs, alloc ? alloc : bb_default_allocator(),
                       err, cap, workspace, state};
  for (size_t i = 0; i < n_outputs; i++) outputs[i] = NULL;
  if (!op && !bb_domain_is_onnx(node->domain) && !grad_domain(node->domain))
    return bbi_cpu_fail(&ctx, BB_ERR_UNSUPPORTED, "domain %s is neither ai.onnx nor ai.bytesandbrains.grad", node->domain);
  if (!op) return bbi_cpu_fail(&ctx, BB_ERR_UNSUPPORTED, "no CPU implementation of %s at opset %lld",
                              node->op_type ? node->op_type : "?", (long long)opset);
  /* trailing omitted inputs do not count towards arity */
  size_t given = n_inputs;
  while (given && !inputs[given - 1]) given--;
  if ((int)given < op->min_inputs || (int)n_inputs > op->max_inputs)
    return bbi_cpu_fail(&ctx, BB_ERR_INVALID_ARGUMENT, "takes %d to %d inputs, got %zu", op->min_inputs,
                       op->max_inputs, n_inputs);
  for (int i = 0; i < op->min_inputs; i++)
    if (!inputs[i]) return bbi_cpu_fail(&ctx, BB_ERR_INVALID_ARGUMENT, "required input %d is missing", i);
  if ((int)n_outputs < op->min_outputs || (int)n_outputs > op->max_outputs)
    return bbi_cpu_fail(&ctx, BB_ERR_INVALID_ARGUMENT, "has %d to %d outputs, the node declares %zu",
                       op->min_outputs, op->max_outputs, n_outputs);
  int rc = op->run(&ctx);
  /* (whether an output was made first: the node's output names are seldom in cache) */
  for (size_t i = 0; i < n_outputs && !rc; i++)
    if (!outputs[i] && bbi_cpu_output_wanted(&ctx, i))
      rc = bbi_cpu_fail(&ctx, BB_ERR_INVALID_ARGUMENT, "produced no value for output %zu", i);
  if (rc) /* a failed node hands out nothing, whatever it had made */
    for (size_t i = 0; i < n_outputs; i++) {
      bb_tensor_release(outputs[i]);
      outputs[i] = NULL;
    }
  return rc;
}
