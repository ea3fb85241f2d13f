/* The peer view apart from any node: peer lists, distinct draws, the exchange's offer,
 * answer and merges (free room first, then the entries sent away), the admit hook, and
 * the exchange message codec against hand-built bytes and every truncation. */
#include <stdlib.h>
#include <string.h>

#include "components/selectors/draw.h"
#include "components/selectors/peer_view.h"
#include "harness.h"
#include "bb/common.h"

/* A generator replaying a script of values (then zeros), so each draw is known. */
typedef struct script {
  const uint64_t *values;
  size_t n, at;
} script;

static uint64_t scripted(void *user) {
  script *s = user;
  return s->at < s->n ? s->values[s->at++] : 0;
}

static uint64_t splitmix(void *user) {
  uint64_t *state = user, z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static bb_peer_id peer(uint64_t id) { return bb_peer_id_from_u64(id); }

static uint64_t id_of(const bb_peer_id *p) {
  uint64_t id = 0;
  CHECK(bb_peer_id_as_u64(p, &id));
  return id;
}

static void fill(bbi_peer_view *v, size_t cap, size_t shuffle, const char *list) {
  bb_error err;
  bbi_peer_view_init(v, cap, shuffle);
  CHECK_MSG(bbi_peer_view_add_list(v, list, &err) == 0, "%s", err.message);
}

static void test_draw_distinct(void) {
  /* a generator of zeros keeps every place: the identity */
  script zeros = {NULL, 0, 0};
  bbi_draw_source rng = {scripted, &zeros};
  size_t idx[8];
  CHECK_EQ_INT(bbi_draw_distinct(&rng, 5, 3, idx), 3);
  CHECK(idx[0] == 0 && idx[1] == 1 && idx[2] == 2);
  /* each step swaps place i with i + r % (n - i) */
  static const uint64_t steps[] = {4, 7, 1};
  script s = {steps, 3, 0};
  rng.user = &s;
  CHECK_EQ_INT(bbi_draw_distinct(&rng, 5, 3, idx), 3);
  /* [0 1 2 3 4]: swap 0 and 4 → [4 1 2 3 0]; swap 1 and 1 + 7 % 4 = 4 → [4 0 2 3 1];
   * swap 2 and 2 + 1 % 3 = 3 → [4 0 3 2 1] */
  CHECK(idx[0] == 4 && idx[1] == 0 && idx[2] == 3);
  CHECK_EQ_INT(s.at, 3);
  /* k past n draws n, each once */
  uint64_t state = 9;
  rng = (bbi_draw_source){splitmix, &state};
  CHECK_EQ_INT(bbi_draw_distinct(&rng, 6, 50, idx), 6);
  bool seen[6] = {false};
  for (size_t i = 0; i < 6; i++) {
    CHECK(idx[i] < 6 && !seen[idx[i]]);
    if (idx[i] < 6) seen[idx[i]] = true;
  }
  CHECK_EQ_INT(bbi_draw_distinct(&rng, 0, 3, idx), 0);
}

static void test_lists(void) {
  bbi_peer_view v;
  bb_error err;
  fill(&v, 8, 2, "3;1;3;2");
  CHECK_EQ_INT(v.n, 3); /* the duplicate dropped, order kept */
  CHECK(id_of(&v.peers[0]) == 3 && id_of(&v.peers[1]) == 1 && id_of(&v.peers[2]) == 2);
  CHECK(bbi_peer_view_has(&v, &(bb_peer_id){0}) == false);
  bb_peer_id two = peer(2);
  CHECK(bbi_peer_view_has(&v, &two));
  /* base58 text is taken as a peer id */
  char text[128];
  bb_peer_id nine = peer(9);
  CHECK(bb_peer_id_to_text(&nine, text, sizeof text) > 0);
  CHECK_EQ_INT(bbi_peer_view_add_list(&v, text, &err), 0);
  CHECK(v.n == 4 && bbi_peer_view_has(&v, &nine));
  /* an empty piece, junk, a negative number */
  bbi_peer_view_init(&v, 8, 2);
  CHECK_EQ_INT(bbi_peer_view_add_list(&v, "1;;2", &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "malformed") != NULL);
  CHECK(bbi_peer_view_add_list(&v, "0OIl", &err) != 0);
  CHECK(bbi_peer_view_add_list(&v, "-5", &err) != 0);
  /* up to 128 are kept whatever the cap; the 129th is a limit */
  char big[2048] = "";
  size_t at = 0;
  for (int i = 1; i <= 129; i++) at += (size_t)snprintf(big + at, sizeof big - at, "%s%d", i > 1 ? ";" : "", i);
  bbi_peer_view_init(&v, 2, 1);
  CHECK_EQ_INT(bbi_peer_view_add_list(&v, big, &err), BB_ERR_LIMIT);
  CHECK_EQ_INT(v.n, BBI_PEER_VIEW_MAX);
}

static void test_sample_and_offer(void) {
  bbi_peer_view v;
  fill(&v, 8, 3, "10;11;12;13");
  uint64_t state = 1;
  bbi_draw_source rng = {splitmix, &state};
  bb_peer_id out[BBI_PEER_VIEW_MAX + 1], to;
  for (int round = 0; round < 50; round++) {
    size_t k = bbi_peer_view_sample(&v, &rng, 3, out);
    CHECK_EQ_INT(k, 3);
    CHECK(!bb_peer_id_equal(&out[0], &out[1]) && !bb_peer_id_equal(&out[1], &out[2]) &&
          !bb_peer_id_equal(&out[0], &out[2]));
    for (size_t i = 0; i < k; i++) CHECK(bbi_peer_view_has(&v, &out[i]));
  }
  CHECK_EQ_INT(bbi_peer_view_sample(&v, &rng, 9, out), 4);
  /* the offer: self first, then shuffle - 1 distinct view entries; the target is a member */
  bb_peer_id self = peer(1);
  size_t k = bbi_peer_view_offer(&v, &rng, &self, &to, out);
  CHECK_EQ_INT(k, 3);
  CHECK(bb_peer_id_equal(&out[0], &self) && bbi_peer_view_has(&v, &to));
  CHECK(bbi_peer_view_has(&v, &out[1]) && bbi_peer_view_has(&v, &out[2]) && !bb_peer_id_equal(&out[1], &out[2]));
  CHECK_EQ_INT(v.n_sent, 0); /* nothing recorded until it went out */
  CHECK(!bbi_peer_view_awaits_reply(&v, &to));
  bbi_peer_view_offer_sent(&v, &to, out, k);
  CHECK(v.n_sent == 2 && bb_peer_id_equal(&v.sent[0], &out[1]) && bb_peer_id_equal(&v.sent[1], &out[2]));
  /* only the member the offer went to may answer it */
  CHECK(bbi_peer_view_awaits_reply(&v, &to) && !bbi_peer_view_awaits_reply(&v, &self));
  CHECK_EQ_INT(bbi_peer_view_answer(&v, &rng, out), 3);
  /* an empty view offers nothing */
  bbi_peer_view empty;
  bbi_peer_view_init(&empty, 4, 2);
  CHECK_EQ_INT(bbi_peer_view_offer(&empty, &rng, &self, &to, out), 0);
  /* the same seed, the same draws */
  uint64_t s1 = 5, s2 = 5;
  bbi_draw_source r1 = {splitmix, &s1}, r2 = {splitmix, &s2};
  bb_peer_id a[4], b[4];
  for (int i = 0; i < 10; i++) {
    bbi_peer_view_sample(&v, &r1, 2, a);
    bbi_peer_view_sample(&v, &r2, 2, b);
    CHECK(memcmp(a, b, 2 * sizeof *a) == 0);
  }
}

typedef struct admitted {
  uint64_t ids[16];
  size_t n;
  uint64_t refuse; /* an id whose admission fails (0: none) */
  uint64_t skip;   /* an id left out of the view (0: none) */
} admitted;

static int record_admit(void *user, const bb_peer_id *p, bb_error *err) {
  admitted *a = user;
  uint64_t id = id_of(p);
  if (id == a->refuse) return bb_error_set(err, BB_ERR_LIMIT, "address book full");
  if (id == a->skip) return BBI_PEER_VIEW_SKIP;
  a->ids[a->n++] = id;
  return 0;
}

static void test_merge(void) {
  bbi_peer_view v;
  bb_error err;
  bb_peer_id self = peer(1);
  /* room: new peers are admitted and added; self and known ones are skipped */
  fill(&v, 4, 2, "2;3");
  bb_peer_id got[] = {peer(1), peer(3), peer(4), peer(5), peer(6)};
  admitted a = {{0}, 0, 0, 0};
  CHECK_EQ_INT(bbi_peer_view_merge(&v, &self, got, 5, NULL, 0, record_admit, &a, &err), 0);
  CHECK_EQ_INT(v.n, 4);
  CHECK(id_of(&v.peers[2]) == 4 && id_of(&v.peers[3]) == 5);
  /* 6 found no room and nothing sent to replace: admitted (its address kept), not added */
  CHECK(a.n == 3 && a.ids[0] == 4 && a.ids[1] == 5 && a.ids[2] == 6);
  /* full: each new peer replaces the first sent entry still in the view */
  bb_peer_id sent[] = {peer(9), peer(3), peer(2)};
  bb_peer_id more[] = {peer(7), peer(8), peer(10)};
  CHECK_EQ_INT(bbi_peer_view_merge(&v, &self, more, 3, sent, 3, NULL, NULL, &err), 0);
  CHECK(id_of(&v.peers[0]) == 8 && id_of(&v.peers[1]) == 7 && id_of(&v.peers[2]) == 4 && id_of(&v.peers[3]) == 5);
  /* a refused admission stops the merge there */
  fill(&v, 8, 2, "2");
  admitted b = {{0}, 0, 4, 0};
  bb_peer_id three[] = {peer(3), peer(4), peer(5)};
  CHECK_EQ_INT(bbi_peer_view_merge(&v, &self, three, 3, NULL, 0, record_admit, &b, &err), BB_ERR_LIMIT);
  CHECK(v.n == 2 && id_of(&v.peers[1]) == 3);
  /* a peer left out (an unadmitted one) is skipped: the merge goes on past it */
  fill(&v, 8, 2, "2");
  admitted c = {{0}, 0, 0, 4};
  CHECK_EQ_INT(bbi_peer_view_merge(&v, &self, three, 3, NULL, 0, record_admit, &c, &err), 0);
  CHECK(v.n == 3 && id_of(&v.peers[1]) == 3 && id_of(&v.peers[2]) == 5 && !bbi_peer_view_has(&v, &three[1]));
  /* a reply replaces what the offer sent, then the offer is forgotten */
  fill(&v, 2, 2, "2;3");
  bb_peer_id offer[] = {self, peer(3)}, target = peer(2);
  bbi_peer_view_offer_sent(&v, &target, offer, 2);
  bb_peer_id reply[] = {peer(4), peer(5)};
  CHECK_EQ_INT(bbi_peer_view_merge_reply(&v, &self, reply, 2, NULL, NULL, &err), 0);
  CHECK(v.n == 2 && id_of(&v.peers[0]) == 2 && id_of(&v.peers[1]) == 4);
  CHECK(v.n_sent == 0 && !bbi_peer_view_awaits_reply(&v, &target));
}

static void test_codec(void) {
  bb_peer_id peers[] = {peer(1), peer(70000)};
  uint8_t msg[BBI_PEER_VIEW_MESSAGE_MAX];
  size_t len = bbi_peer_view_encode(peers, 2, msg);
  /* u8 count, then per peer u8 length and its multihash bytes */
  uint8_t want[64];
  size_t n = 0;
  want[n++] = 2;
  for (int i = 0; i < 2; i++) {
    want[n++] = peers[i].len;
    memcpy(want + n, peers[i].bytes, peers[i].len);
    n += peers[i].len;
  }
  CHECK(len == n && memcmp(msg, want, n) == 0);
  bb_peer_id back[BBI_PEER_VIEW_MAX];
  size_t count = 0;
  bb_error err;
  CHECK_EQ_INT(bbi_peer_view_decode(msg, len, back, &count, &err), 0);
  CHECK(count == 2 && bb_peer_id_equal(&back[0], &peers[0]) && bb_peer_id_equal(&back[1], &peers[1]));
  /* every cut, from a buffer of exactly that length */
  for (size_t cut = 0; cut < len; cut++) {
    uint8_t *copy = malloc(cut ? cut : 1);
    memcpy(copy, msg, cut);
    CHECK_MSG(bbi_peer_view_decode(copy, cut, back, &count, &err) == BB_ERR_MALFORMED, "cut %zu", cut);
    free(copy);
  }
  msg[len] = 0;
  CHECK_EQ_INT(bbi_peer_view_decode(msg, len + 1, back, &count, &err), BB_ERR_MALFORMED);
  CHECK(strstr(err.message, "1 trailing bytes") != NULL);
  const uint8_t too_many[] = {129};
  CHECK_EQ_INT(bbi_peer_view_decode(too_many, 1, back, &count, &err), BB_ERR_MALFORMED);
  const uint8_t bad_peer[] = {1, 2, 0xff, 0xff};
  CHECK(bbi_peer_view_decode(bad_peer, sizeof bad_peer, back, &count, &err) < 0);
  const uint8_t none[] = {0};
  CHECK_EQ_INT(bbi_peer_view_decode(none, 1, back, &count, &err), 0);
  CHECK_EQ_INT(count, 0);
}

int main(void) {
  RUN(test_draw_distinct);
  RUN(test_lists);
  RUN(test_sample_and_offer);
  RUN(test_merge);
  RUN(test_codec);
  return bb_test_finish();
}
