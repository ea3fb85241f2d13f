/* GossipAvg mixes in only updates of members: by default peers of the current view, with
 * members=any everyone; on a node that checks join tokens, only those whose token grants
 * the client role. Anyone else's update is refused and counted, and the model is left as
 * it was. A refused sender is told why (but not one only outside the view), within bounds
 * per peer and in all. */
#include "gossip_avg_fixture.h"
#include "wire/join_tokens.h"

/* Each run: the model's parameters to `peers`; what arrives is mixed in. The view is in
 * the graph so that its slot is bound. */
static void share_body(bb_rec *g, void *user) {
  (void)user;
  bb_value peers = bb_rec_input(g, "peers", BB_TYPE_PEER_ID_VEC);
  bb_value tick = bb_rec_input(g, "tick", NULL);
  bb_rec_output(g, "view", bb_rec_peer_selector_current_view(g, &VIEW));
  bb_rec_net_out(g, "share", peers, bb_rec_model_params_after(g, &MODEL, tick));
  bb_value received = bb_rec_lookup_output(g, "share");
  bb_rec_aggregator_contribute(g, &AGGREGATOR, received, received);
}

static const bb_module SHARE = {sizeof(bb_module), "Share", share_body, NULL, NULL, NULL, 0};

/* How B checks join tokens: not at all, or under a policy with peer 1's token of this
 * role (BB_JOIN_NONE: peer 1 holds none). */
typedef struct tokens {
  bool checked;
  bb_join_role role;
} tokens;

static const tokens UNCHECKED = {false, BB_JOIN_NONE};

static bb_node *install_b(const uint8_t *art, size_t len, const char *const *targets, tokens t) {
  if (!t.checked) return install_peer(art, len, 2, targets, 2, shipped_registry(), NULL);
  const bbt_keys op = bbt_keys_counting(0x00);
  const bb_join_policy policy = {"room-1", op.pk, 1};
  bb_install_args a = install_args(art, len, 2, targets, 2, shipped_registry());
  a.admission = &policy;
  bb_node *b = NULL;
  bb_error err;
  CHECK_MSG(bb_install(&a, &b, NULL, &err) == 0, "%s", err.message);
  if (b && t.role != BB_JOIN_NONE) {
    bb_peer_id p1 = bb_peer_id_from_u64(1);
    uint8_t token[BB_JOIN_TOKEN_MAX_BYTES];
    size_t n = bbt_make_token(&op, (int)t.role, 1700000060, &p1, "room-1", token);
    CHECK(bb_node_admit_token(b, &p1, token, n, 1700000000, 0, NULL, NULL) == 0);
  }
  return b;
}

/* Peer `from` (1: in B's view; 3: known to B, not in its view; 4: a stranger) shares its
 * model with peer 2 (B); returns B's counters of merged updates and of `refusal`, and the
 * envelopes B sent back (refusal notices). */
static void share_with_b(const uint8_t *art, size_t len, uint64_t from, tokens t, const char *refusal,
                         uint64_t *merged, uint64_t *refused, size_t *told) {
  const char *const targets[] = {"Share", "Share_peers"};
  bb_node *a = install_peer(art, len, from, targets, 2, shipped_registry(), NULL);
  bb_node *b = install_b(art, len, targets, t);
  if (a && b) {
    bb_peer_id pb = bb_peer_id_from_u64(2), p1 = bb_peer_id_from_u64(1), p3 = bb_peer_id_from_u64(3);
    bb_address ab = p2p_address(&pb), a1 = p2p_address(&p1), a3 = p2p_address(&p3);
    CHECK(bb_node_add_peer(a, &pb, &ab, NULL) == 0);
    CHECK(bb_node_add_peer(b, &p1, &a1, NULL) == 0 && bb_node_add_peer(b, &p3, &a3, NULL) == 0);
    bb_val *peers = bb_val_peers(NULL, &pb, 1), *tick = f32_val((const float[]){1}, 1);
    bb_named_value in[] = {{"peers", peers}, {"tick", tick}};
    CHECK(bb_node_invoke(a, "Share", in, 2, 0, NULL) == 0);
    bb_val_release(peers);
    bb_val_release(tick);
    const bb_step *s;
    size_t k;
    CHECK(bb_node_poll(a, 0, &s, &k, NULL) == 0);
    bb_peer_id pa = bb_peer_id_from_u64(from);
    for (size_t i = 0; i < k; i++)
      if (s[i].kind == BB_STEP_SEND) CHECK(bb_node_deliver(b, &pa, s[i].bytes, s[i].len, 1, NULL) == 0);
    CHECK(bb_node_poll(b, 1, &s, &k, NULL) == 0);
    *told = count_steps(s, k, BB_STEP_SEND);
    *merged = bb_node_counter(b, "gossip.merged");
    *refused = bb_node_counter(b, refusal);
  }
  bb_node_free(a);
  bb_node_free(b);
}

