/* Components at run time: op calls, control-plane messages and component timers, each
 * with a bb_ctx for what the component may reach. */
#ifndef BBI_RUNTIME_CTX_H
#define BBI_RUNTIME_CTX_H

#include "runtime/node.h"

/* Runs a COMPONENT op through its component's invoke (BB_LATER: c->command is set). */
int rt_invoke_component(bb_node *n, rt_call *c, bb_error *err);
/* Calls on_timer of component `component`; a failure becomes an OP_FAILED step. */
void rt_component_timer(bb_node *n, uint32_t component, uint64_t token);
/* Hands a control-plane fill to the component its address numbers; refusals are steps. */
void rt_component_message(bb_node *n, rt_event *ev, rt_fill *f);

#endif /* BBI_RUNTIME_CTX_H */
