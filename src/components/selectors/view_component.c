/* PeerSelector concretes over a bbi_peer_view (peer_view.h).
 *
 * ConstantView — a fixed list of peers.
 *   Config: peers=<id>;<id>;...   (base58 peer ids, or decimal numbers for the test
 *           identities of bb_peer_id_from_u64)
 *   Sample(n): n distinct peers of the list, drawn with the node's seeded generator
 *   (a different draw each call, the same sequence for the same node seed); CurrentView:
 *   all.
 *
 * GossipView — a random peer-sampling protocol (a partial view exchanged with random
 * peers, in the spirit of Cyclon/Newscast).
 *   Config: seeds=<id>;...  (initial view), view=8 (view size), shuffle=4 (entries sent
 *           per exchange)
 *   Sample(n): n distinct peers of the current view; each Sample also starts one
 *   exchange: `shuffle` random entries (plus this peer) go to a random view member,
 *   which answers with as many of its own and merges what it got; both sides keep at
 *   most `view` entries, dropping the ones they sent away first. Entries are /p2p
 *   addresses added to the address book, so the graph can send to sampled peers.
 *   A reply is merged only from the member the last exchange went to
 *   (gossip_view.unsolicited_replies counts the others). On a node that checks join
 *   tokens only peers whose token admits them take part: an exchange from anyone else is
 *   refused, and an entry naming anyone else is left out of the merge (both counted in
 *   gossip_view.refused_unadmitted). */
#include <string.h>

#include "bb/roles.h"
#include "components/admitted.h"
#include "components/selectors/peer_view.h"
#include "components/shipped.h"
#include "bb/common.h"
#include "util/mem.h"

static uint64_t ctx_random(void *ctx) { return bb_ctx_random(ctx); }

/* The node's seeded generator as a draw source. */
static bbi_draw_source node_random(bb_ctx *ctx) { return (bbi_draw_source){ctx_random, ctx}; }

typedef struct view {
  const bb_allocator *alloc;
  bbi_peer_view v;
} view;

static int view_create(const bb_component_init *init, void **self, bool gossip, bb_error *err) {
  static const char *const CONST_KEYS[] = {"peers", NULL};
  static const char *const GOSSIP_KEYS[] = {"seeds", "view", "shuffle", NULL};
  char list[4096];
  uint64_t cap = BBI_PEER_VIEW_MAX, shuffle = 0;
  int rc = bb_config_check(init->config, gossip ? GOSSIP_KEYS : CONST_KEYS, err);
  if (!rc) rc = bb_config_str(init->config, gossip ? "seeds" : "peers", "", list, sizeof list, err);
  if (!rc && gossip) rc = bb_config_u64(init->config, "view", 8, &cap, err);
  if (!rc && gossip) rc = bb_config_u64(init->config, "shuffle", 4, &shuffle, err);
  if (rc) return rc;
  if (!cap || cap > BBI_PEER_VIEW_MAX || (gossip && (!shuffle || shuffle > cap)))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "GossipView: need 1 <= shuffle <= view <= %d", BBI_PEER_VIEW_MAX);
  view *s = bbi_mem_alloc(init->alloc, sizeof *s);
  if (!s) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  s->alloc = init->alloc;
  bbi_peer_view_init(&s->v, cap, shuffle);
  if ((rc = bbi_peer_view_add_list(&s->v, list, err))) {
    bbi_mem_free(init->alloc, s);
    return bb_error_prefix(err, "%s: ", gossip ? "GossipView seeds" : "ConstantView peers");
  }
  *self = s;
  return 0;
}

static int constant_create(const bb_component_init *init, void **self, bb_error *err) {
  return view_create(init, self, false, err);
}
static int gossip_create(const bb_component_init *init, void **self, bb_error *err) {
  return view_create(init, self, true, err);
}

static void view_destroy(void *self) {
  view *s = self;
  bbi_mem_free(s->alloc, s);
}

static int sample_peers(const view *s, bb_ctx *ctx, size_t n, bb_val **out, bb_error *err) {
  bb_peer_id picked[BBI_PEER_VIEW_MAX];
  bbi_draw_source rng = node_random(ctx);
  size_t k = bbi_peer_view_sample(&s->v, &rng, n, picked);
  *out = bb_val_peers(bb_ctx_allocator(ctx), picked, k);
  return *out ? 0 : bb_error_set(err, BB_ERR_NOMEM, "out of memory");
}

static int view_all(void *self, bb_ctx *ctx, bb_val **peers, bb_error *err) {
  view *s = self;
  *peers = bb_val_peers(bb_ctx_allocator(ctx), s->v.peers, s->v.n);
  return *peers ? 0 : bb_error_set(err, BB_ERR_NOMEM, "out of memory");
}

static int constant_sample(void *self, bb_ctx *ctx, size_t n, bb_val **peers, bb_error *err) {
  return sample_peers(self, ctx, n, peers, err);
}

/* ---- gossip ---------------------------------------------------------------------------- */

