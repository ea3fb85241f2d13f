/* Telemetry ops: application events (AppEmit, AppNotify) and counters (IncrMetric). */
#include <string.h>

#include "runtime/ctx.h"
#include "runtime/syscalls/syscall.h"
#include "bb/common.h"

static bool reserved_topic(const char *t) {
  return strncmp(t, "bb.", 3) == 0 || strncmp(t, BB_DOMAIN_FRAMEWORK ".", sizeof BB_DOMAIN_FRAMEWORK) == 0;
}

static int sys_app_emit(rt_call *c, bb_error *err) {
  const char *name = attr_string(c, "name");
  if (!name || !*name) {
    c->reason = "missing_attribute";
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s needs a `name` attribute", c->op->ir->op_type);
  }
  if (reserved_topic(name)) {
    c->reason = "reserved_topic_prefix";
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "topic `%s` uses a reserved prefix (bb., ai.bytesandbrains.)", name);
  }
  bb_val *v = strcmp(c->op->ir->op_type, "AppNotify") == 0 ? NULL : first_input(c);
  bb_val *empty = NULL;
  if (!v) v = empty = bb_val_bytes(c->node->alloc, NULL, 0);
  if (!v) return nomem(err);
  bb_ctx ctx = rt_ctx_make(c->parts, NULL, c->exec, c->now);
  int rc = bb_ctx_emit(&ctx, name, v, err);
  bb_step *s = rc ? NULL : &c->node->acc.items[c->node->acc.len - 1];
  if (s) s->module = c->module;
  bb_val_release(empty);
  return rc;
}

static int sys_incr_metric(rt_call *c, bb_error *err) {
  const char *name = attr_string(c, "name");
  if (!name || !*name) {
    c->reason = "missing_attribute";
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "IncrMetric needs a `name` attribute");
  }
  rt_count(&c->node->counters, name, (uint64_t)attr_int(c, "delta", 1));
  return 0;
}

const rt_syscall rt_syscalls_telemetry[] = {
    {BB_DOMAIN_SYSCALL, "AppEmit", sys_app_emit},
    {BB_DOMAIN_SYSCALL, "AppNotify", sys_app_emit},
    {BB_DOMAIN_SYSCALL, "IncrMetric", sys_incr_metric},
};
const size_t rt_syscalls_telemetry_count = sizeof rt_syscalls_telemetry / sizeof *rt_syscalls_telemetry;
