/* PeerSelector concretes.
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
 *   addresses added to the address book, so the graph can send to sampled peers. */
#include <stdlib.h>
#include <string.h>

#include "bb/roles.h"
#include "components/shipped.h"
#include "util/error.h"

#define MAX_VIEW 128 /* also bounds the u8 count of a gossip message */

typedef struct view {
  const bb_allocator *alloc;
  bb_peer_id peers[MAX_VIEW];
  size_t n, cap, shuffle;
  /* GossipView: the entries of my last Shuffle, which its reply may replace */
  bb_peer_id sent[MAX_VIEW];
  size_t n_sent;
} view;

static int parse_peer(const char *text, size_t len, bb_peer_id *out, bb_error *err) {
  char buf[128];
  if (!len || len >= sizeof buf) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "peer id `%.*s` is malformed", (int)len, text);
  memcpy(buf, text, len);
  buf[len] = 0;
  char *end;
  unsigned long long id = strtoull(buf, &end, 10);
  if (!*end && buf[0] != '-') {
    *out = bb_peer_id_from_u64(id);
    return 0;
  }
  return bb_peer_id_from_text(buf, out, err);
}

static bool view_has(const view *v, const bb_peer_id *p) {
  for (size_t i = 0; i < v->n; i++)
    if (bb_peer_id_equal(&v->peers[i], p)) return true;
  return false;
}

static int parse_list(view *v, const char *text, bb_error *err) {
  for (const char *p = text; *p;) {
    const char *end = strchr(p, ';');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    bb_peer_id peer;
    int rc = parse_peer(p, len, &peer, err);
    if (rc) return rc;
    if (v->n == MAX_VIEW) return bb_error_set(err, BB_ERR_LIMIT, "more than %d peers", MAX_VIEW);
    if (!view_has(v, &peer)) v->peers[v->n++] = peer;
    p = end ? end + 1 : p + len;
  }
  return 0;
}

static int view_create(const bb_component_init *init, void **self, bool gossip, bb_error *err) {
  static const char *const CONST_KEYS[] = {"peers", NULL};
  static const char *const GOSSIP_KEYS[] = {"seeds", "view", "shuffle", NULL};
  char list[4096];
  uint64_t cap = MAX_VIEW, shuffle = 0;
  int rc = bb_config_check(init->config, gossip ? GOSSIP_KEYS : CONST_KEYS, err);
  if (!rc) rc = bb_config_str(init->config, gossip ? "seeds" : "peers", "", list, sizeof list, err);
  if (!rc && gossip) rc = bb_config_u64(init->config, "view", 8, &cap, err);
  if (!rc && gossip) rc = bb_config_u64(init->config, "shuffle", 4, &shuffle, err);
  if (rc) return rc;
  if (!cap || cap > MAX_VIEW || (gossip && (!shuffle || shuffle > cap)))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "GossipView: need 1 <= shuffle <= view <= %d", MAX_VIEW);
  view *v = init->alloc->malloc(sizeof *v, init->alloc->user_data);
  if (!v) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  memset(v, 0, sizeof *v);
  v->alloc = init->alloc;
  v->cap = cap;
  v->shuffle = shuffle;
  if ((rc = parse_list(v, list, err))) {
    init->alloc->free(v, init->alloc->user_data);
    return bb_error_prefix(err, "%s: ", gossip ? "GossipView seeds" : "ConstantView peers");
  }
  *self = v;
  return 0;
}

static int constant_create(const bb_component_init *init, void **self, bb_error *err) {
  return view_create(init, self, false, err);
}
static int gossip_create(const bb_component_init *init, void **self, bb_error *err) {
  return view_create(init, self, true, err);
}

static void view_destroy(void *self) {
  view *v = self;
  v->alloc->free(v, v->alloc->user_data);
}

