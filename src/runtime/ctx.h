/* Components at run time: op calls, control-plane messages and component timers, each
 * with a bb_ctx for what the component may reach — the node's parts (parts.h), never
 * the node. */
#ifndef BBI_RUNTIME_CTX_H
#define BBI_RUNTIME_CTX_H

#include "runtime/exec.h"
#include "runtime/parts.h"

struct bb_ctx {
  rt_parts *parts;
  rt_component *component; /* NULL: a framework op (RngU64) */
  rt_exec *exec;
  uint64_t now;
  uint64_t deferred; /* the command bb_ctx_defer minted (0: none) */
  const bb_peer_id *source;
};

/* A context for component c (NULL: none) running for execution e (NULL: none). */
bb_ctx rt_ctx_make(rt_parts *p, rt_component *c, rt_exec *e, uint64_t now);
/* Runs a COMPONENT op through its component's invoke (BB_LATER: c->command is set). */
int rt_invoke_component(rt_call *c, bb_error *err);
/* Calls on_timer of component `component`; a failure becomes an OP_FAILED step. */
void rt_component_timer(rt_parts *p, uint64_t now, uint32_t component, uint64_t token);
/* Hands a control-plane message to the component its address numbers; refusals are
 * steps. */
void rt_component_message(rt_parts *p, uint64_t now, const bb_peer_id *from, uint32_t component, const char *op,
                          const uint8_t *payload, size_t len);

#endif /* BBI_RUNTIME_CTX_H */