static void test_members(void) {
  struct {
    const char *config;
    uint64_t from;
    bool merged;
  } cases[] = {
      {NULL, 1, true},         {NULL, 3, false},          {NULL, 4, false}, /* the current view (default) */
      {"members=view", 1, true}, {"members=any", 3, true}, {"members=any", 4, true}, /* everyone */
  };
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    size_t len = 0;
    uint8_t *art = compile_test_module(&SHARE, bind_gossip_avg, cases[t].config, &len);
    if (!art) continue;
    uint64_t merged = 0, refused = 0;
    size_t told = 0;
    share_with_b(art, len, cases[t].from, UNCHECKED, "gossip.refused_non_member", &merged, &refused, &told);
    CHECK_MSG(merged == (cases[t].merged ? 1u : 0u) && refused == (cases[t].merged ? 0u : 1u),
              "case %zu (%s, from %llu): merged %llu, refused %llu", t, cases[t].config ? cases[t].config : "default",
              (unsigned long long)cases[t].from, (unsigned long long)merged, (unsigned long long)refused);
    /* a peer outside the view is not told: partial views refuse honest peers all the time */
    CHECK_EQ_INT(told, 0);
    free(art);
  }
}

/* With join tokens, a view member mixes in only with a client's token. */
static void test_join_tokens(void) {
  struct {
    bb_join_role role;
    const char *refusal; /* NULL: merged */
  } cases[] = {{BB_JOIN_CLIENT, NULL},
               {BB_JOIN_NONE, "gossip.refused_unadmitted"},
               {BB_JOIN_WATCHER, "gossip.refused_role"},
               {BB_JOIN_SERVER, "gossip.refused_role"}};
  size_t len = 0;
  uint8_t *art = compile_test_module(&SHARE, bind_gossip_avg, NULL, &len);
  for (size_t t = 0; art && t < sizeof cases / sizeof cases[0]; t++) {
    uint64_t merged = 0, refused = 0;
    size_t told = 0;
    const tokens tk = {true, cases[t].role};
    share_with_b(art, len, 1, tk, cases[t].refusal ? cases[t].refusal : "gossip.refused_role", &merged, &refused, &told);
    CHECK_EQ_INT(told, cases[t].refusal ? 1 : 0); /* a peer without a client's token hears why */
    CHECK_MSG(merged == (cases[t].refusal ? 0u : 1u) && refused == (cases[t].refusal ? 1u : 0u),
              "%s: merged %llu, refused %llu", bb_join_role_name(cases[t].role), (unsigned long long)merged,
              (unsigned long long)refused);
  }
  free(art);
}

static void test_bad_members_value(void) {
  size_t len = 0;
  uint8_t *art = compile_test_module(&SHARE, bind_gossip_avg, "members=friends", &len);
  if (!art) return;
  const char *const targets[] = {"Share"};
  bb_install_args a = install_args(art, len, 1, targets, 1, shipped_registry());
  bb_node *n = NULL;
  bb_error err;
  CHECK(bb_install(&a, &n, NULL, &err) != 0);
  CHECK_MSG(strstr(err.message, "members=`friends` is not view|any") != NULL, "%s", err.message);
  free(art);
}

/* ---- a refused peer is told why ---------------------------------------------------------- */

#define SECOND 1000000000ull
#define GOSSIPERS 3

/* Peers 1 and 2 run a 2 -> 2 model (6 parameters); peer 3, the confused user, a 3 -> 2 one
 * (8 parameters). Everyone takes anyone's update (members=any). */
static int bind_wrong_size(bb_compiler *c, const void *user, bb_error *err) {
  (void)user;
  return bind_gossip_avg_model(c, "inputs=3,outputs=2", "members=any", err);
}