/* k distinct indices of [0, n) by a partial Fisher–Yates shuffle. */
static size_t draw(bb_ctx *ctx, size_t n, size_t k, size_t *out) {
  size_t idx[MAX_VIEW];
  for (size_t i = 0; i < n; i++) idx[i] = i;
  if (k > n) k = n;
  for (size_t i = 0; i < k; i++) {
    size_t j = i + (size_t)(bb_ctx_random(ctx) % (n - i));
    size_t t = idx[i];
    idx[i] = idx[j];
    idx[j] = t;
    out[i] = idx[i];
  }
  return k;
}

static int sample_peers(const view *v, bb_ctx *ctx, size_t n, bb_val **out, bb_error *err) {
  size_t idx[MAX_VIEW];
  bb_peer_id picked[MAX_VIEW];
  size_t k = draw(ctx, v->n, n, idx);
  for (size_t i = 0; i < k; i++) picked[i] = v->peers[idx[i]];
  *out = bb_val_peers(bb_ctx_allocator(ctx), picked, k);
  return *out ? 0 : bb_error_set(err, BB_ERR_NOMEM, "out of memory");
}

static int view_all(void *self, bb_ctx *ctx, bb_val **peers, bb_error *err) {
  view *v = self;
  *peers = bb_val_peers(bb_ctx_allocator(ctx), v->peers, v->n);
  return *peers ? 0 : bb_error_set(err, BB_ERR_NOMEM, "out of memory");
}

static int constant_sample(void *self, bb_ctx *ctx, size_t n, bb_val **peers, bb_error *err) {
  return sample_peers(self, ctx, n, peers, err);
}

/* ---- gossip ---------------------------------------------------------------------------- */

static int reach(bb_ctx *ctx, const bb_peer_id *p, bb_error *err) {
  size_t n;
  if (bb_ctx_addresses_of(ctx, p, &n)) return 0;
  bb_address a = bb_address_p2p(p);
  return bb_ctx_add_address(ctx, p, &a, err);
}

/* Payload: u8 count, then each peer as u8 length + multihash bytes. */
static size_t encode_peers(const bb_peer_id *peers, size_t n, uint8_t *out) {
  size_t at = 0;
  out[at++] = (uint8_t)n;
  for (size_t i = 0; i < n; i++) {
    out[at++] = peers[i].len;
    memcpy(out + at, peers[i].bytes, peers[i].len);
    at += peers[i].len;
  }
  return at;
}

static int decode_peers(const uint8_t *p, size_t len, bb_peer_id *out, size_t *n, bb_error *err) {
  if (!len || p[0] > MAX_VIEW) return bb_error_set(err, BB_ERR_MALFORMED, "gossip message without a valid count");
  size_t count = p[0], at = 1;
  for (size_t i = 0; i < count; i++) {
    if (at >= len || p[at] > len - at - 1) return bb_error_set(err, BB_ERR_MALFORMED, "gossip message truncated");
    int rc = bb_peer_id_from_bytes(p + at + 1, p[at], &out[i], err);
    if (rc) return rc;
    at += 1 + p[at];
  }
  if (at != len) return bb_error_set(err, BB_ERR_MALFORMED, "gossip message has %zu trailing bytes", len - at);
  *n = count;
  return 0;
}

/* Merges received entries: new ones replace entries we sent away, then fill free room. */
static int merge(view *v, bb_ctx *ctx, const bb_peer_id *got, size_t n_got, const bb_peer_id *sent, size_t n_sent,
                 bb_error *err) {
  for (size_t i = 0; i < n_got; i++) {
    const bb_peer_id *p = &got[i];
    if (bb_peer_id_equal(p, bb_ctx_self(ctx)) || view_has(v, p)) continue;
    int rc = reach(ctx, p, err);
    if (rc) return rc;
    if (v->n < v->cap) {
      v->peers[v->n++] = *p;
      continue;
    }
    for (size_t s = 0; s < n_sent; s++) { /* evict one we handed over */
      size_t j = 0;
      while (j < v->n && !bb_peer_id_equal(&v->peers[j], &sent[s])) j++;
      if (j < v->n) {
        v->peers[j] = *p;
        break;
      }
    }
  }
  return 0;
}

