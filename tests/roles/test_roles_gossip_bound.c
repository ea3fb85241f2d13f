/* GossipAvg's distance bound, acted as the attacker would: a view member pushes what it
 * likes into peer B's model. An update within twice the yardstick (the median distance of
 * what B mixed in, or before anything the norm of B's own parameters) is mixed in; one
 * past it is pulled back onto it; past three times it — 100 × a model, 3e38 everywhere —
 * it is left out and counted, and B's model is left as it was. NaN and a wrong length are
 * refused alone and counted. */
#include <math.h>

#include "gossip_avg_fixture.h"

/* A run sends `update` to `peers` and reports this node's parameters ("own"); what
 * arrives is mixed in, and the parameters after it are reported ("mixed"). */
static void push_body(bb_rec *g, void *user) {
  (void)user;
  bb_value peers = bb_rec_input(g, "peers", BB_TYPE_PEER_ID_VEC);
  bb_value update = bb_rec_input(g, "update", BB_TYPE_TENSOR_F32);
  bb_rec_output(g, "view", bb_rec_peer_selector_current_view(g, &VIEW));
  bb_rec_output(g, "own", bb_rec_model_params_after(g, &MODEL, update));
  bb_rec_net_out(g, "share", peers, update);
  bb_value received = bb_rec_lookup_output(g, "share");
  bb_value merged = bb_rec_aggregator_contribute(g, &AGGREGATOR, received, received);
  bb_rec_output(g, "mixed", bb_rec_model_params_after(g, &MODEL, merged));
}

static const bb_module PUSH = {sizeof(bb_module), "Push", push_body, NULL, NULL, NULL, 0};

#define P 6 /* CpuMlp 2 -> 2: four weights, two biases */

/* Peer 1 (in B's view) and B (peer 2), each knowing the other. */
typedef struct pair {
  uint8_t *art;
  bb_node *a, *b;
  uint64_t now;
  float own[P], mixed[P]; /* B's parameters: before anything, and after the last push */
  bool merged;            /* the last push reported "mixed" */
} pair;

static const char *const TARGETS[] = {"Push", "Push_peers"};

/* Takes B's "own" and "mixed" outputs from its steps. */
static void read_outputs(pair *p, const bb_step *s, size_t k) {
  for (size_t i = 0; i < k; i++) {
    if (s[i].kind != BB_STEP_APP_EVENT || !s[i].value || bb_val_kind_of(s[i].value) != BB_VAL_TENSOR) continue;
    const bb_tensor *t = bb_val_as_tensor(s[i].value);
    if (t->numel != P) continue;
    if (strcmp(s[i].topic, "own") == 0) memcpy(p->own, bb_tensor_data(t), sizeof p->own);
    if (strcmp(s[i].topic, "mixed") == 0) {
      memcpy(p->mixed, bb_tensor_data(t), sizeof p->mixed);
      p->merged = true;
    }
  }
}

/* Invokes Push on `node` with `update` (n floats) to `to` (0: nobody); returns its steps. */
static void run_push(pair *p, bb_node *node, const float *update, int64_t n, uint64_t to, const bb_step **s, size_t *k) {
  bb_peer_id target = bb_peer_id_from_u64(to);
  bb_val *peers = bb_val_peers(NULL, &target, to ? 1 : 0), *u = f32_val(update, n);
  bb_named_value in[] = {{"peers", peers}, {"update", u}};
  CHECK(bb_node_invoke(node, "Push", in, 2, p->now, NULL) == 0);
  bb_val_release(peers);
  bb_val_release(u);
  CHECK(bb_node_poll(node, p->now, s, k, NULL) == 0);
}

static bool pair_open(pair *p, const char *config) {
  memset(p, 0, sizeof *p);
  size_t len = 0;
  p->art = compile_test_module(&PUSH, bind_gossip_avg, config, &len);
  if (!p->art) return false;
  p->a = install_peer(p->art, len, 1, TARGETS, 2, shipped_registry(), NULL);
  p->b = install_peer(p->art, len, 2, TARGETS, 2, shipped_registry(), NULL);
  if (!p->a || !p->b) return false;
  bb_peer_id p1 = bb_peer_id_from_u64(1), p2 = bb_peer_id_from_u64(2);
  bb_address a1 = p2p_address(&p1), a2 = p2p_address(&p2);
  CHECK(bb_node_add_peer(p->a, &p2, &a2, NULL) == 0 && bb_node_add_peer(p->b, &p1, &a1, NULL) == 0);
  const bb_step *s;
  size_t k;
  const float nothing[P] = {0};
  run_push(p, p->b, nothing, P, 0, &s, &k); /* B reports its own parameters */
  read_outputs(p, s, k);
  return true;
}

static void pair_close(pair *p) {
  bb_node_free(p->a);
  bb_node_free(p->b);
  free(p->art);
}

