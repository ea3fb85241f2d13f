/* A partial view of the network and the exchange that keeps it fresh (random peer
 * sampling after Cyclon / Newscast), apart from any node: ConstantView and GossipView
 * (view_component.c) are its adapters, which supply the generator, the peer's own id, the
 * address book and the sending.
 *
 * The exchange: the initiator offers itself plus `shuffle - 1` random entries to a random
 * member (Shuffle); the member answers with `shuffle` random entries of its own
 * (ShuffleReply) and merges what it got; the initiator merges the reply. A merge skips
 * the peer itself and known entries, fills free room, and in a full view replaces an
 * entry the merging side sent away, so a full view still learns new peers. */
#ifndef BBI_COMPONENTS_SELECTORS_PEER_VIEW_H
#define BBI_COMPONENTS_SELECTORS_PEER_VIEW_H

#include <stdbool.h>

#include "bb/wire.h"
#include "components/selectors/draw.h"

#define BBI_PEER_VIEW_MAX 128 /* also bounds the u8 count of an exchange message */

/* The longest exchange message: u8 count, then per peer u8 length and its bytes. */
#define BBI_PEER_VIEW_MESSAGE_MAX (1 + (BBI_PEER_VIEW_MAX + 1) * (1 + BB_PEER_ID_MAX))

typedef struct bbi_peer_view {
  bb_peer_id peers[BBI_PEER_VIEW_MAX];
  size_t n;
  size_t cap;     /* entries a merge may fill up to */
  size_t shuffle; /* entries per exchange */
  bb_peer_id sent[BBI_PEER_VIEW_MAX]; /* the view entries of the last offer, which its reply may replace */
  size_t n_sent;
  bb_peer_id offered_to; /* the member the last offer went to: only its reply is merged */
  bool awaiting_reply;
} bbi_peer_view;

/* An empty view that merges up to cap entries and exchanges `shuffle` at a time. */
void bbi_peer_view_init(bbi_peer_view *v, size_t cap, size_t shuffle);

/* Adds the peers of `text`, ids joined by ';' (base58, or decimal numbers for the test
 * identities of bb_peer_id_from_u64), skipping ones already there. Up to BBI_PEER_VIEW_MAX
 * are kept whatever cap is; more is BB_ERR_LIMIT, a malformed id the parser's error. */
int bbi_peer_view_add_list(bbi_peer_view *v, const char *text, bb_error *err);

bool bbi_peer_view_has(const bbi_peer_view *v, const bb_peer_id *p);

/* min(n, v->n) distinct entries drawn from the view into out. */
size_t bbi_peer_view_sample(const bbi_peer_view *v, const bbi_draw_source *rng, size_t n, bb_peer_id *out);

/* An offer for one exchange from a non-empty view: the member to send it to, and the
 * entries (self first, then shuffle - 1 random view entries) into entries[0..returned)
 * (room for BBI_PEER_VIEW_MAX + 1). The view is unchanged until bbi_peer_view_offer_sent. */
size_t bbi_peer_view_offer(const bbi_peer_view *v, const bbi_draw_source *rng, const bb_peer_id *self, bb_peer_id *to,
                          bb_peer_id *entries);

/* Records that the offer entries[0..k) went out to `to`: its view entries (all but self,
 * the first) are what the reply may replace. */
void bbi_peer_view_offer_sent(bbi_peer_view *v, const bb_peer_id *to, const bb_peer_id *entries, size_t k);

/* Whether a reply from `from` answers the last offer (sent to `from`, not yet answered). */
bool bbi_peer_view_awaits_reply(const bbi_peer_view *v, const bb_peer_id *from);

/* The answer to a Shuffle: `shuffle` random view entries into entries (room for
 * BBI_PEER_VIEW_MAX); returns how many. */
size_t bbi_peer_view_answer(const bbi_peer_view *v, const bbi_draw_source *rng, bb_peer_id *entries);

/* What bbi_peer_view_admit_fn returns for a peer that stays out (the merge goes on). */
#define BBI_PEER_VIEW_SKIP 1

/* Called for each received peer about to enter the view (before it does): 0 lets it in,
 * BBI_PEER_VIEW_SKIP leaves it out, a negative error stops the merge there, with the
 * peers before it merged. */
typedef int (*bbi_peer_view_admit_fn)(void *user, const bb_peer_id *peer, bb_error *err);

/* Merges got[0..n_got): each peer that is not self and not in the view is offered to
 * admit, then (if let in) fills free room or, in a full view, replaces the first of
 * sent[0..n_sent) still there. */
int bbi_peer_view_merge(bbi_peer_view *v, const bb_peer_id *self, const bb_peer_id *got, size_t n_got,
                       const bb_peer_id *sent, size_t n_sent, bbi_peer_view_admit_fn admit, void *user,
                       bb_error *err);

/* Merges the reply to the last offer (see bbi_peer_view_awaits_reply), its entries taking
 * the places of those sent; the offer is then forgotten. */
int bbi_peer_view_merge_reply(bbi_peer_view *v, const bb_peer_id *self, const bb_peer_id *got, size_t n_got,
                             bbi_peer_view_admit_fn admit, void *user, bb_error *err);

/* An exchange message for peers[0..n) (n <= BBI_PEER_VIEW_MAX + 1) into out (room for
 * BBI_PEER_VIEW_MESSAGE_MAX); returns its length. */
size_t bbi_peer_view_encode(const bb_peer_id *peers, size_t n, uint8_t *out);

/* The peers of an exchange message into out (room for BBI_PEER_VIEW_MAX). BB_ERR_MALFORMED
 * for a count over BBI_PEER_VIEW_MAX, a truncated entry, trailing bytes or a bad peer id. */
int bbi_peer_view_decode(const uint8_t *p, size_t len, bb_peer_id *out, size_t *n, bb_error *err);

#endif
