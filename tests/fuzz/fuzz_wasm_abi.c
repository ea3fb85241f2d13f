/* libFuzzer target: bb.wasm's ABI fed what a hostile or buggy host could hand it. The
 * first byte picks the entry point — a value list to bb_wasm_node_invoke (with packed
 * names), to bb_wasm_node_complete or to bb_wasm_node_bind_input, an envelope to
 * bb_wasm_node_deliver, a snapshot to bb_wasm_node_restore, CSV to
 * bb_wasm_dataset_from_csv — against a quickstart node installed once; the node is then
 * polled. Nothing may crash or leak, and every refusal must leave a message. */
#include <stdlib.h>
#include <string.h>

#include "bb/runtime.h"
#include "bb/wire.h"
#include "bb_wasm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The ABI's host imports: this target registers no host component types. */
int32_t bb_host_create(int32_t type_id, const char *slot, const char *config, size_t config_len, uint64_t seed) {
  (void)type_id, (void)slot, (void)config, (void)config_len, (void)seed;
  return BB_ERR_INVALID_ARGUMENT;
}
void bb_host_destroy(int32_t instance) { (void)instance; }
int32_t bb_host_invoke(int32_t instance, const char *op_type, int32_t n_inputs, int32_t n_outputs) {
  (void)instance, (void)op_type, (void)n_inputs, (void)n_outputs;
  return BB_ERR_INVALID_ARGUMENT;
}

int32_t bb_host_on_message(int32_t instance, const char *op, const char *from, const uint8_t *payload, size_t len) {
  (void)instance, (void)op, (void)from, (void)payload, (void)len;
  return BB_ERR_INVALID_ARGUMENT;
}
int32_t bb_host_on_timer(int32_t instance, uint64_t token) {
  (void)instance, (void)token;
  return BB_ERR_INVALID_ARGUMENT;
}
int32_t bb_host_save(int32_t instance) {
  (void)instance;
  return BB_ERR_INVALID_ARGUMENT;
}
int32_t bb_host_load(int32_t instance, const uint8_t *state, size_t len) {
  (void)instance, (void)state, (void)len;
  return BB_ERR_INVALID_ARGUMENT;
}
/* No node of this test signs (installed with signs = 0). */
int32_t bb_host_sign(int32_t node, const char *slot, const uint8_t *message, size_t len) {
  (void)node, (void)slot, (void)message, (void)len;
  return -1;
}

void bb_host_module_record(int32_t host_id, int32_t bootstrap) { (void)host_id, (void)bootstrap; }

static int32_t node;
static uint64_t clock_ns;

static int32_t quickstart_node(void) {
  if (bb_wasm_example_record("quickstart", 0) < 0) abort();
  size_t len = bb_wasm_result_len();
  uint8_t *model = malloc(len);
  memcpy(model, bb_wasm_result_ptr(), len);
  int32_t c = bb_wasm_compiler_new();
  if (c < 0 || bb_wasm_compiler_configure_example(c, "quickstart", 0) < 0 || bb_wasm_compiler_compile(c, model, len) < 0)
    abort();
  free(model);
  len = bb_wasm_result_len();
  uint8_t *artifact = malloc(len);
  memcpy(artifact, bb_wasm_result_ptr(), len);
  bb_wasm_compiler_free(c);
  bb_peer_id me = bb_peer_id_from_u64(1);
  char self[128];
  bb_peer_id_to_text(&me, self, sizeof self);
  int32_t n =
      bb_wasm_node_install(artifact, len, self, "Quickstart", sizeof "Quickstart", NULL, 0, NULL, 0, NULL, NULL, 0, 0);
  free(artifact);
  if (n <= 0) abort();
  return n;
}

static void refused_with_a_message(int32_t rc) {
  if (rc < 0 && bb_wasm_last_error()[0] == '\0') abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (node == 0) node = quickstart_node();
  if (size == 0) return 0;
  const uint8_t *rest = data + 1;
  size_t len = size - 1;
  char from[128];
  bb_peer_id peer = bb_peer_id_from_u64(2);
  bb_peer_id_to_text(&peer, from, sizeof from);
  clock_ns += 1000000;
  switch (data[0] % 6) {
  case 0: { /* names (up to the first 0xff byte), then a value list */
    const uint8_t *cut = memchr(rest, 0xff, len);
    size_t names_len = cut ? (size_t)(cut - rest) : 0;
    const uint8_t *values = cut ? cut + 1 : rest;
    size_t values_len = cut ? len - names_len - 1 : len;
    refused_with_a_message(bb_wasm_node_invoke(node, "Quickstart", (const char *)rest, names_len, values, values_len, clock_ns));
    break;
  }
  case 1:
    refused_with_a_message(bb_wasm_node_complete(node, len ? rest[0] : 1, rest, len));
    break;
  case 2:
    refused_with_a_message(bb_wasm_node_bind_input(node, "Quickstart", "x", rest, len));
    break;
  case 3:
    refused_with_a_message(bb_wasm_node_deliver(node, from, rest, len, clock_ns));
    break;
  case 4: { /* a fresh node, so a partial restore cannot poison the shared one */
    int32_t fresh = quickstart_node();
    refused_with_a_message(bb_wasm_node_restore(fresh, rest, len));
    bb_wasm_node_poll(fresh, clock_ns);
    bb_wasm_node_free(fresh);
    break;
  }
  case 5: {
    int32_t d = bb_wasm_dataset_from_csv(rest, len, -1, 0);
    refused_with_a_message(d);
    if (d > 0) bb_wasm_dataset_free(d);
    break;
  }
  }
  if (bb_wasm_node_poll(node, clock_ns) < 0 && bb_wasm_last_error()[0] == '\0') abort();
  return 0;
}
