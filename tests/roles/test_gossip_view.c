/* GossipView's exchange over the simulator: the initiator of a shuffle makes room for the
 * entries it receives by dropping the ones it sent away (Cyclon's rule), so a full view
 * still learns new peers from a reply; a reply is taken only from the peer the shuffle
 * went to; under a join policy strangers neither shuffle nor are shuffled in; and the
 * exchange's payloads keep their layout. */
#include <stdlib.h>

#include "control_plane.h"
#include "bb/roles.h"
#include "bb/sim.h"
#include "wire/join_tokens.h"

#define MS 1000000ull

static const bb_slot VIEW = {BB_ROLE_PEER_SELECTOR, "view", NULL};

/* Each run: sample one peer (which starts one exchange) and report the view. */
static void body(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "sample", bb_rec_peer_selector_sample(g, &VIEW, 1));
  bb_rec_output(g, "view", bb_rec_peer_selector_current_view(g, &VIEW));
}

static const bb_module GOSSIP = {sizeof(bb_module), "Gossip", body, NULL, NULL, NULL, 0};

static int bind_view(bb_compiler *c, const void *config, bb_error *err) {
  return bb_compiler_bind_peer_selector(c, "view", "GossipView", config, err);
}

static uint8_t *compile(const char *config, size_t *len) { return compile_test_module(&GOSSIP, bind_view, config, len); }

typedef struct seen {
  uint64_t view[8];
  size_t n;
  size_t failures;
} seen;

static void observe(void *user, const bb_peer_id *peer, const bb_step *s) {
  seen *w = user;
  uint64_t id = 0;
  bb_peer_id_as_u64(peer, &id);
  if (s->kind == BB_STEP_OP_FAILED) w->failures++;
  if (id != 1 || s->kind != BB_STEP_APP_EVENT || strcmp(s->topic, "view") != 0 ||
      bb_val_kind_of(s->value) != BB_VAL_PEERS)
    return;
  w->n = bb_val_count(s->value) < 8 ? bb_val_count(s->value) : 8;
  for (size_t i = 0; i < w->n; i++) bb_peer_id_as_u64(&bb_val_as_peers(s->value)[i], &w->view[i]);
}

static void test_full_initiator_takes_the_reply(void) {
  size_t a_len = 0, b_len = 0;
  /* A (1) knows B (2) and C (3) and its view is full; B and C know 4 and 5 */
  uint8_t *a_art = compile("seeds=2;3,view=2,shuffle=2", &a_len);
  uint8_t *b_art = compile("seeds=4;5,view=2,shuffle=2", &b_len);
  if (!a_art || !b_art) return free(a_art), free(b_art);
  seen w = {{0}, 0, 0};
  bb_error err;
  bb_sim_config sc = {sizeof sc, 3, 1 * MS, 0, 0, 0, 0, 0, 0, 0};
  bb_sim *sim = NULL;
  CHECK(bb_sim_new(&sc, &sim, &err) == 0);
  bb_sim_set_observer(sim, observe, &w);
  const char *targets[] = {"Gossip"};
  bb_node *nodes[3];
  for (uint64_t id = 1; id <= 3; id++) {
    nodes[id - 1] = install_peer(id == 1 ? a_art : b_art, id == 1 ? a_len : b_len, id, targets, 1, shipped_registry(),
                                 NULL);
    bb_peer_id p = bb_peer_id_from_u64(id);
    if (nodes[id - 1]) CHECK(bb_sim_attach(sim, nodes[id - 1], &p, &err) == 0);
  }
  if (nodes[0] && nodes[1] && nodes[2]) {
    for (int round = 0; round < 2; round++) {
      uint64_t now = bb_sim_now(sim);
      CHECK_MSG(bb_node_invoke(nodes[0], "Gossip", NULL, 0, now, &err) == 0, "%s", err.message);
      CHECK(bb_sim_run_until(sim, now + 20 * MS, &err) >= 0);
    }
    /* A sent itself and one of B, C; the reply's 4 and 5 must have found room */
    bool learned = false;
    for (size_t i = 0; i < w.n; i++) learned |= w.view[i] == 4 || w.view[i] == 5;
    CHECK_EQ_INT(w.n, 2);
    CHECK_MSG(learned, "A's view is still %llu, %llu", (unsigned long long)w.view[0], (unsigned long long)w.view[1]);
    CHECK_EQ_INT(w.failures, 0);
  }
  bb_sim_free(sim);
  for (int i = 0; i < 3; i++) bb_node_free(nodes[i]);
  free(a_art);
  free(b_art);
}

