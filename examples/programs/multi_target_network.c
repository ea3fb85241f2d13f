/* multi_target_network: one Module, two partitions, two peers.
 *
 *   multi_target_network [--quiet]
 *
 * FedNetwork runs StubLoader.next_batch → StubModel.forward on the source peer and sends
 * the prediction to its sink peers, whose partition hands it to StubAggregator.contribute.
 * The program compiles it once (two partitions), installs the source on peer 1 and the
 * sink on peer 2, connects them through the seeded network simulator and invokes the
 * source with sink_peers = [2]. Exits 0 only when the compile gave two partitions (one
 * Send, one Recv), at least one envelope crossed the network, and the sink's aggregator
 * received the tensor [1, 2, 3] from peer 1. */
#include <stdio.h>
#include <string.h>

#include "bb/roles.h"
#include "bb/sim.h"
#include "programs/examples.h"
#include "programs/fixtures.h"

static int quiet;

static int check(int cond, const char *what) {
  printf("  [%s] %s\n", cond ? "ok" : "FAILED", what);
  return cond ? 0 : 1;
}

static int die(const char *what, const bb_error *err) {
  fprintf(stderr, "multi_target_network: %s: %s\n", what, err->message);
  return 1;
}

static size_t count_wire(const bb_function *f, const char *op) {
  size_t n = 0;
  for (size_t i = 0; i < f->nodes.len; i++) {
    const bb_ir_node *node = f->nodes.items[i];
    n += node->domain && strcmp(node->domain, BB_DOMAIN_WIRE) == 0 && strcmp(node->op_type, op) == 0;
  }
  return n;
}

/* Prints each partition with its Send and Recv counts; checks there are two, the source
 * sending once and the sink (class sink_peers) receiving once. */
static int describe_partitions(const uint8_t *artifact, size_t len, bb_error *err) {
  bb_model *m = NULL;
  int rc = bb_model_decode(artifact, len, NULL, NULL, &m, err);
  if (rc) return -1;
  size_t partitions = 0, source_sends = 0, sink_recvs = 0;
  for (size_t i = 0; i < m->functions.len; i++) {
    const bb_function *f = m->functions.items[i];
    const char *cls = bb_kv_get(&f->metadata, BB_KEY_PEER_CLASS);
    if (!cls) continue;
    partitions++;
    size_t sends = count_wire(f, "Send"), recvs = count_wire(f, "Recv");
    printf("partition %s (class %s): %zu wire.Send, %zu wire.Recv\n", f->name, cls, sends, recvs);
    if (strncmp(f->name, "FedNetwork#", 11) == 0) source_sends = sends;
    if (strncmp(f->name, "FedNetwork_sink_peers#", 22) == 0 && strcmp(cls, "sink_peers") == 0) sink_recvs = recvs;
  }
  bb_model_free(m);
  return check(partitions == 2 && source_sends == 1 && sink_recvs == 1,
               "one compile, two partitions: the source sends once, the sink_peers side receives once");
}

typedef struct traffic {
  size_t sends_from_source, failures;
} traffic;

static void observe(void *user, const bb_peer_id *peer, const bb_step *s) {
  traffic *t = user;
  uint64_t id = 0;
  bb_peer_id_as_u64(peer, &id);
  t->sends_from_source += s->kind == BB_STEP_SEND && id == 1;
  t->failures += s->kind == BB_STEP_OP_FAILED || s->kind == BB_STEP_WIRE_RECEIVE_FAILED;
  if (!quiet || s->kind == BB_STEP_OP_FAILED)
    printf("  peer %llu: %-16s %s%s\n", (unsigned long long)id, bb_step_kind_name(s->kind), s->op ? s->op : "",
           s->detail ? s->detail : "");
}

static int install(const uint8_t *artifact, size_t len, const bb_registry *reg, const bb_peer_id *peers, int me,
                   const char *target, bb_node **out, bb_error *err) {
  bb_address self = bb_address_p2p(&peers[me]);
  bb_node_config nc = {0};
  nc.struct_size = sizeof nc;
  nc.seed = (uint64_t)me + 1;
  nc.trace_ops = true;
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = peers[me];
  a.addresses = &self;
  a.n_addresses = 1;
  a.artifact = artifact;
  a.artifact_len = len;
  a.targets = &target;
  a.n_targets = 1;
  a.registry = reg;
  a.config = &nc;
  int rc = bb_install(&a, out, NULL, err);
  for (int p = 0; p < 2 && !rc; p++) { /* each node knows both peers' addresses */
    bb_address addr = bb_address_p2p(&peers[p]);
    rc = bb_node_add_peer(*out, &peers[p], &addr, err);
  }
  return rc;
}

