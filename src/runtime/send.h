/* The way out: wire.Send builds one envelope per destination peer (envelope.h) and
 * queues it in the outbound queue until a poll hands it out. A Send sees the node's
 * parts (rt_call.parts), not the node. */
#ifndef BBI_RUNTIME_SEND_H
#define BBI_RUNTIME_SEND_H

#include "runtime/exec.h"

/* Runs a wire.Send op. */
int rt_send(rt_call *c, bb_error *err);

#endif /* BBI_RUNTIME_SEND_H */