/* Peer 1 pushes `update` (n floats) to B; B's "mixed" is read when it merged. */
static void push(pair *p, const float *update, int64_t n) {
  const bb_step *s;
  size_t k;
  p->now += 1000;
  p->merged = false;
  run_push(p, p->a, update, n, 2, &s, &k);
  bb_peer_id p1 = bb_peer_id_from_u64(1);
  for (size_t i = 0; i < k; i++)
    if (s[i].kind == BB_STEP_SEND) CHECK(bb_node_deliver(p->b, &p1, s[i].bytes, s[i].len, p->now, NULL) == 0);
  CHECK(bb_node_poll(p->b, p->now, &s, &k, NULL) == 0);
  read_outputs(p, s, k);
}

static double norm_of(const float *x) {
  double sum = 0;
  for (int i = 0; i < P; i++) sum += (double)x[i] * x[i];
  return sqrt(sum);
}

/* own + f·|own|·e, e a unit vector along the first coordinate. */
static void away(const float *own, double f, float *out) {
  memcpy(out, own, P * sizeof *out);
  out[0] = (float)((double)own[0] + f * norm_of(own));
}

static void test_far_updates_are_left_out(void) {
  pair p;
  if (!pair_open(&p, NULL)) {
    pair_close(&p);
    return;
  }
  CHECK(norm_of(p.own) > 0);
  float u[P], before[P];
  /* 100 × the model, and 3e38 everywhere: left out, the model untouched */
  for (int i = 0; i < P; i++) u[i] = 100 * p.own[i];
  push(&p, u, P);
  for (int i = 0; i < P; i++) u[i] = 3e38f;
  push(&p, u, P);
  CHECK(!p.merged);
  CHECK_EQ_INT(bb_node_counter(p.b, "gossip.norm_dropped"), 2);
  CHECK_EQ_INT(bb_node_counter(p.b, "gossip.merged"), 0);
  /* a NaN and a wrong length: refused alone, counted */
  memcpy(u, p.own, sizeof u);
  u[3] = NAN;
  push(&p, u, P);
  push(&p, p.own, P - 1);
  CHECK(!p.merged);
  CHECK(bb_node_counter(p.b, "gossip.refused_nonfinite") == 1 && bb_node_counter(p.b, "gossip.refused_length") == 1);
  /* within twice the yardstick (here |own|): mixed in with weight 0.5 */
  away(p.own, 1, u);
  push(&p, u, P);
  CHECK(p.merged && fabsf(p.mixed[0] - (float)(p.own[0] + 0.5 * norm_of(p.own))) < 1e-5f);
  CHECK_EQ_INT(bb_node_counter(p.b, "gossip.merged"), 1);
  /* the history now holds that distance, |own|: 2.5 × it is pulled back onto 2 × */
  memcpy(before, p.mixed, sizeof before);
  const double yard = norm_of(p.own);
  memcpy(u, before, sizeof u);
  u[1] = (float)(before[1] + 2.5 * yard);
  push(&p, u, P);
  CHECK(p.merged && fabsf(p.mixed[1] - (float)(before[1] + 0.5 * 2 * yard)) < 1e-4f);
  CHECK(bb_node_counter(p.b, "gossip.norm_clipped") == 1 && bb_node_counter(p.b, "gossip.merged") == 2);
  pair_close(&p);
}

/* beyond_norm=drop leaves out what clip pulls back; drop_factor=0 and norm_factor=0 let 100 ×
 * through, as before the bound existed. */
static void test_bound_settings(void) {
  pair p;
  float u[P];
  if (pair_open(&p, "beyond_norm=drop")) {
    away(p.own, 2.5, u);
    push(&p, u, P);
    CHECK(!p.merged && bb_node_counter(p.b, "gossip.norm_dropped") == 1);
  }
  pair_close(&p);
  if (pair_open(&p, "norm_factor=0,drop_factor=0")) {
    for (int i = 0; i < P; i++) u[i] = 100 * p.own[i];
    push(&p, u, P);
    CHECK(p.merged && fabsf(p.mixed[0] - 50.5f * p.own[0]) <= 1e-4f * fabsf(p.mixed[0]));
  }
  pair_close(&p);
  size_t len = 0;
  uint8_t *art = compile_test_module(&PUSH, bind_gossip_avg, "beyond_norm=sometimes", &len);
  if (art) {
    bb_install_args a = install_args(art, len, 2, TARGETS, 2, shipped_registry());
    bb_node *n = NULL;
    bb_error err;
    CHECK(bb_install(&a, &n, NULL, &err) != 0);
    CHECK_MSG(strstr(err.message, "beyond_norm=`sometimes` is not clip|drop") != NULL, "%s", err.message);
    bb_node_free(n);
  }
  free(art);
}

int main(void) {
  RUN(test_far_updates_are_left_out);
  RUN(test_bound_settings);
  return bb_test_finish();
}
