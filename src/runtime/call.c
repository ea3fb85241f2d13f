/* bb_ctx_call: one component calling another of its node through the callee's role
 * contract, the way a graph op would, but synchronously and without a graph node. */

#include "runtime/ctx.h"
#include "bb/common.h"

/* The domain an op of the role is called in; a protocol's calls carry the framework's. */
static const char *role_domain(bb_role role) {
  const char *domain = bb_role_domain(role);
  return domain ? domain : BB_DOMAIN_FRAMEWORK;
}

int bb_ctx_call(bb_ctx *ctx, const char *slot, const char *op_type, bb_val *const *inputs, size_t n_inputs,
                bb_val **outputs, size_t n_outputs, bb_error *err) {
  for (size_t i = 0; i < n_outputs; i++) outputs[i] = NULL;
  rt_component *callee = rt_component_by_slot(ctx->parts->components, slot);
  if (!callee) return bb_error_set(err, BB_ERR_NOT_FOUND, "call: no component is bound at slot `%s`", slot);
  if (callee == ctx->component)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "call: `%s` cannot call itself (%s)", slot, op_type);
  if (!callee->type->invoke)
    return bb_error_set(err, BB_ERR_UNSUPPORTED, "call: `%s` (slot `%s`) takes no op calls", callee->type->type_name,
                        slot);
  bb_ctx sub = {ctx->parts, callee, ctx->exec, ctx->now, 0, ctx->source};
  bb_op_call call = {callee->role, role_domain(callee->role), op_type, NULL, inputs, n_inputs, outputs, n_outputs};
  int rc = callee->type->invoke(callee->self, &sub, &call, err);
  if (rc == BB_LATER) {
    for (size_t i = 0; i < n_outputs; i++) bb_val_release(outputs[i]), outputs[i] = NULL;
    return bb_error_set(err, BB_ERR_UNSUPPORTED, "call: %s of `%s` answered later; only synchronous calls work here",
                        op_type, slot);
  }
  if (rc < 0)
    for (size_t i = 0; i < n_outputs; i++) bb_val_release(outputs[i]), outputs[i] = NULL;
  return rc < 0 ? rc : 0;
}
