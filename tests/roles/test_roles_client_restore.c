/* A phone's saved state is untrusted when it comes back: a page keeps its node's snapshot
 * in IndexedDB, where anything that runs in (or writes to) the browser profile can change
 * it, checksum included. A federated client's node (CpuMlp trained on an ArraySource, its
 * update sent through TopKCodec with error feedback, against the global model) is
 * snapshotted mid-federation; the snapshot then comes back cut at every length and with
 * thousands of random patches (its trailing FNV-1a fixed each time, so every part's load
 * meets the bytes). A restore either refuses with an error, leaving a node that still
 * works, or succeeds; it never crashes, reads out of bounds or leaks (the sanitizer build
 * checks those), and the untouched snapshot restores whole: the next updates are the
 * ones the original node sends. */
#include <math.h>
#include <stdlib.h>

#include "../runtime/rttest.h"
#include "bb/bytes.h"
#include "bb/dataset.h"
#include "bb/roles.h"
#include "util/hash.h"

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot CODEC = {BB_ROLE_CODEC, "codec", NULL};

/* update = Encode(Fit(global), global): a federated client's round, without the network */
static void client_body(bb_rec *g, void *user) {
  (void)user;
  bb_value global = bb_rec_input(g, "global", "ai.bytesandbrains.tensor.f32");
  bb_value trained, samples;
  CHECK(bb_rec_model_fit(g, &MODEL, global, &trained, &samples) == 0);
  bb_rec_output(g, "update", bb_rec_codec_encode_against(g, &CODEC, trained, global));
}
static const bb_module CLIENT = {sizeof(bb_module), "Client", client_body, NULL, NULL, NULL, 0};

static int configure(bb_compiler *c, const void *user, bb_error *err) {
  (void)user;
  static const bb_component_port f32[] = {{"tensor", "ai.bytesandbrains.tensor.f32"}};
  static const bb_component_port sample[] = {{"sample", "ai.bytesandbrains.tensor.f32"}};
  static const bb_component_port codec[] = {{"in", "ai.bytesandbrains.tensor.f32"}, {"out", "ai.bytesandbrains.opaque"}};
  bb_component_decl mlp = {sizeof mlp, "CpuMlp", f32, 1, NULL, 0};
  bb_component_decl src = {sizeof src, "ArraySource", sample, 1, NULL, 0};
  bb_component_decl topk = {sizeof topk, "TopKCodec", codec, 2, NULL, 0};
  int rc = bb_compiler_declare_component(c, &mlp, err) || bb_compiler_declare_component(c, &src, err) ||
           bb_compiler_declare_component(c, &topk, err) ||
           bb_compiler_bind_model(c, "model", "CpuMlp", "inputs=4,hidden=8,outputs=2,fit_steps=3,data=data", err) ||
           bb_compiler_bind_data_source(c, "data", "ArraySource", "batch=8,seed=3", err) ||
           bb_compiler_bind_codec(c, "codec", "TopKCodec", "k=0.25", err);
  return rc ? err->code : 0;
}

static uint8_t *artifact;
static size_t artifact_len;
static bb_dataset data;

static bb_node *install(void) {
  const char *targets[] = {"Client"};
  bb_install_args a = install_args(artifact, artifact_len, 7, targets, 1, shipped_registry());
  bb_slot_config slots = {"data", NULL, &data};
  a.slots = &slots;
  a.n_slots = 1;
  bb_node *n = NULL;
  bb_error err;
  CHECK_MSG(bb_install(&a, &n, NULL, &err) == 0, "%s", err.message);
  return n;
}

enum { PARAMS = 4 * 8 + 8 + 8 * 2 + 2 };

/* One round on `global`; the update's bytes into *update (a new reference), or NULL. */
static int round_on(bb_node *n, const float *global, uint64_t now, bb_val **update) {
  int64_t dim = PARAMS;
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 1, &dim);
  memcpy(bb_tensor_data(t), global, sizeof(float) * PARAMS);
  bb_val *v = bb_val_tensor(NULL, t);
  bb_tensor_release(t);
  bb_named_value in = {"global", v};
  bb_error err;
  int rc = bb_node_invoke(n, "Client", &in, 1, now, &err);
  bb_val_release(v);
  if (update) *update = NULL;
  const bb_step *steps;
  size_t ns;
  if (!rc) rc = bb_node_poll(n, now, &steps, &ns, &err);
  for (size_t i = 0; !rc && i < ns; i++)
    if (steps[i].kind == BB_STEP_APP_EVENT && update) *update = bb_val_retain(steps[i].value);
  return rc;
}

static float global[PARAMS];
static uint8_t *snapshot;
static size_t snapshot_len;