static int pick_entries(view *v, bb_ctx *ctx, size_t k, bb_peer_id *out, bool with_self) {
  size_t idx[MAX_VIEW], n = 0;
  if (with_self) out[n++] = *bb_ctx_self(ctx);
  size_t got = draw(ctx, v->n, with_self ? k - 1 : k, idx);
  for (size_t i = 0; i < got; i++) out[n++] = v->peers[idx[i]];
  return (int)n;
}

static int gossip_sample(void *self, bb_ctx *ctx, size_t n, bb_val **peers, bb_error *err) {
  view *v = self;
  int rc = sample_peers(v, ctx, n, peers, err);
  if (rc || !v->n) return rc;
  /* one exchange per Sample: part of my view (and me) to a random member */
  size_t target = (size_t)(bb_ctx_random(ctx) % v->n);
  bb_peer_id to = v->peers[target], entries[MAX_VIEW + 1];
  size_t k = (size_t)pick_entries(v, ctx, v->shuffle, entries, true);
  uint8_t msg[1 + (MAX_VIEW + 1) * (1 + BB_PEER_ID_MAX)];
  size_t len = encode_peers(entries, k, msg);
  if ((rc = reach(ctx, &to, err)) || (rc = bb_ctx_send_message(ctx, &to, "Shuffle", msg, len, err))) {
    bb_val_release(*peers);
    *peers = NULL;
    return rc;
  }
  /* what the reply may replace: the view entries sent (entries[0] is me) */
  v->n_sent = k - 1;
  memcpy(v->sent, entries + 1, v->n_sent * sizeof *v->sent);
  return 0;
}

static int gossip_message(void *self, bb_ctx *ctx, const char *op, const bb_peer_id *from, const uint8_t *payload,
                          size_t len, bb_error *err) {
  view *v = self;
  bb_peer_id got[MAX_VIEW], mine[MAX_VIEW + 1];
  size_t n_got = 0;
  bool shuffle = strcmp(op, "Shuffle") == 0;
  if (!shuffle && strcmp(op, "ShuffleReply") != 0)
    return bb_error_set(err, BB_ERR_UNSUPPORTED, "GossipView: unknown message `%s`", op);
  int rc = decode_peers(payload, len, got, &n_got, err);
  if (rc) return rc;
  if (shuffle) {
    size_t k = (size_t)pick_entries(v, ctx, v->shuffle, mine, false);
    uint8_t msg[1 + (MAX_VIEW + 1) * (1 + BB_PEER_ID_MAX)];
    size_t mlen = encode_peers(mine, k, msg);
    if ((rc = reach(ctx, from, err)) || (rc = bb_ctx_send_message(ctx, from, "ShuffleReply", msg, mlen, err))) return rc;
    return merge(v, ctx, got, n_got, mine, k, err);
  }
  /* the reply to my last Shuffle: its entries take the places of the ones I sent */
  rc = merge(v, ctx, got, n_got, v->sent, v->n_sent, err);
  v->n_sent = 0;
  return rc;
}

static const bb_peer_selector_ops CONSTANT_OPS = {constant_sample, view_all};
static const bb_peer_selector_ops GOSSIP_OPS = {gossip_sample, view_all};

static int constant_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_peer_selector_dispatch(&CONSTANT_OPS, self, ctx, call, err);
}
static int gossip_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_peer_selector_dispatch(&GOSSIP_OPS, self, ctx, call, err);
}

const bb_component_type BB_CONSTANT_VIEW = {
    sizeof(bb_component_type), "ConstantView", 1u << BB_ROLE_PEER_SELECTOR, NULL, NULL, 0, NULL, 0,
    constant_create, view_destroy, constant_invoke, NULL, NULL, NULL, NULL, NULL};
const bb_component_type BB_GOSSIP_VIEW = {
    sizeof(bb_component_type), "GossipView", (1u << BB_ROLE_PEER_SELECTOR) | (1u << BB_ROLE_PROTOCOL), NULL, NULL, 0,
    NULL, 0, gossip_create, view_destroy, gossip_invoke, gossip_message, NULL, NULL, NULL, NULL};