/* Gives p a /p2p address in the address book unless it has one, so the graph (and the
 * exchange) can send to it. */
static int reach(bb_ctx *ctx, const bb_peer_id *p, bb_error *err) {
  size_t n;
  if (bb_ctx_addresses_of(ctx, p, &n)) return 0;
  bb_address a = bb_address_p2p(p);
  return bb_ctx_add_address(ctx, p, &a, err);
}

/* A peer an exchange names enters the view only if it takes part (see admitted.h). */
static int admit(void *ctx, const bb_peer_id *p, bb_error *err) {
  if (!bbi_peer_takes_part(ctx, p)) {
    bb_ctx_count(ctx, "gossip_view.refused_unadmitted", 1);
    return BBI_PEER_VIEW_SKIP;
  }
  return reach(ctx, p, err);
}

static int gossip_sample(void *self, bb_ctx *ctx, size_t n, bb_val **peers, bb_error *err) {
  view *s = self;
  int rc = sample_peers(s, ctx, n, peers, err);
  if (rc || !s->v.n) return rc;
  /* one exchange per Sample: part of my view (and me) to a random member */
  bbi_draw_source rng = node_random(ctx);
  bb_peer_id to, entries[BBI_PEER_VIEW_MAX + 1];
  size_t k = bbi_peer_view_offer(&s->v, &rng, bb_ctx_self(ctx), &to, entries);
  uint8_t msg[BBI_PEER_VIEW_MESSAGE_MAX];
  size_t len = bbi_peer_view_encode(entries, k, msg);
  if ((rc = reach(ctx, &to, err)) || (rc = bb_ctx_send_message(ctx, &to, "Shuffle", msg, len, err))) {
    bb_val_release(*peers);
    *peers = NULL;
    return rc;
  }
  bbi_peer_view_offer_sent(&s->v, &to, entries, k);
  return 0;
}

static int gossip_message(void *self, bb_ctx *ctx, const char *op, const bb_peer_id *from, const uint8_t *payload,
                          size_t len, bb_error *err) {
  view *s = self;
  bb_peer_id got[BBI_PEER_VIEW_MAX], mine[BBI_PEER_VIEW_MAX];
  size_t n_got = 0;
  bool shuffle = strcmp(op, "Shuffle") == 0;
  if (!shuffle && strcmp(op, "ShuffleReply") != 0)
    return bb_error_set(err, BB_ERR_UNSUPPORTED, "GossipView: unknown message `%s`", op);
  char who[128];
  if (!bbi_peer_takes_part(ctx, from)) {
    bb_ctx_count(ctx, "gossip_view.refused_unadmitted", 1);
    bb_peer_id_to_text(from, who, sizeof who);
    return bb_error_set(err, BB_ERR_DENIED, "GossipView: %s from peer %s, which holds no valid join token", op, who);
  }
  if (!shuffle && !bbi_peer_view_awaits_reply(&s->v, from)) {
    bb_ctx_count(ctx, "gossip_view.unsolicited_replies", 1);
    bb_peer_id_to_text(from, who, sizeof who);
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "GossipView: a ShuffleReply from peer %s, which was sent no Shuffle",
                        who);
  }
  int rc = bbi_peer_view_decode(payload, len, got, &n_got, err);
  if (rc) return rc;
  if (!shuffle) /* the reply to my last Shuffle: its entries take the places of the ones I sent */
    return bbi_peer_view_merge_reply(&s->v, bb_ctx_self(ctx), got, n_got, admit, ctx, err);
  bbi_draw_source rng = node_random(ctx);
  size_t k = bbi_peer_view_answer(&s->v, &rng, mine);
  uint8_t msg[BBI_PEER_VIEW_MESSAGE_MAX];
  size_t mlen = bbi_peer_view_encode(mine, k, msg);
  if ((rc = reach(ctx, from, err)) || (rc = bb_ctx_send_message(ctx, from, "ShuffleReply", msg, mlen, err))) return rc;
  return bbi_peer_view_merge(&s->v, bb_ctx_self(ctx), got, n_got, mine, k, admit, ctx, err);
}

static const bb_peer_selector_ops CONSTANT_OPS = {constant_sample, view_all};
static const bb_peer_selector_ops GOSSIP_OPS = {gossip_sample, view_all};

static int constant_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_peer_selector_dispatch(&CONSTANT_OPS, self, ctx, call, err);
}
static int gossip_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_peer_selector_dispatch(&GOSSIP_OPS, self, ctx, call, err);
}

const bb_component_type BBI_CONSTANT_VIEW = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "ConstantView",
    .roles = 1u << BB_ROLE_PEER_SELECTOR,
    .create = constant_create,
    .destroy = view_destroy,
    .invoke = constant_invoke,
};
const bb_component_type BBI_GOSSIP_VIEW = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "GossipView",
    .roles = (1u << BB_ROLE_PEER_SELECTOR) | (1u << BB_ROLE_PROTOCOL),
    .create = gossip_create,
    .destroy = view_destroy,
    .invoke = gossip_invoke,
    .on_message = gossip_message,
};