/* The exchange's payloads are read by other builds: u8 count, then per peer u8 length and
 * the multihash bytes. A lone peer with a one-entry view makes every draw certain. */
static void test_message_bytes_pinned(void) {
  size_t len = 0;
  uint8_t *art = compile("seeds=2,view=2,shuffle=2", &len);
  const char *targets[] = {"Gossip"};
  bb_node *node = art ? install_peer(art, len, 1, targets, 1, shipped_registry(), NULL) : NULL;
  if (node) {
    bb_error err;
    const bb_step *steps;
    size_t n;
    uint8_t got[256];
    /* Sample's Shuffle to peer 2: this peer, then its one view entry */
    CHECK_MSG(bb_node_invoke(node, "Gossip", NULL, 0, 0, &err) == 0, "%s", err.message);
    CHECK(bb_node_poll(node, 0, &steps, &n, &err) == 0);
    bytes_out shuffle = {{0}, 0};
    out_u8(&shuffle, 2);
    out_peer(&shuffle, 1);
    out_peer(&shuffle, 2);
    size_t got_len = sent_payload(steps, n, "Shuffle", got, sizeof got);
    CHECK_EQ_INT(got_len, shuffle.n);
    CHECK(got_len == shuffle.n && memcmp(got, shuffle.b, got_len) == 0);
    /* a Shuffle from peer 3 is answered with the view as it was: peer 2 alone */
    bytes_out from3 = {{0}, 0};
    out_u8(&from3, 1);
    out_peer(&from3, 3);
    deliver_message(node, 3, "view", "Shuffle", from3.b, from3.n, 1);
    CHECK(bb_node_poll(node, 1, &steps, &n, &err) == 0);
    bytes_out reply = {{0}, 0};
    out_u8(&reply, 1);
    out_peer(&reply, 2);
    got_len = sent_payload(steps, n, "ShuffleReply", got, sizeof got);
    CHECK_EQ_INT(got_len, reply.n);
    CHECK(got_len == reply.n && memcmp(got, reply.b, got_len) == 0);
  }
  bb_node_free(node);
  free(art);
}

/* An exchange message of test identities. */
static bytes_out entries(const uint64_t *ids, size_t n) {
  bytes_out o = {{0}, 0};
  out_u8(&o, (uint8_t)n);
  for (size_t i = 0; i < n; i++) out_peer(&o, ids[i]);
  return o;
}

/* Delivers `op` from `from` to node 1's view and polls: the failed ops it gave. */
static size_t exchange(bb_node *node, uint64_t from, const char *op, const uint64_t *ids, size_t n, uint64_t now) {
  const bytes_out m = entries(ids, n);
  deliver_message(node, from, "view", op, m.b, m.n, now);
  const bb_step *steps;
  size_t k;
  CHECK(bb_node_poll(node, now, &steps, &k, NULL) == 0);
  return count_steps(steps, k, BB_STEP_OP_FAILED);
}

/* Node 1's view now. */
static size_t view_of(bb_node *node, uint64_t now, uint64_t *ids) {
  seen w = {{0}, 0, 0};
  const bb_step *steps;
  size_t k;
  CHECK(bb_node_invoke(node, "Gossip", NULL, 0, now, NULL) == 0);
  CHECK(bb_node_poll(node, now, &steps, &k, NULL) == 0);
  bb_peer_id self = bb_peer_id_from_u64(1);
  for (size_t i = 0; i < k; i++) observe(&w, &self, &steps[i]);
  memcpy(ids, w.view, w.n * sizeof *ids);
  return w.n;
}

static bool holds(const uint64_t *ids, size_t n, uint64_t id) {
  for (size_t i = 0; i < n; i++)
    if (ids[i] == id) return true;
  return false;
}

