/* Tokens and bootstrap commands: correlation tokens, and the commands a bootstrap mints
 * and waits on until the host completes them. */
#include <inttypes.h>

#include "runtime/syscalls/syscall.h"
#include "bb/common.h"

/* Shares the counter of the wire's request ids, so a token never equals one. */
static int sys_correlate_tag(rt_call *c, bb_error *err) {
  return put_output(c, bb_val_u64(c->node->alloc, BB_VAL_CORRELATION, c->node->next_wire_req++), err);
}

static int sys_bootstrap_dispatch(rt_call *c, bb_error *err) {
  return put_output(c, bb_val_u64(c->node->alloc, BB_VAL_COMMAND_ID, c->node->next_command++), err);
}

/* Parks until the host completes the command BootstrapDispatch minted. Only a minted
 * command that nothing waits on yet: a peer's value must not take over a Sleep's
 * completion or one minted later. */
static int sys_bootstrap_output(rt_call *c, bb_error *err) {
  const bb_val *v = c->n_in ? c->in[0] : NULL;
  if (!v) {
    c->reason = "missing_input";
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "BootstrapOutput: missing `cmd` input");
  }
  if (bb_val_kind_of(v) != BB_VAL_COMMAND_ID) {
    c->reason = "expected_command_id";
    return bb_error_set(err, BB_ERR_TYPE, "BootstrapOutput: `cmd` input is %s, not a CommandId",
                        bb_val_kind_name((int)bb_val_kind_of(v)));
  }
  uint64_t cmd = bb_val_as_u64(v);
  if (!cmd || cmd >= c->node->next_command) {
    c->reason = "unknown_command";
    return bb_error_set(err, BB_ERR_NOT_FOUND, "BootstrapOutput: command %" PRIu64 " was never minted", cmd);
  }
  if (rt_pending_find(&c->node->pending, cmd)) {
    c->reason = "command_in_use";
    return bb_error_set(err, BB_ERR_EXISTS, "BootstrapOutput: command %" PRIu64 " is already awaited", cmd);
  }
  c->command = cmd;
  return BB_LATER;
}

const rt_syscall rt_syscalls_tokens[] = {
    {BB_DOMAIN_SYSCALL, "CorrelateTag", sys_correlate_tag},
    {BB_DOMAIN_SYSCALL, "BootstrapDispatch", sys_bootstrap_dispatch},
    {BB_DOMAIN_SYSCALL, "BootstrapOutput", sys_bootstrap_output},
};
const size_t rt_syscalls_tokens_count = sizeof rt_syscalls_tokens / sizeof *rt_syscalls_tokens;
