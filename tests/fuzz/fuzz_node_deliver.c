/* libFuzzer target: a hostile peer's bytes into a node. A two-class module (a value sent
 * to `peers` and passed on there) is compiled once; the receiving node then gets either
 * the input as a whole envelope (first byte even), or a well-formed envelope to its Recv
 * whose fill carries the input as payload under a chosen type hash (first byte odd), so
 * the fuzzer reaches both the envelope parser and value decoding and routing. Whatever
 * happens, nothing may crash or leak, and after the poll no execution or budget is held. */
#include <stdlib.h>
#include <string.h>

#include "bb/runtime.h"
#include "compile_module.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void body(bb_rec *g, void *user) {
  (void)user;
  bb_value peers = bb_rec_input(g, "peers", BB_TYPE_PEER_ID_VEC);
  bb_rec_net_out(g, "out", peers, bb_rec_input(g, "x", NULL));
  bb_rec_output(g, "y", bb_rec_pass_through(g, bb_rec_lookup_output(g, "out")));
}
static const bb_module MODULE = {sizeof(bb_module), "Fuzz", body, NULL, NULL, NULL, 0};

static uint8_t *artifact;
static size_t artifact_len;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!artifact) fuzz_compile(&MODULE, &artifact, &artifact_len);
  if (!size) return 0;
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = bb_peer_id_from_u64(2);
  a.artifact = artifact;
  a.artifact_len = artifact_len;
  const char *target = "Fuzz_peers";
  a.targets = &target;
  a.n_targets = 1;
  bb_node_config cfg = {.struct_size = sizeof cfg, .ingress_byte_budget = 1 << 20};
  a.config = &cfg;
  bb_node *n = NULL;
  if (bb_install(&a, &n, NULL, NULL)) abort();
  bb_peer_id from = bb_peer_id_from_u64(1);
  uint8_t *owned = NULL;
  const uint8_t *env = data + 1;
  size_t env_len = size - 1;
  if (data[0] & 1) { /* a well-formed envelope to the Recv, carrying the input */
    uint64_t hash = bb_val_kind_hash((data[0] >> 1) % BB_VAL_KIND_COUNT);
    bb_address site = {.n = 1};
    site.seg[0].kind = BB_ADDR_SITE;
    site.seg[0].value = bb_wire_id("Fuzz.out"); /* the wire its Recv listens to */
    uint8_t suffix[16];
    bb_slot_fill fill = {.dest_suffix = {suffix, bb_address_to_bytes(&site, suffix, sizeof suffix)},
                         .payload = {(uint8_t *)env, env_len},
                         .trigger_only = (data[0] & 0x80) != 0,
                         .type_hash = hash};
    bb_envelope e = {0};
    e.fills = &fill;
    e.n_fills = 1;
    e.has_correlation = true;
    e.correlation_kind = BB_CORR_REQUEST;
    e.wire_req_id = data[0];
    e.schema_version = BB_ENVELOPE_SCHEMA_VERSION;
    if (bb_envelope_encode(&e, NULL, &owned, &env_len, NULL)) abort();
    env = owned;
  }
  bb_node_deliver(n, &from, env, env_len, 1, NULL);
  const bb_step *steps;
  size_t count;
  bb_node_poll(n, 2, &steps, &count, NULL);
  for (size_t i = 0; i < count; i++) /* every report has its words */
    if ((steps[i].kind == BB_STEP_WIRE_RECEIVE_FAILED || steps[i].kind == BB_STEP_OP_FAILED) &&
        (!steps[i].reason || !steps[i].detail))
      abort();
  bb_node_stats st;
  bb_node_stats_get(n, &st);
  if (st.executions || st.ingress_bytes || st.frontier) abort();
  bb_buffer_free(NULL, owned);
  bb_node_free(n);
  return 0;
}
