/* libFuzzer target: hostile bytes handed to bb_node_restore. A node of a small module (an
 * Interval loop that keeps an execution parked, a Send to peers) runs once and is
 * snapshotted; each input then either is restored as it stands (first byte even) or
 * patches that real snapshot at the offsets and values it names (first byte odd). Either
 * way the checksum is made to match, so every part's load (counters, book, replay window,
 * executions, pending operations, timers, components) meets the bytes. Whatever happens,
 * nothing may crash or leak, and a refused restore leaves a fresh node that still runs. */
#include <stdlib.h>
#include <string.h>

#include "bb/bytes.h"
#include "bb/runtime.h"
#include "compile_module.h"
#include "util/hash.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void body(bb_rec *g, void *user) {
  (void)user;
  bb_value tick = bb_rec_interval(g, 1000);
  bb_rec_net_out(g, "out", bb_rec_input(g, "peers", BB_TYPE_PEER_ID_VEC), tick);
  bb_rec_output(g, "t", bb_rec_pass_through(g, tick));
}
static const bb_module MODULE = {sizeof(bb_module), "Fuzz", body, NULL, NULL, NULL, 0};

static uint8_t *artifact;
static size_t artifact_len;
static uint8_t *snapshot;
static size_t snapshot_len;

static bb_node *install(void) {
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = bb_peer_id_from_u64(2);
  a.artifact = artifact;
  a.artifact_len = artifact_len;
  const char *target = "Fuzz";
  a.targets = &target;
  a.n_targets = 1;
  bb_node *n = NULL;
  if (bb_install(&a, &n, NULL, NULL)) abort();
  return n;
}

static void run(bb_node *n, uint64_t now) {
  const bb_step *steps;
  size_t n_steps;
  bb_node_poll(n, now, &steps, &n_steps, NULL);
}

/* Compiles the module, runs a node with peers in its book and a parked loop, and keeps
 * its snapshot. */
static void prepare_once(void) {
  fuzz_compile(&MODULE, &artifact, &artifact_len);
  bb_node *n = install();
  bb_peer_id p = bb_peer_id_from_u64(5);
  bb_address a = {.n = 1};
  a.seg[0].kind = BB_ADDR_P2P;
  a.seg[0].peer = p;
  bb_node_add_peer(n, &p, &a, NULL);
  bb_val *peers = bb_val_peers(NULL, &p, 1);
  bb_named_value in = {"peers", peers};
  if (bb_node_invoke(n, "Fuzz", &in, 1, 0, NULL)) abort();
  bb_val_release(peers);
  for (uint64_t t = 0; t < 3000; t += 1000) run(n, t);
  if (bb_node_snapshot(n, &snapshot, &snapshot_len, NULL)) abort();
  bb_node_free(n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!artifact) prepare_once();
  if (!size) return 0;
  size_t len = data[0] & 1 ? snapshot_len : size - 1 + 8;
  uint8_t *bytes = malloc(len);
  if (!bytes) return 0;
  if (data[0] & 1) { /* the real snapshot, patched: (u16 offset, u8 value) triples */
    memcpy(bytes, snapshot, len);
    for (size_t i = 1; i + 3 <= size; i += 3) bytes[bb_le_get_u16(data + i) % (len - 8)] = data[i + 2];
  } else {
    memcpy(bytes, data + 1, size - 1);
  }
  bb_le_put_u64(bytes + len - 8, bbi_fnv1a64(bytes, len - 8));
  bb_node *n = install();
  int rc = bb_node_restore(n, bytes, len, NULL);
  if (rc == 0) {
    uint8_t *again = NULL;
    size_t again_len = 0;
    if (bb_node_snapshot(n, &again, &again_len, NULL) == 0) bb_buffer_free(NULL, again);
  }
  for (uint64_t t = 3000; t < 6000; t += 1000) run(n, t); /* restored or fresh, it runs */
  bb_node_free(n);
  free(bytes);
  return 0;
}
