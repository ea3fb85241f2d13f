/* A partial view and its exchange (see peer_view.h). */
#include "components/selectors/peer_view.h"

#include <stdlib.h>
#include <string.h>

#include "bb/bytes.h"
#include "bb/common.h"

void bbi_peer_view_init(bbi_peer_view *v, size_t cap, size_t shuffle) {
  memset(v, 0, sizeof *v);
  v->cap = cap;
  v->shuffle = shuffle;
}

/* A decimal number is a test identity; anything else is base58 text. */
static int parse_peer(const char *text, size_t len, bb_peer_id *out, bb_error *err) {
  char buf[128];
  if (!len || len >= sizeof buf)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "peer id `%.*s` is malformed", (int)len, text);
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

bool bbi_peer_view_has(const bbi_peer_view *v, const bb_peer_id *p) {
  for (size_t i = 0; i < v->n; i++)
    if (bb_peer_id_equal(&v->peers[i], p)) return true;
  return false;
}

int bbi_peer_view_add_list(bbi_peer_view *v, const char *text, bb_error *err) {
  for (const char *p = text; *p;) {
    const char *end = strchr(p, ';');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    bb_peer_id peer;
    int rc = parse_peer(p, len, &peer, err);
    if (rc) return rc;
    if (v->n == BBI_PEER_VIEW_MAX) return bb_error_set(err, BB_ERR_LIMIT, "more than %d peers", BBI_PEER_VIEW_MAX);
    if (!bbi_peer_view_has(v, &peer)) v->peers[v->n++] = peer;
    p = end ? end + 1 : p + len;
  }
  return 0;
}

size_t bbi_peer_view_sample(const bbi_peer_view *v, const bbi_draw_source *rng, size_t n, bb_peer_id *out) {
  size_t idx[BBI_PEER_VIEW_MAX];
  size_t k = bbi_draw_distinct(rng, v->n, n, idx);
  for (size_t i = 0; i < k; i++) out[i] = v->peers[idx[i]];
  return k;
}

size_t bbi_peer_view_offer(const bbi_peer_view *v, const bbi_draw_source *rng, const bb_peer_id *self, bb_peer_id *to,
                          bb_peer_id *entries) {
  if (!v->n) return 0;
  *to = v->peers[(size_t)(rng->next(rng->user) % v->n)];
  entries[0] = *self;
  return 1 + bbi_peer_view_sample(v, rng, v->shuffle - 1, entries + 1);
}

void bbi_peer_view_offer_sent(bbi_peer_view *v, const bb_peer_id *to, const bb_peer_id *entries, size_t k) {
  v->n_sent = k ? k - 1 : 0;
  if (v->n_sent) memcpy(v->sent, entries + 1, v->n_sent * sizeof *v->sent);
  v->offered_to = *to;
  v->awaiting_reply = true;
}

bool bbi_peer_view_awaits_reply(const bbi_peer_view *v, const bb_peer_id *from) {
  return v->awaiting_reply && bb_peer_id_equal(&v->offered_to, from);
}

size_t bbi_peer_view_answer(const bbi_peer_view *v, const bbi_draw_source *rng, bb_peer_id *entries) {
  return bbi_peer_view_sample(v, rng, v->shuffle, entries);
}

int bbi_peer_view_merge(bbi_peer_view *v, const bb_peer_id *self, const bb_peer_id *got, size_t n_got,
                       const bb_peer_id *sent, size_t n_sent, bbi_peer_view_admit_fn admit, void *user,
                       bb_error *err) {
  for (size_t i = 0; i < n_got; i++) {
    const bb_peer_id *p = &got[i];
    if (bb_peer_id_equal(p, self) || bbi_peer_view_has(v, p)) continue;
    int rc = admit ? admit(user, p, err) : 0;
    if (rc == BBI_PEER_VIEW_SKIP) continue;
    if (rc) return rc;
    if (v->n < v->cap) {
      v->peers[v->n++] = *p;
      continue;
    }
    for (size_t s = 0; s < n_sent; s++) { /* evict one that was handed over */
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

int bbi_peer_view_merge_reply(bbi_peer_view *v, const bb_peer_id *self, const bb_peer_id *got, size_t n_got,
                             bbi_peer_view_admit_fn admit, void *user, bb_error *err) {
  int rc = bbi_peer_view_merge(v, self, got, n_got, v->sent, v->n_sent, admit, user, err);
  v->n_sent = 0;
  v->awaiting_reply = false;
  return rc;
}

size_t bbi_peer_view_encode(const bb_peer_id *peers, size_t n, uint8_t *out) {
  bb_le_writer w = bb_le_writer_fixed(out, BBI_PEER_VIEW_MESSAGE_MAX);
  bb_le_write_u8(&w, (uint8_t)n);
  for (size_t i = 0; i < n; i++) {
    bb_le_write_u8(&w, peers[i].len);
    bb_le_write(&w, peers[i].bytes, peers[i].len);
  }
  return w.len;
}

int bbi_peer_view_decode(const uint8_t *p, size_t len, bb_peer_id *out, size_t *n, bb_error *err) {
  bb_le_reader r = bb_le_reader_of(p, len);
  uint8_t count = 0;
  if (!bb_le_read_u8(&r, &count) || count > BBI_PEER_VIEW_MAX)
    return bb_error_set(err, BB_ERR_MALFORMED, "gossip message without a valid count");
  for (size_t i = 0; i < count; i++) {
    uint8_t plen = 0;
    const uint8_t *bytes = bb_le_read_u8(&r, &plen) ? bb_le_read_span(&r, plen) : NULL;
    if (!bytes) return bb_error_set(err, BB_ERR_MALFORMED, "gossip message truncated");
    int rc = bb_peer_id_from_bytes(bytes, plen, &out[i], err);
    if (rc) return rc;
  }
  if (bb_le_left(&r))
    return bb_error_set(err, BB_ERR_MALFORMED, "gossip message has %zu trailing bytes", bb_le_left(&r));
  *n = count;
  return 0;
}