/* The attacker's way in: one stranger (peer 4) shuffles itself into an open view; under a
 * join policy (peers 2, 3 and 5 hold client tokens) its Shuffle is refused and counted, and
 * an admitted peer's Shuffle naming strangers merges the admitted entries only. */
static void test_policy_keeps_strangers_out(void) {
  size_t len = 0;
  uint8_t *art = compile("seeds=2,view=6,shuffle=3", &len);
  if (!art) return;
  const char *targets[] = {"Gossip"};
  bb_node *open = install_peer(art, len, 1, targets, 1, shipped_registry(), NULL);
  const bbt_keys op = bbt_keys_counting(0x00);
  const bb_join_policy policy = {"room-1", op.pk, 1};
  bb_install_args a = install_args(art, len, 1, targets, 1, shipped_registry());
  a.admission = &policy;
  bb_node *closed = NULL;
  CHECK(bb_install(&a, &closed, NULL, NULL) == 0);
  if (open && closed) {
    for (uint64_t id = 2; id <= 5; id++) {
      if (id == 4) continue;
      bb_peer_id p = bb_peer_id_from_u64(id);
      uint8_t token[BB_JOIN_TOKEN_MAX_BYTES];
      size_t n = bbt_make_token(&op, BB_JOIN_CLIENT, 1700003600, &p, "room-1", token);
      CHECK(bb_node_admit_token(closed, &p, token, n, 1700000000, 0, NULL, NULL) == 0);
    }
    const uint64_t stranger[] = {4}, mixed[] = {3, 4, 5, 6};
    uint64_t ids[8];
    size_t n;
    CHECK_EQ_INT(exchange(open, 4, "Shuffle", stranger, 1, 0), 0);
    n = view_of(open, 1, ids);
    CHECK(holds(ids, n, 4));
    CHECK_EQ_INT(exchange(closed, 4, "Shuffle", stranger, 1, 0), 1);
    CHECK_EQ_INT(exchange(closed, 3, "Shuffle", mixed, 4, 0), 0);
    n = view_of(closed, 1, ids);
    CHECK_MSG(n == 3 && holds(ids, n, 2) && holds(ids, n, 3) && holds(ids, n, 5), "%zu entries", n);
    /* the stranger's Shuffle, and 4 and 6 named by peer 3 */
    CHECK_EQ_INT(bb_node_counter(closed, "gossip_view.refused_unadmitted"), 3);
  }
  bb_node_free(open);
  bb_node_free(closed);
  free(art);
}

/* A ShuffleReply merges only from the peer the last Shuffle went to, and only once. */
static void test_only_the_asked_peer_replies(void) {
  size_t len = 0;
  uint8_t *art = compile("seeds=2,view=6,shuffle=2", &len);
  const char *targets[] = {"Gossip"};
  bb_node *node = art ? install_peer(art, len, 1, targets, 1, shipped_registry(), NULL) : NULL;
  if (node) {
    uint64_t ids[8];
    view_of(node, 0, ids); /* Sample: a Shuffle to peer 2, the only member */
    const uint64_t seven[] = {7}, eight[] = {8};
    CHECK_EQ_INT(exchange(node, 3, "ShuffleReply", seven, 1, 1), 1);
    CHECK_EQ_INT(bb_node_counter(node, "gossip_view.unsolicited_replies"), 1);
    CHECK_EQ_INT(exchange(node, 2, "ShuffleReply", eight, 1, 2), 0);
    CHECK_EQ_INT(exchange(node, 2, "ShuffleReply", seven, 1, 3), 1); /* answered already */
    const size_t n = view_of(node, 4, ids);
    CHECK(holds(ids, n, 8) && !holds(ids, n, 7));
    CHECK_EQ_INT(bb_node_counter(node, "gossip_view.unsolicited_replies"), 2);
  }
  bb_node_free(node);
  free(art);
}

int main(void) {
  RUN(test_full_initiator_takes_the_reply);
  RUN(test_policy_keeps_strangers_out);
  RUN(test_only_the_asked_peer_replies);
  RUN(test_message_bytes_pinned);
  return bb_test_finish();
}