int main(int argc, char **argv) {
  quiet = argc > 1 && strcmp(argv[1], "--quiet") == 0;
  bb_error err = {0};
  uint8_t *artifact = NULL;
  size_t artifact_len = 0;
  if (bb_example_compile(&BB_EXAMPLE_MULTI_TARGET_NETWORK, 0, &artifact, &artifact_len, &err))
    return die("compile", &err);
  int failures = describe_partitions(artifact, artifact_len, &err);
  if (failures < 0) return die("decode", &err);

  bb_registry *reg = bb_registry_new(NULL);
  if (!reg || bb_registry_add_shipped(reg, &err) || bb_fixtures_register(reg, &err)) return die("registry", &err);
  bb_peer_id peers[2] = {bb_peer_id_from_u64(1), bb_peer_id_from_u64(2)};
  bb_node *source = NULL, *sink = NULL;
  if (install(artifact, artifact_len, reg, peers, 0, "FedNetwork", &source, &err) ||
      install(artifact, artifact_len, reg, peers, 1, "FedNetwork_sink_peers", &sink, &err))
    return die("install", &err);

  bb_sim_config sc = {0};
  sc.struct_size = sizeof sc;
  sc.seed = 7;
  sc.latency_ns = 2000000;
  bb_sim *sim = NULL;
  traffic t = {0, 0};
  if (bb_sim_new(&sc, &sim, &err) || bb_sim_attach(sim, source, &peers[0], &err) ||
      bb_sim_attach(sim, sink, &peers[1], &err))
    return die("simulator", &err);
  bb_sim_set_observer(sim, observe, &t);
  if (bb_node_run_bootstrap(source, 0, &err) || bb_node_run_bootstrap(sink, 0, &err)) return die("bootstrap", &err);

  bb_val *sink_peers = bb_val_peers(NULL, &peers[1], 1);
  bb_named_value in = {"sink_peers", sink_peers};
  if (!sink_peers || bb_node_invoke(source, "FedNetwork", &in, 1, 0, &err)) return die("invoke", &err);
  bb_val_release(sink_peers);
  if (bb_sim_run_until_idle(sim, 1000000000ull, &err)) return die("run", &err);

  bb_sim_stats st;
  bb_sim_get_stats(sim, &st);
  const bb_component_type *type = NULL;
  const bb_fixture_stub_aggregator *agg = bb_node_component(sink, "aggregator", &type);
  uint64_t from = 0;
  if (agg) bb_peer_id_as_u64(&agg->last_from, &from);
  printf("%llu envelope(s) routed by the network (%llu delivered)\n", (unsigned long long)t.sends_from_source,
         (unsigned long long)st.delivered);
  if (agg && agg->contributions)
    printf("sink: Contribute #%llu got [%g, %g, %g] (%zu floats) from peer %llu\n",
           (unsigned long long)agg->contributions, (double)agg->last_update[0], (double)agg->last_update[1],
           (double)agg->last_update[2], agg->last_len, (unsigned long long)from);

  failures += check(t.sends_from_source >= 1 && st.delivered >= 1 && t.failures == 0,
                    "at least one envelope crossed from peer 1 to peer 2, no op failed");
  failures += check(agg && type == &BB_FIXTURE_STUB_AGGREGATOR && agg->contributions == 1 && agg->last_len == 3 &&
                        agg->last_update[0] == 1.0f && agg->last_update[1] == 2.0f && agg->last_update[2] == 3.0f,
                    "the sink's Contribute received the tensor [1, 2, 3]");
  failures += check(agg && from == 1, "with src_peer = 1");
  if (!failures) printf("Multi-target composition and network routing complete.\n");

  bb_sim_free(sim);
  bb_node_free(source);
  bb_node_free(sink);
  bb_registry_free(reg);
  bb_buffer_free(NULL, artifact);
  return failures ? 1 : 0;
}
