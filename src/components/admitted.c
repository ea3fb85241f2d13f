/* Join tokens and who takes part (see admitted.h): an update counts only from a peer the
 * operator admitted to train, whatever the round's membership says; a view or a registry
 * lets in only peers the operator admitted at all. */
#include "components/admitted.h"

int bbi_contributor_admitted(bb_ctx *ctx, const char *type, const bb_peer_id *from, const char **reason,
                             bb_error *err) {
  *reason = NULL;
  if (!bb_ctx_tokens_required(ctx) || bb_peer_id_equal(from, bb_ctx_self(ctx))) return 0;
  const bb_join_role role = bb_ctx_peer_role(ctx, from);
  if (role == BB_JOIN_CLIENT) return 0;
  char who[128];
  bb_peer_id_to_text(from, who, sizeof who);
  if (role == BB_JOIN_NONE) {
    *reason = "refused_unadmitted";
    return bb_error_set(err, BB_ERR_DENIED, "%s: peer %s holds no valid join token", type, who);
  }
  *reason = "refused_role";
  return bb_error_set(err, BB_ERR_DENIED, "%s: peer %s's join token grants the %s role, not client", type, who,
                      bb_join_role_name(role));
}

bool bbi_peer_takes_part(bb_ctx *ctx, const bb_peer_id *peer) {
  if (!bb_ctx_tokens_required(ctx) || bb_peer_id_equal(peer, bb_ctx_self(ctx))) return true;
  const bb_join_role role = bb_ctx_peer_role(ctx, peer);
  return role == BB_JOIN_CLIENT || role == BB_JOIN_SERVER;
}