typedef struct gossipers {
  bb_node *node[GOSSIPERS];
  bb_peer_id peer[GOSSIPERS];
  size_t told[GOSSIPERS];       /* app events `refused` each raised */
  char last_told[GOSSIPERS][256];
  size_t sent[GOSSIPERS];       /* envelopes each sent */
} gossipers;

static int gossiper_of(const gossipers *g, const bb_peer_id *p) {
  for (int i = 0; i < GOSSIPERS; i++)
    if (bb_peer_id_equal(&g->peer[i], p)) return i;
  return -1;
}

/* Polls every node at `now` and carries what each sends to its destination, until nothing
 * more is sent. */
static void pump(gossipers *g, uint64_t now) {
  for (bool moved = true; moved;) {
    moved = false;
    for (int i = 0; i < GOSSIPERS; i++) {
      const bb_step *s;
      size_t k;
      CHECK(bb_node_poll(g->node[i], now, &s, &k, NULL) == 0);
      for (size_t j = 0; j < k; j++) {
        if (s[j].kind == BB_STEP_APP_EVENT && s[j].topic && strcmp(s[j].topic, "refused") == 0) {
          g->told[i]++;
          snprintf(g->last_told[i], sizeof g->last_told[i], "%.*s", (int)s[j].len, (const char *)s[j].bytes);
        }
        if (s[j].kind != BB_STEP_SEND) continue;
        g->sent[i]++;
        const int to = gossiper_of(g, &s[j].peer);
        if (to >= 0) CHECK(bb_node_deliver(g->node[to], &g->peer[i], s[j].bytes, s[j].len, now, NULL) == 0);
        moved = true;
      }
    }
  }
}

static bool gossipers_open(gossipers *g, const uint8_t *art, size_t len, const uint8_t *wrong, size_t wrong_len) {
  static const char *const targets[] = {"Share", "Share_peers"};
  memset(g, 0, sizeof *g);
  bool ok = true;
  for (int i = 0; i < GOSSIPERS; i++) {
    g->peer[i] = bb_peer_id_from_u64((uint64_t)i + 1);
    g->node[i] = i == 2 ? install_peer(wrong, wrong_len, 3, targets, 2, shipped_registry(), NULL)
                        : install_peer(art, len, (uint64_t)i + 1, targets, 2, shipped_registry(), NULL);
    ok = ok && g->node[i];
  }
  for (int i = 0; ok && i < GOSSIPERS; i++)
    for (int j = 0; j < GOSSIPERS; j++) {
      bb_address a = p2p_address(&g->peer[j]);
      if (i != j) CHECK(bb_node_add_peer(g->node[i], &g->peer[j], &a, NULL) == 0);
    }
  return ok;
}

static void gossipers_close(gossipers *g) {
  for (int i = 0; i < GOSSIPERS; i++) bb_node_free(g->node[i]);
}

/* Peer `i` shares its model with `peers` at `now`. */
static void share(gossipers *g, int i, const bb_peer_id *peers, size_t n, uint64_t now) {
  bb_val *to = bb_val_peers(NULL, peers, n), *tick = f32_val((const float[]){1}, 1);
  bb_named_value in[] = {{"peers", to}, {"tick", tick}};
  CHECK(bb_node_invoke(g->node[i], "Share", in, 2, now, NULL) == 0);
  bb_val_release(to);
  bb_val_release(tick);
}

/* A user who started a peer with a model of another size gossips with two others: each
 * round it is told, by each peer it sent to, why its model was refused — and it is told
 * the sizes — while the other two keep mixing each other's models in. (They are told by
 * the confused peer too: it refuses theirs for the same reason.) */
