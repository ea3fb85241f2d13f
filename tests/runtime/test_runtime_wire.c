/* Two peers installed from one artifact with different target lists exchange a value end
 * to end (they agree on every site id), and what a hostile peer sends is refused and
 * reported, never crashes. */
#include "programs/examples.h"
#include "rttest.h"

static uint8_t *artifact;
static size_t artifact_len;

static void compile_fednetwork(void) {
  bb_error err;
  int rc = bb_example_compile(&BB_EXAMPLE_MULTI_TARGET_NETWORK, 0, &artifact, &artifact_len, &err);
  CHECK_MSG(rc == 0, "%s", err.message);
}

typedef struct pair {
  bb_registry *reg;
  bb_node *a, *b;
  bb_peer_id pa, pb;
} pair;

static void pair_open(pair *p) {
  p->reg = stub_registry();
  const char *ta[] = {"FedNetwork"};
  const char *tb[] = {"FedNetwork_sink_peers"};
  p->a = install_peer(artifact, artifact_len, 1, ta, 1, p->reg, NULL);
  p->b = install_peer(artifact, artifact_len, 2, tb, 1, p->reg, NULL);
  p->pa = bb_peer_id_from_u64(1);
  p->pb = bb_peer_id_from_u64(2);
  bb_address ab = p2p_address(&p->pb);
  if (p->a) CHECK(bb_node_add_peer(p->a, &p->pb, &ab, NULL) == 0);
}

static void pair_close(pair *p) {
  bb_node_free(p->a);
  bb_node_free(p->b);
  bb_registry_free(p->reg);
}

/* Runs A once (sending to B) and returns A's envelope bytes in *env. */
static void run_sender(pair *p, uint8_t **env, size_t *env_len) {
  bb_val *peers = bb_val_peers(NULL, &p->pb, 1);
  bb_named_value in = {"sink_peers", peers};
  bb_error err;
  CHECK_MSG(bb_node_invoke(p->a, "FedNetwork", &in, 1, 1000, &err) == 0, "%s", err.message);
  bb_val_release(peers);
  const bb_step *steps;
  size_t n;
  CHECK(bb_node_poll(p->a, 1000, &steps, &n, &err) == 0);
  CHECK_EQ_INT(count_steps(steps, n, BB_STEP_SEND), 1);
  CHECK_EQ_INT(count_steps(steps, n, BB_STEP_OP_FAILED), 0);
  if (count_steps(steps, n, BB_STEP_OP_FAILED)) print_steps("A", steps, n);
  *env = NULL;
  for (size_t i = 0; i < n; i++)
    if (steps[i].kind == BB_STEP_SEND) {
      CHECK(bb_peer_id_equal(&steps[i].peer, &p->pb));
      *env = malloc(steps[i].len);
      memcpy(*env, steps[i].bytes, steps[i].len);
      *env_len = steps[i].len;
    }
}

static void test_two_peers_exchange(void) {
  pair p;
  pair_open(&p);
  if (!p.a || !p.b) return pair_close(&p);
  /* the two nodes agree on the receiving site although they run different targets */
  CHECK(bb_node_site(p.b, "FedNetwork_sink_peers", "prediction_port__recv_0") != UINT64_MAX);
  uint8_t *env = NULL;
  size_t len = 0;
  run_sender(&p, &env, &len);
  CHECK(env != NULL);
  if (!env) return pair_close(&p);
  bb_error err;
  CHECK_MSG(bb_node_deliver(p.b, &p.pa, env, len, 2000, &err) == 0, "%s", err.message);
  const bb_step *steps;
  size_t n;
  CHECK(bb_node_poll(p.b, 2000, &steps, &n, &err) == 0);
  if (n) print_steps("B", steps, n);
  CHECK_EQ_INT(n, 0);
  stub_state *agg = bb_node_component(p.b, "aggregator", NULL);
  CHECK(agg && agg->contributions == 1);
  if (agg && agg->contributions == 1) {
    CHECK_EQ_INT(agg->last_len, 3);
    CHECK(agg->last[0] == 2 && agg->last[1] == 4 && agg->last[2] == 6);
    CHECK(agg->had_source && bb_peer_id_equal(&agg->last_source, &p.pa));
  }
  /* the same envelope again is a replay: the dedup gate stops it and says so */
  CHECK(bb_node_deliver(p.b, &p.pa, env, len, 3000, &err) == 0);
  CHECK(bb_node_poll(p.b, 3000, &steps, &n, &err) == 0);
  CHECK_EQ_INT(count_steps(steps, n, BB_STEP_OP_FAILED), 1);
  for (size_t i = 0; i < n; i++)
    if (steps[i].kind == BB_STEP_OP_FAILED) CHECK_STR(steps[i].reason, "duplicate");
  CHECK(agg && agg->contributions == 1);
  /* nothing is left behind once the work is done */
  bb_node_stats st;
  bb_node_stats_get(p.b, &st);
  CHECK_EQ_INT(st.executions, 0);
  CHECK_EQ_INT(st.ingress_bytes, 0);
  free(env);
  pair_close(&p);
}

