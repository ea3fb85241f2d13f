/* GossipAvg mixes in only updates of members: by default peers of the current view, with
 * members=any everyone; on a node that checks join tokens, only those whose token grants
 * the client role. Anyone else's update is refused and counted, and the model is left as
 * it was. */
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
 * model with peer 2 (B); returns B's counters of merged updates and of `refusal`. */
static void share_with_b(const uint8_t *art, size_t len, uint64_t from, tokens t, const char *refusal,
                         uint64_t *merged, uint64_t *refused) {
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
    share_with_b(art, len, cases[t].from, UNCHECKED, "gossip.refused_non_member", &merged, &refused);
    CHECK_MSG(merged == (cases[t].merged ? 1u : 0u) && refused == (cases[t].merged ? 0u : 1u),
              "case %zu (%s, from %llu): merged %llu, refused %llu", t, cases[t].config ? cases[t].config : "default",
              (unsigned long long)cases[t].from, (unsigned long long)merged, (unsigned long long)refused);
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
    const tokens tk = {true, cases[t].role};
    share_with_b(art, len, 1, tk, cases[t].refusal ? cases[t].refusal : "gossip.refused_role", &merged, &refused);
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

int main(void) {
  RUN(test_members);
  RUN(test_join_tokens);
  RUN(test_bad_members_value);
  return bb_test_finish();
}