static void test_wrong_size_peer_is_told_why(void) {
  size_t len = 0, wrong_len = 0;
  uint8_t *art = compile_test_module(&SHARE, bind_gossip_avg, "members=any", &len);
  uint8_t *wrong = compile_test_module(&SHARE, bind_wrong_size, NULL, &wrong_len);
  gossipers g;
  if (art && wrong && gossipers_open(&g, art, len, wrong, wrong_len)) {
    for (uint64_t r = 0; r < 3; r++)
      for (int i = 0; i < GOSSIPERS; i++) {
        bb_peer_id others[2] = {g.peer[(i + 1) % GOSSIPERS], g.peer[(i + 2) % GOSSIPERS]};
        share(&g, i, others, 2, r * SECOND);
        pump(&g, r * SECOND);
      }
    CHECK_EQ_INT(bb_node_counter(g.node[0], "gossip.merged"), 3); /* peer 2's, each round */
    CHECK_EQ_INT(bb_node_counter(g.node[1], "gossip.merged"), 3);
    CHECK_EQ_INT(bb_node_counter(g.node[2], "gossip.merged"), 0);
    CHECK_EQ_INT(g.told[2], 2 * 3); /* by peers 1 and 2, each round */
    CHECK_MSG(strstr(g.last_told[2], "the model's 6 parameters: it holds 8 float32 values") != NULL, "%s", g.last_told[2]);
    CHECK_EQ_INT(bb_node_counter(g.node[2], "refusal_notice.received"), 6);
    CHECK_EQ_INT(g.told[0], 3);
    CHECK_MSG(strstr(g.last_told[0], "the model's 8 parameters: it holds 6 float32 values") != NULL, "%s", g.last_told[0]);
    CHECK_EQ_INT(bb_node_counter(g.node[0], "refusal_notice.unsent") + bb_node_counter(g.node[0], "refusal_notice.held"), 0);
  }
  gossipers_close(&g);
  free(art);
  free(wrong);
}

/* A peer pushing refused updates as fast as it can makes the refuser send at most one
 * notice a second to it; many peers doing so, at most 16 a second in all. Every update is
 * still refused and counted. */
static void test_refusal_notices_are_bounded(void) {
  size_t len = 0, wrong_len = 0;
  uint8_t *art = compile_test_module(&SHARE, bind_gossip_avg, "members=any", &len);
  uint8_t *wrong = compile_test_module(&SHARE, bind_wrong_size, NULL, &wrong_len);
  gossipers g;
  if (art && wrong && gossipers_open(&g, art, len, wrong, wrong_len)) {
    /* peer 3 shares with peer 1 fifty times at once, and again a second later */
    const bb_step *s;
    size_t k;
    uint8_t *envelope = NULL; /* the last of them, kept */
    size_t envelope_len = 0, notices = 0;
    for (int burst = 0; burst < 2; burst++) {
      const uint64_t now = (uint64_t)burst * SECOND;
      for (int n = 0; n < 50; n++) {
        share(&g, 2, &g.peer[0], 1, now);
        CHECK(bb_node_poll(g.node[2], now, &s, &k, NULL) == 0);
        for (size_t j = 0; j < k; j++)
          if (s[j].kind == BB_STEP_SEND) {
            CHECK(bb_node_deliver(g.node[0], &g.peer[2], s[j].bytes, s[j].len, now, NULL) == 0);
            free(envelope);
            envelope = malloc(s[j].len);
            if (envelope) memcpy(envelope, s[j].bytes, s[j].len);
            envelope_len = s[j].len;
          }
        CHECK(bb_node_poll(g.node[0], now, &s, &k, NULL) == 0);
        notices += count_steps(s, k, BB_STEP_SEND);
      }
      CHECK_EQ_INT(notices, (size_t)burst + 1);
    }
    CHECK_EQ_INT(bb_node_counter(g.node[0], "gossip.refused_length"), 100);
    CHECK_EQ_INT(bb_node_counter(g.node[0], "refusal_notice.held"), 98);
    /* 40 peers (known to peer 1) sending that update within the same instant: 16 told */
    notices = 0;
    for (uint64_t p = 0; envelope && p < 40; p++) {
      bb_peer_id from = bb_peer_id_from_u64(100 + p);
      bb_address a = p2p_address(&from);
      CHECK(bb_node_add_peer(g.node[0], &from, &a, NULL) == 0);
      CHECK(bb_node_deliver(g.node[0], &from, envelope, envelope_len, 5 * SECOND, NULL) == 0);
      CHECK(bb_node_poll(g.node[0], 5 * SECOND, &s, &k, NULL) == 0);
      notices += count_steps(s, k, BB_STEP_SEND);
    }
    CHECK_EQ_INT(notices, 16);
    CHECK_EQ_INT(bb_node_counter(g.node[0], "refusal_notice.held"), 98 + 24);
    free(envelope);
  }
  gossipers_close(&g);
  free(art);
  free(wrong);
}

int main(void) {
  RUN(test_members);
  RUN(test_join_tokens);
  RUN(test_bad_members_value);
  RUN(test_wrong_size_peer_is_told_why);
  RUN(test_refusal_notices_are_bounded);
  return bb_test_finish();
}
