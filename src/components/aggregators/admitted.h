/* Who may contribute to an aggregation when the node checks join tokens. */
#ifndef BBI_AGGREGATORS_ADMITTED_H
#define BBI_AGGREGATORS_ADMITTED_H

#include "bb/runtime.h"

/* 0 when `from` may contribute as far as join tokens go: the node checks none, `from` is
 * this node, or its token grants the client role. Otherwise BB_ERR_DENIED with err naming
 * `type` and the peer, and *reason the counter's suffix: "refused_unadmitted" (no valid,
 * unexpired token) or "refused_role" (a server's or a watcher's token: neither trains). */
int bbi_contributor_admitted(bb_ctx *ctx, const char *type, const bb_peer_id *from, const char **reason,
                             bb_error *err);

#endif /* BBI_AGGREGATORS_ADMITTED_H */
