/* Who takes part when the node checks join tokens: contributors to an aggregation, and the
 * peers a view or a registry lets in. */
#ifndef BBI_COMPONENTS_ADMITTED_H
#define BBI_COMPONENTS_ADMITTED_H

#include <stdbool.h>

#include "bb/runtime.h"

/* 0 when `from` may contribute as far as join tokens go: the node checks none, `from` is
 * this node, or its token grants the client role. Otherwise BB_ERR_DENIED with err naming
 * `type` and the peer, and *reason the counter's suffix: "refused_unadmitted" (no valid,
 * unexpired token) or "refused_role" (a server's or a watcher's token: neither trains). */
int bbi_contributor_admitted(bb_ctx *ctx, const char *type, const bb_peer_id *from, const char **reason,
                             bb_error *err);

/* Whether `peer` may enter a view or a registry: always when the node checks no join
 * tokens (the address book's admission then decides, as for any insert) or it is this
 * node; otherwise only while its token grants the client or the server role — the peers
 * the address book admits under a policy. */
bool bbi_peer_takes_part(bb_ctx *ctx, const bb_peer_id *peer);

#endif /* BBI_COMPONENTS_ADMITTED_H */