static void prepare(void) {
  artifact = compile_test_module(&CLIENT, configure, NULL, &artifact_len);
  CHECK(bb_dataset_init(&data, 64, 4, 1, NULL, NULL) == 0);
  for (size_t i = 0; i < 64 * 4; i++) data.features[i] = (float)((i * 37) % 17) / 8.0f - 1.0f;
  for (size_t i = 0; i < 64; i++) data.labels[i] = (float)(i % 2);
  for (int i = 0; i < PARAMS; i++) global[i] = (float)((i * 13) % 7) / 10.0f - 0.3f;
  bb_node *n = artifact ? install() : NULL;
  if (!n) return;
  for (uint64_t r = 0; r < 3; r++) CHECK(round_on(n, global, r * 1000, NULL) == 0);
  bb_error err;
  CHECK_MSG(bb_node_snapshot(n, &snapshot, &snapshot_len, &err) == 0, "%s", err.message);
  bb_node_free(n);
}

/* The state as it was saved restores whole: the restored node saves the same bytes, and
 * its next update (model, momentum, data stream and residual all as they were) is the one
 * the node it was taken from sends. */
static void test_untouched_state_resumes(void) {
  bb_node *a = install(), *b = install();
  bb_error err;
  if (!a || !b || !snapshot) return bb_node_free(a), bb_node_free(b);
  for (uint64_t r = 0; r < 3; r++) CHECK(round_on(a, global, r * 1000, NULL) == 0);
  CHECK_MSG(bb_node_restore(b, snapshot, snapshot_len, &err) == 0, "%s", err.message);
  uint8_t *again = NULL;
  size_t again_len = 0;
  CHECK(bb_node_snapshot(b, &again, &again_len, &err) == 0);
  CHECK(again_len == snapshot_len && memcmp(again, snapshot, snapshot_len) == 0);
  bb_buffer_free(NULL, again);
  for (int r = 0; r < 3; r++) {
    bb_val *ua = NULL, *ub = NULL;
    CHECK(round_on(a, global, 5000 + (uint64_t)r, &ua) == 0 && round_on(b, global, 5000 + (uint64_t)r, &ub) == 0);
    CHECK_MSG(ua && ub && bb_val_count(ua) == bb_val_count(ub) &&
                  memcmp(bb_val_as_bytes(ua), bb_val_as_bytes(ub), bb_val_count(ua)) == 0,
              "round %d after the restore differs", r);
    bb_val_release(ua);
    bb_val_release(ub);
  }
  bb_node_free(a);
  bb_node_free(b);
}

/* Restores bytes into a fresh node; whatever the outcome the node must then run a round. */
static int restore_then_run(const uint8_t *bytes, size_t len) {
  bb_node *n = install();
  if (!n) return -1;
  uint8_t *copy = malloc(len ? len : 1); /* exactly len bytes: a read past them is caught */
  memcpy(copy, bytes, len);
  bb_error err;
  int rc = bb_node_restore(n, copy, len, &err);
  free(copy);
  if (rc) CHECK_MSG(err.message[0] != '\0', "a refusal without a message");
  bb_val *update = NULL;
  /* a refused restore leaves a fresh node, which works; an accepted one may hold any
   * numbers the patch wrote, and must still run or fail its op cleanly */
  int ran = round_on(n, global, 9000, &update);
  if (rc) CHECK_MSG(ran == 0 && update != NULL, "a node whose restore was refused does not run");
  bb_val_release(update);
  bb_node_free(n);
  return rc;
}

static void test_truncated_state_is_refused(void) {
  if (!snapshot) return;
  int accepted = 0;
  for (size_t cut = 0; cut < snapshot_len; cut += 1 + cut / 64) accepted += restore_then_run(snapshot, cut) == 0;
  CHECK_EQ_INT(accepted, 0);
}

static void test_patched_state_never_crashes(void) {
  if (!snapshot) return;
  uint8_t *bytes = malloc(snapshot_len);
  uint64_t rng = 12345;
  int refused = 0, trials = 2000;
  for (int t = 0; t < trials; t++) {
    memcpy(bytes, snapshot, snapshot_len);
    for (int m = 0; m < 1 + t % 4; m++) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      bytes[(rng >> 33) % (snapshot_len - 8)] = (uint8_t)(rng >> 17);
    }
    bb_le_put_u64(bytes + snapshot_len - 8, bbi_fnv1a64(bytes, snapshot_len - 8));
    refused += restore_then_run(bytes, snapshot_len) != 0;
  }
  /* most patches land in numbers (parameters, the residual) that restore as they are */
  CHECK_MSG(refused > 0 && refused < trials, "%d of %d patched states refused", refused, trials);
  free(bytes);
}

int main(void) {
  prepare();
  RUN(test_untouched_state_resumes);
  RUN(test_truncated_state_is_refused);
  RUN(test_patched_state_never_crashes);
  bb_buffer_free(NULL, snapshot);
  bb_dataset_free(&data);
  free(artifact);
  return bb_test_finish();
}
