/* Time ops: the node's clock and seeded generator (Clock, RngU64), waiting (After, Sleep:
 * the op parks on a timer that completes it) and periodic re-runs (Interval). */
#include <inttypes.h>

#include "runtime/ctx.h"
#include "runtime/engine.h"
#include "runtime/syscalls/syscall.h"
#include "bb/common.h"

static int sys_clock(rt_call *c, bb_error *err) {
  return put_output(c, bb_val_u64(c->node->alloc, BB_VAL_TIMESTAMP, c->now), err);
}

static int sys_rng(rt_call *c, bb_error *err) {
  bb_ctx ctx = rt_ctx_make(c->parts, NULL, c->exec, c->now);
  return put_output(c, bb_val_u64(c->node->alloc, BB_VAL_U64, bb_ctx_random(&ctx)), err);
}

/* Parks the op until now + delay, then completes it with a trigger. */
static int park_until(rt_call *c, const char *attr, bb_error *err) {
  int64_t delay = attr_int(c, attr, 0);
  if (delay < 0) delay = 0;
  uint64_t command = c->node->next_command++;
  int rc = rt_timers_add(&c->node->timers, c->now + (uint64_t)delay, RT_TIMER_COMPLETE, command, NULL, 0, 0);
  if (rc) {
    c->reason = "timer_limit";
    return bb_error_set(err, rc, "%s: %s", c->op->ir->op_type, rc == BB_ERR_LIMIT ? "too many timers" : "out of memory");
  }
  c->command = command;
  return BB_LATER;
}

static int sys_after(rt_call *c, bb_error *err) { return park_until(c, "delay_ns", err); }
static int sys_sleep(rt_call *c, bb_error *err) { return park_until(c, "duration_ns", err); }

static int sys_interval(rt_call *c, bb_error *err) {
  int64_t period = attr_int(c, BB_ATTR_PERIOD_NS, 1000000000);
  if (period <= 0) {
    c->reason = "bad_attribute";
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "Interval: period_ns must be positive (got %" PRId64 ")", period);
  }
  int rc = rt_set_interval(c->node, c->now + (uint64_t)period, c->exec, c->op_index);
  if (rc) {
    c->reason = "timer_limit";
    return bb_error_set(err, rc, "Interval: %s", rc == BB_ERR_LIMIT ? "too many timers" : "out of memory");
  }
  return put_output(c, bb_val_u64(c->node->alloc, BB_VAL_TIMESTAMP, c->now), err);
}

const rt_syscall rt_syscalls_time[] = {
    {BB_DOMAIN_SYSCALL, "Clock", sys_clock},
    {BB_DOMAIN_SYSCALL, "RngU64", sys_rng},
    {BB_DOMAIN_SYSCALL, "After", sys_after},
    {BB_DOMAIN_SYSCALL, "Sleep", sys_sleep},
    {BB_DOMAIN_SYSCALL, "Interval", sys_interval},
};
const size_t rt_syscalls_time_count = sizeof rt_syscalls_time / sizeof *rt_syscalls_time;