static void test_hostile_bytes(void) {
  pair p;
  pair_open(&p);
  if (!p.a || !p.b) return pair_close(&p);
  bb_error err;
  static const uint8_t junk[] = {0xff, 0xff};
  CHECK(bb_node_deliver(p.b, &p.pa, junk, sizeof junk, 10, &err) == BB_ERR_MALFORMED);
  const bb_step *steps;
  size_t n;
  CHECK(bb_node_poll(p.b, 10, &steps, &n, &err) == 0 && n == 0);

  /* a fill aimed at a site that is not a Recv payload is refused and reported */
  uint8_t *env = NULL;
  size_t len = 0;
  run_sender(&p, &env, &len);
  if (!env) return pair_close(&p);
  bb_envelope *e = NULL;
  CHECK(bb_envelope_decode(env, len, NULL, NULL, &e, &err) == 0);
  uint64_t recv = bb_node_site(p.b, "FedNetwork_sink_peers", "prediction_port__recv_0");
  uint64_t other = bb_node_site(p.b, "FedNetwork_sink_peers", "prediction_port__recv_0#dedup_rx_out");
  CHECK(recv != UINT64_MAX && other != UINT64_MAX && other != recv);
  bb_address a = {.n = 1};
  a.seg[0].kind = BB_ADDR_SITE;
  a.seg[0].value = other;
  uint8_t suffix[16];
  e->fills[0].dest_suffix = (bb_bytes){suffix, bb_address_to_bytes(&a, suffix, sizeof suffix)};
  uint8_t *forged;
  size_t forged_len;
  CHECK(bb_envelope_encode(e, NULL, &forged, &forged_len, &err) == 0);
  CHECK(bb_node_deliver(p.b, &p.pa, forged, forged_len, 20, &err) == 0);
  CHECK(bb_node_poll(p.b, 20, &steps, &n, &err) == 0);
  CHECK_EQ_INT(count_steps(steps, n, BB_STEP_WIRE_RECEIVE_FAILED), 1);
  if (n) CHECK_STR(steps[0].reason, "unknown_site");
  stub_state *agg = bb_node_component(p.b, "aggregator", NULL);
  CHECK(agg && agg->contributions == 0);
  bb_buffer_free(NULL, forged);

  /* an unknown type hash */
  e->fills[0].dest_suffix.len = 0;
  a.seg[0].value = recv;
  e->fills[0].dest_suffix = (bb_bytes){suffix, bb_address_to_bytes(&a, suffix, sizeof suffix)};
  e->fills[0].type_hash = 0xdeadbeef;
  CHECK(bb_envelope_encode(e, NULL, &forged, &forged_len, &err) == 0);
  CHECK(bb_node_deliver(p.b, &p.pa, forged, forged_len, 30, &err) == 0);
  CHECK(bb_node_poll(p.b, 30, &steps, &n, &err) == 0);
  CHECK_EQ_INT(count_steps(steps, n, BB_STEP_WIRE_RECEIVE_FAILED), 1);
  if (n) CHECK_STR(steps[0].reason, "unknown_type_hash");
  bb_buffer_free(NULL, forged);
  CHECK(bb_node_counter(p.b, "wire.rejected") == 2);

  bb_envelope_free(e, NULL);
  free(env);
  pair_close(&p);
}

int main(void) {
  compile_fednetwork();
  if (!artifact) return bb_test_finish();
  RUN(test_two_peers_exchange);
  RUN(test_hostile_bytes);
  bb_buffer_free(NULL, artifact);
  return bb_test_finish();
}
